//! SIGTERM, SIGHUP and SIGINT while the UI runs. The first one is told to the UI thread, which
//! answers it as a person stopping the session would: `cancel` if a turn runs, then `quit` (see
//! [`super::view::View::signal`]); the session ends through the core as on the wire, its file
//! settled, and the terminal is restored on the way out. A second signal exits at once with 130,
//! restoring the terminal first and killing the MCP servers' and running tools' process groups
//! (no guard's drop runs on that way out). In raw mode Ctrl-C is a key, so SIGINT only comes from `kill`.

use std::io;

/// The signals the UI answers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Signal {
    Term,
    Hup,
    Int,
}

impl Signal {
    pub fn name(self) -> &'static str {
        match self {
            Signal::Term => "SIGTERM",
            Signal::Hup => "SIGHUP",
            Signal::Int => "SIGINT",
        }
    }
}

/// Install the handlers now (so a signal from here on is never the default death) and answer
/// them on `rt`: the first goes to `tell`, a second restores the terminal and exits 130 (its
/// tracked process groups killed).
#[cfg(unix)]
pub fn install(
    rt: &tokio::runtime::Runtime,
    tell: impl Fn(Signal) + Send + 'static,
) -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let _guard = rt.enter();
    let mut term = signal(SignalKind::terminate())?;
    let mut hup = signal(SignalKind::hangup())?;
    let mut int = signal(SignalKind::interrupt())?;
    rt.spawn(async move {
        let mut seen = 0u32;
        loop {
            let sig = tokio::select! {
                _ = term.recv() => Signal::Term,
                _ = hup.recv() => Signal::Hup,
                _ = int.recv() => Signal::Int,
            };
            seen += 1;
            if seen > 1 {
                super::restore();
                crate::sandbox::reaper::exit_now(130);
            }
            tell(sig);
        }
    });
    Ok(())
}

#[cfg(not(unix))]
pub fn install(
    _rt: &tokio::runtime::Runtime,
    _tell: impl Fn(Signal) + Send + 'static,
) -> io::Result<()> {
    Ok(())
}
