//! Shared helpers of the `tools_*` integration tests: a throwaway project directory and a way
//! to plan and run one call.
#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use openmax_shell::tools::{self, ToolContext, ToolOutcome, ToolPlan};
use serde_json::Value;

static NEXT: AtomicUsize = AtomicUsize::new(0);

/// A unique, empty directory under the system temp dir, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(tag: &str) -> Self {
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir =
            std::env::temp_dir().join(format!("openmax-tools-{tag}-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir is writable");
        // Canonical, because the tools compare against a canonical project root.
        TempDir(dir.canonicalize().expect("just created"))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }

    pub fn write(&self, rel: &str, content: impl AsRef<[u8]>) {
        let p = self.0.join(rel);
        std::fs::create_dir_all(p.parent().expect("rel has a parent")).expect("mkdir");
        std::fs::write(p, content).expect("write");
    }

    /// Create `rel` with `content`, then hard-link it under every name of `more` (creating
    /// files is slow on some temp file systems; links are not).
    pub fn write_linked<S: AsRef<str>>(&self, rel: &str, content: impl AsRef<[u8]>, more: &[S]) {
        self.write(rel, content);
        let src = self.0.join(rel);
        for other in more {
            let dst = self.0.join(other.as_ref());
            if let Some(parent) = dst.parent() {
                if !parent.is_dir() {
                    std::fs::create_dir_all(parent).expect("mkdir");
                }
            }
            std::fs::hard_link(&src, dst).expect("link");
        }
    }

    pub fn read(&self, rel: &str) -> Vec<u8> {
        std::fs::read(self.0.join(rel)).expect("read")
    }

    pub fn read_str(&self, rel: &str) -> String {
        String::from_utf8(self.read(rel)).expect("utf-8")
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A project with a tool context over it.
pub struct Project {
    pub dir: TempDir,
    pub ctx: ToolContext,
}

impl Project {
    pub fn new(tag: &str) -> Self {
        let dir = TempDir::new(tag);
        let ctx = ToolContext::new(dir.path(), "test-session").expect("project exists");
        Project { dir, ctx }
    }

    pub fn plan(&self, name: &str, args: Value) -> ToolPlan {
        tools::plan(&self.ctx, name, &args)
    }

    /// Run a call to its end (never cancelled).
    pub async fn run(&self, name: &str, args: Value) -> ToolOutcome {
        let (_keep, cancel) = tokio::sync::oneshot::channel();
        tools::run(&self.ctx, name, &args, cancel).await
    }

    /// Plan then run; the plan must be valid.
    pub async fn call(&self, name: &str, args: Value) -> ToolOutcome {
        let plan = self.plan(name, args.clone());
        assert_eq!(plan.invalid, None, "plan of {name} {args}");
        self.run(name, args).await
    }

    /// Plan must be invalid with a message containing `needle`, and run must fail with the
    /// same message. Returns the message.
    pub async fn refused(&self, name: &str, args: Value, needle: &str) -> String {
        let plan = self.plan(name, args.clone());
        let msg = plan
            .invalid
            .unwrap_or_else(|| panic!("plan of {name} {args} should be invalid"));
        assert!(
            msg.contains(needle),
            "plan message {msg:?} lacks {needle:?}"
        );
        let out = self.run(name, args).await;
        assert!(!out.ok, "run should fail: {}", out.output);
        assert_eq!(out.output, msg, "run and plan messages differ");
        assert!(out.diffs.is_empty());
        msg
    }
}

/// Whether a process is gone (no /proc entry) or dead (a zombie awaiting its reaper).
pub fn process_dead(pid: u32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // The state follows the parenthesized command name.
            let state = stat.rsplit(')').next().unwrap_or("").trim_start();
            state.starts_with('Z') || state.starts_with('X')
        }
    }
}

/// Live (non-zombie) processes whose process group is `pgid`.
pub fn live_in_group(pgid: u32) -> Vec<u32> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir("/proc") else {
        return out;
    };
    for e in rd.flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            continue;
        };
        let rest: Vec<&str> = stat
            .rsplit(')')
            .next()
            .unwrap_or("")
            .split_whitespace()
            .collect();
        // Fields after the name: state, ppid, pgrp, ...
        if rest.len() > 2 && rest[2] == pgid.to_string() && !rest[0].starts_with('Z') {
            out.push(pid);
        }
    }
    out
}

/// Poll `cond` until it holds or `secs` pass; returns whether it held.
pub fn eventually(secs: u64, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(secs);
    loop {
        if cond() {
            return true;
        }
        if std::time::Instant::now() > deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}
