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
property!(
    forwarded_approvals_settle_once_and_a_cancel_settles_them,
    22,
    RECORD_CASES
);

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

/// The generator reaches every feature, fault and ending of `coverage::WANTED`: a property
/// that never sees a compaction or a ninth refusal proves nothing about it. Over the first
/// 10,000 cases of one seed (driver runs only, no checks), no count may be zero.
#[test]
fn generator_covers_every_feature() {
    use openmax_sim::coverage::{observe, Tally};
    let mut tally = Tally::default();
    for k in 0..10_000 {
        let (sc, _) = openmax_sim::explore::case(0xC0FE, k);
        let run = driver::run(&sc);
        tally.add(&observe(&sc, &run));
    }
    eprint!("{}", tally.report());
    assert!(
        tally.missing().is_empty(),
        "never generated: {:?}\n{}",
        tally.missing(),
        tally.report()
    );
}
