//! Tool-call policy: from the shell's [`ToolPlan`], the mode and the permission rules, decide
//! whether a call is refused, asked about, or run. Pure; the turn machine acts on the verdict.
//!
//! Order of the checks (first match wins):
//! 1. `plan.invalid` → refused with that message (nothing asked or run);
//! 2. a `deny` rule → refused in every mode, with a harness note;
//! 3. `readonly` and a mutating call → refused without asking, with a harness note;
//! 4. external code whose exact bytes are not approved → in `auto` it runs (the contract: auto
//!    emits no approval requests); otherwise an `unapproved_source` request;
//! 5. `ask` (or `readonly`) with an `ask` rule match, or `ask` with a mutating call → a `gate`
//!    request;
//! 6. otherwise the call runs.

use crate::permissions::Permissions;
use crate::tool::{SourceGate, ToolPlan};
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
    },
    /// Run it.
    Run,
}

/// Decide about one call of `name` with this plan.
pub(super) fn decide(mode: Mode, perms: &Permissions, name: &str, plan: &ToolPlan) -> Verdict {
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
    if mode == Mode::Readonly && plan.mutating {
        return Verdict::Refuse {
            output: format!(
                "refused: the approval mode is readonly and {name} would change the project"
            ),
            note: Some(format!(
                "openmax refused this {name} call because the approval mode is readonly: \
                 mutating calls are not run. Ask the user to switch modes if the change is needed."
            )),
        };
    }
    if let Some(gate) = &plan.source {
        if !gate.approved {
            return match mode {
                Mode::Auto => Verdict::Run,
                Mode::Ask | Mode::Readonly => Verdict::Ask {
                    reason: ApprovalReason::UnapprovedSource,
                    source: Some(gate.clone()),
                },
            };
        }
    }
    let ask_rule = perms.ask_by(name, &plan.targets).is_some();
    let gated = match mode {
        Mode::Auto => false,
        Mode::Ask => plan.mutating || ask_rule,
        Mode::Readonly => ask_rule,
    };
    if gated {
        Verdict::Ask {
            reason: ApprovalReason::Gate,
            source: None,
        }
    } else {
        Verdict::Run
    }
}
