//! What approving a project MCP server covers, field by field ([`gate::source_sha256`] and the
//! plan's [`SourceGate`]): every key of a `[mcp_servers.<name>]` table and of a `.mcp.json`
//! entry, and every project file its command and args name, changed in turn, changes the sha
//! and makes the gate ask again. The key lists are read from the parsers' own "unknown key"
//! errors, so a key added without a row here fails. And how a call is planned: read-only only
//! when the server says so (`readOnlyHint: true`, not `destructiveHint: true`), mutating
//! otherwise, including every tool of a server not yet started.

use std::path::PathBuf;
use std::sync::Arc;

use serde_json::json;

use super::config::{parse_mcp_json, parse_toml_entry};
use super::*;

struct Project {
    root: PathBuf,
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn project() -> Project {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = std::env::temp_dir().join(format!("omx-mcp-gate-{}-{n}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("srv")).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("srv/server.sh"), "exec node srv/main.js\n").unwrap();
    std::fs::write(root.join("srv/main.js"), "// server\n").unwrap();
    std::fs::write(root.join("srv/run"), "#!/bin/sh\n").unwrap();
    Project { root }
}

fn toml_def(text: &str) -> ServerDef {
    let v: toml::Value = toml::from_str::<toml::Table>(text).unwrap().into();
    parse_toml_entry(".openmax/config.toml", Origin::Project, "srv", &v)
        .unwrap_or_else(|e| panic!("{text}: {e}"))
}

fn json_entry(v: &serde_json::Value) -> Result<ServerDef, String> {
    let file = json!({"mcpServers": {"srv": v}}).to_string();
    let (mut defs, problems) = parse_mcp_json(file.as_bytes());
    defs.pop().ok_or_else(|| problems.join("; "))
}

fn json_def(v: serde_json::Value) -> ServerDef {
    json_entry(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

fn keys_in(message: &str) -> Vec<String> {
    let list = message
        .split("the keys are ")
        .nth(1)
        .and_then(|t| t.split(')').next())
        .unwrap_or_else(|| panic!("no key list in {message:?}"));
    list.split(", ").map(str::to_string).collect()
}

const STDIO: &str = "command = \"sh\"\nargs = [\"srv/server.sh\", \"--port\", \"0\"]\n\
                     env = { MODE = \"ro\", TOKEN = \"${MY_TOKEN}\" }\nenv_allow = [\"GH_TOKEN\"]\n\
                     startup_timeout_s = 5\ntool_timeout_s = 30\n";
const HTTP: &str = "url = \"http://127.0.0.1:9/mcp\"\nbearer_token_env = \"WEB_TOKEN\"\n\
                    http_headers = { X-Team = \"a\", Authorization = \"Bearer ${WEB_TOKEN}\" }\n\
                    startup_timeout_s = 5\ntool_timeout_s = 30\n";

#[test]
fn every_key_of_a_toml_server_is_covered_by_its_approval() {
    let p = project();
    let sha = |d: &ServerDef| gate::source_sha256(d, &p.root).unwrap();
    let (stdio, http) = (sha(&toml_def(STDIO)), sha(&toml_def(HTTP)));
    let changes: Vec<(&str, &str, &str, &str)> = vec![
        ("command", STDIO, "command = \"sh\"", "command = \"bash\""),
        ("args", STDIO, "\"--port\", \"0\"", "\"--port\", \"1\""),
        (
            "args",
            STDIO,
            "\"--port\", \"0\"]",
            "\"--port\", \"0\", \"--eval\"]",
        ),
        ("env", STDIO, "MODE = \"ro\"", "MODE = \"rw\""),
        ("env", STDIO, "${MY_TOKEN}", "${ANTHROPIC_API_KEY}"),
        (
            "env_allow",
            STDIO,
            "[\"GH_TOKEN\"]",
            "[\"GH_TOKEN\", \"AWS_SECRET_ACCESS_KEY\"]",
        ),
        (
            "startup_timeout_s",
            STDIO,
            "startup_timeout_s = 5",
            "startup_timeout_s = 6",
        ),
        (
            "tool_timeout_s",
            STDIO,
            "tool_timeout_s = 30",
            "tool_timeout_s = 31",
        ),
        ("url", HTTP, "127.0.0.1:9", "127.0.0.1:10"),
        (
            "bearer_token_env",
            HTTP,
            "\"WEB_TOKEN\"\n",
            "\"OTHER_TOKEN\"\n",
        ),
        ("http_headers", HTTP, "X-Team = \"a\"", "X-Team = \"b\""),
        (
            "http_headers",
            HTTP,
            "Bearer ${WEB_TOKEN}",
            "Bearer ${OTHER_TOKEN}",
        ),
        (
            "startup_timeout_s",
            HTTP,
            "startup_timeout_s = 5",
            "startup_timeout_s = 6",
        ),
        (
            "tool_timeout_s",
            HTTP,
            "tool_timeout_s = 30",
            "tool_timeout_s = 31",
        ),
    ];
    let err = parse_toml_entry(
        "f",
        Origin::Project,
        "srv",
        &toml::from_str::<toml::Table>("nope = 1").unwrap().into(),
    )
    .unwrap_err();
    for k in keys_in(&err) {
        assert!(
            changes.iter().any(|(f, ..)| *f == k),
            "[mcp_servers] key {k} has no change here"
        );
    }
    for (key, base, from, to) in changes {
        let text = base.replacen(from, to, 1);
        assert_ne!(text, base, "{key}: the change applies");
        let before = if base == STDIO { &stdio } else { &http };
        assert_ne!(
            &sha(&toml_def(&text)),
            before,
            "changing {key} kept the sha"
        );
    }
}

#[test]
fn every_key_of_a_json_server_is_covered_by_its_approval() {
    let p = project();
    let sha = |d: &ServerDef| gate::source_sha256(d, &p.root).unwrap();
    let stdio = json!({"type":"stdio","command":"sh","args":["srv/server.sh"],
        "env":{"MODE":"ro","TOKEN":"${MY_TOKEN}"}});
    let http = json!({"type":"http","url":"http://127.0.0.1:9/mcp",
        "headers":{"Authorization":"Bearer ${WEB_TOKEN}"}});
    let changed = |base: &serde_json::Value, key: &str, v: serde_json::Value| {
        let mut c = base.clone();
        c[key] = v;
        c
    };
    let mut untyped = stdio.clone();
    untyped.as_object_mut().unwrap().remove("type");
    let changes = vec![
        ("type", untyped, &stdio),
        ("command", changed(&stdio, "command", json!("bash")), &stdio),
        (
            "args",
            changed(&stdio, "args", json!(["srv/server.sh", "-x"])),
            &stdio,
        ),
        (
            "env",
            changed(&stdio, "env", json!({"MODE":"rw","TOKEN":"${MY_TOKEN}"})),
            &stdio,
        ),
        (
            "env",
            changed(&stdio, "env", json!({"MODE":"ro","TOKEN":"${OTHER}"})),
            &stdio,
        ),
        (
            "url",
            changed(&http, "url", json!("http://127.0.0.1:10/mcp")),
            &http,
        ),
        (
            "headers",
            changed(&http, "headers", json!({"Authorization":"Bearer ${X}"})),
            &http,
        ),
    ];
    let err = json_entry(&json!({"nope": 1})).unwrap_err();
    for k in keys_in(&err) {
        assert!(
            changes.iter().any(|(f, ..)| *f == k),
            ".mcp.json key {k} has no change here"
        );
    }
    for (key, def, base) in changes {
        assert_ne!(
            sha(&json_def(def.clone())),
            sha(&json_def(base.clone())),
            "changing {key} kept the sha: {def}"
        );
    }
}

#[test]
fn every_project_file_the_argv_names_is_covered() {
    let p = project();
    let abs = |rel: &str| p.root.join(rel).display().to_string();
    for (command, args, file) in [
        (
            "sh".to_string(),
            vec!["srv/server.sh".to_string()],
            "srv/server.sh",
        ),
        ("sh".into(), vec!["./srv/server.sh".into()], "srv/server.sh"),
        ("sh".into(), vec![abs("srv/server.sh")], "srv/server.sh"),
        (
            "node".into(),
            vec!["--inspect".into(), "srv/main.js".into()],
            "srv/main.js",
        ),
        (
            "sh".into(),
            vec!["srv/server.sh".into(), abs("srv/main.js")],
            "srv/main.js",
        ),
        ("./srv/run".into(), vec![], "srv/run"),
        (abs("srv/run"), vec![], "srv/run"),
    ] {
        let def = json_def(json!({"command": command, "args": args}));
        let files = gate::argv_files(&def, &p.root);
        assert!(
            files.iter().any(|f| f == file),
            "{command} {args:?}: {files:?}"
        );
        let before = gate::source_sha256(&def, &p.root).unwrap();
        let bytes = std::fs::read(p.root.join(file)).unwrap();
        std::fs::write(p.root.join(file), "edited\n").unwrap();
        assert_ne!(
            gate::source_sha256(&def, &p.root).unwrap(),
            before,
            "{command} {args:?}: editing {file} kept the sha"
        );
        std::fs::write(p.root.join(file), bytes).unwrap();
    }
}

// ---- the plan --------------------------------------------------------------------------------

fn set(def: ServerDef, state: State, tools: Vec<McpTool>) -> McpSet {
    McpSet {
        servers: vec![Arc::new(Server {
            def,
            state,
            tools,
            conn: tokio::sync::Mutex::new(Slot {
                conn: None,
                restarted: false,
                failed: None,
            }),
        })],
        problems: Vec::new(),
        ctx: None,
    }
}

#[test]
fn the_gate_asks_again_when_the_definition_or_a_file_changes() {
    let p = project();
    let def = toml_def(STDIO);
    let stored = (
        def.file.clone(),
        gate::source_sha256(&def, &p.root).unwrap(),
    );
    let ok = |path: &str, sha: &str| path == stored.0 && sha == stored.1;
    let approved = |d: ServerDef| {
        let plan = set(d, State::AwaitingApproval, Vec::new()).plan(
            "mcp__srv__echo",
            &json!({}),
            &p.root,
            &ok,
        );
        let gate = plan
            .source
            .expect("a project server's call carries its gate");
        assert_eq!(
            gate.env,
            vec!["GH_TOKEN".to_string(), "MY_TOKEN".to_string()]
        );
        gate.approved
    };
    assert!(approved(def.clone()));
    assert!(!approved(toml_def(&STDIO.replacen("\"0\"", "\"1\"", 1))));
    std::fs::write(p.root.join("srv/server.sh"), "exec node srv/evil.js\n").unwrap();
    assert!(!approved(def.clone()), "an edited script");
    std::fs::write(p.root.join("srv/server.sh"), "exec node srv/main.js\n").unwrap();
    assert!(approved(def));
}

fn listed(annotations: Option<serde_json::Value>) -> Vec<McpTool> {
    let mut t = json!({"name":"t","inputSchema":{"type":"object"}});
    if let Some(a) = annotations {
        t["annotations"] = a;
    }
    let tool: rmcp::model::Tool = serde_json::from_value(t).unwrap();
    let (tools, problems) = name_tools("srv", vec![tool]);
    assert!(problems.is_empty(), "{problems:?}");
    tools
}

#[test]
fn a_call_is_read_only_only_when_the_server_says_so() {
    let p = project();
    let def = toml_def("command = \"srv\"\n");
    let mutating = |state: State, tools: Vec<McpTool>| {
        let plan =
            set(def.clone(), state, tools).plan("mcp__srv__t", &json!({}), &p.root, &|_, _| false);
        assert_eq!(plan.invalid, None);
        plan.mutating
    };
    for (annotations, want) in [
        (None, true),
        (Some(json!({})), true),
        (Some(json!({"readOnlyHint": false})), true),
        (Some(json!({"readOnlyHint": true})), false),
        (
            Some(json!({"readOnlyHint": true, "destructiveHint": false})),
            false,
        ),
        (
            Some(json!({"readOnlyHint": true, "destructiveHint": true})),
            true,
        ),
        (Some(json!({"destructiveHint": false})), true),
        (Some(json!({"idempotentHint": true})), true),
        (Some(json!({"openWorldHint": false})), true),
        (
            Some(json!({"readOnlyHint": false, "destructiveHint": false})),
            true,
        ),
    ] {
        assert_eq!(
            mutating(State::Started, listed(annotations.clone())),
            want,
            "{annotations:?}"
        );
    }
    // A server not started yet (awaiting approval): nothing is known of its tools.
    assert!(mutating(State::AwaitingApproval, Vec::new()));
    // A started server without that tool, or a failed one: not run at all.
    for state in [State::Started, State::Failed("gone".into())] {
        let plan = set(def.clone(), state, Vec::new()).plan(
            "mcp__srv__t",
            &json!({}),
            &p.root,
            &|_, _| false,
        );
        assert!(plan.invalid.is_some() && plan.mutating, "{plan:?}");
    }
}
