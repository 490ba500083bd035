//! The reflector's steps against an upstream in memory
//! ([`crate::upstream::memory`]): each step's requests go through the real
//! client and its answers through the real decoders, with no socket, and
//! in paused time, so a stall or a deadline costs no wall-clock time.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::recover_tests::{named, reflector};
use super::{ListWith, Reflector, State};
use crate::body::{self, Body};
use crate::shutdown;

/// A ConfigMap at `rv`.
fn cm(name: &str, rv: u64) -> String {
    format!(
        r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"name":"{name}","namespace":"ns","resourceVersion":"{rv}"}}}}"#
    )
}

/// A watch event's line.
fn event(kind: &str, object: &str) -> String {
    format!("{{\"type\":\"{kind}\",\"object\":{object}}}\n")
}

/// A BOOKMARK at `rv`, the end of a streaming list's initial events or not.
fn bookmark(rv: u64, end: bool) -> String {
    let annotations = if end {
        r#","annotations":{"k8s.io/initial-events-end":"true"}"#
    } else {
        ""
    };
    event(
        "BOOKMARK",
        &format!(
            r#"{{"kind":"ConfigMap","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"{annotations}}}}}"#
        ),
    )
}

fn ok(body: impl Into<Bytes>) -> Response<Body> {
    Response::builder()
        .header("content-type", "application/json")
        .body(body::full(body))
        .unwrap()
}

/// The apiserver's `Status` for a version too old to watch from.
const EXPIRED: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}"#;

/// To open a watch from `rv`.
fn opening(rv: u64) -> State {
    State::Opening {
        rv,
        resuming: false,
    }
}

/// Its 410 answer.
fn gone() -> Response<Body> {
    Response::builder()
        .status(StatusCode::GONE)
        .header("content-type", "application/json")
        .body(body::full(EXPIRED))
        .unwrap()
}

/// A reflector of configmaps whose upstream answers with `answer`, given
/// each request's path and query; the requests it made are in the log.
async fn against(
    answer: impl Fn(&str) -> Response<Body> + Send + Sync + 'static,
) -> (Reflector, Arc<Mutex<Vec<String>>>) {
    let r = reflector(1).await;
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    r.upstream.answer_with(Arc::new(move |parts| {
        let pq = parts.uri.path_and_query().unwrap().to_string();
        seen.lock().unwrap().push(pq.clone());
        answer(&pq)
    }));
    (r, log)
}

/// The state after one step from `state`.
async fn step(r: &mut Reflector, state: State) -> State {
    let (_trigger, signal) = shutdown::channel();
    r.step(state, &signal).await
}

/// The store's version and its objects' `key@rv`.
fn stored(r: &Reflector) -> (u64, Vec<String>) {
    let v = r.writer.store().current();
    let objects = v
        .objects
        .values()
        .map(|o| format!("{}@{}", o.key, o.rv))
        .collect();
    (v.rv, objects)
}

/// A paged LIST: a page per step, the continue token carried, the state
/// applied at the list's version after the last page, then a watch from it.
#[tokio::test(start_paused = true)]
async fn should_list_page_by_page_then_watch_from_the_lists_version() {
    let (mut r, log) = against(|pq| {
        if pq.contains("continue=c1") {
            ok(format!(
                r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"10"}},"items":[{}]}}"#,
                cm("c", 9)
            ))
        } else {
            ok(format!(
                r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"10","continue":"c1"}},"items":[{},{}]}}"#,
                cm("a", 3),
                cm("b", 7)
            ))
        }
    })
    .await;
    r.lists = ListWith::Pages;
    let s = step(&mut r, State::Relisting { diverged: false }).await;
    assert_eq!(named(&s), "Paging");
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Paging", "a continue token: another page");
    assert_eq!(stored(&r).0, 0, "nothing applied before the last page");
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Opening { rv: 10, resuming: false }");
    assert_eq!(
        stored(&r),
        (10, vec!["ns/a@3".into(), "ns/b@7".into(), "ns/c@9".into()])
    );
    let log = log.lock().unwrap();
    assert_eq!(
        *log,
        [
            "/api/v1/configmaps?limit=500",
            "/api/v1/configmaps?limit=500&continue=c1"
        ]
    );
}

/// A streaming list: ADDED events up to the end bookmark, applied at once
/// at its version, and the same stream watched on; a clean end reopens the
/// watch from the last version applied.
#[tokio::test(start_paused = true)]
async fn should_apply_a_streaming_list_at_its_end_bookmark_and_watch_on() {
    let (mut r, log) = against(|pq| {
        assert!(pq.contains("sendInitialEvents=true"), "{pq}");
        ok([
            event("ADDED", &cm("a", 3)),
            event("ADDED", &cm("b", 5)),
            bookmark(20, true),
            event("MODIFIED", &cm("a", 21)),
            bookmark(22, false),
        ]
        .concat())
    })
    .await;
    let s = step(&mut r, State::Relisting { diverged: false }).await;
    assert_eq!(named(&s), "Initial");
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Watching");
    assert_eq!(stored(&r), (20, vec!["ns/a@3".into(), "ns/b@5".into()]));
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Opening { rv: 22, resuming: false }");
    assert_eq!(stored(&r), (22, vec!["ns/a@21".into(), "ns/b@5".into()]));
    let q = log.lock().unwrap()[0].clone();
    assert!(
        q.starts_with("/api/v1/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds="),
        "{q}"
    );
}

/// An upstream that ignores `sendInitialEvents` (a watch that ends with
/// no end bookmark): the reflector lists by pages from then on.
#[tokio::test(start_paused = true)]
async fn should_fall_back_to_pages_when_the_upstream_ignores_streaming_lists() {
    let (mut r, _) = against(|_| ok(event("ADDED", &cm("a", 3)))).await;
    let s = step(&mut r, State::Relisting { diverged: false }).await;
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Relisting { diverged: false }");
    assert_eq!(r.lists, ListWith::Pages);
    assert_eq!(stored(&r).0, 0, "nothing applied");
}

/// 410 to a watch, as its answer or as an ERROR event in it: relist.
#[tokio::test(start_paused = true)]
async fn should_relist_when_the_watchs_version_is_gone() {
    let (mut r, _) = against(|_| gone()).await;
    let s = step(&mut r, opening(1)).await;
    assert_eq!(named(&s), "Relisting { diverged: false }");

    let (mut r, _) = against(|_| ok(event("ERROR", EXPIRED))).await;
    let s = step(&mut r, opening(1)).await;
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Relisting { diverged: false }");
}

/// An event whose version goes back, or a line that is not JSON: the
/// stream cannot be trusted; relist, having applied nothing of it.
#[tokio::test(start_paused = true)]
async fn should_relist_on_malformed_watch_data() {
    for body in [
        event("MODIFIED", &cm("a", 4)),
        "{\"type\":\"MODIFIED\",\"object\":{\"kind\"\n".to_string(),
    ] {
        let (mut r, _) = against(move |_| ok(body.clone())).await;
        let s = step(&mut r, opening(5)).await;
        let s = step(&mut r, s).await;
        assert_eq!(named(&s), "Relisting { diverged: false }");
        assert_eq!(stored(&r).0, 0, "nothing applied");
    }
}

/// A watch that stays open and silent past its `timeoutSeconds` and the
/// patience after it (a partition that resets nothing): abandoned and
/// reopened from its version at once, after exactly that long.
#[tokio::test(start_paused = true)]
async fn should_abandon_a_silent_watch_past_its_deadline() {
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    let (mut r, log) = against(move |_| {
        let (tx, body) = body::channel(1);
        keep.lock().unwrap().push(tx);
        Response::new(body)
    })
    .await;
    let s = step(&mut r, opening(5)).await;
    assert_eq!(named(&s), "Watching");
    let began = tokio::time::Instant::now();
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Opening { rv: 5, resuming: false }");
    // Exactly its timeoutSeconds (drawn) and the patience after it.
    let asked: u64 = log.lock().unwrap()[0]
        .split("timeoutSeconds=")
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(began.elapsed(), Duration::from_secs(asked) + r.patience());
    assert_eq!(held.lock().unwrap().len(), 1, "one watch, held open");
}

/// A list older than the state the cache holds (a server behind the one
/// it followed): refused, the cache kept as it was, the list retried.
#[tokio::test(start_paused = true)]
async fn should_refuse_a_list_older_than_the_cache() {
    let lists = Arc::new(Mutex::new(0));
    let n = lists.clone();
    let (mut r, _) = against(move |_| {
        let mut n = n.lock().unwrap();
        *n += 1;
        let (rv, item) = if *n == 1 { (10, cm("a", 9)) } else { (5, cm("a", 4)) };
        ok(format!(
            r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{item}]}}"#
        ))
    })
    .await;
    r.lists = ListWith::Pages;
    let s = step(&mut r, State::Relisting { diverged: false }).await;
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Opening { rv: 10, resuming: false }");
    let s = step(&mut r, State::Relisting { diverged: false }).await;
    let s = step(&mut r, s).await;
    assert_eq!(named(&s), "Relisting { diverged: false }", "retried");
    assert_eq!(
        stored(&r),
        (10, vec!["ns/a@9".into()]),
        "kept, not sent back in time"
    );
    assert_eq!(*lists.lock().unwrap(), 2);
}
