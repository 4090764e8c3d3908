//! The provider key out of openmax's own environment: read once at start-up, kept in this
//! process's memory, and removed from the environment, including its bytes in the block the
//! kernel shows as `/proc/<pid>/environ` (removing a variable from the C library's list leaves
//! those bytes in place). No process that can read openmax's `/proc` entry finds the key there.
//!
//! Invariant: [`take`] runs first thing in `main`, before any thread exists (changing the
//! environment is not thread-safe); afterwards the key variables are read with [`var`].

use std::collections::BTreeMap;
use std::ffi::CStr;
use std::sync::OnceLock;

static TAKEN: OnceLock<BTreeMap<String, String>> = OnceLock::new();
/// The names [`take`] was given, set or not.
static NAMES: OnceLock<Vec<String>> = OnceLock::new();

extern "C" {
    static mut environ: *mut *mut libc::c_char;
}

/// The variables that may hold a provider key: the providers' defaults and the
/// `api_key_env` of the user config (read without judging the rest of it).
pub fn key_names() -> Vec<String> {
    let config = crate::session::Home::from_env()
        .ok()
        .and_then(|home| std::fs::read_to_string(home.config_path()).ok());
    names_with(config.as_deref())
}

/// The providers' default key variables, and the `api_key_env` of the user config `text`.
fn names_with(text: Option<&str>) -> Vec<String> {
    let mut names = vec![
        "ANTHROPIC_API_KEY".to_string(),
        "OPENAI_API_KEY".to_string(),
    ];
    if let Some(table) = text.and_then(|t| t.parse::<toml::Table>().ok()) {
        if let Some(v) = table
            .get("provider")
            .and_then(|p| p.get("api_key_env"))
            .and_then(|v| v.as_str())
        {
            if !names.iter().any(|n| n == v) {
                names.push(v.to_string());
            }
        }
    }
    names
}

/// The start and end of the environment block the process started with (fields 50 and 51
/// of `/proc/self/stat`).
fn original_block() -> Option<(usize, usize)> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 1..];
    let fields: Vec<&str> = after.split_whitespace().collect();
    // `after` starts at field 3.
    let start = fields.get(50 - 3)?.parse().ok()?;
    let end = fields.get(51 - 3)?.parse().ok()?;
    Some((start, end))
}

/// Whether the `len` bytes at address `at` lie wholly inside `block` (start, end).
fn in_block(at: usize, len: usize, block: Option<(usize, usize)>) -> bool {
    block.is_some_and(|(s, e)| at >= s && at + len <= e)
}

/// Take `names` out of the environment: their values are kept for [`var`], the variables
/// removed, and their bytes in the original block overwritten with NULs.
pub fn take(names: &[String]) {
    let _ = NAMES.set(names.to_vec());
    let block = original_block();
    let mut taken = BTreeMap::new();
    for name in names {
        let Ok(value) = std::env::var(name) else {
            continue;
        };
        let prefix = format!("{name}=");
        let mut found = Vec::new();
        // SAFETY: single-threaded (see the module invariant); `environ` is the C library's
        // NULL-terminated list of NUL-terminated strings.
        unsafe {
            let mut p = environ;
            while !p.is_null() && !(*p).is_null() {
                let bytes = CStr::from_ptr(*p).to_bytes();
                let at = *p as usize;
                if bytes.starts_with(prefix.as_bytes()) && in_block(at, bytes.len(), block) {
                    found.push((*p, bytes.len()));
                }
                p = p.add(1);
            }
        }
        std::env::remove_var(name);
        for (ptr, len) in found {
            // SAFETY: the bytes lie inside the original block, which the kernel set up
            // writable on the stack, and no list entry points at them any more.
            unsafe { std::ptr::write_bytes(ptr, 0, len) };
        }
        taken.insert(name.clone(), value);
    }
    let _ = TAKEN.set(taken);
}

/// The variables that may hold a provider key: what [`take`] was given (set or not), else
/// (before it ran, in tests) the providers' defaults.
pub fn names() -> Vec<String> {
    NAMES.get().cloned().unwrap_or_else(|| {
        vec![
            "ANTHROPIC_API_KEY".to_string(),
            "OPENAI_API_KEY".to_string(),
        ]
    })
}

/// An environment variable, the taken ones included.
pub fn var(name: &str) -> Option<String> {
    TAKEN
        .get()
        .and_then(|t| t.get(name).cloned())
        .or_else(|| std::env::var(name).ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_original_block_is_where_the_environment_the_process_started_with_lies() {
        let (start, end) = original_block().expect("fields 50 and 51 of /proc/self/stat");
        assert!(start < end, "{start}..{end}");
        // PATH came with the test process, so its string lies in the block (the tests never
        // set it, which would move it to the heap).
        let mut found = false;
        // SAFETY: reading the C library's environment list; no test changes the environment.
        unsafe {
            let mut p = environ;
            while !p.is_null() && !(*p).is_null() {
                let bytes = CStr::from_ptr(*p).to_bytes();
                if bytes.starts_with(b"PATH=") {
                    let at = *p as usize;
                    assert!(
                        at >= start && at + bytes.len() <= end,
                        "{at} not in {start}..{end}"
                    );
                    found = true;
                }
                p = p.add(1);
            }
        }
        assert!(found, "PATH is in the environment");
    }

    #[test]
    fn the_configured_key_variable_is_taken_too_and_once() {
        let defaults = ["ANTHROPIC_API_KEY", "OPENAI_API_KEY"];
        assert_eq!(names_with(None), defaults);
        assert_eq!(names_with(Some("not toml [")), defaults);
        assert_eq!(
            names_with(Some("[provider]\napi_key_env = \"MY_KEY\"\n")),
            ["ANTHROPIC_API_KEY", "OPENAI_API_KEY", "MY_KEY"]
        );
        assert_eq!(
            names_with(Some("[provider]\napi_key_env = \"OPENAI_API_KEY\"\n")),
            defaults
        );
    }

    /// Before [`take`] (as in these tests), a variable is the environment's: set or unset.
    #[test]
    fn a_variable_not_taken_is_the_environments() {
        assert_eq!(var("PATH"), std::env::var("PATH").ok());
        assert!(var("PATH").is_some_and(|p| !p.is_empty()));
        assert_eq!(var("OPENMAX_TEST_NO_SUCH_VARIABLE_SET"), None);
    }

    #[test]
    fn only_bytes_wholly_inside_the_block_are_overwritten() {
        let block = Some((100, 200));
        assert!(in_block(100, 100, block), "the whole block");
        assert!(in_block(150, 10, block));
        assert!(!in_block(99, 10, block), "starts before it");
        assert!(!in_block(195, 10, block), "runs past its end");
        assert!(!in_block(150, 10, None), "no block read");
    }
}
