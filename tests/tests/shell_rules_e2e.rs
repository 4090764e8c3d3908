//! Deny rules for `shell` judge what the command line runs, through the real `openmax --stdio`
//! against the loopback mock: every way of spelling `rm -rf` that bash would run is refused by
//! one rule `shell(rm -rf *)` in `auto` mode (nothing is deleted), and the harmless near-misses
//! (`rm -rf` inside a quoted argument, `grep rm`) run. Every stream is validated.

use openmax_tests::*;
use serde_json::{json, Value};

const BYPASSES: &[&str] = &[
    "rm  -rf victim",
    "rm -fr victim",
    "rm -r -f victim",
    "rm -Rf victim",
    "rm --recursive --force victim",
    "/bin/rm -rf victim",
    "\\rm -rf victim",
    "'rm' \"-rf\" victim",
    "env rm -rf victim",
    "env - rm -rf victim",
    "env a-b=1 =x 1a=2 rm -rf victim",
    "command rm -rf victim",
    "exec rm -rf victim",
    "nice -n 5 rm -rf victim",
    "nohup rm -rf victim",
    "timeout 5 rm -rf victim",
    "time rm -rf victim",
    "! rm -rf victim",
    "FOO=1 rm -rf victim",
    "bash -c 'rm -rf victim'",
    "sh -c \"cd . && rm -rf victim\"",
    "echo $(rm -rf victim)",
    "echo `rm -rf victim`",
    "( rm -rf victim )",
    "{ rm -rf victim; }",
    "if true; then rm -rf victim; fi",
    "while true; do rm -rf victim; break; done",
    "for d in victim; do rm -rf \"$d\"; done",
    "f() { rm -rf victim; }; f",
    "echo ok && rm -rf victim",
    "find . -maxdepth 1 -name victim -exec rm -rf {} +",
    // Forms the grammar alone misread.
    "rm >/dev/null -rf victim",
    "true && rm 2>&1 -rf victim",
    "coproc rm -rf victim; wait",
    "coproc n { rm -rf victim; }; wait",
    "coproc n$(rm -rf victim) { :; }; wait",
    "coproc n`rm -rf victim` ( : ); wait",
    "time -- rm -rf victim",
    "b=\\  rm -rf victim",
    "b=1 `` rm -rf victim",
    "trap 'rm -rf victim' EXIT",
    "cat <<E\n  $(rm -rf victim)\nE",
    "echo ${a:-`rm -rf victim`}",
    "echo `echo \\`rm -rf victim\\``",
    "echo \"$( (true) ; rm {-rf,} victim )\"",
    "rm {-rf,}{,}{,}{,}{,}{,}{,}{,}{,} victim",
];

const NEAR_MISSES: &[&str] = &[
    "echo 'rm -rf victim'",
    "echo \"bash -c 'rm -rf victim'\"",
    "grep -r rm notes.txt",
    "ls victim",
    // A lone `-` is the program a wrapper other than `env` runs (there is none here).
    "nice - rm -rf victim || true",
    "timeout 5 - rm -rf victim || true",
];

/// Run one turn in `auto` mode with the rule `shell(rm -rf *)` in which the model asks for one
/// shell call per line (`c0`, `c1`, …); the environment (with `victim/keep.txt`) and the
/// turn's events, after checking the turn and the process ended cleanly.
fn run_lines(lines: &[&str]) -> (TestEnv, Vec<Value>) {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(
        Flavor::Anthropic,
        &mock.base_url(),
        "[permissions]\ndeny = [\"shell(rm -rf *)\"]\n[limits]\nmax_iterations = 200\n",
    );
    env.trust();
    env.write("victim/keep.txt", "keep\n");
    env.write("notes.txt", "rm is a command\n");
    for (i, line) in lines.iter().enumerate() {
        mock.push(tool_reply(
            &format!("c{i}"),
            "shell",
            json!({ "command": line }),
        ));
    }
    mock.push(text_reply("all done"));
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("clean up");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(s.finish().0, Some(0));
    (env, evs)
}

#[test]
fn one_deny_rule_catches_every_spelling_and_lets_near_misses_run() {
    let lines: Vec<&str> = BYPASSES.iter().chain(NEAR_MISSES).copied().collect();
    let (env, evs) = run_lines(&lines);
    let end = |i: usize| -> &Value {
        evs.iter()
            .find(|e| e["type"] == "tool_end" && e["call_id"] == format!("c{i}"))
            .unwrap_or_else(|| panic!("no tool_end for {}", lines[i]))
    };
    for (i, line) in BYPASSES.iter().enumerate() {
        let e = end(i);
        assert_eq!(e["ok"], false, "{line}: {e}");
        assert_eq!(e["output"], "denied by rule shell(rm -rf *)", "{line}");
    }
    for (k, line) in NEAR_MISSES.iter().enumerate() {
        let e = end(BYPASSES.len() + k);
        assert_eq!(e["ok"], true, "{line}: {e}");
    }
    assert_eq!(env.read("victim/keep.txt").as_deref(), Some("keep\n"));
    assert!(!types(&evs).contains(&"approval_request".to_string()));
}

/// The control: run by bash itself, with no openmax in between, every bypass line deletes
/// `victim` and no near miss does, so the test above cannot pass on a line that runs nothing.
#[test]
fn every_bypass_line_deletes_the_victim_when_bash_runs_it() {
    for (line, deletes) in BYPASSES
        .iter()
        .map(|l| (l, true))
        .chain(NEAR_MISSES.iter().map(|l| (l, false)))
    {
        let env = TestEnv::new();
        env.write("victim/keep.txt", "keep\n");
        env.write("notes.txt", "rm is a command\n");
        let out = std::process::Command::new("bash")
            .args(["-c", line])
            .current_dir(&env.project)
            .stdin(std::process::Stdio::null())
            .output()
            .unwrap();
        assert_eq!(
            env.read("victim/keep.txt").is_none(),
            deletes,
            "{line}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// A command line far bigger than any script (thousands of nested `$(`, a word of thousands
/// of brace expressions) is judged without exhausting openmax's stack or stalling it: the turn
/// ends, the calls are refused, nothing is deleted.
#[test]
fn a_deeply_nested_command_line_is_judged_without_a_crash() {
    let n = 20_000;
    let lines = [
        format!("{}rm -rf victim{}", "$(".repeat(n), ")".repeat(n)),
        format!("ls {}; rm -rf victim", "{a,b}".repeat(5 * n)),
    ];
    let (env, evs) = run_lines(&lines.iter().map(String::as_str).collect::<Vec<_>>());
    for i in 0..lines.len() {
        let end = evs
            .iter()
            .find(|e| e["type"] == "tool_end" && e["call_id"] == format!("c{i}"))
            .expect("the call ended");
        assert_eq!(end["ok"], false, "{end}");
    }
    assert_eq!(env.read("victim/keep.txt").as_deref(), Some("keep\n"));
}
