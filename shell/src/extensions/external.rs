//! Planning and running external tool calls.
//!
//! Plan: the call's [`SourceGate`] carries the manifest path, the sha of the source bytes as they
//! are *now* (so an edit after the freeze asks again), the env grant, and whether a human
//! approved exactly those bytes. Run: the bytes are hashed again and must still be the planned
//! ones; the process gets the arguments as JSON on stdin, runs in the project in its own process
//! group with only PATH, HOME, LANG, its allowlist and `OPENMAX_AGENT_SESSION` (never the
//! provider key nor `OPENMAX_HOME`, whatever the allowlist says), and is killed
//! with its group at the timeout or on cancel.

use std::path::Path;

use openmax_core::tool::{SourceGate, ToolOutcome, ToolPlan};

use super::manifest::ExternalTool;
use super::source::short;
use crate::extensions::process::{self, ProcessSpec, Status};
use crate::text::{one_line, SUMMARY_CHARS};

/// Variables every external tool receives from openmax's own environment when set.
pub const BASE_ENV: [&str; 3] = ["PATH", "HOME", "LANG"];

/// Inspect a call. `approved(source_path, full_sha256)` asks the project's approval store.
pub fn plan(
    tool: &ExternalTool,
    project: &Path,
    args: &serde_json::Value,
    approved: &dyn Fn(&str, &str) -> bool,
) -> ToolPlan {
    let mut plan = ToolPlan {
        mutating: tool.mutating,
        targets: vec![args.to_string()],
        summary: one_line(&format!("{} {}", tool.name, args), SUMMARY_CHARS),
        detail: detail(tool, args),
        source: None,
        invalid: None,
        sandbox: Default::default(),
        confirm: None,
    };
    if let Some(problem) = check_args(tool, args) {
        plan.invalid = Some(problem);
        return plan;
    }
    match tool.current_sha256(project) {
        Ok(sha) => {
            plan.source = Some(SourceGate {
                source_path: tool.manifest_path.clone(),
                source_sha: short(&sha),
                env: tool.env.clone(),
                approved: approved(&tool.manifest_path, &sha),
            });
        }
        Err(e) => plan.invalid = Some(format!("external tool {} cannot be run: {e}", tool.name)),
    }
    plan
}

/// Run a call whose plan showed `planned_sha` (12 hex), in the session `ctx` describes (its
/// `agent_session` is exported as `OPENMAX_AGENT_SESSION`; its sandbox prepares the process).
pub async fn run(
    tool: &ExternalTool,
    project: &Path,
    args: &serde_json::Value,
    planned_sha: &str,
    ctx: &crate::tools::ToolContext,
    cancel: tokio::sync::oneshot::Receiver<()>,
) -> ToolOutcome {
    match tool.current_sha256(project) {
        Ok(sha) if short(&sha) == planned_sha => {}
        Ok(sha) => {
            return failed(format!(
            "{} changed since it was approved (sha {} is now {}); call the tool again to review it",
            tool.manifest_path,
            planned_sha,
            short(&sha)
        ))
        }
        Err(e) => return failed(format!("external tool {} cannot be run: {e}", tool.name)),
    }
    let (sandbox, output_cap) = (&ctx.sandbox, ctx.output_cap_bytes);
    let env = sandbox.granted_env(
        BASE_ENV
            .iter()
            .copied()
            .chain(tool.env.iter().map(String::as_str)),
        &ctx.agent_session,
    );
    let spec = ProcessSpec {
        argv: tool.command.clone(),
        cwd: project.to_path_buf(),
        env,
        stdin: args.to_string().into_bytes(),
        timeout_ms: tool.timeout_ms,
        output_cap,
        sandbox: sandbox.clone(),
    };
    outcome(
        process::run(spec, cancel).await,
        output_cap,
        tool.timeout_ms,
    )
}

/// What the model reads of a finished run: stdout, then `[stderr]` and stderr when there is
/// any, the cut, and how it ended unless it exited 0.
fn outcome(r: process::ProcessResult, output_cap: usize, timeout_ms: u64) -> ToolOutcome {
    let mut output = r.stdout;
    if !r.stderr.trim().is_empty() {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str("[stderr]\n");
        output.push_str(&r.stderr);
    }
    if r.truncated {
        output.push_str(&format!("\n[output cut at {output_cap} bytes]"));
    }
    let ok = matches!(r.status, Status::Exited(0));
    if !ok {
        if !output.is_empty() && !output.ends_with('\n') {
            output.push('\n');
        }
        output.push_str(&r.status.describe(timeout_ms));
    }
    ToolOutcome {
        ok,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

fn failed(output: String) -> ToolOutcome {
    ToolOutcome {
        ok: false,
        output,
        diffs: Vec::new(),
        images: Vec::new(),
    }
}

/// Arguments must be an object holding every `required` property of the manifest's schema.
fn check_args(tool: &ExternalTool, args: &serde_json::Value) -> Option<String> {
    let obj = match args.as_object() {
        Some(o) => o,
        None => return Some(format!("arguments to {} must be a JSON object", tool.name)),
    };
    let required = tool.parameters.get("required").and_then(|r| r.as_array());
    for r in required.into_iter().flatten() {
        if let Some(name) = r.as_str() {
            if !obj.contains_key(name) {
                return Some(format!(
                    "missing required argument {name:?} for {}",
                    tool.name
                ));
            }
        }
    }
    None
}

fn detail(tool: &ExternalTool, args: &serde_json::Value) -> String {
    let mut d = format!(
        "external tool {} ({})\ncommand: {}\narguments (stdin): {}\nsource files: {}",
        tool.name,
        tool.manifest_path,
        tool.command.join(" "),
        args,
        tool.source_files.join(", ")
    );
    if tool.mutating {
        d.push_str("\nmutating: yes");
    }
    d
}

#[cfg(test)]
mod tests {
    use super::process::{ProcessResult, Status};
    use super::*;

    fn ran(status: Status, stdout: &str, stderr: &str, truncated: bool) -> (bool, String) {
        let r = ProcessResult {
            status,
            stdout: stdout.into(),
            stderr: stderr.into(),
            truncated,
        };
        let o = outcome(r, 100, 2000);
        (o.ok, o.output)
    }

    #[test]
    fn the_output_is_stdout_then_stderr_then_how_it_ended() {
        assert_eq!(
            ran(Status::Exited(0), "out\n", "", false),
            (true, "out\n".into())
        );
        assert_eq!(
            ran(Status::Exited(0), "out\n", " \n", false),
            (true, "out\n".into()),
            "blank stderr is not shown"
        );
        assert_eq!(
            ran(Status::Exited(0), "out", "warn\n", false),
            (true, "out\n[stderr]\nwarn\n".into())
        );
        assert_eq!(
            ran(Status::Exited(0), "", "warn", false),
            (true, "[stderr]\nwarn".into())
        );
        assert_eq!(
            ran(Status::Exited(0), "abc", "", true),
            (true, "abc\n[output cut at 100 bytes]".into())
        );
        assert_eq!(
            ran(Status::Exited(3), "partial", "", false),
            (false, "partial\nexit status: 3".into())
        );
        assert_eq!(
            ran(Status::Exited(3), "line\n", "", false),
            (false, "line\nexit status: 3".into())
        );
        assert_eq!(
            ran(Status::TimedOut, "", "", false),
            (
                false,
                "timed out after 2000 ms; its process group was killed".into()
            )
        );
        assert_eq!(
            ran(Status::Signaled(9), "", "", false).1,
            "killed by signal 9"
        );
    }

    #[test]
    fn a_call_is_planned_invalid_unless_its_arguments_are_an_object_with_every_required_one() {
        let project = crate::scratch::path("external");
        std::fs::create_dir_all(project.join(".openmax/tools")).unwrap();
        std::fs::write(project.join(".openmax/tools/lint.json"), "{}").unwrap();
        let tool = ExternalTool {
            name: "lint".into(),
            description: "Lint".into(),
            parameters: serde_json::json!({"type": "object", "required": ["path", 3]}),
            command: vec!["sh".into()],
            mutating: false,
            env: Vec::new(),
            timeout_ms: 1000,
            manifest_path: ".openmax/tools/lint.json".into(),
            source_files: vec![".openmax/tools/lint.json".into()],
            sha256: String::new(),
        };
        let approved = |_: &str, _: &str| true;
        let invalid = |args: serde_json::Value| plan(&tool, &project, &args, &approved).invalid;
        assert_eq!(
            invalid(serde_json::json!(["path"])).as_deref(),
            Some("arguments to lint must be a JSON object")
        );
        assert_eq!(
            invalid(serde_json::json!({"other": 1})).as_deref(),
            Some("missing required argument \"path\" for lint")
        );
        let good = plan(
            &tool,
            &project,
            &serde_json::json!({"path": "a"}),
            &approved,
        );
        assert_eq!(good.invalid, None);
        // The approval card shows the human what the call runs, and whether it mutates.
        assert_eq!(
            good.detail,
            "external tool lint (.openmax/tools/lint.json)\ncommand: sh\n\
             arguments (stdin): {\"path\":\"a\"}\nsource files: .openmax/tools/lint.json"
        );
        let mutating = ExternalTool {
            mutating: true,
            ..tool.clone()
        };
        let args = serde_json::json!({"path": "a"});
        let detail = plan(&mutating, &project, &args, &approved).detail;
        assert!(detail.ends_with("\nmutating: yes"), "{detail}");
        assert!(good.source.is_some_and(|s| s.approved));
        std::fs::remove_dir_all(&project).unwrap();
    }
}
