//! End to end: `-p` for scripts and CI, and a command line that explains itself. Each output
//! format parsed (`json`'s object with usage summed over the run and its cost; `stream-json`'s
//! lines through the validator and through `openmax --check --stdio`); `--output-schema` with
//! a valid answer, an invalid then valid one (the follow-up turn carries the validator's
//! message), and two invalid ones (exit 5); `--mode` for one run, never saved, and an
//! agent-spawned run refused a looser mode (exit 77); `-p -` from stdin; a declined call
//! (exit 3, naming the tool and `--mode auto`); argument errors (exit 64); each subcommand's
//! own `--help`; and the README's exit-code table against the code's.

use openmax_tests::*;
use serde_json::{json, Value};

/// A trusted project on a mock `flavor` server with `replies`; `extra` goes in `[provider]`.
fn setup(flavor: Flavor, replies: Vec<Reply>, extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), extra);
    env.trust();
    (env, mock)
}

/// A completed stream: `items`, then the usage it reports.
fn with_usage(mut items: Vec<StreamItem>, p: u64, c: u64, cached: Option<u64>) -> Reply {
    items.push(StreamItem::Usage {
        prompt_tokens: p,
        completion_tokens: c,
        cached_tokens: cached,
    });
    Reply::Stream {
        items,
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

fn text(t: &str) -> StreamItem {
    StreamItem::Text { text: t.into() }
}

fn call(id: &str, name: &str, args: Value) -> StreamItem {
    StreamItem::ToolCall {
        id: id.into(),
        name: name.into(),
        args,
    }
}

/// The stdout lines of a `stream-json` run, each checked by the validator as a whole stream.
fn stream_lines(out: &RunOutput) -> Vec<String> {
    let lines: Vec<String> = out.stdout.lines().map(str::to_string).collect();
    assert_valid(&lines, &out.stderr);
    lines
}

fn parse_json(out: &RunOutput) -> Value {
    serde_json::from_str(out.stdout.trim())
        .unwrap_or_else(|e| panic!("stdout is not one JSON object ({e}): {out:?}"))
}

#[test]
fn json_reports_the_last_reply_usage_summed_over_the_run_calls_and_cost() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![
            with_usage(
                vec![
                    text("Reading it first."),
                    call("c1", "read_file", json!({"path":"a.txt"})),
                ],
                1_000,
                100,
                Some(0),
            ),
            with_usage(vec![text("It says hello.")], 3_000, 200, Some(2_000)),
        ],
        "price_in = 3.0\nprice_out = 15.0\nprice_cached_in = 0.3\n",
    );
    env.write("a.txt", "hello\n");
    let out = env.run(&["-p", "what does a.txt say?", "--output-format", "json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let o = parse_json(&out);
    assert_eq!(o["type"], "result");
    assert_eq!(
        o["result"], "It says hello.",
        "the last reply, not all text"
    );
    assert_eq!(o["stop_reason"], "end_turn");
    assert_eq!(o["exit_code"], 0);
    assert_eq!(o["turns"], 1);
    assert_eq!(o["tool_calls"], 1);
    assert_eq!(
        o["usage"],
        json!({"prompt_tokens":4000,"completion_tokens":300,"cached_tokens":2000,"requests":2})
    );
    // (4000 − 2000) × 3 + 2000 × 0.3 + 300 × 15, per million.
    let cost = o["cost"].as_f64().expect("a cost");
    assert!((cost - 0.0111).abs() < 1e-12, "{cost}");
    assert_eq!(o["declined"], json!([]));
    assert_eq!(o["error"], Value::Null);
    assert_eq!(o["structured_output"], Value::Null);
    // The session is the one on disk.
    let sid = o["session_id"].as_str().unwrap();
    assert!(env.record_path(sid).exists());
    // The reply text is not streamed to stdout in this format; notices still go to stderr.
    assert_eq!(out.stdout.lines().count(), 1, "{}", out.stdout);
    assert!(out.stderr.contains("→ read_file"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 2);
}

#[test]
fn json_cost_is_null_without_prices_and_text_stays_the_default() {
    let (env, _mock) = setup(
        Flavor::OpenaiChat,
        vec![text_reply("plain"), text_reply("plain again")],
        "",
    );
    let o = parse_json(&env.run(&["-p", "q", "--output-format", "json"]));
    assert_eq!(o["cost"], Value::Null);
    assert_eq!(o["result"], "plain");
    let out = env.run(&["-p", "q"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "plain again\n");
}

#[test]
fn stream_json_is_the_stdio_wire_and_passes_check() {
    let (env, mock) = setup(
        Flavor::Openai,
        vec![
            tool_reply("c1", "read_file", json!({"path":"a.txt"})),
            text_reply("done reading"),
            text_reply("continued"),
        ],
        "",
    );
    env.write("a.txt", "x\n");
    let out = env.run(&["-p", "read a.txt", "--output-format", "stream-json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = stream_lines(&out);
    let evs: Vec<Value> = lines
        .iter()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(evs[0]["type"], "hello");
    assert_eq!(evs[0]["continued"], false);
    let t = types(&evs);
    for want in ["tool_start", "tool_end", "message_done", "usage", "done"] {
        assert!(t.contains(&want.to_string()), "{t:?}");
    }
    assert_eq!(t.last().unwrap(), "done");
    assert_eq!(tokens(&evs), "done reading");
    // The binary's own validator agrees.
    let check = env.run_with_stdin(&["--check", "--stdio"], out.stdout.as_bytes());
    assert_eq!(check.code, Some(0), "{}", check.stdout);

    // With --continue: hello says so and the transcript line follows, as over --stdio.
    let out = env.run(&["-p", "more", "--continue", "--output-format", "stream-json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let lines = stream_lines(&out);
    let hello: Value = serde_json::from_str(&lines[0]).unwrap();
    let transcript: Value = serde_json::from_str(&lines[1]).unwrap();
    assert_eq!(hello["continued"], true);
    assert_eq!(hello["session_id"], evs[0]["session_id"]);
    assert_eq!(transcript["type"], "transcript");
    assert_eq!(transcript["messages"][0]["content"], "read a.txt");
    assert_eq!(mock.requests().len(), 3);
}

const SCHEMA: &str = r#"{
  "type": "object",
  "properties": {"name": {"type": "string"}, "n": {"type": "integer", "minimum": 1}},
  "required": ["name", "n"],
  "additionalProperties": false
}"#;

#[test]
fn output_schema_a_valid_answer_is_the_whole_stdout() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![text_reply("```json\n{\"name\": \"x\", \"n\": 3}\n```")],
        "",
    );
    env.write("schema.json", SCHEMA);
    let out = env.run(&["-p", "name one thing", "--output-schema", "schema.json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "{\"name\":\"x\",\"n\":3}\n");
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 1, "no second try");
    // The model was told the schema with the prompt.
    let body = reqs[0].body.to_string();
    assert!(
        body.contains("name one thing") && body.contains("valid against this JSON Schema"),
        "{body}"
    );
    assert!(body.contains("additionalProperties"), "{body}");
}

#[test]
fn output_schema_an_invalid_answer_is_sent_back_once_with_the_validators_message() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![
            text_reply("{\"name\": \"x\"}"),
            text_reply("{\"name\": \"x\", \"n\": 2}"),
        ],
        "",
    );
    env.write("schema.json", SCHEMA);
    let out = env.run(&[
        "-p",
        "name one thing",
        "--output-schema",
        "schema.json",
        "--output-format",
        "json",
    ]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let o = parse_json(&out);
    assert_eq!(o["structured_output"], json!({"name":"x","n":2}));
    assert_eq!(o["schema_errors"], json!([]));
    assert_eq!(o["turns"], 2);
    assert!(out.stderr.contains("asking once more"), "{}", out.stderr);
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    // The second request is the same session (the first answer is in it) with a new user
    // turn carrying the validator's message.
    let second = reqs[1].body.to_string();
    assert!(
        second.contains("Your answer is not valid against the JSON Schema"),
        "{second}"
    );
    assert!(second.contains("is a required property"), "{second}");
    assert!(second.contains("name one thing"), "{second}");
    let msgs = reqs[1].body["messages"].as_array().unwrap();
    assert_eq!(msgs.len(), 3, "user, assistant, user: {second}");
}

#[test]
fn output_schema_invalid_twice_exits_5_with_nothing_on_stdout() {
    let (env, mock) = setup(
        Flavor::OpenaiChat,
        vec![
            text_reply("not json at all"),
            text_reply("{\"name\": 7, \"n\": 0}"),
        ],
        "",
    );
    env.write("schema.json", SCHEMA);
    let out = env.run(&["-p", "q", "--output-schema", "schema.json"]);
    assert_eq!(out.code, Some(5), "{}", out.stderr);
    assert_eq!(out.stdout, "");
    assert!(out.stderr.contains("still not valid"), "{}", out.stderr);
    assert!(out.stderr.contains("/name"), "{}", out.stderr);
    assert_eq!(mock.requests().len(), 2, "asked exactly once more");
    let second = mock.requests()[1].body.to_string();
    assert!(second.contains("the answer is not JSON"), "{second}");

    // The same through stream-json: the wire of both turns, valid, and exit 5.
    mock.push(text_reply("nope"));
    mock.push(text_reply("nope again"));
    let out = env.run(&[
        "-p",
        "q",
        "--output-schema",
        "schema.json",
        "--output-format",
        "stream-json",
    ]);
    assert_eq!(out.code, Some(5), "{}", out.stderr);
    let lines = stream_lines(&out);
    assert_eq!(lines.iter().filter(|l| l.contains("\"done\"")).count(), 2);
}

#[test]
fn a_bad_output_schema_is_a_usage_error_before_anything_starts() {
    let (env, mock) = setup(Flavor::Anthropic, vec![], "");
    env.write("broken.json", "{\"type\": 5}");
    env.write("notjson.json", "type: object");
    for (file, says) in [
        ("broken.json", "not a valid JSON Schema"),
        ("notjson.json", "not JSON"),
        ("missing.json", "missing.json"),
    ] {
        let out = env.run(&["-p", "q", "--output-schema", file]);
        assert_eq!(out.code, Some(64), "{file}: {}", out.stderr);
        assert!(out.stderr.contains(says), "{file}: {}", out.stderr);
    }
    assert!(mock.requests().is_empty());
}

/// The project's saved mode as a later `--stdio` session sees it: whether a write asks.
fn write_asks_over_stdio(env: &TestEnv, mock: &MockServer, path: &str) -> bool {
    mock.push(tool_reply(
        "w2",
        "write_file",
        json!({"path": path, "content":"later\n"}),
    ));
    mock.push(text_reply("ok"));
    let mut s = env.stdio(&[]);
    s.user("write again");
    let evs = s.until(|e| e["type"] == "approval_request" || e["type"] == "done");
    let asked = evs.last().unwrap()["type"] == "approval_request";
    if asked {
        let id = evs.last().unwrap()["approval_id"].clone();
        s.approve(&id, false);
        s.turn();
    }
    assert_eq!(s.finish().0, Some(0));
    asked
}

#[test]
fn mode_auto_runs_a_write_for_this_run_only() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![
            tool_reply(
                "w",
                "write_file",
                json!({"path":"n.txt","content":"auto\n"}),
            ),
            text_reply("written"),
        ],
        "",
    );
    let out = env.run(&["-p", "write n.txt", "--mode", "auto"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(env.read("n.txt").as_deref(), Some("auto\n"));
    assert!(!out.stderr.contains("declined"), "{}", out.stderr);
    // Nothing was saved: no mode file, and the next session still asks.
    let saved = files_under(&env.home.join("projects"), |p| p.ends_with("mode.json"));
    assert!(saved.is_empty(), "a -p run saved a mode: {saved:?}");
    assert!(write_asks_over_stdio(&env, &mock, "m.txt"));
    assert!(!env.project.join("m.txt").exists());
}

#[test]
fn mode_readonly_tightens_a_saved_auto_for_one_run() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![
            tool_reply("w", "write_file", json!({"path":"n.txt","content":"x\n"})),
            text_reply("refused, fine"),
        ],
        "",
    );
    env.set_mode("auto");
    let out = env.run(&["-p", "write", "--mode", "readonly"]);
    // Refused by policy without asking: not a declined approval, so exit 0.
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(!env.project.join("n.txt").exists());
    assert!(!write_asks_over_stdio(&env, &mock, "m.txt"), "still auto");
    assert_eq!(env.read("m.txt").as_deref(), Some("later\n"));
}

#[test]
fn an_agent_spawned_run_cannot_loosen_the_saved_mode() {
    let (mut env, mock) = setup(Flavor::Anthropic, vec![text_reply("stricter is fine")], "");
    env.env
        .push(("OPENMAX_AGENT_SESSION".into(), "parent-session".into()));
    // Nothing saved: the project's mode is ask; auto would loosen it.
    let out = env.run(&["-p", "write", "--mode", "auto"]);
    assert_eq!(out.code, Some(77), "{}", out.stderr);
    assert!(
        out.stderr
            .contains("--mode auto would loosen this project's mode ask")
            && out.stderr.contains("OPENMAX_AGENT_SESSION"),
        "{}",
        out.stderr
    );
    assert_eq!(out.stdout, "");
    assert!(mock.requests().is_empty(), "nothing was sent");
    // An equal or stricter mode is the agent's to choose.
    let out = env.run(&["-p", "look", "--mode", "readonly"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "stricter is fine\n");
}

#[test]
fn dash_reads_the_prompt_from_stdin() {
    let (env, mock) = setup(Flavor::Anthropic, vec![text_reply("got it")], "");
    let prompt = "line one: ünïcode\nline two\n";
    let out = env.run_with_stdin(&["-p", "-"], prompt.as_bytes());
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, "got it\n");
    let body = &mock.requests()[0].body;
    assert!(
        body.to_string().contains("line one: ünïcode\\nline two"),
        "{body}"
    );
    for (input, says) in [
        (&b"bad \xff byte"[..], "not valid UTF-8"),
        (&b"  \n "[..], "empty"),
        (&b""[..], "empty"),
    ] {
        let out = env.run_with_stdin(&["-p", "-"], input);
        assert_eq!(out.code, Some(64), "{}", out.stderr);
        assert!(out.stderr.contains(says), "{}", out.stderr);
    }
    assert_eq!(mock.requests().len(), 1, "no bad prompt was sent");
}

#[test]
fn a_declined_call_exits_3_naming_the_tool_and_mode_auto() {
    let (env, _mock) = setup(
        Flavor::Anthropic,
        vec![
            tool_reply("w", "write_file", json!({"path":"n.txt","content":"x\n"})),
            text_reply("could not"),
            tool_reply("w", "write_file", json!({"path":"n.txt","content":"x\n"})),
            text_reply("could not"),
        ],
        "",
    );
    let out = env.run(&["-p", "write", "--output-format", "json"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(
        out.stderr.contains("write_file") && out.stderr.contains("--mode auto"),
        "{}",
        out.stderr
    );
    assert!(!out.stderr.contains("approval_mode"), "{}", out.stderr);
    let o = parse_json(&out);
    assert_eq!(o["exit_code"], 3);
    assert_eq!(o["declined"][0]["name"], "write_file");
    assert_eq!(o["declined"][0]["reason"], "gate");
    assert!(!env.project.join("n.txt").exists());
    // stream-json: the wire shows the request and its decline; stderr names the tool.
    let out = env.run(&["-p", "write", "--output-format", "stream-json"]);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    let lines = stream_lines(&out);
    assert!(lines.iter().any(|l| l.contains("\"approval_settled\"")));
    assert!(
        out.stderr.contains("tool write_file") && out.stderr.contains("--mode auto"),
        "{}",
        out.stderr
    );
}

#[test]
fn argument_errors_exit_64_and_help_and_version_exit_0() {
    let env = TestEnv::new();
    for args in [
        vec!["--no-such-flag"],
        vec!["-p"],
        vec!["--stdio", "-p", "x"],
        vec!["-p", "x", "--mode", "yolo"],
        vec!["-p", "x", "--output-format", "xml"],
        vec!["--mode", "auto"],
        vec!["--stdio", "--json"],
        vec!["sessions", "repair", "--json"],
        vec!["mcp"],
        vec!["mcp", "lists"],
        vec!["sandbox"],
        vec!["frobnicate"],
        vec!["--stdio", "sessions"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.code, Some(64), "{args:?}: {}", out.stderr);
        assert!(!out.stderr.is_empty(), "{args:?}");
    }
    // The common options go with a command, before or after it.
    let project = env.project.to_str().unwrap();
    for args in [
        vec!["--project", project, "sessions"],
        vec!["sessions", "--project", project, "--json"],
        vec!["sessions", "--project", project, "repair"],
    ] {
        let out = env.run(&args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
    }
    for args in [vec!["--help"], vec!["-h"], vec!["--version"], vec!["help"]] {
        let out = env.run(&args);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
}

#[test]
fn help_says_what_openmax_is_and_each_subcommand_has_its_own() {
    let env = TestEnv::new();
    let top = env.run(&["--help"]).stdout;
    assert!(
        top.starts_with("openmax: a coding agent in your terminal"),
        "{top}"
    );
    for says in [
        "the interactive terminal UI",
        "openmax -p PROMPT",
        "openmax --stdio",
        "openmax --acp",
        "Exit codes:",
    ] {
        assert!(top.contains(says), "{says}: {top}");
    }
    assert!(!top.contains("tokio"), "{top}");
    let mut seen = vec![top];
    for (args, says) in [
        (vec!["sessions"], "the one used last first"),
        (
            vec!["sessions", "repair"],
            "Rebuild this project's session index",
        ),
        (vec!["mcp"], "The MCP servers"),
        (vec!["mcp", "list"], "Start the configured MCP servers"),
        (vec!["sandbox"], "The sandbox every process"),
        (
            vec!["sandbox", "check"],
            "Build this project's sandbox once",
        ),
    ] {
        let mut argv = args.clone();
        argv.push("--help");
        let out = env.run(&argv);
        assert_eq!(out.code, Some(0), "{args:?}: {}", out.stderr);
        let help = out.stdout;
        assert!(
            help.lines().next().unwrap().contains(says),
            "{args:?}: {help}"
        );
        assert!(
            help.contains(&format!("Usage: openmax {}", args.join(" "))),
            "{args:?}: {help}"
        );
        assert!(!seen.contains(&help), "{args:?} repeats another help");
        seen.push(help);
    }
}

/// The README's exit-code table lists exactly the codes `openmax` has (`exit::TABLE`,
/// which `--help` prints), and each is produced by a named test: 0 and most others here; 1 by
/// `cli.rs` `print_mode_exits_1_when_the_turn_ends_error`; 2 by `cli.rs`
/// `continue_without_a_session_exits_2`; 4 by `cli.rs` `print_mode_exits_4_on_max_iterations`;
/// 130 by `shutdown_e2e.rs` `a_second_sigterm_exits_130_and_kills_the_mcp_servers_process_groups`;
/// 101 (a panic) by none, as no input may cause one.
#[test]
fn the_readme_lists_every_exit_code() {
    let readme = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../README.md"))
        .expect("README.md");
    let section = readme
        .split("\n## Exit codes\n")
        .nth(1)
        .expect("an Exit codes section")
        .split("\n## ")
        .next()
        .unwrap();
    let listed: Vec<i32> = section
        .lines()
        .filter_map(|l| l.strip_prefix("| "))
        .filter_map(|l| l.split(" |").next()?.trim().parse().ok())
        .collect();
    let codes: Vec<i32> = openmax_shell::exit::TABLE.iter().map(|(c, _)| *c).collect();
    assert_eq!(listed, codes, "README rows vs app::exit::TABLE");
    let help = TestEnv::new().run(&["--help"]).stdout;
    for c in codes {
        assert!(
            help.contains(&format!("{c:>5}  ")),
            "--help lacks {c}: {help}"
        );
    }
}
