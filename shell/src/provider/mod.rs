//! Provider adapters: model requests over hyper 1.x + rustls, SSE decoding, and one pure mapping
//! per API (`anthropic`, `openai`, `openai-chat`) from wire JSON to the core's normalized
//! [`openmax_core::provider::ProviderItem`]s, plus the built-in `demo` provider.
//!
//! The runtime builds one [`Provider`] from a [`ProviderConfig`] and calls [`Provider::spawn`]
//! for every `SendRequest` effect. Invariants of one spawned attempt: every result goes to the
//! channel as `Input::Provider { request, attempt, item }` (`Opened` first, then items, ending
//! with exactly one of `Completed`, `EndedWithoutCompletion`, `Failed`) or as exactly one
//! `Input::RequestFailed`. Aborting the returned `JoinHandle` cancels the attempt (the
//! connection is dropped) and nothing more is sent. The adapters never retry and have no idle
//! timeout: the core decides both.
//!
//! The request body is translated message for message from the core's [`ModelRequest`], which
//! the core shaped (roles merged, every call paired with one result): the adapters decide no
//! conversation policy.
//!
//! Modules: [`sse`] (the decoder), [`mapping`] (what the mappers share), [`anthropic`],
//! [`openai`] (Responses), [`chat`] (Chat Completions),
//! [`http`] (client and classification), [`flow`] (backpressure), [`retry_after`], [`demo`].

pub mod anthropic;
pub mod chat;
pub mod demo;
pub mod flow;
pub mod http;
pub mod mapping;
pub mod openai;
#[cfg(test)]
mod parity_tests;
pub mod retry_after;
pub mod sse;

use std::sync::Arc;

use bytes::Bytes;
use http_body_util::Full;
use hyper::header::{ACCEPT, AUTHORIZATION, CONTENT_TYPE, USER_AGENT};
use hyper::{Method, Request, Uri};
use openmax_core::conversation::ModelRequest;
use openmax_core::provider::{ProviderItem, RequestFailure, RequestId};
use openmax_core::Input;
use tokio::sync::mpsc::UnboundedSender;
use tokio::task::JoinHandle;

use self::http::{header_value, HttpsClient, Sink};
use self::mapping::StreamMapper;

/// Which API a provider speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum ProviderKind {
    /// Anthropic Messages API.
    Anthropic,
    /// OpenAI Responses API.
    Openai,
    /// OpenAI Chat Completions (and every compatible server).
    OpenaiChat,
    /// The built-in scripted model: no key, no network.
    Demo,
}

impl ProviderKind {
    /// Every kind, in the order the docs list them.
    pub const ALL: [ProviderKind; 4] = [
        ProviderKind::Anthropic,
        ProviderKind::Openai,
        ProviderKind::OpenaiChat,
        ProviderKind::Demo,
    ];

    /// `anthropic`, `openai`, `openai-chat`, `demo`.
    pub fn parse(name: &str) -> Option<ProviderKind> {
        ProviderKind::ALL.into_iter().find(|k| k.as_str() == name)
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "anthropic",
            ProviderKind::Openai => "openai",
            ProviderKind::OpenaiChat => "openai-chat",
            ProviderKind::Demo => "demo",
        }
    }

    /// The base URL when none is configured. Anthropic's is the host (the adapter appends
    /// `/v1/messages`); OpenAI's include `/v1` (the adapter appends `/responses` or
    /// `/chat/completions`), as their SDKs' base URLs do. Empty for `demo`.
    pub fn default_base_url(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "https://api.anthropic.com",
            ProviderKind::Openai | ProviderKind::OpenaiChat => "https://api.openai.com/v1",
            ProviderKind::Demo => "",
        }
    }

    /// The environment variable the key is read from by default (`None` for `demo`).
    pub fn default_api_key_env(self) -> Option<&'static str> {
        match self {
            ProviderKind::Anthropic => Some("ANTHROPIC_API_KEY"),
            ProviderKind::Openai | ProviderKind::OpenaiChat => Some("OPENAI_API_KEY"),
            ProviderKind::Demo => None,
        }
    }

    /// Whether a missing key is an error before the handshake. `openai-chat` runs keyless
    /// against local servers (Ollama, llama.cpp, LM Studio, vLLM without `--api-key`).
    pub fn key_required(self) -> bool {
        matches!(self, ProviderKind::Anthropic | ProviderKind::Openai)
    }

    pub fn default_model(self) -> &'static str {
        match self {
            ProviderKind::Anthropic => "claude-sonnet-4-5",
            ProviderKind::Openai => "gpt-5",
            ProviderKind::OpenaiChat => "gpt-4.1",
            ProviderKind::Demo => demo::MODEL,
        }
    }

    /// A sensible output cap when none is configured. 0 for `openai-chat` means "do not send
    /// one" (vLLM rejects a cap that does not fit the context; local servers pick their own).
    pub fn default_max_output_tokens(self) -> u32 {
        match self {
            ProviderKind::Anthropic => 16_384,
            ProviderKind::Openai => 16_384,
            ProviderKind::OpenaiChat => 0,
            ProviderKind::Demo => 1024,
        }
    }
}

impl std::str::FromStr for ProviderKind {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        ProviderKind::parse(s).ok_or_else(|| {
            format!("unknown provider {s:?}: expected one of anthropic, openai, openai-chat, demo")
        })
    }
}

impl std::fmt::Display for ProviderKind {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Everything a provider needs, resolved by the runtime from config, env and flags. Its
/// `Debug` output redacts the key.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderConfig {
    pub kind: ProviderKind,
    /// See [`ProviderKind::default_base_url`] for the convention (`/v1` or not).
    pub base_url: String,
    pub api_key: Option<String>,
    pub model: String,
    /// The output cap sent with each request; 0 = the API's default (Anthropic, which requires
    /// one, gets 8192).
    pub max_output_tokens: u32,
    /// TCP connect timeout; 0 = none.
    pub connect_timeout_ms: u64,
}

impl std::fmt::Debug for ProviderConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProviderConfig")
            .field("kind", &self.kind)
            .field("base_url", &self.base_url)
            .field("api_key", &self.api_key.as_ref().map(|_| "[redacted]"))
            .field("model", &self.model)
            .field("max_output_tokens", &self.max_output_tokens)
            .field("connect_timeout_ms", &self.connect_timeout_ms)
            .finish()
    }
}

impl ProviderConfig {
    /// The defaults for a kind (no key).
    pub fn defaults(kind: ProviderKind) -> ProviderConfig {
        ProviderConfig {
            kind,
            base_url: kind.default_base_url().to_string(),
            api_key: None,
            model: kind.default_model().to_string(),
            max_output_tokens: kind.default_max_output_tokens(),
            connect_timeout_ms: 10_000,
        }
    }
}

/// A configured provider; cheap to clone (one shared client and connection pool).
#[derive(Clone)]
pub struct Provider {
    inner: Arc<Inner>,
}

struct Inner {
    cfg: ProviderConfig,
    /// The model requests name: `cfg.model` until [`Provider::set_model`] switches it.
    model: std::sync::RwLock<String>,
    /// The request URL (empty for demo).
    url: Option<Uri>,
    /// `None` for demo.
    client: Option<HttpsClient>,
}

impl std::fmt::Debug for Provider {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Provider")
            .field("kind", &self.inner.cfg.kind)
            .field("url", &self.inner.url)
            .field("model", &self.inner.cfg.model)
            .finish_non_exhaustive()
    }
}

impl Provider {
    /// Validate the config (URL scheme http/https, header-safe key) and build the client.
    /// Needs no runtime and no network.
    pub fn new(cfg: ProviderConfig) -> Result<Provider, String> {
        if cfg.kind == ProviderKind::Demo {
            return Ok(Provider {
                inner: Arc::new(Inner {
                    model: std::sync::RwLock::new(cfg.model.clone()),
                    cfg,
                    url: None,
                    client: None,
                }),
            });
        }
        let url = endpoint_url(cfg.kind, &cfg.base_url)?;
        if let Some(key) = &cfg.api_key {
            header_value("API key", key)?;
        }
        let client = http::build_client(cfg.connect_timeout_ms);
        Ok(Provider {
            inner: Arc::new(Inner {
                model: std::sync::RwLock::new(cfg.model.clone()),
                cfg,
                url: Some(url),
                client: Some(client),
            }),
        })
    }

    /// The model the next request names.
    pub fn model(&self) -> String {
        match self.inner.model.read() {
            Ok(m) => m.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    /// Name `model` in every request from now on (every clone of this provider shares it).
    pub fn set_model(&self, model: &str) {
        let mut m = match self.inner.model.write() {
            Ok(m) => m,
            Err(poisoned) => poisoned.into_inner(),
        };
        *m = model.to_string();
    }

    /// The URL requests go to (`None` for demo).
    pub fn url(&self) -> Option<&Uri> {
        self.inner.url.as_ref()
    }

    /// The JSON body this provider would send for `req`.
    pub fn build_body(&self, req: &ModelRequest) -> serde_json::Value {
        let cfg = &self.inner.cfg;
        let max = cfg.max_output_tokens;
        let model = self.model();
        match cfg.kind {
            ProviderKind::Anthropic | ProviderKind::Demo => {
                anthropic::build_body(req, &model, if max == 0 { 8192 } else { max })
            }
            ProviderKind::Openai => {
                let mut b = openai::build_body(req, &model, max);
                if max == 0 {
                    if let Some(o) = b.as_object_mut() {
                        o.remove("max_output_tokens");
                    }
                }
                b
            }
            ProviderKind::OpenaiChat => {
                let mut b = chat::build_body(req, &model, max);
                if max == 0 {
                    if let Some(o) = b.as_object_mut() {
                        o.remove("max_tokens");
                        o.remove("max_completion_tokens");
                    }
                }
                b
            }
        }
    }

    /// Start one attempt (see the module docs for what reaches `tx`). Must be called inside a
    /// tokio runtime. Aborting the handle cancels the attempt.
    pub fn spawn(
        &self,
        request: RequestId,
        attempt: u32,
        body: ModelRequest,
        tx: UnboundedSender<Input>,
    ) -> JoinHandle<()> {
        self.spawn_inner(request, attempt, body, tx, None)
    }

    /// [`Provider::spawn`] under backpressure: every item is counted in `flow`, and the task
    /// waits for room (the runtime calls [`flow::StreamFlow::taken`] per item it takes) before
    /// reading more of the body.
    pub fn spawn_with_flow(
        &self,
        request: RequestId,
        attempt: u32,
        body: ModelRequest,
        tx: UnboundedSender<Input>,
        flow: Arc<flow::StreamFlow>,
    ) -> JoinHandle<()> {
        self.spawn_inner(request, attempt, body, tx, Some(flow))
    }

    fn spawn_inner(
        &self,
        request: RequestId,
        attempt: u32,
        body: ModelRequest,
        tx: UnboundedSender<Input>,
        flow: Option<Arc<flow::StreamFlow>>,
    ) -> JoinHandle<()> {
        let this = self.clone();
        tokio::spawn(async move {
            let mut sink = ChannelSink {
                request,
                attempt,
                tx,
                flow,
                secrets: this.inner.cfg.api_key.iter().cloned().collect(),
            };
            this.run(request, attempt, &body, &mut sink).await;
        })
    }

    async fn run(
        &self,
        request: RequestId,
        attempt: u32,
        body: &ModelRequest,
        sink: &mut dyn Sink,
    ) {
        let inner = &self.inner;
        let (Some(client), Some(url)) = (&inner.client, &inner.url) else {
            // Demo: the scripted stream through the real decoder and Anthropic mapping.
            for item in demo::items(body, request, attempt) {
                sink.item(item);
                tokio::task::yield_now().await;
            }
            return;
        };
        let json = self.build_body(body);
        let req = match self.http_request(url, &json) {
            Ok(r) => r,
            Err(detail) => {
                sink.failed(RequestFailure::Transport { detail });
                return;
            }
        };
        let mapper: Box<dyn StreamMapper> = match inner.cfg.kind {
            ProviderKind::Anthropic | ProviderKind::Demo => {
                Box::new(anthropic::AnthropicMapper::new())
            }
            ProviderKind::Openai => Box::new(openai::OpenaiMapper::new()),
            ProviderKind::OpenaiChat => Box::new(chat::ChatMapper::with_id_prefix(&format!(
                "call_r{request}a{attempt}_"
            ))),
        };
        let endpoint = format!("{} at {url}", inner.cfg.kind);
        http::run_attempt(client, req, &endpoint, mapper, sink).await;
    }

    fn http_request(
        &self,
        url: &Uri,
        json: &serde_json::Value,
    ) -> Result<Request<Full<Bytes>>, String> {
        let cfg = &self.inner.cfg;
        let body = serde_json::to_vec(json).map_err(|e| format!("encoding the body: {e}"))?;
        let mut b = Request::builder()
            .method(Method::POST)
            .uri(url.clone())
            .header(CONTENT_TYPE, "application/json")
            .header(ACCEPT, "text/event-stream")
            .header(USER_AGENT, concat!("openmax/", env!("CARGO_PKG_VERSION")));
        match cfg.kind {
            ProviderKind::Anthropic => {
                b = b.header("anthropic-version", anthropic::API_VERSION);
                if let Some(key) = &cfg.api_key {
                    b = b.header("x-api-key", header_value("x-api-key", key)?);
                }
            }
            ProviderKind::Openai | ProviderKind::OpenaiChat => {
                if let Some(key) = cfg.api_key.as_deref().filter(|k| !k.is_empty()) {
                    b = b.header(
                        AUTHORIZATION,
                        header_value("authorization", &format!("Bearer {key}"))?,
                    );
                }
            }
            ProviderKind::Demo => {}
        }
        b.body(Full::new(Bytes::from(body)))
            .map_err(|e| format!("building the request: {e}"))
    }
}

/// The full request URL for a kind and base URL (trailing slashes ignored; an Anthropic base
/// that already ends in `/v1` is not doubled).
pub fn endpoint_url(kind: ProviderKind, base_url: &str) -> Result<Uri, String> {
    let base = base_url.trim().trim_end_matches('/');
    let url = match kind {
        ProviderKind::Anthropic if base.ends_with("/v1") => format!("{base}/messages"),
        ProviderKind::Anthropic => format!("{base}/v1/messages"),
        ProviderKind::Openai => format!("{base}/responses"),
        ProviderKind::OpenaiChat => format!("{base}/chat/completions"),
        ProviderKind::Demo => return Err("the demo provider has no URL".into()),
    };
    let uri: Uri = url
        .parse()
        .map_err(|e| format!("invalid base URL {base_url:?}: {e}"))?;
    match uri.scheme_str() {
        // (An authority without a host, `http://:80`, parses with the empty host.)
        Some("http") | Some("https") if uri.host().is_some_and(|h| !h.is_empty()) => Ok(uri),
        _ => Err(format!(
            "invalid base URL {base_url:?}: it must start with http:// or https:// and name a host"
        )),
    }
}

/// Sends an attempt's results to the runtime's channel (a closed channel drops them: the
/// runtime is gone or no longer cares).
struct ChannelSink {
    request: RequestId,
    attempt: u32,
    tx: UnboundedSender<Input>,
    flow: Option<Arc<flow::StreamFlow>>,
    /// The key: what the server says about a failure never carries it further (a proxy may
    /// echo the header it refused).
    secrets: Vec<String>,
}

impl ChannelSink {
    fn redact(&self, text: &str) -> String {
        crate::sandbox::env::redact(text, &self.secrets)
    }
}

impl Sink for ChannelSink {
    fn item(&mut self, item: ProviderItem) {
        let item = match item {
            ProviderItem::Failed { kind, message } => ProviderItem::Failed {
                kind,
                message: self.redact(&message),
            },
            ProviderItem::EndedWithoutCompletion { detail } => {
                ProviderItem::EndedWithoutCompletion {
                    detail: self.redact(&detail),
                }
            }
            other => other,
        };
        // Counted before the send: the loop may take the item before `send` returns, and its
        // `taken` must find the item counted or the window would drift full.
        if let Some(flow) = &self.flow {
            flow.sent();
        }
        let sent = self.tx.send(Input::Provider {
            request: self.request,
            attempt: self.attempt,
            item,
        });
        if let (Err(_), Some(flow)) = (sent, &self.flow) {
            flow.taken();
        }
    }

    fn flow(&self) -> Option<Arc<flow::StreamFlow>> {
        self.flow.clone()
    }

    fn failed(&mut self, failure: RequestFailure) {
        let failure = match failure {
            RequestFailure::Unreachable { detail } => RequestFailure::Unreachable {
                detail: self.redact(&detail),
            },
            RequestFailure::Transport { detail } => RequestFailure::Transport {
                detail: self.redact(&detail),
            },
            RequestFailure::Http {
                status,
                retry_after_s,
                kind,
                message,
            } => RequestFailure::Http {
                status,
                retry_after_s,
                kind,
                message: self.redact(&message),
            },
        };
        let _ = self.tx.send(Input::RequestFailed {
            request: self.request,
            attempt: self.attempt,
            failure,
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A config's `Debug` (what a `{:?}` in a log or a panic shows) names every field, with
    /// the key's value replaced, and says whether there is a key.
    #[test]
    fn a_configs_debug_shows_everything_but_the_key() {
        let mut c = ProviderConfig::defaults(ProviderKind::Anthropic);
        c.api_key = Some("sk-secret-4242".into());
        c.model = "m-1".into();
        c.max_output_tokens = 77;
        c.connect_timeout_ms = 1234;
        let shown = format!("{c:?}");
        assert!(!shown.contains("sk-secret-4242"), "{shown}");
        for want in [
            "Anthropic",
            c.base_url.as_str(),
            "api_key: Some(\"[redacted]\")",
            "\"m-1\"",
            "77",
            "1234",
        ] {
            assert!(shown.contains(want), "no {want:?} in {shown}");
        }
        c.api_key = None;
        assert!(format!("{c:?}").contains("api_key: None"));
    }

    /// A provider's `Debug` names its API, its URL and its model, and never holds the key.
    #[test]
    fn a_providers_debug_names_api_url_and_model_but_not_the_key() {
        let mut c = ProviderConfig::defaults(ProviderKind::Anthropic);
        c.api_key = Some("sk-secret-4242".into());
        c.model = "m-1".into();
        let p = Provider::new(c).unwrap();
        let shown = format!("{p:?}");
        assert!(!shown.contains("sk-secret-4242"), "{shown}");
        for want in ["Provider", "Anthropic", "/v1/messages", "\"m-1\""] {
            assert!(shown.contains(want), "no {want:?} in {shown}");
        }
    }

    /// An attempt's sink under backpressure hands its window to the streaming loop, which
    /// waits on it between body frames; a sink without one hands none.
    #[test]
    fn a_channel_sink_hands_its_window_to_the_stream() {
        let (tx, _rx) = tokio::sync::mpsc::unbounded_channel();
        let sink = |flow| ChannelSink {
            request: 1,
            attempt: 0,
            tx: tx.clone(),
            flow,
            secrets: Vec::new(),
        };
        let window = Arc::new(flow::StreamFlow::new());
        let handed = sink(Some(window.clone())).flow().expect("a window");
        assert!(Arc::ptr_eq(&handed, &window));
        assert!(sink(None).flow().is_none());
    }

    #[test]
    fn kinds_round_trip() {
        for k in ProviderKind::ALL {
            assert_eq!(ProviderKind::parse(k.as_str()), Some(k));
            assert_eq!(k.as_str().parse::<ProviderKind>(), Ok(k));
        }
        assert_eq!(ProviderKind::parse("openai_chat"), None);
        assert!("nope"
            .parse::<ProviderKind>()
            .unwrap_err()
            .contains("openai-chat"));
        assert_eq!(
            ProviderKind::OpenaiChat.default_api_key_env(),
            Some("OPENAI_API_KEY")
        );
        assert!(!ProviderKind::OpenaiChat.key_required());
        assert_eq!(ProviderKind::Demo.default_api_key_env(), None);
    }

    #[test]
    fn endpoint_urls() {
        let u = |k, b| endpoint_url(k, b).map(|u| u.to_string());
        assert_eq!(
            u(ProviderKind::Anthropic, "https://api.anthropic.com/").unwrap(),
            "https://api.anthropic.com/v1/messages"
        );
        assert_eq!(
            u(ProviderKind::Anthropic, "http://127.0.0.1:9/v1").unwrap(),
            "http://127.0.0.1:9/v1/messages"
        );
        assert_eq!(
            u(ProviderKind::Openai, "https://api.openai.com/v1").unwrap(),
            "https://api.openai.com/v1/responses"
        );
        assert_eq!(
            u(ProviderKind::OpenaiChat, "http://localhost:11434/v1/").unwrap(),
            "http://localhost:11434/v1/chat/completions"
        );
        assert!(u(ProviderKind::OpenaiChat, "localhost:11434/v1").is_err());
        assert!(u(ProviderKind::OpenaiChat, "ftp://x/v1").is_err());
        // No host: the error names the base URL and says so.
        for no_host in ["http://:80/v1", "https://user@:9/v1", "http://", "http:/v1"] {
            for kind in [
                ProviderKind::Anthropic,
                ProviderKind::Openai,
                ProviderKind::OpenaiChat,
            ] {
                let e = u(kind, no_host).unwrap_err();
                assert!(e.contains(&format!("{no_host:?}")), "{e}");
            }
        }
        assert!(u(ProviderKind::Openai, "http://:80/v1")
            .unwrap_err()
            .contains("name a host"));
    }

    #[test]
    fn an_output_cap_of_zero_sends_the_apis_default_and_any_other_is_sent_as_set() {
        let req = ModelRequest {
            system: "s".into(),
            tools: vec![],
            messages: vec![openmax_core::conversation::Message::user_text("u")],
        };
        // (kind, model, the field the cap goes in, what 0 sends: `None` is no field at all)
        let table = [
            (
                ProviderKind::Anthropic,
                "claude-sonnet-4-5",
                "max_tokens",
                Some(8192),
            ),
            (ProviderKind::Demo, demo::MODEL, "max_tokens", Some(8192)),
            (ProviderKind::Openai, "gpt-5", "max_output_tokens", None),
            (ProviderKind::OpenaiChat, "llama3", "max_tokens", None),
            (
                ProviderKind::OpenaiChat,
                "o3-mini",
                "max_completion_tokens",
                None,
            ),
        ];
        for (kind, model, field, at_zero) in table {
            for (max, want) in [(0, at_zero), (100, Some(100)), (16_384, Some(16_384))] {
                let mut cfg = ProviderConfig::defaults(kind);
                cfg.model = model.into();
                cfg.max_output_tokens = max;
                let body = Provider::new(cfg).unwrap().build_body(&req);
                let caps: Vec<&str> = ["max_tokens", "max_output_tokens", "max_completion_tokens"]
                    .into_iter()
                    .filter(|f| body.get(f).is_some())
                    .collect();
                let want_fields: Vec<&str> = want.iter().map(|_| field).collect();
                assert_eq!(caps, want_fields, "{kind} {model} cap {max}");
                assert_eq!(
                    body.get(field).and_then(|v| v.as_u64()),
                    want,
                    "{kind} {model} cap {max}"
                );
            }
        }
    }

    #[test]
    fn bad_key_is_rejected_up_front() {
        let mut cfg = ProviderConfig::defaults(ProviderKind::Anthropic);
        cfg.api_key = Some("bad\nkey".into());
        assert!(!format!("{cfg:?}").contains("bad"));
        assert!(Provider::new(cfg).unwrap_err().contains("API key"));
    }
}
