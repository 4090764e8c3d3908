//! Golden JSON for every line the contract shows, round trips for every command and event
//! variant, the wire's key order, and the JSON Schema accepting every golden line.

use openmax_core::validate::line::check_line;
use openmax_core::validate::schema::{check_against, stdio_schema};
use openmax_core::wire::command::{Command, CommandError, COMMAND_FIELDS, COMMAND_NAMES};
use openmax_core::wire::event::{
    ApprovalOutcome, ApprovalReason, Event, FreezeChange, Line, EVENT_FIELDS,
};
use openmax_core::wire::handshake::{Hello, Transcript, TranscriptMessage};
use openmax_core::wire::Mode;
use serde_json::{json, Value};

fn line(event: Event) -> Line {
    Line {
        session_id: "s1".into(),
        event,
    }
}

/// One sample of every event variant (both approval reasons, env empty and not).
fn every_event() -> Vec<Event> {
    let mut args = serde_json::Map::new();
    args.insert("path".into(), json!("a.rs"));
    vec![
        Event::Token { text: "Hel".into() },
        Event::Thinking {
            text: "hmm \"quoted\"\n".into(),
        },
        Event::MessageDone {
            text: "Hello".into(),
        },
        Event::Budget {
            used_tokens: 1500,
            context_tokens: 128_000,
        },
        Event::Usage {
            prompt_tokens: 120,
            completion_tokens: 30,
            cached_tokens: None,
        },
        Event::Usage {
            prompt_tokens: 120,
            completion_tokens: 30,
            cached_tokens: Some(64),
        },
        Event::ToolStart {
            call_id: "c1".into(),
            name: "read_file".into(),
            args,
        },
        Event::ToolEnd {
            call_id: "c1".into(),
            ok: true,
            output: "fn main() {}".into(),
        },
        Event::HarnessNote {
            call_id: String::new(),
            text: "turn-start receipt".into(),
        },
        Event::Retry {
            attempt: 2,
            max_attempts: 4,
            reason: "HTTP 503".into(),
        },
        Event::Diff {
            call_id: "c1".into(),
            path: "a.rs".into(),
            diff: "@@ -1 +1 @@\n-a\n+b\n".into(),
            added: 1,
            removed: 1,
        },
        Event::ApprovalRequest {
            approval_id: "a1".into(),
            name: "write_file".into(),
            summary: "write a.rs".into(),
            detail: "3 lines".into(),
            reason: ApprovalReason::Gate,
            source_path: String::new(),
            source_sha: String::new(),
            env: vec![],
        },
        Event::ApprovalRequest {
            approval_id: "a2".into(),
            name: "lint".into(),
            summary: "run lint".into(),
            detail: "".into(),
            reason: ApprovalReason::UnapprovedSource,
            source_path: ".openmax/tools/lint.toml".into(),
            source_sha: "0123456789ab".into(),
            env: vec!["GITHUB_TOKEN".into()],
        },
        Event::ApprovalSettled {
            approval_id: "a1".into(),
            outcome: ApprovalOutcome::TimedOut,
        },
        Event::Refrozen {
            tools: vec!["read_file".into()],
            skills: vec!["review".into()],
            changes: vec![FreezeChange {
                kind: "tool".into(),
                name: "lint".into(),
                change: "added".into(),
                path: ".openmax/tools/lint.toml".into(),
                by: "agent".into(),
            }],
        },
        Event::SchemasOverBudget {
            schema_tokens: 9000,
            budget_tokens: 12_000,
        },
        Event::Compacted {
            tokens_before: 100_000,
            tokens_after: 40_000,
            compacted_messages: 12,
        },
        Event::HookFailed {
            hook: "notify".into(),
            event: "turn_end".into(),
            detail: "exit 1".into(),
        },
        Event::TurnRefused {
            hook: "verify".into(),
            reason: "tests fail".into(),
            continuation: 0,
            continuations_left: 8,
        },
        Event::Done {
            stop_reason: "stop".into(),
        },
        Event::Error {
            message: "boom".into(),
        },
        Event::ProtocolError {
            message: "unknown cmd".into(),
        },
        Event::ApprovalMode { mode: Mode::Auto },
    ]
}

fn every_command() -> Vec<Command> {
    vec![
        Command::User {
            text: "hello \"there\"".into(),
        },
        Command::Approve {
            approval_id: "a1".into(),
            approved: true,
        },
        Command::ApprovalMode {
            mode: "readonly".into(),
        },
        Command::Reload,
        Command::Cancel,
        Command::Quit,
    ]
}

fn keys(json: &str) -> Vec<String> {
    let v: Value = serde_json::from_str(json).expect("valid JSON");
    v.as_object().expect("object").keys().cloned().collect()
}

#[test]
fn golden_hello_is_the_contract_line() {
    let h = Hello::new("...", "0.2.0", "/abs/path", false);
    assert_eq!(
        h.to_json(),
        r#"{"type":"hello","proto":"openmax-stdio/6","protocol_version":6,"session_id":"...","version":"0.2.0","project":"/abs/path","continued":false}"#
    );
    let back: Hello = serde_json::from_str(&h.to_json()).expect("parses");
    assert_eq!(back, h);
}

#[test]
fn golden_transcript_is_the_contract_line() {
    let t = Transcript::capped(
        "...",
        &[TranscriptMessage {
            role: "user".into(),
            content: "...".into(),
        }],
    );
    assert_eq!(
        t.to_json(),
        r#"{"type":"transcript","session_id":"...","messages":[{"role":"user","content":"..."}],"truncated":false}"#
    );
    let back: Transcript = serde_json::from_str(&t.to_json()).expect("parses");
    assert_eq!(back, t);
}

#[test]
fn golden_tool_start_is_the_contract_example() {
    let mut args = serde_json::Map::new();
    args.insert("path".into(), json!("a.rs"));
    let l = line(Event::ToolStart {
        call_id: "c1".into(),
        name: "read_file".into(),
        args,
    });
    assert_eq!(
        l.to_json(),
        r#"{"session_id":"s1","type":"tool_start","call_id":"c1","name":"read_file","args":{"path":"a.rs"}}"#
    );
}

#[test]
fn golden_session_less_lines_carry_no_session_id() {
    let pe = line(Event::ProtocolError {
        message: "...".into(),
    });
    assert_eq!(pe.to_json(), r#"{"type":"protocol_error","message":"..."}"#);
    for (mode, want) in [
        (Mode::Auto, r#"{"type":"approval_mode","mode":"auto"}"#),
        (Mode::Ask, r#"{"type":"approval_mode","mode":"ask"}"#),
        (
            Mode::Readonly,
            r#"{"type":"approval_mode","mode":"readonly"}"#,
        ),
    ] {
        assert_eq!(line(Event::ApprovalMode { mode }).to_json(), want);
    }
}

#[test]
fn golden_env_omitted_when_empty_and_cached_tokens_null() {
    let gate = &every_event()[11];
    let json = line(gate.clone()).to_json();
    assert!(!json.contains("\"env\""), "{json}");
    assert_eq!(
        json,
        r#"{"session_id":"s1","type":"approval_request","approval_id":"a1","name":"write_file","summary":"write a.rs","detail":"3 lines","reason":"gate","source_path":"","source_sha":""}"#
    );
    let source = line(every_event()[12].clone()).to_json();
    assert!(
        source.ends_with(r#""source_sha":"0123456789ab","env":["GITHUB_TOKEN"]}"#),
        "{source}"
    );
    let usage = line(every_event()[4].clone()).to_json();
    assert_eq!(
        usage,
        r#"{"session_id":"s1","type":"usage","prompt_tokens":120,"completion_tokens":30,"cached_tokens":null}"#
    );
    let done = line(Event::Done {
        stop_reason: "stop".into(),
    });
    assert_eq!(
        done.to_json(),
        r#"{"session_id":"s1","type":"done","stop_reason":"stop"}"#
    );
}

#[test]
fn every_event_variant_is_sampled() {
    let sampled: std::collections::BTreeSet<&str> =
        every_event().iter().map(Event::type_name).collect();
    for spec in EVENT_FIELDS {
        assert!(
            sampled.contains(spec.type_name),
            "no sample of {}",
            spec.type_name
        );
    }
    assert_eq!(sampled.len(), EVENT_FIELDS.len());
}

#[test]
fn every_event_round_trips_through_line() {
    for event in every_event() {
        let l = line(event);
        let json = l.to_json();
        let back = Line::parse(&json).unwrap_or_else(|e| panic!("{json}: {e}"));
        if l.event.has_session_id() {
            assert_eq!(back, l, "{json}");
        } else {
            assert_eq!(back.session_id, "", "{json}");
            assert_eq!(back.event, l.event, "{json}");
        }
        // write_json appends exactly to_json's bytes.
        let mut buf = b"prefix".to_vec();
        l.write_json(&mut buf);
        assert_eq!(&buf[6..], json.as_bytes());
    }
}

#[test]
fn write_json_orders_session_id_type_then_contract_fields() {
    for event in every_event() {
        let l = line(event);
        let json = l.to_json();
        let spec = EVENT_FIELDS
            .iter()
            .find(|s| s.type_name == l.event.type_name())
            .expect("every type has a spec");
        let mut want: Vec<String> = Vec::new();
        if spec.has_session_id {
            want.push("session_id".into());
        }
        want.push("type".into());
        let present = keys(&json);
        for f in spec.fields {
            if f.required || present.contains(&f.name.to_string()) {
                want.push(f.name.into());
            }
        }
        assert_eq!(present, want, "{json}");
    }
}

#[test]
fn every_command_round_trips_and_matches_its_field_table() {
    let commands = every_command();
    assert_eq!(commands.len(), COMMAND_NAMES.len());
    for (cmd, spec) in commands.iter().zip(COMMAND_FIELDS) {
        let json = cmd.to_line();
        let back = Command::parse_line(&json)
            .expect("parses")
            .expect("not blank");
        assert_eq!(&back, cmd);
        let mut want = vec!["cmd".to_string()];
        want.extend(spec.fields.iter().map(|f| f.name.to_string()));
        assert_eq!(keys(&json), want, "{json}");
        assert_eq!(
            serde_json::from_str::<Value>(&json).expect("JSON")["cmd"],
            spec.cmd
        );
    }
}

#[test]
fn command_parsing_follows_the_contract() {
    assert_eq!(Command::parse_line("   "), Ok(None));
    assert_eq!(Command::parse_line(""), Ok(None));
    assert_eq!(
        Command::parse_line(r#"{"cmd":"user","text":"hi","extra":[1,2]}"#),
        Ok(Some(Command::User { text: "hi".into() }))
    );
    let err = Command::parse_line(r#"{"cmd":"launch"}"#).expect_err("unknown cmd");
    assert_eq!(err, CommandError::UnknownCmd("launch".into()));
    let msg = err.to_string();
    for name in COMMAND_NAMES {
        assert!(msg.contains(name), "{msg} does not name {name}");
    }
    assert!(matches!(
        Command::parse_line(r#"{"cmd":"approve","approval_id":"a1"}"#),
        Err(CommandError::BadField { .. })
    ));
    assert!(matches!(
        Command::parse_line("{"),
        Err(CommandError::NotJson(_))
    ));
    assert_eq!(Command::parse_line("[1]"), Err(CommandError::NotObject));
    assert_eq!(
        Command::parse_line(r#"{"text":"x"}"#),
        Err(CommandError::MissingCmd)
    );
}

/// Every golden line: the contract's own lines and one of every event.
fn golden_lines() -> Vec<String> {
    let mut v = vec![
        Hello::new("...", "0.2.0", "/abs/path", false).to_json(),
        Hello::new("s1", "0.2.0", "/abs/path", true).to_json(),
        Transcript::capped(
            "...",
            &[TranscriptMessage {
                role: "user".into(),
                content: "...".into(),
            }],
        )
        .to_json(),
    ];
    v.extend(every_event().into_iter().map(|e| line(e).to_json()));
    v
}

#[test]
fn every_golden_line_validates_against_the_schema_and_the_line_checker() {
    let schema = stdio_schema();
    for l in golden_lines() {
        let value: Value = serde_json::from_str(&l).expect("JSON");
        check_against(&schema, "stdout_line", &value).unwrap_or_else(|e| panic!("{l}: {e}"));
        check_against(&schema, "", &value).unwrap_or_else(|e| panic!("{l}: {e}"));
        assert!(check_against(&schema, "command", &value).is_err(), "{l}");
        check_line(&l).unwrap_or_else(|e| panic!("{l}: {e:?}"));
    }
    for c in every_command() {
        let value: Value = serde_json::from_str(&c.to_line()).expect("JSON");
        check_against(&schema, "command", &value).unwrap_or_else(|e| panic!("{value}: {e}"));
        assert!(check_against(&schema, "stdout_line", &value).is_err());
    }
    // Extra fields on a command are ignored, so the schema allows them; an illegal mode is not.
    let extra = json!({"cmd": "quit", "why": "done"});
    assert!(check_against(&schema, "command", &extra).is_ok());
    let bad_mode = json!({"cmd": "approval_mode", "mode": "yolo"});
    assert!(check_against(&schema, "command", &bad_mode).is_err());
    let unknown = json!({"cmd": "launch"});
    assert!(check_against(&schema, "command", &unknown).is_err());
}

#[test]
fn the_schema_is_draft_2020_12_and_names_every_variant() {
    let schema = stdio_schema();
    assert_eq!(
        schema["$schema"],
        "https://json-schema.org/draft/2020-12/schema"
    );
    for spec in EVENT_FIELDS {
        assert!(
            schema["$defs"][format!("event_{}", spec.type_name)].is_object(),
            "{}",
            spec.type_name
        );
    }
    for name in COMMAND_NAMES {
        assert!(schema["$defs"][format!("cmd_{name}")].is_object(), "{name}");
    }
}
