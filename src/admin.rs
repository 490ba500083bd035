//! The admin listener: `/metrics`, `/healthz`, `/livez`, `/readyz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::api::media::Encoding;
use crate::body::{self, Body};
use crate::cache::store::{Serving, Store};
use crate::sync::MutexExt;

/// Readiness: set by the upstream prober (the upstream answers `/version`
/// and every cache has settled: synced, or passing through for good
/// reason), and read live of each cache's staleness.
pub struct Health {
    ready: AtomicBool,
    /// Why not ready, as the prober last saw it.
    why: Mutex<String>,
    /// Every store, by its metrics label, for staleness.
    stores: Vec<(String, Arc<Store>)>,
}

impl Health {
    /// Health over these stores (labelled as in metrics); not ready yet.
    pub fn new(stores: Vec<(String, Arc<Store>)>) -> Self {
        Health {
            ready: AtomicBool::new(false),
            why: Mutex::new("the upstream has not answered /version yet".into()),
            stores,
        }
    }

    /// Marks r8s ready.
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Relaxed);
    }

    /// Marks r8s not ready, saying why.
    pub fn set_unready(&self, why: String) {
        *self.why.locked() = why;
        self.ready.store(false, Ordering::Relaxed);
    }

    /// Whether the prober found r8s ready (staleness aside).
    pub fn is_ready(&self) -> bool {
        self.ready.load(Ordering::Relaxed)
    }

    /// Ready to serve, or why not: the prober's verdict, then any serving
    /// cache silent for longer than `cache.max_staleness_seconds`.
    pub fn readiness(&self) -> Result<(), String> {
        if !self.is_ready() {
            return Err(self.why.locked().clone());
        }
        let stale: Vec<String> = self
            .stores
            .iter()
            .filter(|(_, s)| s.serving() == Serving::Ready && s.staleness.stale())
            .map(|(label, s)| format!("{label} ({} s)", s.staleness.since().as_secs()))
            .collect();
        if stale.is_empty() {
            return Ok(());
        }
        Err(format!(
            "caches stale (nothing heard from the upstream for longer than cache.max_staleness_seconds; their requests pass through): {}",
            stale.join(", ")
        ))
    }

    /// Whether every cache has settled: serving, or passing through for good reason.
    pub fn settled(&self) -> bool {
        self.stores.iter().all(|(_, s)| s.settled())
    }

    /// Publishes each cache's staleness (before a scrape).
    pub fn record_staleness(&self) {
        for (label, s) in &self.stores {
            crate::metrics::cache_staleness(label, s.staleness.since());
        }
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
                health.record_staleness();
                crate::metrics::collect_process();
                for (name, e) in [("json", Encoding::Json), ("protobuf", Encoding::Protobuf)] {
                    crate::metrics::watch_encodings(name, crate::cache::history::encodings(e));
                }
                metrics.render()
            },
            "text/plain; version=0.0.4",
        ),
        "/healthz" | "/livez" => text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
        "/readyz" => match health.readiness() {
            Ok(()) => text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
            Err(why) => text(
                StatusCode::SERVICE_UNAVAILABLE,
                format!("not ready: {why}\n"),
                "text/plain; charset=utf-8",
            ),
        },
        _ => text(
            StatusCode::NOT_FOUND,
            "not found: try /metrics, /healthz, /livez or /readyz\n",
            "text/plain; charset=utf-8",
        ),
    }
}
