//! One resource's cache: immutable versions of its objects, one writer (the
//! reflector), many readers.
//!
//! Each applied change yields a new [`Version`] sharing structure with the
//! previous one (`imbl::OrdMap`, a persistent B-tree), so readers take an
//! `Arc` of a consistent version and never block or see a half-applied
//! change. Recent versions are retained for Exact reads and pagination.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, RwLock};
use std::time::{Duration, Instant};

use imbl::OrdMap;
use tokio::sync::watch;

use super::object::CachedObject;

/// Events kept per resource (enough for 5 minutes at 100 writes/s).
pub const DEFAULT_HISTORY: usize = 30_000;

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

/// What a watcher would have seen happen to one object.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventKind {
    /// Created (or entered the cache on a relist).
    Added,
    /// Updated.
    Modified,
    /// Deleted (or gone on a relist).
    Deleted,
}

/// One change to the cache, for watchers: the object after it (for deletes,
/// its last state stamped with the delete's version) and before it.
#[derive(Debug)]
pub struct Event {
    /// Its place in the event history: the object's resource version, or for
    /// the events of a relist, the relist's (they happened by then, in an
    /// unknown order), so a watcher resuming after any earlier event gets them.
    pub rv: u64,
    /// What happened.
    pub kind: EventKind,
    /// The object after the change.
    pub object: Arc<CachedObject>,
    /// The object before it.
    pub prev: Option<Arc<CachedObject>>,
    /// The JSON watch-stream line, serialized once for every watcher.
    line: std::sync::OnceLock<bytes::Bytes>,
}

impl Event {
    fn new(
        rv: u64,
        kind: EventKind,
        object: Arc<CachedObject>,
        prev: Option<Arc<CachedObject>>,
    ) -> Self {
        Event {
            rv,
            kind,
            object,
            prev,
            line: std::sync::OnceLock::new(),
        }
    }

    /// `{"type":"MODIFIED","object":{...}}\n`, built on first use and shared.
    pub fn line(&self) -> &bytes::Bytes {
        self.line
            .get_or_init(|| crate::codec::json::watch_line(self.kind.as_str(), &self.object.json))
    }
}

impl EventKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        match self {
            EventKind::Added => "ADDED",
            EventKind::Modified => "MODIFIED",
            EventKind::Deleted => "DELETED",
        }
    }
}

/// The events that turn `old` into `new` (a relist at `rv`): objects new or
/// changed (ordered by their resource versions), then those gone (their last
/// state, stamped `rv`). All are placed at `rv` in the history, so no watcher
/// misses one, deletes included.
pub fn diff(old: &Objects, new: &Objects, rv: u64) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    for (k, o) in new.iter() {
        match old.get(k) {
            None => out.push(Event::new(rv, EventKind::Added, o.clone(), None)),
            Some(p) if p.rv != o.rv => out.push(Event::new(
                rv,
                EventKind::Modified,
                o.clone(),
                Some(p.clone()),
            )),
            Some(_) => {}
        }
    }
    out.sort_by_key(|e| e.object.rv);
    for (k, p) in old.iter() {
        if !new.contains_key(k) {
            out.push(Event::new(
                rv,
                EventKind::Deleted,
                Arc::new(p.at_version(rv)),
                Some(p.clone()),
            ));
        }
    }
    out
}

struct State {
    current: Arc<Version>,
    retained: VecDeque<(Instant, Arc<Version>)>,
    synced: bool,
    history: VecDeque<Arc<Event>>,
    /// The history holds every event with a resource version above this.
    history_from: u64,
    /// Bytes of object versions only the history (and retained versions) keep alive.
    history_bytes: usize,
}

/// The cache of one resource.
pub struct Store {
    state: RwLock<State>,
    rv: watch::Sender<u64>,
    retention: Duration,
    max_retained: usize,
    max_history: usize,
    budget: Arc<Budget>,
    over_budget: AtomicBool,
    uncacheable: AtomicBool,
}

impl Store {
    /// An empty, unsynced store retaining versions for `retention` (at most
    /// `max_retained`), counting its bytes against `budget`.
    pub fn new(retention: Duration, max_retained: usize, budget: Arc<Budget>) -> Self {
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
                history: VecDeque::new(),
                history_from: 0,
                history_bytes: 0,
            }),
            rv,
            retention,
            max_retained: max_retained.max(1),
            max_history: DEFAULT_HISTORY,
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
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
        st.retained.clear();
        st.synced = false;
        let held = std::mem::take(&mut st.history_bytes);
        st.history.clear();
        st.history_from = st.current.rv;
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
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .current
            .clone()
    }

    /// Bytes this cache holds: current objects, plus the older object versions
    /// its event history (and so its retained versions) keeps alive.
    pub fn bytes(&self) -> usize {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        st.current.bytes + st.history_bytes
    }

    /// Whether the initial list has been applied.
    pub fn synced(&self) -> bool {
        self.state.read().unwrap_or_else(|p| p.into_inner()).synced
    }

    /// The retained version at exactly `rv`, if any.
    pub fn at(&self, rv: u64) -> Option<Arc<Version>> {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
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
        let mut st = self.state.write().unwrap_or_else(|p| p.into_inner());
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
                        st.history_from = rv;
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
        let mut held: isize = 0;
        for e in events {
            held += e.held_bytes() as isize;
            st.history.push_back(Arc::new(e));
        }
        while st.history.len() > self.max_history {
            if let Some(e) = st.history.pop_front() {
                held -= e.held_bytes() as isize;
                st.history_from = st.history_from.max(e.rv);
            }
        }
        st.history_bytes = (st.history_bytes as isize + held).max(0) as usize;
        if held >= 0 {
            self.budget
                .total
                .fetch_add(held as usize, Ordering::Relaxed);
        } else {
            self.budget
                .total
                .fetch_sub((-held) as usize, Ordering::Relaxed);
        }
        drop(st);
        self.rv.send_replace(v.rv);
        v
    }

    /// The recorded events with a resource version above `rv`, oldest first;
    /// `None` when `rv` is older than the history keeps.
    pub fn events_after(&self, rv: u64) -> Option<Vec<Arc<Event>>> {
        self.read_after(rv).map(|(events, _)| events)
    }

    /// The events after `rv` and the version they bring a reader up to (all
    /// changes up to it are in them): `None` when `rv` is older than the history.
    pub fn read_after(&self, rv: u64) -> Option<(Vec<Arc<Event>>, u64)> {
        let st = self.state.read().unwrap_or_else(|p| p.into_inner());
        if rv < st.history_from {
            return None;
        }
        let from = st.history.partition_point(|e| e.rv <= rv);
        let events: Vec<Arc<Event>> = st.history.range(from..).cloned().collect();
        Some((events, st.current.rv.max(rv)))
    }

    /// The oldest resource version a watch can resume from.
    pub fn history_from(&self) -> u64 {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .history_from
    }

    /// A receiver that changes whenever the cache's version does.
    pub fn subscribe(&self) -> watch::Receiver<u64> {
        self.rv.subscribe()
    }

    /// Marks the store unsynced (the reflector lost the upstream and must relist).
    pub fn set_unsynced(&self) {
        self.state.write().unwrap_or_else(|p| p.into_inner()).synced = false;
    }

    /// Number of retained versions (accounting).
    pub fn retained(&self) -> usize {
        self.state
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .retained
            .len()
    }
}

impl Event {
    /// Bytes of object versions this event alone keeps alive: the version it
    /// displaced, and for a delete the final state too (current objects are
    /// counted with the version that holds them).
    fn held_bytes(&self) -> usize {
        let prev = self.prev.as_ref().map_or(0, |p| p.size());
        if self.kind == EventKind::Deleted {
            prev + self.object.size()
        } else {
            prev
        }
    }
}

#[cfg(test)]
impl Event {
    fn events_after_is_placed_at(&self, rv: u64) -> bool {
        self.rv == rv && self.object.rv == rv
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::object::TypeInfo;

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
        assert_eq!(
            s.bytes(),
            s.current().bytes + 2 * x,
            "the deleted x is held by its event (last state and displaced version)"
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
        assert!(gone.events_after_is_placed_at(20));
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
