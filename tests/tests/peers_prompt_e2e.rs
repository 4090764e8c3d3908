//! The prompt knows where it is, through the real binary: the request body's system prompt
//! carries the project's path, the working directory inside it, the operating system and
//! today's date, then every directory's `AGENTS.md` from the project root down to the working
//! directory, root first, with `CLAUDE.md` read where a directory has no `AGENTS.md`.

use openmax_tests::*;

/// The system prompt of an Anthropic request body.
fn system(body: &serde_json::Value) -> String {
    anthropic_request(body).system
}

fn today() -> String {
    let out = std::process::Command::new("date")
        .arg("+%F")
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap().trim().to_string()
}

#[test]
fn nested_instructions_reach_the_request_root_first() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("ok"), text_reply("ok")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.write("AGENTS.md", "ROOT-AGENTS: tabs, not spaces");
    env.write(
        "CLAUDE.md",
        "ROOT-CLAUDE: never read, the root has an AGENTS.md",
    );
    env.write(
        "sub/CLAUDE.md",
        "SUB-CLAUDE: this directory has only a CLAUDE.md",
    );
    env.write("sub/deep/AGENTS.md", "DEEP-AGENTS: run make check");
    env.write("sub/deep/CLAUDE.md", "DEEP-CLAUDE: never read");
    env.write(
        "other/AGENTS.md",
        "SIBLING: never read, not on the way down",
    );
    std::fs::write(env.home.join("AGENTS.md"), "USER-AGENTS: be brief").unwrap();

    let before = today();
    let mut c = env.command(&["-p", "hi"]);
    c.current_dir(env.project.join("sub/deep"))
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let out = wait_child(c.spawn().unwrap());
    let after = today();
    assert_eq!(out.code, Some(0), "{out:?}");
    let prompt = system(&mock.requests()[0].body);
    let at = |needle: &str| {
        prompt
            .find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the prompt:\n{prompt}"))
    };
    assert!(at("USER-AGENTS") < at("ROOT-AGENTS"), "{prompt}");
    assert!(at("ROOT-AGENTS") < at("SUB-CLAUDE"), "{prompt}");
    assert!(at("SUB-CLAUDE") < at("DEEP-AGENTS"), "{prompt}");
    for never in ["ROOT-CLAUDE", "DEEP-CLAUDE", "SIBLING"] {
        assert!(!prompt.contains(never), "{never} read:\n{prompt}");
    }
    assert!(at("# Instructions for sub (sub/CLAUDE.md)") < at("SUB-CLAUDE"));
    assert!(at("# Instructions for sub/deep (sub/deep/AGENTS.md)") < at("DEEP-AGENTS"));

    // Where it is.
    assert!(
        prompt.contains(&format!("- Project root: {}", env.project.display())),
        "{prompt}"
    );
    assert!(prompt.contains("- Working directory: sub/deep"), "{prompt}");
    assert!(prompt.contains("- Operating system: Linux ("), "{prompt}");
    assert!(
        prompt.contains(&format!("- Today's date: {before}"))
            || prompt.contains(&format!("- Today's date: {after}")),
        "{prompt}"
    );
    assert!(at("# Environment") < at("USER-AGENTS"), "{prompt}");

    // From the root, only the root's file; no working-directory line.
    assert_eq!(env.run(&["-p", "hi"]).code, Some(0));
    let prompt = system(&mock.requests()[1].body);
    assert!(
        prompt.contains("ROOT-AGENTS") && !prompt.contains("SUB-CLAUDE"),
        "{prompt}"
    );
    assert!(!prompt.contains("Working directory"), "{prompt}");
}

#[test]
fn a_claude_md_project_is_read_and_reload_notices_an_agents_md_added_beside_it() {
    let env = TestEnv::new();
    let mock = MockServer::start(vec![text_reply("ok"), text_reply("ok")]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    env.write("CLAUDE.md", "CLAUDE-ONLY project");
    let mut s = env.stdio(&[]);
    s.user("hi");
    s.turn();
    assert!(system(&mock.requests()[0].body).contains("CLAUDE-ONLY project"));
    env.write("AGENTS.md", "AGENTS-NOW");
    s.send(serde_json::json!({"cmd": "reload"}));
    let refrozen = s.until_type("refrozen").pop().unwrap();
    let changes = refrozen["changes"].to_string();
    assert!(
        changes.contains("\"path\":\"AGENTS.md\"") && changes.contains("\"change\":\"added\""),
        "{changes}"
    );
    assert!(
        changes.contains("\"path\":\"CLAUDE.md\"") && changes.contains("\"change\":\"removed\""),
        "{changes}"
    );
    s.user("again");
    s.turn();
    let prompt = system(&mock.requests()[1].body);
    assert!(
        prompt.contains("AGENTS-NOW") && !prompt.contains("CLAUDE-ONLY"),
        "{prompt}"
    );
    assert!(prompt.contains("- Today's date: "), "{prompt}");
    s.finish();
}
