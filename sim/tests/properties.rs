//! The turn guarantees as quickcheck properties over generated scenarios, one test each.
//!
//! Each property runs its own number of cases (see `CASES`): together at least 10,000
//! generated scenarios per `cargo test`. The seed is fixed per property so a failure
//! reproduces; set `OPENMAX_SIM_SEED` to explore other seeds. A failure prints the shrunk
//! scenario as JSON: keep it under `sim/scenarios/regressions/`.

use quickcheck::{Gen, QuickCheck, TestResult};

use openmax_sim::checks;
use openmax_sim::driver;
use openmax_sim::explore::GEN_SIZE;
use openmax_sim::gen::{GenScenario, LiveScenario};
use openmax_sim::scenario::Scenario;

/// Cases per property of the first families: 12 properties x 4000 = 48,000 generated
/// scenarios, plus `RECORD_CASES` for each later one and the coverage test's cases.
const CASES: u64 = 4000;

/// Cases for each property that reads the records, request bodies and limits (they are also
/// judged on every case of `openmax-sim explore` and of the coverage test).
const RECORD_CASES: u64 = 1000;

fn qc(salt: u64) -> QuickCheck {
    qc_n(salt, CASES)
}

fn qc_n(salt: u64, cases: u64) -> QuickCheck {
    let seed = std::env::var("OPENMAX_SIM_SEED")
        .ok()
        .and_then(|s| s.parse::<u64>().ok())
        .unwrap_or(0x5eed);
    QuickCheck::new()
        .rng(Gen::from_size_and_seed(GEN_SIZE, seed ^ salt))
        .tests(cases)
        .max_tests(cases * 2)
}

fn verdict(property: &str, sc: &Scenario, mut v: Vec<String>) -> TestResult {
    if v.is_empty() {
        return TestResult::passed();
    }
    v.truncate(5);
    let run = driver::run(sc);
    TestResult::error(format!(
        "{property} violated:\n  {}\nscenario:\n{}\ntrace:\n{}",
        v.join("\n  "),
        sc.to_json_pretty(),
        run.listing()
    ))
}

macro_rules! property {
    ($name:ident, $salt:expr) => {
        property!($name, $salt, CASES);
    };
    ($name:ident, $salt:expr, $cases:expr) => {
        #[test]
        fn $name() {
            fn prop(s: GenScenario) -> TestResult {
                let run = driver::run(&s.0);
                let v = checks::check_named(stringify!($name), &s.0, &run);
                verdict(stringify!($name), &s.0, v)
            }
            qc_n($salt, $cases).quickcheck(prop as fn(GenScenario) -> TestResult);
        }
    };
}

property!(stream_is_valid, 12);
property!(exactly_one_done_per_admitted_user, 1);
property!(done_is_the_turns_last_line, 2);
property!(no_done_for_user_refused_in_flight, 3);
property!(three_ending_shapes, 4);
property!(no_dispatch_from_truncated_stream, 5);
property!(retries_bounded_and_never_after_reply_text, 6);
property!(three_unreachable_gives_up, 7);
property!(every_approval_settles_once, 8);
property!(quit_drains, 9);
property!(machine_goes_quiet, 10);
property!(approved_only_by_its_approve, 13, RECORD_CASES);
property!(only_message_done_text_is_kept, 14, RECORD_CASES);
property!(voided_thinking_never_kept, 15, RECORD_CASES);
property!(receipts_follow_their_persist_ack, 16, RECORD_CASES);
property!(token_cap_refuses_at_admission, 17, RECORD_CASES);
property!(retry_after_up_to_a_minute_waits, 18, RECORD_CASES);
property!(turn_end_refusals_bounded, 19, RECORD_CASES);
property!(tool_rounds_bounded, 20, RECORD_CASES);
property!(no_turn_in_flight_after_done, 21, RECORD_CASES);

#[test]
fn liveness_after_faults() {
    fn prop(s: LiveScenario) -> TestResult {
        let sc = s.full();
        let run = driver::run(&sc);
        let mut v = checks::check_all(&sc, &run)
            .iter()
            .map(|x| x.to_string())
            .collect::<Vec<_>>();
        v.extend(checks::liveness_after_faults(&sc, &run));
        verdict("liveness_after_faults", &sc, v)
    }
    qc(11).quickcheck(prop as fn(LiveScenario) -> TestResult);
}

/// The generator reaches every ending and every event kind the guarantees talk about: a
/// property that never sees a truncated stream or an approval proves nothing about them.
#[test]
fn generator_covers_every_shape() {
    use openmax_core::wire::Event;
    use std::collections::BTreeMap;
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for k in 0..2000 {
        let (sc, _) = openmax_sim::explore::case(0xC0FE, k);
        let run = driver::run(&sc);
        for (_, e) in run.events() {
            let key = match e {
                Event::Done { stop_reason } => format!("done:{stop_reason}"),
                Event::ApprovalSettled { outcome, .. } => format!("settled:{outcome:?}"),
                other => other.type_name().to_string(),
            };
            *seen.entry(key).or_default() += 1;
        }
        // Shapes that need several faults in a row.
        let events: Vec<&Event> = run.events().map(|(_, e)| e).collect();
        for w in events.windows(2) {
            if let [Event::Retry { .. }, Event::Done { stop_reason }] = w {
                if stop_reason == "cancelled" {
                    *seen.entry("cancel_in_backoff".into()).or_default() += 1;
                }
            }
        }
        if events.iter().any(
            |e| matches!(e, Event::Error { message } if message.contains("unreachable 3 times")),
        ) {
            *seen.entry("three_unreachable".into()).or_default() += 1;
        }
        if run.exit_code == Some(1) {
            *seen.entry("exit:1".into()).or_default() += 1;
        }
    }
    let want = [
        "done:end_turn",
        "done:length",
        "done:truncated",
        "done:error",
        "done:cancelled",
        "done:refused",
        "done:max_iterations",
        "done:budget_exhausted",
        "done:blocked",
        "settled:Approved",
        "settled:Declined",
        "settled:TimedOut",
        "settled:Cancelled",
        "retry",
        "turn_refused",
        "hook_failed",
        "thinking",
        "diff",
        "usage",
        "protocol_error",
        "refrozen",
        "approval_mode",
        "exit:1",
        "cancel_in_backoff",
        "three_unreachable",
    ];
    eprintln!("coverage over 2000 cases: {seen:?}");
    let missing: Vec<&str> = want
        .iter()
        .copied()
        .filter(|w| !seen.contains_key(*w))
        .collect();
    assert!(
        missing.is_empty(),
        "never generated: {missing:?}\nseen: {seen:?}"
    );
}
