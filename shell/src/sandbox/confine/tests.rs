//! Tests of the confinement: what a confined child can and cannot do, run for real
//! under the kernel's Landlock and seccomp.

use super::*;
use std::process::Command;

struct Dirs {
    root: PathBuf,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn layout(name: &str) -> (Dirs, PathBuf, PathBuf, PathBuf) {
    let root = std::env::temp_dir().join(format!("omx-confine-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&root);
    let (project, home, tmp) = (root.join("project"), root.join("home"), root.join("tmp"));
    for d in [&project, &home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    (Dirs { root }, project, home, tmp)
}

fn run(c: &Confinement, cwd: &Path, script: &str) -> (bool, String) {
    let mut cmd = Command::new("bash");
    cmd.arg("-c").arg(script).current_dir(cwd);
    c.install(&mut cmd);
    let out = cmd.output().expect("bash runs");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    (out.status.success(), text)
}

#[test]
fn writes_stay_in_the_project_and_temp() {
    if kernel_abi() < 1 {
        eprintln!("no Landlock on this kernel; skipped");
        return;
    }
    let (d, project, home, tmp) = layout("fs");
    let spec = ConfineSpec::new(&project, &home, &tmp, &d.root, false).unwrap();
    // The system temp (here the layout root) holds home, so it is left out.
    assert!(!spec
        .writable
        .iter()
        .any(|w| w == &d.root.canonicalize().unwrap()));
    let c = Confinement::prepare(&spec).unwrap();
    std::fs::write(home.join("mode.json"), "{}").unwrap();
    let (ok, out) = run(&c, &project, "echo hi > a.txt && cat a.txt");
    assert!(ok && out.contains("hi"), "{out}");
    let (ok, _) = run(&c, &project, &format!("echo t > {}/t.txt", tmp.display()));
    assert!(ok);
    for attack in [
        format!("echo x > {}/mode.json", home.display()),
        format!("touch {}/new", home.display()),
        format!("cp a.txt {}/copied", home.display()),
        format!("ln a.txt {}/linked", home.display()),
        format!("mv a.txt {}/moved", home.display()),
        format!("ln {}/mode.json hard", home.display()),
        format!(
            "bash -c 'bash -c \"echo x > {}/mode.json\"'",
            home.display()
        ),
        format!(
            "setsid bash -c 'echo x > {}/late' ; sleep 0.2",
            home.display()
        ),
    ] {
        let (ok, out) = run(&c, &project, &attack);
        assert!(!ok || out.contains("denied"), "{attack}: {out}");
    }
    assert_eq!(
        std::fs::read_to_string(home.join("mode.json")).unwrap(),
        "{}"
    );
    let left: Vec<_> = std::fs::read_dir(&home).unwrap().collect();
    assert_eq!(left.len(), 1, "{left:?}");
    assert!(
        project.join("a.txt").exists(),
        "mv out of the project was refused"
    );
    let (ok, out) = run(
        &c,
        &project,
        "echo x > /dev/null && cat /etc/hostname >/dev/null",
    );
    assert!(ok, "{out}");
}

#[test]
fn the_ruleset_descriptor_does_not_leak_into_the_process() {
    if kernel_abi() < 1 {
        return;
    }
    let (_d, project, home, tmp) = layout("fd");
    let spec = ConfineSpec::new(&project, &home, &tmp, &std::env::temp_dir(), false).unwrap();
    let (ok, out) = run(
        &Confinement::prepare(&spec).unwrap(),
        &project,
        "ls -l /proc/$$/fd",
    );
    assert!(ok && !out.contains("landlock"), "{out}");
}

#[test]
fn a_confined_process_cannot_type_into_a_terminal() {
    if kernel_abi() < 1 {
        return;
    }
    let (_d, project, home, tmp) = layout("tty");
    // A pseudo-terminal to push a character into.
    // SAFETY: plain libc calls; the descriptor is closed at the end.
    let (master, pts) = unsafe {
        let m = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(m >= 0);
        assert_eq!(libc::grantpt(m), 0);
        assert_eq!(libc::unlockpt(m), 0);
        let name = std::ffi::CStr::from_ptr(libc::ptsname(m));
        (m, name.to_string_lossy().into_owned())
    };
    let push = format!(
        "python3 -c \"import fcntl,termios,os; fd=os.open('{pts}', os.O_RDWR|os.O_NOCTTY); \
         fcntl.ioctl(fd, termios.TIOCSTI, b'x'); print('pushed')\""
    );
    let plain = Command::new("bash").arg("-c").arg(&push).output().unwrap();
    let spec = ConfineSpec::new(&project, &home, &tmp, &std::env::temp_dir(), true).unwrap();
    let (ok, out) = run(&Confinement::prepare(&spec).unwrap(), &project, &push);
    // SAFETY: closing our own descriptor.
    unsafe { libc::close(master) };
    if !String::from_utf8_lossy(&plain.stdout).contains("pushed") {
        eprintln!("TIOCSTI is refused here even unconfined; only the confined refusal is checked");
    }
    assert!(
        !ok && !out.contains("pushed") && out.contains("Permission denied"),
        "{out}"
    );
}

#[test]
fn network_sockets_follow_the_switch() {
    if kernel_abi() < 1 {
        return;
    }
    let (_d, project, home, tmp) = layout("net");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let probe = format!("exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected");
    let off = ConfineSpec::new(&project, &home, &tmp, &std::env::temp_dir(), false).unwrap();
    let (ok, out) = run(&Confinement::prepare(&off).unwrap(), &project, &probe);
    assert!(!ok && !out.contains("connected"), "{out}");
    let (ok, out) = run(
        &Confinement::prepare(&off).unwrap(),
        &project,
        "bash -c 'echo > /dev/udp/127.0.0.1/9' && echo sent",
    );
    assert!(!ok && !out.contains("sent"), "{out}");
    let on = ConfineSpec::new(&project, &home, &tmp, &std::env::temp_dir(), true).unwrap();
    let (ok, out) = run(&Confinement::prepare(&on).unwrap(), &project, &probe);
    assert!(ok && out.contains("connected"), "{out}");
}

#[test]
fn no_landlock_fails_closed() {
    let (_d, project, home, tmp) = layout("off");
    let mut spec = ConfineSpec::new(&project, &home, &tmp, &std::env::temp_dir(), false).unwrap();
    spec.abi = ABI::Unsupported;
    let e = Confinement::prepare(&spec).unwrap_err();
    assert!(
        e.starts_with(UNAVAILABLE) && e.contains("mode = \"off\""),
        "{e}"
    );
}

#[test]
fn the_user_can_add_writable_directories_but_never_home() {
    if kernel_abi() < 1 {
        return;
    }
    let (d, project, home, tmp) = layout("extra");
    let cache = d.root.join("cache");
    std::fs::create_dir_all(&cache).unwrap();
    let mut spec = ConfineSpec::new(&project, &home, &tmp, &d.root, false).unwrap();
    let e = spec.allow_write("relative/dir", &home).unwrap_err();
    assert!(e.contains("absolute"), "{e}");
    let e = spec
        .allow_write(&d.root.display().to_string(), &home)
        .unwrap_err();
    assert!(e.contains("$OPENMAX_HOME"), "{e}");
    spec.allow_write(&cache.display().to_string(), &home)
        .unwrap();
    let c = Confinement::prepare(&spec).unwrap();
    let (ok, out) = run(&c, &project, &format!("echo x > {}/f", cache.display()));
    assert!(ok, "{out}");
    let (ok, _) = run(&c, &project, &format!("echo x > {}/f", home.display()));
    assert!(!ok);
}

#[test]
fn layouts_that_cannot_protect_home_are_refused() {
    let (_d, project, _home, tmp) = layout("nest");
    let inner = project.join(".openmax-home");
    std::fs::create_dir_all(&inner).unwrap();
    let e = ConfineSpec::new(&project, &inner, &tmp, &std::env::temp_dir(), false).unwrap_err();
    assert!(e.contains("cannot protect $OPENMAX_HOME"), "{e}");
    let e = ConfineSpec::new(&project, project.parent().unwrap(), &tmp, &tmp, false).unwrap_err();
    assert!(e.contains("one contains the other"), "{e}");
}
