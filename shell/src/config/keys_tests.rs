//! Every config key a file may set, one row each, through the real loading path
//! ([`load_layers`], [`narrow::check`], [`resolve`]) with a temporary `$OPENMAX_HOME` and
//! project: a limit may be lowered by a project, never raised, and never set to its "none"
//! value; what only the user may set is refused in a project file with the documented error;
//! a list a project may extend is extended, never emptied. The key list is read from the config
//! structs themselves ([`super::keys::fields_of`], every section and `[tools.web_fetch]`), so a
//! key added without a row fails `every_config_key_has_a_row`.

use std::collections::BTreeSet;
use std::path::PathBuf;

use super::*;

/// What a project file may do with a key.
enum Class {
    /// A limit a project may only lower.
    Limit(Limit),
    /// Only the user may set it: a project file setting `refused` is an error naming the file
    /// and the key; `allowed` (if any) is a narrowing the project may set, and it wins over the
    /// user's `refused`.
    UserOnly {
        refused: &'static str,
        allowed: Option<Narrowing>,
    },
    /// A list a project extends (user entries first); it cannot remove the user's.
    Append {
        user: &'static str,
        project: &'static str,
        read: fn(&Settings) -> Vec<String>,
    },
    /// A list a project may only cut down to a subset of the user's.
    Subset,
    /// Project code a human must approve before it runs (the approval tests cover the gate).
    Gated,
    /// A project may set it either way; why that is safe.
    Free(&'static str),
}

/// A value a project may set for a key only the user may widen.
struct Narrowing {
    /// The TOML literal.
    value: &'static str,
    /// The resolved value, as that literal.
    read: fn(&Settings) -> String,
}

/// A limit's test values (TOML literals).
struct Limit {
    /// The user's value.
    user: &'static str,
    /// Below `user`.
    lower: &'static str,
    /// Above `user`.
    higher: &'static str,
    /// Above the default, for a user config that does not set the key (`None`: the default is
    /// the widest value already, so every value lowers it).
    above_default: Option<&'static str>,
    /// The value meaning "no limit" (the widest), if the key has one.
    unlimited: Option<&'static str>,
    /// 0 is a legal value and the narrowest one.
    zero_narrowest: bool,
    /// The resolved value.
    read: fn(&Settings) -> f64,
}

struct Row {
    section: &'static str,
    /// `""` for a section set as a whole (`[[hooks]]`, `[mcp_servers]`).
    key: &'static str,
    class: Class,
}

fn limit(
    user: &'static str,
    lower: &'static str,
    higher: &'static str,
    above_default: Option<&'static str>,
    unlimited: Option<&'static str>,
    zero_narrowest: bool,
    read: fn(&Settings) -> f64,
) -> Class {
    Class::Limit(Limit {
        user,
        lower,
        higher,
        above_default,
        unlimited,
        zero_narrowest,
        read,
    })
}

fn rows() -> Vec<Row> {
    let row = |section, key, class| Row {
        section,
        key,
        class,
    };
    vec![
        row("provider", "name", Class::UserOnly {
            refused: "\"openai-chat\"",
            allowed: None,
        }),
        row(
            "provider",
            "model",
            Class::Free("a model of the user's provider: the key still goes only where the user's provider and base_url send it"),
        ),
        row("provider", "base_url", Class::UserOnly {
            refused: "\"http://127.0.0.1:9/v1\"",
            allowed: None,
        }),
        row("provider", "api_key_env", Class::UserOnly {
            refused: "\"OTHER_KEY\"",
            allowed: None,
        }),
        row(
            "provider",
            "context_tokens",
            Class::Free("the model's window, not a budget: a wrong value only moves when the context is compacted; max_agent_tokens bounds what a turn spends"),
        ),
        row(
            "provider",
            "max_attempts",
            // 0 attempts is taken as 1.
            limit("3", "2", "4", Some("6"), None, false, |s| s.retry.max_attempts as f64),
        ),
        row(
            "provider",
            "retry_base_ms",
            Class::Free("the backoff's base: waits stay under the fixed 8 s ceiling and the attempt budget (max_attempts) bounds the requests"),
        ),
        row(
            "provider",
            "stream_idle_timeout_s",
            limit("60", "30", "120", Some("301"), Some("0"), false, |s| {
                s.retry.stream_idle_timeout_ms as f64 / 1000.0
            }),
        ),
        row(
            "provider",
            "max_output_tokens",
            // The user config names the demo provider, whose default cap is 1024.
            limit("4096", "1024", "8192", Some("2048"), Some("0"), false, |s| {
                s.provider.max_output_tokens as f64
            }),
        ),
        row(
            "limits",
            "max_iterations",
            limit("10", "5", "11", Some("51"), None, true, |s| s.limits.max_iterations as f64),
        ),
        row(
            "limits",
            "max_agent_tokens",
            limit("1000", "500", "2000", None, Some("0"), false, |s| {
                s.limits.max_agent_tokens as f64
            }),
        ),
        row(
            "limits",
            "approval_timeout_s",
            limit("60", "30", "120", None, Some("0"), false, |s| {
                s.limits.approval_timeout_ms as f64 / 1000.0
            }),
        ),
        row(
            "limits",
            "tool_timeout_s",
            limit("30", "10", "90", Some("61"), Some("0"), false, |s| {
                s.tool_timeouts.tool_ms as f64 / 1000.0
            }),
        ),
        row(
            "limits",
            "shell_timeout_s",
            limit("60", "30", "90", Some("121"), None, false, |s| {
                s.tool_timeouts.shell_ms as f64 / 1000.0
            }),
        ),
        row(
            "limits",
            "max_reply_bytes",
            limit("1000000", "1000", "2000000", Some("4194305"), None, true, |s| {
                s.limits.max_reply_bytes as f64
            }),
        ),
        row(
            "limits",
            "max_thinking_bytes",
            limit("1000000", "1000", "2000000", Some("4194305"), None, true, |s| {
                s.limits.max_thinking_bytes as f64
            }),
        ),
        row(
            "limits",
            "max_tool_calls",
            limit("64", "8", "100", Some("129"), None, true, |s| s.limits.max_tool_calls as f64),
        ),
        row(
            "limits",
            "drain_timeout_s",
            limit("5", "1", "20", Some("11"), None, true, |s| {
                s.limits.drain_timeout_ms as f64 / 1000.0
            }),
        ),
        row("permissions", "deny", Class::Append {
            user: "[\"shell(rm -rf *)\"]",
            project: "[\"read_file(.env)\"]",
            read: |s| s.permissions.deny.iter().map(|r| r.to_string()).collect(),
        }),
        row("permissions", "ask", Class::Append {
            user: "[\"shell(git push*)\"]",
            project: "[\"write_file\"]",
            read: |s| s.permissions.ask.iter().map(|r| r.to_string()).collect(),
        }),
        row("hooks", "", Class::Gated),
        row("trust", "projects", Class::UserOnly {
            refused: "[\"/\"]",
            allowed: None,
        }),
        row("mcp_servers", "", Class::Gated),
        row("sandbox", "mode", Class::UserOnly {
            refused: "\"off\"",
            allowed: None,
        }),
        row("sandbox", "network", Class::UserOnly {
            refused: "true",
            allowed: Some(Narrowing {
                value: "false",
                read: |s| s.sandbox.network.map_or("unset".into(), |n| n.to_string()),
            }),
        }),
        row("sandbox", "env_allow", Class::UserOnly {
            refused: "[\"AWS_SECRET_ACCESS_KEY\"]",
            allowed: None,
        }),
        row("sandbox", "env_deny", Class::Append {
            user: "[\"DATABASE_URL\"]",
            project: "[\"REDIS_URL\"]",
            read: |s| s.sandbox.env_deny.clone(),
        }),
        row("sandbox", "writable", Class::UserOnly {
            refused: "[\"/var/tmp\"]",
            allowed: None,
        }),
        row("sandbox", "protected", Class::UserOnly {
            refused: "[]",
            allowed: None,
        }),
        row("sandbox", "unix_sockets", Class::Subset),
        row("provider", "price_in", Class::UserOnly {
            refused: "3.0",
            allowed: None,
        }),
        row("provider", "price_out", Class::UserOnly {
            refused: "15.0",
            allowed: None,
        }),
        row("provider", "price_cached_in", Class::UserOnly {
            refused: "0.3",
            allowed: None,
        }),
        row("tools.web_fetch", "allow", Class::UserOnly {
            refused: "[\"evil.example\"]",
            allowed: None,
        }),
        row("tools.web_fetch", "allow_private", Class::UserOnly {
            refused: "[\"10.0.0.1\"]",
            allowed: None,
        }),
        row("tools.web_fetch", "deny", Class::Append {
            user: "[\"a.example\"]",
            project: "[\"b.example\"]",
            read: |s| s.web.deny.clone(),
        }),
        row(
            "tools.web_fetch",
            "max_bytes",
            limit("1000", "500", "2000", Some("5000001"), None, false, |s| {
                s.web.max_bytes as f64
            }),
        ),
        row(
            "tools.web_fetch",
            "timeout_s",
            limit("10", "5", "20", Some("31"), None, false, |s| {
                s.web.timeout_ms as f64 / 1000.0
            }),
        ),
        row(
            "tools.web_fetch",
            "max_redirects",
            limit("3", "1", "4", Some("6"), None, true, |s| s.web.max_redirects as f64),
        ),
        row(
            "tasks",
            "max_depth",
            // 0 turns tasks off: the narrowest value.
            limit("2", "1", "3", Some("2"), None, true, |s| s.tasks.max_depth as f64),
        ),
        row(
            "tasks",
            "max_parallel",
            limit("4", "2", "5", Some("5"), None, false, |s| s.tasks.max_parallel as f64),
        ),
        // The record behind undo: a project may neither turn it off nor shrink it.
        row("checkpoints", "enabled", Class::UserOnly {
            refused: "false",
            allowed: None,
        }),
        row("checkpoints", "max_store_mb", Class::UserOnly {
            refused: "1",
            allowed: None,
        }),
        row("checkpoints", "max_file_mb", Class::UserOnly {
            refused: "1",
            allowed: None,
        }),
        row("checkpoints", "max_ignored_entries", Class::UserOnly {
            refused: "0",
            allowed: None,
        }),
        row("checkpoints", "max_age_days", Class::UserOnly {
            refused: "0.5",
            allowed: None,
        }),
    ]
}

// ---- the keys the parser accepts, read from the structs ---------------------------------------

/// Every key a config file may set: `section.key` (`tools.web_fetch.key` for the nested
/// table), or `section` for `[[hooks]]` and `[mcp_servers]`.
fn parser_keys() -> BTreeSet<String> {
    use super::checkpoints::CheckpointsSection;
    use super::keys::fields_of;
    use super::tasks::TasksSection;
    use super::web_fetch::{ToolsSection, WebFetchSection};
    let mut keys = BTreeSet::new();
    let add = |keys: &mut BTreeSet<String>, section: &str, fields: &[&str]| {
        keys.extend(fields.iter().map(|k| format!("{section}.{k}")));
    };
    for &section in fields_of::<FileConfig>() {
        match section {
            "provider" => add(&mut keys, section, fields_of::<ProviderSection>()),
            "limits" => add(&mut keys, section, fields_of::<LimitsSection>()),
            "permissions" => add(&mut keys, section, fields_of::<PermissionsSection>()),
            "trust" => add(&mut keys, section, fields_of::<TrustSection>()),
            "sandbox" => add(&mut keys, section, fields_of::<SandboxSection>()),
            "checkpoints" => add(&mut keys, section, fields_of::<CheckpointsSection>()),
            "tasks" => add(&mut keys, section, fields_of::<TasksSection>()),
            "tools" => {
                for &tool in fields_of::<ToolsSection>() {
                    match tool {
                        "web_fetch" => {
                            add(&mut keys, "tools.web_fetch", fields_of::<WebFetchSection>())
                        }
                        other => panic!("a new tool section [tools.{other}]: add it here and rows"),
                    }
                }
            }
            // Whole sections whose entries are definitions (each approved as a whole; their
            // fields: the approval-hash tests).
            "hooks" | "mcp_servers" => {
                keys.insert(section.to_string());
            }
            other => panic!("a new config section [{other}]: add it to parser_keys and rows"),
        }
    }
    keys
}

fn row_key(r: &Row) -> String {
    if r.key.is_empty() {
        r.section.to_string()
    } else {
        format!("{}.{}", r.section, r.key)
    }
}

#[test]
fn every_config_key_has_a_row() {
    let parser = parser_keys();
    let table: BTreeSet<String> = rows().iter().map(row_key).collect();
    let missing: Vec<&String> = parser.difference(&table).collect();
    let stale: Vec<&String> = table.difference(&parser).collect();
    assert!(
        missing.is_empty() && stale.is_empty(),
        "keys the parser accepts without a row: {missing:?}; rows for keys it does not accept: \
         {stale:?} (say in rows() what a project file may do with each key)"
    );
    assert_eq!(table.len(), rows().len(), "one row per key");
    for r in rows() {
        if let Class::Free(why) = r.class {
            assert!(
                !why.trim().is_empty(),
                "{}: a key a project may set freely says why that is safe",
                row_key(&r)
            );
        }
    }
}

// ---- the loading path ------------------------------------------------------------------------

struct Dirs {
    root: PathBuf,
    home: PathBuf,
    project: PathBuf,
}

impl Drop for Dirs {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.root);
    }
}

fn dirs() -> Dirs {
    static N: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let root = crate::scratch::path(&format!("keys-{n}"));
    let _ = std::fs::remove_dir_all(&root);
    std::fs::create_dir_all(root.join("home")).unwrap();
    std::fs::create_dir_all(root.join("project/.openmax")).unwrap();
    let root = root.canonicalize().unwrap();
    Dirs {
        home: root.join("home"),
        project: root.join("project"),
        root,
    }
}

/// A TOML value from its literal.
fn value(literal: &str) -> toml::Value {
    toml::from_str::<toml::Table>(&format!("v = {literal}")).unwrap()["v"].clone()
}

/// A config file: the given `section.key = literal` entries (the user file also names the demo
/// provider, which needs no key).
fn file(entries: &[(&str, &str, &str)], user: bool) -> String {
    let mut t = toml::Table::new();
    if user {
        let mut p = toml::Table::new();
        p.insert("name".into(), "demo".into());
        t.insert("provider".into(), p.into());
    }
    for (section, key, literal) in entries {
        let mut table = &mut t;
        for part in section.split('.') {
            table = table
                .entry(part.to_string())
                .or_insert_with(|| toml::Table::new().into())
                .as_table_mut()
                .unwrap();
        }
        table.insert(key.to_string(), value(literal));
    }
    toml::to_string(&t).unwrap()
}

/// Load with these user and project entries; the settings or the error.
fn load(user: &[(&str, &str, &str)], project: &[(&str, &str, &str)]) -> Result<Settings, String> {
    let d = dirs();
    std::fs::write(d.home.join("config.toml"), file(user, true)).unwrap();
    if !project.is_empty() {
        std::fs::write(d.project.join(".openmax/config.toml"), file(project, false)).unwrap();
    }
    let none = |_: &str| None;
    load_layers(&d.home, &d.project)
        .and_then(|l| resolve(l, &Overrides::default(), &Overrides::default(), &none))
        .map_err(|e| e.0)
}

/// The project file named in every refusal.
const PROJECT_FILE: &str = ".openmax/config.toml";

fn check_limit(s: &str, k: &str, l: &Limit, bad: &mut Vec<String>) {
    let num = |v: &str| {
        value(v)
            .as_float()
            .or(value(v).as_integer().map(|i| i as f64))
    };
    let mut expect_ok =
        |what: &str, user: &[(&str, &str, &str)], proj: &str| match load(user, &[(s, k, proj)]) {
            Ok(settings) => {
                let got = (l.read)(&settings);
                if Some(got) != num(proj) {
                    bad.push(format!(
                        "[{s}] {k}: {what}: the project's {proj} resolved to {got}"
                    ));
                }
            }
            Err(e) => bad.push(format!("[{s}] {k}: {what}: refused: {e}")),
        };
    let user = [(s, k, l.user)];
    expect_ok("lowering the user's value", &user, l.lower);
    expect_ok("keeping the user's value", &user, l.user);
    if l.zero_narrowest {
        expect_ok("0, the narrowest value", &user, "0");
    }
    if l.above_default.is_none() {
        expect_ok("any value under a default of none", &[], l.lower);
    } else {
        expect_ok("lowering the default", &[], l.lower);
    }
    if let Some(none) = l.unlimited {
        expect_ok(
            "any value under a user's \"none\"",
            &[(s, k, none)],
            l.lower,
        );
    }
    let mut expect_refused =
        |what: &str, user: &[(&str, &str, &str)], proj: &str, shown: &str| match load(
            user,
            &[(s, k, proj)],
        ) {
            Ok(settings) => bad.push(format!(
                "[{s}] {k}: {what}: the project's {proj} was accepted (resolved to {})",
                (l.read)(&settings)
            )),
            Err(e) => {
                let names = e.contains(PROJECT_FILE)
                    && e.contains(&format!("[{s}] {k}"))
                    && e.contains(shown);
                if !names {
                    bad.push(format!(
                        "[{s}] {k}: {what}: the error does not name the file, the key and \
                         {shown:?}: {e}"
                    ));
                }
            }
        };
    expect_refused(
        "raising the user's value",
        &user,
        l.higher,
        &format!("the user's value {}", l.user),
    );
    if let Some(above) = l.above_default {
        expect_refused("raising the default", &[], above, "the default");
    }
    if let Some(none) = l.unlimited {
        expect_refused(
            "setting \"none\" over the user's limit",
            &user,
            none,
            &format!("the user's value {}", l.user),
        );
        if l.above_default.is_some() {
            expect_refused(
                "setting \"none\" over the default",
                &[],
                none,
                "the default",
            );
        }
    }
}

#[test]
fn a_project_file_may_only_narrow_each_key() {
    let mut bad = Vec::new();
    for r in rows() {
        let (s, k) = (r.section, r.key);
        match &r.class {
            Class::Limit(l) => check_limit(s, k, l, &mut bad),
            Class::UserOnly { refused, allowed } => {
                match load(&[], &[(s, k, refused)]) {
                    Ok(_) => bad.push(format!("[{s}] {k} = {refused} accepted in a project file")),
                    Err(e) => {
                        // [trust] and [checkpoints] are refused as whole sections.
                        let key_named = e.contains(k)
                            || (matches!(s, "trust" | "checkpoints")
                                && e.contains(&format!("[{s}]")));
                        if !(e.contains(PROJECT_FILE) && key_named) {
                            bad.push(format!(
                                "[{s}] {k}: the refusal does not name the file and the key: {e}"
                            ));
                        }
                    }
                }
                if let Some(n) = allowed {
                    for user in [&[][..], &[(s, k, *refused)][..]] {
                        match load(user, &[(s, k, n.value)]) {
                            Ok(settings) if (n.read)(&settings) != n.value => bad.push(format!(
                                "[{s}] {k} = {} in a project file over the user's {user:?} \
                                 resolved to {}",
                                n.value,
                                (n.read)(&settings)
                            )),
                            Ok(_) => {}
                            Err(e) => bad.push(format!(
                                "[{s}] {k} = {} (a narrowing) refused: {e}",
                                n.value
                            )),
                        }
                    }
                }
            }
            Class::Append {
                user,
                project,
                read,
            } => match load(&[(s, k, user)], &[(s, k, project)]) {
                Ok(settings) => {
                    let got = read(&settings);
                    let want: Vec<String> = [user, project]
                        .iter()
                        .flat_map(|l| {
                            value(l)
                                .as_array()
                                .unwrap()
                                .iter()
                                .map(|v| v.as_str().unwrap().to_string())
                                .collect::<Vec<_>>()
                        })
                        .collect();
                    if got != want {
                        bad.push(format!(
                            "[{s}] {k}: user {user} then project {project} gave {got:?}"
                        ));
                    }
                }
                Err(e) => bad.push(format!("[{s}] {k}: extending refused: {e}")),
            },
            Class::Subset => {
                let user = [(s, k, "[\"/run/a.sock\", \"/run/b.sock\"]")];
                match load(&user, &[(s, k, "[\"/run/a.sock\"]")]) {
                    Ok(st) if st.sandbox.unix_sockets == Some(vec!["/run/a.sock".into()]) => {}
                    other => bad.push(format!("[{s}] {k}: a subset gave {other:?}")),
                }
                match load(&user, &[(s, k, "[]")]) {
                    Ok(st) if st.sandbox.unix_sockets == Some(vec![]) => {}
                    other => bad.push(format!("[{s}] {k}: the empty subset gave {other:?}")),
                }
                for (u, p) in [
                    (&user[..], "[\"/run/c.sock\"]"),
                    (&[][..], "[\"/run/a.sock\"]"),
                ] {
                    match load(u, &[(s, k, p)]) {
                        Err(e) if e.contains(PROJECT_FILE) && e.contains(k) => {}
                        other => bad.push(format!("[{s}] {k}: adding {p} gave {other:?}")),
                    }
                }
            }
            Class::Gated | Class::Free(_) => {}
        }
    }
    assert!(
        bad.is_empty(),
        "a project file widened what the user set:\n{}",
        bad.join("\n")
    );
}

/// The sections whose entries are code a project may define, tagged as the project's, so the
/// approval gate applies to them (its tests: the approval-hash tests and the e2e tests).
#[test]
fn project_definitions_are_tagged_as_the_projects() {
    let d = dirs();
    std::fs::write(
        d.home.join("config.toml"),
        "[[hooks]]\nevent = \"turn_end\"\ncommand = \"true\"\n\
         [mcp_servers.u]\ncommand = \"u\"\n",
    )
    .unwrap();
    std::fs::write(
        d.project.join(".openmax/config.toml"),
        "[[hooks]]\nevent = \"turn_end\"\ncommand = \"true\"\n\
         [mcp_servers.p]\ncommand = \"p\"\n",
    )
    .unwrap();
    let l = load_layers(&d.home, &d.project).unwrap();
    let origins: Vec<Origin> = l.hooks.iter().map(|(_, o)| *o).collect();
    assert_eq!(origins, vec![Origin::User, Origin::Project]);
    let mcp: Vec<(Origin, Vec<String>)> = l
        .mcp
        .iter()
        .map(|m| (m.origin, m.table.keys().cloned().collect()))
        .collect();
    assert_eq!(
        mcp,
        vec![
            (Origin::User, vec!["u".to_string()]),
            (Origin::Project, vec!["p".to_string()])
        ]
    );
}

/// `[sandbox] writable` is the user's alone, and even the user cannot name a directory holding
/// `$OPENMAX_HOME` or inside it.
#[test]
fn no_writable_directory_reaches_openmax_home() {
    use crate::sandbox::spec::ConfineSpec;
    let d = dirs();
    let tmp = d.root.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::create_dir_all(d.home.join("projects")).unwrap();
    let outside = d.root.join("cache");
    std::fs::create_dir_all(&outside).unwrap();
    let link = d.root.join("link-to-home");
    std::os::unix::fs::symlink(d.home.join("projects"), &link).unwrap();
    let mut spec = ConfineSpec::new(&d.project, &d.home, &tmp, &d.root, false).unwrap();
    for dir in [
        d.home.clone(),
        d.home.join("projects"),
        d.root.clone(),
        link.clone(),
        d.home.join("projects/../projects"),
    ] {
        let e = spec
            .allow_write(&dir.display().to_string(), &d.home)
            .expect_err(&format!("{} accepted as writable", dir.display()));
        assert!(e.contains("$OPENMAX_HOME"), "{e}");
    }
    spec.allow_write(&outside.display().to_string(), &d.home)
        .unwrap();
    assert_eq!(spec.writable, vec![outside]);
}

#[test]
fn an_unknown_key_is_reported_in_every_section_with_its_line() {
    // Every section the parser has (read from the Deserialize structs, as for the rows), with
    // one key it does not know; `[mcp_servers]` names servers and is judged by the MCP reader.
    let mut sections: BTreeSet<String> = parser_keys()
        .iter()
        .filter_map(|k| k.rsplit_once('.').map(|(s, _)| s.to_string()))
        .collect();
    sections.insert("hooks".into());
    let path = std::path::Path::new("/p/config.toml");
    for section in &sections {
        let text = if section == "hooks" {
            "[[hooks]]\nevent = \"turn_end\"\ncommand = \"x\"\nnot_a_key = 1\n".to_string()
        } else {
            format!("# a comment\n[{section}]\nnot_a_key = 1\n")
        };
        let lines = super::keys::unknown(path, &text);
        let line = if section == "hooks" { 4 } else { 3 };
        let shown = if section == "hooks" {
            "[[hooks]] #1".to_string()
        } else {
            format!("[{section}]")
        };
        assert_eq!(lines.len(), 1, "[{section}]: {lines:?}");
        assert!(
            lines[0].starts_with(&format!(
                "/p/config.toml:{line}: {shown}: unknown key \"not_a_key\""
            )),
            "[{section}]: {}",
            lines[0]
        );
    }
    assert!(sections.contains("sandbox") && sections.contains("tools.web_fetch"));
    let top = super::keys::unknown(path, "not_a_key = 1\n");
    assert_eq!(top.len(), 1);
    assert!(
        top[0].starts_with("/p/config.toml:1: the top level: unknown key"),
        "{}",
        top[0]
    );
    // A server's own keys are the MCP reader's to judge.
    assert!(super::keys::unknown(path, "[mcp_servers.x]\nnot_a_key = 1\n").is_empty());
}

/// A key with a ceiling takes the ceiling itself and refuses anything past it, in the user's
/// own file (a project's may only lower it, above).
#[test]
fn a_key_with_a_ceiling_takes_it_and_refuses_past_it() {
    type Read = fn(&Settings) -> f64;
    let ceilings: [(&str, &str, f64, Read); 2] = [
        (
            "limits",
            "shell_timeout_s",
            crate::tools::SHELL_MAX_TIMEOUT_S,
            |s| s.tool_timeouts.shell_ms as f64 / 1000.0,
        ),
        (
            "tools.web_fetch",
            "timeout_s",
            super::web_fetch::MAX_TIMEOUT_S,
            |s| s.web.timeout_ms as f64 / 1000.0,
        ),
    ];
    for (section, key, ceiling, read) in ceilings {
        let at = ceiling.to_string();
        match load(&[(section, key, &at)], &[]) {
            Ok(s) => assert_eq!(read(&s), ceiling, "[{section}] {key} = {at}"),
            Err(e) => panic!("[{section}] {key} = {at} refused: {e}"),
        }
        let past = format!("{}", ceiling + 0.5);
        let e = load(&[(section, key, &past)], &[]).unwrap_err();
        assert!(
            e.contains(key) && e.contains("at most"),
            "[{section}] {key} = {past}: {e}"
        );
    }
}
