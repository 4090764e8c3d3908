//! Privileges: an agent process holds none. The sandbox's first process, once the view is
//! built, empties every capability set (effective, permitted, inheritable, ambient, bounding),
//! locks the secure bits so that running a program as root (uid 0) or a set-user-id one grants
//! nothing back, sets `no_new_privs`, and leaves no controlling terminal to its child. Also
//! when openmax runs as root: root without capabilities cannot read another process's memory
//! or environment, change the network, or change a file it does not own.
//!
//! Invariant: [`drop_all`] either leaves every set empty (read back and checked) or fails, and
//! then nothing runs.

use super::Failure;

/// `SECBIT_NOROOT | SECBIT_NO_SETUID_FIXUP | SECBIT_KEEP_CAPS_LOCKED | SECBIT_NO_CAP_AMBIENT_RAISE`
/// with their locks: uid 0 gains no capabilities at `exec`, none can be raised again.
const SECURE_BITS: libc::c_ulong = 0x01 | 0x02 | 0x04 | 0x08 | 0x20 | 0x40 | 0x80;

fn io(what: &str) -> Failure {
    Failure::io(what, std::io::Error::last_os_error())
}

/// The highest capability number this kernel knows.
fn last_cap() -> u32 {
    std::fs::read_to_string("/proc/sys/kernel/cap_last_cap")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(63)
}

/// Empty every capability set, lock the secure bits, set `no_new_privs`; check the result.
pub fn drop_all() -> Result<(), Failure> {
    let last = last_cap();
    // SAFETY: prctl and capset with integer arguments and a valid header and data.
    unsafe {
        if libc::prctl(libc::PR_SET_SECUREBITS, SECURE_BITS, 0, 0, 0) != 0 {
            return Err(io("locking the secure bits"));
        }
        if libc::prctl(
            libc::PR_CAP_AMBIENT,
            libc::PR_CAP_AMBIENT_CLEAR_ALL,
            0,
            0,
            0,
        ) != 0
        {
            return Err(io("clearing the ambient capabilities"));
        }
        for cap in 0..=last {
            if libc::prctl(libc::PR_CAPBSET_DROP, cap as libc::c_ulong, 0, 0, 0) != 0
                && std::io::Error::last_os_error().raw_os_error() != Some(libc::EINVAL)
            {
                return Err(io("dropping the bounding set"));
            }
        }
    }
    rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: rustix::thread::CapabilitySet::empty(),
            permitted: rustix::thread::CapabilitySet::empty(),
            inheritable: rustix::thread::CapabilitySet::empty(),
        },
    )
    .map_err(|e| Failure::io("emptying the capability sets", e))?;
    // SAFETY: prctl with integer arguments.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(io("setting no_new_privs"));
        }
    }
    let left = rustix::thread::capabilities(None)
        .map_err(|e| Failure::io("reading the capability sets back", e))?;
    // SAFETY: prctl reads with integer arguments.
    let bounding_left = (0..=last)
        .any(|c| unsafe { libc::prctl(libc::PR_CAPBSET_READ, c as libc::c_ulong, 0, 0, 0) == 1 });
    if any_left(&left, bounding_left) {
        return Err(Failure(
            "capabilities remain after dropping them all; nothing may run".into(),
        ));
    }
    Ok(())
}

/// Whether any capability is left: in the effective, permitted or inheritable set, or the
/// bounding set (`bounding_left`). Any one is enough to refuse to run anything.
fn any_left(sets: &rustix::thread::CapabilitySets, bounding_left: bool) -> bool {
    !sets.effective.is_empty()
        || !sets.permitted.is_empty()
        || !sets.inheritable.is_empty()
        || bounding_left
}

/// The helper, outside the sandbox, as root: keep only `CAP_SYS_PTRACE` (taking a sandboxed
/// process's socket and reading its `connect(2)` address, even when it is not dumpable). A
/// helper that is not root has no capability to keep.
pub fn keep_only_ptrace() {
    let Ok(caps) = rustix::thread::capabilities(None) else {
        return;
    };
    if caps.effective.is_empty() {
        return;
    }
    let keep = rustix::thread::CapabilitySet::SYS_PTRACE;
    let _ = rustix::thread::set_capabilities(
        None,
        rustix::thread::CapabilitySets {
            effective: caps.effective & keep,
            permitted: caps.permitted & keep,
            inheritable: rustix::thread::CapabilitySet::empty(),
        },
    );
}

/// The capability lines of `/proc/self/status`, as one string (`CapEff=0 …`), for the report.
pub fn read_back() -> String {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .filter(|l| l.starts_with("Cap"))
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join("="))
        .collect::<Vec<_>>()
        .join(" ")
        .replace(":=", "=")
}

/// A field of `/proc/self/status` as a number (`NoNewPrivs`, `Seccomp`).
pub fn status_field(name: &str) -> u32 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;
    use rustix::thread::{CapabilitySet, CapabilitySets};

    #[test]
    fn any_one_capability_left_in_any_set_is_refused() {
        let none = || CapabilitySets {
            effective: CapabilitySet::empty(),
            permitted: CapabilitySet::empty(),
            inheritable: CapabilitySet::empty(),
        };
        assert!(!any_left(&none(), false));
        assert!(any_left(&none(), true), "the bounding set");
        let one = CapabilitySet::SYS_PTRACE;
        let mut s = none();
        s.effective = one;
        assert!(any_left(&s, false), "effective");
        let mut s = none();
        s.permitted = one;
        assert!(any_left(&s, false), "permitted");
        let mut s = none();
        s.inheritable = one;
        assert!(any_left(&s, false), "inheritable");
    }
}
