//! The pure steps between a server's `tools/list` and the tool set: which tools
//! `enabled_tools` / `disabled_tools` let through (and the problem line a name the server does
//! not have gets), which names are usable and what each frozen tool carries, and the tool list
//! of a message.

use std::collections::BTreeMap;

use serde_json::json;

use super::config::ToolFilter;
use super::*;

fn tool(v: serde_json::Value) -> rmcp::model::Tool {
    let mut v = v;
    if v.get("inputSchema").is_none() {
        v["inputSchema"] = json!({"type": "object"});
    }
    serde_json::from_value(v).expect("a tool")
}

fn named(names: &[&str]) -> Vec<rmcp::model::Tool> {
    names.iter().map(|n| tool(json!({"name": n}))).collect()
}

fn def(enabled: Option<&[&str]>, disabled: &[&str]) -> ServerDef {
    let mut d = ServerDef::new(
        "srv",
        Transport::Stdio {
            command: "srv".into(),
            args: vec![],
        },
        Origin::User,
        "/home/u/.openmax/config.toml",
        String::new(),
    );
    d.tools = ToolFilter {
        enabled: enabled.map(|e| e.iter().map(|s| s.to_string()).collect()),
        disabled: disabled.iter().map(|s| s.to_string()).collect(),
    };
    d
}

fn kept(d: &ServerDef, offered: &[&str]) -> (Vec<String>, Vec<String>) {
    let mut problems = Vec::new();
    let tools = filter(d, named(offered), &mut problems);
    (tools.iter().map(|t| t.name.to_string()).collect(), problems)
}

#[test]
fn enabled_and_disabled_tools_decide_what_is_offered_and_a_missing_name_is_a_problem() {
    let all = ["a", "b", "c"];
    assert_eq!(
        kept(&def(None, &[]), &all),
        (vec!["a".into(), "b".into(), "c".into()], vec![])
    );
    assert_eq!(kept(&def(None, &["b"]), &all).0, ["a", "c"]);
    assert_eq!(kept(&def(Some(&["c", "a"]), &[]), &all).0, ["a", "c"]);
    assert_eq!(
        kept(&def(Some(&["a", "b"]), &["b"]), &all).0,
        ["a"],
        "disabled wins"
    );
    // A name the server does not have is said once, with the file; `read_resource` is
    // openmax's own tool and never reported.
    let (offered, problems) = kept(&def(Some(&["a", "typo", "read_resource"]), &[]), &all);
    assert_eq!(offered, ["a"]);
    assert_eq!(problems.len(), 1, "{problems:?}");
    assert!(
        problems[0].contains("/home/u/.openmax/config.toml")
            && problems[0].contains("\"typo\"")
            && problems[0].contains("MCP server srv"),
        "{}",
        problems[0]
    );
    // No enabled list: nothing to report, whatever is disabled.
    assert!(kept(&def(None, &["zzz"]), &all).1.is_empty());
}

#[test]
fn a_tool_name_must_be_usable_and_fit_the_limit() {
    // `mcp__srv__` is 10 characters: a 54-character name makes 64, one more is too long.
    let fits = "n".repeat(MAX_TOOL_NAME - "mcp__srv__".len());
    let long = format!("{fits}x");
    let (tools, problems) = name_tools(
        "srv",
        named(&["ok_1-2", "", "sp ace", "dot.ted", "é", &fits, &long]),
    );
    let names: Vec<&str> = tools.iter().map(|t| t.tool.as_str()).collect();
    let mut want = vec!["ok_1-2", fits.as_str()];
    want.sort_by_key(|n| format!("mcp__srv__{n}"));
    assert_eq!(names, want);
    assert_eq!(problems.len(), 5, "{problems:?}");
    for bad in ["\"\"", "\"sp ace\"", "\"dot.ted\"", "\"é\""] {
        assert!(
            problems
                .iter()
                .any(|p| p.contains(&format!("tool {bad} skipped"))),
            "{bad}: {problems:?}"
        );
    }
    assert!(problems
        .iter()
        .any(|p| p.contains(&long) && p.contains("at most 64")));
}

#[test]
fn a_frozen_tool_carries_its_full_name_hints_schema_and_description() {
    let (tools, problems) = name_tools(
        "srv",
        vec![
            tool(json!({"name": "ro", "description": "reads",
                "annotations": {"readOnlyHint": true}})),
            tool(json!({"name": "ro_but_destructive", "title": "Titled",
                "annotations": {"readOnlyHint": true, "destructiveHint": true}})),
            tool(json!({"name": "rw", "annotations": {"readOnlyHint": false}})),
            tool(json!({"name": "plain", "inputSchema": {"properties": {"x": {}}}})),
            // A second tool of the same name is one tool.
            tool(json!({"name": "ro", "description": "reads",
                "annotations": {"readOnlyHint": true}})),
        ],
    );
    assert!(problems.is_empty(), "{problems:?}");
    let by: BTreeMap<&str, &McpTool> = tools.iter().map(|t| (t.tool.as_str(), t)).collect();
    assert_eq!(tools.len(), 4);
    assert_eq!(
        tools.iter().map(|t| t.name.as_str()).collect::<Vec<_>>(),
        [
            "mcp__srv__plain",
            "mcp__srv__ro",
            "mcp__srv__ro_but_destructive",
            "mcp__srv__rw"
        ]
    );
    assert!(by["ro"].read_only);
    assert!(!by["ro_but_destructive"].read_only);
    assert!(!by["rw"].read_only && !by["plain"].read_only);
    assert_eq!(by["ro"].description, "reads");
    assert_eq!(by["ro_but_destructive"].description, "Titled");
    assert_eq!(by["plain"].description, "plain (MCP server srv)");
    assert_eq!(by["plain"].server, "srv");
    assert_eq!(
        by["plain"].input_schema,
        json!({"type": "object", "properties": {"x": {}}}),
        "a schema without a type is an object"
    );
    assert!(tools.iter().all(|t| !t.reader));
}

#[test]
fn a_tool_list_names_the_tools_or_says_none() {
    assert_eq!(tool_list(&[]), "none");
    let (tools, _) = name_tools("srv", named(&["b", "a"]));
    assert_eq!(tool_list(&tools), "a, b");
}

/// Only a started server's list says what it offers: a server that did not start (disabled,
/// awaiting approval, or failing to start) has its `enabled_tools` names reported by nothing
/// but its state. (A started server's missing name is a note, end to end in `mcp_e2e`.)
#[tokio::test]
async fn a_server_that_did_not_start_reports_no_enabled_tool_missing() {
    let mut disabled = def(Some(&["a"]), &[]);
    disabled.name = "off".into();
    disabled.enabled = false;
    let mut waiting = def(Some(&["a"]), &[]);
    waiting.name = "waiting".into();
    waiting.origin = Origin::Project;
    let mut failing = def(Some(&["a"]), &[]);
    failing.name = "failing".into();
    failing.transport = Transport::Stdio {
        command: "/nonexistent/openmax-test-no-such-server".into(),
        args: vec![],
    };
    let ctx = server::StartContext {
        project: std::env::temp_dir(),
        log_path: None,
        agent_session: "t".to_string(),
        notices: None,
        policy: crate::sandbox::Policy::default(),
    };
    let set = McpSet::start(vec![disabled, waiting, failing], Vec::new(), ctx, &|d| {
        d.name != "waiting"
    })
    .await;
    let states: Vec<String> = set
        .servers
        .iter()
        .map(|s| format!("{} {:?}", s.def.name, s.state))
        .collect();
    assert!(states[0].starts_with("off Disabled"), "{states:?}");
    assert!(
        states[1].starts_with("waiting AwaitingApproval"),
        "{states:?}"
    );
    assert!(states[2].starts_with("failing Failed"), "{states:?}");
    assert!(
        !set.problems.iter().any(|p| p.contains("enabled_tools")),
        "{:?}",
        set.problems
    );
}
