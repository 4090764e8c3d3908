//! HTTP error replies in each provider's body shape, and the default error type/code and
//! message for a status when the script names none.
//!
//! Anthropic: `{"type":"error","error":{"type":T,"message":M},"request_id":…}` with `request-id`
//! header. OpenAI (Responses and Chat): `{"error":{"message":M,"type":T,"param":null,"code":C}}`
//! with `x-request-id`; the script's string is the `code`, and `type` is what OpenAI pairs with
//! that code (`insufficient_quota` → `insufficient_quota`, `rate_limit_exceeded` → `requests`,
//! `server_error` → `server_error`, otherwise the code itself).

use serde_json::{json, Value};

use crate::script::Flavor;

/// The JSON error body a `Status` reply sends for `flavor`.
pub fn error_body(
    flavor: Flavor,
    seq: u64,
    status: u16,
    error: Option<&str>,
    message: Option<&str>,
) -> Value {
    let code = error.map_or_else(|| default_error(flavor, status).to_string(), str::to_string);
    let message = message.map_or_else(|| default_message(&code, status), str::to_string);
    match flavor {
        Flavor::Anthropic => json!({
            "type": "error",
            "error": {"type": code, "message": message},
            "request_id": format!("req_mock_{seq:04}"),
        }),
        Flavor::Openai | Flavor::OpenaiChat => json!({
            "error": {
                "message": message,
                "type": openai_type_for_code(&code),
                "param": null,
                "code": code,
            }
        }),
    }
}

/// The request-id header each flavor sends.
pub fn request_id_header(flavor: Flavor) -> &'static str {
    match flavor {
        Flavor::Anthropic => "request-id",
        Flavor::Openai | Flavor::OpenaiChat => "x-request-id",
    }
}

/// The error `type` OpenAI pairs with an error `code`.
pub fn openai_type_for_code(code: &str) -> &str {
    match code {
        "rate_limit_exceeded" => "requests",
        "context_length_exceeded" | "invalid_api_key" | "model_not_found" => {
            "invalid_request_error"
        }
        other => other,
    }
}

/// The error type (Anthropic) or code (OpenAI) a status carries by default.
pub fn default_error(flavor: Flavor, status: u16) -> &'static str {
    match flavor {
        Flavor::Anthropic => match status {
            400 => "invalid_request_error",
            401 => "authentication_error",
            403 => "permission_error",
            404 => "not_found_error",
            413 => "request_too_large",
            429 => "rate_limit_error",
            529 => "overloaded_error",
            _ => "api_error",
        },
        Flavor::Openai | Flavor::OpenaiChat => match status {
            400 => "invalid_request_error",
            401 => "invalid_api_key",
            403 => "unsupported_country_region_territory",
            404 => "model_not_found",
            429 => "rate_limit_exceeded",
            _ => "server_error",
        },
    }
}

fn default_message(code: &str, status: u16) -> String {
    match code {
        "overloaded_error" => "Overloaded".to_string(),
        "insufficient_quota" => "You exceeded your current quota, please check your plan and \
                                 billing details."
            .to_string(),
        "rate_limit_exceeded" | "rate_limit_error" => "Rate limit reached (mock).".to_string(),
        "server_error" | "api_error" => {
            "The server had an error while processing your request (mock).".to_string()
        }
        _ => format!("mock error {status}: {code}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bodies_have_each_flavors_shape() {
        let a = error_body(Flavor::Anthropic, 1, 529, None, None);
        assert_eq!(a["type"], "error");
        assert_eq!(a["error"]["type"], "overloaded_error");
        let o = error_body(Flavor::Openai, 1, 429, Some("insufficient_quota"), None);
        assert_eq!(o["error"]["code"], "insufficient_quota");
        assert_eq!(o["error"]["type"], "insufficient_quota");
        let c = error_body(Flavor::OpenaiChat, 1, 503, None, Some("busy"));
        assert_eq!(c["error"]["code"], "server_error");
        assert_eq!(c["error"]["message"], "busy");
    }
}
