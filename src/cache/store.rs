//! One resource's cache: immutable versions of its objects, one writer (the
//! reflector), many readers.
//!
//! Each applied change yields a new [`Version`] sharing structure with the
//! previous one (`imbl::OrdMap`, a persistent B-tree), so readers take an
//! `Arc` of a consistent version and never block or see a half-applied
//! change. Nothing keeps a superseded version but its readers, so with none
//! the next change is applied in place (no copy of the tree's path). An
//! Exact read of an older version rewinds the current one with the watch
//! log's events (each holds the object it displaced); the versions pages are
//! cut from are pinned for as long as their continue tokens are honoured.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};
use std::time::{Duration, Instant};

use bytes::Bytes;
use imbl::OrdMap;
use tokio::sync::{Notify, watch};

use crate::api::media::Encoding;

use super::history::{Appended, Batch, Cursor, History, Trigger};
pub use super::history::{Event, EventKind, diff};
use super::object::{CachedObject, Objects};
use super::staleness::Staleness;
use crate::sync::{MutexExt, RwLockExt};

/// A consistent state of the resource at one resource version.
#[derive(Debug, Clone)]
pub struct Version {
    /// The upstream resource version this state is at.
    pub rv: u64,
    /// The objects.
    pub objects: Objects,
    /// Bytes of the objects (accounting).
    pub bytes: usize,
}

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
    /// A protobuf store's bookmark template ([`Store::learn_empty_object`]).
    pub empty: Option<Bytes>,
    /// How old the state is.
    pub age: Duration,
}

/// Byte budgets, shared by every store: a cache over either stops being
/// served (its requests pass through) instead of growing without bound.
#[derive(Debug)]
pub struct Budget {
    total: AtomicUsize,
    /// Bytes one resource's cache may hold (0: no limit).
    pub max_per_resource: usize,
    /// Bytes all caches together may hold (0: no limit).
    pub max_total: usize,
    /// The stores counted here ([`Store::enroll`]), whose watch logs give
    /// way when the total is over.
    stores: Mutex<Vec<Weak<Store>>>,
}

impl Budget {
    /// Budgets of these sizes (0: no limit).
    pub fn new(max_per_resource: usize, max_total: usize) -> Self {
        Budget {
            total: AtomicUsize::new(0),
            max_per_resource,
            max_total,
            stores: Mutex::new(Vec::new()),
        }
    }

    /// Bytes held by all caches.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Counts `delta` bytes more (or fewer) held; never below zero.
    pub fn adjust(&self, delta: isize) {
        if delta >= 0 {
            self.total
                .fetch_add(delta.unsigned_abs(), Ordering::Relaxed);
        } else {
            let _ = self
                .total
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some(t.saturating_sub(delta.unsigned_abs()))
                });
        }
    }
}

/// Whether a cache answers reads and watches, and if not, why. One value per
/// store: its reflector sets it, every request reads it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Serving {
    /// Not listed yet: requests pass through.
    Syncing,
    /// Serving its current version.
    Ready,
    /// Evicted for its byte budget: requests pass through until a relist fits.
    OverBudget,
    /// Its resource versions are not integers: requests pass through for good.
    Uncacheable,
}

struct State {
    current: Arc<Version>,
    /// Versions a continue token names, oldest pin first (a version pinned
    /// again is pushed again; its older entry expires harmlessly).
    pinned: VecDeque<(Instant, Arc<Version>)>,
    serving: Serving,
    history: History,
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

/// Wakes the watchers waiting on a trigger (indexed watchers): each event
/// wakes only those it concerns.
#[derive(Default)]
struct Wakers {
    by_trigger: Mutex<HashMap<Trigger, Vec<Arc<Notify>>>>,
}

/// An indexed watcher's registration; unregisters when dropped.
pub struct TriggerGuard<'a> {
    store: &'a Store,
    trigger: Trigger,
    /// Woken (with a stored permit, so no wake-up is lost) by each event on the trigger.
    pub notify: Arc<Notify>,
}

impl Drop for TriggerGuard<'_> {
    fn drop(&mut self) {
        let mut m = self.store.wakers.by_trigger.locked();
        if let Some(v) = m.get_mut(&self.trigger) {
            v.retain(|n| !Arc::ptr_eq(n, &self.notify));
            if v.is_empty() {
                m.remove(&self.trigger);
            }
        }
    }
}

/// The cache of one resource.
pub struct Store {
    state: RwLock<State>,
    rv: watch::Sender<u64>,
    retention: Duration,
    max_retained: usize,
    wakers: Wakers,
    pods: bool,
    budget: Arc<Budget>,
    /// A protobuf store's empty object of its type, as the upstream's own
    /// `BOOKMARK` carried it: the template of the bookmarks it sends.
    empty: Mutex<Option<Bytes>>,
    /// What its objects' bodies are.
    encoding: Encoding,
    /// When its upstream last said something (the reflector marks it).
    pub staleness: Staleness,
}

impl Store {
    /// The same store holding objects in `encoding` (JSON unless set).
    pub fn with_encoding(mut self, encoding: Encoding) -> Self {
        self.encoding = encoding;
        self
    }

    /// What its objects' bodies are.
    pub fn encoding(&self) -> Encoding {
        self.encoding
    }

    /// Keeps the raw of an upstream protobuf `BOOKMARK` as the template of
    /// this store's bookmarks (the first one: the type's empty fields do
    /// not change while r8s runs against one upstream version).
    pub fn learn_empty_object(&self, raw: &[u8]) {
        let mut e = self.empty.locked();
        if e.is_none() {
            *e = Some(Bytes::copy_from_slice(raw));
        }
    }

    /// The template [`Store::learn_empty_object`] kept, if any yet.
    pub fn empty_object(&self) -> Option<Bytes> {
        self.empty.locked().clone()
    }

    /// An empty store (syncing) keeping what `limits` say, counting its
    /// bytes against `budget`; `pods` indexes events by `spec.nodeName` too.
    pub fn new(limits: Limits, budget: Arc<Budget>, pods: bool) -> Self {
        let (rv, _) = watch::channel(0);
        Store {
            state: RwLock::new(State {
                current: Arc::new(Version {
                    rv: 0,
                    objects: OrdMap::new(),
                    bytes: 0,
                }),
                pinned: VecDeque::new(),
                serving: Serving::Syncing,
                history: History::new(limits.history_events, limits.history_bytes),
            }),
            rv,
            retention: limits.retention,
            max_retained: limits.max_retained,
            wakers: Wakers::default(),
            pods,
            budget,
            empty: Mutex::new(None),
            encoding: Encoding::Json,
            staleness: Staleness::new(limits.max_staleness).serving_stale(limits.serve_stale),
        }
    }

    /// Whether the cache answers requests now, and if not why.
    pub fn serving(&self) -> Serving {
        self.state.reading().serving
    }

    /// Whether the cache has settled: serving, or passing through for good reason.
    pub fn settled(&self) -> bool {
        self.serving() != Serving::Syncing
    }

    /// Stops serving for good (the resource's versions are not integers).
    pub fn set_uncacheable(&self) {
        self.state.writing().serving = Serving::Uncacheable;
    }

    /// Whether this cache exceeds its budget or pushes the total over.
    pub fn exceeds_budget(&self) -> bool {
        self.over_budget_by() != (0, 0)
    }

    /// Bytes past the per-resource budget and past the total (0: within).
    fn over_budget_by(&self) -> (usize, usize) {
        let b = &self.budget;
        let own = if b.max_per_resource > 0 {
            self.bytes().saturating_sub(b.max_per_resource)
        } else {
            0
        };
        let total = if b.max_total > 0 {
            b.total().saturating_sub(b.max_total)
        } else {
            0
        };
        (own, total)
    }

    /// Counts this store's watch log among those that give way when the
    /// total budget is over (a store not enrolled trims only its own).
    pub fn enroll(self: &Arc<Self>) {
        self.budget.stores.locked().push(Arc::downgrade(self));
    }

    /// Drops this store's oldest events until its log is `by` bytes smaller
    /// (or holds one event); the bytes freed.
    fn trim_log(&self, by: usize) -> usize {
        let mut st = self.state.writing();
        let keep = st.history.bytes().saturating_sub(by);
        let freed = st.history.trim_to(keep);
        drop(st);
        if freed > 0 {
            self.budget.adjust(-(freed as isize));
            crate::metrics::watch_log_trimmed(freed);
        }
        freed
    }

    /// Brings this cache within its budgets if watch logs can make room: the
    /// oldest events go first (watchers that far behind start again, as when
    /// `watch.history_*` trims a log), so churn shortens logs instead of
    /// evicting objects. Over its own budget, it trims its own log; over the
    /// total, its own and then the other stores' logs, largest first.
    /// Whether it fits now; if not, its objects (or all stores' objects)
    /// alone are over, and the caller evicts it.
    pub fn fit_budget(self: &Arc<Self>) -> bool {
        let (own, total) = self.over_budget_by();
        if own == 0 && total == 0 {
            return true;
        }
        self.trim_log(own.max(total));
        let (own, mut total) = self.over_budget_by();
        if own > 0 {
            return false;
        }
        if total > 0 {
            let mut others: Vec<(usize, Arc<Store>)> = self
                .budget
                .stores
                .locked()
                .iter()
                .filter_map(Weak::upgrade)
                .filter(|s| !Arc::ptr_eq(s, self))
                .map(|s| (s.history_size().1, s))
                .collect();
            others.sort_by_key(|(log, _)| std::cmp::Reverse(*log));
            for (_, other) in others {
                other.trim_log(total);
                total = self.over_budget_by().1;
                if total == 0 {
                    break;
                }
            }
        }
        total == 0
    }

    /// Drops every object and stops serving (requests pass through) until a
    /// relist fits the budget again ([`Store::clear_over_budget`]).
    pub fn evict_over_budget(&self) {
        self.state.writing().serving = Serving::OverBudget;
        self.apply(vec![Change::Replace(OrdMap::new(), self.current().rv)]);
        let mut st = self.state.writing();
        st.pinned.clear();
        let rv = st.current.rv;
        let held = st.history.restart_at(rv);
        self.budget.adjust(-(held as isize));
    }

    /// Serving again after a relist that fits the budget.
    pub fn clear_over_budget(&self) {
        let mut st = self.state.writing();
        if st.serving == Serving::OverBudget {
            st.serving = Serving::Ready;
        }
    }

    /// The current version.
    pub fn current(&self) -> Arc<Version> {
        self.state.reading().current.clone()
    }

    /// Bytes this cache holds: current objects, plus the older object versions
    /// its event history (and so its retained versions) keeps alive.
    pub fn bytes(&self) -> usize {
        let st = self.state.reading();
        st.current.bytes + st.history.bytes()
    }

    /// The state at exactly `rv`, if r8s can still tell it: the current
    /// version, a pinned one, or the current one rewound with the log's
    /// events after `rv` (`None` when the log no longer reaches back to it,
    /// or `rv` is in the future).
    pub fn at(&self, rv: u64) -> Option<Arc<Version>> {
        let (current, events) = {
            let st = self.state.reading();
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
    pub fn pin(&self, version: &Arc<Version>) {
        let mut st = self.state.writing();
        let now = Instant::now();
        match st.pinned.back_mut() {
            Some((t, v)) if Arc::ptr_eq(v, version) => *t = now,
            _ => st.pinned.push_back((now, version.clone())),
        }
        self.expire_pins(&mut st, now);
    }

    fn expire_pins(&self, st: &mut State, now: Instant) {
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

    /// Applies changes as one new version (the reflector is the only caller).
    pub fn apply(&self, changes: Vec<Change>) -> Arc<Version> {
        self.apply_locked(self.state.writing(), changes, true)
    }

    /// Starts from a state restored from outside the upstream (a snapshot):
    /// its objects at its version, the event log complete from there. It is
    /// not served until the reflector's watch from that version is answered
    /// ([`Store::resumed`]), unless the cache serves stale data
    /// (`cache.serve_stale`): then at once, as stale as the state is old.
    pub fn restore(&self, r: Restored) -> Arc<Version> {
        if let Some(e) = &r.empty {
            self.learn_empty_object(e);
        }
        let serve = self.staleness.serves_stale();
        self.staleness.heard_ago(r.age);
        self.apply_locked(
            self.state.writing(),
            vec![Change::Replace(r.objects, r.rv)],
            serve,
        )
    }

    /// The upstream answered the watch resumed from a restored state: the
    /// cache serves.
    pub fn resumed(&self) {
        let mut st = self.state.writing();
        if st.serving == Serving::Syncing {
            st.serving = Serving::Ready;
        }
    }

    /// Learns from a proof that the upstream changed nothing of this
    /// resource in (`floor`, `y`]: once the store's own watch has applied
    /// everything up to `floor`, its state is the upstream's at `y`, and its
    /// version becomes max(version, `y`) under the writer's lock, so it never
    /// moves back. Returns the version then current (at least `y`), or
    /// `None` while the store is below `floor` or not serving.
    pub fn advance_to(&self, floor: u64, y: u64) -> Option<Arc<Version>> {
        let guard = self.state.writing();
        if guard.serving != Serving::Ready || guard.current.rv < floor {
            return None;
        }
        if guard.current.rv >= y {
            return Some(guard.current.clone());
        }
        Some(self.apply_locked(guard, vec![Change::Progress(y)], true))
    }

    /// Applies `changes` under the writer's lock; a syncing store serves
    /// from then on if `ready`.
    fn apply_locked(
        &self,
        mut guard: std::sync::RwLockWriteGuard<'_, State>,
        changes: Vec<Change>,
        ready: bool,
    ) -> Arc<Version> {
        let st = &mut *guard;
        let before = st.current.bytes;
        // In place when no reader holds the current version; otherwise
        // `imbl` copies the paths the changes touch and the readers keep theirs.
        let v = Arc::make_mut(&mut st.current);
        let mut events = Vec::new();
        let mut reset = false;
        for c in changes {
            match c {
                Change::Put(o) => {
                    v.rv = v.rv.max(o.rv);
                    v.bytes += o.size();
                    let prev = v.objects.insert(o.key.clone(), o.clone());
                    if let Some(old) = &prev {
                        v.bytes -= old.size();
                    }
                    let kind = if prev.is_some() {
                        EventKind::Modified
                    } else {
                        EventKind::Added
                    };
                    events.push(Event::new(o.rv, kind, o, prev));
                }
                Change::Delete(o) => {
                    v.rv = v.rv.max(o.rv);
                    if let Some(old) = v.objects.remove(&o.key) {
                        v.bytes -= old.size();
                        events.push(Event::new(o.rv, EventKind::Deleted, o, Some(old)));
                    }
                }
                Change::Progress(rv) => v.rv = v.rv.max(rv),
                Change::Reset(objects, rv) => {
                    let held = st.history.restart_at(rv);
                    self.budget.adjust(-(held as isize));
                    reset = true;
                    v.bytes = objects.values().map(|o| o.size()).sum();
                    v.objects = objects;
                    v.rv = rv;
                }
                Change::Replace(objects, rv) => {
                    if st.serving == Serving::Ready {
                        events.extend(diff(&v.objects, &objects, rv));
                        st.history.note_gap(v.rv, rv);
                    } else {
                        // A first sync (or a refill after eviction): the
                        // history starts complete from here.
                        let held = st.history.restart_at(rv);
                        self.budget.adjust(-(held as isize));
                    }
                    v.bytes = objects.values().map(|o| o.size()).sum();
                    v.objects = objects;
                    v.rv = rv;
                }
            }
        }
        self.budget.adjust(v.bytes as isize - before as isize);
        let v = st.current.clone();
        self.expire_pins(st, Instant::now());
        if ready && st.serving == Serving::Syncing {
            st.serving = Serving::Ready;
        }
        let Appended {
            held,
            touched,
            mut refresh,
        } = st.history.append(events, self.pods);
        // Every watcher looks again, and finds its place gone.
        refresh |= reset;
        self.budget.adjust(held);
        drop(guard);
        self.rv.send_replace(v.rv);
        if !touched.is_empty() || refresh {
            let m = self.wakers.by_trigger.locked();
            if refresh {
                m.values().flatten().for_each(|n| n.notify_one());
            } else {
                for t in &touched {
                    for n in m.get(t).into_iter().flatten() {
                        n.notify_one();
                    }
                }
            }
        }
        v
    }

    /// The recorded events with a resource version above `rv`, oldest first;
    /// `None` when `rv` is older than the history keeps (tests inspect the log with it).
    #[cfg(test)]
    pub fn events_after(&self, rv: u64) -> Option<Vec<Arc<Event>>> {
        let st = self.state.reading();
        let c = st.history.cursor_after(rv)?;
        st.history.read(c, None, usize::MAX).map(|b| b.events)
    }

    /// A watcher's cursor after `rv`; `None` when the log no longer has
    /// every event after it.
    pub fn cursor_after(&self, rv: u64) -> Option<Cursor> {
        let st = self.state.reading();
        st.history.cursor_after(rv)
    }

    /// The current version and the cursor right after it, atomically (the
    /// start of a watch that first sends the state).
    pub fn snapshot_with_cursor(&self) -> (Arc<Version>, Cursor) {
        let st = self.state.reading();
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
        let st = self.state.reading();
        let b = st.history.read(cursor, trigger, max)?;
        Some((b, st.current.rv))
    }

    /// The oldest resource version a watch can resume from.
    pub fn history_from(&self) -> u64 {
        self.state.reading().history.from()
    }

    /// Whether the log still holds everything from `cursor` on.
    pub fn holds(&self, cursor: Cursor) -> bool {
        let st = self.state.reading();
        st.history.holds(cursor)
    }

    /// Events and bytes in the event log (for metrics).
    pub fn history_size(&self) -> (usize, usize) {
        let st = self.state.reading();
        (st.history.len(), st.history.bytes())
    }

    /// Registers an indexed watcher: it is woken by the events on `trigger` only.
    pub fn register(&self, trigger: Trigger) -> TriggerGuard<'_> {
        let notify = Arc::new(Notify::new());
        self.wakers
            .by_trigger
            .locked()
            .entry(trigger)
            .or_default()
            .push(notify.clone());
        TriggerGuard {
            store: self,
            trigger,
            notify,
        }
    }

    /// Whether this store indexes pods' `spec.nodeName`.
    pub fn indexes_nodes(&self) -> bool {
        self.pods
    }

    /// A receiver that changes whenever the cache's version does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rv.subscribe()
    }
}

/// `current` as it was at `rv`: `events` (every event after `rv`, oldest
/// first) undone newest first, each putting back the object it displaced.
fn rewind(current: &Version, rv: u64, events: &[Arc<Event>]) -> Version {
    let mut objects = current.objects.clone();
    let mut bytes = current.bytes;
    for e in events.iter().rev() {
        let undone = match &e.prev {
            Some(p) => {
                bytes += p.size();
                objects.insert(p.key.clone(), p.clone())
            }
            None => objects.remove(&e.object.key),
        };
        if let Some(o) = undone {
            bytes = bytes.saturating_sub(o.size());
        }
    }
    Version { rv, objects, bytes }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::object::TypeInfo;
    use crate::codec::json::ListItem;
    use futures_util::FutureExt;

    fn limits(history_events: usize) -> Limits {
        Limits {
            retention: Duration::from_secs(60),
            max_retained: 100,
            history_events,
            history_bytes: 0,
            max_staleness: Duration::ZERO,
            serve_stale: false,
        }
    }

    fn obj(name: &str, rv: u64) -> Arc<CachedObject> {
        let t = TypeInfo {
            kind: "ConfigMap".into(),
            api_version: "v1".into(),
            resource: "configmaps".into(),
            items_typed: false,
        };
        let json = format!(
            r#"{{"metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{rv}"}}}}"#
        );
        Arc::new(t.parse(json.as_bytes()).unwrap())
    }

    /// Over the total budget, the logs give way before any objects: a quiet
    /// store whose own log cannot make room fits once the busy store's log is
    /// trimmed, and only objects that alone exceed the total evict.
    #[test]
    fn should_trim_the_largest_log_before_evicting_a_quiet_store() {
        let fill = |s: &Store| {
            s.apply(vec![Change::Replace(OrdMap::new(), 1)]);
            for rv in 2..500 {
                s.apply(vec![Change::Put(obj(&format!("busy-{}", rv % 5), rv))]);
            }
        };
        // The sizes the busy store will reach, measured on a store without a budget.
        let probe = Store::new(limits(100_000), Arc::new(Budget::new(0, 0)), false);
        fill(&probe);
        let (log, objects) = (probe.history_size().1, probe.current().bytes);
        assert!(log > 20_000, "{log}");
        // The total allows the objects and a fifth of that log.
        let budget = Arc::new(Budget::new(0, objects + 2 * obj("q", 1).size() + log / 5));
        let busy = Arc::new(Store::new(limits(100_000), budget.clone(), false));
        let quiet = Arc::new(Store::new(limits(100_000), budget.clone(), false));
        busy.enroll();
        quiet.enroll();
        fill(&busy);
        quiet.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        quiet.apply(vec![Change::Put(obj("q", 600))]);
        assert!(quiet.exceeds_budget());
        assert!(quiet.fit_budget(), "the busy log made room");
        assert!(busy.history_size().1 <= log / 5 + 1000);
        assert!(budget.total() <= budget.max_total);
        assert!(!busy.exceeds_budget() && busy.fit_budget());
        // Objects that alone exceed the total: no log can help.
        let none = Arc::new(Budget::new(0, 1));
        let s = Arc::new(Store::new(limits(10), none, false));
        s.enroll();
        s.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        s.apply(vec![Change::Put(obj("big", 2))]);
        assert!(!s.fit_budget());
    }

    /// An indexed watcher on a quiet trigger is woken as the log turns over,
    /// and moving its cursor up keeps it inside the log however many other
    /// events pass (a kubelet whose node has no pod changes is never "too old").
    #[test]
    fn should_keep_a_quiet_indexed_watcher_inside_the_log() {
        let s = Store::new(limits(8), Arc::new(Budget::new(0, 0)), false);
        s.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        let quiet = Trigger::name("quiet");
        let guard = s.register(quiet);
        let mut cursor = s.cursor_after(1).unwrap();
        let mut wakes = 0;
        for rv in 2..200 {
            s.apply(vec![Change::Put(obj(&format!("busy-{}", rv % 5), rv))]);
            // What the watcher does when woken: read its trigger, move up.
            let woken = guard.notify.notified().now_or_never().is_some();
            if woken {
                wakes += 1;
                let (b, _) = s
                    .read(cursor, Some(quiet), 16)
                    .expect("still inside the log");
                assert!(b.events.is_empty(), "nothing concerns it");
                cursor = b.next;
            }
        }
        assert!(s.read(cursor, Some(quiet), 16).is_some());
        assert!(
            (40..=200).contains(&wakes),
            "woken about once per quarter of the log, not per event: {wakes}"
        );
    }

    /// A proof stamps a store only once it has applied everything up to the
    /// proof's floor, never moves it back (a store ahead of `Y` keeps its
    /// version), and a watch resumes from the stamped version.
    #[test]
    fn should_advance_to_a_proven_version_only_from_its_floor_and_never_back() {
        let s = Store::new(limits(100), Arc::new(Budget::new(0, 0)), false);
        assert!(s.advance_to(0, 5).is_none(), "not serving yet");
        s.apply(vec![Change::Replace(OrdMap::new(), 10)]);
        s.apply(vec![Change::Put(obj("a", 12))]);
        assert!(
            s.advance_to(15, 20).is_none(),
            "below the floor: nothing stamped"
        );
        assert_eq!(s.current().rv, 12);
        let v = s.advance_to(12, 20).expect("at the floor");
        assert_eq!((v.rv, s.current().rv), (20, 20));
        assert_eq!(
            names(&v),
            vec![("a".to_string(), 12)],
            "the same state, at 20"
        );
        s.apply(vec![Change::Put(obj("b", 25))]);
        let v = s.advance_to(12, 21).expect("ahead of the proof");
        assert_eq!(
            (v.rv, s.current().rv),
            (25, 25),
            "a store ahead of Y keeps its version"
        );
        let c = s
            .cursor_after(20)
            .expect("resumable from the stamped version");
        let (b, _) = s.read(c, None, 10).unwrap();
        assert_eq!(b.events.iter().map(|e| e.rv).collect::<Vec<_>>(), vec![25]);
        assert!(
            s.at(20)
                .is_some_and(|v| names(&v) == vec![("a".to_string(), 12)])
        );
    }

    /// The names and versions a state holds, for comparing states.
    fn names(v: &Version) -> Vec<(String, u64)> {
        v.objects
            .values()
            .map(|o| (o.name().to_string(), o.rv))
            .collect()
    }

    /// Every version the log reaches back to reads as it was: puts, deletes,
    /// bookmarks and a relist, rewound from the current state; its byte count
    /// too. Older than the log, inside a relist's gap, or newer than the
    /// cache, is not told.
    #[test]
    fn should_rewind_to_exactly_the_state_at_each_version_the_log_holds() {
        let s = Store::new(limits(40), Arc::new(Budget::new(0, 0)), false);
        s.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        let mut states = vec![(1, names(&s.current()), 0)];
        let mut rv = 1;
        for step in 0..60u64 {
            rv += 1;
            let change = match step % 7 {
                3 => Change::Delete(obj(&format!("o-{}", step % 5), rv)),
                5 => Change::Progress(rv),
                _ => Change::Put(obj(&format!("o-{}", step % 5), rv)),
            };
            let v = s.apply(vec![change]);
            states.push((rv, names(&v), v.bytes));
        }
        // A relist 5 versions on: what happened between is unknown.
        let before = rv;
        rv += 5;
        let mut relisted = OrdMap::new();
        for o in [obj("o-1", 3), obj("r", rv - 1)] {
            relisted.insert(o.key.clone(), o);
        }
        let v = s.apply(vec![Change::Replace(relisted, rv)]);
        states.push((rv, names(&v), v.bytes));
        for gap in before + 1..rv {
            assert!(s.at(gap).is_none(), "{gap} is inside the relist's gap");
            assert!(s.cursor_after(gap).is_none(), "no watch resumes inside it");
        }
        assert!(
            s.cursor_after(before).is_some(),
            "a watcher at its start gets the relist's events"
        );
        let from = s.history_from();
        assert!(from > 1, "the log has turned over: from {from}");
        for (at, want, bytes) in &states {
            match s.at(*at) {
                Some(got) => {
                    assert!(*at >= from, "{at} is older than the log ({from})");
                    assert_eq!(
                        (got.rv, names(&got), got.bytes),
                        (*at, want.clone(), *bytes)
                    );
                }
                None => assert!(*at < from, "{at} is inside the log ({from}) but not told"),
            }
        }
        assert!(s.at(rv + 1).is_none(), "a future version");
    }

    /// A version pages were cut from is kept for its continue tokens after
    /// the log has moved past it, until the retention ends.
    #[test]
    fn should_keep_a_pinned_version_beyond_the_log() {
        let mut l = limits(4);
        l.retention = Duration::from_millis(300);
        let s = Store::new(l, Arc::new(Budget::new(0, 0)), false);
        s.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        s.apply(vec![Change::Put(obj("a", 2))]);
        let paged = s.current();
        s.pin(&paged);
        for rv in 3..20 {
            s.apply(vec![Change::Put(obj("b", rv))]);
        }
        assert!(s.at(3).is_none(), "3 is older than the log");
        let got = s.at(2).expect("pinned");
        assert!(Arc::ptr_eq(&got, &paged));
        assert_eq!(names(&got), [("a".to_string(), 2)]);
        std::thread::sleep(Duration::from_millis(400));
        assert!(s.at(2).is_none(), "the retention has ended");
    }

    #[test]
    fn should_keep_versions_consistent_and_tell_older_ones() {
        let s = Store::new(limits(1000), Arc::new(Budget::new(0, 0)), false);
        assert_eq!(s.serving(), Serving::Syncing);
        s.apply(vec![Change::Replace(OrdMap::new(), 10)]);
        s.apply(vec![Change::Put(obj("x", 11))]);
        let v12 = s.apply(vec![Change::Put(obj("y", 12))]);
        s.apply(vec![Change::Delete(obj("x", 13))]);
        assert_eq!(s.serving(), Serving::Ready);
        assert_eq!(s.current().objects.len(), 1);
        assert_eq!(
            v12.objects.len(),
            2,
            "an old version is unaffected by later changes"
        );
        assert_eq!(s.at(11).unwrap().objects.len(), 1);
        assert_eq!(s.at(12).unwrap().rv, 12);
        assert_eq!(s.at(13).unwrap().rv, 13);
        assert!(s.at(9).is_none());
        let kinds: Vec<EventKind> = s.events_after(10).unwrap().iter().map(|e| e.kind).collect();
        let x = obj("x", 11).size();
        let line = obj("x", 11).body.len();
        let held = s.bytes() - s.current().bytes;
        assert!(
            held >= 2 * x + 3 * line,
            "the deleted x is held by its event (last state and displaced version), and three lines: {held}"
        );
        assert_eq!(
            kinds,
            [EventKind::Added, EventKind::Added, EventKind::Deleted]
        );
        // A relist at 20 where y changed, z appeared and nothing else is left.
        let mut relisted = OrdMap::new();
        for o in [obj("y", 15), obj("z", 14)] {
            relisted.insert(o.key.clone(), o);
        }
        s.apply(vec![Change::Put(obj("w", 16))]);
        s.apply(vec![Change::Replace(relisted, 20)]);
        let after: Vec<(EventKind, String, u64)> = s
            .events_after(16)
            .unwrap()
            .iter()
            .map(|e| (e.kind, e.object.name().to_string(), e.object.rv))
            .collect();
        assert_eq!(
            after,
            [
                (EventKind::Added, "z".to_string(), 14),
                (EventKind::Modified, "y".to_string(), 15),
                (EventKind::Deleted, "w".to_string(), 20),
            ],
            "a relist becomes the events a watcher would have seen, deletes included"
        );
        let gone = s.events_after(16).unwrap().pop().unwrap();
        assert!(
            std::str::from_utf8(&gone.object.body)
                .unwrap()
                .contains(r#""resourceVersion":"20""#)
        );
        assert_eq!((gone.rv, gone.object.rv), (20, 20), "placed at the relist");
        let item = s.current().objects.values().next().unwrap().clone();
        let mut out = bytes::BytesMut::new();
        item.write_item(&mut out);
        assert!(out.starts_with(b"{\"metadata\""), "{out:?}");
        assert!(
            item.body
                .starts_with(b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\"")
        );
    }
}
