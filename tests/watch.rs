//! Watches served from the cache: selector transitions as the apiserver sends
//! them, streams that replay to the upstream's state, 410 mode, and one
//! upstream watch per resource however many clients watch.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::common::*;
use r8s_sim::store::{Mutation, key};
use serde_json::Value;

fn relabel(sim: &r8s_sim::SimHandle, ns: &str, name: &str, app: &str) {
    let res = r8s_sim::resources::pods_idx();
    let k = key(Some(ns), name);
    let mut v = sim.sim.store.get(res, &k).unwrap().value();
    v["metadata"]["labels"]["app"] = app.into();
    sim.sim
        .store
        .mutate(res, &k, |_, _| Ok(Mutation::Put(v)))
        .unwrap();
}

fn events(r: &Resp) -> Vec<Value> {
    r.text()
        .lines()
        .filter(|l| !l.is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_send_objects_moving_in_and_out_of_a_selector_like_the_apiserver() {
    let direct = start_sim(sim_config()).await;
    let behind = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![behind.url()], &["pods"]).await;
    let rv = direct.sim.store.current_rv();
    assert_eq!(rv, behind.sim.store.current_rv());
    let path = format!(
        "/api/v1/namespaces/ns-0/pods?watch=1&resourceVersion={rv}&labelSelector=app%3Dmoving&timeoutSeconds=2"
    );
    let (d, v) = (
        format!("{}{path}", direct.url()),
        format!("{}{path}", r8s.url()),
    );
    let a = tokio::spawn(async move { send("GET", &d, &[], None).await });
    let b = tokio::spawn(async move { send("GET", &v, &[], None).await });
    tokio::time::sleep(Duration::from_millis(300)).await;
    for sim in [&direct, &behind] {
        relabel(sim, "ns-0", "pod-00000", "moving"); // enters: ADDED
        relabel(sim, "ns-0", "pod-00000", "moving"); // stays: MODIFIED
        relabel(sim, "ns-0", "pod-00000", "gone"); // leaves: DELETED (previous state, new RV)
        relabel(sim, "ns-0", "pod-00003", "other"); // never matches: nothing
    }
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(b.headers["x-r8s-cache"], "hit");
    let (ea, eb) = (events(&a), events(&b));
    let types: Vec<&str> = eb.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(types, ["ADDED", "MODIFIED", "DELETED"]);
    let strip = |e: &[Value]| -> Vec<(Value, Value, Value)> {
        e.iter()
            .map(|e| {
                (
                    e["type"].clone(),
                    e["object"]["metadata"]["resourceVersion"].clone(),
                    e["object"]["metadata"]["labels"]["app"].clone(),
                )
            })
            .collect()
    };
    assert_eq!(
        strip(&ea),
        strip(&eb),
        "through r8s's cache as straight from the sim"
    );
    assert_eq!(
        eb[2]["object"]["metadata"]["labels"]["app"], "moving",
        "DELETED carries the state that matched"
    );
    assert_eq!(
        eb[2]["object"]["metadata"]["resourceVersion"],
        (rv + 3).to_string(),
        "at the event's version"
    );
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}

/// Applies a watch stream to a state; checks RVs strictly increase.
fn replay(state: &mut BTreeMap<String, Value>, stream: &[Value], mut last: u64) -> u64 {
    for e in stream {
        let t = e["type"].as_str().unwrap();
        let rv: u64 = e["object"]["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        if t == "BOOKMARK" {
            assert!(rv >= last);
            last = rv;
            continue;
        }
        assert!(
            rv > last,
            "resource versions strictly increase: {rv} after {last}"
        );
        last = rv;
        let m = &e["object"]["metadata"];
        let k = format!(
            "{}/{}",
            m["namespace"].as_str().unwrap(),
            m["name"].as_str().unwrap()
        );
        match t {
            "ADDED" | "MODIFIED" => {
                state.insert(k, e["object"].clone());
            }
            "DELETED" => {
                assert!(
                    state.remove(&k).is_some(),
                    "DELETED of something the watcher had"
                );
            }
            other => panic!("unexpected event {other}: {e}"),
        }
    }
    last
}

#[tokio::test(flavor = "multi_thread")]
async fn should_stream_changes_that_replay_to_the_upstreams_state_under_churn() {
    let mut cfg = sim_config();
    cfg.churn = 200.0;
    cfg.history = 200_000;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let selectors = [
        "",
        "&labelSelector=tier%3Dbackend",
        "&fieldSelector=spec.nodeName%3Dnode-00",
        "&labelSelector=team%20in%20(team-1,team-2)",
    ];
    let mut tasks = Vec::new();
    for (i, sel) in selectors.iter().enumerate() {
        let ns = if i % 2 == 0 {
            String::new()
        } else {
            "/namespaces/ns-1".to_string()
        };
        let (r8s_url, sim_url) = (r8s.url(), sim.url());
        let sel = sel.to_string();
        tasks.push(tokio::spawn(async move {
            // Start as a client-go informer would: list at RV=0, then watch from its RV.
            let list = get(&format!("{r8s_url}/api/v1{ns}/pods?resourceVersion=0{sel}")).await.json();
            let mut state: BTreeMap<String, Value> = BTreeMap::new();
            for it in list["items"].as_array().unwrap() {
                let m = &it["metadata"];
                state.insert(format!("{}/{}", m["namespace"].as_str().unwrap(), m["name"].as_str().unwrap()), it.clone());
            }
            let start: u64 = list["metadata"]["resourceVersion"].as_str().unwrap().parse().unwrap();
            let w = send("GET", &format!("{r8s_url}/api/v1{ns}/pods?watch=1&allowWatchBookmarks=true&resourceVersion={start}&timeoutSeconds=3{sel}"), &[], None).await;
            assert_eq!(w.headers["x-r8s-cache"], "hit");
            let last = replay(&mut state, &events(&w), start);
            // The truth at that version, from the sim's history.
            let truth = get(&format!("{sim_url}/api/v1{ns}/pods?resourceVersion={last}&resourceVersionMatch=Exact{sel}")).await.json();
            let want: BTreeMap<String, Value> = truth["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|it| (format!("{}/{}", it["metadata"]["namespace"].as_str().unwrap(), it["metadata"]["name"].as_str().unwrap()), it["metadata"]["resourceVersion"].clone()))
                .collect();
            let got: BTreeMap<String, Value> = state.iter().map(|(k, v)| (k.clone(), v["metadata"]["resourceVersion"].clone())).collect();
            assert_eq!(got, want, "list + watch{sel} in {ns:?} replays to the sim's state at {last}");
            last - start
        }));
    }
    for t in tasks {
        let moved = t.await.unwrap();
        assert!(moved > 50, "the watch saw the churn ({moved} versions)");
    }
    assert_eq!(
        sim.sim.count("watch", "pods"),
        2,
        "one upstream watch per encoding cached (JSON, protobuf), however many clients"
    );
    assert_eq!(
        sim.sim.count("list", "pods"),
        4,
        "only the test's own truth lists reached the sim"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(r#"r8s_cache_requests_total{resource="v1/pods",verb="watch",result="hit"}"#),
        "{m}"
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_too_old_watches_with_410_when_configured() {
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.watch.on_too_old = r8s::config::OnTooOld::Gone;
    let r8s = start_r8s_config(config).await;
    let guard = HangGuard::new();
    let w = send(
        "GET",
        &format!("{}/api/v1/pods?watch=1&resourceVersion=1", r8s.url()),
        &[],
        None,
    )
    .await;
    guard.check(|| "answered at once".into());
    assert_eq!(w.status, 200);
    assert_eq!(w.headers["x-r8s-cache"], "hit");
    let e = events(&w);
    assert_eq!(e.len(), 1);
    assert_eq!(e[0]["type"], "ERROR");
    assert_eq!(e[0]["object"]["code"], 410);
    assert_eq!(e[0]["object"]["reason"], "Expired");
    assert!(
        e[0]["object"]["message"]
            .as_str()
            .unwrap()
            .starts_with("too old resource version: 1 (")
    );
    r8s.stop().await;
    sim.stop().await;
}

/// A negative `timeoutSeconds` ends the watch before it sends anything, as
/// kube-apiserver's handler means to (its context is done at once: 1.36
/// answers 200, mostly with no event, at times with the initial events its
/// watch cache sent before it saw the context done): from the cache and
/// from the sim alike.
#[tokio::test(flavor = "multi_thread")]
async fn should_end_a_watch_with_a_negative_timeout_at_once() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    for base in [r8s.url(), sim.url()] {
        for q in [
            "watch=1&resourceVersion=0",
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true",
        ] {
            let url = format!("{base}/api/v1/namespaces/ns-0/pods?{q}&timeoutSeconds=-5");
            let w = send("GET", &url, &[], None).await;
            assert_eq!(w.status, 200, "{url}");
            assert!(w.complete && w.body.is_empty(), "{url}: {}", w.text());
        }
    }
    let hit = send(
        "GET",
        &format!(
            "{}/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=-1",
            r8s.url()
        ),
        &[],
        None,
    )
    .await;
    assert_eq!(hit.headers["x-r8s-cache"], "hit");
    r8s.stop().await;
    sim.stop().await;
}

/// The versions of a stream's events, as `TYPE rv`.
fn typed_versions(r: &Resp) -> Vec<String> {
    events(r)
        .iter()
        .map(|e| {
            format!(
                "{} {}",
                e["type"].as_str().unwrap(),
                e["object"]["metadata"]["resourceVersion"].as_str().unwrap()
            )
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_send_bookmarks_once_past_the_version_the_watch_started_from() {
    let mut cfg = sim_config();
    cfg.bookmark_interval = Duration::from_secs(1);
    let direct = start_sim(cfg.clone()).await;
    let behind = start_sim(cfg).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![behind.url()];
    config.cache.resources = vec!["pods".into()];
    config.watch.bookmark_interval_seconds = 1;
    let r8s = start_r8s_config(config).await;
    let watch_both = |rv: u64| {
        let path = format!(
            "/api/v1/namespaces/ns-0/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=4"
        );
        let (d, v) = (
            format!("{}{path}", direct.url()),
            format!("{}{path}", r8s.url()),
        );
        (
            tokio::spawn(async move { send("GET", &d, &[], None).await }),
            tokio::spawn(async move { send("GET", &v, &[], None).await }),
        )
    };

    // One event, then bookmarks: they repeat the event's version, since the
    // cache is past the version the watch started from (reference 06, A).
    let rv = direct.sim.store.current_rv();
    let (a, b) = watch_both(rv);
    tokio::time::sleep(Duration::from_millis(300)).await;
    for sim in [&direct, &behind] {
        relabel(sim, "ns-0", "pod-00000", "touched");
    }
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(b.headers["x-r8s-cache"], "hit");
    for (who, r) in [("sim", &a), ("r8s", &b)] {
        let got = typed_versions(r);
        assert_eq!(got[0], format!("MODIFIED {}", rv + 1), "{who}: {got:?}");
        assert!(got.len() >= 2, "{who}: bookmarks after the event: {got:?}");
        for e in &got[1..] {
            assert_eq!(*e, format!("BOOKMARK {}", rv + 1), "{who}: {got:?}");
        }
    }

    // Nothing written since the version the watch starts from: no bookmark
    // (reference 06, C).
    let (a, b) = watch_both(rv + 1);
    let (a, b) = (a.await.unwrap(), b.await.unwrap());
    assert_eq!(b.headers["x-r8s-cache"], "hit");
    assert_eq!(typed_versions(&a), Vec::<String>::new(), "sim");
    assert_eq!(typed_versions(&b), Vec::<String>::new(), "r8s");
    r8s.stop().await;
    direct.stop().await;
    behind.stop().await;
}
