//! What a prompt typed in the terminal UI brings along before it goes to the core: images
//! named by `@path` (a PNG, JPEG, GIF or WebP file, relative to the project or absolute),
//! MCP resources named by `@server:uri` (their text appended, fenced by the URI), and the
//! expansion of an MCP prompt command `/mcp__<server>__<prompt> [arg=value | value]…`.
//!
//! Invariants: the typed text stays as typed (a mention names what it brought); a prompt with
//! nothing attached goes as a plain `user` command; a mention that cannot be resolved, an
//! image over the cap or an unknown prompt command stops the prompt with an error for the
//! user (nothing half-attached is sent). MCP reads run on the session's runtime and are
//! bounded by the server's `tool_timeout_s`.

use std::path::{Path, PathBuf};
use std::time::Duration;

use openmax_core::conversation::Image;
use openmax_core::machine::Input;
use openmax_core::wire::Command;

use crate::run::backend::McpView;

/// Resolves a typed prompt into the core's input.
#[derive(Clone)]
pub struct Attach {
    pub project: PathBuf,
    pub mcp: McpView,
    pub runtime: tokio::runtime::Handle,
}

/// How long the UI waits for an MCP read or prompt at most (the server's own timeout applies
/// first).
const WAIT: Duration = Duration::from_secs(3600);

impl Attach {
    fn wait<T: Send + 'static>(
        &self,
        fut: impl std::future::Future<Output = Result<T, String>> + Send + 'static,
    ) -> Result<T, String> {
        let (tx, rx) = std::sync::mpsc::channel();
        self.runtime.spawn(async move {
            let _ = tx.send(fut.await);
        });
        rx.recv_timeout(WAIT)
            .map_err(|_| "the MCP server did not answer".to_string())?
    }

    /// The input for `text` as typed.
    pub fn prompt(&self, text: &str) -> Result<Input, String> {
        let trimmed = text.trim_start();
        if let Some(cmd) = trimmed.strip_prefix('/') {
            let mut words = cmd.split_whitespace();
            let name = words.next().unwrap_or("").to_string();
            let rest: Vec<String> = words.map(str::to_string).collect();
            let fut = self.mcp.with(|m| m.expand_prompt(&name, &rest))?;
            let (text, images) = self.wait(fut)?;
            return Ok(input(text, images));
        }
        let mut images: Vec<Image> = Vec::new();
        let mut appended = String::new();
        for word in text.split_whitespace() {
            let Some(target) = word.strip_prefix('@') else {
                continue;
            };
            let target = target.trim_end_matches([',', ';', '.', ')', '?', '!']);
            if target.is_empty() {
                continue;
            }
            if let Some(path) = self.image_path(target) {
                images.push(crate::images::from_file(target, &path)?);
                continue;
            }
            if let Some((server, uri)) = target.split_once(':') {
                let known = self
                    .mcp
                    .with(|m| m.servers.iter().any(|s| s.def.name == server));
                if known {
                    let fut = self.mcp.with(|m| m.mention(server, uri));
                    let (body, more) = self.wait(fut)?;
                    appended.push_str("\n\n");
                    appended.push_str(&body);
                    images.extend(more);
                }
            }
        }
        Ok(input(format!("{text}{appended}"), images))
    }

    /// `target` as an image file, relative to the project or absolute.
    fn image_path(&self, target: &str) -> Option<PathBuf> {
        let p = Path::new(target);
        let full = if p.is_absolute() {
            p.to_path_buf()
        } else {
            self.project.join(p)
        };
        crate::images::is_image_file(&full).then_some(full)
    }
}

fn input(text: String, images: Vec<Image>) -> Input {
    if images.is_empty() {
        Input::Line(Command::User { text }.to_line())
    } else {
        Input::Prompt { text, images }
    }
}

/// A pasted text that is the path of an image file (as a terminal pastes a dropped file:
/// absolute, maybe quoted, maybe a `file://` URL, spaces maybe escaped): that path.
pub fn pasted_image(text: &str) -> Option<String> {
    let t = text.trim();
    let t = t
        .strip_prefix('\'')
        .and_then(|s| s.strip_suffix('\''))
        .or_else(|| t.strip_prefix('"').and_then(|s| s.strip_suffix('"')))
        .unwrap_or(t);
    let t = t.strip_prefix("file://").unwrap_or(t);
    let path = t.replace("\\ ", " ");
    if path.contains('\n') || !Path::new(&path).is_absolute() || path.contains(' ') {
        return None;
    }
    crate::images::is_image_file(Path::new(&path)).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pasted_image_path_is_recognised_in_the_forms_terminals_paste() {
        let dir = crate::scratch::path("paste");
        std::fs::create_dir_all(&dir).unwrap();
        let png = dir.join("shot.png");
        std::fs::write(&png, crate::images::tiny_png(2, 2)).unwrap();
        let p = png.display().to_string();
        assert_eq!(pasted_image(&p).as_deref(), Some(p.as_str()));
        assert_eq!(
            pasted_image(&format!("'{p}'\n")).as_deref(),
            Some(p.as_str())
        );
        assert_eq!(
            pasted_image(&format!("file://{p}")).as_deref(),
            Some(p.as_str())
        );
        assert_eq!(pasted_image("shot.png"), None, "relative: just text");
        assert_eq!(pasted_image(&format!("{p}\nmore")), None);
        std::fs::write(dir.join("a.txt"), "text").unwrap();
        assert_eq!(pasted_image(&dir.join("a.txt").display().to_string()), None);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
