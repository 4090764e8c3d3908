//! The mappings against the mock's renderer, with no network: for arbitrary scripts (text,
//! thinking, tool calls, usage; ending complete, with an error event, or cleanly without
//! completion), the bytes the mock would send, split at arbitrary points, decode and map back
//! to exactly what the script said, in every flavor.

use openmax_core::conversation::{Message, ModelRequest};
use openmax_core::provider::{FailureKind, ProviderItem};
use openmax_shell::provider::mapping::StreamMapper;
use openmax_shell::provider::sse::SseDecoder;
use openmax_shell::provider::{anthropic, chat, openai, Provider, ProviderConfig, ProviderKind};
use openmax_sim::mock::{render_stream, RequestFacts};
use openmax_sim::script::{Flavor, StreamEnd, StreamItem};
use quickcheck::{QuickCheck, TestResult};
use serde_json::{json, Value};

fn kind(f: Flavor) -> ProviderKind {
    match f {
        Flavor::Anthropic => ProviderKind::Anthropic,
        Flavor::Openai => ProviderKind::Openai,
        Flavor::OpenaiChat => ProviderKind::OpenaiChat,
    }
}

fn mapper(f: Flavor) -> Box<dyn StreamMapper> {
    match f {
        Flavor::Anthropic => Box::new(anthropic::AnthropicMapper::new()),
        Flavor::Openai => Box::new(openai::OpenaiMapper::new()),
        Flavor::OpenaiChat => Box::new(chat::ChatMapper::new()),
    }
}

/// Decode + map `bytes` cut at `cuts`, then a clean end of body.
fn map_bytes(f: Flavor, bytes: &[u8], cuts: &[usize]) -> Vec<ProviderItem> {
    let mut points: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    points.sort_unstable();
    let mut dec = SseDecoder::new();
    let mut m = mapper(f);
    let mut out = Vec::new();
    let mut start = 0;
    for p in points.into_iter().chain([bytes.len()]) {
        for ev in dec.feed(&bytes[start..p]) {
            out.extend(m.on_event(&ev));
        }
        start = p;
    }
    for ev in dec.finish() {
        out.extend(m.on_event(&ev));
    }
    out.extend(m.on_eof());
    out
}

fn script_from(raw: &[(u8, String)]) -> Vec<StreamItem> {
    let mut calls = 0;
    raw.iter()
        .map(|(sel, s)| match sel % 4 {
            0 => StreamItem::Text {
                text: format!("t{s}"),
            },
            1 => StreamItem::Thinking {
                text: format!("h{s}"),
            },
            2 => {
                calls += 1;
                StreamItem::ToolCall {
                    id: format!("call_{calls}"),
                    name: "grep".into(),
                    args: json!({"pattern": s, "case_insensitive": sel % 8 == 2}),
                }
            }
            _ => StreamItem::Usage {
                prompt_tokens: u64::from(*sel) * 10 + 5,
                completion_tokens: u64::from(*sel) + 1,
                cached_tokens: (sel % 2 == 0).then_some(u64::from(*sel)),
            },
        })
        .collect()
}

fn joined(items: &[ProviderItem], pick: fn(&ProviderItem) -> Option<&str>) -> String {
    items.iter().filter_map(pick).collect()
}

fn check(f: Flavor, script: &[StreamItem], end: &StreamEnd, cuts: &[usize]) -> Result<(), String> {
    let provider = Provider::new(ProviderConfig::defaults(kind(f))).map_err(|e| e.to_string())?;
    let body = provider.build_body(&ModelRequest {
        system: "s".into(),
        tools: vec![],
        messages: vec![Message::user_text("u")],
    });
    let body_len = body.to_string().len();
    let facts = RequestFacts::from_body(1, &body, body_len);
    let rendered = render_stream(f, &facts, script, end);
    let got = map_bytes(f, &rendered.concat(), cuts);

    let want_text: String = script
        .iter()
        .filter_map(|i| match i {
            StreamItem::Text { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let want_thinking: String = script
        .iter()
        .filter_map(|i| match i {
            StreamItem::Thinking { text } => Some(text.as_str()),
            _ => None,
        })
        .collect();
    let text = joined(&got, |i| match i {
        ProviderItem::TextDelta { text } => Some(text),
        _ => None,
    });
    let thinking = joined(&got, |i| match i {
        ProviderItem::ThinkingDelta { text } => Some(text),
        _ => None,
    });
    if text != want_text {
        return Err(format!("text {text:?} != {want_text:?}: {got:?}"));
    }
    if thinking != want_thinking {
        return Err(format!("thinking {thinking:?} != {want_thinking:?}"));
    }
    let want_calls: Vec<(String, String, Value)> = script
        .iter()
        .filter_map(|i| match i {
            StreamItem::ToolCall { id, name, args } => {
                Some((id.clone(), name.clone(), args.clone()))
            }
            _ => None,
        })
        .collect();
    let mut calls: Vec<(String, String, String)> = Vec::new();
    for item in &got {
        match item {
            ProviderItem::ToolCallStart { index, id, name } => {
                if *index as usize != calls.len() {
                    return Err(format!("tool index {index} out of order"));
                }
                calls.push((id.clone(), name.clone(), String::new()));
            }
            ProviderItem::ToolCallArgs { index, json } => match calls.get_mut(*index as usize) {
                Some(c) => c.2.push_str(json),
                None => return Err(format!("args for unknown tool {index}")),
            },
            _ => {}
        }
    }
    let calls: Vec<(String, String, Value)> = calls
        .into_iter()
        .map(|(id, name, args)| {
            let v = serde_json::from_str(&args).unwrap_or(Value::String(args));
            (id, name, v)
        })
        .collect();
    if calls != want_calls {
        return Err(format!("calls {calls:?} != {want_calls:?}"));
    }
    let scripted_usage = script.iter().rev().find_map(|i| match i {
        StreamItem::Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } => Some((
            *prompt_tokens,
            *completion_tokens,
            cached_tokens.unwrap_or(0),
        )),
        _ => None,
    });
    let got_usage = got.iter().find_map(|i| match i {
        ProviderItem::Usage {
            prompt_tokens,
            completion_tokens,
            cached_tokens,
        } => Some((
            *prompt_tokens,
            *completion_tokens,
            cached_tokens.unwrap_or(0),
        )),
        _ => None,
    });
    if let (Some(want), StreamEnd::Complete { .. }) = (scripted_usage, end) {
        if got_usage != Some(want) {
            return Err(format!("usage {got_usage:?} != {want:?}"));
        }
    }
    let has_tools = !want_calls.is_empty();
    let want_last = match end {
        StreamEnd::Complete { finish } => ProviderItem::Completed {
            finish_reason: match (f, finish.as_deref()) {
                // The Responses API has no finish reason: a cut-off reply is
                // `response.incomplete` with reason `max_output_tokens`, reported verbatim.
                (Flavor::Openai, Some("length")) => "max_output_tokens".into(),
                (_, Some(r)) => r.into(),
                (_, None) => f.default_finish(has_tools).into(),
            },
        },
        StreamEnd::Error { error, message } => ProviderItem::Failed {
            kind: FailureKind::classify(error, message),
            message: message.clone(),
        },
        StreamEnd::CleanEof | StreamEnd::Abort | StreamEnd::Stall => match got.last() {
            Some(ProviderItem::EndedWithoutCompletion { .. }) => return Ok(()),
            other => return Err(format!("expected EndedWithoutCompletion, got {other:?}")),
        },
        StreamEnd::Endless { .. } => return Err("an endless stream has no last item".into()),
    };
    if got.last() != Some(&want_last) {
        return Err(format!("last {:?} != {want_last:?}", got.last()));
    }
    Ok(())
}

#[test]
fn prop_rendered_scripts_map_back_in_every_flavor() {
    fn prop(raw: Vec<(u8, String)>, end_sel: u8, cuts: Vec<usize>) -> TestResult {
        let raw: Vec<(u8, String)> = raw.into_iter().take(12).collect();
        let script = script_from(&raw);
        let end = match end_sel % 5 {
            0 => StreamEnd::Complete { finish: None },
            1 => StreamEnd::Complete {
                finish: Some("length".into()),
            },
            2 => StreamEnd::Error {
                error: "overloaded_error".into(),
                message: "Overloaded".into(),
            },
            3 => StreamEnd::Error {
                error: "insufficient_quota".into(),
                message: "quota".into(),
            },
            _ => StreamEnd::CleanEof,
        };
        for f in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
            if let Err(e) = check(f, &script, &end, &cuts) {
                return TestResult::error(format!("{f:?} {end:?} {script:?}: {e}"));
            }
        }
        TestResult::passed()
    }
    QuickCheck::new()
        .tests(150)
        .quickcheck(prop as fn(Vec<(u8, String)>, u8, Vec<usize>) -> TestResult);
}

#[test]
fn fixed_script_with_everything() {
    let script = script_from(&[
        (1, "think".into()),
        (0, "hello".into()),
        (2, "fn main".into()),
        (6, "é\"\\".into()),
        (3, String::new()),
    ]);
    for f in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
        for end in [
            StreamEnd::Complete { finish: None },
            StreamEnd::CleanEof,
            StreamEnd::Error {
                error: "rate_limit_exceeded".into(),
                message: "slow".into(),
            },
        ] {
            check(f, &script, &end, &[1, 17, 400]).unwrap_or_else(|e| panic!("{f:?} {end:?}: {e}"));
        }
    }
}
