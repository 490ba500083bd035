//! The HTTP accept loop shared by the API listener, the admin listener and the
//! built-in upstream: HTTP/1.1 (with upgrades) and HTTP/2, over TLS when
//! configured, graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo, TokioTimer};
use hyper_util::server::conn::auto;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::{Notify, mpsc};
use tokio_io_timeout::TimeoutStream;

use crate::body::Body;
use crate::metrics::ConnectionClosed;
use crate::shutdown::Signal;
use crate::tls::Tls;
use crate::tls::client::ClientCertificate;

mod coalesce;

/// Request headers kube-apiserver reads (Go's `MaxHeaderBytes`, 1 MiB; it
/// allows 4 KiB more): past them, 431. hyper's own defaults refused HTTP/2
/// headers over 16 KiB (a long token, many impersonated groups).
const MAX_HEADER_BYTES: usize = 1 << 20;

/// A TLS handshake that takes longer than this is dropped.
const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Who is at the other end of a connection.
#[derive(Debug)]
pub struct Peer {
    /// The client's address.
    pub addr: SocketAddr,
    /// The client certificate it presented, if any (verified per request).
    pub certificate: Option<ClientCertificate>,
}

/// How long a listener waits on its clients.
#[derive(Debug, Clone, Copy)]
pub struct Timeouts {
    /// After shutdown, how long in-flight requests may take to finish.
    pub grace: Duration,
    /// How long an HTTP/1.1 client may take to send a request's headers
    /// (a connection that never finishes them is closed; kube-apiserver
    /// allows 32 s).
    pub header_read: Duration,
    /// How long a connection's writes may make no progress (its client
    /// stopped reading) before the connection is closed.
    pub write: Duration,
    /// The probability that an HTTP/2 connection is sent GOAWAY after a
    /// response (kube-apiserver's `--goaway-chance`), so that its client
    /// reconnects through the load balancer; 0: never.
    pub goaway_chance: f64,
}

/// The error a connection that sent nothing within its bound ends with.
#[derive(Debug, thiserror::Error)]
#[error("no request within the header read bound")]
struct NoRequest;

/// `io` whose first read must bring bytes within `bound`, for connections
/// whose first bytes cannot be peeked at (TLS: a client that completes its
/// handshake and then sends nothing). hyper's own header timer starts only
/// once bytes say which protocol the connection speaks.
struct FirstBytes<S> {
    io: S,
    /// Until the first bytes arrive.
    deadline: Option<Pin<Box<tokio::time::Sleep>>>,
}

impl<S> FirstBytes<S> {
    fn new(io: S, bound: Duration) -> Self {
        FirstBytes {
            io,
            deadline: Some(Box::pin(tokio::time::sleep(bound))),
        }
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for FirstBytes<S> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let r = Pin::new(&mut self.io).poll_read(cx, buf);
        match (&r, self.deadline.as_mut()) {
            (_, None) => {}
            (std::task::Poll::Ready(_), Some(_)) => {
                if buf.filled().len() > before {
                    self.deadline = None;
                }
            }
            (std::task::Poll::Pending, Some(d)) => {
                if d.as_mut().poll(cx).is_ready() {
                    return std::task::Poll::Ready(Err(std::io::Error::new(
                        std::io::ErrorKind::TimedOut,
                        NoRequest,
                    )));
                }
            }
        }
        r
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for FirstBytes<S> {
    fn poll_write(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write(cx, buf)
    }
    fn poll_write_vectored(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        bufs: &[std::io::IoSlice<'_>],
    ) -> std::task::Poll<std::io::Result<usize>> {
        Pin::new(&mut self.io).poll_write_vectored(cx, bufs)
    }
    fn is_write_vectored(&self) -> bool {
        self.io.is_write_vectored()
    }
    fn poll_flush(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_flush(cx)
    }
    fn poll_shutdown(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        Pin::new(&mut self.io).poll_shutdown(cx)
    }
}

/// `io` whose writes fail once they have made no progress for `bound`; hyper
/// then closes the connection, and the list or watch it carried is dropped.
/// Only a pending write counts: an idle connection is never cut.
fn write_bounded<S: AsyncRead + AsyncWrite>(io: S, bound: Duration) -> Pin<Box<TimeoutStream<S>>> {
    let mut io = TimeoutStream::new(io);
    io.set_write_timeout(Some(bound));
    Box::pin(io)
}

/// Serves `handler` on `listener` (over `tls` if given) until `shutdown`
/// fires, then lets in-flight requests finish for up to `timeouts.grace`
/// before dropping the rest.
pub async fn serve<H, F>(
    listener: TcpListener,
    tls: Option<Arc<Tls>>,
    handler: H,
    shutdown: Signal,
    timeouts: Timeouts,
) where
    H: Fn(Request<Incoming>, Arc<Peer>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    // Each connection task holds a sender; all dropped means all ended
    // (mini-redis's shutdown_complete).
    let (open, mut ended) = mpsc::channel::<()>(1);
    let mut builder = auto::Builder::new(TokioExecutor::new());
    builder
        .http1()
        .timer(TokioTimer::new())
        .header_read_timeout(timeouts.header_read)
        .max_buf_size(MAX_HEADER_BYTES + 4096);
    builder
        .http2()
        .max_header_list_size(MAX_HEADER_BYTES as u32 + 4096);
    let grace = timeouts.grace;
    loop {
        let (stream, addr) = tokio::select! {
            r = listener.accept() => match r {
                Ok(x) => x,
                Err(e) => {
                    // EMFILE and friends: back off instead of spinning.
                    tracing::warn!(error = %e, "accept failed");
                    tokio::time::sleep(Duration::from_millis(50)).await;
                    continue;
                }
            },
            _ = shutdown.wait() => break,
        };
        let _ = stream.set_nodelay(true);
        let (h, b) = (handler.clone(), builder.clone());
        let (write, goaway_chance) = (timeouts.write, timeouts.goaway_chance);
        let ends = Ends {
            stop: shutdown.clone(),
            goaway_chance,
            _open: open.clone(),
        };
        match &tls {
            None => {
                let peer = Arc::new(Peer {
                    addr,
                    certificate: None,
                });
                let (wait, stop) = (timeouts.header_read, shutdown.clone());
                tokio::spawn(async move {
                    // hyper's header timer starts once the protocol is
                    // known: a client that sends nothing at all is bounded
                    // here (and closed at once on shutdown).
                    let mut first = [0u8; 1];
                    let first_byte = async {
                        tokio::select! {
                            r = tokio::time::timeout(wait, stream.peek(&mut first)) => r.is_ok(),
                            _ = stop.wait() => false,
                        }
                    };
                    if !first_byte.await {
                        if !stop.fired() {
                            crate::metrics::connection_closed(ConnectionClosed::NoRequest);
                        }
                        tracing::debug!(peer = %addr, "connection sent nothing; closed");
                        return;
                    }
                    connection(write_bounded(stream, write), peer, h, b, ends).await;
                });
            }
            Some(tls) => {
                let (acceptor, client_ca) = tls.acceptor();
                let wait = timeouts.header_read;
                tokio::spawn(async move {
                    let stream = match tokio::time::timeout(
                        HANDSHAKE_TIMEOUT,
                        acceptor.accept(write_bounded(stream, write)),
                    )
                    .await
                    {
                        Ok(Ok(s)) => s,
                        Ok(Err(e)) => {
                            tracing::debug!(error = %e, peer = %addr, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(peer = %addr, "TLS handshake timed out");
                            return;
                        }
                    };
                    let peer = Arc::new(Peer {
                        addr,
                        certificate: client_ca
                            .and_then(|ca| ClientCertificate::of(stream.get_ref().1, &ca)),
                    });
                    connection(FirstBytes::new(stream, wait), peer, h, b, ends).await;
                });
            }
        }
    }
    drop(listener);
    drop(open);
    if tokio::time::timeout(grace, ended.recv()).await.is_err() {
        tracing::warn!(?grace, "grace period over; dropping remaining connections");
    }
}

/// What ends a connection gracefully, and what it tells the listener.
struct Ends {
    /// Shutdown: finish in-flight requests, take no new ones.
    stop: Signal,
    /// `Timeouts::goaway_chance`.
    goaway_chance: f64,
    /// Dropped when the connection ends: the listener's grace period waits for all.
    _open: mpsc::Sender<()>,
}

/// Serves one connection (HTTP/1.1 or HTTP/2, by preface) until it ends;
/// on shutdown, or after a response that drew GOAWAY, it ends gracefully:
/// HTTP/2 sends GOAWAY and finishes its open streams (watches included),
/// HTTP/1.1 closes after the request in flight.
async fn connection<I, H, F>(
    io: I,
    peer: Arc<Peer>,
    handler: H,
    builder: auto::Builder<TokioExecutor>,
    ends: Ends,
) where
    I: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    H: Fn(Request<Incoming>, Arc<Peer>) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let addr = peer.addr;
    let goaway = Arc::new(Notify::new());
    let (chance, drawn) = (ends.goaway_chance, goaway.clone());
    let svc = service_fn(move |req| {
        let (h, p, drawn) = (handler.clone(), peer.clone(), drawn.clone());
        async move {
            if header_bytes(&req) > MAX_HEADER_BYTES + 4096 {
                return Ok(headers_too_large(req.version()));
            }
            // Drawn per request as kube-apiserver draws it, HTTP/2 only (an
            // HTTP/1.1 client opens connections as it needs them).
            let draw =
                req.version() == http::Version::HTTP_2 && chance > 0.0 && fastrand::f64() < chance;
            // Boxed: hyper keeps a stream's (HTTP/2) or connection's
            // (HTTP/1.1) service future allocated, at its full size, for as
            // long as the response streams, so an open watch would hold
            // room for the largest request a handler can serve (a proof, a
            // pass-through). Boxed, it holds a pointer, and the handler's
            // state is freed once the response is made.
            let resp = Box::pin(h(req, p)).await;
            if draw {
                drawn.notify_one();
            }
            Ok::<_, Infallible>(resp)
        }
    });
    let (io, drain) = coalesce::split(io);
    let serving = async move {
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(io), svc);
        let mut conn = std::pin::pin!(conn);
        // The ends first, as hyper-util's graceful watcher polls them: a
        // connection told to end must not read one more request first (a
        // keep-alive client's next request would be served during shutdown).
        tokio::select! {
            biased;
            _ = ends.stop.wait() => {}
            _ = goaway.notified() => {
                crate::metrics::connection_closed(ConnectionClosed::Goaway);
                tracing::debug!(peer = %addr, "GOAWAY (server.goaway_chance): the client reconnects for its next request");
            }
            r = conn.as_mut() => return r,
        }
        conn.as_mut().graceful_shutdown();
        conn.await
    };
    if let Err(e) = drain.around(serving).await {
        match bound_hit(&*e) {
            Some(ConnectionClosed::WriteTimeout) => {
                crate::metrics::connection_closed(ConnectionClosed::WriteTimeout);
                tracing::info!(peer = %addr, "client stopped reading; connection closed (server.write_timeout_seconds)");
            }
            Some(reason) => {
                crate::metrics::connection_closed(reason);
                tracing::debug!(peer = %addr, reason = reason.as_str(), "no request or headers in time; connection closed");
            }
            None => tracing::debug!(error = %e, peer = %addr, "connection ended with an error"),
        }
    }
}

/// The bytes of a request's header lines, as Go's `MaxHeaderBytes` counts
/// them (`name: value\r\n`). hyper's HTTP/1.1 bound (`max_buf_size`) is only
/// checked while the headers are incomplete: a read that brings them all at
/// once may go past it, so it is checked again here (HTTP/2's header list
/// bound is exact already; the check costs one pass over the headers).
fn header_bytes<B>(req: &Request<B>) -> usize {
    req.headers()
        .iter()
        .map(|(k, v)| k.as_str().len() + v.len() + 4)
        .sum()
}

/// The answer to headers over the bound: hyper's own (a bare 431); an
/// HTTP/1.1 connection is closed after it, as Go's server closes it.
fn headers_too_large(version: http::Version) -> Response<Body> {
    let mut r = Response::new(crate::body::empty());
    *r.status_mut() = http::StatusCode::REQUEST_HEADER_FIELDS_TOO_LARGE;
    if version == http::Version::HTTP_11 {
        r.headers_mut().insert(
            http::header::CONNECTION,
            http::HeaderValue::from_static("close"),
        );
    }
    r
}

/// Which of the listener's bounds ended a connection, if one did: hyper's
/// header read timeout, or the write timeout (an I/O `TimedOut`).
fn bound_hit(e: &(dyn std::error::Error + 'static)) -> Option<ConnectionClosed> {
    let mut cur = Some(e);
    while let Some(err) = cur {
        if let Some(h) = err.downcast_ref::<hyper::Error>()
            && h.is_timeout()
        {
            return Some(ConnectionClosed::HeaderTimeout);
        }
        if let Some(io) = err.downcast_ref::<std::io::Error>()
            && io.kind() == std::io::ErrorKind::TimedOut
        {
            let first = io.get_ref().is_some_and(|e| e.is::<NoRequest>());
            return Some(if first {
                ConnectionClosed::NoRequest
            } else {
                ConnectionClosed::WriteTimeout
            });
        }
        cur = err.source();
    }
    None
}
