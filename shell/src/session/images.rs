//! The images of a session's record: a record line keeps each image's sha256, path, type and
//! size, never its bytes; the bytes are stored once per session, by sha256, in
//! `<sessions>/<id>.images/<sha256>` (an image attached or read twice costs them once), and
//! put back when the session is resumed, so a resume does not depend on the original file
//! still being there.
//!
//! Invariants: a stored file is written to a temporary name, synced and renamed, before the
//! record line naming it is appended; a stored file whose bytes no longer hash to its name is
//! not used (the image then goes to the model as a line saying it is gone).

use std::io::{self, Write};
use std::path::{Path, PathBuf};

use openmax_core::conversation::{Block, Message};
use openmax_core::record::Record;

use crate::digest::sha256_hex;

/// Where the images of session `id` are kept.
pub fn dir(sessions_dir: &Path, id: &str) -> PathBuf {
    sessions_dir.join(format!("{id}.images"))
}

fn blocks_mut(record: &mut Record) -> Vec<&mut Block> {
    let messages: Vec<&mut Message> = match record {
        Record::Message { message } => vec![message],
        Record::Compaction { messages, .. } => messages.iter_mut().collect(),
        Record::Session { .. }
        | Record::Refrozen { .. }
        | Record::ModeChanged { .. }
        | Record::TurnEnd { .. }
        | Record::Checkpoint { .. } => Vec::new(),
    };
    messages
        .into_iter()
        .flat_map(|m| m.content.iter_mut())
        .collect()
}

/// `record` as its line keeps it: every image's bytes stored in `dir` and its data emptied.
/// `None` when the record holds no image bytes (it is written as it is).
pub fn stash(dir: &Path, record: &Record) -> io::Result<Option<Record>> {
    let mut copy = record.clone();
    let mut any = false;
    for b in blocks_mut(&mut copy) {
        let Block::Image(img) = b else { continue };
        if img.data.is_empty() {
            continue;
        }
        let file = dir.join(&img.sha256);
        if !file.exists() {
            let bytes = crate::images::bytes_of(img).ok_or_else(|| {
                io::Error::new(io::ErrorKind::InvalidData, "an image's base64 is broken")
            })?;
            std::fs::create_dir_all(dir)?;
            let tmp = dir.join(format!(".{}.tmp", img.sha256));
            let mut f = std::fs::File::create(&tmp)?;
            f.write_all(&bytes)?;
            f.sync_data()?;
            std::fs::rename(&tmp, &file)?;
        }
        img.data.clear();
        any = true;
    }
    Ok(any.then_some(copy))
}

/// Put back the bytes of every image in `messages` from `dir` (those whose stored copy is
/// missing or changed stay empty).
pub fn restore(dir: &Path, messages: &mut [Message]) {
    for m in messages {
        for b in &mut m.content {
            let Block::Image(img) = b else { continue };
            if !img.data.is_empty() {
                continue;
            }
            if let Ok(bytes) = std::fs::read(dir.join(&img.sha256)) {
                if sha256_hex(&bytes) == img.sha256 {
                    if let Ok(full) = crate::images::from_bytes(&img.path, &bytes) {
                        img.data = full.data;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use openmax_core::conversation::Role;

    #[test]
    fn bytes_are_stored_once_and_put_back() {
        let root = crate::scratch::path("simg");
        let _ = std::fs::remove_dir_all(&root);
        let d = dir(&root, "s1");
        let img = crate::images::from_bytes("a.png", &crate::images::tiny_png(4, 4)).unwrap();
        let record = Record::Message {
            message: Message {
                role: Role::User,
                content: vec![
                    Block::text("look"),
                    Block::Image(img.clone()),
                    Block::Image(img.clone()),
                ],
            },
        };
        let kept = stash(&d, &record).unwrap().unwrap();
        let line = serde_json::to_string(&kept).unwrap();
        assert!(!line.contains(&img.data), "{line}");
        assert!(line.contains(&img.sha256) && line.contains("a.png"));
        assert_eq!(std::fs::read_dir(&d).unwrap().count(), 1, "stored once");
        let Record::Message { message } = kept else {
            panic!()
        };
        let mut msgs = vec![message];
        restore(&d, &mut msgs);
        assert_eq!(msgs[0].content[1], Block::Image(img.clone()));
        assert!(stash(
            &d,
            &Record::TurnEnd {
                stop_reason: openmax_core::wire::StopReason::Error,
                turn: None,
            }
        )
        .unwrap()
        .is_none());
        // A changed stored copy is not used.
        std::fs::write(d.join(&img.sha256), b"other").unwrap();
        let mut gone = msgs.clone();
        if let Block::Image(i) = &mut gone[0].content[1] {
            i.data.clear();
        }
        restore(&d, &mut gone);
        assert!(matches!(&gone[0].content[1], Block::Image(i) if i.data.is_empty()));
        std::fs::remove_dir_all(&root).unwrap();
    }
}
