//! A key is enough to start: with no provider configured anywhere (no config file, no
//! `OPENMAX_PROVIDER`, no flag), `ANTHROPIC_API_KEY` or `OPENAI_API_KEY` chooses the provider
//! and its default model, and the vendors' `ANTHROPIC_BASE_URL` / `OPENAI_BASE_URL` point it at
//! the loopback mock, as they point the vendors' own tools. And the messages a newcomer meets
//! first: where openmax tried to connect, an HTML error page as one short line, and the real
//! path of the config file.

use openmax_tests::*;

/// A trusted project whose only provider settings are `vars` (no config file at all).
fn keys_only(vars: &[(&str, &str)]) -> TestEnv {
    let mut env = TestEnv::new();
    env.env = vars
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    env.trust();
    assert!(!env.home.join("config.toml").exists());
    env
}

/// One turn of "hi" in a session of `env` that ends in an error: its events and the error's
/// message.
fn failed_turn(env: &TestEnv) -> (Vec<serde_json::Value>, String) {
    let mut s = env.stdio(&[]);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "error");
    let error = find(&evs, "error")["message"].as_str().unwrap().to_string();
    s.finish();
    (evs, error)
}

fn model_of(req: &openmax_sim::mock::LoggedRequest) -> String {
    req.body["model"].as_str().unwrap_or_default().to_string()
}

#[test]
fn anthropic_api_key_alone_runs_a_turn_with_the_default_model() {
    let mock = MockServer::start(vec![text_reply("hello from the mock")]);
    let base = mock.base_url();
    let env = keys_only(&[
        ("ANTHROPIC_API_KEY", "sk-ant-e2e"),
        ("ANTHROPIC_BASE_URL", &base),
    ]);
    let out = env.run(&["-p", "hi"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("hello from the mock"), "{out:?}");
    assert!(
        !out.stderr.contains("both"),
        "no notice for one key: {}",
        out.stderr
    );
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].flavor, Some(Flavor::Anthropic));
    assert!(reqs[0].path.ends_with("/v1/messages"), "{}", reqs[0].path);
    assert_eq!(model_of(&reqs[0]), "claude-sonnet-4-5");
    assert!(reqs[0].has_api_key && reqs[0].header("x-api-key").is_some());
}

#[test]
fn openai_api_key_alone_runs_a_turn_on_the_responses_api() {
    let mock = MockServer::start(vec![text_reply("hello from responses")]);
    let base = format!("{}/v1", mock.base_url());
    let env = keys_only(&[("OPENAI_API_KEY", "sk-e2e"), ("OPENAI_BASE_URL", &base)]);
    let out = env.run(&["-p", "hi"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(out.stdout.contains("hello from responses"), "{out:?}");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1);
    assert_eq!(reqs[0].flavor, Some(Flavor::Openai));
    assert!(reqs[0].path.ends_with("/v1/responses"), "{}", reqs[0].path);
    assert_eq!(model_of(&reqs[0]), "gpt-5");
    assert!(reqs[0].header("authorization").is_some());
}

#[test]
fn with_both_keys_anthropic_wins_and_says_so_and_a_flag_chooses() {
    let mock = MockServer::start(vec![text_reply("one"), text_reply("two")]);
    let base = mock.base_url();
    let openai_base = format!("{base}/v1");
    let env = keys_only(&[
        ("ANTHROPIC_API_KEY", "sk-ant-e2e"),
        ("ANTHROPIC_BASE_URL", &base),
        ("OPENAI_API_KEY", "sk-e2e"),
        ("OPENAI_BASE_URL", &openai_base),
    ]);
    let out = env.run(&["-p", "hi"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(
        out.stderr
            .contains("both ANTHROPIC_API_KEY and OPENAI_API_KEY are set")
            && out.stderr.contains("using anthropic")
            && out.stderr.contains("--provider openai"),
        "{}",
        out.stderr
    );
    assert_eq!(mock.requests()[0].flavor, Some(Flavor::Anthropic));
    // The flag overrides the keys, and there is nothing to tell.
    let out = env.run(&["-p", "hi", "--provider", "openai", "--model", "gpt-5-mini"]);
    assert_eq!(out.code, Some(0), "{out:?}");
    assert!(!out.stderr.contains("both"), "{}", out.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs[1].flavor, Some(Flavor::Openai));
    assert_eq!(model_of(&reqs[1]), "gpt-5-mini");
}

#[test]
fn the_stdio_hello_and_stream_are_unchanged_by_a_key_only_setup() {
    let mock = MockServer::start(vec![text_reply("hi there")]);
    let base = mock.base_url();
    let env = keys_only(&[
        ("ANTHROPIC_API_KEY", "sk-ant-e2e"),
        ("ANTHROPIC_BASE_URL", &base),
    ]);
    let mut s = env.stdio(&[]);
    assert_eq!(s.hello["protocol_version"], 6);
    s.user("hi");
    let (evs, reason) = s.turn();
    assert_eq!(tokens(&evs), "hi there");
    assert_eq!(reason, Flavor::Anthropic.default_finish(false));
    let (code, _, _) = s.finish();
    assert_eq!(code, Some(0));
}

#[test]
fn no_key_names_what_to_set_and_the_real_config_path() {
    let env = keys_only(&[]);
    // $OPENMAX_HOME unset: the state root is ~/.openmax, and the message says so.
    let mut c = env.command(&["-p", "hi"]);
    c.env_remove("OPENMAX_HOME");
    c.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_child(c.spawn().unwrap());
    assert_eq!(out.code, Some(1), "{out:?}");
    assert!(
        out.stderr.contains("no provider configured")
            && out.stderr.contains("ANTHROPIC_API_KEY")
            && out.stderr.contains("OPENAI_API_KEY")
            && out.stderr.contains("~/.openmax/config.toml")
            && !out.stderr.contains("$OPENMAX_HOME"),
        "{}",
        out.stderr
    );
    // $OPENMAX_HOME set: its real path.
    let out = env.run(&["-p", "hi"]);
    let shown = env.home.join("config.toml").display().to_string();
    assert!(out.stderr.contains(&shown), "{}", out.stderr);
}

#[test]
fn a_refused_connection_names_the_provider_and_the_url() {
    let url = unused_loopback_url().unwrap();
    let env = keys_only(&[
        ("ANTHROPIC_API_KEY", "sk-ant-e2e"),
        ("ANTHROPIC_BASE_URL", &url),
    ]);
    let (evs, error) = failed_turn(&env);
    let endpoint = format!("anthropic at {url}/v1/messages");
    assert!(
        error.contains(&format!("could not connect to {endpoint}")),
        "{error}"
    );
    let retry = find(&evs, "retry")["reason"].as_str().unwrap().to_string();
    assert!(retry.contains(&endpoint), "{retry}");
}

/// A provider whose listener never completes the handshake (its backlog full, nothing
/// accepting: the kernel drops each SYN) is a connection that never reached the server once
/// the connect timeout (10 s) passes, named like a refused one, not a turn that waits on.
#[test]
fn a_connect_that_is_never_answered_ends_at_the_connect_timeout() {
    use std::os::fd::AsRawFd;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    // SAFETY: listen(2) again on our own listening socket, to set its backlog to one.
    assert_eq!(unsafe { libc::listen(listener.as_raw_fd(), 0) }, 0);
    let addr = listener.local_addr().unwrap();
    let _queued = std::net::TcpStream::connect(addr).unwrap();
    let url = format!("http://{addr}");
    let env = keys_only(&[(KEY_VAR, "test-key")]);
    env.user_config(&format!(
        "[provider]\nname = \"anthropic\"\nmodel = \"test-model\"\nbase_url = \"{url}\"\n\
         api_key_env = \"{KEY_VAR}\"\nmax_attempts = 1\n"
    ));
    let (_, error) = failed_turn(&env);
    // The connect timeout's own words (the kernel gives up on its own only after about two
    // minutes of SYN retries, as "Connection timed out").
    assert!(
        error.contains(&format!(
            "could not connect to anthropic at {url}/v1/messages"
        )) && error.contains("tcp connect error: deadline has elapsed"),
        "{error}"
    );
}

#[test]
fn a_501_html_page_is_one_short_line() {
    let page = format!(
        "<!DOCTYPE html>\n<html>\n<head>\n<title>501 Not Implemented</title>\n<style>\nbody {{ width: 35em; }}\n</style>\n</head>\n<body>\n<center><h1>501 Not Implemented</h1></center>\n<hr><center>nginx/1.24.0</center>\n{}\n</body>\n</html>\n",
        "<!-- a padding comment -->\n".repeat(50) + &"<p>lorem ipsum dolor</p>\n".repeat(40)
    );
    assert!(page.len() > 2000);
    let html = |body: &str| Reply::RawStatus {
        status: 501,
        body: body.to_string(),
    };
    let mock = MockServer::start(vec![html(&page), html(&page)]);
    let base = mock.base_url();
    let env = keys_only(&[
        ("ANTHROPIC_API_KEY", "sk-ant-e2e"),
        ("ANTHROPIC_BASE_URL", &base),
    ]);
    let (_, error) = failed_turn(&env);
    assert!(
        error.starts_with("HTTP 501: 501 Not Implemented 501 Not Implemented nginx/1.24.0 lorem"),
        "{error}"
    );
    assert!(
        !error.contains('<') && !error.contains('\n') && !error.contains("width"),
        "{error}"
    );
    assert!(error.chars().count() <= "HTTP 501: ".len() + 201, "{error}");
    let out = env.run(&["-p", "hi"]);
    let last: Vec<&str> = out.stderr.lines().filter(|l| l.contains("501")).collect();
    assert!(
        last.iter().all(|l| l.len() < 300 && !l.contains('<')),
        "{}",
        out.stderr
    );
}
