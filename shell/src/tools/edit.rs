//! The exact-match replacement behind `edit_file`, as a pure function over text.
//!
//! Invariants:
//! - A file whose first line ends in CRLF is a CRLF file: `old_string`/`new_string` written
//!   with LF are matched and written with CRLF (falling back to the raw strings for mixed
//!   files); an LF file matched by CRLF strings is handled the same way in reverse.
//! - The file's final newline state is kept: the edit works on the text as if a file without a
//!   final newline had one, and removes it again afterwards; so a file without one still has
//!   none (unless `new_string` itself adds a line break at the very end), a file with one still
//!   has one (unless the result is empty), and an `old_string` ending in a newline matches the
//!   last line of a file without a final newline.
//! - Zero matches or (without `replace_all`) more than one is an [`EditError`]; matches are
//!   counted non-overlapping, like `str::matches`.

/// Why an edit could not be applied.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum EditError {
    /// `old_string` does not occur.
    NotFound,
    /// `old_string` occurs this many times and `replace_all` is off.
    Ambiguous(usize),
}

/// Replace `old` by `new` in `content`; returns the new text and how many places changed.
pub fn apply(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
) -> Result<(String, usize), EditError> {
    let crlf = uses_crlf(content);
    let le = if crlf { "\r\n" } else { "\n" };
    let had_final = content.ends_with('\n');
    let mut work = content.to_string();
    if !had_final && !content.is_empty() {
        work.push_str(le);
    }
    let (old_n, new_n) = if crlf {
        (to_crlf(old), to_crlf(new))
    } else {
        (to_lf(old), to_lf(new))
    };
    let mut candidates = vec![(old_n, new_n)];
    if candidates[0].0 != old {
        candidates.push((old.to_string(), new.to_string()));
    }
    let mut chosen = None;
    for (o, n) in candidates {
        let count = work.matches(o.as_str()).count();
        if count > 0 {
            chosen = Some((o, n, count));
            break;
        }
    }
    let Some((o, n, count)) = chosen else {
        return Err(EditError::NotFound);
    };
    if count > 1 && !replace_all {
        return Err(EditError::Ambiguous(count));
    }
    let mut out = if replace_all {
        work.replace(o.as_str(), &n)
    } else {
        work.replacen(o.as_str(), &n, 1)
    };
    if !had_final {
        if let Some(stripped) = out.strip_suffix(le).or_else(|| out.strip_suffix('\n')) {
            out.truncate(stripped.len());
        }
    } else if !out.is_empty() && !out.ends_with('\n') {
        out.push_str(le);
    }
    Ok((out, count))
}

/// Whether the first line ending of `text` is CRLF.
pub fn uses_crlf(text: &str) -> bool {
    match text.find('\n') {
        Some(i) => i > 0 && text.as_bytes()[i - 1] == b'\r',
        None => false,
    }
}

fn to_lf(s: &str) -> String {
    s.replace("\r\n", "\n")
}

fn to_crlf(s: &str) -> String {
    to_lf(s).replace('\n', "\r\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn single_and_all() {
        assert_eq!(apply("a b a\n", "b", "c", false), Ok(("a c a\n".into(), 1)));
        assert_eq!(
            apply("a b a\n", "a", "c", false),
            Err(EditError::Ambiguous(2))
        );
        assert_eq!(apply("a b a\n", "a", "c", true), Ok(("c b c\n".into(), 2)));
        assert_eq!(apply("a b a\n", "z", "c", true), Err(EditError::NotFound));
    }

    #[test]
    fn crlf_preserved() {
        let f = "one\r\ntwo\r\nthree\r\n";
        let (out, n) = apply(f, "one\ntwo\n", "uno\ndos\nextra\n", false).unwrap();
        assert_eq!(n, 1);
        assert_eq!(out, "uno\r\ndos\r\nextra\r\nthree\r\n");
        // Inserting a line into a CRLF file from a single-line old_string.
        let (out, _) = apply(f, "two", "two\n2.5", false).unwrap();
        assert_eq!(out, "one\r\ntwo\r\n2.5\r\nthree\r\n");
        // An LF file edited with CRLF strings stays LF.
        let (out, _) = apply("a\nb\n", "a\r\nb", "x\r\ny", false).unwrap();
        assert_eq!(out, "x\ny\n");
        // A mixed file whose matched region uses LF.
        let (out, _) = apply("a\r\nb\nc\n", "b\nc", "B\nC", false).unwrap();
        assert_eq!(out, "a\r\nB\nC\n");
    }

    #[test]
    fn final_newline_state_kept() {
        assert_eq!(apply("a\nb", "b", "c", false).unwrap().0, "a\nc");
        // An explicit line break added at the very end is kept (it makes an empty last line).
        assert_eq!(apply("a\nb", "b", "c\n", false).unwrap().0, "a\nc\n");
        assert_eq!(apply("a\nb", "b\n", "c\n", false).unwrap().0, "a\nc");
        assert_eq!(apply("a\nb\n", "b\n", "c", false).unwrap().0, "a\nc\n");
        assert_eq!(
            apply("a\r\nb", "b\n", "c\nd\n", false).unwrap().0,
            "a\r\nc\r\nd"
        );
        assert_eq!(apply("a\n", "a\n", "", false).unwrap().0, "");
    }
}
