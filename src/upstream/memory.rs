//! An upstream in memory, for unit tests: [`Upstream`]'s connection pool
//! replaced by one whose every connection is an in-process pipe to a
//! handler, so that what reads the upstream's answers (the reflector's
//! steps) runs through the real client, its framing and its errors, with
//! no socket and, under paused time, no wait.

use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use http::request::Parts;
use http::{Request, Response, Uri};
use hyper::body::Incoming;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::{Connected, Connection};
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::io::DuplexStream;
use tower::ServiceExt;
use tower::util::BoxCloneSyncService;

use super::{Pool, Upstream};
use crate::body::{Body, BoxError};

/// What answers each request: its head in, the whole response out.
pub(crate) type Handler = Arc<dyn Fn(&Parts) -> Response<Body> + Send + Sync>;

impl Upstream {
    /// Every request from now on answered by `handler`, in memory, as if
    /// by each of the upstream's servers.
    pub(crate) fn answer_with(&self, handler: Handler) {
        let client = Client::builder(TokioExecutor::new()).build(Connector { handler });
        let svc = BoxCloneSyncService::new(client.map_err(BoxError::from));
        *crate::sync::RwLockExt::writing(&self.pool) = Pool {
            authed: svc.clone(),
            raw: svc,
        };
    }
}

/// Makes each connection: a pipe whose other end an HTTP/1.1 server
/// task serves with the handler.
#[derive(Clone)]
struct Connector {
    handler: Handler,
}

impl tower::Service<Uri> for Connector {
    type Response = Pipe;
    type Error = BoxError;
    type Future = std::future::Ready<Result<Pipe, BoxError>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), BoxError>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, _: Uri) -> Self::Future {
        let (ours, theirs) = tokio::io::duplex(64 * 1024);
        let handler = self.handler.clone();
        tokio::spawn(async move {
            let serve = hyper::service::service_fn(move |req: Request<Incoming>| {
                let (parts, _) = req.into_parts();
                let resp = handler(&parts);
                async move { Ok::<_, std::convert::Infallible>(resp) }
            });
            // A connection the client drops ends here; nothing to report.
            let _ = hyper::server::conn::http1::Builder::new()
                .serve_connection(TokioIo::new(theirs), serve)
                .await;
        });
        std::future::ready(Ok(Pipe(TokioIo::new(ours))))
    }
}

/// The client's end of a connection.
struct Pipe(TokioIo<DuplexStream>);

impl Connection for Pipe {
    fn connected(&self) -> Connected {
        Connected::new()
    }
}

impl hyper::rt::Read for Pipe {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_read(cx, buf)
    }
}

impl hyper::rt::Write for Pipe {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().0).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().0).poll_shutdown(cx)
    }
}
