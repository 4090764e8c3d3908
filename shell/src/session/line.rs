//! Parsing one record line, and telling a line torn by a crash from a corrupt one.
//!
//! Invariant: only bytes that are not valid JSON can count as torn. A line that is valid JSON
//! but of an unknown version or shape was written whole by someone (a newer openmax): it is
//! reported as corrupt and never cut off, so no data is ever destroyed by a resume.

use openmax_core::record::{RecordLine, RECORD_VERSION};
use serde::Deserialize;

/// Why a line is not a record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LineError {
    /// Not valid JSON (what a torn write leaves).
    Unparseable(String),
    /// Valid JSON but not a record this build reads (unknown `v`, unknown `rec`, bad fields).
    Invalid(String),
}

impl LineError {
    pub fn message(&self) -> &str {
        match self {
            LineError::Unparseable(m) | LineError::Invalid(m) => m,
        }
    }
}

/// Parse one line (without its newline).
pub fn parse_line(bytes: &[u8]) -> Result<RecordLine, LineError> {
    match serde_json::from_slice::<RecordLine>(bytes) {
        Ok(line) if line.v == RECORD_VERSION => Ok(line),
        Ok(line) => Err(unknown_version(line.v)),
        Err(e) if e.is_syntax() || e.is_eof() => {
            Err(LineError::Unparseable(format!("not valid JSON: {e}")))
        }
        Err(e) => {
            #[derive(Deserialize)]
            struct Version {
                v: u64,
            }
            match serde_json::from_slice::<Version>(bytes) {
                Ok(Version { v }) if v != u64::from(RECORD_VERSION) => Err(unknown_version(v)),
                _ => Err(LineError::Invalid(format!("not a record line: {e}"))),
            }
        }
    }
}

fn unknown_version(v: impl std::fmt::Display) -> LineError {
    LineError::Invalid(format!(
        "unknown record version {v} (this openmax reads version {RECORD_VERSION})"
    ))
}
