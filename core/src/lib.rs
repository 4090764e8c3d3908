//! openmax-core: pure, side-effect-free. The turn state machine, the wire types of
//! `openmax-stdio/6`, and the stream validator that is the contract's executable form.
//!
//! This crate must never touch a clock, a file, a socket, a process, an environment variable or a
//! random source, and never depends on anything async. Time comes in as [`Millis`] with every
//! mutating call; ids and jitter come from a seed given at construction ([`rng::SplitMix64`]).
//! Bad input becomes an event (`protocol_error`, `error`); a panic means a broken invariant.
//!
//! # What goes in
//!
//! One [`Input`] per [`Core::handle`] call:
//! - from the client: [`Input::Line`] (a raw stdin line; the core parses it), [`Input::Prompt`]
//!   (a prompt with images from an in-process frontend), [`Input::Framing`]
//!   (a line the shell could not frame, a [`FramingFault`]), [`Input::EndOfInput`];
//! - from the model: [`Input::Provider`] (one normalised [`provider::ProviderItem`] of a
//!   stream), [`Input::RequestFailed`] (no stream: unreachable, an HTTP status, a transport
//!   failure);
//! - answers to effects: [`Input::ToolPlanned`] and [`Input::ToolDone`], [`Input::HookDone`]
//!   (a [`HookOutcome`]), [`Input::Persisted`] / [`Input::PersistFailed`],
//!   [`Input::ModeSaved`] / [`Input::ModeSaveFailed`], [`Input::SourceApproved`] /
//!   [`Input::SourceApprovalFailed`], [`Input::Frozen`], [`Input::Checkpointed`];
//! - from a running `task` call's child session: [`Input::TaskApproval`] (it asked for an
//!   approval, a [`machine::ChildApproval`]) and [`Input::TaskApprovalSettled`] (it settled
//!   one itself first);
//! - from outside a call: [`Input::Notice`] (a tool source announced a change);
//! - from the person, not the wire: [`Input::Compact`] (compact now, the TUI's `/compact`);
//! - from the driver itself: [`Input::Timeout`] (a deadline of [`Core::poll_timeout`] is due)
//!   and [`Input::Crashed`] (the turn's task died).
//!
//! # What comes out
//!
//! [`Core::poll`] yields [`Output`]s until it returns `None`:
//! - [`Output::Event`]: an [`Event`] for the client, written in order (the driver adds the
//!   session id with [`wire::Line`]);
//! - [`Output::Effect`]: an [`Effect`] for the driver: [`Effect::SendRequest`] /
//!   [`Effect::CancelRequest`], [`Effect::PlanTool`] / [`Effect::RunTool`] /
//!   [`Effect::CancelTool`], [`Effect::AnswerTask`] (the answer to a child's approval),
//!   [`Effect::RunHook`], [`Effect::Persist`], [`Effect::SaveMode`],
//!   [`Effect::ApproveSource`], [`Effect::Refreeze`], [`Effect::Checkpoint`] (the project's
//!   files recorded for undo, before a turn's first write and as it ends: a
//!   [`CheckpointMoment`]), [`Effect::Exit`]. Every answer comes back as an `Input` above
//!   (`CancelRequest`, `CancelTool`, `AnswerTask` and `Exit` have none).
//!
//! [`Core::poll_timeout`] names the one pending deadline and its [`TimerReason`]:
//! [`TimerReason::RetryBackoff`], [`TimerReason::StreamIdle`],
//! [`TimerReason::ApprovalTimeout`], [`TimerReason::ShutdownDrain`].
//!
//! # The states
//!
//! Three families, each fact in one place (see [`machine`]):
//! - the session's lifecycle: starting (built by [`Core::new`] from a [`CoreConfig`]: the
//!   [`Freeze`] with its [`HookSpec`]s, the mode, [`Limits`], [`RetrySettings`], the history of
//!   `--continue`); open while commands are accepted; draining after `quit` or end of input
//!   (or a non-interactive session's first `done`) while the in-flight turn finishes, until
//!   its deadline; closed after [`Effect::Exit`], with [`Core::exit_code`];
//! - the command gate: client input held while the answer to an earlier `approval_mode`,
//!   `reload` or `approve` of external code is in flight, so commands are answered in the
//!   order they came;
//! - the turn's phase (at most one turn, [`Core::in_turn`]): idle; blocking hooks; streaming an
//!   attempt; backing off before the next; persisting a record the client waits on; planning,
//!   approving and running each tool call. Each transition is one match arm over the phase.
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
//! [`arguments`] (a call's arguments checked against its tool's schema), [`wire`] (commands, events with their [`wire::StopReason`], the handshake lines),
//! [`validate`] (the stream validator: `openmax --check --stdio`), [`conversation`] (messages
//! and the one shaping of a request), [`compaction`] (the token estimator and pruning),
//! [`permissions`] (allow / ask / deny rules), [`record`] (session record lines), [`provider`]
//! (normalised provider items and failures), [`tool`] (tool plans and outcomes), [`usage`]
//! (usage summed over a run and its cost), [`rng`] (the seeded PRNG), [`time`].

#![warn(missing_docs, unreachable_pub)]

pub mod arguments;
pub mod compaction;
pub mod conversation;
pub mod machine;
pub mod permissions;
pub mod provider;
pub mod record;
pub mod rng;
pub mod time;
pub mod tool;
pub mod usage;
pub mod validate;
pub mod wire;

pub use machine::{
    Core, CoreConfig, Effect, FramingFault, Freeze, HookEvent, HookOutcome, HookSource, HookSpec,
    Input, Limits, Output, RetrySettings, TimerReason,
};
pub use time::Millis;
pub use wire::Event;

#[cfg(test)]
mod tests {
    /// The variant names of `enum NAME` in `src` (the lines indented once inside it).
    fn variants(src: &str, name: &str) -> Vec<String> {
        let start = src
            .find(&format!("pub enum {name} {{"))
            .unwrap_or_else(|| panic!("no enum {name}"));
        src[start..]
            .lines()
            .skip(1)
            .take_while(|l| *l != "}")
            .filter_map(|l| {
                let l = l.strip_prefix("    ")?;
                let first = l.chars().next()?;
                first.is_ascii_uppercase().then(|| {
                    l.split(|c: char| !c.is_alphanumeric())
                        .next()
                        .unwrap_or("")
                        .to_string()
                })
            })
            .collect()
    }

    #[test]
    fn the_crate_doc_names_every_input_output_effect_and_timer() {
        let lib = include_str!("lib.rs");
        let interface = include_str!("machine/interface.rs");
        for name in ["Input", "Output", "Effect", "TimerReason"] {
            let vs = variants(interface, name);
            assert!(vs.len() >= 2, "{name}: {vs:?}");
            for v in vs {
                assert!(
                    lib.contains(&format!("[`{name}::{v}`]")),
                    "the crate doc does not name {name}::{v}"
                );
            }
        }
    }
}
