//! Undo notes for a session's next turn: an undo run outside the session's process (`openmax
//! undo`) appends what it did to `projects/<project>/checkpoints/<session>.notes`; the
//! session's process takes the notes before the next command it hands the core (or when it is
//! continued) and tells the model and the client as `harness_note`s. Taking renames the file
//! first, so a note appended meanwhile is taken next time, never lost.

use std::io::{self, Write};
use std::path::{Path, PathBuf};

fn path(dir: &Path, session: &str) -> PathBuf {
    dir.join(format!("{session}.notes"))
}

/// Append a note for the session's next turn.
pub fn add(dir: &Path, session: &str, text: &str) -> io::Result<()> {
    crate::session::perms::private_dir_all(dir)?;
    let mut line = serde_json::to_string(text).unwrap_or_default();
    line.push('\n');
    let mut f = crate::session::perms::private_file()
        .append(true)
        .create(true)
        .open(path(dir, session))?;
    f.write_all(line.as_bytes())
}

/// Whether notes wait (one `stat`).
pub fn waiting(dir: &Path, session: &str) -> bool {
    path(dir, session).exists()
}

/// Take every waiting note, oldest first.
pub fn take(dir: &Path, session: &str) -> Vec<String> {
    let from = path(dir, session);
    let taking = dir.join(format!(".{session}.notes.{}", std::process::id()));
    if std::fs::rename(&from, &taking).is_err() {
        return Vec::new();
    }
    let text = std::fs::read_to_string(&taking).unwrap_or_default();
    let _ = std::fs::remove_file(&taking);
    text.lines()
        .filter_map(|l| serde_json::from_str::<String>(l).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn notes_are_taken_once_in_order() {
        let dir = crate::scratch::path("notes");
        assert!(!waiting(&dir, "s"));
        add(&dir, "s", "one\nline").unwrap();
        add(&dir, "s", "two").unwrap();
        assert!(waiting(&dir, "s"));
        assert_eq!(take(&dir, "s"), ["one\nline", "two"]);
        assert!(take(&dir, "s").is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
