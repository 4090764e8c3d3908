//! Time as the core sees it: milliseconds on a monotonic axis chosen by the caller.
//!
//! The core never reads a clock. The shell maps `std::time::Instant` onto this axis (time since
//! process start); the simulator advances a virtual clock.

use serde::{Deserialize, Serialize};

/// A point in time, in milliseconds since an epoch the caller chose.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default, Serialize, Deserialize,
)]
pub struct Millis(pub u64);

impl Millis {
    /// The start of the session's clock.
    pub const ZERO: Millis = Millis(0);

    /// `self + ms`, saturating.
    pub fn plus(self, ms: u64) -> Millis {
        Millis(self.0.saturating_add(ms))
    }

    /// Milliseconds from `earlier` to `self`, zero if `earlier` is later.
    pub fn since(self, earlier: Millis) -> u64 {
        self.0.saturating_sub(earlier.0)
    }
}
