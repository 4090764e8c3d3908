//! A panic while the terminal UI runs gives the terminal back, in a real terminal (a tmux
//! pane): the binary built with the test-only feature `panic-trigger` panics in the UI's own
//! thread, or in the session's runtime on the main thread, when the submitted prompt is the one
//! `$OPENMAX_TEST_PANIC` names; afterwards the process has exited with 101, the terminal is in
//! canonical mode with echo on, the cursor is shown, and the panic's message is on the screen
//! (fd 2 was given back before it was printed).

use std::path::Path;

use openmax_tests::tmux::Pane;
use openmax_tests::*;

/// The variable the trigger reads (`shell/src/panic_trigger.rs`).
const VAR: &str = "OPENMAX_TEST_PANIC";

fn has_trigger(bin: &Path) -> bool {
    std::fs::read(bin).is_ok_and(|b| b.windows(VAR.len()).any(|w| w == VAR.as_bytes()))
}

/// `target/<profile>/openmax` with the trigger compiled in: `cargo test --workspace` builds it
/// so (this crate enables the feature); after a plain `cargo build -p openmax-shell` it is
/// built again here with the feature.
fn binary_with_the_trigger() {
    let bin = openmax_bin();
    if !has_trigger(&bin) {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let status = std::process::Command::new(cargo)
            .args([
                "build",
                "-q",
                "-p",
                "openmax-shell",
                "--bin",
                "openmax",
                "--features",
                "panic-trigger",
            ])
            .status()
            .expect("cargo runs");
        assert!(
            status.success(),
            "building openmax with panic-trigger failed"
        );
    }
    assert!(has_trigger(&bin), "{} has no panic trigger", bin.display());
}

/// Panic at `place` (`ui` or `runtime`) when the prompt is typed; check the terminal after.
fn panic_restores_the_terminal(place: &str) {
    binary_with_the_trigger();
    let env = TestEnv::new();
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), "");
    env.trust();
    let trigger = format!("{place}:boom now");
    let pane = Pane::start_with(&env, &[], 80, 30, &[(VAR, &trigger)]);
    pane.wait_text("test-model");
    pane.type_text("boom now");
    pane.keys(&["Enter"]);
    let (code, restored) = pane.wait_exit();
    let history = pane.history();
    assert_eq!(
        code, 101,
        "{place}: Rust's exit code for a panic:\n{history}"
    );
    assert!(
        restored,
        "{place}: the terminal is not restored:\n{history}"
    );
    assert_eq!(
        pane.format("#{cursor_flag}"),
        "1",
        "{place}: the cursor is shown"
    );
    assert!(
        history.contains(&format!("the test panic {VAR} asked for ({place})")),
        "{place}: the panic message is not on the screen:\n{history}"
    );
    assert!(
        mock.requests().is_empty(),
        "{place}: the prompt was never sent"
    );
}

#[test]
fn a_panic_in_the_ui_thread_restores_the_terminal_and_ends_the_process() {
    panic_restores_the_terminal("ui");
}

#[test]
fn a_panic_in_the_runtime_restores_the_terminal() {
    panic_restores_the_terminal("runtime");
}
