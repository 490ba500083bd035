//! JSON lists streamed from pre-serialized items.
//!
//! A list response is the envelope head, then the items' stored bytes joined
//! by commas, then `]}`; it is written in chunks of about [`CHUNK`] bytes
//! straight from the cache version it reads, so an in-flight list of any size
//! costs one chunk of memory, not a copy of the whole list.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::{Bytes, BytesMut};
use http_body::{Body as HttpBody, Frame, SizeHint};

use crate::body::BoxError;
use crate::cache::object::CachedObject;

/// Target size of one streamed chunk.
pub const CHUNK: usize = 64 * 1024;

/// A list response: envelope head (through `"items":[`) and its items.
pub struct ListBody {
    head: Option<Bytes>,
    items: std::vec::IntoIter<Arc<CachedObject>>,
    first: bool,
    done: bool,
}

impl ListBody {
    /// A list of `items` after `head`.
    pub fn new(head: Bytes, items: Vec<Arc<CachedObject>>) -> Self {
        ListBody {
            head: Some(head),
            items: items.into_iter(),
            first: true,
            done: false,
        }
    }

    /// The next chunk, or `None` at the end.
    pub fn next_chunk(&mut self) -> Option<Bytes> {
        if self.done {
            return None;
        }
        let mut out = BytesMut::with_capacity(CHUNK + 4096);
        if let Some(h) = self.head.take() {
            out.extend_from_slice(&h);
        }
        while out.len() < CHUNK {
            match self.items.next() {
                Some(o) => {
                    if !self.first {
                        out.extend_from_slice(b",");
                    }
                    self.first = false;
                    o.write_item(&mut out);
                }
                None => {
                    out.extend_from_slice(b"]}");
                    self.done = true;
                    break;
                }
            }
        }
        Some(out.freeze())
    }

    /// The whole list in one buffer (the slow paths: pretty-printing, gzip).
    pub fn collect(mut self) -> Bytes {
        let mut all = BytesMut::new();
        while let Some(c) = self.next_chunk() {
            all.extend_from_slice(&c);
        }
        all.freeze()
    }
}

impl HttpBody for ListBody {
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        _cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        Poll::Ready(self.next_chunk().map(|b| Ok(Frame::data(b))))
    }

    fn is_end_stream(&self) -> bool {
        self.done
    }

    fn size_hint(&self) -> SizeHint {
        SizeHint::default()
    }
}
