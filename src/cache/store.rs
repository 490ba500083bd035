//! One resource's cache: immutable versions of its objects, one writer (the
//! reflector), many readers.
//!
//! Each applied change yields a new [`Version`] sharing structure with the
//! previous one (`imbl::OrdMap`, a persistent B-tree), so readers take an
//! `Arc` of a consistent version and never block or see a half-applied
//! change. Recent versions are retained for Exact reads and pagination.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, Instant};

use imbl::OrdMap;
use tokio::sync::{Notify, watch};

use super::history::{Appended, Batch, Cursor, History, Trigger};
pub use super::history::{Event, EventKind, diff};
use super::object::CachedObject;
use crate::sync::{MutexExt, RwLockExt};

/// Events kept per resource by default (5 minutes at 100 writes/s).
pub const DEFAULT_HISTORY_EVENTS: usize = 30_000;
/// Bytes the event log may keep alive per resource by default.
pub const DEFAULT_HISTORY_BYTES: usize = 512 << 20;

/// Objects by key, ordered as the apiserver lists them (`namespace/name`).
pub type Objects = OrdMap<Arc<str>, Arc<CachedObject>>;

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
}

impl Budget {
    /// Budgets of these sizes (0: no limit).
    pub fn new(max_per_resource: usize, max_total: usize) -> Self {
        Budget {
            total: AtomicUsize::new(0),
            max_per_resource,
            max_total,
        }
    }

    /// Bytes held by all caches.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }
}

struct State {
    current: Arc<Version>,
    retained: VecDeque<(Instant, Arc<Version>)>,
    synced: bool,
    history: History,
}

/// How big a store's event log may grow.
#[derive(Debug, Clone, Copy)]
pub struct HistoryBounds {
    /// Events kept.
    pub events: usize,
    /// Bytes the log may keep alive (0: no limit but `events`).
    pub bytes: usize,
}

impl Default for HistoryBounds {
    fn default() -> Self {
        HistoryBounds {
            events: DEFAULT_HISTORY_EVENTS,
            bytes: DEFAULT_HISTORY_BYTES,
        }
    }
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
    over_budget: AtomicBool,
    uncacheable: AtomicBool,
}

impl Store {
    /// An empty, unsynced store retaining versions for `retention` (at most
    /// `max_retained`), counting its bytes against `budget`.
    pub fn new(retention: Duration, max_retained: usize, budget: Arc<Budget>) -> Self {
        Self::with_history(
            retention,
            max_retained,
            budget,
            HistoryBounds::default(),
            false,
        )
    }

    /// [`Store::new`] with an event log of these bounds; `pods` indexes
    /// events by `spec.nodeName` too.
    pub fn with_history(
        retention: Duration,
        max_retained: usize,
        budget: Arc<Budget>,
        bounds: HistoryBounds,
        pods: bool,
    ) -> Self {
        let (rv, _) = watch::channel(0);
        Store {
            state: RwLock::new(State {
                current: Arc::new(Version {
                    rv: 0,
                    objects: OrdMap::new(),
                    bytes: 0,
                }),
                retained: VecDeque::new(),
                synced: false,
                history: History::new(bounds.events, bounds.bytes),
            }),
            rv,
            retention,
            max_retained: max_retained.max(1),
            wakers: Wakers::default(),
            pods,
            budget,
            over_budget: AtomicBool::new(false),
            uncacheable: AtomicBool::new(false),
        }
    }

    /// Marks the resource as not cacheable (its resource versions are not integers).
    pub fn set_uncacheable(&self) {
        self.uncacheable.store(true, Ordering::Relaxed);
        self.set_unsynced();
    }

    /// Whether the resource cannot be cached; its requests pass through.
    pub fn is_uncacheable(&self) -> bool {
        self.uncacheable.load(Ordering::Relaxed)
    }

    /// Whether the cache has settled: synced, or passing through for good reason.
    pub fn settled(&self) -> bool {
        self.synced() || self.is_over_budget() || self.is_uncacheable()
    }

    /// Whether this cache exceeds its budget or pushes the total over.
    pub fn exceeds_budget(&self) -> bool {
        let bytes = self.bytes();
        let b = &self.budget;
        (b.max_per_resource > 0 && bytes > b.max_per_resource)
            || (b.max_total > 0 && b.total() > b.max_total)
    }

    /// Drops every object and stops serving (requests pass through) until a
    /// relist fits the budget again.
    pub fn evict_over_budget(&self) {
        self.over_budget.store(true, Ordering::Relaxed);
        self.apply(vec![Change::Replace(OrdMap::new(), self.current().rv)]);
        let mut st = self.state.writing();
        st.retained.clear();
        st.synced = false;
        let rv = st.current.rv;
        let held = st.history.restart_at(rv);
        self.budget
            .total
            .fetch_sub(held.min(self.budget.total()), Ordering::Relaxed);
    }

    /// Serving again after a relist that fits the budget.
    pub fn clear_over_budget(&self) {
        self.over_budget.store(false, Ordering::Relaxed);
    }

    /// Whether the cache was evicted for its budget (and not yet refilled).
    pub fn is_over_budget(&self) -> bool {
        self.over_budget.load(Ordering::Relaxed)
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

    /// Whether the initial list has been applied.
    pub fn synced(&self) -> bool {
        self.state.reading().synced
    }

    /// The retained version at exactly `rv`, if any.
    pub fn at(&self, rv: u64) -> Option<Arc<Version>> {
        let st = self.state.reading();
        if st.current.rv == rv {
            return Some(st.current.clone());
        }
        // Versions are retained in rv order; a version covers [its rv, next rv).
        let idx = st.retained.partition_point(|(_, v)| v.rv <= rv);
        if idx == 0 {
            return None;
        }
        let (_, v) = &st.retained[idx - 1];
        let next_rv = st.retained.get(idx).map_or(st.current.rv, |(_, n)| n.rv);
        (v.rv <= rv && rv < next_rv).then(|| v.clone())
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
        let mut st = self.state.writing();
        let mut v = (*st.current).clone();
        let mut events = Vec::new();
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
                Change::Replace(objects, rv) => {
                    if st.synced {
                        events.extend(diff(&v.objects, &objects, rv));
                    } else {
                        // A first sync: the history starts complete from here.
                        let held = st.history.restart_at(rv);
                        self.budget
                            .total
                            .fetch_sub(held.min(self.budget.total()), Ordering::Relaxed);
                    }
                    v.bytes = objects.values().map(|o| o.size()).sum();
                    v.objects = objects;
                    v.rv = rv;
                }
            }
        }
        let old_bytes = st.current.bytes;
        if v.bytes >= old_bytes {
            self.budget
                .total
                .fetch_add(v.bytes - old_bytes, Ordering::Relaxed);
        } else {
            self.budget
                .total
                .fetch_sub(old_bytes - v.bytes, Ordering::Relaxed);
        }
        let v = Arc::new(v);
        let now = Instant::now();
        if st.current.rv != v.rv {
            let prev = std::mem::replace(&mut st.current, v.clone());
            if st.synced {
                st.retained.push_back((now, prev));
            }
        } else {
            st.current = v.clone();
        }
        while st.retained.len() > self.max_retained
            || st
                .retained
                .front()
                .is_some_and(|(t, _)| now.duration_since(*t) > self.retention)
        {
            st.retained.pop_front();
        }
        st.synced = true;
        let Appended {
            held,
            touched,
            refresh,
        } = st.history.append(events, self.pods);
        if held >= 0 {
            self.budget
                .total
                .fetch_add(held as usize, Ordering::Relaxed);
        } else {
            self.budget.total.fetch_sub(
                ((-held) as usize).min(self.budget.total()),
                Ordering::Relaxed,
            );
        }
        drop(st);
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

    /// Marks the store unsynced (the reflector lost the upstream and must relist).
    pub fn set_unsynced(&self) {
        self.state.writing().synced = false;
    }

    /// Number of retained versions (accounting).
    pub fn retained(&self) -> usize {
        self.state.reading().retained.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::object::TypeInfo;
    use futures_util::FutureExt;

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

    /// An indexed watcher on a quiet trigger is woken as the log turns over,
    /// and moving its cursor up keeps it inside the log however many other
    /// events pass (a kubelet whose node has no pod changes is never "too old").
    #[test]
    fn should_keep_a_quiet_indexed_watcher_inside_the_log() {
        let s = Store::with_history(
            Duration::from_secs(60),
            100,
            Arc::new(Budget::new(0, 0)),
            HistoryBounds {
                events: 8,
                bytes: 0,
            },
            false,
        );
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

    #[test]
    fn should_keep_versions_consistent_and_retained() {
        let s = Store::new(Duration::from_secs(60), 100, Arc::new(Budget::new(0, 0)));
        assert!(!s.synced());
        s.apply(vec![Change::Replace(OrdMap::new(), 10)]);
        s.apply(vec![Change::Put(obj("x", 11))]);
        let v12 = s.apply(vec![Change::Put(obj("y", 12))]);
        s.apply(vec![Change::Delete(obj("x", 13))]);
        assert!(s.synced());
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
        let held = s.bytes() - s.current().bytes;
        assert!(
            held >= 2 * x + 3 * x,
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
            std::str::from_utf8(&gone.object.json)
                .unwrap()
                .contains(r#""resourceVersion":"20""#)
        );
        assert_eq!((gone.rv, gone.object.rv), (20, 20), "placed at the relist");
        let item = s.current().objects.values().next().unwrap().clone();
        let mut out = bytes::BytesMut::new();
        item.write_item(&mut out);
        assert!(out.starts_with(b"{\"metadata\""), "{out:?}");
        assert!(
            item.json
                .starts_with(b"{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\"")
        );
    }
}
