//! The `shell` tool: output, exit status, stdin, environment, caps, timeouts and cancel — and
//! no process left behind.

mod tools_support;

use std::time::Duration;

use openmax_shell::tools::{self, PlanSandbox};
use serde_json::json;
use tools_support::{eventually, live_in_group, process_dead, Project};

#[tokio::test]
async fn output_and_exit_status() {
    let p = Project::new("sh-basic");
    let out = p
        .call(
            "shell",
            json!({"command": "echo out; echo err >&2; echo again"}),
        )
        .await;
    assert!(out.ok);
    assert_eq!(out.output, "out\nerr\nagain\nexit status: 0");
    let out = p
        .call("shell", json!({"command": "echo failing; exit 3"}))
        .await;
    assert!(!out.ok);
    assert_eq!(out.output, "failing\nexit status: 3");
    let out = p.call("shell", json!({"command": "true"})).await;
    assert_eq!(out.output, "(no output)\nexit status: 0");
    let out = p
        .call("shell", json!({"command": "printf partial; kill -9 $$"}))
        .await;
    assert!(!out.ok);
    assert_eq!(out.output, "partial\nkilled by signal 9 (SIGKILL)");
}

#[tokio::test]
async fn runs_in_the_project_with_the_session_and_closed_stdin() {
    let p = Project::new("sh-env");
    let out = p.call("shell", json!({"command": "pwd; echo \"s=$OPENMAX_AGENT_SESSION\"; cat; read x; echo \"read=$?\""})).await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(
        out.output,
        format!(
            "{}\ns=test-session\nread=1\nexit status: 0",
            p.dir.path().display()
        )
    );
}

#[tokio::test]
async fn output_is_capped_keeping_head_and_tail() {
    let mut p = Project::new("sh-cap");
    p.ctx.output_cap_bytes = 1000;
    let out = p.call("shell", json!({"command": "seq 1 100000"})).await;
    assert!(out.ok);
    assert!(out.output.starts_with("1\n2\n3\n"), "{}", out.output);
    assert!(
        out.output.ends_with("99999\n100000\nexit status: 0"),
        "{}",
        out.output
    );
    assert!(
        out.output.contains("\n[output truncated: "),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains(" bytes omitted from the middle (588895 bytes in total)]\n"),
        "{}",
        out.output
    );
    assert!(out.output.len() < 1200);
}

#[tokio::test]
async fn plan_targets_the_whole_command_line() {
    let p = Project::new("sh-plan");
    let plan = p.plan(
        "shell",
        json!({"command": "cargo build && cargo test; git status | head -5"}),
    );
    assert!(plan.mutating);
    assert_eq!(plan.invalid, None);
    // The core's rules parse the line themselves (what it runs, not how it is spelled).
    assert_eq!(
        plan.targets,
        ["cargo build && cargo test; git status | head -5"]
    );
    assert_eq!(
        plan.summary,
        "shell: cargo build && cargo test; git status | head -5"
    );
    assert_eq!(
        plan.detail,
        "cargo build && cargo test; git status | head -5"
    );
    let plan = p.plan("shell", json!({"command": "echo 'a; b'\nls"}));
    assert_eq!(plan.targets, ["echo 'a; b'\nls"]);
    assert_eq!(plan.summary, "shell: echo 'a; b' …");
    p.refused(
        "shell",
        json!({"command": "  "}),
        "shell: the command is empty",
    )
    .await;
    p.refused(
        "shell",
        json!({"command": "ls", "timeout_s": 0}),
        "argument `timeout_s` must be a number of seconds > 0",
    )
    .await;
    p.refused(
        "shell",
        json!({"command": "ls", "timeout_s": 99999}),
        "timeout_s must be at most 3600",
    )
    .await;
    p.refused(
        "shell",
        json!({"cmd": "ls"}),
        "unknown argument `cmd` (accepted: command, timeout_s, sandbox, justification)",
    )
    .await;
    // Asking to run outside the sandbox: the plan carries the model's reason; the core decides.
    let plan = p.plan(
        "shell",
        json!({"command": "make install", "sandbox": "off", "justification": " writes ~/.local "}),
    );
    assert_eq!(
        plan.sandbox,
        PlanSandbox::Escalate {
            justification: "writes ~/.local".into()
        }
    );
    // No kernel sandbox in this context: nothing read-only to offer.
    let plan = p.plan("shell", json!({"command": "ls", "sandbox": "on"}));
    assert_eq!(plan.sandbox, PlanSandbox::Session);
    p.refused(
        "shell",
        json!({"command": "make install", "sandbox": "off"}),
        "\"sandbox\": \"off\" needs a \"justification\"",
    )
    .await;
    p.refused(
        "shell",
        json!({"command": "ls", "sandbox": "none"}),
        "\"sandbox\" must be \"on\" or \"off\"",
    )
    .await;
}

/// Read a pid the command wrote to `file`, waiting for it to appear.
fn wait_pid(p: &Project, file: &str) -> u32 {
    let path = p.dir.path().join(file);
    assert!(
        eventually(10, || std::fs::read_to_string(&path)
            .is_ok_and(|s| s.ends_with('\n'))),
        "{file} never written"
    );
    std::fs::read_to_string(&path)
        .unwrap()
        .trim()
        .parse()
        .expect("a pid")
}

#[tokio::test]
async fn timeout_kills_the_whole_group() {
    let p = Project::new("sh-timeout");
    let cmd = "echo $$ > leader.pid; sleep 60 & echo $! > bg.pid; echo started; sleep 60";
    // A guard against a hang (the sleeps outlast it), not a timing assertion.
    let out = tokio::time::timeout(
        Duration::from_secs(20),
        p.call("shell", json!({"command": cmd, "timeout_s": 0.5})),
    )
    .await
    .expect("the timeout ends the call");
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "started\ntimed out after 0.5s; the command and its process group were killed"
    );
    let leader = wait_pid(&p, "leader.pid");
    let bg = wait_pid(&p, "bg.pid");
    assert!(
        eventually(10, || process_dead(bg)),
        "background sleep {bg} survived"
    );
    assert!(
        eventually(10, || live_in_group(leader).is_empty()),
        "group {leader} has {:?}",
        live_in_group(leader)
    );
}

#[tokio::test]
async fn background_children_do_not_outlive_a_finished_command() {
    let p = Project::new("sh-bg");
    let out = p
        .call(
            "shell",
            json!({"command": "sleep 30 & echo $! > bg.pid; echo $$ > leader.pid; echo done"}),
        )
        .await;
    assert!(out.ok);
    assert_eq!(out.output, "done\nexit status: 0");
    let bg = wait_pid(&p, "bg.pid");
    let leader = wait_pid(&p, "leader.pid");
    assert!(
        eventually(10, || process_dead(bg)),
        "background sleep {bg} survived"
    );
    assert!(eventually(10, || live_in_group(leader).is_empty()));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cancel_kills_the_group_and_returns() {
    let p = Project::new("sh-cancel");
    let (tx, rx) = tokio::sync::oneshot::channel();
    let ctx = p.ctx.clone();
    let args = json!({"command": "sleep 30 & echo $! > bg.pid; echo $$ > leader.pid; sleep 30"});
    let task = tokio::spawn(async move { tools::run(&ctx, "shell", &args, rx).await });
    let bg = wait_pid(&p, "bg.pid");
    let leader = wait_pid(&p, "leader.pid");
    tx.send(()).expect("the run is waiting");
    // A guard against a hang, not a timing assertion.
    let out = tokio::time::timeout(Duration::from_secs(20), task)
        .await
        .expect("cancel returns")
        .expect("no panic");
    assert!(!out.ok);
    assert_eq!(
        out.output,
        "(no output)\ncancelled; the command and its process group were killed"
    );
    assert!(
        eventually(10, || process_dead(bg)),
        "background sleep {bg} survived"
    );
    assert!(eventually(10, || live_in_group(leader).is_empty()));
}

#[tokio::test]
async fn dropped_cancel_sender_is_not_a_cancel() {
    let p = Project::new("sh-drop");
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    drop(tx);
    let out = tools::run(&p.ctx, "shell", &json!({"command": "echo fine"}), rx).await;
    assert!(out.ok);
    assert_eq!(out.output, "fine\nexit status: 0");
}

#[tokio::test]
async fn dropping_the_run_future_kills_the_group() {
    let p = Project::new("sh-dropfut");
    let (_tx, rx) = tokio::sync::oneshot::channel::<()>();
    let args = json!({"command": "echo $$ > leader.pid; sleep 30"});
    let run = tools::run(&p.ctx, "shell", &args, rx);
    let leader_path = p.dir.path().join("leader.pid");
    tokio::select! {
        _ = run => panic!("sleep 30 finished"),
        _ = async {
            while !std::fs::read_to_string(&leader_path).is_ok_and(|s| s.ends_with('\n')) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        } => {}
    }
    let leader = wait_pid(&p, "leader.pid");
    assert!(
        eventually(10, || live_in_group(leader).is_empty()),
        "{:?}",
        live_in_group(leader)
    );
}

#[tokio::test]
async fn cancel_stops_read_only_tools() {
    let p = Project::new("sh-cancel-ro");
    p.dir.write("a.txt", "x\n");
    let (tx, rx) = tokio::sync::oneshot::channel();
    tx.send(()).unwrap();
    let out = tools::run(&p.ctx, "grep", &json!({"pattern": "x"}), rx).await;
    // The grep may finish before it sees the cancel; either way it ends.
    assert!(
        out.output == "grep: cancelled" || out.output == "a.txt:1:x\n",
        "{}",
        out.output
    );
}
