//! MCP figures (not tests: ignored, printed, no timed assertions). Run with
//! `cargo test -p openmax-tests --test mcp_bench -- --ignored --nocapture`:
//! - time to `hello` with no MCP server and with 10 stdio server-everything servers started
//!   concurrently at freeze;
//! - what a `tools/call` through openmax (tool_start to tool_end as the client reads them) adds
//!   over the same call made directly to the same server over its stdio (median of N);
//! - the share of openmax's own MCP client (`McpSet::call` in process) in such a call.

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use openmax_tests::deps::everything_js;
use openmax_tests::*;
use serde_json::{json, Value};

const RUNS: usize = 5;
const CALLS: usize = 30;

fn servers(n: usize) -> String {
    (0..n)
        .map(|i| {
            format!(
                "[mcp_servers.e{i}]\ncommand = \"node\"\nargs = [{:?}, \"stdio\"]\n\
                 startup_timeout_s = 120\n",
                everything_js().display().to_string()
            )
        })
        .collect()
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    v[v.len() / 2]
}

fn time_to_hello(n: usize) -> f64 {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str(&servers(n));
    env.user_config(&text);
    env.trust();
    let start = Instant::now();
    let s = env.stdio(&[]);
    let t = start.elapsed().as_secs_f64() * 1000.0;
    s.finish();
    t
}

#[test]
#[ignore]
fn bench_ten_servers_at_freeze() {
    let _ = time_to_hello(1); // warm the node module cache
    let none: Vec<f64> = (0..RUNS).map(|_| time_to_hello(0)).collect();
    let ten: Vec<f64> = (0..RUNS).map(|_| time_to_hello(10)).collect();
    let one: Vec<f64> = (0..RUNS).map(|_| time_to_hello(1)).collect();
    let (n, o, t) = (median(none), median(one), median(ten));
    println!(
        "time to hello (median of {RUNS}): no MCP server {n:.1} ms; 1 server {o:.1} ms; \
         10 servers concurrently {t:.1} ms; 10 vs 1 = {:.2}x",
        t / o
    );
}

/// Direct JSON-RPC over the server's stdio: initialize, then CALLS echo calls timed one by one.
fn direct_calls() -> Vec<f64> {
    let mut child = Command::new("node")
        .arg(everything_js())
        .arg("stdio")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let mut out = BufReader::new(child.stdout.take().unwrap());
    let mut send = |v: Value| {
        writeln!(stdin, "{v}").unwrap();
        stdin.flush().unwrap();
    };
    let mut recv = |id: u64| loop {
        let mut line = String::new();
        assert!(out.read_line(&mut line).unwrap() > 0, "server closed");
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc":"2.0","id":0,"method":"initialize","params":{
        "protocolVersion":"2025-06-18","capabilities":{},
        "clientInfo":{"name":"bench","version":"0"}}}),
    );
    recv(0);
    send(json!({"jsonrpc":"2.0","method":"notifications/initialized"}));
    let mut times = Vec::new();
    for i in 1..=CALLS as u64 {
        let t = Instant::now();
        send(json!({"jsonrpc":"2.0","id":i,"method":"tools/call",
            "params":{"name":"echo","arguments":{"message":"x"}}}));
        recv(i);
        times.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let _ = child.kill();
    let _ = child.wait();
    times
}

#[test]
#[ignore]
fn bench_tools_call_overhead() {
    let direct = direct_calls();
    let builtin = through_openmax("read_file", json!({"path": "a.txt"}), 0);
    let through = through_openmax("mcp__e0__echo", json!({"message": "x"}), 1);
    let (d, b, o) = (median(direct), median(builtin), median(through));
    println!(
        "tools/call echo (median of {CALLS}): direct to the server {d:.3} ms; through openmax \
         (tool_start to tool_end) {o:.3} ms; a built-in read_file the same way {b:.3} ms; \
         through openmax minus direct {:.3} ms; the harness's per-call \
         cost of any tool is the read_file figure; the difference left to the MCP client \
         (noise included) {:.3} ms",
        o - d,
        o - d - b
    );
}

/// tool_start to tool_end of CALLS sequential calls of `name`, as the client reads them.
fn through_openmax(name: &str, args: Value, n_servers: usize) -> Vec<f64> {
    let env = TestEnv::new();
    std::fs::write(env.project.join("a.txt"), "a").unwrap();
    let mut script = Vec::new();
    for i in 0..CALLS {
        script.push(tool_reply(&format!("c{i}"), name, args.clone()));
    }
    script.push(text_reply("done"));
    let mock = MockServer::start(script);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.set_mode("auto");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str(&servers(n_servers));
    text.push_str("\n[limits]\nmax_iterations = 100\n");
    env.user_config(&text);
    let mut s = env.stdio(&[]);
    s.user("go");
    let mut through = Vec::new();
    let mut started: Option<Instant> = None;
    loop {
        let e = s
            .try_event(Duration::from_secs(60))
            .expect("an event within a minute");
        match e["type"].as_str() {
            Some("tool_start") => started = Some(Instant::now()),
            Some("tool_end") => {
                assert_eq!(e["ok"], true, "{e}");
                if let Some(t) = started.take() {
                    through.push(t.elapsed().as_secs_f64() * 1000.0);
                }
            }
            Some("done") => break,
            _ => {}
        }
    }
    s.finish();
    through
}

/// `CALLS` sequential echo calls through openmax's own MCP client (`McpSet::call`, in this
/// process: rmcp, the result mapping and the output cap, no model, no persistence).
fn client_calls(rt: &tokio::runtime::Runtime) -> Vec<f64> {
    use openmax_shell::mcp::{claude, config, McpSet, StartContext};
    let entry = json!({"mcpServers": {"e0": {"command": "node",
        "args": [everything_js().display().to_string(), "stdio"]}}});
    let keys = Vec::new();
    let env = |_: &str| None;
    let lookup = config::Lookup {
        get: &env,
        provider_keys: &keys,
    };
    let (mut defs, problems) = claude::parse(entry.to_string().as_bytes(), &lookup);
    assert!(problems.is_empty(), "{problems:?}");
    for d in &mut defs {
        d.origin = openmax_shell::hooks::Origin::User;
        d.startup_timeout_ms = 120_000;
    }
    let ctx = StartContext {
        project: std::env::temp_dir(),
        log_path: None,
        agent_session: "bench".into(),
        notices: None,
        policy: Default::default(),
    };
    let set = rt.block_on(McpSet::start(defs, problems, ctx, &|_| true));
    let mut times = Vec::new();
    for _ in 0..CALLS {
        let (_keep, cancel) = tokio::sync::oneshot::channel();
        let t = Instant::now();
        let out = rt.block_on(set.call(
            "mcp__e0__echo",
            json!({"message": "x"}),
            None,
            30_000,
            cancel,
        ));
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        assert!(out.ok, "{}", out.output);
    }
    times
}

#[test]
#[ignore]
fn bench_mcp_client_overhead_in_process() {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    for round in 1..=3 {
        let (d, c) = (median(direct_calls()), median(client_calls(&rt)));
        println!(
            "round {round}: tools/call echo (median of {CALLS}): direct JSON-RPC {d:.3} ms; \
             through openmax's MCP client {c:.3} ms; the client's share {:.3} ms",
            c - d
        );
    }
}
