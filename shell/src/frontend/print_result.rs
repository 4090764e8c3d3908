//! The one object `-p --output-format json` prints on stdout when the run is over
//! (docs/print.md lists the fields with examples):
//!
//! ```json
//! {"type":"result","session_id":"…","result":"the last reply's text","stop_reason":"end_turn",
//!  "exit_code":0,"turns":1,"tool_calls":2,
//!  "usage":{"prompt_tokens":1200,"completion_tokens":80,"cached_tokens":null,"requests":2},
//!  "subagents":{"tasks":0,"tool_calls":0,"prompt_tokens":0,"completion_tokens":0,
//!   "cached_tokens":null,"requests":0},
//!  "cost":0.0048,"declined":[],"error":null,"structured_output":null,"schema_errors":[]}
//! ```
//!
//! `usage` counts the subagents' tokens too (their children's sessions, read by the parent);
//! `subagents` is their part of it, and `tool_calls` counts this session's calls only.
//!
//! Invariant: every key is always present, so a script can index the object without checking;
//! unknown values are `null`. `cost` is USD at the user's `[provider] price_in`/`price_out`
//! (`null` when they are not set), computed by [`openmax_core::usage::Prices::cost`].

use openmax_core::usage::Prices;
use serde_json::{json, Value};

use super::output_schema::Verdict;
use super::tally::Tally;

/// The result object. `verdict` is `Some` for an `--output-schema` run.
pub fn object(
    session_id: &str,
    tally: &Tally,
    exit_code: i32,
    prices: Option<&Prices>,
    verdict: Option<&Verdict>,
) -> Value {
    // The session's usage and its subagents' together: what the run cost.
    let mut u = tally.usage;
    let c = &tally.children;
    u.prompt_tokens += c.usage.prompt_tokens;
    u.completion_tokens += c.usage.completion_tokens;
    u.requests += c.usage.requests;
    if let Some(n) = c.usage.cached_tokens {
        u.cached_tokens = Some(u.cached_tokens.unwrap_or(0) + n);
    }
    let u = &u;
    let (structured, schema_errors) = match verdict {
        Some(Verdict::Valid(v)) => (v.clone(), Vec::new()),
        Some(Verdict::Invalid(e)) => (Value::Null, e.clone()),
        Some(Verdict::Unchecked) | None => (Value::Null, Vec::new()),
    };
    json!({
        "type": "result",
        "session_id": session_id,
        "result": tally.last_reply,
        "stop_reason": tally.stop_reason.as_ref().map(|s| s.as_str().to_string()),
        "exit_code": exit_code,
        "turns": tally.turns,
        "tool_calls": tally.tool_calls,
        "usage": {
            "prompt_tokens": u.prompt_tokens,
            "completion_tokens": u.completion_tokens,
            "cached_tokens": u.cached_tokens,
            "requests": u.requests,
        },
        "subagents": {
            "tasks": c.tasks,
            "tool_calls": c.tool_calls,
            "prompt_tokens": c.usage.prompt_tokens,
            "completion_tokens": c.usage.completion_tokens,
            "cached_tokens": c.usage.cached_tokens,
            "requests": c.usage.requests,
        },
        "cost": prices.map(|p| p.cost(u)),
        "declined": tally.declined.iter().map(|d| json!({
            "name": d.name,
            "summary": d.summary,
            "reason": d.reason,
            "source_path": d.source_path,
        })).collect::<Vec<_>>(),
        "error": tally.last_error,
        "structured_output": structured,
        "schema_errors": schema_errors,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::wire::Event;

    #[test]
    fn every_key_is_present_and_cost_follows_the_prices() {
        let mut t = Tally::default();
        t.observe(&Event::MessageDone { text: "hi".into() });
        t.observe(&Event::Usage {
            prompt_tokens: 1_000_000,
            completion_tokens: 1_000_000,
            cached_tokens: None,
        });
        t.observe(&Event::Done {
            stop_reason: "end_turn".into(),
        });
        let o = object("s1", &t, 0, None, None);
        for k in [
            "type",
            "session_id",
            "result",
            "stop_reason",
            "exit_code",
            "turns",
            "tool_calls",
            "usage",
            "cost",
            "declined",
            "error",
            "structured_output",
            "schema_errors",
        ] {
            assert!(o.get(k).is_some(), "{k} missing: {o}");
        }
        assert_eq!(o["result"], "hi");
        assert_eq!(o["cost"], Value::Null);
        assert_eq!(o["usage"]["cached_tokens"], Value::Null);
        let p = Prices {
            input: 2.0,
            output: 10.0,
            cached_input: None,
        };
        assert_eq!(object("s1", &t, 0, Some(&p), None)["cost"], json!(12.0));
    }
}
