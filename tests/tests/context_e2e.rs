//! The context budget through the real binary (`openmax --stdio`) against the loopback mock:
//! a long session with large tool outputs in a small window, the scale-up after the provider
//! reports more prompt tokens than estimated, a context-length refusal recovered by one
//! compaction and one re-send (and a second refusal ending `error`), and `budget_exhausted`
//! followed by a resubmission that completes. Every stream goes through the validator
//! (`Session::finish`).
//!
//! What "never over the window" means here (docs/context.md): every request body the mock
//! received is read back into the request it was built from ([`anthropic_request`]) and
//! estimated with `openmax_core::compaction::estimate_body`; scaled with the scale the core
//! learned from the previous reply (the mock reports `body bytes / 4` prompt tokens unless a
//! script says otherwise), it is at most the compaction trigger (90% of the window less the
//! reply reserve); and the provider's own count (`body bytes / 4`) is at most the window.

use std::time::Instant;

use openmax_core::compaction::{self, Scale};
use openmax_core::conversation::{Message, ModelRequest};
use openmax_tests::*;
use serde_json::{json, Value};

/// How many turns the long session runs (each turn: a `read_file` of a ~7 KB file, then a
/// text reply). `OPENMAX_CONTEXT_TURNS` overrides it.
const LONG_TURNS: usize = 300;

fn trigger(context_tokens: u64) -> u64 {
    compaction::budget(context_tokens) * compaction::TRIGGER_PERCENT / 100
}

/// A file whose `read_file` output is about 7,000 characters (about 1,750 estimated tokens).
fn big_file(env: &TestEnv) {
    let text: String = (0..120)
        .map(|i| format!("fn item_{i:03}() -> u32 {{ {i} }} // padding padding padding\n"))
        .collect();
    std::fs::write(env.project.join("big.txt"), text).unwrap();
}

fn setup(flavor: Flavor, replies: Vec<Reply>, extra: &str) -> (TestEnv, MockServer) {
    let env = TestEnv::new();
    let mock = MockServer::start(replies);
    env.mock_config(flavor, &mock.base_url(), extra);
    env.trust();
    big_file(&env);
    (env, mock)
}

fn read_big(id: &str) -> Reply {
    tool_reply(id, "read_file", json!({"path": "big.txt"}))
}

fn text_with_usage(text: &str, prompt_tokens: u64) -> Reply {
    Reply::Stream {
        items: vec![
            StreamItem::Text { text: text.into() },
            StreamItem::Usage {
                prompt_tokens,
                completion_tokens: 10,
                cached_tokens: None,
            },
        ],
        end: StreamEnd::Complete { finish: None },
        delay_ms: 0,
    }
}

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

fn u(v: &Value, key: &str) -> u64 {
    v[key].as_u64().unwrap_or_else(|| panic!("{key} in {v}"))
}

/// Every request the mock logged, read back, with its unscaled estimate and the scale the core
/// held when it was sent (learned from the previous request's reported prompt tokens).
struct Sent {
    req: ModelRequest,
    messages: Value,
    estimate: u64,
    scale: Option<Scale>,
    reported: u64,
    body_len: usize,
}

fn sent(mock: &MockServer, reported_override: &[(usize, u64)]) -> Vec<Sent> {
    let mut out: Vec<Sent> = Vec::new();
    for (i, r) in mock.requests().iter().enumerate() {
        let req = anthropic_request(&r.body);
        let estimate = compaction::estimate_body(&req);
        let scale = out
            .last()
            .and_then(|p| Scale::learn(p.reported, p.estimate));
        let reported = reported_override
            .iter()
            .find(|(k, _)| *k == i)
            .map_or_else(|| mock_reported_prompt_tokens(r), |(_, p)| *p);
        out.push(Sent {
            messages: without_cache_control(&r.body["messages"]),
            req,
            estimate,
            scale,
            reported,
            body_len: r.body_len,
        });
    }
    out
}

fn is_prefix(a: &Value, b: &Value) -> bool {
    match (a.as_array(), b.as_array()) {
        (Some(a), Some(b)) => a.len() <= b.len() && b[..a.len()] == a[..],
        _ => false,
    }
}

/// A long session in a small window: never a request over the window, a `compacted` receipt
/// before every request that dropped history (and none otherwise) whose `tokens_after` is
/// exactly the scaled estimate of the request that followed, then `--continue` resumes from the
/// compaction point.
#[test]
fn long_session_in_a_small_window_compacts_and_resumes() {
    let started = Instant::now();
    let turns: usize = std::env::var("OPENMAX_CONTEXT_TURNS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(LONG_TURNS);
    let c: u64 = 16_000;
    let mut replies = Vec::new();
    for i in 1..=turns {
        replies.push(read_big(&format!("toolu_{i:04}")));
        replies.push(text_reply(&format!("Read it ({i}).")));
    }
    let (env, mock) = setup(Flavor::Anthropic, replies, &format!("context_tokens = {c}"));
    let mut s = env.stdio(&[]);
    let mut all = Vec::new();
    for i in 1..=turns {
        s.user(&format!("turn {i:04}: read big.txt"));
        let (evs, reason) = s.turn();
        assert_eq!(reason, "end_turn", "turn {i}: {evs:?}");
        all.extend(evs);
    }
    let (code, rest, _) = s.finish();
    assert_eq!(code, Some(0));
    all.extend(rest);

    let reqs = sent(&mock, &[]);
    assert_eq!(reqs.len(), 2 * turns, "two requests per turn");
    // Which request each receipt preceded: every completed request emits one `budget` line.
    let mut receipts = Vec::new();
    let mut budgets = 0usize;
    for e in &all {
        match e["type"].as_str() {
            Some("budget") => {
                assert_eq!(u(e, "context_tokens"), c);
                budgets += 1;
            }
            Some("compacted") => receipts.push((budgets, e.clone())),
            _ => {}
        }
    }
    assert_eq!(budgets, 2 * turns);
    assert!(
        receipts.len() >= turns / 10,
        "{} compactions in {turns} turns",
        receipts.len()
    );
    let trig = trigger(c);
    for (k, r) in reqs.iter().enumerate() {
        let scaled = Scale::apply(r.scale, r.estimate);
        assert!(
            scaled <= trig,
            "request {k}: scaled estimate {scaled} over the trigger {trig}"
        );
        assert!(
            r.reported <= c,
            "request {k}: {} bytes, the provider counts {} tokens, over the window {c}",
            r.body_len,
            r.reported
        );
        let receipt = receipts.iter().find(|(at, _)| *at == k).map(|(_, e)| e);
        match receipt {
            Some(e) => {
                assert_eq!(
                    u(e, "tokens_after"),
                    scaled,
                    "request {k}: the receipt's tokens_after is the scaled estimate of what was sent"
                );
                assert!(u(e, "tokens_before") > trig, "request {k}: {e}");
                // Pruned down to the target: the scaled fixed part plus 60% of the rest.
                let fixed = Scale::apply(r.scale, compaction::estimate_text(&r.req.system))
                    + Scale::apply(r.scale, compaction::estimate_schemas(&r.req.tools));
                let target = compaction::prune_target(c, fixed);
                assert!(
                    scaled <= target,
                    "request {k}: {scaled} over the target {target}"
                );
                assert!(u(e, "compacted_messages") > 0, "request {k}: {e}");
                assert!(
                    k > 0 && !is_prefix(&reqs[k - 1].messages, &r.messages),
                    "request {k}: a receipt, so history was pruned"
                );
            }
            None if k > 0 => assert!(
                is_prefix(&reqs[k - 1].messages, &r.messages),
                "request {k}: history shrank with no compacted receipt"
            ),
            None => {}
        }
    }
    let last = reqs.last().unwrap();
    let first_prompt = "turn 0001: read big.txt";
    // With enough turns, stubs alone stop being enough and whole old turns go.
    if turns >= 50 {
        assert!(
            !last.messages.to_string().contains(first_prompt),
            "the oldest turns were dropped"
        );
    }
    let long_ms = started.elapsed().as_millis();

    // --continue: the first request carries the compacted history as the last process left it.
    mock.push(text_reply("resumed"));
    let mut s = env.stdio(&["--continue"]);
    assert_eq!(s.hello["continued"], true);
    s.user("after resume");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    assert_eq!(tokens(&evs), "resumed");
    assert!(
        of_type(&evs, "compacted").is_empty(),
        "no compaction needed on resume"
    );
    assert_eq!(s.finish().0, Some(0));
    let after = mock.requests();
    assert_eq!(after.len(), 2 * turns + 1);
    let resumed = without_cache_control(&after[2 * turns].body["messages"]);
    let mut expect = last.messages.as_array().unwrap().clone();
    expect.push(json!({"role":"assistant","content":[{"type":"text","text":format!("Read it ({turns}).")}]}));
    expect.push(json!({"role":"user","content":[{"type":"text","text":"after resume"}]}));
    assert_eq!(
        resumed,
        Value::Array(expect),
        "the resumed request is the compacted history plus the new prompt"
    );
    assert!(resumed.to_string().contains(compaction::STUB_PREFIX));
    if turns >= 50 {
        assert!(
            !resumed.to_string().contains(first_prompt),
            "pruned turns stay pruned"
        );
    }
    // The same system prompt and schemas.
    let r = anthropic_request(&after[2 * turns].body);
    assert_eq!(r.system, last.req.system);
    assert_eq!(r.tools, last.req.tools);
    eprintln!(
        "long session: {turns} turns, {} requests, {} compactions, largest request {} bytes, {long_ms} ms",
        2 * turns,
        receipts.len(),
        reqs.iter().map(|r| r.body_len).max().unwrap_or(0)
    );
}

/// The provider reports far more prompt tokens than the estimate: the next `budget` is scaled
/// by reported/estimated, and the next turn's scaled estimate crosses the trigger (forcing a
/// compaction) although the unscaled one is far under it.
#[test]
fn reported_prompt_tokens_scale_the_budget_and_force_compaction() {
    let c: u64 = 60_000;
    let reported = 50_000;
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![
            read_big("toolu_1"),
            text_with_usage("Read it.", reported),
            text_reply("Again."),
        ],
        &format!("context_tokens = {c}"),
    );
    let mut s = env.stdio(&[]);
    s.user("read big.txt");
    let (evs1, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    s.user("again");
    let (evs2, reason) = s.turn();
    assert_eq!(reason, "end_turn");
    assert_eq!(s.finish().0, Some(0));

    let reqs = sent(&mock, &[(1, reported)]);
    assert_eq!(reqs.len(), 3);
    // The budget after the second request: the conversation with the reply, scaled by
    // reported / estimate of that request.
    let scale = Scale::learn(reported, reqs[1].estimate);
    assert!(scale.is_some());
    let mut conv = reqs[1].req.clone();
    conv.messages.push(Message::assistant_text("Read it."));
    let want = Scale::apply(scale, compaction::estimate_body(&conv));
    let budgets = of_type(&evs1, "budget");
    assert_eq!(budgets.len(), 2);
    assert_eq!(u(budgets[1], "used_tokens"), want);
    assert!(want >= reported, "scaled: {want}");
    assert!(
        u(budgets[0], "used_tokens") < reported / 5,
        "before the report the budget was unscaled-ish: {}",
        budgets[0]
    );
    // The next turn: the scaled estimate crossed the trigger; the receipt matches the request.
    let trig = trigger(c);
    let receipt = of_type(&evs2, "compacted");
    assert_eq!(receipt.len(), 1, "{evs2:?}");
    assert!(u(receipt[0], "tokens_before") > trig);
    assert_eq!(
        u(receipt[0], "tokens_after"),
        Scale::apply(reqs[2].scale, reqs[2].estimate)
    );
    assert!(
        reqs[2].estimate * 4 < trig,
        "unscaled it was far under the trigger"
    );
    assert!(serde_json::to_string(&reqs[2].messages)
        .unwrap()
        .contains(compaction::STUB_PREFIX));
}

fn refusal(flavor: Flavor) -> Reply {
    match flavor {
        Flavor::Anthropic => Reply::Status {
            status: 400,
            retry_after: None,
            error: Some("invalid_request_error".into()),
            message: Some("prompt is too long: 210000 tokens > 200000 maximum".into()),
        },
        Flavor::Openai | Flavor::OpenaiChat => Reply::Status {
            status: 400,
            retry_after: None,
            error: Some("context_length_exceeded".into()),
            message: Some(
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 131000 tokens."
                    .into(),
            ),
        },
    }
}

/// A context-length refusal of the second turn's request: one compaction with its receipt, one
/// re-send (no `retry` line) carrying the stubbed history, and the turn completes; with
/// `twice`, the re-send is refused too and the turn ends `error`.
fn context_length(flavor: Flavor, refused: Reply, twice: bool) {
    // A tool output large beside the fixed part (system prompt and schemas), so that stubbing
    // it alone reaches the re-send's target, whatever size the built-in schemas grow to.
    let read_bigger = tool_reply("call_1", "read_file", json!({"path": "bigger.txt"}));
    let mut replies = vec![read_bigger, text_reply("Read it."), refused.clone()];
    if twice {
        replies.push(refused);
    }
    replies.push(text_reply("Summary."));
    let (env, mock) = setup(flavor, replies, "");
    let text: String = (0..600)
        .map(|i| format!("fn item_{i:03}() -> u32 {{ {i} }} // padding padding padding\n"))
        .collect();
    std::fs::write(env.project.join("bigger.txt"), text).unwrap();
    let mut s = env.stdio(&[]);
    s.user("read big.txt");
    assert_eq!(s.turn().1, flavor.default_finish(false));
    s.user("summarize");
    let (evs, reason) = s.turn();
    let receipts = of_type(&evs, "compacted");
    assert_eq!(receipts.len(), 1, "one compaction: {evs:?}");
    assert!(u(receipts[0], "compacted_messages") >= 1);
    assert!(u(receipts[0], "tokens_after") < u(receipts[0], "tokens_before"));
    assert!(
        of_type(&evs, "retry").is_empty(),
        "the re-send is not a retry"
    );
    let reqs = mock.requests();
    if twice {
        assert_eq!(reason, "error");
        assert_eq!(of_type(&evs, "error").len(), 1);
        assert_eq!(s.finish().0, Some(1));
        assert_eq!(reqs.len(), 4, "no third attempt");
    } else {
        assert_eq!(reason, flavor.default_finish(false));
        assert_eq!(tokens(&evs), "Summary.");
        assert_eq!(s.finish().0, Some(0));
        assert_eq!(reqs.len(), 4);
    }
    // The re-send is the refused request, compacted: smaller, with the stub.
    let (refused, resent) = (&reqs[2], &reqs[3]);
    assert!(resent.body_len < refused.body_len);
    assert!(!refused.body.to_string().contains(compaction::STUB_PREFIX));
    assert!(resent.body.to_string().contains(compaction::STUB_PREFIX));
    assert!(resent.body.to_string().contains("summarize"));
}

#[test]
fn context_length_exceeded_openai_recovered_once() {
    context_length(Flavor::Openai, refusal(Flavor::Openai), false);
}

#[test]
fn prompt_too_long_anthropic_recovered_once() {
    context_length(Flavor::Anthropic, refusal(Flavor::Anthropic), false);
}

#[test]
fn context_length_refused_twice_ends_error() {
    context_length(Flavor::Openai, refusal(Flavor::Openai), true);
}

/// `max_agent_tokens`: the first request's usage reaches the cap, so the request after the tool
/// round is refused at admission (`budget_exhausted`, nothing sent); resubmitting continues
/// from the conversation as it stands (the tool result included) and completes.
#[test]
fn budget_exhausted_then_resubmission_completes() {
    let (env, mock) = setup(
        Flavor::Anthropic,
        vec![read_big("toolu_1"), text_reply("Done reading.")],
        "[limits]\nmax_agent_tokens = 100",
    );
    let mut s = env.stdio(&[]);
    s.user("read big.txt");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "budget_exhausted", "{evs:?}");
    assert_eq!(of_type(&evs, "tool_end").len(), 1);
    assert_eq!(mock.requests().len(), 1, "nothing sent after the cap");
    s.user("continue");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    assert_eq!(tokens(&evs), "Done reading.");
    assert_eq!(s.finish().0, Some(0));
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    let body = reqs[1].body.to_string();
    assert!(body.contains("tool_result") && body.contains("toolu_1"));
    assert!(body.contains("item_119"), "the tool output itself");
    assert!(body.contains("continue"));
}

#[test]
fn context_length_exceeded_openai_chat_recovered_once() {
    context_length(Flavor::OpenaiChat, refusal(Flavor::OpenaiChat), false);
}

/// The refusal inside a 200 stream, before any text: Anthropic's `error` event.
#[test]
fn prompt_too_long_in_stream_anthropic_recovered_once() {
    let refused = Reply::Stream {
        items: vec![],
        end: StreamEnd::Error {
            error: "invalid_request_error".into(),
            message: "prompt is too long: 201000 tokens > 200000 maximum".into(),
        },
        delay_ms: 0,
    };
    context_length(Flavor::Anthropic, refused, false);
}

/// The refusal inside a 200 stream, before any text: OpenAI Responses' `response.failed`.
#[test]
fn context_length_in_stream_openai_recovered_once() {
    let refused = Reply::Stream {
        items: vec![],
        end: StreamEnd::Error {
            error: "context_length_exceeded".into(),
            message: "Your input exceeds the context window of this model.".into(),
        },
        delay_ms: 0,
    };
    context_length(Flavor::Openai, refused, false);
}

/// Every context-window refusal of the documented table, as its server sends it (status and
/// body verbatim), leads to the one compaction and re-send.
#[test]
fn every_servers_context_window_refusal_compacts_and_resends() {
    use openmax_core::provider::errors::CONTEXT_WINDOW_PATTERNS;
    for p in CONTEXT_WINDOW_PATTERNS {
        let flavor = match p.server {
            "Anthropic" => Flavor::Anthropic,
            "OpenAI Responses" | "OpenAI" => Flavor::Openai,
            _ => Flavor::OpenaiChat,
        };
        let (status, body) = p.example;
        eprintln!("{} ({:?} {:?}) via {flavor:?}", p.server, p.field, p.text);
        let refused = Reply::RawStatus {
            status,
            body: body.into(),
        };
        context_length(flavor, refused, false);
    }
}
