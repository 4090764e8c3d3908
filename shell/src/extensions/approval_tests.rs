//! What a human's approval covers, field by field, through the real functions: for a project
//! hook ([`crate::hooks::freeze`], [`crate::hooks::definition_sha`]) and an external tool
//! ([`super::manifest::load_one`], [`super::external::plan`]), every field of the definition
//! and every project file its argv names (relative, `./`, absolute into the project) is
//! changed in turn: the sha changes and the gate asks again. The field lists are read from the
//! parsers' own "unknown field" errors, so a field added without a row here fails. An external
//! tool whose files change between its plan and its run is refused at the run.
//! (MCP servers: `crate::mcp::gate_tests`.)

use std::path::PathBuf;

use super::external;
use super::manifest::{self, ExternalTool};
use crate::hooks::{self, FrozenHook, HookConfig, Origin};

struct Project {
    root: PathBuf,
}

impl Drop for Project {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn project(tag: &str) -> Project {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = crate::scratch::path(&format!("approval-{tag}-{n}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join(".openmax/tools")).unwrap();
    Project {
        root: root.canonicalize().unwrap(),
    }
}

impl Project {
    fn write(&self, rel: &str, text: &str) {
        let p = self.root.join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
}

/// The names in a serde "unknown field `x`, expected one of `a`, `b`" message.
pub(crate) fn expected_fields(message: &str) -> Vec<String> {
    let tail = message
        .split("expected one of ")
        .nth(1)
        .or_else(|| message.split("expected ").nth(1))
        .unwrap_or_else(|| panic!("no field list in {message:?}"));
    tail.split(',')
        .map(|f| {
            f.trim()
                .trim_start_matches("or ")
                .trim_matches(|c: char| c == '`' || c == '"' || c.is_whitespace())
                .to_string()
        })
        .filter(|f| !f.is_empty())
        .take_while(|f| !f.contains(' '))
        .collect()
}

// ---- hooks -----------------------------------------------------------------------------------

fn hook(toml_text: &str) -> HookConfig {
    toml::from_str(toml_text).unwrap_or_else(|e| panic!("{toml_text}: {e}"))
}

const HOOK: &str = "event = \"tool_start\"\ncommand = [\"sh\", \"hooks/check.sh\"]\n\
                    blocking = true\ntimeout_s = 30\nmatch = \"shell\"\n";

/// The hook frozen in `p`, approved when `approved` holds its (key, sha).
fn frozen(p: &Project, h: &HookConfig, approved: &Option<(String, String)>) -> FrozenHook {
    let ok = |k: &str, s: &str| {
        approved
            .as_ref()
            .is_some_and(|(ak, as_)| ak == k && as_ == s)
    };
    hooks::freeze(&[(h.clone(), Origin::Project)], &p.root, &ok)
        .pop()
        .unwrap()
}

fn approved(h: &FrozenHook) -> bool {
    h.source.as_ref().is_some_and(|s| s.approved)
}

#[test]
fn approving_a_file_approves_the_project_hooks_that_name_it_and_the_config_all_of_them() {
    let p = project("naming");
    p.write("hooks/check.sh", "exit 0\n");
    p.write("hooks/other.sh", "exit 0\n");
    let other = hook(&HOOK.replace("hooks/check.sh", "hooks/other.sh"));
    let all = hooks::freeze(
        &[
            (hook(HOOK), Origin::Project),
            (other.clone(), Origin::Project),
            (hook(HOOK), Origin::User),
            (other, Origin::User),
        ],
        &p.root,
        &|_, _| false,
    );
    let named = |rel: &str| -> Vec<(Origin, Vec<String>)> {
        hooks::naming(&all, rel)
            .iter()
            .map(|h| (h.origin, h.config.command.clone()))
            .collect()
    };
    let cmd = |f: &str| vec!["sh".to_string(), f.to_string()];
    assert_eq!(
        named("hooks/check.sh"),
        [(Origin::Project, cmd("hooks/check.sh"))]
    );
    assert_eq!(
        named("hooks/other.sh"),
        [(Origin::Project, cmd("hooks/other.sh"))]
    );
    assert_eq!(
        named(hooks::PROJECT_CONFIG),
        [
            (Origin::Project, cmd("hooks/check.sh")),
            (Origin::Project, cmd("hooks/other.sh"))
        ],
        "the project config approves every project hook, never a user's"
    );
    assert!(named("hooks").is_empty() && named("check.sh").is_empty());
}

#[test]
fn each_project_hook_is_approved_under_a_key_of_its_own() {
    let p = project("keys");
    p.write("hooks/check.sh", "exit 0\n");
    p.write("hooks/other.sh", "exit 0\n");
    let hooks = [
        (hook(HOOK), Origin::Project),
        (
            hook(&HOOK.replace("hooks/check.sh", "hooks/other.sh")),
            Origin::Project,
        ),
    ];
    let first = hooks::freeze(&hooks, &p.root, &|_, _| false);
    let keys: Vec<String> = first
        .iter()
        .map(|h| h.approval.clone().unwrap().0)
        .collect();
    // The store's key names the hook (it is what is kept on disk between sessions).
    assert_eq!(
        keys,
        [
            ".openmax/config.toml [[hooks]] tool_start:sh",
            ".openmax/config.toml [[hooks]] tool_start:sh#2"
        ]
    );
    // Both approvals stored: both hooks approved, neither in the other's place.
    let stored: Vec<(String, String)> = first.iter().map(|h| h.approval.clone().unwrap()).collect();
    let both = hooks::freeze(&hooks, &p.root, &|k, s| {
        stored.iter().any(|(ak, as_)| ak == k && as_ == s)
    });
    assert!(both.iter().all(approved));
    let only_second = hooks::freeze(&hooks, &p.root, &|k, s| {
        stored[1].0 == k && stored[1].1 == s
    });
    assert_eq!(
        only_second.iter().map(approved).collect::<Vec<_>>(),
        [false, true]
    );
}

#[test]
fn every_field_of_a_project_hook_is_covered_by_its_approval() {
    let p = project("hook");
    p.write("hooks/check.sh", "exit 0\n");
    p.write("hooks/other.sh", "exit 0\n");
    let base = hook(HOOK);
    let first = frozen(&p, &base, &None);
    let stored = first.approval.clone();
    assert!(!approved(&first), "nothing approved yet");
    assert!(
        approved(&frozen(&p, &base, &stored)),
        "the approval covers it"
    );

    // One changed definition per field of [[hooks]]: (field, from, to) over HOOK.
    let edits: Vec<(&str, &str, &str)> = vec![
        ("event", "\"tool_start\"", "\"tool_end\""),
        (
            "command",
            "[\"sh\", \"hooks/check.sh\"]",
            "[\"sh\", \"-c\", \"touch x\", \"hooks/check.sh\"]",
        ),
        ("command", "hooks/check.sh", "hooks/other.sh"),
        ("command", "[\"sh\",", "[\"bash\","),
        ("blocking", "blocking = true", "blocking = false"),
        ("timeout_s", "timeout_s = 30", "timeout_s = 31"),
        ("timeout_s", "timeout_s = 30\n", ""),
        ("match", "match = \"shell\"", "match = \"shell|write_file\""),
        ("match", "match = \"shell\"\n", ""),
    ];
    let changed: Vec<(&str, String)> = edits
        .iter()
        .map(|(field, from, to)| {
            let text = HOOK.replacen(from, to, 1);
            assert_ne!(text, HOOK, "{field}: the change applies");
            (*field, text)
        })
        .collect();
    let fields = expected_fields(
        &toml::from_str::<HookConfig>("nope = 1\n")
            .unwrap_err()
            .to_string(),
    );
    for f in &fields {
        assert!(
            changed.iter().any(|(k, _)| k == f),
            "[[hooks]] field {f} has no changed definition here"
        );
    }
    for (field, text) in &changed {
        let h = hook(text);
        let f = frozen(&p, &h, &stored);
        assert!(!approved(&f), "changing {field} kept the approval: {text}");
        assert_ne!(
            hooks::definition_sha(&h, &f.files),
            stored.as_ref().unwrap().1,
            "{field}"
        );
    }

    // The bytes of the file its argv names.
    p.write("hooks/check.sh", "exit 1\n");
    assert!(!approved(&frozen(&p, &base, &stored)), "an edited file");
    p.write("hooks/check.sh", "exit 0\n");
    assert!(
        approved(&frozen(&p, &base, &stored)),
        "the same bytes again"
    );
}

/// Which argv words name project files, the rule every approval's file list comes from: a
/// regular file inside the project, however spelled, or what follows a word's first `=` (an
/// option's value, an assignment's); a word that looks like an option but is a file counts too
/// (hashing one file too many only asks more). Never a directory, a missing file, the empty word, or a symlink
/// out of the project.
#[test]
fn the_project_files_an_argv_word_names() {
    let p = project("argv-words");
    p.write("srv/main.js", "x\n");
    p.write("-v", "a file named like an option\n");
    std::os::unix::fs::symlink("/etc/passwd", p.root.join("out")).unwrap();
    let file = |w: &str| manifest::project_file(&p.root, w);
    let abs = p.root.join("srv/main.js").display().to_string();
    for w in [
        "srv/main.js",
        "./srv/main.js",
        "srv/../srv/main.js",
        &abs,
        "--require=./srv/main.js",
        "--require=srv/main.js",
        &format!("--load={abs}"),
        "CONFIG=srv/main.js",
    ] {
        assert_eq!(file(w).as_deref(), Some("srv/main.js"), "{w:?}");
    }
    assert_eq!(file("-v").as_deref(), Some("-v"));
    for w in [
        "--inspect",
        "",
        "srv",
        "missing.js",
        "out",
        "/etc/passwd",
        "--require=out",
        "--require=",
        "--x=y=srv/main.js",
    ] {
        assert_eq!(file(w), None, "{w:?}");
    }
}

#[test]
fn a_hook_names_its_project_files_relative_dotted_absolute_or_as_an_option_value() {
    let p = project("hookpaths");
    p.write("hooks/check.sh", "exit 0\n");
    p.write("lib/helper.sh", "true\n");
    let abs = p.root.join("lib/helper.sh").display().to_string();
    for argv in [
        vec!["sh".to_string(), "hooks/check.sh".into()],
        vec!["sh".into(), "./hooks/check.sh".into()],
        vec![
            "sh".into(),
            p.root.join("hooks/check.sh").display().to_string(),
        ],
        vec!["sh".into(), "hooks/check.sh".into(), abs.clone()],
        vec![
            "sh".into(),
            "--init-file=lib/helper.sh".into(),
            "hooks/check.sh".into(),
        ],
    ] {
        let h = HookConfig {
            event: openmax_core::machine::HookEvent::TurnEnd,
            command: argv.clone(),
            blocking: false,
            timeout_s: None,
            matcher: None,
        };
        let base = frozen(&p, &h, &None);
        assert!(
            base.files.contains_key("hooks/check.sh"),
            "{argv:?}: {:?}",
            base.files
        );
        let stored = base.approval.clone();
        let edit = if argv.iter().any(|a| a.ends_with("lib/helper.sh")) {
            "lib/helper.sh"
        } else {
            "hooks/check.sh"
        };
        p.write(edit, "echo changed\n");
        assert!(
            !approved(&frozen(&p, &h, &stored)),
            "{argv:?}: editing {edit} kept the approval"
        );
        p.write("hooks/check.sh", "exit 0\n");
        p.write("lib/helper.sh", "true\n");
    }
}

// ---- external tools --------------------------------------------------------------------------

const MANIFEST: &str = r#"{"name":"lint","description":"Lint","parameters":{"type":"object"},"command":["sh","tools/lint.sh"],"mutating":false,"env":["LINT_TOKEN"],"timeout_s":60}"#;

fn tool(p: &Project) -> ExternalTool {
    manifest::load_one(&p.root, &p.root.join(".openmax/tools/lint.json"), &|_| {
        false
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Whether the gate lets a call of `t` run unasked with `stored` (path, sha) approved.
fn gate_approves(p: &Project, t: &ExternalTool, stored: &(String, String)) -> bool {
    let ok = |path: &str, sha: &str| path == stored.0 && sha == stored.1;
    let plan = external::plan(t, &p.root, &serde_json::json!({}), &ok);
    plan.source
        .expect("an external call carries its gate")
        .approved
}

#[test]
fn every_field_of_a_manifest_and_every_file_it_runs_is_covered_by_its_approval() {
    let p = project("tool");
    p.write(".openmax/tools/lint.json", MANIFEST);
    p.write("tools/lint.sh", "echo lint\n");
    p.write("tools/rules.txt", "rule\n");
    let base = tool(&p);
    let stored = (base.manifest_path.clone(), base.sha256.clone());
    assert!(gate_approves(&p, &base, &stored));

    let fields = expected_fields(
        &manifest::load_one(
            &p.root,
            &{
                p.write(".openmax/tools/probe.json", r#"{"nope":1}"#);
                p.root.join(".openmax/tools/probe.json")
            },
            &|_| false,
        )
        .unwrap_err(),
    );
    std::fs::remove_file(p.root.join(".openmax/tools/probe.json")).unwrap();
    let changes: Vec<(&str, &str, &str)> = vec![
        // `name` must equal the file's stem: a renamed tool is another file.
        ("name", "\"name\":\"lint\"", "\"name\":\"lint2\""),
        (
            "description",
            "\"description\":\"Lint\"",
            "\"description\":\"Lint it\"",
        ),
        (
            "parameters",
            "\"parameters\":{\"type\":\"object\"}",
            "\"parameters\":{\"type\":\"object\",\"properties\":{\"a\":{\"type\":\"string\"}}}",
        ),
        (
            "command",
            "\"command\":[\"sh\",\"tools/lint.sh\"]",
            "\"command\":[\"sh\",\"-e\",\"tools/lint.sh\"]",
        ),
        ("mutating", "\"mutating\":false", "\"mutating\":true"),
        (
            "env",
            "\"env\":[\"LINT_TOKEN\"]",
            "\"env\":[\"LINT_TOKEN\",\"AWS_SECRET_ACCESS_KEY\"]",
        ),
        ("timeout_s", "\"timeout_s\":60", "\"timeout_s\":61"),
    ];
    for f in &fields {
        assert!(
            changes.iter().any(|(k, _, _)| k == f),
            "manifest field {f} has no change here"
        );
    }
    for (field, from, to) in &changes {
        let text = MANIFEST.replacen(from, to, 1);
        assert_ne!(text, MANIFEST, "{field}: the change applies");
        let t = if *field == "name" {
            p.write(".openmax/tools/lint2.json", &text);
            let path = p.root.join(".openmax/tools/lint2.json");
            manifest::load_one(&p.root, &path, &|_| false).unwrap()
        } else {
            p.write(".openmax/tools/lint.json", &text);
            tool(&p)
        };
        assert_ne!(t.sha256, stored.1, "changing {field} kept the sha");
        assert!(
            !gate_approves(&p, &t, &stored),
            "changing {field} kept the approval"
        );
        if *field != "name" {
            // The frozen tool, called after the change on disk: its gate hashes what is there
            // now.
            assert!(
                !gate_approves(&p, &base, &stored),
                "{field}: the frozen tool's gate"
            );
        }
        let _ = std::fs::remove_file(p.root.join(".openmax/tools/lint2.json"));
    }
    p.write(".openmax/tools/lint.json", MANIFEST);
    assert!(
        gate_approves(&p, &base, &stored),
        "the approved bytes again"
    );

    // Every project file the argv names, however it is written.
    let abs = p.root.join("tools/rules.txt").display().to_string();
    for (argv, file) in [
        (r#"["sh","tools/lint.sh"]"#, "tools/lint.sh"),
        (r#"["sh","./tools/lint.sh"]"#, "tools/lint.sh"),
        (r#"["sh","tools/../tools/lint.sh"]"#, "tools/lint.sh"),
        (
            &*format!(r#"["sh","tools/lint.sh","{abs}"]"#),
            "tools/rules.txt",
        ),
        (
            &*format!(r#"["{}"]"#, p.root.join("tools/lint.sh").display()),
            "tools/lint.sh",
        ),
    ] {
        let text = MANIFEST.replacen(r#"["sh","tools/lint.sh"]"#, argv, 1);
        p.write(".openmax/tools/lint.json", &text);
        let t = tool(&p);
        assert!(
            t.source_files.iter().any(|f| f == file),
            "{argv}: {:?}",
            t.source_files
        );
        let stored = (t.manifest_path.clone(), t.sha256.clone());
        assert!(gate_approves(&p, &t, &stored));
        let before = std::fs::read_to_string(p.root.join(file)).unwrap();
        p.write(file, "echo edited\n");
        assert!(
            !gate_approves(&p, &t, &stored),
            "{argv}: editing {file} kept the approval"
        );
        p.write(file, &before);
        assert!(gate_approves(&p, &t, &stored), "{argv}: restored");
    }
}

/// A file outside the project is not part of what a human approves (it is not the project's
/// code); a link inside the project to it is not a project file either.
#[test]
fn files_outside_the_project_are_not_project_code() {
    let p = project("outside");
    let outside = p.root.with_extension("outside");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(outside.join("x.sh"), "echo\n").unwrap();
    std::os::unix::fs::symlink(outside.join("x.sh"), p.root.join("link.sh")).unwrap();
    p.write(
        ".openmax/tools/lint.json",
        &MANIFEST.replacen(
            r#"["sh","tools/lint.sh"]"#,
            &format!(r#"["sh","{}","link.sh"]"#, outside.join("x.sh").display()),
            1,
        ),
    );
    let t = tool(&p);
    assert_eq!(t.source_files, vec![".openmax/tools/lint.json".to_string()]);
    std::fs::remove_dir_all(&outside).unwrap();
}

#[tokio::test]
async fn a_tool_whose_files_change_between_its_plan_and_its_run_does_not_run() {
    let p = project("run");
    p.write(".openmax/tools/lint.json", MANIFEST);
    p.write("tools/lint.sh", "echo planned > ran.txt\n");
    let t = tool(&p);
    let args = serde_json::json!({});
    let planned = external::plan(&t, &p.root, &args, &|_, _| true)
        .source
        .expect("an external call carries its gate")
        .source_sha;
    let ctx = crate::tools::ToolContext::new(&p.root, "t").unwrap();
    let run = |sha: String| {
        let (t, root, args, ctx) = (t.clone(), p.root.clone(), args.clone(), ctx.clone());
        async move {
            let (_cancel, cancelled) = tokio::sync::oneshot::channel();
            external::run(&t, &root, &args, &sha, &ctx, cancelled).await
        }
    };
    let ran = p.root.join("ran.txt");

    // The control: the bytes the plan hashed run.
    let out = run(planned.clone()).await;
    assert!(out.ok, "{}", out.output);
    assert_eq!(std::fs::read_to_string(&ran).unwrap(), "planned\n");
    std::fs::remove_file(&ran).unwrap();

    // Edited after the plan (by an earlier call of the same turn, say): refused, not run.
    p.write("tools/lint.sh", "echo edited > ran.txt\n");
    let out = run(planned.clone()).await;
    assert!(!out.ok);
    assert!(
        out.output.contains("changed since it was approved") && out.output.contains(&planned),
        "{}",
        out.output
    );
    assert!(!ran.exists(), "the edited script ran");
}
