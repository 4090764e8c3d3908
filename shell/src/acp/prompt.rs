//! An ACP prompt (content blocks) as the text of one `user` command.
//!
//! Invariants: text blocks are kept verbatim and joined in order; an embedded text resource
//! (the editor's context: a file or selection, possibly unsaved) is included whole, fenced by
//! its URI, so the model sees exactly what the user attached; a resource link is named by its
//! URI for the model to read with its tools. Images and audio are not advertised in the
//! prompt capabilities, so a prompt carrying them is refused (the caller answers -32602)
//! rather than silently losing part of what the user said; so is an embedded binary resource.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};

/// The user text for `blocks`, or why the prompt cannot be taken.
pub fn text_of(blocks: &[ContentBlock]) -> Result<String, String> {
    let mut parts: Vec<String> = Vec::new();
    for block in blocks {
        match block {
            ContentBlock::Text(t) => parts.push(t.text.clone()),
            ContentBlock::ResourceLink(l) => {
                parts.push(format!("[{}]({})", l.name, l.uri));
            }
            ContentBlock::Resource(r) => match &r.resource {
                EmbeddedResourceResource::TextResourceContents(t) => {
                    let mut body = t.text.clone();
                    if !body.ends_with('\n') {
                        body.push('\n');
                    }
                    parts.push(format!(
                        "<context uri=\"{}\">\n{body}</context>",
                        t.uri.replace('"', "%22")
                    ));
                }
                EmbeddedResourceResource::BlobResourceContents(b) => {
                    return Err(format!(
                        "the prompt embeds the binary resource {}; openmax takes text only",
                        b.uri
                    ))
                }
                _ => return Err("the prompt embeds a resource of an unknown kind".into()),
            },
            ContentBlock::Image(_) => {
                return Err("the prompt carries an image; openmax takes text only".into())
            }
            ContentBlock::Audio(_) => {
                return Err("the prompt carries audio; openmax takes text only".into())
            }
            _ => return Err("the prompt carries a content block of an unknown kind".into()),
        }
    }
    Ok(parts.join("\n"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn blocks(v: serde_json::Value) -> Vec<ContentBlock> {
        serde_json::from_value(v).unwrap()
    }

    #[test]
    fn text_links_and_embedded_context() {
        let b = blocks(json!([
            {"type": "text", "text": "Explain"},
            {"type": "resource_link", "name": "a.rs", "uri": "file:///p/a.rs"},
            {"type": "resource", "resource": {"uri": "file:///p/b.rs", "text": "fn b() {}"}}
        ]));
        assert_eq!(
            text_of(&b).unwrap(),
            "Explain\n[a.rs](file:///p/a.rs)\n<context uri=\"file:///p/b.rs\">\nfn b() {}\n</context>"
        );
        assert_eq!(text_of(&[]).unwrap(), "");
    }

    #[test]
    fn images_audio_and_blobs_are_refused() {
        let img = blocks(json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]));
        assert!(text_of(&img).unwrap_err().contains("image"));
        let audio = blocks(json!([{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]));
        assert!(text_of(&audio).unwrap_err().contains("audio"));
        let blob = blocks(json!([
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA=="}}
        ]));
        assert!(text_of(&blob).unwrap_err().contains("x.bin"));
    }
}
