//! Tests of the event → ACP mapping: feed wire events, look at what the connection is told.

use super::*;
use serde_json::json;

fn tr() -> Translator {
    let mut t = Translator::new("s1", PathBuf::from("/p"));
    t.prompt_started();
    t
}

fn feed(t: &mut Translator, events: Vec<Event>) -> Vec<Value> {
    let mut out = Vec::new();
    for e in events {
        t.event(e, &mut out);
    }
    t.quiet(&mut out);
    out.into_iter().map(as_json).collect()
}

/// Each output as the JSON the connection would send (its params), tagged.
fn as_json(o: Out) -> Value {
    match o {
        Out::Update(n) => json!({"update": serde_json::to_value(n).unwrap()}),
        Out::AskPermission {
            approval_id,
            request,
        } => json!({"ask": approval_id, "request": serde_json::to_value(request).unwrap()}),
        Out::PermissionSettled { approval_id } => json!({"settled": approval_id}),
        Out::PromptEnded(PromptEnd::Stop(r)) => {
            json!({"stop": serde_json::to_value(r).unwrap()})
        }
        Out::PromptEnded(PromptEnd::Error(m)) => json!({"error": m}),
        Out::ModeSaved(m) => json!({"mode_saved": m.as_str()}),
        Out::ModeRefused(m) => json!({"mode_refused": m}),
        Out::Log(m) => json!({"log": m}),
    }
}

fn done(r: &str) -> Event {
    Event::Done {
        stop_reason: r.into(),
    }
}

fn token(t: &str) -> Event {
    Event::Token { text: t.into() }
}

#[test]
fn tokens_and_thinking_become_chunks_in_order_then_end_turn() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![
            Event::Thinking { text: "hm".into() },
            token("Hel"),
            token("lo"),
            Event::MessageDone {
                text: "Hello".into(),
            },
            Event::Usage {
                prompt_tokens: 1,
                completion_tokens: 1,
                cached_tokens: None,
            },
            done("stop"),
        ],
    );
    assert_eq!(
        out,
        vec![
            json!({"update": {"sessionId": "s1", "update": {"sessionUpdate": "agent_thought_chunk", "content": {"type": "text", "text": "hm"}}}}),
            json!({"update": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hel"}}}}),
            json!({"update": {"sessionId": "s1", "update": {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "lo"}}}}),
            json!({"stop": "end_turn"}),
        ]
    );
    assert!(!t.prompt_open());
}

#[test]
fn stop_reasons() {
    let cases = [
        ("stop", "end_turn"),
        ("end_turn", "end_turn"),
        ("tool_use", "end_turn"),
        ("unverified", "end_turn"),
        ("length", "max_tokens"),
        ("max_iterations", "max_turn_requests"),
        ("budget_exhausted", "max_turn_requests"),
        ("blocked", "refusal"),
        ("refused", "refusal"),
        ("cancelled", "cancelled"),
    ];
    for (core, acp) in cases {
        let end = prompt_end(&core.into(), false, None);
        let PromptEnd::Stop(r) = end else {
            panic!("{core}: {end:?}")
        };
        assert_eq!(serde_json::to_value(r).unwrap(), json!(acp), "{core}");
    }
    assert_eq!(
        prompt_end(&"error".into(), false, Some("boom")),
        PromptEnd::Error("boom".into())
    );
    assert_eq!(
        prompt_end(&"truncated".into(), false, Some("cut")),
        PromptEnd::Error("cut".into())
    );
    // A cancel wins, also over an error.
    assert_eq!(
        prompt_end(&"error".into(), true, Some("boom")),
        PromptEnd::Stop(StopReason::Cancelled)
    );
    assert_eq!(
        prompt_end(&"stop".into(), true, None),
        PromptEnd::Stop(StopReason::Cancelled)
    );
}

#[test]
fn an_error_ending_answers_with_the_error_line_after_the_partial_chunks() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![
            token("par"),
            Event::Error {
                message: "the stream ended mid-answer".into(),
            },
            done("truncated"),
        ],
    );
    assert_eq!(out.len(), 2);
    assert_eq!(out[0]["update"]["update"]["content"]["text"], json!("par"));
    assert_eq!(out[1], json!({"error": "the stream ended mid-answer"}));
}

#[test]
fn a_cancel_racing_an_error_answers_cancelled_and_still_shows_the_error() {
    let mut t = tr();
    assert!(t.cancel());
    let out = feed(
        &mut t,
        vec![
            Event::Error {
                message: "503".into(),
            },
            done("error"),
        ],
    );
    assert_eq!(
        out[0]["update"]["update"]["sessionUpdate"],
        json!("agent_thought_chunk")
    );
    assert_eq!(out[1], json!({"stop": "cancelled"}));
    // No prompt in flight: a cancel is a no-op.
    assert!(!t.cancel());
}

#[test]
fn tool_calls_carry_kind_input_locations_diffs_and_output() {
    let mut t = tr();
    let diff = crate::tools::diff::unified("a.txt", "x\n", "y\n");
    let out = feed(
        &mut t,
        vec![
            Event::ToolStart {
                call_id: "c1".into(),
                name: "write_file".into(),
                args: json!({"path": "a.txt", "content": "y\n"})
                    .as_object()
                    .unwrap()
                    .clone(),
            },
            Event::Diff {
                call_id: "c1".into(),
                path: "a.txt".into(),
                diff: diff.diff,
                added: 1,
                removed: 1,
            },
            Event::ToolEnd {
                call_id: "c1".into(),
                ok: true,
                output: "wrote a.txt".into(),
            },
        ],
    );
    assert_eq!(
        out[0]["update"]["update"],
        json!({
            "sessionUpdate": "tool_call", "toolCallId": "c1", "title": "write_file a.txt",
            "kind": "edit", "status": "in_progress",
            "locations": [{"path": "/p/a.txt"}],
            "rawInput": {"path": "a.txt", "content": "y\n"}
        })
    );
    let diff_block =
        json!({"type": "diff", "path": "/p/a.txt", "oldText": "x\n", "newText": "y\n"});
    assert_eq!(
        out[1]["update"]["update"],
        json!({"sessionUpdate": "tool_call_update", "toolCallId": "c1", "content": [diff_block]})
    );
    assert_eq!(
        out[2]["update"]["update"],
        json!({
            "sessionUpdate": "tool_call_update", "toolCallId": "c1", "status": "completed",
            "content": [diff_block, {"type": "content", "content": {"type": "text", "text": "wrote a.txt"}}]
        })
    );
    let failed = feed(
        &mut t,
        vec![
            Event::ToolStart {
                call_id: "c2".into(),
                name: "shell".into(),
                args: json!({"command": "false"}).as_object().unwrap().clone(),
            },
            Event::ToolEnd {
                call_id: "c2".into(),
                ok: false,
                output: "exit 1".into(),
            },
        ],
    );
    assert_eq!(failed[0]["update"]["update"]["kind"], json!("execute"));
    assert_eq!(failed[1]["update"]["update"]["status"], json!("failed"));
}

fn approval(reason: ApprovalReason, env: Vec<String>) -> Event {
    let (source_path, source_sha) = match reason {
        ApprovalReason::Gate => (String::new(), String::new()),
        ApprovalReason::UnapprovedSource => {
            (".openmax/tools/deploy.json".into(), "0123456789ab".into())
        }
    };
    Event::ApprovalRequest {
        approval_id: "a1".into(),
        name: "deploy".into(),
        summary: "deploy to prod".into(),
        detail: "argv: ./deploy.sh".into(),
        reason,
        source_path,
        source_sha,
        env,
    }
}

#[test]
fn a_gate_asks_with_allow_and_reject_on_the_open_call() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![
            Event::ToolStart {
                call_id: "c1".into(),
                name: "deploy".into(),
                args: Default::default(),
            },
            approval(ApprovalReason::Gate, vec![]),
            Event::ApprovalSettled {
                approval_id: "a1".into(),
                outcome: openmax_core::wire::ApprovalOutcome::Approved,
            },
        ],
    );
    assert_eq!(out[1]["ask"], json!("a1"));
    let req = &out[1]["request"];
    assert_eq!(req["sessionId"], json!("s1"));
    assert_eq!(req["toolCall"]["toolCallId"], json!("c1"));
    assert_eq!(req["toolCall"]["title"], json!("deploy to prod"));
    assert_eq!(
        req["options"],
        json!([
            {"optionId": "allow", "name": "Allow", "kind": "allow_once"},
            {"optionId": "reject", "name": "Reject", "kind": "reject_once"}
        ])
    );
    assert_eq!(out[2], json!({"settled": "a1"}));
}

/// An approval asks on the call still open: once the open call has ended, a later approval
/// (a hook's, a source's) gets an id of its own; the end of another call leaves it open.
#[test]
fn an_approval_asks_on_the_call_still_open_and_never_on_an_ended_one() {
    let start = |id: &str| Event::ToolStart {
        call_id: id.into(),
        name: "deploy".into(),
        args: Default::default(),
    };
    let end = |id: &str| Event::ToolEnd {
        call_id: id.into(),
        ok: true,
        output: String::new(),
    };
    let asked_on = |events: Vec<Event>| {
        let mut t = tr();
        let out = feed(&mut t, events);
        let ask = out.iter().find(|o| o.get("ask").is_some()).unwrap();
        ask["request"]["toolCall"]["toolCallId"].clone()
    };
    let gate = || approval(ApprovalReason::Gate, vec![]);
    assert_eq!(asked_on(vec![start("c1"), gate()]), json!("c1"));
    assert_eq!(
        asked_on(vec![start("c1"), end("c1"), gate()]),
        json!("approval-deploy")
    );
    assert_eq!(
        asked_on(vec![start("c1"), start("c2"), end("c1"), gate()]),
        json!("c2")
    );
}

/// A request to run a command outside the sandbox keeps the core's UNSANDBOXED summary as the
/// title and its detail as the body, and its allow option says so.
#[test]
fn an_unsandboxed_run_says_so_in_title_body_and_allow_option() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![Event::ApprovalRequest {
            approval_id: "a1".into(),
            name: "shell".into(),
            summary: "UNSANDBOXED shell: make install".into(),
            detail: "UNSANDBOXED: this command runs outside the sandbox, with no write or \
                     network limits.\nThe model's reason: x\n\nmake install"
                .into(),
            reason: ApprovalReason::Gate,
            source_path: String::new(),
            source_sha: String::new(),
            env: vec![],
        }],
    );
    let req = &out[0]["request"];
    assert_eq!(
        req["toolCall"]["title"],
        json!("UNSANDBOXED shell: make install")
    );
    let body = req["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(body.starts_with("UNSANDBOXED: this command runs outside the sandbox"));
    assert_eq!(
        req["options"][0],
        json!({"optionId": "allow", "name": "Allow this command to run UNSANDBOXED", "kind": "allow_once"})
    );
}

#[test]
fn an_unapproved_source_names_file_sha_env_and_the_approve_command() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![approval(
            ApprovalReason::UnapprovedSource,
            vec!["DEPLOY_TOKEN".into()],
        )],
    );
    let req = &out[0]["request"];
    let body = req["toolCall"]["content"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(body.contains(".openmax/tools/deploy.json"), "{body}");
    assert!(body.contains("0123456789ab"), "{body}");
    assert!(
        body.contains("openmax --approve .openmax/tools/deploy.json"),
        "{body}"
    );
    assert!(body.lines().any(|l| l.contains("DEPLOY_TOKEN")), "{body}");
    assert_eq!(req["options"][0]["kind"], json!("allow_always"));
}

#[test]
fn permission_answers() {
    let sel = |id: &str| Ok(json!({"outcome": {"outcome": "selected", "optionId": id}}));
    assert!(permission_approved(&sel(ALLOW)));
    assert!(!permission_approved(&sel(REJECT)));
    assert!(!permission_approved(&sel("other")));
    assert!(!permission_approved(&Ok(
        json!({"outcome": {"outcome": "cancelled"}})
    )));
    assert!(!permission_approved(&Ok(json!(null))));
    assert!(!permission_approved(&Err("client failed".into())));
}

#[test]
fn a_refused_prompt_shows_the_reason_then_answers_refusal() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![
            Event::ProtocolError {
                message: "the project is not trusted".into(),
            },
            done("refused"),
        ],
    );
    assert_eq!(
        out[0]["update"]["update"]["content"]["text"],
        json!("the project is not trusted")
    );
    assert_eq!(out[1], json!({"stop": "refusal"}));
}

#[test]
fn set_mode_answers_come_from_the_ack_or_a_protocol_error() {
    let mut t = Translator::new("s1", PathBuf::from("/p"));
    t.mode_requested();
    let out = feed(
        &mut t,
        vec![Event::ApprovalMode {
            mode: Mode::Readonly,
        }],
    );
    assert_eq!(out, vec![json!({"mode_saved": "readonly"})]);
    t.mode_requested();
    let out = feed(
        &mut t,
        vec![Event::ProtocolError {
            message: "cannot save".into(),
        }],
    );
    assert_eq!(out, vec![json!({"mode_refused": "cannot save"})]);
    // With no set_mode pending a protocol error is only logged.
    let out = feed(
        &mut t,
        vec![Event::ProtocolError {
            message: "stray".into(),
        }],
    );
    assert_eq!(out, vec![json!({"log": "protocol error: stray"})]);
}

#[test]
fn notices_become_thoughts_and_a_hook_refusal_a_visible_message() {
    let mut t = tr();
    let out = feed(
        &mut t,
        vec![
            Event::Retry {
                attempt: 2,
                max_attempts: 5,
                reason: "HTTP 503".into(),
            },
            Event::HarnessNote {
                call_id: String::new(),
                text: "settings changed".into(),
            },
            Event::Compacted {
                tokens_before: 900,
                tokens_after: 300,
                compacted_messages: 4,
            },
            Event::SchemasOverBudget {
                schema_tokens: 9000,
                budget_tokens: 8000,
            },
            Event::HookFailed {
                hook: "audit".into(),
                event: "pre_tool".into(),
                detail: "exit 3".into(),
            },
            Event::TurnRefused {
                hook: "verify".into(),
                reason: "tests fail".into(),
                continuation: 0,
                continuations_left: 7,
            },
        ],
    );
    let kinds: Vec<&str> = out
        .iter()
        .map(|o| o["update"]["update"]["sessionUpdate"].as_str().unwrap())
        .collect();
    assert_eq!(
        kinds,
        [
            "agent_thought_chunk",
            "agent_thought_chunk",
            "agent_thought_chunk",
            "agent_thought_chunk",
            "agent_thought_chunk",
            "agent_message_chunk"
        ]
    );
    let text = |i: usize| out[i]["update"]["update"]["content"]["text"].to_string();
    assert!(text(1).contains("settings changed"), "{}", text(1));
    assert!(text(3).contains("9000"), "{}", text(3));
    assert!(text(4).contains("audit"), "{}", text(4));
    assert!(out[0]["update"]["update"]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("attempt 2 of 5"));
    assert!(out[5]["update"]["update"]["content"]["text"]
        .as_str()
        .unwrap()
        .contains("tests fail"));
    // A reload's receipt, between turns, is a thought too.
    let mut idle = Translator::new("s1", PathBuf::from("/p"));
    let receipt = feed(
        &mut idle,
        vec![Event::Refrozen {
            tools: vec!["lint".into()],
            skills: vec![],
            changes: vec![openmax_core::wire::event::FreezeChange {
                kind: "tool".into(),
                name: "lint".into(),
                change: "added".into(),
                path: ".openmax/tools/lint.json".into(),
                by: "outside".into(),
            }],
        }],
    );
    assert_eq!(
        receipt[0]["update"]["update"]["sessionUpdate"],
        json!("agent_thought_chunk"),
        "{receipt:?}"
    );
    assert!(receipt[0].to_string().contains("lint"), "{receipt:?}");
}
