//! The event log of one resource: every change the cache applied, in order,
//! each serialized once, bounded by count and bytes.
//!
//! Watchers are cursors into it (sequence numbers), so nothing is queued per
//! watcher. Events are also indexed by their [`Trigger`]s (namespace, name,
//! pods' node), so a watcher that can only ever match one value of an indexed
//! field reads just the events that concern it, as kube-apiserver's indexed
//! triggers do.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

pub use super::event::{Event, EventKind, Trigger, encodings};
use super::event::{at_version, count_encoding};
use super::object::Objects;

/// The events that turn `old` into `new` (a relist at `rv`): objects new or
/// changed (ordered by their resource versions), then those gone (their last
/// state, stamped `rv`). All are placed at `rv` in the log, so no watcher
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
                Arc::new(at_version(p, rv)),
                Some(p.clone()),
            ));
        }
    }
    out
}

/// Where a watcher reads from: the next sequence number it has not seen.
pub type Cursor = u64;

/// A batch read from the log.
#[derive(Debug)]
pub struct Batch {
    /// The events (of the watcher's trigger, if it has one), oldest first.
    pub events: Vec<Arc<Event>>,
    /// Where to read next.
    pub next: Cursor,
    /// Whether the read reached the end of the log (the watcher is caught up).
    pub caught_up: bool,
    /// Events in the log after `next` (the watcher's lag).
    pub behind: u64,
}

/// The log.
#[derive(Debug)]
pub struct History {
    events: VecDeque<Arc<Event>>,
    /// Sequence number of `events[0]` (or of the next event when empty).
    first_seq: u64,
    /// The log holds every event with a resource version above this.
    from: u64,
    /// Versions strictly between each pair are unknown: a relist found the
    /// state at the second while the cache was at the first, so what
    /// happened between (and what a client there has seen) is not in the log.
    gaps: VecDeque<(u64, u64)>,
    /// Sequence numbers of the events concerning each trigger.
    index: HashMap<Trigger, VecDeque<u64>>,
    /// Bytes only the log keeps alive.
    bytes: usize,
    /// Bytes of the forms its events' watchers asked for after they were
    /// appended (metadata-only, without managedFields, ...), made and
    /// counted by the readers ([`Event::line`]).
    later: Arc<AtomicUsize>,
    max_events: usize,
    max_bytes: usize,
    /// When the log's end reaches this, indexed watchers must move their
    /// cursors up (see [`Appended::refresh`]).
    next_refresh: u64,
}

/// What an append did.
#[derive(Debug)]
pub struct Appended {
    /// The triggers the new events concern.
    pub touched: Vec<Trigger>,
    /// A quarter of the log has been appended since the last refresh: every
    /// indexed watcher should wake and move its cursor to the end. An idle
    /// one (no event on its trigger for a while) would otherwise see the
    /// tail pass its cursor and be ended as too old although it missed
    /// nothing.
    pub refresh: bool,
}

impl History {
    /// An empty log keeping at most `max_events` events (at least 1) and
    /// `max_bytes` bytes (0: no byte bound).
    pub fn new(max_events: usize, max_bytes: usize) -> Self {
        History {
            events: VecDeque::new(),
            first_seq: 0,
            from: 0,
            gaps: VecDeque::new(),
            index: HashMap::new(),
            bytes: 0,
            later: Arc::default(),
            max_events,
            max_bytes,
            next_refresh: 0,
        }
    }

    /// The sequence number the next event gets.
    pub fn end(&self) -> Cursor {
        self.first_seq + self.events.len() as u64
    }

    /// The oldest resource version a watch can resume after.
    pub fn from(&self) -> u64 {
        self.from
    }

    /// Events held.
    pub fn len(&self) -> usize {
        self.events.len()
    }

    /// Whether the log is empty.
    pub fn is_empty(&self) -> bool {
        self.events.is_empty()
    }

    /// Bytes only the log keeps alive, the forms built since included.
    pub fn bytes(&self) -> usize {
        self.bytes + self.later.load(Ordering::Relaxed)
    }

    /// Drops everything; the log is complete from `rv` on (a first sync, an eviction).
    pub fn restart_at(&mut self, rv: u64) {
        for e in &self.events {
            e.retire();
        }
        self.bytes = 0;
        // One past the end: a watcher caught up with the old log (its cursor
        // at the old end) no longer holds a place in the new one.
        self.first_seq = self.end() + 1;
        self.events.clear();
        self.index.clear();
        self.gaps.clear();
        self.from = rv;
    }

    /// A relist moved the cache from `from` to `to` without the events between.
    pub fn note_gap(&mut self, from: u64, to: u64) {
        if from.saturating_add(1) < to {
            self.gaps.push_back((from, to));
        }
    }

    /// Appends events (serializing each once) and trims to the bounds.
    pub fn append(&mut self, events: Vec<Event>, pods: bool) -> Appended {
        let mut added = 0;
        let mut touched = Vec::new();
        for mut e in events {
            e.seq = self.end();
            e.line = match e.object.framed_line(e.kind.as_str()) {
                Some(line) => line.clone(),
                None => e.object.watch_event(e.kind.as_str(), false),
            };
            count_encoding(e.object.encoding);
            let mut t = Vec::with_capacity(6);
            Trigger::of_object(&e.object, pods, &mut t);
            if let Some(p) = &e.prev {
                Trigger::of_object(p, pods, &mut t);
            }
            t.sort_unstable();
            t.dedup();
            for tr in &t {
                self.index.entry(*tr).or_default().push_back(e.seq);
            }
            touched.extend_from_slice(&t);
            e.triggers = t.into_boxed_slice();
            // Sharded watchers wake by bucket; nothing is indexed by them.
            Trigger::shards_of(&e.object, &mut touched);
            if let Some(p) = &e.prev {
                Trigger::shards_of(p, &mut touched);
            }
            e.counted = Some(self.later.clone());
            added += e.held_bytes();
            self.events.push_back(Arc::new(e));
        }
        self.bytes += added;
        while self.events.len() > self.max_events
            || (self.max_bytes > 0 && self.bytes() > self.max_bytes && self.events.len() > 1)
        {
            self.pop_front();
        }
        touched.sort_unstable();
        touched.dedup();
        // A cursor moved to the end is passed by the tail only after a full
        // log's worth of appends: refreshing every quarter of that is early
        // enough, and costs each indexed watcher one wake-up per quarter-log.
        let refresh = self.end() >= self.next_refresh;
        if refresh {
            self.next_refresh = self.end() + (self.events.len() as u64 / 4).max(1);
        }
        Appended { touched, refresh }
    }

    /// Drops the oldest events until the log holds at most `max` bytes (it
    /// keeps its newest event); the bytes freed.
    pub fn trim_to(&mut self, max: usize) -> usize {
        let mut freed = 0;
        while self.bytes() > max && self.events.len() > 1 {
            freed += self.pop_front();
        }
        freed
    }

    fn pop_front(&mut self) -> usize {
        let Some(e) = self.events.pop_front() else {
            return 0;
        };
        self.first_seq += 1;
        self.from = self.from.max(e.rv);
        while self.gaps.front().is_some_and(|&(_, to)| to <= self.from) {
            self.gaps.pop_front();
        }
        for t in e.triggers.iter() {
            if let Some(q) = self.index.get_mut(t) {
                if q.front() == Some(&e.seq) {
                    q.pop_front();
                }
                if q.is_empty() {
                    self.index.remove(t);
                }
            }
        }
        let b = e.held_bytes();
        self.bytes = self.bytes.saturating_sub(b);
        b + e.retire()
    }

    /// The cursor of a watcher that has seen everything up to `rv`; `None`
    /// when the log no longer holds every event after it, or never had them
    /// (`rv` inside a relist's gap).
    pub fn cursor_after(&self, rv: u64) -> Option<Cursor> {
        if rv < self.from || self.gaps.iter().any(|&(a, b)| a < rv && rv < b) {
            return None;
        }
        Some(self.first_seq + self.events.partition_point(|e| e.rv <= rv) as u64)
    }

    /// Whether every event from `cursor` on is still in the log.
    pub fn holds(&self, cursor: Cursor) -> bool {
        cursor >= self.first_seq
    }

    /// Up to `max` events from `cursor` on (only those concerning `trigger`,
    /// if given); `None` when the log's tail has passed the cursor.
    pub fn read(&self, cursor: Cursor, trigger: Option<Trigger>, max: usize) -> Option<Batch> {
        if !self.holds(cursor) {
            return None;
        }
        let end = self.end();
        let cursor = cursor.min(end);
        let at = |seq: u64| self.events[(seq - self.first_seq) as usize].clone();
        let (events, next) = match trigger {
            None => {
                let stop = end.min(cursor.saturating_add(max as u64));
                ((cursor..stop).map(at).collect::<Vec<_>>(), stop)
            }
            Some(t) => match self.index.get(&t) {
                None => (Vec::new(), end),
                Some(q) => {
                    let from = q.partition_point(|s| *s < cursor);
                    let events: Vec<_> = q.range(from..).take(max).map(|s| at(*s)).collect();
                    let next = if q.len() - from > max {
                        events.last().map_or(end, |e| e.seq + 1)
                    } else {
                        end
                    };
                    (events, next)
                }
            },
        };
        Some(Batch {
            events,
            next,
            caught_up: next == end,
            behind: end - next,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::object::{CachedObject, TypeInfo};

    fn pod(name: &str, node: &str, rv: u64) -> Arc<CachedObject> {
        let t = TypeInfo {
            items_typed: true,
            ..TypeInfo::for_tests("Pod", "v1", "pods")
        };
        let json = format!(
            r#"{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{rv}"}},"spec":{{"nodeName":"{node}"}}}}"#
        );
        Arc::new(t.parse(json.as_bytes()).unwrap())
    }

    #[test]
    fn should_share_an_arrived_events_bytes_between_the_log_and_the_store() {
        let t = TypeInfo {
            items_typed: true,
            ..TypeInfo::for_tests("Pod", "v1", "pods")
        };
        // As an upstream's watch event carries it: no kind (it is added).
        let src = br#"{"metadata":{"name":"p","namespace":"a","resourceVersion":"5"}}"#;
        for (kind, parsed) in [
            (EventKind::Modified, "MODIFIED"),
            // Parsed as MODIFIED, but new to the cache: the log builds its own ADDED.
            (EventKind::Added, "MODIFIED"),
        ] {
            let o = Arc::new(t.parse_event(src, Some(parsed)).unwrap());
            let mut h = History::new(100, 0);
            h.restart_at(1);
            h.append(vec![Event::new(5, kind, o.clone(), None)], false);
            let line = &h.events[0].line;
            let want = format!(
                r#"{{"type":"{}","object":{{"kind":"Pod","apiVersion":"v1","metadata":{{"name":"p","namespace":"a","resourceVersion":"5"}}}}}}"#,
                kind.as_str()
            ) + "\n";
            assert_eq!(std::str::from_utf8(line).unwrap(), want);
            let inside = line.as_ptr_range().contains(&o.body.as_ptr());
            assert_eq!(inside, kind.as_str() == parsed, "{kind:?}");
            let framing = line.len() - o.body.len();
            let e = &h.events[0];
            let own = e.held_bytes() - std::mem::size_of::<Event>() - 16 * e.triggers.len();
            assert_eq!(own, if inside { framing } else { line.len() }, "{kind:?}");
        }
    }

    /// Forms watchers ask for after an event is appended (metadata-only,
    /// without managedFields) are counted in the log's bytes while it holds
    /// the event, and no longer once it lets it go, even when a watcher
    /// still holding the event builds one after that.
    #[test]
    fn should_count_forms_built_later_while_the_log_holds_their_event() {
        use crate::cache::view::View;
        let mut h = History::new(2, 0);
        h.restart_at(1);
        h.append(
            vec![Event::new(2, EventKind::Added, pod("p", "n", 2), None)],
            false,
        );
        let before = h.bytes();
        let e = h.events[0].clone();
        let line = e.line(View::METADATA, EventKind::Added).unwrap().len();
        assert_eq!(h.bytes(), before + line);
        // Asked again: made once, counted once.
        e.line(View::METADATA, EventKind::Added).unwrap();
        assert_eq!(h.bytes(), before + line);
        // Nothing to drop: the same line, nothing more counted.
        let same = e.line(
            View {
                drop_managed: true,
                ..View::METADATA
            },
            EventKind::Added,
        );
        assert_eq!(same.unwrap().len(), line);
        assert_eq!(h.bytes(), before + line);
        // Pushed out of the log: its forms leave the count with it.
        let later = vec![
            Event::new(3, EventKind::Added, pod("q", "n", 3), None),
            Event::new(4, EventKind::Added, pod("r", "n", 4), None),
        ];
        h.append(later, false);
        let held = h.bytes();
        assert!(e.line(View::METADATA, EventKind::Modified).is_some());
        assert_eq!(
            h.bytes(),
            held,
            "a form built for a retired event is not counted"
        );
        h.restart_at(5);
        assert_eq!(h.bytes(), 0);
    }

    #[test]
    fn should_index_events_by_trigger_and_read_in_bounded_batches() {
        let mut h = History::new(100, 0);
        h.restart_at(1);
        let mut evs = Vec::new();
        for i in 0..10u64 {
            let node = if i % 2 == 0 { "n0" } else { "n1" };
            evs.push(Event::new(
                i + 2,
                EventKind::Added,
                pod(&format!("p{i}"), node, i + 2),
                None,
            ));
        }
        // p9 moves from n1 to n0: it concerns both nodes' watchers.
        evs.push(Event::new(
            12,
            EventKind::Modified,
            pod("p9", "n0", 12),
            Some(pod("p9", "n1", 11)),
        ));
        let touched = h.append(evs, true).touched;
        assert!(touched.contains(&Trigger::node("n0")) && touched.contains(&Trigger::node("n1")));
        let c = h.cursor_after(1).unwrap();
        let n0 = h.read(c, Some(Trigger::node("n0")), 100).unwrap();
        assert_eq!(
            n0.events.len(),
            6,
            "five pods on n0 and one that moved there"
        );
        assert!(n0.caught_up);
        let n1 = h.read(c, Some(Trigger::node("n1")), 3).unwrap();
        assert_eq!(n1.events.len(), 3);
        assert!(!n1.caught_up);
        let rest = h.read(n1.next, Some(Trigger::node("n1")), 3).unwrap();
        assert_eq!(rest.events.len(), 3, "two more pods and the one that left");
        assert!(rest.caught_up);
        let all = h.read(c, None, 4).unwrap();
        assert_eq!((all.events.len(), all.behind), (4, 7));
        // Resuming after rv 6 skips what came before.
        let c6 = h.cursor_after(6).unwrap();
        assert_eq!(h.read(c6, None, 100).unwrap().events[0].rv, 7);
    }

    #[test]
    fn should_trim_to_its_bounds_and_report_the_tail_passing_a_cursor() {
        let mut h = History::new(5, 0);
        h.restart_at(1);
        let c = h.cursor_after(1).unwrap();
        let evs = (0..8u64)
            .map(|i| {
                Event::new(
                    i + 2,
                    EventKind::Added,
                    pod(&format!("p{i}"), "n", i + 2),
                    None,
                )
            })
            .collect();
        h.append(evs, true);
        assert_eq!(h.len(), 5);
        assert_eq!(h.from(), 4, "events up to rv 4 were dropped");
        assert!(h.read(c, None, 10).is_none(), "the tail passed this cursor");
        assert!(h.cursor_after(3).is_none());
        let c4 = h.cursor_after(4).unwrap();
        assert_eq!(
            h.read(c4, Some(Trigger::node("n")), 10)
                .unwrap()
                .events
                .len(),
            5
        );
        let one = pod("x", "n", 20).size();
        let mut small = History::new(1000, 3 * (one + 200));
        small.restart_at(1);
        let evs = (0..8u64)
            .map(|i| {
                Event::new(
                    i + 2,
                    EventKind::Added,
                    pod(&format!("p{i}"), "n", i + 2),
                    None,
                )
            })
            .collect();
        small.append(evs, true);
        assert!(
            small.len() < 8 && small.bytes() <= 3 * (one + 200),
            "bounded by bytes"
        );
    }
}
