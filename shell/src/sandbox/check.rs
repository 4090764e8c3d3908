//! `openmax sandbox check`: which layers of the sandbox are in force for this project on this
//! machine, read back from inside a sandbox built once with nothing run in it (the helper's
//! `--probe`), or what is missing and how to get it.

use std::io::Write;
use std::path::Path;

use super::confine::Confine;
use super::env::{EnvPolicy, HOST_SERVICES, SECRET_MARKERS};
use super::helper::Report;

/// Print the check for `confine`; the exit code: 0 when every layer is in force.
pub fn print(confine: &Confine, env: &EnvPolicy, project: &Path, out: &mut dyn Write) -> i32 {
    let sandbox = match confine {
        Confine::Off => {
            let _ = writeln!(
                out,
                "openmax sandbox check: the sandbox is OFF ([sandbox] mode = \"off\" in {}): \
                 agent processes run with your full authority",
                crate::session::shown("config.toml")
            );
            return 1;
        }
        Confine::Unavailable(why) => {
            let _ = writeln!(out, "openmax sandbox check: {why}");
            return 1;
        }
        Confine::On(s) => s,
    };
    let report = match sandbox.probe() {
        Ok(r) => r,
        Err(why) => {
            let _ = writeln!(out, "openmax sandbox check: {why}");
            return 1;
        }
    };
    let _ = writeln!(
        out,
        "openmax sandbox check: every layer is in force for {}",
        project.display()
    );
    for (what, how) in lines(report, &sandbox.spec, env) {
        let _ = writeln!(out, "  {what:<16} {how}");
    }
    0
}

/// One line for a status display: the layers in force, or why there are none.
pub fn summary(confine: &Confine) -> String {
    let sandbox = match confine {
        Confine::Off => return "OFF (agent processes run with your full authority)".into(),
        Confine::Unavailable(why) => return format!("unavailable: {why}"),
        Confine::On(s) => s,
    };
    match sandbox.probe() {
        Ok(r) => format!(
            "on: {}namespaces (mount, pid, IPC{}), no capabilities, Landlock ABI {}, seccomp",
            if r.user_namespace { "user and " } else { "" },
            if r.network_namespace {
                ", network: off"
            } else {
                "; network: on"
            },
            r.landlock_abi
        ),
        Err(why) => format!("unavailable: {why}"),
    }
}

fn lines(
    r: &Report,
    spec: &super::spec::ConfineSpec,
    env: &EnvPolicy,
) -> Vec<(&'static str, String)> {
    let list = |v: &[String]| {
        if v.is_empty() {
            "none".to_string()
        } else {
            v.join(", ")
        }
    };
    let mut writable = vec![format!("the project {}", spec.project.display())];
    writable.extend(spec.writable.iter().map(|w| w.display().to_string()));
    writable.extend(
        r.tmp_at
            .iter()
            .map(|t| format!("{t} (the session's own temp directory)")),
    );
    writable.push("/dev/shm (private)".into());
    let allowed: Vec<String> = spec
        .unix_sockets
        .iter()
        .map(|s| s.display().to_string())
        .collect();
    let host_vars: Vec<&str> = HOST_SERVICES
        .iter()
        .copied()
        .filter(|v| !env.passes(v))
        .collect();
    vec![
        (
            "user",
            if r.user_namespace {
                format!(
                    "uid {} (a user namespace of its own maps it to itself)",
                    r.uid
                )
            } else {
                format!(
                    "uid {} (openmax runs as root: no user namespace needed)",
                    r.uid
                )
            },
        ),
        (
            "namespaces",
            format!(
                "mount, pid, IPC{}",
                if r.network_namespace {
                    ", network (the network is off: a loopback of its own, down)"
                } else {
                    " (the network is on: the host's)"
                }
            ),
        ),
        (
            "capabilities",
            format!(
                "none{} ({})",
                if r.no_new_privs { ", no_new_privs" } else { "" },
                r.capabilities
            ),
        ),
        ("Landlock", format!("ABI {}", r.landlock_abi)),
        (
            "seccomp",
            format!(
                "mode {}; connect(2) answered by the broker{}",
                r.seccomp,
                if spec.network {
                    "; IPv4, IPv6 and route netlink allowed"
                } else {
                    "; every socket family but AF_UNIX refused"
                }
            ),
        ),
        ("writable", writable.join(", ")),
        ("held read-only", list(&r.held)),
        ("/dev", list(&r.dev)),
        (
            "Unix sockets",
            format!(
                "only those made inside; allowed outside: {}",
                list(&allowed)
            ),
        ),
        (
            "environment",
            format!(
                "withheld: the provider's key, names containing {}, and {} variables naming \
                 a host service ({} …)",
                SECRET_MARKERS.join("/"),
                host_vars.len(),
                host_vars
                    .iter()
                    .take(6)
                    .copied()
                    .collect::<Vec<_>>()
                    .join(", ")
            ),
        ),
        (
            "terminal",
            "none controlling; a private devpts for ptys".into(),
        ),
    ]
}
