//! An HTTP proxy in front of an upstream that breaks chosen requests:
//! each request is shown to the test's `decide`, which says whether to
//! pass it on or what to do instead (for faults a TCP forwarder cannot
//! make: one request's answer, not a connection's bytes).

use std::convert::Infallible;
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

/// What the proxy does with one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Intercept {
    /// Passes it on, and its answer back.
    Forward,
    /// Passes it on, and its answer back this much later.
    Delay(Duration),
    /// Closes the connection without an answer.
    Reset,
    /// Answers this status and (JSON) body itself.
    Answer(StatusCode, &'static str),
    /// Answers 200 and sends nothing for this long, then ends.
    Silent(Duration),
}

/// A running proxy.
pub struct HttpProxy {
    /// Where r8s connects.
    pub addr: std::net::SocketAddr,
}

impl HttpProxy {
    /// Proxies 127.0.0.1:(a free port) to `upstream` (a URL), asking
    /// `decide` about each request.
    pub async fn start(
        upstream: String,
        decide: impl Fn(&http::request::Parts) -> Intercept + Send + Sync + 'static,
    ) -> Self {
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = l.local_addr().unwrap();
        let decide = Arc::new(decide);
        tokio::spawn(async move {
            while let Ok((conn, _)) = l.accept().await {
                let (upstream, decide) = (upstream.clone(), decide.clone());
                tokio::spawn(async move {
                    let svc = hyper::service::service_fn(move |req| {
                        handle(upstream.clone(), decide.clone(), req)
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(conn), svc)
                        .await;
                });
            }
        });
        HttpProxy { addr }
    }

    /// `http://` its address.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
}

async fn handle<D: Fn(&http::request::Parts) -> Intercept>(
    upstream: String,
    decide: Arc<D>,
    req: Request<Incoming>,
) -> Result<Response<Body>, &'static str> {
    let (parts, body) = req.into_parts();
    match decide(&parts) {
        Intercept::Forward => Ok(forward(&upstream, parts, body).await),
        Intercept::Delay(d) => {
            let resp = forward(&upstream, parts, body).await;
            tokio::time::sleep(d).await;
            Ok(resp)
        }
        Intercept::Reset => Err("reset"),
        Intercept::Answer(status, body) => Ok(Response::builder()
            .status(status)
            .header("content-type", "application/json")
            .body(
                Full::new(Bytes::from_static(body.as_bytes()))
                    .map_err(|e| match e {})
                    .boxed(),
            )
            .unwrap()),
        Intercept::Silent(d) => {
            let (tx, mut rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
            tokio::spawn(async move {
                tokio::time::sleep(d).await;
                drop(tx);
            });
            let frames = futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx));
            Ok(Response::new(
                StreamBody::new(frames).map_err(|e| match e {}).boxed(),
            ))
        }
    }
}

async fn forward(upstream: &str, parts: http::request::Parts, body: Incoming) -> Response<Body> {
    let uri = format!("{upstream}{}", parts.uri.path_and_query().unwrap());
    let mut out = Request::builder().method(parts.method).uri(uri);
    for (k, v) in &parts.headers {
        out = out.header(k, v);
    }
    let body = body.collect().await.unwrap().to_bytes();
    let resp = super::client()
        .request(out.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    resp.map(|b| b.map_err(|e| Box::new(e) as _).boxed())
}
