//! The session store under `$OPENMAX_HOME`: the per-project state files (trust, approval mode,
//! approved source hashes), the project's session index, one append-only record per session,
//! the owner lock, and resume for `--continue`. The on-disk format is documented in
//! `docs/sessions.md`.
//!
//! Modules: [`state`] (state root, project state, atomic writes), [`store`] (the session
//! writer), [`index`] (`sessions/index.json`), [`rebuild`] (the index
//! from the records), [`lock`] (single ownership), [`line`] (parsing
//! a record line), [`transcript`] (the bounded `transcript` line), [`resume`] (`--continue`).

pub mod images;
pub mod index;
#[cfg(test)]
mod index_tests;
pub mod index_write;
pub mod line;
pub mod list;
pub mod lock;
pub mod perms;
pub mod rebuild;
pub mod replay;
pub mod resume;
pub mod state;
pub mod store;
pub mod transcript;

pub use resume::{resume_id, resume_latest, ResumeError, Resumed};
pub use state::{shown, write_atomic, Home, ProjectState};
pub use store::{SessionWriter, StoreError};
