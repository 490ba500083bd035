//! The reflector: keeps one resource's cache equal to the upstream.
//!
//! A state machine: `List` (paginated, at one consistent resource version)
//! → `Watch` from that version (with bookmarks) → on stream end `Watch` again
//! from the last version seen; on 410 Gone, malformed data or a failure,
//! `List` again. Backoff with jitter lives outside the states. Whether the
//! cache serves meanwhile is the store's [`Serving`] state, which the
//! reflector sets: ready once listed, evicted over its byte budget (relisted
//! after a pause), or uncacheable (the reflector stops).
//!
//! Silence is a failure too: every answer, frame and clean end marks the
//! store's [`crate::cache::staleness::Staleness`]; watches are asked to end
//! within half of `cache.max_staleness_seconds`, and one still open and
//! silent past that (a partition that resets nothing) is abandoned and
//! resumed, as is a request or list page that stalls; with several upstream
//! servers, the silent one is failed over.
//!
//! The cache never goes back in time: a list or streaming list older than
//! the version the cache has applied (a server behind the one it followed,
//! after a failover) is refused and retried, and an event older than the
//! stream's last version is malformed data (relist). So no watcher is ever
//! handed a version lower than one it was sent.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::Duration;

use bytes::BytesMut;
use http::{Request, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use imbl::OrdMap;

use super::decode::{DecodeError, Decoded, Decoder};
use super::{ServedBy, Upstream};
use crate::api::ApiResource;
use crate::api::media::{self, Encoding};
use crate::api::query;
use crate::cache::object::{ObjectError, Objects, TypeInfo};
use crate::cache::store::{Change, Restored, Serving};
use crate::cache::writer::Writer;
use crate::codec::gunzip::{Gunzip, GunzipError, is_gzip};
use crate::metrics;
use crate::shutdown::Signal;

/// The reflector's next step.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    /// (Re)list, then watch.
    List,
    /// Watch from this resource version.
    Watch(u64),
}

/// How long an evicted cache waits before relisting.
const OVER_BUDGET_PAUSE: Duration = Duration::from_secs(60);

/// Why a list or watch step failed, and what follows.
#[derive(Debug, thiserror::Error)]
enum StepError {
    /// 410: the version is gone; relist.
    #[error("resource version expired")]
    Expired,
    /// Undecodable data; relist (never serve a half-applied state).
    #[error("malformed upstream data: {0}")]
    Malformed(String),
    /// Resource versions are not integers; stop caching.
    #[error("{0}")]
    Uncacheable(ObjectError),
    /// Transport or status failure; back off and retry the same step.
    #[error("{0}")]
    Failed(String),
    /// The cache grew over its byte budget; evict it.
    #[error("over the byte budget")]
    OverBudget,
    /// The upstream rejects or ignores streaming lists; use paged LISTs.
    #[error("streaming lists unsupported: {0}")]
    StreamingUnsupported(String),
    /// The upstream went silent: no answer, or a watch past its own
    /// deadline (a silent partition); fail over and reconnect at once (each
    /// attempt has already waited out its bound).
    #[error("{0}")]
    Silent(String),
    /// The upstream's state is older than the cache's (a server behind the
    /// one the cache followed); keep the cache, back off and retry.
    #[error("{0}")]
    Behind(String),
    /// A consistency check found the cache diverged from the upstream; relist.
    #[error("the cache diverged from the upstream")]
    Diverged,
}

impl From<DecodeError> for StepError {
    fn from(e: DecodeError) -> Self {
        match e {
            DecodeError::Malformed(m) => StepError::Malformed(m),
            DecodeError::Uncacheable(e) => StepError::Uncacheable(e),
            DecodeError::Expired => StepError::Expired,
            DecodeError::Failed(m) => StepError::Failed(format!("watch ERROR event: {m}")),
        }
    }
}

/// How long the initial phase of a streaming list may go without an event
/// before the upstream is taken to ignore `sendInitialEvents`.
const INITIAL_EVENTS_QUIET: Duration = Duration::from_secs(10);

/// One event of a streaming list's initial phase into `objects`; `Some(rv)` at its end.
fn initial_event(ev: Decoded, objects: &mut Objects) -> Result<Option<u64>, StepError> {
    match ev {
        Decoded::Put("ADDED", o) => {
            objects.insert(o.key.clone(), Arc::new(o));
            Ok(None)
        }
        Decoded::Bookmark { rv, end, .. } => Ok(end.then_some(rv)),
        Decoded::Put(kind, _) => Err(StepError::StreamingUnsupported(format!(
            "{kind} event before the initial-events-end bookmark"
        ))),
        Decoded::Deleted(_) => Err(StepError::StreamingUnsupported(
            "DELETED event before the initial-events-end bookmark".into(),
        )),
    }
}

/// A gzip body from the upstream that cannot be read: the stream is
/// broken (a relist or a resumed watch follows, never a half-read state).
fn gunzip_failed(e: GunzipError) -> StepError {
    StepError::Failed(e.to_string())
}

/// Tunables.
#[derive(Debug, Clone)]
pub struct ReflectorConfig {
    /// Items per LIST page.
    pub page_size: usize,
    /// Try streaming lists (`sendInitialEvents`) before paged LISTs.
    pub streaming_lists: bool,
    /// What the store holds: the upstream's JSON, or its protobuf.
    pub encoding: Encoding,
}

/// Keeps `store` equal to the upstream's state of `resource`.
pub struct Reflector {
    upstream: Arc<Upstream>,
    resource: ApiResource,
    decoder: Decoder,
    store: Writer,
    config: ReflectorConfig,
    label: metrics::StoreLabels,
    /// Its per-event metrics, looked up once.
    series: metrics::ReflectorSeries,
    /// The newest resource version applied (where a failed watch resumes).
    last_rv: u64,
    /// Whether to try a streaming list next (cleared when the upstream refuses them).
    streaming: bool,
    /// Whether the current streaming list is past its initial events (a
    /// watch now): a failure from here resumes from `last_rv`, no relist.
    watching: bool,
    /// The upstream server the current request or stream went to (the one
    /// to fail over from if it goes silent; `usize::MAX`: none yet). An
    /// atomic only because requests borrow the reflector shared.
    server: AtomicUsize,
    /// Whether a list or watch was answered 200 since the last failure: a
    /// failure after that (a watch cut after it ran) backs off from the
    /// start again, not from where the last outage left the backoff.
    answered: AtomicBool,
    /// A state to start from (a snapshot being loaded), instead of a list.
    warm: Option<tokio::task::JoinHandle<Option<Restored>>>,
    /// Whether the store holds a restored state its watch has not yet
    /// resumed from (it serves once the upstream answers).
    resuming: AtomicBool,
    /// Rung when the cache must relist (a consistency check found it diverged).
    relist: Arc<tokio::sync::Notify>,
    /// Whether the next relist follows a divergence (its state is a
    /// [`Change::Reset`]: watchers relist too).
    diverged: bool,
}

impl Reflector {
    /// Publishes the cache's size, version and event log after a change.
    fn record(&self, v: &crate::cache::store::Version) {
        self.series.state(
            v.objects.len(),
            v.rv,
            self.store.store().bytes(),
            self.store.store().history_size(),
        );
    }

    /// A reflector for `resource` feeding `store`.
    pub fn new(
        upstream: Arc<Upstream>,
        resource: ApiResource,
        store: Writer,
        config: ReflectorConfig,
    ) -> Self {
        let info = TypeInfo::of(&resource, config.encoding);
        let label = metrics::StoreLabels {
            resource: resource.gvr.to_string(),
            encoding: match config.encoding {
                Encoding::Json => "json",
                Encoding::Protobuf => "protobuf",
            },
        };
        let streaming = config.streaming_lists;
        Reflector {
            upstream,
            resource,
            decoder: Decoder {
                info,
                encoding: config.encoding,
            },
            store,
            config,
            series: metrics::ReflectorSeries::new(&label),
            label,
            last_rv: 0,
            streaming,
            watching: false,
            server: AtomicUsize::new(usize::MAX),
            answered: AtomicBool::new(false),
            warm: None,
            resuming: AtomicBool::new(false),
            relist: Arc::new(tokio::sync::Notify::new()),
            diverged: false,
        }
    }

    /// The change a relist's state at `rv` makes: a [`Change::Reset`] after
    /// a divergence, a [`Change::Replace`] otherwise.
    fn relisted(&mut self, objects: Objects, rv: u64) -> Change {
        if std::mem::take(&mut self.diverged) {
            Change::Reset(objects, rv)
        } else {
            Change::Replace(objects, rv)
        }
    }

    /// Starts from the state `warm` loads, if it loads one, and resumes the
    /// upstream watch from its version instead of listing.
    pub fn warm_from(mut self, warm: tokio::task::JoinHandle<Option<Restored>>) -> Self {
        self.warm = Some(warm);
        self
    }

    /// Relists whenever `relist` is rung (by the consistency check).
    pub fn relist_on(mut self, relist: Arc<tokio::sync::Notify>) -> Self {
        self.relist = relist;
        self
    }

    /// The upstream answered: a store restored from a snapshot serves now.
    fn answered_ok(&mut self) {
        self.answered.store(true, Ordering::Relaxed);
        if self.resuming.swap(false, Ordering::Relaxed) {
            self.store.resumed();
            self.record(&self.store.store().current());
            tracing::info!(resource = %self.label, rv = self.last_rv, "watch resumed from the snapshot's version; serving");
        }
    }

    /// How long the upstream may take to answer a request or send the next
    /// frame of a list: a quarter of `cache.max_staleness_seconds`.
    fn patience(&self) -> Duration {
        match self.store.store().staleness().max() {
            m if m.is_zero() => Duration::from_secs(60),
            m => (m / 4).max(Duration::from_secs(1)),
        }
    }

    /// The `timeoutSeconds` of the next watch: a quarter to a half of
    /// `cache.max_staleness_seconds`, so that a healthy upstream's watches
    /// end (and so speak) well within it however idle the resource.
    fn watch_timeout(&self) -> u64 {
        let quarter = self.patience().as_secs().max(1);
        quarter + fastrand::u64(..quarter)
    }

    /// `GET {collection}?{query}` with r8s's credentials, any status; a
    /// silence past [`Reflector::patience`] is an error.
    async fn request(&self, query: &str) -> Result<http::Response<Incoming>, StepError> {
        let patience = self.patience();
        let at = self.upstream.preferred();
        self.server.store(at, Ordering::Relaxed);
        let resp = match tokio::time::timeout(patience, self.send(query)).await {
            Err(_) => {
                return Err(StepError::Silent(format!(
                    "the upstream did not answer within {patience:?}"
                )));
            }
            // A server that takes connections and drops them (a balancer
            // with nothing behind it, a crashing process): a list or watch
            // has no effects, so the next attempt goes to the next server.
            Ok(Err(e)) => {
                self.upstream.fail_over(at, "its requests fail");
                return Err(e);
            }
            Ok(Ok(resp)) => resp,
        };
        if let Some(ServedBy(i)) = resp.extensions().get::<ServedBy>() {
            self.server.store(*i, Ordering::Relaxed);
        }
        self.store.heard();
        Ok(resp)
    }

    async fn send(&self, query: &str) -> Result<http::Response<Incoming>, StepError> {
        let uri = format!("{}?{query}", self.resource.gvr.collection_path());
        let watch = query.starts_with("watch=1");
        let accept = match (self.config.encoding, self.resource.gvr.is_builtin(), watch) {
            (Encoding::Json, _, _) => "application/json",
            (Encoding::Protobuf, true, _) => media::PROTOBUF,
            (Encoding::Protobuf, false, false) => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1"
            }
            (Encoding::Protobuf, false, true) => {
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
            }
        };
        let mut req = Request::get(uri).header("accept", accept);
        if self.upstream.compression() {
            req = req.header("accept-encoding", "gzip");
        }
        let (parts, ()) = req
            .body(())
            .map_err(|e| StepError::Failed(e.to_string()))?
            .into_parts();
        self.upstream
            .send(parts, None, crate::upstream::Creds::Own)
            .await
            .map_err(|e| StepError::Failed(e.to_string()))
    }

    /// A 200 in the encoding asked for: an upstream that answers a
    /// protobuf request in JSON (a resource without protobuf, a server that
    /// does not speak it) makes this encoding uncacheable, not a relist loop.
    fn check_encoding(&self, resp: &http::Response<Incoming>) -> Result<(), StepError> {
        if self.config.encoding == Encoding::Json {
            return Ok(());
        }
        let ctype = resp
            .headers()
            .get(http::header::CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .unwrap_or("");
        if ctype.starts_with(media::PROTOBUF) {
            Ok(())
        } else {
            Err(StepError::Uncacheable(ObjectError::Malformed(format!(
                "the upstream answers protobuf requests with Content-Type {ctype:?}"
            ))))
        }
    }

    /// A list or watch request: 200, or the error its status means.
    async fn get(&mut self, query: &str) -> Result<http::Response<Incoming>, StepError> {
        let resp = self.request(query).await?;
        match resp.status() {
            StatusCode::OK => {
                self.check_encoding(&resp)?;
                self.answered_ok();
                Ok(resp)
            }
            StatusCode::GONE => Err(StepError::Expired),
            s => Err(StepError::Failed(format!(
                "GET {}: HTTP {s}",
                self.resource.gvr.collection_path()
            ))),
        }
    }

    /// Paginated LIST at one consistent version; returns the objects and that version.
    async fn list(&mut self) -> Result<(Objects, u64), StepError> {
        self.watching = false;
        let mut objects = OrdMap::new();
        let mut cont = String::new();
        // One page buffer reused for every page: objects are copied out at
        // their exact size, so no page-sized garbage is left behind.
        let mut scratch: Vec<u8> = Vec::new();
        let mut first = true;
        loop {
            let limit = self.config.page_size.to_string();
            let mut pairs = vec![("limit", limit.as_str())];
            if !cont.is_empty() {
                pairs.push(("continue", cont.as_str()));
            }
            let q = query::encode(pairs);
            let resp = self.get(&q).await?;
            let mut gunzip = is_gzip(resp.headers()).then(Gunzip::new);
            let mut resp = resp.into_body();
            scratch.clear();
            let patience = self.patience();
            loop {
                let frame = tokio::time::timeout(patience, resp.frame())
                    .await
                    .map_err(|_| {
                        StepError::Silent(format!("a LIST page stalled for {patience:?}"))
                    })?;
                let Some(frame) = frame else { break };
                self.store.heard();
                if let Ok(data) = frame
                    .map_err(|e| StepError::Failed(e.to_string()))?
                    .into_data()
                {
                    match &mut gunzip {
                        Some(g) => g.push(&data, &mut scratch).map_err(gunzip_failed)?,
                        None => scratch.extend_from_slice(&data),
                    }
                }
            }
            if let Some(g) = &mut gunzip {
                g.finish().map_err(gunzip_failed)?;
            }
            let (rv_s, next) = self.decoder.page(&scratch, &mut objects, &mut first)?;
            let rv: u64 = rv_s.parse().map_err(|_| {
                StepError::Uncacheable(ObjectError::BadResourceVersion(rv_s.to_string()))
            })?;
            match next {
                Some(c) if !c.is_empty() => cont = c,
                _ => {
                    self.not_behind(rv, "a LIST")?;
                    return Ok((objects, rv));
                }
            }
        }
    }

    /// One watch stream from `rv`; returns the last version seen when it ends cleanly.
    async fn watch(&mut self, rv: u64, shutdown: &Signal) -> Result<u64, StepError> {
        let timeout = self.watch_timeout();
        let q = format!(
            "watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds={timeout}"
        );
        let resp = self.get(&q).await?;
        let gzip = is_gzip(resp.headers());
        self.read_stream(resp.into_body(), gzip, rv, None, timeout, shutdown)
            .await
    }

    /// A streaming list (`sendInitialEvents=true`, Kubernetes 1.32+): the
    /// state as ADDED events up to a bookmark marked `initial-events-end`,
    /// applied at once, then the same stream goes on as a watch. The upstream
    /// is spared the LIST's memory. It asks for a state not older than the
    /// one the cache has (any state, the first time), which kube-apiserver
    /// and an upstream r8s both serve from their watch caches: a tier of r8s
    /// costs the apiserver nothing.
    async fn stream_list(&mut self, shutdown: &Signal) -> Result<u64, StepError> {
        let timeout = self.watch_timeout();
        self.watching = false;
        // Not older than what the cache holds: a proof may have moved the
        // store past what this reflector applied.
        let q = format!(
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={}&allowWatchBookmarks=true&timeoutSeconds={timeout}",
            self.last_rv.max(self.store.store().current().rv)
        );
        let resp = self.request(&q).await?;
        match resp.status() {
            StatusCode::OK => {
                self.check_encoding(&resp)?;
                self.answered_ok();
            }
            s if s.is_client_error()
                && s != StatusCode::GONE
                && s != StatusCode::TOO_MANY_REQUESTS =>
            {
                return Err(StepError::StreamingUnsupported(format!("HTTP {s}")));
            }
            s => return Err(StepError::Failed(format!("streaming list: HTTP {s}"))),
        }
        let gzip = is_gzip(resp.headers());
        self.read_stream(
            resp.into_body(),
            gzip,
            0,
            Some(OrdMap::new()),
            timeout,
            shutdown,
        )
        .await
    }

    /// Reads watch events line by line from `body`, a watch asked to end
    /// after `timeout_s`: one still open a while past that is silent, not
    /// idle (a partition that sends nothing, not even a reset). With
    /// `initial`, ADDED events first build a new state, replaced at once at
    /// the end bookmark. A `gzip` body is inflated as it arrives.
    async fn read_stream(
        &mut self,
        mut body: Incoming,
        gzip: bool,
        mut rv: u64,
        mut initial: Option<Objects>,
        timeout_s: u64,
        shutdown: &Signal,
    ) -> Result<u64, StepError> {
        let mut buf = BytesMut::new();
        let mut gunzip = gzip.then(|| (Gunzip::new(), Vec::new()));
        // An upstream that ignores sendInitialEvents never sends the end bookmark.
        let mut quiet = Box::pin(tokio::time::sleep(INITIAL_EVENTS_QUIET));
        let overdue = Duration::from_secs(timeout_s) + self.patience();
        let deadline = tokio::time::sleep(overdue);
        tokio::pin!(deadline);
        let relist = self.relist.clone();
        loop {
            let frame = tokio::select! {
                f = body.frame() => f,
                _ = shutdown.wait() => return Ok(rv),
                _ = relist.notified() => return Err(StepError::Diverged),
                _ = &mut quiet, if initial.is_some() => {
                    return Err(StepError::StreamingUnsupported("no initial-events-end bookmark".into()));
                }
                _ = &mut deadline => {
                    return Err(StepError::Silent(format!(
                        "a watch asked to end after {timeout_s} s was still open and silent after {overdue:?}"
                    )));
                }
            };
            self.store.heard();
            let Some(frame) = frame else {
                if let Some((g, _)) = &mut gunzip {
                    g.finish().map_err(gunzip_failed)?;
                }
                return if initial.is_some() {
                    Err(StepError::StreamingUnsupported(
                        "stream ended before the initial-events-end bookmark".into(),
                    ))
                } else {
                    Ok(rv)
                };
            };
            let frame = frame.map_err(|e| StepError::Failed(e.to_string()))?;
            let Ok(data) = frame.into_data() else {
                continue;
            };
            match &mut gunzip {
                Some((g, plain)) => {
                    plain.clear();
                    g.push(&data, plain).map_err(gunzip_failed)?;
                    buf.extend_from_slice(plain);
                }
                None => buf.extend_from_slice(&data),
            }
            while let Some(unit) = self.decoder.next_unit(&mut buf) {
                let ev = self.decoder.event(&unit, self.store.wants_empty_object())?;
                if let Decoded::Bookmark { empty: Some(e), .. } = &ev {
                    self.store.learn_empty_object(e);
                }
                let Some(objects) = initial.as_mut() else {
                    rv = self.apply_event(ev, rv)?;
                    continue;
                };
                quiet
                    .as_mut()
                    .reset(tokio::time::Instant::now() + INITIAL_EVENTS_QUIET);
                if let Some(end) = initial_event(ev, objects)? {
                    self.not_behind(end, "a streaming list")?;
                    let objects = initial.take().expect("in the initial phase");
                    let change = self.relisted(objects, end);
                    let v = self.store.apply(vec![change]);
                    let fits = self.store.fit_budget();
                    self.record(&v);
                    tracing::info!(resource = %self.label, objects = v.objects.len(), rv = end, "cache synced (streaming list)");
                    self.last_rv = end;
                    self.watching = true;
                    rv = end;
                    if !fits {
                        return Err(StepError::OverBudget);
                    }
                }
            }
        }
    }

    /// Refuses an upstream state at `rv` older than the one applied.
    fn not_behind(&self, rv: u64, what: &str) -> Result<(), StepError> {
        // The store may be ahead of what this reflector applied: a proof
        // stamped it (`Stamper::advance_to`).
        let applied = self.last_rv.max(self.store.store().current().rv);
        if rv < applied {
            return Err(StepError::Behind(format!(
                "{what} answered at resource version {rv}, older than the cache's {applied}"
            )));
        }
        Ok(())
    }

    fn apply_event(&mut self, ev: Decoded, rv: u64) -> Result<u64, StepError> {
        // Versions only go forward in a watch; a DELETED a relist found
        // carries the relist's version, which its last change may share.
        let went_back = match &ev {
            Decoded::Put(_, o) => (o.rv <= self.last_rv).then_some(o.rv),
            Decoded::Deleted(o) => (o.rv < self.last_rv).then_some(o.rv),
            Decoded::Bookmark { .. } => None,
        };
        if let Some(at) = went_back {
            return Err(StepError::Malformed(format!(
                "an event at resource version {at} after {}: versions went back",
                self.last_rv
            )));
        }
        let change = match ev {
            Decoded::Put(kind, o) => {
                self.series.event(kind);
                Change::Put(Arc::new(o))
            }
            Decoded::Deleted(o) => {
                self.series.event("DELETED");
                Change::Delete(Arc::new(o))
            }
            Decoded::Bookmark { rv, .. } => {
                self.series.event("BOOKMARK");
                Change::Progress(rv)
            }
        };
        let v = self.store.apply(vec![change]);
        // Trimmed first, so the sizes recorded are the ones kept.
        let fits = self.store.fit_budget();
        self.record(&v);
        self.last_rv = v.rv.max(rv);
        if !fits {
            return Err(StepError::Failed(
                "the cache grew over its byte budget".into(),
            ));
        }
        Ok(self.last_rv)
    }

    /// After a (re)list: an evicted cache that fits its budget again serves again.
    fn listed(&mut self) {
        if !self.store.fit_budget() {
            return; // evicted again at the top of the loop
        }
        if self.store.store().serving() == Serving::OverBudget {
            tracing::info!(resource = %self.label, "cache fits its byte budget again; serving");
        }
        self.store.clear_over_budget();
        metrics::over_budget(&self.label, false);
    }

    /// The step after a failure of `state`: a watch (a streaming list past
    /// its initial events included) resumes from the last version applied;
    /// a list starts again.
    fn resume(&self, state: State) -> State {
        match state {
            State::Watch(_) => {
                metrics::watch_restart(&self.label);
                State::Watch(self.last_rv)
            }
            State::List if self.watching => {
                metrics::watch_restart(&self.label);
                State::Watch(self.last_rv)
            }
            State::List => State::List,
        }
    }

    /// Runs until shutdown (or for good once the resource proves uncacheable).
    pub async fn run(mut self, shutdown: Signal) {
        metrics::cache_series(&self.label);
        let mut state = State::List;
        if let Some(warm) = self.warm.take() {
            let restored = tokio::select! {
                r = warm => r.ok().flatten(),
                _ = shutdown.wait() => return,
            };
            if let Some(r) = restored {
                let rv = r.rv;
                let v = self.store.restore(r);
                if self.store.store().serving() == Serving::Ready {
                    // cache.serve_stale: served from the snapshot already.
                    self.record(&v);
                }
                self.last_rv = rv;
                self.resuming.store(true, Ordering::Relaxed);
                state = State::Watch(rv);
            }
        }
        let mut backoff = Duration::from_millis(200);
        loop {
            if shutdown.fired() {
                return;
            }
            if !self.store.fit_budget() {
                tracing::warn!(
                    resource = %self.label,
                    bytes = self.store.store().current().bytes,
                    "cache over its byte budget (cache.max_bytes_*); evicted, its requests pass through; retrying in 60 s"
                );
                self.store.evict_over_budget();
                metrics::cache_synced(&self.label, false);
                metrics::over_budget(&self.label, true);
                tokio::select! {
                    _ = tokio::time::sleep(OVER_BUDGET_PAUSE) => {}
                    _ = shutdown.wait() => return,
                }
                state = State::List;
                continue;
            }
            let result = match state {
                State::List if self.streaming => match self.stream_list(&shutdown).await {
                    Ok(last) => {
                        self.listed();
                        metrics::watch_restart(&self.label);
                        Ok(State::Watch(last))
                    }
                    Err(e) => Err(e),
                },
                State::List => match self.list().await {
                    Ok((objects, rv)) => {
                        let change = self.relisted(objects, rv);
                        let v = self.store.apply(vec![change]);
                        self.listed();
                        self.record(&v);
                        tracing::info!(resource = %self.label, objects = v.objects.len(), rv, "cache synced");
                        self.last_rv = rv;
                        Ok(State::Watch(rv))
                    }
                    Err(e) => Err(e),
                },
                State::Watch(rv) => match self.watch(rv, &shutdown).await {
                    Ok(last) => {
                        metrics::watch_restart(&self.label);
                        Ok(State::Watch(last))
                    }
                    Err(e) => Err(e),
                },
            };
            state = match result {
                Ok(next) => {
                    backoff = Duration::from_millis(200);
                    next
                }
                // Evicted at the top of the loop, before anything else is served.
                Err(StepError::OverBudget) => State::List,
                Err(StepError::StreamingUnsupported(why)) => {
                    tracing::info!(resource = %self.label, %why, "upstream does not serve streaming lists; using paged LISTs");
                    self.streaming = false;
                    State::List
                }
                Err(StepError::Expired) => {
                    if self.resuming.load(Ordering::Relaxed) {
                        tracing::info!(resource = %self.label, rv = self.last_rv, "the snapshot's version is compacted upstream (410); relisting");
                    }
                    metrics::relist(&self.label, "expired");
                    State::List
                }
                Err(StepError::Diverged) => {
                    metrics::relist(&self.label, "diverged");
                    self.diverged = true;
                    State::List
                }
                Err(StepError::Malformed(m)) => {
                    tracing::warn!(resource = %self.label, error = %m, "malformed upstream data; relisting");
                    metrics::relist(&self.label, "malformed");
                    State::List
                }
                Err(StepError::Uncacheable(e)) => {
                    tracing::warn!(resource = %self.label, error = %e, "not cacheable; its requests pass through");
                    self.store.set_uncacheable();
                    metrics::cache_synced(&self.label, false);
                    return;
                }
                Err(StepError::Silent(m)) => {
                    tracing::warn!(resource = %self.label, error = %m, stale_for = ?self.store.store().staleness().since(), "upstream silent; reconnecting");
                    metrics::reflector_silent(&self.label);
                    match self.server.swap(usize::MAX, Ordering::Relaxed) {
                        usize::MAX => {}
                        i => {
                            self.upstream.fail_over(i, "it went silent");
                        }
                    }
                    self.resume(state)
                }
                Err(StepError::Behind(m)) => {
                    // Answered, but with an older state: keep backing off.
                    self.answered.store(false, Ordering::Relaxed);
                    tracing::warn!(resource = %self.label, error = %m, ?backoff, "upstream behind the cache; keeping the cache and retrying");
                    metrics::reflector_behind(&self.label);
                    if !back_off(&mut backoff, &shutdown).await {
                        return;
                    }
                    self.resume(state)
                }
                Err(StepError::Failed(m)) => {
                    if self.answered.swap(false, Ordering::Relaxed) {
                        backoff = Duration::from_millis(200);
                    }
                    tracing::warn!(resource = %self.label, error = %m, ?backoff, "list/watch failed; retrying");
                    if !back_off(&mut backoff, &shutdown).await {
                        return;
                    }
                    self.resume(state)
                }
            };
        }
    }
}

/// Waits out `backoff` (with up to half again of jitter) and doubles it, up
/// to 30 s; false if shutdown came first.
async fn back_off(backoff: &mut Duration, shutdown: &Signal) -> bool {
    let jitter = backoff.mul_f64(fastrand::f64() * 0.5);
    tokio::select! {
        _ = tokio::time::sleep(*backoff + jitter) => {}
        _ = shutdown.wait() => return false,
    }
    *backoff = (*backoff * 2).min(Duration::from_secs(30));
    true
}
