//! The `shell(…)` rules against the real bash: every generated line (`common::shell_gen`: the
//! program spelled in every quoting, path, glob and brace form, wrapped in every wrapper form the
//! parser knows, nested shells, substitutions, lists) is run by bash with a stub program `zap`
//! that records each run; whenever the stub ran, the rule `shell(zap -rf *)` must deny the line.
//! The tools themselves (env, xargs, timeout, nice, …) decide what runs, so an option whose
//! value the parser does not know about, or a spelling bash reads differently, fails here.
//!
//! Each wrapper form is also checked to run the stub at all when it stands alone, so a form
//! the generator gets wrong cannot pass by running nothing. Forms whose program is not
//! installed here (sudo, doas, busybox, zsh, ksh) or that cannot run the stub (a cleared
//! `PATH`, an interactive prompt) are only judged by `shell_rules_props.rs`.

mod common;

use std::io::Write;
use std::path::PathBuf;
use std::process::{Command, Stdio};

use common::shell_gen::{all_layers, cases, check_random, Base, Layer, Spelling};
use openmax_core::permissions::{Permissions, Rule, SHELL_TOOL};

struct Stage {
    root: PathBuf,
    bin: PathBuf,
    log: PathBuf,
}

impl Stage {
    fn new() -> Stage {
        static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
        let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let root =
            std::env::temp_dir().join(format!("openmax-rules-bash-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        let bin = root.join("bin");
        let work = root.join("work");
        std::fs::create_dir_all(&bin).unwrap();
        std::fs::create_dir_all(&work).unwrap();
        let log = root.join("ran.log");
        let stub = bin.join("zap");
        std::fs::write(
            &stub,
            format!("#!/bin/sh\necho \"zap $*\" >> '{}'\n", log.display()),
        )
        .unwrap();
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&stub, std::fs::Permissions::from_mode(0o755)).unwrap();
        // Files named like the program and the wrappers in the working directory, for globs
        // bash expands there (`z?p` becomes `zap`, `e?v` becomes `env`, found on PATH).
        for name in ["zap", "env", "nohup", "xargs"] {
            std::fs::write(work.join(name), "").unwrap();
        }
        Stage { root, bin, log }
    }

    fn dir(&self) -> String {
        self.bin.display().to_string()
    }

    /// Run `line` with bash; whether the stub ran.
    fn ran(&self, line: &str) -> bool {
        let _ = std::fs::remove_file(&self.log);
        let mut child = Command::new("timeout")
            .args(["10", "bash", "-c", line])
            .env_clear()
            .env("PATH", format!("{}:/usr/bin:/bin", self.bin.display()))
            .env("HOME", self.root.join("work"))
            .current_dir(self.root.join("work"))
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("bash starts");
        if let Some(mut stdin) = child.stdin.take() {
            let _ = stdin.write_all(b"x\n");
        }
        let _ = child.wait();
        // (A plain `setsid` forks only when it leads its process group, which a command bash
        // runs here never does: every form returns after the stub ran.)
        self.log.exists()
    }
}

impl Drop for Stage {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn deny() -> Permissions {
    Permissions {
        deny: vec![Rule::parse("shell(zap -rf *)").unwrap()],
        ask: Vec::new(),
    }
}

fn denied(p: &Permissions, line: &str) -> bool {
    p.denied_by(SHELL_TOOL, &[line.to_string()]).is_some()
}

fn bases() -> Vec<Base> {
    ["-rf x", "-fr x", "-r -f x", "-rf"]
        .iter()
        .map(|a| Base {
            program: "zap",
            args: a.split(' ').map(str::to_string).collect(),
        })
        .collect()
}

fn installed(program: &str) -> bool {
    Command::new("bash")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Whether an `env` prefix empties the environment (so the stub is not on PATH): `-`,
/// `--ignore-environment` (or its abbreviation), or `-i` in a cluster before a letter taking a
/// value.
fn clears_environment(text: &str) -> bool {
    let mut words = text.split_whitespace();
    if words.next() != Some("env") {
        return false;
    }
    for w in words {
        if w == "-" || (w.len() > 4 && "--ignore-environment".starts_with(w)) {
            return true;
        }
        if let Some(cluster) = w.strip_prefix('-').filter(|c| !c.starts_with('-')) {
            let before_value = cluster.split(['u', 'C', 'S']).next().unwrap_or("");
            if before_value.contains('i') {
                return true;
            }
        }
    }
    false
}

/// Whether a layer alone can run the stub here.
fn can_run(layer: &Layer) -> bool {
    let text = match layer {
        Layer::Prefix(t)
        | Layer::Template(t)
        | Layer::ShellSingle(t)
        | Layer::ShellDouble(t)
        | Layer::EnvSplit(t)
        | Layer::Context(t)
        | Layer::Assign(t)
        | Layer::Between(t) => *t,
    };
    let first = text.split_whitespace().next().unwrap_or("");
    let interactive = text.contains("-ok");
    // `command -p` searches the default PATH; a login shell (`-l`) resets PATH.
    let default_path = text.starts_with("command -p") || text.starts_with("bash -lc");
    !clears_environment(text)
        && !default_path
        && !interactive
        && (first.starts_with('{')
            || installed(first)
            || !first
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '/'))
}

#[test]
fn whenever_bash_runs_the_denied_program_the_rule_denies_the_line() {
    if !installed("bash") {
        eprintln!("bash is not installed: skipped");
        return;
    }
    let stage = Stage::new();
    let p = deny();
    let layers = all_layers();
    let bases = bases();
    let dir = stage.dir();
    let mut wrong = Vec::new();
    let mut never_ran = Vec::new();
    // Every spelling alone, every layer alone.
    for s in Spelling::ALL {
        let line = bases[0].line(s, &dir);
        let ran = stage.ran(&line.text);
        if ran && !denied(&p, &line.text) {
            wrong.push(line.text.clone());
        }
        if !ran {
            never_ran.push(format!("spelling {s:?}: {}", line.text));
        }
    }
    for layer in &layers {
        let line = common::shell_gen::apply(*layer, &bases[0].line(Spelling::Plain, &dir))
            .expect("a plain simple line takes every layer");
        let ran = stage.ran(&line.text);
        if ran && !denied(&p, &line.text) {
            wrong.push(line.text.clone());
        }
        if !ran && can_run(layer) {
            never_ran.push(format!("layer {layer:?}: {}", line.text));
        }
    }
    assert!(
        wrong.is_empty(),
        "bash ran `zap -rf` but the rule did not deny:\n{}",
        wrong.join("\n")
    );
    assert!(
        never_ran.is_empty(),
        "these forms never ran the program (a generator form bash does not read as meant):\n{}",
        never_ran.join("\n")
    );
}

#[test]
fn composed_lines_bash_runs_are_denied() {
    if !installed("bash") {
        eprintln!("bash is not installed: skipped");
        return;
    }
    let stage = Stage::new();
    let p = deny();
    let layers = all_layers();
    let bases = bases();
    let dir = stage.dir();
    let mut ran_count = 0u32;
    let _ = check_random(
        cases(300),
        |case| {
            let line = case.render(&bases, &layers, &dir)?;
            if !stage.ran(&line.text) {
                return None;
            }
            ran_count += 1;
            Some(denied(&p, &line.text))
        },
        |case| {
            case.render(&bases, &layers, &dir)
                .map(|l| format!("bash ran zap -rf, the rule did not deny: {:?}", l.text))
                .unwrap_or_default()
        },
    );
    assert!(ran_count > 0, "no generated line ran the program");
}

/// Every two contexts the generator composes give a line bash reads: a line bash rejects
/// runs nothing, so a property over it would judge a line no shell runs (`coproc` before a
/// function definition is one).
#[test]
fn every_two_contexts_the_generator_composes_are_bash() {
    if !installed("bash") {
        eprintln!("bash is not installed: skipped");
        return;
    }
    let contexts: Vec<Layer> = all_layers()
        .into_iter()
        .filter(|l| matches!(l, Layer::Context(_)))
        .collect();
    let base = common::shell_gen::Line {
        text: "echo x".to_string(),
        simple: true,
        unjudgeable: false,
    };
    let mut rejected = Vec::new();
    let mut read = 0;
    for inner in &contexts {
        let Some(once) = common::shell_gen::apply(*inner, &base) else {
            continue;
        };
        for outer in &contexts {
            let Some(twice) = common::shell_gen::apply(*outer, &once) else {
                continue;
            };
            let ok = Command::new("bash")
                .args(["-n", "-c", &twice.text])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success());
            read += 1;
            if !ok {
                rejected.push(twice.text);
            }
        }
    }
    assert!(read > contexts.len(), "{read} lines composed");
    assert!(rejected.is_empty(), "bash rejects: {rejected:#?}");
}

/// Every line the analysis judges, built from a command word of up to two of 34 characters
/// (quotes, `$`, braces, globs, `!`, `=`, `#`, operators, blanks, …) in 21 places (first,
/// after an assignment, after another command, after a redirection, in a pipeline, in a
/// subshell, as an assignment's value, after `coproc` and `time --`, before a redirection and
/// the rest of its command, before a substitution in a here-document or a `${…}`, …), is run by bash with no program to be found: bash's
/// `command_not_found_handle` records each program it would have run. Each recorded name made
/// of program characters must be among the programs the analysis names, or a rule on that
/// program could not see it (`a=$ rm` was read as `a=$rm`, `rm >f -rf x` as `rm` alone).
#[test]
fn the_programs_bash_runs_are_among_those_the_analysis_names() {
    if !installed("bash") {
        eprintln!("bash is not installed: skipped");
        return;
    }
    // (No `>`: a redirection would leave files behind for later lines' globs to find.)
    const ALPHABET: [char; 34] = [
        'a', '1', '-', '.', '?', '*', '[', ']', '!', '\'', '"', '\\', '$', '{', '}', ',', '=', '%',
        '@', ':', '~', '#', '^', '+', ';', '&', '|', '<', '(', ')', '`', ' ', '\t', '\n',
    ];
    let mut words: Vec<String> = ALPHABET.iter().map(|c| c.to_string()).collect();
    for a in ALPHABET {
        for b in ALPHABET {
            words.push(format!("{a}{b}"));
        }
    }
    let mut cases = Vec::new();
    for w in &words {
        for line in [
            format!("{w} x"),
            format!("b=1 {w} x"),
            format!("x; {w} x"),
            format!("2>/dev/null {w} x"),
            format!("x | {w} x"),
            format!("( {w} x )"),
            format!("b={w} x"),
            format!("x && {w} x"),
            format!("! {w} x"),
            format!("time -- {w} x"),
            format!("{{ {w} x; }}"),
            format!("if {w} x; then :; fi"),
            format!("x $({w} x)"),
            format!("coproc {w} x"),
            format!("coproc n {{ {w} x; }}"),
            format!("{w} >/dev/null x"),
            format!("x {w} >/dev/null x"),
            format!("b=1 >/dev/null {w} x"),
            format!(": <<E\n{w}$(x)\nE"),
            format!(": <<-E\n\t{w}`x` x\nE"),
            format!("x ${{a:-{w}`x`}}"),
        ] {
            let a = openmax_core::permissions::unwrap::analyse(&line);
            if a.unjudgeable.is_empty() {
                let named: Vec<String> = a.commands.into_iter().map(|c| c.program).collect();
                cases.push((line, named));
            }
        }
    }
    // One bash runs every line with `eval`, a syntax error ending only that line; a line with
    // a substitution in a subshell of its own (bash exits on a syntax error inside one). Each
    // record names its line by the number the recording process inherited, so a background
    // job that outlives its line (`( a& x )`) is still counted for it.
    let stage = Stage::new();
    let mut script = String::from(
        "command_not_found_handle() { printf '%s\\002%s\\001' \"$OPENMAX_LINE\" \"$1\" >&3; return 127; }\n\
         PATH=/nonexistent\n",
    );
    for (n, (line, _)) in cases.iter().enumerate() {
        let hex: String = line.bytes().map(|b| format!("\\x{b:02x}")).collect();
        let (open, close) = if line.contains(['(', '`']) {
            ("( ", "; wait )")
        } else {
            ("{ ", "; wait; }")
        };
        script.push_str(&format!(
            "OPENMAX_LINE={n}; printf '\\003%s\\001' {n} >&3\n\
             {open}eval $'{hex}'{close} </dev/null >/dev/null 2>&1\n"
        ));
    }
    let (script_path, log) = (stage.root.join("all.sh"), stage.root.join("names.log"));
    std::fs::write(&script_path, script).unwrap();
    let status = Command::new("bash")
        .args(["-c", "exec 3>\"$1\"; . \"$2\"", "_"])
        .arg(&log)
        .arg(&script_path)
        .current_dir(stage.root.join("work"))
        .env_clear()
        .env("HOME", stage.root.join("work"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .expect("bash starts");
    assert!(status.code().is_some(), "bash was killed: {status:?}");
    let log = String::from_utf8_lossy(&std::fs::read(&log).unwrap()).into_owned();
    let mut seen = 0;
    let mut recorded = 0;
    let mut missed = Vec::new();
    let mut names_of_a_x = Vec::new();
    for record in log.split('\u{1}').filter(|r| !r.is_empty()) {
        if record.starts_with('\u{3}') {
            seen += 1;
            continue;
        }
        let (n, name) = record
            .split_once('\u{2}')
            .expect("a record is a line and a name");
        let (line, named) = &cases[n.parse::<usize>().unwrap()];
        recorded += 1;
        if line == "a x" {
            names_of_a_x.push(name);
        }
        let program_like = name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._+-".contains(c));
        if program_like && !named.iter().any(|p| p == name) {
            missed.push(format!(
                "{line:?}: bash ran {name:?}, the analysis named {named:?}"
            ));
        }
    }
    // The control: the plainest line's program is recorded, so the handler works.
    assert_eq!(names_of_a_x, ["a"], "bash did not record `a x` alone");
    assert_eq!(seen, cases.len(), "bash stopped before the last line");
    assert!(recorded >= cases.len(), "only {recorded} programs recorded");
    assert!(missed.is_empty(), "{}", missed.join("\n"));
}
