//! The real `openmax --stdio` shutting down while a reply streams without end: end of input
//! and the first SIGTERM let the turn go on for `[limits] drain_timeout_s` (default 10 s),
//! then cancel it (`message_done` with the partial text, `done cancelled`, exactly one `done`)
//! and exit 0. Every stream is checked by the validator.

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
