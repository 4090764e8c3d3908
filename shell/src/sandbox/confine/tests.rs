//! Tests of the sandbox's specification: the layouts it refuses and what the user config may
//! add. What a confined process can and cannot do is tested through the helper itself, in
//! `tests/tests/sandbox_layers.rs` (the helper is the `openmax` binary).

use super::*;
use crate::sandbox::protect;

struct Dirs {
    root: PathBuf,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn layout(name: &str) -> (Dirs, PathBuf, PathBuf, PathBuf) {
    let root = crate::scratch::path(&format!("confine-{name}"));
    let _ = std::fs::remove_dir_all(&root);
    let (project, home, tmp) = (root.join("project"), root.join("home"), root.join("tmp"));
    for d in [&project, &home, &tmp] {
        std::fs::create_dir_all(d).unwrap();
    }
    let root = root.canonicalize().unwrap();
    (
        Dirs { root: root.clone() },
        root.join("project"),
        root.join("home"),
        root.join("tmp"),
    )
}

#[test]
fn the_private_temp_directory_is_shown_at_tmp_and_the_system_temp_directory() {
    let (d, project, home, tmp) = layout("tmpat");
    let spec = ConfineSpec::new(&project, &home, &tmp, &d.root, false).unwrap();
    assert_eq!(spec.tmp, tmp);
    assert_eq!(
        spec.tmp_at,
        vec![std::fs::canonicalize("/tmp").unwrap(), d.root.clone()]
    );
    assert_eq!(
        spec.tmpdir(),
        d.root,
        "TMPDIR names the system temp directory"
    );
    let spec = ConfineSpec::new(&project, &home, &tmp, Path::new("/tmp"), false).unwrap();
    assert_eq!(spec.tmp_at, vec![std::fs::canonicalize("/tmp").unwrap()]);
    assert!(!spec.read_only && spec.read_only().read_only);
    assert_eq!(spec.protected, protect::default_entries());
}

#[test]
fn a_temp_directory_the_user_made_writable_is_not_covered() {
    let (d, project, home, tmp) = layout("tmpw");
    let mut spec = ConfineSpec::new(&project, &home, &tmp, &d.root, false).unwrap();
    let shared = d.root.join("shared");
    std::fs::create_dir_all(&shared).unwrap();
    spec.tmp_at = vec![shared.clone()];
    spec.allow_write(&shared.display().to_string(), &home)
        .unwrap();
    assert_eq!(spec.tmpdir(), tmp, "TMPDIR is the private directory itself");
}

#[test]
fn the_user_can_add_writable_directories_and_sockets_but_never_home() {
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
    assert_eq!(spec.writable, vec![cache]);
    for bad in ["relative.sock", "/run/../etc/x.sock", ""] {
        let e = spec.allow_socket(bad).unwrap_err();
        assert!(e.contains("[sandbox] unix_sockets"), "{bad}: {e}");
    }
    spec.allow_socket("/run/user/1000/ssh-agent.sock").unwrap();
    spec.allow_socket("/run/user/1000/ssh-agent.sock").unwrap();
    assert_eq!(spec.unix_sockets.len(), 1);
    assert!(spec.read_only().unix_sockets.is_empty());
    // Nor the network, whatever the session's sandbox allows.
    spec.network = true;
    assert!(!spec.read_only().network);
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

#[test]
fn the_specification_travels_as_json() {
    let (d, project, home, tmp) = layout("json");
    let spec = ConfineSpec::new(&project, &home, &tmp, &d.root, true).unwrap();
    let back: ConfineSpec = serde_json::from_str(&serde_json::to_string(&spec).unwrap()).unwrap();
    assert_eq!(back, spec);
}

#[test]
fn a_bad_mode_or_protected_entry_is_a_start_up_error_and_off_is_off() {
    let (_d, project, home, _tmp) = layout("mode");
    let s = Settings {
        mode: Some("maybe".into()),
        ..Settings::default()
    };
    let e = Confine::for_session(&s, &project, &home).unwrap_err();
    assert!(e.contains("[sandbox] mode"), "{e}");
    let s = Settings {
        protected: Some(vec!["../outside".into()]),
        ..Settings::default()
    };
    let e = Confine::for_session(&s, &project, &home).unwrap_err();
    assert!(e.contains("[sandbox] protected"), "{e}");
    let s = Settings {
        mode: Some("off".into()),
        ..Settings::default()
    };
    assert_eq!(
        Confine::for_session(&s, &project, &home).unwrap(),
        Confine::Off
    );
    assert!(Confine::Off.command("true", RunSandbox::ReadOnly).is_err());
    assert_eq!(Confine::Off.tmpdir(RunSandbox::Session), None);
}

#[test]
fn a_sandbox_started_through_another_helper_starts_that_helper() {
    let (_d, project, home, _tmp) = layout("helper");
    let elsewhere = Path::new("/nonexistent/openmax-helper");
    match Confine::for_session(&Settings::default(), &project, &home).unwrap() {
        Confine::On(s) => {
            assert_eq!(s.helper, Path::new("/proc/self/exe"));
            let c = Confine::On(s).with_helper(elsewhere);
            let Confine::On(s) = &c else {
                panic!("still a sandbox: {c:?}")
            };
            assert_eq!(s.helper, elsewhere);
            // The probe before the first process starts that helper, which is not there.
            let e = c.command("true", RunSandbox::Session).unwrap_err();
            assert!(e.contains("the sandbox helper could not start"), "{e}");
        }
        // Only a kernel without Landlock (or the simulation of one) gives no sandbox here.
        other => {
            let simulated = std::env::var_os(crate::sandbox::spec::SIMULATE_ENV).is_some();
            assert!(
                crate::sandbox::spec::kernel_abi() <= 0 || simulated,
                "Landlock is there: {other:?}"
            );
            assert!(matches!(other, Confine::Unavailable(_)), "{other:?}");
        }
    }
    assert_eq!(Confine::Off.with_helper(elsewhere), Confine::Off);
    let gone = Confine::Unavailable("no".into());
    assert_eq!(gone.clone().with_helper(elsewhere), gone);
}

#[test]
fn the_private_temp_directory_goes_with_the_last_holder_of_its_sandbox() {
    let (_d, project, home, _tmp) = layout("drop");
    match Confine::for_session(&Settings::default(), &project, &home).unwrap() {
        Confine::On(s) => {
            let tmp = s.spec.tmp.clone();
            assert!(tmp.is_dir(), "{}", tmp.display());
            // A task that outlived its session holds the sandbox, and the directory with it.
            let task = Arc::clone(&s);
            drop(s);
            assert!(tmp.is_dir(), "removed under a holder: {}", tmp.display());
            drop(task);
            assert!(!tmp.exists(), "left behind: {}", tmp.display());
        }
        other => assert!(
            crate::sandbox::spec::kernel_abi() <= 0
                || std::env::var_os(crate::sandbox::spec::SIMULATE_ENV).is_some(),
            "Landlock is there: {other:?}"
        ),
    }
}

#[test]
fn the_helper_inherits_the_lifeline_it_is_told_of() {
    // A stand-in helper that says whether the descriptor its specification names is an open
    // pipe it inherited (its report is then not JSON, so the probe's error carries the words).
    let (d, project, home, tmp) = layout("lifeline");
    let script = d.root.join("helper.sh");
    std::fs::write(
        &script,
        "#!/bin/sh\nfd=$(printf '%s' \"$2\" | sed -n 's/.*\"lifeline\":\\([0-9]*\\).*/\\1/p')\n\
         if [ -n \"$fd\" ] && [ -p \"/proc/self/fd/$fd\" ]; then echo lifeline-held; \
         else echo lifeline-missing; fi\n",
    )
    .unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    let spec = ConfineSpec::new(&project, &home, &tmp, &d.root, false).unwrap();
    let e = probe(&script, &spec).unwrap_err();
    assert!(e.contains("lifeline-held"), "{e}");
}

/// A sandbox equals only itself (a policy's clone shares it), not another made from the same
/// settings: equality says whether two policies run in one sandbox.
#[test]
fn a_sandbox_equals_itself_and_not_another_like_it() {
    let (_d, project, home, _tmp) = layout("equality");
    let a = Confine::for_session(&Settings::default(), &project, &home).unwrap();
    let b = Confine::for_session(&Settings::default(), &project, &home).unwrap();
    if let Confine::On(_) = &a {
        assert_eq!(a, a.clone());
        assert_ne!(a, b);
        assert_ne!(a, Confine::Off);
    } else {
        let simulated = std::env::var_os(crate::sandbox::spec::SIMULATE_ENV).is_some();
        assert!(
            crate::sandbox::spec::kernel_abi() <= 0 || simulated,
            "{a:?}"
        );
    }
    let gone = |why: &str| Confine::Unavailable(why.into());
    assert_eq!(gone("no Landlock"), gone("no Landlock"));
    assert_ne!(gone("no Landlock"), gone("no user namespaces"));
    assert_eq!(Confine::Off, Confine::Off);
}
