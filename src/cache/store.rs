//! One resource's cache in one encoding: immutable versions of its objects,
//! one writer, many readers.
//!
//! `Store::new` (in [`crate::cache::writer`]) makes both handles. The
//! `Writer` (owned by the resource's reflector, `&mut self` methods, not
//! `Clone`) is the only way to apply changes; readers share the
//! `Arc<Store>`, whose methods read. Two other paths move a store, each
//! named and documented where it lives: a proof's `Stamper` (a store
//! proven as fresh as the upstream at a version takes that version) and the
//! [`Budget`] (over the total, a store's writer trims other stores' watch
//! logs).
//!
//! Each applied change yields a new [`Version`] sharing structure with the
//! previous one (`imbl::OrdMap`, a persistent B-tree), so a reader takes an
//! `Arc` of a consistent version under the store's read lock and reads it
//! after letting go: it never sees a half-applied change, and waits only
//! while the writer holds the lock (to apply a batch, or to diff a relist
//! against the current version). Nothing keeps a superseded version but its readers, so with none
//! the next change is applied in place (no copy of the tree's path). An
//! Exact read of an older version rewinds the current one with the watch
//! log's events (each holds the object it displaced); the versions pages are
//! cut from are pinned by their readers for as long as their continue
//! tokens are honoured.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::sync::watch;

use super::budget::{Budget, TrimmedLog};
use super::history::{Appended, Batch, Cursor, History, Trigger};
pub use super::history::{Event, EventKind, diff};
use super::index::IndexOn;
use super::object::{CachedObject, Objects};
use super::scope::CacheScope;
pub use super::serving::Serving;
use super::staleness::Staleness;
pub use super::version::Version;
use super::wakers::{TriggerGuard, Wakers};
use crate::api::ApiResource;
use crate::api::media::Encoding;
use crate::metrics::StoreLabels;
use crate::sync::{MutexExt, RwLockExt};

/// A change to apply, as the reflector sees it.
#[derive(Debug)]
pub enum Change {
    /// Added or modified.
    Put(Arc<CachedObject>),
    /// Deleted: the object's last state, at the delete's resource version.
    Delete(Arc<CachedObject>),
    /// Nothing changed but the resource version moved (a bookmark).
    Progress(u64),
    /// The whole state replaced (a relist), at `rv`.
    Replace(Objects, u64),
    /// The whole state replaced at `rv` after the cache was found diverged
    /// from the upstream: its event log is not to be trusted, so it starts
    /// over, and every watcher gets the apiserver's 410 (too old resource
    /// version) and relists, rather than events whose versions would go back.
    Reset(Objects, u64),
}

/// A state loaded from outside the upstream (a snapshot on disk) for a
/// store to start from: what the store takes, not where it came from.
#[derive(Debug)]
pub struct Restored {
    /// The objects.
    pub objects: Objects,
    /// The resource version they are the state at.
    pub rv: u64,
    /// A protobuf store's bookmark template ([`Writer::learn_empty_object`]).
    pub empty: Option<Bytes>,
    /// How old the state is.
    pub age: Duration,
}

/// What a store keeps (from `cache.*` and `watch.history_*`, validated by the config).
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// How long a version pages were cut from is kept for their continue tokens.
    pub retention: Duration,
    /// At most this many such versions.
    pub max_retained: usize,
    /// Events the watch log keeps (at least 1).
    pub history_events: usize,
    /// Bytes the watch log may keep alive (0: no limit but `history_events`).
    pub history_bytes: usize,
    /// Silence from the upstream after which the store stops serving (zero: never).
    pub max_staleness: Duration,
    /// Serve past `max_staleness` anyway, with a warning (`cache.serve_stale`).
    pub serve_stale: bool,
}

#[cfg(test)]
impl Limits {
    /// A unit test's store: a minute's retention of at most `max_retained`
    /// versions, `history_events` events, no byte bound, never stale.
    pub(crate) fn for_tests(max_retained: usize, history_events: usize) -> Self {
        Limits {
            retention: Duration::from_secs(60),
            max_retained,
            history_events,
            history_bytes: 0,
            max_staleness: Duration::ZERO,
            serve_stale: false,
        }
    }
}

/// Everything a new store is made from, by name.
#[derive(Debug, Clone)]
pub struct Options {
    /// What it keeps.
    pub limits: Limits,
    /// The budgets it counts against (and whose other stores it may trim).
    pub budget: Arc<Budget>,
    /// What its objects' bodies are.
    pub encoding: Encoding,
    /// Whether events are indexed by pods' `spec.nodeName` too (a pods
    /// store), so node-pinned watchers wake on their node's events only.
    pub node_index: bool,
    /// What its versions index objects by (reads pinned to a value of one
    /// walk that value's objects only).
    pub indexes: Vec<IndexOn>,
    /// Its metric labels (and its name in logs).
    pub labels: StoreLabels,
    /// The objects it holds: all, or a node's.
    pub scope: CacheScope,
}

impl Options {
    /// The options of `resource`'s store in `encoding`, with `indexes`,
    /// holding `scope`: a core pods store's events are indexed by node, and
    /// the labels are the resource and the encoding.
    pub fn of(
        resource: &ApiResource,
        encoding: Encoding,
        limits: Limits,
        budget: Arc<Budget>,
        indexes: Vec<IndexOn>,
        scope: CacheScope,
    ) -> Self {
        let gvr = &resource.gvr;
        Options {
            limits,
            budget,
            encoding,
            node_index: gvr.group().is_empty() && gvr.resource() == "pods",
            indexes,
            labels: StoreLabels::new(gvr.to_string(), encoding.as_str()),
            scope,
        }
    }
}

/// What the store's lock guards: the current version and what hangs off it.
pub(super) struct Inner {
    pub(super) current: Arc<Version>,
    /// Versions a continue token names, oldest pin first (a version pinned
    /// again is pushed again; its older entry expires harmlessly).
    pub(super) pinned: VecDeque<(Instant, Arc<Version>)>,
    pub(super) serving: Serving,
    pub(super) history: History,
    /// The bytes last counted against the budget for this store ([`Writing`]).
    accounted: usize,
}

/// The store's state locked for a change, by whichever path changes it
/// (its writer, a stamper, the budget trimming its log, a reader pinning a
/// version). Dropping it counts the bytes the store holds now (its version's
/// objects and its event log) against the budget: the one place the budget
/// learns of a change, whatever the change was.
pub(super) struct Writing<'a> {
    guard: std::sync::RwLockWriteGuard<'a, Inner>,
    budget: &'a Budget,
}

impl std::ops::Deref for Writing<'_> {
    type Target = Inner;
    fn deref(&self) -> &Inner {
        &self.guard
    }
}

impl std::ops::DerefMut for Writing<'_> {
    fn deref_mut(&mut self) -> &mut Inner {
        &mut self.guard
    }
}

impl Drop for Writing<'_> {
    fn drop(&mut self) {
        let st = &mut *self.guard;
        let held = st.current.bytes + st.history.bytes();
        if held != st.accounted {
            self.budget.adjust(held as isize - st.accounted as isize);
            st.accounted = held;
        }
    }
}

/// The cache of one resource in one encoding, as its readers see it.
pub struct Store {
    /// Read through `reading()`; changed only through [`Store::write`].
    inner: RwLock<Inner>,
    rv: watch::Sender<u64>,
    retention: Duration,
    max_retained: usize,
    wakers: Wakers,
    node_index: bool,
    pub(super) budget: Arc<Budget>,
    /// A protobuf store's empty object of its type, as the upstream's own
    /// `BOOKMARK` carried it: the template of the bookmarks it sends.
    pub(super) empty: Mutex<Option<Bytes>>,
    encoding: Encoding,
    labels: StoreLabels,
    scope: CacheScope,
    /// When its upstream last said something (its writer marks it).
    pub(super) staleness: Staleness,
}

impl Store {
    /// Its state locked for a change; the budget is kept as the lock is let
    /// go ([`Writing`]).
    pub(super) fn write(&self) -> Writing<'_> {
        Writing {
            guard: self.inner.writing(),
            budget: &self.budget,
        }
    }

    /// An empty store (syncing) as `options` say, enrolled in its budget
    /// (its writer is made with it: `Store::new`).
    pub(super) fn empty(options: Options) -> Arc<Store> {
        let Options {
            limits,
            budget,
            encoding,
            node_index,
            indexes,
            labels,
            scope,
        } = options;
        let (rv, _) = watch::channel(0);
        let store = Arc::new(Store {
            inner: RwLock::new(Inner {
                current: Arc::new(Version::empty(&indexes)),
                pinned: VecDeque::new(),
                serving: Serving::Syncing,
                history: History::new(limits.history_events, limits.history_bytes),
                accounted: 0,
            }),
            rv,
            retention: limits.retention,
            max_retained: limits.max_retained,
            wakers: Wakers::default(),
            node_index,
            budget,
            empty: Mutex::new(None),
            encoding,
            labels,
            scope,
            staleness: Staleness::new(limits.max_staleness).serving_stale(limits.serve_stale),
        });
        store.budget.enroll(store.clone());
        store
    }

    /// What its objects' bodies are.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Its metric labels: resource and encoding (and its name in logs).
    pub fn labels(&self) -> &StoreLabels {
        &self.labels
    }

    /// The objects it holds: all, or a node's.
    pub fn scope(&self) -> &CacheScope {
        &self.scope
    }

    /// How long it has gone without word from its upstream.
    pub fn staleness(&self) -> &Staleness {
        &self.staleness
    }

    /// The bookmark template its writer learned, if any yet.
    pub fn empty_object(&self) -> Option<Bytes> {
        self.empty.locked().clone()
    }

    /// Whether the cache answers requests now, and if not why.
    pub fn serving(&self) -> Serving {
        self.inner.reading().serving
    }

    /// Whether the cache has settled: serving, or passing through for good reason.
    pub fn settled(&self) -> bool {
        self.serving().settled()
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.inner.reading().current.clone()
    }

    /// Bytes this cache holds: current objects, plus the older object versions
    /// its event history (and so its retained versions) keeps alive.
    pub fn bytes(&self) -> usize {
        let st = self.inner.reading();
        st.current.bytes + st.history.bytes()
    }

    /// Whether this cache exceeds its budget or pushes the total over.
    pub fn exceeds_budget(&self) -> bool {
        !self.budget.over(self.bytes()).none()
    }

    /// The state at exactly `rv`, if r8s can still tell it: the current
    /// version, a pinned one, or the current one rewound with the log's
    /// events after `rv` (`None` when the log no longer reaches back to it,
    /// or `rv` is in the future).
    pub fn at(&self, rv: u64) -> Option<Arc<Version>> {
        let (current, events) = {
            let st = self.inner.reading();
            if st.current.rv == rv {
                return Some(st.current.clone());
            }
            let now = Instant::now();
            if let Some((_, v)) = st
                .pinned
                .iter()
                .rev()
                .find(|(t, v)| v.rv == rv && now.duration_since(*t) <= self.retention)
            {
                return Some(v.clone());
            }
            if rv > st.current.rv {
                return None;
            }
            let after = st.history.cursor_after(rv)?;
            let batch = st.history.read(after, None, usize::MAX)?;
            (st.current.clone(), batch.events)
        };
        Some(Arc::new(rewind(&current, rv, &events)))
    }

    /// Keeps `version` for the retention: a continue token names it, and the
    /// next page must be cut from the same state (refreshed by each page).
    /// A reader's own doing: it changes nothing another reader sees.
    pub fn pin(&self, version: &Arc<Version>) {
        let mut st = self.write();
        let now = Instant::now();
        match st.pinned.back_mut() {
            Some((t, v)) if Arc::ptr_eq(v, version) => *t = now,
            _ => st.pinned.push_back((now, version.clone())),
        }
        self.expire_pins(&mut st, now);
    }

    fn expire_pins(&self, st: &mut Inner, now: Instant) {
        while st.pinned.len() > self.max_retained
            || st
                .pinned
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > self.retention)
        {
            st.pinned.pop_front();
        }
    }

    /// Waits until the cache is at `rv` or newer; false on timeout.
    pub async fn wait_for(&self, rv: u64, timeout: Duration) -> bool {
        let mut w = self.rv.subscribe();
        tokio::time::timeout(timeout, w.wait_for(|cur| *cur >= rv))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// A watcher's cursor after `rv`; `None` when the log no longer has
    /// every event after it.
    pub fn cursor_after(&self, rv: u64) -> Option<Cursor> {
        self.inner.reading().history.cursor_after(rv)
    }

    /// The current version and the cursor right after it, atomically (the
    /// start of a watch that first sends the state).
    pub fn snapshot_with_cursor(&self) -> (Arc<Version>, Cursor) {
        let st = self.inner.reading();
        (st.current.clone(), st.history.end())
    }

    /// Up to `max` events from `cursor` (only those concerning `trigger` if
    /// given) and the resource version a caught-up reader is at; `None` when
    /// the log's tail has passed the cursor.
    pub fn read(
        &self,
        cursor: Cursor,
        trigger: Option<Trigger>,
        max: usize,
    ) -> Option<(Batch, u64)> {
        let st = self.inner.reading();
        let b = st.history.read(cursor, trigger, max)?;
        Some((b, st.current.rv))
    }

    /// The recorded events with a resource version above `rv`, oldest first;
    /// `None` when `rv` is older than the history keeps (tests inspect the log with it).
    #[cfg(test)]
    pub fn events_after(&self, rv: u64) -> Option<Vec<Arc<Event>>> {
        let st = self.inner.reading();
        let c = st.history.cursor_after(rv)?;
        st.history.read(c, None, usize::MAX).map(|b| b.events)
    }

    /// The oldest resource version a watch can resume from.
    pub fn history_from(&self) -> u64 {
        self.inner.reading().history.from()
    }

    /// Whether the log still holds everything from `cursor` on.
    pub fn holds(&self, cursor: Cursor) -> bool {
        self.inner.reading().history.holds(cursor)
    }

    /// Events and bytes in the event log (for metrics).
    pub fn history_size(&self) -> (usize, usize) {
        let st = self.inner.reading();
        (st.history.len(), st.history.bytes())
    }

    /// Registers an indexed or sharded watcher: it is woken by the events
    /// on `triggers` only.
    pub fn register(&self, triggers: &[Trigger]) -> TriggerGuard<'_> {
        self.wakers.register(triggers)
    }

    /// Whether this store indexes pods' events by `spec.nodeName` (for
    /// node-pinned watchers).
    pub fn indexes_nodes(&self) -> bool {
        self.node_index
    }

    /// Wakes every watcher, indexed or not, to look at the store again.
    pub(super) fn wake_all(&self) {
        self.rv.send_modify(|_| {});
        self.wakers.wake(&[], true);
    }

    /// A receiver that changes whenever the cache's version does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rv.subscribe()
    }

    /// Drops this store's oldest events until its log is `by` bytes smaller
    /// (or holds one event); the bytes freed. Its own writer's, or the
    /// budget's path through another store's writer ([`Budget`]).
    pub(super) fn trim_log(&self, by: usize) -> usize {
        let mut st = self.write();
        let keep = st.history.bytes().saturating_sub(by);
        let freed = st.history.trim_to(keep);
        drop(st);
        if freed > 0 {
            crate::metrics::watch_log_trimmed(freed);
        }
        freed
    }

    /// Applies `changes` under the lock (`guard`, taken by the caller so a
    /// proof's stamp can check and apply atomically); a syncing store serves
    /// from then on if `ready`. Only the store's writer and stampers call it.
    pub(super) fn apply_locked(
        &self,
        mut guard: Writing<'_>,
        changes: Vec<Change>,
        ready: bool,
    ) -> Arc<Version> {
        let st = &mut *guard;
        // In place when no reader holds the current version; otherwise
        // `imbl` copies the paths the changes touch and the readers keep theirs.
        let v = Arc::make_mut(&mut st.current);
        let mut events = Vec::new();
        let mut reset = false;
        for c in changes {
            match c {
                Change::Put(o) => {
                    v.rv = v.rv.max(o.rv);
                    let prev = v.insert(o.clone());
                    let kind = if prev.is_some() {
                        EventKind::Modified
                    } else {
                        EventKind::Added
                    };
                    events.push(Event::new(o.rv, kind, o, prev));
                }
                Change::Delete(o) => {
                    v.rv = v.rv.max(o.rv);
                    if let Some(old) = v.remove(&o.key) {
                        events.push(Event::new(o.rv, EventKind::Deleted, o, Some(old)));
                    }
                }
                Change::Progress(rv) => v.rv = v.rv.max(rv),
                Change::Reset(objects, rv) => {
                    st.history.restart_at(rv);
                    reset = true;
                    v.replace(objects);
                    v.rv = rv;
                }
                Change::Replace(objects, rv) => {
                    if st.serving == Serving::Ready {
                        events.extend(diff(&v.objects, &objects, rv));
                        st.history.note_gap(v.rv, rv);
                    } else {
                        // A first sync (or a refill after eviction): the
                        // history starts complete from here.
                        st.history.restart_at(rv);
                    }
                    v.replace(objects);
                    v.rv = rv;
                }
            }
        }
        let v = st.current.clone();
        self.expire_pins(st, Instant::now());
        st.serving = st.serving.applied(ready);
        let Appended { touched, refresh } = st.history.append(events, self.node_index);
        // The budget counts what the store holds now, as the lock is let go.
        drop(guard);
        self.rv.send_replace(v.rv);
        // After a reset every watcher looks again, and finds its place gone.
        self.wakers.wake(&touched, refresh || reset);
        v
    }
}

impl TrimmedLog for Store {
    fn log_bytes(&self) -> usize {
        self.history_size().1
    }

    fn trim(&self, by: usize) -> usize {
        self.trim_log(by)
    }
}

/// `current` as it was at `rv`: `events` (every event after `rv`, oldest
/// first) undone newest first, each putting back the object it displaced.
fn rewind(current: &Version, rv: u64, events: &[Arc<Event>]) -> Version {
    let mut v = current.clone();
    for e in events.iter().rev() {
        match &e.prev {
            Some(p) => v.insert(p.clone()),
            None => v.remove(&e.object.key),
        };
    }
    v.rv = rv;
    v
}
