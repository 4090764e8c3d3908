//! Exploration: run many generated scenarios from one seed, check every guarantee, and shrink
//! any counterexample to a small scenario (the engine of `openmax-sim explore`).
//!
//! Invariant: case `k` of seed `s` is always the same scenario (its own [`Gen`] seeded from
//! `s` and `k`), so any counterexample can be replayed from `--seed s` alone.

use quickcheck::Gen;

use crate::checks::{self, Violation};
use crate::driver;
use crate::gen::{self, LiveScenario};
use crate::scenario::Scenario;
use crate::trace::Run;

/// Generator size passed to quickcheck's `Gen`.
pub const GEN_SIZE: usize = 50;

/// Which scenario case `k` of a seed is: every fourth is a liveness case.
pub fn case(seed: u64, k: u64) -> (Scenario, bool) {
    let mut g = Gen::from_size_and_seed(GEN_SIZE, mix(seed, k));
    if k % 4 == 3 {
        (LiveScenario(gen::generate(&mut g, false)).full(), true)
    } else {
        (gen::generate(&mut g, true), false)
    }
}

/// Run a scenario and check everything (liveness too when `live`).
pub fn check(sc: &Scenario, live: bool) -> Vec<Violation> {
    check_run(sc, live).0
}

/// [`check`], also returning the run (for the coverage tally).
pub fn check_run(sc: &Scenario, live: bool) -> (Vec<Violation>, Run) {
    let run = driver::run(sc);
    let mut v = checks::check_all(sc, &run);
    if live {
        v.extend(
            checks::liveness_after_faults(sc, &run)
                .into_iter()
                .map(|message| Violation {
                    property: "liveness_after_faults",
                    message,
                }),
        );
    }
    (v, run)
}

/// Shrink a failing scenario greedily while it still breaks `property`.
pub fn shrink_failure(sc: &Scenario, live: bool, property: &str) -> Scenario {
    // A liveness case shrinks its prefix (the last three steps are the fixed tail).
    let (mut cur, tail) = if live {
        let mut prefix = sc.clone();
        let n = prefix.steps.len().saturating_sub(3);
        let tail = prefix.steps.split_off(n);
        (prefix, tail)
    } else {
        (sc.clone(), Vec::new())
    };
    let rebuild = |p: &Scenario| {
        if live {
            LiveScenario(p.clone()).full()
        } else {
            p.clone()
        }
    };
    let _ = tail;
    let fails = |p: &Scenario| {
        check(&rebuild(p), live)
            .iter()
            .any(|v| v.property == property)
    };
    let mut rounds = 0;
    'outer: while rounds < 1000 {
        rounds += 1;
        for cand in gen::shrink(&cur) {
            if fails(&cand) {
                cur = cand;
                continue 'outer;
            }
        }
        break;
    }
    rebuild(&cur)
}

/// The seed of case `k` of a run seeded `seed`: the `k`-th value of its SplitMix64 stream.
fn mix(seed: u64, k: u64) -> u64 {
    openmax_core::rng::SplitMix64::at(seed, k).next_u64()
}
