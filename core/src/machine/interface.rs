//! The core's inputs, outputs, effects, timers and configuration.

use serde::{Deserialize, Serialize};

use crate::conversation::{Message, ModelRequest, ToolSchema};
use crate::permissions::Permissions;
use crate::provider::{ProviderItem, RequestFailure, RequestId};
use crate::record::Record;
use crate::tool::{RunSandbox, ToolOutcome, ToolPlan};
use crate::wire::{ApprovalOutcome, ApprovalReason, Event, Mode};

/// A stdin framing fault the shell detected before the core could see a line.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FramingFault {
    /// The line was longer than [`crate::wire::MAX_LINE_BYTES`]; `len` bytes were skipped.
    TooLong {
        /// How many bytes were skipped.
        len: u64,
    },
    /// The line was not valid UTF-8.
    NotUtf8,
}

/// Everything that can happen to the core. Feed with [`super::Core::handle`].
#[derive(Debug, Clone, PartialEq)]
pub enum Input {
    /// One raw stdin line (without its newline). The core parses it.
    Line(String),
    /// A prompt with images from an in-process frontend (the terminal UI, ACP, `-p --image`):
    /// taken exactly like a `user` command with `text`, the images following the text in the
    /// prompt's message. (The `openmax-stdio/6` wire carries text only.)
    Prompt {
        /// The prompt's text.
        text: String,
        /// The images attached to it, in order.
        images: Vec<crate::conversation::Image>,
    },
    /// A line the shell could not frame.
    Framing(FramingFault),
    /// stdin reached EOF: behaves like `quit`.
    EndOfInput,
    /// An item of a model request's stream (attempt identifies which send it belongs to).
    Provider {
        /// The request the item belongs to.
        request: RequestId,
        /// The attempt of that request.
        attempt: u32,
        /// The item.
        item: ProviderItem,
    },
    /// A model request attempt failed before a stream started.
    RequestFailed {
        /// The request that failed.
        request: RequestId,
        /// The attempt of that request.
        attempt: u32,
        /// How it failed.
        failure: RequestFailure,
    },
    /// The shell inspected a tool call.
    ToolPlanned {
        /// The call inspected.
        call_id: String,
        /// What running it would do (boxed: the largest input by far).
        plan: Box<ToolPlan>,
    },
    /// A tool call finished (or was killed).
    ToolDone {
        /// The call that finished.
        call_id: String,
        /// Its result.
        outcome: ToolOutcome,
    },
    /// The child session of a running `task` call asked its client (this session's shell)
    /// for an approval: the core decides what it becomes here (`machine::forward`), and any
    /// answer goes back as [`Effect::AnswerTask`].
    TaskApproval {
        /// The `task` call whose child asked.
        call_id: String,
        /// The child's request (boxed: most inputs are small).
        request: Box<ChildApproval>,
    },
    /// The child of a running `task` call settled one of its approvals itself (its approval
    /// timeout, its own shutdown) before this session answered it.
    TaskApprovalSettled {
        /// The `task` call whose child settled it.
        call_id: String,
        /// The child's approval id.
        approval_id: String,
        /// The child's outcome.
        outcome: ApprovalOutcome,
    },
    /// A hook finished.
    HookDone {
        /// The run this answers.
        hook_run: u64,
        /// What the hook reported.
        outcome: HookOutcome,
    },
    /// Records of a [`Effect::Persist`] are on disk.
    Persisted {
        /// The ticket of the `Persist` effect.
        ticket: u64,
    },
    /// Records of a [`Effect::Persist`] could not be written.
    PersistFailed {
        /// The ticket of the `Persist` effect.
        ticket: u64,
        /// Why the write failed.
        message: String,
    },
    /// The approval mode was saved.
    ModeSaved {
        /// The mode now saved.
        mode: Mode,
    },
    /// The approval mode could not be saved (the mode stays as it was).
    ModeSaveFailed {
        /// The mode that was not saved.
        mode: Mode,
        /// Why.
        message: String,
    },
    /// The approval of a source's bytes is recorded, answering [`Effect::ApproveSource`].
    SourceApproved {
        /// The approval it records.
        approval_id: String,
    },
    /// The approval of a source's bytes could not be recorded, answering
    /// [`Effect::ApproveSource`]. The approved call still runs; the client is told that the
    /// next call of those bytes will ask again.
    SourceApprovalFailed {
        /// The approval it was to record.
        approval_id: String,
        /// Why the write failed.
        message: String,
    },
    /// A new freeze snapshot, answering [`Effect::Refreeze`].
    Frozen {
        /// The snapshot.
        snapshot: Box<Freeze>,
    },
    /// Something outside a call happened that the model and the client should know (an MCP
    /// server announced that its tools changed): a `harness_note` with an empty `call_id`,
    /// inserted into the model's transcript before its next prompt. Ignored once closed.
    Notice {
        /// The note's text.
        text: String,
    },
    /// The person asked for a compaction now (the TUI's `/compact`; not a wire command). Between
    /// turns it prunes the conversation, as a compaction forced by the estimate does, to the
    /// usual prune target or [`crate::compaction::TARGET_PERCENT`]% of the request's estimate
    /// now, whichever is lower, and answers with the `compacted` receipt (`compacted_messages`
    /// 0 when nothing was left to cut) once the compaction point is on disk (client input is
    /// held until then; a failed write changes nothing and is a `protocol_error`). During a
    /// turn it is refused with a `protocol_error`. Held, like a client's command, while a
    /// command's answer is awaited.
    Compact,
    /// The project's files were recorded for undo, answering [`Effect::Checkpoint`].
    Checkpointed {
        /// The turn the checkpoint belongs to.
        turn: u64,
        /// Which checkpoint of the turn.
        moment: CheckpointMoment,
        /// The checkpoint's id; `None` when none could be taken (`note` says why).
        id: Option<String>,
        /// What the human and the model should know: why no checkpoint was taken, or what a
        /// partial one left out.
        note: Option<String>,
    },
    /// The turn's task died unexpectedly (a bug or panic in the shell's effect runner):
    /// reported as `error` then `done` `error`.
    Crashed {
        /// What died, for the `error` line.
        message: String,
    },
    /// A deadline returned by [`super::Core::poll_timeout`] is due. Pass the current time as
    /// `now`: every timer whose deadline is at or before `now` fires; an early `Timeout` does
    /// nothing.
    Timeout,
}

impl Input {
    /// Whether the input comes from the client (a line, a framing fault, end of input): such
    /// input is held while a command's answer is awaited (see the drain contract).
    pub fn is_client(&self) -> bool {
        matches!(
            self,
            Input::Line(_)
                | Input::Prompt { .. }
                | Input::Framing(_)
                | Input::EndOfInput
                | Input::Compact
        )
    }
}

/// A child session's `approval_request`, as the runner of its `task` call read it: the
/// child's own fields, and the description of the task it runs.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChildApproval {
    /// The child's approval id (answered with [`Effect::AnswerTask`]).
    pub approval_id: String,
    /// The `task` call's description (the forwarded summary starts with it).
    pub description: String,
    /// The child's tool name, carried over.
    pub name: String,
    /// The child's summary (the forwarded one is the description, `: `, this).
    pub summary: String,
    /// The child's detail, carried over.
    pub detail: String,
    /// The child's reason, carried over.
    pub reason: ApprovalReason,
    /// The child's source path, carried over.
    pub source_path: String,
    /// The child's source sha, carried over.
    pub source_sha: String,
    /// The child's env names, carried over.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// What a hook run reported.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum HookOutcome {
    /// Ran and let the action proceed.
    Pass,
    /// Ran and refused (exit 2 with stderr, or `{"decision":"refuse"}`), with the reason.
    Refuse {
        /// The hook's reason.
        reason: String,
    },
    /// Did not run properly: crashed, timed out, could not start, not loaded.
    Failed {
        /// What went wrong.
        detail: String,
    },
    /// Ran and replaced the tool call's arguments (`{"decision":"rewrite","args":{…}}`), which
    /// only a blocking `tool_start` hook may do; the core checks them against the tool's schema.
    Rewrite {
        /// The arguments the call is to run with instead.
        args: serde_json::Value,
    },
}

/// One output of the core. Drain with [`super::Core::poll`] after every `handle`.
#[derive(Debug, Clone, PartialEq)]
pub enum Output {
    /// A line for the client (the shell adds the session id via [`crate::wire::Line`]).
    Event(Event),
    /// Work for the shell.
    Effect(Effect),
}

/// Work the shell carries out, answering with the matching [`Input`].
#[derive(Debug, Clone, PartialEq)]
pub enum Effect {
    /// Send one attempt of a model request. Answer with `Provider` items or `RequestFailed`.
    SendRequest {
        /// The request.
        request: RequestId,
        /// The attempt (1 for the first send).
        attempt: u32,
        /// The body, shaped by the core.
        body: Box<ModelRequest>,
    },
    /// Abort an in-flight request (cancel, idle timeout, turn end). No further input for it is
    /// expected; any that still arrives is ignored by the core.
    CancelRequest {
        /// The request to abort.
        request: RequestId,
    },
    /// Inspect a tool call before running it. Answer with `ToolPlanned`.
    PlanTool {
        /// The call to inspect.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The model's arguments.
        args: serde_json::Value,
    },
    /// Run a tool call. Answer with `ToolDone`.
    RunTool {
        /// The call to run.
        call_id: String,
        /// The tool's name.
        name: String,
        /// The model's arguments.
        args: serde_json::Value,
        /// The sandbox to run it in: the policy's decision, never read from `args`.
        sandbox: RunSandbox,
    },
    /// Kill a running tool (its whole process group). A `ToolDone` still follows.
    CancelTool {
        /// The call to kill.
        call_id: String,
    },
    /// Answer an approval the child of a running `task` call asked for (send it `approve`).
    /// No answer comes back.
    AnswerTask {
        /// The `task` call whose child asked.
        call_id: String,
        /// The child's approval id.
        approval_id: String,
        /// The answer.
        approved: bool,
    },
    /// Run a hook with a JSON payload. Answer with `HookDone`.
    RunHook {
        /// The run's id, echoed by `HookDone`.
        hook_run: u64,
        /// The hook's label.
        hook: String,
        /// The hook event it runs for.
        event: HookEvent,
        /// The JSON the hook reads on stdin.
        payload: serde_json::Value,
    },
    /// Append records to the session record. Answer with `Persisted` or `PersistFailed`.
    Persist {
        /// Echoed by `Persisted` or `PersistFailed`.
        ticket: u64,
        /// The records, in order.
        records: Vec<Record>,
    },
    /// Save the approval mode for the project. Answer with `ModeSaved` or `ModeSaveFailed`.
    SaveMode {
        /// The mode to save.
        mode: Mode,
    },
    /// Record a human's approval (over the wire) of a source's exact bytes. Answer with
    /// `SourceApproved` or `SourceApprovalFailed`; `approval_settled` waits for the answer.
    ApproveSource {
        /// The approval being recorded, echoed by the answer.
        approval_id: String,
        /// The approved file, as the request named it.
        source_path: String,
        /// The sha256 of the approved bytes.
        source_sha: String,
    },
    /// Re-read tools, skills, prompt and hooks. Answer with `Frozen`.
    Refreeze,
    /// Record the project's files for undo: before the first effect of a turn that may write
    /// the project (`Before`, emitted just ahead of that `RunTool` or `RunHook`), and when a
    /// turn that recorded one ends (`After`). The shell starts no later process of the turn
    /// before a `Before` checkpoint is complete. Answer with `Checkpointed`; nothing waits on
    /// the answer.
    Checkpoint {
        /// The session's turn number (1 for its first turn, counting on across `--continue`).
        turn: u64,
        /// Which checkpoint of the turn.
        moment: CheckpointMoment,
        /// The first line of the turn's prompt (at most 200 characters), for the undo list.
        prompt: String,
    },
    /// The session is over: flush stdout and exit with this code.
    Exit {
        /// The process exit code.
        code: i32,
    },
}

/// Which of a turn's two checkpoints an [`Effect::Checkpoint`] asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CheckpointMoment {
    /// Before the turn's first write: the state undo restores.
    Before,
    /// When the turn ended: the state the turn left, against which undo tells a human's later
    /// change apart from the turn's own.
    After,
}

/// Why a timer is set. Every timeout carries one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TimerReason {
    /// The backoff before the next attempt of a model request.
    RetryBackoff,
    /// The stream has been silent for `stream_idle_timeout_s`.
    StreamIdle,
    /// A pending approval reached `approval_timeout_s`.
    ApprovalTimeout,
    /// End of input came while a turn ran, and `drain_timeout_ms` has passed: the turn is
    /// cancelled so the session can exit.
    ShutdownDrain,
}

/// Retry and timeout settings (`[provider]` in config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetrySettings {
    /// Model-request attempt budget (first attempt included).
    pub max_attempts: u32,
    /// Exponential backoff base in ms (attempt n waits base * 2^(n-2), less jitter of up to
    /// 25%; see `machine::retry`).
    pub retry_base_ms: u64,
    /// The largest backoff, in ms.
    pub retry_max_ms: u64,
    /// A stream silent this long is treated as dropped; 0 disables.
    pub stream_idle_timeout_ms: u64,
}

impl Default for RetrySettings {
    fn default() -> Self {
        RetrySettings {
            max_attempts: 5,
            retry_base_ms: 200,
            retry_max_ms: 8_000,
            stream_idle_timeout_ms: 300_000,
        }
    }
}

/// Per-turn limits (`[limits]` in config).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Limits {
    /// Tool-call rounds per turn before `max_iterations`.
    pub max_iterations: u32,
    /// Per-turn token cap, 0 = none.
    pub max_agent_tokens: u64,
    /// Approval timeout in ms, 0 = wait until answered or cancelled.
    pub approval_timeout_ms: u64,
    /// Bytes of one reply's content kept: its text plus its tool calls' ids, names and
    /// arguments. Past it the reply ends `truncated` (what was kept is `message_done`).
    pub max_reply_bytes: u64,
    /// Bytes of one reply's thinking kept; past it the reply ends `truncated` likewise.
    pub max_thinking_bytes: u64,
    /// Tool calls in one reply; one more ends the reply `truncated`, running none of them.
    pub max_tool_calls: u32,
    /// How long the turn in flight at `quit`, end of input or the first signal may go on
    /// before it is cancelled (`done cancelled`) and the session exits; 0 cancels at once.
    pub drain_timeout_ms: u64,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            max_iterations: 50,
            max_agent_tokens: 0,
            approval_timeout_ms: 0,
            max_reply_bytes: 4 << 20,
            max_thinking_bytes: 4 << 20,
            max_tool_calls: 128,
            drain_timeout_ms: 10_000,
        }
    }
}

/// The moments a hook can run at (`[[hooks]] event`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookEvent {
    /// Once, when the session starts (observe only).
    SessionStart,
    /// Before a prompt enters the conversation; a blocking hook can refuse it (`blocked`).
    UserPromptSubmit,
    /// Before a tool call is inspected and run; a blocking hook can refuse the call or
    /// rewrite its arguments.
    ToolStart,
    /// After a tool call ended (observe only).
    ToolEnd,
    /// When the model ends its turn; a blocking hook can refuse and continue the turn.
    TurnEnd,
    /// After a compaction (observe only).
    Compacted,
}

impl HookEvent {
    /// Every event, in the order the docs list them.
    pub const ALL: [HookEvent; 6] = [
        HookEvent::SessionStart,
        HookEvent::UserPromptSubmit,
        HookEvent::ToolStart,
        HookEvent::ToolEnd,
        HookEvent::TurnEnd,
        HookEvent::Compacted,
    ];

    /// The config and wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            HookEvent::SessionStart => "session_start",
            HookEvent::UserPromptSubmit => "user_prompt_submit",
            HookEvent::ToolStart => "tool_start",
            HookEvent::ToolEnd => "tool_end",
            HookEvent::TurnEnd => "turn_end",
            HookEvent::Compacted => "compacted",
        }
    }

    /// Parse a config spelling.
    pub fn parse(s: &str) -> Option<HookEvent> {
        HookEvent::ALL.into_iter().find(|e| e.as_str() == s)
    }

    /// Whether the event concerns one tool call (so a hook of it may name the tools it is for).
    pub fn is_tool_event(self) -> bool {
        match self {
            HookEvent::ToolStart | HookEvent::ToolEnd => true,
            HookEvent::SessionStart
            | HookEvent::UserPromptSubmit
            | HookEvent::TurnEnd
            | HookEvent::Compacted => false,
        }
    }

    /// Whether a blocking hook of this event can refuse (and so is waited for).
    pub fn can_block(self) -> bool {
        match self {
            HookEvent::UserPromptSubmit | HookEvent::ToolStart | HookEvent::TurnEnd => true,
            HookEvent::SessionStart | HookEvent::ToolEnd | HookEvent::Compacted => false,
        }
    }
}

/// A hook as frozen (`[[hooks]]`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookSpec {
    /// A label for events (`hook_failed.hook`, `turn_refused.hook`): the command's first word.
    pub name: String,
    /// When it runs.
    pub event: HookEvent,
    /// Whether the action waits for it (and a refusal can stop it).
    pub blocking: bool,
    /// Set for a project hook: agent-writable code behind a human's approval. `None`: the
    /// user's own hook, which always runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<HookSource>,
    /// For a `tool_start` or `tool_end` hook: the tools it runs for, globs over the tool's
    /// name separated by `|` (`shell`, `mcp__github__*`, `write_file|edit_file`; `*` any run
    /// of characters, `?` one). `None`: every tool.
    #[serde(default, rename = "match", skip_serializing_if = "Option::is_none")]
    pub matcher: Option<String>,
}

impl HookSpec {
    /// Whether the hook runs for a call of `tool` (always, for an event that is not about a
    /// tool call).
    pub fn applies_to(&self, tool: Option<&str>) -> bool {
        match (&self.matcher, tool) {
            (Some(pattern), Some(name)) => pattern
                .split('|')
                .any(|p| crate::permissions::glob_match(p.trim(), name)),
            (Some(_), None) | (None, _) => true,
        }
    }
}

/// What the freeze found about a project hook's code. The core decides from it whether the
/// hook runs (the hook gate, in `machine::hooks`); the shell still re-hashes the files right before a run
/// and refuses bytes changed since the freeze, as it does for an external tool's source.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HookSource {
    /// The command as configured (shown when the hook is not run).
    pub command: Vec<String>,
    /// The project file a human approves it by (`openmax --approve PATH`).
    pub approve_path: String,
    /// Whether a human approved exactly this definition and these file bytes.
    pub approved: bool,
    /// Why a file the hook runs could not be read at the freeze, if one could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unreadable: Option<String>,
}

/// What the model sees, read once per session (and again on `reload`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Freeze {
    /// The system prompt.
    pub system: String,
    /// The tool schemas offered to the model.
    pub tools: Vec<ToolSchema>,
    /// The skill names.
    pub skills: Vec<String>,
    /// The hooks, with why any will not run.
    #[serde(default)]
    pub hooks: Vec<HookSpec>,
    /// The receipt of this refreeze (empty on the first freeze).
    #[serde(default)]
    pub changes: Vec<crate::wire::event::FreezeChange>,
    /// Manifest problems etc. to tell the model and client as harness notes.
    #[serde(default)]
    pub notes: Vec<String>,
    /// Whether the project is trusted now, when the shell read it with this snapshot (a
    /// refreeze: a project trusted since the session began runs turns from then on).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trusted: Option<bool>,
}

/// Everything the core is constructed with.
#[derive(Debug, Clone, PartialEq)]
pub struct CoreConfig {
    /// The session's id.
    pub session_id: String,
    /// Seeds ids and jitter.
    pub seed: u64,
    /// Whether the project is trusted (untrusted projects run no turns).
    pub trusted: bool,
    /// Started by an agent (`OPENMAX_AGENT_SESSION` set): cannot change the mode.
    pub agent_spawned: bool,
    /// The approval mode at start.
    pub mode: Mode,
    /// The permission rules.
    pub permissions: Permissions,
    /// Retry and timeout settings.
    pub retry: RetrySettings,
    /// Per-turn limits.
    pub limits: Limits,
    /// The model's context window in tokens.
    pub context_tokens: u64,
    /// The frozen prompt, tools, skills and hooks.
    pub freeze: Freeze,
    /// The conversation carried over by `--continue` (from the last compaction point on).
    pub history: Vec<Message>,
    /// `-p` mode: approval requests are declined at once (the shell prints why).
    pub non_interactive: bool,
    /// With `non_interactive`: the driver may send more commands after the first `done` (the
    /// one retry of `-p --output-schema`) and ends the input itself; the session does not end
    /// at the first `done`.
    pub driver_ends_input: bool,
    /// Whether turns that write are checkpointed for undo ([`Effect::Checkpoint`]).
    pub checkpoints: bool,
    /// Turns the session ran before this process (a `--continue`): the first turn here is
    /// numbered one more.
    pub turns_before: u64,
    /// `[tasks]` and this session's depth among subagents.
    pub tasks: super::TaskLimits,
    /// The tools a named agent's session may call (`None`: every frozen tool). A call of any
    /// other tool fails before it is planned further (see `machine/tasks.rs`).
    pub only_tools: Option<std::collections::BTreeSet<String>>,
}

impl CoreConfig {
    /// A configuration with defaults, for tests and the simulator.
    pub fn new(session_id: &str, freeze: Freeze) -> CoreConfig {
        CoreConfig {
            session_id: session_id.to_string(),
            seed: 0,
            trusted: true,
            agent_spawned: false,
            mode: Mode::Ask,
            permissions: Permissions::default(),
            retry: RetrySettings::default(),
            limits: Limits::default(),
            context_tokens: 200_000,
            freeze,
            history: Vec::new(),
            non_interactive: false,
            driver_ends_input: false,
            checkpoints: false,
            turns_before: 0,
            tasks: super::TaskLimits::default(),
            only_tools: None,
        }
    }
}
