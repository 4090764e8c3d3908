//! A session's checkpoints, taken on a thread of their own so the event loop never waits on
//! the file system: jobs run in the order they were handed over, and each hands back a
//! completion the tools and hooks of the turn wait on before they start (so no process of a
//! turn runs before its `before` checkpoint is on disk). The answer to the core comes on the
//! runtime's input channel as `Input::Checkpointed`.
//!
//! A file tool about to write a path hands over a capture job first: when the turn's `before`
//! checkpoint lists that path only by name (the ignore rules exclude it), its bytes are added
//! to the checkpoint, and the turn's `after` checkpoint records it with its bytes too.

use std::collections::BTreeSet;
use std::sync::mpsc;
use std::thread::JoinHandle;

use futures::future::{FutureExt, Shared};
use openmax_core::machine::{CheckpointMoment, Input};
use tokio::sync::oneshot;

use super::{log, Project};
/// Where a checkpoint's answer to the core goes (the runtime's input channel).
pub type Answer = Box<dyn FnOnce(Input) + Send>;

/// The completion of the last job handed over: it resolves once that job (and every job
/// before it) is done, whatever its outcome.
pub type Done = Shared<oneshot::Receiver<()>>;

enum Job {
    Take {
        turn: u64,
        moment: CheckpointMoment,
        prompt: String,
        answer: Answer,
        done: oneshot::Sender<()>,
    },
    Capture {
        rel: String,
        done: oneshot::Sender<()>,
    },
}

/// The session's checkpoint thread.
pub struct Worker {
    tx: Option<mpsc::Sender<Job>>,
    thread: Option<JoinHandle<()>>,
    last: Option<Done>,
}

impl Worker {
    /// Start the thread for `session` in `project`.
    pub fn start(project: Project, session: String) -> std::io::Result<Worker> {
        let (tx, rx) = mpsc::channel::<Job>();
        let thread = std::thread::Builder::new()
            .name("checkpoints".into())
            .spawn(move || run(project, session, rx))?;
        Ok(Worker {
            tx: Some(tx),
            thread: Some(thread),
            last: None,
        })
    }

    fn hand(&mut self, job: Job, done: oneshot::Receiver<()>) {
        if let Some(tx) = &self.tx {
            // A dead thread drops the job and its sender: waiters see it done.
            let _ = tx.send(job);
        }
        self.last = Some(done.shared());
    }

    /// Hand over a checkpoint; its answer goes to `answer`.
    pub fn take(&mut self, turn: u64, moment: CheckpointMoment, prompt: String, answer: Answer) {
        let (done, rx) = oneshot::channel();
        self.hand(
            Job::Take {
                turn,
                moment,
                prompt,
                answer,
                done,
            },
            rx,
        );
    }

    /// Hand over a capture of `rel` (project-relative) before a file tool writes it; returns
    /// its completion.
    pub fn capture(&mut self, rel: String) -> Option<Done> {
        let (done, rx) = oneshot::channel();
        self.hand(Job::Capture { rel, done }, rx);
        self.barrier()
    }

    /// The completion of the last job handed over (`None`: none was).
    pub fn barrier(&self) -> Option<Done> {
        self.last.clone()
    }

    /// Wait until every job handed over is done.
    pub fn finish(&mut self) {
        self.tx = None;
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for Worker {
    fn drop(&mut self) {
        self.finish();
    }
}

fn run(project: Project, session: String, rx: mpsc::Receiver<Job>) {
    // The running turn's `before` checkpoint and the excluded paths captured into it.
    let mut current: Option<(u64, String)> = None;
    let mut captured: BTreeSet<String> = BTreeSet::new();
    for job in rx {
        match job {
            Job::Take {
                turn,
                moment,
                prompt,
                answer,
                done,
            } => {
                let (id, note) = match moment {
                    CheckpointMoment::Before => {
                        captured.clear();
                        match before(&project, &session, turn, &prompt) {
                            Ok((id, partial)) => {
                                current = Some((turn, id.clone()));
                                (Some(id), partial)
                            }
                            Err(e) => {
                                current = None;
                                (
                                    None,
                                    Some(format!(
                                        "no checkpoint was taken before turn {turn} wrote: {e}; \
                                         undo cannot restore this turn"
                                    )),
                                )
                            }
                        }
                    }
                    CheckpointMoment::After => {
                        let extra = std::mem::take(&mut captured);
                        match after(&project, &session, turn, &extra) {
                            Ok(id) => (Some(id), None),
                            Err(e) => (
                                None,
                                Some(format!(
                                    "the end of turn {turn} was not recorded: {e}; undo of it \
                                     cannot tell a later change of yours from the turn's"
                                )),
                            ),
                        }
                    }
                };
                answer(Input::Checkpointed {
                    turn,
                    moment,
                    id,
                    note,
                });
                let _ = done.send(());
            }
            Job::Capture { rel, done } => {
                if let Some((_, id)) = &current {
                    if let Ok(true) = project.capture(id, &rel) {
                        captured.insert(rel);
                    }
                }
                let _ = done.send(());
            }
        }
    }
}

fn before(
    p: &Project,
    session: &str,
    turn: u64,
    prompt: &str,
) -> std::io::Result<(String, Option<String>)> {
    let _lock = p.lock()?;
    let m = p.take_locked(session, turn, "before", &BTreeSet::new())?;
    log::append(
        &p.dir,
        session,
        log::Line::Before {
            turn,
            cp: m.id.clone(),
            prompt: prompt.to_string(),
            at_ms: m.at_ms,
        },
    )?;
    Ok((m.id.clone(), m.partial_note()))
}

fn after(
    p: &Project,
    session: &str,
    turn: u64,
    extra: &BTreeSet<String>,
) -> std::io::Result<String> {
    let _lock = p.lock()?;
    let m = p.take_locked(session, turn, "after", extra)?;
    log::append(
        &p.dir,
        session,
        log::Line::After {
            turn,
            cp: m.id.clone(),
            at_ms: m.at_ms,
        },
    )?;
    Ok(m.id)
}
