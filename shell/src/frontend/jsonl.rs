//! The `--stdio` event writer, [`JsonlSink`]: one JSON line per event, `session_id` first.
//!
//! Invariants: events are written in the order the core emitted them; [`JsonlSink`] buffers and
//! writes the whole buffer in one `write_all` at each quiet point ([`Sink::flush`]), so a burst
//! of tokens costs one syscall, and nothing is held back once the core goes quiet. A write error
//! (the client closed stdout: EPIPE) is remembered, later writes are dropped, and
//! [`Sink::client_gone`] says so: the runtime treats it as end of input (a client that cannot
//! read the answers is gone; openmax does not keep running turns blind).

use std::io::Write;

use openmax_core::wire::{Event, Line};

use crate::run::Sink;

/// The `--stdio` event writer.
pub struct JsonlSink<W: Write> {
    session_id: String,
    buf: Vec<u8>,
    out: W,
    broken: bool,
}

impl<W: Write> JsonlSink<W> {
    pub fn new(session_id: &str, out: W) -> JsonlSink<W> {
        JsonlSink {
            session_id: session_id.to_string(),
            buf: Vec::with_capacity(8 * 1024),
            out,
            broken: false,
        }
    }

    /// Write a raw line (the handshake) and flush it at once.
    pub fn raw_line(&mut self, json: &str) {
        self.buf.extend_from_slice(json.as_bytes());
        self.buf.push(b'\n');
        self.flush();
    }

    /// The writer (tests).
    pub fn into_inner(self) -> W {
        self.out
    }
}

impl<W: Write> Sink for JsonlSink<W> {
    fn event(&mut self, event: Event) {
        let line = Line {
            session_id: self.session_id.clone(),
            event,
        };
        line.write_json(&mut self.buf);
        self.buf.push(b'\n');
    }

    fn buffered_bytes(&self) -> usize {
        self.buf.len()
    }

    fn flush(&mut self) {
        if self.buf.is_empty() {
            return;
        }
        if !self.broken {
            let r = self.out.write_all(&self.buf).and_then(|_| self.out.flush());
            self.broken = r.is_err();
        }
        self.buf.clear();
        if self.buf.capacity() > 1 << 20 {
            self.buf.shrink_to(8 * 1024);
        }
    }

    fn client_gone(&self) -> bool {
        self.broken
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_carry_session_id_first_and_flush_at_quiet_points() {
        let mut s = JsonlSink::new("s1", Vec::new());
        s.event(Event::Token { text: "hi".into() });
        s.event(Event::ProtocolError {
            message: "bad".into(),
        });
        assert!(s.out.is_empty());
        s.flush();
        assert!(!s.client_gone());
        let out = String::from_utf8(s.into_inner()).unwrap();
        assert_eq!(
            out,
            "{\"session_id\":\"s1\",\"type\":\"token\",\"text\":\"hi\"}\n\
             {\"type\":\"protocol_error\",\"message\":\"bad\"}\n"
        );
    }

    struct Closed;
    impl Write for Closed {
        fn write(&mut self, _: &[u8]) -> std::io::Result<usize> {
            Err(std::io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_closed_stdout_marks_the_client_gone() {
        let mut s = JsonlSink::new("s1", Closed);
        s.event(Event::Token { text: "hi".into() });
        assert!(!s.client_gone(), "nothing written yet");
        s.flush();
        assert!(s.client_gone());
    }
}
