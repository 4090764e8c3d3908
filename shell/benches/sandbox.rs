//! The sandbox's cost per agent process: the same command (`true`, then `bash -c true`) started
//! the way the `shell` tool starts it (own process group, stdout to a pipe, waited for), plain,
//! through the sandbox helper (`openmax --sandbox-exec SPEC -- …`: namespaces, the view,
//! privileges dropped, Landlock, both seccomp filters, the connect broker), through the
//! read-only sandbox, and, when `bwrap` is installed, through bubblewrap giving a comparable
//! sandbox (new user, mount, pid, IPC and network namespaces, the root read-only, the project
//! writable, its own `/dev`, `/proc` and `/tmp`, a new session). Also the session's one-time
//! probe.
//!
//! Samples of every variant are taken in turn, round after round, so a noisy machine weighs on
//! all of them alike. Prints p50, p90 and p99 of each and what each adds over the plain spawn.
//!
//! Run: `bench/sandbox.sh [ROUNDS]` (it builds the release `openmax` and passes its path in
//! `OPENMAX_BIN`). Figures in docs/benchmarks.md.

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use openmax_core::tool::RunSandbox;
use openmax_shell::sandbox::confine::{Confine, Settings};
use openmax_shell::sandbox::spec::kernel_abi;

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i.min(sorted.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.3}", d.as_secs_f64() * 1000.0)
}

fn run(mut cmd: Command) -> Duration {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .process_group(0);
    let t = Instant::now();
    let out = cmd.output().expect("the command runs");
    let d = t.elapsed();
    assert!(out.status.success(), "{cmd:?} failed");
    d
}

/// Builds the command for an argv.
type Make = Box<dyn Fn(&[&str]) -> Command>;

/// One way of starting the command.
struct Variant {
    name: &'static str,
    make: Make,
    samples: Vec<Duration>,
}

fn bwrap(project: &Path) -> Option<Make> {
    let found = Command::new("bwrap")
        .arg("--version")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        return None;
    }
    let project = project.to_path_buf();
    Some(Box::new(move |argv: &[&str]| {
        let mut c = Command::new("bwrap");
        let p = project.display().to_string();
        c.args([
            "--unshare-all",
            "--new-session",
            "--die-with-parent",
            "--ro-bind",
            "/",
            "/",
            "--dev",
            "/dev",
            "--proc",
            "/proc",
            "--tmpfs",
            "/tmp",
            "--bind",
            &p,
            &p,
            "--chdir",
            &p,
            "--",
        ])
        .args(argv);
        c
    }))
}

fn main() {
    let rounds: usize = std::env::args()
        .skip(1)
        .find_map(|a| a.parse().ok())
        .unwrap_or(300);
    let bin = PathBuf::from(std::env::var("OPENMAX_BIN").unwrap_or_else(|_| {
        eprintln!("set OPENMAX_BIN to the openmax binary (bench/sandbox.sh does)");
        std::process::exit(2)
    }));
    let root = std::env::temp_dir().join(format!("omx-bench-sandbox-{}", std::process::id()));
    let (project, home) = (root.join("project"), root.join("home"));
    std::fs::create_dir_all(project.join(".git")).unwrap();
    std::fs::create_dir_all(&home).unwrap();
    let project = project.canonicalize().unwrap();
    let probe_start = Instant::now();
    let confine = Confine::for_session(&Settings::default(), &project, &home)
        .unwrap()
        .with_helper(&bin);
    let Confine::On(sandbox) = &confine else {
        panic!("the sandbox is not on: {confine:?}");
    };
    let report = sandbox.probe().expect("the sandbox builds here").clone();
    let probe = probe_start.elapsed();
    println!(
        "kernel Landlock ABI {}; uid {} ({}); {} rounds",
        kernel_abi(),
        report.uid,
        if report.user_namespace {
            "a user namespace"
        } else {
            "root, no user namespace"
        },
        rounds
    );
    println!("session set-up with its one-time probe: {} ms", ms(probe));

    for argv in [&["true"][..], &["bash", "-c", "true"][..]] {
        let p = project.clone();
        let c1 = confine.clone();
        let c2 = confine.clone();
        let mut variants = vec![
            Variant {
                name: "plain",
                make: Box::new(move |a: &[&str]| {
                    let mut c = Command::new(a[0]);
                    c.args(&a[1..]).current_dir(&p);
                    c
                }),
                samples: Vec::new(),
            },
            Variant {
                name: "openmax sandbox",
                make: {
                    let p = project.clone();
                    Box::new(move |a: &[&str]| {
                        let mut c = c1.command(a[0], RunSandbox::Session).unwrap();
                        c.args(&a[1..]).current_dir(&p);
                        c
                    })
                },
                samples: Vec::new(),
            },
            Variant {
                name: "openmax read-only",
                make: {
                    let p = project.clone();
                    Box::new(move |a: &[&str]| {
                        let mut c = c2.command(a[0], RunSandbox::ReadOnly).unwrap();
                        c.args(&a[1..]).current_dir(&p);
                        c
                    })
                },
                samples: Vec::new(),
            },
        ];
        if let Some(make) = bwrap(&project) {
            variants.push(Variant {
                name: "bwrap",
                make,
                samples: Vec::new(),
            });
        }
        // Warm-up: page cache, the helper's first start.
        for v in &variants {
            for _ in 0..5 {
                run((v.make)(argv));
            }
        }
        for _ in 0..rounds {
            for v in variants.iter_mut() {
                let d = run((v.make)(argv));
                v.samples.push(d);
            }
        }
        println!();
        println!("`{}`", argv.join(" "));
        println!(
            "| variant | p50 ms | p90 ms | p99 ms | added p50 ms | added p99 ms | p50 ratio |"
        );
        println!("|---|---|---|---|---|---|---|");
        for v in variants.iter_mut() {
            v.samples.sort();
        }
        let base50 = percentile(&variants[0].samples, 0.5);
        let base99 = percentile(&variants[0].samples, 0.99);
        for v in &variants {
            let (p50, p90, p99) = (
                percentile(&v.samples, 0.5),
                percentile(&v.samples, 0.9),
                percentile(&v.samples, 0.99),
            );
            println!(
                "| {} | {} | {} | {} | {} | {} | {:.2} |",
                v.name,
                ms(p50),
                ms(p90),
                ms(p99),
                ms(p50.saturating_sub(base50)),
                ms(p99.saturating_sub(base99)),
                p50.as_secs_f64() / base50.as_secs_f64()
            );
        }
    }
    drop(confine);
    let _ = std::fs::remove_dir_all(&root);
}
