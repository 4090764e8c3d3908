//! Text shown on one line: a tool call's summary, a note of `-p`'s stderr.
//!
//! Invariant: the result has no line break and at most `max` characters plus the `…` that
//! marks a cut; a cut never splits a character.

/// The most characters of a tool call's summary (an approval card's first line).
pub const SUMMARY_CHARS: usize = 120;

/// `s` on one line: each line break (`\n`, `\r`) a space, cut after `max` characters with `…`.
pub fn one_line(s: &str, max: usize) -> String {
    let flat: String = s
        .chars()
        .map(|c| if c == '\n' || c == '\r' { ' ' } else { c })
        .collect();
    match flat.char_indices().nth(max) {
        Some((cut, _)) => format!("{}…", &flat[..cut]),
        None => flat,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_line_flattens_and_cuts_on_a_character() {
        assert_eq!(one_line("a\nb\r\nc", 10), "a b  c");
        let exact = "é".repeat(120);
        assert_eq!(one_line(&exact, 120), exact, "max characters stand");
        let over = "é".repeat(121);
        assert_eq!(one_line(&over, 120), format!("{}…", "é".repeat(120)));
        assert_eq!(one_line("", 0), "");
        assert_eq!(one_line("x", 0), "…");
    }
}
