//! A panic on request, for the tests that a panic while the terminal UI runs gives the
//! terminal back (raw mode off, the cursor shown, the panic's message on the screen) and ends
//! the process. Compiled only with the cargo feature `panic-trigger`, which the end-to-end
//! tests' crate enables and a release build never does: without it, nothing reads
//! `OPENMAX_TEST_PANIC`.
//!
//! `OPENMAX_TEST_PANIC=ui:TEXT` panics in the UI's thread when the prompt TEXT is submitted;
//! `runtime:TEXT` panics in the session's runtime (the main thread) when that prompt reaches it.

/// The variable naming where to panic and on which prompt.
pub const VAR: &str = "OPENMAX_TEST_PANIC";

/// Panic when `$OPENMAX_TEST_PANIC` is `<place>:<prompt>`.
pub fn check(place: &str, prompt: &str) {
    if std::env::var(VAR).is_ok_and(|v| v == format!("{place}:{prompt}")) {
        panic!("the test panic {VAR} asked for ({place})");
    }
}

/// [`check`] for the runtime: `line` is a client command line; a `user` command's text.
pub fn check_line(line: &str) {
    if let Ok(v) = serde_json::from_str::<serde_json::Value>(line) {
        if v["cmd"] == "user" {
            check("runtime", v["text"].as_str().unwrap_or_default().trim());
        }
    }
}
