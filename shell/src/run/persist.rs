//! The session record's appends, off the event loop: one writer thread owns the
//! [`SessionWriter`] once the loop starts and performs each `Persist` (write, `fdatasync`) in
//! ticket order, answering `Persisted`/`PersistFailed` on the loop's input channel.
//!
//! Invariants:
//! - Appends reach the file in the order the core emitted them, one at a time; an answer is
//!   sent only after its records are durable (or have failed), so the contract's orderings
//!   ("persisted before the event") hold exactly as with inline writes: the core emits such an
//!   event only once it has the answer.
//! - The loop never waits on a flush: events that need no persistence go out while one runs.
//! - [`Persistence::finish`] (at exit) waits until every append handed over is done, so a
//!   clean exit loses nothing that a `Persist` asked for.
//! - Before [`Persistence::start`] (the handshake, settling a new session) appends run inline.

use std::sync::mpsc;
use std::thread::JoinHandle;

use openmax_core::machine::Input;
use openmax_core::record::Record;

use super::input::InputTx;
use crate::session::SessionWriter;

/// One append handed to the writer thread.
struct Job {
    ticket: u64,
    records: Vec<Record>,
    /// When the core asked for the append: a turn's end counts as the session's last use
    /// from then, however long the writer takes (the core's `done` does not wait for it).
    at_ms: u64,
}

/// Where appends go: the writer itself, or its thread.
enum Place {
    Inline(Box<SessionWriter>),
    Thread {
        jobs: mpsc::Sender<Job>,
        handle: JoinHandle<()>,
    },
    /// Between taking the writer and handing it on, or after [`Persistence::finish`].
    Gone,
}

/// The session record's writer, inline or on its thread.
pub struct Persistence {
    place: Place,
}

/// The answer to one append.
fn answer(ticket: u64, result: std::io::Result<()>) -> Input {
    match result {
        Ok(()) => Input::Persisted { ticket },
        Err(e) => Input::PersistFailed {
            ticket,
            message: e.to_string(),
        },
    }
}

impl Persistence {
    /// Appends run inline until [`Persistence::start`].
    pub fn new(writer: SessionWriter) -> Persistence {
        Persistence {
            place: Place::Inline(Box::new(writer)),
        }
    }

    /// Make a session created unsettled durable and findable (inline only; once the thread
    /// runs, its first append settles the session itself).
    pub fn settle(&mut self) -> std::io::Result<()> {
        match &mut self.place {
            Place::Inline(w) => w.settle(),
            Place::Thread { .. } | Place::Gone => Ok(()),
        }
    }

    /// Move the writer to its thread; answers go to `answers` from now on.
    pub fn start(&mut self, answers: InputTx) -> std::io::Result<()> {
        let Place::Inline(mut writer) = std::mem::replace(&mut self.place, Place::Gone) else {
            return Ok(());
        };
        let (jobs, rx) = mpsc::channel::<Job>();
        let handle = std::thread::Builder::new()
            .name("openmax-session-writer".into())
            .spawn(move || {
                for job in rx {
                    let result = writer.append_at(&job.records, job.at_ms);
                    // The loop may have exited already (after its last effect); the record
                    // is written either way.
                    let _ = answers.send(answer(job.ticket, result));
                }
            })?;
        self.place = Place::Thread { jobs, handle };
        Ok(())
    }

    /// Append `records` as `ticket`. Inline, the answer is returned; on the thread it comes on
    /// the answer channel and this returns `None`.
    pub fn append(&mut self, ticket: u64, records: Vec<Record>) -> Option<Input> {
        let at_ms = crate::session::state::now_ms();
        match &mut self.place {
            Place::Inline(w) => Some(answer(ticket, w.append_at(&records, at_ms))),
            Place::Thread { jobs, .. } => match jobs.send(Job {
                ticket,
                records,
                at_ms,
            }) {
                Ok(()) => None,
                Err(_) => Some(Input::PersistFailed {
                    ticket,
                    message: "the session writer thread has stopped".into(),
                }),
            },
            Place::Gone => Some(Input::PersistFailed {
                ticket,
                message: "the session record is closed".into(),
            }),
        }
    }

    /// Wait until every append handed over is on disk (or failed); later appends fail.
    pub fn finish(&mut self) {
        if let Place::Thread { jobs, handle } = std::mem::replace(&mut self.place, Place::Gone) {
            drop(jobs);
            let _ = handle.join();
        }
    }
}

impl Drop for Persistence {
    fn drop(&mut self) {
        self.finish();
    }
}
