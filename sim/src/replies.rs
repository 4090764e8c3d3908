//! How a reply script ([`Reply`]) becomes the core's provider inputs: the items of a stream
//! (text split into deltas, tool-call arguments split into pieces), its ending (completed,
//! dropped, stalled, failed), or a request that fails before any stream (unreachable, an HTTP
//! status with its Retry-After and error body), each with its delay after the send.
//!
//! Invariant: a pure function of the script, the flavor and the request's ids.

use openmax_core::machine::Input;
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure, RequestId};

use crate::script::{Reply, StreamEnd, StreamItem};

/// The core inputs a reply script produces, each with its delay after the send.
pub fn reply_inputs(
    script: &Reply,
    flavor: crate::script::Flavor,
    request: RequestId,
    attempt: u32,
) -> Vec<(u64, Input)> {
    let provider = |item| Input::Provider {
        request,
        attempt,
        item,
    };
    // A request that fails before any stream: one input, at once.
    let failed = |failure| {
        vec![(
            0,
            Input::RequestFailed {
                request,
                attempt,
                failure,
            },
        )]
    };
    match script {
        Reply::Unreachable => failed(RequestFailure::Unreachable {
            detail: "connection refused (scripted)".into(),
        }),
        Reply::Transport => failed(RequestFailure::Transport {
            detail: "connection closed before the response (scripted)".into(),
        }),
        Reply::Status {
            status,
            retry_after,
            error,
            message,
        } => {
            let message = message
                .clone()
                .unwrap_or_else(|| format!("HTTP {status} (scripted)"));
            let kind = FailureKind::classify(error.as_deref().unwrap_or(""), &message);
            failed(RequestFailure::Http {
                status: *status,
                retry_after_s: retry_after.as_deref().and_then(|s| s.trim().parse().ok()),
                kind,
                message,
            })
        }
        Reply::RawStatus { status, body } => {
            let (kind, message) =
                openmax_core::provider::errors::http_error(*status, "", body.as_bytes());
            failed(RequestFailure::Http {
                status: *status,
                retry_after_s: None,
                kind,
                message,
            })
        }
        Reply::Stream {
            items,
            end,
            delay_ms,
        } => {
            let mut out = Vec::new();
            let mut t = *delay_ms;
            out.push((t, provider(ProviderItem::Opened)));
            let mut index = 0u32;
            for item in items {
                t += delay_ms;
                match item {
                    StreamItem::Text { text } => {
                        out.push((t, provider(ProviderItem::TextDelta { text: text.clone() })))
                    }
                    StreamItem::Thinking { text } => out.push((
                        t,
                        provider(ProviderItem::ThinkingDelta { text: text.clone() }),
                    )),
                    StreamItem::ToolCall { id, name, args } => {
                        out.push((
                            t,
                            provider(ProviderItem::ToolCallStart {
                                index,
                                id: id.clone(),
                                name: name.clone(),
                            }),
                        ));
                        for piece in split_json(&args.to_string()) {
                            out.push((
                                t,
                                provider(ProviderItem::ToolCallArgs { index, json: piece }),
                            ));
                        }
                        index += 1;
                    }
                    StreamItem::Usage {
                        prompt_tokens,
                        completion_tokens,
                        cached_tokens,
                    } => out.push((
                        t,
                        provider(ProviderItem::Usage {
                            prompt_tokens: *prompt_tokens,
                            completion_tokens: *completion_tokens,
                            cached_tokens: *cached_tokens,
                        }),
                    )),
                    StreamItem::Corrupt { of, fault } => {
                        // What the client reads before the damaged event: a tool call's start
                        // and all but its last argument piece; text items are one event.
                        if let StreamItem::ToolCall { id, name, args } = of.as_ref() {
                            out.push((
                                t,
                                provider(ProviderItem::ToolCallStart {
                                    index,
                                    id: id.clone(),
                                    name: name.clone(),
                                }),
                            ));
                            let mut pieces = split_json(&args.to_string());
                            pieces.pop();
                            for piece in pieces {
                                out.push((
                                    t,
                                    provider(ProviderItem::ToolCallArgs { index, json: piece }),
                                ));
                            }
                        }
                        out.push((
                            t,
                            provider(ProviderItem::Failed {
                                kind: FailureKind::Corrupt,
                                message: format!("a damaged event ({fault:?}, scripted)"),
                            }),
                        ));
                        return out;
                    }
                }
            }
            t += delay_ms;
            let has_calls = items
                .iter()
                .any(|i| matches!(i, StreamItem::ToolCall { .. }));
            match end {
                StreamEnd::Complete { finish } => out.push((
                    t,
                    provider(ProviderItem::Completed {
                        finish_reason: finish
                            .clone()
                            .unwrap_or_else(|| flavor.default_finish(has_calls).to_string()),
                    }),
                )),
                StreamEnd::Abort => out.push((
                    t,
                    provider(ProviderItem::EndedWithoutCompletion {
                        detail: "connection reset mid-body (scripted)".into(),
                    }),
                )),
                StreamEnd::CleanEof => out.push((
                    t,
                    provider(ProviderItem::EndedWithoutCompletion {
                        detail: "stream ended without a completion event (scripted)".into(),
                    }),
                )),
                StreamEnd::Stall => {}
                StreamEnd::Endless { delta_bytes } => {
                    let delta = "x".repeat((*delta_bytes).max(1));
                    for _ in 0..(8 << 20) / delta.len() + 1 {
                        out.push((
                            t,
                            provider(ProviderItem::TextDelta {
                                text: delta.clone(),
                            }),
                        ));
                    }
                }
                StreamEnd::Error { error, message } => out.push((
                    t,
                    provider(ProviderItem::Failed {
                        kind: FailureKind::classify(error, message),
                        message: message.clone(),
                    }),
                )),
            }
            out
        }
    }
}

/// Split a JSON text into up to three pieces on char boundaries (no empty pieces).
fn split_json(s: &str) -> Vec<String> {
    let n = s.len();
    let mut cuts = vec![0];
    for k in [n / 3, 2 * n / 3] {
        let mut c = k;
        while c < n && !s.is_char_boundary(c) {
            c += 1;
        }
        cuts.push(c);
    }
    cuts.push(n);
    cuts.windows(2)
        .filter(|w| w[1] > w[0])
        .map(|w| s[w[0]..w[1]].to_string())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn split_json_keeps_every_byte() {
        for s in ["{}", "{\"a\":\"é\"}", "", "{\"path\":\"src/main.rs\"}"] {
            assert_eq!(split_json(s).concat(), s);
            assert!(split_json(s).iter().all(|p| !p.is_empty()));
        }
    }

    #[test]
    fn stream_script_becomes_opened_items_and_ending() {
        let r = Reply::Stream {
            items: vec![
                StreamItem::Text { text: "hi".into() },
                StreamItem::ToolCall {
                    id: "c1".into(),
                    name: "read_file".into(),
                    args: serde_json::json!({"path": "a.rs"}),
                },
            ],
            end: StreamEnd::Complete { finish: None },
            delay_ms: 10,
        };
        let ins = reply_inputs(&r, crate::script::Flavor::Anthropic, 1, 1);
        assert!(matches!(
            ins[0],
            (
                10,
                Input::Provider {
                    item: ProviderItem::Opened,
                    ..
                }
            )
        ));
        assert!(matches!(
            &ins.last().unwrap().1,
            Input::Provider { item: ProviderItem::Completed { finish_reason }, .. } if finish_reason == "tool_use"
        ));
        let args: String = ins
            .iter()
            .filter_map(|(_, i)| match i {
                Input::Provider {
                    item: ProviderItem::ToolCallArgs { json, .. },
                    ..
                } => Some(json.clone()),
                _ => None,
            })
            .collect();
        assert_eq!(args, "{\"path\":\"a.rs\"}");
    }

    #[test]
    fn status_parses_retry_after_seconds_and_classifies() {
        let r = Reply::Status {
            status: 429,
            retry_after: Some("7".into()),
            error: Some("insufficient_quota".into()),
            message: None,
        };
        let ins = reply_inputs(&r, crate::script::Flavor::Openai, 3, 2);
        match &ins[0].1 {
            Input::RequestFailed {
                failure:
                    RequestFailure::Http {
                        retry_after_s,
                        kind,
                        ..
                    },
                ..
            } => {
                assert_eq!(*retry_after_s, Some(7));
                assert_eq!(*kind, FailureKind::InsufficientQuota);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn stall_has_no_ending() {
        let r = Reply::Stream {
            items: vec![],
            end: StreamEnd::Stall,
            delay_ms: 0,
        };
        assert_eq!(
            reply_inputs(&r, crate::script::Flavor::Anthropic, 1, 1).len(),
            1
        );
    }
}
