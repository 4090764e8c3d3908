//! The sandbox's layers one by one, end to end through the real binary, as root and as an
//! ordinary user: the system calls seccomp refuses (each beside its control outside), the
//! connect broker against a second thread rewriting the address under it, a symlink to a
//! socket outside, the user's allow-list and a project's narrowing of it, the view of
//! processes, fail-closed where namespaces cannot be made, `openmax sandbox check`, and the
//! refusal of a `$OPENMAX_HOME` another user can write.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::Path;

use openmax_tests::attack::*;
use openmax_tests::*;
use serde_json::json;

/// A Unix socket server (a thread of this test, outside any sandbox) answering `reply`.
fn serve_at(path: &Path, reply: &'static str) {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    std::thread::spawn(move || {
        for c in l.incoming().flatten() {
            use std::io::Write;
            let mut c = c;
            let _ = c.write_all(reply.as_bytes());
        }
    });
}

/// Each probe prints `<name> OK` or `<name> ERR <errno>`.
const SYSCALL_PROBE: &str = r#"import ctypes, os, socket, sys, threading
libc = ctypes.CDLL(None, use_errno=True)
def sys_call(nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    return 0 if r >= 0 else -ctypes.get_errno()
def report(name, fn):
    try:
        r = fn()
        print(name, 'OK' if not r else 'ERR %d' % -r)
    except OSError as e:
        print(name, 'ERR %d' % e.errno)
report('unix-stream', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_STREAM).close())
report('unix-seqpacket', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_SEQPACKET).close())
report('unix-dgram', lambda: socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM).close())
report('unix-dgram-pair', lambda: [s.close() for s in socket.socketpair(socket.AF_UNIX, socket.SOCK_DGRAM)] and None)
report('inet', lambda: socket.socket(socket.AF_INET, socket.SOCK_STREAM).close())
report('packet', lambda: socket.socket(socket.AF_PACKET, socket.SOCK_RAW).close())
params = ctypes.create_string_buffer(120)
report('io_uring', lambda: sys_call(425, 4, ctypes.addressof(params)))
report('unshare-user', lambda: sys_call(272, 0x10000000))
report('add_key', lambda: sys_call(248, ctypes.addressof(ctypes.create_string_buffer(b'user')), ctypes.addressof(ctypes.create_string_buffer(b'omx')), ctypes.addressof(ctypes.create_string_buffer(b'v')), 1, -1))
t = threading.Thread(target=lambda: None); t.start(); t.join()
print('thread OK')
"#;

#[test]
fn seccomp_refuses_what_a_sandboxed_process_may_not_ask_the_kernel_for() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        env.write("probe.py", SYSCALL_PROBE);
        let run = |mock: &MockServer| turn(&env, mock, |_| vec!["python3 probe.py".into()]);
        let inside = run(&mock).remove(0).1;
        reconfigure(&env, &mock, CONTROL);
        let outside = run(&mock).remove(0).1;
        let w = who.label();
        let line = |out: &str, name: &str| {
            out.lines()
                .find(|l| l.split_whitespace().next() == Some(name))
                .unwrap_or_else(|| panic!("{w}: no {name} in {out}"))
                .to_string()
        };
        for ok in ["unix-stream", "unix-seqpacket", "thread"] {
            assert!(line(&inside, ok).ends_with("OK"), "{w}: {inside}");
        }
        for refused in [
            "unix-dgram",
            "unix-dgram-pair",
            "inet",
            "packet",
            "io_uring",
            "unshare-user",
            "add_key",
        ] {
            assert_eq!(
                line(&inside, refused),
                format!("{refused} ERR 13"),
                "{w}: {inside}"
            );
            // The control: outside, the kernel does not refuse it with EACCES (it runs, or
            // fails for a reason of its own, such as a missing capability).
            assert_ne!(
                line(&outside, refused),
                format!("{refused} ERR 13"),
                "{w}: {outside}"
            );
        }
    }
}

/// A second thread rewrites the address between an inside socket and an outside one while the
/// first connects in a loop: the broker connects exactly what it checked, so no connection ever
/// reaches the outside one. Outside the sandbox the same race reaches it.
const RACE: &str = r#"import ctypes, os, socket, sys, threading, time
inside, outside = sys.argv[1].encode(), sys.argv[2].encode()
srv = socket.socket(socket.AF_UNIX); srv.bind(inside); srv.listen(64)
def accept():
    while True:
        c, _ = srv.accept(); c.send(b'IN'); c.close()
threading.Thread(target=accept, daemon=True).start()
libc = ctypes.CDLL(None, use_errno=True)
size = 110
addr = ctypes.create_string_buffer(size)
def put(path):
    ctypes.memmove(addr, b'\x01\x00' + path + b'\x00' * (size - 2 - len(path)), size)
put(inside)
stop = False
def flip():
    while not stop:
        put(outside); time.sleep(0.0002); put(inside); time.sleep(0.0002)
threading.Thread(target=flip, daemon=True).start()
seen = {'IN': 0, 'OUT': 0, 'refused': 0}
for _ in range(600):
    s = socket.socket(socket.AF_UNIX)
    if libc.connect(s.fileno(), addr, size) == 0:
        got = s.recv(8).decode() or 'refused'
        seen[got] = seen.get(got, 0) + 1
    else:
        seen['refused'] += 1
    s.close()
stop = True
print('IN', seen['IN'], 'OUT', seen['OUT'], 'REFUSED', seen['refused'])
"#;

#[test]
fn rewriting_the_address_under_the_broker_never_reaches_outside() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let outside = env.root.join("race-outside.sock");
        serve_at(&outside, "OUT");
        env.write("race.py", RACE);
        let cmd = format!("python3 race.py inside.sock {}", outside.display());
        let counts = |out: &str| -> (u32, u32, u32) {
            let f: Vec<&str> = out.split_whitespace().collect();
            let at = f
                .iter()
                .position(|x| *x == "IN")
                .unwrap_or_else(|| panic!("{out}"));
            let n = |i: usize| f[at + i].parse().unwrap();
            (n(1), n(3), n(5))
        };
        let w = who.label();
        let (ok, out) = turn(&env, &mock, |_| vec![format!("rm -f inside.sock; {cmd}")]).remove(0);
        let (inside, reached, refused) = counts(&out);
        // Both addresses were seen: the inside one connected, the outside one refused.
        assert!(
            ok && inside > 0 && refused > 0,
            "{w}: the race did not run: {out}"
        );
        assert_eq!(
            reached, 0,
            "{w}: a connection reached the socket outside: {out}"
        );
        reconfigure(&env, &mock, CONTROL);
        let (_, out) = turn(&env, &mock, |_| vec![format!("rm -f inside.sock; {cmd}")]).remove(0);
        let (_, reached, _) = counts(&out);
        assert!(
            reached > 0,
            "{w}: the control's race never reached outside: {out}"
        );
    }
}

#[test]
fn a_symlink_to_a_socket_outside_is_refused_unless_the_user_allows_the_socket() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let outside = env.root.join("service.sock");
        serve_at(&outside, "SERVICE-REACHED");
        std::os::unix::fs::symlink(&outside, env.project.join("link.sock")).unwrap();
        let probe = |path: &str| {
            format!(
                "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect('{path}'); print(s.recv(32).decode())\""
            )
        };
        let cmds = vec![probe("link.sock"), probe(&outside.display().to_string())];
        let w = who.label();
        for (ok, out) in turn(&env, &mock, |_| cmds.clone()) {
            assert!(!ok && out.contains("Permission denied"), "{w}: {out}");
        }
        // The user allows it by path: both ways reach it, and only it: another socket beside
        // it (the same file system) stays refused until it is allowed too.
        let other = env.root.join("other.sock");
        serve_at(&other, "OTHER-REACHED");
        let others = vec![probe(&other.display().to_string())];
        let allow = |paths: &[&Path]| {
            let list: Vec<String> = paths
                .iter()
                .map(|p| format!("{:?}", p.display().to_string()))
                .collect();
            format!("[sandbox]\nunix_sockets = [{}]\n", list.join(", "))
        };
        reconfigure(&env, &mock, &allow(&[&outside]));
        for (ok, out) in turn(&env, &mock, |_| cmds.clone()) {
            assert!(ok && out.contains("SERVICE-REACHED"), "{w}: {out}");
        }
        for (ok, out) in turn(&env, &mock, |_| others.clone()) {
            assert!(!ok && out.contains("Permission denied"), "{w}: {out}");
        }
        reconfigure(&env, &mock, &allow(&[&outside, &other]));
        for (ok, out) in turn(&env, &mock, |_| others.clone()) {
            assert!(ok && out.contains("OTHER-REACHED"), "{w}: control: {out}");
        }
        reconfigure(&env, &mock, &allow(&[&outside]));
        // A project config may remove the entry, not add one.
        env.project_config("[sandbox]\nunix_sockets = []\n");
        for (ok, out) in turn(&env, &mock, |_| cmds.clone()) {
            assert!(!ok && out.contains("Permission denied"), "{w}: {out}");
        }
        env.project_config("[sandbox]\nunix_sockets = [\"/run/other.sock\"]\n");
        let out = env.run(&["-p", "hi"]);
        assert_eq!(out.code, Some(1), "{w}: {}", out.stderr);
        assert!(
            out.stderr.contains("unix_sockets may only remove entries")
                && out.stderr.contains("/run/other.sock"),
            "{w}: {}",
            out.stderr
        );
    }
}

#[test]
fn a_sandboxed_process_sees_only_the_sandboxs_processes() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let cmds = vec![
            "ls /proc | grep -c '^[0-9]'".to_string(),
            "cat /proc/1/comm; ps -eo pid,comm --no-headers | wc -l".to_string(),
        ];
        let outs = turn(&env, &mock, |_| cmds.clone());
        let w = who.label();
        let n: u32 = outs[0].1.lines().next().unwrap().trim().parse().unwrap();
        // The sandbox's first process, bash, and what the pipe runs: a handful, not the host's.
        assert!(n <= 6, "{w}: {n} processes in view: {}", outs[0].1);
        assert!(outs[1].1.starts_with("openmax\n"), "{w}: {}", outs[1].1);
        reconfigure(&env, &mock, CONTROL);
        let outs = turn(&env, &mock, |_| cmds.clone());
        let host: u32 = outs[0].1.lines().next().unwrap().trim().parse().unwrap();
        assert!(host > n, "{w}: the control sees {host} processes");
    }
}

/// An orphan inside the sandbox (a background process whose parent has exited) is the
/// sandbox's first process's to reap, as init's is on the host: it is reaped while the
/// command goes on, and the command ends as it would have. The command waits until the orphan
/// is gone (`kill -0` answers for a zombie until it is reaped). (With the sandbox off, openmax,
/// a subreaper, reaps such orphans only when the call ends, so the command would wait forever.)
#[test]
fn an_orphan_inside_is_reaped_and_the_command_goes_on() {
    let cmd = "(sleep 0.05 & echo $! > orphan.pid); p=$(cat orphan.pid); \
               while kill -0 $p 2>/dev/null; do sleep 0.01; done; echo reaped; exit 3";
    for who in runners() {
        let (env, mock) = setup(who, "");
        let outs = turn(&env, &mock, |_| vec![cmd.to_string()]);
        assert!(
            outs[0].1.contains("reaped") && outs[0].1.contains("exit status: 3"),
            "{}: {}",
            who.label(),
            outs[0].1
        );
    }
}

/// The pid of the sandbox helper among `openmax`'s children (`openmax --sandbox-exec …`).
fn helper_of(openmax: u32) -> Option<u32> {
    children_of(openmax).into_iter().find(|pid| {
        let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
        String::from_utf8_lossy(&cmdline).contains("--sandbox-exec")
    })
}

/// The children of `pid`, over all its threads.
fn children_of(pid: u32) -> Vec<u32> {
    let Ok(tasks) = std::fs::read_dir(format!("/proc/{pid}/task")) else {
        return Vec::new();
    };
    tasks
        .flatten()
        .flat_map(|t| {
            let children = std::fs::read_to_string(t.path().join("children")).unwrap_or_default();
            children
                .split_whitespace()
                .filter_map(|p| p.parse::<u32>().ok())
                .collect::<Vec<_>>()
        })
        .collect()
}

/// One call of `touch started; sleep 60; echo finished` in a new session of `env`: once it
/// has started, `act` is given the sandbox helper's pid (while the command sleeps). What `act`
/// returned, and the call's `(ok, output)`.
fn while_a_call_sleeps<T: Send + 'static>(
    env: &TestEnv,
    mock: &MockServer,
    act: impl FnOnce(u32) -> T + Send + 'static,
) -> (T, (bool, String)) {
    while_a_call_runs(env, mock, "touch started; sleep 60; echo finished", act)
}

/// [`while_a_call_sleeps`] with this command, which touches `started` when `act` may begin.
fn while_a_call_runs<T: Send + 'static>(
    env: &TestEnv,
    mock: &MockServer,
    command: &str,
    act: impl FnOnce(u32) -> T + Send + 'static,
) -> (T, (bool, String)) {
    let command = command.to_string();
    let marker = env.project.join("started");
    let (tx, rx) = std::sync::mpsc::channel::<u32>();
    let watcher = std::thread::spawn(move || {
        let openmax = rx.recv().unwrap();
        assert!(appears(&marker), "the command never started");
        act(helper_of(openmax).expect("a sandbox helper under openmax"))
    });
    let mut outs = turn(env, mock, |pid| {
        tx.send(pid).unwrap();
        vec![command]
    });
    (watcher.join().unwrap(), outs.remove(0))
}

/// A capability set of `/proc/<pid>/status` (`CapEff`, `CapPrm`, …) as a number.
fn caps_of(pid: u32, set: &str) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let hex = status
        .lines()
        .find_map(|l| l.strip_prefix(&format!("{set}:")))
        .unwrap_or_else(|| panic!("no {set} in {status}"));
    u64::from_str_radix(hex.trim(), 16).unwrap()
}

#[test]
fn a_signal_to_the_helper_reaches_what_it_runs() {
    // A person's `kill` of the helper (it is what `ps` shows as the command's process) ends
    // the command inside as that signal, and the helper ends as the command did. Meanwhile the
    // helper, which stays outside the sandbox, holds no capability but CAP_SYS_PTRACE (to take
    // a sandboxed process's socket for the connect broker), and that only as root.
    for who in runners() {
        let (env, mock) = setup(who, "");
        let (caps, out) = while_a_call_sleeps(&env, &mock, |helper| {
            let caps = (caps_of(helper, "CapEff"), caps_of(helper, "CapPrm"));
            // SAFETY: plain syscall; the pid is our session's helper, alive (its command sleeps).
            unsafe { libc::kill(helper as i32, libc::SIGTERM) };
            caps
        });
        let w = who.label();
        // CAP_SYS_PTRACE is capability 19 (linux/capability.h).
        let ptrace = 1u64 << 19;
        let expected = if who.is_root() { ptrace } else { 0 };
        assert_eq!(
            caps,
            (expected, expected),
            "{w}: the helper's CapEff, CapPrm"
        );
        assert!(!out.0, "{w}: {}", out.1);
        assert!(
            out.1.contains("killed by signal 15 (SIGTERM)") && !out.1.contains("finished"),
            "{w}: {}",
            out.1
        );
    }
}

/// The signal is forwarded, not merely fatal to the helper: a command that traps it runs its
/// trap, and the call ends as the command chose.
#[test]
fn a_signal_to_the_helper_is_forwarded_to_a_command_that_traps_it() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let command = "trap 'echo trapped; exit 7' TERM; touch started; sleep 60 & wait";
        let ((), out) = while_a_call_runs(&env, &mock, command, |helper| {
            // SAFETY: plain syscall; the pid is our session's helper, alive (its command waits).
            unsafe { libc::kill(helper as i32, libc::SIGTERM) };
        });
        let w = who.label();
        assert!(!out.0, "{w}: {}", out.1);
        assert!(
            out.1.contains("trapped") && out.1.contains("exit status: 7"),
            "{w}: {}",
            out.1
        );
    }
}

/// A forwarded signal that lands on the connect broker's thread, whose `poll` it interrupts
/// (`SA_RESTART` does not restart `poll`), leaves the broker answering: each of the helper's
/// threads gets `SIGUSR1` (the command ignores it), then the command connects and is answered.
#[test]
fn a_signal_interrupting_the_broker_leaves_it_answering() {
    let command = "trap '' USR1; touch started; while [ ! -e signalled ]; do sleep 0.02; done; \
                   timeout 10 python3 connect.py";
    for who in runners() {
        let (env, mock) = setup(who, "");
        env.write(
            "connect.py",
            "import socket\ntry:\n    socket.socket(socket.AF_UNIX).connect('absent.sock')\n\
             except OSError as e:\n    print('answered', e.errno)\n",
        );
        let signalled = env.project.join("signalled");
        let (threads, out) = while_a_call_runs(&env, &mock, command, move |helper| {
            let tasks: Vec<i32> = std::fs::read_dir(format!("/proc/{helper}/task"))
                .unwrap()
                .flatten()
                .filter_map(|t| t.file_name().to_str()?.parse().ok())
                .collect();
            for tid in &tasks {
                // SAFETY: plain syscall to a thread of our session's helper, alive (its
                // command waits for the marker).
                let r =
                    unsafe { libc::syscall(libc::SYS_tgkill, helper as i32, *tid, libc::SIGUSR1) };
                assert_eq!(r, 0, "tgkill of thread {tid}");
            }
            std::fs::write(&signalled, "").unwrap();
            tasks.len()
        });
        let w = who.label();
        assert!(threads > 1, "{w}: the helper has no broker thread");
        assert!(out.0 && out.1.contains("answered 2"), "{w}: {}", out.1);
    }
}

/// The sandbox's first process killed from outside (as an out-of-memory kill would): it sends
/// the helper no report, so the helper ends as the kernel says it ended, and the call's
/// result names that signal.
#[test]
fn a_first_process_killed_from_outside_ends_the_call_as_that_signal() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let ((), out) = while_a_call_sleeps(&env, &mock, |helper| {
            let init = children_of(helper);
            assert_eq!(init.len(), 1, "the helper's one child: {init:?}");
            // SAFETY: plain syscall; the pid is our session's sandbox's first process.
            unsafe { libc::kill(init[0] as i32, libc::SIGKILL) };
        });
        let w = who.label();
        assert!(!out.0, "{w}: {}", out.1);
        assert!(
            out.1.contains("killed by signal 9 (SIGKILL)") && !out.1.contains("finished"),
            "{w}: {}",
            out.1
        );
    }
}

#[test]
fn a_sandboxed_command_dies_at_once_with_a_sigkilled_openmax() {
    // openmax SIGKILLed in the middle of a call, and no openmax started in the project again:
    // the helper sees openmax's lifeline close and kills the sandbox. The control, the same
    // with the sandbox off: the command is still running after the kill (there, only the
    // project's record, read by the next openmax in it, ends it; see tools_e2e).
    for (i, who) in runners().into_iter().enumerate() {
        for sandboxed in [true, false] {
            let (env, mock) = setup(who, if sandboxed { "" } else { CONTROL });
            let secs = format!("{}", 4170 + 2 * i + usize::from(sandboxed));
            let w = format!("{} (sandboxed: {sandboxed})", who.label());
            let mut s = env.stdio(&[]);
            mock.push(tool_reply(
                "c0",
                "shell",
                serde_json::json!({"command": format!("touch started; exec sleep {secs}")}),
            ));
            s.user("run it");
            assert!(appears(&env.project.join("started")), "{w}: never started");
            let end = std::time::Instant::now() + DEADLINE;
            while !running(&["sleep", &secs]) {
                assert!(std::time::Instant::now() < end, "{w}: sleep never ran");
                std::thread::sleep(std::time::Duration::from_millis(10));
            }
            let helper = helper_of(s.pid());
            assert_eq!(helper.is_some(), sandboxed, "{w}: a helper under openmax");
            s.kill_hard();
            if sandboxed {
                let gone = wait_cmdline_gone(&["sleep", &secs]);
                kill_all(&["sleep", &secs]);
                assert!(gone, "{w}: the sandboxed command outlived its openmax");
                let helper = helper.unwrap();
                let end = std::time::Instant::now() + DEADLINE;
                while alive(helper) {
                    assert!(
                        std::time::Instant::now() < end,
                        "{w}: the helper outlived openmax"
                    );
                    std::thread::sleep(std::time::Duration::from_millis(10));
                }
            } else {
                let still = running(&["sleep", &secs]);
                kill_all(&["sleep", &secs]);
                assert!(
                    still,
                    "{w}: control: the unsandboxed command ended with openmax"
                );
            }
        }
    }
}

/// Whether `pid` is a process that has not ended (a zombie has).
fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .ok()
        .and_then(|s| s.rsplit_once(") ").map(|(_, rest)| !rest.starts_with('Z')))
        .unwrap_or(false)
}

/// The mounts of `/proc/self/mountinfo` text: mount point and its per-mount options.
fn mounts(mountinfo: &str) -> Vec<(String, Vec<String>)> {
    mountinfo
        .lines()
        .filter_map(|l| {
            let f: Vec<&str> = l.split(' ').collect();
            let opts = f.get(5)?.split(',').map(str::to_string).collect();
            Some((f.get(4)?.to_string(), opts))
        })
        .collect()
}

/// A program the sandbox's first process cannot start is reported as a shell reports it: the
/// kernel's reason on stderr and status 127 when there is no such file, 126 when there is one
/// but it cannot be executed. An external tool's program is PROGRAM itself, with no shell
/// between, so these are the sandbox's words.
#[test]
fn a_program_the_sandbox_cannot_start_is_127_when_missing_and_126_when_not_executable() {
    // Each tool: its call, its name, its program, the kernel's reason and the status.
    let tools = [
        (
            "c0",
            "missing",
            "/nonexistent/openmax-tool",
            "No such file or directory",
            127,
        ),
        ("c1", "plain", "/etc/passwd", "Permission denied", 126),
    ];
    for who in runners() {
        let (env, mock) = setup(who, "");
        let w = who.label();
        for (id, name, program, _, _) in tools {
            env.write(
                &format!(".openmax/tools/{name}.json"),
                &format!(
                    r#"{{"name":"{name}","description":"d","parameters":{{"type":"object"}},"command":["{program}"]}}"#
                ),
            );
            mock.push(tool_reply(id, name, json!({})));
        }
        mock.push(text_reply("done"));
        let mut s = env.stdio(&[]);
        s.user("run them");
        let (evs, reason) = s.turn();
        assert_eq!(reason, "end_turn", "{w}: {:?}", types(&evs));
        assert_eq!(s.finish().0, Some(0));
        for (id, _, program, why, status) in tools {
            let end = evs
                .iter()
                .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
                .unwrap_or_else(|| panic!("{w}: no tool_end for {id}"));
            let out = end["output"].as_str().unwrap_or_default();
            assert_eq!(end["ok"], false, "{w}: {out}");
            assert!(
                out.contains(&format!("openmax: cannot run {program}: {why}"))
                    && out.trim_end().ends_with(&format!("exit status: {status}")),
                "{w}: {out}"
            );
        }
    }
}

#[test]
fn every_mount_of_the_view_is_nosuid_and_the_root_and_proc_are_read_only() {
    // The kernel's own account of the view (its mount flags), not what a write happens to be
    // refused by: Landlock would refuse most writes even on a writable mount. The control:
    // outside, this machine's /proc is a writable mount.
    for who in runners() {
        let (env, mock) = setup(who, "");
        let w = who.label();
        let inside = turn(&env, &mock, |_| vec!["cat /proc/self/mountinfo".into()]).remove(0);
        assert!(inside.0, "{w}: {}", inside.1);
        let all = mounts(&inside.1);
        let at = |point: &str| {
            all.iter()
                .rev()
                .find(|(p, _)| p == point)
                .map(|(_, o)| o.clone())
                .unwrap_or_else(|| panic!("{w}: no {point} in {}", inside.1))
        };
        for (point, opts) in &all {
            assert!(opts.iter().any(|o| o == "nosuid"), "{w}: {point} {opts:?}");
        }
        for (point, want) in [
            ("/", &["ro", "nodev"][..]),
            ("/proc", &["ro", "nodev", "noexec"][..]),
        ] {
            let opts = at(point);
            for o in want {
                assert!(opts.iter().any(|x| x == o), "{w}: {point} {opts:?}");
            }
        }
        // The project, grafted from the host's own tree: writable, and no device node or
        // set-user-id file in it (a tarball can hold both) works inside.
        let project = at(env.project.to_str().unwrap());
        for o in ["rw", "nosuid", "nodev"] {
            assert!(
                project.iter().any(|x| x == o),
                "{w}: the project {project:?}"
            );
        }
        reconfigure(&env, &mock, CONTROL);
        let outside = turn(&env, &mock, |_| vec!["cat /proc/self/mountinfo".into()]).remove(0);
        let host_proc = mounts(&outside.1)
            .into_iter()
            .rev()
            .find(|(p, _)| p == "/proc")
            .map(|(_, o)| o)
            .unwrap_or_default();
        assert!(
            host_proc.iter().any(|o| o == "rw"),
            "{w}: control: the host's /proc {host_proc:?}"
        );
    }
}

#[test]
fn the_secure_bits_are_set_and_locked_inside() {
    // SECBIT_NOROOT, SECBIT_NO_SETUID_FIXUP, SECBIT_KEEP_CAPS_LOCKED and
    // SECBIT_NO_CAP_AMBIENT_RAISE, each with its lock (linux/securebits.h): 0xef, read back
    // with prctl(PR_GET_SECUREBITS). The control: outside, none is set.
    let read = "python3 -c 'import ctypes; print(ctypes.CDLL(None).prctl(27, 0, 0, 0, 0))'";
    for who in runners() {
        let (env, mock) = setup(who, "");
        let w = who.label();
        let inside = turn(&env, &mock, |_| vec![read.into()]).remove(0);
        assert_eq!(inside.1.lines().next(), Some("239"), "{w}: {}", inside.1);
        reconfigure(&env, &mock, CONTROL);
        let outside = turn(&env, &mock, |_| vec![read.into()]).remove(0);
        assert_eq!(
            outside.1.lines().next(),
            Some("0"),
            "{w}: control: {}",
            outside.1
        );
    }
}

/// `connect(2)` with each address length around the kernel's bounds, and to a socket nobody
/// listens on: Unix sockets the script makes itself, then (with `inet`) TCP on loopback. Each
/// line is `<case> OK` or `<case> ERR <errno>`.
const CONNECTS: &str = r#"import ctypes, os, socket, struct, sys
libc = ctypes.CDLL(None, use_errno=True)
def attempt(case, family, addr, n):
    buf = ctypes.create_string_buffer(max(n, len(addr)))
    ctypes.memmove(buf, addr, len(addr))
    c = socket.socket(family)
    r = libc.connect(c.fileno(), buf, n)
    print(case, 'OK' if r == 0 else 'ERR %d' % ctypes.get_errno())
    c.close()
def unix(name):
    return struct.pack('=H', socket.AF_UNIX) + os.path.abspath(name).encode() + b'\x00'
for name in ['conn.sock', 'stale.sock']:
    if os.path.exists(name):
        os.remove(name)
srv = socket.socket(socket.AF_UNIX); srv.bind('conn.sock'); srv.listen(16)
gone = socket.socket(socket.AF_UNIX); gone.bind('stale.sock'); gone.close()
addr = unix('conn.sock')
for case, n in [('unix-fitting', len(addr)), ('unix-sun', 110), ('unix-past-sun', 111),
                ('unix-storage', 128), ('unix-long', 4096)]:
    attempt(case, socket.AF_UNIX, addr, n)
attempt('unix-stale', socket.AF_UNIX, unix('stale.sock'), len(unix('stale.sock')))
if sys.argv[1:] == ['inet']:
    srv4 = socket.socket(); srv4.bind(('127.0.0.1', 0)); srv4.listen(16)
    def inet(port):
        return struct.pack('=H', socket.AF_INET) + struct.pack('>H', port) + bytes([127, 0, 0, 1])
    addr4 = inet(srv4.getsockname()[1])
    for case, n in [('inet-fitting', 16), ('inet-storage', 128), ('inet-long', 129)]:
        attempt(case, socket.AF_INET, addr4, n)
    free = socket.socket(); free.bind(('127.0.0.1', 0)); closed = free.getsockname()[1]; free.close()
    attempt('inet-closed', socket.AF_INET, inet(closed), 16)
"#;

/// What the kernel answers [`CONNECTS`] outside any sandbox.
const CONNECTS_ANSWERED: [&str; 6] = [
    "unix-fitting OK",
    "unix-sun OK",
    "unix-past-sun ERR 22",
    "unix-storage ERR 22",
    "unix-long ERR 22",
    "unix-stale ERR 111",
];
const CONNECTS_ANSWERED_INET: [&str; 4] = [
    "inet-fitting OK",
    "inet-storage OK",
    "inet-long ERR 22",
    "inet-closed ERR 111",
];

#[test]
fn a_connect_is_answered_as_the_kernel_answers_it_outside() {
    // The connect broker reads the address out of the caller's memory and connects in its
    // place: every length the kernel refuses is refused alike (one longer than a
    // `sockaddr_storage` before it is read: its length is the caller's choice), every length it
    // takes is taken, and a refused connection is the kernel's own errno, for Unix sockets
    // with the network off and on and for TCP with it on. The control runs the same script with
    // the sandbox off.
    let unix: Vec<String> = CONNECTS_ANSWERED.iter().map(|l| l.to_string()).collect();
    let mut both = unix.clone();
    both.extend(CONNECTS_ANSWERED_INET.iter().map(|l| l.to_string()));
    for who in runners() {
        let w = who.label();
        for (extra, arg, expected) in [
            ("", "", &unix),
            ("[sandbox]\nnetwork = true\n", "inet", &both),
            (CONTROL, "inet", &both),
        ] {
            let (env, mock) = setup(who, extra);
            env.write("connects.py", CONNECTS);
            let (_, out) =
                turn(&env, &mock, |_| vec![format!("python3 connects.py {arg}")]).remove(0);
            let lines: Vec<String> = out
                .lines()
                .filter(|l| l.starts_with("unix-") || l.starts_with("inet-"))
                .map(str::to_string)
                .collect();
            assert_eq!(&lines, expected, "{w}, {extra:?}: {out}");
        }
    }
}

#[test]
fn an_entry_that_cannot_be_opened_for_reading_is_still_held() {
    // The view is built over the project's entries by path, without opening them: a held
    // entry nobody may read (mode 000) or a FIFO (whose open for reading would wait for a
    // writer) is held read-only like any other, and the command runs. The control: outside,
    // the same entry is replaced at will.
    for who in runners() {
        for kind in ["unreadable", "fifo"] {
            let (env, mock) = setup(who, "");
            let config = env.project.join(".git/config");
            if kind == "fifo" {
                let c = std::ffi::CString::new(config.to_str().unwrap()).unwrap();
                // SAFETY: mkfifo with a valid path.
                assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o644) }, 0);
            } else {
                env.write(".git/config", "[core]\n");
            }
            let w = format!("{} ({kind})", who.label());
            let change = "mv .git/config .git/config.old 2>&1; echo ran";
            let lock = |mode| {
                std::fs::set_permissions(&config, std::fs::Permissions::from_mode(mode)).unwrap()
            };
            lock(0o000);
            let inside = turn(&env, &mock, |_| vec![change.into()]).remove(0);
            assert!(inside.1.contains("ran"), "{w}: {}", inside.1);
            assert!(
                !env.project.join(".git/config.old").exists() && config.exists(),
                "{w}: {}",
                inside.1
            );
            reconfigure(&env, &mock, CONTROL);
            let outside = turn(&env, &mock, |_| vec![change.into()]).remove(0);
            assert!(outside.1.contains("ran"), "{w}: {}", outside.1);
            assert!(
                env.project.join(".git/config.old").exists(),
                "{w}: control: {}",
                outside.1
            );
        }
    }
}

#[test]
fn without_namespaces_agent_processes_are_refused_with_what_is_missing() {
    for who in runners() {
        let (mut env, mock) = setup(who, "");
        env.env
            .push(("OPENMAX_SANDBOX_SIMULATE".into(), "no-namespaces".into()));
        let outs = turn(&env, &mock, |_| vec!["echo ran > ran.txt".into()]);
        let (ok, out) = &outs[0];
        let w = who.label();
        assert!(!ok, "{w}: {out}");
        assert!(
            out.contains("the sandbox is unavailable")
                && out.contains("namespaces")
                && out.contains("[sandbox] mode = \"off\""),
            "{w}: {out}"
        );
        assert!(env.read("ran.txt").is_none());
        let check = env.run(&["sandbox", "check"]);
        assert_eq!(check.code, Some(1), "{w}: {}", check.stdout);
        assert!(check.stdout.contains("namespaces"), "{w}: {}", check.stdout);
        // The user's own opt-out runs it, unconfined.
        reconfigure(&env, &mock, "[sandbox]\nmode = \"off\"\n");
        let outs = turn(&env, &mock, |_| vec!["echo ran > ran.txt".into()]);
        assert!(outs[0].0, "{w}: {}", outs[0].1);
        let check = env.run(&["sandbox", "check"]);
        assert_eq!(check.code, Some(1));
        assert!(check.stdout.contains("OFF"), "{}", check.stdout);
    }
}

#[test]
fn sandbox_check_reports_every_layer_in_force() {
    for who in runners() {
        let (env, _mock) = setup(who, "");
        let out = env.run(&["sandbox", "check"]);
        let w = who.label();
        assert_eq!(out.code, Some(0), "{w}: {}{}", out.stdout, out.stderr);
        for part in [
            "every layer is in force",
            "mount, pid, IPC, network",
            "CapEff=0000000000000000",
            "CapBnd=0000000000000000",
            "no_new_privs",
            // Seccomp's filter mode, as the first process's /proc status reads it back.
            "mode 2; connect(2) answered by the broker",
            ".git/hooks",
            "pts (private)",
        ] {
            assert!(
                out.stdout.contains(part),
                "{w}: no {part:?} in\n{}",
                out.stdout
            );
        }
        assert_eq!(
            out.stdout.contains("a user namespace of its own"),
            !who.is_root(),
            "{w}: {}",
            out.stdout
        );
    }
}

#[test]
fn a_home_or_config_another_user_can_write_is_refused_with_the_fix() {
    for who in runners() {
        let (env, _mock) = setup(who, "");
        let config = env.home.join("config.toml");
        for (path, mode) in [(&env.home, 0o777), (&config, 0o666), (&config, 0o664)] {
            let before = std::fs::metadata(path).unwrap().permissions().mode() & 0o777;
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).unwrap();
            let out = env.run(&["-p", "hi"]);
            std::fs::set_permissions(path, std::fs::Permissions::from_mode(before)).unwrap();
            let w = who.label();
            assert_eq!(out.code, Some(1), "{w}: {mode:o}: {}", out.stderr);
            assert!(
                out.stderr
                    .contains(&format!("chmod go-w {}", path.display())),
                "{w}: {}",
                out.stderr
            );
        }
        // Restored, it starts again.
        let out = env.run(&["sandbox", "check"]);
        assert_eq!(out.code, Some(0), "{}", out.stderr);
    }
}

/// A `[sandbox] protected` entry named through a symlinked directory of the project is held
/// where it really lies: the command runs and cannot change it, and `write_file` refuses it by
/// either name. The control: with the sandbox off the command changes it.
#[test]
fn a_protected_entry_named_through_a_symlink_is_held_where_it_lies() {
    let change = "echo ran > ran.txt; echo changed > conf/x.toml";
    for who in runners() {
        let w = who.label();
        // The control's config ends in its `[sandbox]` table.
        for (sandbox, extra) in [(true, "[sandbox]\n"), (false, CONTROL)] {
            let extra = format!("{extra}protected = [\"conf/x.toml\"]\n");
            let (env, mock) = setup(who, &extra);
            env.write("real/x.toml", "kept\n");
            std::os::unix::fs::symlink("real", env.project.join("conf")).unwrap();
            let (ok, out) = turn(&env, &mock, |_| vec![change.into()]).remove(0);
            assert_eq!(env.read("ran.txt").as_deref(), Some("ran\n"), "{w}: {out}");
            let x = env.read("real/x.toml");
            if sandbox {
                assert!(!ok && out.contains("Read-only file system"), "{w}: {out}");
                assert_eq!(x.as_deref(), Some("kept\n"), "{w}: {out}");
            } else {
                assert!(ok, "{w}: control: {out}");
                assert_eq!(x.as_deref(), Some("changed\n"), "{w}: control: {out}");
                continue;
            }
            mock.push(tool_calls_reply(&[
                (
                    "w1",
                    "write_file",
                    json!({"path": "conf/x.toml", "content": "w1\n"}),
                ),
                (
                    "w2",
                    "write_file",
                    json!({"path": "real/x.toml", "content": "w2\n"}),
                ),
            ]));
            mock.push(text_reply("done"));
            let mut s = env.stdio(&[]);
            s.user("write them");
            let (evs, _) = s.turn();
            assert_eq!(s.finish().0, Some(0));
            for id in ["w1", "w2"] {
                let e = evs
                    .iter()
                    .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
                    .unwrap();
                assert!(
                    e["ok"] == false && e["output"].as_str().unwrap().contains("is protected"),
                    "{w}: {e}"
                );
            }
            assert_eq!(env.read("real/x.toml").as_deref(), Some("kept\n"), "{w}");
        }
    }
}
