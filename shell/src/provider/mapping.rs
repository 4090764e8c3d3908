//! What every per-API stream mapping shares: the [`StreamMapper`] trait the HTTP driver and the
//! demo provider run, the terminal-item bookkeeping, and small JSON helpers.
//!
//! Invariant of every mapper: over one stream it returns at most one terminal item
//! (`Completed`, `EndedWithoutCompletion` or `Failed`), nothing after it, and
//! [`StreamMapper::on_eof`] / [`StreamMapper::on_body_error`] return one when none was returned
//! yet. So "Opened, items…, exactly one terminal" holds for any byte stream.

use openmax_core::provider::{FailureKind, ProviderItem};
use serde_json::Value;

use super::sse::SseEvent;

/// A stateful mapping from one API's SSE events to normalized provider items.
pub trait StreamMapper: Send {
    /// Map one decoded event. Returns nothing once a terminal item was returned.
    fn on_event(&mut self, ev: &SseEvent) -> Vec<ProviderItem>;
    /// The body ended cleanly: `EndedWithoutCompletion` unless the stream completed (or, for
    /// APIs whose completion is implied at the end, the pending completion).
    fn on_eof(&mut self) -> Vec<ProviderItem>;
    /// The body failed mid-stream (aborted socket): `EndedWithoutCompletion { detail }` unless
    /// a terminal item was already returned.
    fn on_body_error(&mut self, detail: &str) -> Vec<ProviderItem> {
        broken(self, detail)
    }
    /// Whether a terminal item has been returned.
    fn is_done(&self) -> bool;
    /// Record that a terminal item has been returned.
    fn mark_done(&mut self);
}

/// The body of `m`'s stream failed mid-stream: `EndedWithoutCompletion { detail }` unless a
/// terminal item was already returned.
pub fn broken<M: StreamMapper + ?Sized>(m: &mut M, detail: &str) -> Vec<ProviderItem> {
    if m.is_done() {
        return Vec::new();
    }
    m.mark_done();
    vec![ProviderItem::EndedWithoutCompletion {
        detail: format!("the stream broke before completion: {detail}"),
    }]
}

/// Whether an item ends the stream.
pub fn is_terminal(item: &ProviderItem) -> bool {
    matches!(
        item,
        ProviderItem::Completed { .. }
            | ProviderItem::EndedWithoutCompletion { .. }
            | ProviderItem::Failed { .. }
    )
}

/// An event's data as JSON. `Ok(None)` for an event with empty data (it carries nothing);
/// `Err` with the terminal `Failed { kind: Corrupt }` item for an event the decoder marked
/// damaged or whose data is not valid JSON (a chunk cut mid-JSON, a lone surrogate escape,
/// which serde_json refuses in a string): a damaged event is never skipped, because what it
/// carried (reply text, a tool call's arguments, the completion) would be lost silently.
pub fn event_json(ev: &SseEvent) -> Result<Option<Value>, ProviderItem> {
    let corrupt = |why: String| ProviderItem::Failed {
        kind: FailureKind::Corrupt,
        message: format!(
            "the stream sent a damaged {:?} event ({why}): {}",
            ev.event,
            snippet(ev.data.trim(), 120)
        ),
    };
    if let Some(why) = ev.damage {
        return Err(corrupt(why.to_string()));
    }
    if ev.data.trim().is_empty() {
        return Ok(None);
    }
    match serde_json::from_str(&ev.data) {
        Ok(v) => Ok(Some(v)),
        Err(e) => Err(corrupt(format!("not valid JSON: {e}"))),
    }
}

/// A string field, or "".
pub fn str_at<'a>(v: &'a Value, pointer: &str) -> &'a str {
    v.pointer(pointer).and_then(Value::as_str).unwrap_or("")
}

/// An unsigned integer field, if present.
pub fn u64_at(v: &Value, pointer: &str) -> Option<u64> {
    v.pointer(pointer).and_then(Value::as_u64)
}

/// A `Failed` item from an error object `{type?, code?, message?}` (either field may name the
/// class; numeric codes such as OpenRouter's HTTP-like ones are mapped by status class).
pub fn failed_from_error(err: &Value, fallback_message: &str) -> ProviderItem {
    let message = match err.get("message").and_then(Value::as_str) {
        Some(m) if !m.is_empty() => m.to_string(),
        _ => fallback_message.to_string(),
    };
    ProviderItem::Failed {
        kind: classify_error_object(err, &message),
        message,
    }
}

pub use openmax_core::provider::errors::{classify_error_object, kind_for_status, snippet};

/// A tool result's text as sent to APIs that have no error flag for it.
pub fn result_text(ok: bool, output: &str) -> String {
    if ok {
        output.to_string()
    } else {
        format!("[tool call failed]\n{output}")
    }
}

/// An image as a `data:` URL (OpenAI's image parts).
pub fn data_url(img: &openmax_core::conversation::Image) -> String {
    format!("data:{};base64,{}", img.media_type, img.data)
}

/// The text sent in place of an image whose bytes are no longer there (a resumed session
/// whose stored copy went missing).
pub fn image_gone(img: &openmax_core::conversation::Image) -> String {
    format!(
        "[openmax note] the {} is no longer available (its stored copy is missing)",
        img.describe()
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ev(data: &str) -> SseEvent {
        SseEvent {
            event: "message".into(),
            data: data.into(),
            id: None,
            damage: None,
        }
    }

    fn corrupt_message(r: Result<Option<Value>, ProviderItem>) -> String {
        match r {
            Err(ProviderItem::Failed {
                kind: FailureKind::Corrupt,
                message,
            }) => message,
            other => panic!("expected a Corrupt failure, got {other:?}"),
        }
    }

    /// Each API's mapper, fresh.
    fn mappers() -> Vec<(&'static str, Box<dyn StreamMapper>)> {
        vec![
            (
                "anthropic",
                Box::new(super::super::anthropic::AnthropicMapper::new()),
            ),
            (
                "openai",
                Box::new(super::super::openai::OpenaiMapper::new()),
            ),
            (
                "openai-chat",
                Box::new(super::super::chat::ChatMapper::new()),
            ),
        ]
    }

    #[test]
    fn a_broken_body_ends_every_stream_once() {
        for (api, mut m) in mappers() {
            assert!(!m.is_done(), "{api}: done before anything came");
            let first = m.on_body_error("reset by peer");
            assert!(
                matches!(
                    first.as_slice(),
                    [ProviderItem::EndedWithoutCompletion { detail }]
                        if detail == "the stream broke before completion: reset by peer"
                ),
                "{api}: {first:?}"
            );
            assert!(m.is_done(), "{api}");
            assert!(
                m.on_body_error("again").is_empty(),
                "{api}: a second terminal"
            );
            assert!(m.on_eof().is_empty(), "{api}: a terminal after the break");
            let late = ev("{\"type\":\"message_stop\"}");
            assert!(
                m.on_event(&late).is_empty(),
                "{api}: an item after the break"
            );
        }
        // The other order: a clean end, then the socket's error, is still one terminal.
        for (api, mut m) in mappers() {
            assert!(!m.is_done(), "{api}: done before anything came");
            let end = m.on_eof();
            assert_eq!(
                end.iter().filter(|i| is_terminal(i)).count(),
                1,
                "{api}: {end:?}"
            );
            assert!(m.is_done(), "{api}: not done after its end");
            assert!(m.on_body_error("late").is_empty(), "{api}");
        }
    }

    #[test]
    fn damaged_events_fail_the_stream() {
        assert_eq!(event_json(&ev("{\"a\":1}")).unwrap(), Some(json!({"a":1})));
        assert_eq!(event_json(&ev("  ")).unwrap(), None);
        let m = corrupt_message(event_json(&ev("{\"delta\":{\"text\":\"hal")));
        assert!(m.contains("not valid JSON"), "{m}");
        let m = corrupt_message(event_json(&ev("{\"text\":\"a\\ud800b\"}")));
        assert!(m.contains("not valid JSON"), "{m}");
        let mut bad = ev("{\"text\":\"\u{fffd}\"}");
        bad.damage = Some("a line is not valid UTF-8");
        let m = corrupt_message(event_json(&bad));
        assert!(m.contains("UTF-8"), "{m}");
    }
}
