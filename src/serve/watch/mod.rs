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
//! fed only by the events concerning it; sharded ones (`shardSelector`) are
//! woken only by events in the hash buckets their ranges reach; the others
//! wake on every change.
//!
//! A request becomes a [`Plan`] (checked, not started, so it can be
//! authorized first), is proven and settled, then starts a
//! `watcher::Watcher`: its start (`watcher::Start`; the initial events in
//! `initial`), its live loop, its bookmark clock (`clock`), what it writes
//! (`frames`; a Table watch's lines in `table`) and its filter (`filter`).

mod clock;
mod filter;
mod frames;
mod initial;
mod policy;
mod table;
mod watcher;

use std::sync::Arc;

use std::time::Duration;

use http::{Response, StatusCode};

use super::outcome::PassReason;
use super::slots::{ListSlot, WatchSlots, costly_walk};
use crate::api::media::{ErrorEncoding, MediaType, Shape};
use crate::api::request::ApiRequest;
use crate::api::status::Status;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::store::Store;
use crate::cache::view::View;
use crate::codec::InitialEnd;
use crate::codec::crc::StreamCrc;
use crate::config::{OnTooNew, OnTooOld};
use crate::fairness::classify::Classification;
use crate::metrics::EventCounts;
use crate::shutdown::Signal;
use crate::upstream::proof::{ConsistentKind, Proofs};
use crate::upstream::version::WireRules;
use filter::Filter;
pub use policy::WatchPolicy;
use table::TableLines;
use watcher::{Start, Watcher};

/// Frames buffered between a watcher and its connection.
const CHANNEL: usize = 16;

/// A watch the cache will serve, checked but not started (so the caller can
/// be authorized before any watcher exists).
pub struct Plan {
    cache: Arc<ResourceCache>,
    /// The store of the negotiated encoding.
    store: Arc<Store>,
    start: Start,
    filter: Filter,
    timeout_seconds: Option<i64>,
    bookmarks: bool,
    view: View,
    /// A Table watch's printing (`kubectl get -w`).
    table: Option<super::table::TableAsk>,
    /// A consistent streaming list not proven yet.
    consistent: bool,
    /// The `Warning` of a stale cache served anyway (`cache.serve_stale`).
    warning: Option<http::HeaderValue>,
    /// What an error before the stream starts is written in.
    errors: ErrorEncoding,
    /// A streaming list to a client that takes gzip, where the upstream's
    /// version gzips them (`server.watchlist_compression`).
    gzip: bool,
    /// How the upstream's version ends a streaming list's initial events.
    initial_end: InitialEnd,
}

/// Whether a watch can be served from the cache: its plan, or why not.
/// `rules`: what the upstream's version sends that versions differ on.
pub fn plan(
    cache: &Arc<ResourceCache>,
    ar: &ApiRequest,
    policy: &WatchPolicy,
    rules: WireRules,
) -> Result<Plan, PassReason> {
    let (store, warning) = super::servable::serving_store(cache, ar)?;
    let table = super::table::ask(ar, cache)?;
    let view = match super::servable::shape_for(ar) {
        Some(shape @ (Shape::Object | Shape::Metadata)) => super::servable::view_for(ar, shape),
        _ => return Err(PassReason::MediaType),
    };
    let opts = ar.options.as_ref().map_err(|_| PassReason::Invalid)?;
    // A named watch (either path form, or a `metadata.name` selector)
    // streams that object alone ([`ApiRequest::confined`]).
    if opts.validate().is_err() || !ar.confined() {
        return Err(PassReason::Invalid);
    }
    super::servable::fields_held(cache, store, opts)?;
    super::servable::in_scope(store, ar.path.namespace.as_deref(), opts)?;
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
        // A Table stream's lines are its own, never compressed in advance.
        gzip: table.is_none()
            && policy.compress_watch_lists
            && rules.compress_watch_lists
            && ar.gzip
            && opts.send_initial_events == Some(true),
        initial_end: if rules.list_blueprint {
            InitialEnd::WithBlueprint
        } else {
            InitialEnd::Plain
        },
        cache: cache.clone(),
        store,
        start,
        filter: Filter {
            namespace: ar.path.namespace.clone(),
            selectors: selectors.clone(),
        },
        timeout_seconds: opts.timeout_seconds,
        bookmarks: opts.allow_watch_bookmarks,
        view,
        table,
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
            .map_err(super::servable::unproven)?;
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
    /// Where the upstream has not reached N either, its answer after the
    /// same wait is known, and r8s gives it rather than pass the request on
    /// to wait again (`servable::too_new_upstream`).
    pub async fn settle(
        mut self,
        read: &super::read::ReadPolicy,
        proofs: &Proofs,
    ) -> Result<Plan, PassReason> {
        let Start::Initial { at_least, .. } = self.start else {
            return Ok(self);
        };
        if self.store.current().rv >= at_least || self.store.wait_for(at_least, read.wait).await {
            return Ok(self);
        }
        match read.on_too_new {
            OnTooNew::Pass
                if !super::servable::too_new_upstream(&self.cache, at_least, proofs).await =>
            {
                Err(PassReason::TooNew)
            }
            OnTooNew::Pass | OnTooNew::Timeout => {
                self.start = Start::TooLarge(at_least);
                Ok(self)
            }
        }
    }

    /// Whether its initial events walk every object of a cache of at
    /// least [`COSTLY_WALK`](super::slots::COSTLY_WALK) (no namespace, no index): a seat of its level
    /// is then held while they are sent, as a list's would be.
    pub fn costly(&self) -> bool {
        let f = &self.filter;
        matches!(self.start, Start::Initial { .. })
            && costly_walk(&self.store, f.namespace.as_deref(), &f.selectors)
    }

    /// The apiserver's 429, for a watch its level has no seat or slot for.
    pub fn refused(&self) -> Response<Body> {
        Status::too_many_requests().into_response_as(self.errors)
    }

    /// Starts the watcher in one of `slots` of `class`'s level (or answers
    /// 429 when its share of `watch.max_watchers` is taken); `seat`, the
    /// seat its costly initial events took, is given back once they are
    /// sent.
    pub fn start(
        self,
        policy: &WatchPolicy,
        (slots, class): (&WatchSlots, Option<&Classification>),
        seat: Option<ListSlot>,
        shutdown: &Signal,
    ) -> Response<Body> {
        let Ok(slot) = slots.slot_for(class) else {
            return self.refused();
        };
        // As the apiserver's watch handler: 0 (or none) is the server's
        // random default, a negative one ends the watch at once (zero here).
        let timeout = match self.timeout_seconds {
            Some(t) if t > 0 => Duration::from_secs(t.unsigned_abs()),
            Some(t) if t < 0 => Duration::ZERO,
            _ => policy.min_timeout + policy.min_timeout.mul_f64(fastrand::f64()),
        };
        let (tx, body) = body::channel(CHANNEL);
        let cache = self.cache;
        let w = Watcher {
            trigger: self.filter.trigger(self.store.indexes_nodes()),
            wake_on: self.filter.wakes_on(self.store.indexes_nodes()),
            metrics: cache.watch_metrics(),
            cache,
            store: self.store,
            filter: self.filter,
            tx,
            bookmarks: self.bookmarks,
            view: self.view,
            policy: policy.clone(),
            shutdown: shutdown.clone(),
            counts: EventCounts::default(),
            gz: self.gzip.then(StreamCrc::default),
            initial_end: self.initial_end,
            table: self.table.map(TableLines::new),
            preempt: None,
        };
        let mut resp = crate::api::json_response(StatusCode::OK, body);
        let media = MediaType::of(w.store.encoding(), Shape::Object);
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
        tokio::spawn(w.run(self.start, timeout, (slot, seat)));
        resp
    }
}
