//! What a POST answers, for every kind of server reply, and what ending a session (a DELETE)
//! accepts, against a loopback server that gives one canned HTTP response per connection and
//! keeps the request it got.

use tokio::io::{AsyncReadExt, AsyncWriteExt};

use super::*;

/// Serve `response` (a whole HTTP/1.1 response) to one connection; the request head is sent
/// back on the returned channel.
async fn serve_once(response: Vec<u8>) -> (String, tokio::sync::oneshot::Receiver<String>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/mcp", listener.local_addr().unwrap());
    let (tx, rx) = tokio::sync::oneshot::channel();
    tokio::spawn(async move {
        let (mut sock, _) = listener.accept().await.unwrap();
        let mut got = Vec::new();
        let mut buf = [0u8; 4096];
        // The head, then the body its content-length announces.
        let head_end = loop {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
            if let Some(i) = got.windows(4).position(|w| w == b"\r\n\r\n") {
                break i + 4;
            }
        };
        let head = String::from_utf8_lossy(&got[..head_end]).to_ascii_lowercase();
        let len: usize = head
            .lines()
            .find_map(|l| l.strip_prefix("content-length: "))
            .map(|v| v.trim().parse().unwrap())
            .unwrap_or(0);
        while got.len() < head_end + len {
            let n = sock.read(&mut buf).await.unwrap();
            got.extend_from_slice(&buf[..n]);
        }
        let _ = tx.send(String::from_utf8_lossy(&got).into_owned());
        let _ = sock.write_all(&response).await;
        let _ = sock.shutdown().await;
    });
    (url, rx)
}

/// The client under test, with a 10,000-byte answer cap.
fn client() -> HyperClient {
    HyperClient {
        client: build_client(10_000),
    }
}

fn response(status: &str, headers: &[(&str, &str)], body: &[u8]) -> Vec<u8> {
    let mut r = format!("HTTP/1.1 {status}\r\ncontent-length: {}\r\n", body.len());
    for (k, v) in headers {
        r.push_str(&format!("{k}: {v}\r\n"));
    }
    r.push_str("connection: close\r\n\r\n");
    let mut r = r.into_bytes();
    r.extend_from_slice(body);
    r
}

fn request_msg() -> ClientJsonRpcMessage {
    serde_json::from_value(serde_json::json!({"jsonrpc":"2.0","id":1,"method":"ping"})).unwrap()
}

fn notification_msg() -> ClientJsonRpcMessage {
    serde_json::from_value(
        serde_json::json!({"jsonrpc":"2.0","method":"notifications/initialized"}),
    )
    .unwrap()
}

/// The POST's outcome in words: `accepted`, `json <session>`, `sse <session>`, `expired`,
/// `unexpected: …`, `content-type: …`, `client: …`.
fn outcome(r: Result<StreamableHttpPostResponse, Failure>) -> String {
    match r {
        Ok(StreamableHttpPostResponse::Accepted) => "accepted".into(),
        Ok(StreamableHttpPostResponse::Json(_, s)) => format!("json {}", s.unwrap_or_default()),
        Ok(StreamableHttpPostResponse::Sse(_, s)) => format!("sse {}", s.unwrap_or_default()),
        Err(StreamableHttpError::SessionExpired) => "expired".into(),
        Err(StreamableHttpError::UnexpectedServerResponse(m)) => format!("unexpected: {m}"),
        Err(StreamableHttpError::UnexpectedContentType(c)) => {
            format!("content-type: {}", c.unwrap_or_default())
        }
        Err(StreamableHttpError::Client(e)) => format!("client: {e}"),
        Err(other) => format!("other: {other}"),
        Ok(_) => "another answer".into(),
    }
}

async fn post(
    msg: ClientJsonRpcMessage,
    session: Option<&str>,
    reply: Vec<u8>,
) -> (String, String) {
    let (url, head) = serve_once(reply).await;
    let client = client();
    let r = client
        .post_message(
            url.into(),
            msg,
            session.map(Arc::from),
            None,
            HashMap::new(),
        )
        .await;
    (outcome(r), head.await.unwrap_or_default())
}

const RESULT: &[u8] = br#"{"jsonrpc":"2.0","id":1,"result":{}}"#;
const RPC_ERROR: &[u8] = br#"{"jsonrpc":"2.0","id":1,"error":{"code":-32000,"message":"no"}}"#;
const JSON: (&str, &str) = ("content-type", "application/json");
const PLAIN: (&str, &str) = ("content-type", "text/plain");
const SSE: (&str, &str) = ("content-type", "text/event-stream");
const SID: (&str, &str) = ("mcp-session-id", "s-2");

#[tokio::test]
async fn every_reply_to_a_request_and_to_a_notification_is_read_by_its_rule() {
    // (a request?, the session sent, the reply, the outcome's start)
    let cases: Vec<(bool, Option<&str>, Vec<u8>, &str)> = vec![
        (true, None, response("202 Accepted", &[], b""), "accepted"),
        (false, None, response("202 Accepted", &[], b""), "accepted"),
        (true, None, response("204 No Content", &[], b""), "accepted"),
        (
            true,
            Some("s-1"),
            response("404 Not Found", &[], b""),
            "expired",
        ),
        (
            true,
            None,
            response("404 Not Found", &[], b"gone"),
            "unexpected: HTTP 404 Not Found: gone",
        ),
        (
            true,
            None,
            response("200 OK", &[JSON, SID], RESULT),
            "json s-2",
        ),
        (true, None, response("200 OK", &[JSON], RESULT), "json "),
        (true, None, response("200 OK", &[SSE, SID], b""), "sse s-2"),
        (
            true,
            None,
            response("200 OK", &[JSON], b"garbage"),
            "unexpected: not a JSON-RPC message",
        ),
        (
            false,
            None,
            response("200 OK", &[JSON], b"garbage"),
            "accepted",
        ),
        (
            true,
            None,
            response("200 OK", &[PLAIN], b"ok"),
            "content-type: text/plain",
        ),
        (false, None, response("200 OK", &[PLAIN], b"ok"), "accepted"),
        (
            true,
            None,
            response("500 Internal Server Error", &[JSON], RPC_ERROR),
            "json ",
        ),
        (
            true,
            None,
            response("500 Internal Server Error", &[PLAIN], b"<b>boom</b>"),
            "unexpected: HTTP 500 Internal Server Error: boom",
        ),
    ];
    for (is_request, session, reply, want) in cases {
        let msg = if is_request {
            request_msg()
        } else {
            notification_msg()
        };
        let (got, head) = post(msg, session, reply).await;
        assert!(
            got.starts_with(want),
            "request {is_request}, session {session:?}: {got:?}, want {want:?}"
        );
        let head = head.to_ascii_lowercase();
        assert!(head.starts_with("post /mcp http/1.1\r\n"), "{head}");
        assert!(
            head.contains("content-type: application/json\r\n"),
            "{head}"
        );
        assert!(
            head.contains("accept: text/event-stream, application/json\r\n"),
            "{head}"
        );
        match session {
            Some(s) => assert!(head.contains(&format!("mcp-session-id: {s}\r\n")), "{head}"),
            None => assert!(!head.contains("mcp-session-id"), "{head}"),
        }
    }
}

#[tokio::test]
async fn a_json_answer_is_read_up_to_the_cap_and_refused_past_it() {
    let answer = |len: usize| {
        let head = br#"{"jsonrpc":"2.0","id":1,"result":{"x":""#;
        let tail = br#""}}"#;
        let mut b = head.to_vec();
        b.resize(len - tail.len(), b'a');
        b.extend_from_slice(tail);
        b
    };
    let (got, _) = post(
        request_msg(),
        None,
        response("200 OK", &[JSON], &answer(MAX_JSON_BODY)),
    )
    .await;
    assert_eq!(got, "json ");
    let (got, _) = post(
        request_msg(),
        None,
        response("200 OK", &[JSON], &answer(MAX_JSON_BODY + 1)),
    )
    .await;
    assert_eq!(
        got,
        "client: the response body is over 16 MiB, the most read of one answer"
    );
}

#[tokio::test]
async fn the_bearer_token_and_the_configured_headers_are_sent() {
    let (url, head) = serve_once(response("202 Accepted", &[], b"")).await;
    let client = client();
    let mut custom = HashMap::new();
    custom.insert(
        HeaderName::from_static("x-team"),
        HeaderValue::from_static("blue"),
    );
    let r = client
        .post_message(
            url.into(),
            notification_msg(),
            None,
            Some("tok".into()),
            custom,
        )
        .await;
    assert_eq!(outcome(r), "accepted");
    let head = head.await.unwrap();
    assert!(head.contains("authorization: Bearer tok\r\n"), "{head}");
    assert!(head.contains("x-team: blue\r\n"), "{head}");
    assert!(
        head.contains(r#""method":"notifications/initialized""#),
        "{head}"
    );
}

#[tokio::test]
async fn ending_a_session_sends_its_id_and_a_server_may_refuse_it_with_405() {
    // The MCP spec lets a server answer 405 when it does not let clients end sessions.
    for (status, ended) in [
        ("200 OK", true),
        ("204 No Content", true),
        ("405 Method Not Allowed", true),
        ("404 Not Found", false),
        ("500 Internal Server Error", false),
    ] {
        let (url, head) = serve_once(response(status, &[], b"")).await;
        let client = client();
        let r = client
            .delete_session(url.into(), "s-9".into(), None, HashMap::new())
            .await;
        assert_eq!(
            r.is_ok(),
            ended,
            "{status}: {}",
            outcome(r.map(|()| StreamableHttpPostResponse::Accepted))
        );
        let head = head.await.unwrap();
        assert!(head.starts_with("DELETE /mcp HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("mcp-session-id: s-9\r\n"), "{head}");
    }
}

/// The event stream's opening (a GET), in words: `stream <first event's data>`, `no sse`, or
/// the error as [`outcome`] words it.
async fn open_stream(reply: Vec<u8>) -> (String, String) {
    use futures::StreamExt;
    let (url, head) = serve_once(reply).await;
    let client = client();
    let r = client
        .get_stream(
            url.into(),
            Some("s-3".into()),
            Some("ev-7".into()),
            None,
            HashMap::new(),
        )
        .await;
    let words = match r {
        Ok(mut stream) => match stream.next().await {
            Some(Ok(ev)) => format!("stream {}", ev.data.unwrap_or_default()),
            other => format!("stream without an event: {other:?}"),
        },
        Err(StreamableHttpError::ServerDoesNotSupportSse) => "no sse".into(),
        Err(e) => outcome(Err(e)),
    };
    (words, head.await.unwrap_or_default())
}

#[tokio::test]
async fn opening_the_event_stream_is_read_by_its_rule() {
    // A server without the GET stream answers 405 (the spec's way to say so); an event stream
    // is read; any other failure or answer is an error naming it.
    let event = b"id: ev-8\ndata: {\"jsonrpc\":\"2.0\",\"method\":\"notifications/ping\"}\n\n";
    let cases: [(Vec<u8>, &str); 5] = [
        (
            response("200 OK", &[SSE], event),
            "stream {\"jsonrpc\":\"2.0\",\"method\":\"notifications/ping\"}",
        ),
        (response("405 Method Not Allowed", &[], b""), "no sse"),
        (
            response("404 Not Found", &[], b""),
            "unexpected: opening the event stream: HTTP 404 Not Found",
        ),
        (
            response("500 Internal Server Error", &[SSE], b""),
            "unexpected: opening the event stream: HTTP 500 Internal Server Error",
        ),
        (
            response("200 OK", &[JSON], RESULT),
            "content-type: application/json",
        ),
    ];
    for (reply, want) in cases {
        let (got, head) = open_stream(reply).await;
        assert_eq!(got, want);
        assert!(head.starts_with("GET /mcp HTTP/1.1\r\n"), "{head}");
        assert!(head.contains("mcp-session-id: s-3\r\n"), "{head}");
        assert!(head.contains("last-event-id: ev-7\r\n"), "{head}");
    }
}
