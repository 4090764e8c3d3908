//! Bash's steps before parsing that the grammar (tree-sitter-bash) gets wrong, done on the text
//! first, so the parser sees the words bash would run.
//!
//! Invariants:
//! - A line continuation (`\` then a newline, outside single quotes, `$'…'`, comments and
//!   here-document bodies) is removed, as bash's reader does: `r\⏎m` is the word `rm`.
//! - `$"…"` (a locale-translated string; without a message catalog, its text) is written `"…"`,
//!   wherever the grammar reads words (in substitutions, `${…}` and expanded here-document
//!   bodies too): the grammar never sees one.
//! - A line starting with `\` gets a leading space (the grammar otherwise joins it to the line
//!   before); a command name holding `[` or `?` or starting with `!` (`[r]m`, `r[a-z]`, `e?v`,
//!   `!ls`) gets `''` before it (the grammar otherwise reads a test, an array subscript, an
//!   error, or `!` and another name).
//! - Brace expansion is done on every unquoted word but an assignment before a command, as bash
//!   does before any other expansion: `{rm,}` is `rm`, `a{b,c}d` is `abd acd`, `{1..3}` is
//!   `1 2 3`, `echo a={x,y}` is `echo a=x a=y`; quoted braces, `${…}`, `a={x,y} cmd`, and a
//!   brace without a comma or a sequence stay as written. At most [`MAX_WORDS`] words come
//!   out of one word: a word that gives more (`rm {-rf,}{,}{,}{,}{,}{,}{,}{,}{,} x` runs `rm
//!   -rf … x`) stays as written and the line is too big to read.
//! - The reserved words `!`, `time` (with its `-p` and `--`) and `coproc` (with the name it
//!   takes before a compound command) are dropped where bash reads them: first in a command
//!   or after another reserved word, never after an assignment or a redirection (`a=1 time
//!   x` runs a program `time`) nor as the word after `coproc` (`coproc time x` too). They
//!   change a command's status, report its time or run it in the background, not what runs,
//!   and the grammar reads none of them right. A `coproc` name holding a substitution (which
//!   bash runs) is kept as a `: NAME;` command. (`/usr/bin/time` and `env time` are programs,
//!   left to the wrappers.)
//! - A here-string (`<<< x`, which the grammar does not read after a compound command or
//!   another redirection) is written as an input redirection (`< x`): the same commands run.
//! - Where the grammar would split or join words bash does not, a character is written in
//!   another quoting that means the same to bash: a `$` that starts no expansion is `\$`
//!   (`a=$ rm` is no `a=$rm`); a backslash escape right after a quoted piece or an expansion is
//!   single-quoted (`''\rm` is `'''r'm`, one word); the `#`, brackets and braces of an
//!   assignment's value before a command are single-quoted (`b=#[ x`), as is an escaped blank
//!   there (`b=\  x`).
//! - A backquoted substitution is written `$(…)`, the backslashes bash removes in it (before
//!   `$`, `` ` ``, `\`) removed: the grammar reads none nested or inside `${…}`. An empty
//!   substitution (`` `` ``, `$()`) is written as nothing, as it expands to no word. The words
//!   of a `${…}` are normalised as any word's pieces.
//! - An expanded here-document body (unquoted delimiter) is left out and its command
//!   substitutions, wherever they stand in it, are written after the last delimiter of its line
//!   as the arguments of a `:` command (the grammar misses one after a leading blank). A
//!   quoted body is copied as written; a body the text ends inside is closed.
//! - Everything else is copied as written: quotes, `$(…)` bodies (normalised themselves).
//! - Substitutions nest at most [`MAX_NESTING`] deep in what is read, a line holds at most
//!   [`MAX_PIPES`] pipes and brace expansion writes at most [`MAX_EXPANSION`] pieces (both
//!   counted on over every script of one line), and a word brace-expands into at most
//!   [`MAX_WORDS`] words: deeper or past that, the text stops there (the word
//!   stays as written) and the line is reported too big ([`normalise_bounded`]), so no line
//!   exhausts the stack or makes the grammar's parse quadratic (a pipeline's is), and no word
//!   escapes a rule by expanding into more words than are read.
//! - Pure and total: any text gives a text.

/// The most words one word may expand into.
pub const MAX_WORDS: usize = 256;

/// How deep substitutions may nest in a line the normaliser reads (a script nests a few).
pub const MAX_NESTING: usize = 64;

/// The most pipes (`|`, `|&`) a line the normaliser reads may hold, substitutions included
/// (the grammar's parse of one pipeline takes time quadratic in its length; a script holds a
/// few dozen).
pub const MAX_PIPES: usize = 1024;

/// How many pieces (characters, quoted strings) brace expansion may write in one line, the
/// words it copies on the way counted: a line's expansions stay linear in its length.
pub const MAX_EXPANSION: usize = 1 << 20;

/// What the scripts of one line have read so far, against the line's bounds.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Pipes (`|`, `|&`), at most [`MAX_PIPES`].
    pub pipes: usize,
    /// Pieces written by brace expansion, at most [`MAX_EXPANSION`].
    pub expanded: usize,
}

/// `src` with bash's pre-parse steps done.
pub fn normalise(src: &str) -> String {
    normalise_bounded(src, &mut Tally::default()).0
}

/// `src` with bash's pre-parse steps done, and whether it is too big to read: its
/// substitutions nest deeper than [`MAX_NESTING`], a word brace-expands into more than
/// [`MAX_WORDS`] words, or `tally` (what the same line's other scripts read before it,
/// counted on here) passes [`MAX_PIPES`] or [`MAX_EXPANSION`]. The text then stops there (the
/// line cannot be judged), so no line can exhaust the stack or make the analysis quadratic.
pub fn normalise_bounded(src: &str, tally: &mut Tally) -> (String, bool) {
    let mut lx = Lexer::new(src, 0);
    lx.tally = *tally;
    let text = lx.normal(false);
    *tally = lx.tally;
    (text, lx.too_big)
}

/// A here-document whose body is still to come.
struct Heredoc {
    delimiter: String,
    /// `<<-`: leading tabs are stripped.
    strip: bool,
    /// The delimiter is unquoted: bash expands the body (its substitutions run).
    expands: bool,
}

struct Lexer {
    c: Vec<char>,
    i: usize,
    /// Here-documents whose bodies start after the next newline.
    heredocs: Vec<Heredoc>,
    /// Substitutions open around the text being read.
    nesting: usize,
    /// What the line has read so far, in substitutions too.
    tally: Tally,
    /// The line is too big to read ([`normalise_bounded`] says how).
    too_big: bool,
}

/// Words after which a command name may follow.
const RESERVED: &[&str] = &[
    "if", "then", "else", "elif", "do", "while", "until", "!", "{", "time",
];

/// Words that start a compound command (with `(`, a metacharacter).
const COMPOUND: &[&str] = &["{", "while", "until", "if", "for", "case", "select", "[["];

/// One piece of a word: an unquoted character (which brace expansion may act on), or text
/// copied as written (a quoted string, an escaped character, a substitution).
#[derive(Debug, Clone, PartialEq)]
enum Seg {
    Plain(char),
    Quoted(String),
}

fn is_meta(c: char) -> bool {
    matches!(
        c,
        '|' | '&' | ';' | '(' | ')' | '<' | '>' | ' ' | '\t' | '\n'
    )
}

impl Lexer {
    fn new(src: &str, nesting: usize) -> Lexer {
        Lexer {
            c: src.chars().collect(),
            i: 0,
            heredocs: Vec::new(),
            nesting,
            tally: Tally::default(),
            too_big: false,
        }
    }

    /// A lexer for `src` nested one level inside this one; what it reads counts as ours, and
    /// its verdict on size is ours.
    fn nested(&mut self, src: &str, read: impl FnOnce(&mut Lexer) -> String) -> String {
        if self.nesting >= MAX_NESTING {
            self.too_big = true;
            return String::new();
        }
        let mut inner = Lexer::new(src, self.nesting + 1);
        inner.tally = self.tally;
        let text = read(&mut inner);
        self.tally = inner.tally;
        self.too_big |= inner.too_big;
        text
    }

    fn peek(&self, k: usize) -> Option<char> {
        self.c.get(self.i + k).copied()
    }

    /// Commands, until the end or (when `nested`) an unmatched `)`, which is consumed.
    fn normal(&mut self, nested: bool) -> String {
        if nested {
            if self.nesting >= MAX_NESTING {
                // Deeper than any script: the rest is not read.
                self.too_big = true;
                self.i = self.c.len();
                return String::new();
            }
            self.nesting += 1;
            let text = self.normal_commands(true);
            self.nesting -= 1;
            return text;
        }
        self.normal_commands(false)
    }

    fn normal_commands(&mut self, nested: bool) -> String {
        let mut out = String::new();
        let mut depth = 0usize;
        // Open `case` commands: a `)` ends a pattern there, not the substitution.
        let mut cases = 0usize;
        // The next word is a command name (or a reserved word, an assignment before one).
        let mut command_position = true;
        // The next word is a redirection's target.
        let mut redirect_target = false;
        // A reserved word is read as one here: the first word of a command, or the word after
        // another reserved word (`a=1 time x` and `>f ! x` run programs named `time` and `!`).
        let mut keywords = true;
        while let Some(ch) = self.peek(0) {
            match ch {
                '\\' if self.peek(1) == Some('\n') => {
                    self.i += 2;
                }
                '\n' => {
                    self.i += 1;
                    out.push('\n');
                    self.heredoc_bodies(&mut out);
                    if self.peek(0) == Some('\\') && self.peek(1) != Some('\n') {
                        out.push(' ');
                    }
                    command_position = true;
                    keywords = true;
                }
                ' ' | '\t' => {
                    self.i += 1;
                    out.push(ch);
                }
                '|' | '&' | ';' => {
                    self.i += 1;
                    out.push(ch);
                    command_position = true;
                    keywords = true;
                    if ch == '|' && self.peek(0) == Some('|') {
                        self.i += 1;
                        out.push('|');
                    } else if ch == '|' {
                        self.tally.pipes += 1;
                        if self.tally.pipes > MAX_PIPES {
                            // More than any script holds: the rest is not read.
                            self.too_big = true;
                            self.i = self.c.len();
                            return out;
                        }
                    }
                }
                '(' => {
                    self.i += 1;
                    depth += 1;
                    out.push(ch);
                    command_position = true;
                    keywords = true;
                    redirect_target = false;
                }
                ')' => {
                    self.i += 1;
                    out.push(ch);
                    if depth == 0 && nested && cases == 0 {
                        return out;
                    }
                    depth = depth.saturating_sub(1);
                    // After a `case` pattern.
                    command_position = true;
                    keywords = true;
                }
                '<' if self.peek(1) == Some('<') && self.peek(2) != Some('<') => {
                    self.i += 2;
                    out.push_str("<<");
                    keywords = false;
                    let strip = self.peek(0) == Some('-');
                    if strip {
                        self.i += 1;
                        out.push('-');
                    }
                    while matches!(self.peek(0), Some(' ' | '\t')) {
                        out.push(self.c[self.i]);
                        self.i += 1;
                    }
                    let segs = self.word();
                    let delimiter = unquoted(&segs);
                    out.push_str(&render(&segs));
                    if !delimiter.is_empty() {
                        let expands = segs.iter().all(|s| matches!(s, Seg::Plain(_)));
                        self.heredocs.push(Heredoc {
                            delimiter,
                            strip,
                            expands,
                        });
                    }
                }
                '<' if self.peek(1) == Some('<') && self.peek(2) == Some('<') => {
                    self.i += 3;
                    // The grammar reads no here-string after a compound command or another
                    // redirection; `<` reads a file instead, which runs the same commands.
                    out.push('<');
                    redirect_target = true;
                    keywords = false;
                }
                '<' | '>' => {
                    self.i += 1;
                    out.push(ch);
                    redirect_target = true;
                    keywords = false;
                }
                // A word runs to the next metacharacter, so a `#` here starts a word: a comment.
                '#' => {
                    while let Some(c) = self.peek(0) {
                        if c == '\n' {
                            break;
                        }
                        out.push(c);
                        self.i += 1;
                    }
                }
                _ => {
                    let segs = self.word();
                    let written = render(&segs);
                    let at_keyword = command_position && !redirect_target && keywords;
                    let keyword = |k: &str| at_keyword && plain(&segs, k);
                    // `!` and `time` before a command change its status or report its time,
                    // not what runs; the grammar reads neither before a compound command.
                    if keyword("!") {
                        out.push(' ');
                        continue;
                    }
                    if keyword("time") {
                        self.i += self.time_options();
                        out.push(' ');
                        continue;
                    }
                    // `coproc` runs its command in the background: the grammar does not know
                    // it, and reads the command as its arguments.
                    if keyword("coproc") {
                        out.push(' ');
                        // Bash rejects `coproc coproc x` and `coproc ! x`; reading the
                        // second word as a reserved one is the stricter.
                        loop {
                            let start = self.i;
                            while matches!(self.peek(0), Some(' ' | '\t')) {
                                self.i += 1;
                            }
                            let next = self.word();
                            if !plain(&next, "coproc") && !plain(&next, "!") {
                                self.i = start;
                                break;
                            }
                            out.push(' ');
                        }
                        let (name, compound) = self.coproc_name();
                        match name {
                            Some(name) => out.push_str(&name),
                            // A simple command: its first word is a command name, never a
                            // reserved word (`coproc time x` runs a program `time`).
                            None => keywords = compound,
                        }
                        continue;
                    }
                    // The grammar reads a command name holding `[` as a test or a subscript,
                    // one holding `?` after a name (`e?v`) as an error, and one starting with
                    // `!` (`!ls`, a program of that name) as `!` and another name; an empty
                    // quoted string before it changes nothing for bash.
                    if command_position
                        && !redirect_target
                        && !is_assignment(&segs)
                        && (segs.contains(&Seg::Plain('['))
                            || segs.contains(&Seg::Plain('?'))
                            || segs.first() == Some(&Seg::Plain('!')))
                        && !matches!(written.as_str(), "[" | "[[")
                    {
                        out.push_str("''");
                    }
                    let assignment = command_position && !redirect_target && is_assignment(&segs);
                    match expand_word(&segs, assignment, &mut self.tally.expanded) {
                        Some(words) => out.push_str(&words),
                        None => {
                            self.too_big = true;
                            out.push_str(&render(&segs));
                        }
                    }
                    // A descriptor's number before a redirection (`2>f`) is no word of the
                    // command: the next word may still be its name.
                    let descriptor = !written.is_empty()
                        && written.bytes().all(|b| b.is_ascii_digit())
                        && matches!(self.peek(0), Some('<' | '>'));
                    if redirect_target {
                        redirect_target = false;
                    } else if !descriptor && !written.is_empty() {
                        if command_position && written == "case" {
                            cases += 1;
                        }
                        if command_position && written == "esac" {
                            cases = cases.saturating_sub(1);
                        }
                        command_position = command_position
                            && (is_assignment(&segs) || RESERVED.contains(&written.as_str()));
                    }
                    keywords = RESERVED.iter().any(|r| keyword(r));
                }
            }
        }
        out
    }

    /// After the reserved word `time`: how many characters its options take, `-p` then `--`,
    /// each optional (0 without either), as bash's parser reads them.
    fn time_options(&self) -> usize {
        let mut k = self.i;
        for option in [['-', 'p'], ['-', '-']] {
            let mut j = k;
            while matches!(self.c.get(j), Some(' ' | '\t')) {
                j += 1;
            }
            if self.c.get(j..j + 2) == Some(&option[..])
                && self.c.get(j + 2).is_none_or(|c| is_meta(*c))
            {
                k = j + 2;
            }
        }
        k - self.i
    }

    /// After the reserved word `coproc`: its optional name, which bash reads only before a
    /// compound command (`coproc n { x; }`; `coproc n x` runs `n`). Returns what to write for
    /// the name, consumed (`None`: no name; blanks for a name that runs nothing; `: NAME;` for
    /// one with a substitution, which bash runs), and whether a compound command follows.
    fn coproc_name(&mut self) -> (Option<String>, bool) {
        let start = self.i;
        let compound = |lx: &mut Lexer| {
            while matches!(lx.peek(0), Some(' ' | '\t')) {
                lx.i += 1;
            }
            if lx.peek(0) == Some('(') {
                return true;
            }
            let word = lx.word();
            COMPOUND.iter().any(|k| plain(&word, k))
        };
        if compound(self) {
            self.i = start;
            return (None, true);
        }
        self.i = start;
        while matches!(self.peek(0), Some(' ' | '\t')) {
            self.i += 1;
        }
        let name = self.word();
        let after_name = self.i;
        if name.is_empty() || !compound(self) {
            self.i = start;
            return (None, false);
        }
        self.i = after_name;
        let written = render(&name);
        let runs = written.contains("$(") || written.contains('`');
        let name = if runs {
            format!(": {written};")
        } else {
            " ".repeat(written.chars().count())
        };
        (Some(name), true)
    }

    /// Copy the bodies of the pending here-documents, line by line, up to their delimiters.
    ///
    /// The grammar misses substitutions in a body (one after a leading blank, `\t$(x)`, is
    /// read as text), so an expanded body's substitutions are written after the last
    /// delimiter as the arguments of a `:` command, which the grammar reads as any other, and
    /// the body itself is left out.
    fn heredoc_bodies(&mut self, out: &mut String) {
        let mut substitutions = Vec::new();
        for doc in std::mem::take(&mut self.heredocs) {
            let mut body = String::new();
            let mut closing = None;
            while self.i < self.c.len() {
                let mut line = String::new();
                while let Some(c) = self.peek(0) {
                    self.i += 1;
                    line.push(c);
                    if c == '\n' {
                        break;
                    }
                }
                let text = line.strip_suffix('\n').unwrap_or(&line);
                let text = if doc.strip {
                    text.trim_start_matches('\t')
                } else {
                    text
                };
                if text == doc.delimiter {
                    closing = Some(line);
                    break;
                }
                body.push_str(&line);
            }
            if doc.expands {
                let found = self.nested(&body, |lx| lx.body_substitutions().join(" "));
                substitutions.extend((!found.is_empty()).then_some(found));
                // A body the text ends inside is closed, as bash closes it at the end.
                let closing = closing.unwrap_or_else(|| format!("{}\n", doc.delimiter));
                if !out.ends_with('\n') {
                    out.push('\n');
                }
                out.push_str(&closing);
            } else {
                out.push_str(&body);
                out.push_str(closing.as_deref().unwrap_or(""));
            }
        }
        if !substitutions.is_empty() {
            if !out.ends_with('\n') {
                out.push('\n');
            }
            out.push_str(&format!(": {}\n", substitutions.join(" ")));
        }
    }

    /// The command substitutions bash runs in an expanded here-document body (all of this
    /// lexer's text): `$(…)` and `` `…` ``, anywhere (inside `${…}` and `$((…))` too), each
    /// normalised; a backslash escapes the next character.
    fn body_substitutions(&mut self) -> Vec<String> {
        let mut found = Vec::new();
        while let Some(ch) = self.peek(0) {
            match ch {
                '\\' => self.i += 2,
                '$' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    found.push(substitution(&self.normal(true)));
                }
                '`' => {
                    self.i += 1;
                    found.push(self.backticks());
                }
                _ => self.i += 1,
            }
        }
        found.retain(|s| !s.is_empty());
        found
    }

    /// One word, up to an unquoted blank or metacharacter.
    fn word(&mut self) -> Vec<Seg> {
        let mut segs = Vec::new();
        while let Some(ch) = self.peek(0) {
            match ch {
                c if is_meta(c) => break,
                '\\' => match self.peek(1) {
                    Some('\n') => self.i += 2,
                    Some(n) => {
                        self.i += 2;
                        segs.push(Seg::Quoted(format!("\\{n}")));
                    }
                    None => {
                        self.i += 1;
                        segs.push(Seg::Quoted("\\".to_string()));
                    }
                },
                '\'' => {
                    self.i += 1;
                    segs.push(Seg::Quoted(self.until_quote("'", '\'', false)));
                }
                '"' => {
                    self.i += 1;
                    segs.push(Seg::Quoted(self.double()));
                }
                '`' => {
                    self.i += 1;
                    segs.push(Seg::Quoted(self.backticks()));
                }
                '$' => segs.push(self.dollar()),
                c => {
                    self.i += 1;
                    segs.push(Seg::Plain(c));
                }
            }
        }
        segs
    }

    /// After `$`: `$'…'`, `$"…"`, `$(…)`, `${…}`, or a plain `$`.
    fn dollar(&mut self) -> Seg {
        match self.peek(1) {
            Some('\'') => {
                self.i += 2;
                Seg::Quoted(self.until_quote("$'", '\'', true))
            }
            Some('"') => {
                self.i += 2;
                Seg::Quoted(self.double())
            }
            Some('(') => {
                self.i += 2;
                Seg::Quoted(substitution(&self.normal(true)))
            }
            // A parameter expansion: its words (`${a:-$(x)}`) are read as a word's pieces are,
            // so a substitution inside is normalised too.
            Some('{') => {
                self.i += 2;
                let mut s = String::from("${");
                let mut depth = 0usize;
                while let Some(c) = self.peek(0) {
                    match c {
                        '\\' => {
                            s.extend(self.c[self.i..(self.i + 2).min(self.c.len())].iter());
                            self.i += 2;
                            continue;
                        }
                        '\'' => {
                            self.i += 1;
                            s.push_str(&self.until_quote("'", '\'', false));
                            continue;
                        }
                        '"' => {
                            self.i += 1;
                            s.push_str(&self.double());
                            continue;
                        }
                        '`' => {
                            self.i += 1;
                            s.push_str(&self.backticks());
                            continue;
                        }
                        '$' if self.peek(1) == Some('(') => {
                            self.i += 2;
                            s.push_str(&substitution(&self.normal(true)));
                            continue;
                        }
                        _ => {}
                    }
                    self.i += 1;
                    s.push(c);
                    match c {
                        '{' => depth += 1,
                        '}' if depth == 0 => break,
                        '}' => depth -= 1,
                        _ => {}
                    }
                }
                Seg::Quoted(s)
            }
            // `$$`, the shell's pid, whatever follows it.
            Some('$') => {
                self.i += 2;
                Seg::Quoted("$$".to_string())
            }
            // A `$` that starts no expansion (before a blank, an operator or the end) is a `$`,
            // as bash reads it; the grammar would take the next word for its name (`a=$ rm`).
            next if next.is_none_or(is_meta) => {
                self.i += 1;
                Seg::Quoted("\\$".to_string())
            }
            _ => {
                self.i += 1;
                Seg::Quoted("$".to_string())
            }
        }
    }

    /// The rest of a `"…"` string (the opening quote consumed), quotes included; line
    /// continuations removed, substitutions inside it read as commands.
    fn double(&mut self) -> String {
        let mut s = String::from("\"");
        while let Some(c) = self.peek(0) {
            match c {
                '"' => {
                    self.i += 1;
                    s.push('"');
                    return s;
                }
                '\\' => match self.peek(1) {
                    Some('\n') => self.i += 2,
                    Some(n) => {
                        self.i += 2;
                        s.push('\\');
                        s.push(n);
                    }
                    None => {
                        self.i += 1;
                        s.push('\\');
                    }
                },
                '$' if self.peek(1) == Some('(') => {
                    self.i += 2;
                    s.push_str(&substitution(&self.normal(true)));
                }
                '`' => {
                    self.i += 1;
                    s.push_str(&self.backticks());
                }
                c => {
                    self.i += 1;
                    s.push(c);
                }
            }
        }
        s
    }

    /// A `` `…` `` substitution (the opening backquote consumed), written `$(…)`: its body
    /// with the backslashes bash removes there (before `$`, `` ` `` and `\`) removed, its
    /// commands normalised. The grammar reads no backquotes inside `${…}` nor nested ones.
    fn backticks(&mut self) -> String {
        let raw = self.until_quote("`", '`', true);
        // A lone opening backquote (the line ends inside it) has no closing one to strip.
        let Some(body) = raw.strip_prefix('`').and_then(|r| r.strip_suffix('`')) else {
            return raw;
        };
        let mut unescaped = String::new();
        let mut chars = body.chars().peekable();
        while let Some(c) = chars.next() {
            match chars.peek() {
                Some(&n) if c == '\\' && matches!(n, '$' | '`' | '\\') => {
                    unescaped.push(n);
                    chars.next();
                }
                _ => unescaped.push(c),
            }
        }
        let body = self.nested(&unescaped, |lx| lx.normal(false));
        // A comment in the body would run past the closing parenthesis; a body starting with
        // `(` would make `$((`, an arithmetic expansion.
        let end = if body.contains('#') { "\n)" } else { ")" };
        let start = if body.starts_with('(') { " " } else { "" };
        substitution(&format!("{start}{body}{end}"))
    }

    /// `open` (already consumed) and the text up to the closing `quote`, included when there is
    /// one; `escapes`: a backslash escapes the next character (kept as written).
    fn until_quote(&mut self, open: &str, quote: char, escapes: bool) -> String {
        let mut s = String::from(open);
        while let Some(c) = self.peek(0) {
            self.i += 1;
            s.push(c);
            if c == quote {
                return s;
            }
            if c == '\\' && escapes {
                if let Some(n) = self.peek(0) {
                    self.i += 1;
                    s.push(n);
                }
            }
        }
        s
    }
}

/// A `$(…)` substitution from its normalised body (the closing `)` included): an empty one
/// expands to nothing, as bash has it (the grammar would join the next word to `$()`).
fn substitution(body: &str) -> String {
    if body.trim_start() == ")" {
        String::new()
    } else {
        format!("$({body}")
    }
}

fn render(segs: &[Seg]) -> String {
    let mut s = String::new();
    // Right after a quoted piece or an expansion (`''`, `"…"`, `$a`, `$?`, `$(…)`), where the
    // grammar ends a word at a backslash escape (`''\rm` would be the program `''` and the
    // argument `rm`): such an escape is quoted instead.
    let mut after_quote = false;
    // Inside a `$name` (its `$` is a quoted piece of its own, the name plain characters).
    let mut in_name = false;
    for seg in segs {
        match seg {
            Seg::Plain(c) => {
                // `$?`, `$-`, …: a special parameter's one character.
                let special = "?-*!@#$".contains(*c) && s.ends_with('$');
                s.push(*c);
                let name_char = c.is_ascii_alphanumeric() || *c == '_';
                after_quote = (in_name && name_char) || special;
                in_name = in_name && name_char;
            }
            Seg::Quoted(q) => {
                match escaped(q) {
                    // Quoted, it is a quoted piece itself: the next escape is quoted too.
                    Some(c) if after_quote => s.push_str(&quoted_char(c)),
                    Some(_) => {
                        s.push_str(q);
                        after_quote = false;
                    }
                    None => {
                        s.push_str(q);
                        after_quote = true;
                    }
                }
                in_name = q == "$";
            }
        }
    }
    s
}

/// The character a backslash escape (`\c`) stands for.
fn escaped(q: &str) -> Option<char> {
    let mut chars = q.strip_prefix('\\')?.chars();
    let c = chars.next()?;
    chars.next().is_none().then_some(c)
}

/// `c` single-quoted (a `'` double-quoted), the same character for bash.
fn quoted_char(c: char) -> String {
    if c == '\'' {
        "\"'\"".to_string()
    } else {
        format!("'{c}'")
    }
}

/// An assignment before a command, with the characters of its value that bash takes as they
/// are there (no glob, no brace expansion, no comment) but the grammar does not (`b=#[ x`,
/// `b={$ x`, `b=''[ x`) quoted, which changes nothing for bash.
fn render_assignment(segs: &[Seg]) -> String {
    let mut in_value = false;
    let quoted: Vec<Seg> = segs
        .iter()
        .map(|seg| match seg {
            Seg::Plain(c) if in_value && matches!(c, '#' | '[' | ']' | '{' | '}') => {
                Seg::Quoted(quoted_char(*c))
            }
            Seg::Quoted(q) if in_value && matches!(escaped(q), Some(' ' | '\t')) => {
                Seg::Quoted(quoted_char(q.chars().nth(1).unwrap_or(' ')))
            }
            Seg::Plain(c) => {
                in_value |= *c == '=';
                seg.clone()
            }
            Seg::Quoted(_) => seg.clone(),
        })
        .collect();
    render(&quoted)
}

/// A here-document delimiter's value: quotes and backslashes removed.
fn unquoted(segs: &[Seg]) -> String {
    let mut s = String::new();
    for seg in segs {
        match seg {
            Seg::Plain(c) => s.push(*c),
            Seg::Quoted(q) => {
                let q = q.strip_prefix('$').unwrap_or(q);
                if let Some(inner) = q
                    .strip_prefix('\'')
                    .and_then(|r| r.strip_suffix('\''))
                    .or_else(|| q.strip_prefix('"').and_then(|r| r.strip_suffix('"')))
                {
                    s.push_str(inner);
                } else if let Some(escaped) = q.strip_prefix('\\') {
                    s.push_str(escaped);
                } else {
                    s.push_str(q);
                }
            }
        }
    }
    s
}

/// `segs` is `word` written plainly, no character quoted (a reserved word only counts so).
fn plain(segs: &[Seg], word: &str) -> bool {
    segs.len() == word.chars().count()
        && segs
            .iter()
            .zip(word.chars())
            .all(|(s, c)| *s == Seg::Plain(c))
}

/// An assignment word (`NAME=…`, `NAME+=…`, `NAME[…]=…`): bash does not brace-expand it.
fn is_assignment(segs: &[Seg]) -> bool {
    let mut k = 0;
    while let Some(Seg::Plain(c)) = segs.get(k) {
        if !(c.is_ascii_alphanumeric() || *c == '_') || (k == 0 && c.is_ascii_digit()) {
            break;
        }
        k += 1;
    }
    if k == 0 {
        return false;
    }
    if segs.get(k) == Some(&Seg::Plain('[')) {
        match segs[k..].iter().position(|s| *s == Seg::Plain(']')) {
            Some(close) => k += close + 1,
            None => return false,
        }
    }
    if segs.get(k) == Some(&Seg::Plain('+')) {
        k += 1;
    }
    segs.get(k) == Some(&Seg::Plain('='))
}

/// The word as bash's brace expansion leaves it: its words joined by spaces (empty ones
/// dropped), or as written when it is an assignment before a command or holds no expansion;
/// `None` when it would give more than [`MAX_WORDS`] words, or `expanded` (the pieces the
/// line's expansions wrote before, counted on here) would pass [`MAX_EXPANSION`]. An
/// assignment-shaped argument is expanded like any word.
fn expand_word(segs: &[Seg], assignment: bool, expanded: &mut usize) -> Option<String> {
    if assignment {
        return Some(render_assignment(segs));
    }
    if !segs.contains(&Seg::Plain('{')) {
        return Some(render(segs));
    }
    let mut words = Vec::new();
    if !expand(segs.to_vec(), 0, expanded, &mut words) {
        return None;
    }
    let words: Vec<String> = words
        .iter()
        .map(|w| render(w))
        .filter(|w| !w.is_empty())
        .collect();
    Some(words.join(" "))
}

/// Expand the first brace expression of `segs`, then the rest, `depth` expressions in, each
/// word made counted in `expanded`; false when there are too many words or pieces.
fn expand(segs: Vec<Seg>, depth: usize, expanded: &mut usize, out: &mut Vec<Vec<Seg>>) -> bool {
    // Past `MAX_WORDS` expressions one inside the other, too many: known before the first
    // word, or a word of thousands of expressions would recurse thousands deep. (Each gives
    // at least two words but a one-word sequence, `{a..a}`: that is stricter.)
    *expanded += segs.len();
    if depth > MAX_WORDS || *expanded > MAX_EXPANSION {
        return false;
    }
    let Some((open, close, alternatives)) = first_brace(&segs) else {
        out.push(segs);
        return out.len() <= MAX_WORDS;
    };
    for alt in alternatives {
        let mut w = segs[..open].to_vec();
        w.extend(alt);
        w.extend_from_slice(&segs[close + 1..]);
        if !expand(w, depth + 1, expanded, out) {
            return false;
        }
    }
    true
}

/// The first brace expression: its `{` and `}` and its alternatives. One pass: each `{` is
/// matched with its `}` as bash matches them, and the leftmost pair with a comma directly
/// inside or a sequence is the first.
fn first_brace(segs: &[Seg]) -> Option<(usize, usize, Vec<Vec<Seg>>)> {
    // The braces open so far: each `{` with the commas directly inside it, and whether another
    // brace stands inside it (then it is no sequence).
    let mut open: Vec<(usize, Vec<usize>, bool)> = Vec::new();
    let mut first: Option<(usize, usize, Vec<usize>)> = None;
    for (k, s) in segs.iter().enumerate() {
        match s {
            Seg::Plain('{') => {
                if let Some(outer) = open.last_mut() {
                    outer.2 = true;
                }
                open.push((k, Vec::new(), false));
            }
            Seg::Plain(',') => {
                if let Some(inner) = open.last_mut() {
                    inner.1.push(k);
                }
            }
            Seg::Plain('}') => {
                let Some((o, commas, nested)) = open.pop() else {
                    continue;
                };
                let expands =
                    !commas.is_empty() || (!nested && sequence(&segs[o + 1..k]).is_some());
                if expands && first.as_ref().is_none_or(|f| o < f.0) {
                    first = Some((o, k, commas));
                }
            }
            _ => {}
        }
    }
    let (open, close, commas) = first?;
    let alternatives = if commas.is_empty() {
        sequence(&segs[open + 1..close])?
            .into_iter()
            .map(|t| t.chars().map(Seg::Plain).collect())
            .collect()
    } else {
        let mut alternatives = Vec::new();
        let mut start = open + 1;
        for &c in commas.iter().chain(std::iter::once(&close)) {
            alternatives.push(segs[start..c].to_vec());
            start = c + 1;
        }
        alternatives
    };
    Some((open, close, alternatives))
}

/// `a..b` or `a..b..step` over integers or single letters; `None` when it is not one. Of one
/// that would give more than [`MAX_WORDS`] words, the first `MAX_WORDS + 1`.
fn sequence(segs: &[Seg]) -> Option<Vec<String>> {
    let mut text = String::new();
    for s in segs {
        match s {
            Seg::Plain(c) => text.push(*c),
            Seg::Quoted(_) => return None,
        }
    }
    let parts: Vec<&str> = text.split("..").collect();
    if !(2..=3).contains(&parts.len()) {
        return None;
    }
    let step: i64 = match parts.get(2) {
        Some(s) => s.parse::<i64>().ok()?.checked_abs()?.max(1),
        None => 1,
    };
    let (a, b) = (parts[0], parts[1]);
    let (from, to, letters) = match (a.parse::<i64>(), b.parse::<i64>()) {
        (Ok(x), Ok(y)) => (x, y, false),
        _ => {
            let (mut ca, mut cb) = (a.chars(), b.chars());
            match (ca.next(), ca.next(), cb.next(), cb.next()) {
                (Some(x), None, Some(y), None)
                    if x.is_ascii_alphabetic() && y.is_ascii_alphabetic() =>
                {
                    (x as i64, y as i64, true)
                }
                _ => return None,
            }
        }
    };
    // One word more than may come out of a word is enough to know there are too many.
    let count = ((from.abs_diff(to) / step.unsigned_abs()) + 1).min(MAX_WORDS as u64 + 1);
    let mut v = Vec::new();
    let mut x = from;
    for _ in 0..count {
        v.push(if letters {
            char::from_u32(x as u32)
                .map(String::from)
                .unwrap_or_default()
        } else {
            x.to_string()
        });
        x = if from <= to { x + step } else { x - step };
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::normalise;

    #[test]
    fn a_backquoted_substitution_in_double_quotes_is_normalised_like_any_other() {
        // As bash reads it: `echo "`echo {a,b}`"` prints `a b`.
        assert_eq!(
            normalise("echo \"`[r]m {a,b}`\" x"),
            "echo \"$(''[r]m a b)\" x"
        );
    }

    #[test]
    fn a_backquoted_substitution_is_written_with_a_dollar_and_its_escapes_removed() {
        // Bash removes a backslash before `$`, `` ` `` and `\` in the body, then parses it.
        assert_eq!(
            normalise("echo `echo \\`rm x\\` \\$a \\\\ \\q`"),
            "echo $(echo $(rm x) $a \\ \\q)"
        );
        // The grammar reads none inside `${…}`.
        assert_eq!(normalise("echo ${a:-`rm x`}"), "echo ${a:-$(rm x)}");
        // A comment in the body ends at a newline, before the closing parenthesis; a subshell
        // first is no arithmetic expansion.
        assert_eq!(normalise("echo `x # c`; y"), "echo $(x # c\n); y");
        assert_eq!(normalise("echo `( x )`"), "echo $( ( x ))");
    }

    /// A subshell inside a substitution does not end it: what follows the subshell's `)` is
    /// still the substitution's commands (inside double quotes, the rest would otherwise be
    /// copied as quoted text, its braces unexpanded; bash runs `rm -rf y`).
    #[test]
    fn a_subshell_inside_a_substitution_does_not_end_it() {
        assert_eq!(
            normalise(r#"echo "$( (x) ; rm {-rf,} y )""#),
            r#"echo "$( (x) ; rm -rf y )""#
        );
        assert_eq!(
            normalise(r#"echo "$( ( (x) ) ; rm {-rf,} y )""#),
            r#"echo "$( ( (x) ) ; rm -rf y )""#
        );
    }

    #[test]
    fn an_assignment_is_not_brace_expanded() {
        // As bash has it: `a+={x,y} b={x,y}; echo "$a|$b"` prints `{x,y}|{x,y}`. The value's
        // braces, brackets and `#` are quoted for the grammar, which changes nothing for bash.
        assert_eq!(
            normalise("a+={x,y} b={x,y} c"),
            "a+='{'x,y'}' b='{'x,y'}' c"
        );
        assert_eq!(normalise(">f a={x,y} c"), ">f a='{'x,y'}' c");
        // A name is letters, digits and `_`, not starting with a digit: `9a={x,y} c` runs the
        // command `9a=x` (bash: `9a=x: command not found`).
        assert_eq!(normalise("_a9={x,y} c"), "_a9='{'x,y'}' c");
        assert_eq!(normalise("9a={x,y} c"), "9a=x 9a=y c");
        assert_eq!(normalise("b=#[$ x[1]=a#] c"), "b='#''[''$' x[1]=a'#'']' c");
        // A backslash escape after a quoted piece or an expansion is quoted too: the grammar
        // would end the word there.
        assert_eq!(
            normalise(r"''\rm x; r''\m; $a\x\y; \r\m; ''\'; $?\x $b_\x"),
            r#"'''r'm x; r'''m'; $a'x''y'; \r\m; ''"'"; ''$?'x' $b_'x'"#
        );
    }

    #[test]
    fn an_assignment_shaped_argument_is_brace_expanded() {
        // As bash has it: `echo c a+={x,y}` prints `c a+=x a+=y`, and `declare a={x,y}` gets
        // two arguments (`a` ends as `y`); only the words before the command are assignments.
        assert_eq!(normalise("echo c a+={x,y}"), "echo c a+=x a+=y");
        assert_eq!(normalise("declare a={x,y}"), "declare a=x a=y");
        assert_eq!(normalise("a=1 echo b={x,y}"), "a=1 echo b=x b=y");
    }

    #[test]
    fn line_continuations_go_outside_single_quotes() {
        assert_eq!(normalise("r\\\nm -rf x"), "rm -rf x");
        // Between words and at a line's start.
        assert_eq!(normalise("rm \\\n-rf \\\n x"), "rm -rf  x");
        assert_eq!(normalise("\\\nrm x"), "rm x");
        assert_eq!(normalise("\\\n >f [r]m x"), " >f ''[r]m x");
        // A continuation before the first word leaves it the first: a reserved word still.
        for (line, runs) in [
            ("\\\n time rm x", "   rm x"),
            ("\\\n ! rm x", "   rm x"),
            ("\\\n coproc rm x", "   rm x"),
        ] {
            assert_eq!(normalise(line), runs, "{line:?}");
        }
        assert_eq!(normalise("echo \"a\\\nb\""), "echo \"ab\"");
        assert_eq!(normalise("echo 'a\\\nb'"), "echo 'a\\\nb'");
        assert_eq!(normalise("echo $'a\\\nb'"), "echo $'a\\\nb'");
        assert_eq!(normalise("# a \\\nrm"), "# a \\\nrm");
        // A `#` inside a word is a character; one starting a word starts a comment, copied.
        assert_eq!(
            normalise("echo a#b {c,d} #{e,f}\n{g,h}"),
            "echo a#b c d #{e,f}\ng h"
        );
        assert_eq!(normalise("echo $(r\\\nm x)"), "echo $(rm x)");
    }

    #[test]
    fn translated_strings_and_leading_backslashes() {
        assert_eq!(normalise("env $\"rm\" -rf"), "env \"rm\" -rf");
        assert_eq!(normalise("echo \"$\"x"), "echo \"$\"x");
        assert_eq!(normalise("true\n\\rm -rf x"), "true\n \\rm -rf x");
        assert_eq!(
            normalise("[r]m x; a[1]=2 r[a-z] [x]"),
            "''[r]m x; a[1]=2 ''r[a-z] [x]"
        );
        assert_eq!(normalise("[ -f x ] && [[ a ]]"), "[ -f x ] && [[ a ]]");
        assert_eq!(
            normalise("e?v rm; a=1 g?t x; echo e?v; ? x; x=e?v"),
            "''e?v rm; a=1 ''g?t x; echo e?v; ''? x; x=e?v"
        );
        assert_eq!(normalise("!ls x; ! ls; echo !x"), "''!ls x;   ls; echo !x");
        assert_eq!(normalise("2>f e?v x; 2 e?v"), "2>f ''e?v x; 2 e?v");
        // A `$` that starts no expansion is a `$`: the grammar read `a=$ rm` as `a=$rm`.
        assert_eq!(
            normalise("a=$ rm; echo $$ $ x$;$(a $)"),
            "a=\\$ rm; echo $$ \\$ x\\$;$(a \\$)"
        );
        assert_eq!(
            normalise("cat <([r]m) `[r]m {a,b}`"),
            "cat <(''[r]m) $(''[r]m a b)"
        );
        assert_eq!(
            normalise("case x in x) [r]m;; esac"),
            "case x in x) ''[r]m;; esac"
        );
        assert_eq!(
            normalise("! case x in x) a;; esac"),
            "  case x in x) a;; esac"
        );
        assert_eq!(
            normalise("time -p { a; }; time a; echo ! time; env time -p a"),
            "  { a; };   a; echo ! time; env time -p a"
        );
        assert_eq!(normalise("( a ) <<< x; b <<< x"), "( a ) < x; b < x");
        // `-p` is time's option only as a word of its own: bash runs `-prm` as a program.
        assert_eq!(normalise("time -prm x"), "  -prm x");
        // A redirection from a process substitution is no here-string.
        assert_eq!(
            normalise("cat < <(echo {a,b}) <f<(x)"),
            "cat < <(echo a b) <f<(x)"
        );
        assert_eq!(
            normalise("echo $(case x in x) {a,b};; esac)"),
            "echo $(case x in x) a b;; esac)"
        );
    }

    #[test]
    fn brace_expansion() {
        assert_eq!(normalise("{rm,} -rf x"), "rm -rf x");
        assert_eq!(normalise("{,rm} -rf x"), "rm -rf x");
        assert_eq!(normalise("echo a{b,c}d"), "echo abd acd");
        // A substitution in the preamble is part of it: repeated in every word, as bash does.
        assert_eq!(
            normalise("x$(true){r,}m -rf x"),
            "x$(true)rm x$(true)m -rf x"
        );
        assert_eq!(normalise("$(echo){rm,} -rf x"), "$(echo)rm $(echo) -rf x");
        // `${…}` is not brace-expanded; a substitution inside double quotes is a command line
        // of its own, whose words are (bash prints `a b` for `echo "$(echo {a,b})"`).
        assert_eq!(normalise("echo ${a:-{b,c}}"), "echo ${a:-{b,c}}");
        // A `${…}` ends at its own `}`, braces inside it paired: what follows is read again.
        assert_eq!(
            normalise("echo ${a:-{x}}; {rm,} -rf y"),
            "echo ${a:-{x}}; rm -rf y"
        );
        // An escaped or single-quoted `$` in `${…}` starts no substitution (bash prints
        // `$(x {a,b})`).
        for line in ["echo ${a:-\\$(x {a,b})}", "echo ${a:-'$(x {a,b})'}"] {
            assert_eq!(normalise(line), line);
        }
        assert_eq!(normalise("echo \"$(echo {a,b})\""), "echo \"$(echo a b)\"");
        assert_eq!(normalise("echo {a,{b,c}}"), "echo a b c");
        assert_eq!(
            normalise("echo {1..3} {c..a} {0..6..3}"),
            "echo 1 2 3 c b a 0 3 6"
        );
        // A brace pair that expands to nothing stays as written, and the pairs after it in the
        // word still expand (bash prints `{x}a {x}b a{x}b1 a{x}b2 {x}`).
        assert_eq!(
            normalise("echo {x}{a,b} a{x}b{1..2} {x}"),
            "echo {x}a {x}b a{x}b1 a{x}b2 {x}"
        );
        assert_eq!(
            normalise("echo '{a,b}' \\{a,b} ${x} {} {a} x={a,b}"),
            "echo '{a,b}' \\{a,b} ${x} {} {a} x=a x=b"
        );
        assert_eq!(normalise("{ rm -rf x; }"), "{ rm -rf x; }");
        assert_eq!(
            normalise("find . -exec rm {} \\;"),
            "find . -exec rm {} \\;"
        );
        assert_eq!(normalise("echo {'r'm,}"), "echo 'r'm");
        assert_eq!(normalise("echo {1..100000}"), "echo {1..100000}");
        for unterminated in [
            "echo 'a", "echo \"a", "echo `a", "echo $'a", "echo ${a", "echo $(a",
        ] {
            assert_eq!(normalise(unterminated), unterminated);
        }
    }

    #[test]
    fn a_case_pattern_inside_a_substitution_does_not_end_it() {
        // After `a)` comes a command: `time` before it is dropped as at any command's start.
        // Were that `)` taken for the substitution's end, `time` would be an argument of echo.
        let out = normalise("echo $(case $x in a) time rm -rf y;; esac)");
        assert!(!out.contains("time"), "{out}");
        assert!(out.contains("rm -rf y;; esac)"), "{out}");
    }

    #[test]
    fn an_escaped_quote_does_not_end_an_ansi_c_string() {
        // `$'a\'b'` is one word; what follows it is outside any quote.
        assert_eq!(normalise("echo $'a\\'b' {x,y}"), "echo $'a\\'b' x y");
    }

    #[test]
    fn a_line_may_end_inside_a_quote_or_on_a_backslash() {
        assert_eq!(normalise("echo \"abc\\"), "echo \"abc\\");
        assert_eq!(normalise("echo \"abc"), "echo \"abc");
        assert_eq!(normalise("echo abc\\"), "echo abc\\");
        assert_eq!(normalise("echo `"), "echo `");
        // The empty substitution expands to nothing; the lone backquote runs to the end.
        assert_eq!(normalise("echo `` `{a,b}"), "echo  `{a,b}");
    }

    #[test]
    fn a_quoted_here_document_body_is_copied() {
        let s = "cat <<-'E'\n\t{a,b} $(x)\n\tE\n";
        assert_eq!(normalise(s), s);
        let s = "cat <<\\E\n`x`\nE\necho {a,b}";
        assert_eq!(normalise(s), "cat <<\\E\n`x`\nE\necho a b");
    }

    #[test]
    fn an_expanded_here_document_body_is_left_out_and_its_substitutions_run_after_it() {
        let s = "cat <<EOF\n{a,b} \\\nx\nEOF\necho {a,b}";
        assert_eq!(normalise(s), "cat <<EOF\nEOF\necho a b");
        // Blanks between the operator and the delimiter, as bash takes them.
        let s = "cat << \t EOF\n{a,b}\nEOF\necho {c,d}";
        assert_eq!(normalise(s), "cat << \t EOF\nEOF\necho c d");
        // After a blank (which the grammar reads as text), in `${…}`, backquoted, escaped.
        let s = "cat <<-E\n\t$(a)\n ${b:-$(c)} `d` \\$(e) \\\\$(f)\n\tE\ng";
        assert_eq!(normalise(s), "cat <<-E\n\tE\n: $(a) $(c) $(d) $(f)\ng");
        // Two on one line: the substitutions after the last; a body the text ends in closed.
        let s = "cat <<A <<B\n$(a)\nA\n$(b)";
        assert_eq!(normalise(s), "cat <<A <<B\nA\nB\n: $(a) $(b)\n");
    }
}
