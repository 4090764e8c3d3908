//! An ACP prompt (content blocks) as the text and images of one prompt.
//!
//! Invariants: text blocks are kept verbatim and joined in order; an embedded text resource
//! (the editor's context: a file or selection, possibly unsaved) is included whole, fenced by
//! its URI, so the model sees exactly what the user attached; a resource link is named by its
//! URI for the model to read with its tools; an image block (advertised: `image: true`) is
//! checked like any image (its type sniffed from the bytes, not taken from `mimeType`; the
//! size cap) and follows the text. Audio is not advertised, so a prompt carrying it is
//! refused (the caller answers -32602) rather than silently losing part of what the user
//! said; so is an embedded binary resource, and an image that is not one.

use agent_client_protocol_schema::v1::{ContentBlock, EmbeddedResourceResource};
use openmax_core::conversation::Image;

/// The user text and images for `blocks`, or why the prompt cannot be taken.
pub fn prompt_of(blocks: &[ContentBlock]) -> Result<(String, Vec<Image>), String> {
    let mut images = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        if let ContentBlock::Image(img) = block {
            let label = img
                .uri
                .clone()
                .unwrap_or_else(|| format!("image #{}", i + 1));
            let bytes = crate::images::decode(&img.data).map_err(|e| format!("{label}: {e}"))?;
            images.push(crate::images::from_bytes(&label, &bytes)?);
        }
    }
    Ok((text_of(blocks)?, images))
}

/// The user text for `blocks` (images left out), or why the prompt cannot be taken.
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
            ContentBlock::Image(_) => {}
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
    fn an_image_block_is_checked_and_follows_the_text() {
        use base64::Engine;
        let png = crate::images::tiny_png(3, 2);
        let data = base64::engine::general_purpose::STANDARD.encode(&png);
        let b = blocks(json!([
            {"type": "text", "text": "what is this"},
            {"type": "image", "data": data, "mimeType": "image/jpeg"}
        ]));
        let (text, images) = prompt_of(&b).unwrap();
        assert_eq!(text, "what is this");
        assert_eq!(
            images[0].media_type, "image/png",
            "sniffed, not taken from mimeType"
        );
        assert_eq!(images[0].path, "image #2");
        assert_eq!((images[0].width, images[0].height), (Some(3), Some(2)));
    }

    #[test]
    fn bad_images_audio_and_blobs_are_refused() {
        let img = blocks(json!([{"type": "image", "data": "AA==", "mimeType": "image/png"}]));
        assert!(prompt_of(&img).unwrap_err().contains("not a PNG"));
        let audio = blocks(json!([{"type": "audio", "data": "AA==", "mimeType": "audio/wav"}]));
        assert!(text_of(&audio).unwrap_err().contains("audio"));
        let blob = blocks(json!([
            {"type": "resource", "resource": {"uri": "file:///x.bin", "blob": "AA=="}}
        ]));
        assert!(text_of(&blob).unwrap_err().contains("x.bin"));
    }
}
