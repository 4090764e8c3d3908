//! What goes into the terminal's scrollback once finished: user messages, replies (Markdown),
//! collapsed thinking, tool cards with their diffs, settled approval cards and notices; and how
//! each is drawn at a width.

use ratatui::text::{Line, Span};

use super::card::{self, ApprovalCard};
use super::markdown;
use super::theme::Theme;
use super::wrap::{hard_wrap, wrap, wrap_text};

/// How many output rows a finished tool card shows.
pub const OUTPUT_ROWS: usize = 5;
/// How many rows of a diff are shown before the rest is counted.
pub const DIFF_ROWS: usize = 200;

/// A `diff` event.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DiffView {
    pub path: String,
    pub diff: String,
    pub added: u64,
    pub removed: u64,
}

/// A tool call from `tool_start` to `tool_end`.
#[derive(Debug, Clone, PartialEq)]
pub struct ToolCard {
    pub call_id: String,
    pub name: String,
    pub summary: String,
    /// `None` while it runs.
    pub ok: Option<bool>,
    pub output: String,
    pub diffs: Vec<DiffView>,
}

/// The kind of a one-line notice (its style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Level {
    Info,
    Warn,
    Error,
}

/// One finished piece of the conversation.
#[derive(Debug, Clone, PartialEq)]
pub enum Block {
    User(String),
    Reply(String),
    /// Thinking collapsed to its first line.
    Thinking(String),
    Tool(ToolCard),
    Diff(DiffView),
    Approval(ApprovalCard),
    Notice(Level, String),
    /// A tool call of an earlier session, on one line: name, what it was called on, how it
    /// ended (`None`: it never did), and a file edit's counts.
    ToolLine {
        name: String,
        summary: String,
        ok: Option<bool>,
        counts: Option<(u64, u64)>,
    },
}

/// The rows of a block at `width`, followed by a blank separator row where it helps reading.
pub fn lines(block: &Block, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut rows = match block {
        Block::User(text) => {
            let mut rows = Vec::new();
            for (i, l) in text.split('\n').enumerate() {
                let first = if i == 0 { "› " } else { "  " };
                rows.extend(wrap(
                    &[(l.to_string(), theme.bold())],
                    width,
                    Span::styled(first, theme.user()),
                    Span::raw("  "),
                ));
            }
            rows
        }
        Block::Reply(md) => markdown::render(md, width, theme),
        Block::Thinking(first) => wrap_text(&format!("thinking: {first}"), theme.dim(), width, ""),
        Block::Tool(t) => tool_lines(t, width, theme),
        Block::ToolLine {
            name,
            summary,
            ok,
            counts,
        } => {
            let (mark, status) = match ok {
                Some(true) => (Span::styled("● ", theme.ok()), ("ok", theme.ok())),
                Some(false) => (Span::styled("● ", theme.error()), ("failed", theme.error())),
                None => (
                    Span::styled("◌ ", theme.dim()),
                    ("not finished", theme.dim()),
                ),
            };
            let mut parts = vec![
                (name.clone(), theme.tool()),
                (" ".into(), theme.plain()),
                (summary.clone(), theme.plain()),
            ];
            if let Some((a, r)) = counts {
                parts.push((format!(" +{a} -{r}"), theme.dim()));
            }
            parts.push((format!("  {}", status.0), status.1));
            wrap(&parts, width, mark, Span::raw("  "))
        }
        Block::Diff(d) => diff_lines(d, width, theme),
        Block::Approval(c) => card::lines(c, width, theme),
        Block::Notice(level, text) => {
            let style = match level {
                Level::Info => theme.dim(),
                Level::Warn => theme.warn(),
                Level::Error => theme.error(),
            };
            wrap_text(text, style, width, "")
        }
    };
    if !matches!(block, Block::Notice(..) | Block::Thinking(_)) {
        rows.push(Line::default());
    }
    rows
}

/// The header row(s) of a tool card: `● name summary`.
pub fn tool_header(t: &ToolCard, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mark = match t.ok {
        None => Span::styled("◌ ", theme.dim()),
        Some(true) => Span::styled("● ", theme.ok()),
        Some(false) => Span::styled("● ", theme.error()),
    };
    wrap(
        &[
            (t.name.clone(), theme.tool()),
            (" ".into(), theme.plain()),
            (t.summary.clone(), theme.plain()),
        ],
        width,
        mark,
        Span::raw("  "),
    )
}

fn tool_lines(t: &ToolCard, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut rows = tool_header(t, width, theme);
    for d in &t.diffs {
        rows.extend(diff_lines(d, width, theme));
    }
    let status = match t.ok {
        Some(true) => ("ok", theme.ok()),
        Some(false) => ("failed", theme.error()),
        None => ("running…", theme.dim()),
    };
    let out: Vec<&str> = t.output.lines().collect();
    match out.first() {
        None => rows.extend(wrap_text(status.0, status.1, width, "  ")),
        Some(_) => {
            rows.extend(wrap(
                &[(status.0.to_string(), status.1)],
                width,
                Span::raw("  "),
                Span::raw("  "),
            ));
            for l in out.iter().take(OUTPUT_ROWS) {
                rows.extend(wrap_text(l, theme.dim(), width, "  │ "));
            }
            if out.len() > OUTPUT_ROWS {
                let more = out.len() - OUTPUT_ROWS;
                rows.extend(wrap_text(
                    &format!("… {more} more line{}", if more == 1 { "" } else { "s" }),
                    theme.dim(),
                    width,
                    "  │ ",
                ));
            }
        }
    }
    rows
}

/// A unified diff, coloured, with its counts.
pub fn diff_lines(d: &DiffView, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut rows = wrap(
        &[
            (d.path.clone(), theme.bold()),
            (" ".into(), theme.plain()),
            (format!("+{}", d.added), theme.added()),
            (" ".into(), theme.plain()),
            (format!("-{}", d.removed), theme.removed()),
        ],
        width,
        Span::raw("  diff "),
        Span::raw("  "),
    );
    let all: Vec<&str> = d.diff.lines().collect();
    for l in all.iter().take(DIFF_ROWS) {
        let style = if l.starts_with("+++") || l.starts_with("---") {
            theme.bold()
        } else if l.starts_with('+') {
            theme.added()
        } else if l.starts_with('-') {
            theme.removed()
        } else if l.starts_with("@@") {
            theme.hunk()
        } else {
            theme.dim()
        };
        rows.extend(hard_wrap(l, style, width, "  "));
    }
    if all.len() > DIFF_ROWS {
        rows.extend(wrap_text(
            &format!("… {} more diff lines", all.len() - DIFF_ROWS),
            theme.dim(),
            width,
            "  ",
        ));
    }
    rows
}

/// A one-line summary of a call's arguments: the usual key's value where there is one, else
/// the compact JSON, cut to `max` characters.
pub fn args_summary(args: &serde_json::Map<String, serde_json::Value>, max: usize) -> String {
    const KEYS: [&str; 6] = ["path", "command", "pattern", "query", "url", "file"];
    let s = KEYS
        .iter()
        .find_map(|k| args.get(*k).and_then(|v| v.as_str()).map(str::to_string))
        .unwrap_or_else(|| serde_json::Value::Object(args.clone()).to_string());
    let flat: String = s
        .chars()
        .map(|c| if c.is_control() { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}
