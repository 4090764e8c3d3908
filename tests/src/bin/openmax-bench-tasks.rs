//! Benchmark of the `task` tool (subagents), the real binary against the loopback mock; prints
//! figures and ratios, asserts nothing about time (docs/benchmarks.md, "Subagents"):
//!
//! - the time from the parent's `task` call (the mock has sent the reply carrying it) to the
//!   child's first request at the mock, beside a bare `openmax --stdio` start (spawn to first
//!   request) in the same run: the difference is what the `task` path adds;
//! - 8 `task` calls in one reply (`[tasks] max_parallel = 8`): when each child's request came,
//!   and the turn's wall time beside one task's;
//! - the resident memory (VmRSS) of each of the 8 children while they stream, beside the
//!   parent's and a bare session's.
//!
//! `bench/tasks.sh [RUNS]` builds the release binary and runs this against it.

use std::time::{Duration, Instant};

use openmax_tests::*;
use serde_json::json;

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

fn env_with(replies: Vec<Reply>, extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

fn task(i: usize) -> (String, String, serde_json::Value) {
    (
        format!("t{i}"),
        "task".to_string(),
        json!({"description": format!("part {i}"), "prompt": format!("Do part {i}.")}),
    )
}

fn tasks_reply(n: usize) -> Reply {
    let calls: Vec<_> = (0..n).map(task).collect();
    let refs: Vec<(&str, &str, serde_json::Value)> = calls
        .iter()
        .map(|(a, b, c)| (a.as_str(), b.as_str(), c.clone()))
        .collect();
    tool_calls_reply(&refs)
}

/// A reply that streams `n` pieces `delay_ms` apart.
fn slow(n: usize, delay_ms: u64) -> Reply {
    Reply::Stream {
        items: (0..n)
            .map(|i| StreamItem::Text {
                text: format!("w{i} "),
            })
            .collect(),
        end: StreamEnd::Complete { finish: None },
        delay_ms,
    }
}

/// Spawn to first request of a bare session.
fn bare_start() -> f64 {
    let (env, mock) = env_with(vec![text_reply("hi")], "");
    let t0 = Instant::now();
    let mut s = env.stdio(&[]);
    s.user("hello");
    mock.wait_requests(1, DEADLINE).expect("a request");
    let arrived = mock.requests()[0].arrived;
    s.turn();
    s.finish();
    ms(arrived - t0)
}

/// The `task` call (its reply sent in full) to the child's first request.
fn task_start() -> f64 {
    let (env, mock) = env_with(
        vec![tasks_reply(1), text_reply("child"), text_reply("done")],
        "",
    );
    let mut s = env.stdio(&[]);
    s.user("delegate");
    s.turn();
    s.finish();
    let r = mock.requests();
    ms(r[1].arrived - r[0].answered.expect("the call was sent"))
}

fn kib(pid: u32, key: &str) -> u64 {
    std::fs::read_to_string(format!("/proc/{pid}/status"))
        .unwrap_or_default()
        .lines()
        .find(|l| l.starts_with(key))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or(0)
}

/// The pids of `openmax --stdio` processes whose parent is `parent`.
fn stdio_children(parent: u32) -> Vec<u32> {
    let mut out = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(e.path().join("stat")).unwrap_or_default();
        let Some(rest) = stat.rfind(')').map(|i| &stat[i + 2..]) else {
            continue;
        };
        let ppid: u32 = rest
            .split(' ')
            .nth(1)
            .and_then(|p| p.parse().ok())
            .unwrap_or(0);
        let cmd = std::fs::read(e.path().join("cmdline")).unwrap_or_default();
        if ppid == parent && cmd.split(|b| *b == 0).any(|a| a == b"--stdio") {
            out.push(pid);
        }
    }
    out
}

/// `n` tasks in one reply, each child streaming `pieces` × 100 ms: the children's request
/// times from the call, the turn's wall time, and the children's RSS in KiB while they stream.
fn parallel(n: usize, pieces: usize) -> (Vec<f64>, f64, Vec<u64>, u64) {
    let mut replies = vec![tasks_reply(n)];
    replies.extend((0..n).map(|_| slow(pieces, 100)));
    replies.push(text_reply("all done"));
    let (env, mock) = env_with(replies, &format!("\n[tasks]\nmax_parallel = {n}\n"));
    let mut s = env.stdio(&[]);
    let t0 = Instant::now();
    s.user("delegate");
    mock.wait_requests(n + 1, DEADLINE)
        .expect("every child's request");
    let rss: Vec<u64> = stdio_children(s.pid())
        .into_iter()
        .map(|p| kib(p, "VmRSS:"))
        .collect();
    let parent = kib(s.pid(), "VmRSS:");
    s.turn();
    let wall = ms(t0.elapsed());
    s.finish();
    let r = mock.requests();
    let called = r[0].answered.expect("the calls were sent");
    let mut at: Vec<f64> = r[1..=n].iter().map(|q| ms(q.arrived - called)).collect();
    at.sort_by(|a, b| a.total_cmp(b));
    (at, wall, rss, parent)
}

/// A bare session's RSS after one turn.
fn bare_rss() -> u64 {
    let (env, mock) = env_with(vec![slow(20, 100)], "");
    let mut s = env.stdio(&[]);
    s.user("hello");
    mock.wait_requests(1, DEADLINE).expect("a request");
    let rss = kib(s.pid(), "VmRSS:");
    s.turn();
    s.finish();
    rss
}

fn main() {
    let runs: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10);
    println!("openmax {} (runs: {runs})", openmax_bin().display());
    // Warm the page cache and the helper once.
    bare_start();
    task_start();
    let mut bare = Vec::new();
    let mut via_task = Vec::new();
    for _ in 0..runs {
        bare.push(bare_start());
        via_task.push(task_start());
    }
    let (b, t) = (median(bare), median(via_task));
    println!("start to first request, median of {runs}:");
    println!("  bare `openmax --stdio` (spawn → first request)     {b:8.1} ms");
    println!("  `task` call (call sent → child's first request)    {t:8.1} ms");
    println!(
        "  task path over a bare start                        {:8.1} ms  (ratio {:.2})",
        t - b,
        t / b
    );

    let (_, one_wall, _, _) = parallel(1, 20);
    let (at, wall, rss, parent) = parallel(8, 20);
    println!("8 task calls in one reply (max_parallel 8), each child streaming 2 s:");
    println!(
        "  children's first requests after the call: first {:.1} ms, median {:.1} ms, last {:.1} ms",
        at[0],
        at[at.len() / 2],
        at[at.len() - 1]
    );
    println!(
        "  turn wall time {:.0} ms, one task's {:.0} ms (ratio {:.2})",
        wall,
        one_wall,
        wall / one_wall
    );
    let bare_kib = bare_rss();
    let mean = rss.iter().sum::<u64>() as f64 / rss.len().max(1) as f64;
    println!(
        "  RSS per child while streaming: mean {:.1} MiB, max {:.1} MiB ({} children); parent {:.1} MiB; a bare session {:.1} MiB",
        mean / 1024.0,
        *rss.iter().max().unwrap_or(&0) as f64 / 1024.0,
        rss.len(),
        parent as f64 / 1024.0,
        bare_kib as f64 / 1024.0
    );
}
