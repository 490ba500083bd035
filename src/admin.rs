//! The admin listener: `/metrics`, `/healthz`, `/livez`, `/readyz`.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::api::media::Encoding;
use crate::body::{self, Body};

/// Readiness, set by the upstream prober: the upstream answers `/version` and
/// every cache has settled (synced, or passing through for good reason).
#[derive(Debug, Default)]
pub struct Health {
    ready: AtomicBool,
}

impl Health {
    /// Marks r8s ready (or not).
    pub fn set_ready(&self, ready: bool) {
        self.ready.store(ready, Ordering::Relaxed);
    }

    /// Whether r8s is ready to serve.
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }
}

fn text(code: StatusCode, s: impl Into<bytes::Bytes>, ctype: &'static str) -> Response<Body> {
    let mut r = Response::new(body::full(s));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// Answers one admin request.
pub fn handle<B>(
    req: &Request<B>,
    health: &Arc<Health>,
    metrics: &PrometheusHandle,
) -> Response<Body> {
    if req.method() != Method::GET && req.method() != Method::HEAD {
        return text(
            StatusCode::METHOD_NOT_ALLOWED,
            "method not allowed\n",
            "text/plain; charset=utf-8",
        );
    }
    match req.uri().path() {
        "/metrics" => text(
            StatusCode::OK,
            {
                for (name, e) in [("json", Encoding::Json), ("protobuf", Encoding::Protobuf)] {
                    crate::metrics::watch_encodings(name, crate::cache::history::encodings(e));
                }
                metrics.render()
            },
            "text/plain; version=0.0.4",
        ),
        "/healthz" | "/livez" => text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
        "/readyz" if health.is_ready() => text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
        "/readyz" => text(
            StatusCode::SERVICE_UNAVAILABLE,
            "not ready: the upstream has not answered /version yet\n",
            "text/plain; charset=utf-8",
        ),
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz, /livez or /readyz\n",
            "text/plain; charset=utf-8",
        ),
    }
}
