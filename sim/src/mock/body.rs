//! The streaming response body: frames fed by a producer task over a channel.
//!
//! Invariants: the body ends cleanly (hyper writes the terminating chunk) exactly when the
//! producer drops its sender; an [`Chunk::Abort`] makes the body fail, which makes hyper cut
//! the connection with no terminating chunk. Before failing, the body yields once (waking
//! itself), so hyper flushes the data already handed over and the client sees every item
//! before the cut.

use std::io;
use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use hyper::body::{Body, Frame};
use tokio::sync::mpsc;

/// What the producer sends.
#[derive(Debug)]
pub(crate) enum Chunk {
    Data(Bytes),
    Abort,
}

/// A body whose frames come from a [`Chunk`] channel; `Full` for fixed bodies.
pub(crate) enum MockBody {
    Channel {
        rx: mpsc::Receiver<Chunk>,
        abort_armed: bool,
    },
    Full(Option<Bytes>),
}

impl MockBody {
    pub(crate) fn channel(rx: mpsc::Receiver<Chunk>) -> MockBody {
        MockBody::Channel {
            rx,
            abort_armed: false,
        }
    }

    pub(crate) fn full(bytes: impl Into<Bytes>) -> MockBody {
        MockBody::Full(Some(bytes.into()))
    }
}

impl Body for MockBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, io::Error>>> {
        match self.get_mut() {
            MockBody::Full(bytes) => Poll::Ready(bytes.take().map(|b| Ok(Frame::data(b)))),
            MockBody::Channel { rx, abort_armed } => {
                if *abort_armed {
                    return Poll::Ready(Some(Err(io::Error::new(
                        io::ErrorKind::ConnectionAborted,
                        "mock: stream aborted mid-body",
                    ))));
                }
                match rx.poll_recv(cx) {
                    Poll::Ready(Some(Chunk::Data(bytes))) => {
                        Poll::Ready(Some(Ok(Frame::data(bytes))))
                    }
                    Poll::Ready(Some(Chunk::Abort)) => {
                        // Let hyper flush what it has before the failure cuts the connection.
                        *abort_armed = true;
                        cx.waker().wake_by_ref();
                        Poll::Pending
                    }
                    Poll::Ready(None) => Poll::Ready(None),
                    Poll::Pending => Poll::Pending,
                }
            }
        }
    }

    fn is_end_stream(&self) -> bool {
        match self {
            MockBody::Full(bytes) => bytes.is_none(),
            MockBody::Channel { .. } => false,
        }
    }
}
