//! A `tools/call` result as the model reads it: text blocks joined, images, audio and other
//! binary content summarised as one line (type, MIME type, size), embedded resources by their
//! text or a summary, `structuredContent` appended as JSON, `isError` making the call fail, and
//! the usual output cap.

use openmax_core::tool::ToolOutcome;

/// Turn the result JSON (`{"content": [...], "structuredContent": ..., "isError": ...}`) into a
/// tool outcome capped at `cap` bytes.
pub fn outcome(result: &serde_json::Value, cap: usize) -> ToolOutcome {
    let mut parts: Vec<String> = Vec::new();
    for block in result
        .get("content")
        .and_then(|c| c.as_array())
        .into_iter()
        .flatten()
    {
        parts.push(block_text(block));
    }
    if let Some(s) = result.get("structuredContent") {
        parts.push(format!("[structuredContent] {s}"));
    }
    let mut output = parts.join("\n");
    if output.len() > cap {
        let mut cut = cap;
        while !output.is_char_boundary(cut) {
            cut -= 1;
        }
        output.truncate(cut);
        output.push_str(&format!("\n[output cut at {cap} bytes]"));
    }
    let failed = result
        .get("isError")
        .and_then(|v| v.as_bool())
        .unwrap_or(false);
    ToolOutcome {
        ok: !failed,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

fn block_text(block: &serde_json::Value) -> String {
    let kind = block.get("type").and_then(|t| t.as_str()).unwrap_or("?");
    let str_of = |k: &str| block.get(k).and_then(|v| v.as_str());
    match kind {
        "text" => str_of("text").unwrap_or_default().to_string(),
        "image" | "audio" => binary_line(kind, str_of("mimeType"), str_of("data")),
        "resource" => {
            let r = block.get("resource").cloned().unwrap_or_default();
            let uri = r.get("uri").and_then(|v| v.as_str()).unwrap_or("?");
            match (r.get("text").and_then(|v| v.as_str()), r.get("blob")) {
                (Some(text), _) => format!("[resource {uri}]\n{text}"),
                (None, Some(blob)) => format!(
                    "{} {uri}",
                    binary_line(
                        "resource",
                        r.get("mimeType").and_then(|v| v.as_str()),
                        blob.as_str()
                    )
                ),
                (None, None) => format!("[resource {uri}]"),
            }
        }
        "resource_link" => format!("[resource link {}]", str_of("uri").unwrap_or("?")),
        other => format!("[{other} content, not shown]"),
    }
}

/// `[image image/png, 1234 bytes]` from base64 data (the size is the decoded size).
fn binary_line(kind: &str, mime: Option<&str>, data: Option<&str>) -> String {
    let b64 = data.unwrap_or("");
    let trimmed = b64.trim_end_matches('=');
    let bytes = trimmed.len() * 3 / 4;
    format!(
        "[{kind} {}, {bytes} bytes]",
        mime.unwrap_or("application/octet-stream")
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn text_binary_structured_and_errors() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "mimeType": "image/png", "data": "aGVsbG8="},
            {"type": "resource", "resource": {"uri": "file:///a", "text": "A"}},
            {"type": "text", "text": "bye"}
        ], "structuredContent": {"n": 1}});
        let o = outcome(&r, 10_000);
        assert!(o.ok);
        assert_eq!(
            o.output,
            "hello\n[image image/png, 5 bytes]\n[resource file:///a]\nA\nbye\n[structuredContent] {\"n\":1}"
        );
        let e = outcome(
            &json!({"content": [{"type": "text", "text": "no such file"}], "isError": true}),
            100,
        );
        assert!(!e.ok && e.output == "no such file");
        let long = outcome(
            &json!({"content": [{"type": "text", "text": "é".repeat(100)}]}),
            11,
        );
        assert!(long.output.starts_with("ééééé\n[output cut at 11 bytes]"));
        // Exactly at the cap is whole; a byte over it is cut.
        let text = |n: usize| json!({"content": [{"type": "text", "text": "x".repeat(n)}]});
        assert_eq!(outcome(&text(11), 11).output, "x".repeat(11));
        assert_eq!(
            outcome(&text(12), 11).output,
            format!("{}\n[output cut at 11 bytes]", "x".repeat(11))
        );
    }
}
