//! The real binary's command line: config errors before the handshake, trust, `-p` and its exit
//! codes, the demo, modes saved across processes, agent-spawned refusals, `--continue`.

use openmax_tests::*;
use serde_json::json;

#[test]
fn version_is_0_2_0() {
    let env = TestEnv::new();
    let out = env.run(&["--version"]);
    assert_eq!(out.code, Some(0));
    assert_eq!(out.stdout.trim(), "openmax 0.2.0");
}

#[test]
fn broken_config_names_file_and_line_before_the_handshake() {
    let env = TestEnv::new();
    env.user_config("[provider]\nname = \"anthropic\"\nmodel = = 3\n");
    let out = env.run(&["--stdio"]);
    assert_eq!(out.code, Some(1));
    assert_eq!(out.stdout, "", "nothing on stdout, not even hello");
    let want = format!("{}:3:", env.home.join("config.toml").display());
    assert!(out.stderr.contains(&want), "{}", out.stderr);
}

#[test]
fn unknown_key_is_an_error_naming_the_file() {
    let env = TestEnv::new();
    env.user_config("[provider]\nname = \"demo\"\nmodle = \"x\"\n");
    let out = env.run(&["--stdio"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("config.toml") && out.stderr.contains("modle"),
        "{}",
        out.stderr
    );
}

#[test]
fn missing_key_names_the_variable_to_set() {
    let env = TestEnv::new();
    env.user_config("[provider]\nname = \"anthropic\"\n");
    let out = env.run(&["--stdio"]);
    assert_eq!(out.code, Some(1));
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("ANTHROPIC_API_KEY"), "{}", out.stderr);
}

#[test]
fn unknown_provider_names_the_legal_ones() {
    let env = TestEnv::new();
    let out = env.run(&["--stdio", "--provider", "gemini"]);
    assert_eq!(out.code, Some(1));
    for p in ["anthropic", "openai", "openai-chat", "demo"] {
        assert!(out.stderr.contains(p), "{}", out.stderr);
    }
}

#[test]
fn project_config_cannot_redirect_credentials() {
    let env = TestEnv::new();
    env.user_config("[provider]\nname = \"demo\"\n");
    env.project_config("[provider]\nbase_url = \"http://127.0.0.1:9/\"\n");
    let out = env.run(&["--stdio", "--project", env.project.to_str().unwrap()]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains(".openmax/config.toml") && out.stderr.contains("base_url"),
        "{}",
        out.stderr
    );
}

#[test]
fn untrusted_project_refuses_a_turn_and_says_how_to_trust() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let mut s = env.stdio(&[]);
    assert_eq!(
        s.hello["project"].as_str().unwrap(),
        env.project.to_str().unwrap()
    );
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "refused");
    assert_eq!(evs[0]["type"], "protocol_error");
    assert!(evs[0]["message"]
        .as_str()
        .unwrap()
        .contains("openmax --trust"));
    assert_eq!(s.finish().0, Some(0));
    assert!(mock.requests().is_empty(), "nothing was sent");
}

#[test]
fn user_config_trust_list_trusts_a_project_but_a_project_config_cannot() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("trusted by config")]);
    let project = env.project.to_str().unwrap().to_string();
    env.mock_config(
        Flavor::Anthropic,
        &mock.base_url(),
        &format!("[trust]\nprojects = [{project:?}]\n"),
    );
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(s.finish().0, Some(0));

    let env = TestEnv::new();
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    std::fs::create_dir_all(env.project.join(".openmax")).unwrap();
    std::fs::write(
        env.project.join(".openmax/config.toml"),
        format!("[trust]\nprojects = [{project:?}]\n"),
    )
    .unwrap();
    let out = env.run(&["-p", "hi"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("[trust] is not allowed"),
        "{}",
        out.stderr
    );
}

#[test]
fn trust_then_turn_runs() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("trusted now")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let out = env.run_on_tty(&["--trust"]);
    assert_eq!(out.code, Some(0));
    assert!(out.stdout.contains("trusted"), "{}", out.stdout);
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "trusted now");
    s.finish();
}

#[test]
fn print_mode_streams_the_reply_and_exits_0() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("just the answer")]);
    env.mock_config(Flavor::OpenaiChat, &mock.base_url(), "");
    env.trust();
    let out = env.run(&["-p", "question"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "just the answer\n");
}

#[test]
fn print_mode_exits_1_when_the_turn_ends_error() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![status(429, None, Some("insufficient_quota"))]);
    env.mock_config(Flavor::Openai, &mock.base_url(), "");
    env.trust();
    let out = env.run(&["-p", "question"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("error"), "{}", out.stderr);
}

#[test]
fn print_mode_exits_4_on_max_iterations() {
    let env = TestEnv::new();
    std::fs::write(env.project.join("a.txt"), "a\n").unwrap();
    let mock = MockServer::start(vec![]);
    mock.set_default(tool_reply("c", "read_file", json!({"path":"a.txt"})));
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    std::fs::write(
        env.home.join("config.toml"),
        std::fs::read_to_string(env.home.join("config.toml")).unwrap()
            + "[limits]\nmax_iterations = 2\n",
    )
    .unwrap();
    env.trust();
    let out = env.run(&["-p", "loop"]);
    assert_eq!(out.code, Some(4), "{}", out.stderr);
    assert!(out.stderr.contains("max_iterations"), "{}", out.stderr);
}

#[test]
fn print_mode_declines_approvals_and_says_so() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply("w", "write_file", json!({"path":"n.txt","content":"x\n"})),
        text_reply("fine"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let out = env.run(&["-p", "write"]);
    // The turn ended normally, but work did not happen: its own exit code.
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert_eq!(out.stdout, "fine\n");
    assert!(
        out.stderr.contains("declined: write_file") && out.stderr.contains("--mode auto"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("approval_mode"), "{}", out.stderr);
    assert!(!env.project.join("n.txt").exists());
}

#[test]
fn demo_print_shows_a_whole_session_without_key_or_network() {
    let env = TestEnv::new();
    let out = env.run(&["--provider", "demo", "-p", "show me around"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("openmax demo"), "{}", out.stdout);
    assert!(out.stderr.contains("→ read_file"), "{}", out.stderr);
    assert!(
        out.stderr.contains("+Hello, openmax world"),
        "{}",
        out.stderr
    );
    // The scratch project lives under the temp dir, not in the test's project.
    assert!(!env.project.join("demo.txt").exists());
    let line = out
        .stderr
        .lines()
        .find(|l| l.contains("demo project at "))
        .unwrap();
    let dir = std::path::PathBuf::from(line.split("demo project at ").nth(1).unwrap());
    assert_eq!(
        std::fs::read_to_string(dir.join("demo.txt")).unwrap(),
        "Hello, openmax world\n"
    );
    let _ = std::fs::remove_dir_all(dir.parent().unwrap());
}

#[test]
fn demo_stdio_asks_before_the_edit() {
    let env = TestEnv::new();
    let mut s = env.stdio(&["--provider", "demo"]);
    s.user("show me around");
    let evs = s.until_type("approval_request");
    assert!(types(&evs).contains(&"tool_end".to_string()));
    let id = evs.last().unwrap()["approval_id"].clone();
    s.send(json!({"cmd":"approve","approval_id":id,"approved":true}));
    let (evs, _) = s.turn();
    assert!(types(&evs).contains(&"diff".to_string()));
    let project = std::path::PathBuf::from(s.hello["project"].as_str().unwrap());
    assert_eq!(s.finish().0, Some(0));
    let _ = std::fs::remove_dir_all(project.parent().unwrap());
}

#[test]
fn mode_saved_by_one_process_is_in_force_in_the_next() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "w",
            "write_file",
            json!({"path":"n.txt","content":"auto\n"}),
        ),
        text_reply("written"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    let ack = s.event();
    assert_eq!(ack, json!({"type":"approval_mode","mode":"auto"}));
    assert_eq!(s.finish().0, Some(0));

    let mut s = env.stdio(&[]);
    s.user("write n.txt");
    let (evs, _) = s.turn();
    let t = types(&evs);
    assert!(!t.contains(&"approval_request".to_string()), "{t:?}");
    assert!(t.contains(&"diff".to_string()));
    assert_eq!(s.finish().0, Some(0));
    assert_eq!(
        std::fs::read_to_string(env.project.join("n.txt")).unwrap(),
        "auto\n"
    );
}

#[test]
fn agent_spawned_cannot_change_mode_or_trust() {
    let mut env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.env
        .push(("OPENMAX_AGENT_SESSION".into(), "parent-session".into()));
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    let pe = s.event();
    assert_eq!(pe["type"], "protocol_error");
    assert!(pe["message"].as_str().unwrap().contains("agent"), "{pe}");
    assert_eq!(s.finish().0, Some(0));
    let out = env.run(&["--trust"]);
    assert_eq!(out.code, Some(1));
    assert!(
        out.stderr.contains("OPENMAX_AGENT_SESSION"),
        "{}",
        out.stderr
    );
    let out = env.run(&["--approve", "x.json"]);
    assert_eq!(out.code, Some(1));
    assert!(out.stderr.contains("agent"), "{}", out.stderr);
}

#[test]
fn continue_without_a_session_exits_2() {
    let env = TestEnv::new();
    env.user_config("[provider]\nname = \"demo\"\n");
    env.trust();
    let out = env.run(&["--stdio", "--continue"]);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert_eq!(out.stdout, "");
}

#[test]
fn continue_resumes_with_a_transcript() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("first answer"), text_reply("second")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    let sid = s.hello["session_id"].clone();
    s.user("first question");
    s.turn();
    assert_eq!(s.finish().0, Some(0));

    let mut s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["continued"], true);
    assert_eq!(s.hello["session_id"], sid);
    let t = s.event();
    assert_eq!(t["type"], "transcript");
    assert_eq!(t["messages"][0]["content"], "first question");
    assert_eq!(t["messages"][1]["content"], "first answer");
    s.user("more");
    let (evs, _) = s.turn();
    assert_eq!(tokens(&evs), "second");
    assert_eq!(s.finish().0, Some(0));
    // The second request carries the first exchange.
    let body = mock.requests()[1].body.to_string();
    assert!(body.contains("first question") && body.contains("first answer"));
}

#[test]
fn last_turn_error_exits_1_over_stdio() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![status(400, None, Some("invalid_request_error"))]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("x");
    let (_, reason) = s.turn();
    assert_eq!(reason, "error");
    assert_eq!(s.finish().0, Some(1));
}

#[test]
fn ctrl_c_in_print_mode_cancels_the_turn_and_kills_the_tool() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![tool_reply(
        "sh",
        "shell",
        json!({"command":"sleep 3101 & echo $! > bg.pid; sleep 30"}),
    )]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.send(json!({"cmd":"approval_mode","mode":"auto"}));
    assert_eq!(s.event()["type"], "approval_mode");
    s.finish();

    let child = env
        .command(&["-p", "run it"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let pid_file = env.project.join("bg.pid");
    let end = std::time::Instant::now() + DEADLINE;
    while std::fs::read_to_string(&pid_file)
        .ok()
        .and_then(|t| t.trim().parse::<i32>().ok())
        .is_none()
    {
        assert!(std::time::Instant::now() < end, "the tool never started");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // `$!` is written right after the fork, maybe before `sleep` is exec'd.
    while !running(&["sleep", "3101"]) {
        assert!(std::time::Instant::now() < end, "sleep 3101 never ran");
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    // SAFETY: sending a signal to our own child process by pid.
    unsafe { libc::kill(child.id() as i32, libc::SIGINT) };
    let out = wait_child(child);
    assert_eq!(out.code, Some(1), "{}", out.stderr);
    assert!(out.stderr.contains("cancelled"), "{}", out.stderr);
    assert!(
        wait_cmdline_gone(&["sleep", "3101"]),
        "the tool's background child survived"
    );
}

#[test]
fn check_accepts_a_real_session_and_rejects_a_broken_one() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("hi")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let mut s = env.stdio(&[]);
    s.user("hello");
    s.turn();
    let stream = s.seen.join("\n") + "\n";
    s.finish();
    let out = env.run_with_stdin(&["--check", "--stdio"], stream.as_bytes());
    assert_eq!(out.code, Some(0), "{}", out.stdout);
    // Drop the final `done`: the turn never terminates.
    let broken: Vec<&str> = stream
        .lines()
        .filter(|l| !l.contains("\"type\":\"done\""))
        .collect();
    let out = env.run_with_stdin(
        &["--check", "--stdio"],
        (broken.join("\n") + "\n").as_bytes(),
    );
    assert_ne!(out.code, Some(0), "{}", out.stdout);
}

#[test]
fn spec_prints_the_contract_and_its_schema() {
    let env = TestEnv::new();
    let out = env.run(&["--spec", "stdio"]);
    assert_eq!(out.code, Some(0));
    assert!(out.stdout.contains("openmax-stdio/6"));
    let out = env.run(&["--spec", "stdio", "--json"]);
    assert_eq!(out.code, Some(0));
    let v: serde_json::Value = serde_json::from_str(&out.stdout).expect("JSON Schema");
    assert!(v["$schema"].is_string());
}
