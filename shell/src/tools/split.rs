//! Splitting a shell command into the parts permission rules are matched against.
//!
//! Invariants: the command is cut at `&&`, `||`, `;`, `|` (and `|&`), a lone `&`
//! (backgrounding) and newlines, but never inside `'…'`, `"…"`, or after a backslash; `&` in
//! a redirection (`2>&1`, `&>f`, `>&2`) does not cut. Parts are trimmed and empty parts
//! dropped; a command with no separator is one part. Subshells and `$(…)` are not looked into.

/// The parts of `command`, in order.
pub fn parts(command: &str) -> Vec<String> {
    let chars: Vec<char> = command.chars().collect();
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut i = 0;
    let mut single = false;
    let mut double = false;
    while i < chars.len() {
        let c = chars[i];
        let next = chars.get(i + 1).copied();
        if single {
            cur.push(c);
            if c == '\'' {
                single = false;
            }
            i += 1;
            continue;
        }
        if c == '\\' {
            cur.push(c);
            if let Some(n) = next {
                cur.push(n);
            }
            i += 2;
            continue;
        }
        if double {
            cur.push(c);
            if c == '"' {
                double = false;
            }
            i += 1;
            continue;
        }
        match c {
            '\'' => {
                single = true;
                cur.push(c);
                i += 1;
            }
            '"' => {
                double = true;
                cur.push(c);
                i += 1;
            }
            ';' | '\n' => {
                flush(&mut out, &mut cur);
                i += 1;
            }
            '|' => {
                flush(&mut out, &mut cur);
                // `||` and `|&` are one operator.
                i += if matches!(next, Some('|') | Some('&')) {
                    2
                } else {
                    1
                };
            }
            '&' => {
                let prev = cur.chars().last();
                if next == Some('&') {
                    flush(&mut out, &mut cur);
                    i += 2;
                } else if next == Some('>') || matches!(prev, Some('>') | Some('<')) {
                    cur.push(c);
                    i += 1;
                } else {
                    flush(&mut out, &mut cur);
                    i += 1;
                }
            }
            _ => {
                cur.push(c);
                i += 1;
            }
        }
    }
    flush(&mut out, &mut cur);
    out
}

fn flush(out: &mut Vec<String>, cur: &mut String) {
    let t = cur.trim();
    if !t.is_empty() {
        out.push(t.to_string());
    }
    cur.clear();
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn compound() {
        assert_eq!(parts("a && b; c | d"), vec!["a", "b", "c", "d"]);
        assert_eq!(parts("a || b\nc |& d & e"), vec!["a", "b", "c", "d", "e"]);
        assert_eq!(parts("  cargo test  "), vec!["cargo test"]);
        assert_eq!(parts(""), Vec::<String>::new());
        assert_eq!(parts("a;;b;"), vec!["a", "b"]);
    }

    #[test]
    fn quotes_and_redirections() {
        assert_eq!(
            parts(r#"echo 'a && b' && echo "c; d" | grep "x\"|y""#),
            vec!["echo 'a && b'", r#"echo "c; d""#, r#"grep "x\"|y""#]
        );
        assert_eq!(parts(r"echo a\;b; c"), vec![r"echo a\;b", "c"]);
        assert_eq!(
            parts("make 2>&1 | tee log; cmd &>out && x >&2"),
            vec!["make 2>&1", "tee log", "cmd &>out", "x >&2"]
        );
        assert_eq!(
            parts("echo 'unterminated; x"),
            vec!["echo 'unterminated; x"]
        );
    }
}
