//! Consistent streaming lists (`sendInitialEvents=true`, no
//! `resourceVersion`: client-go ≥ 1.35's informer sync) served from the
//! cache once proven as fresh as the upstream, and passed through where
//! they cannot be proven.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::wire::{Object, Unknown, WatchEvent};
use crate::common::*;
use bytes::BytesMut;
use http_body_util::BodyExt;
use prost::Message;
use r8s::config::{Config, Prove};
use r8s_sim::store::{Mutation, key};
use r8s_sim::{Generation, SimConfig, SimHandle};

/// client-go's request: a streaming list of the current state.
const CONSISTENT: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

/// What a consistent streaming list sent up to its initial-events-end bookmark.
#[derive(Debug)]
struct Initial {
    /// `X-R8s-Cache`.
    cache: String,
    /// key → resourceVersion of every ADDED.
    objects: BTreeMap<String, u64>,
    /// The bookmark's version: the state the objects are.
    at: u64,
}

#[derive(serde::Deserialize)]
struct JsonEvent {
    #[serde(rename = "type")]
    kind: String,
    object: JsonObject,
}

#[derive(serde::Deserialize)]
struct JsonObject {
    metadata: JsonMeta,
}

#[derive(serde::Deserialize)]
struct JsonMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

/// One event of either encoding: type, key, version.
fn next_event(buf: &mut BytesMut, protobuf: bool) -> Option<(String, String, u64)> {
    if protobuf {
        if buf.len() < 4 {
            return None;
        }
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        if buf.len() < 4 + len {
            return None;
        }
        let frame = buf.split_to(4 + len);
        let ev = WatchEvent::decode(&frame[4..]).expect("a WatchEvent");
        let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
        let unknown = Unknown::decode(raw.strip_prefix(b"k8s\0").expect("the magic"))
            .expect("a runtime.Unknown");
        let o = Object::decode(unknown.raw.unwrap_or_default().as_slice()).expect("an object");
        let m = o.metadata.unwrap_or_default();
        let key = format!(
            "{}/{}",
            m.namespace.unwrap_or_default(),
            m.name.unwrap_or_default()
        );
        let rv = m.resource_version.unwrap_or_default().parse().unwrap_or(0);
        return Some((ev.r#type.unwrap_or_default(), key, rv));
    }
    let nl = buf.iter().position(|b| *b == b'\n')?;
    let line = buf.split_to(nl + 1);
    let ev: JsonEvent = serde_json::from_slice(&line)
        .unwrap_or_else(|e| panic!("a watch line ({e}): {}", String::from_utf8_lossy(&line)));
    let m = ev.object.metadata;
    let key = format!("{}/{}", m.namespace, m.name);
    Some((ev.kind, key, m.resource_version.parse().unwrap_or(0)))
}

/// Opens a consistent streaming list of `collection` (with `query`) and
/// reads it up to its initial-events-end bookmark.
async fn consistent_list(url: &str, collection: &str, query: &str, protobuf: bool) -> Initial {
    let accept = if protobuf {
        "application/vnd.kubernetes.protobuf;type=watch, application/json"
    } else {
        "application/json"
    };
    let req = http::Request::get(format!("{url}{collection}?{CONSISTENT}{query}"))
        .header("accept", accept)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = tokio::time::timeout(HANG, client().request(req))
        .await
        .expect("an answer (hung)")
        .expect("an answer");
    assert_eq!(resp.status(), 200, "{collection}?{query}");
    let cache = resp
        .headers()
        .get("x-r8s-cache")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let mut body = resp.into_body();
    let mut buf = BytesMut::new();
    let mut objects = BTreeMap::new();
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        while let Some((kind, key, rv)) = next_event(&mut buf, protobuf) {
            match kind.as_str() {
                "ADDED" => {
                    objects.insert(key, rv);
                }
                // The first bookmark of a streaming list ends its initial events.
                "BOOKMARK" => {
                    return Initial {
                        cache,
                        objects,
                        at: rv,
                    };
                }
                other => panic!("{other} before the initial-events-end bookmark"),
            }
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, body.frame())
            .await
            .expect("the initial-events-end bookmark within 15 s")
            .expect("the stream goes on until the bookmark")
            .expect("a frame");
        if let Ok(d) = frame.into_data() {
            buf.extend_from_slice(&d);
        }
    }
}

/// The sim's state of `res` at `at`, restricted to namespace `ns` and tier `tier`.
fn truth(
    sim: &SimHandle,
    res: usize,
    at: u64,
    ns: Option<&str>,
    tier: Option<&str>,
) -> BTreeMap<String, u64> {
    let (_, objects) = sim
        .sim
        .store
        .snapshot(res, Some(at))
        .expect("within the sim's history");
    // Keys are `namespace/name` (`name` when cluster-scoped, `/name` here):
    // only a tier's filter parses objects.
    objects
        .iter()
        .filter(|(k, _)| ns.is_none_or(|ns| k.split_once('/').is_some_and(|(n, _)| n == ns)))
        .filter(|(_, o)| tier.is_none_or(|t| o.value()["metadata"]["labels"]["tier"] == t))
        .map(|(k, o)| match k.contains('/') {
            true => (k.clone(), o.rv),
            false => (format!("/{k}"), o.rv),
        })
        .collect()
}

/// Writes a pod through the sim (acknowledged: it has a version) and returns that version.
fn write_pod(sim: &SimHandle, ns: &str, n: usize) -> u64 {
    let res = r8s_sim::resources::pods_idx();
    let name = format!("written-{n:05}");
    let v = r8s_sim::seed::pod(ns, &name, n, 3);
    sim.sim
        .store
        .mutate(res, &key(Some(ns), &name), |_, _| Ok(Mutation::Put(v)))
        .expect("the write")
        .rv
}

fn churning_sim(generation: Generation) -> SimConfig {
    SimConfig {
        pods: 60,
        namespaces: 3,
        churn: 200.0,
        generation,
        ..sim_config()
    }
}

async fn r8s_proving(sim: &SimHandle, mode: Prove) -> R8s {
    r8s_in_front_of(sim.url())
        .caching(&["pods", "v1/configmaps"])
        .with(|c| c.read.consistent_streaming_lists = mode)
        .start()
        .await
}

/// Writes, each followed by a consistent streaming list, in each of the
/// linearizability tests: 50 of each of the 6 shapes of list (the pods that
/// they write add up, so every later round lists more).
const ROUNDS: usize = 300;

/// Every consistent streaming list contains every write acknowledged before
/// it was sent: [`ROUNDS`] writes, each followed by a consistent streaming list
/// through r8s (JSON and protobuf, all namespaces and one, with and without
/// a label selector), under 200 writes/s; each answer is exactly the sim's
/// state at its bookmark's version, which is at or after the write. With the
/// current apiserver's behaviour every one is served from the cache.
async fn linearizable(generation: Generation, mode: Prove, rounds: usize) {
    let sim = start_sim(churning_sim(generation)).await;
    let r = r8s_proving(&sim, mode).await;
    let res = r8s_sim::resources::pods_idx();
    let workers = 4;
    let mut tasks = Vec::new();
    for w in 0..workers {
        let (url, sim_ref) = (r.url(), &sim);
        tasks.push(async move {
            let mut hits = 0;
            for i in (w..rounds).step_by(workers) {
                let ns = format!("ns-{}", i % 3);
                let written = write_pod(sim_ref, &ns, i);
                let protobuf = i % 2 == 1;
                let (collection, query, in_ns, tier) = match (i / 2) % 3 {
                    0 => ("/api/v1/pods".to_string(), "", None, None),
                    1 => (format!("/api/v1/namespaces/{ns}/pods"), "", Some(ns.as_str()), None),
                    _ => (
                        format!("/api/v1/namespaces/{ns}/pods"),
                        "&labelSelector=tier%3Dbackend",
                        Some(ns.as_str()),
                        Some("backend"),
                    ),
                };
                let got = consistent_list(&url, &collection, query, protobuf).await;
                assert!(
                    got.at >= written,
                    "round {i} ({collection}{query}, protobuf {protobuf}, {}): answered at {} before the write at {written}",
                    got.cache,
                    got.at
                );
                let want = truth(sim_ref, res, got.at, in_ns, tier);
                assert_eq!(
                    got.objects, want,
                    "round {i} ({collection}{query}, protobuf {protobuf}, {}): not the upstream's state at {}",
                    got.cache, got.at
                );
                if tier.is_none() {
                    let k = format!("{ns}/written-{i:05}");
                    // Churn may have deleted it since: then the state says so.
                    assert!(
                        got.objects.get(&k).is_some_and(|rv| *rv >= written)
                            || !want.contains_key(&k),
                        "round {i}: the write {k} at {written} is missing"
                    );
                }
                hits += usize::from(got.cache == "hit");
            }
            hits
        });
    }
    let hits: usize = futures_util::future::join_all(tasks)
        .await
        .into_iter()
        .sum();
    if generation == Generation::Current {
        assert_eq!(
            hits, rounds,
            "a current apiserver's pods under churn: every one a hit"
        );
    }
    r.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_contain_every_acknowledged_write_with_a_current_apiserver() {
    linearizable(Generation::Current, Prove::Auto, ROUNDS).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_contain_every_acknowledged_write_with_a_pre_131_apiserver_when_forced() {
    linearizable(Generation::Pre131, Prove::Prove, ROUNDS).await;
}

/// `r8s_cache_requests_total` for the watches of `resource` with `result`.
fn cache_result(metrics: &str, resource: &str, result: &str) -> f64 {
    sample(
        metrics,
        &format!(
            "r8s_cache_requests_total{{resource=\"{resource}\",verb=\"watch\",result=\"{result}\"}}"
        ),
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn should_prove_an_idle_resource_with_a_current_apiserver() {
    let sim = start_sim(churning_sim(Generation::Current)).await;
    let r = r8s_proving(&sim, Prove::Auto).await;
    let res =
        r8s_sim::resources::find(&r8s::api::Gvr::from_static("", "v1", "configmaps")).unwrap();
    for i in 0..5 {
        let t = Instant::now();
        // Every write acknowledged before the request (pods churn) is in the
        // state it is answered at, configmaps or not: a revision is global.
        let acknowledged = sim.sim.store.current_rv();
        let got = consistent_list(&r.url(), "/api/v1/configmaps", "", i % 2 == 1).await;
        assert_eq!(
            got.cache, "hit",
            "nobody writes configmaps, yet a current apiserver proves them"
        );
        assert_eq!(got.objects, truth(&sim, res, got.at, None, None));
        assert!(
            got.at >= acknowledged,
            "answered at {}, before the upstream's {acknowledged} when it was asked",
            got.at
        );
        eprintln!("idle configmaps proven in {:?}", t.elapsed());
    }
    r.stop().await;
    sim.stop().await;
}

/// A pre-1.31 upstream: under `auto` nothing is proven (its bookmarks may
/// run ahead of undelivered events); with `prove` forced, pods under churn
/// are proven on the bookmarks of their own changes, while an idle resource
/// gets no bookmark and passes, after two failures at once. (One test:
/// the metrics are the process's, shared by the tests of this file.)
#[tokio::test(flavor = "multi_thread")]
async fn should_prove_a_pre_131_apiserver_only_when_forced() {
    let sim = start_sim(churning_sim(Generation::Pre131)).await;
    let r = r8s_proving(&sim, Prove::Auto).await;
    for collection in ["/api/v1/pods", "/api/v1/configmaps"] {
        let got = consistent_list(&r.url(), collection, "", false).await;
        assert_eq!(
            got.cache, "pass",
            "{collection}: 1.30 reported, so not proven"
        );
    }
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    assert_eq!(cache_result(&m, "v1/pods", "unprovable"), 1.0, "{m}");
    assert_eq!(cache_result(&m, "v1/configmaps", "unprovable"), 1.0);
    r.stop().await;

    let r = r8s_proving(&sim, Prove::Prove).await;
    let before = get(&format!("{}/metrics", r.admin_url())).await.text();
    let pods = consistent_list(&r.url(), "/api/v1/pods", "", false).await;
    assert_eq!(
        pods.cache, "hit",
        "pods under churn prove on bookmarks of their own changes"
    );
    // No change to configmaps since the probe began: no bookmark, no proof
    // (it was tried: a probe went upstream).
    let proofs_sent = |m: &str| -> f64 {
        m.lines()
            .filter(|l| {
                l.starts_with("r8s_consistent_upstream_requests_total{")
                    && l.contains("resource=\"v1/configmaps\"")
            })
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    let idle = consistent_list(&r.url(), "/api/v1/configmaps", "", false).await;
    assert_eq!(idle.cache, "pass");
    assert!(
        proofs_sent(&get(&format!("{}/metrics", r.admin_url())).await.text())
            > proofs_sent(&before),
        "it tried a proof of its own before it passed"
    );
    let idle = consistent_list(&r.url(), "/api/v1/configmaps", "", true).await;
    assert_eq!(idle.cache, "pass");
    // Two failed proofs in a row: later requests pass at once, sending no
    // proof upstream. (A request passes at its deadline, which may come
    // before its probe has failed: wait for the two failures.)
    let sent = proofs_sent(&get(&format!("{}/metrics", r.admin_url())).await.text());
    assert!(sent >= 2.0, "the two proofs were sent: {sent}");
    let admin = r.admin_url();
    eventually("two failed proofs", HANG, || {
        let admin = admin.clone();
        async move {
            let m = get(&format!("{admin}/metrics")).await.text();
            let series = r#"r8s_consistent_proof_failures_total{resource="v1/configmaps"}"#;
            (sample(&m, series) >= 2.0).then_some(())
        }
    })
    .await;
    // Rounds (the one-object LISTs) are sent for requests only; a probe of
    // the last request may still be running.
    let rounds = |m: &str| {
        sample(
            m,
            r#"r8s_consistent_upstream_requests_total{resource="v1/configmaps",step="list"}"#,
        )
    };
    let before_third = rounds(&get(&format!("{admin}/metrics")).await.text());
    let idle = consistent_list(&r.url(), "/api/v1/configmaps", "", false).await;
    assert_eq!(idle.cache, "pass");
    assert_eq!(
        rounds(&get(&format!("{admin}/metrics")).await.text()),
        before_third,
        "passed at once, no proof sent"
    );
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    // (Counted per request: a series may first appear after `before`.)
    let delta = |series: &str| sample(&m, series) - metric(&before, series).unwrap_or(0.0);
    assert_eq!(
        delta(
            "r8s_cache_requests_total{resource=\"v1/configmaps\",verb=\"watch\",result=\"unproven\"}"
        ),
        3.0,
        "{m}"
    );
    assert_eq!(
        delta(
            "r8s_consistent_reads_total{resource=\"v1/configmaps\",kind=\"streaming_list\",result=\"passed\"}"
        ),
        3.0
    );
    r.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_pass_consistent_streaming_lists_when_told() {
    let sim = start_sim(churning_sim(Generation::Current)).await;
    let r = r8s_proving(&sim, Prove::Pass).await;
    let got = consistent_list(&r.url(), "/api/v1/pods", "", false).await;
    assert_eq!(got.cache, "pass");
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    assert_eq!(cache_result(&m, "v1/pods", "most_recent"), 1.0);
    r.stop().await;
    sim.stop().await;
}

/// client-go's exact request, sent by a real client: kube-rs's `Api::watch`
/// with `sendInitialEvents`, `resourceVersionMatch=NotOlderThan` and no
/// version, builds the sim's state, and its sync is a hit (namespaces: a
/// resource nobody writes, proven by the bookmark after a consistent read).
#[tokio::test(flavor = "multi_thread")]
async fn should_sync_a_kube_rs_client_sending_client_gos_request() {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::Namespace;
    use kube::api::{Api, WatchEvent, WatchParams};
    let sim = start_sim(churning_sim(Generation::Current)).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    // A resource no other test of this file reads: the metrics are shared.
    config.cache.resources = vec!["v1/namespaces".into()];
    let r = start_r8s_config(config).await;
    let config = kube::Config::new(r.url().parse().unwrap());
    let client = kube::Client::try_from(config).unwrap();
    let pods: Api<Namespace> = Api::all(client);
    let wp = WatchParams::streaming_lists();
    let mut stream = pods.watch(&wp, "").await.unwrap().boxed();
    let mut state = BTreeMap::new();
    let at = loop {
        match stream
            .next()
            .await
            .expect("events until the bookmark")
            .unwrap()
        {
            WatchEvent::Added(p) => {
                let m = &p.metadata;
                state.insert(
                    format!("/{}", m.name.clone().unwrap()),
                    m.resource_version.clone().unwrap().parse::<u64>().unwrap(),
                );
            }
            WatchEvent::Bookmark(b) => break b.metadata.resource_version.parse::<u64>().unwrap(),
            other => panic!("{other:?} before the initial-events-end bookmark"),
        }
    };
    let res =
        r8s_sim::resources::find(&r8s::api::Gvr::from_static("", "v1", "namespaces")).unwrap();
    assert_eq!(state, truth(&sim, res, at, None, None));
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    assert_eq!(
        cache_result(&m, "v1/namespaces", "hit"),
        1.0,
        "the sync came from the cache"
    );
    r.stop().await;
    sim.stop().await;
}

/// A tier: an r8s whose upstream is another r8s proves the same way (the
/// lower one passes the one-object LIST up and sends its own pre-deadline
/// bookmarks), and its answers contain every write acknowledged before them.
#[tokio::test(flavor = "multi_thread")]
async fn should_prove_through_a_tier_of_r8s() {
    let sim = start_sim(churning_sim(Generation::Current)).await;
    let lower = r8s_proving(&sim, Prove::Auto).await;
    let mut config = Config::default();
    config.upstream.servers = vec![lower.url()];
    config.cache.resources = vec!["pods".into()];
    let upper = start_r8s_config(config).await;
    let res = r8s_sim::resources::pods_idx();
    for i in 0..40 {
        let ns = format!("ns-{}", i % 3);
        let written = write_pod(&sim, &ns, 50_000 + i);
        let got = consistent_list(&upper.url(), "/api/v1/pods", "", i % 2 == 1).await;
        assert_eq!(got.cache, "hit", "round {i}");
        assert!(
            got.at >= written,
            "round {i}: answered at {} before the write at {written}",
            got.at
        );
        assert_eq!(
            got.objects,
            truth(&sim, res, got.at, None, None),
            "round {i}"
        );
    }
    upper.stop().await;
    lower.stop().await;
    sim.stop().await;
}

/// Consistent LISTs (no `resourceVersion`, kubectl's) are answered from the
/// cache once proven, by default against a current upstream (`auto`) and
/// with `"prove"` against any, containing every write acknowledged before
/// them, pages included; against an upstream before 1.31, or with `"pass"`,
/// they go upstream. Consistent GETs likewise (`read.consistent_gets`).
#[tokio::test(flavor = "multi_thread")]
async fn should_prove_consistent_lists_by_default_against_current_upstreams() {
    let lists = |sim_url: String, mode: Option<Prove>| async move {
        let r8s = r8s_in_front_of(sim_url)
            .caching(&["pods"])
            .with(move |c| {
                if let Some(mode) = mode {
                    c.read.consistent_lists = mode;
                }
            })
            .start()
            .await;
        let r = get(&format!("{}/api/v1/pods", r8s.url())).await;
        r8s.stop().await;
        r.headers["x-r8s-cache"].to_str().unwrap().to_string()
    };
    let old = start_sim(churning_sim(Generation::Pre131)).await;
    assert_eq!(
        lists(old.url(), None).await,
        "pass",
        "auto: not before 1.31"
    );
    old.stop().await;
    let sim = start_sim(churning_sim(Generation::Current)).await;
    assert_eq!(lists(sim.url(), None).await, "hit", "auto, the default");
    assert_eq!(lists(sim.url(), Some(Prove::Pass)).await, "pass");

    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    // Secrets: a resource no other test of this file reads (shared metrics).
    config.cache.resources = vec!["pods".into(), "v1/secrets".into()];
    config.cache.exclude = vec![];
    config.read.consistent_lists = Prove::Prove;
    let r8s = start_r8s_config(config).await;
    let res = r8s_sim::resources::pods_idx();
    for i in 0..20 {
        let ns = format!("ns-{}", i % 3);
        let written = write_pod(&sim, &ns, 60_000 + i);
        let r = get(&format!("{}/api/v1/namespaces/{ns}/pods", r8s.url())).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit", "round {i}");
        let list = r.json();
        let at: u64 = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(
            at >= written,
            "round {i}: listed at {at}, before the write at {written}"
        );
        let got: BTreeMap<String, u64> = list["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|o| (key_of(o), rv_of(o)))
            .collect();
        assert_eq!(got, truth(&sim, res, at, Some(&ns), None), "round {i}");
        // A consistent GET of it, from the cache (`read.consistent_gets`,
        // "auto" by default), sees it.
        let one = get(&format!(
            "{}/api/v1/namespaces/{ns}/pods/written-{:05}",
            r8s.url(),
            60_000 + i
        ))
        .await;
        assert_eq!(one.status, 200, "round {i}: {}", one.text());
        assert_eq!(one.headers["x-r8s-cache"], "hit", "round {i}");
        assert_eq!(
            rv_of(&one.json()),
            written,
            "round {i}: the GET saw the write"
        );
    }
    // A page of a proven list continues from the same version.
    let first = get(&format!("{}/api/v1/pods?limit=5", r8s.url())).await;
    assert_eq!(first.headers["x-r8s-cache"], "hit");
    let cont = first.json()["metadata"]["continue"]
        .as_str()
        .unwrap()
        .to_string();
    let next = get(&format!(
        "{}/api/v1/pods?limit=5&continue={cont}",
        r8s.url()
    ))
    .await;
    assert_eq!(next.headers["x-r8s-cache"], "hit");
    assert_eq!(
        next.json()["metadata"]["resourceVersion"],
        first.json()["metadata"]["resourceVersion"]
    );
    // An idle resource's LIST is proven too (a probe and its bookmark).
    let secrets = get(&format!("{}/api/v1/secrets", r8s.url())).await;
    assert_eq!(secrets.headers["x-r8s-cache"], "hit");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert_eq!(
        sample(
            &m,
            "r8s_consistent_reads_total{resource=\"v1/secrets\",kind=\"list\",result=\"proven\"}"
        ),
        1.0
    );
    // A consistent GET of what does not exist: the apiserver's 404, proven.
    let none = get(&format!("{}/api/v1/namespaces/ns-0/pods/nope", r8s.url())).await;
    assert_eq!(none.status, 404);
    assert_eq!(none.headers["x-r8s-cache"], "hit");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        sample(
            &m,
            "r8s_consistent_reads_total{resource=\"v1/pods\",kind=\"get\",result=\"proven\"}"
        ) >= 21.0
    );
    r8s.stop().await;
    // With `read.consistent_gets = "pass"`, the upstream answers them.
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| c.read.consistent_gets = Prove::Pass)
        .start()
        .await;
    let one = get(&format!(
        "{}/api/v1/namespaces/ns-0/pods/pod-00000",
        r8s.url()
    ))
    .await;
    assert_eq!(one.headers["x-r8s-cache"], "pass");
    r8s.stop().await;
    sim.stop().await;
}

/// A consistent GET from the cache is, byte for byte, the sim's own answer
/// to the same GET, in JSON and protobuf, whole and metadata-only, each
/// right after a write of the object it reads.
#[tokio::test(flavor = "multi_thread")]
async fn should_answer_a_consistent_get_with_the_upstreams_bytes() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_in_front_of(sim.url()).caching(&["pods"]).start().await;
    let accepts = [
        "application/json",
        "application/vnd.kubernetes.protobuf",
        "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1",
    ];
    for i in 0..4 {
        write_pod(&sim, "ns-1", 90_000 + i);
        let path = format!("/api/v1/namespaces/ns-1/pods/written-{:05}", 90_000 + i);
        for accept in accepts {
            let (ours, theirs) =
                from_both(&r8s.url(), &sim.url(), &path, &[("accept", accept)]).await;
            assert_eq!(
                ours.body, theirs.body,
                "{path} as {accept}: r8s and the sim"
            );
        }
    }
    r8s.stop().await;
    sim.stop().await;
}

/// A consistent GET waits for the cache only `read.consistent_get_wait_seconds`:
/// of a resource nobody writes, on an upstream whose probe bookmark comes
/// about a second later (the sim's), it passes through instead of waiting,
/// and the resource's next consistent GETs pass at once, without asking the
/// upstream for its version again.
#[tokio::test(flavor = "multi_thread")]
async fn should_pass_a_consistent_get_rather_than_wait_for_a_bookmark() {
    let sim = start_sim(sim_config_of(Generation::Current)).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods", "v1/configmaps"])
        .with(|c| c.read.consistent_get_wait_seconds = 0.05)
        .start()
        .await;
    let list = get(&format!(
        "{}/api/v1/configmaps?resourceVersion=0",
        r8s.url()
    ))
    .await
    .json();
    let m = &list["items"][0]["metadata"];
    let one = format!(
        "{}/api/v1/namespaces/{}/configmaps/{}",
        r8s.url(),
        m["namespace"].as_str().unwrap(),
        m["name"].as_str().unwrap()
    );
    // A write elsewhere: the upstream's version is past every configmap's.
    write_pod(&sim, "ns-0", 80_000);
    let lists = || async {
        sample(
            &get(&format!("{}/metrics", r8s.admin_url())).await.text(),
            r#"r8s_consistent_upstream_requests_total{resource="v1/configmaps",step="list"}"#,
        )
    };
    let first = get(&one).await;
    assert_eq!(first.status, 200);
    assert_eq!(
        first.headers["x-r8s-cache"], "pass",
        "waited in vain: passed"
    );
    let asked = lists().await;
    assert!(
        asked >= 1.0,
        "the first GET asked for the upstream's version"
    );
    let next = get(&one).await;
    assert_eq!(next.headers["x-r8s-cache"], "pass");
    assert_eq!(lists().await, asked, "the next passes without asking");
    r8s.stop().await;
    sim.stop().await;
}

/// The progress a consistent read requests is what proves a resource nobody
/// writes: with no churn at all, a write to pods (which this r8s does not
/// cache) moves the upstream's version past every secret; a consistent
/// streaming list of secrets is then proven only because the proof's own
/// one-object LIST made the upstream's watch cache catch up, so its probe's
/// bookmark reaches the version read. A pre-1.31 apiserver makes no such
/// progress: its probe gets no bookmark past the last secret, and the
/// request passes.
#[tokio::test(flavor = "multi_thread")]
async fn should_prove_an_idle_resource_by_the_progress_a_consistent_read_requests() {
    for (generation, expected) in [(Generation::Current, "hit"), (Generation::Pre131, "pass")] {
        let sim = start_sim(sim_config_of(generation)).await;
        let mut config = Config::default();
        config.upstream.servers = vec![sim.url()];
        config.cache.resources = vec!["v1/secrets".into()];
        config.read.consistent_streaming_lists = Prove::Prove;
        let r = start_r8s_config(config).await;
        let res =
            r8s_sim::resources::find(&r8s::api::Gvr::from_static("", "v1", "secrets")).unwrap();
        for i in 0..3 {
            let written = write_pod(&sim, "ns-0", 70_000 + i);
            let got = consistent_list(&r.url(), "/api/v1/secrets", "", i == 1).await;
            assert_eq!(got.cache, expected, "{generation:?}, round {i}");
            assert_eq!(got.objects, truth(&sim, res, got.at, None, None));
            if expected == "hit" {
                assert!(
                    got.at >= written,
                    "round {i}: answered at {} before the write at {written}",
                    got.at
                );
            }
        }
        r.stop().await;
        sim.stop().await;
    }
}

fn sim_config_of(generation: Generation) -> SimConfig {
    SimConfig {
        generation,
        ..sim_config()
    }
}

/// A burst of first consistent reads (a node pool's kubelets starting)
/// asks the upstream's `/version` once, not once each: 200 at once while
/// the upstream is silent (so all of them wait for the one answer), and
/// the sim counts at most 3 `GET /version` meanwhile (r8s's own health
/// probe asks every 5 s).
#[tokio::test(flavor = "multi_thread")]
async fn should_ask_the_upstream_version_once_for_a_burst_of_first_reads() {
    let sim = start_sim(churning_sim(Generation::Current)).await;
    let fwd = r8s_sim::fault::Forwarder::start(sim.addr).await;
    let r = r8s_in_front_of(fwd.url())
        .caching(&["pods"])
        .with(|c| c.read.consistent_streaming_lists = Prove::Auto)
        .start()
        .await;
    let before = sim.sim.count("get", "/version");
    fwd.set(r8s_sim::fault::Mode::Stall);
    let url = r.url();
    let reads: Vec<_> = (0..200)
        .map(|i| {
            let url = url.clone();
            tokio::spawn(async move { consistent_list(&url, "/api/v1/pods", "", i % 2 == 1).await })
        })
        .collect();
    tokio::time::sleep(Duration::from_secs(1)).await;
    fwd.set(r8s_sim::fault::Mode::Pass);
    for read in reads {
        assert_eq!(read.await.unwrap().cache, "hit", "every read proven");
    }
    let asked = sim.sim.count("get", "/version") - before;
    assert!(asked <= 3, "/version asked {asked} times for 200 reads");
    r.stop().await;
    fwd.stop();
    sim.stop().await;
}
