//! What a provider's stream and HTTP outcome look like to the core, normalized.
//!
//! The shell decodes SSE and maps each API's JSON to [`ProviderItem`]s (one pure function per
//! provider), and classifies failures into [`RequestFailure`]. The core decides from these
//! alone whether to retry, what to emit and how the turn ends.

use serde::{Deserialize, Serialize};

pub mod errors;

/// Identifies one model request of the session (all attempts of it share the id).
pub type RequestId = u64;

/// One normalized item of a streaming response, in arrival order.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum ProviderItem {
    /// HTTP 200 and the response headers arrived: the endpoint was reached.
    Opened,
    /// Reply text.
    TextDelta {
        /// The delta.
        text: String,
    },
    /// Reasoning text (Anthropic thinking, Responses reasoning summary).
    ThinkingDelta {
        /// The delta.
        text: String,
    },
    /// The opaque signature that must be sent back with the thinking block.
    ThinkingSignature {
        /// The signature.
        signature: String,
    },
    /// A tool call begins. `index` orders calls within the reply.
    ToolCallStart {
        /// The call's position in the reply.
        index: u32,
        /// The provider's call id.
        id: String,
        /// The tool's name.
        name: String,
    },
    /// A piece of a tool call's JSON arguments.
    ToolCallArgs {
        /// The call's position in the reply.
        index: u32,
        /// The piece.
        json: String,
    },
    /// Token accounting for the request.
    Usage {
        /// Prompt tokens, cached ones included.
        prompt_tokens: u64,
        /// Generated tokens.
        completion_tokens: u64,
        /// Prompt tokens served from cache, when reported.
        cached_tokens: Option<u64>,
    },
    /// The provider's completion signal, with its finish reason verbatim
    /// (`end_turn`, `stop`, `tool_use`, `tool_calls`, `length`, …).
    Completed {
        /// The provider's finish reason, verbatim.
        finish_reason: String,
    },
    /// The byte stream ended (cleanly or by an aborted socket) with no completion signal.
    EndedWithoutCompletion {
        /// What was seen of the end.
        detail: String,
    },
    /// The provider reported a failure inside the stream.
    Failed {
        /// The error's class.
        kind: FailureKind,
        /// The error's message.
        message: String,
    },
}

/// A provider failure's class, from its error type or code.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FailureKind {
    /// Rate limited (`rate_limit_error`, `rate_limit_exceeded`): retryable.
    RateLimit,
    /// Overloaded (`overloaded_error`): retryable.
    Overloaded,
    /// A server fault (`api_error`, `server_error`): retryable.
    Server,
    /// Quota exhausted (`insufficient_quota`): never retried.
    InsufficientQuota,
    /// The prompt does not fit the model's window (`context_length_exceeded`,
    /// Anthropic's "prompt is too long"): one compaction and one retry.
    ContextLength,
    /// The stream itself is damaged: an event whose data is not valid JSON or not valid
    /// Unicode (a chunk cut mid-JSON, a lone surrogate). Nothing the provider said is lost
    /// silently: before any reply text it is retried like a dead stream, after reply text it
    /// fails the turn. Never produced by [`FailureKind::classify`].
    Corrupt,
    /// Anything else (invalid request, auth, refusal): not retried.
    Other,
}

impl FailureKind {
    /// Classify a provider error `type` or `code` string and its message. A context-window
    /// refusal is recognised first, by the patterns of [`errors::CONTEXT_WINDOW_PATTERNS`]
    /// (a server may wrap it in a generic type such as `api_error` or a code such as `"400"`).
    pub fn classify(type_or_code: &str, message: &str) -> FailureKind {
        if errors::is_context_window_refusal(type_or_code, message) {
            return FailureKind::ContextLength;
        }
        match type_or_code {
            "rate_limit_error" | "rate_limit_exceeded" | "rate_limited" => FailureKind::RateLimit,
            "overloaded_error" | "overloaded" => FailureKind::Overloaded,
            "api_error" | "server_error" | "internal_error" | "service_unavailable" => {
                FailureKind::Server
            }
            "insufficient_quota" => FailureKind::InsufficientQuota,
            _ => FailureKind::Other,
        }
    }

    /// Whether a failure of this kind, before any reply text, is retried.
    pub fn retryable(self) -> bool {
        matches!(
            self,
            FailureKind::RateLimit
                | FailureKind::Overloaded
                | FailureKind::Server
                | FailureKind::Corrupt
        )
    }
}

/// Why a request attempt produced no stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "failure", rename_all = "snake_case")]
pub enum RequestFailure {
    /// The endpoint was never reached (DNS, connect refused, TLS handshake). Counts toward the
    /// three-unreachable rule.
    Unreachable {
        /// Why it could not connect.
        detail: String,
    },
    /// The endpoint answered with a non-success status.
    Http {
        /// The HTTP status.
        status: u16,
        /// Retry-After in whole seconds (the shell converts an HTTP date).
        retry_after_s: Option<u64>,
        /// The body's error type or code, as classified.
        kind: FailureKind,
        /// The body's error message (or a snippet of the body).
        message: String,
    },
    /// The connection failed after the endpoint was reached but before a status arrived.
    Transport {
        /// What failed.
        detail: String,
    },
}

impl RequestFailure {
    /// HTTP statuses the contract retries.
    pub const RETRYABLE_STATUS: [u16; 6] = [429, 500, 502, 503, 504, 529];
}
