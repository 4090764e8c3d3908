//! The request body each adapter sends holds the core's own request: the same messages, in the
//! same order, with every tool call paired with the same result. The core shapes the request
//! (and counts its tokens); an adapter only translates it.
//!
//! The history has what used to be shaped in the adapters: a turn cancelled during a tool call
//! (one call cut off while running, one never run), a call cut off by a crash (no result was
//! ever recorded), a result that answers no call, and consecutive messages of one role.

use openmax_core::conversation::{Block, Message, ModelRequest, Role, MISSING_RESULT};
use openmax_core::machine::{Effect, Input, Output};
use openmax_core::provider::ProviderItem;
use openmax_core::tool::{ToolOutcome, ToolPlan};
use openmax_core::wire::Command;
use openmax_core::{Core, CoreConfig, Freeze, Millis};
use serde_json::{json, Value};

use super::{anthropic, chat, openai};

/// One message as every API can show it: its role, the results it carries (call id, ok), its
/// text, the calls it makes.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Shown {
    role: Role,
    results: Vec<(String, bool)>,
    text: String,
    calls: Vec<String>,
    /// The images' types and the start of their data.
    images: Vec<String>,
}

impl Shown {
    fn new(role: Role) -> Shown {
        Shown {
            role,
            results: Vec::new(),
            text: String::new(),
            calls: Vec::new(),
            images: Vec::new(),
        }
    }
}

/// Append to the last message when it has `role`, else start a new one.
fn at(out: &mut Vec<Shown>, role: Role) -> &mut Shown {
    if out.last().is_none_or(|m| m.role != role) {
        out.push(Shown::new(role));
    }
    out.last_mut().expect("just pushed")
}

const FAILED_PREFIX: &str = "[tool call failed]\n";

fn core_view(req: &ModelRequest) -> Vec<Shown> {
    req.messages
        .iter()
        .map(|m| {
            let mut s = Shown::new(m.role);
            for b in &m.content {
                match b {
                    Block::Text { text } => s.text.push_str(text),
                    Block::ToolUse { id, .. } => s.calls.push(id.clone()),
                    Block::ToolResult { id, ok, .. } => s.results.push((id.clone(), *ok)),
                    Block::Thinking { .. } => {}
                    // An image whose stored copy is gone is said in words.
                    Block::Image(i) if i.data.is_empty() => {
                        s.text.push_str(&super::mapping::image_gone(i))
                    }
                    Block::Image(i) => s.images.push(format!("{};{}", i.media_type, i.data)),
                }
            }
            s
        })
        .collect()
}

fn anthropic_view(body: &Value) -> Vec<Shown> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().expect("messages") {
        let role = if m["role"] == "assistant" {
            Role::Assistant
        } else {
            Role::User
        };
        let s = at(&mut out, role);
        assert_eq!(
            s.results.len() + s.calls.len() + s.text.len(),
            0,
            "roles alternate"
        );
        for b in m["content"].as_array().expect("content blocks") {
            match b["type"].as_str() {
                Some("text") => s.text.push_str(b["text"].as_str().unwrap_or_default()),
                Some("tool_use") => s.calls.push(b["id"].as_str().unwrap_or_default().into()),
                Some("image") => {
                    assert_eq!(b["source"]["type"], "base64");
                    s.images.push(format!(
                        "{};{}",
                        b["source"]["media_type"].as_str().unwrap_or_default(),
                        b["source"]["data"].as_str().unwrap_or_default()
                    ))
                }
                Some("tool_result") => s.results.push((
                    b["tool_use_id"].as_str().unwrap_or_default().into(),
                    b["is_error"] != Value::Bool(true),
                )),
                other => panic!("unexpected block {other:?}"),
            }
        }
    }
    out
}

fn openai_view(body: &Value) -> Vec<Shown> {
    let mut out = Vec::new();
    for item in body["input"].as_array().expect("input items") {
        match (item["type"].as_str(), item["role"].as_str()) {
            (Some("message"), Some(role)) => {
                let role = if role == "assistant" {
                    Role::Assistant
                } else {
                    Role::User
                };
                let s = at(&mut out, role);
                for part in item["content"].as_array().expect("parts") {
                    match part["image_url"].as_str() {
                        Some(url) => s.images.push(from_data_url(url)),
                        None => s.text.push_str(part["text"].as_str().unwrap_or_default()),
                    }
                }
            }
            (Some("function_call"), _) => at(&mut out, Role::Assistant)
                .calls
                .push(item["call_id"].as_str().unwrap_or_default().into()),
            (Some("function_call_output"), _) => {
                let output = item["output"].as_str().unwrap_or_default();
                at(&mut out, Role::User).results.push((
                    item["call_id"].as_str().unwrap_or_default().into(),
                    !output.starts_with(FAILED_PREFIX),
                ))
            }
            (Some("reasoning"), _) => {
                at(&mut out, Role::Assistant);
            }
            other => panic!("unexpected item {other:?}"),
        }
    }
    out
}

/// `data:<type>;base64,<data>` as `<type>;<data>`.
fn from_data_url(url: &str) -> String {
    let rest = url.strip_prefix("data:").expect("a data URL");
    rest.replacen(";base64,", ";", 1)
}

fn chat_view(body: &Value) -> Vec<Shown> {
    let mut out = Vec::new();
    for m in body["messages"].as_array().expect("messages") {
        match m["role"].as_str() {
            Some("system") => {}
            Some("tool") => {
                let content = m["content"].as_str().unwrap_or_default();
                at(&mut out, Role::User).results.push((
                    m["tool_call_id"].as_str().unwrap_or_default().into(),
                    !content.starts_with(FAILED_PREFIX),
                ))
            }
            Some("user") => {
                let s = at(&mut out, Role::User);
                match m["content"].as_array() {
                    Some(parts) => {
                        for p in parts {
                            match p["image_url"]["url"].as_str() {
                                Some(url) => s.images.push(from_data_url(url)),
                                None => s.text.push_str(p["text"].as_str().unwrap_or_default()),
                            }
                        }
                    }
                    None => s.text.push_str(m["content"].as_str().unwrap_or_default()),
                }
            }
            Some("assistant") => {
                let s = at(&mut out, Role::Assistant);
                s.text.push_str(m["content"].as_str().unwrap_or_default());
                for c in m["tool_calls"].as_array().into_iter().flatten() {
                    s.calls.push(c["id"].as_str().unwrap_or_default().into());
                }
            }
            other => panic!("unexpected role {other:?}"),
        }
    }
    out
}

/// Feeds a core and answers its effects: every record is on disk at once, every planned call
/// runs without asking; the request bodies it sent are kept.
struct Driver {
    core: Core,
    now: u64,
    sent: Vec<(u64, u32, ModelRequest)>,
    effects: Vec<Effect>,
}

impl Driver {
    fn new(history: Vec<Message>) -> Driver {
        let freeze = Freeze {
            system: "You are terse.".into(),
            tools: vec![],
            skills: vec![],
            hooks: vec![],
            changes: vec![],
            notes: vec![],
            trusted: None,
        };
        let mut config = CoreConfig::new("s1", freeze);
        config.history = history;
        Driver {
            core: Core::new(config),
            now: 0,
            sent: Vec::new(),
            effects: Vec::new(),
        }
    }

    fn feed(&mut self, input: Input) {
        self.now += 1;
        self.core.handle(Millis(self.now), input);
        let mut answers = Vec::new();
        while let Some(out) = self.core.poll() {
            let Output::Effect(e) = out else { continue };
            match &e {
                Effect::Persist { ticket, .. } => {
                    answers.push(Input::Persisted { ticket: *ticket })
                }
                Effect::PlanTool { call_id, .. } => answers.push(Input::ToolPlanned {
                    call_id: call_id.clone(),
                    plan: Box::new(ToolPlan {
                        mutating: false,
                        targets: vec!["a.txt".into()],
                        summary: "read a.txt".into(),
                        detail: String::new(),
                        source: None,
                        invalid: None,
                        sandbox: Default::default(),
                        confirm: None,
                    }),
                }),
                Effect::SendRequest {
                    request,
                    attempt,
                    body,
                } => self.sent.push((*request, *attempt, (**body).clone())),
                _ => {}
            }
            self.effects.push(e);
        }
        for a in answers {
            self.feed(a);
        }
    }

    fn line(&mut self, cmd: Command) {
        self.feed(Input::Line(cmd.to_line()));
    }

    fn stream(&mut self, items: Vec<ProviderItem>) {
        let (request, attempt, _) = self.sent.last().cloned().expect("a request went out");
        for item in items {
            self.feed(Input::Provider {
                request,
                attempt,
                item,
            });
        }
    }
}

fn call(index: u32, id: &str) -> Vec<ProviderItem> {
    vec![
        ProviderItem::ToolCallStart {
            index,
            id: id.into(),
            name: "read_file".into(),
        },
        ProviderItem::ToolCallArgs {
            index,
            json: r#"{"path":"a.txt"}"#.into(),
        },
    ]
}

/// A session whose turn was cancelled while the first of two calls ran.
fn cancelled_turn() -> Vec<Message> {
    let mut d = Driver::new(Vec::new());
    d.line(Command::User {
        text: "read both".into(),
    });
    let mut items = vec![ProviderItem::TextDelta {
        text: "Reading.".into(),
    }];
    items.extend(call(0, "c1"));
    items.extend(call(1, "c2"));
    items.push(ProviderItem::Completed {
        finish_reason: "tool_use".into(),
    });
    d.stream(items);
    assert!(d
        .effects
        .iter()
        .any(|e| matches!(e, Effect::RunTool { call_id, .. } if call_id == "c1")));
    d.line(Command::Cancel);
    d.feed(Input::ToolDone {
        call_id: "c1".into(),
        outcome: ToolOutcome {
            ok: false,
            output: "killed".into(),
            diffs: vec![],
            images: Vec::new(),
        },
    });
    assert!(!d.core.in_turn());
    d.core.conversation().to_vec()
}

#[test]
fn each_adapter_sends_the_cores_request_message_for_message() {
    let mut history = cancelled_turn();
    // Consecutive messages of one role.
    history.push(Message::user_text("[openmax note] the tools were re-read"));
    history.push(Message::user_text("now the other file"));
    history.push(Message::assistant_text("Looking."));
    history.push(Message::assistant_text(" Still looking."));
    // A result that answers no call.
    history.push(Message {
        role: Role::User,
        content: vec![Block::ToolResult {
            id: "ghost".into(),
            ok: true,
            output: "from nowhere".into(),
        }],
    });
    // A prompt with an image and one whose stored copy went missing (a resumed session), and
    // a tool's image after its result.
    let img = crate::images::from_bytes("shot.png", &crate::images::tiny_png(8, 8)).unwrap();
    let gone = openmax_core::conversation::Image {
        data: String::new(),
        path: "old.png".into(),
        ..img.clone()
    };
    history.push(Message {
        role: Role::User,
        content: vec![
            Block::text("see this"),
            Block::Image(img.clone()),
            Block::Image(gone),
        ],
    });
    history.push(Message {
        role: Role::Assistant,
        content: vec![Block::ToolUse {
            id: "c5".into(),
            name: "read_file".into(),
            input: json!({"path":"logo.png"}),
        }],
    });
    history.push(Message {
        role: Role::User,
        content: vec![
            Block::ToolResult {
                id: "c5".into(),
                ok: true,
                output: "image logo.png attached".into(),
            },
            Block::Image(img),
        ],
    });
    // A call cut off by a crash: its reply was recorded, no result ever was.
    history.push(Message::user_text("and b.txt"));
    history.push(Message {
        role: Role::Assistant,
        content: vec![
            Block::text("Reading b."),
            Block::ToolUse {
                id: "c9".into(),
                name: "read_file".into(),
                input: json!({"path":"b.txt"}),
            },
        ],
    });

    let mut d = Driver::new(history);
    d.line(Command::User {
        text: "continue".into(),
    });
    let (_, _, req) = d.sent.last().cloned().expect("the core sent its request");
    let core = core_view(&req);

    // The core's request carries the shaping: roles alternate, the cancelled calls have their
    // results, the crash-cut call has a failed one, the stray result is gone.
    assert!(core.windows(2).all(|w| w[0].role != w[1].role), "{core:#?}");
    let results: Vec<(String, bool)> = core.iter().flat_map(|m| m.results.clone()).collect();
    assert_eq!(
        results,
        [
            ("c1".to_string(), false),
            ("c2".to_string(), false),
            ("c5".to_string(), true),
            ("c9".to_string(), false)
        ]
    );
    assert!(req.messages.iter().flat_map(|m| &m.content).any(
        |b| matches!(b, Block::ToolResult { id, output, .. } if id == "c9" && output == MISSING_RESULT)
    ));
    assert!(core
        .iter()
        .any(|m| m.text == "[openmax note] the tools were re-readnow the other file"));
    assert_eq!(core.last().map(|m| m.text.as_str()), Some("continue"));
    assert_eq!(core.iter().map(|m| m.images.len()).sum::<usize>(), 2);
    assert!(
        core.iter()
            .any(|m| m.text.contains("image old.png, image/png")
                && m.text.contains("no longer available")),
        "{core:#?}"
    );

    let bodies = [
        (
            "anthropic",
            anthropic_view(&anthropic::build_body(&req, "claude-sonnet-4-5", 4096)),
        ),
        (
            "openai",
            openai_view(&openai::build_body(&req, "gpt-4.1", 4096)),
        ),
        (
            "openai-chat",
            chat_view(&chat::build_body(&req, "llama3", 4096)),
        ),
    ];
    for (name, shown) in bodies {
        assert_eq!(shown, core, "{name}");
    }
}
