//! Output caps for the listing tools (`list_dir`, `glob`, `grep`): whole lines only, at most a
//! byte budget and an item count; the caller appends a notice saying what was left out.

/// Lines joined under a cap.
#[derive(Debug)]
pub struct Capped {
    /// The kept lines, each ending in `\n`.
    pub text: String,
    /// How many lines were kept.
    pub shown: usize,
    /// Whether any line was left out.
    pub cut: bool,
}

/// Keep whole lines while the text stays within `cap_bytes` (at least one line is kept) and
/// the count within `max_items`.
pub fn take_lines<I, S>(lines: I, cap_bytes: usize, max_items: usize) -> Capped
where
    I: IntoIterator<Item = S>,
    S: AsRef<str>,
{
    let mut text = String::new();
    let mut shown = 0usize;
    let mut cut = false;
    for line in lines {
        let line = line.as_ref();
        if shown >= max_items || (shown > 0 && text.len() + line.len() + 1 > cap_bytes) {
            cut = true;
            break;
        }
        text.push_str(line);
        text.push('\n');
        shown += 1;
    }
    Capped { text, shown, cut }
}

/// Cut `s` to at most `max_chars` characters, marking the cut.
pub fn cut_chars(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        None => s.to_string(),
        Some((at, _)) => format!("{}…", &s[..at]),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn caps() {
        let c = take_lines(["aaaa", "bbbb", "cccc"], 10, 100);
        assert_eq!((c.text.as_str(), c.shown, c.cut), ("aaaa\nbbbb\n", 2, true));
        let c = take_lines(["aaaa", "bbbb"], 1000, 1);
        assert_eq!((c.shown, c.cut), (1, true));
        let c = take_lines(["a very long line"], 3, 10);
        assert_eq!((c.shown, c.cut), (1, false));
        assert_eq!(cut_chars("héllo", 2), "hé…");
        assert_eq!(cut_chars("hé", 2), "hé");
    }
}
