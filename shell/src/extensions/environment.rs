//! Where the model is working: the "# Environment" section of the system prompt (the
//! project's path, the working directory inside it, the operating system, today's date).
//!
//! Invariants:
//! - The section is built from values given ([`Environment::section`] is pure); the clock and
//!   `/etc/os-release` are read only by [`today`] and [`os_description`], which the shell calls
//!   at each freeze (session start and `reload`). The date is therefore frozen with the rest
//!   of the prompt and changes only on a refreeze; the core never reads a clock.

use std::path::Path;

/// What the section says.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Environment {
    /// The project root, absolute.
    pub project: String,
    /// The working directory relative to the project root (`None` when it is the root).
    pub working_dir: Option<String>,
    /// The operating system, as [`os_description`] gives it.
    pub os: String,
    /// Today's date, `YYYY-MM-DD` (local time), as [`today`] gives it.
    pub today: String,
}

impl Environment {
    /// The environment of a session in `project` started in `cwd` (a directory inside it;
    /// anything else counts as the root).
    pub fn new(project: &Path, cwd: &Path, os: String, today: String) -> Environment {
        let working_dir = cwd
            .strip_prefix(project)
            .ok()
            .filter(|rel| !rel.as_os_str().is_empty())
            .map(|rel| rel.display().to_string());
        Environment {
            project: project.display().to_string(),
            working_dir,
            os,
            today,
        }
    }

    /// The prompt section.
    pub fn section(&self) -> String {
        let mut s = format!(
            "# Environment\n\n- Project root: {} (tool paths are relative to it)\n",
            self.project
        );
        if let Some(dir) = &self.working_dir {
            s.push_str(&format!(
                "- Working directory: {dir} (inside the project; the session was started there)\n"
            ));
        }
        s.push_str(&format!(
            "- Operating system: {}\n- Today's date: {}",
            self.os, self.today
        ));
        s
    }
}

/// Today's date in local time, `YYYY-MM-DD`, read from the system clock now.
pub fn today() -> String {
    // SAFETY: `time` with a null pointer only returns the time; `localtime_r` writes into the
    // zeroed `tm` we own and returns null on failure, which is checked.
    unsafe {
        let now = libc::time(std::ptr::null_mut());
        let mut tm: libc::tm = std::mem::zeroed();
        if libc::localtime_r(&now, &mut tm).is_null() {
            return civil_date_utc(now as i64);
        }
        format!(
            "{:04}-{:02}-{:02}",
            tm.tm_year + 1900,
            tm.tm_mon + 1,
            tm.tm_mday
        )
    }
}

/// A Unix time's date in UTC (the fallback when the local time zone cannot be read).
fn civil_date_utc(unix_s: i64) -> String {
    crate::utc::ymd(unix_s)
}

/// The operating system: its family and architecture, and on Linux the distribution's
/// `PRETTY_NAME` from `/etc/os-release` when there is one (`Linux (Debian GNU/Linux 12, x86_64)`).
pub fn os_description() -> String {
    let family = match std::env::consts::OS {
        "linux" => "Linux",
        "macos" => "macOS",
        "windows" => "Windows",
        other => other,
    };
    let pretty = std::fs::read_to_string("/etc/os-release")
        .ok()
        .and_then(|t| pretty_name(&t));
    match pretty {
        Some(p) => format!("{family} ({p}, {})", std::env::consts::ARCH),
        None => format!("{family} ({})", std::env::consts::ARCH),
    }
}

fn pretty_name(os_release: &str) -> Option<String> {
    os_release.lines().find_map(|l| {
        let v = l.strip_prefix("PRETTY_NAME=")?;
        let v = v.trim().trim_matches('"').trim_matches('\'').trim();
        (!v.is_empty()).then(|| v.to_string())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_section_names_project_working_dir_os_and_date() {
        let e = Environment::new(
            Path::new("/work/p"),
            Path::new("/work/p/crates/a"),
            "Linux (x86_64)".into(),
            "2031-02-03".into(),
        );
        let s = e.section();
        assert!(s.starts_with("# Environment\n"), "{s}");
        assert!(s.contains("Project root: /work/p"), "{s}");
        assert!(s.contains("Working directory: crates/a"), "{s}");
        assert!(s.contains("Operating system: Linux (x86_64)"), "{s}");
        assert!(s.ends_with("Today's date: 2031-02-03"), "{s}");
        let root = Environment::new(
            Path::new("/work/p"),
            Path::new("/work/p"),
            "x".into(),
            "d".into(),
        );
        assert_eq!(root.working_dir, None);
        assert!(!root.section().contains("Working directory"));
    }

    #[test]
    fn dates_and_os_names() {
        assert_eq!(civil_date_utc(0), "1970-01-01");
        assert_eq!(civil_date_utc(951_782_400), "2000-02-29");
        assert_eq!(civil_date_utc(1_735_689_599), "2024-12-31");
        let t = today();
        assert!(
            t.len() == 10 && t.as_bytes()[4] == b'-' && t.as_bytes()[7] == b'-',
            "{t}"
        );
        assert_eq!(
            pretty_name("NAME=\"Debian\"\nPRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\n"),
            Some("Debian GNU/Linux 12 (bookworm)".into())
        );
        assert_eq!(pretty_name("NAME=x\n"), None);
        assert!(os_description().contains(std::env::consts::ARCH));
    }
}
