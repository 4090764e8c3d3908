//! Which sandbox a call runs in: a `shell` call asking to run outside the sandbox is run
//! unsandboxed only after a human approved a `gate` request that says so (`ask` mode, a human
//! present); `auto`, `readonly`, `-p`, agent-spawned sessions and deny rules refuse it, and a
//! declined, timed-out or cancelled request runs nothing. In `readonly` a call the shell can
//! confine read-only runs in the read-only sandbox instead of being refused.

use super::*;
use crate::tool::{PlanSandbox, RunSandbox};

const WHY: &str = "Install the toolchain into ~/.local, which the sandbox does not let me write.";

/// The plan of `shell` running `command`, asking for `sandbox`.
fn shell_plan(command: &str, sandbox: PlanSandbox) -> ToolPlan {
    ToolPlan {
        mutating: true,
        targets: vec![command.into()],
        summary: format!("shell: {command}"),
        detail: command.into(),
        source: None,
        invalid: None,
        sandbox,
        confirm: None,
    }
}

fn escalate(command: &str) -> ToolPlan {
    shell_plan(
        command,
        PlanSandbox::Escalate {
            justification: WHY.into(),
        },
    )
}

/// A turn up to the planning of one `shell` call (call id c1).
fn to_shell_planning(h: &mut H) {
    h.user("install it");
    h.tool_reply(
        "c1",
        "shell",
        r#"{"command":"make install","sandbox":"off","justification":"x"}"#,
    );
    assert_eq!(h.take(), s(&["budget", "tool_start c1 shell"]));
}

fn with_mode(mode: Mode) -> H {
    let mut c = config();
    c.mode = mode;
    H::with(c)
}

/// The sandbox of every `RunTool` so far.
fn runs(h: &H) -> Vec<RunSandbox> {
    h.effects
        .iter()
        .filter_map(|e| match e {
            Effect::RunTool { sandbox, .. } => Some(*sandbox),
            _ => None,
        })
        .collect()
}

/// The (summary, detail) of the last approval request.
fn card(h: &H) -> (String, String) {
    h.events
        .iter()
        .rev()
        .find_map(|e| match e {
            Event::ApprovalRequest {
                summary, detail, ..
            } => Some((summary.clone(), detail.clone())),
            _ => None,
        })
        .expect("an approval request")
}

/// The call was refused without asking and without running: a failed `tool_end` whose output
/// contains `why`, and a harness note telling the model what to do instead.
fn refused(h: &mut H, why: &str) {
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    let out = &h.messages("tool_end")[0];
    assert!(out.contains(why) && out.contains("not run"), "{out}");
    assert!(
        h.messages("harness_note")[0].contains("without \"sandbox\": \"off\""),
        "{:?}",
        h.messages("harness_note")
    );
    assert!(runs(h).is_empty());
    h.reply("ok");
}

#[test]
fn ask_mode_asks_a_human_saying_unsandboxed_and_runs_it_unsandboxed_once_approved() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    let (summary, detail) = card(&h);
    assert_eq!(summary, "UNSANDBOXED shell: make install");
    assert!(
        detail.starts_with("UNSANDBOXED: this command runs outside the sandbox")
            && detail.contains("no write or network limits")
            && detail.contains(&format!("The model's reason: {WHY}"))
            && detail.ends_with("\n\nmake install"),
        "{detail}"
    );
    assert!(runs(&h).is_empty());
    h.approve("a1", true);
    assert_eq!(h.take(), s(&["approval_settled a1 Approved"]));
    assert_eq!(runs(&h), [RunSandbox::Unsandboxed]);
    h.tool_done("c1", true, "installed");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
}

#[test]
fn a_declined_escalation_runs_nothing() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    h.approve("a1", false);
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Declined",
            "tool_end c1 false"
        ])
    );
    assert!(h.messages("tool_end")[0].contains("declined"));
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn a_timed_out_escalation_runs_nothing() {
    let mut c = config();
    c.limits.approval_timeout_ms = 1_000;
    let mut h = H::with(c);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    assert_eq!(h.fire_timer(), TimerReason::ApprovalTimeout);
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 TimedOut",
            "tool_end c1 false"
        ])
    );
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn a_cancelled_escalation_runs_nothing() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    h.cmd(json!({"cmd":"cancel"}));
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Cancelled",
            "tool_end c1 false",
            "done cancelled"
        ])
    );
    assert!(runs(&h).is_empty());
}

#[test]
fn an_escalation_pending_at_quit_is_declined() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    h.cmd(json!({"cmd":"quit"}));
    assert_eq!(
        h.take(),
        s(&[
            "approval_request a1 Gate",
            "approval_settled a1 Declined",
            "tool_end c1 false"
        ])
    );
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn auto_mode_never_escalates() {
    let mut h = with_mode(Mode::Auto);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    refused(&mut h, "in auto mode nothing runs outside the sandbox");
    assert!(h.messages("harness_note")[0].contains("switch to ask mode"));
}

#[test]
fn readonly_mode_never_escalates() {
    let mut h = with_mode(Mode::Readonly);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    refused(&mut h, "in readonly mode nothing runs outside the sandbox");
}

#[test]
fn a_non_interactive_run_refuses_an_escalation_without_asking() {
    let mut c = config();
    c.non_interactive = true;
    let mut h = H::with(c);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    refused(&mut h, "no human can approve that");
}

#[test]
fn an_agent_spawned_session_refuses_an_escalation_without_asking() {
    let mut c = config();
    c.agent_spawned = true;
    let mut h = H::with(c);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    refused(&mut h, "no human can approve that");
}

#[test]
fn deny_rules_still_refuse_an_escalation() {
    let mut c = config();
    c.permissions = Permissions {
        deny: vec![Rule::parse("shell(make install)").unwrap()],
        ask: vec![],
    };
    let mut h = H::with(c);
    to_shell_planning(&mut h);
    h.planned("c1", escalate("make install"));
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    assert_eq!(
        h.messages("tool_end")[0],
        "denied by rule shell(make install)"
    );
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn only_the_shell_tool_can_escalate() {
    let mut h = H::new();
    to_planning(&mut h);
    let mut p = plan(true);
    p.sandbox = PlanSandbox::Escalate {
        justification: WHY.into(),
    };
    h.planned("c1", p);
    refused(&mut h, "only the shell tool");
}

#[test]
fn the_justification_is_one_line_and_bounded_and_comes_after_the_warning() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    let forged = format!(
        "fine\n\nThis command is sandboxed and safe.\r\u{1b}[2K{}",
        "x".repeat(2_000)
    );
    h.planned(
        "c1",
        shell_plan(
            "make install",
            PlanSandbox::Escalate {
                justification: forged,
            },
        ),
    );
    let (summary, detail) = card(&h);
    assert!(summary.starts_with("UNSANDBOXED "), "{summary}");
    let lines: Vec<&str> = detail.lines().collect();
    assert!(lines[0].starts_with("UNSANDBOXED: "), "{detail}");
    assert!(
        lines[1].starts_with("The model's reason: fine This command is sandboxed and safe."),
        "{detail}"
    );
    assert!(!lines[1].contains('\u{1b}'), "{detail}");
    let why = lines[1].trim_start_matches("The model's reason: ");
    assert_eq!(
        why.chars().count(),
        crate::machine::approval::MAX_JUSTIFICATION_CHARS + 1,
        "{why}"
    );
    assert_eq!(lines[2..], ["", "make install"]);
    h.approve("a1", false);
    h.reply("ok");
}

#[test]
fn an_ordinary_gate_approval_never_runs_a_call_unsandboxed() {
    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("make install", PlanSandbox::Session));
    let (summary, _) = card(&h);
    assert!(!summary.contains("UNSANDBOXED"), "{summary}");
    h.approve("a1", true);
    assert_eq!(runs(&h), [RunSandbox::Session]);
    h.tool_done("c1", true, "ok");
    h.reply("ok");
}

#[test]
fn readonly_runs_a_read_only_capable_call_in_the_read_only_sandbox_without_asking() {
    let mut h = with_mode(Mode::Readonly);
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("ls", PlanSandbox::ReadOnlyCapable));
    assert_eq!(h.take(), Vec::<String>::new());
    assert_eq!(runs(&h), [RunSandbox::ReadOnly]);
    h.tool_done("c1", true, "a.rs");
    assert_eq!(h.take(), s(&["tool_end c1 true"]));
    h.reply("ok");
}

#[test]
fn readonly_asks_on_an_ask_rule_and_then_runs_read_only() {
    let mut c = config();
    c.mode = Mode::Readonly;
    c.permissions = Permissions {
        deny: vec![],
        ask: vec![Rule::parse("shell(cat *)").unwrap()],
    };
    let mut h = H::with(c);
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("cat a.rs", PlanSandbox::ReadOnlyCapable));
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    h.approve("a1", true);
    assert_eq!(runs(&h), [RunSandbox::ReadOnly]);
    h.tool_done("c1", true, "fn main() {}");
    h.reply("ok");
}

#[test]
fn readonly_still_refuses_a_mutating_call_that_cannot_run_read_only() {
    let mut h = with_mode(Mode::Readonly);
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("ls", PlanSandbox::Session));
    assert_eq!(h.take(), s(&["tool_end c1 false", "harness_note c1"]));
    assert!(h.messages("tool_end")[0].contains("readonly"));
    assert!(runs(&h).is_empty());
    h.reply("ok");
}

#[test]
fn ask_and_auto_run_a_read_only_capable_call_in_the_session_sandbox() {
    let mut h = with_mode(Mode::Auto);
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("ls", PlanSandbox::ReadOnlyCapable));
    assert_eq!(runs(&h), [RunSandbox::Session]);
    h.tool_done("c1", true, "a.rs");
    h.reply("ok");

    let mut h = H::new();
    to_shell_planning(&mut h);
    h.planned("c1", shell_plan("ls", PlanSandbox::ReadOnlyCapable));
    assert_eq!(h.take(), s(&["approval_request a1 Gate"]));
    h.approve("a1", true);
    assert_eq!(runs(&h), [RunSandbox::Session]);
    h.tool_done("c1", true, "a.rs");
    h.reply("ok");
}

/// The model's reason on an escalation card is cut only past its limit, and then says so.
#[test]
fn an_escalation_reason_is_cut_only_past_its_limit() {
    use crate::machine::approval::{escalation_card, MAX_JUSTIFICATION_CHARS};
    let card = |why: &str| escalation_card(&plan(false), why).1;
    let at_limit = "é".repeat(MAX_JUSTIFICATION_CHARS);
    assert!(card(&at_limit).contains(&format!("The model's reason: {at_limit}\n")));
    let over = "é".repeat(MAX_JUSTIFICATION_CHARS + 1);
    assert!(card(&over).contains(&format!("The model's reason: {at_limit}…\n")));
}
