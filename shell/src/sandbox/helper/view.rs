//! The sandbox's view of the file system, built by its first process in a mount namespace of
//! its own. What an agent process sees:
//!
//! - Everything it could see before, read-only, without set-user-id or device files
//!   (`MOUNT_ATTR_RDONLY | NOSUID | NODEV` on every mount, recursively). A read-only mount also
//!   refuses `chmod`, `chown`, `utimensat` and extended attributes, which Landlock does not
//!   judge: no metadata outside the writable places can change, `$HOME` and `$OPENMAX_HOME`
//!   included.
//! - The project (writable, or read-only in the read-only sandbox) and the user's `[sandbox]
//!   writable` directories, grafted over themselves.
//! - `/tmp` (and the system temp directory when it is another one) showing the session's
//!   private temp directory: no session sees another's, nor the host's sockets and files
//!   there. A project or writable directory beneath a covered directory is grafted back at its
//!   path (its mount point is made in the private directory), as is an allowed Unix socket.
//! - A `/dev` of its own: `null`, `zero`, `full`, `random`, `urandom`, `tty` bound from the
//!   host, a private `devpts` instance (`/dev/pts`, `/dev/ptmx`), a private `/dev/shm`, and
//!   the usual links into `/proc/self/fd`. The terminal openmax draws on is not in it.
//! - A `/proc` of the sandbox's own pid namespace, read-only (no `/proc/sys` or
//!   `/proc/sysrq-trigger` writes even for root).
//! - In the project, the `[sandbox] protected` entries ([`crate::sandbox::protect`]) read-only
//!   and the `.git` directory pinned (a mount point, so it cannot be renamed or replaced).
//!
//! Invariants:
//! - Mounts only ever add restrictions: a clone keeps the flags its source had, and attributes
//!   are only set, never cleared, so nothing the host holds read-only becomes writable.
//! - Every mount source is cloned before anything is covered; every mount target is resolved
//!   without following symlinks, so nothing an agent planted can redirect a mount.
//! - Nothing here propagates to the host: the whole tree is made a slave first.

use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use rustix::fs::{Mode, OFlags, ResolveFlags, CWD};
use rustix::mount::{
    FsMountFlags, FsOpenFlags, MountAttrFlags, MountPropagationFlags, MoveMountFlags, OpenTreeFlags,
};

use super::Failure;
use crate::sandbox::protect;
use crate::sandbox::spec::ConfineSpec;

/// The host devices bound into the sandbox's `/dev` (they reach no file).
pub const DEVICES: [&str; 6] = ["null", "zero", "full", "random", "urandom", "tty"];

/// Where the view may not be built on: kernel file systems of the sandbox's own.
const RESERVED: [&str; 3] = ["/proc", "/sys", "/dev"];

/// One directory grafted over itself.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Graft {
    pub path: PathBuf,
    pub writable: bool,
}

/// What the view will hold, decided outside the sandbox from the specification and the
/// project as it is now.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// Directories showing the private temp directory, shallowest first.
    pub covered: Vec<PathBuf>,
    /// Directories grafted over themselves, shallowest first.
    pub grafts: Vec<Graft>,
    /// Allowed Unix sockets beneath a covered directory, grafted back at their path.
    pub sockets: Vec<PathBuf>,
    /// What is held read-only (and pinned) in the project.
    pub held: protect::Held,
    /// Protected files that do not exist now, which the command may not create.
    pub absent: Vec<PathBuf>,
    /// Mount points to make beneath the private temp directory: a path relative to it, and
    /// whether it is a directory (else an empty file, for a socket).
    pub placeholders: Vec<(PathBuf, bool)>,
}

fn depth(p: &Path) -> usize {
    p.components().count()
}

fn reserved(p: &Path) -> Option<&'static str> {
    RESERVED.into_iter().find(|r| p.starts_with(r))
}

impl Plan {
    /// The plan for `spec`; the protected directories missing in an existing git directory are
    /// created first (what does not exist could be created by the agent).
    pub fn new(spec: &ConfineSpec) -> Result<Plan, Failure> {
        let writable = !spec.read_only;
        let mut roots = vec![spec.project.clone()];
        roots.extend(spec.writable.iter().cloned());
        for r in &roots {
            if let Some(k) = reserved(r) {
                return Err(Failure(format!(
                    "{} lies in {k}, which the sandbox replaces with its own",
                    r.display()
                )));
            }
        }
        // A temp directory the user made writable (or the project itself) is shown as it is.
        let mut covered: Vec<PathBuf> = spec
            .tmp_at
            .iter()
            .filter(|t| t.is_dir() && !t.is_symlink())
            .filter(|t| !roots.iter().any(|r| t.starts_with(r)))
            .cloned()
            .collect();
        covered.sort_by_key(|p| depth(p));
        covered.dedup();
        let mut grafts: Vec<Graft> = roots
            .iter()
            .map(|p| Graft {
                path: p.clone(),
                writable,
            })
            .collect();
        grafts.sort_by_key(|g| depth(&g.path));
        let under = |p: &Path| {
            covered
                .iter()
                .find(|c| p.starts_with(c) && p != c.as_path())
        };
        let sockets: Vec<PathBuf> = spec
            .unix_sockets
            .iter()
            .filter(|s| under(s).is_some() && std::fs::symlink_metadata(s).is_ok())
            .cloned()
            .collect();
        let mut placeholders = Vec::new();
        for (path, dir) in grafts
            .iter()
            .map(|g| (&g.path, true))
            .chain(sockets.iter().map(|s| (s, false)))
        {
            let Some(c) = under(path) else { continue };
            let rel = path.strip_prefix(c).unwrap_or(path).to_path_buf();
            let mut acc = PathBuf::new();
            let n = rel.components().count();
            for (i, comp) in rel.components().enumerate() {
                acc.push(comp);
                let entry = (acc.clone(), dir || i + 1 < n);
                if !placeholders.contains(&entry) {
                    placeholders.push(entry);
                }
            }
        }
        let (held, absent) = if writable {
            protect::ensure(&spec.project, &spec.protected);
            (
                protect::held(&spec.project, &spec.protected),
                protect::absent(&spec.project, &spec.protected),
            )
        } else {
            (protect::Held::default(), Vec::new())
        };
        Ok(Plan {
            covered,
            grafts,
            sockets,
            held,
            absent,
            placeholders,
        })
    }
}

/// What was built, for the probe's report.
#[derive(Debug, Clone, Default)]
pub struct Built {
    pub held: Vec<String>,
    pub tmp_at: Vec<String>,
    pub dev: Vec<String>,
}

fn fail(what: impl std::fmt::Display, e: impl std::fmt::Display) -> Failure {
    Failure(format!("cannot build the sandbox's view: {what}: {e}"))
}

/// `mount_setattr(2)` (not wrapped by rustix): set `set` on the mount at `fd` (and below it
/// with `recursive`). Attributes are never cleared here.
fn set_attrs(
    fd: impl AsFd,
    path: &str,
    recursive: bool,
    set: MountAttrFlags,
) -> std::io::Result<()> {
    use std::os::fd::AsRawFd;
    #[repr(C)]
    struct MountAttr {
        attr_set: u64,
        attr_clr: u64,
        propagation: u64,
        userns_fd: u64,
    }
    let attr = MountAttr {
        attr_set: u64::from(set.bits()),
        attr_clr: 0,
        propagation: 0,
        userns_fd: 0,
    };
    let path = std::ffi::CString::new(path).map_err(|_| std::io::ErrorKind::InvalidInput)?;
    let mut flags = libc::AT_EMPTY_PATH as libc::c_uint;
    if recursive {
        flags |= libc::AT_RECURSIVE as libc::c_uint;
    }
    // SAFETY: a valid descriptor, a NUL-terminated path and a mount_attr of the size passed.
    let r = unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            fd.as_fd().as_raw_fd(),
            path.as_ptr(),
            flags,
            &attr as *const MountAttr,
            std::mem::size_of::<MountAttr>(),
        )
    };
    if r < 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

/// A detached copy of the mount tree at `path` (with what is mounted beneath it when
/// `recursive`).
fn clone_tree(path: &Path, recursive: bool) -> Result<OwnedFd, Failure> {
    let mut flags = OpenTreeFlags::OPEN_TREE_CLONE
        | OpenTreeFlags::OPEN_TREE_CLOEXEC
        | OpenTreeFlags::AT_SYMLINK_NOFOLLOW;
    if recursive {
        flags |= OpenTreeFlags::AT_RECURSIVE;
    }
    rustix::mount::open_tree(CWD, path, flags)
        .map_err(|e| fail(format!("cloning {}", path.display()), e))
}

/// `path`, resolved without following any symlink, as an `O_PATH` descriptor.
fn exact(path: &Path) -> Result<OwnedFd, Failure> {
    rustix::fs::openat2(
        CWD,
        path,
        OFlags::PATH | OFlags::CLOEXEC | OFlags::NOFOLLOW,
        Mode::empty(),
        ResolveFlags::NO_SYMLINKS | ResolveFlags::NO_MAGICLINKS,
    )
    .map_err(|e| fail(format!("{} (resolved without symlinks)", path.display()), e))
}

/// Attach the detached tree `tree` at `target` (resolved without symlinks).
fn attach(tree: &OwnedFd, target: &Path) -> Result<(), Failure> {
    let to = exact(target)?;
    rustix::mount::move_mount(
        tree,
        "",
        &to,
        "",
        MoveMountFlags::MOVE_MOUNT_F_EMPTY_PATH | MoveMountFlags::MOVE_MOUNT_T_EMPTY_PATH,
    )
    .map_err(|e| fail(format!("mounting over {}", target.display()), e))
}

/// A new mount of file system `fs` with `options`, detached.
fn new_fs(fs: &str, options: &[(&str, &str)], attrs: MountAttrFlags) -> Result<OwnedFd, Failure> {
    let ctx = rustix::mount::fsopen(fs, FsOpenFlags::FSOPEN_CLOEXEC)
        .map_err(|e| fail(format!("a new {fs}"), e))?;
    for (k, v) in options {
        rustix::mount::fsconfig_set_string(&ctx, *k, *v)
            .map_err(|e| fail(format!("{fs} option {k}={v}"), e))?;
    }
    rustix::mount::fsconfig_create(&ctx).map_err(|e| fail(format!("a new {fs}"), e))?;
    rustix::mount::fsmount(&ctx, FsMountFlags::FSMOUNT_CLOEXEC, attrs)
        .map_err(|e| fail(format!("mounting a new {fs}"), e))
}

/// Make `rel` (a relative path) exist beneath `root` as a directory (or, for the last
/// component with `dir` false, an empty file), without following symlinks and replacing
/// whatever else is in the way: everything beneath the private temp directory is the agent's.
fn make_beneath(root: &OwnedFd, rel: &Path, dir: bool) -> Result<(), Failure> {
    let resolve = ResolveFlags::BENEATH
        | ResolveFlags::NO_SYMLINKS
        | ResolveFlags::NO_MAGICLINKS
        | ResolveFlags::NO_XDEV;
    let parent = rel.parent().filter(|p| !p.as_os_str().is_empty());
    let Some(name) = rel.file_name() else {
        return Ok(());
    };
    let dirfd = match parent {
        Some(p) => rustix::fs::openat2(
            root,
            p,
            OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::RDONLY,
            Mode::empty(),
            resolve,
        )
        .map_err(|e| fail(format!("the mount point {}", rel.display()), e))?,
        None => rustix::io::dup(root).map_err(|e| fail("dup", e))?,
    };
    let st = rustix::fs::statat(&dirfd, name, rustix::fs::AtFlags::SYMLINK_NOFOLLOW);
    let fits = match &st {
        Ok(st) => {
            let kind = rustix::fs::FileType::from_raw_mode(st.st_mode);
            if dir {
                kind == rustix::fs::FileType::Directory
            } else {
                kind == rustix::fs::FileType::RegularFile
            }
        }
        Err(_) => false,
    };
    if fits {
        return Ok(());
    }
    if let Ok(st) = st {
        let flags =
            if rustix::fs::FileType::from_raw_mode(st.st_mode) == rustix::fs::FileType::Directory {
                rustix::fs::AtFlags::REMOVEDIR
            } else {
                rustix::fs::AtFlags::empty()
            };
        // A non-empty directory where a file belongs stays, and the mount fails below.
        let _ = rustix::fs::unlinkat(&dirfd, name, flags);
    }
    let made = if dir {
        rustix::fs::mkdirat(&dirfd, name, Mode::from_raw_mode(0o700))
    } else {
        rustix::fs::openat(
            &dirfd,
            name,
            OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::CLOEXEC | OFlags::NOFOLLOW,
            Mode::from_raw_mode(0o600),
        )
        .map(drop)
    };
    match made {
        Ok(()) | Err(rustix::io::Errno::EXIST) => Ok(()),
        Err(e) => Err(fail(format!("the mount point {}", rel.display()), e)),
    }
}

/// Build the view (in the sandbox's first process, in its new mount namespace, with the
/// capabilities it has there).
pub fn build(spec: &ConfineSpec, plan: &Plan) -> Result<Built, Failure> {
    let mut built = Built::default();
    rustix::mount::mount_change(
        "/",
        MountPropagationFlags::DOWNSTREAM | MountPropagationFlags::REC,
    )
    .map_err(|e| fail("making the tree a slave", e))?;

    // Every source is cloned, and every mount point beneath the private temp directory made,
    // before anything is covered.
    let tmp_fd = rustix::fs::openat(
        CWD,
        &spec.tmp,
        OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::NOFOLLOW | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| {
        fail(
            format!("the private temp directory {}", spec.tmp.display()),
            e,
        )
    })?;
    for (rel, dir) in &plan.placeholders {
        make_beneath(&tmp_fd, rel, *dir)?;
    }
    let covers = plan
        .covered
        .iter()
        .map(|c| Ok((c.clone(), clone_tree(&spec.tmp, false)?)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let grafts = plan
        .grafts
        .iter()
        .map(|g| Ok((g.clone(), clone_tree(&g.path, true)?)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let sockets = plan
        .sockets
        .iter()
        .map(|s| Ok((s.clone(), clone_tree(s, false)?)))
        .collect::<Result<Vec<_>, Failure>>()?;
    let mut devices = Vec::new();
    for d in DEVICES {
        let host = Path::new("/dev").join(d);
        // A device missing on the host (no /dev/tty in some containers) is simply not bound.
        if let Ok(tree) = rustix::mount::open_tree(
            CWD,
            &host,
            OpenTreeFlags::OPEN_TREE_CLONE | OpenTreeFlags::OPEN_TREE_CLOEXEC,
        ) {
            devices.push((d, tree));
        }
    }

    // Everything read-only, without set-user-id programs or device files.
    set_attrs(
        CWD,
        "/",
        true,
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV,
    )
    .map_err(|e| fail("making the file system read-only", e))?;

    build_dev(devices, &mut built)?;
    let proc = new_fs(
        "proc",
        &[],
        MountAttrFlags::MOUNT_ATTR_RDONLY
            | MountAttrFlags::MOUNT_ATTR_NOSUID
            | MountAttrFlags::MOUNT_ATTR_NODEV
            | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )
    .map_err(|Failure(e)| {
        Failure(format!(
            "{e} (a /proc of the sandbox's own processes cannot be mounted; inside a container \
             that masks parts of /proc, run openmax with --privileged or without the masks)"
        ))
    })?;
    attach(&proc, Path::new("/proc"))?;

    for (c, tree) in &covers {
        set_attrs(
            tree,
            "",
            false,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
        )
        .map_err(|e| fail("the private temp directory's mount", e))?;
        attach(tree, c)?;
        built.tmp_at.push(c.display().to_string());
    }
    for (g, tree) in &grafts {
        let mut attrs = MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV;
        if !g.writable {
            attrs |= MountAttrFlags::MOUNT_ATTR_RDONLY;
        }
        set_attrs(tree, "", true, attrs)
            .map_err(|e| fail(format!("the mount of {}", g.path.display()), e))?;
        attach(tree, &g.path)?;
    }
    for dir in &plan.held.pinned {
        let tree = clone_tree(dir, true)?;
        attach(&tree, dir)?;
    }
    for entry in &plan.held.read_only {
        let tree = clone_tree(entry, true)?;
        set_attrs(&tree, "", true, MountAttrFlags::MOUNT_ATTR_RDONLY)
            .map_err(|e| fail(format!("holding {}", entry.display()), e))?;
        attach(&tree, entry)?;
        let rel = entry.strip_prefix(&spec.project).unwrap_or(entry);
        built.held.push(rel.display().to_string());
    }
    for (s, tree) in &sockets {
        attach(tree, s)?;
    }
    Ok(built)
}

/// The sandbox's `/dev`: a small read-only tmpfs holding the bound `devices`, a private
/// devpts instance, a private `/dev/shm` and the usual links.
fn build_dev(devices: Vec<(&str, OwnedFd)>, built: &mut Built) -> Result<(), Failure> {
    let dev = new_fs(
        "tmpfs",
        &[("mode", "0755"), ("size", "64k"), ("nr_inodes", "64")],
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )?;
    attach(&dev, Path::new("/dev"))?;
    let root = rustix::fs::openat(
        CWD,
        "/dev",
        OFlags::DIRECTORY | OFlags::CLOEXEC | OFlags::RDONLY,
        Mode::empty(),
    )
    .map_err(|e| fail("the new /dev", e))?;
    for (name, _) in &devices {
        make_beneath(&root, Path::new(name), false)?;
    }
    for d in ["pts", "shm"] {
        rustix::fs::mkdirat(&root, d, Mode::from_raw_mode(0o755))
            .map_err(|e| fail(format!("/dev/{d}"), e))?;
    }
    for (link, to) in [
        ("ptmx", "pts/ptmx"),
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        rustix::fs::symlinkat(to, &root, link).map_err(|e| fail(format!("/dev/{link}"), e))?;
    }
    for (name, tree) in &devices {
        set_attrs(
            tree,
            "",
            false,
            MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NOEXEC,
        )
        .map_err(|e| fail(format!("/dev/{name}"), e))?;
        attach(tree, &Path::new("/dev").join(name))?;
        built.dev.push((*name).to_string());
    }
    let pts = new_fs(
        "devpts",
        &[("ptmxmode", "0666"), ("mode", "0620")],
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NOEXEC,
    )?;
    attach(&pts, Path::new("/dev/pts"))?;
    let shm = new_fs(
        "tmpfs",
        &[("mode", "1777")],
        MountAttrFlags::MOUNT_ATTR_NOSUID | MountAttrFlags::MOUNT_ATTR_NODEV,
    )?;
    attach(&shm, Path::new("/dev/shm"))?;
    built
        .dev
        .extend(["pts (private)".to_string(), "shm (private)".to_string()]);
    // The tmpfs itself read-only: nothing more is made in /dev.
    set_attrs(CWD, "/dev", false, MountAttrFlags::MOUNT_ATTR_RDONLY)
        .map_err(|e| fail("/dev read-only", e))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(tag: &str) -> PathBuf {
        let d = crate::scratch::path(&format!("view-{tag}"));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d.canonicalize().unwrap()
    }

    /// A writable sandbox for `project` and `writable`, its private temp directory in `d`.
    fn spec_in(d: &Path, project: PathBuf, writable: Vec<PathBuf>) -> ConfineSpec {
        ConfineSpec {
            writable,
            ..ConfineSpec::plain(project, d.join("private"))
        }
    }

    #[test]
    fn the_plan_grafts_and_covers_the_shallowest_first() {
        let d = scratch("plan");
        for sub in ["a/b", "t/u"] {
            std::fs::create_dir_all(d.join(sub)).unwrap();
        }
        let mut spec = spec_in(&d, d.join("a/b"), vec![d.join("a")]);
        spec.tmp_at = vec![d.join("t/u"), d.join("t")];
        let plan = Plan::new(&spec).unwrap();
        let grafts: Vec<PathBuf> = plan.grafts.iter().map(|g| g.path.clone()).collect();
        assert_eq!(grafts, [d.join("a"), d.join("a/b")]);
        assert_eq!(plan.covered, [d.join("t"), d.join("t/u")]);
        std::fs::remove_dir_all(&d).unwrap();
    }

    /// A project or writable directory in `/proc`, `/sys` or `/dev` (which the sandbox mounts
    /// anew) is refused by name; one merely named like them is not.
    #[test]
    fn a_writable_place_in_what_the_sandbox_replaces_is_refused() {
        let d = scratch("reserved");
        let spec = |project: PathBuf, writable: Vec<PathBuf>| spec_in(&d, project, writable);
        for root in RESERVED {
            let inside = PathBuf::from(root).join("x");
            for s in [
                spec(inside.clone(), Vec::new()),
                spec(d.clone(), vec![inside.clone()]),
            ] {
                let e = Plan::new(&s).unwrap_err().0;
                assert_eq!(
                    e,
                    format!(
                        "{} lies in {root}, which the sandbox replaces with its own",
                        inside.display()
                    )
                );
            }
        }
        assert!(Plan::new(&spec(d.clone(), vec![d.join("proc")])).is_ok());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_mount_point_is_made_beneath_its_root_without_following_a_symlink() {
        let d = scratch("beneath");
        let (root, outside) = (d.join("root"), d.join("outside"));
        std::fs::create_dir_all(&root).unwrap();
        std::fs::create_dir_all(&outside).unwrap();
        let fd = rustix::fs::open(
            &root,
            OFlags::DIRECTORY | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )
        .unwrap();
        // A directory, one beneath it, and a socket's empty file.
        for (rel, dir) in [("a", true), ("a/b", true), ("a/s.sock", false)] {
            make_beneath(&fd, Path::new(rel), dir).unwrap();
        }
        assert!(root.join("a/b").is_dir());
        let sock = std::fs::symlink_metadata(root.join("a/s.sock")).unwrap();
        assert!(sock.is_file() && sock.len() == 0);
        // A file's place already holding a file is left as it is; a directory there becomes one.
        std::fs::write(root.join("f"), "kept").unwrap();
        std::fs::create_dir(root.join("e")).unwrap();
        for rel in ["f", "e"] {
            make_beneath(&fd, Path::new(rel), false).unwrap();
        }
        assert_eq!(std::fs::read_to_string(root.join("f")).unwrap(), "kept");
        assert!(std::fs::symlink_metadata(root.join("e")).unwrap().is_file());
        // Whatever else is in the way of the last component is replaced: a file, a symlink.
        std::fs::write(root.join("c"), "x").unwrap();
        std::os::unix::fs::symlink(&outside, root.join("m")).unwrap();
        for rel in ["c", "m"] {
            make_beneath(&fd, Path::new(rel), true).unwrap();
            let m = std::fs::symlink_metadata(root.join(rel)).unwrap();
            assert!(m.is_dir(), "{rel}");
        }
        // A symlink on the way is never followed, as the parent or above it (a relative one,
        // which `RESOLVE_NO_XDEV` alone does not stop).
        std::fs::create_dir_all(outside.join("y")).unwrap();
        std::os::unix::fs::symlink("../outside", root.join("l")).unwrap();
        for rel in ["l/x", "l/y/x"] {
            assert!(make_beneath(&fd, Path::new(rel), true).is_err(), "{rel}");
        }
        assert!(!outside.join("x").exists() && !outside.join("y/x").exists());
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn a_mount_target_is_resolved_without_following_a_symlink_anywhere_in_it() {
        let d = crate::scratch::path("view-exact");
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(d.join("real/inner")).unwrap();
        let d = d.canonicalize().unwrap();
        std::os::unix::fs::symlink("real", d.join("link")).unwrap();
        assert!(exact(&d.join("real/inner")).is_ok());
        // A symlinked directory on the way is refused; a target that is itself a symlink is
        // the symlink (openat2 gives `O_PATH | O_NOFOLLOW` the link), never what it names.
        let Err(Failure(e)) = exact(&d.join("link/inner")) else {
            panic!("link/inner was followed");
        };
        assert!(e.contains("resolved without symlinks"), "{e}");
        let link = exact(&d.join("link")).unwrap();
        let kind = rustix::fs::FileType::from_raw_mode(rustix::fs::fstat(&link).unwrap().st_mode);
        assert_eq!(kind, rustix::fs::FileType::Symlink);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
