//! Markdown to styled terminal rows (pulldown-cmark): headings, paragraphs, bullet and numbered
//! lists (nested), emphasis, strong, inline code, code blocks, block quotes and rules. Rows are
//! wrapped to the width by [`super::wrap`]; code blocks are broken, never wrapped at words.

use pulldown_cmark::{CodeBlockKind, Event, HeadingLevel, Options, Parser, Tag, TagEnd};
use ratatui::style::{Modifier, Style};
use ratatui::text::{Line, Span};

use super::theme::Theme;
use super::wrap::wrap;

/// Render `src` to rows of at most `width` columns.
pub fn render(src: &str, width: usize, theme: Theme) -> Vec<Line<'static>> {
    let mut r = Renderer {
        theme,
        width,
        rows: Vec::new(),
        pieces: Vec::new(),
        styles: vec![theme.plain()],
        lists: Vec::new(),
        quote: 0,
        code: None,
        item_first: None,
    };
    let parser = Parser::new_ext(src, Options::ENABLE_STRIKETHROUGH);
    for ev in parser {
        r.event(ev);
    }
    r.flush_para();
    while r.rows.last().is_some_and(|l| l.width() == 0) {
        r.rows.pop();
    }
    r.rows
}

struct Renderer {
    theme: Theme,
    width: usize,
    rows: Vec<Line<'static>>,
    pieces: Vec<(String, Style)>,
    styles: Vec<Style>,
    /// Open lists: the next number of each ordered one.
    lists: Vec<Option<u64>>,
    quote: usize,
    code: Option<String>,
    /// The bullet of a list item whose first row is not written yet.
    item_first: Option<String>,
}

impl Renderer {
    fn style(&self) -> Style {
        *self.styles.last().unwrap_or(&Style::default())
    }

    fn push_style(&mut self, f: impl Fn(Style) -> Style) {
        let s = f(self.style());
        self.styles.push(s);
    }

    fn indent(&self) -> String {
        let mut s = "│ ".repeat(self.quote);
        s.push_str(&"  ".repeat(self.lists.len()));
        s
    }

    fn blank(&mut self) {
        if self.rows.last().is_some_and(|l| l.width() > 0) && self.lists.is_empty() {
            self.rows.push(Line::default());
        }
    }

    fn flush_para(&mut self) {
        if self.pieces.is_empty() && self.item_first.is_none() {
            return;
        }
        let pieces = std::mem::take(&mut self.pieces);
        let base = self.indent();
        let (first, rest) = match self.item_first.take() {
            Some(bullet) => {
                let inner = "  ".repeat(self.lists.len().saturating_sub(1));
                let first = format!("{}{inner}{bullet}", "│ ".repeat(self.quote));
                let rest = format!(
                    "{}{inner}{}",
                    "│ ".repeat(self.quote),
                    " ".repeat(bullet.chars().count())
                );
                (first, rest)
            }
            None => (base.clone(), base),
        };
        self.rows.extend(wrap(
            &pieces,
            self.width,
            Span::styled(first, self.theme.dim()),
            Span::styled(rest, self.theme.dim()),
        ));
    }

    fn event(&mut self, ev: Event) {
        match ev {
            Event::Start(tag) => self.start(tag),
            Event::End(tag) => self.end(tag),
            Event::Text(t) => match &mut self.code {
                Some(buf) => buf.push_str(&t),
                None => {
                    let t = t.replace('\n', " ");
                    let s = self.style();
                    self.pieces.push((t, s));
                }
            },
            Event::Code(t) => {
                let s = self.theme.code();
                self.pieces.push((t.to_string(), s));
            }
            Event::SoftBreak => {
                let s = self.style();
                self.pieces.push((" ".into(), s));
            }
            Event::HardBreak => self.flush_para(),
            Event::Rule => {
                self.flush_para();
                self.blank();
                self.rows.push(Line::styled(
                    "─".repeat(self.width.clamp(1, 40)),
                    self.theme.dim(),
                ));
            }
            Event::Html(t) | Event::InlineHtml(t) => {
                let s = self.style();
                self.pieces.push((t.to_string(), s));
            }
            Event::TaskListMarker(done) => {
                let s = self.style();
                self.pieces
                    .push((if done { "[x] " } else { "[ ] " }.into(), s));
            }
            _ => {}
        }
    }

    fn start(&mut self, tag: Tag) {
        match tag {
            Tag::Paragraph if self.item_first.is_none() => {
                self.flush_para();
                self.blank();
            }
            Tag::Heading { level, .. } => {
                self.flush_para();
                self.blank();
                let hashes = match level {
                    HeadingLevel::H1 => "# ",
                    HeadingLevel::H2 => "## ",
                    _ => "### ",
                };
                let h = self.theme.heading();
                self.pieces.push((hashes.into(), h));
                self.styles.push(h);
            }
            Tag::BlockQuote(_) => {
                self.flush_para();
                self.quote += 1;
            }
            Tag::CodeBlock(kind) => {
                self.flush_para();
                self.blank();
                if let CodeBlockKind::Fenced(lang) = kind {
                    if !lang.is_empty() {
                        self.rows.push(Line::styled(
                            format!("{}  {lang}", self.indent()),
                            self.theme.dim(),
                        ));
                    }
                }
                self.code = Some(String::new());
            }
            Tag::List(start) => {
                self.flush_para();
                if self.lists.is_empty() {
                    self.blank();
                }
                self.lists.push(start);
            }
            Tag::Item => {
                self.flush_para();
                let bullet = match self.lists.last_mut() {
                    Some(Some(n)) => {
                        let b = format!("{n}. ");
                        *n += 1;
                        b
                    }
                    _ => "• ".to_string(),
                };
                self.item_first = Some(bullet);
            }
            Tag::Emphasis => self.push_style(|s| s.add_modifier(Modifier::ITALIC)),
            Tag::Strong => self.push_style(|s| s.add_modifier(Modifier::BOLD)),
            Tag::Strikethrough => self.push_style(|s| s.add_modifier(Modifier::CROSSED_OUT)),
            Tag::Link { .. } => self.push_style(|s| s.add_modifier(Modifier::UNDERLINED)),
            _ => {}
        }
    }

    fn end(&mut self, tag: TagEnd) {
        match tag {
            TagEnd::Paragraph => self.flush_para(),
            TagEnd::Heading(_) => {
                self.styles.pop();
                self.flush_para();
            }
            TagEnd::BlockQuote(_) => {
                self.flush_para();
                self.quote = self.quote.saturating_sub(1);
            }
            TagEnd::CodeBlock => {
                let code = self.code.take().unwrap_or_default();
                let indent = format!("{}  ", self.indent());
                let style = self.theme.code();
                for l in code.trim_end_matches('\n').split('\n') {
                    // Code keeps its spacing: break long rows by character, not by word.
                    let rows = wrap(
                        &[(l.replace(' ', "\u{a0}"), style)],
                        self.width,
                        Span::raw(indent.clone()),
                        Span::raw(indent.clone()),
                    );
                    self.rows.extend(rows.into_iter().map(|r| {
                        Line::from(
                            r.spans
                                .into_iter()
                                .map(|s| Span::styled(s.content.replace('\u{a0}', " "), s.style))
                                .collect::<Vec<_>>(),
                        )
                    }));
                }
                self.blank();
            }
            TagEnd::List(_) => {
                self.flush_para();
                self.lists.pop();
                if self.lists.is_empty() {
                    self.blank();
                }
            }
            TagEnd::Item => self.flush_para(),
            TagEnd::Emphasis | TagEnd::Strong | TagEnd::Strikethrough | TagEnd::Link => {
                self.styles.pop();
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(rows: &[Line]) -> Vec<String> {
        rows.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn headings_lists_emphasis_and_code() {
        let md = "# Title\n\nSome *soft* and **bold** `code`.\n\n- one\n- two\n  1. nested\n\n```rust\nfn main() {}\n```\n";
        let rows = render(md, 40, Theme { color: true });
        let t = text(&rows);
        assert_eq!(t[0], "# Title");
        assert!(t.contains(&"Some soft and bold code.".to_string()), "{t:?}");
        assert!(t.contains(&"• one".to_string()), "{t:?}");
        assert!(t.iter().any(|l| l.trim_start() == "1. nested"), "{t:?}");
        assert!(t.contains(&"  fn main() {}".to_string()), "{t:?}");
        let bold = rows
            .iter()
            .flat_map(|l| l.spans.iter())
            .find(|s| s.content == "bold")
            .unwrap();
        assert!(bold.style.add_modifier.contains(Modifier::BOLD));
        let soft = rows
            .iter()
            .flat_map(|l| l.spans.iter())
            .find(|s| s.content == "soft")
            .unwrap();
        assert!(soft.style.add_modifier.contains(Modifier::ITALIC));
    }

    #[test]
    fn rows_fit_the_width() {
        let md = "A paragraph with quite a few words that must wrap at a narrow width.\n\n```\nlet a_very_long_identifier_name = 1;\n```";
        for w in [10, 20, 33] {
            for r in render(md, w, Theme { color: false }) {
                assert!(r.width() <= w, "{w}: {r:?}");
            }
        }
    }
}
