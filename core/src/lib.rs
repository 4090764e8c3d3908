//! openmax-core: pure, side-effect-free. The turn state machine, the wire types of
//! `openmax-stdio/6`, and the stream validator that is the contract's executable form.
//!
//! This crate must never touch a clock, a file, a socket, a process, an environment variable or a
//! random source, and never depends on anything async. Time comes in as [`time::Millis`] with
//! every mutating call; ids and jitter come from a seed given at construction. Bad input becomes
//! an event (`protocol_error`, `error`); a panic means a broken invariant.
//!
//! # What goes in
//!
//! One [`Input`] per [`Core::handle`] call:
//! - from the client: [`Input::Line`] (a raw stdin line; the core parses it), [`Input::Framing`]
//!   (a line the shell could not frame), [`Input::EndOfInput`];
//! - from the model: [`Input::Provider`] (one normalised [`provider::ProviderItem`] of a
//!   stream), [`Input::RequestFailed`] (no stream: unreachable, an HTTP status, a transport
//!   failure);
//! - answers to effects: [`Input::ToolPlanned`], [`Input::ToolDone`], [`Input::HookDone`],
//!   [`Input::Persisted`] / [`Input::PersistFailed`], [`Input::ModeSaved`] /
//!   [`Input::ModeSaveFailed`], [`Input::Frozen`];
//! - from the driver itself: [`Input::Timeout`] (a deadline of [`Core::poll_timeout`] is due)
//!   and [`Input::Crashed`] (the turn's task died).
//!
//! # What comes out
//!
//! [`Core::poll`] yields [`Output`]s until it returns `None`:
//! - [`Output::Event`]: a [`wire::Event`] for the client, written in order (the driver adds the
//!   session id with [`wire::Line`]);
//! - [`Output::Effect`]: an [`Effect`] for the driver: [`Effect::SendRequest`] /
//!   [`Effect::CancelRequest`], [`Effect::PlanTool`] / [`Effect::RunTool`] /
//!   [`Effect::CancelTool`], [`Effect::RunHook`], [`Effect::Persist`], [`Effect::SaveMode`],
//!   [`Effect::ApproveSource`], [`Effect::Refreeze`], [`Effect::Exit`]. Each answer comes back
//!   as an `Input` above.
//!
//! [`Core::poll_timeout`] names the one pending deadline and its [`TimerReason`]
//! (`RetryBackoff`, `StreamIdle`, `ApprovalTimeout`).
//!
//! # The states
//!
//! - The session: started by [`Core::new`] with a [`CoreConfig`] (the [`machine::Freeze`], the
//!   mode, limits, retry settings, the history of `--continue`); open while commands are
//!   accepted; draining after `quit` or end of input while the in-flight turn finishes; closed
//!   after [`Effect::Exit`] ([`Core::exit_code`] is then `Some`).
//! - The turn (at most one, [`Core::in_turn`]): idle; blocking prompt hooks; streaming an
//!   attempt; backing off before the next; persisting a reply or a cut-off partial; planning,
//!   approving and running each tool call and persisting its result; `turn_end` hooks and their
//!   refusals; compacting. Each transition is one match arm over the phase.
//!
//! # The drain loop
//!
//! ```text
//! loop {
//!     core.handle(now, next_input);          // exactly one mutation
//!     while let Some(out) = core.poll() {    // then a full drain
//!         match out {
//!             Output::Event(e) => write(e),
//!             Output::Effect(x) => carry_out(x), // its answer is a later Input
//!         }
//!     }
//!     next_input = first_of(client, model, effect answers, core.poll_timeout());
//! }
//! ```
//!
//! The full contract, with a runnable example, is in [`machine`]. The shell (`openmax-shell`)
//! and the simulator (`openmax-sim`) are two drivers of this one loop.
//!
//! # The rest of the crate
//!
//! [`wire`] (commands, events, the handshake lines), [`validate`] (the stream validator:
//! `openmax --check --stdio`), [`conversation`] (messages and the request body), [`compaction`]
//! (the token estimator and pruning), [`permissions`] (allow / ask / deny rules), [`record`]
//! (session record lines), [`provider`] (normalised provider items and failures), [`tool`]
//! (tool plans and outcomes), [`time`].

#![warn(missing_docs, unreachable_pub)]

pub mod compaction;
pub mod conversation;
pub mod machine;
pub mod permissions;
pub mod provider;
pub mod record;
pub mod time;
pub mod tool;
pub mod validate;
pub mod wire;

pub use machine::{
    Core, CoreConfig, Effect, FramingFault, Freeze, HookOutcome, HookSpec, Input, Limits, Output,
    RetrySettings, TimerReason,
};
pub use time::Millis;
