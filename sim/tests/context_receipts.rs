//! The context scenarios (`sim/scenarios/context_*.json`) checked beyond their goldens, against
//! `docs/context.md`, by recomputing every figure from the effects with the core's estimator:
//!
//! - every `compacted` receipt's `tokens_after` is exactly the scaled estimate of the body of
//!   the next `SendRequest` (the scale recomputed from the usage each completed reply reported),
//!   and the compaction point written just before it (`Record::Compaction`) holds exactly the
//!   messages that body carries;
//! - where compaction is in force (the schemas do not fill the budget), no request goes out with
//!   a scaled estimate over the trigger (90% of the budget), and every receipt reaches the prune
//!   target (the scaled fixed part plus 60% of what the budget leaves beside it);
//! - every `budget` line reports the same `context_tokens` as configured;
//! - the scenario that should compact does, and the one whose schemas fill the budget never does.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use openmax_core::compaction::{self, Scale};
use openmax_core::conversation::ModelRequest;
use openmax_core::machine::{Effect, Input, Output};
use openmax_core::provider::{ProviderItem, RequestId};
use openmax_core::record::Record;
use openmax_core::wire::Event;
use openmax_sim::driver::{self, FedInput};
use openmax_sim::scenario::Scenario;

fn context_scenarios() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("scenarios dir")
        .filter_map(|e| e.ok().map(|e| e.path()))
        .filter(|p| {
            p.extension().is_some_and(|x| x == "json")
                && p.file_name()
                    .and_then(|n| n.to_str())
                    .is_some_and(|n| n.starts_with("context_"))
        })
        .collect();
    files.sort();
    files
}

/// What one scenario's run showed.
#[derive(Debug, Default)]
struct Figures {
    receipts: Vec<(u64, u64, u64)>,
    requests: usize,
    /// Scaled estimate of each request when sent.
    sent_estimates: Vec<u64>,
    /// The first message of the last request sent.
    last_first: Option<openmax_core::conversation::Message>,
}

/// `over_trigger_ok`: the scenario shows the documented exception (a compaction that finds
/// nothing outside the current turn to cut sends the request as is).
fn check(sc: &Scenario, over_trigger_ok: bool) -> Result<Figures, String> {
    let run = driver::run(sc);
    let c = sc.config.context_tokens;
    let freeze = sc.freeze();
    let fixed = compaction::estimate_fixed(&freeze.system, &freeze.tools);
    let schemas_fill = fixed >= compaction::budget(c);
    let mut scale: Option<Scale> = None;
    let mut estimates: BTreeMap<(RequestId, u32), u64> = BTreeMap::new();
    let mut usage: BTreeMap<(RequestId, u32), u64> = BTreeMap::new();
    // A receipt waiting for its request, and the compaction point written before it.
    let mut open_receipt: Option<u64> = None;
    let mut last_point: Option<Vec<openmax_core::conversation::Message>> = None;
    let mut f = Figures::default();
    for fed in &run.trace {
        if let FedInput::Core(Input::Provider {
            request,
            attempt,
            item,
        }) = &fed.input
        {
            match item {
                ProviderItem::Usage { prompt_tokens, .. } => {
                    usage.insert((*request, *attempt), *prompt_tokens);
                }
                ProviderItem::Completed { .. } => {
                    if let Some(p) = usage.get(&(*request, *attempt)) {
                        let est = estimates[&(*request, *attempt)];
                        scale = Scale::learn(*p, est);
                    }
                }
                _ => {}
            }
        }
        for o in &fed.outputs {
            match o {
                Output::Effect(Effect::Persist { records, .. }) => {
                    for r in records {
                        if let Record::Compaction { messages, .. } = r {
                            last_point = Some(messages.clone());
                        }
                    }
                }
                Output::Event(Event::Compacted {
                    tokens_before,
                    tokens_after,
                    compacted_messages,
                }) => {
                    f.receipts
                        .push((*tokens_before, *tokens_after, *compacted_messages));
                    if *compacted_messages > 0 {
                        if tokens_after > tokens_before {
                            return Err(format!("receipt grew: {tokens_before} -> {tokens_after}"));
                        }
                        // Pruned to the target: the scaled fixed part plus 60% of the rest.
                        let fixed_scaled =
                            Scale::apply(scale, compaction::estimate_text(&freeze.system))
                                + Scale::apply(scale, compaction::estimate_schemas(&freeze.tools));
                        let target = compaction::prune_target(c, fixed_scaled);
                        if *tokens_after > target {
                            return Err(format!("receipt tokens_after {tokens_after} over the prune target {target}"));
                        }
                        open_receipt = Some(*tokens_after);
                    }
                }
                Output::Event(Event::Budget { context_tokens, .. }) if *context_tokens != c => {
                    return Err(format!(
                        "budget says context_tokens {context_tokens}, configured {c}"
                    ));
                }
                Output::Effect(Effect::SendRequest {
                    request,
                    attempt,
                    body,
                }) => {
                    let body: &ModelRequest = body;
                    let est = compaction::estimate_body(body);
                    estimates.insert((*request, *attempt), est);
                    let scaled = Scale::apply(scale, est);
                    f.requests += 1;
                    f.sent_estimates.push(scaled);
                    f.last_first = body.messages.first().cloned();
                    if let Some(after) = open_receipt.take() {
                        if after != scaled {
                            return Err(format!(
                                "receipt tokens_after {after}, the next request's scaled estimate is {scaled}"
                            ));
                        }
                        match last_point.take() {
                            Some(m) if m == body.messages => {}
                            Some(_) => {
                                return Err(
                                    "the compaction point differs from the request it precedes"
                                        .into(),
                                )
                            }
                            None => return Err("a receipt with no compaction point written".into()),
                        }
                    }
                    let trigger = compaction::budget(c) * compaction::TRIGGER_PERCENT / 100;
                    if !schemas_fill && !over_trigger_ok && scaled > trigger {
                        return Err(format!(
                            "request {request} attempt {attempt} went out at {scaled} scaled tokens, over the trigger {trigger}"
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    if open_receipt.is_some() {
        return Err("a receipt was never followed by a request".into());
    }
    Ok(f)
}

#[test]
fn context_scenarios_receipts_match_what_is_sent() {
    let files = context_scenarios();
    assert!(
        files.len() >= 11,
        "context scenarios found: {}",
        files.len()
    );
    let mut failures = Vec::new();
    let mut by_name = BTreeMap::new();
    for path in &files {
        let text = std::fs::read_to_string(path).expect("read scenario");
        let sc = Scenario::from_json(&text).expect("parse scenario");
        let name = path.file_stem().unwrap().to_string_lossy().to_string();
        match check(&sc, name == "context_nothing_to_cut") {
            Ok(f) => {
                by_name.insert(name, f);
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let receipts = |n: &str| by_name[n].receipts.clone();
    assert_eq!(receipts("context_forced_compaction").len(), 5);
    // The later compactions dropped whole turns: the last request starts at a later prompt.
    let first = by_name["context_forced_compaction"].last_first.clone();
    assert!(
        first
            .as_ref()
            .is_some_and(|m| compaction::is_prompt(m) && !format!("{m:?}").contains("step 1:")),
        "{first:?}"
    );
    // Nothing to cut: no receipt, and the request went out over the trigger.
    assert!(receipts("context_nothing_to_cut").is_empty());
    let trigger = compaction::budget(2000) * compaction::TRIGGER_PERCENT / 100;
    assert!(by_name["context_nothing_to_cut"]
        .sent_estimates
        .iter()
        .any(|e| *e > trigger));
    // A refusal with nothing to cut: the no-op receipt, nothing re-sent.
    let noop = receipts("context_length_nothing_to_cut");
    assert_eq!(noop.len(), 1);
    assert_eq!(noop[0].2, 0);
    assert_eq!(noop[0].0, noop[0].1);
    assert_eq!(by_name["context_length_nothing_to_cut"].requests, 1);
    assert!(receipts("context_schemas_fill").is_empty());
    assert_eq!(receipts("context_schemas_over_budget").len(), 1);
    assert_eq!(receipts("context_scale_up").len(), 1);
    for n in [
        "context_length_openai",
        "context_length_anthropic",
        "context_length_in_stream",
        "context_length_twice",
        "context_length_past_attempt_budget",
    ] {
        assert_eq!(receipts(n).len(), 1, "{n}: one compaction for the refusal");
    }
    assert!(receipts("context_budget_exhausted_resubmit").is_empty());
}

#[test]
fn scale_up_compacts_where_the_unscaled_estimate_would_not() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/context_scale_up.json"),
    )
    .expect("read scenario");
    let sc = Scenario::from_json(&text).expect("parse scenario");
    let run = driver::run(&sc);
    // The refused-for-size request: the one right after the receipt. Unscaled, the
    // conversation before compaction was under the trigger.
    let trigger = compaction::budget(sc.config.context_tokens) * compaction::TRIGGER_PERCENT / 100;
    let mut saw = false;
    for (_, e) in run.events() {
        if let Event::Compacted { tokens_before, .. } = e {
            assert!(*tokens_before > trigger);
            saw = true;
        }
    }
    assert!(saw, "the scaled estimate crossed the trigger");
    // The largest unscaled request estimate stays far under the trigger.
    let max_unscaled = run
        .effects()
        .filter_map(|(_, e)| match e {
            Effect::SendRequest { body, .. } => Some(compaction::estimate_body(body)),
            _ => None,
        })
        .max()
        .unwrap_or(0);
    assert!(
        max_unscaled * 2 < trigger,
        "unscaled {max_unscaled} vs trigger {trigger}"
    );
}

/// The retry checker exempts only the one re-send that follows a context-length refusal and
/// its `compacted` receipt: with the receipt removed from the run, the same re-send is flagged.
#[test]
fn the_resend_exemption_needs_the_receipt() {
    let text = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/context_length_openai.json"),
    )
    .expect("read scenario");
    let sc = Scenario::from_json(&text).expect("parse scenario");
    let mut run = driver::run(&sc);
    assert!(openmax_sim::checks::retries_bounded_and_never_after_reply_text(&sc, &run).is_empty());
    let mut removed = 0;
    for fed in &mut run.trace {
        let before = fed.outputs.len();
        fed.outputs
            .retain(|o| !matches!(o, Output::Event(Event::Compacted { .. })));
        removed += before - fed.outputs.len();
    }
    assert_eq!(removed, 1);
    let v = openmax_sim::checks::retries_bounded_and_never_after_reply_text(&sc, &run);
    assert!(
        v.iter().any(|m| m.contains("no retry line")),
        "the re-send without a receipt is a violation: {v:?}"
    );
}
