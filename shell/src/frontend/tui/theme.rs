//! The styles of every kind of text the TUI draws, in one place. With `NO_COLOR` set (any
//! non-empty value, as no-color.org says) no colour is used, only bold, dim, italic and
//! reverse, so nothing is lost without colour.

use ratatui::style::{Color, Modifier, Style};

/// Colour or not.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Theme {
    pub color: bool,
}

impl Theme {
    /// The theme the environment asks for.
    pub fn from_env() -> Theme {
        let no_color = std::env::var_os("NO_COLOR").is_some_and(|v| !v.is_empty());
        Theme { color: !no_color }
    }

    fn fg(&self, c: Color) -> Style {
        if self.color {
            Style::default().fg(c)
        } else {
            Style::default()
        }
    }

    pub fn plain(&self) -> Style {
        Style::default()
    }
    pub fn dim(&self) -> Style {
        Style::default().add_modifier(Modifier::DIM)
    }
    pub fn bold(&self) -> Style {
        Style::default().add_modifier(Modifier::BOLD)
    }
    pub fn heading(&self) -> Style {
        self.fg(Color::Cyan).add_modifier(Modifier::BOLD)
    }
    pub fn code(&self) -> Style {
        self.fg(Color::Yellow)
    }
    pub fn user(&self) -> Style {
        self.fg(Color::Blue).add_modifier(Modifier::BOLD)
    }
    pub fn tool(&self) -> Style {
        self.fg(Color::Magenta).add_modifier(Modifier::BOLD)
    }
    pub fn ok(&self) -> Style {
        self.fg(Color::Green)
    }
    pub fn added(&self) -> Style {
        self.fg(Color::Green)
    }
    pub fn removed(&self) -> Style {
        self.fg(Color::Red)
    }
    pub fn hunk(&self) -> Style {
        self.fg(Color::Cyan)
    }
    pub fn warn(&self) -> Style {
        self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
    }
    pub fn error(&self) -> Style {
        self.fg(Color::Red).add_modifier(Modifier::BOLD)
    }
    /// The approval card's frame: it must stand out, with or without colour.
    pub fn card(&self) -> Style {
        if self.color {
            self.fg(Color::Yellow).add_modifier(Modifier::BOLD)
        } else {
            Style::default().add_modifier(Modifier::REVERSED | Modifier::BOLD)
        }
    }
    pub fn status(&self) -> Style {
        Style::default().add_modifier(Modifier::REVERSED)
    }
}
