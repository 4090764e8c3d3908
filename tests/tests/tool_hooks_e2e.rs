//! Blocking `tool_start` hooks through the real binary: a hook refusing `shell(git push*)`
//! keeps the command from running (its marker file never appears) and the model's next
//! request carries the reason; a hook rewriting `write_file`'s path makes the file appear at
//! the new path, with the rewritten arguments on `tool_start` and the approval card; a hook
//! that times out refuses the call (fail closed); `match` leaves other tools alone.

use openmax_tests::*;
use serde_json::{json, Value};

/// A user config for the mock with these `[[hooks]]` tables and mode `auto` unless `ask`.
fn setup(env: &TestEnv, mock: &MockServer, hooks: &str) {
    env.mock_config(Flavor::Anthropic, &mock.base_url(), &format!("\n{hooks}\n"));
    env.trust();
}

fn of_type<'a>(evs: &'a [Value], ty: &str) -> Vec<&'a Value> {
    evs.iter().filter(|e| e["type"] == ty).collect()
}

/// A hook script (outside the project, so a user hook) with this body.
fn script(env: &TestEnv, name: &str, body: &str) -> String {
    let path = env.root.join(name);
    std::fs::write(&path, body).unwrap();
    path.display().to_string()
}

#[test]
fn a_hook_refusing_git_push_keeps_the_command_from_running_and_the_model_reads_why() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_calls_reply(&[
            (
                "c1",
                "shell",
                json!({"command": "touch pushed.marker && git push origin main"}),
            ),
            ("c2", "shell", json!({"command": "touch listed.marker"})),
        ]),
        text_reply("I will not push."),
    ]);
    let payloads = env.root.join("payloads.jsonl");
    let guard = script(
        &env,
        "guard.sh",
        &format!(
            "payload=$(cat); printf '%s\\n' \"$payload\" >> '{}'\n\
             case \"$payload\" in *'git push'*) echo 'pushing is for humans (policy P-7)' >&2; exit 2;; esac\n",
            payloads.display()
        ),
    );
    setup(
        &env,
        &mock,
        &format!(
            "[[hooks]]\nevent = \"tool_start\"\nmatch = \"shell\"\ncommand = [\"sh\", \"{guard}\"]\nblocking = true"
        ),
    );
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("ship it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let ends = of_type(&evs, "tool_end");
    assert_eq!(ends.len(), 2, "{evs:?}");
    assert_eq!(ends[0]["call_id"], "c1");
    assert_eq!(ends[0]["ok"], false);
    assert_eq!(
        ends[0]["output"],
        "refused by the tool_start hook tool_start:sh: pushing is for humans (policy P-7); the call was not run"
    );
    assert_eq!(ends[1]["ok"], true, "the turn went on: {evs:?}");
    assert!(
        !env.project.join("pushed.marker").exists(),
        "the refused command ran"
    );
    assert!(env.project.join("listed.marker").exists());
    let reqs = mock.requests();
    assert_eq!(reqs.len(), 2);
    assert!(reqs[1].body.to_string().contains("policy P-7"));
    let seen: Vec<Value> = std::fs::read_to_string(&payloads)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(seen.len(), 2, "the hook saw both calls");
    assert_eq!(seen[0]["event"], "tool_start");
    assert_eq!(seen[0]["name"], "shell");
    assert_eq!(seen[0]["call_id"], "c1");
    assert_eq!(
        seen[0]["args"]["command"],
        "touch pushed.marker && git push origin main"
    );
    assert_eq!(seen[0]["project"], env.project.display().to_string());
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_hook_rewriting_write_files_path_writes_there_and_says_so() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply(
            "c1",
            "write_file",
            json!({"path": "notes.txt", "content": "hello\n"}),
        ),
        tool_reply("c2", "read_file", json!({"path": "notes.txt"})),
        text_reply("saved"),
    ]);
    let rewrite = script(
        &env,
        "rewrite.py",
        "import json, sys\n\
         p = json.load(sys.stdin)\n\
         a = p['args']\n\
         a['path'] = 'drafts/' + a['path']\n\
         print(json.dumps({'decision': 'rewrite', 'args': a}))\n",
    );
    setup(
        &env,
        &mock,
        &format!(
            "[[hooks]]\nevent = \"tool_start\"\nmatch = \"write_file|edit_file\"\ncommand = [\"python3\", \"{rewrite}\"]\nblocking = true"
        ),
    );
    let mut s = env.stdio(&[]);
    s.user("save a note");
    let evs = s.until_type("approval_request");
    let start = find(&evs, "tool_start");
    assert_eq!(
        start["args"],
        json!({"path": "drafts/notes.txt", "content": "hello\n"})
    );
    let card = find(&evs, "approval_request");
    assert!(
        card["summary"]
            .as_str()
            .unwrap()
            .contains("drafts/notes.txt"),
        "{card}"
    );
    assert!(
        card["detail"]
            .as_str()
            .unwrap()
            .starts_with("Arguments rewritten by the tool_start hook tool_start:python3"),
        "{card}"
    );
    s.approve(&card["approval_id"], true);
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    assert_eq!(
        env.read("drafts/notes.txt").as_deref(),
        Some("hello\n"),
        "the file is at the rewritten path"
    );
    assert!(
        env.read("notes.txt").is_none(),
        "nothing at the model's path"
    );
    let note = of_type(&evs, "harness_note")
        .into_iter()
        .find(|n| n["call_id"] == "c1")
        .expect("a note rides the rewritten call's result");
    assert!(note["text"]
        .as_str()
        .unwrap()
        .contains("the call was made with {\"path\":\"drafts/notes.txt\""));
    // read_file is not matched: it reads the model's path, which does not exist.
    let ends = of_type(&evs, "tool_end");
    let read = ends.iter().find(|e| e["call_id"] == "c2").unwrap();
    assert_eq!(read["ok"], false, "{read}");
    assert_eq!(s.finish().0, Some(0));
}

/// A hook's decision is its last JSON line however much it printed before, up to what is
/// read of its output (64 KiB); a hook that exits 0 with more has failed, which refuses the
/// call (its decision may be in what was not read).
#[test]
fn a_decision_after_long_output_is_heard_and_output_past_the_cap_fails_the_hook() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_calls_reply(&[
            ("c1", "shell", json!({"command": "touch logs.marker"})),
            ("c2", "shell", json!({"command": "touch flood.marker"})),
            ("c3", "shell", json!({"command": "touch plain.marker"})),
        ]),
        text_reply("ok"),
    ]);
    let guard = script(
        &env,
        "guard.sh",
        "payload=$(cat)\n\
         case \"$payload\" in\n\
         *logs*) head -c 8000 /dev/zero | tr '\\0' x; echo; \
         echo '{\"decision\":\"refuse\",\"reason\":\"seen after the logs\"}';;\n\
         *flood*) head -c 70000 /dev/zero | tr '\\0' y; echo;;\n\
         esac\n",
    );
    setup(
        &env,
        &mock,
        &format!(
            "[[hooks]]\nevent = \"tool_start\"\ncommand = [\"sh\", \"{guard}\"]\nblocking = true"
        ),
    );
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("touch them");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    let ends = of_type(&evs, "tool_end");
    assert_eq!(ends.len(), 3, "{evs:?}");
    assert_eq!(ends[0]["ok"], false);
    assert!(
        ends[0]["output"]
            .as_str()
            .unwrap()
            .contains("seen after the logs"),
        "{}",
        ends[0]
    );
    assert_eq!(ends[1]["ok"], false);
    let failed = find(&evs, "hook_failed");
    assert!(
        failed["detail"].as_str().unwrap().contains("passed 64 KiB"),
        "{failed}"
    );
    assert_eq!(ends[2]["ok"], true, "{}", ends[2]);
    assert!(!env.project.join("logs.marker").exists());
    assert!(!env.project.join("flood.marker").exists());
    assert!(env.project.join("plain.marker").exists());
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_hook_that_times_out_refuses_the_call() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply("c1", "shell", json!({"command": "touch ran.marker"})),
        text_reply("ok"),
    ]);
    setup(
        &env,
        &mock,
        "[[hooks]]\nevent = \"tool_start\"\ncommand = [\"sleep\", \"30\"]\nblocking = true\ntimeout_s = 0.5",
    );
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    let t0 = std::time::Instant::now();
    s.user("touch it");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{evs:?}");
    assert!(t0.elapsed() < std::time::Duration::from_secs(20));
    let failed = find(&evs, "hook_failed");
    assert_eq!(failed["hook"], "tool_start:sleep");
    assert_eq!(failed["event"], "tool_start");
    assert!(
        failed["detail"].as_str().unwrap().contains("timed out"),
        "{failed}"
    );
    let end = find(&evs, "tool_end");
    assert_eq!(end["ok"], false);
    assert!(
        end["output"].as_str().unwrap().starts_with(
            "refused: the blocking tool_start hook tool_start:sleep did not answer (timed out"
        ),
        "{end}"
    );
    assert!(!env.project.join("ran.marker").exists());
    assert!(mock.requests()[1]
        .body
        .to_string()
        .contains("did not answer"));
    assert_eq!(s.finish().0, Some(0));
}

#[test]
fn a_project_tool_start_hook_refuses_until_a_human_approves_it() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![
        tool_reply("c1", "shell", json!({"command": "touch ran.marker"})),
        text_reply("ok"),
        tool_reply("c2", "shell", json!({"command": "touch ran.marker"})),
        text_reply("ok"),
    ]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.write("hooks/pass.sh", "exit 0\n");
    env.project_config(
        "[[hooks]]\nevent = \"tool_start\"\nmatch = \"shell\"\ncommand = [\"sh\", \"hooks/pass.sh\"]\nblocking = true\n",
    );
    env.trust();
    env.set_mode("auto");
    let mut s = env.stdio(&[]);
    s.user("touch it");
    let (evs, _) = s.turn();
    let failed = find(&evs, "hook_failed");
    assert!(failed["detail"]
        .as_str()
        .unwrap()
        .contains("openmax --approve hooks/pass.sh"));
    assert_eq!(find(&evs, "tool_end")["ok"], false);
    assert!(!env.project.join("ran.marker").exists());
    s.finish();

    let out = env.run_on_tty(&["--approve", "hooks/pass.sh"]);
    assert_eq!(out.code, Some(0), "{}{}", out.stdout, out.stderr);
    assert!(out.stdout.contains("match \"shell\""), "{}", out.stdout);
    let mut s = env.stdio(&[]);
    s.user("touch it");
    let (evs, _) = s.turn();
    assert_eq!(find(&evs, "tool_end")["ok"], true, "{evs:?}");
    assert!(env.project.join("ran.marker").exists());
    s.finish();
}
