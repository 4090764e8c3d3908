//! The one-shot commands that run no session: `--check --stdio` ([`check`]) and
//! `--spec stdio` ([`spec`]). (`--trust` and `--approve` need the project state and live in
//! [`crate::app`].)

pub mod check;
pub mod spec;
