//! What a running turn carries beside its [`super::phase::Phase`]: the per-turn figures
//! ([`Turn`]), one attempt's stream ([`Attempt`]), a completed reply ([`Reply`]) and its calls.
//!
//! Invariants:
//! - A round's tool calls are started strictly in order, one at a time (hooks, `tool_start`,
//!   plan, gate, approval); once started, a call's run ([`Run`]) may overlap the runs of the
//!   calls after it only when it and they are `task` calls (up to `[tasks] max_parallel`; see
//!   `tasks.rs`), and the runs end in whatever order their results come.
//! - Every `tool_start` gets its `tool_end` before the turn's `done`, and every `tool_use` the
//!   model made gets a tool result in the conversation before the next request (a round cut
//!   short fills the rest with "not run").

use std::collections::{BTreeMap, BTreeSet};

use crate::conversation::ModelRequest;
use crate::provider::RequestId;
use crate::time::Millis;
use crate::wire::StopReason;

/// One attempt of a model request and what its stream brought so far.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Attempt {
    pub request: RequestId,
    pub attempt: u32,
    /// When the stream counts as stalled (reset by every item); `None` when disabled.
    pub idle_deadline: Option<Millis>,
    pub text: String,
    pub thinking: String,
    pub signature: Option<String>,
    /// Tool calls by the provider's index, in the provider's order.
    pub calls: BTreeMap<u32, PendingCall>,
    pub usage: Option<Usage>,
    /// Bytes of reply content so far: text plus tool calls' ids, names and arguments (the
    /// figure `max_reply_bytes` bounds).
    pub content_bytes: u64,
}

impl Attempt {
    pub(super) fn new(request: RequestId, attempt: u32, idle_deadline: Option<Millis>) -> Attempt {
        Attempt {
            request,
            attempt,
            idle_deadline,
            text: String::new(),
            thinking: String::new(),
            signature: None,
            calls: BTreeMap::new(),
            usage: None,
            content_bytes: 0,
        }
    }
}

/// A tool call being streamed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(super) struct PendingCall {
    pub id: String,
    pub name: String,
    pub args: String,
}

/// Token accounting of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Usage {
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    pub cached_tokens: Option<u64>,
}

/// A completed reply whose events wait for persistence.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Reply {
    pub text: String,
    pub finish_reason: String,
    pub usage: Option<Usage>,
    pub calls: Vec<Call>,
}

/// One tool call of a completed reply.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Call {
    pub id: String,
    pub name: String,
    /// The arguments object, or why they are not one.
    pub args: Result<serde_json::Map<String, serde_json::Value>, String>,
    /// A tool result for it is in the conversation.
    pub resolved: bool,
    /// Blocking `tool_start` hooks rewrote its arguments (`args` holds what runs): the
    /// harness note riding its result and the line on its approval card say so.
    pub rewrite: Option<String>,
    /// Its plan says running it may write the project (known once planned).
    pub writes: bool,
}

/// A call whose `RunTool` went out and whose `tool_end` has not yet.
#[derive(Debug, Clone, PartialEq)]
pub(super) struct Run {
    /// It may run beside other runs (a `task` call), and they beside it.
    pub beside: bool,
    pub state: RunState,
}

/// Where a [`Run`] is.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum RunState {
    /// The shell runs it; `cancelling` once its `CancelTool` went out.
    Running { cancelling: bool },
    /// Its result is in the conversation and being persisted under `ticket`; its `tool_end`
    /// (and the note riding it) goes out in the drain of that ack, whatever the round's phase
    /// is doing meanwhile.
    Persisting {
        ticket: u64,
        ok: bool,
        output: String,
        note: Option<String>,
    },
}

/// A child's approval forwarded to the client as one of this session's.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) struct Forwarded {
    /// The `task` call (index in the round) whose child asked.
    pub call: usize,
    /// The child's approval id.
    pub child_id: String,
}

/// What a running turn accumulates across its requests.
#[derive(Debug, Clone, Default, PartialEq)]
pub(super) struct Turn {
    /// Tool rounds completed in this turn.
    pub rounds: u32,
    /// Prompt plus completion tokens reported in this turn.
    pub tokens: u64,
    /// `turn_end` refusals honored in this turn.
    pub refusals: u32,
    /// The stop reason the turn will end with at the next safe point (a `cancel` that must
    /// wait for a tool or a persistence ack).
    pub ending: Option<StopReason>,
    /// The turn is being cancelled because the shutdown drain deadline passed, not by a
    /// `cancel` command (the calls it ends say so).
    pub shutdown: bool,
    /// The error a crash left to report while a record's persistence ack was in flight: the
    /// turn waits for that ack (so the record's own event, such as `message_done`, still goes
    /// out in its drain, and nothing is kept that the client was not told of), then ends with
    /// this `error` and `done error` (`ending` is `error` meanwhile).
    pub failure: Option<String>,
    /// The current round's calls and the index of the next one to start.
    pub round: Vec<Call>,
    pub next_call: usize,
    /// The round's calls whose `RunTool` went out and whose `tool_end` has not, by index in
    /// the round. Empty outside a tool round and whenever the turn ends.
    pub runs: BTreeMap<usize, Run>,
    /// Approvals the children of runs out asked for, forwarded to the client and not settled
    /// yet: this session's approval id → the call and the child's id (`forward.rs`).
    pub forwarded: BTreeMap<String, Forwarded>,
    /// Consecutive attempts of the current request that never reached the endpoint.
    pub unreachable: u32,
    /// The current request's body, re-sent on every attempt.
    pub body: Option<Box<ModelRequest>>,
    /// The unscaled estimate of that body (for the budget scale).
    pub body_estimate: u64,
    /// The index in the conversation of this turn's prompt: compaction never touches it or
    /// anything after it (shifted down when a compaction removes messages before it).
    pub start: usize,
    /// The current request was already compacted and re-sent once after the provider refused
    /// it as too long: a second refusal ends the turn.
    pub context_retried: bool,
    /// Persistence tickets of this turn nobody waits on; a failure of one fails the turn.
    pub background: BTreeSet<u64>,
    /// The turn's number in the session; 0 outside a turn.
    pub number: u64,
    /// The first line of the turn's prompt (for its checkpoint).
    pub prompt: String,
    /// The turn's `Before` checkpoint was asked for.
    pub checkpointed: bool,
}
