//! Watches served from the cache: one upstream watch per resource fanned out.
//!
//! A watcher is a cursor into the resource's event log plus its filter. It
//! reads the events after its cursor (shared `Arc`s, each serialized once for
//! everyone) in bounded batches and writes those it matches at its own pace
//! through a small bounded channel: the log is the only queue. Slow-consumer
//! policy: a watcher that cannot write lags (its lag is a metric) and holds at
//! most one batch and one channel's worth of frames; only when the log's tail
//! passes its cursor is it ended, as `watch.on_too_old` says.
//!
//! Watchers whose filter pins an indexed field (pods' `spec.nodeName`,
//! `metadata.name`, the namespace) register on that trigger and are woken and
//! fed only by the events concerning it; the others wake on every change.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};
use tokio::sync::mpsc;
use tokio::time::Instant;

use super::outcome::PassReason;
use crate::api::media::{Encoding, ErrorEncoding, MediaType, Shape};
use crate::api::request::ApiRequest;
use crate::api::selector::Selectors;
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::history::{Cursor, Event, EventKind, Form, Trigger};
use crate::cache::object::{AddedItem, CachedObject};
use crate::cache::store::Store;
use crate::codec::crc::StreamCrc;
use crate::codec::gzip::{self, GzipList};
use crate::codec::json::{META_API_VERSION, bookmark, initial_events_end, watch_line};
use crate::codec::protobuf as pb;
use crate::config::{OnTooNew, OnTooOld};
use crate::metrics::{WatchEnd, WatchMetrics};
use crate::shutdown::Signal;
use crate::upstream::proof::{ConsistentKind, Proofs};

/// Events a watcher takes from the log per read: bounds what a stalled watcher holds.
const BATCH: usize = 256;
/// Frames buffered between a watcher and its connection.
const CHANNEL: usize = 16;
/// One event in this many is timed for the delivery histogram.
const SAMPLE_EVERY: u64 = 16;
/// How often a watcher blocked on a slow client checks whether the log's tail passed it.
const STALL_CHECK: Duration = Duration::from_millis(500);
/// Bookmarks go out this long before the server ends a watch (kube-apiserver's margin).
const FINAL_BOOKMARK_MARGIN: Duration = Duration::from_secs(2);

/// How cached watches behave.
#[derive(Debug, Clone)]
pub struct WatchPolicy {
    /// Interval between bookmarks (when the client allows them).
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this].
    pub min_timeout: Duration,
    /// A resume point older than the history: pass through, or the apiserver's 410.
    pub on_too_old: OnTooOld,
    /// On shutdown, watches close at random points over this span.
    pub drain: Duration,
    /// Open cached watches beyond which new ones get 429.
    pub max_watchers: usize,
    /// Cached watches open now (all resources).
    pub active: Arc<AtomicUsize>,
    /// Gzip streaming lists for clients that accept it (`server.watchlist_compression`).
    pub compress_watch_lists: bool,
}

struct Filter {
    namespace: Option<String>,
    selectors: Selectors,
}

impl Filter {
    fn everything(&self) -> bool {
        self.namespace.is_none() && self.selectors.is_empty()
    }

    fn passes(&self, o: &CachedObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| o.namespace() == ns)
            && o.matches(&self.selectors)
    }

    /// The indexed value this filter pins, if any: only events concerning it
    /// can pass (or leave) the filter.
    fn trigger(&self, nodes_indexed: bool) -> Option<Trigger> {
        let fields = &self.selectors.fields;
        if nodes_indexed && let Some(n) = fields.exact("spec.nodeName") {
            return Some(Trigger::node(n));
        }
        if let Some(n) = fields.exact("metadata.name") {
            return Some(Trigger::name(n));
        }
        self.namespace
            .as_deref()
            .or_else(|| fields.exact("metadata.namespace"))
            .map(Trigger::namespace)
    }
}

enum Start {
    /// ADDED for the current state (once it is at least this version), an
    /// optional end-of-initial-events bookmark, then every change.
    Initial { at_least: u64, end_bookmark: bool },
    /// Every change after this version.
    After(u64),
    /// A streaming list of a version the cache did not reach in time: the
    /// apiserver's ERROR event (504 "Too large resource version"), then the end.
    TooLarge(u64),
}

/// A watch the cache will serve, checked but not started (so the caller can
/// be authorized before any watcher exists).
pub struct Plan {
    cache: Arc<ResourceCache>,
    /// The store of the negotiated encoding.
    store: Arc<Store>,
    start: Start,
    filter: Filter,
    timeout_seconds: Option<u64>,
    bookmarks: bool,
    form: Form,
    /// A consistent streaming list not proven yet.
    consistent: bool,
    /// The `Warning` of a stale cache served anyway (`cache.serve_stale`).
    warning: Option<http::HeaderValue>,
    /// What an error before the stream starts is written in.
    errors: ErrorEncoding,
    /// A streaming list to a client that takes gzip (`server.watchlist_compression`).
    gzip: bool,
}

/// Whether a watch can be served from the cache: its plan, or why not.
pub fn plan(
    cache: &Arc<ResourceCache>,
    ar: &ApiRequest,
    policy: &WatchPolicy,
) -> Result<Plan, PassReason> {
    let (store, warning) = super::read::serving_store(cache, ar)?;
    let form = match super::read::shape_for(ar) {
        Some(Shape::Object) => Form::Object,
        Some(Shape::Metadata) => Form::Metadata,
        _ => return Err(PassReason::MediaType),
    };
    let opts = ar.options.as_ref().map_err(|_| PassReason::Invalid)?;
    if opts.validate().is_err() {
        return Err(PassReason::Invalid);
    }
    let selectors = opts.selectors.as_ref().map_err(|_| PassReason::Invalid)?;
    // A consistent streaming list: served once proven ([`Plan::prove`]).
    let consistent = opts.resource_version.is_empty() && opts.send_initial_events == Some(true);
    if opts.resource_version.is_empty() && !consistent {
        return Err(PassReason::MostRecent);
    }
    let n = match opts.resource_version.as_str() {
        "" => 0,
        rv => rv.parse::<u64>().map_err(|_| PassReason::Invalid)?,
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
        (Some(false), 0) => Start::After(store.current().rv),
        (_, n) => Start::After(n),
    };
    if let Start::After(n) = start
        && store.cursor_after(n).is_none()
        && policy.on_too_old == OnTooOld::Pass
    {
        return Err(PassReason::TooOld);
    }
    let store = store.clone();
    Ok(Plan {
        errors: ar.errors,
        gzip: policy.compress_watch_lists && ar.gzip && opts.send_initial_events == Some(true),
        cache: cache.clone(),
        store,
        start,
        filter: Filter {
            namespace: ar.path.namespace.clone(),
            selectors: selectors.clone(),
        },
        timeout_seconds: opts.timeout_seconds,
        bookmarks: opts.allow_watch_bookmarks,
        form,
        consistent,
        warning,
    })
}

impl Plan {
    /// A consistent streaming list (no `resourceVersion`) is served only
    /// once `proofs` show the cache at least as fresh as the upstream was
    /// when it arrived: it becomes "not older than" that version, which
    /// [`Plan::settle`] knows how to serve. Others are left as they are.
    pub async fn prove(mut self, proofs: &Proofs) -> Result<Plan, PassReason> {
        if !self.consistent {
            return Ok(self);
        }
        let x = proofs
            .prove(&self.cache, &self.store, ConsistentKind::StreamingList)
            .await
            .map_err(super::read::unproven)?;
        if let Start::Initial { at_least, .. } = &mut self.start {
            *at_least = x;
        }
        self.consistent = false;
        Ok(self)
    }

    /// A streaming list asks for a state not older than N: waits for the
    /// cache to reach it, as the cacher does (`cache.wait_for_resource_version_seconds`);
    /// past that `read.on_too_new` says: pass through, or the apiserver's
    /// ERROR 504 event (what a tier of r8s behind its upstream answers).
    pub async fn settle(mut self, read: &super::read::ReadPolicy) -> Result<Plan, PassReason> {
        let Start::Initial { at_least, .. } = self.start else {
            return Ok(self);
        };
        if self.store.current().rv >= at_least || self.store.wait_for(at_least, read.wait).await {
            return Ok(self);
        }
        match read.on_too_new {
            OnTooNew::Pass => Err(PassReason::TooNew),
            OnTooNew::Timeout => {
                self.start = Start::TooLarge(at_least);
                Ok(self)
            }
        }
    }

    /// Starts the watcher (or answers 429 at `watch.max_watchers`).
    pub fn start(self, policy: &WatchPolicy, shutdown: &Signal) -> Response<Body> {
        if policy.active.fetch_add(1, Ordering::AcqRel) >= policy.max_watchers {
            policy.active.fetch_sub(1, Ordering::AcqRel);
            crate::metrics::watch_rejected();
            return Status::too_many_requests().into_response_as(self.errors);
        }
        let active = ActiveGuard(policy.active.clone());
        let timeout = match self.timeout_seconds {
            Some(t) => Duration::from_secs(t),
            None => policy.min_timeout + policy.min_timeout.mul_f64(fastrand::f64()),
        };
        let (tx, body) = body::channel(CHANNEL);
        let cache = self.cache;
        let w = Watcher {
            trigger: self.filter.trigger(self.store.indexes_nodes()),
            metrics: cache.watch_metrics(),
            cache,
            store: self.store,
            filter: self.filter,
            tx,
            bookmarks: self.bookmarks,
            form: self.form,
            policy: policy.clone(),
            shutdown: shutdown.clone(),
            counts: [0; 4],
            gz: self.gzip.then(StreamCrc::default),
        };
        let mut resp = crate::api::json_response(StatusCode::OK, body);
        let media = MediaType {
            encoding: w.store.encoding(),
            shape: Shape::Object,
        };
        resp.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(media.content_type(true)),
        );
        if let Some(w) = self.warning {
            resp.headers_mut().insert(http::header::WARNING, w);
        }
        if self.gzip {
            crate::api::media::mark_gzipped(resp.headers_mut());
        }
        tokio::spawn(w.run(self.start, timeout, active));
        resp
    }
}

/// Releases a slot of `watch.max_watchers` when the watcher ends.
struct ActiveGuard(Arc<AtomicUsize>);

impl Drop for ActiveGuard {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

struct Watcher {
    cache: Arc<ResourceCache>,
    /// The store it reads (of its encoding).
    store: Arc<Store>,
    filter: Filter,
    trigger: Option<Trigger>,
    tx: mpsc::Sender<Bytes>,
    bookmarks: bool,
    form: Form,
    policy: WatchPolicy,
    shutdown: Signal,
    metrics: Arc<WatchMetrics>,
    /// Events sent since the last flush to the metrics, by type.
    counts: [u64; 4],
    /// A gzip stream's CRC-32 so far (a streaming list to a client that
    /// takes gzip): one gzip member, the initial events spliced from
    /// compressed runs, each later event compressed once for all watchers,
    /// this watcher's own lines (bookmarks, errors) stored.
    gz: Option<StreamCrc>,
}

/// Where a watcher is.
struct Progress {
    /// The next event to read.
    cursor: Cursor,
    /// Every change up to this version has been read (the bookmark RV).
    rv: u64,
    /// The version of the last event or bookmark the client got.
    sent: u64,
    /// The version the watch started from: bookmarks go out only once the
    /// cache is past it (the cacher's rule; one may repeat the version of
    /// the event just sent).
    start: u64,
    /// The watch ends here.
    deadline: Instant,
    /// Set on shutdown: the watch closes here, after a final bookmark.
    drain_at: Option<Instant>,
}

impl Progress {
    fn stop_at(&self) -> Instant {
        self.drain_at
            .map_or(self.deadline, |d| d.min(self.deadline))
    }
}

fn type_index(t: EventKind) -> usize {
    match t {
        EventKind::Added => 0,
        EventKind::Modified => 1,
        EventKind::Deleted => 2,
    }
}

impl Watcher {
    /// The line this watcher sends for an event, per kube-apiserver's cacher:
    /// an object entering the filter is ADDED, one leaving it is DELETED (its
    /// previous state at the event's version). All are encoded once per event.
    fn line_for<'e>(&self, ev: &'e Event) -> Option<(&'e Bytes, EventKind)> {
        let kind = if self.filter.everything() {
            ev.kind
        } else {
            let cur = ev.kind != EventKind::Deleted && self.filter.passes(&ev.object);
            let old = ev.prev.as_ref().is_some_and(|p| self.filter.passes(p));
            match (cur, old) {
                (true, true) => ev.kind,
                (true, false) => EventKind::Added,
                (false, true) => EventKind::Deleted,
                (false, false) => return None,
            }
        };
        ev.line(self.form, kind).map(|l| (l, kind))
    }

    /// The `kind` and `apiVersion` of what this watcher is sent.
    fn sent_type(&self) -> (&str, String) {
        match self.form {
            Form::Object => (
                &self.cache.resource.kind,
                self.cache.resource.gvr.api_version(),
            ),
            Form::Metadata => ("PartialObjectMetadata", META_API_VERSION.to_string()),
        }
    }

    fn bookmark_line(&self, rv: u64) -> Bytes {
        self.bookmark(rv, false)
    }

    /// A BOOKMARK at `rv` in this watcher's encoding and form; `initial_end`:
    /// the one ending a streaming list's initial events (annotated, with the
    /// blueprint of an empty list). A protobuf bookmark is the upstream's own
    /// empty object of the type where one has been seen.
    fn bookmark(&self, rv: u64, initial_end: bool) -> Bytes {
        let (kind, api_version) = self.sent_type();
        if self.store.encoding() == Encoding::Json {
            return if initial_end {
                initial_events_end(kind, &api_version, rv)
            } else {
                bookmark(kind, &api_version, rv)
            };
        }
        let template = match self.form {
            Form::Object => self.store.empty_object(),
            // PartialObjectMetadata{1 ObjectMeta}: the type's empty metadata.
            Form::Metadata => self.store.empty_object().and_then(|raw| {
                let meta = pb::find(&raw, 1).ok().flatten()?;
                let mut m = bytes::BytesMut::new();
                pb::bytes_field(&mut m, 1, meta);
                Some(m.freeze())
            }),
        };
        let body = pb::bookmark(template.as_deref(), &api_version, kind, rv, initial_end);
        pb::watch_frame("BOOKMARK", &[&body])
    }

    /// An ERROR event carrying `s`, in this watcher's encoding.
    fn error_line(&self, s: &Status) -> Bytes {
        match self.store.encoding() {
            Encoding::Json => watch_line("ERROR", &s.to_bytes()),
            Encoding::Protobuf => pb::watch_frame("ERROR", &[&s.to_protobuf()]),
        }
    }

    /// A line of this watcher's own (a bookmark, an error) as it goes on
    /// the wire: as is, or in a gzip stream as stored deflate blocks.
    fn framed(&mut self, line: Bytes) -> Bytes {
        match &mut self.gz {
            Some(crc) => gzip::stored(&line, crc),
            None => line,
        }
    }

    /// An initial ADDED for a cached object, in this watcher's form.
    fn added_line(&self, o: &CachedObject) -> Bytes {
        o.watch_event("ADDED", self.form == Form::Metadata)
    }

    async fn run(mut self, start: Start, timeout: Duration, active: ActiveGuard) {
        self.metrics.started();
        let end = self.serve(start, timeout).await;
        if let Some(crc) = &self.gz
            && !matches!(end, WatchEnd::Client | WatchEnd::Error)
        {
            // A gzip stream ends whole, so the client reads a clean end (not
            // after a failure to compress: the client must see it broken).
            let end_of_stream = gzip::trailer(crc);
            let _ = tokio::time::timeout(Duration::from_secs(1), self.tx.send(end_of_stream)).await;
        }
        self.flush_counts();
        self.metrics.ended(end);
        drop(active);
    }

    fn flush_counts(&mut self) {
        self.metrics.sent(&self.counts);
        self.counts = [0; 4];
    }

    /// Hands a frame to the connection. A client that does not read makes
    /// this wait, never anyone else; it gives up when the watch must end or
    /// the log's tail passes `resume` (the events after it are gone).
    async fn send(&self, line: Bytes, p: &mut Progress, resume: Cursor) -> Result<(), WatchEnd> {
        let line = match self.tx.try_send(line) {
            Ok(()) => return Ok(()),
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(WatchEnd::Client),
            Err(mpsc::error::TrySendError::Full(line)) => line,
        };
        loop {
            tokio::select! {
                permit = self.tx.reserve() => {
                    let Ok(permit) = permit else { return Err(WatchEnd::Client) };
                    permit.send(line);
                    return Ok(());
                }
                _ = tokio::time::sleep(STALL_CHECK) => {
                    if !self.store.holds(resume) {
                        return Err(WatchEnd::TooOld);
                    }
                }
                _ = tokio::time::sleep_until(p.stop_at()) => {
                    return Err(if p.drain_at.is_some() { WatchEnd::Shutdown } else { WatchEnd::Timeout });
                }
                _ = self.shutdown.wait(), if p.drain_at.is_none() => {
                    p.drain_at = Some(self.drain_point());
                }
            }
        }
    }

    fn drain_point(&self) -> Instant {
        Instant::now() + self.policy.drain.mul_f64(fastrand::f64())
    }

    /// Ends a watcher the log's tail passed: the apiserver's ERROR 410, or
    /// (pass-through mode) a clean end, so the client resumes from its last
    /// version through r8s, which passes it to the upstream.
    async fn too_old(&mut self, p: &mut Progress) -> WatchEnd {
        if self.policy.on_too_old == OnTooOld::Gone {
            let s = Status::expired(format!(
                "too old resource version: {} ({})",
                p.sent,
                self.store.history_from()
            ));
            let line = self.error_line(&s);
            let line = self.framed(line);
            // Waits for room (the client may be stalled) until the watch would end anyway.
            tokio::select! {
                _ = self.tx.send(line) => {}
                _ = tokio::time::sleep_until(p.stop_at()) => {}
            }
        }
        WatchEnd::TooOld
    }

    /// Ends a streaming list whose version the cache did not reach in time
    /// with the cacher's ERROR event (504 "Too large resource version").
    async fn too_large(&mut self, asked: u64) -> WatchEnd {
        let s = Status::too_large_resource_version(asked, self.store.current().rv);
        let line = self.error_line(&s);
        let line = self.framed(line);
        let _ = self.tx.send(line).await;
        WatchEnd::TooNew
    }

    async fn serve(&mut self, start: Start, timeout: Duration) -> WatchEnd {
        let store = self.store.clone();
        let mut rx = store.subscribe();
        let guard = self.trigger.map(|t| store.register(t));
        let mut p = Progress {
            cursor: 0,
            rv: 0,
            sent: 0,
            start: 0,
            deadline: Instant::now() + timeout,
            drain_at: None,
        };
        if self.gz.is_some()
            && self
                .tx
                .send(Bytes::from_static(&gzip::HEADER))
                .await
                .is_err()
        {
            return WatchEnd::Client;
        }
        match start {
            Start::TooLarge(n) => return self.too_large(n).await,
            Start::After(n) => {
                p.rv = n;
                p.sent = n;
                p.start = n;
                // A version the cache has not reached yet (the client listed
                // elsewhere): wait for it, as the apiserver does, so that no
                // event up to it is sent.
                if store.current().rv < n {
                    tokio::select! {
                        _ = rx.wait_for(|rv| *rv >= n) => {}
                        _ = tokio::time::sleep_until(p.deadline) => return WatchEnd::Timeout,
                        _ = self.shutdown.wait() => return WatchEnd::Shutdown,
                    }
                }
                match store.cursor_after(n) {
                    Some(c) => p.cursor = c,
                    None => return self.too_old(&mut p).await,
                }
            }
            Start::Initial {
                at_least,
                end_bookmark,
            } => {
                if store.current().rv < at_least {
                    // Only when the plan was not settled: answer as if it had been.
                    return self.too_large(at_least).await;
                }
                rx.borrow_and_update();
                let (v, c) = store.snapshot_with_cursor();
                p.cursor = c;
                let prefix = self
                    .filter
                    .namespace
                    .as_ref()
                    .map(|ns| format!("{ns}/"))
                    .unwrap_or_default();
                let from: Arc<str> = Arc::from(prefix.as_str());
                let objects = v
                    .objects
                    .range(from..)
                    .take_while(|(k, _)| k.starts_with(&prefix))
                    .map(|(_, o)| o)
                    .filter(|o| self.filter.passes(o));
                if self.gz.is_some() {
                    let metadata = self.form == Form::Metadata;
                    let items: Vec<AddedItem> = objects
                        .map(|o| AddedItem {
                            object: o.clone(),
                            metadata,
                        })
                        .collect();
                    // Boxed: its state (a compressor's) would otherwise be
                    // part of every watcher's task, idle plain ones too.
                    if let Err(e) = Box::pin(self.send_compressed(items, &mut p, c)).await {
                        return self.ended(e, &mut p).await;
                    }
                } else {
                    for o in objects {
                        if let Err(e) = self.send(self.added_line(o), &mut p, c).await {
                            return self.ended(e, &mut p).await;
                        }
                        self.counts[0] += 1;
                    }
                }
                if end_bookmark {
                    let line = self.bookmark(v.rv, true);
                    let line = self.framed(line);
                    if let Err(e) = self.send(line, &mut p, c).await {
                        return self.ended(e, &mut p).await;
                    }
                    self.counts[3] += 1;
                }
                p.rv = v.rv;
                p.sent = v.rv;
                p.start = at_least;
                self.flush_counts();
            }
        }
        let interval = self.policy.bookmark_interval;
        let mut next_bookmark = Instant::now() + interval;
        // Like the cacher, no bookmark is scheduled when the point 2 s before
        // the end has already passed (watches of 2 s or less get none).
        let mut final_bookmark = p
            .deadline
            .checked_sub(FINAL_BOOKMARK_MARGIN)
            .is_none_or(|t| t <= Instant::now());
        let mut next_lag_sample = Instant::now();
        // Made once and re-armed, not made anew per event: each is a
        // registration (timer wheel, shutdown channel, the connection's
        // channel) that every watcher of a busy resource would otherwise
        // redo on every event.
        let mut wake = std::pin::pin!(tokio::time::sleep_until(p.stop_at()));
        let mut stop = std::pin::pin!(self.shutdown.clone().wait_owned());
        let tx = self.tx.clone();
        let mut closed = std::pin::pin!(tx.closed());
        loop {
            if let Err(e) = self.catch_up(&mut p, &mut next_lag_sample).await {
                return self.ended(e, &mut p).await;
            }
            let now = Instant::now();
            if now >= p.deadline {
                return WatchEnd::Timeout;
            }
            if p.drain_at.is_some_and(|d| now >= d) {
                if self.bookmarks {
                    // Unconditionally: the client resumes from it elsewhere.
                    let line = self.bookmark_line(p.rv);
                    let line = self.framed(line);
                    let _ = tokio::time::timeout(Duration::from_secs(1), self.tx.send(line)).await;
                    self.counts[3] += 1;
                }
                return WatchEnd::Shutdown;
            }
            if self.bookmarks {
                let near_end = !final_bookmark && p.deadline - now <= FINAL_BOOKMARK_MARGIN;
                if now >= next_bookmark || near_end {
                    final_bookmark |= near_end;
                    next_bookmark = now + interval;
                    if p.rv > p.start {
                        let line = self.bookmark_line(p.rv);
                        let (line, c) = (self.framed(line), p.cursor);
                        if let Err(e) = self.send(line, &mut p, c).await {
                            return self.ended(e, &mut p).await;
                        }
                        self.counts[3] += 1;
                        p.sent = p.rv;
                    }
                }
            }
            self.flush_counts();
            let mut wake_at = p.stop_at();
            if self.bookmarks {
                wake_at = wake_at.min(next_bookmark);
                if !final_bookmark {
                    wake_at = wake_at.min(p.deadline - FINAL_BOOKMARK_MARGIN);
                }
            }
            let woken = async {
                match &guard {
                    Some(g) => {
                        g.notify.notified().await;
                        true
                    }
                    None => rx.changed().await.is_ok(),
                }
            };
            if wake.deadline() != wake_at {
                wake.as_mut().reset(wake_at);
            }
            tokio::select! {
                alive = woken => if !alive { return WatchEnd::Shutdown },
                _ = &mut wake => {}
                _ = &mut closed => return WatchEnd::Client,
                _ = &mut stop, if p.drain_at.is_none() => {
                    p.drain_at = Some(self.drain_point());
                }
            }
        }
    }

    /// Sends a gzip streaming list's initial events: the compressed runs
    /// gzip lists keep (of the events' form), spliced where they fit.
    async fn send_compressed(
        &mut self,
        items: Vec<AddedItem>,
        p: &mut Progress,
        resume: Cursor,
    ) -> Result<(), WatchEnd> {
        let n = items.len() as u64;
        let mut list = GzipList::initial_events(items, self.filter.selectors.is_empty());
        loop {
            match list.next_chunk() {
                Ok(Some(chunk)) => {
                    if !chunk.is_empty() {
                        self.send(chunk, p, resume).await?;
                    }
                    if list.busy() {
                        tokio::task::yield_now().await;
                    }
                }
                Ok(None) => break,
                Err(e) => {
                    tracing::error!(error = %e, "compressing a streaming list failed; ending it");
                    return Err(WatchEnd::Error);
                }
            }
        }
        if let Some(crc) = &mut self.gz {
            crc.extend(&list.take_crc());
        }
        self.counts[0] += n;
        Ok(())
    }

    /// Sends everything the log holds for this watcher after its cursor.
    async fn catch_up(
        &mut self,
        p: &mut Progress,
        next_lag_sample: &mut Instant,
    ) -> Result<(), WatchEnd> {
        let store = self.store.clone();
        let mut first = true;
        loop {
            let Some((batch, current)) = store.read(p.cursor, self.trigger, BATCH) else {
                return Err(WatchEnd::TooOld);
            };
            if first {
                first = false;
                let now = Instant::now();
                if now >= *next_lag_sample {
                    *next_lag_sample = now + Duration::from_secs(1);
                    self.metrics
                        .lag
                        .record((batch.behind + batch.events.len() as u64) as f64);
                }
            }
            for ev in &batch.events {
                if let Some((line, kind)) = self.line_for(ev) {
                    let frame = match (&mut self.gz, ev.gzip_line(self.form, kind)) {
                        (Some(crc), Some(block)) => {
                            crc.append(&block.crc);
                            block.deflate.clone()
                        }
                        _ => line.clone(),
                    };
                    self.send(frame, p, batch.next).await?;
                    self.counts[type_index(kind)] += 1;
                    p.sent = ev.rv;
                    if ev.seq % SAMPLE_EVERY == 0 {
                        self.metrics
                            .delivery
                            .record(ev.arrived.elapsed().as_secs_f64());
                    }
                }
                p.rv = p.rv.max(ev.rv);
            }
            p.cursor = batch.next;
            if batch.caught_up {
                p.rv = p.rv.max(current);
                return Ok(());
            }
        }
    }

    /// Finishes a watch that could not go on.
    async fn ended(&mut self, why: WatchEnd, p: &mut Progress) -> WatchEnd {
        match why {
            WatchEnd::TooOld => self.too_old(p).await,
            other => other,
        }
    }
}
