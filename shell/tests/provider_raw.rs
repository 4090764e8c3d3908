//! `Provider::spawn` against hand-written HTTP responses on a raw loopback socket, for the cases
//! the mock does not produce: a 2xx JSON reply instead of a stream, a close-delimited stream
//! whose last event has no blank line (nor newline), a past HTTP-date Retry-After, an error body
//! at its cap from a server that then stalls, and a server that reads the request and closes
//! without answering.

use std::time::Duration;

use openmax_core::conversation::{Message, ModelRequest};
use openmax_core::provider::{FailureKind, ProviderItem, RequestFailure};
use openmax_core::Input;
use openmax_shell::provider::{Provider, ProviderConfig, ProviderKind};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpListener;
use tokio::sync::mpsc;

const DEADLINE: Duration = Duration::from_secs(20);

/// Serve one connection: read the request head and body (by Content-Length), then write each
/// piece of `response` (flushing between them) and close. Returns the base URL.
async fn serve_once(response: Vec<Vec<u8>>) -> String {
    serve(response, false).await
}

/// [`serve_once`], but the connection is held open after the last piece, never closed.
async fn serve(response: Vec<Vec<u8>>, hold: bool) -> String {
    let listener = TcpListener::bind("127.0.0.1:0")
        .await
        .expect("bind loopback");
    let addr = listener.local_addr().expect("local addr");
    tokio::spawn(async move {
        let Ok((mut sock, _)) = listener.accept().await else {
            return;
        };
        let mut buf = Vec::new();
        let mut chunk = [0u8; 4096];
        loop {
            let Ok(n) = sock.read(&mut chunk).await else {
                return;
            };
            if n == 0 {
                return;
            }
            buf.extend_from_slice(&chunk[..n]);
            if let Some(head_end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
                let head = String::from_utf8_lossy(&buf[..head_end]).to_ascii_lowercase();
                let len: usize = head
                    .lines()
                    .find_map(|l| l.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                if buf.len() >= head_end + 4 + len {
                    break;
                }
            }
        }
        for piece in response {
            if sock.write_all(&piece).await.is_err() {
                return;
            }
            let _ = sock.flush().await;
            tokio::task::yield_now().await;
        }
        if hold {
            std::future::pending::<()>().await;
        }
        let _ = sock.shutdown().await;
    });
    format!("http://{addr}/v1")
}

async fn attempt(kind: ProviderKind, base_url: String) -> Vec<Input> {
    let mut cfg = ProviderConfig::defaults(kind);
    cfg.base_url = base_url;
    let p = Provider::new(cfg).expect("valid config");
    let (tx, mut rx) = mpsc::unbounded_channel();
    let handle = p.spawn(
        1,
        2,
        ModelRequest {
            system: String::new(),
            tools: vec![],
            messages: vec![Message::user_text("hi")],
        },
        tx,
    );
    let mut out = Vec::new();
    tokio::time::timeout(DEADLINE, async {
        while let Some(i) = rx.recv().await {
            out.push(i);
        }
    })
    .await
    .expect("the attempt finished before the deadline");
    handle.await.expect("no panic");
    out
}

fn items(inputs: &[Input]) -> Vec<ProviderItem> {
    inputs
        .iter()
        .map(|i| match i {
            Input::Provider {
                request: 1,
                attempt: 2,
                item,
            } => item.clone(),
            other => panic!("expected a provider item, got {other:?}"),
        })
        .collect()
}

#[tokio::test]
async fn json_200_instead_of_a_stream_fails_after_opened() {
    let body = br#"{"error":{"type":"rate_limit_error","message":"slow down"}}"#;
    let head = format!(
        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let url = serve_once(vec![head.into_bytes(), body.to_vec()]).await;
    let got = items(&attempt(ProviderKind::Anthropic, url).await);
    assert_eq!(got.len(), 2, "{got:?}");
    assert_eq!(got[0], ProviderItem::Opened);
    assert!(
        matches!(&got[1], ProviderItem::Failed { kind: FailureKind::RateLimit, message } if message.contains("slow down")),
        "{got:?}"
    );
}

#[tokio::test]
async fn close_delimited_stream_with_unterminated_last_event_completes() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let text = "data: {\"choices\":[{\"index\":0,\"delta\":{\"content\":\"h\u{e9}llo\"}}]}\n\n";
    let (a, b) = text.as_bytes().split_at(text.find('\u{e9}').unwrap() + 1); // inside é
    let url = serve_once(vec![
        head.to_vec(),
        a.to_vec(),
        b.to_vec(),
        b"data: {\"choices\":[{\"index\":0,\"delta\":{},\"finish_reason\":\"stop\"}]}\r\n\r\n"
            .to_vec(),
        b"data: [DONE]".to_vec(),
    ])
    .await;
    let got = items(&attempt(ProviderKind::OpenaiChat, url).await);
    assert_eq!(
        got,
        vec![
            ProviderItem::Opened,
            ProviderItem::TextDelta {
                text: "h\u{e9}llo".into()
            },
            ProviderItem::Completed {
                finish_reason: "stop".into()
            },
        ]
    );
}

#[tokio::test]
async fn past_http_date_retry_after_is_zero() {
    let body = br#"{"error":{"message":"busy","type":"server_error","code":null}}"#;
    let head = format!(
        "HTTP/1.1 503 Service Unavailable\r\nretry-after: Sun, 06 Nov 1994 08:49:37 GMT\r\ncontent-type: application/json\r\ncontent-length: {}\r\n\r\n",
        body.len()
    );
    let url = serve_once(vec![head.into_bytes(), body.to_vec()]).await;
    let got = attempt(ProviderKind::Openai, url).await;
    assert_eq!(
        got,
        vec![Input::RequestFailed {
            request: 1,
            attempt: 2,
            failure: RequestFailure::Http {
                status: 503,
                retry_after_s: Some(0),
                kind: FailureKind::Server,
                message: "busy".into()
            }
        }]
    );
}

/// An error body is read up to its cap (64 KiB) and no further: a server that sends that much
/// and then stalls does not hold the attempt.
#[tokio::test]
async fn an_error_body_is_read_to_its_cap_and_no_further() {
    const CAP: usize = 64 * 1024;
    let head = format!(
        "HTTP/1.1 500 Internal Server Error\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n",
        CAP + 1
    );
    let url = serve(vec![head.into_bytes(), vec![b'x'; CAP]], true).await;
    let got = attempt(ProviderKind::Anthropic, url).await;
    assert!(
        matches!(
            got.as_slice(),
            [Input::RequestFailed {
                failure: RequestFailure::Http { status: 500, .. },
                ..
            }]
        ),
        "{got:?}"
    );
}

#[tokio::test]
async fn closed_without_a_response_is_a_transport_failure() {
    let url = serve_once(vec![]).await;
    let got = attempt(ProviderKind::OpenaiChat, url).await;
    assert!(
        matches!(
            got.as_slice(),
            [Input::RequestFailed {
                failure: RequestFailure::Transport { .. },
                ..
            }]
        ),
        "{got:?}"
    );
}

#[tokio::test]
async fn last_event_without_blank_line_still_counts_on_a_clean_close() {
    let head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\nconnection: close\r\n\r\n";
    let url = serve_once(vec![
        head.to_vec(),
        b"event: content_block_delta\ndata: {\"type\":\"content_block_delta\",\"index\":0,\"delta\":{\"type\":\"text_delta\",\"text\":\"ok\"}}\n\n".to_vec(),
        b"event: message_delta\ndata: {\"type\":\"message_delta\",\"delta\":{\"stop_reason\":\"end_turn\"},\"usage\":{\"output_tokens\":1}}\n\n".to_vec(),
        b"event: message_stop\ndata: {\"type\":\"message_stop\"}".to_vec(),
    ])
    .await;
    let got = items(
        &attempt(
            ProviderKind::Anthropic,
            url.trim_end_matches("/v1").to_string(),
        )
        .await,
    );
    assert_eq!(
        got.last(),
        Some(&ProviderItem::Completed {
            finish_reason: "end_turn".into()
        }),
        "{got:?}"
    );
}
