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

use super::config::{Lookup, ServerDef};
use super::*;
use crate::config::keys::Lines;

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
    let root = crate::scratch::path(&format!("mcp-gate-{n}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("srv")).unwrap();
    let root = root.canonicalize().unwrap();
    std::fs::write(root.join("srv/server.sh"), "exec node srv/main.js\n").unwrap();
    std::fs::write(root.join("srv/main.js"), "// server\n").unwrap();
    std::fs::write(root.join("srv/run"), "#!/bin/sh\n").unwrap();
    Project { root }
}

/// The provider key's variable in these tests.
const KEY_VAR: &str = "ANTHROPIC_API_KEY";

fn get(name: &str) -> Option<String> {
    Some(format!("value-of-{name}"))
}

fn lookup() -> Lookup<'static> {
    static KEYS: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    Lookup {
        get: &get,
        provider_keys: KEYS.get_or_init(|| vec![KEY_VAR.to_string()]),
    }
}

fn toml_entry(root: &std::path::Path, text: &str) -> Result<ServerDef, Vec<String>> {
    let v: toml::Value = toml::from_str::<toml::Table>(text).unwrap().into();
    let lines = Lines::default();
    let entry = super::codex::Entry {
        file: ".openmax/config.toml",
        origin: Origin::Project,
        name: "srv",
        lines: &lines,
        project: root,
    };
    super::codex::parse(&entry, &v, &lookup())
}

fn toml_def(root: &std::path::Path, text: &str) -> ServerDef {
    toml_entry(root, text).unwrap_or_else(|e| panic!("{text}: {e:?}"))
}

fn json_entry(v: &serde_json::Value) -> Result<ServerDef, String> {
    let file = json!({"mcpServers": {"srv": v}}).to_string();
    let (mut defs, problems) = super::claude::parse(file.as_bytes(), &lookup());
    defs.pop().ok_or_else(|| problems.join("; "))
}

fn json_def(v: serde_json::Value) -> ServerDef {
    json_entry(&v).unwrap_or_else(|e| panic!("{v}: {e}"))
}

const STDIO: &str = "command = \"sh\"\nargs = [\"srv/server.sh\", \"--port\", \"0\"]\n\
                     env = { MODE = \"ro\", TOKEN = \"${MY_TOKEN}\" }\nenv_allow = [\"GH_TOKEN\"]\n\
                     cwd = \"srv\"\nstartup_timeout_s = 5\ntool_timeout_s = 30\nenabled = true\n\
                     enabled_tools = [\"echo\"]\ndisabled_tools = [\"rm\"]\n";
const HTTP: &str = "url = \"http://127.0.0.1:9/mcp\"\nbearer_token_env = \"WEB_TOKEN\"\n\
                    http_headers = { X-Team = \"a\", Authorization = \"Bearer ${WEB_TOKEN}\" }\n\
                    env_http_headers = { X-Key = \"TEAM_KEY\" }\n\
                    startup_timeout_s = 5\ntool_timeout_s = 30\n";

/// `text` with openmax's spelling of each key that has a Codex one replaced by Codex's.
fn codex_spelling(text: &str) -> String {
    let mut out = text.to_string();
    for (ours, codex) in super::codex::KEYS {
        if let Some(c) = codex {
            out = out.replace(&format!("\n{ours} ="), &format!("\n{c} ="));
        }
    }
    out
}

#[test]
fn every_key_of_a_toml_server_is_covered_by_its_approval() {
    let p = project();
    let sha = |d: &ServerDef| gate::source_sha256(d, &p.root).unwrap();
    // (key, base, from, to): one change per key.
    let changes: Vec<(&str, &str, &str, &str)> = vec![
        ("command", STDIO, "command = \"sh\"", "command = \"bash\""),
        ("args", STDIO, "\"--port\", \"0\"", "\"--port\", \"1\""),
        ("args", STDIO, "\"0\"]", "\"0\", \"--eval\"]"),
        ("env", STDIO, "MODE = \"ro\"", "MODE = \"rw\""),
        ("env", STDIO, "${MY_TOKEN}", "${OTHER_TOKEN}"),
        (
            "env_allow",
            STDIO,
            "[\"GH_TOKEN\"]",
            "[\"GH_TOKEN\", \"AWS_SECRET_ACCESS_KEY\"]",
        ),
        ("cwd", STDIO, "cwd = \"srv\"", "cwd = \".\""),
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
        ("enabled", STDIO, "enabled = true", "enabled = false"),
        (
            "enabled_tools",
            STDIO,
            "[\"echo\"]",
            "[\"echo\", \"write\"]",
        ),
        ("disabled_tools", STDIO, "[\"rm\"]", "[]"),
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
        ("env_http_headers", HTTP, "\"TEAM_KEY\"", "\"OTHER_KEY\""),
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
    for (key, _) in super::codex::KEYS {
        assert!(
            changes.iter().any(|(k, ..)| *k == key),
            "[mcp_servers] key {key} has no change here"
        );
    }
    // Each change, in openmax's spelling and in Codex's.
    for spell in [|t: &str| t.to_string(), |t: &str| codex_spelling(t)] {
        for (key, base, from, to) in &changes {
            let text = base.replacen(from, to, 1);
            assert_ne!(&text, base, "{key}: the change applies");
            let (before, after) = (
                toml_def(&p.root, &spell(base)),
                toml_def(&p.root, &spell(&text)),
            );
            assert_ne!(
                sha(&after),
                sha(&before),
                "changing {key} kept the sha: {}",
                spell(&text)
            );
        }
    }
    assert_ne!(codex_spelling(STDIO), STDIO, "the Codex spellings apply");
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
        ("type", changed(&http, "type", json!("sse")), &http),
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
    for key in super::claude::KEYS {
        assert!(
            changes.iter().any(|(k, ..)| *k == key),
            ".mcp.json key {key} has no change here"
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

/// The provider key can never be granted to a project's server by name, in any key that
/// forwards a variable, in either file; a user's own server may name it.
#[test]
fn a_project_server_can_never_be_granted_the_provider_key() {
    let p = project();
    for (what, text) in [
        (
            "env_allow alone",
            format!("command = \"sh\"\nenv_allow = [\"{KEY_VAR}\"]\n"),
        ),
        (
            "env_allow",
            STDIO.replace("\"GH_TOKEN\"", &format!("\"{KEY_VAR}\"")),
        ),
        (
            "env_vars",
            codex_spelling(&STDIO.replace("\"GH_TOKEN\"", &format!("\"{KEY_VAR}\""))),
        ),
        (
            "env ${…}",
            STDIO.replace("${MY_TOKEN}", &format!("${{{KEY_VAR}}}")),
        ),
        (
            "env template",
            STDIO.replace("${MY_TOKEN}", &format!("x-${{{KEY_VAR}:-none}}")),
        ),
        (
            "bearer_token_env",
            HTTP.replace("\"WEB_TOKEN\"\n", &format!("\"{KEY_VAR}\"\n")),
        ),
        (
            "http_headers",
            HTTP.replace("Bearer ${WEB_TOKEN}", &format!("Bearer ${{{KEY_VAR}}}")),
        ),
        (
            "env_http_headers",
            HTTP.replace("\"TEAM_KEY\"", &format!("\"{KEY_VAR}\"")),
        ),
    ] {
        match toml_entry(&p.root, &text) {
            Ok(def) => panic!("{what}: a project server granted {:?}", def.env_grant()),
            Err(problems) => assert!(
                problems.iter().any(|m| m.contains(KEY_VAR)),
                "{what}: {problems:?}"
            ),
        }
    }
    for (what, entry) in [
        (
            "env",
            json!({"command":"sh","env":{"K": format!("${{{KEY_VAR}}}")}}),
        ),
        (
            "args",
            json!({"command":"sh","args":[format!("--key=${{{KEY_VAR}}}")]}),
        ),
        ("command", json!({"command": format!("${{{KEY_VAR}}}")})),
        (
            "url",
            json!({"type":"http","url": format!("http://127.0.0.1:9/${{{KEY_VAR}}}")}),
        ),
        (
            "headers",
            json!({"type":"http","url":"http://127.0.0.1:9/mcp",
            "headers":{"Authorization": format!("Bearer ${{{KEY_VAR}}}")}}),
        ),
    ] {
        match json_entry(&entry) {
            Ok(def) => panic!(
                ".mcp.json {what}: a project server granted {:?}",
                def.env_grant()
            ),
            Err(problems) => assert!(problems.contains(KEY_VAR), ".mcp.json {what}: {problems}"),
        }
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
            catalog: Default::default(),
            conn: tokio::sync::Mutex::new(Slot {
                conn: None,
                restarted: false,
                failed: None,
                listed: None,
            }),
        })],
        problems: Vec::new(),
        ctx: None,
    }
}

#[test]
fn the_gate_asks_again_when_the_definition_or_a_file_changes() {
    let p = project();
    let def = toml_def(&p.root, STDIO);
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
    assert!(!approved(toml_def(
        &p.root,
        &STDIO.replacen("\"0\"", "\"1\"", 1)
    )));
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
fn a_call_to_a_tool_the_filters_leave_out_is_invalid_whatever_the_server_offers() {
    let p = project();
    for filters in ["disabled_tools = [\"t\"]\n", "enabled_tools = [\"u\"]\n"] {
        let def = toml_def(&p.root, &format!("command = \"srv\"\n{filters}"));
        let plan = set(def, State::Started, listed(None)).plan(
            "mcp__srv__t",
            &json!({}),
            &p.root,
            &|_, _| false,
        );
        let invalid = plan.invalid.unwrap_or_default();
        assert!(
            invalid.contains("does not offer \"t\""),
            "{filters}: {invalid}"
        );
    }
    let def = toml_def(&p.root, "command = \"srv\"\nenabled_tools = [\"t\"]\n");
    let plan =
        set(def, State::Started, listed(None))
            .plan("mcp__srv__t", &json!({}), &p.root, &|_, _| false);
    assert_eq!(plan.invalid, None);
}

#[test]
fn a_call_is_read_only_only_when_the_server_says_so() {
    let p = project();
    let def = toml_def(&p.root, "command = \"srv\"\n");
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

/// A project server's definition or files changed between a call's plan (the sha the human
/// approved) and its run: the call is refused before anything starts. The control: with the
/// planned sha unchanged, the call passes the gate (and fails on its arguments, after it).
#[tokio::test]
async fn a_project_server_changed_between_plan_and_run_is_refused() {
    let p = project();
    let def = toml_def(&p.root, STDIO);
    let planned = crate::extensions::source::short(&gate::source_sha256(&def, &p.root).unwrap());
    let mcp = set(def, State::Started, Vec::new());
    let ctx = server::StartContext {
        project: p.root.clone(),
        log_path: None,
        agent_session: "t".to_string(),
        notices: None,
        policy: crate::sandbox::Policy::default(),
    };
    let run = |sha: String| {
        let (_cancel, cancelled) = tokio::sync::oneshot::channel();
        super::call(
            &mcp.servers[0],
            "echo",
            json!("not an object"),
            Some(sha),
            1024,
            &ctx,
            cancelled,
        )
    };
    let passed = run(planned.clone()).await;
    assert_eq!(passed.output, "arguments must be a JSON object");
    std::fs::write(p.root.join("srv/server.sh"), "exec node srv/evil.js\n").unwrap();
    let refused = run(planned.clone()).await;
    assert!(!refused.ok);
    assert!(
        refused.output.contains("changed since it was approved")
            && refused.output.contains(&planned),
        "{}",
        refused.output
    );
}
