//! Tool-call policy: from the shell's [`ToolPlan`], the mode and the permission rules, decide
//! whether a call is refused, asked about, or run, and in which sandbox. Pure; the turn machine
//! acts on the verdict.
//!
//! Order of the checks (first match wins):
//! 1. `plan.invalid` → refused with that message (nothing asked or run);
//! 2. a `deny` rule → refused in every mode, with a harness note;
//! 3. a call asking to run outside the sandbox ([`PlanSandbox::Escalate`]) → refused in `auto`
//!    (it never widens what the user configured), in `readonly`, when no human can answer (a
//!    `-p` run, an agent-spawned session) and for any tool but `shell`; otherwise, in `ask`, a
//!    `gate` request whose summary and detail say the command runs UNSANDBOXED and give the
//!    model's reason, asked even when the call would otherwise run without asking. Only its
//!    approval yields [`RunSandbox::Unsandboxed`];
//! 4. `readonly` and a mutating call → run in the read-only sandbox when the plan says it can
//!    ([`PlanSandbox::ReadOnlyCapable`], then only `ask` rules gate it), else refused without
//!    asking, with a harness note;
//! 5. external code whose exact bytes are not approved → in `auto` it runs (the contract: auto
//!    emits no approval requests); otherwise an `unapproved_source` request;
//! 6. `ask` (or `readonly`) with an `ask` rule match, or a plan asking to confirm something
//!    new ([`ToolPlan::confirm`]) not yet approved in this session, or `ask` with a mutating
//!    call → a `gate` request;
//! 7. otherwise the call runs.

use std::collections::BTreeSet;

use crate::permissions::{Permissions, SHELL_TOOL};
use crate::tool::{PlanSandbox, RunSandbox, SourceGate, ToolPlan, UNSANDBOXED_SUMMARY_PREFIX};
use crate::wire::{ApprovalReason, Mode};

/// What the policy says about one planned call.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(super) enum Verdict {
    /// Refuse the call: `output` is the failed `tool_end`'s output, `note` (if any) a harness
    /// note riding the tool result.
    Refuse {
        output: String,
        note: Option<String>,
    },
    /// Ask a human.
    Ask {
        reason: ApprovalReason,
        /// The source to record as approved when the human approves (unapproved_source only).
        source: Option<SourceGate>,
        /// The sandbox the call runs in once approved.
        sandbox: RunSandbox,
    },
    /// Run it, in this sandbox.
    Run(RunSandbox),
}

/// Decide about one call of `name` with this plan. `human` says whether a human can answer an
/// approval in this session (false for `-p` runs and agent-spawned sessions); `confirmed`
/// holds the [`ToolPlan::confirm`] keys a human approved earlier in the session.
pub(super) fn decide(
    mode: Mode,
    perms: &Permissions,
    human: bool,
    confirmed: &BTreeSet<String>,
    name: &str,
    plan: &ToolPlan,
) -> Verdict {
    if let Some(msg) = &plan.invalid {
        return Verdict::Refuse {
            output: msg.clone(),
            note: None,
        };
    }
    if let Some(rule) = perms.denied_by(name, &plan.targets) {
        return Verdict::Refuse {
            output: format!("denied by rule {rule}"),
            note: Some(format!(
                "openmax refused this {name} call: it matches the deny rule {rule} in the \
                 permissions config. Do not retry it; find another way or ask the user."
            )),
        };
    }
    if let PlanSandbox::Escalate { .. } = plan.sandbox {
        return escalation(mode, human, name);
    }
    let mut sandbox = RunSandbox::Session;
    if mode == Mode::Readonly && plan.mutating {
        if plan.sandbox == PlanSandbox::ReadOnlyCapable {
            sandbox = RunSandbox::ReadOnly;
        } else {
            return Verdict::Refuse {
                output: format!(
                    "refused: the approval mode is readonly and {name} would change the project"
                ),
                note: Some(format!(
                    "openmax refused this {name} call because the approval mode is readonly: \
                     mutating calls are not run. Ask the user to switch modes if the change is \
                     needed."
                )),
            };
        }
    }
    if let Some(gate) = &plan.source {
        if !gate.approved {
            return match mode {
                Mode::Auto => Verdict::Run(sandbox),
                Mode::Ask | Mode::Readonly => Verdict::Ask {
                    reason: ApprovalReason::UnapprovedSource,
                    source: Some(gate.clone()),
                    sandbox,
                },
            };
        }
    }
    // Read only where it can change the verdict: a shell line is analysed again for it.
    let ask_rule = || {
        perms.ask_by(name, &plan.targets).is_some()
            || plan
                .confirm
                .as_ref()
                .is_some_and(|k| !confirmed.contains(k))
    };
    let gated = match mode {
        Mode::Auto => false,
        Mode::Ask => plan.mutating || ask_rule(),
        Mode::Readonly => ask_rule(),
    };
    if gated {
        Verdict::Ask {
            reason: ApprovalReason::Gate,
            source: None,
            sandbox,
        }
    } else {
        Verdict::Run(sandbox)
    }
}

/// What this session does with an approval a subagent (the child of a `task` call) asked
/// for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Forward {
    /// Ask this session's client, as an approval of its own.
    Ask,
    /// Answer the child `approved: true` without asking.
    Approve,
    /// Answer the child `approved: false` without asking.
    Decline,
}

/// The rule for a child's request in this session's `mode`: the child runs as this session
/// would. `unapproved_source` is the human content boundary, answered only by this session's
/// client, in every mode (no code, this core included, approves external bytes). A `gate`
/// request is asked in `ask`, approved in `auto` (this session would run the call without
/// asking) and declined in `readonly` (this session would refuse a mutating call without
/// asking; a child asks only in a mode looser than this one, after a mode change while it
/// ran).
pub(super) fn forward(mode: Mode, reason: ApprovalReason) -> Forward {
    match (reason, mode) {
        (ApprovalReason::UnapprovedSource, _) | (ApprovalReason::Gate, Mode::Ask) => Forward::Ask,
        (ApprovalReason::Gate, Mode::Auto) => Forward::Approve,
        (ApprovalReason::Gate, Mode::Readonly) => Forward::Decline,
    }
}

/// A call that asks to run outside the sandbox (deny rules already checked).
fn escalation(mode: Mode, human: bool, name: &str) -> Verdict {
    let refuse = |output: String, advice: &str| Verdict::Refuse {
        note: Some(format!(
            "openmax did not run this {name} call: {output}. {advice}"
        )),
        output: format!("refused: {output}; the command was not run"),
    };
    let retry = "Run the command without \"sandbox\": \"off\" (it then runs inside the \
                 sandbox), or ask the user to run it themselves.";
    if name != SHELL_TOOL {
        return refuse(
            format!("only the shell tool can ask to run outside the sandbox, not {name}"),
            retry,
        );
    }
    match mode {
        Mode::Auto => refuse(
            "it asked to run outside the sandbox, and in auto mode nothing runs outside the \
             sandbox the user configured"
                .to_string(),
            "Run the command without \"sandbox\": \"off\" (it then runs inside the sandbox), or \
             ask the user to run it themselves or to switch to ask mode so a human can approve \
             it.",
        ),
        Mode::Readonly => refuse(
            "it asked to run outside the sandbox, and in readonly mode nothing runs outside the \
             sandbox"
                .to_string(),
            "Run the command without \"sandbox\": \"off\" (it then runs in a read-only \
             sandbox where possible), or ask the user to switch modes.",
        ),
        Mode::Ask if !human => refuse(
            "it asked to run outside the sandbox, and no human can approve that in this session \
             (a non-interactive run, or a session started by an agent)"
                .to_string(),
            retry,
        ),
        Mode::Ask => Verdict::Ask {
            reason: ApprovalReason::Gate,
            source: None,
            sandbox: RunSandbox::Unsandboxed,
        },
    }
}

/// Longest justification shown on an escalation card, in characters.
pub(super) const MAX_JUSTIFICATION_CHARS: usize = 500;

/// The summary and detail of the `gate` request for a call asking to run outside the sandbox:
/// written by the core, so no planner can leave the warning out. The summary starts with
/// `UNSANDBOXED`; the detail says what that means before the model's reason (one line, cut at
/// [`MAX_JUSTIFICATION_CHARS`]) and then the exact command.
pub(super) fn escalation_card(plan: &ToolPlan, justification: &str) -> (String, String) {
    let mut why: String = justification
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ")
        .chars()
        .filter(|c| !c.is_control())
        .collect();
    if why.chars().count() > MAX_JUSTIFICATION_CHARS {
        why = why.chars().take(MAX_JUSTIFICATION_CHARS).collect();
        why.push('…');
    }
    let summary = format!("{UNSANDBOXED_SUMMARY_PREFIX}{}", plan.summary);
    let detail = format!(
        "UNSANDBOXED: this command runs outside the sandbox, with no write or network limits \
         (it can change any file you can, $OPENMAX_HOME included, and reach any host). Secret \
         variables are still withheld from it.\n\
         The model's reason: {why}\n\
         \n\
         {}",
        plan.detail
    );
    (summary, detail)
}
