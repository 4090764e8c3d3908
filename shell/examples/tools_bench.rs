//! Benchmark: the built-in `glob` and `grep` on a generated 100,000-file tree, against `rg`
//! when it is installed. Run it with `bench/tools.sh` (a release build).
//!
//! Usage: `tools_bench [--runs N] [--dir DIR] [--only glob|grep]` — with `--dir`, an existing tree made by an
//! earlier run is reused (and kept); otherwise a fresh tree is generated under the system temp
//! dir and removed at the end. Prints the median of N runs (default 5) for each measurement
//! and the ratio openmax / rg.

#[path = "../tests/tools_support/tree.rs"]
mod tree;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use openmax_shell::tools::{self, ToolContext};
use serde_json::{json, Value};

fn main() {
    let mut runs = 5usize;
    let mut dir: Option<PathBuf> = None;
    let mut only: Option<String> = None;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        match a.as_str() {
            "--runs" => runs = args.next().and_then(|n| n.parse().ok()).expect("--runs N"),
            "--dir" => dir = Some(PathBuf::from(args.next().expect("--dir DIR"))),
            "--only" => only = Some(args.next().expect("--only TOOL")),
            other => {
                eprintln!("usage: tools_bench [--runs N] [--dir DIR] [--only glob|grep] (unknown argument {other})");
                std::process::exit(2);
            }
        }
    }
    let (root, owned) = match dir {
        Some(d) if d.join(".gitignore").exists() => (d, false),
        Some(d) => {
            std::fs::create_dir_all(&d).expect("create --dir");
            generate(&d);
            (d, false)
        }
        None => {
            let d =
                std::env::temp_dir().join(format!("openmax-tools-bench-{}", std::process::id()));
            std::fs::create_dir_all(&d).expect("create the temp tree");
            generate(&d);
            (d, true)
        }
    };
    let root = root.canonicalize().expect("tree exists");
    let ctx = ToolContext::new(&root, "bench").expect("tree exists");
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("a tokio runtime");
    let rg = Command::new("rg")
        .arg("--version")
        .output()
        .ok()
        .filter(|o| o.status.success());
    match &rg {
        Some(o) => println!(
            "rg: {}",
            String::from_utf8_lossy(&o.stdout)
                .lines()
                .next()
                .unwrap_or("")
        ),
        None => println!("rg: not installed (openmax figures only)"),
    }
    println!(
        "tree: {} ({} files + ignored), {runs} runs, median",
        root.display(),
        tree::DIRS * tree::FILES_PER_DIR
    );

    let cases: [(&str, &str, Value, Vec<&str>); 3] = [
        (
            "glob *.txt",
            "glob",
            json!({"pattern": "*.txt"}),
            vec!["--files", "-g", "*.txt"],
        ),
        (
            "grep NEEDLE",
            "grep",
            json!({"pattern": "NEEDLE"}),
            vec!["NEEDLE"],
        ),
        (
            "grep -i 'line$' (200k hits)",
            "grep",
            json!({"pattern": "line$", "case_insensitive": true}),
            vec!["-i", "line$"],
        ),
    ];
    for (label, tool, targs, rg_args) in cases {
        if only.as_deref().is_some_and(|o| o != tool) {
            continue;
        }
        let ours = median(runs, || {
            let t = Instant::now();
            let (_keep, cancel) = tokio::sync::oneshot::channel();
            let out = rt.block_on(tools::run(&ctx, tool, &targs, cancel));
            assert!(out.ok, "{}", out.output);
            t.elapsed()
        });
        let theirs = rg
            .as_ref()
            .map(|_| median(runs, || run_rg(&root, &rg_args)));
        match theirs {
            Some(r) => println!(
                "{label:<30} openmax {:>8.1} ms   rg {:>8.1} ms   ratio {:.2}x",
                ms(ours),
                ms(r),
                ours.as_secs_f64() / r.as_secs_f64()
            ),
            None => println!("{label:<30} openmax {:>8.1} ms", ms(ours)),
        }
    }
    if owned {
        let t = Instant::now();
        std::fs::remove_dir_all(&root).expect("remove the temp tree");
        println!("removed the tree in {:.1} s", t.elapsed().as_secs_f64());
    }
}

fn generate(d: &Path) {
    let t = Instant::now();
    tree::generate(d);
    println!("generated the tree in {:.1} s", t.elapsed().as_secs_f64());
}

fn run_rg(root: &Path, args: &[&str]) -> Duration {
    let t = Instant::now();
    // `--no-require-git`: honor .gitignore outside a git repository, as openmax does.
    let status = Command::new("rg")
        .arg("--no-require-git")
        .args(args)
        .current_dir(root)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("rg runs");
    assert!(status.code() == Some(0), "rg {args:?}: {status}");
    t.elapsed()
}

fn median(runs: usize, mut f: impl FnMut() -> Duration) -> Duration {
    let _warm = f();
    let mut v: Vec<Duration> = (0..runs.max(1)).map(|_| f()).collect();
    v.sort();
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}
