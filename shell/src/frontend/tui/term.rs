//! The terminal: raw mode and bracketed paste on entry, restored on every way out (normal
//! exit, a panic on any thread, a forced exit on a second signal), after which nothing more is
//! drawn; an inline viewport at the bottom of the screen whose height follows the live region;
//! finished blocks are written where the live region began (so a reply stays where it
//! streamed) and scroll into the terminal's own scrollback as text does; each frame wrapped in
//! a synchronized update.

use std::collections::BTreeSet;
use std::io::{self, Stdout, Write};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, TryLockError};
use std::time::{Duration, Instant};

use crossterm::event::{DisableBracketedPaste, EnableBracketedPaste};
use crossterm::terminal::{self, BeginSynchronizedUpdate, EndSynchronizedUpdate};
use crossterm::{cursor, execute, queue};
use ratatui::backend::CrosstermBackend;
use ratatui::text::Line;
use ratatui::widgets::{Paragraph, Widget};
use ratatui::{Terminal, TerminalOptions, Viewport};

use super::blocks::{self, Block};
use super::card;
use super::live::live;
use super::theme::Theme;
use super::view::View;

static ACTIVE: AtomicBool = AtomicBool::new(false);

/// Held while a frame is written: [`restore`] waits for the frame in progress, so nothing is
/// drawn after the terminal was given back (over a panic's message, say).
static DRAWING: Mutex<()> = Mutex::new(());

/// How long [`restore`] waits for a frame in progress: a frame takes milliseconds; the thread
/// drawing may be the one restoring (a panic inside a frame), which must not wait for itself.
const FRAME_WAIT: Duration = Duration::from_millis(200);

/// The frame lock, unless it stays taken for [`FRAME_WAIT`]. A lock poisoned by a panic inside
/// a frame is taken all the same.
fn frame_lock(wait: Duration) -> Option<MutexGuard<'static, ()>> {
    let until = Instant::now() + wait;
    loop {
        match DRAWING.try_lock() {
            Ok(g) => return Some(g),
            Err(TryLockError::Poisoned(p)) => return Some(p.into_inner()),
            Err(TryLockError::WouldBlock) if Instant::now() < until => {
                std::thread::sleep(Duration::from_millis(1))
            }
            Err(TryLockError::WouldBlock) => return None,
        }
    }
}

/// Put the terminal back as it was: the real stderr on fd 2, raw mode off, paste mode off,
/// cursor shown. Safe to call from any thread, any number of times; does nothing when the TUI
/// never took the terminal. A frame another thread is drawing is finished first, and none is
/// drawn afterwards.
pub fn restore() {
    super::capture::give_back();
    let _frame = frame_lock(FRAME_WAIT);
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

/// Whether the terminal on stdin has hung up (its other side closed: a terminal window or a
/// multiplexer gone). Once it has, every read returns end of file at once, forever.
pub fn hung_up() -> bool {
    poll_hangup(0)
}

/// Block until the terminal on stdin hangs up; `false` if that cannot be watched. Asks for no
/// readiness at all, so a live terminal's keys never wake it: the kernel reports a hang-up
/// (and an error or a closed descriptor) whatever was asked.
pub fn wait_hangup() -> bool {
    poll_hangup(-1)
}

fn poll_hangup(timeout_ms: i32) -> bool {
    loop {
        let mut fd = libc::pollfd {
            fd: libc::STDIN_FILENO,
            events: 0,
            revents: 0,
        };
        // SAFETY: one valid pollfd on the stack, its count 1.
        let n = unsafe { libc::poll(&mut fd, 1, timeout_ms) };
        if n < 0 {
            if io::Error::last_os_error().kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return false;
        }
        return n > 0 && fd.revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0;
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
    /// The width the viewport was drawn at.
    cols: u16,
    /// The widest content drawn on each row of the viewport since it was made: what the
    /// terminal reflows when it is narrowed.
    drawn: Vec<u16>,
    /// The cursor within the viewport in the last frame.
    cursor: (u16, u16),
}

/// Clear the screen from row `top` down, one row at a time, and leave the cursor at the start
/// of `top`. Row by row, because a terminal may take a clear from the top-left corner for a
/// whole-screen clear and first scroll the screen into its scrollback (tmux's
/// `scroll-on-clear`), which would leave a copy of the live region there.
fn clear_from(top: u16) -> io::Result<()> {
    let (_, rows) = terminal::size()?;
    let mut out = io::stdout();
    for y in top..rows.max(top + 1) {
        queue!(
            out,
            cursor::MoveTo(0, y),
            terminal::Clear(terminal::ClearType::CurrentLine)
        )?;
    }
    queue!(out, cursor::MoveTo(0, top))?;
    out.flush()
}

/// The rows a row of `width` cells takes once a reflowing terminal is `cols` wide.
fn reflowed(width: u16, cols: u16) -> u16 {
    width.div_ceil(cols.max(1)).max(1)
}

/// Where the viewport's top row is after a resize to `cols`: the cursor is where the terminal
/// kept it (`cursor_y`), and the rows of the viewport above it took as many rows as the
/// terminal's reflow made of them. Never above the screen.
pub fn top_after_resize(drawn: &[u16], cursor: (u16, u16), cursor_y: u16, cols: u16) -> u16 {
    let above: u16 = drawn
        .iter()
        .take(cursor.1 as usize)
        .map(|&w| reflowed(w, cols))
        .sum();
    let within = cursor.0 / cols.max(1);
    cursor_y.saturating_sub(above + within)
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
            cols: terminal::size()?.0,
            drawn: Vec::new(),
            cursor: (0, 0),
        })
    }

    /// Give the viewport a new height: clear it, put the cursor at its top, start anew there.
    fn reheight(&mut self, height: u16) -> io::Result<()> {
        let area = self.term.get_frame().area();
        clear_from(area.top())?;
        self.term = inline(height)?;
        self.height = height;
        self.drawn.clear();
        Ok(())
    }

    /// After the terminal changed width: find where its reflow left the viewport, clear from
    /// there down, and start a viewport there at the new width.
    fn relocate(&mut self, cols: u16) -> io::Result<()> {
        let (_, y) = cursor::position()?;
        let top = top_after_resize(&self.drawn, self.cursor, y, cols);
        clear_from(top)?;
        self.term = inline(self.height)?;
        self.drawn.clear();
        self.cols = cols;
        Ok(())
    }

    /// Write finished rows where the live region begins, as a terminal prints text: the rows
    /// stay where they were drawn (a reply that streamed in the live region does not move when
    /// it finishes), the screen scrolls only by what no longer fits, and what scrolls off goes
    /// to the terminal's own scrollback. The viewport starts again under them, `height` rows
    /// tall. Returns the row the cursor is on: the one after the last written.
    fn commit(&mut self, rows: Vec<Line<'static>>, height: u16) -> io::Result<u16> {
        let top = self.term.get_frame().area().top();
        clear_from(top)?;
        let (_, screen) = terminal::size()?;
        let mut next = top;
        for chunk in rows.chunks(screen.max(1) as usize) {
            let lines = chunk.to_vec();
            let mut t = inline(lines.len() as u16)?;
            t.draw(|f| {
                let area = f.area();
                Paragraph::new(lines).render(area, f.buffer_mut());
            })?;
            let area = t.get_frame().area();
            // Onto the row after the chunk; a line feed on the last row scrolls the screen.
            let mut out = io::stdout();
            queue!(out, cursor::MoveTo(0, area.bottom().saturating_sub(1)))?;
            out.write_all(b"\n")?;
            out.flush()?;
            next = area.bottom().min(screen.saturating_sub(1));
        }
        queue!(io::stdout(), cursor::MoveTo(0, next))?;
        self.term = inline(height)?;
        self.height = height;
        self.drawn.clear();
        Ok(next)
    }

    /// Draw one frame of `view` at `now`; nothing once the terminal was given back (a panic on
    /// another thread restored it: the panic's message stays on the screen).
    pub fn draw(&mut self, view: &mut View, now: u64) -> io::Result<()> {
        let _frame = DRAWING.lock().unwrap_or_else(|p| p.into_inner());
        if !ACTIVE.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (cols, rows) = terminal::size()?;
        queue!(io::stdout(), BeginSynchronizedUpdate)?;
        if cols != self.cols {
            self.relocate(cols)?;
        }
        let finished = view.take_finished();
        let mut lines: Vec<Line<'static>> = finished
            .iter()
            .flat_map(|b: &Block| blocks::lines(b, cols as usize, self.theme))
            .collect();
        let l = live(view, now, cols as usize, rows as usize, self.theme);
        // A card too tall for the screen goes whole into the scrollback, once.
        for id in &l.spill {
            if self.spilled.insert(id.clone()) {
                if let Some(c) = view.approvals.iter().find(|c| &c.approval_id == id) {
                    lines.extend(card::lines(c, cols as usize, self.theme));
                }
            }
        }
        let want = (l.rows.len() as u16).clamp(1, rows.max(1));
        if !lines.is_empty() {
            self.commit(lines, want)?;
        } else if want != self.height || self.term.size()?.width != cols {
            self.reheight(want)?;
        }
        let cursor = l.cursor;
        self.cursor = cursor;
        if self.drawn.len() < l.rows.len() {
            self.drawn.resize(l.rows.len(), 0);
        }
        for (d, row) in self.drawn.iter_mut().zip(&l.rows) {
            *d = (*d).max(row.width() as u16);
        }
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
        let _frame = DRAWING.lock().unwrap_or_else(|p| p.into_inner());
        if !ACTIVE.load(Ordering::SeqCst) {
            return Ok(());
        }
        let (cols, _) = terminal::size()?;
        let finished = view.take_finished();
        let lines: Vec<Line<'static>> = finished
            .iter()
            .flat_map(|b| blocks::lines(b, cols as usize, self.theme))
            .collect();
        let top = if lines.is_empty() {
            self.term.get_frame().area().top()
        } else {
            self.commit(lines, 1)?
        };
        clear_from(top)?;
        self.term.show_cursor()?;
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::top_after_resize;

    #[test]
    fn the_viewport_top_after_a_resize_counts_the_reflowed_rows_above_the_cursor() {
        // Rows: a 60-cell reply row, a 100-cell rule, the prompt (cursor at column 5), status.
        let drawn = [60, 100, 7, 100];
        // Narrowed to 30: 2 + 4 rows above the prompt; the cursor stayed on row 20.
        assert_eq!(top_after_resize(&drawn, (5, 2), 20, 30), 14);
        // Widened: nothing reflows, every row is still one row.
        assert_eq!(top_after_resize(&drawn, (5, 2), 20, 200), 18);
        // A cursor pushed onto a second row of the prompt by the reflow.
        assert_eq!(top_after_resize(&[10, 40], (45, 1), 20, 30), 18);
        // Never above the screen.
        assert_eq!(top_after_resize(&drawn, (5, 2), 3, 10), 0);
    }
}
