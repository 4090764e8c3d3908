//! The sandbox keeps the whole host out of reach, end to end: a scripted model runs each attack
//! with the `shell` tool through the real `openmax --stdio` (auto mode), as root and as an
//! ordinary user ([`runners`]). Every attack has a control: the same commands with the sandbox
//! off (and the variables that point at the services allowed through), run by the same user,
//! must succeed, so an attack cannot pass for refused because it was mistyped.
//!
//! The test's directories live under `/var/tmp` ([`TestEnv::visible`]): the sandbox shows them
//! read-only, so what is tried against `$OPENMAX_HOME` meets the sandbox's refusal, not a path
//! it hides.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use openmax_tests::attack::*;
use openmax_tests::*;
use serde_json::json;

/// A Unix socket server outside the sandbox (a thread of this test) answering `reply` to
/// every connection, reachable by `who` outside the sandbox.
fn serve(listener: UnixListener, reply: &'static str) {
    std::thread::spawn(move || {
        for c in listener.incoming().flatten() {
            use std::io::Write;
            let mut c = c;
            let _ = c.write_all(reply.as_bytes());
        }
    });
}

fn path_server(path: &Path, reply: &'static str) {
    let _ = std::fs::remove_file(path);
    let l = UnixListener::bind(path).unwrap();
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o777)).unwrap();
    serve(l, reply);
}

/// An abstract socket name no other test of this run uses.
fn unique_name(what: &str) -> String {
    static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("openmax-e2e-{what}-{}-{n}", std::process::id())
}

/// A Python probe connecting to the Unix socket `addr` (`@name` for an abstract one) and
/// printing what it answers.
fn connect(addr: &str) -> String {
    let a = match addr.strip_prefix('@') {
        Some(name) => format!("'\\0{name}'"),
        None => format!("'{addr}'"),
    };
    format!(
        "python3 -c \"import socket; s=socket.socket(socket.AF_UNIX); s.connect({a}); print(s.recv(64).decode())\""
    )
}

/// A tmux server of `who`'s outside the sandbox, with a session `victim`.
struct Tmux {
    tmux: PathBuf,
    socket: PathBuf,
    who: Who,
}

impl Tmux {
    fn start(dir: &Path, who: Who) -> Tmux {
        std::fs::create_dir_all(dir).unwrap();
        who.own(dir);
        let t = Tmux {
            tmux: openmax_tests::deps::tmux(),
            socket: dir.join("server.sock"),
            who,
        };
        let out = t.run(&["-f", "/dev/null", "new-session", "-d", "-s", "victim", "sh"]);
        assert!(out.status.success(), "{out:?}");
        t.alive();
        t
    }

    /// The server still runs (its session's shell did not end at once).
    fn alive(&self) {
        std::thread::sleep(Duration::from_millis(200));
        let out = self.run(&["has-session", "-t", "victim"]);
        assert!(
            out.status.success(),
            "the test's tmux server of {} is gone: {}",
            self.who.label(),
            String::from_utf8_lossy(&out.stderr)
        );
    }

    fn run(&self, args: &[&str]) -> std::process::Output {
        let mut c = std::process::Command::new(&self.tmux);
        // A command given as one string (the pane's `sh`, a `new-window` payload) runs through
        // tmux's default shell: $SHELL, else the user's login shell, which for the ordinary
        // test user is nologin (the pane would end at once, and the server with it).
        c.arg("-S")
            .arg(&self.socket)
            .args(args)
            .env_remove("TMUX")
            .env("SHELL", "/bin/sh");
        self.who.apply(&mut c);
        c.output().unwrap()
    }

    /// `$TMUX` as tmux sets it inside a pane of this server.
    fn env_value(&self) -> String {
        let out = self.run(&["display-message", "-p", "#{pid}"]);
        let pid = String::from_utf8_lossy(&out.stdout).trim().to_string();
        format!("{},{pid},0", self.socket.display())
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self.run(&["kill-server"]);
    }
}

/// An ssh-agent of `who`'s outside the sandbox, listening on `socket`.
struct Agent {
    pid: i32,
}

impl Agent {
    fn start(socket: &Path, who: Who) -> Agent {
        let mut c = std::process::Command::new("ssh-agent");
        c.arg("-a").arg(socket);
        who.apply(&mut c);
        let out = c.output().expect("ssh-agent runs");
        let text = String::from_utf8_lossy(&out.stdout);
        let pid = text
            .split("SSH_AGENT_PID=")
            .nth(1)
            .and_then(|r| r.split(';').next())
            .and_then(|p| p.parse().ok())
            .unwrap_or_else(|| panic!("no agent pid in {text}"));
        Agent { pid }
    }
}

impl Drop for Agent {
    fn drop(&mut self) {
        // SAFETY: plain kill(2) of the agent this test started.
        unsafe { libc::kill(self.pid, libc::SIGKILL) };
    }
}

/// The services of one user outside the sandbox, and the commands an agent tries on them.
struct Services {
    markers: PathBuf,
    tmux: Tmux,
    _agent: Agent,
    agent_socket: PathBuf,
    abstract_name: String,
}

impl Services {
    fn start(env: &TestEnv) -> Services {
        let markers = env.root.join("markers");
        std::fs::create_dir_all(&markers).unwrap();
        env.who.own(&markers);
        let tmux = Tmux::start(&env.root.join("tmux"), env.who);
        let agent_socket = env.root.join("agent/agent.sock");
        std::fs::create_dir_all(agent_socket.parent().unwrap()).unwrap();
        env.who.own(&env.root);
        let agent = Agent::start(&agent_socket, env.who);
        path_server(&env.root.join("echo.sock"), "ECHO-REACHED\n");
        path_server(&env.project.join("svc.sock"), "SVC-REACHED\n");
        let abstract_name = unique_name("svc");
        let addr =
            std::os::unix::net::SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
        serve(UnixListener::bind_addr(&addr).unwrap(), "ABS-REACHED\n");
        Services {
            markers,
            tmux,
            _agent: agent,
            agent_socket,
            abstract_name,
        }
    }

    fn commands(&self, env: &TestEnv) -> Vec<String> {
        let m = self.markers.display();
        let sock = self.tmux.socket.display();
        vec![
            format!("tmux new-window -d 'touch {m}/tmux-env'"),
            format!("tmux -S {sock} new-window -d 'touch {m}/tmux-path'"),
            format!("tmux -S {sock} send-keys -t victim 'touch {m}/tmux-keys' Enter"),
            "ssh-add -l".into(),
            format!("SSH_AUTH_SOCK={} ssh-add -l", self.agent_socket.display()),
            connect(&env.root.join("echo.sock").display().to_string()),
            connect("svc.sock"),
            connect(&format!("@{}", self.abstract_name)),
        ]
    }

    fn marker(&self, name: &str) -> PathBuf {
        self.markers.join(name)
    }
}

#[test]
fn services_of_the_host_cannot_be_reached() {
    for who in runners() {
        for with_tmux_var in [true, false] {
            let (mut env, mock) = setup(who, "");
            let svc = Services::start(&env);
            if with_tmux_var {
                env.env.push(("TMUX".into(), svc.tmux.env_value()));
                env.env.push(("TMUX_PANE".into(), "%0".into()));
            }
            env.env.push((
                "SSH_AUTH_SOCK".into(),
                svc.agent_socket.display().to_string(),
            ));
            let cmds = svc.commands(&env);
            let outs = turn(&env, &mock, |_| cmds.clone());
            let w = who.label();
            for (cmd, (ok, out)) in cmds.iter().zip(&outs) {
                assert!(!ok, "{w}: {cmd} succeeded in the sandbox: {out}");
                assert!(!out.contains("REACHED"), "{w}: {cmd}: {out}");
                assert!(!out.contains("has no identities"), "{w}: {cmd}: {out}");
            }
            // A socket outside whose file the sandbox sees is refused by the broker.
            for i in [1, 2, 4, 5, 6] {
                assert!(
                    outs[i].1.contains("Permission denied"),
                    "{w}: {}: {}",
                    cmds[i],
                    outs[i].1
                );
            }
            // The variables naming the services were not passed on.
            assert!(
                outs[3].1.contains("Could not open a connection"),
                "{w}: {}",
                outs[3].1
            );
            // The abstract name does not exist in the sandbox's own network namespace.
            assert!(
                outs[7].1.contains("Connection refused"),
                "{w}: {}",
                outs[7].1
            );
            std::thread::sleep(Duration::from_millis(300));
            for m in ["tmux-env", "tmux-path", "tmux-keys"] {
                assert!(!svc.marker(m).exists(), "{w}: {m} ran outside the sandbox");
            }

            // The control: the same commands with the sandbox off reach every service.
            reconfigure(&env, &mock, CONTROL);
            let outs = turn(&env, &mock, |_| cmds.clone());
            for m in ["tmux-path", "tmux-keys"] {
                assert!(appears(&svc.marker(m)), "{w}: the control's {m} never ran");
            }
            if with_tmux_var {
                assert!(
                    appears(&svc.marker("tmux-env")),
                    "{w}: the control's tmux-env never ran"
                );
            }
            for i in [3, 4] {
                assert!(
                    outs[i].1.contains("has no identities"),
                    "{w}: {}",
                    outs[i].1
                );
            }
            for (i, want) in [(5, "ECHO-REACHED"), (6, "SVC-REACHED"), (7, "ABS-REACHED")] {
                assert!(
                    outs[i].0 && outs[i].1.contains(want),
                    "{w}: {}: {}",
                    cmds[i],
                    outs[i].1
                );
            }
        }
    }
}

/// Listening on a TCP port (a development server) needs the network switch: refused with the
/// network off (the control), and with it on the sandbox's Landlock ruleset leaves binding
/// alone, from the command and from a grandchild.
#[test]
fn a_tcp_listener_needs_the_network_switch() {
    let listen = "import socket\ns = socket.socket()\ns.bind(('127.0.0.1', 0))\ns.listen()\nprint('bound')\n";
    for who in runners() {
        for (extra, binds) in [("", false), ("[sandbox]\nnetwork = true\n", true)] {
            let (env, mock) = setup(who, extra);
            env.write("listen.py", listen);
            let outs = turn(&env, &mock, |_| {
                vec![
                    "python3 listen.py".to_string(),
                    "bash -c 'bash -c \"python3 listen.py\"'".to_string(),
                ]
            });
            for (ok, out) in outs {
                assert_eq!(ok && out.contains("bound"), binds, "{extra:?}: {out}");
            }
        }
    }
}

/// A TCP connection to a server on the host's loopback needs the network switch: refused with
/// the network off, made with it on (the control), from the command and from a grandchild.
#[test]
fn a_loopback_connection_needs_the_network_switch() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    for who in runners() {
        for (extra, connects) in [("", false), ("[sandbox]\nnetwork = true\n", true)] {
            let (env, mock) = setup(who, extra);
            let outs = turn(&env, &mock, |_| {
                vec![probe.clone(), format!("bash -c 'bash -c \"{probe}\"'")]
            });
            for (ok, out) in outs {
                assert_eq!(
                    (ok, out.contains("connected")),
                    (connects, connects),
                    "{extra:?}: {out}"
                );
            }
        }
    }
}

/// With the network on the sandbox shares the host's network namespace: the broker still
/// refuses the host's abstract sockets, and its own still work.
#[test]
fn with_the_network_on_abstract_sockets_outside_are_still_refused() {
    for who in runners() {
        let (env, mock) = setup(who, "[sandbox]\nnetwork = true\n");
        let name = unique_name("net");
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        serve(UnixListener::bind_addr(&addr).unwrap(), "ABS-REACHED\n");
        // With the network on, abstract names are the host's: this one is unique too, and the
        // accepting thread a daemon, so a refused connect leaves no process holding it.
        let own = unique_name("own");
        env.write(
            "own.py",
            &format!(
                r#"import socket, threading
srv = socket.socket(socket.AF_UNIX)
srv.bind('\0{own}')
srv.listen(1)
threading.Thread(target=lambda: srv.accept()[0].send(b'OWN-REACHED'), daemon=True).start()
c = socket.socket(socket.AF_UNIX)
c.connect('\0{own}')
print(c.recv(16).decode())
"#
            ),
        );
        let cmds = vec![connect(&format!("@{name}")), "python3 own.py".to_string()];
        let outs = turn(&env, &mock, |_| cmds.clone());
        let w = who.label();
        assert!(
            !outs[0].0 && outs[0].1.contains("Permission denied"),
            "{w}: {}",
            outs[0].1
        );
        assert!(
            outs[1].0 && outs[1].1.contains("OWN-REACHED"),
            "{w}: {}",
            outs[1].1
        );
        reconfigure(&env, &mock, CONTROL);
        let outs = turn(&env, &mock, |_| cmds.clone());
        assert!(
            outs[0].0 && outs[0].1.contains("ABS-REACHED"),
            "{w}: {}",
            outs[0].1
        );
    }
}

/// A process of the user's outside the sandbox, holding a value in its environment.
struct Sleeper {
    child: std::process::Child,
    value: String,
}

impl Sleeper {
    fn start(who: Who) -> Sleeper {
        let value = format!("omx-hidden-{}-{}", std::process::id(), who.label().len());
        let mut c = std::process::Command::new("sleep");
        c.arg("3301").env("OMX_HIDDEN_VALUE", &value);
        who.apply(&mut c);
        Sleeper {
            child: c.spawn().unwrap(),
            value,
        }
    }
}

impl Drop for Sleeper {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The address this test adds to the loopback interface in its control, as root.
const TEST_ADDR: &str = "192.0.2.77/32";

struct DropAddr;

impl Drop for DropAddr {
    fn drop(&mut self) {
        let _ = std::process::Command::new("ip")
            .args(["addr", "del", TEST_ADDR, "dev", "lo"])
            .output();
    }
}

const MEM_PROBE: &str = r#"import sys
pid = sys.argv[1]
for line in open(f'/proc/{pid}/maps'):
    span, perms = line.split()[:2]
    if perms.startswith('r'):
        f = open(f'/proc/{pid}/mem', 'rb')
        f.seek(int(span.split('-')[0], 16))
        print('MEM-READ', f.read(8).hex())
        break
"#;

const SOCKET_PROBE: &str = r#"import socket, sys
family = {'netlink': socket.AF_NETLINK, 'vsock': socket.AF_VSOCK}[sys.argv[1]]
kind = socket.SOCK_RAW if sys.argv[1] == 'netlink' else socket.SOCK_STREAM
try:
    socket.socket(family, kind)
    print(sys.argv[1].upper() + '-OPEN')
except OSError as e:
    print(sys.argv[1].upper() + '-ERROR', e.errno, e.strerror)
    sys.exit(1)
"#;

#[test]
fn no_view_of_other_processes_and_no_privileges() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        let sleeper = Sleeper::start(who);
        let _cleanup = DropAddr;
        env.write("mem.py", MEM_PROBE);
        env.write("sock.py", SOCKET_PROBE);
        // A file of the project another user owns (root may change it only with CAP_FOWNER).
        env.write("foreign.txt", "x\n");
        let (home, config) = (env.home.clone(), env.home.join("config.toml"));
        let commands = |openmax: u32| {
            let sleeper = sleeper.child.id();
            vec![
                format!("tr '\\0' '\\n' < /proc/{openmax}/environ"),
                format!("python3 mem.py {openmax}"),
                format!("tr '\\0' '\\n' < /proc/{sleeper}/environ"),
                "cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n' | grep -c omx-hidden".into(),
                format!("ip addr add {TEST_ADDR} dev lo && echo ADDR-ADDED && ip addr del {TEST_ADDR} dev lo"),
                "python3 sock.py netlink".into(),
                "python3 sock.py vsock".into(),
                format!("chmod 0777 {} && echo CHMOD-HOME", home.display()),
                format!("chmod 0666 {} && echo CHMOD-CONFIG", config.display()),
                "chmod 0777 foreign.txt && echo CHMOD-FOREIGN".into(),
            ]
        };
        let modes = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        let before = (modes(&home), modes(&config));
        // Owned by nobody (65534), as root can arrange it; for the user it is the user's own
        // file either way, which is what a user can test.
        if who.is_root() {
            std::os::unix::fs::chown(env.project.join("foreign.txt"), Some(65534), Some(65534))
                .unwrap();
        }
        let w = who.label();
        let outs = turn(&env, &mock, commands);
        for (i, (ok, out)) in outs.iter().enumerate() {
            if i == 3 {
                assert_eq!(out.lines().next(), Some("0"), "{w}: c{i}: {out}");
                continue;
            }
            if i == 9 && !who.is_root() {
                continue;
            }
            assert!(!ok, "{w}: c{i} succeeded in the sandbox: {out}");
        }
        assert!(!outs[1].1.contains("MEM-READ"), "{w}: {}", outs[1].1);
        assert!(!outs[2].1.contains(&sleeper.value), "{w}: {}", outs[2].1);
        assert!(outs[5].1.contains("NETLINK-ERROR 13"), "{w}: {}", outs[5].1);
        assert!(outs[6].1.contains("VSOCK-ERROR 13"), "{w}: {}", outs[6].1);
        assert_eq!(
            (modes(&home), modes(&config)),
            before,
            "{w}: a chmod went through"
        );
        if who.is_root() {
            assert!(
                outs[9].1.contains("Operation not permitted") || outs[9].1.contains("Read-only"),
                "{}",
                outs[9].1
            );
        }

        // The control, the same user without the sandbox.
        reconfigure(&env, &mock, CONTROL);
        let outs = turn(&env, &mock, commands);
        if who.is_root() {
            // Root reads openmax's environment and memory outside: the key is not in it.
            assert!(
                outs[0].0 && outs[0].1.contains("OPENMAX_HOME="),
                "{w}: {}",
                outs[0].1
            );
            assert!(
                !outs[0].1.contains(KEY),
                "{w}: the key is in openmax's environment block"
            );
            assert!(outs[1].1.contains("MEM-READ"), "{w}: {}", outs[1].1);
            assert!(outs[4].1.contains("ADDR-ADDED"), "{w}: {}", outs[4].1);
            assert!(outs[9].1.contains("CHMOD-FOREIGN"), "{w}: {}", outs[9].1);
        } else {
            // An ordinary user cannot read a session's /proc entries even outside (it is not
            // dumpable) nor change the network: the sandboxed refusals above are all there is.
            assert!(!outs[0].1.contains(KEY) && !outs[1].1.contains("MEM-READ"));
        }
        assert!(outs[2].1.contains(&sleeper.value), "{w}: {}", outs[2].1);
        assert_ne!(outs[3].1.lines().next(), Some("0"), "{w}: {}", outs[3].1);
        assert!(outs[5].1.contains("NETLINK-OPEN"), "{w}: {}", outs[5].1);
        assert!(!outs[6].1.contains("VSOCK-ERROR 13"), "{w}: {}", outs[6].1);
        assert!(
            outs[7].1.contains("CHMOD-HOME") && outs[8].1.contains("CHMOD-CONFIG"),
            "{w}"
        );
        std::fs::set_permissions(&home, std::fs::Permissions::from_mode(before.0)).unwrap();
        std::fs::set_permissions(&config, std::fs::Permissions::from_mode(before.1)).unwrap();
    }
}

/// `git` as the human runs it in the project, outside any sandbox.
fn human_git(env: &TestEnv, args: &[&str]) -> std::process::Output {
    let mut c = std::process::Command::new("git");
    c.args([
        "-c",
        "user.name=human",
        "-c",
        "user.email=human@example.com",
    ])
    .args(args)
    .current_dir(&env.project)
    .env_clear()
    .env("PATH", std::env::var_os("PATH").unwrap_or_default())
    .env("HOME", &env.home);
    env.who.apply(&mut c);
    c.output().unwrap()
}

fn git_repo(env: &TestEnv) {
    std::fs::remove_dir_all(env.project.join(".git")).unwrap();
    env.write("README", "hello\n");
    env.who.own(&env.root);
    for args in [
        &["init", "-q"][..],
        &["add", "README"],
        &["commit", "-qm", "first"],
    ] {
        let out = human_git(env, args);
        assert!(out.status.success(), "git {args:?}: {out:?}");
    }
}

#[test]
fn code_planted_for_git_is_never_run_by_the_human() {
    for who in runners() {
        for sandboxed in [true, false] {
            let (env, mock) = setup(who, if sandboxed { "" } else { CONTROL });
            git_repo(&env);
            let markers = env.root.join("markers");
            std::fs::create_dir_all(&markers).unwrap();
            env.who.own(&markers);
            let m = markers.display();
            let cmds = vec![
                format!("git config core.fsmonitor 'touch {m}/fsmonitor; false'"),
                format!(
                    "printf '#!/bin/sh\\ntouch {m}/pre-commit\\n' > .git/hooks/pre-commit && chmod +x .git/hooks/pre-commit"
                ),
                format!("printf '[alias]\\n\\tst = !touch {m}/alias\\n' >> .git/config"),
                "echo '* filter=planted' > .git/info/attributes".into(),
                "mv .git .git-moved && mv .git-moved .git && echo RENAMED".into(),
                // What the agent still may do: commit its work.
                "echo change >> README && git add README && git -c user.name=a -c user.email=a@b commit -qm agent && git log --oneline | head -1".into(),
            ];
            let outs = turn(&env, &mock, |_| cmds.clone());
            let w = format!(
                "{} {}",
                who.label(),
                if sandboxed { "sandboxed" } else { "control" }
            );
            assert!(
                outs[5].0 && outs[5].1.contains("agent"),
                "{w}: {}",
                outs[5].1
            );
            let status = human_git(&env, &["status", "--short"]);
            let commit = human_git(&env, &["commit", "--allow-empty", "-qm", "human"]);
            if sandboxed {
                for (i, (ok, out)) in outs[..5].iter().enumerate() {
                    assert!(!ok, "{w}: {} succeeded: {out}", cmds[i]);
                }
                assert!(
                    status.status.success() && commit.status.success(),
                    "{w}: {status:?} {commit:?}"
                );
                for marker in ["fsmonitor", "pre-commit"] {
                    assert!(
                        !markers.join(marker).exists(),
                        "{w}: {marker} ran for the human"
                    );
                }
                assert!(env.project.join(".git/HEAD").exists());
            } else {
                assert!(outs[0].0 && outs[1].0, "{w}: {outs:?}");
                assert!(
                    appears(&markers.join("fsmonitor")),
                    "{w}: the control's fsmonitor never ran"
                );
                assert!(
                    appears(&markers.join("pre-commit")),
                    "{w}: the control's hook never ran"
                );
            }
        }
    }
}

/// `.git/commondir` does not exist in a repository of its own, so no mount can hold it; once it
/// exists, git reads its configuration (and hooks) from the directory it names. The helper
/// removes it the moment the command makes it.
#[test]
fn a_commondir_redirecting_git_is_removed_before_the_human_runs_git() {
    for who in runners() {
        for sandboxed in [true, false] {
            let (env, mock) = setup(who, if sandboxed { "" } else { CONTROL });
            git_repo(&env);
            let markers = env.root.join("markers");
            std::fs::create_dir_all(&markers).unwrap();
            env.who.own(&markers);
            let m = markers.display();
            let cmds = vec![format!(
                "cp -r .git evil-git && printf '[core]\\n\\tfsmonitor = touch {m}/commondir; false\\n' >> evil-git/config \
                 && echo ../evil-git > .git/commondir && sleep 1 && cat .git/commondir"
            )];
            let outs = turn(&env, &mock, |_| cmds.clone());
            let w = format!(
                "{} {}",
                who.label(),
                if sandboxed { "sandboxed" } else { "control" }
            );
            let status = human_git(&env, &["status", "--short"]);
            if sandboxed {
                assert!(
                    outs[0].1.contains("openmax: removed") && outs[0].1.contains("commondir"),
                    "{w}: {}",
                    outs[0].1
                );
                // Gone while the command still ran (not only once it ended): its `cat` found
                // nothing.
                assert!(
                    !outs[0].1.contains("../evil-git") && outs[0].1.contains("No such file"),
                    "{w}: {}",
                    outs[0].1
                );
                assert!(!env.project.join(".git/commondir").exists(), "{w}");
                assert!(status.status.success(), "{w}: {status:?}");
                assert!(
                    !markers.join("commondir").exists(),
                    "{w}: git read the planted configuration"
                );
            } else {
                assert!(outs[0].0, "{w}: {}", outs[0].1);
                assert!(
                    appears(&markers.join("commondir")),
                    "{w}: the control's redirect never ran"
                );
            }
        }
    }
}

/// The file tools refuse what the sandbox holds, whatever the sandbox mode.
#[test]
fn the_file_tools_refuse_git_configuration_and_hooks() {
    for extra in ["", CONTROL] {
        let (env, mock) = setup(Who::Me, extra);
        git_repo(&env);
        let config = std::fs::read_to_string(env.project.join(".git/config")).unwrap();
        mock.push(tool_calls_reply(&[
            ("w1", "write_file", json!({"path": ".git/hooks/post-commit", "content": "#!/bin/sh\ntouch pwned\n"})),
            ("w2", "edit_file", json!({"path": ".git/config", "old_string": "[core]", "new_string": "[core]\n\tfsmonitor = touch pwned"})),
            ("w3", "write_file", json!({"path": ".git/info/exclude", "content": "*\n"})),
            ("w4", "write_file", json!({"path": "src/ok.txt", "content": "fine\n"})),
        ]));
        mock.push(text_reply("done"));
        let mut s = env.stdio(&[]);
        s.user("write them");
        let (evs, _) = s.turn();
        assert_eq!(s.finish().0, Some(0));
        for id in ["w1", "w2", "w3"] {
            let e = evs
                .iter()
                .find(|e| e["type"] == "tool_end" && e["call_id"] == id)
                .unwrap();
            assert_eq!(e["ok"], false, "{e}");
            assert!(
                e["output"].as_str().unwrap().contains("is protected"),
                "{e}"
            );
        }
        assert_eq!(
            std::fs::read_to_string(env.project.join(".git/config")).unwrap(),
            config
        );
        assert!(!env.project.join(".git/hooks/post-commit").exists());
        assert_eq!(env.read("src/ok.txt").as_deref(), Some("fine\n"));
    }
}

#[test]
fn a_session_cannot_write_another_sessions_temp_directory() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        // Session A stays open; its private temp directory is on the host under /tmp.
        let a = env.stdio(&[]);
        let prefix = format!("openmax-agent-{}-", a.pid());
        let end = Instant::now() + DEADLINE;
        // The newest directory of A's pid: one an earlier process of the same pid left (a pid
        // comes round again) is older.
        let dir = loop {
            let found = std::fs::read_dir(std::env::temp_dir())
                .unwrap()
                .flatten()
                .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
                .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
                .max();
            if let Some((_, path)) = found {
                break path;
            }
            assert!(
                Instant::now() < end,
                "session A's temp directory never appeared"
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let d = dir.display();
        let cmds = vec![
            format!("echo pwned > {d}/pwned && echo WROTE"),
            format!("ls {d}"),
            "echo mine > $TMPDIR/mine && cat /tmp/mine".into(),
        ];
        let outs = turn(&env, &mock, |_| cmds.clone());
        let w = who.label();
        assert!(!outs[0].0 && !outs[1].0, "{w}: {outs:?}");
        assert!(
            !dir.join("pwned").exists(),
            "{w}: session B wrote into session A's temp"
        );
        assert!(
            outs[2].0 && outs[2].1.contains("mine"),
            "{w}: {}",
            outs[2].1
        );
        reconfigure(&env, &mock, CONTROL);
        let outs = turn(&env, &mock, |_| cmds.clone());
        assert!(
            outs[0].0 && outs[0].1.contains("WROTE"),
            "{w}: {}",
            outs[0].1
        );
        assert!(dir.join("pwned").exists());
        drop(a);
    }
}

#[test]
fn what_a_project_needs_still_works_in_the_sandbox() {
    for who in runners() {
        let (mut env, mock) = setup(who, "");
        // rustup and cargo as installed for the tests' own user.
        for var in ["RUSTUP_HOME", "CARGO_HOME"] {
            let home = std::env::var("HOME").unwrap_or_default();
            let default = format!("{home}/.{}", var.trim_end_matches("_HOME").to_lowercase());
            env.env
                .push((var.into(), std::env::var(var).unwrap_or(default)));
        }
        env.write(
            "Cargo.toml",
            "[package]\nname = \"tiny\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
        );
        env.write("src/main.rs", "fn main() { println!(\"TINY-RAN\"); }\n");
        env.write(
            "jsdep/package.json",
            r#"{"name":"jsdep","version":"1.0.0","main":"index.js"}"#,
        );
        env.write("jsdep/index.js", "module.exports = 'JSDEP-LOADED';\n");
        env.write(
            "package.json",
            r#"{"name":"app","version":"1.0.0","dependencies":{"jsdep":"file:./jsdep"}}"#,
        );
        env.write(
            "server.py",
            r#"import socket, threading, os
path = os.path.join(os.environ['TMPDIR'], 'test.sock')
srv = socket.socket(socket.AF_UNIX)
srv.bind(path)
srv.listen(1)
threading.Thread(target=lambda: srv.accept()[0].send(b'SELF-REACHED')).start()
c = socket.socket(socket.AF_UNIX)
c.connect(path)
print(c.recv(16).decode())
a, b = socket.socketpair()
a.send(b'PAIR-OK')
print(b.recv(8).decode())
"#,
        );
        let cmds = vec![
            "python3 server.py".to_string(),
            "script -qec 'tty' /dev/null".to_string(),
            "cargo build --offline -q && ./target/debug/tiny".to_string(),
            "npm install --offline --no-audit --no-fund >/dev/null && node -e \"console.log(require('jsdep'))\"".to_string(),
        ];
        let outs = turn(&env, &mock, |_| cmds.clone());
        let w = who.label();
        assert!(
            outs[0].0 && outs[0].1.contains("SELF-REACHED") && outs[0].1.contains("PAIR-OK"),
            "{w}: {}",
            outs[0].1
        );
        assert!(
            outs[1].0 && outs[1].1.contains("/dev/pts/"),
            "{w}: a pty of its own: {}",
            outs[1].1
        );
        // cargo lives under the tests' own home, which an ordinary user may not enter: the
        // control outside says whether this user can build at all.
        reconfigure(&env, &mock, CONTROL);
        let control = turn(&env, &mock, |_| {
            vec![
                cmds[2].clone(),
                "rm -rf node_modules package-lock.json target".into(),
                cmds[3].clone(),
            ]
        });
        if control[0].0 {
            assert!(
                outs[2].0 && outs[2].1.contains("TINY-RAN"),
                "{w}: {}",
                outs[2].1
            );
        } else {
            eprintln!(
                "{w}: cargo does not run for this user outside the sandbox either; skipped: {}",
                control[0].1
            );
        }
        assert!(control[2].0, "{w}: {}", control[2].1);
        assert!(
            outs[3].0 && outs[3].1.contains("JSDEP-LOADED"),
            "{w}: {}",
            outs[3].1
        );
    }
}

/// A connect the broker answers can block (a full listener's backlog): it holds up only itself.
/// The probe fills a listener's backlog, leaves one thread blocked connecting to it, then
/// connects to another listener; `timeout` ends it, within the harness's wait for an event, if
/// that second connect waits behind the first. The control (no sandbox) shows the probe
/// itself: the backlog fills and the second connect goes through.
#[test]
fn a_connect_blocked_on_a_full_listener_holds_up_no_other() {
    for who in runners() {
        let (env, mock) = setup(who, "");
        env.write(
            "blocked.py",
            r#"import os, socket, threading, time
full = socket.socket(socket.AF_UNIX)
full.bind('full.sock')
full.listen(0)
queued = []
while True:
    s = socket.socket(socket.AF_UNIX)
    s.setblocking(False)
    try:
        s.connect('full.sock')
    except BlockingIOError:
        break
    queued.append(s)
    if len(queued) > 64:
        raise SystemExit('the backlog never filled')
print('QUEUED', len(queued), flush=True)
blocked = socket.socket(socket.AF_UNIX)
threading.Thread(target=lambda: blocked.connect('full.sock'), daemon=True).start()
time.sleep(0.5)
free = socket.socket(socket.AF_UNIX)
free.bind('free.sock')
free.listen(1)
c = socket.socket(socket.AF_UNIX)
c.connect('free.sock')
print('OTHER-CONNECTED', flush=True)
os._exit(0)
"#,
        );
        let cmds = vec!["rm -f full.sock free.sock; timeout 8 python3 blocked.py".to_string()];
        let w = who.label();
        let outs = turn(&env, &mock, |_| cmds.clone());
        assert!(
            outs[0].0 && outs[0].1.contains("QUEUED") && outs[0].1.contains("OTHER-CONNECTED"),
            "{w}: {}",
            outs[0].1
        );
        reconfigure(&env, &mock, CONTROL);
        let control = turn(&env, &mock, |_| cmds.clone());
        assert!(
            control[0].0 && control[0].1.contains("OTHER-CONNECTED"),
            "{w}: {}",
            control[0].1
        );
    }
}

/// The terminal openmax draws on (a real one: the TUI in a tmux pane, with `$TMUX` set as tmux
/// sets it) is not the agent's: no controlling terminal, no `/dev/tty`, the pane's own pts is not
/// in the sandbox's `/dev`, and the tmux server behind the pane cannot be asked to type into it
/// (what a watcher pressing `y` on every approval card would do). The markers are computed by the
/// shell (`$((6*7))`), so the command lines the UI shows do not hold them.
#[test]
fn the_terminal_openmax_draws_on_is_out_of_reach() {
    use openmax_tests::tmux::Pane;
    for who in runners() {
        for sandboxed in [true, false] {
            let (env, mock) = setup(who, if sandboxed { "" } else { CONTROL });
            let pane = Pane::start_in_tmux(&env, &[], 100, 30);
            pane.wait_text("test-model");
            let tty = pane.format("#{pane_tty}");
            let sock = pane.socket().display().to_string();
            let cmds = [
                "echo FORGED-$((6*7))-TTY > /dev/tty && echo WROTE-$((6*7))-0".to_string(),
                format!("echo FORGED-$((6*7))-PTS > {tty} && echo WROTE-$((6*7))-1"),
                "printf '\\033]2;PWNED-%s\\007' $((6*7)) > /dev/tty && echo WROTE-$((6*7))-2"
                    .to_string(),
                format!(
                    "printf 'FORGED-%s-OSC\\033]52;c;cm0gLXJmIH4gIw==\\007' $((6*7)) > {tty} && echo WROTE-$((6*7))-3"
                ),
                format!("tmux -S {sock} send-keys -t t TYPED-$((6*7))-SOCK && echo WROTE-$((6*7))-4"),
                "tmux send-keys -t t TYPED-$((6*7))-ENV && echo WROTE-$((6*7))-5".to_string(),
            ];
            for (i, c) in cmds.iter().enumerate() {
                mock.push(tool_reply(&format!("c{i}"), "shell", json!({"command": c})));
            }
            mock.push(text_reply("all-commands-ran"));
            pane.type_text("write to the terminal");
            pane.keys(&["Enter"]);
            pane.wait_text("all-commands-ran");
            let w = format!(
                "{} {}",
                who.label(),
                if sandboxed { "sandboxed" } else { "control" }
            );
            let screen = pane.history();
            let title = pane.format("#{pane_title}");
            // What each command printed went back to the model with its result.
            let last = mock
                .requests()
                .last()
                .map(|r| r.body.to_string())
                .unwrap_or_default();
            let wrote: Vec<bool> = (0..6)
                .map(|i| last.contains(&format!("WROTE-42-{i}")))
                .collect();
            if sandboxed {
                assert_eq!(
                    wrote, [false; 6],
                    "{w}: a write to the terminal went through: {last}"
                );
                assert!(last.contains("No such device or address"), "{w}: {last}");
                for m in [
                    "FORGED-42-TTY",
                    "FORGED-42-PTS",
                    "FORGED-42-OSC",
                    "TYPED-42",
                ] {
                    assert!(
                        !screen.contains(m),
                        "{w}: {m} reached the terminal:\n{screen}"
                    );
                }
                assert!(
                    !title.contains("PWNED-42"),
                    "{w}: the title was set: {title}"
                );
            } else {
                // The UI redraws over text written under it; the title and typed keys stay.
                assert_eq!(wrote, [true; 6], "{w}: the control's writes failed: {last}");
                assert!(
                    title.contains("PWNED-42"),
                    "{w}: the control set no title: {title}"
                );
                for m in ["TYPED-42-SOCK", "TYPED-42-ENV"] {
                    assert!(
                        screen.contains(m),
                        "{w}: the control's {m} was not typed:\n{screen}"
                    );
                }
            }
            pane.keys(&["C-u", "C-d"]);
            let _ = pane.wait_exit();
        }
    }
}

/// A session's private temp directory on the host: there while it runs, gone when it has
/// exited (even though the process ends with `exit`, which runs no destructor); one left by a
/// killed openmax is removed by the next session that starts. The control: a killed session's
/// directory does stay until then.
#[test]
fn a_sessions_temp_directory_goes_with_it() {
    let newest = |pid: u32| {
        let prefix = format!("openmax-agent-{pid}-");
        std::fs::read_dir(std::env::temp_dir())
            .unwrap()
            .flatten()
            .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
            .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
            .max()
            .map(|(_, p)| p)
    };
    for who in runners() {
        let (env, _mock) = setup(who, "");
        let w = who.label();
        let mut s = env.stdio(&[]);
        let dir = newest(s.pid()).unwrap_or_else(|| panic!("{w}: no temp directory"));
        s.close();
        let (code, _, _) = s.finish();
        assert_eq!(code, Some(0), "{w}");
        assert!(!dir.exists(), "{w}: {} outlived its session", dir.display());

        // Killed: the directory stays (the control), until the next session starts.
        let mut killed = env.stdio(&[]);
        let left = newest(killed.pid()).unwrap_or_else(|| panic!("{w}: no temp directory"));
        // SAFETY: kill(2) of the session this test started.
        unsafe { libc::kill(killed.pid() as i32, libc::SIGKILL) };
        killed.close();
        let _ = killed.finish();
        assert!(
            left.exists(),
            "{w}: a killed session's directory is left at first"
        );
        let next = env.stdio(&[]);
        assert!(
            !left.exists(),
            "{w}: the next session did not remove {}",
            left.display()
        );
        drop(next);
    }
}
