//! Damaged stream events for [`crate::script::StreamItem::Corrupt`]: the item is rendered by
//! its flavor's encoder, then its last event is broken the way the script's [`Fault`] says (JSON
//! cut in half, a lone surrogate escape or a non-UTF-8 byte in its text), so that no client can
//! read it as a whole event.

use super::encode::Encoder;
use crate::script::{Fault, StreamItem};

/// The bytes of one script item; a [`StreamItem::Corrupt`] one is rendered, then damaged.
pub(crate) fn step(enc: &mut dyn Encoder, item: &StreamItem) -> Vec<u8> {
    let StreamItem::Corrupt { of, fault } = item else {
        return enc.item(item);
    };
    let with_text = |text: &str| -> Option<StreamItem> {
        let text = format!("{text}{DAMAGE_MARK}");
        match of.as_ref() {
            StreamItem::Text { .. } => Some(StreamItem::Text { text }),
            StreamItem::Thinking { .. } => Some(StreamItem::Thinking { text }),
            StreamItem::ToolCall { .. } | StreamItem::Usage { .. } | StreamItem::Corrupt { .. } => {
                None
            }
        }
    };
    let text = match of.as_ref() {
        StreamItem::Text { text } | StreamItem::Thinking { text } => text.as_str(),
        StreamItem::ToolCall { .. } | StreamItem::Usage { .. } | StreamItem::Corrupt { .. } => "",
    };
    let replacement: &[u8] = match fault {
        Fault::CutJson => return cut_last_event(enc.item(of)),
        Fault::LoneSurrogate => b"\\ud800",
        Fault::InvalidUtf8 => b"\xff",
    };
    match with_text(text) {
        Some(marked) => replace_all(&enc.item(&marked), DAMAGE_MARK.as_bytes(), replacement),
        None => cut_last_event(enc.item(of)),
    }
}

/// A private-use character the damage replaces (serde_json writes it unescaped).
const DAMAGE_MARK: &str = "\u{E000}";

/// Cut the JSON of the last `data:` line in half; with no data line, append an event whose
/// JSON is cut.
fn cut_last_event(mut bytes: Vec<u8>) -> Vec<u8> {
    let needle = b"data: ";
    let Some(start) = bytes
        .windows(needle.len())
        .rposition(|w| w == needle)
        .map(|i| i + needle.len())
    else {
        bytes.extend_from_slice(b"data: {\"type\":\"cont\n\n");
        return bytes;
    };
    let end = bytes[start..]
        .iter()
        .position(|&b| b == b'\n')
        .map_or(bytes.len(), |i| start + i);
    let half = start + (end - start) / 2;
    bytes.drain(half..end);
    bytes
}

fn replace_all(haystack: &[u8], needle: &[u8], with: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(haystack.len());
    let mut i = 0;
    while i < haystack.len() {
        if haystack[i..].starts_with(needle) {
            out.extend_from_slice(with);
            i += needle.len();
        } else {
            out.push(haystack[i]);
            i += 1;
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use serde_json::Value;

    use super::super::encode::RequestFacts;
    use super::super::render::render_stream;
    use crate::script::{Fault, Flavor, StreamEnd, StreamItem};

    #[test]
    fn corrupt_items_damage_the_last_event() {
        let facts = RequestFacts::from_body(1, &Value::Null, 10);
        for flavor in [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat] {
            for fault in [Fault::CutJson, Fault::LoneSurrogate, Fault::InvalidUtf8] {
                let item = StreamItem::Corrupt {
                    of: Box::new(StreamItem::Text { text: "hi".into() }),
                    fault,
                };
                let r = render_stream(flavor, &facts, &[item], &StreamEnd::CleanEof);
                let step = &r.steps[0];
                let last = step
                    .split(|&b| b == b'\n')
                    .rfind(|l| l.starts_with(b"data: "))
                    .unwrap();
                let parsed = std::str::from_utf8(&last[6..])
                    .ok()
                    .and_then(|s| serde_json::from_str::<Value>(s).ok());
                assert!(parsed.is_none(), "{flavor:?} {fault:?}: {last:?}");
            }
            let tool = StreamItem::Corrupt {
                of: Box::new(StreamItem::ToolCall {
                    id: "c".into(),
                    name: "read_file".into(),
                    args: serde_json::json!({"path": "a"}),
                }),
                fault: Fault::LoneSurrogate,
            };
            let r = render_stream(flavor, &facts, &[tool], &StreamEnd::CleanEof);
            let bytes = String::from_utf8(r.steps[0].to_vec()).unwrap();
            let last = bytes.lines().rfind(|l| l.starts_with("data: ")).unwrap();
            assert!(serde_json::from_str::<Value>(&last[6..]).is_err(), "{last}");
        }
    }
}
