//! The request body sent upstream: the client's body, streamed, and still
//! retryable on another server as long as no byte of it was read.

use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};

use bytes::Bytes;
use http_body::{Body as HttpBody, Frame, SizeHint};
use hyper::body::Incoming;

/// A client request body shared between failover attempts.
///
/// The first attempt whose connection is established takes the body and
/// streams it; an attempt that failed to connect never polled it, so the next
/// server can take it instead. Once taken it cannot be replayed, which is why
/// only connection errors fail over.
#[derive(Clone)]
pub struct Shared {
    slot: Arc<Mutex<Option<Incoming>>>,
    /// A body r8s wrote itself (a review): every attempt sends all of it.
    full: Option<Bytes>,
    hint: SizeHint,
    empty: bool,
}

impl Shared {
    /// Wraps a client's request body (`None`: an empty body).
    pub fn new(body: Option<Incoming>) -> Self {
        let hint = body
            .as_ref()
            .map(|b| b.size_hint())
            .unwrap_or_else(|| SizeHint::with_exact(0));
        let empty = body.as_ref().is_none_or(|b| b.is_end_stream());
        Shared {
            slot: Arc::new(Mutex::new(body)),
            full: None,
            hint,
            empty,
        }
    }

    /// A body r8s built itself; replayable, so any failed attempt may retry it.
    pub fn full(bytes: Bytes) -> Self {
        Shared {
            slot: Arc::new(Mutex::new(None)),
            hint: SizeHint::with_exact(bytes.len() as u64),
            empty: bytes.is_empty(),
            full: Some(bytes),
        }
    }

    /// Whether no attempt has read the body yet (so another may send it).
    pub fn untouched(&self) -> bool {
        self.empty || self.full.is_some() || self.slot.lock().map(|s| s.is_some()).unwrap_or(false)
    }

    /// A body for one attempt.
    pub fn attempt(&self) -> ReqBody {
        ReqBody {
            full: self.full.clone(),
            shared: self.clone(),
            taken: None,
        }
    }
}

/// One attempt's view of a [`Shared`] body.
pub struct ReqBody {
    shared: Shared,
    taken: Option<Incoming>,
    /// What is left to send of a [`Shared::full`] body.
    full: Option<Bytes>,
}

impl HttpBody for ReqBody {
    type Data = Bytes;
    type Error = hyper::Error;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, hyper::Error>>> {
        if self.shared.empty {
            return Poll::Ready(None);
        }
        if self.shared.full.is_some() {
            return Poll::Ready(self.full.take().map(|b| Ok(Frame::data(b))));
        }
        if self.taken.is_none() {
            let body = self.shared.slot.lock().ok().and_then(|mut s| s.take());
            match body {
                Some(b) => self.taken = Some(b),
                None => return Poll::Ready(None),
            }
        }
        let body = self.taken.as_mut().expect("taken above");
        Pin::new(body).poll_frame(cx)
    }

    fn is_end_stream(&self) -> bool {
        self.shared.empty || (self.shared.full.is_some() && self.full.is_none())
    }

    fn size_hint(&self) -> SizeHint {
        self.shared.hint
    }
}
