//! The provider key never leaves openmax: through the real binary and the loopback mock, its
//! value is put in every kind of text that reaches the client, the model or the disk (a shell
//! call's output, an external tool's output, an MCP result and an MCP error, an MCP server's
//! failure to start, a hook's refusal reason and failure detail, a `tool_start` hook's
//! rewritten arguments, the provider's error message in a failed response and inside a
//! stream), and must appear nowhere: not on stdout, not on stderr, not in any request body the
//! model reads, not in any file under `$OPENMAX_HOME`.
//!
//! And it can never be granted by name: an external tool whose manifest asks for the key's
//! variable, and the user's own `[sandbox] env_allow` naming it, still run without it.
//!
//! Nor is it in openmax's own environment once it has started (`/proc/<pid>/environ`, which
//! any process of the user may read).

use std::path::Path;

use openmax_tests::*;
use serde_json::{json, Value};

/// The key's value in these tests: long and distinctive, so a leak cannot hide.
const KEY: &str = "sk-omx-secret-value-4242";

fn write(dir: &Path, rel: &str, text: &str) {
    let p = dir.join(rel);
    std::fs::create_dir_all(p.parent().unwrap()).unwrap();
    std::fs::write(p, text).unwrap();
}

/// A trusted project in auto mode with the key set, a user config for `mock` with `extra`
/// appended, and the project's external tool `leak`.
fn setup(mock: &MockServer, extra: &str) -> TestEnv {
    let mut env = TestEnv::new();
    env.env.retain(|(k, _)| k != KEY_VAR);
    env.env.push((KEY_VAR.to_string(), KEY.to_string()));
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    let mut text = std::fs::read_to_string(env.home.join("config.toml")).unwrap();
    text.push_str(extra);
    env.user_config(&text);
    write(
        &env.project,
        ".openmax/tools/leak.json",
        &format!(
            r#"{{"name":"leak","description":"Print things","parameters":{{"type":"object"}},"command":["sh","tools/leak.sh"],"env":["{KEY_VAR}"],"mutating":false}}"#
        ),
    );
    // The tool prints the key it was not given (put together, standing for a key it found)
    // and whether its environment holds the variable. (No file the test writes holds the key
    // whole, so any file under $OPENMAX_HOME that does is openmax's doing.)
    write(
        &env.project,
        "tools/leak.sh",
        &format!(
            "printf 'tool says %s%s\\n' {} {}; echo \"granted=${{{KEY_VAR}:-none}}\"\n",
            &KEY[..6],
            &KEY[6..]
        ),
    );
    env.trust();
    env.set_mode("auto");
    env
}

/// Answer every approval request (approved) until `done`; every event seen.
fn turn(s: &mut Session) -> Vec<Value> {
    let mut evs = Vec::new();
    loop {
        let e = s.event();
        if e["type"] == "approval_request" {
            s.approve(&e["approval_id"], true);
        }
        let done = e["type"] == "done";
        evs.push(e);
        if done {
            return evs;
        }
    }
}

/// Every place under `dir` whose bytes hold the key.
fn files_holding_key(dir: &Path) -> Vec<String> {
    files_under(dir, |_| true)
        .into_iter()
        .filter(|p| {
            std::fs::read(p)
                .map(|b| String::from_utf8_lossy(&b).contains(KEY))
                .unwrap_or(false)
        })
        .map(|p| p.display().to_string())
        .collect()
}

#[test]
fn the_key_is_redacted_wherever_text_leaves_openmax() {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("mcp/leaky_server.py");
    let mock = MockServer::start(vec![
        tool_calls_reply(&[
            // The model's own words never hold the key (what the model wrote is not
            // rewritten, docs/security.md): the shell puts it together.
            (
                "c1",
                "shell",
                json!({"command": format!("printf 'shell says %s%s\\n' {} {}", &KEY[..6], &KEY[6..])}),
            ),
            ("c2", "leak", json!({})),
            ("c3", "mcp__s__say", json!({})),
            ("c4", "mcp__s__say", json!({"error": true})),
            ("c5", "shell", json!({"command": "echo rewrite me"})),
        ]),
        text_reply("first answer"),
        text_reply("second answer"),
        // The provider's error message names the key, as a proxy echoing the header would.
        Reply::Status {
            status: 401,
            retry_after: None,
            error: Some("authentication_error".into()),
            message: Some(format!("invalid x-api-key: {KEY}")),
        },
        Reply::Stream {
            items: vec![StreamItem::Text {
                text: "partial ".into(),
            }],
            end: StreamEnd::Error {
                error: "invalid_request_error".into(),
                message: format!("upstream rejected {KEY}"),
            },
            delay_ms: 0,
        },
    ]);
    // Hooks and servers of the user config (no approval needed for the user's own code).
    let dir = std::env::temp_dir().join(format!("omx-secrets-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let w = |name: &str, body: String| {
        let p = dir.join(name);
        std::fs::write(&p, body).unwrap();
        p.display().to_string()
    };
    let refuse = w(
        "refuse.sh",
        format!(
            "n=$(cat '{d}/n' 2>/dev/null || echo 0); n=$((n+1)); echo $n > '{d}/n'\n\
             if [ $n -le 1 ]; then echo \"refused: {KEY}\" >&2; exit 2; fi\n",
            d = dir.display()
        ),
    );
    let fail = w("fail.sh", format!("echo \"broken: {KEY}\" >&2; exit 1\n"));
    let rewrite = w(
        "rewrite.sh",
        format!(
            "if grep -q 'rewrite me' ; then \
             echo '{{\"decision\":\"rewrite\",\"args\":{{\"command\":\"echo {KEY}\"}}}}'; fi\n"
        ),
    );
    let extra = format!(
        "\n[[hooks]]\nevent = \"turn_end\"\ncommand = [\"sh\", \"{refuse}\"]\nblocking = true\n\
         \n[[hooks]]\nevent = \"user_prompt_submit\"\ncommand = [\"sh\", \"{fail}\"]\n\
         \n[[hooks]]\nevent = \"tool_start\"\nmatch = \"shell\"\ncommand = [\"sh\", \"{rewrite}\"]\nblocking = true\n\
         \n[mcp_servers.s]\ncommand = \"python3\"\nargs = [{script:?}, \"say\", {k1:?}, {k2:?}]\n\
         \n[mcp_servers.bad]\ncommand = \"python3\"\nargs = [{script:?}, \"fail\", {k1:?}, {k2:?}]\n\
         \n[sandbox]\nenv_allow = [\"{KEY_VAR}\"]\n",
        script = script.display().to_string(),
        k1 = &KEY[..6],
        k2 = &KEY[6..],
    );
    let env = setup(&mock, &extra);
    let mut s = env.stdio(&[]);
    let mut seen = Vec::new();
    s.user("go");
    let first = turn(&mut s);
    seen.extend(first.iter().cloned());
    s.user("again");
    seen.extend(turn(&mut s));
    s.user("and again");
    seen.extend(turn(&mut s));
    let (code, rest, stderr) = s.finish();
    seen.extend(rest);
    assert!(code.is_some(), "openmax ended: {stderr}");
    let _ = std::fs::remove_dir_all(&dir);

    // Each kind of text was produced (else the test would pass by leaking nothing).
    let has =
        |ty: &str, pred: &dyn Fn(&Value) -> bool| seen.iter().any(|e| e["type"] == ty && pred(e));
    let out = |e: &Value| e["output"].as_str().unwrap_or("").to_string();
    assert!(
        has("tool_end", &|e| out(e).contains("shell says [redacted]")),
        "{seen:#?}"
    );
    assert!(
        has("tool_end", &|e| out(e).contains("tool says [redacted]")),
        "{seen:#?}"
    );
    assert!(
        has("tool_end", &|e| out(e).contains("the text is [redacted]")),
        "{seen:#?}"
    );
    assert!(
        has("tool_end", &|e| out(e).contains("failed with [redacted]")),
        "{seen:#?}"
    );
    assert!(
        has("turn_refused", &|e| e["reason"]
            .as_str()
            .unwrap_or("")
            .contains("[redacted]")),
        "{seen:#?}"
    );
    assert!(has("hook_failed", &|_| true), "{seen:#?}");
    assert!(
        has("harness_note", &|e| e.to_string().contains("bad")),
        "{seen:#?}"
    );
    assert!(has("error", &|_| true), "{seen:#?}");
    // Never granted by name: not by the manifest's env, not by the user's env_allow.
    assert!(
        has("tool_end", &|e| out(e).contains("granted=none")),
        "{seen:#?}"
    );

    let leaks: Vec<String> = seen
        .iter()
        .map(Value::to_string)
        .filter(|l| l.contains(KEY))
        .collect();
    assert!(leaks.is_empty(), "the key on stdout:\n{}", leaks.join("\n"));
    assert!(!stderr.contains(KEY), "the key on stderr:\n{stderr}");
    for (i, r) in mock.requests().iter().enumerate() {
        assert!(
            !r.body.to_string().contains(KEY),
            "the key in request {i}'s body: {}",
            r.body
        );
    }
    let files = files_holding_key(&env.home);
    assert!(
        files.is_empty(),
        "the key in files under $OPENMAX_HOME: {files:?}"
    );
}

/// The key is out of openmax's own environment from its start: `/proc/<pid>/environ`, which
/// any process of the same user may read, holds neither the configured `api_key_env` nor a
/// provider's default variable, names or values. The control: a process started with the
/// same environment shows both there.
#[test]
fn the_key_is_not_in_openmaxs_own_environment() {
    const DEFAULT_VAR_VALUE: &str = "sk-omx-default-variable-value-77";
    let mock = MockServer::start(vec![text_reply("ok")]);
    let mut env = setup(&mock, "");
    env.env
        .push(("ANTHROPIC_API_KEY".into(), DEFAULT_VAR_VALUE.into()));
    let environ_of = |pid: u32| {
        let bytes = std::fs::read(format!("/proc/{pid}/environ")).unwrap();
        String::from_utf8_lossy(&bytes).replace('\0', "\n")
    };
    let mut control = std::process::Command::new("sleep");
    control.arg("60").envs(env.env.iter().map(|(k, v)| (k, v)));
    let mut control = control.spawn().unwrap();
    // Read once the new program's environment is in place: `spawn` returns as the exec
    // begins, and for a moment after that the file reads empty.
    let mut shown = String::new();
    for _ in 0..500 {
        shown = environ_of(control.id());
        if shown.contains("PATH=") {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    let _ = control.kill();
    let _ = control.wait();
    for text in [KEY, DEFAULT_VAR_VALUE] {
        assert!(shown.contains(text), "the control shows {text}");
    }

    let mut s = env.stdio(&[]);
    s.user("hello");
    let (_, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    let own = environ_of(s.pid());
    // What is not a key stays (the read itself works).
    assert!(own.contains("OPENMAX_HOME="), "{own}");
    for text in [
        KEY,
        DEFAULT_VAR_VALUE,
        &format!("{KEY_VAR}="),
        "ANTHROPIC_API_KEY=",
    ] {
        assert!(
            !own.contains(text),
            "{text} in openmax's environment:\n{own}"
        );
    }
    s.finish();
}
