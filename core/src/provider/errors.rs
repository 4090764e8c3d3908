//! Reading what a server said when it refused: the class and message of an HTTP error body or
//! an in-stream error object, and the table of context-window refusals across servers.
//!
//! Pure: bytes and JSON in, a [`FailureKind`] and a capped message out. The shell calls
//! [`http_error`] on every non-2xx body; the simulator calls it on scripted raw bodies, so both
//! classify the same bytes the same way.

use serde_json::Value;

use super::FailureKind;

/// The longest server message kept (characters), in errors and `retry` reasons.
pub const MESSAGE_CHARS: usize = 500;
/// The longest text kept of a body that is not a JSON error (an HTML error page, a proxy's
/// plain text): it is unstructured, so one short line is all a person needs to see.
pub const BODY_TEXT_CHARS: usize = 200;

/// Where a [`ContextPattern`] looks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Field {
    /// The error's `type` or `code`, compared whole.
    TypeOrCode,
    /// The error's message, searched case-insensitively for the text.
    Message,
}

/// One way a server says the prompt does not fit the model's window.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ContextPattern {
    /// Which server sends it.
    pub server: &'static str,
    /// Where the text is looked for.
    pub field: Field,
    /// The type/code, or the message fragment (lowercase).
    pub text: &'static str,
    /// A real refusal of that server (status and body), for the docs and tests.
    pub example: (u16, &'static str),
}

/// Context-window refusals recognised (docs/providers.md has the same table). Each leads to
/// one compaction and one re-send of the request.
pub const CONTEXT_WINDOW_PATTERNS: &[ContextPattern] = &[
    ContextPattern {
        server: "Anthropic",
        field: Field::Message,
        text: "prompt is too long",
        example: (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"prompt is too long: 208310 tokens > 200000 maximum"}}"#,
        ),
    },
    ContextPattern {
        server: "Anthropic",
        field: Field::Message,
        text: "exceed context limit",
        example: (
            400,
            r#"{"type":"error","error":{"type":"invalid_request_error","message":"input length and `max_tokens` exceed context limit: 197000 + 16384 > 200000, decrease input length or `max_tokens` and try again"}}"#,
        ),
    },
    ContextPattern {
        server: "OpenAI Responses",
        field: Field::TypeOrCode,
        text: "context_length_exceeded",
        example: (
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":"context_length_exceeded"}}"#,
        ),
    },
    ContextPattern {
        server: "OpenAI Responses",
        field: Field::Message,
        text: "exceeds the context window",
        example: (
            400,
            r#"{"error":{"message":"Your input exceeds the context window of this model. Please adjust your input and try again.","type":"invalid_request_error","param":"input","code":null}}"#,
        ),
    },
    ContextPattern {
        server: "OpenAI Chat",
        field: Field::Message,
        text: "maximum context length",
        example: (
            400,
            r#"{"error":{"message":"This model's maximum context length is 128000 tokens. However, your messages resulted in 131072 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":null}}"#,
        ),
    },
    ContextPattern {
        server: "OpenAI",
        field: Field::TypeOrCode,
        text: "string_above_max_length",
        example: (
            400,
            r#"{"error":{"message":"Invalid 'messages[1].content': string too long.","type":"invalid_request_error","param":"messages[1].content","code":"string_above_max_length"}}"#,
        ),
    },
    ContextPattern {
        server: "LiteLLM",
        field: Field::Message,
        text: "contextwindowexceedederror",
        example: (
            400,
            r#"{"error":{"message":"litellm.ContextWindowExceededError: litellm.BadRequestError: OpenAIException - input too large. Received Model Group=gpt-4o\nAvailable Model Group Fallbacks=None","type":null,"param":null,"code":"400"}}"#,
        ),
    },
    ContextPattern {
        server: "vLLM",
        field: Field::Message,
        text: "maximum context length",
        example: (
            400,
            r#"{"object":"error","message":"This model's maximum context length is 4096 tokens. However, you requested 5120 tokens (4096 in the messages, 1024 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}"#,
        ),
    },
    ContextPattern {
        server: "vLLM",
        field: Field::Message,
        text: "is longer than the maximum model length",
        example: (
            400,
            r#"{"error":{"message":"The decoder prompt (length 9000) is longer than the maximum model length of 8192. Make sure that `max_model_len` is no smaller than the number of text tokens.","type":"BadRequestError","param":null,"code":400}}"#,
        ),
    },
    ContextPattern {
        server: "llama.cpp",
        field: Field::TypeOrCode,
        text: "exceed_context_size_error",
        example: (
            400,
            r#"{"error":{"code":400,"message":"request (9000 tokens) exceeds the available context size (8192 tokens), try increasing it","type":"exceed_context_size_error","n_prompt_tokens":9000,"n_ctx":8192}}"#,
        ),
    },
    ContextPattern {
        server: "llama.cpp",
        field: Field::Message,
        text: "exceeds the available context size",
        example: (
            400,
            r#"{"error":{"code":400,"message":"the request exceeds the available context size. try increasing the context size or enable context shift","type":"invalid_request_error"}}"#,
        ),
    },
    ContextPattern {
        server: "Ollama",
        field: Field::Message,
        text: "exceeds maximum context length",
        example: (
            400,
            r#"{"error":{"message":"input length exceeds maximum context length","type":"invalid_request_error","param":null,"code":null}}"#,
        ),
    },
    ContextPattern {
        server: "Ollama",
        field: Field::Message,
        text: "exceeded max context length",
        example: (
            500,
            r#"{"error":{"message":"prompt too long; exceeded max context length by 1442 tokens","type":"api_error","param":null,"code":null}}"#,
        ),
    },
];

/// Whether a type/code and message are a context-window refusal (see
/// [`CONTEXT_WINDOW_PATTERNS`]).
pub fn is_context_window_refusal(type_or_code: &str, message: &str) -> bool {
    let lower = message.to_lowercase();
    CONTEXT_WINDOW_PATTERNS.iter().any(|p| match p.field {
        Field::TypeOrCode => type_or_code == p.text,
        Field::Message => lower.contains(p.text),
    })
}

/// The failure class an HTTP status implies when the body names none.
pub fn kind_for_status(status: u16) -> FailureKind {
    match status {
        429 => FailureKind::RateLimit,
        529 => FailureKind::Overloaded,
        500..=599 => FailureKind::Server,
        _ => FailureKind::Other,
    }
}

/// Classify an error object `{type?, code?, message?}` by its `code`, then its `type` (the
/// first that is not `Other`); numeric codes (OpenRouter's, vLLM's, llama.cpp's HTTP-like ones)
/// by status class. A context-window message wins over any type or code.
pub fn classify_error_object(err: &Value, message: &str) -> FailureKind {
    for key in ["code", "type"] {
        let k = match err.get(key) {
            Some(Value::String(s)) => FailureKind::classify(s, message),
            Some(Value::Number(n)) => match FailureKind::classify("", message) {
                FailureKind::Other => n
                    .as_u64()
                    .and_then(|s| u16::try_from(s).ok())
                    .map(kind_for_status)
                    .unwrap_or(FailureKind::Other),
                k => k,
            },
            _ => FailureKind::Other,
        };
        if k != FailureKind::Other {
            return k;
        }
    }
    FailureKind::classify("", message)
}

/// The class and message (at most [`MESSAGE_CHARS`]) of a non-2xx response: the JSON body's
/// `error.message` (or `error` as a string, or a top-level `message`/`detail`), else the body's
/// text; the class from the error object, else the status. An empty message becomes
/// `HTTP <status> <reason>`.
pub fn http_error(status: u16, reason_phrase: &str, body: &[u8]) -> (FailureKind, String) {
    let text = String::from_utf8_lossy(body);
    let (kind, message) = match serde_json::from_str::<Value>(&text) {
        Ok(v) => {
            let err = v.get("error").unwrap_or(&Value::Null);
            let message = err
                .get("message")
                .and_then(Value::as_str)
                .or_else(|| err.as_str())
                .or_else(|| v.get("message").and_then(Value::as_str))
                .or_else(|| v.get("detail").and_then(Value::as_str))
                .map(|m| snippet(&collapse_whitespace(m), MESSAGE_CHARS))
                .unwrap_or_else(|| body_text(&text, BODY_TEXT_CHARS));
            let kind = if err.is_object() {
                classify_error_object(err, &message)
            } else if v.is_object() && v.get("message").is_some() {
                // vLLM's older shape: the error object is the body itself.
                classify_error_object(&v, &message)
            } else {
                FailureKind::classify("", &message)
            };
            (kind, message)
        }
        Err(_) => {
            let m = body_text(&text, BODY_TEXT_CHARS);
            (FailureKind::classify("", &m), m)
        }
    };
    let kind = match kind {
        FailureKind::Other => kind_for_status(status),
        k => k,
    };
    let message = if message.is_empty() {
        format!("HTTP {status} {}", reason_phrase.trim())
            .trim()
            .to_string()
    } else {
        message
    };
    (kind, message)
}

/// A response body as one short line of text: an HTML page's tags, scripts, styles and
/// comments removed and its common entities decoded, every run of whitespace (newlines
/// included) one space, at most `max` characters. A 501 page from a proxy becomes
/// `501 Not Implemented nginx` instead of a screenful of markup.
pub fn body_text(body: &str, max: usize) -> String {
    let text = if looks_like_html(body) {
        strip_html(body)
    } else {
        body.to_string()
    };
    snippet(&collapse_whitespace(&text), max)
}

/// Every run of whitespace as one space, trimmed.
pub fn collapse_whitespace(s: &str) -> String {
    s.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn looks_like_html(body: &str) -> bool {
    let head: String = body.trim_start().chars().take(512).collect();
    let head = head.to_ascii_lowercase();
    head.starts_with("<!doctype")
        || head.starts_with("<html")
        || head.starts_with("<head")
        || head.starts_with("<body")
        || head.starts_with("<?xml")
        || head.contains("<html")
        || (head.starts_with('<') && head.contains("</"))
}

/// The text of an HTML document: elements whose content is not text (`script`, `style`,
/// comments) dropped, every other tag a space, entities decoded.
fn strip_html(html: &str) -> String {
    let mut out = String::with_capacity(html.len() / 2);
    let lower = html.to_ascii_lowercase();
    let mut i = 0;
    while i < html.len() {
        let rest = &lower[i..];
        if rest.starts_with("<!--") {
            i += rest.find("-->").map(|e| e + 3).unwrap_or(rest.len());
            continue;
        }
        if let Some(tag) = ["<script", "<style"].iter().find(|t| rest.starts_with(**t)) {
            let close = format!("</{}", &tag[1..]);
            i += match rest.find(&close) {
                Some(e) => e + rest[e..].find('>').map(|g| g + 1).unwrap_or(rest.len() - e),
                None => rest.len(),
            };
            continue;
        }
        if rest.starts_with('<') {
            i += rest.find('>').map(|e| e + 1).unwrap_or(rest.len());
            out.push(' ');
            continue;
        }
        // Safe slicing: `i` only ever moves by whole ASCII tokens or whole chars.
        let ch = html[i..].chars().next().unwrap_or(' ');
        out.push(ch);
        i += ch.len_utf8();
    }
    decode_entities(&out)
}

fn decode_entities(s: &str) -> String {
    const NAMED: [(&str, &str); 7] = [
        ("&nbsp;", " "),
        ("&lt;", "<"),
        ("&gt;", ">"),
        ("&quot;", "\""),
        ("&#39;", "'"),
        ("&apos;", "'"),
        ("&amp;", "&"),
    ];
    let mut out = s.to_string();
    for (from, to) in NAMED {
        out = out.replace(from, to);
    }
    out
}

/// At most `max` characters of `s` (on a char boundary), with `…` when cut.
pub fn snippet(s: &str, max: usize) -> String {
    match s.char_indices().nth(max) {
        Some((i, _)) => format!("{}…", &s[..i]),
        None => s.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn classify_prefers_code_then_type() {
        let e = json!({"type":"insufficient_quota","code":"insufficient_quota","message":"x"});
        assert_eq!(
            classify_error_object(&e, "x"),
            FailureKind::InsufficientQuota
        );
        let e = json!({"type":"requests","code":"rate_limit_exceeded"});
        assert_eq!(classify_error_object(&e, ""), FailureKind::RateLimit);
        let e = json!({"type":"overloaded_error","message":"Overloaded"});
        assert_eq!(
            classify_error_object(&e, "Overloaded"),
            FailureKind::Overloaded
        );
        let e = json!({"code":502,"message":"upstream"});
        assert_eq!(classify_error_object(&e, "upstream"), FailureKind::Server);
        let e = json!({"type":"invalid_request_error","message":"prompt is too long: 1 > 0"});
        assert_eq!(
            classify_error_object(&e, "prompt is too long: 1 > 0"),
            FailureKind::ContextLength
        );
    }

    #[test]
    fn snippet_cuts_on_char_boundary() {
        assert_eq!(snippet("héllo", 2), "hé…");
        assert_eq!(snippet("hé", 2), "hé");
    }

    #[test]
    fn every_context_window_example_is_recognised() {
        for p in CONTEXT_WINDOW_PATTERNS {
            let (status, body) = p.example;
            let (kind, message) = http_error(status, "", body.as_bytes());
            assert_eq!(kind, FailureKind::ContextLength, "{}: {body}", p.server);
            assert!(
                !message.is_empty() && !message.starts_with('{'),
                "{message}"
            );
        }
    }

    #[test]
    fn each_pattern_alone_is_enough() {
        for p in CONTEXT_WINDOW_PATTERNS {
            let k = match p.field {
                Field::TypeOrCode => FailureKind::classify(p.text, "bad request"),
                Field::Message => FailureKind::classify("invalid_request_error", p.text),
            };
            assert_eq!(k, FailureKind::ContextLength, "{p:?}");
        }
    }

    #[test]
    fn other_bad_requests_are_not_context_refusals() {
        for body in [
            r#"{"error":{"message":"Invalid API key","type":"invalid_request_error","code":"invalid_api_key"}}"#,
            r#"{"object":"error","message":"The model `x` does not exist.","type":"NotFoundError","code":404}"#,
            r#"{"error":{"code":400,"message":"tools param requires --jinja flag","type":"invalid_request_error"}}"#,
            r#"{"error":{"message":"litellm.BadRequestError: OpenAIException - bad tool","type":null,"param":null,"code":"400"}}"#,
        ] {
            let (kind, _) = http_error(400, "Bad Request", body.as_bytes());
            assert_eq!(kind, FailureKind::Other, "{body}");
        }
    }

    #[test]
    fn messages_are_capped_and_empty_bodies_named_by_status() {
        let long = format!(r#"{{"error":{{"message":"{}"}}}}"#, "x".repeat(2000));
        let (_, m) = http_error(429, "Too Many Requests", long.as_bytes());
        assert_eq!(m.chars().count(), MESSAGE_CHARS + 1);
        assert_eq!(
            http_error(502, "Bad Gateway", b""),
            (FailureKind::Server, "HTTP 502 Bad Gateway".into())
        );
        assert_eq!(
            http_error(503, "", b"<html>busy</html>"),
            (FailureKind::Server, "busy".into())
        );
    }

    #[test]
    fn an_html_error_page_is_one_short_line() {
        let page = format!(
            "<!DOCTYPE html>\n<html>\n<head><title>501 Not Implemented</title>\n\
             <style>body {{ font: 12px sans }}</style><script>var x = '<b>';</script></head>\n\
             <body>\n<!-- a comment -->\n<center><h1>501 Not Implemented</h1></center>\n\
             <hr><center>nginx &amp; friends</center>\n<p>{}</p>\n</body>\n</html>\n",
            "lorem ipsum ".repeat(100)
        );
        let (kind, m) = http_error(501, "Not Implemented", page.as_bytes());
        assert_eq!(kind, FailureKind::Server);
        assert!(
            !m.contains('<') && !m.contains('\n') && !m.contains("font"),
            "{m}"
        );
        assert!(
            m.starts_with("501 Not Implemented 501 Not Implemented nginx & friends lorem"),
            "{m}"
        );
        assert_eq!(m.chars().count(), BODY_TEXT_CHARS + 1, "{m}");
        // Plain text: whitespace collapsed, nothing stripped.
        assert_eq!(
            http_error(502, "", b"upstream  a < b\n\n  failed").1,
            "upstream a < b failed"
        );
        // A JSON message keeps its angle brackets but not its newlines.
        let (_, m) = http_error(
            400,
            "",
            br#"{"error":{"message":"prompt is too long: 208310 tokens > 200000\nmaximum"}}"#,
        );
        assert_eq!(m, "prompt is too long: 208310 tokens > 200000 maximum");
    }
}
