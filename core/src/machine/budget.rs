//! The token estimator behind `budget`, the compaction threshold and `schemas_over_budget`.
//!
//! There is one estimator, documented and defined in [`crate::compaction`]; this module
//! re-exports it under the names the machine has always used, so `machine::budget::*` and
//! `compaction::*` can never disagree. What the machine adds on top lives in
//! `machine::stream`: the [`Scale`] learned from the provider's reported prompt tokens after
//! every completed request, and the figures it emits.

pub use crate::compaction::{
    estimate_block, estimate_body, estimate_fixed, estimate_json, estimate_message,
    estimate_messages, estimate_request, estimate_schemas, estimate_text, Scale, BLOCK_OVERHEAD,
    MESSAGE_OVERHEAD,
};
