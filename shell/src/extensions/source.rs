//! Source identity: the sha256 over an external tool's exact bytes.
//!
//! A tool's source is its manifest plus every project file its `command` argv names. The hash is
//! sha256 over, for each file in that order (manifest first, then argv order, each file once):
//! the project-relative path, a NUL byte, the byte length in decimal, a NUL byte, and the bytes.
//! Framing each file this way means moving bytes from one file to another changes the hash.
//! `source_sha` on the wire is the first 12 lowercase hex digits; approvals are stored against
//! the full hex digest.

use std::path::Path;

use sha2::{Digest, Sha256};

use crate::digest::hex;

/// The full lowercase hex sha256 of a tool's source files, read now.
/// `files` are project-relative paths; a file that cannot be read is an error naming it.
pub fn source_sha256(project: &Path, files: &[String]) -> Result<String, String> {
    let mut items = Vec::with_capacity(files.len());
    for rel in files {
        let bytes =
            std::fs::read(project.join(rel)).map_err(|e| format!("cannot read {rel}: {e}"))?;
        items.push((rel.clone(), bytes));
    }
    Ok(framed_sha256(&items))
}

/// The framed hash over named byte strings, in order: for each, the name, NUL, the byte
/// length in decimal, NUL, the bytes. Full lowercase hex.
pub fn framed_sha256(items: &[(String, Vec<u8>)]) -> String {
    let mut hasher = Sha256::new();
    for (name, bytes) in items {
        hasher.update(name.as_bytes());
        hasher.update([0u8]);
        hasher.update(bytes.len().to_string().as_bytes());
        hasher.update([0u8]);
        hasher.update(bytes);
    }
    hex(&hasher.finalize())
}

/// The wire form: the first 12 hex digits.
pub fn short(full_hex: &str) -> String {
    full_hex.chars().take(12).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn framing_changes_hash_when_bytes_move_between_files() {
        let dir = crate::scratch::path("src");
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("a"), "ab").unwrap();
        std::fs::write(dir.join("b"), "c").unwrap();
        let one = source_sha256(&dir, &["a".into(), "b".into()]).unwrap();
        std::fs::write(dir.join("a"), "a").unwrap();
        std::fs::write(dir.join("b"), "bc").unwrap();
        let two = source_sha256(&dir, &["a".into(), "b".into()]).unwrap();
        assert_ne!(one, two);
        assert_eq!(short(&one).len(), 12);
        assert!(source_sha256(&dir, &["missing".into()])
            .unwrap_err()
            .contains("missing"));
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
