//! The kernel sandbox's cost per agent process: `bash -c true` started the way the `shell` tool
//! starts it (own process group, output to a pipe, waited for), without the sandbox, with only
//! an empty `pre_exec` (which makes std fork instead of using its `posix_spawn`/`vfork` fast
//! path), and inside the session's sandbox (Landlock + seccomp with the network off, prepared
//! once per session as openmax does), and inside the read-only sandbox of `readonly` mode. Also
//! the once-per-session preparation of both.
//!
//! Run: `bench/sandbox.sh` (or `cargo bench -p openmax-shell --bench sandbox`). The medians and
//! their differences are the figures in docs/benchmarks.md.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use divan::Bencher;
use openmax_shell::sandbox::confine::{kernel_abi, Confine};

fn main() {
    println!("Landlock ABI offered by this kernel: {}", kernel_abi());
    divan::main();
}

/// A scratch project and state directory for the session's sandbox.
struct Layout {
    root: PathBuf,
}

impl Layout {
    fn new() -> Layout {
        let root = std::env::temp_dir().join(format!("omx-bench-sandbox-{}", std::process::id()));
        std::fs::create_dir_all(root.join("project")).unwrap();
        std::fs::create_dir_all(root.join("home")).unwrap();
        Layout { root }
    }

    fn confine(&self) -> Confine {
        Confine::for_session(
            None,
            false,
            &[],
            &self.root.join("project"),
            &self.root.join("home"),
        )
        .unwrap()
    }
}

impl Drop for Layout {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn bash_true() -> Command {
    let mut cmd = Command::new("bash");
    cmd.arg("-c")
        .arg("true")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .process_group(0);
    cmd
}

fn run(mut cmd: Command) {
    let out = cmd.output().expect("bash runs");
    assert!(out.status.success());
}

#[divan::bench(sample_count = 300)]
fn spawn_plain() {
    run(bash_true());
}

#[divan::bench(sample_count = 300)]
fn spawn_empty_pre_exec() {
    let mut cmd = bash_true();
    // SAFETY: the closure does nothing.
    unsafe {
        cmd.pre_exec(|| Ok(()));
    }
    run(cmd);
}

#[divan::bench(sample_count = 300)]
fn spawn_confined(b: Bencher) {
    let layout = Layout::new();
    let confine = layout.confine();
    assert!(matches!(confine, Confine::On { .. }), "{confine:?}");
    b.bench_local(|| {
        let mut cmd = bash_true();
        confine.apply(&mut cmd).unwrap();
        run(cmd);
    });
}

/// The read-only sandbox of `readonly` mode (prepared beside the session's).
#[divan::bench(sample_count = 300)]
fn spawn_read_only(b: Bencher) {
    let layout = Layout::new();
    let confine = layout.confine();
    assert!(confine.read_only_available(), "{confine:?}");
    b.bench_local(|| {
        let mut cmd = bash_true();
        confine
            .apply_as(&mut cmd, openmax_core::tool::RunSandbox::ReadOnly)
            .unwrap();
        run(cmd);
    });
}

#[divan::bench(sample_count = 100)]
fn prepare_per_session(b: Bencher) {
    let layout = Layout::new();
    b.bench_local(|| layout.confine());
}
