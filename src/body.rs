//! The one response body type every listener in r8s uses, and its constructors.

use std::pin::Pin;
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use http_body_util::combinators::UnsyncBoxBody;
use tokio::sync::mpsc;

/// Errors carried by bodies (upstream I/O, mostly).
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;

/// A boxed response body: full, empty, streamed from a channel, or relayed.
pub type Body = UnsyncBoxBody<Bytes, BoxError>;

/// A body holding `bytes` in one frame.
pub fn full(bytes: impl Into<Bytes>) -> Body {
    http_body_util::Full::new(bytes.into())
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body holding `bytes` and then a newline, in two frames with an exact
/// length: a JSON answer as Go's encoder ends it, without copying the
/// (cached) bytes to append one byte.
pub fn full_line(bytes: Bytes) -> Body {
    Line {
        bytes: Some(bytes),
        newline: true,
    }
    .boxed_unsync()
}

struct Line {
    bytes: Option<Bytes>,
    newline: bool,
}

impl HttpBody for Line {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if let Some(b) = self.bytes.take().filter(|b| !b.is_empty()) {
            return Poll::Ready(Some(Ok(Frame::data(b))));
        }
        if std::mem::take(&mut self.newline) {
            return Poll::Ready(Some(Ok(Frame::data(Bytes::from_static(b"\n")))));
        }
        Poll::Ready(None)
    }

    fn is_end_stream(&self) -> bool {
        !self.newline
    }

    fn size_hint(&self) -> SizeHint {
        let len = self.bytes.as_ref().map_or(0, Bytes::len) + usize::from(self.newline);
        SizeHint::with_exact(len as u64)
    }
}

/// An empty body.
pub fn empty() -> Body {
    http_body_util::Empty::new()
        .map_err(|never| match never {})
        .boxed_unsync()
}

/// A body fed frame by frame through a bounded channel; it ends when the sender drops.
///
/// Each `Bytes` sent becomes one data frame, flushed to the client as it comes
/// (watch events, followed logs).
pub fn channel(capacity: usize) -> (mpsc::Sender<Bytes>, Body) {
    let (tx, rx) = mpsc::channel(capacity);
    (tx, ChannelBody { rx }.boxed_unsync())
}

struct ChannelBody {
    rx: mpsc::Receiver<Bytes>,
}

impl HttpBody for ChannelBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        self.rx
            .poll_recv(cx)
            .map(|opt| opt.map(|b| Ok(Frame::data(b))))
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
