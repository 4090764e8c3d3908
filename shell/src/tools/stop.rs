//! [`Stop`]: how a built-in tool running on a blocking thread learns that its call was
//! cancelled or ran out of time, and how a mutating tool makes its change all-or-nothing with
//! respect to that.
//!
//! Invariants:
//! - The state moves once, from running to stopped or to committed, never back; whichever of
//!   [`Stop::stop`] and [`Stop::commit`] comes first wins.
//! - A tool polls [`Stop::is_set`] between bounded steps of its work and winds down when it is
//!   set; a mutating tool calls [`Stop::commit`] right before the one step that makes its change
//!   visible (the rename), and undoes its preparations instead when that returns false.
//! - So when [`Stop::stop`] returns true, the call's change has not been made and never will be;
//!   when it returns false, the change is being made and the outcome is worth waiting for.
//! - [`Stop::interrupted`] is set by every [`Stop::stop`], committed or not: work past its
//!   commit point that waits on someone else (a client's answer to a write through its files)
//!   stops waiting and reports that the outcome is unknown, so waiting for it never hangs.

use std::sync::atomic::{AtomicBool, AtomicU8, Ordering};

const RUNNING: u8 = 0;
const STOPPED: u8 = 1;
const COMMITTED: u8 = 2;

/// The stop flag and commit point of one tool call.
#[derive(Debug, Default)]
pub struct Stop {
    state: AtomicU8,
    interrupted: AtomicBool,
    /// The work is waiting for the client's answer to a file request (see
    /// [`crate::tools::client_files`]), so a time limit names the client as the cause.
    client_wait: AtomicBool,
}

impl Stop {
    /// A call that is running.
    pub fn new() -> Stop {
        Stop::default()
    }

    /// Whether the call was told to stop (the work should wind down).
    pub fn is_set(&self) -> bool {
        self.state.load(Ordering::Acquire) == STOPPED
    }

    /// Tell the call to stop. True when it stopped before committing (nothing was changed and
    /// nothing will be); false when it had already committed its change.
    pub fn stop(&self) -> bool {
        self.interrupted.store(true, Ordering::Release);
        match self
            .state
            .compare_exchange(RUNNING, STOPPED, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => true,
            Err(now) => now == STOPPED,
        }
    }

    /// Whether [`Stop::stop`] was called, also after the commit point: committed work that
    /// waits on someone else gives up waiting.
    pub fn interrupted(&self) -> bool {
        self.interrupted.load(Ordering::Acquire)
    }

    /// Mark the work as waiting (or no longer waiting) for the client's answer.
    pub fn set_client_wait(&self, waiting: bool) {
        self.client_wait.store(waiting, Ordering::Release);
    }

    /// Whether the work is waiting for the client's answer now.
    pub fn client_wait(&self) -> bool {
        self.client_wait.load(Ordering::Acquire)
    }

    /// Claim the commit point. True when the call may make its change; false when it was
    /// stopped first (it must undo its preparations and change nothing).
    pub fn commit(&self) -> bool {
        self.state
            .compare_exchange(RUNNING, COMMITTED, Ordering::AcqRel, Ordering::Acquire)
            .is_ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_first_of_stop_and_commit_wins() {
        let s = Stop::new();
        assert!(!s.is_set());
        assert!(s.stop());
        assert!(s.is_set());
        assert!(!s.commit(), "a stopped call never commits");
        assert!(s.stop(), "stopping again still says nothing was changed");

        let c = Stop::new();
        assert!(c.commit());
        assert!(!c.interrupted());
        assert!(!c.stop(), "a committed call is not reported as stopped");
        assert!(!c.is_set(), "the committed work is not told to wind down");
        assert!(
            c.interrupted(),
            "but work waiting on someone else stops waiting"
        );
        assert!(!c.commit(), "the commit point is claimed once");
    }

    #[test]
    fn racing_threads_agree_on_one_winner() {
        for _ in 0..200 {
            let s = std::sync::Arc::new(Stop::new());
            let s2 = std::sync::Arc::clone(&s);
            let t = std::thread::spawn(move || s2.commit());
            let stopped = s.stop();
            let committed = t.join().unwrap();
            assert_ne!(stopped, committed);
        }
    }
}
