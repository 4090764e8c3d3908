//! Hooks: `[[hooks]]` from the user or project config, frozen with the sha of every project file
//! they run, and run with a JSON payload on stdin.
//!
//! A hook refuses by exiting 2 (stderr is the reason) or by printing
//! `{"decision":"refuse","reason":"…"}` on stdout; a blocking `tool_start` hook may instead
//! print `{"decision":"rewrite","args":{…}}`; exit 0 otherwise passes; anything else (a crash,
//! a timeout, a start failure) is a failure the core reports as `hook_failed` (and which
//! refuses the call of a blocking `tool_start` hook). Only `user_prompt_submit`, `tool_start`
//! and `turn_end` may block; `match` picks the tools a `tool_start` or `tool_end` hook runs
//! for.
//!
//! Project hooks are agent-writable code: a hook defined in `<project>/.openmax/config.toml` runs
//! only when a human approved (`openmax --approve PATH`, PATH one of the files its command names,
//! or the project config) its whole definition — event, argv, blocking, timeout — together with
//! the exact bytes of every project file its command names ([`definition_sha`]); and only while
//! those bytes are the ones frozen. Any change to the definition or the files asks again.
//!
//! The freeze reports what it found (a [`HookSource`]: approved or not, a file unreadable);
//! the core decides that such a hook is not run and reports it. Right before a run this module
//! hashes the files again and refuses bytes changed since the freeze, as an external tool's
//! run does with its source.

use std::collections::BTreeMap;
use std::path::Path;

use openmax_core::machine::{HookEvent, HookOutcome, HookSource, HookSpec};
use serde::Deserialize;

use crate::digest::sha256_hex;
use crate::extensions::manifest::project_file;
use crate::extensions::process::{self, ProcessSpec, Status};

/// Default per-run timeout.
pub const DEFAULT_TIMEOUT_S: u64 = 60;

/// How much of each of a hook's stdout and stderr is read. A hook that exits 0 with more has
/// failed: its decision, on its last line, may be in what was not read.
pub const OUTPUT_CAP: usize = 64 * 1024;
/// Where project hooks are defined (their source when they name no project file).
pub const PROJECT_CONFIG: &str = ".openmax/config.toml";

/// One `[[hooks]]` table as written in config. `command` is an argv array, or a string split at
/// whitespace (no shell quoting: use the array form for arguments with spaces).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct HookConfig {
    #[serde(deserialize_with = "hook_event")]
    pub event: HookEvent,
    #[serde(deserialize_with = "argv")]
    pub command: Vec<String>,
    #[serde(default)]
    pub blocking: bool,
    /// Seconds (fractions allowed); default [`DEFAULT_TIMEOUT_S`].
    #[serde(default)]
    pub timeout_s: Option<f64>,
    /// `tool_start` / `tool_end` only: globs over the tool name, separated by `|`.
    #[serde(default, rename = "match")]
    pub matcher: Option<String>,
}

impl HookConfig {
    /// The per-run timeout in milliseconds.
    pub fn timeout_ms(&self) -> u64 {
        match self.timeout_s {
            Some(s) => (s * 1000.0).round().max(1.0) as u64,
            None => DEFAULT_TIMEOUT_S * 1000,
        }
    }
}

fn hook_event<'de, D: serde::Deserializer<'de>>(d: D) -> Result<HookEvent, D::Error> {
    let s = String::deserialize(d)?;
    HookEvent::parse(&s).ok_or_else(|| {
        let all: Vec<&str> = HookEvent::ALL.iter().map(|e| e.as_str()).collect();
        serde::de::Error::custom(format!("hook event {s:?} is not one of {}", all.join(", ")))
    })
}

fn argv<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum Argv {
        Line(String),
        List(Vec<String>),
    }
    Ok(match Argv::deserialize(d)? {
        Argv::Line(s) => s.split_whitespace().map(str::to_string).collect(),
        Argv::List(v) => v,
    })
}

/// Where a hook was defined.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// `$OPENMAX_HOME/config.toml`: written by the user, trusted.
    User,
    /// `<project>/.openmax/config.toml`: agent-writable, gated by approval.
    Project,
}

/// A hook as frozen for the session.
#[derive(Debug, Clone, PartialEq)]
pub struct FrozenHook {
    pub config: HookConfig,
    pub origin: Origin,
    /// The label events carry: `<event>:<file name of the command's first word>`, with `#2`,
    /// `#3`… appended when several hooks would share a label (so a label names one hook).
    pub name: String,
    /// Project files (relative) and their sha256 at the freeze.
    pub files: BTreeMap<String, String>,
    /// Project hooks: the key and sha256 an approval is recorded under ([`definition_sha`]).
    pub approval: Option<(String, String)>,
    /// Project hooks: what the freeze found (the core's hook gate decides from it).
    pub source: Option<HookSource>,
}

impl FrozenHook {
    /// The core's view.
    pub fn spec(&self) -> HookSpec {
        HookSpec {
            name: self.name.clone(),
            event: self.config.event,
            blocking: self.config.blocking,
            source: self.source.clone(),
            matcher: self.config.matcher.clone(),
        }
    }
}

/// Check a hook table; the error names what is wrong.
pub fn validate(h: &HookConfig) -> Result<(), String> {
    if h.command.is_empty() || h.command[0].is_empty() {
        return Err("hook command must be a non-empty argv array".to_string());
    }
    if h.blocking && !h.event.can_block() {
        let blocking: Vec<&str> = HookEvent::ALL
            .iter()
            .filter(|e| e.can_block())
            .map(|e| e.as_str())
            .collect();
        return Err(format!(
            "a {} hook cannot block; only {} hooks may",
            h.event.as_str(),
            blocking.join(" and ")
        ));
    }
    if let Some(t) = h.timeout_s {
        if !t.is_finite() || t <= 0.0 {
            return Err("hook timeout_s must be a positive number of seconds".to_string());
        }
    }
    if let Some(m) = &h.matcher {
        if !h.event.is_tool_event() {
            return Err(format!(
                "match names tools, so only a tool_start or tool_end hook may have it, not a \
                 {} hook",
                h.event.as_str()
            ));
        }
        if m.split('|').any(|p| p.trim().is_empty()) {
            return Err(format!(
                "match {m:?} has an empty pattern; write tool names or globs separated by |"
            ));
        }
    }
    Ok(())
}

/// The key a project hook's approval is stored under.
pub fn approval_key(name: &str) -> String {
    format!("{PROJECT_CONFIG} [[hooks]] {name}")
}

/// The sha256 (hex) an approval of a project hook covers: its whole definition and the bytes
/// (by sha256) of every project file its command names, length-framed so no two different
/// definitions hash alike.
pub fn definition_sha(config: &HookConfig, files: &BTreeMap<String, String>) -> String {
    let mut framed = Vec::new();
    let mut put = |b: &[u8]| {
        framed.extend_from_slice(&(b.len() as u64).to_le_bytes());
        framed.extend_from_slice(b);
    };
    put(b"openmax hook v1");
    put(config.event.as_str().as_bytes());
    put(&(config.command.len() as u64).to_le_bytes());
    for a in &config.command {
        put(a.as_bytes());
    }
    put(if config.blocking {
        b"blocking"
    } else {
        b"observing"
    });
    put(&config.timeout_ms().to_le_bytes());
    // Only a hook with a `match` frames one, so the approvals of hooks without it stand.
    if let Some(m) = &config.matcher {
        put(b"match");
        put(m.as_bytes());
    }
    for (path, sha) in files {
        put(path.as_bytes());
        put(sha.as_bytes());
    }
    sha256_hex(&framed)
}

/// Freeze hooks: hash the project files each project hook runs and decide whether it may run.
/// `approved(path, full_sha)` asks the project's approval store.
pub fn freeze(
    hooks: &[(HookConfig, Origin)],
    project: &Path,
    approved: &dyn Fn(&str, &str) -> bool,
) -> Vec<FrozenHook> {
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    hooks
        .iter()
        .map(|(config, origin)| {
            let base = Path::new(&config.command[0])
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let mut name = format!("{}:{}", config.event.as_str(), base);
            let n = seen.entry(name.clone()).or_insert(0);
            *n += 1;
            if *n > 1 {
                name = format!("{name}#{n}");
            }
            let mut files = BTreeMap::new();
            let mut source = None;
            let mut approval = None;
            if *origin == Origin::Project {
                let mut named: Vec<String> = config
                    .command
                    .iter()
                    .filter_map(|a| project_file(project, a))
                    .collect();
                if named.is_empty() {
                    named.push(PROJECT_CONFIG.to_string());
                }
                let approve_path = named[0].clone();
                let mut unreadable = None;
                for f in named {
                    match std::fs::read(project.join(&f)) {
                        Ok(bytes) => {
                            files.insert(f, sha256_hex(&bytes));
                        }
                        Err(e) => {
                            unreadable = Some(format!("project hook file {f} cannot be read: {e}"))
                        }
                    }
                }
                let key = approval_key(&name);
                let sha = definition_sha(config, &files);
                source = Some(HookSource {
                    command: config.command.clone(),
                    approve_path,
                    approved: unreadable.is_none() && approved(&key, &sha),
                    unreadable,
                });
                approval = Some((key, sha));
            }
            FrozenHook {
                config: config.clone(),
                origin: *origin,
                name,
                files,
                approval,
                source,
            }
        })
        .collect()
}

/// The project hooks an `openmax --approve` of `rel` approves: those whose command names it,
/// or all of them when it is the project config.
pub fn naming<'a>(frozen: &'a [FrozenHook], rel: &str) -> Vec<&'a FrozenHook> {
    frozen
        .iter()
        .filter(|h| h.origin == Origin::Project)
        .filter(|h| rel == PROJECT_CONFIG || h.files.contains_key(rel))
        .collect()
}

/// Run a frozen hook with its payload. `agent_session` is exported as `OPENMAX_AGENT_SESSION`.
pub async fn run(
    hook: &FrozenHook,
    project: &Path,
    payload: &serde_json::Value,
    agent_session: &str,
    sandbox: &std::sync::Arc<crate::sandbox::Policy>,
    cancel: tokio::sync::oneshot::Receiver<()>,
) -> HookOutcome {
    // Whether it may run at all is the core's hook gate; this is the last look at its bytes.
    for (f, sha) in &hook.files {
        let now = std::fs::read(project.join(f))
            .map(|b| sha256_hex(&b))
            .unwrap_or_default();
        if &now != sha {
            return HookOutcome::Failed {
                detail: format!(
                    "hook file {f} changed since the freeze; not run (reload to review it)"
                ),
            };
        }
    }
    let env = sandbox.inherited_env(agent_session);
    let timeout_ms = hook.config.timeout_ms();
    let spec = ProcessSpec {
        argv: hook.config.command.clone(),
        cwd: project.to_path_buf(),
        env,
        stdin: payload.to_string().into_bytes(),
        timeout_ms,
        output_cap: OUTPUT_CAP,
        // A user hook is the user's own code: it runs outside the kernel sandbox (its
        // environment is still filtered). A project hook is agent-writable: it runs inside.
        sandbox: match hook.origin {
            Origin::User => std::sync::Arc::new(sandbox.unconfined()),
            Origin::Project => sandbox.clone(),
        },
    };
    let r = process::run(spec, cancel).await;
    if r.truncated && r.status == Status::Exited(0) {
        return HookOutcome::Failed {
            detail: format!(
                "its output passed {} KiB, so its decision may not have been read",
                OUTPUT_CAP / 1024
            ),
        };
    }
    outcome(&r.status, &r.stdout, &r.stderr, timeout_ms)
}

/// Turn a finished process into a hook outcome.
pub fn outcome(status: &Status, stdout: &str, stderr: &str, timeout_ms: u64) -> HookOutcome {
    match status {
        Status::Exited(0) => decision(stdout),
        Status::Exited(2) => {
            let reason = stderr.trim();
            HookOutcome::Refuse {
                reason: if reason.is_empty() {
                    "the hook refused (exit 2) without a reason".to_string()
                } else {
                    reason.to_string()
                },
            }
        }
        other => {
            let mut detail = other.describe(timeout_ms);
            let tail = stderr.trim();
            if !tail.is_empty() {
                let tail: String = tail
                    .chars()
                    .rev()
                    .take(500)
                    .collect::<Vec<_>>()
                    .into_iter()
                    .rev()
                    .collect();
                detail.push_str(&format!("; stderr: {tail}"));
            }
            HookOutcome::Failed { detail }
        }
    }
}

/// The decision printed on stdout: the last line that parses as JSON, when it is an object
/// with a `decision` (`refuse`, with `block` and `deny` taken as it; `rewrite` with `args`;
/// `pass`, with `allow` and `approve` taken as it). Anything else passes. A `rewrite` whose
/// `args` is missing goes to the core as `null`, which refuses it as not an object.
fn decision(stdout: &str) -> HookOutcome {
    for line in stdout.lines().rev() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line.trim()) else {
            continue;
        };
        return match v.get("decision").and_then(|d| d.as_str()) {
            Some("refuse" | "block" | "deny") => HookOutcome::Refuse {
                reason: v
                    .get("reason")
                    .and_then(|r| r.as_str())
                    .unwrap_or("the hook refused without a reason")
                    .to_string(),
            },
            Some("rewrite") => HookOutcome::Rewrite {
                args: v.get("args").cloned().unwrap_or(serde_json::Value::Null),
            },
            Some(_) | None => HookOutcome::Pass,
        };
    }
    HookOutcome::Pass
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cfg(event: &str, cmd: &[&str], blocking: bool) -> HookConfig {
        HookConfig {
            event: HookEvent::parse(event).unwrap(),
            command: cmd.iter().map(|s| s.to_string()).collect(),
            blocking,
            timeout_s: Some(5.0),
            matcher: None,
        }
    }

    /// Run `hook` in `project` to its outcome, on a runtime of its own, with no cancel.
    fn run_now(hook: &FrozenHook, project: &Path, payload: serde_json::Value) -> HookOutcome {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        let (_tx, rx) = tokio::sync::oneshot::channel();
        rt.block_on(run(hook, project, &payload, "s1", &Default::default(), rx))
    }

    #[test]
    fn validation() {
        assert!(validate(&cfg("turn_end", &["x"], true)).is_ok());
        assert!(validate(&cfg("tool_end", &["x"], true))
            .unwrap_err()
            .contains("cannot block"));
        let err = toml::from_str::<HookConfig>("event = \"nope\"\ncommand = \"x\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("hook event \"nope\" is not one of"), "{err}");
        assert!(validate(&cfg("turn_end", &[], false)).is_err());
        assert!(validate(&cfg("tool_start", &["x"], true)).is_ok());
        let mut m = cfg("tool_start", &["x"], true);
        m.matcher = Some("shell|mcp__github__*".into());
        assert!(validate(&m).is_ok());
        m.matcher = Some("shell|".into());
        assert!(validate(&m).unwrap_err().contains("empty pattern"));
        let mut m = cfg("turn_end", &["x"], true);
        m.matcher = Some("shell".into());
        assert!(validate(&m)
            .unwrap_err()
            .contains("only a tool_start or tool_end"));
        let t: HookConfig =
            toml::from_str("event = \"tool_start\"\ncommand = \"x\"\nmatch = \"shell\"").unwrap();
        assert_eq!(t.matcher.as_deref(), Some("shell"));
    }

    #[test]
    fn a_match_is_part_of_what_an_approval_covers_and_its_absence_changes_nothing() {
        let plain = cfg("tool_start", &["x"], true);
        let files = BTreeMap::new();
        let mut matched = plain.clone();
        matched.matcher = Some("shell".into());
        assert_ne!(
            definition_sha(&plain, &files),
            definition_sha(&matched, &files)
        );
        let mut other = plain.clone();
        other.matcher = Some("write_file".into());
        assert_ne!(
            definition_sha(&matched, &files),
            definition_sha(&other, &files)
        );
    }

    #[test]
    fn outcomes() {
        assert_eq!(outcome(&Status::Exited(0), "", "", 1), HookOutcome::Pass);
        assert_eq!(
            outcome(&Status::Exited(2), "", "tests fail\n", 1),
            HookOutcome::Refuse {
                reason: "tests fail".into()
            }
        );
        assert_eq!(
            outcome(
                &Status::Exited(0),
                "log\n{\"decision\":\"refuse\",\"reason\":\"no\"}\n",
                "",
                1
            ),
            HookOutcome::Refuse {
                reason: "no".into()
            }
        );
        assert_eq!(
            outcome(
                &Status::Exited(0),
                "{\"decision\":\"rewrite\",\"args\":{\"path\":\"b\"}}\ntrailing words\n",
                "",
                1
            ),
            HookOutcome::Rewrite {
                args: serde_json::json!({"path": "b"})
            }
        );
        assert_eq!(
            outcome(&Status::Exited(0), "{\"decision\":\"rewrite\"}", "", 1),
            HookOutcome::Rewrite {
                args: serde_json::Value::Null
            }
        );
        assert_eq!(
            outcome(&Status::Exited(0), "{\"decision\":\"pass\"}", "", 1),
            HookOutcome::Pass
        );
        assert_eq!(
            outcome(&Status::Exited(0), "[1]\n", "", 1),
            HookOutcome::Pass
        );
        assert!(
            matches!(outcome(&Status::Exited(1), "", "boom", 1), HookOutcome::Failed { detail } if detail.contains("boom"))
        );
        assert!(
            matches!(outcome(&Status::TimedOut, "", "", 1000), HookOutcome::Failed { detail } if detail.contains("timed out"))
        );
    }

    /// Output past the cap fails a hook that exits 0 (its decision, last, may be what was cut
    /// off); a hook that exits otherwise is judged by its status as ever (2 refuses with its
    /// stderr). The controls: the same scripts with short output.
    #[test]
    fn output_past_the_cap_fails_only_a_hook_that_exits_0() {
        let p = std::env::temp_dir().canonicalize().unwrap();
        let run_sh = |script: &str| {
            let hooks = vec![(cfg("turn_end", &["sh", "-c", script], true), Origin::User)];
            let frozen = freeze(&hooks, &p, &|_, _| false);
            run_now(&frozen[0], &p, serde_json::json!({"event": "turn_end"}))
        };
        let long = format!("head -c {} /dev/zero | tr '\\0' x; ", OUTPUT_CAP + 1);
        assert!(
            matches!(run_sh(&format!("{long}exit 0")), HookOutcome::Failed { detail } if detail.contains("passed 64 KiB")),
        );
        assert_eq!(run_sh("exit 0"), HookOutcome::Pass);
        let refuse = HookOutcome::Refuse {
            reason: "no".into(),
        };
        assert_eq!(run_sh(&format!("{long}echo no >&2; exit 2")), refuse);
        assert_eq!(run_sh("echo no >&2; exit 2"), refuse);
    }

    #[test]
    fn project_hooks_need_approval_and_unchanged_bytes() {
        let p = crate::scratch::path("hooks");
        let _ = std::fs::remove_dir_all(&p);
        std::fs::create_dir_all(p.join(".openmax")).unwrap();
        let p = p.canonicalize().unwrap();
        std::fs::write(
            p.join("check.sh"),
            "echo '{\"decision\":\"refuse\",\"reason\":\"r\"}'\n",
        )
        .unwrap();
        let hooks = vec![(
            cfg("turn_end", &["bash", "check.sh"], true),
            Origin::Project,
        )];
        let approved = |h: &FrozenHook| h.source.as_ref().unwrap().approved;
        let frozen = freeze(&hooks, &p, &|_, _| false);
        assert!(!approved(&frozen[0]));
        assert_eq!(frozen[0].source.as_ref().unwrap().approve_path, "check.sh");
        assert_eq!(frozen[0].source.as_ref().unwrap().unreadable, None);
        // Approving the file alone is not enough: the approval covers the whole definition.
        let frozen = freeze(&hooks, &p, &|f, _| f == "check.sh");
        assert!(!approved(&frozen[0]));
        let (key, sha) = frozen[0].approval.clone().unwrap();
        let frozen = freeze(&hooks, &p, &|f, s| f == key && s == sha);
        assert!(approved(&frozen[0]));
        // Another definition naming the same file is another approval.
        let inline = vec![(
            cfg("turn_end", &["sh", "-c", "touch x", "check.sh"], true),
            Origin::Project,
        )];
        let other = freeze(&inline, &p, &|f, s| f == key && s == sha);
        assert!(!approved(&other[0]));
        assert_eq!(other[0].source.as_ref().unwrap().approve_path, "check.sh");
        let mut longer = hooks[0].0.clone();
        longer.timeout_s = Some(6.0);
        assert_ne!(definition_sha(&longer, &frozen[0].files), sha);
        assert_eq!(frozen[0].name, "turn_end:bash");
        let out = run_now(&frozen[0], &p, serde_json::json!({"event":"turn_end"}));
        assert_eq!(out, HookOutcome::Refuse { reason: "r".into() });
        std::fs::write(p.join("check.sh"), "exit 0\n").unwrap();
        let out = run_now(&frozen[0], &p, serde_json::json!({}));
        assert!(
            matches!(out, HookOutcome::Failed { detail } if detail.contains("changed since the freeze"))
        );
        std::fs::remove_dir_all(&p).unwrap();
    }
}
