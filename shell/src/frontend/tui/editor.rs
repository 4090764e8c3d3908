//! The prompt being typed: text with a cursor (a char index), multi-line, and the history of
//! this project's earlier prompts walked with Up and Down.

/// The prompt editor.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Editor {
    text: String,
    /// Cursor as a char index into `text`.
    cursor: usize,
    history: Vec<String>,
    /// Where Up/Down stands in `history` (`None`: editing a new prompt).
    walk: Option<usize>,
    /// The new prompt put aside while walking the history.
    draft: String,
}

impl Editor {
    /// An empty editor over earlier prompts (oldest first).
    pub fn new(history: Vec<String>) -> Editor {
        Editor {
            history,
            ..Editor::default()
        }
    }

    pub fn text(&self) -> &str {
        &self.text
    }

    pub fn cursor(&self) -> usize {
        self.cursor
    }

    pub fn is_empty(&self) -> bool {
        self.text.is_empty()
    }

    #[cfg(test)]
    pub fn history(&self) -> &[String] {
        &self.history
    }

    fn byte(&self, at: usize) -> usize {
        self.text
            .char_indices()
            .nth(at)
            .map(|(b, _)| b)
            .unwrap_or(self.text.len())
    }

    fn len(&self) -> usize {
        self.text.chars().count()
    }

    /// Insert text at the cursor (a typed character, a newline, a paste). Carriage returns
    /// from a paste become newlines.
    pub fn insert(&mut self, s: &str) {
        let s = s.replace("\r\n", "\n").replace('\r', "\n");
        let b = self.byte(self.cursor);
        self.text.insert_str(b, &s);
        self.cursor += s.chars().count();
        self.walk = None;
    }

    pub fn backspace(&mut self) {
        if self.cursor > 0 {
            let b = self.byte(self.cursor - 1);
            self.text.remove(b);
            self.cursor -= 1;
        }
    }

    pub fn delete(&mut self) {
        if self.cursor < self.len() {
            let b = self.byte(self.cursor);
            self.text.remove(b);
        }
    }

    pub fn left(&mut self) {
        self.cursor = self.cursor.saturating_sub(1);
    }

    pub fn right(&mut self) {
        self.cursor = (self.cursor + 1).min(self.len());
    }

    pub fn home(&mut self) {
        self.cursor = 0;
    }

    pub fn end(&mut self) {
        self.cursor = self.len();
    }

    /// Ctrl-U: clear the prompt.
    pub fn clear(&mut self) {
        self.text.clear();
        self.cursor = 0;
        self.walk = None;
    }

    /// Take the prompt for submission; it joins the history (not twice in a row).
    pub fn submit(&mut self) -> String {
        let text = std::mem::take(&mut self.text);
        self.cursor = 0;
        self.walk = None;
        if !text.trim().is_empty() && self.history.last() != Some(&text) {
            self.history.push(text.clone());
        }
        text
    }

    /// Up: the previous prompt of the history.
    pub fn up(&mut self) {
        let at = match self.walk {
            None if self.history.is_empty() => return,
            None => {
                self.draft = self.text.clone();
                self.history.len() - 1
            }
            Some(0) => 0,
            Some(i) => i - 1,
        };
        self.walk = Some(at);
        self.text = self.history[at].clone();
        self.cursor = self.len();
    }

    /// Down: the next prompt, then back to the draft.
    pub fn down(&mut self) {
        match self.walk {
            None => {}
            Some(i) if i + 1 < self.history.len() => {
                self.walk = Some(i + 1);
                self.text = self.history[i + 1].clone();
            }
            Some(_) => {
                self.walk = None;
                self.text = std::mem::take(&mut self.draft);
            }
        }
        self.cursor = self.len();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn editing_and_history() {
        let mut e = Editor::new(vec!["first".into(), "second".into()]);
        e.insert("héllo");
        e.left();
        e.backspace();
        assert_eq!(e.text(), "hélo");
        e.home();
        e.delete();
        assert_eq!(e.text(), "élo");
        e.end();
        e.up();
        assert_eq!(e.text(), "second");
        e.up();
        e.up();
        assert_eq!(e.text(), "first");
        e.down();
        assert_eq!(e.text(), "second");
        e.down();
        assert_eq!(e.text(), "élo");
        assert_eq!(e.submit(), "élo");
        assert!(e.is_empty());
        assert_eq!(e.history().last().map(String::as_str), Some("élo"));
        e.insert("a\r\nb\rc");
        assert_eq!(e.text(), "a\nb\nc");
    }
}
