//! The turn state machine: one way in ([`Core::handle`]), one way out ([`Core::poll`]), and
//! [`Core::poll_timeout`] for timers. Pure: no clock, no I/O, no randomness but the seed.
//!
//! Drain contract: after every `handle`, call `poll` until it returns `None`, carrying out each
//! effect (whose answer comes back later as another `Input`), and then ask `poll_timeout` when
//! to call `handle(now, Input::…)` next... (filled in with the implementation).

mod io;

pub use io::*;

use crate::time::Millis;

/// The core state machine. See the module docs for the drain contract.
#[derive(Debug)]
pub struct Core {
    config: CoreConfig,
    outputs: std::collections::VecDeque<Output>,
}

impl Core {
    /// A new core. Nothing is emitted until the first `handle`.
    pub fn new(config: CoreConfig) -> Core {
        Core {
            config,
            outputs: std::collections::VecDeque::new(),
        }
    }

    /// The session id every event line carries.
    pub fn session_id(&self) -> &str {
        &self.config.session_id
    }

    /// Feed one input.
    pub fn handle(&mut self, _now: Millis, _input: Input) {}

    /// The next output, or `None` when drained.
    pub fn poll(&mut self) -> Option<Output> {
        self.outputs.pop_front()
    }

    /// When the core next needs `handle(now, Input::…)` for a timer, and why.
    pub fn poll_timeout(&self) -> Option<(Millis, TimerReason)> {
        None
    }
}
