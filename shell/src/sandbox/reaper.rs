//! Containment: no process started for a tool call (or hook) outlives it.
//!
//! - openmax makes itself a child subreaper ([`become_subreaper`]), so a process that
//!   double-forks or calls `setsid` is re-parented to openmax instead of init and stays
//!   reachable as a descendant.
//! - Each running call's process group is [`track`]ed; [`sweep`] (run when a call ends, and on
//!   exit) SIGKILLs every descendant that is not inside a tracked group's subtree, and reaps
//!   the orphans that were re-parented to openmax. Any other child openmax starts and means
//!   to keep (a project MCP server, an editor the TUI opens) must hold a [`Tracked`] guard for
//!   its life ([`crate::sandbox::Policy::track`]), or the next sweep kills it.
//! - A tracked group is also recorded on disk (`<project state>/running/`), with openmax's own
//!   pid and start time and the group's start time, and removed when the call ends. When
//!   openmax is SIGKILLed the record stays; the next openmax in that project kills what is
//!   left of the group ([`kill_survivors`]), unless the recorded owner is still alive. (A
//!   sandboxed group does not wait for that: its helper ends it when openmax dies,
//!   [`super::lifeline`].)
//!
//! Not covered: a process that escaped the group with `setsid` while its openmax was being
//! SIGKILLed (it was re-parented above openmax, out of reach; the group record names only the
//! group). Linux only; elsewhere these functions do nothing.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Process groups of the calls (and servers) running now, with their record on disk.
static LIVE: Mutex<BTreeMap<i32, Option<PathBuf>>> = Mutex::new(BTreeMap::new());

/// Held from just before a call's process is spawned until it is [`track`]ed, and by a sweep
/// while it picks and kills strays: a sweep never mistakes a process being spawned (by a call
/// running beside the one that ended) for a stray.
static SPAWNING: Mutex<()> = Mutex::new(());

/// Hold the returned guard from before spawning a call's process until it is tracked.
pub fn spawning() -> std::sync::MutexGuard<'static, ()> {
    SPAWNING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// How long a sweep waits for the processes it killed to be reaped.
const REAP_WAIT: Duration = Duration::from_millis(500);

/// Make openmax a child subreaper (orphaned descendants are re-parented to it).
pub fn become_subreaper() -> std::io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// A running call's group, tracked until dropped.
#[derive(Debug)]
pub struct Tracked {
    pgid: i32,
    record: Option<PathBuf>,
}

impl Drop for Tracked {
    fn drop(&mut self) {
        if let Ok(mut live) = LIVE.lock() {
            live.remove(&self.pgid);
        }
        if let Some(r) = &self.record {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// Track the group led by `pgid` (just spawned); with `running_dir`, also record it on disk.
pub fn track(pgid: i32, running_dir: Option<&Path>) -> Tracked {
    let me = std::process::id() as i32;
    let record = running_dir.and_then(|dir| {
        let (Some(my_start), Some(pg_start)) = (start_time(me), start_time(pgid)) else {
            return None;
        };
        crate::session::perms::private_dir_all(dir).ok()?;
        let path = dir.join(format!("{me}.{my_start}.{pgid}.{pg_start}"));
        std::fs::write(&path, b"").ok()?;
        Some(path)
    });
    if let Ok(mut live) = LIVE.lock() {
        live.insert(pgid, record.clone());
    }
    Tracked { pgid, record }
}

/// Kill every tracked group (the MCP servers, the tool calls running now) and remove their
/// records: for an exit that will not run their guards' drops (the forced exit on a second
/// signal).
pub fn kill_tracked() {
    let live = LIVE
        .lock()
        .map(|mut l| std::mem::take(&mut *l))
        .unwrap_or_default();
    for (pgid, record) in &live {
        if *pgid > 1 {
            // SAFETY: plain syscall on a group this process started and still tracks.
            unsafe {
                libc::killpg(*pgid, libc::SIGKILL);
            }
        }
        if let Some(r) = record {
            let _ = std::fs::remove_file(r);
        }
    }
}

/// Exit at once with `code` (a second SIGINT/SIGTERM), leaving no process behind: every
/// tracked group is killed and its record removed, then every other descendant is swept.
pub fn exit_now(code: i32) -> ! {
    kill_tracked();
    sweep();
    super::temps::remove_all();
    std::process::exit(code)
}

/// What `/proc/<pid>/stat` says about a process.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Stat {
    state: u8,
    pgid: i32,
    start: u64,
}

fn stat(pid: i32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name is in parentheses and may hold spaces: fields start after the last ')'.
    let rest = &text[text.rfind(')')? + 2..];
    let f: Vec<&str> = rest.split(' ').collect();
    // rest[0] is field 3 (state); pgid is field 5, starttime field 22.
    Some(Stat {
        state: *f.first()?.as_bytes().first()?,
        pgid: f.get(2)?.parse().ok()?,
        start: f.get(19)?.parse().ok()?,
    })
}

/// A process's start time (clock ticks since boot), the guard against pid reuse.
pub fn start_time(pid: i32) -> Option<u64> {
    stat(pid).map(|s| s.start)
}

/// The direct children of `pid` (over all its threads).
fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for t in tasks.flatten() {
        if let Ok(s) = std::fs::read_to_string(t.path().join("children")) {
            out.extend(s.split_whitespace().filter_map(|p| p.parse::<i32>().ok()));
        }
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// Every descendant of `pid`, parents before children.
fn subtree(pid: i32, out: &mut Vec<i32>) {
    for c in children(pid) {
        if !out.contains(&c) {
            out.push(c);
            subtree(c, out);
        }
    }
}

/// Kill every descendant of openmax outside a tracked group's subtree and reap the orphans
/// among openmax's own children.
pub fn sweep() {
    let me = std::process::id() as i32;
    let deadline = Instant::now() + REAP_WAIT;
    loop {
        let spawning = spawning();
        let live: Vec<i32> = LIVE
            .lock()
            .map(|l| l.keys().copied().collect())
            .unwrap_or_default();
        let mut pending = Vec::new();
        for child in children(me) {
            let Some(s) = stat(child) else { continue };
            if live.contains(&child) || live.contains(&s.pgid) {
                continue;
            }
            if s.state != b'Z' {
                let mut tree = vec![child];
                subtree(child, &mut tree);
                for pid in tree {
                    // SAFETY: plain syscall on a descendant of ours (a zombie or an already
                    // gone pid yields nothing harmful: a descendant's pid cannot be reused
                    // while it is unreaped).
                    unsafe {
                        libc::kill(pid, libc::SIGKILL);
                    }
                }
            }
            pending.push(child);
        }
        drop(spawning);
        pending.retain(|&pid| {
            let mut status = 0;
            // SAFETY: waitpid on our own child, non-blocking.
            let r = unsafe { libc::waitpid(pid, &mut status, libc::WNOHANG) };
            r == 0
        });
        if pending.is_empty() || Instant::now() >= deadline {
            return;
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Kill what is left of groups recorded in `running_dir` by an openmax that is gone, and
/// remove their records. Returns how many processes were killed.
pub fn kill_survivors(running_dir: &Path) -> usize {
    let Ok(entries) = std::fs::read_dir(running_dir) else {
        return 0;
    };
    let mut killed = 0;
    let mut procs: Option<Vec<(i32, Stat)>> = None;
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        let parts: Vec<&str> = name.split('.').collect();
        let parsed = match parts.as_slice() {
            [a, b, c, d] => a
                .parse::<i32>()
                .ok()
                .zip(b.parse::<u64>().ok())
                .zip(c.parse::<i32>().ok().zip(d.parse::<u64>().ok())),
            _ => None,
        };
        let Some(((owner, owner_start), (pgid, pg_start))) = parsed else {
            let _ = std::fs::remove_file(e.path());
            continue;
        };
        if owner > 0 && start_time(owner) == Some(owner_start) {
            // Its openmax is still running: the call is live.
            continue;
        }
        let all = procs.get_or_insert_with(all_processes);
        for pid in doomed(all, pgid, pg_start) {
            // SAFETY: plain syscall; the pid's group and start time match the record.
            unsafe {
                libc::kill(pid, libc::SIGKILL);
            }
            killed += 1;
        }
        let _ = std::fs::remove_file(e.path());
    }
    killed
}

/// The processes of a recorded group: in group `pgid`, started no earlier than the group's
/// leader was (an older process in a reused group id is not the call's), not yet a zombie.
/// Never group 1 (init's) or below: a record naming one is not a call's.
fn doomed(all: &[(i32, Stat)], pgid: i32, pg_start: u64) -> Vec<i32> {
    all.iter()
        .filter(|(_, s)| s.pgid == pgid && s.start >= pg_start && s.state != b'Z' && pgid > 1)
        .map(|(pid, _)| *pid)
        .collect()
}

fn all_processes() -> Vec<(i32, Stat)> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<i32>().ok())
        .filter_map(|pid| stat(pid).map(|s| (pid, s)))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_group_is_its_younger_live_processes_and_never_init_s() {
        let p = |pid: i32, state: u8, pgid: i32, start: u64| (pid, Stat { state, pgid, start });
        let all = [
            p(10, b'S', 7, 100),
            p(11, b'R', 7, 99),
            p(12, b'Z', 7, 150),
            p(13, b'S', 8, 150),
            p(14, b'S', 7, 100),
            p(1, b'S', 1, 0),
            p(2, b'S', 1, 5),
            p(3, b'S', 0, 5),
        ];
        assert_eq!(doomed(&all, 7, 100), vec![10, 14]);
        assert_eq!(doomed(&all, 7, 101), Vec::<i32>::new());
        for pgid in [1, 0, -1] {
            assert_eq!(doomed(&all, pgid, 0), Vec::<i32>::new(), "group {pgid}");
        }
    }

    #[test]
    fn a_processs_children_are_read_from_every_thread() {
        let me = std::process::id() as i32;
        // Started from another thread: the kernel lists a child under the thread that made it.
        let mut child = std::thread::spawn(|| {
            std::process::Command::new("sleep")
                .arg("30")
                .spawn()
                .unwrap()
        })
        .join()
        .unwrap();
        let pid = child.id() as i32;
        let listed = children(me);
        let _ = child.kill();
        let _ = child.wait();
        assert!(listed.contains(&pid), "{pid} not in {listed:?}");
        assert!(listed.iter().all(|c| *c > 1), "{listed:?}");
        assert!(!children(me).contains(&pid), "a reaped child is gone");
    }

    #[test]
    fn stat_parses_our_own_process() {
        let me = std::process::id() as i32;
        let s = stat(me).unwrap();
        assert!(matches!(s.state, b'R' | b'S'), "{}", s.state);
        // SAFETY: getpgrp has no preconditions.
        assert_eq!(s.pgid, unsafe { libc::getpgrp() });
        assert!(s.start > 0);
    }

    #[test]
    fn stale_records_of_a_live_owner_are_kept_and_garbage_is_removed() {
        let dir = crate::scratch::path("reaper");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let me = std::process::id() as i32;
        // Named with the start time read straight from /proc, not through `start_time`.
        let mine = format!("{me}.{}.999999.0", stat(me).unwrap().start);
        std::fs::write(dir.join(&mine), b"").unwrap();
        std::fs::write(dir.join("garbage"), b"").unwrap();
        assert_eq!(kill_survivors(&dir), 0);
        assert!(dir.join(&mine).exists());
        assert!(!dir.join("garbage").exists());
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn the_group_of_a_gone_openmax_is_killed_and_its_record_removed() {
        use std::os::unix::process::CommandExt;
        let dir = crate::scratch::path("survivors");
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .process_group(0)
            .spawn()
            .unwrap();
        let pid = child.id() as i32;
        let start = stat(pid).unwrap().start;
        assert_eq!(start_time(pid), Some(start));
        // Owner 0: no openmax of this record is alive.
        let record = dir.join(format!("0.0.{pid}.{start}"));
        std::fs::write(&record, b"").unwrap();
        // A group that started after the record's time is not the recorded one.
        let later = dir.join(format!("0.0.{pid}.{}", start + 1_000_000));
        std::fs::write(&later, b"").unwrap();
        assert_eq!(kill_survivors(&dir), 1);
        let status = child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL)
        );
        assert!(!record.exists() && !later.exists(), "records removed");
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
