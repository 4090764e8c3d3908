//! The live region under the scrollback: what is still changing (thinking, the streaming
//! reply, running tools, pending approval cards, a retry being waited out), then the prompt
//! and the status line. [`live`] lays it out for a width and a height: the pending cards, the
//! prompt and the status line are kept whole; the streaming part gives way from its top (it
//! goes to the scrollback whole when it finishes).

use openmax_core::wire::Mode;
use ratatui::text::{Line, Span};

use super::blocks::tool_header;
use super::card;
use super::markdown;
use super::theme::Theme;
use super::view::{Question, View};
use super::wrap::{width, wrap_text};

const SPINNER: [&str; 8] = ["⠋", "⠙", "⠹", "⠸", "⠼", "⠴", "⠦", "⠧"];

/// The laid-out live region.
#[derive(Debug, Clone, PartialEq)]
pub struct Live {
    pub rows: Vec<Line<'static>>,
    /// The cursor (column, row) within `rows`.
    pub cursor: (u16, u16),
    /// Pending cards too tall for the screen, drawn compact here: the screen prints each one
    /// whole into the scrollback (once) so it can be read there.
    pub spill: Vec<String>,
}

/// A running task's line: its description, how long it has run, its child's tool calls.
fn task_line(p: &crate::tasks::progress::Progress) -> String {
    format!(
        "subagent: {} · {}s · {} tool call{} so far",
        p.description,
        p.elapsed.as_secs(),
        p.tool_calls,
        if p.tool_calls == 1 { "" } else { "s" }
    )
}

/// Lay out the live region of `view` at time `now` for `cols` × at most `max_rows`.
pub fn live(view: &View, now: u64, cols: usize, max_rows: usize, theme: Theme) -> Live {
    let cols = cols.max(1);
    let mut flow: Vec<Line<'static>> = Vec::new();
    if !view.thinking.trim().is_empty() {
        let t = wrap_text(view.thinking.trim(), theme.dim(), cols, "");
        let skip = t.len().saturating_sub(3);
        flow.extend(t.into_iter().skip(skip));
    }
    if !view.reply.is_empty() {
        flow.extend(markdown::render(&view.reply, cols, theme));
        // The blank row the finished reply ends with: the reply's rows stay put when it ends.
        flow.push(Line::default());
    }
    for t in view.tools.values() {
        flow.extend(tool_header(t, cols, theme));
        let status = match view.tasks.running(&t.call_id) {
            Some(p) => task_line(&p),
            None => "running…".to_string(),
        };
        flow.extend(wrap_text(&status, theme.dim(), cols, "  "));
    }
    let mut fixed: Vec<Line<'static>> = Vec::new();
    let mut spill = Vec::new();
    let cards: Vec<Vec<Line<'static>>> = view
        .approvals
        .iter()
        .map(|c| card::lines(c, cols, theme))
        .collect();
    // The rule, one prompt row and the status line are always there.
    let tall = cards.iter().map(Vec::len).sum::<usize>() + 3 > max_rows;
    for (c, rows) in view.approvals.iter().zip(cards) {
        if tall {
            spill.push(c.approval_id.clone());
            fixed.extend(card::compact_lines(c, cols, theme));
        } else {
            fixed.extend(rows);
        }
    }
    if let Some(card) = &view.undo {
        fixed.extend(super::undo::lines(card, cols, theme));
    }
    if let Some(r) = &view.retry {
        let secs = now.saturating_sub(r.since) / 1000;
        fixed.extend(wrap_text(
            &format!(
                "waiting to retry (attempt {}/{}): {} · {secs}s",
                r.attempt, r.max_attempts, r.reason
            ),
            theme.warn(),
            cols,
            "",
        ));
    }
    if let Some(q) = view.questions.first() {
        let rows = match q {
            Question::Trust { project } => card::trust_lines(project, cols, theme),
            Question::Source { card: c, .. } => card::lines(c, cols, theme),
        };
        fixed.extend(rows);
        let more = view.questions.len() - 1;
        if more > 0 {
            fixed.extend(wrap_text(
                &format!(
                    "{more} more question{} after this one",
                    if more == 1 { "" } else { "s" }
                ),
                theme.dim(),
                cols,
                "  ",
            ));
        }
    }
    let menu = view.menu();
    if !menu.is_empty() && view.picker.is_none() {
        let at = view.menu_at.min(menu.len() - 1);
        for (i, c) in menu.iter().enumerate() {
            let (mark, style) = if i == at {
                ("› ", theme.bold())
            } else {
                ("  ", theme.plain())
            };
            let name = if c.args.is_empty() {
                format!("/{}", c.name)
            } else {
                format!("/{} {}", c.name, c.args)
            };
            let line = format!("{name:<28} {}", c.help);
            let text: String = line.chars().take(cols.saturating_sub(2)).collect();
            fixed.push(Line::from(vec![
                Span::styled(mark, theme.user()),
                Span::styled(text, style),
            ]));
        }
    }
    if let Some(p) = &view.picker {
        fixed.extend(wrap_text(
            "resume which session? (Up/Down, Enter resumes, Esc closes)",
            theme.bold(),
            cols,
            "",
        ));
        // The highlighted line stays in view in a short window.
        let window = max_rows.saturating_sub(fixed.len() + 4).clamp(1, 10);
        let first = p.at.saturating_sub(window - 1);
        for (i, (_, label)) in p.items.iter().enumerate().skip(first).take(window) {
            let (mark, style) = if i == p.at {
                ("› ", theme.bold())
            } else {
                ("  ", theme.plain())
            };
            let text: String = label.chars().take(cols.saturating_sub(2)).collect();
            fixed.push(Line::from(vec![
                Span::styled(mark, theme.user()),
                Span::styled(text, style),
            ]));
        }
    }
    fixed.push(Line::styled("─".repeat(cols), theme.dim()));
    let (input, cursor) = prompt_rows(view, cols, theme);
    let input_at = fixed.len();
    fixed.extend(input);
    if let Some(h) = &view.hint {
        fixed.extend(wrap_text(h, theme.warn(), cols, ""));
    }
    fixed.push(status_row(view, now, cols, theme));

    let room = max_rows.saturating_sub(fixed.len());
    let skip = flow.len().saturating_sub(room);
    let mut rows: Vec<Line<'static>> = flow.into_iter().skip(skip).collect();
    let top = rows.len();
    rows.extend(fixed);
    let mut cursor_row = top + input_at + cursor.1;
    // Still too tall (a tiny terminal): keep the bottom, where the prompt is.
    if rows.len() > max_rows {
        let cut = rows.len() - max_rows;
        rows.drain(..cut);
        cursor_row = cursor_row.saturating_sub(cut);
    }
    Live {
        rows,
        cursor: (cursor.0 as u16, cursor_row as u16),
        spill,
    }
}

/// The prompt's rows and the cursor (column, row) in them. Text is broken by character so the
/// cursor arithmetic is exact.
fn prompt_rows(view: &View, cols: usize, theme: Theme) -> (Vec<Line<'static>>, (usize, usize)) {
    let text = view.editor.text();
    let at = view.editor.cursor();
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut cur = vec![Span::styled("› ", theme.user())];
    let mut chunk = String::new();
    let mut col = 2usize;
    let mut cursor = (2usize, 0usize);
    let prefix = 2usize;
    for (i, c) in text.chars().enumerate() {
        if i == at {
            cursor = (col, rows.len());
        }
        if c == '\n' {
            cur.push(Span::raw(std::mem::take(&mut chunk)));
            rows.push(Line::from(std::mem::take(&mut cur)));
            cur.push(Span::raw("  "));
            col = prefix;
            continue;
        }
        let c = if c.is_control() { '?' } else { c };
        let w = width(c.encode_utf8(&mut [0u8; 4]));
        if col + w > cols && col > prefix {
            cur.push(Span::raw(std::mem::take(&mut chunk)));
            rows.push(Line::from(std::mem::take(&mut cur)));
            cur.push(Span::raw("  "));
            col = prefix;
            if i == at {
                cursor = (col, rows.len());
            }
        }
        chunk.push(c);
        col += w;
    }
    if at >= text.chars().count() {
        if col >= cols {
            cur.push(Span::raw(std::mem::take(&mut chunk)));
            rows.push(Line::from(std::mem::take(&mut cur)));
            cur.push(Span::raw("  "));
            col = prefix;
        }
        cursor = (col, rows.len());
    }
    if text.is_empty() {
        let hint = if view.running.is_some() {
            "Esc to cancel"
        } else {
            "type a prompt · /help"
        };
        cur.push(Span::styled(hint, theme.dim()));
    } else {
        cur.push(Span::raw(chunk));
    }
    rows.push(Line::from(cur));
    (rows, cursor)
}

fn status_row(view: &View, now: u64, cols: usize, theme: Theme) -> Line<'static> {
    let s = &view.status;
    let mut parts = vec![s.model.clone()];
    parts.push(match s.mode {
        Some(Mode::Auto) => "auto".into(),
        Some(Mode::Ask) => "ask".into(),
        Some(Mode::Readonly) => "readonly".into(),
        None => "?".into(),
    });
    if let Some((used, ctx)) = s.budget {
        parts.push(format!("ctx {used}/{ctx}"));
    }
    let t = s.totals;
    if t.requests > 0 {
        let mut u = format!("session in {} out {}", t.prompt_tokens, t.completion_tokens);
        if let Some(c) = t.cached_tokens.filter(|c| *c > 0) {
            u.push_str(&format!(" cached {c}"));
        }
        if let Some(cost) = s.cost() {
            u.push_str(&format!(" {}", super::view::usd(cost)));
        }
        parts.push(u);
    }

    if let Some(since) = view.running {
        let el = now.saturating_sub(since);
        let frame = SPINNER[((el / 100) % SPINNER.len() as u64) as usize];
        parts.push(format!("{frame} working {}s", el / 1000));
    }
    let mut text = parts.join(" · ");
    // The status line is one row: cut at the width (it holds no grant, only figures).
    if width(&text) > cols {
        text = text
            .chars()
            .take(cols.saturating_sub(1))
            .collect::<String>()
            + "…";
    }
    Line::styled(text, theme.status())
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::wire::{ApprovalReason, Event};

    fn text(l: &Line) -> String {
        l.spans.iter().map(|s| s.content.as_ref()).collect()
    }

    #[test]
    fn the_status_line_shows_the_session_cost_only_when_prices_are_set() {
        let usage = |p, c, cached| Event::Usage {
            prompt_tokens: p,
            completion_tokens: c,
            cached_tokens: cached,
        };
        let mut v = View::new("m", Mode::Ask, vec![]);
        let plain = Theme { color: false };
        assert_eq!(text(&status_row(&v, 0, 200, plain)), "m · ask");
        v.event(0, usage(1_000_000, 100_000, Some(400_000)));
        v.event(0, usage(1_000_000, 100_000, None));
        assert_eq!(
            text(&status_row(&v, 0, 200, plain)),
            "m · ask · session in 2000000 out 200000 cached 400000"
        );
        // $3 in, $15 out, $0.30 cached in per million: 1.6 M fresh × 3 + 0.4 M × 0.3 +
        // 0.2 M × 15 = 4.8 + 0.12 + 3.
        v.status.prices = Some(openmax_core::usage::Prices {
            input: 3.0,
            output: 15.0,
            cached_input: Some(0.3),
        });
        assert_eq!(
            text(&status_row(&v, 0, 200, plain)),
            "m · ask · session in 2000000 out 200000 cached 400000 $7.92"
        );
        let mut small = View::new("m", Mode::Ask, vec![]);
        small.status.prices = v.status.prices;
        small.event(0, usage(1000, 10, None));
        assert!(text(&status_row(&small, 0, 200, plain)).ends_with(" $0.0032"));
    }

    #[test]
    fn a_pending_card_and_the_prompt_stay_whole_under_a_tall_reply() {
        let mut v = View::new("m", Mode::Ask, vec![]);
        v.event(
            0,
            Event::Token {
                text: "word ".repeat(2000),
            },
        );
        v.event(
            0,
            Event::ApprovalRequest {
                approval_id: "a".into(),
                name: "deploy".into(),
                summary: String::new(),
                detail: String::new(),
                reason: ApprovalReason::Gate,
                source_path: String::new(),
                source_sha: String::new(),
                env: vec!["SECRET_ONE".into(), "SECRET_TWO".into()],
            },
        );
        // The reply of a following stream.
        v.event(
            0,
            Event::Token {
                text: "word ".repeat(2000),
            },
        );
        let l = live(&v, 0, 24, 20, Theme { color: false });
        assert_eq!(l.rows.len(), 20);
        let rows: Vec<String> = l.rows.iter().map(text).collect();
        assert!(rows.iter().any(|r| r.trim() == "SECRET_ONE"), "{rows:?}");
        assert!(rows.iter().any(|r| r.trim() == "SECRET_TWO"), "{rows:?}");
        assert!(rows.last().unwrap().starts_with("m · ask"), "{rows:?}");
        for r in &l.rows {
            assert!(r.width() <= 24, "{r:?}");
        }
    }

    #[test]
    fn a_card_taller_than_the_screen_is_drawn_compact_and_spilled() {
        let mut v = View::new("m", Mode::Ask, vec![]);
        let detail: String = (0..200).map(|i| format!("+line {i}\n")).collect();
        v.event(
            0,
            Event::ApprovalRequest {
                approval_id: "a".into(),
                name: "write_file".into(),
                summary: "write big.txt".into(),
                detail,
                reason: ApprovalReason::Gate,
                source_path: String::new(),
                source_sha: String::new(),
                env: vec!["SECRET_ONE".into(), "SECRET_TWO".into()],
            },
        );
        let l = live(&v, 0, 40, 20, Theme { color: false });
        assert_eq!(l.spill, vec!["a".to_string()]);
        let rows: Vec<String> = l.rows.iter().map(text).collect();
        assert!(rows.len() <= 20, "{rows:?}");
        assert!(rows[0].contains("approve this call?"), "{rows:?}");
        assert!(
            rows.iter()
                .any(|r| r.contains("200 rows, printed whole above")),
            "{rows:?}"
        );
        for name in ["SECRET_ONE", "SECRET_TWO"] {
            assert!(rows.iter().any(|r| r.trim() == name), "{rows:?}");
        }
        assert!(rows.iter().any(|r| r.contains("y approve")), "{rows:?}");
        // The same card fits a taller screen whole: nothing to spill.
        let l = live(&v, 0, 40, 300, Theme { color: false });
        assert!(l.spill.is_empty());
        let rows: Vec<String> = l.rows.iter().map(text).collect();
        assert!(rows.iter().any(|r| r.trim() == "+line 199"), "{rows:?}");
    }

    /// On a narrow or short terminal the top of a tall card is dropped (the prompt stays): the
    /// request to run a command outside the sandbox still says UNSANDBOXED, whole, in its keys.
    #[test]
    fn an_unsandboxed_request_says_so_on_a_small_terminal() {
        let cmd =
            "curl -fsSL https://example.com/install.sh | sh && make install PREFIX=$HOME/.local";
        let mut v = View::new("m", Mode::Ask, vec![]);
        v.event(
            0,
            Event::ApprovalRequest {
                approval_id: "a".into(),
                name: "shell".into(),
                summary: format!("UNSANDBOXED shell: {cmd}"),
                detail: format!(
                    "UNSANDBOXED: this command runs outside the sandbox, with no write or \
                     network limits.\nThe model's reason: it installs the toolchain.\n\n{cmd}"
                ),
                reason: ApprovalReason::Gate,
                source_path: String::new(),
                source_sha: String::new(),
                env: vec![],
            },
        );
        for (cols, rows) in [
            (14, 8),
            (20, 7),
            (20, 10),
            (24, 12),
            (40, 10),
            (80, 7),
            (80, 24),
        ] {
            let l = live(&v, 0, cols, rows, Theme { color: false });
            let text: Vec<String> = l.rows.iter().map(text).collect();
            assert!(
                text.iter().any(|r| r.contains("UNSANDBOXED")),
                "{cols}x{rows}:\n{}",
                text.join("\n")
            );
        }
    }

    #[test]
    fn the_cursor_follows_the_prompt() {
        let mut v = View::new("m", Mode::Auto, vec![]);
        v.paste("ab\ncd");
        let l = live(&v, 0, 40, 10, Theme { color: false });
        // rule, "› ab", "  cd", status
        let rows: Vec<String> = l.rows.iter().map(text).collect();
        assert_eq!(rows[1], "› ab");
        assert_eq!(rows[2], "  cd");
        assert_eq!(l.cursor, (4, 2));
        // A long line breaks at the width; the cursor goes with it.
        let mut v = View::new("m", Mode::Auto, vec![]);
        v.paste(&"x".repeat(15));
        let l = live(&v, 0, 10, 10, Theme { color: false });
        let rows: Vec<String> = l.rows.iter().map(text).collect();
        assert_eq!(rows[1], format!("› {}", "x".repeat(8)));
        assert_eq!(rows[2], format!("  {}", "x".repeat(7)));
        assert_eq!(l.cursor, (9, 2));
    }

    #[test]
    fn status_line_shows_mode_budget_usage_and_work() {
        let mut v = View::new("model-x", Mode::Readonly, vec![]);
        v.event(
            0,
            Event::Budget {
                used_tokens: 5,
                context_tokens: 100,
            },
        );
        v.event(
            0,
            Event::Usage {
                prompt_tokens: 3,
                completion_tokens: 2,
                cached_tokens: None,
            },
        );
        v.running = Some(0);
        let l = live(&v, 2500, 200, 10, Theme { color: true });
        let status = text(l.rows.last().unwrap());
        assert!(
            status.starts_with("model-x · readonly · ctx 5/100 · session in 3 out 2 · "),
            "{status}"
        );
        assert!(status.ends_with("working 2s"), "{status}");
        let narrow = live(&v, 2500, 12, 10, Theme { color: true });
        let s = text(narrow.rows.last().unwrap());
        assert!(width(&s) <= 12 && s.ends_with('…'), "{s}");
    }

    #[test]
    fn a_retry_being_waited_out_counts_its_seconds_until_the_reply_comes() {
        let mut v = View::new("m", Mode::Ask, vec![]);
        v.running = Some(0);
        v.event(
            1000,
            Event::Retry {
                attempt: 2,
                max_attempts: 5,
                reason: "HTTP 503".into(),
            },
        );
        let shown = |v: &View, now| -> Vec<String> {
            live(v, now, 80, 20, Theme { color: true })
                .rows
                .iter()
                .map(text)
                .filter(|r| r.starts_with("waiting to retry"))
                .collect()
        };
        assert_eq!(
            shown(&v, 1000),
            ["waiting to retry (attempt 2/5): HTTP 503 · 0s"]
        );
        assert_eq!(
            shown(&v, 4500),
            ["waiting to retry (attempt 2/5): HTTP 503 · 3s"]
        );
        v.event(5000, Event::Token { text: "hi".into() });
        assert!(shown(&v, 5000).is_empty());
    }
}
