//! The HTTP accept loop shared by the API listener, the admin listener and the
//! built-in upstream: HTTP/1.1 (with upgrades) and HTTP/2, graceful shutdown.

use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};
use hyper_util::server::conn::auto;
use hyper_util::server::graceful::GracefulShutdown;
use tokio::net::TcpListener;

use crate::body::Body;
use crate::shutdown::Signal;

/// Serves `handler` on `listener` until `shutdown` fires, then lets in-flight
/// requests finish for up to `grace` before dropping the rest.
pub async fn serve<H, F>(listener: TcpListener, handler: H, shutdown: Signal, grace: Duration)
where
    H: Fn(Request<Incoming>, SocketAddr) -> F + Clone + Send + Sync + 'static,
    F: Future<Output = Response<Body>> + Send + 'static,
{
    let graceful = GracefulShutdown::new();
    let builder = auto::Builder::new(TokioExecutor::new());
    loop {
        let (stream, peer) = tokio::select! {
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
        let h = handler.clone();
        let svc = service_fn(move |req| {
            let h = h.clone();
            async move { Ok::<_, Infallible>(h(req, peer).await) }
        });
        let conn = builder.serve_connection_with_upgrades(TokioIo::new(stream), svc);
        let conn = graceful.watch(conn.into_owned());
        tokio::spawn(async move {
            if let Err(e) = conn.await {
                tracing::debug!(error = %e, %peer, "connection ended with an error");
            }
        });
    }
    drop(listener);
    if tokio::time::timeout(grace, graceful.shutdown())
        .await
        .is_err()
    {
        tracing::warn!(?grace, "grace period over; dropping remaining connections");
    }
}
