//! The store and its writer together: versions, rewinds, pins, the budget,
//! proofs' stamps and the wakers.

use std::sync::Arc;
use std::time::Duration;

use imbl::OrdMap;

use super::budget::Budget;
use super::history::{EventKind, Trigger};
use super::object::CachedObject;
use super::serving::Serving;
use super::store::{Change, Limits, Options, Store, Version};
use super::writer::Writer;
use crate::api::media::Encoding;
use crate::cache::object::TypeInfo;
use crate::codec::json::ListItem;
use crate::metrics::StoreLabels;
use futures_util::FutureExt;

/// A configmaps store (no node index) with these limits and budget.
fn store_with(limits: Limits, budget: Arc<Budget>) -> (Writer, Arc<Store>) {
    Store::new(Options {
        scope: Default::default(),
        limits,
        budget,
        encoding: Encoding::Json,
        node_index: false,
        indexes: Vec::new(),
        labels: StoreLabels::new("v1/configmaps".into(), "json"),
    })
}

fn store(limits: Limits) -> (Writer, Arc<Store>) {
    store_with(limits, Budget::unlimited())
}

pub(super) fn limits(history_events: usize) -> Limits {
    Limits::for_tests(100, history_events)
}

fn obj(name: &str, rv: u64) -> Arc<CachedObject> {
    let t = TypeInfo::for_tests("ConfigMap", "v1", "configmaps");
    let json =
        format!(r#"{{"metadata":{{"name":"{name}","namespace":"a","resourceVersion":"{rv}"}}}}"#);
    Arc::new(t.parse(json.as_bytes()).unwrap())
}

/// Over the total budget, the logs give way before any objects: a quiet
/// store whose own log cannot make room fits once the busy store's log is
/// trimmed, and only objects that alone exceed the total evict.
#[test]
fn should_trim_the_largest_log_before_evicting_a_quiet_store() {
    let fill = |w: &mut Writer| {
        w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        for rv in 2..500 {
            w.apply(vec![Change::Put(obj(&format!("busy-{}", rv % 5), rv))]);
        }
    };
    // The sizes the busy store will reach, measured on a store without a budget.
    let (mut probe_w, probe) = store(limits(100_000));
    fill(&mut probe_w);
    let (log, objects) = (probe.history_size().1, probe.current().bytes);
    assert!(log > 20_000, "{log}");
    // The total allows the objects and a fifth of that log.
    let budget = Arc::new(Budget::new(0, objects + 2 * obj("q", 1).size() + log / 5));
    let (mut busy_w, busy) = store_with(limits(100_000), budget.clone());
    let (mut quiet_w, quiet) = store_with(limits(100_000), budget.clone());
    fill(&mut busy_w);
    quiet_w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    quiet_w.apply(vec![Change::Put(obj("q", 600))]);
    assert!(quiet.exceeds_budget());
    assert!(quiet_w.fit_budget(), "the busy log made room");
    assert!(busy.history_size().1 <= log / 5 + 1000);
    assert!(budget.total() <= budget.max_total);
    assert!(!busy.exceeds_budget() && busy_w.fit_budget());
    // Objects that alone exceed the total: no log can help.
    let (mut w, _s) = store_with(limits(10), Arc::new(Budget::new(0, 1)));
    w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    w.apply(vec![Change::Put(obj("big", 2))]);
    assert!(!w.fit_budget());
}

/// A retired store (its resource no longer served upstream) holds nothing:
/// its objects' and events' bytes leave the budget, its watchers are woken
/// to find it removed, and the other stores sharing the budget keep theirs.
#[test]
fn should_release_every_byte_of_a_retired_store() {
    let budget = Arc::new(Budget::new(0, 0));
    let (mut w, s) = store_with(limits(1_000), budget.clone());
    let (mut other_w, other) = store_with(limits(1_000), budget.clone());
    for w in [&mut w, &mut other_w] {
        w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
        for rv in 2..50 {
            w.apply(vec![Change::Put(obj(&format!("o-{}", rv % 7), rv))]);
        }
    }
    let kept = other.bytes();
    assert!(s.bytes() > 0 && kept > 0);
    assert_eq!(budget.total(), s.bytes() + kept);
    let woken = s.subscribe();
    w.retire();
    assert_eq!(s.serving(), Serving::Removed);
    assert_eq!((s.current().objects.len(), s.bytes()), (0, 0));
    assert_eq!(budget.total(), kept);
    assert_eq!(other.bytes(), kept);
    assert!(woken.has_changed().unwrap());
}

/// An indexed watcher on a quiet trigger is woken as the log turns over,
/// and moving its cursor up keeps it inside the log however many other
/// events pass (a kubelet whose node has no pod changes is never "too old").
#[test]
fn should_keep_a_quiet_indexed_watcher_inside_the_log() {
    // A log of 40 events: once full, a quarter of it is 10 appends.
    let (mut w, s) = store(limits(40));
    w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    let quiet = Trigger::name("quiet");
    let guard = s.register(&[quiet]);
    let mut cursor = s.cursor_after(1).unwrap();
    let (mut wakes, mut steady_wakes) = (0, 0);
    for rv in 2..442u64 {
        w.apply(vec![Change::Put(obj(&format!("busy-{}", rv % 5), rv))]);
        // What the watcher does when woken: read its trigger, move up.
        let woken = guard.notify.notified().now_or_never().is_some();
        if woken {
            wakes += 1;
            // The first 40 appends fill the log; the next 400 turn it over ten times.
            if rv >= 42 {
                steady_wakes += 1;
            }
            let (b, _) = s
                .read(cursor, Some(quiet), 16)
                .expect("still inside the log");
            assert!(b.events.is_empty(), "nothing concerns it");
            cursor = b.next;
        }
    }
    assert!(s.read(cursor, Some(quiet), 16).is_some());
    // Once per quarter of the log: 400 / 10 = 40 (one either side for where
    // the count starts); woken per event, it would be 400.
    assert!(
        (39..=41).contains(&steady_wakes),
        "woken once per quarter of the log, not per event: {steady_wakes} of {wakes}"
    );
}

/// A proof stamps a store only once it has applied everything up to the
/// proof's floor, never moves it back (a store ahead of `Y` keeps its
/// version), and a watch resumes from the stamped version.
#[test]
fn should_advance_to_a_proven_version_only_from_its_floor_and_never_back() {
    let (mut w, s) = store(limits(100));
    let stamper = w.stamper();
    assert!(stamper.advance_to(0, 5).is_none(), "not serving yet");
    w.apply(vec![Change::Replace(OrdMap::new(), 10)]);
    w.apply(vec![Change::Put(obj("a", 12))]);
    assert!(
        stamper.advance_to(15, 20).is_none(),
        "below the floor: nothing stamped"
    );
    assert_eq!(s.current().rv, 12);
    let v = stamper.advance_to(12, 20).expect("at the floor");
    assert_eq!((v.rv, s.current().rv), (20, 20));
    assert_eq!(
        names(&v),
        vec![("a".to_string(), 12)],
        "the same state, at 20"
    );
    w.apply(vec![Change::Put(obj("b", 25))]);
    let v = stamper.advance_to(12, 21).expect("ahead of the proof");
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
    let (mut w, s) = store(limits(40));
    w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    let mut states = vec![(1, names(&s.current()), 0)];
    let mut rv = 1;
    for step in 0..60u64 {
        rv += 1;
        let change = match step % 7 {
            3 => Change::Delete(obj(&format!("o-{}", step % 5), rv)),
            5 => Change::Progress(rv),
            _ => Change::Put(obj(&format!("o-{}", step % 5), rv)),
        };
        let v = w.apply(vec![change]);
        states.push((rv, names(&v), v.bytes));
    }
    // A relist 5 versions on: what happened between is unknown.
    let before = rv;
    rv += 5;
    let mut relisted = OrdMap::new();
    for o in [obj("o-1", 3), obj("r", rv - 1)] {
        relisted.insert(o.key.clone(), o);
    }
    let v = w.apply(vec![Change::Replace(relisted, rv)]);
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
    let (mut w, s) = store(l);
    w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    w.apply(vec![Change::Put(obj("a", 2))]);
    let paged = s.current();
    s.pin(&paged);
    for rv in 3..20 {
        w.apply(vec![Change::Put(obj("b", rv))]);
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
    let (mut w, s) = store(limits(1000));
    assert_eq!(s.serving(), Serving::Syncing);
    w.apply(vec![Change::Replace(OrdMap::new(), 10)]);
    w.apply(vec![Change::Put(obj("x", 11))]);
    let v12 = w.apply(vec![Change::Put(obj("y", 12))]);
    w.apply(vec![Change::Delete(obj("x", 13))]);
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
    w.apply(vec![Change::Put(obj("w", 16))]);
    w.apply(vec![Change::Replace(relisted, 20)]);
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

/// A sharded watcher registered on its shard's buckets is woken by the
/// events of objects whose uid hashes into them, and by no other (save the
/// log's quarterly refresh), whatever their namespace or name.
#[test]
fn should_wake_a_sharded_watcher_for_its_shard_only() {
    use crate::api::shard::{ShardKey, ShardSelector, fnv1a};
    let (mut w, s) = store(limits(100_000));
    w.apply(vec![Change::Replace(OrdMap::new(), 1)]);
    // A long log: it refreshes its watchers once in the 400 events below.
    for rv in 2..4_002 {
        w.apply(vec![Change::Put(obj("warm", rv))]);
    }
    let lower = ShardSelector::parse(
        "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')",
    )
    .unwrap();
    let triggers: Vec<Trigger> = lower
        .buckets()
        .into_iter()
        .map(|b| Trigger::shard(ShardKey::Uid, b))
        .collect();
    let guard = s.register(&triggers);
    let t = TypeInfo::for_tests("ConfigMap", "v1", "configmaps");
    let (mut woken, mut mine) = (0, 0);
    let mut rng = fastrand::Rng::with_seed(5866);
    for rv in 4_002..4_402u64 {
        let uid = format!("{:032x}", rng.u128(..));
        let json = format!(
            r#"{{"metadata":{{"name":"o-{rv}","namespace":"a","uid":"{uid}","resourceVersion":"{rv}"}}}}"#
        );
        w.apply(vec![Change::Put(Arc::new(
            t.parse(json.as_bytes()).unwrap(),
        ))]);
        let selected = lower.selects(fnv1a(&uid));
        mine += usize::from(selected);
        let now = guard.notify.notified().now_or_never().is_some();
        woken += usize::from(now);
        assert!(now || !selected, "an event of its shard wakes it ({uid})");
    }
    assert!(mine > 150 && mine < 250, "{mine} of 400 in the lower half");
    // Woken by its shard's events, and once by the log's refresh (a
    // quarter of the log appended), not by the other half's ~200.
    assert!(
        (mine..=mine + 1).contains(&woken),
        "woken {woken} times for {mine} events of its shard"
    );
}
