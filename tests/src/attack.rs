//! Attacks on the host through a scripted model: a trusted project in `auto` mode run by a given
//! user ([`crate::Who`]), in a [`TestEnv::visible`] tree the sandbox shows read-only, one turn
//! in which the model runs each command with the `shell` tool, and the control configuration
//! (the sandbox off, the variables naming host services passed on) every attack is run under
//! too, so that an attack cannot pass for refused because it was mistyped.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::json;

use crate::{text_reply, tool_reply, types, Flavor, MockServer, TestEnv, Who, DEADLINE, KEY_VAR};

/// The provider key of these sessions: it must never be read back by an agent process.
pub const KEY: &str = "sk-e2e-host-7f3a9c1d";

/// The control's user config: the sandbox off, the variables naming host services passed on.
pub const CONTROL: &str =
    "[sandbox]\nmode = \"off\"\nenv_allow = [\"TMUX\", \"TMUX_PANE\", \"SSH_AUTH_SOCK\"]\n";

/// A trusted project in `auto` mode, run by `who`, with `extra` in the user config.
pub fn setup(who: Who, extra: &str) -> (TestEnv, MockServer) {
    let mut env = TestEnv::visible();
    env.env.retain(|(k, _)| k != KEY_VAR);
    env.env.push((KEY_VAR.into(), KEY.into()));
    let mock = MockServer::start(vec![]);
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
    env.run_as(who);
    env.trust();
    env.set_mode("auto");
    (env, mock)
}

/// Replace the user config's sandbox part (the provider part is kept).
pub fn reconfigure(env: &TestEnv, mock: &MockServer, extra: &str) {
    env.mock_config(Flavor::Anthropic, &mock.base_url(), extra);
}

/// One turn in which the model runs each command with `shell`, in a session started first
/// (`commands` gets its pid); `(ok, output)` of each, and the pid.
pub fn turn(
    env: &TestEnv,
    mock: &MockServer,
    commands: impl FnOnce(u32) -> Vec<String>,
) -> Vec<(bool, String)> {
    let mut s = env.stdio(&[]);
    let commands = commands(s.pid());
    for (i, c) in commands.iter().enumerate() {
        mock.push(tool_reply(&format!("c{i}"), "shell", json!({"command": c})));
    }
    mock.push(text_reply("done"));
    s.user("run the commands");
    let (evs, reason) = s.turn();
    assert_eq!(reason, "end_turn", "{:?}", types(&evs));
    assert_eq!(s.finish().0, Some(0));
    (0..commands.len())
        .map(|i| {
            let e = evs
                .iter()
                .find(|e| e["type"] == "tool_end" && e["call_id"] == format!("c{i}"))
                .unwrap_or_else(|| panic!("no tool_end for c{i}: {:?}", types(&evs)));
            let out = e["output"].as_str().unwrap_or_default().to_string();
            assert!(
                !out.contains(KEY),
                "the provider key reached a tool's output: {out}"
            );
            (e["ok"] == true, out)
        })
        .collect()
}

/// Wait until `path` exists (an effect a service outside produces a moment later).
pub fn appears(path: &Path) -> bool {
    let end = Instant::now() + DEADLINE;
    while !path.exists() {
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    true
}
