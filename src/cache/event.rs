//! One change to the cache as watchers get it: the object before and after,
//! and its watch event in every form a watcher asks for, each serialized
//! once for all of them (the object whole or its metadata only, with or
//! without managedFields; as its own type, or as ADDED/DELETED for a
//! watcher whose filter it enters or leaves). Forms made after the event
//! entered the log are counted against the store's budget until it leaves.

use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::Instant;

use bytes::Bytes;

use super::object::CachedObject;
use super::view::View;
use crate::api::media::Encoding;
use crate::api::shard::{self, ShardKey};
use crate::codec::gzip::{self, Block};

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

impl EventKind {
    /// The watch event type.
    pub fn as_str(self) -> &'static str {
        self.metric().as_str()
    }

    /// Its metric label.
    pub fn metric(self) -> crate::metrics::EventType {
        match self {
            EventKind::Added => crate::metrics::EventType::Added,
            EventKind::Modified => crate::metrics::EventType::Modified,
            EventKind::Deleted => crate::metrics::EventType::Deleted,
        }
    }
}

/// An exact value of an indexed field (hashed: a collision only costs a
/// watcher a look at an event its filter then drops).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Trigger(u64);

impl Trigger {
    fn of(field: u8, value: &str) -> Self {
        let mut h = std::hash::DefaultHasher::new();
        field.hash(&mut h);
        value.hash(&mut h);
        Trigger(h.finish())
    }

    /// Objects in this namespace.
    pub fn namespace(ns: &str) -> Self {
        Self::of(0, ns)
    }

    /// Objects with this name (in any namespace).
    pub fn name(name: &str) -> Self {
        Self::of(1, name)
    }

    /// Pods bound to this node (`spec.nodeName`).
    pub fn node(node: &str) -> Self {
        Self::of(2, node)
    }

    /// Objects whose shard key hashes into `bucket` ([`shard::bucket`]):
    /// it wakes the sharded watchers whose ranges reach into that bucket,
    /// and indexes nothing (their reads filter the log).
    /// (Not hashed: two per object per event, and the value is its own
    /// name; meeting a hashed trigger's value only costs a spurious wake.)
    pub fn shard(key: ShardKey, bucket: u8) -> Self {
        let field: u64 = match key {
            ShardKey::Uid => 3,
            ShardKey::Namespace => 4,
        };
        Trigger(field << 8 | u64::from(bucket))
    }

    /// The shard buckets an object's state is in, appended to `out`.
    pub(super) fn shards_of(o: &CachedObject, out: &mut Vec<Trigger>) {
        out.push(Self::shard(ShardKey::Uid, shard::bucket(o.uid_hash)));
        let ns = shard::fnv1a(o.namespace());
        out.push(Self::shard(ShardKey::Namespace, shard::bucket(ns)));
    }

    /// The triggers an object's state concerns, appended to `out`.
    pub(super) fn of_object(o: &CachedObject, pods: bool, out: &mut Vec<Trigger>) {
        if o.ns_len > 0 {
            out.push(Trigger::namespace(o.namespace()));
        }
        out.push(Trigger::name(o.name()));
        if pods {
            out.push(Trigger::node(o.field("spec.nodeName")));
        }
    }
}

/// [`Event::built`] of an event the log has let go: forms made after that
/// are not counted (the log no longer holds them).
const RETIRED: usize = usize::MAX;

/// Lines per view: the event's own type, ADDED, DELETED (or MODIFIED).
type Lines = [OnceLock<Bytes>; 3];

/// One change to the cache, for watchers: the object after it (for deletes,
/// its last state stamped with the delete's version) and before it.
#[derive(Debug)]
pub struct Event {
    /// Its place in the log (set when appended).
    pub seq: u64,
    /// The object's resource version, or for the events of a relist, the
    /// relist's (they happened by then, in an unknown order), so a watcher
    /// resuming after any earlier event gets them.
    pub rv: u64,
    /// What happened.
    pub kind: EventKind,
    /// The object after the change.
    pub object: Arc<CachedObject>,
    /// The object before it.
    pub prev: Option<Arc<CachedObject>>,
    /// When r8s applied it (for delivery latency).
    pub arrived: Instant,
    /// The event as its watchers get it (a JSON line, or a protobuf frame), serialized once when appended.
    pub(super) line: Bytes,
    /// The other forms of the object as cached and of its metadata
    /// ([`Event::line`]), each built once on first use; most events never
    /// need one, so they cost a pointer.
    others: OnceLock<Box<[Lines; 2]>>,
    /// The same without managedFields, apart, so that events no watcher
    /// asks that of cost a pointer more, not four slots.
    dropped: OnceLock<Box<[Lines; 2]>>,
    /// Its lines compressed on their own, for gzip streaming lists
    /// ([`Event::gzip_line`]), each once on first use.
    deflated: OnceLock<Box<[[OnceLock<Block>; 3]; 4]>>,
    pub(super) triggers: Box<[Trigger]>,
    /// Bytes of the forms built since it entered the log, counted in
    /// `counted` ([`RETIRED`] once the log let it go).
    built: AtomicUsize,
    /// The log's count of such bytes (set when appended).
    pub(super) counted: Option<Arc<AtomicUsize>>,
}

impl Event {
    /// An event not yet in the log.
    pub fn new(
        rv: u64,
        kind: EventKind,
        object: Arc<CachedObject>,
        prev: Option<Arc<CachedObject>>,
    ) -> Self {
        Event {
            seq: 0,
            rv,
            kind,
            object,
            prev,
            arrived: Instant::now(),
            line: Bytes::new(),
            others: OnceLock::new(),
            dropped: OnceLock::new(),
            deflated: OnceLock::new(),
            triggers: Box::new([]),
            built: AtomicUsize::new(0),
            counted: None,
        }
    }

    /// Which of a view's three lines `kind` is.
    fn slot(&self, kind: EventKind) -> usize {
        match kind {
            _ if kind == self.kind => 0,
            EventKind::Added => 1,
            _ => 2,
        }
    }

    /// [`Event::line`] compressed on its own, once for every gzip watcher
    /// that sends it (a streaming list's stream after its initial events).
    pub fn gzip_line(&self, view: View, kind: EventKind) -> Option<&Block> {
        let line = self.line(view, kind)?;
        let slots = self.deflated.get_or_init(Default::default);
        Some(slots[view.index()][self.slot(kind)].get_or_init(|| {
            let block = gzip::block(line);
            self.note_built(block.deflate.len());
            block
        }))
    }

    /// This event as a watcher sees it, shared by every watcher that does:
    /// `kind` is what the watcher's filter makes of it (its own type; ADDED
    /// for an object entering the filter; DELETED for one leaving it, whose
    /// previous state is stamped with the version of the change, for a
    /// relist's events the object's own, so the relist's events stay in
    /// version order), and `view` the object or only its metadata, with or
    /// without managedFields. `None` for a DELETED of an object that had no
    /// previous state.
    pub fn line(&self, view: View, kind: EventKind) -> Option<&Bytes> {
        let own = kind == self.kind;
        if own && view == View::OBJECT {
            return Some(&self.line);
        }
        // The previous state of an object leaving a filter is stamped with
        // this event's version once, when its line is first built.
        let leaving = !own && kind == EventKind::Deleted;
        let object = match &self.prev {
            Some(prev) if leaving => prev,
            None if leaving => return None,
            _ => &self.object,
        };
        let slots = if view.drop_managed {
            if !object.has_managed_fields() {
                // Nothing to drop: the line with them is the same bytes.
                return self.line(
                    View {
                        drop_managed: false,
                        ..view
                    },
                    kind,
                );
            }
            &self.dropped
        } else {
            &self.others
        };
        let slots = slots.get_or_init(Default::default);
        let slot = &slots[usize::from(view.metadata)][self.slot(kind)];
        Some(slot.get_or_init(|| {
            count_encoding(self.object.encoding);
            let stamped;
            let object = if leaving {
                stamped = at_version(object, self.object.rv);
                &stamped
            } else {
                &**object
            };
            let line = object.watch_event_as(kind.as_str(), view);
            self.note_built(line.len());
            line
        }))
    }

    /// Counts `n` bytes of a form built after the event entered the log,
    /// unless the log has let it go.
    fn note_built(&self, n: usize) {
        let Some(counted) = &self.counted else {
            return;
        };
        // Counted first, so that a retirement racing this never takes
        // away more than was added.
        counted.fetch_add(n, Ordering::Relaxed);
        let still_held = self
            .built
            .fetch_update(Ordering::AcqRel, Ordering::Acquire, |b| {
                (b != RETIRED).then(|| b + n)
            })
            .is_ok();
        if !still_held {
            counted.fetch_sub(n, Ordering::Relaxed);
        }
    }

    /// The log lets it go: the bytes of the forms built for it leave the
    /// log's count (returned).
    pub(super) fn retire(&self) -> usize {
        let built = self.built.swap(RETIRED, Ordering::AcqRel);
        let built = if built == RETIRED { 0 } else { built };
        if let Some(counted) = &self.counted {
            counted.fetch_sub(built, Ordering::Relaxed);
        }
        built
    }

    /// The object a watcher sent this event as `kind` gets (as [`Event::line`]
    /// encodes it): the object, or for one leaving the watcher's filter its
    /// previous state stamped with this event's version (`None` without one).
    pub fn object_as(&self, kind: EventKind) -> Option<Arc<CachedObject>> {
        if kind == self.kind || kind != EventKind::Deleted {
            return Some(self.object.clone());
        }
        let prev = self.prev.as_ref()?;
        Some(Arc::new(at_version(prev, self.object.rv)))
    }

    /// The triggers this event concerns (of its object before and after).
    pub fn triggers(&self) -> &[Trigger] {
        &self.triggers
    }

    /// Bytes this event alone keeps alive: its line, the version it displaced,
    /// and for a delete the final state too (current objects are counted with
    /// the version that holds them). Forms built later are counted apart
    /// ([`Event::retire`]).
    pub(super) fn held_bytes(&self) -> usize {
        let prev = self.prev.as_ref().map_or(0, |p| p.size());
        let own = if self.kind == EventKind::Deleted {
            self.object.size()
        } else {
            0
        };
        // A line the object arrived in holds the object's bytes, counted
        // with the object: only its framing is the line's own.
        let line = if self.object.framed_line(self.kind.as_str()).is_some() {
            self.line.len() - self.object.body.len()
        } else {
            self.line.len()
        };
        line + prev + own + std::mem::size_of::<Self>() + 16 * self.triggers.len()
    }
}

/// An object's last state stamped with a later resource version (a delete
/// found by a relist, an object leaving a watcher's filter), in its encoding.
pub(super) fn at_version(o: &CachedObject, rv: u64) -> CachedObject {
    match o.encoding {
        Encoding::Json => super::json::at_version(o, rv),
        Encoding::Protobuf => super::protobuf::at_version(o, rv),
    }
}

/// Watch events encoded since start, JSON then protobuf (every event once,
/// plus the rare forms watchers need: ADDED/DELETED of objects moving across
/// a selector, metadata-only, without managedFields): the benchmark checks
/// one per event per encoding.
static ENCODINGS: [AtomicUsize; 2] = [AtomicUsize::new(0), AtomicUsize::new(0)];

fn slot(e: Encoding) -> usize {
    match e {
        Encoding::Json => 0,
        Encoding::Protobuf => 1,
    }
}

pub(super) fn count_encoding(e: Encoding) {
    ENCODINGS[slot(e)].fetch_add(1, Ordering::Relaxed);
}

/// Watch events encoded in `e` so far, process-wide.
pub fn encodings(e: Encoding) -> u64 {
    ENCODINGS[slot(e)].load(Ordering::Relaxed) as u64
}
