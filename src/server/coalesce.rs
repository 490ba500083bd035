//! An HTTP/2 connection's writes, coalesced: one write per poll of the
//! connection, not one per DATA frame.
//!
//! h2 writes every DATA frame of 256 bytes or more on its own: it chains the
//! payload instead of copying it, and flushes before it buffers the next
//! frame. A watch event fanned out to the 100 streams of one connection was
//! 100 `writev`s, and those syscalls were over half of r8s's CPU per
//! delivered event over HTTP/2 (BENCHMARKS.md, "HTTP/2 fan-out"). Here the
//! frames written during one poll of the connection are copied into one
//! buffer, which goes out when that poll ends ([`Flushing`]), when it fills,
//! or when the connection closes. Latency is unchanged: nothing waits for a
//! later poll.
//!
//! Only HTTP/2 connections coalesce, known by their first bytes (the preface,
//! `PRI * HTTP/2.0`). hyper already writes an HTTP/1.1 connection once per
//! poll, and an HTTP/1.1 connection may be upgraded (exec, attach,
//! port-forward) and handed to another task, whose writes must not wait for
//! a poll of this one. Every other connection's I/O passes straight through.

use std::future::Future;
use std::io::{self, IoSlice};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, ready};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};

use crate::sync::MutexExt;

/// The most bytes held before they are written (a write this large or
/// larger goes out directly, uncopied, after what was held).
const CAPACITY: usize = 64 * 1024;

/// What a connection's first bytes made of it.
#[derive(Clone, Copy, PartialEq)]
enum Mode {
    /// Nothing read yet; writes pass through.
    Undecided,
    /// HTTP/2: writes are held until the poll ends.
    Coalesce,
    /// Anything else: writes pass through.
    Direct,
}

/// The I/O and what is held for it, shared by the connection (through
/// [`Coalescing`]) and the future that drives it ([`Flushing`]). Both live in
/// the connection's task, so the lock is never contended; it exists because
/// hyper owns the I/O and the end of a poll is only seen from outside.
struct Shared<I> {
    io: I,
    /// Bytes written by the connection and not yet to `io`; its allocation
    /// is dropped once drained, so an idle connection holds none.
    held: Vec<u8>,
    /// How much of `held` has gone out.
    sent: usize,
    mode: Mode,
}

impl<I: AsyncWrite + Unpin> Shared<I> {
    /// Writes out everything held, then flushes `io` (a TLS stream may keep
    /// records its socket could not take).
    fn drain(&mut self, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        while self.sent < self.held.len() {
            let n = ready!(Pin::new(&mut self.io).poll_write(cx, &self.held[self.sent..]))?;
            if n == 0 {
                return Poll::Ready(Err(io::ErrorKind::WriteZero.into()));
            }
            self.sent += n;
        }
        self.held = Vec::new();
        self.sent = 0;
        Pin::new(&mut self.io).poll_flush(cx)
    }

    /// Takes `bufs` into what is held (writing out what was held first when
    /// they do not fit).
    fn hold(&mut self, cx: &mut Context<'_>, bufs: &[IoSlice<'_>]) -> Poll<io::Result<usize>> {
        let len: usize = bufs.iter().map(|b| b.len()).sum();
        if self.held.len() + len > CAPACITY {
            ready!(self.drain(cx))?;
            if len >= CAPACITY {
                return Pin::new(&mut self.io).poll_write_vectored(cx, bufs);
            }
        }
        if self.held.capacity() == 0 {
            self.held.reserve(CAPACITY.min(len.max(16 * 1024)));
        }
        for b in bufs {
            self.held.extend_from_slice(b);
        }
        Poll::Ready(Ok(len))
    }
}

/// Wraps a connection's I/O: hand the first half to hyper, and drive the
/// connection's future with the second ([`Drain::around`]).
pub fn split<I>(io: I) -> (Coalescing<I>, Drain<I>) {
    let shared = Arc::new(Mutex::new(Shared {
        io,
        held: Vec::new(),
        sent: 0,
        mode: Mode::Undecided,
    }));
    (Coalescing(shared.clone()), Drain(shared))
}

/// The connection's I/O as hyper sees it.
pub struct Coalescing<I>(Arc<Mutex<Shared<I>>>);

/// The handle that writes out what [`Coalescing`] held.
pub struct Drain<I>(Arc<Mutex<Shared<I>>>);

impl<I> Drain<I> {
    /// `conn`, writing out what it held each time a poll of it ends.
    pub fn around<F>(self, conn: F) -> Flushing<F, I> {
        Flushing {
            conn: Some(Box::pin(conn)),
            shared: self.0,
            yielded: false,
        }
    }
}

/// A connection's future that writes what the connection held when each
/// poll of it ends, and once more when it completes.
pub struct Flushing<F, I> {
    /// None once complete (what it held may still be going out).
    conn: Option<Pin<Box<F>>>,
    shared: Arc<Mutex<Shared<I>>>,
    /// Whether the last poll left what it held for this one.
    yielded: bool,
}

impl<F, I, E> Future for Flushing<F, I>
where
    F: Future<Output = Result<(), E>>,
    E: From<io::Error>,
    I: AsyncWrite + Unpin,
{
    type Output = Result<(), E>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        // Unpin (the connection is boxed): its fields borrow apart.
        let this = self.get_mut();
        let done = match this.conn.as_mut() {
            Some(conn) => match conn.as_mut().poll(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => true,
                Poll::Pending => false,
            },
            None => true,
        };
        if done {
            this.conn = None;
        }
        let mut s = this.shared.locked();
        if s.mode == Mode::Coalesce && !done && !s.held.is_empty() && !this.yielded {
            // The streams' tasks woke this one as each queued its frame, and
            // it ran before the rest had queued theirs: let them run first
            // (a task that wakes itself goes to the back of the run queue),
            // and write them all on the next poll.
            this.yielded = true;
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        this.yielded = false;
        if s.mode == Mode::Coalesce {
            match s.drain(cx) {
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e.into())),
                Poll::Pending if done => return Poll::Pending,
                _ => {}
            }
        }
        if done {
            Poll::Ready(Ok(()))
        } else {
            Poll::Pending
        }
    }
}

impl<I: AsyncRead + Unpin> AsyncRead for Coalescing<I> {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let mut s = self.0.locked();
        let before = buf.filled().len();
        let r = Pin::new(&mut s.io).poll_read(cx, buf);
        if s.mode == Mode::Undecided && buf.filled().len() > before {
            // An HTTP/1.1 request line cannot start so: PRI is the preface's.
            s.mode = if buf.filled()[before..].starts_with(b"PRI ") {
                Mode::Coalesce
            } else {
                Mode::Direct
            };
        }
        r
    }
}

impl<I: AsyncWrite + Unpin> AsyncWrite for Coalescing<I> {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        let mut s = self.0.locked();
        if s.mode == Mode::Coalesce {
            return s.hold(cx, &[IoSlice::new(buf)]);
        }
        Pin::new(&mut s.io).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut s = self.0.locked();
        if s.mode == Mode::Coalesce {
            return s.hold(cx, bufs);
        }
        Pin::new(&mut s.io).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        let s = self.0.locked();
        s.mode == Mode::Coalesce || s.io.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.0.locked();
        if s.mode == Mode::Coalesce && !s.held.is_empty() {
            // h2 flushes after every large frame: what is held goes out
            // when this poll of the connection ends (`Flushing`).
            return Poll::Ready(Ok(()));
        }
        Pin::new(&mut s.io).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let mut s = self.0.locked();
        if s.mode == Mode::Coalesce {
            ready!(s.drain(cx))?;
        }
        Pin::new(&mut s.io).poll_shutdown(cx)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    /// Counts the writes that reach it.
    #[derive(Default)]
    struct Counting {
        out: Vec<u8>,
        writes: usize,
        input: Vec<u8>,
    }

    impl AsyncRead for Counting {
        fn poll_read(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &mut ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let n = buf.remaining().min(self.input.len());
            let rest = self.input.split_off(n);
            buf.put_slice(&std::mem::replace(&mut self.input, rest));
            Poll::Ready(Ok(()))
        }
    }

    impl AsyncWrite for Counting {
        fn poll_write(
            mut self: Pin<&mut Self>,
            _: &mut Context<'_>,
            buf: &[u8],
        ) -> Poll<io::Result<usize>> {
            self.writes += 1;
            self.out.extend_from_slice(buf);
            Poll::Ready(Ok(buf.len()))
        }
        fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
        fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
            Poll::Ready(Ok(()))
        }
    }

    /// Writes `frames` frames of `size` bytes, flushing after each, in one
    /// poll of a connection future; returns the writes that reached the I/O
    /// and the bytes, in order.
    async fn one_poll(first: &[u8], frames: usize, size: usize) -> (usize, Vec<u8>) {
        let (mut io, drain) = split(Counting {
            input: first.to_vec(),
            ..Default::default()
        });
        let shared = drain.0.clone();
        let mut b = [0u8; 64];
        let n = io.read(&mut b).await.unwrap();
        assert_eq!(&b[..n], first);
        let conn = async move {
            for i in 0..frames {
                io.write_all(&vec![i as u8; size]).await?;
                io.flush().await?;
            }
            Ok::<_, io::Error>(())
        };
        drain.around(conn).await.unwrap();
        let s = shared.locked();
        assert!(s.held.is_empty() && s.held.capacity() == 0, "nothing kept");
        (s.io.writes, s.io.out.clone())
    }

    fn frames(frames: usize, size: usize) -> Vec<u8> {
        (0..frames).flat_map(|i| vec![i as u8; size]).collect()
    }

    #[tokio::test]
    async fn should_write_an_http2_polls_frames_at_once_and_in_order() {
        let (writes, out) = one_poll(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 20, 2300).await;
        assert_eq!(out, frames(20, 2300));
        assert_eq!(writes, 1, "20 frames of 2,300 bytes fit one write");
        // More than the buffer holds: written as it fills.
        let (writes, out) = one_poll(b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n", 100, 2300).await;
        assert_eq!(out, frames(100, 2300));
        assert_eq!(writes, 4, "28 frames fit 64 KiB: 230,000 bytes in 4 writes");
    }

    #[tokio::test]
    async fn should_pass_http1_writes_straight_through() {
        let (writes, out) = one_poll(b"GET /api HTTP/1.1\r\n", 20, 2300).await;
        assert_eq!(out, frames(20, 2300));
        assert_eq!(writes, 20, "HTTP/1.1 (which may be upgraded) is not held");
    }

    #[tokio::test]
    async fn should_write_what_is_held_before_shutting_down() {
        let (mut io, _drain) = split(Counting {
            input: b"PRI * HTTP/2.0\r\n".to_vec(),
            ..Default::default()
        });
        let mut b = [0u8; 64];
        assert_eq!(io.read(&mut b).await.unwrap(), 16);
        io.write_all(b"GOAWAY").await.unwrap();
        io.flush().await.unwrap();
        assert_eq!(io.0.locked().io.writes, 0, "held until the poll ends");
        io.shutdown().await.unwrap();
        assert_eq!(io.0.locked().io.out, b"GOAWAY");
    }
}
