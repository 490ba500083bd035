//! The cache under churn and across relists: every list served from cache is
//! exactly the upstream's state at the list's resourceVersion.

use std::time::Duration;

use crate::common::*;
use r8s_sim::store::{Mutation, key};
use serde_json::Value;

fn items(v: &Value) -> Vec<Value> {
    v["items"].as_array().cloned().unwrap_or_default()
}

/// Lists each of the churn test's 4 workers compares with the upstream's
/// state at their version: 150 × 4 covers each of its 20 scope and selector
/// shapes 30 times, at versions the churn spreads over a minute.
const COMPARISONS_PER_WORKER: usize = 150;

/// A list read without building its tree: its version, and each item's
/// JSON as sent (the comparison of a few hundred lists a minute is the
/// churn test's cost, and a tree of every pod dominated it).
#[derive(serde::Deserialize)]
struct Listed<'a> {
    #[serde(borrow)]
    metadata: ListedMeta<'a>,
    #[serde(borrow, default)]
    items: Vec<&'a serde_json::value::RawValue>,
}

#[derive(serde::Deserialize)]
struct ListedMeta<'a> {
    #[serde(rename = "resourceVersion")]
    resource_version: &'a str,
}

impl<'a> Listed<'a> {
    fn of(r: &'a Resp) -> Self {
        assert!(r.complete, "the list's body was cut short");
        serde_json::from_slice(&r.body).expect("a list")
    }

    /// The same items in the same order: byte for byte (the cache serves the
    /// upstream's bytes), else parsed, so that a difference is shown as one.
    fn assert_same_items(&self, other: &Listed<'_>, what: &str) {
        let same = self.items.len() == other.items.len()
            && self
                .items
                .iter()
                .zip(&other.items)
                .all(|(a, b)| a.get() == b.get());
        if !same {
            let parse = |items: &[&serde_json::value::RawValue]| -> Vec<Value> {
                items
                    .iter()
                    .map(|i| serde_json::from_str(i.get()).unwrap())
                    .collect()
            };
            assert_eq!(parse(&self.items), parse(&other.items), "{what}");
        }
    }
}

/// 300 pods changing 500 times a second (the sim keeps every version, so
/// it can say its state at any of them), and r8s caching them.
async fn churning_pods() -> (r8s_sim::SimHandle, R8s) {
    let mut cfg = sim_config();
    cfg.pods = 300;
    cfg.churn = 500.0;
    cfg.history = 200_000;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    (sim, r8s)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_only_consistent_snapshots_under_churn() {
    let (sim, r8s) = churning_pods().await;
    let scopes = [
        "/api/v1/pods",
        "/api/v1/namespaces/ns-0/pods",
        "/api/v1/namespaces/ns-1/pods",
        "/api/v1/namespaces/ns-2/pods",
    ];
    let selectors = [
        "",
        "&labelSelector=tier%3Dbackend",
        "&labelSelector=team%20in%20(team-1,team-2)",
        "&fieldSelector=spec.nodeName%3Dnode-01",
        "&labelSelector=!nope&fieldSelector=status.phase%3DPending",
    ];
    let start_rv = sim.sim.store.current_rv();
    let mut tasks = Vec::new();
    for worker in 0..4 {
        let (r8s_url, sim_url, admin) = (r8s.url(), sim.url(), r8s.admin_url());
        tasks.push(tokio::spawn(async move {
            let mut rvs = Vec::new();
            for i in 0..COMPARISONS_PER_WORKER {
                let n = worker * COMPARISONS_PER_WORKER + i;
                let path = format!(
                    "{}?resourceVersion=0{}",
                    scopes[n % scopes.len()],
                    selectors[(n / 4) % selectors.len()]
                );
                let got = get(&format!("{r8s_url}{path}")).await;
                assert_eq!(got.status, 200, "{path}");
                if got.headers["x-r8s-cache"] != "hit" {
                    let m = get(&format!("{admin}/metrics")).await.text();
                    let m: Vec<&str> = m
                        .lines()
                        .filter(|l| {
                            l.contains("cache_requests")
                                || l.contains("relist")
                                || l.contains("synced")
                        })
                        .collect();
                    panic!("{path} passed through: {m:#?}");
                }
                let got = Listed::of(&got);
                let rv = got.metadata.resource_version.to_string();
                let truth = get(&format!("{sim_url}{path}").replace(
                    "resourceVersion=0",
                    &format!("resourceVersion={rv}&resourceVersionMatch=Exact"),
                ))
                .await;
                assert_eq!(truth.status, 200, "{}", truth.text());
                let truth = Listed::of(&truth);
                assert_eq!(
                    truth.metadata.resource_version,
                    got.metadata.resource_version
                );
                got.assert_same_items(
                    &truth,
                    &format!(
                        "{path} at {rv}: the cache's list is the upstream's state at that version"
                    ),
                );
                rvs.push(rv.parse::<u64>().unwrap());
            }
            rvs
        }));
    }
    let mut max_rv = 0;
    for t in tasks {
        max_rv = max_rv.max(t.await.unwrap().into_iter().max().unwrap());
    }
    assert!(
        max_rv > start_rv + 100,
        "the lists saw the churn ({start_rv} → {max_rv})"
    );
    r8s.stop().await;
    sim.stop().await;
}

/// Pages cut from one version while the upstream changes under them, and
/// Exact reads of versions already superseded, are served from the cache and
/// are the upstream's state at their version.
#[tokio::test(flavor = "multi_thread")]
async fn should_page_and_read_superseded_versions_from_cache_under_churn() {
    let (sim, r8s) = churning_pods().await;
    let hit = |r: &Resp, what: &str| {
        assert_eq!(r.status, 200, "{what}: {}", r.text());
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{what}");
    };
    let truth = |rv: String| {
        let url = format!(
            "{}/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
            sim.url()
        );
        async move { items(&get(&url).await.json()) }
    };
    // Pages of 40, 150 ms apart: ~75 changes land between two pages.
    let mut paged = Vec::new();
    let mut url = format!("{}/api/v1/pods?resourceVersion=0&limit=40", r8s.url());
    let first = get(&url).await;
    hit(&first, "first page");
    let first = first.json();
    let rv = first["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let mut page = first;
    let mut pages = 1;
    loop {
        paged.extend(items(&page));
        let Some(token) = page["metadata"]["continue"].as_str().map(str::to_string) else {
            break;
        };
        tokio::time::sleep(Duration::from_millis(150)).await;
        url = format!("{}/api/v1/pods?limit=40&continue={token}", r8s.url());
        let next = get(&url).await;
        hit(&next, &format!("page {}", pages + 1));
        page = next.json();
        assert_eq!(
            page["metadata"]["resourceVersion"].as_str(),
            Some(rv.as_str())
        );
        pages += 1;
    }
    assert_eq!(pages, 8, "300 pods in pages of 40");
    let now = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .await
        .json();
    let now_rv: u64 = now["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    assert!(
        now_rv > rv.parse::<u64>().unwrap() + 200,
        "the pods changed meanwhile"
    );
    assert_eq!(
        paged,
        truth(rv.clone()).await,
        "the pages are the upstream's state at {rv}"
    );
    // The version the first page was cut from, read again as Exact, and one
    // no page was cut from (rewound with the watch log).
    let older = rv.parse::<u64>().unwrap() + 100;
    for at in [rv.parse::<u64>().unwrap(), older] {
        let got = get(&format!(
            "{}/api/v1/pods?resourceVersion={at}&resourceVersionMatch=Exact",
            r8s.url()
        ))
        .await;
        hit(&got, &format!("Exact at {at}"));
        let got = got.json();
        assert_eq!(
            got["metadata"]["resourceVersion"].as_str(),
            Some(at.to_string().as_str())
        );
        assert_eq!(items(&got), truth(at.to_string()).await, "Exact at {at}");
    }
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_relist_after_410_and_converge_with_deletes() {
    let mut cfg = sim_config();
    cfg.pods = 60;
    cfg.history = 10;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let res = r8s_sim::resources::pods_idx();
    // The upstream drops its watches and refuses new ones while it changes
    // more than its history keeps: r8s's resume point is compacted away.
    sim.sim.interrupt_watches(true);
    for i in 0..10 {
        let k = key(
            Some(["ns-0", "ns-1", "ns-2"][i % 3]),
            &format!("pod-{:05}", i),
        );
        sim.sim
            .store
            .mutate(res, &k, |_, _| Ok(Mutation::Delete))
            .unwrap();
    }
    for i in 10..20 {
        let k = key(
            Some(["ns-0", "ns-1", "ns-2"][i % 3]),
            &format!("pod-{:05}", i),
        );
        let mut v = sim.sim.store.get(res, &k).unwrap().value();
        v["metadata"]["labels"]["relisted"] = "yes".into();
        sim.sim
            .store
            .mutate(res, &k, |_, _| Ok(Mutation::Put(v)))
            .unwrap();
    }
    tokio::time::sleep(Duration::from_millis(300)).await;
    sim.sim.accept_watches();
    let guard = HangGuard::new();
    loop {
        let cached = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
            .await
            .json();
        let truth = get(&format!("{}/api/v1/pods", sim.url())).await.json();
        if items(&cached) == items(&truth) {
            assert_eq!(
                items(&cached).len(),
                50,
                "the deletes are gone from the cache"
            );
            break;
        }
        guard.check(|| "the cache converged after the relist".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(
            r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#
        ),
        "{m}"
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_gzip_large_cached_lists_for_clients_that_accept_it() {
    use std::io::Read;
    let mut cfg = sim_config();
    cfg.pods = 200;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let url = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    let plain = get(&url).await;
    assert!(plain.body.len() > 128 * 1024);
    assert!(plain.headers.get("content-encoding").is_none());
    let gz = send("GET", &url, &[("accept-encoding", "gzip")], None).await;
    assert_eq!(gz.headers["content-encoding"], "gzip");
    assert_eq!(gz.headers["x-r8s-cache"], "hit");
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut out)
        .unwrap();
    assert_eq!(out, plain.body.to_vec());
    let small = send(
        "GET",
        &format!(
            "{}/api/v1/namespaces/ns-0/pods/pod-00000?resourceVersion=0",
            r8s.url()
        ),
        &[("accept-encoding", "gzip")],
        None,
    )
    .await;
    assert!(
        small.headers.get("content-encoding").is_none(),
        "small responses are not compressed"
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_sync_with_a_streaming_list_sparing_the_upstream_a_list() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    assert_eq!(
        sim.sim.count("list", "pods"),
        0,
        "no LIST reached the upstream"
    );
    assert_eq!(
        sim.sim.count("watch", "pods"),
        2,
        "per encoding cached (JSON, protobuf): one streaming list, then the same stream as a watch"
    );
    let cached = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url())).await;
    assert_eq!(cached.headers["x-r8s-cache"], "hit");
    assert_eq!(
        items(&cached.json()),
        items(&get(&format!("{}/api/v1/pods", sim.url())).await.json())
    );
    r8s.stop().await;

    let lists_before = sim.sim.count("list", "pods");
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.cache.streaming_lists = false;
    let paged = start_r8s_config(config).await;
    assert_eq!(
        sim.sim.count("list", "pods") - lists_before,
        2,
        "streaming lists off: one paged LIST per encoding"
    );
    paged.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_end_json_bodies_with_a_newline_as_the_apiserver_does() {
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.read.on_too_new = r8s::config::OnTooNew::Timeout;
    let r8s = start_r8s_config(config).await;
    let base = r8s.url();
    let meta = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    for (path, accept, status) in [
        (
            "/api/v1/namespaces/ns-0/pods/pod-00000?resourceVersion=0",
            "application/json",
            200,
        ),
        (
            "/api/v1/namespaces/ns-0/pods/pod-00000?resourceVersion=0",
            meta,
            200,
        ),
        (
            "/api/v1/namespaces/ns-0/pods?resourceVersion=0",
            "application/json",
            200,
        ),
        (
            "/api/v1/pods?resourceVersion=0&limit=2",
            "application/json",
            200,
        ),
        (
            "/api/v1/namespaces/ns-0/pods/missing?resourceVersion=0",
            "application/json",
            404,
        ),
        (
            "/api/v1/pods?resourceVersion=99999999",
            "application/json",
            504,
        ),
        (
            "/api/v1/pods?resourceVersion=0&pretty=true",
            "application/json",
            200,
        ),
    ] {
        let r = send("GET", &format!("{base}{path}"), &[("accept", accept)], None).await;
        assert_eq!(r.status, status, "{path}: {}", r.text());
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{path}");
        assert!(r.body.ends_with(b"}\n"), "{path} {accept}: {:?}", r.text());
        assert!(!r.body.ends_with(b"\n\n"), "{path}");
        serde_json::from_slice::<Value>(&r.body).unwrap();
        if let Some(len) = r.headers.get("content-length") {
            assert_eq!(len.to_str().unwrap(), r.body.len().to_string(), "{path}");
        }
        if status == 504 {
            assert_eq!(r.headers["retry-after"], "1", "{path}");
        }
        // The same bytes as the upstream's own answer where it is the same answer.
        if status == 200 && !path.contains("limit") {
            let direct = send(
                "GET",
                &format!("{}{path}", sim.url()),
                &[("accept", accept)],
                None,
            )
            .await;
            assert_eq!(r.body, direct.body, "{path} {accept}");
        }
    }
    r8s.stop().await;
    sim.stop().await;
}
