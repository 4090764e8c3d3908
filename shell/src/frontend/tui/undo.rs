//! `/undo` in the terminal UI: the request the view hands to the UI thread ([`UndoAsk`]), the
//! card listing what the undo will change ([`UndoCard`], answered `y`/`n` like an approval),
//! and its rows. The view stays pure: the UI thread plans and performs the undo
//! ([`crate::checkpoint::undo`]) and gives the view the card, then the report; the core is told
//! through a note, as after `openmax undo`.
//!
//! `/undo` goes back before the session's last change, `/undo N` before its turn N, `/undo
//! list` lists them, `--force` also restores paths someone changed since.

use ratatui::text::{Line, Span};

use super::theme::Theme;
use super::wrap::{wrap, wrap_text};
use crate::checkpoint::undo::Plan;

/// What the view asks the UI thread to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum UndoAsk {
    /// Plan the undo and show its card.
    Preview { turn: Option<u64>, force: bool },
    /// Do the undo the card showed (planned again, under the lock).
    Apply { turn: Option<u64>, force: bool },
    /// List the session's checkpoints.
    List,
}

/// `/undo` arguments: ``, `N`, `--turn N`, `--force`, `list`.
pub fn parse(args: &[&str]) -> Result<UndoAsk, String> {
    let mut turn = None;
    let mut force = false;
    let mut it = args.iter();
    while let Some(a) = it.next() {
        match *a {
            "list" | "--list" if args.len() == 1 => return Ok(UndoAsk::List),
            "--force" => force = true,
            "--turn" => {
                turn = Some(number(it.next().copied().unwrap_or(""))?);
            }
            n if turn.is_none() && n.parse::<u64>().is_ok() => turn = Some(number(n)?),
            other => {
                return Err(format!(
                    "usage: /undo [N|list] [--force] (unexpected {other:?}): /undo N goes back \
                     before turn N, --force also restores files changed since by someone else"
                ))
            }
        }
    }
    Ok(UndoAsk::Preview { turn, force })
}

fn number(s: &str) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|n| *n > 0)
        .ok_or_else(|| format!("/undo: {s:?} is not a turn number"))
}

/// The card of an undo waiting for `y` or `n`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UndoCard {
    pub turn: Option<u64>,
    pub force: bool,
    /// `undo turn 3?`
    pub title: String,
    /// One row per path and note.
    pub rows: Vec<String>,
    /// `y` was pressed and the undo runs.
    pub answered: bool,
}

impl UndoCard {
    /// The card for `plan`.
    pub fn of(plan: &Plan, turn: Option<u64>, force: bool) -> UndoCard {
        let mut rows: Vec<String> = plan
            .steps
            .iter()
            .map(|s| format!("{:<9} {}", s.verb(), s.path))
            .collect();
        if rows.is_empty() {
            rows.push("nothing changes".into());
        }
        for (p, why) in &plan.kept {
            rows.push(format!("kept      {p} ({why}; /undo --force restores it)"));
        }
        for (p, why) in &plan.lost {
            rows.push(format!("cannot    {p} ({why})"));
        }
        if let Some(h) = &plan.head {
            rows.push(h.clone());
        }
        for n in &plan.notes {
            rows.push(format!("note: {n}"));
        }
        UndoCard {
            turn,
            force,
            title: format!(
                "undo {}? the files go back to before turn {}",
                plan.what, plan.to_turn
            ),
            rows,
            answered: false,
        }
    }
}

/// The card's rows at `width` columns.
pub fn lines(card: &UndoCard, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut out = wrap(
        &[(card.title.clone(), theme.card())],
        width,
        Span::styled("▌ ", theme.card()),
        Span::styled("▌ ", theme.card()),
    );
    for r in &card.rows {
        let style = if r.starts_with("kept") || r.starts_with("cannot") || r.starts_with("HEAD") {
            theme.warn()
        } else {
            theme.plain()
        };
        out.extend(wrap_text(r, style, width, "  "));
    }
    let foot = if card.answered {
        ("undoing…", theme.dim())
    } else {
        ("y undo · n keep everything as it is", theme.card())
    };
    out.extend(wrap_text(foot.0, foot.1, width, "  "));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments() {
        let p = |a: &[&str]| parse(a);
        assert_eq!(
            p(&[]),
            Ok(UndoAsk::Preview {
                turn: None,
                force: false
            })
        );
        assert_eq!(
            p(&["2", "--force"]),
            Ok(UndoAsk::Preview {
                turn: Some(2),
                force: true
            })
        );
        assert_eq!(
            p(&["--turn", "3"]),
            Ok(UndoAsk::Preview {
                turn: Some(3),
                force: false
            })
        );
        assert_eq!(p(&["list"]), Ok(UndoAsk::List));
        assert!(p(&["0"]).is_err());
        assert!(p(&["--turn"]).is_err());
        assert!(p(&["everything"]).unwrap_err().contains("/undo N"));
    }
}
