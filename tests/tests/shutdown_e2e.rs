//! The real `openmax --stdio` shutting down while a reply streams without end: end of input
//! and the first SIGTERM let the turn go on for `[limits] drain_timeout_s` (default 10 s),
//! then cancel it (`message_done` with the partial text, `done cancelled`, exactly one `done`)
//! and exit 0; a second SIGTERM exits 130 at once and kills the MCP servers' process groups.
//! Every stream is checked by the validator.

use std::time::{Duration, Instant};

use openmax_tests::*;

/// A mock whose one reply is an endless, slow stream of short text deltas (it would never
/// end on its own, and never reaches the reply cap within the test).
fn setup(flavor: Flavor, limits: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![Reply::Stream {
        items: vec![],
        end: StreamEnd::Endless { delta_bytes: 16 },
        delay_ms: 20,
    }]);
    env.mock_config(flavor, &mock.base_url(), "");
    if !limits.is_empty() {
        let path = env.home.join("config.toml");
        let mut base = std::fs::read_to_string(&path).unwrap();
        base.push_str(&format!("\n[limits]\n{limits}\n"));
        std::fs::write(&path, base).unwrap();
    }
    env.trust();
    (env, mock)
}

/// Start a turn and wait until its stream is flowing.
fn streaming(env: &TestEnv) -> Session {
    let mut s = env.stdio(&[]);
    s.user("go on forever");
    s.until_type("token");
    s
}

/// What follows the shutdown: the rest of the turn ends `cancelled` with the partial text,
/// and the session has exactly one `done`.
fn assert_cancelled_once(s_seen: &[String], rest: &[serde_json::Value]) {
    let dones = s_seen
        .iter()
        .filter(|l| l.contains("\"type\":\"done\""))
        .count();
    assert_eq!(dones, 1, "exactly one done");
    let done = rest.iter().find(|e| e["type"] == "done").expect("a done");
    assert_eq!(done["stop_reason"], "cancelled");
    let kept = find(rest, "message_done")["text"].as_str().unwrap();
    assert!(
        kept.starts_with("xxxx"),
        "the partial text is kept: {kept:?}"
    );
}

#[test]
fn end_of_input_during_an_endless_stream_cancels_at_the_default_deadline() {
    let (env, _mock) = setup(Flavor::Anthropic, "");
    let mut s = streaming(&env);
    let eof = Instant::now();
    s.close();
    let mut seen = s.seen.clone();
    let (code, rest, stderr) = s.finish();
    let took = eof.elapsed();
    assert_eq!(code, Some(0), "{stderr}");
    seen.extend(rest.iter().map(|v| v.to_string()));
    assert_cancelled_once(&seen, &rest);
    assert!(
        took >= Duration::from_secs(10),
        "the turn drains for the deadline first ({took:?})"
    );
    eprintln!("end of input to exit: {took:?} (deadline 10 s)");
}

fn sigterm_during_an_endless_stream_cancels_at_the_deadline(flavor: Flavor) {
    let (env, _mock) = setup(flavor, "drain_timeout_s = 0.5");
    let s = streaming(&env);
    let pid = s.pid();
    let status = std::process::Command::new("kill")
        .args(["-TERM", &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success());
    let mut seen = s.seen.clone();
    let (code, rest, stderr) = s.finish();
    assert_eq!(code, Some(0), "{stderr}");
    seen.extend(rest.iter().map(|v| v.to_string()));
    assert_cancelled_once(&seen, &rest);
}

#[test]
fn sigterm_during_an_endless_stream_cancels_at_the_deadline_anthropic() {
    sigterm_during_an_endless_stream_cancels_at_the_deadline(Flavor::Anthropic);
}

#[test]
fn sigterm_during_an_endless_stream_cancels_at_the_deadline_openai() {
    sigterm_during_an_endless_stream_cancels_at_the_deadline(Flavor::Openai);
}

#[test]
fn sigterm_during_an_endless_stream_cancels_at_the_deadline_chat() {
    sigterm_during_an_endless_stream_cancels_at_the_deadline(Flavor::OpenaiChat);
}

#[test]
fn quit_during_an_endless_stream_cancels_at_the_deadline() {
    let (env, _mock) = setup(Flavor::OpenaiChat, "drain_timeout_s = 0.5");
    let mut s = streaming(&env);
    s.send(serde_json::json!({"cmd":"quit"}));
    let mut seen = s.seen.clone();
    let (code, rest, stderr) = s.finish();
    assert_eq!(code, Some(0), "{stderr}");
    seen.extend(rest.iter().map(|v| v.to_string()));
    assert_cancelled_once(&seen, &rest);
}

/// A second SIGTERM while the first drains exits 130 at once, and takes the MCP servers' whole
/// process groups with it: a process the server left in its group (here a `sleep`, which stdin
/// closing would not end) is killed, and no record is left for the next start's sweep.
#[test]
fn a_second_sigterm_exits_130_and_kills_the_mcp_servers_process_groups() {
    use std::io::{BufRead, BufReader, Write};
    let (env, _mock) = setup(Flavor::Anthropic, "");
    let pidfile = env.root.join("sleep.pid");
    let script = format!(
        "sleep 600 & echo $! > {:?}; exec node {:?} stdio",
        pidfile,
        openmax_tests::deps::everything_js()
    );
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str(&format!(
        "\n[mcp_servers.grouped]\ncommand = \"sh\"\nargs = [\"-c\", {script:?}]\n"
    ));
    env.user_config(&text);
    let mut child = env
        .command(&["--stdio"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::inherit())
        .spawn()
        .expect("openmax starts");
    let mut stdin = child.stdin.take().unwrap();
    let mut lines = BufReader::new(child.stdout.take().unwrap()).lines();
    stdin
        .write_all(b"{\"cmd\":\"user\",\"text\":\"go on forever\"}\n")
        .unwrap();
    stdin.flush().unwrap();
    let mut seen = Vec::new();
    for l in lines.by_ref() {
        let l = l.unwrap();
        let token = l.contains("\"type\":\"token\"");
        seen.push(l);
        if token {
            break;
        }
    }
    let sleeper: i32 = std::fs::read_to_string(&pidfile)
        .expect("the server started")
        .trim()
        .parse()
        .unwrap();
    assert!(process_alive(sleeper));
    let pid = child.id() as i32;
    // The first signal ends input and the turn drains (10 s by default); a later one forces
    // the exit. Two sent back to back may be delivered as one, so send until it exits.
    let end = std::time::Instant::now() + DEADLINE;
    let status = loop {
        // SAFETY: plain kill(2) of the child this test started.
        unsafe { libc::kill(pid, libc::SIGTERM) };
        std::thread::sleep(Duration::from_millis(50));
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        assert!(std::time::Instant::now() < end, "openmax did not exit");
    };
    seen.extend(lines.map_while(Result::ok));
    assert_valid_prefix(&seen, "a stdio session forced out by a second SIGTERM");
    let gone = wait_gone(sleeper);
    if !gone {
        // SAFETY: as above; a failing test must not leave it running.
        unsafe { libc::kill(sleeper, libc::SIGKILL) };
    }
    assert_eq!(status.code(), Some(130));
    assert!(gone, "the server's process group outlived the forced exit");
    let records: Vec<_> = std::fs::read_dir(env.home.join("projects"))
        .unwrap()
        .flatten()
        .filter_map(|p| std::fs::read_dir(p.path().join("running")).ok())
        .flat_map(|d| d.flatten().map(|e| e.path()))
        .collect();
    assert!(records.is_empty(), "records left: {records:?}");
}
