//! The approval card: what a person reads before granting a call. Name, summary, detail and
//! reason; for an `unapproved_source` request the source path, its sha256 and the exact
//! `openmax --approve <source_path>` command; the `env` names, when present, as their own
//! block with one name per row, broken across rows at a narrow width but never cut, elided
//! or folded into the detail (they are a credential grant). A `gate` request to run a command
//! outside the sandbox (its summary starts with `UNSANDBOXED`) says so in its title, its
//! reason and its answer keys, the card's last row, which a short terminal keeps when it has
//! to drop the top of the card. The card stays on screen until `approval_settled` and then
//! shows the outcome.

use openmax_core::tool::UNSANDBOXED_SUMMARY_PREFIX;
use openmax_core::wire::{ApprovalOutcome, ApprovalReason};
use ratatui::text::{Line, Span};

use super::theme::Theme;
use super::wrap::{hard_wrap, wrap, wrap_text};

/// One `approval_request` and what became of it.
#[derive(Debug, Clone, PartialEq)]
pub struct ApprovalCard {
    pub approval_id: String,
    pub name: String,
    pub summary: String,
    pub detail: String,
    pub reason: ApprovalReason,
    pub source_path: String,
    pub source_sha: String,
    pub env: Vec<String>,
    /// The person's answer, sent and not yet settled.
    pub answered: Option<bool>,
    /// The `approval_settled` outcome.
    pub outcome: Option<ApprovalOutcome>,
}

/// The indent of a value that must be read whole (a path, a digest, the command, an env name):
/// short, so a 22-character name still fits a 24-column terminal on one row.
pub const VALUE: &str = "  ";

/// The command that approves a source for good.
pub fn approve_command(source_path: &str) -> String {
    format!("openmax --approve {source_path}")
}

/// Whether the card asks to run a command outside the sandbox.
pub fn unsandboxed(card: &ApprovalCard) -> bool {
    card.reason == ApprovalReason::Gate && card.summary.starts_with(UNSANDBOXED_SUMMARY_PREFIX)
}

/// The start-up question of an untrusted folder: what trusting it means and the answer keys.
pub fn trust_lines(project: &str, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut rows = Vec::new();
    rows.extend(wrap(
        &[("trust this folder?".to_string(), theme.card())],
        width,
        Span::styled("▌ ", theme.card()),
        Span::styled("▌ ", theme.card()),
    ));
    rows.extend(hard_wrap(project, theme.bold(), width, VALUE));
    rows.extend(wrap_text(
        "openmax runs tools in a folder only once you trust it (as openmax --trust records); \
         the project's own MCP servers, tools and hooks still ask before they run",
        theme.plain(),
        width,
        "  ",
    ));
    rows.extend(wrap_text(
        "y trust · n not now (nothing runs)",
        theme.card(),
        width,
        "  ",
    ));
    rows
}

/// The card's rows at `width` columns.
pub fn lines(card: &ApprovalCard, width: usize, theme: Theme) -> Vec<Line<'static>> {
    lines_as(card, width, theme, false)
}

/// The card's rows with its detail replaced by a one-row pointer to the whole card printed
/// above, for a card taller than the screen: everything that is granted (the source, its
/// digest, the `--approve` command, the env names) and the answer keys stay in the live region.
pub fn compact_lines(card: &ApprovalCard, width: usize, theme: Theme) -> Vec<Line<'static>> {
    lines_as(card, width, theme, true)
}

fn lines_as(card: &ApprovalCard, width: usize, theme: Theme, compact: bool) -> Vec<Line<'static>> {
    let mut rows = Vec::new();
    let outside = unsandboxed(card);
    let title = match card.reason {
        ApprovalReason::Gate if outside => "run OUTSIDE the sandbox?",
        ApprovalReason::Gate => "approve this call?",
        ApprovalReason::UnapprovedSource => "run unapproved code?",
    };
    rows.extend(wrap(
        &[
            (title.to_string(), theme.card()),
            (" ".into(), theme.plain()),
            (card.name.clone(), theme.tool()),
        ],
        width,
        Span::styled("▌ ", theme.card()),
        Span::styled("▌ ", theme.card()),
    ));
    if !card.summary.is_empty() {
        rows.extend(wrap_text(&card.summary, theme.bold(), width, "  "));
    }
    if !card.detail.is_empty() {
        let detail = wrap_text(card.detail.trim_end(), theme.dim(), width, "  ");
        if compact {
            let n = detail.len();
            rows.extend(wrap_text(
                &format!(
                    "detail: {n} row{}, printed whole above (scroll up to read it)",
                    if n == 1 { "" } else { "s" }
                ),
                theme.warn(),
                width,
                "  ",
            ));
        } else {
            rows.extend(detail);
        }
    }
    let reason = match card.reason {
        ApprovalReason::Gate if outside => {
            "reason: it asks to run UNSANDBOXED, with no write or network limits"
        }
        ApprovalReason::Gate => "reason: the project's mode asks before this call",
        ApprovalReason::UnapprovedSource => "reason: no human approved this source's exact bytes",
    };
    rows.extend(wrap_text(reason, theme.plain(), width, "  "));
    if card.reason == ApprovalReason::UnapprovedSource {
        rows.extend(wrap_text("source:", theme.plain(), width, "  "));
        rows.extend(hard_wrap(&card.source_path, theme.bold(), width, VALUE));
        rows.extend(wrap_text("sha256:", theme.plain(), width, "  "));
        rows.extend(hard_wrap(&card.source_sha, theme.dim(), width, VALUE));
        rows.extend(wrap_text(
            "to approve it for every session, run:",
            theme.plain(),
            width,
            "  ",
        ));
        rows.extend(hard_wrap(
            &approve_command(&card.source_path),
            theme.code(),
            width,
            VALUE,
        ));
    }
    if !card.env.is_empty() {
        let n = card.env.len();
        let head = format!(
            "env: it receives {n} variable{}:",
            if n == 1 { "" } else { "s" }
        );
        rows.extend(wrap_text(&head, theme.warn(), width, "  "));
        for name in &card.env {
            rows.extend(hard_wrap(name, theme.bold(), width, VALUE));
        }
    }
    let foot = match (card.outcome, card.answered) {
        (Some(ApprovalOutcome::Approved), _) => ("approved".to_string(), theme.ok()),
        (Some(ApprovalOutcome::Declined), _) => ("declined".to_string(), theme.error()),
        (Some(ApprovalOutcome::TimedOut), _) => ("timed out".to_string(), theme.error()),
        (Some(ApprovalOutcome::Cancelled), _) => ("cancelled".to_string(), theme.error()),
        (None, Some(true)) => ("approving…".to_string(), theme.dim()),
        (None, Some(false)) => ("declining…".to_string(), theme.dim()),
        (None, None) if outside => (
            "y approve UNSANDBOXED run · n decline".to_string(),
            theme.warn(),
        ),
        (None, None) => ("y approve · n decline".to_string(), theme.card()),
    };
    rows.extend(wrap_text(&foot.0, foot.1, width, "  "));
    rows
}
