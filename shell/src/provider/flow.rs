//! Backpressure between a streaming provider and the runtime loop: a window of provider items
//! sent but not yet taken by the loop. A provider task that has filled the window waits before
//! reading the next body frame, so a server faster than the client (or than the core) is
//! slowed to the loop's pace instead of piling items up in memory; the socket's own flow
//! control then slows the server.
//!
//! Invariants: [`StreamFlow::sent`] is called once per item put on the channel, before it is
//! sent (so the loop's `taken` never finds it uncounted), and
//! [`StreamFlow::taken`] once per item the loop takes off it; a waiting task is woken by every
//! `taken`, re-checks, and never waits while the window has room. The count is shared by all
//! attempts (only one streams at a time; an aborted one's items are still taken, as stale).

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;

/// Items a provider may have in flight before it waits: enough to keep the loop busy (a frame
/// rarely carries more than a few dozen events), small enough that at 8 KiB deltas the window
/// holds at most 2 MiB.
pub const WINDOW_ITEMS: usize = 256;

/// The shared window (see the module docs).
#[derive(Debug, Default)]
pub struct StreamFlow {
    pending: AtomicUsize,
    room: Notify,
}

impl StreamFlow {
    /// An empty window.
    pub fn new() -> StreamFlow {
        StreamFlow::default()
    }

    /// One item was put on the channel.
    pub fn sent(&self) {
        self.pending.fetch_add(1, Ordering::AcqRel);
    }

    /// The loop took one provider item off the channel.
    pub fn taken(&self) {
        let _ = self
            .pending
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| n.checked_sub(1));
        self.room.notify_one();
    }

    /// Items sent and not yet taken.
    pub fn pending(&self) -> usize {
        self.pending.load(Ordering::Acquire)
    }

    /// Wait until the window has room.
    pub async fn wait_room(&self) {
        loop {
            let notified = self.room.notified();
            if self.pending() < WINDOW_ITEMS {
                return;
            }
            notified.await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[tokio::test]
    async fn a_full_window_waits_until_items_are_taken() {
        let flow = Arc::new(StreamFlow::new());
        for _ in 0..WINDOW_ITEMS {
            flow.sent();
        }
        let waiter = tokio::spawn({
            let flow = flow.clone();
            async move { flow.wait_room().await }
        });
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "a full window waits");
        flow.taken();
        tokio::time::timeout(std::time::Duration::from_secs(5), waiter)
            .await
            .expect("woken by taken")
            .unwrap();
        assert_eq!(flow.pending(), WINDOW_ITEMS - 1);
        flow.wait_room().await;
    }
}
