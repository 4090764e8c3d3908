//! The script of one model request attempt: what the provider does with it. Shared by the pure
//! driver (which turns it straight into core inputs) and the loopback mock server (which serves
//! it in each provider's real wire format), so one scenario runs both ways.

use serde::{Deserialize, Serialize};

/// Which API a script is served as (and whose finish-reason vocabulary applies).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "kebab-case")]
pub enum Flavor {
    /// Anthropic Messages API (`/v1/messages`).
    #[default]
    Anthropic,
    /// OpenAI Responses API (`/v1/responses`).
    Openai,
    /// OpenAI Chat Completions (`/v1/chat/completions`).
    OpenaiChat,
}

impl Flavor {
    /// The finish reason each provider's mapping reports for a completed reply when the script
    /// does not name one: with tool calls or without.
    pub fn default_finish(self, has_tool_calls: bool) -> &'static str {
        match (self, has_tool_calls) {
            (Flavor::Anthropic, false) => "end_turn",
            (Flavor::Anthropic, true) => "tool_use",
            (Flavor::Openai, false) | (Flavor::OpenaiChat, false) => "stop",
            (Flavor::Openai, true) | (Flavor::OpenaiChat, true) => "tool_calls",
        }
    }
}

/// What one model request attempt gets.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "reply", rename_all = "snake_case")]
pub enum Reply {
    /// The connection is refused: the endpoint is never reached.
    Unreachable,
    /// The request reached the endpoint but the connection was closed before any response
    /// (the client reports a transport failure, which is retried but does not count toward
    /// the three-unreachable rule).
    Transport,
    /// A non-success HTTP status with an error body.
    Status {
        status: u16,
        /// The Retry-After header value verbatim (seconds or an HTTP date).
        #[serde(default)]
        retry_after: Option<String>,
        /// The error body's type/code (`insufficient_quota`, `overloaded_error`, …).
        #[serde(default)]
        error: Option<String>,
        #[serde(default)]
        message: Option<String>,
    },
    /// A non-success HTTP status with this exact JSON body, as a server nobody on the project
    /// wrote sends it (LiteLLM, vLLM, llama.cpp, Ollama); both runs classify it with
    /// `openmax_core::provider::errors::http_error`.
    RawStatus { status: u16, body: String },
    /// A 200 streaming response.
    Stream {
        items: Vec<StreamItem>,
        /// How the stream ends after the items.
        end: StreamEnd,
        /// Milliseconds between items (the mock sleeps; the pure driver advances its clock).
        #[serde(default)]
        delay_ms: u64,
    },
}

/// One item of a scripted stream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "item", rename_all = "snake_case")]
pub enum StreamItem {
    Text {
        text: String,
    },
    Thinking {
        text: String,
    },
    /// A whole tool call; the mock splits `args` into several argument deltas.
    ToolCall {
        id: String,
        name: String,
        args: serde_json::Value,
    },
    Usage {
        prompt_tokens: u64,
        completion_tokens: u64,
        #[serde(default)]
        cached_tokens: Option<u64>,
    },
    /// `of` rendered as usual, then its last event damaged by `fault`: the stream is broken at
    /// that point (the client fails it; the pure driver feeds `Failed { kind: Corrupt }`), so
    /// what follows it in the script, the end included, is never read.
    Corrupt {
        of: Box<StreamItem>,
        fault: Fault,
    },
}

/// How a [`StreamItem::Corrupt`] event is damaged.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Fault {
    /// The event's JSON is cut in half (a chunk cut mid-JSON).
    CutJson,
    /// The item's text gains a lone surrogate escape (`\ud800`) in the JSON; for an item
    /// without text, the JSON is cut instead.
    LoneSurrogate,
    /// The item's text gains a byte that is not UTF-8 (`0xFF`); for an item without text, the
    /// JSON is cut instead.
    InvalidUtf8,
}

/// How a scripted stream ends.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "end", rename_all = "snake_case")]
pub enum StreamEnd {
    /// The provider's completion signal; `finish` defaults to [`Flavor::default_finish`].
    Complete {
        #[serde(default)]
        finish: Option<String>,
    },
    /// The socket is cut mid-body (no final chunk).
    Abort,
    /// The body ends cleanly but with no completion event.
    CleanEof,
    /// The stream goes silent and stays open (the idle timeout must fire).
    Stall,
    /// The provider reports an error event inside the stream.
    Error { error: String, message: String },
    /// The stream never ends: text deltas of `delta_bytes` bytes each, as fast as the client
    /// reads them (or one per `delay_ms`), until the client goes away (a provider faster than the client). The pure
    /// driver feeds 8 MiB of them (past the default reply cap), then goes silent.
    Endless { delta_bytes: usize },
}
