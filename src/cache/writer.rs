//! The handles that move a store: its one [`Writer`] (the reflector's),
//! made with it by [`Store::new`], and the [`Stamper`]s a proof holds.

use std::sync::Arc;

use bytes::Bytes;
use imbl::OrdMap;

use super::serving::Serving;
use super::store::{Change, Options, Restored, Store, Version};
use crate::sync::MutexExt;

impl Store {
    /// An empty store (syncing) as `options` say, enrolled in its budget:
    /// its one writer, and the readers' handle.
    pub fn new(options: Options) -> (Writer, Arc<Store>) {
        let store = Store::empty(options);
        let writer = Writer {
            store: store.clone(),
            has_empty: false,
        };
        (writer, store)
    }
}

/// The one writer of a store: made with it by [`Store::new`], not `Clone`,
/// and every change goes through `&mut self`, so two tasks cannot both be
/// writing (kube-runtime's `Writer`). The reflector owns it.
pub struct Writer {
    store: Arc<Store>,
    /// Whether the bookmark template is known ([`Writer::learn_empty_object`]):
    /// asked per upstream event, so kept here rather than under a lock.
    has_empty: bool,
}

impl Writer {
    /// The store it writes, as its readers see it.
    pub fn store(&self) -> &Arc<Store> {
        &self.store
    }

    /// The handle a proof stamps this store through ([`Stamper`]).
    pub fn stamper(&self) -> Stamper {
        Stamper(self.store.clone())
    }

    /// Applies changes as one new version.
    pub fn apply(&mut self, changes: Vec<Change>) -> Arc<Version> {
        let s = &self.store;
        s.apply_locked(s.write(), changes, true)
    }

    /// Starts from a state restored from outside the upstream (a snapshot):
    /// its objects at its version, the event log complete from there. It is
    /// not served until the reflector's watch from that version is answered
    /// ([`Writer::resumed`]), unless the cache serves stale data
    /// (`cache.serve_stale`): then at once, as stale as the state is old.
    pub fn restore(&mut self, r: Restored) -> Arc<Version> {
        if let Some(e) = &r.empty {
            self.learn_empty_object(e);
        }
        let s = &self.store;
        let serve = s.staleness.serves_stale();
        s.staleness.heard_ago(r.age);
        s.apply_locked(s.write(), vec![Change::Replace(r.objects, r.rv)], serve)
    }

    /// The upstream answered the watch resumed from a restored state: the
    /// cache serves.
    pub fn resumed(&mut self) {
        let mut st = self.store.write();
        st.serving = st.serving.resumed();
    }

    /// Stops serving for good (the resource's versions are not integers).
    pub fn set_uncacheable(&mut self) {
        self.store.write().serving = Serving::Uncacheable;
    }

    /// The upstream just said something (a response head, a frame, a clean end).
    pub fn heard(&self) {
        self.store.staleness.heard();
    }

    /// Whether the bookmark template is still to be learned (a protobuf
    /// store, before the upstream's first bookmark).
    pub fn wants_empty_object(&self) -> bool {
        !self.has_empty && self.store.encoding() == crate::api::media::Encoding::Protobuf
    }

    /// Keeps the raw of an upstream protobuf `BOOKMARK` as the template of
    /// this store's bookmarks (the first one: the type's empty fields do
    /// not change while r8s runs against one upstream version).
    pub fn learn_empty_object(&mut self, raw: &[u8]) {
        let mut e = self.store.empty.locked();
        if e.is_none() {
            *e = Some(Bytes::copy_from_slice(raw));
        }
        self.has_empty = true;
    }

    /// Brings this cache within its budgets if watch logs can make room: the
    /// oldest events go first (watchers that far behind start again, as when
    /// `watch.history_*` trims a log), so churn shortens logs instead of
    /// evicting objects. Over its own budget, it trims its own log; over the
    /// total, its own and then the other stores' logs, largest first
    /// ([`crate::cache::budget::Budget`]). Whether it fits now; if not, its
    /// objects (or all stores' objects) alone are over, and the caller
    /// evicts it ([`Writer::evict_over_budget`]).
    pub fn fit_budget(&mut self) -> bool {
        let s = &self.store;
        let over = s.budget.over(s.bytes());
        if over.none() {
            return true;
        }
        s.trim_log(over.own.max(over.total));
        let over = s.budget.over(s.bytes());
        if over.own > 0 {
            return false;
        }
        over.total == 0 || s.budget.trim_others(&**s)
    }

    /// Drops every object and stops serving (requests pass through) until a
    /// relist fits the budget again ([`Writer::clear_over_budget`]).
    pub fn evict_over_budget(&mut self) {
        let s = self.store.clone();
        s.write().serving = Serving::OverBudget;
        self.apply(vec![Change::Replace(OrdMap::new(), s.current().rv)]);
        let mut st = s.write();
        st.pinned.clear();
        let rv = st.current.rv;
        st.history.restart_at(rv);
    }

    /// Retires the store: its resource is no longer served upstream. Drops
    /// every object and event (releasing their bytes) and ends its watches;
    /// requests that still reach it pass through. For good.
    pub fn retire(mut self) {
        let s = self.store.clone();
        s.write().serving = Serving::Removed;
        // Not serving: the history restarts empty, its bytes released.
        self.apply(vec![Change::Replace(OrdMap::new(), s.current().rv)]);
        s.write().pinned.clear();
        s.wake_all();
    }

    /// Serving again after a relist that fits the budget.
    pub fn clear_over_budget(&mut self) {
        let mut st = self.store.write();
        st.serving = st.serving.refitted();
    }
}

/// The path by which a proof moves a store it does not own: once the store
/// has applied everything up to a proof's floor, it takes the proven
/// version (`docs/consistent-reads.md`). It can do nothing else; the
/// reflector's [`Writer`] makes these for the resource's prover.
#[derive(Clone)]
pub struct Stamper(Arc<Store>);

impl Stamper {
    /// The store it stamps, as its readers see it.
    pub fn store(&self) -> &Arc<Store> {
        &self.0
    }

    /// Learns from a proof that the upstream changed nothing of this
    /// resource in (`floor`, `y`]: once the store's own watch has applied
    /// everything up to `floor`, its state is the upstream's at `y`, and its
    /// version becomes max(version, `y`) under the writer's lock, so it never
    /// moves back. Returns the version then current (at least `y`), or
    /// `None` while the store is below `floor` or not serving.
    pub fn advance_to(&self, floor: u64, y: u64) -> Option<Arc<Version>> {
        let s = &self.0;
        let guard = s.write();
        if guard.serving != Serving::Ready || guard.current.rv < floor {
            return None;
        }
        if guard.current.rv >= y {
            return Some(guard.current.clone());
        }
        Some(s.apply_locked(guard, vec![Change::Progress(y)], true))
    }
}

#[cfg(test)]
impl Writer {
    /// A unit test's store of `label` (`v1/pods` is node-indexed, as in
    /// r8s) in `encoding`, serving an empty state at `rv`, and its writer.
    pub(crate) fn for_tests(
        label: &str,
        encoding: crate::api::media::Encoding,
        rv: u64,
    ) -> (Writer, Arc<Store>) {
        let (mut w, s) = Store::new(Options {
            scope: Default::default(),
            limits: crate::cache::store::Limits::for_tests(10, 100),
            budget: super::budget::Budget::unlimited(),
            encoding,
            node_index: label == "v1/pods",
            indexes: Vec::new(),
            labels: crate::metrics::StoreLabels::new(label.into(), encoding.as_str()),
        });
        w.apply(vec![Change::Replace(OrdMap::new(), rv)]);
        (w, s)
    }
}
