//! Watches served from the cache: one upstream watch per resource fanned out.
//!
//! A watcher is a cursor into the resource's event history plus its filter.
//! It reads the events after its cursor (shared `Arc`s, each serialized once
//! for everyone), writes those it matches at its own pace through a small
//! bounded channel, and lags without costing anyone else: the history is the
//! only queue. When the history's tail passes its cursor it is ended, as
//! `watch.on_too_old` says.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderValue, Request, StatusCode};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::read::Decision;
use crate::api::params::ListOptions;
use crate::api::path::ResourcePath;
use crate::api::selector::{FieldSelector, LabelSelector, supported_fields};
use crate::api::status::Status;
use crate::body;
use crate::cache::ResourceCache;
use crate::cache::object::CachedObject;
use crate::cache::store::{Event, EventKind};
use crate::codec::json::watch_line;
use crate::config::OnTooOld;
use crate::shutdown::Signal;

/// How cached watches behave.
#[derive(Debug, Clone)]
pub struct WatchPolicy {
    /// Interval between bookmarks (when the client allows them).
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this].
    pub min_timeout: Duration,
    /// A resume point older than the history: pass through, or the apiserver's 410.
    pub on_too_old: OnTooOld,
}

struct Filter {
    namespace: Option<String>,
    labels: LabelSelector,
    fields: FieldSelector,
}

impl Filter {
    fn everything(&self) -> bool {
        self.namespace.is_none() && self.labels.is_empty() && self.fields.is_empty()
    }

    fn passes(&self, o: &CachedObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| o.namespace() == ns)
            && o.matches(&self.labels, &self.fields)
    }
}

enum Start {
    /// ADDED for the current state (once it is at least this version), an
    /// optional end-of-initial-events bookmark, then every change.
    Initial { at_least: u64, end_bookmark: bool },
    /// Every change after this version.
    After(u64),
}

/// Decides whether a watch is served from the cache, and starts it if so.
pub fn decide<B>(
    cache: &Arc<ResourceCache>,
    req: &Request<B>,
    rp: &ResourcePath,
    policy: &WatchPolicy,
    shutdown: &Signal,
) -> Decision {
    if let Some(reason) = super::read::unservable(cache, req.headers()) {
        return Decision::Pass(reason);
    }
    let Ok(opts) = ListOptions::parse(req.uri().query()) else {
        return Decision::Pass("invalid");
    };
    if opts.validate().is_err() {
        return Decision::Pass("invalid");
    }
    let (Ok(labels), Ok(fields)) = (
        LabelSelector::parse(&opts.label_selector),
        FieldSelector::parse(
            &opts.field_selector,
            supported_fields(&cache.resource.resource),
        ),
    ) else {
        return Decision::Pass("invalid");
    };
    if opts.resource_version.is_empty() {
        return Decision::Pass("most_recent");
    }
    let Ok(n) = opts.resource_version.parse::<u64>() else {
        return Decision::Pass("invalid");
    };
    let start = match (opts.send_initial_events, n) {
        (Some(true), n) => Start::Initial {
            at_least: n,
            end_bookmark: opts.allow_watch_bookmarks,
        },
        (None, 0) => Start::Initial {
            at_least: 0,
            end_bookmark: false,
        },
        (Some(false), 0) => Start::After(cache.store.current().rv),
        (_, n) => Start::After(n),
    };
    let mut error = None;
    if let Start::After(n) = start {
        let from = cache.store.history_from();
        if n < from {
            match policy.on_too_old {
                OnTooOld::Pass => return Decision::Pass("too_old"),
                OnTooOld::Gone => {
                    error = Some(Status::expired(format!(
                        "too old resource version: {n} ({from})"
                    )))
                }
            }
        }
    }
    let timeout = match opts.timeout_seconds {
        Some(t) => Duration::from_secs(t),
        None => policy.min_timeout + policy.min_timeout.mul_f64(fastrand::f64()),
    };
    let (tx, body) = body::channel(16);
    if let Some(s) = error {
        let line = watch_line("ERROR", &s.to_bytes());
        tokio::spawn(async move {
            let _ = tx.send(line).await;
        });
    } else {
        let w = Watcher {
            cache: cache.clone(),
            filter: Filter {
                namespace: rp.namespace.clone(),
                labels,
                fields,
            },
            tx,
            bookmarks: opts.allow_watch_bookmarks,
            bookmark_interval: policy.bookmark_interval,
            shutdown: shutdown.clone(),
        };
        tokio::spawn(w.run(start, timeout));
    }
    let mut resp = crate::api::json_response(StatusCode::OK, body);
    resp.headers_mut().insert(
        super::passthrough::CACHE_HEADER,
        HeaderValue::from_static("hit"),
    );
    Decision::Hit(resp)
}

struct Watcher {
    cache: Arc<ResourceCache>,
    filter: Filter,
    tx: mpsc::Sender<Bytes>,
    bookmarks: bool,
    bookmark_interval: Duration,
    shutdown: Signal,
}

impl Watcher {
    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let r = &self.cache.resource;
        let annotations = if initial_end {
            r#","annotations":{"k8s.io/initial-events-end":"true"}"#
        } else {
            ""
        };
        let obj = format!(
            r#"{{"kind":"{}","apiVersion":"{}","metadata":{{"resourceVersion":"{rv}"{annotations}}}}}"#,
            r.kind,
            r.api_version()
        );
        watch_line("BOOKMARK", obj.as_bytes())
    }

    /// The line this watcher sends for an event, per kube-apiserver's cacher:
    /// an object entering the filter is ADDED, one leaving it is DELETED (its
    /// previous state at the event's version). Unfiltered watchers share the
    /// event's own line.
    fn line_for(&self, ev: &Event) -> Option<Bytes> {
        if self.filter.everything() {
            return Some(ev.line().clone());
        }
        let cur = ev.kind != EventKind::Deleted && self.filter.passes(&ev.object);
        let old = ev.prev.as_ref().is_some_and(|p| self.filter.passes(p));
        match (cur, old) {
            (true, true) => Some(ev.line().clone()),
            (true, false) if ev.kind == EventKind::Added => Some(ev.line().clone()),
            (true, false) => Some(watch_line("ADDED", &ev.object.json)),
            (false, true) if ev.kind == EventKind::Deleted => Some(ev.line().clone()),
            (false, true) => {
                let prev = ev.prev.as_ref().expect("old passes");
                Some(watch_line("DELETED", &prev.at_version(ev.rv).json))
            }
            (false, false) => None,
        }
    }

    async fn send(&self, line: Bytes) -> bool {
        self.tx.send(line).await.is_ok()
    }

    async fn run(self, start: Start, timeout: Duration) {
        crate::metrics::watchers(&self.cache.label, 1);
        self.serve(start, timeout).await;
        crate::metrics::watchers(&self.cache.label, -1);
    }

    async fn serve(&self, start: Start, timeout: Duration) {
        let deadline = Instant::now() + timeout;
        let store = &self.cache.store;
        let mut rx = store.subscribe();
        let mut cursor = match start {
            Start::After(n) => n,
            Start::Initial {
                at_least,
                end_bookmark,
            } => {
                if store.current().rv < at_least {
                    tokio::select! {
                        _ = rx.wait_for(|rv| *rv >= at_least) => {}
                        _ = tokio::time::sleep_until(deadline) => return,
                        _ = self.shutdown.wait() => return,
                    }
                }
                rx.borrow_and_update();
                let v = store.current();
                let prefix = self
                    .filter
                    .namespace
                    .as_ref()
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default();
                let from: Arc<str> = Arc::from(prefix.as_str());
                for (_, o) in v
                    .objects
                    .range(from..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                {
                    if self.filter.passes(o) && !self.send(watch_line("ADDED", &o.json)).await {
                        return;
                    }
                }
                if end_bookmark && !self.send(self.bookmark(v.rv, true)).await {
                    return;
                }
                v.rv
            }
        };
        let mut sent = cursor;
        let mut next_bookmark = Instant::now() + self.bookmark_interval;
        let mut final_bookmark = false;
        let mut tick = tokio::time::interval(Duration::from_millis(250));
        loop {
            rx.borrow_and_update();
            let Some((events, caught_up)) = store.read_after(cursor) else {
                // The history's tail passed this watcher: end it as the apiserver would.
                let s = Status::expired(format!(
                    "too old resource version: {cursor} ({})",
                    store.history_from()
                ));
                let _ = self.send(watch_line("ERROR", &s.to_bytes())).await;
                return;
            };
            for ev in &events {
                if let Some(line) = self.line_for(ev) {
                    if !self.send(line).await {
                        return;
                    }
                    sent = ev.rv;
                }
            }
            cursor = caught_up;
            tokio::select! {
                r = rx.changed() => if r.is_err() { return },
                _ = tick.tick() => {
                    let now = Instant::now();
                    if now >= deadline {
                        return;
                    }
                    let near_end = !final_bookmark && deadline - now <= Duration::from_secs(2);
                    if self.bookmarks && (now >= next_bookmark || near_end) {
                        final_bookmark |= near_end;
                        next_bookmark = now + self.bookmark_interval;
                        if cursor > sent {
                            if !self.send(self.bookmark(cursor, false)).await {
                                return;
                            }
                            sent = cursor;
                        }
                    }
                }
                _ = self.tx.closed() => return,
                _ = self.shutdown.wait() => return,
            }
        }
    }
}
