//! `Provider::spawn` against the loopback mock server (sim's `MockServer`), for each flavor:
//! text, thinking, a tool call, 503 with Retry-After (seconds and HTTP-date),
//! insufficient_quota, a socket aborted mid-stream, a clean EOF without completion, an error
//! event after text, a stall cancelled by aborting the task; plus a closed port (Unreachable),
//! a reset after accept (Transport), a TLS handshake against a plain-HTTP port (Unreachable),
//! and https clients building with no network. Only 127.0.0.1 is contacted.

use std::time::Duration;

use openmax_core::conversation::{Message, ModelRequest, ToolSchema};
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure};
use openmax_core::Input;
use openmax_shell::provider::{Provider, ProviderConfig, ProviderKind};
use openmax_sim::mock::{unused_loopback_url, MockServer};
use openmax_sim::script::{Flavor, Reply, StreamEnd, StreamItem};
use serde_json::json;
use tokio::sync::mpsc;

const FLAVORS: [Flavor; 3] = [Flavor::Anthropic, Flavor::Openai, Flavor::OpenaiChat];
/// A generous deadline so a hung attempt fails the test instead of hanging it.
const DEADLINE: Duration = Duration::from_secs(20);

fn kind(f: Flavor) -> ProviderKind {
    match f {
        Flavor::Anthropic => ProviderKind::Anthropic,
        Flavor::Openai => ProviderKind::Openai,
        Flavor::OpenaiChat => ProviderKind::OpenaiChat,
    }
}

fn provider(f: Flavor, base_url: &str) -> Provider {
    let mut cfg = ProviderConfig::defaults(kind(f));
    cfg.base_url = base_url.to_string();
    cfg.api_key = Some("test-key".into());
    cfg.connect_timeout_ms = 5_000;
    Provider::new(cfg).expect("valid config")
}

fn request() -> ModelRequest {
    ModelRequest {
        system: "You are a test.".into(),
        tools: vec![ToolSchema {
            name: "read_file".into(),
            description: "Read a file".into(),
            parameters: json!({"type":"object","properties":{"path":{"type":"string"}},"required":["path"]}),
        }],
        messages: vec![Message::user_text("hello")],
    }
}

/// Everything one attempt sends, until the task ends (it drops the sender).
async fn attempt(p: &Provider) -> Vec<Input> {
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = p.spawn(7, 1, request(), tx);
    let mut out = Vec::new();
    let collect = async {
        while let Some(i) = rx.recv().await {
            out.push(i);
        }
    };
    tokio::time::timeout(DEADLINE, collect)
        .await
        .expect("the attempt finished before the deadline");
    handle.await.expect("the attempt task did not panic");
    out
}

/// The items of a stream attempt; panics on a RequestFailed or a wrong request/attempt.
fn items(inputs: Vec<Input>) -> Vec<ProviderItem> {
    inputs
        .into_iter()
        .map(|i| match i {
            Input::Provider {
                request: 7,
                attempt: 1,
                item,
            } => item,
            other => panic!("expected a provider item, got {other:?}"),
        })
        .collect()
}

fn failure(inputs: Vec<Input>) -> RequestFailure {
    match inputs.as_slice() {
        [Input::RequestFailed {
            request: 7,
            attempt: 1,
            failure,
        }] => failure.clone(),
        other => panic!("expected one RequestFailed, got {other:?}"),
    }
}

/// Opened first, exactly one terminal item, and it is last.
fn assert_shape(items: &[ProviderItem]) {
    assert_eq!(items.first(), Some(&ProviderItem::Opened), "{items:?}");
    let terminals = items
        .iter()
        .filter(|i| {
            matches!(
                i,
                ProviderItem::Completed { .. }
                    | ProviderItem::EndedWithoutCompletion { .. }
                    | ProviderItem::Failed { .. }
            )
        })
        .count();
    assert_eq!(terminals, 1, "{items:?}");
}

fn text(items: &[ProviderItem]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            ProviderItem::TextDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn thinking(items: &[ProviderItem]) -> String {
    items
        .iter()
        .filter_map(|i| match i {
            ProviderItem::ThinkingDelta { text } => Some(text.as_str()),
            _ => None,
        })
        .collect()
}

fn stream(items: Vec<StreamItem>, end: StreamEnd) -> Reply {
    Reply::Stream {
        items,
        end,
        delay_ms: 0,
    }
}

fn t(s: &str) -> StreamItem {
    StreamItem::Text { text: s.into() }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn text_reply_with_usage_and_completion() {
    for f in FLAVORS {
        let mock = MockServer::start(vec![stream(
            vec![
                t("Hello"),
                t(", world"),
                StreamItem::Usage {
                    prompt_tokens: 120,
                    completion_tokens: 9,
                    cached_tokens: Some(100),
                },
            ],
            StreamEnd::Complete { finish: None },
        )]);
        let got = items(attempt(&provider(f, &mock.base_url())).await);
        assert_shape(&got);
        assert_eq!(text(&got), "Hello, world", "{f:?}");
        assert!(
            got.contains(&ProviderItem::Usage {
                prompt_tokens: 120,
                completion_tokens: 9,
                cached_tokens: Some(100)
            }),
            "{f:?}: {got:?}"
        );
        assert_eq!(
            got.last(),
            Some(&ProviderItem::Completed {
                finish_reason: f.default_finish(false).into()
            }),
            "{f:?}"
        );
        // What went over the wire.
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 1);
        let r = &reqs[0];
        assert_eq!(r.flavor, Some(f));
        assert!(r.has_api_key, "{f:?}");
        assert_eq!(r.header("accept"), Some("text/event-stream"));
        assert_eq!(r.body["stream"], true);
        match f {
            Flavor::Anthropic => {
                assert_eq!(r.header("anthropic-version"), Some("2023-06-01"));
                assert_eq!(r.body["messages"][0]["content"][0]["text"], "hello");
                assert_eq!(r.body["tools"][0]["name"], "read_file");
            }
            Flavor::Openai => {
                assert_eq!(r.body["instructions"], "You are a test.");
                assert_eq!(r.body["store"], false);
            }
            Flavor::OpenaiChat => {
                assert_eq!(r.body["stream_options"]["include_usage"], true);
                assert_eq!(r.body["messages"][0]["role"], "system");
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_model_switched_on_any_clone_is_named_in_every_later_request() {
    for f in FLAVORS {
        let reply = || stream(vec![t("ok")], StreamEnd::Complete { finish: None });
        let mock = MockServer::start(vec![reply(), reply()]);
        let p = provider(f, &mock.base_url());
        let configured = p.model();
        items(attempt(&p).await);
        let other = p.clone();
        other.set_model("switched-model");
        assert_eq!(p.model(), "switched-model", "{f:?}");
        items(attempt(&p).await);
        let reqs = mock.requests();
        assert_eq!(reqs.len(), 2, "{f:?}");
        assert_eq!(reqs[0].body["model"], configured.as_str(), "{f:?}");
        assert_eq!(reqs[1].body["model"], "switched-model", "{f:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn thinking_then_text() {
    for f in FLAVORS {
        let mock = MockServer::start(vec![stream(
            vec![
                StreamItem::Thinking {
                    text: "Let me think.".into(),
                },
                t("Answer."),
            ],
            StreamEnd::Complete { finish: None },
        )]);
        let got = items(attempt(&provider(f, &mock.base_url())).await);
        assert_shape(&got);
        assert_eq!(thinking(&got), "Let me think.", "{f:?}: {got:?}");
        assert_eq!(text(&got), "Answer.");
        let first_thinking = got
            .iter()
            .position(|i| matches!(i, ProviderItem::ThinkingDelta { .. }));
        let first_text = got
            .iter()
            .position(|i| matches!(i, ProviderItem::TextDelta { .. }));
        assert!(first_thinking < first_text, "{f:?}: {got:?}");
        if f == Flavor::Anthropic {
            assert!(
                got.iter()
                    .any(|i| matches!(i, ProviderItem::ThinkingSignature { signature } if !signature.is_empty())),
                "{got:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tool_call_with_streamed_arguments() {
    for f in FLAVORS {
        let args = json!({"path":"src/main.rs","limit":20});
        let mock = MockServer::start(vec![stream(
            vec![
                t("Reading."),
                StreamItem::ToolCall {
                    id: "call_1".into(),
                    name: "read_file".into(),
                    args: args.clone(),
                },
                StreamItem::ToolCall {
                    id: "call_2".into(),
                    name: "list_dir".into(),
                    args: json!({}),
                },
            ],
            StreamEnd::Complete { finish: None },
        )]);
        let got = items(attempt(&provider(f, &mock.base_url())).await);
        assert_shape(&got);
        let starts: Vec<_> = got
            .iter()
            .filter_map(|i| match i {
                ProviderItem::ToolCallStart { index, id, name } => {
                    Some((*index, id.clone(), name.clone()))
                }
                _ => None,
            })
            .collect();
        assert_eq!(
            starts,
            vec![
                (0, "call_1".to_string(), "read_file".to_string()),
                (1, "call_2".to_string(), "list_dir".to_string())
            ],
            "{f:?}"
        );
        let args_of = |n: u32| -> serde_json::Value {
            let s: String = got
                .iter()
                .filter_map(|i| match i {
                    ProviderItem::ToolCallArgs { index, json } if *index == n => {
                        Some(json.as_str())
                    }
                    _ => None,
                })
                .collect();
            serde_json::from_str(&s).unwrap_or_else(|e| panic!("{f:?} args {s:?}: {e}"))
        };
        assert_eq!(args_of(0), args);
        assert_eq!(args_of(1), json!({}));
        assert_eq!(
            got.last(),
            Some(&ProviderItem::Completed {
                finish_reason: f.default_finish(true).into()
            })
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn status_503_with_retry_after_seconds_and_date() {
    for f in FLAVORS {
        let date = httpdate_in(30);
        let mock = MockServer::start(vec![
            Reply::Status {
                status: 503,
                retry_after: Some("7".into()),
                error: None,
                message: None,
            },
            Reply::Status {
                status: 529,
                retry_after: Some(date),
                error: Some("overloaded_error".into()),
                message: Some("Overloaded".into()),
            },
        ]);
        let p = provider(f, &mock.base_url());
        match failure(attempt(&p).await) {
            RequestFailure::Http {
                status: 503,
                retry_after_s: Some(7),
                kind: FailureKind::Server,
                message,
            } => assert!(!message.is_empty()),
            other => panic!("{f:?}: {other:?}"),
        }
        match failure(attempt(&p).await) {
            RequestFailure::Http {
                status: 529,
                retry_after_s: Some(s),
                kind: FailureKind::Overloaded,
                message,
            } => {
                // The date is 30 s ahead; allow for the clock moving while the test runs.
                assert!((25..=31).contains(&s), "{s}");
                assert_eq!(message, "Overloaded");
            }
            other => panic!("{f:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn insufficient_quota_429() {
    for f in FLAVORS {
        let mock = MockServer::start(vec![Reply::Status {
            status: 429,
            retry_after: None,
            error: Some("insufficient_quota".into()),
            message: Some("You exceeded your current quota".into()),
        }]);
        assert_eq!(
            failure(attempt(&provider(f, &mock.base_url())).await),
            RequestFailure::Http {
                status: 429,
                retry_after_s: None,
                kind: FailureKind::InsufficientQuota,
                message: "You exceeded your current quota".into()
            },
            "{f:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborted_socket_and_clean_eof_end_without_completion() {
    for f in FLAVORS {
        for end in [StreamEnd::Abort, StreamEnd::CleanEof] {
            let mock = MockServer::start(vec![stream(vec![t("partial")], end.clone())]);
            let got = items(attempt(&provider(f, &mock.base_url())).await);
            assert_shape(&got);
            assert_eq!(text(&got), "partial", "{f:?} {end:?}");
            assert!(
                matches!(
                    got.last(),
                    Some(ProviderItem::EndedWithoutCompletion { .. })
                ),
                "{f:?} {end:?}: {got:?}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn error_event_after_text_fails() {
    for f in FLAVORS {
        for (error, kind) in [
            ("overloaded_error", FailureKind::Overloaded),
            ("rate_limit_exceeded", FailureKind::RateLimit),
            ("server_error", FailureKind::Server),
        ] {
            let mock = MockServer::start(vec![stream(
                vec![t("Hi")],
                StreamEnd::Error {
                    error: error.into(),
                    message: "boom".into(),
                },
            )]);
            let got = items(attempt(&provider(f, &mock.base_url())).await);
            assert_shape(&got);
            assert_eq!(text(&got), "Hi");
            assert_eq!(
                got.last(),
                Some(&ProviderItem::Failed {
                    kind,
                    message: "boom".into()
                }),
                "{f:?} {error}"
            );
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn aborting_the_task_cancels_a_stalled_stream() {
    for f in FLAVORS {
        let mock = MockServer::start(vec![stream(vec![t("waiting")], StreamEnd::Stall)]);
        let p = provider(f, &mock.base_url());
        let (tx, mut rx) = mpsc::unbounded_channel();
        let handle = p.spawn(7, 1, request(), tx);
        let mut seen = Vec::new();
        let got_text = tokio::time::timeout(DEADLINE, async {
            while let Some(Input::Provider { item, .. }) = rx.recv().await {
                let is_text = matches!(item, ProviderItem::TextDelta { .. });
                seen.push(item);
                if is_text {
                    return true;
                }
            }
            false
        })
        .await
        .expect("text arrived before the deadline");
        assert!(got_text, "{f:?}: {seen:?}");
        handle.abort();
        // The task is gone: the channel closes with no terminal item.
        let rest = tokio::time::timeout(DEADLINE, async {
            let mut rest = Vec::new();
            while let Some(i) = rx.recv().await {
                rest.push(i);
            }
            rest
        })
        .await
        .expect("the channel closed after abort");
        assert!(rest.is_empty(), "{f:?}: {rest:?}");
        assert!(handle.await.unwrap_err().is_cancelled());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closed_port_is_unreachable() {
    for f in FLAVORS {
        let url = unused_loopback_url().expect("a free loopback port");
        match failure(attempt(&provider(f, &url)).await) {
            RequestFailure::Unreachable { detail } => assert!(!detail.is_empty()),
            other => panic!("{f:?}: {other:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reset_after_accept_is_a_transport_failure() {
    // The mock's `Unreachable` reply accepts then resets: the endpoint was reached.
    let mock = MockServer::start(vec![Reply::Unreachable]);
    match failure(attempt(&provider(Flavor::Anthropic, &mock.base_url())).await) {
        RequestFailure::Transport { detail } => assert!(!detail.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tls_handshake_failure_is_unreachable() {
    // An https URL pointing at the plain-HTTP mock: the TLS handshake fails.
    let mock = MockServer::start(vec![]);
    let url = mock.base_url().replacen("http://", "https://", 1);
    match failure(attempt(&provider(Flavor::OpenaiChat, &url)).await) {
        RequestFailure::Unreachable { detail } => assert!(!detail.is_empty()),
        other => panic!("{other:?}"),
    }
}

#[test]
fn https_clients_build_without_network_or_runtime() {
    for k in [
        ProviderKind::Anthropic,
        ProviderKind::Openai,
        ProviderKind::OpenaiChat,
    ] {
        let p = Provider::new(ProviderConfig::defaults(k)).expect("default https config");
        assert_eq!(p.url().and_then(|u| u.scheme_str()), Some("https"));
    }
    let mut cfg = ProviderConfig::defaults(ProviderKind::OpenaiChat);
    cfg.base_url = "http://localhost:11434/v1".into();
    assert!(Provider::new(cfg).is_ok());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn demo_provider_streams_without_network() {
    let p = Provider::new(ProviderConfig::defaults(ProviderKind::Demo)).expect("demo");
    let got = items(attempt(&p).await);
    assert_shape(&got);
    assert!(text(&got).starts_with("Hi! I'm the openmax demo"));
    assert!(got
        .iter()
        .any(|i| matches!(i, ProviderItem::ToolCallStart { name, .. } if name == "read_file")));
}

/// An IMF-fixdate `secs` seconds from now.
fn httpdate_in(secs: u64) -> String {
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .expect("clock after 1970")
        .as_secs()
        + secs;
    let days = now / 86_400;
    let rem = now % 86_400;
    // Civil date from days since 1970-01-01 (Howard Hinnant's algorithm).
    let z = days as i64 + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z - era * 146_097;
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    const WD: [&str; 7] = ["Thu", "Fri", "Sat", "Sun", "Mon", "Tue", "Wed"];
    const MON: [&str; 12] = [
        "Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec",
    ];
    format!(
        "{}, {:02} {} {} {:02}:{:02}:{:02} GMT",
        WD[(days % 7) as usize],
        d,
        MON[(m - 1) as usize],
        y,
        rem / 3600,
        rem % 3600 / 60,
        rem % 60
    )
}
