//! `openmax --spec stdio [--json]`: print the contract as Markdown, or as a JSON Schema.
//!
//! Interface (kept stable for `main.rs`): [`run`] writes the spec to `out` and returns the exit
//! code.

use std::io::Write;

/// Print the contract (`json`: the JSON Schema) to `out`; returns the exit code.
pub fn run<W: Write>(_json: bool, _out: W) -> i32 {
    2
}
