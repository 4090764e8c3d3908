//! What the tests read back after a run: the tools a request offered, and the files a session
//! left on disk.

use std::path::{Path, PathBuf};

use serde_json::Value;

/// The names of the tools a logged request body offered (`body["tools"][*]["name"]`).
pub fn offered_tools(body: &Value) -> Vec<String> {
    body["tools"]
        .as_array()
        .expect("the request offers tools")
        .iter()
        .map(|t| t["name"].as_str().expect("a tool name").to_string())
        .collect()
}

/// Every file under `dir`, at any depth, for which `pick` holds (none when `dir` is missing).
pub fn files_under(dir: &Path, pick: impl Fn(&Path) -> bool + Copy) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(rd) = std::fs::read_dir(dir) else {
        return out;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            out.extend(files_under(&p, pick));
        } else if pick(&p) {
            out.push(p);
        }
    }
    out
}
