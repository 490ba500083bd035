//! The admin listener: `/metrics`, `/healthz`, `/livez`, `/readyz`.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use http::{HeaderValue, Method, Request, Response, StatusCode, header};
use metrics_exporter_prometheus::PrometheusHandle;

use crate::api::media::Encoding;
use crate::body::{self, Body};
use crate::cache::registry::Registry;
use crate::cache::store::Serving;
use crate::sync::MutexExt;

/// Readiness means "can serve": not before every cache's first sync, not
/// while draining, not while a cache is stale past
/// `cache.max_staleness_seconds` (unless `cache.serve_stale`). An upstream
/// that does not answer `/version` is reported, not a reason by itself: in
/// an outage for everyone, every replica going unready would leave clients
/// no endpoint at all, while their caches could still answer.
pub struct Health {
    /// Every cache's first sync completed (and the upstream answered once).
    synced: AtomicBool,
    /// Shutting down: new requests belong elsewhere.
    draining: AtomicBool,
    /// Why not synced yet, as the prober last saw it.
    why: Mutex<String>,
    /// Why the upstream does not answer `/version`, while it does not.
    upstream_down: Mutex<Option<String>>,
    /// The caches, as they come and go, for their staleness.
    caches: Arc<Registry>,
    /// The `cache.resources` entries the upstream does not serve yet.
    waiting: Mutex<Vec<String>>,
}

/// One check of `/readyz?verbose`: its name, and why it fails (if it does).
struct Check {
    name: &'static str,
    failed: Option<String>,
}

impl Health {
    /// Health over the caches `caches` holds; not ready yet.
    pub fn new(caches: Arc<Registry>) -> Self {
        Health {
            synced: AtomicBool::new(false),
            draining: AtomicBool::new(false),
            why: Mutex::new("the upstream has not answered /version yet".into()),
            upstream_down: Mutex::new(None),
            caches,
            waiting: Mutex::new(Vec::new()),
        }
    }

    /// Every cache has synced once (for good: a later relist passes its
    /// requests through, it does not make r8s unable to serve).
    pub fn set_synced(&self) {
        self.synced.store(true, Ordering::Relaxed);
    }

    /// Not synced yet, saying why (ignored once synced).
    pub fn set_syncing(&self, why: String) {
        if !self.is_synced() {
            *self.why.locked() = why;
        }
    }

    /// Whether every cache's first sync has completed.
    pub fn is_synced(&self) -> bool {
        self.synced.load(Ordering::Relaxed)
    }

    /// What the upstream's `/version` said: `Err` while it does not answer.
    pub fn set_upstream(&self, answered: Result<(), String>) {
        *self.upstream_down.locked() = answered.err();
    }

    /// Shutting down: unready from now on.
    pub fn set_draining(&self) {
        self.draining.store(true, Ordering::Relaxed);
    }

    /// The serving caches past `cache.max_staleness_seconds` that pass
    /// their requests through (`served: false`) or are served anyway
    /// (`served: true`, `cache.serve_stale`), as `label (N s)`.
    fn stale(&self, served: bool) -> Vec<String> {
        self.caches
            .stores()
            .into_iter()
            .filter(|s| s.serving() == Serving::Ready && s.staleness().stale())
            .filter(|s| s.staleness().serves_stale() == served)
            .map(|s| format!("{} ({} s)", s.labels(), s.staleness().since().as_secs()))
            .collect()
    }

    /// Every check, in order; the upstream's is reported, never failed.
    fn checks(&self) -> (Vec<Check>, Option<String>) {
        let mut checks = vec![Check {
            name: "shutdown",
            failed: self
                .draining
                .load(Ordering::Relaxed)
                .then(|| "shutting down".to_string()),
        }];
        checks.push(Check {
            name: "caches-synced",
            failed: (!self.is_synced()).then(|| self.why.locked().clone()),
        });
        let stale = self.stale(false);
        checks.push(Check {
            name: "caches-fresh",
            failed: (!stale.is_empty()).then(|| {
                format!(
                    "caches stale (nothing heard from the upstream for longer than cache.max_staleness_seconds; their requests pass through): {}",
                    stale.join(", ")
                )
            }),
        });
        (checks, self.upstream_down.locked().clone())
    }

    /// Ready to serve, or why not.
    pub fn readiness(&self) -> Result<(), String> {
        let (checks, _) = self.checks();
        match checks.into_iter().find_map(|c| c.failed) {
            None => Ok(()),
            Some(why) => Err(why),
        }
    }

    /// `/readyz?verbose`: each check as kube-apiserver lists its own
    /// (`[+]name ok`, `[-]name failed: why`), the upstream's state, and
    /// the verdict.
    fn verbose(&self) -> (bool, String) {
        let (checks, upstream) = self.checks();
        let mut out = String::new();
        let mut ok = true;
        for c in &checks {
            match &c.failed {
                None => out.push_str(&format!("[+]{} ok\n", c.name)),
                Some(why) => {
                    ok = false;
                    out.push_str(&format!("[-]{} failed: {why}\n", c.name));
                }
            }
        }
        match upstream {
            None => out.push_str("[+]upstream ok\n"),
            Some(why) => out.push_str(&format!(
                "[+]upstream not answering /version (reported, not a readiness condition: the caches still serve): {why}\n"
            )),
        }
        let waiting = self.waiting.locked().clone();
        if !waiting.is_empty() {
            out.push_str(&format!(
                "[+]cache.resources not served upstream yet (waited for; their requests pass through): {}\n",
                waiting.join(", ")
            ));
        }
        let stale = self.stale(true);
        if !stale.is_empty() {
            out.push_str(&format!(
                "[+]caches served stale (cache.serve_stale): {}\n",
                stale.join(", ")
            ));
        }
        out.push_str(if ok {
            "readyz check passed\n"
        } else {
            "readyz check failed\n"
        });
        (ok, out)
    }

    /// The `cache.resources` entries the upstream does not serve yet (each
    /// logged once when it starts waiting): reported by `/readyz?verbose`,
    /// not a readiness condition (a CRD may never be installed).
    pub fn set_waiting(&self, waiting: Vec<String>) {
        let mut w = self.waiting.locked();
        for entry in waiting.iter().filter(|e| !w.contains(e)) {
            tracing::warn!(entry = %entry, "cache.resources names a resource the upstream does not serve (yet): waiting for it; its requests pass through");
        }
        *w = waiting;
    }

    /// Whether every cache serves (none syncing or passing through), and
    /// there is at least one.
    pub fn serving_all(&self) -> bool {
        let stores = self.caches.stores();
        !stores.is_empty() && stores.iter().all(|s| s.serving() == Serving::Ready)
    }

    /// Whether every cache has settled: serving, or passing through for good reason.
    pub fn settled(&self) -> bool {
        self.caches.stores().iter().all(|s| s.settled())
    }

    /// Publishes each cache's staleness, and how many are served stale
    /// (before a scrape).
    pub fn record_staleness(&self) {
        for s in self.caches.stores() {
            crate::metrics::StalenessSeries::new(s.labels()).record(s.staleness().since());
        }
        crate::metrics::caches_served_stale(self.stale(true).len());
    }
}

fn text(code: StatusCode, s: impl Into<bytes::Bytes>, ctype: &'static str) -> Response<Body> {
    let mut r = Response::new(body::full(s));
    *r.status_mut() = code;
    r.headers_mut()
        .insert(header::CONTENT_TYPE, HeaderValue::from_static(ctype));
    r
}

/// Whether the query asks for every check (`?verbose`, as kube-apiserver's).
fn verbose(uri: &http::Uri) -> bool {
    uri.query().is_some_and(|q| {
        q.split('&')
            .any(|p| p == "verbose" || p.starts_with("verbose="))
    })
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
                crate::metrics::watch_encodings(
                    crate::cache::history::encodings(Encoding::Json),
                    crate::cache::history::encodings(Encoding::Protobuf),
                );
                let (items, run_bytes) = crate::codec::gzip::totals();
                crate::metrics::list_gzip(items, run_bytes);
                crate::metrics::without_stores(metrics.render(), &health.caches.retired())
            },
            "text/plain; version=0.0.4",
        ),
        "/healthz" | "/livez" => text(StatusCode::OK, "ok", "text/plain; charset=utf-8"),
        "/readyz" if verbose(req.uri()) => {
            let (ok, out) = health.verbose();
            let code = if ok {
                StatusCode::OK
            } else {
                StatusCode::SERVICE_UNAVAILABLE
            };
            text(code, out, "text/plain; charset=utf-8")
        }
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

#[cfg(test)]
mod tests {
    use super::*;

    async fn body(r: Response<Body>) -> (StatusCode, String) {
        let code = r.status();
        let bytes = http_body_util::BodyExt::collect(r.into_body())
            .await
            .map(|c| c.to_bytes())
            .unwrap_or_default();
        (code, String::from_utf8_lossy(&bytes).into_owned())
    }

    /// Readiness is "can serve": the first sync gates it, an upstream that
    /// stops answering after that is only reported, and draining ends it.
    #[test]
    fn should_be_ready_once_synced_whatever_the_upstream_until_draining() {
        let h = Health::new(Arc::default());
        h.set_syncing("caches syncing (their requests pass through)".into());
        assert_eq!(
            h.readiness(),
            Err("caches syncing (their requests pass through)".to_string())
        );
        h.set_synced();
        assert_eq!(h.readiness(), Ok(()));
        h.set_upstream(Err("upstream 127.0.0.1:1 is unreachable".into()));
        h.set_syncing("the upstream does not answer /version".into());
        assert_eq!(
            h.readiness(),
            Ok(()),
            "an outage after the sync keeps it ready"
        );
        let (ok, text) = h.verbose();
        assert!(ok, "{text}");
        assert!(
            text.contains("[+]upstream not answering /version")
                && text.ends_with("readyz check passed\n"),
            "{text}"
        );
        h.set_draining();
        assert_eq!(h.readiness(), Err("shutting down".to_string()));
        let (ok, text) = h.verbose();
        assert!(
            !ok && text.contains("[-]shutdown failed: shutting down"),
            "{text}"
        );
    }

    #[tokio::test]
    async fn should_list_the_checks_only_when_asked_for_verbose() {
        let h = Arc::new(Health::new(Arc::default()));
        h.set_synced();
        let metrics = metrics_exporter_prometheus::PrometheusBuilder::new()
            .build_recorder()
            .handle();
        let get = |uri: &str| Request::get(uri).body(()).unwrap();
        assert_eq!(
            body(handle(&get("/readyz"), &h, &metrics)).await,
            (StatusCode::OK, "ok".into())
        );
        let (code, text) = body(handle(&get("/readyz?verbose"), &h, &metrics)).await;
        assert_eq!(code, StatusCode::OK);
        assert!(
            text.starts_with("[+]shutdown ok\n[+]caches-synced ok\n[+]caches-fresh ok\n"),
            "{text}"
        );
    }
}
