//! The sandbox's first process (pid 1 of its pid namespace). In order:
//! 1. dies with the helper (parent-death signal);
//! 2. in a user namespace, maps the user's own ids to themselves;
//! 3. builds the view ([`super::view`]) and returns to the working directory in it;
//! 4. with the network off, opens the sandbox's socket table for the broker;
//! 5. drops every privilege ([`super::privileges`]) and installs Landlock and both seccomp
//!    filters ([`super::filter`]);
//! 6. tells the helper `ready <listener> <table>` and waits for `go` (the helper takes both
//!    descriptors with `pidfd_getfd` meanwhile);
//! 7. runs PROGRAM as its child in a session of its own (no controlling terminal), passes on
//!    the [`super::FORWARDED`] signals, reaps every orphan, and when PROGRAM ends reports
//!    `exit <raw status>` and exits, which ends every process left in the namespace.
//!
//! A failure at any step is reported as `failed <why>` and nothing runs.

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicI32, Ordering};

use super::{filter, privileges, send, view, Failure, Ids, Launch, Report, SETUP_FAILED};
use crate::sandbox::spec::ConfineSpec;

/// PROGRAM's pid, for the signal forwarder.
static CHILD: AtomicI32 = AtomicI32::new(0);

extern "C" fn forward_to_child(sig: libc::c_int) {
    let pid = CHILD.load(Ordering::Relaxed);
    if pid > 0 {
        // SAFETY: kill is async-signal-safe.
        unsafe {
            libc::kill(pid, sig);
        }
    }
}

/// What setting up left for the rest of the run.
struct Ready {
    listener: OwnedFd,
    table: Option<OwnedFd>,
    built: view::Built,
    landlock_abi: i32,
}

/// Run as the sandbox's first process; never returns.
pub fn run(
    spec: &ConfineSpec,
    plan: &view::Plan,
    launch: Launch,
    cwd: &Path,
    chan: OwnedFd,
    ids: Ids,
    user_ns: bool,
) -> ! {
    // SAFETY: prctl with integer arguments.
    unsafe {
        libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0);
    }
    let code = match setup(spec, plan, cwd, ids, user_ns) {
        Err(Failure(why)) => {
            let _ = send(&chan, &format!("failed {why}"));
            SETUP_FAILED
        }
        Ok(ready) => after(spec, ready, launch, &chan, user_ns),
    };
    std::process::exit(code)
}

fn setup(
    spec: &ConfineSpec,
    plan: &view::Plan,
    cwd: &Path,
    ids: Ids,
    user_ns: bool,
) -> Result<Ready, Failure> {
    if user_ns {
        map_ids(ids)?;
    }
    let built = view::build(spec, plan).map_err(|Failure(e)| {
        if user_ns && e.contains("Operation not permitted") {
            Failure(format!(
                "{e} (in a user namespace of its own: on Ubuntu 23.10 and later AppArmor \
                 withholds the capabilities such a namespace gives; sysctl \
                 kernel.apparmor_restrict_unprivileged_userns=0, or an AppArmor profile for \
                 openmax allowing userns)"
            ))
        } else {
            Failure(e)
        }
    })?;
    std::env::set_current_dir(cwd).map_err(|e| {
        Failure::io(
            &format!("the working directory {} in the sandbox", cwd.display()),
            e,
        )
    })?;
    let table = if spec.network {
        None
    } else {
        Some(super::diag::open().map_err(|e| Failure::io("the sandbox's socket table", e))?)
    };
    // The first process stays dumpable: the helper, outside and without capabilities when it
    // is not root, takes its descriptors and reads its `/proc` entries. What PROGRAM could do
    // through it (it may trace it) it can do itself: both run under the same filters, without
    // capabilities, with the same environment.
    privileges::drop_all()?;
    let landlock_abi = filter::landlock(&writable(spec, plan), spec.network)?;
    filter::install_refusals(spec.network, spec.read_only)?;
    let listener = filter::install_notify()?;
    // Only stdin, stdout and stderr reach PROGRAM.
    // SAFETY: close_range with integer arguments.
    unsafe {
        libc::syscall(
            libc::SYS_close_range,
            3u32,
            u32::MAX,
            libc::CLOSE_RANGE_CLOEXEC,
        );
    }
    Ok(Ready {
        listener,
        table,
        built,
        landlock_abi,
    })
}

/// Map the user's own uid and gid to themselves in the new user namespace.
fn map_ids(ids: Ids) -> Result<(), Failure> {
    let write = |file: &str, text: String| {
        std::fs::write(format!("/proc/self/{file}"), text).map_err(|e| {
            Failure::io(
                &format!("writing /proc/self/{file} in the user namespace"),
                e,
            )
        })
    };
    write("uid_map", format!("{0} {0} 1\n", ids.uid))?;
    write("setgroups", "deny\n".into())?;
    write("gid_map", format!("{0} {0} 1\n", ids.gid))
}

/// What Landlock lets an agent process write, as the view shows it.
fn writable(spec: &ConfineSpec, plan: &view::Plan) -> filter::Writable {
    let mut dirs: Vec<PathBuf> = plan.covered.clone();
    if plan.covered.is_empty() {
        dirs.push(spec.tmp.clone());
    }
    if !spec.read_only {
        dirs.push(spec.project.clone());
        dirs.extend(spec.writable.iter().cloned());
    }
    dirs.extend([PathBuf::from("/dev/shm"), PathBuf::from("/dev/pts")]);
    let devices = view::DEVICES
        .iter()
        .map(|d| Path::new("/dev").join(d))
        .collect();
    filter::Writable { dirs, devices }
}

fn after(spec: &ConfineSpec, ready: Ready, launch: Launch, chan: &OwnedFd, user_ns: bool) -> i32 {
    let table = ready.table.as_ref().map_or(-1, |t| t.as_raw_fd());
    if send(
        chan,
        &format!("ready {} {table}", ready.listener.as_raw_fd()),
    )
    .is_err()
    {
        return SETUP_FAILED;
    }
    match super::recv(chan) {
        Ok(Some(m)) if m == "go" => {}
        _ => return SETUP_FAILED,
    }
    drop(ready.listener);
    drop(ready.table);
    let Some((program, args)) = launch else {
        let report = Report {
            // SAFETY: getuid has no preconditions.
            uid: unsafe { libc::getuid() },
            landlock_abi: ready.landlock_abi,
            user_namespace: user_ns,
            network_namespace: !spec.network,
            capabilities: privileges::read_back(),
            no_new_privs: privileges::status_field("NoNewPrivs") == 1,
            seccomp: privileges::status_field("Seccomp"),
            connect_broker: true,
            held: ready.built.held,
            tmp_at: ready.built.tmp_at,
            dev: ready.built.dev,
        };
        let json = serde_json::to_string(&report).unwrap_or_default();
        let _ = send(chan, &format!("report {json}"));
        return 0;
    };
    let mut cmd = std::process::Command::new(&program);
    cmd.args(&args);
    // SAFETY: setsid in the forked child, before exec; async-signal-safe.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("openmax: cannot run {}: {e}", program.to_string_lossy());
            let code = if e.kind() == std::io::ErrorKind::NotFound {
                127
            } else {
                126
            };
            let _ = send(chan, &format!("exit {}", code << 8));
            return 0;
        }
    };
    let pid = child.id() as libc::pid_t;
    CHILD.store(pid, Ordering::Relaxed);
    super::forward_signals(forward_to_child);
    loop {
        let mut status = 0;
        // SAFETY: waitpid on any child with a valid status pointer.
        let r = unsafe { libc::waitpid(-1, &mut status, 0) };
        if r == pid {
            let _ = send(chan, &format!("exit {status}"));
            return 0;
        }
        if r < 0 {
            match std::io::Error::last_os_error().raw_os_error() {
                Some(libc::EINTR) => continue,
                _ => return SETUP_FAILED,
            }
        }
    }
}
