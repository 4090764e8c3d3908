//! Wrapping styled text to a width in terminal columns. Words move whole to the next row; a
//! word wider than the row is broken across rows, never cut or elided, so every character of
//! the input is on screen (an approved variable name must be read whole).

use ratatui::style::Style;
use ratatui::text::{Line, Span};
use unicode_width::UnicodeWidthChar;

/// Display width of one character (control characters count as one: they are shown as `?`).
fn cw(c: char) -> usize {
    c.width().unwrap_or(1)
}

/// Display width of a string.
pub fn width(s: &str) -> usize {
    s.chars().map(cw).sum()
}

/// Control characters would move the cursor: show them as `?`, tabs as spaces.
pub fn printable(s: &str) -> String {
    s.chars()
        .map(|c| match c {
            '\t' => ' ',
            c if c.is_control() => '?',
            c => c,
        })
        .collect()
}

/// Wrap one logical line of styled pieces to `width` columns. The first row starts with
/// `first` (e.g. a bullet), the following rows with `rest` (its indentation). Returns at least
/// one row.
pub fn wrap(
    pieces: &[(String, Style)],
    width: usize,
    first: Span<'static>,
    rest: Span<'static>,
) -> Vec<Line<'static>> {
    let width = width.max(1);
    let mut rows: Vec<Line<'static>> = Vec::new();
    let mut cur: Vec<Span<'static>> = vec![first.clone()];
    let mut used = first.width();
    let rest_w = rest.width();
    // Tokens: runs of non-space characters and single spaces, each with its style.
    let mut tokens: Vec<(String, Style)> = Vec::new();
    for (text, style) in pieces {
        let text = printable(text);
        let mut word = String::new();
        for c in text.chars() {
            if c == ' ' {
                if !word.is_empty() {
                    tokens.push((std::mem::take(&mut word), *style));
                }
                tokens.push((" ".into(), *style));
            } else {
                word.push(c);
            }
        }
        if !word.is_empty() {
            tokens.push((word, *style));
        }
    }
    let push_row = |rows: &mut Vec<Line<'static>>, cur: &mut Vec<Span<'static>>| {
        // Trailing spaces carry nothing.
        while cur.len() > 1 && cur.last().is_some_and(|s| s.content == " ") {
            cur.pop();
        }
        rows.push(Line::from(std::mem::take(cur)));
    };
    for (tok, style) in tokens {
        let w = width_str(&tok);
        let start_w = if rows.is_empty() {
            first.width()
        } else {
            rest_w
        };
        if tok == " " {
            // Spaces separate words within a row; none opens a row.
            if used > start_w && used < width {
                cur.push(Span::styled(tok, style));
                used += 1;
            }
            continue;
        }
        if used + w > width && used > start_w {
            push_row(&mut rows, &mut cur);
            cur.push(rest.clone());
            used = rest_w;
        }
        if used + w <= width {
            cur.push(Span::styled(tok, style));
            used += w;
            continue;
        }
        // A word wider than the row: break it at the row's end, as many times as needed.
        let mut chunk = String::new();
        for c in tok.chars() {
            let w = cw(c);
            if used + w > width && (used > rest_w || !chunk.is_empty()) {
                cur.push(Span::styled(std::mem::take(&mut chunk), style));
                push_row(&mut rows, &mut cur);
                cur.push(rest.clone());
                used = rest_w;
            }
            chunk.push(c);
            used += w;
        }
        if !chunk.is_empty() {
            cur.push(Span::styled(chunk, style));
        }
    }
    push_row(&mut rows, &mut cur);
    rows
}

/// Break `text` by characters into rows of `width` columns, each row starting with `indent`:
/// for text whose spaces matter (a command to copy, a diff line, a variable name). Joining the
/// rows with their indent removed gives back exactly the text.
pub fn hard_wrap(text: &str, style: Style, width: usize, indent: &str) -> Vec<Line<'static>> {
    let room = width.saturating_sub(width_str(indent)).max(1);
    let mut rows = Vec::new();
    let mut chunk = String::new();
    let mut used = 0;
    for c in printable(text).chars() {
        let w = cw(c);
        if used + w > room && !chunk.is_empty() {
            rows.push(Line::from(vec![
                Span::raw(indent.to_string()),
                Span::styled(std::mem::take(&mut chunk), style),
            ]));
            used = 0;
        }
        chunk.push(c);
        used += w;
    }
    rows.push(Line::from(vec![
        Span::raw(indent.to_string()),
        Span::styled(chunk, style),
    ]));
    rows
}

fn width_str(s: &str) -> usize {
    width(s)
}

/// Wrap plain text (which may hold newlines) in one style.
pub fn wrap_text(
    text: &str,
    style: Style,
    width: usize,
    indent: &'static str,
) -> Vec<Line<'static>> {
    text.split('\n')
        .flat_map(|l| {
            wrap(
                &[(l.to_string(), style)],
                width,
                Span::raw(indent),
                Span::raw(indent),
            )
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn plain(rows: &[Line]) -> Vec<String> {
        rows.iter()
            .map(|l| l.spans.iter().map(|s| s.content.as_ref()).collect())
            .collect()
    }

    #[test]
    fn words_move_whole_and_long_words_break() {
        let rows = wrap(
            &[("alpha beta gamma".into(), Style::default())],
            11,
            Span::raw(""),
            Span::raw(""),
        );
        assert_eq!(plain(&rows), ["alpha beta", "gamma"]);
        let rows = wrap(
            &[("ABCDEFGHIJKLMNOPQRSTUVWXYZ".into(), Style::default())],
            10,
            Span::raw("- "),
            Span::raw("  "),
        );
        assert_eq!(
            plain(&rows),
            ["- ABCDEFGH", "  IJKLMNOP", "  QRSTUVWX", "  YZ"]
        );
        for r in &rows {
            assert!(r.width() <= 10);
        }
    }

    #[test]
    fn control_characters_are_neutralised() {
        assert_eq!(printable("a\x1b[2Jb\tc"), "a?[2Jb c");
        assert_eq!(width("日本"), 4);
    }
}
