//! The sim's storage: an etcd-like multi-version store with one global revision.
//!
//! Current objects per resource, plus a bounded history of events (the
//! compaction window). Any state at a revision inside the window can be
//! rebuilt by undoing newer events, which is how Exact lists and continue
//! tokens are served; older revisions are "compacted" (410).

use std::collections::{BTreeMap, VecDeque};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};
use std::time::Duration;

use bytes::{BufMut, Bytes, BytesMut};
use serde_json::{Map, Value};
use tokio::sync::{broadcast, watch};

use crate::resources::ResourceDef;
use r8s::api::status::Status;
use r8s::sync::MutexExt;

/// One stored object version: parsed, and serialized once at write time.
#[derive(Debug)]
pub struct Obj {
    /// Its JSON (with `kind` and `apiVersion`), as a get or watch event
    /// carries it: the one form the sim keeps. The parsed object and the
    /// list item are derived from it when asked ([`Obj::value`],
    /// [`Obj::write_item`]), so a million pods fit in about 10 GB.
    pub full: Bytes,
    /// Where the list item's fields start in `full`, after `{` (past
    /// `kind` and `apiVersion` for built-ins, whose items drop them; 1 for
    /// the others).
    item_at: usize,
    /// Its `metadata.resourceVersion`.
    pub rv: u64,
    /// Its protobuf body, encoded on first use by `sim::protobuf::body_of`
    /// (`None`: a kind without one).
    pub proto: OnceLock<Option<Bytes>>,
}

impl Obj {
    fn new(typed: bool, value: Value, rv: u64) -> Arc<Obj> {
        let value = go_order(value);
        let full = Bytes::from(serde_json::to_vec(&value).expect("JSON serializes"));
        let item_at = if typed {
            1
        } else {
            // `go_order` wrote `kind` and `apiVersion` first: skip them.
            let mut head = Map::new();
            for k in ["kind", "apiVersion"] {
                if let Some(v) = value.get(k) {
                    head.insert(k.to_string(), v.clone());
                }
            }
            match head.len() {
                0 => 1,
                // `{"kind":..,"apiVersion":..}` is the head of `full` and a comma.
                _ => serde_json::to_vec(&head)
                    .expect("JSON serializes")
                    .len()
                    .min(full.len() - 1),
            }
        };
        Arc::new(Obj {
            full,
            item_at,
            rv,
            proto: OnceLock::new(),
        })
    }

    /// The object as `def` serves it: a custom resource's objects in the
    /// version asked for, whichever they were written in (conversion
    /// `None`: only `apiVersion` differs; `Webhook`: the sim's webhook also
    /// marks it).
    pub fn served_as(self: &Arc<Self>, def: &ResourceDef) -> Arc<Obj> {
        if !def.custom {
            return self.clone();
        }
        let want = def.gvr.api_version();
        // `go_order` put `kind` and `apiVersion` first: the first
        // `apiVersion` is the object's.
        const KEY: &[u8] = b"\"apiVersion\":\"";
        let at = self.full.windows(KEY.len()).position(|w| w == KEY);
        let current = at.map(|i| &self.full[i + KEY.len()..]);
        if current
            .is_some_and(|c| c.starts_with(want.as_bytes()) && c.get(want.len()) == Some(&b'"'))
        {
            return self.clone();
        }
        let mut value = self.value();
        value["apiVersion"] = Value::String(want);
        if def.webhook {
            let meta = &mut value["metadata"];
            if !meta["annotations"].is_object() {
                meta["annotations"] = Value::Object(Default::default());
            }
            meta["annotations"][super::resources::CONVERTED_BY_WEBHOOK] =
                Value::String("true".into());
        }
        Obj::new(def.items_typed, value, self.rv)
    }

    /// The object as served for `def` ([`Obj::served_as`]), and with `drop`
    /// (`drop=metadata.managedFields`, KEP-5958) as a server whose encoder
    /// skips `metadata.managedFields` writes it: the parsed object without
    /// the field, encoded again (the sim's own reading, not r8s's cut).
    pub fn shown(self: &Arc<Self>, def: &ResourceDef, drop: bool) -> Arc<Obj> {
        let served = self.served_as(def);
        if !drop {
            return served;
        }
        let mut value = served.value();
        match value["metadata"].as_object_mut() {
            Some(meta) if meta.contains_key("managedFields") => {
                meta.shift_remove("managedFields");
            }
            _ => return served,
        }
        Obj::new(def.items_typed, value, served.rv)
    }

    /// The object, parsed from its JSON (each call parses it again).
    pub fn value(&self) -> Value {
        serde_json::from_slice(&self.full).expect("the sim's own JSON parses")
    }

    /// The object as a list item: its JSON, less `kind` and `apiVersion`
    /// for built-ins.
    pub fn write_item(&self, out: &mut BytesMut) {
        out.put_u8(b'{');
        out.put_slice(&self.full[self.item_at..]);
    }

    /// The bytes [`Obj::write_item`] writes.
    pub fn item_len(&self) -> usize {
        1 + self.full.len() - self.item_at
    }

    /// A copy of `value` at `rv`, for an event that carries an older state
    /// (a delete, an object leaving a watcher's selector); `typed`: its
    /// type's list items carry `kind`/`apiVersion`.
    pub fn at_version(&self, typed: bool, rv: u64) -> Arc<Obj> {
        let mut value = self.value();
        value["metadata"]["resourceVersion"] = Value::String(rv.to_string());
        Obj::new(typed, value, rv)
    }
}

/// The object's top-level fields in the order Go's encoder writes a typed
/// object (`kind`, `apiVersion`, `metadata`, then the rest as they came),
/// whatever order a client sent them in.
fn go_order(value: Value) -> Value {
    let Value::Object(mut m) = value else {
        return value;
    };
    let mut out = Map::with_capacity(m.len());
    for k in ["kind", "apiVersion", "metadata"] {
        if let Some(v) = m.shift_remove(k) {
            out.insert(k.to_string(), v);
        }
    }
    out.extend(m);
    Value::Object(out)
}

/// Watch event types.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// Created.
    Added,
    /// Updated.
    Modified,
    /// Deleted.
    Deleted,
}

impl EventType {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
        }
    }
}

/// One change, as etcd's watch reports it.
#[derive(Debug)]
pub struct Event {
    /// The revision of the change.
    pub rv: u64,
    /// Where the object is kept ([`super::resources::ResourceDef::storage`]).
    pub res: usize,
    /// What happened.
    pub etype: EventType,
    /// Storage key (`ns/name` or `name`).
    pub key: String,
    /// The object after the change (for deletes: the last state, stamped with the delete's revision).
    pub obj: Arc<Obj>,
    /// The object before the change.
    pub prev: Option<Arc<Obj>>,
}

/// Retained events after a revision, and a receiver for the rest.
pub type Subscription = (Vec<Arc<Event>>, broadcast::Receiver<Arc<Event>>);

/// What a write does to the object under a key.
pub enum Mutation {
    /// Store this object (its `metadata.resourceVersion` is stamped by the store).
    Put(Value),
    /// Delete the object.
    Delete,
}

/// A read at a revision older than the compaction window.
#[derive(Debug)]
pub struct TooOld {
    /// The oldest revision still available.
    pub oldest: u64,
}

struct State {
    rv: u64,
    objects: Vec<BTreeMap<String, Arc<Obj>>>,
    /// Whether each resource's list items carry `kind`/`apiVersion`.
    typed: Vec<bool>,
    history: VecDeque<Arc<Event>>,
    history_cap: usize,
    compacted: u64,
    /// Watches must resume after this (a test hook: the apiserver's watch cache lost its window).
    watch_floor: u64,
}

/// The store; cheap to share behind an `Arc`.
pub struct Store {
    state: Mutex<State>,
    events: broadcast::Sender<Arc<Event>>,
    rv: watch::Sender<u64>,
}

/// Storage key of an object.
pub fn key(namespace: Option<&str>, name: &str) -> String {
    match namespace {
        Some(ns) => format!("{ns}/{name}"),
        None => name.to_string(),
    }
}

impl Store {
    /// An empty store of resources whose list items carry
    /// `kind`/`apiVersion` or not (`typed`, by index), keeping `history` events.
    pub fn new(history: usize, typed: Vec<bool>) -> Self {
        let (events, _) = broadcast::channel(16384);
        let (rv, _) = watch::channel(1);
        Store {
            state: Mutex::new(State {
                rv: 1,
                objects: typed.iter().map(|_| BTreeMap::new()).collect(),
                typed,
                history: VecDeque::new(),
                history_cap: history.max(1),
                compacted: 1,
                watch_floor: 0,
            }),
            events,
            rv,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.locked()
    }

    /// The current revision.
    pub fn current_rv(&self) -> u64 {
        self.lock().rv
    }

    /// The oldest revision still servable.
    pub fn compacted(&self) -> u64 {
        self.lock().compacted
    }

    /// The current object under `key`.
    pub fn get(&self, res: usize, key: &str) -> Option<Arc<Obj>> {
        self.lock().objects[res].get(key).cloned()
    }

    /// `f` of the current objects of `res` (under the lock, uncopied), and the revision.
    pub fn with_current<T>(
        &self,
        res: usize,
        f: impl FnOnce(&BTreeMap<String, Arc<Obj>>) -> T,
    ) -> (u64, T) {
        let st = self.lock();
        (st.rv, f(&st.objects[res]))
    }

    /// The objects of `res` at revision `at` (current when `None`), and that revision.
    pub fn snapshot(
        &self,
        res: usize,
        at: Option<u64>,
    ) -> Result<(u64, BTreeMap<String, Arc<Obj>>), TooOld> {
        let st = self.lock();
        let Some(at) = at.filter(|at| *at < st.rv) else {
            return Ok((st.rv, st.objects[res].clone()));
        };
        if at < st.compacted {
            return Err(TooOld {
                oldest: st.compacted,
            });
        }
        let mut map = st.objects[res].clone();
        for ev in st.history.iter().rev().take_while(|e| e.rv > at) {
            if ev.res != res {
                continue;
            }
            match &ev.prev {
                Some(p) => map.insert(ev.key.clone(), p.clone()),
                None => map.remove(&ev.key),
            };
        }
        Ok((at, map))
    }

    /// Subscribes to changes after `after`: the retained events of `res` newer
    /// than it, and a receiver for everything that follows (no gap, no overlap).
    pub fn watch_from(&self, res: usize, after: u64) -> Result<Subscription, TooOld> {
        let st = self.lock();
        let oldest = st.compacted.max(st.watch_floor);
        if after < oldest {
            return Err(TooOld { oldest });
        }
        let past: Vec<Arc<Event>> = st
            .history
            .iter()
            .filter(|e| e.rv > after && e.res == res)
            .cloned()
            .collect();
        Ok((past, self.events.subscribe()))
    }

    /// From now on, watches resuming from the current revision or before get
    /// 410 (reads are unaffected): forces watch clients to relist. They get
    /// back in once a write has moved the revision past it.
    pub fn expire_watches(&self) {
        let mut st = self.lock();
        st.watch_floor = st.rv + 1;
    }

    /// Forgets the history up to now (etcd's compaction): older versions
    /// answer 410 to reads and watches.
    pub fn compact(&self) {
        let mut st = self.lock();
        st.history.clear();
        st.compacted = st.rv;
    }

    /// The current objects of `res` and a receiver for every later change, atomically.
    pub fn watch_current(
        &self,
        res: usize,
    ) -> (
        u64,
        BTreeMap<String, Arc<Obj>>,
        broadcast::Receiver<Arc<Event>>,
    ) {
        let st = self.lock();
        (st.rv, st.objects[res].clone(), self.events.subscribe())
    }

    /// A receiver of the current revision (to wait for one).
    pub fn rv_watch(&self) -> watch::Receiver<u64> {
        self.rv.subscribe()
    }

    /// Waits until the revision reaches `rv`; false on timeout.
    pub async fn wait_for_rv(&self, rv: u64, timeout: Duration) -> bool {
        let mut w = self.rv.subscribe();
        tokio::time::timeout(timeout, w.wait_for(|cur| *cur >= rv))
            .await
            .is_ok_and(|r| r.is_ok())
    }

    /// Applies one write to the object under `key`, atomically.
    ///
    /// `f` sees the current object and the revision the write will get, and
    /// decides; its `Status` error aborts the write.
    pub fn mutate(
        &self,
        res: usize,
        key: &str,
        f: impl FnOnce(Option<&Arc<Obj>>, u64) -> Result<Mutation, Status>,
    ) -> Result<Arc<Event>, Status> {
        let mut st = self.lock();
        let next = st.rv + 1;
        let prev = st.objects[res].get(key).cloned();
        let (etype, obj) = match f(prev.as_ref(), next)? {
            Mutation::Put(mut value) => {
                value["metadata"]["resourceVersion"] = Value::String(next.to_string());
                let obj = Obj::new(st.typed[res], value, next);
                st.objects[res].insert(key.to_string(), obj.clone());
                let t = if prev.is_some() {
                    EventType::Modified
                } else {
                    EventType::Added
                };
                (t, obj)
            }
            Mutation::Delete => {
                let Some(p) = &prev else {
                    return Err(Status::internal("delete of a missing object"));
                };
                st.objects[res].remove(key);
                (EventType::Deleted, p.at_version(st.typed[res], next))
            }
        };
        st.rv = next;
        let ev = Arc::new(Event {
            rv: next,
            res,
            etype,
            key: key.to_string(),
            obj,
            prev,
        });
        st.history.push_back(ev.clone());
        while st.history.len() > st.history_cap {
            if let Some(old) = st.history.pop_front() {
                st.compacted = old.rv;
            }
        }
        let _ = self.events.send(ev.clone());
        self.rv.send_replace(next);
        Ok(ev)
    }

    /// Changes the object under `key` to `value` at a new revision that no
    /// watch hears of and the history does not hold (a test hook: a cache
    /// whose watch missed an event, which only a fresh list shows).
    pub fn tamper(&self, res: usize, key: &str, mut value: Value) -> u64 {
        let mut st = self.lock();
        let next = st.rv + 1;
        value["metadata"]["resourceVersion"] = Value::String(next.to_string());
        let obj = Obj::new(st.typed[res], value, next);
        st.objects[res].insert(key.to_string(), obj);
        st.rv = next;
        self.rv.send_replace(next);
        next
    }

    /// What [`Store::mutate`] would store, without storing it (`dryRun=All`):
    /// no version is spent and no watcher hears of it. A created object has
    /// no `resourceVersion` and a changed one keeps its current one, as the
    /// apiserver's dry-run storage answers.
    pub fn mutate_dry(
        &self,
        res: usize,
        key: &str,
        f: impl FnOnce(Option<&Arc<Obj>>, u64) -> Result<Mutation, Status>,
    ) -> Result<Arc<Obj>, Status> {
        let st = self.lock();
        let prev = st.objects[res].get(key).cloned();
        match f(prev.as_ref(), st.rv + 1)? {
            Mutation::Put(mut value) => {
                let rv = prev.as_ref().map_or(0, |p| p.rv);
                match &prev {
                    Some(p) => {
                        value["metadata"]["resourceVersion"] = Value::String(p.rv.to_string())
                    }
                    None => {
                        if let Some(m) = value["metadata"].as_object_mut() {
                            m.remove("resourceVersion");
                        }
                    }
                }
                Ok(Obj::new(st.typed[res], value, rv))
            }
            Mutation::Delete => prev.ok_or_else(|| Status::internal("delete of a missing object")),
        }
    }

    /// Room for one more resource's objects (a custom resource defined
    /// while the sim runs); its index. `typed`: its list items carry
    /// `kind`/`apiVersion`.
    pub fn add_resource(&self, typed: bool) -> usize {
        let mut st = self.lock();
        st.objects.push(BTreeMap::new());
        st.typed.push(typed);
        st.objects.len() - 1
    }

    /// Every key of `res`.
    pub fn keys(&self, res: usize) -> Vec<String> {
        self.lock().objects[res].keys().cloned().collect()
    }

    /// Keys of `res` under a namespace (for cascading namespace deletes).
    pub fn keys_in_namespace(&self, res: usize, ns: &str) -> Vec<String> {
        let prefix = format!("{ns}/");
        self.lock().objects[res]
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .map(|(k, _)| k.clone())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn put(s: &Store, name: &str, v: i64) -> u64 {
        let obj = json!({"kind": "ConfigMap", "apiVersion": "v1",
                         "metadata": {"name": name, "namespace": "a"}, "data": {"v": v}});
        s.mutate(1, &key(Some("a"), name), |_, _| Ok(Mutation::Put(obj)))
            .unwrap()
            .rv
    }

    #[test]
    fn should_rebuild_past_states_inside_the_window() {
        let s = Store::new(3, crate::catalog::Catalog::default().items_typed());
        let r1 = put(&s, "x", 1);
        put(&s, "x", 2);
        put(&s, "y", 1);
        let (at, snap) = s.snapshot(1, Some(r1)).unwrap();
        assert_eq!(at, r1);
        assert_eq!(snap.len(), 1);
        assert_eq!(snap["a/x"].value()["data"]["v"], 1);
        put(&s, "z", 1);
        assert!(s.snapshot(1, Some(r1 - 1)).is_err(), "compacted");
        let (past, _) = s.watch_from(1, r1).unwrap();
        assert_eq!(past.len(), 3);
        assert!(past[0].prev.is_some());
    }
}
