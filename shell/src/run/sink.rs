//! The runtime's one output: a consumer of the core's events. Each frontend (the `--stdio`
//! writer, the `-p` renderer, the terminal UI, the ACP adapter) implements it; the runtime
//! knows no frontend, only this.

use openmax_core::wire::Event;

/// A consumer of the core's events.
pub trait Sink {
    /// One event, in emission order.
    fn event(&mut self, event: Event);
    /// The core went quiet (or [`Sink::buffered_bytes`] grew large): make everything written
    /// so far visible.
    fn flush(&mut self);
    /// Bytes of events written but not yet flushed.
    fn buffered_bytes(&self) -> usize {
        0
    }
    /// Whether the client is gone: a write failed because it closed its end (EPIPE). The
    /// runtime then ends input as at EOF: the turn drains, approvals are declined, it exits.
    fn client_gone(&self) -> bool {
        false
    }
}
