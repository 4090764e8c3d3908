//! Snapshot tests of the approval card on ratatui's test backend at 20, 40, 80 and 200
//! columns: every env name (one of 40 characters) and the `openmax --approve` command appear
//! whole, a row broken at the width never loses a character, and nothing is drawn past the
//! width.

use openmax_core::wire::ApprovalReason;
use ratatui::backend::TestBackend;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::Terminal;

use super::card::{approve_command, lines, ApprovalCard, VALUE};
use super::theme::Theme;

const ENV: [&str; 6] = [
    "HOME",
    "GITHUB_TOKEN",
    "AWS_SECRET_ACCESS_KEY",
    "OPENAI_API_KEY",
    "DATABASE_URL_WITH_PASSWORD",
    // 40 characters.
    "A_VERY_LONG_CREDENTIAL_VARIABLE_NAME_40C",
];

fn card(reason: ApprovalReason) -> ApprovalCard {
    ApprovalCard {
        approval_id: "ap1".into(),
        name: "deploy".into(),
        summary: "deploy the site to production".into(),
        detail: "runs ./scripts/deploy.sh with the listed variables".into(),
        reason,
        source_path: ".openmax/tools/deploy.json".into(),
        source_sha: "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08".into(),
        env: ENV.iter().map(|s| s.to_string()).collect(),
        answered: None,
        outcome: None,
    }
}

/// Draw the card on a test terminal `width` wide; the screen's rows as text.
fn snapshot(card: &ApprovalCard, width: u16) -> Vec<String> {
    let rows = lines(card, width as usize, Theme { color: true });
    let height = rows.len() as u16;
    let mut term = Terminal::new(TestBackend::new(width, height)).unwrap();
    term.draw(|f| Paragraph::new(rows).render(f.area(), f.buffer_mut()))
        .unwrap();
    let buf = term.backend().buffer().clone();
    (0..height)
        .map(|y| {
            (0..width)
                .map(|x| buf[(x, y)].symbol().to_string())
                .collect::<String>()
        })
        .collect()
}

/// The text `s` appears whole: on one row where it fits, else on consecutive rows that each
/// carry one piece after the same indent, with nothing lost between them.
fn appears_whole(screen: &[String], s: &str, width: usize) {
    let indent = VALUE;
    if indent.len() + s.len() <= width {
        assert!(
            screen
                .iter()
                .any(|r| r.trim_end() == format!("{indent}{s}")),
            "{s} not on one row at {width}:\n{}",
            screen.join("\n")
        );
        return;
    }
    let joined: String = screen
        .iter()
        .filter_map(|r| r.strip_prefix(indent))
        .collect::<Vec<_>>()
        .join("");
    assert!(
        joined.contains(s),
        "{s} not whole at {width}:\n{}",
        screen.join("\n")
    );
    // Every piece is a full row but the last: nothing elided.
    let pieces: Vec<&String> = screen
        .iter()
        .filter(|r| {
            let t = r.trim();
            !t.is_empty() && s.contains(t)
        })
        .collect();
    assert!(
        pieces.len() >= s.len().div_ceil(width - indent.len()),
        "{pieces:?}"
    );
}

#[test]
fn env_names_whole_at_every_width() {
    for width in [20u16, 40, 80, 200] {
        let screen = snapshot(&card(ApprovalReason::Gate), width);
        for name in ENV {
            appears_whole(&screen, name, width as usize);
        }
        assert!(!screen.join("").contains('…'), "nothing elided at {width}");
        assert!(screen.iter().any(|r| r.contains("y approve")), "{screen:?}");
    }
}

#[test]
fn approve_command_whole_at_every_width() {
    let c = card(ApprovalReason::UnapprovedSource);
    let cmd = approve_command(&c.source_path);
    assert_eq!(cmd, "openmax --approve .openmax/tools/deploy.json");
    for width in [20u16, 40, 80, 200] {
        let screen = snapshot(&c, width);
        appears_whole(&screen, &cmd, width as usize);
        appears_whole(&screen, &c.source_sha, width as usize);
        for name in ENV {
            appears_whole(&screen, name, width as usize);
        }
    }
}

#[test]
fn card_at_80_columns() {
    let screen = snapshot(&card(ApprovalReason::UnapprovedSource), 80);
    let text: Vec<&str> = screen.iter().map(|r| r.trim_end()).collect();
    assert_eq!(
        text,
        [
            "▌ run unapproved code? deploy",
            "  deploy the site to production",
            "  runs ./scripts/deploy.sh with the listed variables",
            "  reason: no human approved this source's exact bytes",
            "  source:",
            "  .openmax/tools/deploy.json",
            "  sha256:",
            "  9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08",
            "  to approve it for every session, run:",
            "  openmax --approve .openmax/tools/deploy.json",
            "  env: it receives 6 variables:",
            "  HOME",
            "  GITHUB_TOKEN",
            "  AWS_SECRET_ACCESS_KEY",
            "  OPENAI_API_KEY",
            "  DATABASE_URL_WITH_PASSWORD",
            "  A_VERY_LONG_CREDENTIAL_VARIABLE_NAME_40C",
            "  y approve · n decline",
        ]
    );
}

fn unsandboxed_card() -> ApprovalCard {
    let cmd = "curl -fsSL https://example.com/install.sh | sh && make install PREFIX=$HOME/.local";
    ApprovalCard {
        approval_id: "ap2".into(),
        name: "shell".into(),
        summary: format!("UNSANDBOXED shell: {cmd}"),
        detail: format!(
            "UNSANDBOXED: this command runs outside the sandbox, with no write or network \
             limits.\nThe model's reason: it installs the toolchain.\n\n{cmd}"
        ),
        reason: ApprovalReason::Gate,
        source_path: String::new(),
        source_sha: String::new(),
        env: Vec::new(),
        answered: None,
        outcome: None,
    }
}

/// A request to run a command outside the sandbox says UNSANDBOXED whole in its summary and in
/// its answer keys (the last row) at every width, and its title and reason say it too; an
/// ordinary gate does not.
#[test]
fn an_unsandboxed_run_says_so_at_every_width() {
    let c = unsandboxed_card();
    for width in [14u16, 20, 40, 80, 200] {
        let screen = snapshot(&c, width);
        let rows: Vec<&str> = screen.iter().map(|r| r.trim()).collect();
        let whole = rows.iter().filter(|r| r.contains("UNSANDBOXED")).count();
        assert!(whole >= 3, "at {width}:\n{}", screen.join("\n"));
        let foot_start = rows
            .iter()
            .rposition(|r| r.starts_with("y approve"))
            .unwrap_or_else(|| panic!("no keys at {width}:\n{}", screen.join("\n")));
        assert!(
            rows[foot_start..].iter().any(|r| r.contains("UNSANDBOXED")),
            "the keys do not say it at {width}:\n{}",
            screen.join("\n")
        );
    }
    let screen = snapshot(&c, 80);
    assert_eq!(screen[0].trim_end(), "▌ run OUTSIDE the sandbox? shell");
    assert!(
        screen
            .iter()
            .any(|r| r.trim()
                == "reason: it asks to run UNSANDBOXED, with no write or network limits")
    );
    assert!(screen
        .last()
        .unwrap()
        .trim()
        .starts_with("y approve UNSANDBOXED run"));
    let plain = snapshot(&card(ApprovalReason::Gate), 80);
    assert!(!plain.join("\n").contains("UNSANDBOXED"));
    assert!(!plain.join("\n").contains("OUTSIDE"));
}
