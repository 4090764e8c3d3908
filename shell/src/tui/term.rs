//! The terminal: raw mode and bracketed paste on entry, restored on every way out (normal
//! exit, a panic, a forced exit on a second signal); an inline viewport at the bottom of the
//! screen whose height follows the live region, with finished blocks inserted above it into
//! the terminal's own scrollback; each frame wrapped in a synchronized update.

use std::collections::BTreeSet;
use std::io::{self, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{self, BeginSynchronizedUpdate, EndSynchronizedUpdate};
use crossterm::{cursor, execute, queue};
use ratatui::backend::CrosstermBackend;
use ratatui::layout::Rect;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::blocks::{self, Block};
use super::card;
use super::live::live;
use super::theme::Theme;
use super::view::View;

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Put the terminal back as it was: raw mode off, paste mode off, cursor shown. Safe to call
/// from any thread, any number of times; does nothing when the TUI never took the terminal.
pub fn restore() {
    if ACTIVE.swap(false, Ordering::SeqCst) {
        let mut out = io::stdout();
        let _ = execute!(
            out,
            EndSynchronizedUpdate,
            DisableBracketedPaste,
            cursor::Show
        );
        let _ = terminal::disable_raw_mode();
        let _ = out.flush();
    }
}

/// Take the terminal; a panic anywhere restores it before the panic message is printed.
pub fn enter() -> io::Result<()> {
    terminal::enable_raw_mode()?;
    ACTIVE.store(true, Ordering::SeqCst);
    execute!(io::stdout(), EnableBracketedPaste)?;
    let prev = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        restore();
        prev(info);
    }));
    Ok(())
}

/// The drawn screen.
pub struct Screen {
    term: Terminal<CrosstermBackend<Stdout>>,
    height: u16,
    theme: Theme,
    /// Frames drawn (for the benchmark's figures).
    pub frames: u64,
    /// Approval cards already printed whole into the scrollback.
    spilled: BTreeSet<String>,
}

fn inline(height: u16) -> io::Result<Terminal<CrosstermBackend<Stdout>>> {
    Terminal::with_options(
        CrosstermBackend::new(io::stdout()),
        TerminalOptions {
            viewport: Viewport::Inline(height.max(1)),
        },
    )
}

impl Screen {
    pub fn new(theme: Theme) -> io::Result<Screen> {
        Ok(Screen {
            term: inline(1)?,
            height: 1,
            theme,
            frames: 0,
            spilled: BTreeSet::new(),
        })
    }

    /// Give the viewport a new height: clear it, put the cursor at its top, start anew there.
    fn reheight(&mut self, height: u16) -> io::Result<()> {
        let area = self.term.get_frame().area();
        self.term.clear()?;
        self.term.set_cursor_position((0, area.top()))?;
        self.term = inline(height)?;
        self.height = height;
        Ok(())
    }

    fn insert(&mut self, rows: Vec<Line<'static>>) -> io::Result<()> {
        for chunk in rows.chunks(500) {
            let lines = chunk.to_vec();
            self.term
                .insert_before(lines.len() as u16, |buf: &mut ratatui::buffer::Buffer| {
                    Paragraph::new(lines).render(buf.area, buf);
                })?;
        }
        Ok(())
    }

    /// Draw one frame of `view` at `now`.
    pub fn draw(&mut self, view: &mut View, now: u64) -> io::Result<()> {
        let (cols, rows) = terminal::size()?;
        queue!(io::stdout(), BeginSynchronizedUpdate)?;
        let finished = view.take_finished();
        if !finished.is_empty() {
            let lines: Vec<Line<'static>> = finished
                .iter()
                .flat_map(|b: &Block| blocks::lines(b, cols as usize, self.theme))
                .collect();
            self.insert(lines)?;
        }
        let l = live(view, now, cols as usize, rows as usize, self.theme);
        // A card too tall for the screen goes whole into the scrollback, once.
        let mut spilled = Vec::new();
        for id in &l.spill {
            if self.spilled.insert(id.clone()) {
                if let Some(c) = view.approvals.iter().find(|c| &c.approval_id == id) {
                    spilled.extend(card::lines(c, cols as usize, self.theme));
                }
            }
        }
        if !spilled.is_empty() {
            self.insert(spilled)?;
        }
        let want = (l.rows.len() as u16).clamp(1, rows.max(1));
        if want != self.height || self.term.size()?.width != cols {
            self.reheight(want)?;
        }
        let cursor = l.cursor;
        self.term.draw(|f| {
            let area = f.area();
            Paragraph::new(l.rows).render(area, f.buffer_mut());
            f.set_cursor_position((area.x + cursor.0, area.y + cursor.1));
        })?;
        execute!(io::stdout(), EndSynchronizedUpdate)?;
        self.frames += 1;
        Ok(())
    }

    /// Leave the screen for the shell: the live region is cleared and the cursor put where it
    /// began, under the scrollback.
    pub fn leave(&mut self, view: &mut View) -> io::Result<()> {
        let (cols, _) = terminal::size()?;
        let finished = view.take_finished();
        let lines: Vec<Line<'static>> = finished
            .iter()
            .flat_map(|b| blocks::lines(b, cols as usize, self.theme))
            .collect();
        self.insert(lines)?;
        let area: Rect = self.term.get_frame().area();
        self.term.clear()?;
        self.term.set_cursor_position((0, area.top()))?;
        self.term.show_cursor()?;
        Ok(())
    }
}
