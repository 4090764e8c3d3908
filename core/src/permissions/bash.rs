//! Parsing a shell command line with the bash grammar (tree-sitter-bash) into the simple
//! commands it contains, wherever they are.
//!
//! Invariants:
//! - Every `command` node of the syntax tree is reported, in source order, however deeply it
//!   sits: in pipelines and lists, subshells, `{ …; }` groups, `if`/`while`/`until`/`for`/`case`
//!   bodies, function definitions, `$( … )`, backticks, `<( … )`, `!`, redirection targets,
//!   assignments and double-quoted strings. The walk is iterative, so nesting depth cannot
//!   overflow the stack.
//! - Prefix assignments (`FOO=1 rm`) and redirections (`>f`, `2>&1`, `<<EOF`) are not words of
//!   the command; the commands inside them are still found. A redirection may stand anywhere
//!   among the words: those after its target are still the command's (`rm >f -rf x` is `rm -rf
//!   x`; the grammar hangs them on the redirection).
//! - The text first goes through bash's pre-parse steps ([`super::lex`]: line continuations,
//!   `$"…"`, brace expansion), so `r\⏎m` and `{rm,}` are the word `rm`.
//! - A word's value is what bash passes after quote removal (`'r'm`, `"rm"`, `\rm` and `r""m`
//!   are all `rm`, `$'\x72m'` too). A word whose value depends on the run time (a variable, a
//!   substitution, an arithmetic expansion, an unquoted glob) is [`Word::dynamic`], carrying
//!   its source text; one whose only run-time part is pathname expansion also carries its bash
//!   pattern ([`Word::pattern`]: `"r"*` is `r*`, `'*'?` is `\*?`).
//! - A command line that does not parse (an `ERROR` or missing node) is reported as
//!   [`Parsed::broken`]; one too big to read (see [`super::lex::normalise_bounded`]) as
//!   [`Parsed::too_big`] too, parsed only up to there; the commands that were recognised are
//!   still reported. (A command name the grammar reports missing after assignments and
//!   redirections, `x=$(ls) 2>/dev/null`, is not an error: bash runs no command there.)
//! - No I/O: the grammar is a pure function of the text.

use std::collections::BTreeMap;

use tree_sitter::{Node, Parser};

use super::lex::Tally;

/// One word of a simple command.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Word {
    /// The value after quote removal, or the source text when [`Word::dynamic`].
    pub text: String,
    /// The value is only known when the command runs.
    pub dynamic: bool,
    /// A dynamic word that is a pathname pattern and nothing else run-time: the pattern, quoted
    /// characters escaped with `\`.
    pub pattern: Option<String>,
}

/// The simple commands of a command line.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Parsed {
    /// Each simple command's words, the command name first.
    pub commands: Vec<Vec<Word>>,
    /// The text did not parse as bash.
    pub broken: bool,
    /// It is too big to read ([`super::lex::normalise_bounded`]): only the text before that
    /// was parsed.
    pub too_big: bool,
}

/// Parse `src` as bash.
pub fn parse(src: &str) -> Parsed {
    parse_counting(src, &mut Tally::default())
}

/// Parse `src` as bash, what it reads counted on in `tally` (what the scripts of the same line
/// read before it; together they are bounded as one, [`super::lex::normalise_bounded`]).
pub fn parse_counting(src: &str, tally: &mut Tally) -> Parsed {
    let (normalised, too_big) = super::lex::normalise_bounded(src, tally);
    let src = normalised.as_str();
    let mut parser = Parser::new();
    if parser
        .set_language(&tree_sitter_bash::LANGUAGE.into())
        .is_err()
    {
        return Parsed {
            commands: Vec::new(),
            broken: true,
            too_big,
        };
    }
    let Some(tree) = parser.parse(src, None) else {
        return Parsed {
            commands: Vec::new(),
            broken: true,
            too_big,
        };
    };
    let bytes = src.as_bytes();
    let mut out = Parsed {
        too_big,
        ..Parsed::default()
    };
    // The words after a redirection, by the id of the command they belong to (the walk meets
    // the redirection's statement before the command inside it).
    let mut trailing: BTreeMap<usize, Vec<Node>> = BTreeMap::new();
    let mut stack = vec![tree.root_node()];
    while let Some(node) = stack.pop() {
        if node.is_error() || (node.is_missing() && !assignments_only(node)) {
            out.broken = true;
        }
        if node.kind() == "redirected_statement" {
            if let Some((command, words)) = words_after_redirections(node) {
                trailing.entry(command.id()).or_default().extend(words);
            }
        }
        if node.kind() == "command" {
            let mut words = command_words(node, bytes);
            let after = trailing.remove(&node.id()).unwrap_or_default();
            words.extend(after.into_iter().map(|w| word(w, bytes)));
            if !words.is_empty() {
                out.commands.push(words);
            }
        }
        let mut cursor = node.walk();
        let children: Vec<Node> = node.children(&mut cursor).collect();
        stack.extend(children.into_iter().rev());
    }
    out
}

/// A command name the grammar reports missing after assignments and redirections
/// (`x=$(ls) 2>/dev/null`): bash runs no command there, which is not an error.
fn assignments_only(missing: Node) -> bool {
    let command = missing
        .parent()
        .filter(|p| p.kind() == "command_name")
        .and_then(|p| p.parent())
        .filter(|c| c.kind() == "command");
    command.is_some_and(|c| {
        let mut cursor = c.walk();
        let assigns = c
            .children(&mut cursor)
            .any(|k| k.kind() == "variable_assignment");
        assigns
    })
}

/// The name and arguments of a `command` node.
fn command_words(node: Node, src: &[u8]) -> Vec<Word> {
    let mut words = Vec::new();
    let mut named = false;
    if let Some(name) = node.child_by_field_name("name") {
        named = !name.is_missing() && !name.byte_range().is_empty();
        // `command_name` wraps exactly one word-like node.
        let inner = name.named_child(0).unwrap_or(name);
        words.push(word(inner, src));
    }
    let mut cursor = node.walk();
    for arg in node.children_by_field_name("argument", &mut cursor) {
        words.push(word(arg, src));
    }
    if !named && words.len() == 1 {
        // Only a missing name: no command.
        words.clear();
    }
    words
}

/// The words the grammar hangs on a redirection after the command it belongs to (`rm >f -rf x`
/// is a `redirected_statement` whose `file_redirect` has the destinations `f`, `-rf` and `x`):
/// every destination after a redirection's first, and a here-document's trailing words (with
/// those of a redirection nested in it), in source order; also where the grammar hangs the
/// redirection on a list or pipeline the command ends. Bash takes a redirection out
/// wherever it stands, so they are the command's arguments. `None` when the statement's body
/// does not end with a simple command (bash refuses a word after a compound's redirection).
fn words_after_redirections(statement: Node) -> Option<(Node, Vec<Node>)> {
    // The grammar hangs the redirection on a whole list or pipeline that ends with the command
    // (`a && rm >f -rf x`); bash, on the command.
    let mut command = statement.child_by_field_name("body")?;
    while matches!(command.kind(), "list" | "pipeline") {
        command = command.named_child(command.named_child_count().checked_sub(1)?)?;
    }
    if command.kind() != "command" {
        return None;
    }
    let mut out = Vec::new();
    let mut cursor = statement.walk();
    for redirect in statement.children_by_field_name("redirect", &mut cursor) {
        trailing_words(redirect, &mut out);
    }
    Some((command, out))
}

/// `redirect`'s trailing words onto `out`, nested redirections at their place (iterative, as
/// the walk is).
fn trailing_words<'t>(redirect: Node<'t>, out: &mut Vec<Node<'t>>) {
    // Each open redirection: the node, its next child, the destinations seen.
    let mut open = vec![(redirect, 0usize, 0usize)];
    while let Some((node, i, destinations)) = open.pop() {
        let Some(child) = node.child(i) else {
            continue;
        };
        let mut seen = destinations;
        let mut nested = None;
        match node.field_name_for_child(i as u32) {
            Some("destination") => {
                seen += 1;
                if seen > 1 {
                    out.push(child);
                }
            }
            Some("argument") if node.kind() == "heredoc_redirect" => out.push(child),
            Some("redirect") => nested = Some(child),
            _ => {}
        }
        open.push((node, i + 1, seen));
        if let Some(child) = nested {
            open.push((child, 0, 0));
        }
    }
}

fn text<'a>(node: Node, src: &'a [u8]) -> &'a str {
    node.utf8_text(src).unwrap_or("")
}

fn dynamic(node: Node, src: &[u8]) -> Word {
    Word {
        text: text(node, src).to_string(),
        dynamic: true,
        pattern: None,
    }
}

fn glob(node: Node, src: &[u8], pattern: String) -> Word {
    Word {
        pattern: Some(pattern),
        ..dynamic(node, src)
    }
}

fn literal(text: String) -> Word {
    Word {
        text,
        dynamic: false,
        pattern: None,
    }
}

/// `text` as a bash pattern matching only itself.
fn escape_pattern(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if matches!(c, '*' | '?' | '[' | ']' | '\\') {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

/// The value of one word node.
fn word(node: Node, src: &[u8]) -> Word {
    let raw = text(node, src);
    match node.kind() {
        "word" | "number" => {
            if has_unquoted_glob(raw) {
                glob(node, src, raw.to_string())
            } else {
                literal(unescape_unquoted(raw))
            }
        }
        "raw_string" => literal(strip_quotes(raw, 1, 1).to_string()),
        "ansi_c_string" => match decode_ansi_c(strip_quotes(raw, 2, 1)) {
            Some(s) => literal(s),
            None => dynamic(node, src),
        },
        "string" => double_quoted(node, src),
        "concatenation" => {
            let mut value = String::new();
            let mut pattern = String::new();
            let mut globbed = false;
            let mut cursor = node.walk();
            let mut end = node.start_byte();
            for child in node.children(&mut cursor) {
                // Text between children (none in practice) is taken literally.
                let between = std::str::from_utf8(&src[end..child.start_byte()]).unwrap_or("");
                value.push_str(between);
                pattern.push_str(&escape_pattern(between));
                end = child.end_byte();
                let w = word(child, src);
                match (&w.pattern, w.dynamic) {
                    (Some(p), _) => {
                        globbed = true;
                        pattern.push_str(p);
                    }
                    (None, true) => return dynamic(node, src),
                    // An unquoted piece is pattern text as written (the grammar splits `[r]m`
                    // into `[`, `r`, `]`, `m`).
                    (None, false) if child.kind() == "word" => pattern.push_str(text(child, src)),
                    (None, false) => pattern.push_str(&escape_pattern(&w.text)),
                }
                value.push_str(&w.text);
            }
            if globbed || has_unquoted_glob(&unquoted_pieces(node, src)) {
                glob(node, src, pattern)
            } else {
                literal(value)
            }
        }
        _ => dynamic(node, src),
    }
}

/// The unquoted pieces of a concatenation, joined.
fn unquoted_pieces(node: Node, src: &[u8]) -> String {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .filter(|c| c.kind() == "word")
        .map(|c| text(c, src))
        .collect()
}

/// A `"…"` string: literal when it holds only text.
fn double_quoted(node: Node, src: &[u8]) -> Word {
    let mut cursor = node.walk();
    if node
        .named_children(&mut cursor)
        .any(|c| c.kind() != "string_content")
    {
        return dynamic(node, src);
    }
    literal(unescape_double(strip_quotes(text(node, src), 1, 1)))
}

fn strip_quotes(s: &str, open: usize, close: usize) -> &str {
    if s.len() >= open + close {
        &s[open..s.len() - close]
    } else {
        ""
    }
}

/// Whether an unquoted word holds a pathname-expansion character not escaped by `\`.
fn has_unquoted_glob(s: &str) -> bool {
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => {
                chars.next();
            }
            '*' | '?' | '[' => return true,
            _ => {}
        }
    }
    false
}

/// Quote removal outside quotes: `\x` is `x`, `\<newline>` disappears.
fn unescape_unquoted(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.next() {
                Some('\n') | None => {}
                Some(n) => out.push(n),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// Quote removal inside `"…"`: a backslash escapes only `$`, `` ` ``, `"` and `\` (a
/// backslash before a newline, a line continuation, is gone before this: [`super::lex`]).
fn unescape_double(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => out.push(chars.next().unwrap_or('\\')),
                _ => out.push('\\'),
            }
        } else {
            out.push(c);
        }
    }
    out
}

/// The value of the inside of `$'…'`; `None` for an escape it does not know.
fn decode_ansi_c(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        let e = chars.next()?;
        let simple = match e {
            'n' => Some('\n'),
            't' => Some('\t'),
            'r' => Some('\r'),
            'a' => Some('\x07'),
            'b' => Some('\x08'),
            'e' | 'E' => Some('\x1b'),
            'f' => Some('\x0c'),
            'v' => Some('\x0b'),
            '\\' | '\'' | '"' | '?' => Some(e),
            _ => None,
        };
        if let Some(ch) = simple {
            out.push(ch);
            continue;
        }
        let (radix, max) = match e {
            'x' => (16, 2),
            'u' => (16, 4),
            'U' => (16, 8),
            '0'..='7' => (8, 3),
            _ => return None,
        };
        let mut digits = String::new();
        if radix == 8 {
            digits.push(e);
        }
        while digits.len() < max {
            match chars.peek() {
                Some(d) if d.is_digit(radix) => {
                    digits.push(*d);
                    chars.next();
                }
                _ => break,
            }
        }
        let code = u32::from_str_radix(&digits, radix).ok()?;
        out.push(char::from_u32(code)?);
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(src: &str) -> Vec<String> {
        parse(src)
            .commands
            .iter()
            .map(|c| {
                c.iter()
                    .map(|w| {
                        if w.dynamic {
                            format!("<{}>", w.text)
                        } else {
                            w.text.clone()
                        }
                    })
                    .collect::<Vec<_>>()
                    .join(" ")
            })
            .collect()
    }

    #[test]
    fn finds_commands_everywhere() {
        assert_eq!(names("a && b; c | d & e"), vec!["a", "b", "c", "d", "e"]);
        assert_eq!(
            names("echo $(rm -rf x)"),
            vec!["echo <$(rm -rf x)>", "rm -rf x"]
        );
        // (A backquoted substitution is written `$(…)` before parsing.)
        assert_eq!(
            names("echo `rm -rf x`"),
            vec!["echo <$(rm -rf x)>", "rm -rf x"]
        );
        assert_eq!(names("( rm -rf x )"), vec!["rm -rf x"]);
        assert_eq!(names("{ rm -rf x; }"), vec!["rm -rf x"]);
        assert_eq!(
            names("if true; then rm -rf x; fi"),
            vec!["true", "rm -rf x"]
        );
        assert_eq!(names("while rm -rf x; do :; done"), vec!["rm -rf x", ":"]);
        assert_eq!(names("for f in a; do rm -rf $f; done"), vec!["rm -rf <$f>"]);
        assert_eq!(names("f() { rm -rf x; }"), vec!["rm -rf x"]);
        assert_eq!(names("! rm -rf x"), vec!["rm -rf x"]);
        assert_eq!(names("X=$(rm -rf x)"), vec!["rm -rf x"]);
        assert_eq!(
            names("echo \"a $(rm -rf x) b\""),
            vec!["echo <\"a $(rm -rf x) b\">", "rm -rf x"]
        );
        assert_eq!(
            names("cat <(rm -rf x) > $(rm y)"),
            vec!["cat <<(rm -rf x)>", "rm -rf x", "rm y"]
        );
        assert_eq!(names("case a in a) rm -rf x;; esac"), vec!["rm -rf x"]);
    }

    /// Words after a redirection's target, or after a here-document's delimiter, are the
    /// command's, in source order (the grammar hangs them on the redirection).
    #[test]
    fn words_after_a_redirection_are_the_commands() {
        for (line, want) in [
            ("rm >f -rf x", "rm -rf x"),
            ("rm 2>&1 -rf x", "rm -rf x"),
            ("rm <<E -rf x\nhi\nE", "rm -rf x"),
            ("rm <<-E -rf x\n\thi\nE", "rm -rf x"),
            ("rm <<E >f -rf x\nhi\nE", "rm -rf x"),
            ("rm -r <<E -f x\nhi\nE", "rm -r -f x"),
        ] {
            assert_eq!(names(line), vec![want], "{line:?}");
        }
    }

    #[test]
    fn quote_removal() {
        assert_eq!(names("'r'm \"-rf\" \\x r\"\"m"), vec!["rm -rf x rm"]);
        assert_eq!(names("$'\\x72\\155' -rf"), vec!["rm -rf"]);
        assert_eq!(names("FOO=1 rm -rf x 2>&1 >/dev/null"), vec!["rm -rf x"]);
        assert_eq!(names("echo 'rm -rf x'"), vec!["echo rm -rf x"]);
        assert_eq!(names("rm -rf *"), vec!["rm -rf <*>"]);
        // An escaped glob character is a literal one; an unescaped one after it still globs.
        assert_eq!(names("rm -rf \\* a\\?b \\[x]"), vec!["rm -rf * a?b [x]"]);
        assert_eq!(names("rm -rf \\\\*"), vec!["rm -rf <\\\\*>"]);
        assert_eq!(names("$CMD -rf x"), vec!["<$CMD> -rf x"]);
    }

    /// Each one-character escape of `$'…'` is the character bash's manual gives it (and
    /// `printf %s $'<\n>'` prints here); one it does not know leaves the word unjudged.
    #[test]
    fn each_ansi_c_escape_is_its_character() {
        for (escape, want) in [
            ('n', '\n'),
            ('t', '\t'),
            ('r', '\r'),
            ('a', '\x07'),
            ('b', '\x08'),
            ('e', '\x1b'),
            ('E', '\x1b'),
            ('f', '\x0c'),
            ('v', '\x0b'),
            ('\\', '\\'),
            ('\'', '\''),
            ('"', '"'),
            ('?', '?'),
        ] {
            assert_eq!(
                decode_ansi_c(&format!("<\\{escape}>")),
                Some(format!("<{want}>")),
                "\\{escape}"
            );
        }
        assert_eq!(decode_ansi_c("\\q"), None);
        assert_eq!(decode_ansi_c("x\\"), None);
    }

    /// A numeric escape takes up to its most digits (`\x` 2 hex, `\u` 4, `\U` 8, octal 3) and
    /// no more, as bash reads them (`$'\x726'` is `r6`), and ends early at a character that
    /// is no digit of its base (`$'\x7z'` is BEL then `z`, `$'\18'` is `\x01` then `8`); a
    /// code that is no character is not read.
    #[test]
    fn each_numeric_escape_takes_its_most_digits() {
        for (src, want) in [
            ("\\x72", "r"),
            ("\\x726", "r6"),
            ("\\u72", "r"),
            ("\\u00726", "r6"),
            ("\\U72", "r"),
            ("\\U000000726", "r6"),
            ("\\162", "r"),
            ("\\1621", "r1"),
            ("\\x7z", "\x07z"),
            ("\\u72\\u6d", "rm"),
            ("\\U6dg", "mg"),
            ("\\18", "\x018"),
            ("\\x7", "\x07"),
        ] {
            assert_eq!(decode_ansi_c(src).as_deref(), Some(want), "{src}");
        }
        assert_eq!(decode_ansi_c("\\UD800"), None, "a surrogate");
    }

    #[test]
    fn quoted_pieces_of_a_glob_are_literal_in_its_pattern() {
        let pattern = |src: &str| parse(src).commands[0][0].pattern.clone();
        assert_eq!(pattern("\"r\"[m] -rf x").as_deref(), Some("r[m]"));
        assert_eq!(pattern("'r'?").as_deref(), Some("r?"));
        // A quoted glob character matches only itself, as bash reads `'*'[m]` and `"a?"[b]`.
        assert_eq!(pattern("'*'[m]").as_deref(), Some("\\*[m]"));
        assert_eq!(pattern("\"a?\"[b]").as_deref(), Some("a\\?[b]"));
        assert_eq!(pattern("'[x]\\'*").as_deref(), Some("\\[x\\]\\\\*"));
        assert_eq!(pattern("\"rm\""), None);
    }

    #[test]
    fn broken_input_still_reports_what_it_found() {
        let p = parse("rm -rf x; if then");
        assert!(p.broken);
        assert!(!parse("rm -rf x").broken);
        assert!(parse("echo 'unterminated").broken);
        // A command the grammar misses where bash wants one is broken; after assignments or
        // redirections alone it is not (bash runs no command there).
        for broken in ["ls |", "| cat", "ls &&", "&& ls", "ls; ;", "for", "( )"] {
            assert!(parse(broken).broken, "{broken:?}");
        }
        for (fine, commands) in [
            ("x=$(ls) 2>/dev/null", vec!["ls"]),
            ("x=$(ls)", vec!["ls"]),
            ("x=1 2>f", vec![]),
            ("2>&1", vec![]),
            ("> f $(rm x)", vec!["<$(rm x)>", "rm x"]),
        ] {
            assert!(!parse(fine).broken, "{fine:?}");
            // The missing name is no command of its own.
            assert_eq!(names(fine), commands, "{fine:?}");
        }
    }
}
