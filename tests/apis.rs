//! r8s follows the upstream's API while it runs (`cache.resources = ["*"]`):
//! a CRD created gets a cache, a version added gets one, a version no longer
//! served and a CRD deleted lose theirs (requests pass to the upstream's
//! 404, open watches end, the bytes go).

use std::time::{Duration, Instant};

use crate::common::crd::{self, CRDS, crd, write};
use crate::common::*;
use serde_json::{Value, json};

/// How long a test waits for r8s to follow a change to a CRD: a hang guard,
/// not a bound the test asserts. r8s resolves discovery again 250 ms after
/// the change it sees on its CRD cache (and 2 s later); its periodic
/// resolution is an hour off here, so following a change at all shows that
/// the CRD cache's events drive it. How soon is measured by `cargo bench
/// --bench apis` (BENCHMARKS.md, "Issue 44"), not asserted on a machine of
/// unknown speed.
const BOUND: Duration = Duration::from_secs(60);

fn cache_header(r: &Resp) -> &str {
    r.headers
        .get("x-r8s-cache")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

/// Polls `url` until `ok` holds of its answer (failing past the hang guard
/// `BOUND`); the time it took, for the log.
async fn within_bound(url: &str, ok: impl Fn(&Resp) -> bool) -> Duration {
    let start = Instant::now();
    let what = format!("{url} answered as the test wants");
    eventually(&what, BOUND, || async { ok(&get(url).await).then_some(()) }).await;
    start.elapsed()
}

/// A watch opened through r8s and answered from its cache, to be read later.
async fn open_watch(url: &str) -> hyper::body::Incoming {
    let (body, cache) = crd::open_watch(url).await;
    assert_eq!(cache.as_deref(), Some("hit"), "{url}");
    body
}

/// Reads a watch until it ends (panics if it does not within `BOUND`).
async fn until_end(body: hyper::body::Incoming) -> Vec<Value> {
    crd::until_end(body, BOUND).await
}

/// A watch of `url` through r8s from its cache's current version, a hit.
async fn watch_from_now(url: &str) -> hyper::body::Incoming {
    let list = get(&format!("{url}?resourceVersion=0")).await.json();
    let rv = list["metadata"]["resourceVersion"].as_str().unwrap();
    open_watch(&format!("{url}?watch=1&resourceVersion={rv}")).await
}

/// r8s in front of `sim` caching `entries`, its periodic resolution far
/// off: the CRD cache's events drive it.
fn following(sim: &r8s_sim::SimHandle, entries: &[&str]) -> R8sBuilder {
    r8s_in_front_of(sim.url())
        .caching(entries)
        .with(|c| c.cache.discovery_interval_seconds = 3600)
}

/// Creates a CRD of `plural` in `group` with `versions` (name, served,
/// storage) through `base`.
async fn define(base: &str, group: &str, plural: &str, versions: &[(&str, bool, bool)]) {
    let made = write(
        "POST",
        &format!("{base}{CRDS}"),
        &crd(group, plural, versions),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
}

#[tokio::test(flavor = "multi_thread")]
async fn should_follow_a_crd_created_versioned_and_deleted_while_it_runs() {
    let sim = start_sim(sim_config()).await;
    // The periodic resolution is far off: the CRD cache's events drive it.
    let r8s = following(&sim, &["*"]).start().await;
    let base = r8s.url();
    let v1 = format!("{base}/apis/late.example.com/v1/namespaces/ns-0/gadgets");
    let v2 = format!("{base}/apis/late.example.com/v2/namespaces/ns-0/gadgets");
    let r = get(&format!("{v1}?resourceVersion=0")).await;
    assert_eq!(r.status, 404, "{}", r.text());

    // Created, with an object: a hit within the bound.
    define(&base, "late.example.com", "gadgets", &[("v1", true, true)]).await;
    let g1 =
        json!({"apiVersion": "late.example.com/v1", "kind": "Gadget", "metadata": {"name": "g1"}});
    assert_eq!(write("POST", &v1, &g1).await.status, 201);
    let took = within_bound(&format!("{v1}?resourceVersion=0"), |r| {
        cache_header(r) == "hit" && r.json()["items"].as_array().is_some_and(|i| i.len() == 1)
    })
    .await;
    eprintln!("created: a hit after {took:?}");
    // Its cache counted among those started while r8s runs (each test has
    // a process, and so a metrics registry, of its own: tests/run).
    let metrics_url = format!("{}/metrics", r8s.admin_url());
    let run_time = r#"r8s_caches{started="run_time"}"#;
    assert_eq!(scrape(&metrics_url, run_time).await, 1.0);
    assert!(scrape(&metrics_url, r#"r8s_caches{started="startup"}"#).await >= 1.0);

    // A second version: both are hits.
    let current = get(&format!("{base}{CRDS}/gadgets.late.example.com"))
        .await
        .json();
    let mut two = current.clone();
    two["spec"] = crd(
        "late.example.com",
        "gadgets",
        &[("v1", true, true), ("v2", true, false)],
    )["spec"]
        .clone();
    let put = write(
        "PUT",
        &format!("{base}{CRDS}/gadgets.late.example.com"),
        &two,
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.text());
    let took = within_bound(&format!("{v2}?resourceVersion=0"), |r| {
        cache_header(r) == "hit" && r.json()["items"][0]["apiVersion"] == "late.example.com/v2"
    })
    .await;
    eprintln!("a version added: a hit after {took:?}");
    // v1's cache restarted with the new definition (its storage is
    // recreated upstream too): a hit again once it synced.
    within_bound(&format!("{v1}?resourceVersion=0"), |r| {
        cache_header(r) == "hit"
    })
    .await;

    // v1 no longer served: its requests pass (the upstream's 404), and its
    // open watch through r8s ends.
    let watching_v1 = watch_from_now(&v1).await;
    let mut off = get(&format!("{base}{CRDS}/gadgets.late.example.com"))
        .await
        .json();
    off["spec"]["versions"][0]["served"] = json!(false);
    let put = write(
        "PUT",
        &format!("{base}{CRDS}/gadgets.late.example.com"),
        &off,
    )
    .await;
    assert_eq!(put.status, 200, "{}", put.text());
    until_end(watching_v1).await;
    let took = within_bound(&format!("{v1}?resourceVersion=0"), |r| {
        r.status == 404 && cache_header(r) == "pass"
    })
    .await;
    eprintln!("a version no longer served: passed after {took:?}");
    within_bound(&format!("{v2}?resourceVersion=0"), |r| {
        cache_header(r) == "hit"
    })
    .await;
    // Gone from the metrics; the other version's cache is there.
    let objects = |v: &str| format!("r8s_cache_objects{{resource=\"late.example.com/{v}/gadgets\"");
    let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(!metrics.contains(&objects("v1")), "{metrics}");
    assert!(metrics.contains(&objects("v2")), "{metrics}");

    // Deleted: the watch through r8s sees the objects go, then ends; 404.
    let watching_v2 = watch_from_now(&v2).await;
    crd::delete(&base, "gadgets.late.example.com").await;
    let events = until_end(watching_v2).await;
    assert!(events.iter().any(|e| e["type"] == "DELETED"), "{events:?}");
    let took = within_bound(&format!("{v2}?resourceVersion=0"), |r| {
        r.status == 404 && cache_header(r) == "pass"
    })
    .await;
    eprintln!("deleted: passed after {took:?}");
    let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(!metrics.contains(&objects("v2")), "{metrics}");
    assert!(
        metrics.contains("r8s_watch_terminated_total{resource=\"late.example.com/v2/gadgets\",reason=\"removed\"} 1"),
        "{metrics}"
    );
    // Every cache started while it ran (v1, v1 restarted, v2) is retired.
    eventually(
        "the run-time caches retired",
        Duration::from_secs(60),
        || async { (scrape(&metrics_url, run_time).await == 0.0).then_some(()) },
    )
    .await;
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_restart_the_caches_of_a_crd_whose_definition_changes() {
    let sim = start_sim(sim_config()).await;
    let dir = temp_dir("redefined");
    let saved_in = dir.clone();
    let r8s = following(&sim, &["*"])
        .with(move |c| {
            c.persist.dir = Some(saved_in);
            c.persist.interval_seconds = 1;
        })
        .start()
        .await;
    let base = r8s.url();
    let crd_url = format!("{base}{CRDS}/sprockets.conv.example.com");
    let v1 = format!("{base}/apis/conv.example.com/v1/namespaces/ns-0/sprockets");
    let v2 = format!("{base}/apis/conv.example.com/v2/namespaces/ns-0/sprockets");
    define(
        &base,
        "conv.example.com",
        "sprockets",
        &[("v1", true, true), ("v2", true, false)],
    )
    .await;
    let s1 = json!({"apiVersion": "conv.example.com/v1", "kind": "Sprocket", "metadata": {"name": "s1"}});
    assert_eq!(write("POST", &v1, &s1).await.status, 201);
    // Written in v1, served in v2 by the `None` conversion: unmarked.
    let converted = |r: &Resp| {
        r.json()["items"][0]["metadata"]["annotations"]["sim.r8s.dev/converted-by-webhook"]
            == "true"
    };
    for url in [&v1, &v2] {
        within_bound(&format!("{url}?resourceVersion=0"), |r| {
            cache_header(r) == "hit" && r.json()["items"].as_array().is_some_and(|i| i.len() == 1)
        })
        .await;
    }
    assert!(!converted(&get(&format!("{v2}?resourceVersion=0")).await));

    // A change that is not to the definition (a label): the caches stay,
    // their watches open past the two looks it causes (250 ms and 2 s on).
    let (mut w1, w2) = (watch_from_now(&v1).await, watch_from_now(&v2).await);
    let mut labelled = get(&crd_url).await.json();
    labelled["metadata"]["labels"] = json!({"team": "gears"});
    let put = write("PUT", &crd_url, &labelled).await;
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(put.json()["metadata"]["generation"], 1, "{}", put.text());
    let frame = tokio::time::timeout(
        Duration::from_secs(3),
        http_body_util::BodyExt::frame(&mut w1),
    );
    assert!(frame.await.is_err(), "the watch on v1 went on");

    // A conversion webhook named: both versions' watches end, as the
    // apiserver's do when it recreates the storage; the caches relist, and
    // serve the objects as the webhook converts them.
    let mut hooked = get(&crd_url).await.json();
    hooked["spec"]["conversion"] = json!({"strategy": "Webhook", "webhook": {
        "clientConfig": {"url": "https://convert.example.com/convert"},
        "conversionReviewVersions": ["v1"]}});
    let put = write("PUT", &crd_url, &hooked).await;
    assert_eq!(put.status, 200, "{}", put.text());
    assert_eq!(put.json()["metadata"]["generation"], 2, "{}", put.text());
    until_end(w1).await;
    until_end(w2).await;
    let took = within_bound(&format!("{v2}?resourceVersion=0"), |r| {
        cache_header(r) == "hit" && converted(r)
    })
    .await;
    eprintln!("a conversion webhook named: converted objects served from the cache after {took:?}");

    // The storage version flipped to v2: restarted again.
    let (w1, w2) = (watch_from_now(&v1).await, watch_from_now(&v2).await);
    let mut flipped = get(&crd_url).await.json();
    flipped["spec"]["versions"][0]["storage"] = json!(false);
    flipped["spec"]["versions"][1]["storage"] = json!(true);
    let put = write("PUT", &crd_url, &flipped).await;
    assert_eq!(put.status, 200, "{}", put.text());
    until_end(w1).await;
    until_end(w2).await;
    for url in [&v1, &v2] {
        within_bound(&format!("{url}?resourceVersion=0"), |r| {
            cache_header(r) == "hit" && r.json()["items"].as_array().is_some_and(|i| i.len() == 1)
        })
        .await;
    }
    let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let ended = sample(
        &metrics,
        "r8s_watch_terminated_total{resource=\"conv.example.com/v1/sprockets\",reason=\"removed\"}",
    );
    assert_eq!(ended, 2.0, "{metrics}");
    // The restarted caches are saved again (the retired ones' files are
    // theirs now, or removed before they wrote).
    let guard = HangGuard::new();
    while files(&dir, "conv.example.com_v2_sprockets.json.snap").is_empty() {
        guard.check(|| format!("{:?}", files(&dir, "")));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    r8s.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn should_cache_the_groups_a_pattern_names_as_they_appear() {
    let sim = start_sim(sim_config()).await;
    let r8s = following(&sim, &["*.example.com"]).start().await;
    let base = r8s.url();
    // The CRDs are cached with the pattern (the follower watches them);
    // nothing else outside it is.
    let crds = get(&format!("{base}{CRDS}?resourceVersion=0")).await;
    assert_eq!(cache_header(&crds), "hit");
    let cms = get(&format!(
        "{base}/api/v1/namespaces/ns-0/configmaps?resourceVersion=0"
    ))
    .await;
    assert_eq!((cms.status.as_u16(), cache_header(&cms)), (200, "pass"));
    for (group, plural) in [("a.example.com", "cogs"), ("example.org", "cogs")] {
        let made = write(
            "POST",
            &format!("{base}{CRDS}"),
            &crd(group, plural, &[("v1", true, true)]),
        )
        .await;
        assert_eq!(made.status, 201, "{}", made.text());
    }
    let inside = format!("{base}/apis/a.example.com/v1/namespaces/ns-0/cogs?resourceVersion=0");
    let took = within_bound(&inside, |r| cache_header(r) == "hit").await;
    eprintln!("a group the pattern names: a hit after {took:?}");
    let outside = get(&format!(
        "{base}/apis/example.org/v1/namespaces/ns-0/cogs?resourceVersion=0"
    ))
    .await;
    assert_eq!(
        (outside.status.as_u16(), cache_header(&outside)),
        (200, "pass")
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_keep_a_cache_its_crd_serves_when_discovery_leaves_it_out() {
    let sim = start_sim(sim_config()).await;
    let r8s = following(&sim, &["*"])
        .with(|c| c.cache.discovery_interval_seconds = 1)
        .start()
        .await;
    let base = r8s.url();
    define(&base, "kept.example.com", "things", &[("v1", true, true)]).await;
    let things = format!("{base}/apis/kept.example.com/v1/namespaces/ns-0/things");
    let deployments = format!("{base}/apis/apps/v1/namespaces/ns-0/deployments?resourceVersion=0");
    within_bound(&format!("{things}?resourceVersion=0"), |r| {
        cache_header(r) == "hit"
    })
    .await;
    assert_eq!(cache_header(&get(&deployments).await), "hit");
    let mut watching = watch_from_now(&things).await;

    // Discovery leaves out both groups while the upstream serves them (an
    // apiserver mid-upgrade): the built-in's cache goes once two looks in a
    // row left it out; the custom resource's stays, as its CRD serves it.
    sim.sim
        .resources
        .hide_from_discovery("kept.example.com", true);
    sim.sim.resources.hide_from_discovery("apps", true);
    let took = within_bound(&deployments, |r| {
        r.status == 200 && cache_header(r) == "pass"
    })
    .await;
    eprintln!("a built-in left out of discovery: passed after {took:?}");
    // Two more looks (1 s apart): still a hit, its watch still open.
    // (Nothing in 2 s, or an event that is not an ERROR, is a watch going
    // on; its end, or an ERROR, is not.)
    let frame = tokio::time::timeout(
        Duration::from_secs(2),
        http_body_util::BodyExt::frame(&mut watching),
    );
    if let Ok(frame) = frame.await {
        let data = frame
            .expect("the watch went on")
            .expect("the watch went on")
            .into_data()
            .unwrap_or_default();
        assert!(
            !String::from_utf8_lossy(&data).contains("\"ERROR\""),
            "the watch went on: {}",
            String::from_utf8_lossy(&data)
        );
    }
    assert_eq!(
        cache_header(&get(&format!("{things}?resourceVersion=0")).await),
        "hit"
    );

    // Listed again: the built-in is cached again.
    sim.sim
        .resources
        .hide_from_discovery("kept.example.com", false);
    sim.sim.resources.hide_from_discovery("apps", false);
    within_bound(&deployments, |r| cache_header(r) == "hit").await;
    let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let ended = metric(
        &metrics,
        "r8s_watch_terminated_total{resource=\"kept.example.com/v1/things\",reason=\"removed\"}",
    );
    assert!(ended.is_none_or(|n| n == 0.0), "{metrics}");
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_pass_through_a_new_crd_over_its_budget_with_a_reason() {
    let sim = start_sim(sim_config()).await;
    let r8s = following(&sim, &["*"])
        .with(|c| c.cache.max_bytes_per_resource = 20_000)
        .start()
        .await;
    let base = r8s.url();
    define(&base, "budget.example.com", "bigs", &[("v1", true, true)]).await;
    define(&base, "budget.example.com", "smalls", &[("v1", true, true)]).await;
    let bigs = format!("{base}/apis/budget.example.com/v1/namespaces/ns-0/bigs");
    let smalls = format!("{base}/apis/budget.example.com/v1/namespaces/ns-0/smalls");
    let padding = "x".repeat(10_000);
    for i in 0..4 {
        let big = json!({"apiVersion": "budget.example.com/v1", "kind": "Big",
                         "metadata": {"name": format!("b{i}")}, "data": padding});
        assert_eq!(write("POST", &bigs, &big).await.status, 201);
    }
    let small =
        json!({"apiVersion": "budget.example.com/v1", "kind": "Small", "metadata": {"name": "s"}});
    assert_eq!(write("POST", &smalls, &small).await.status, 201);
    // The one that fits is a hit; the one that does not (40 KB over 20 KB)
    // is answered whole by the upstream, with its reason counted.
    within_bound(&format!("{smalls}?resourceVersion=0"), |r| {
        cache_header(r) == "hit"
    })
    .await;
    let over = "r8s_cache_requests_total{resource=\"budget.example.com/v1/bigs\",verb=\"list\",result=\"over_budget\"}";
    let guard = HangGuard::new();
    loop {
        let r = get(&format!("{bigs}?resourceVersion=0")).await;
        assert_eq!((r.status.as_u16(), cache_header(&r)), (200, "pass"));
        assert_eq!(r.json()["items"].as_array().map(Vec::len), Some(4));
        let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        if metric(&metrics, over).is_some_and(|n| n >= 1.0) {
            break;
        }
        guard.check(|| metrics.to_string());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r8s.stop().await;
    sim.stop().await;
}

/// A fresh directory under the system's temporary one.
fn temp_dir(what: &str) -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "r8s-{what}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// The files in `dir` whose names start with `prefix`.
fn files(dir: &std::path::Path, prefix: &str) -> Vec<String> {
    std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .filter_map(|e| e.file_name().into_string().ok())
        .filter(|n| n.starts_with(prefix))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_wait_for_a_named_resource_and_discard_the_snapshot_of_one_gone() {
    let sim = start_sim(sim_config()).await;
    let dir = temp_dir("apis");
    let crds = format!("{}{CRDS}", sim.url());
    let made = write(
        "POST",
        &crds,
        &crd("waited.example.com", "gizmos", &[("v1", true, true)]),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let entries = ["configmaps", "waited.example.com/v1/gizmos"];
    let start = || {
        let dir = dir.clone();
        r8s_in_front_of(sim.url())
            .caching(&entries)
            .with(move |c| {
                c.persist.dir = Some(dir);
                c.persist.interval_seconds = 1;
                c.cache.discovery_interval_seconds = 1;
                c.cache.consistency_check_interval_seconds = 1;
            })
            .start()
    };
    let r8s = start().await;
    r8s.stop().await;
    let stem = "waited.example.com_v1_gizmos.";
    assert!(!files(&dir, stem).is_empty(), "{:?}", files(&dir, ""));

    // Gone while r8s was down: its snapshot is discarded, and the entry is
    // waited for (ready meanwhile: the other cache synced).
    crd::delete(&sim.url(), "gizmos.waited.example.com").await;
    let r8s = start().await;
    assert_eq!(files(&dir, stem), Vec::<String>::new());
    assert!(!files(&dir, "core_v1_configmaps.").is_empty());
    let verbose = get(&format!("{}/readyz?verbose", r8s.admin_url())).await;
    assert_eq!(verbose.status, 200, "{}", verbose.text());
    assert!(
        verbose.text().contains("not served upstream yet (waited for; their requests pass through): waited.example.com/v1/gizmos"),
        "{}",
        verbose.text()
    );
    let url = format!(
        "{}/apis/waited.example.com/v1/namespaces/ns-0/gizmos?resourceVersion=0",
        r8s.url()
    );
    assert_eq!(get(&url).await.status, 404);

    // Made again: cached, within the period (1 s here) and a list.
    let made = write(
        "POST",
        &format!("{}{CRDS}", r8s.url()),
        &crd("waited.example.com", "gizmos", &[("v1", true, true)]),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    within_bound(&url, |r| r.status == 200 && cache_header(r) == "hit").await;
    let verbose = get(&format!("{}/readyz?verbose", r8s.admin_url()))
        .await
        .text();
    assert!(!verbose.contains("not served upstream yet"), "{verbose}");
    // Started while r8s runs, it is saved and checked as the others are
    // (a warm start checks first 5 to 15 s after its caches resumed).
    let checked = "r8s_cache_consistency_checks_total{resource=\"waited.example.com/v1/gizmos\",encoding=\"json\",result=\"equal\"}";
    let guard = HangGuard::new();
    loop {
        let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        let saved = files(&dir, &format!("{stem}json.snap")).len() == 1;
        if saved && metric(&metrics, checked).is_some_and(|n| n >= 1.0) {
            break;
        }
        guard.check(|| format!("saved: {saved}; {:?}", metric(&metrics, checked)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    // What a start while the upstream is down resolves to includes it.
    let saved_resources = || {
        let saved = std::fs::read(dir.join("resources.json")).unwrap();
        serde_json::from_slice::<Value>(&saved).unwrap()["resources"].to_string()
    };
    assert!(
        saved_resources().contains("gizmos"),
        "{}",
        saved_resources()
    );

    // Deleted while r8s runs: its files go within a round of the writer,
    // and the saved resolution leaves it out.
    crd::delete(&r8s.url(), "gizmos.waited.example.com").await;
    let guard = HangGuard::new();
    while !files(&dir, stem).is_empty() {
        guard.check(|| format!("{:?}", files(&dir, stem)));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !saved_resources().contains("gizmos"),
        "{}",
        saved_resources()
    );
    r8s.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_a_kube_rs_controller_started_before_its_crd_exists() {
    use futures_util::StreamExt;
    use kube::api::{ApiResource, DynamicObject, GroupVersionKind};
    use kube::runtime::{WatchStreamExt, reflector, watcher};

    let sim = start_sim(sim_config()).await;
    let r8s = following(&sim, &["*"]).start().await;
    let client = kube::Client::try_from(kube::Config::new(r8s.url().parse().unwrap())).unwrap();
    let gvk = GroupVersionKind::gvk("early.example.com", "v1", "Doohickey");
    let ar = ApiResource::from_gvk_with_plural(&gvk, "doohickeys");
    let api: kube::Api<DynamicObject> = kube::Api::namespaced_with(client, "ns-0", &ar);
    // Started before the CRD exists: its list gets the apiserver's 404
    // (through r8s) until it does; the Any semantic reads from the cache.
    let writer = reflector::store::Writer::new(ar.clone());
    let reader = writer.as_reader();
    let config = watcher::Config::default().any_semantic();
    let stream = reflector(writer, watcher(api, config).default_backoff());
    let errors = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let seen = errors.clone();
    let task = tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(ev) = s.next().await {
            if let Err(e) = ev {
                seen.lock().unwrap().push(e.to_string());
            }
        }
    });
    tokio::time::sleep(Duration::from_millis(500)).await;

    let base = r8s.url();
    define(
        &base,
        "early.example.com",
        "doohickeys",
        &[("v1", true, true)],
    )
    .await;
    let url = format!("{base}/apis/early.example.com/v1/namespaces/ns-0/doohickeys");
    let d1 = json!({"apiVersion": "early.example.com/v1", "kind": "Doohickey", "metadata": {"name": "d1"}});
    assert_eq!(write("POST", &url, &d1).await.status, 201);
    within_bound(&format!("{url}?resourceVersion=0"), |r| {
        cache_header(r) == "hit"
    })
    .await;
    // Its reflector gets the object, then a later one by its watch. The
    // watcher's backoff after the 404s is at most 30 s (kube-rs's default).
    let names = |reader: &reflector::Store<DynamicObject>| {
        let mut n: Vec<String> = reader
            .state()
            .iter()
            .filter_map(|o| o.metadata.name.clone())
            .collect();
        n.sort();
        n
    };
    let guard = HangGuard::new();
    while names(&reader) != ["d1"] {
        guard.check(|| format!("{:?} {:?}", names(&reader), errors.lock().unwrap()));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let d2 = json!({"apiVersion": "early.example.com/v1", "kind": "Doohickey", "metadata": {"name": "d2"}});
    assert_eq!(write("POST", &url, &d2).await.status, 201);
    let guard = HangGuard::new();
    while names(&reader) != ["d1", "d2"] {
        guard.check(|| format!("{:?}", names(&reader)));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    task.abort();
    // The only errors it saw are the apiserver's own: 404 before the CRD.
    let errors = errors.lock().unwrap().clone();
    assert!(
        errors
            .iter()
            .all(|e| e.contains("404") || e.contains("NotFound") || e.contains("not found")),
        "{errors:?}"
    );
    let metrics = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let hits = sample(
        &metrics,
        "r8s_cache_requests_total{resource=\"early.example.com/v1/doohickeys\",verb=\"watch\",result=\"hit\"}",
    );
    assert!(hits >= 1.0, "{metrics}");
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_pace_the_caches_of_200_crds_created_at_once() {
    // Lists that take a while, as a busy apiserver's do: unpaced, 400 of
    // them would overlap.
    let sim = start_sim(r8s_sim::SimConfig {
        list_delay: Duration::from_millis(100),
        ..sim_config()
    })
    .await;
    let r8s = following(&sim, &["*"]).start().await;
    let starts = r8s_config_default_starts();
    let crds = format!("{}{CRDS}", sim.url());
    // Ten groups of twenty kinds, one object each: a provider's worth.
    let kinds: Vec<(String, String)> = (0..200)
        .map(|i| {
            (
                format!("g{}.crowd.example.com", i / 20),
                format!("k{i:03}s"),
            )
        })
        .collect();
    let _ = sim.sim.lists_in_flight();
    let began = Instant::now();
    for (group, plural) in &kinds {
        let made = write("POST", &crds, &crd(group, plural, &[("v1", true, true)])).await;
        assert_eq!(made.status, 201, "{}", made.text());
        let url = format!("{}/apis/{group}/v1/namespaces/ns-0/{plural}", sim.url());
        let kind = format!("K{}", &plural[1..plural.len() - 1]);
        let o =
            json!({"apiVersion": format!("{group}/v1"), "kind": kind, "metadata": {"name": "o"}});
        assert_eq!(write("POST", &url, &o).await.status, 201);
    }
    let created = began.elapsed();
    // One poll at a time (a pass is a LIST on the upstream too).
    let guard = HangGuard::new();
    for (group, plural) in &kinds {
        let url = format!(
            "{}/apis/{group}/v1/namespaces/ns-0/{plural}?resourceVersion=0",
            r8s.url()
        );
        loop {
            let r = get(&url).await;
            if cache_header(&r) == "hit"
                && r.json()["items"].as_array().is_some_and(|i| i.len() == 1)
            {
                break;
            }
            guard.check(|| format!("{url}: {} {}", r.status, cache_header(&r)));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
    let all_hits = began.elapsed();
    let (_, peak) = sim.sim.lists_in_flight();
    eprintln!(
        "200 CRDs created in {created:?}; all hits {all_hits:?} after the first was created; \
         peak lists in flight on the upstream: {peak} (cache.max_concurrent_starts = {starts}, two stores each, plus one poll)"
    );
    // Each cache started holds its turn until both its stores (JSON and
    // protobuf) have listed; the test's own poll may be one more.
    assert!(peak <= 2 * starts + 1, "{peak}");
    // 200 caches, at most 4 at a time, each ≥ 100 ms: ≥ 5 s.
    assert!(all_hits >= Duration::from_secs(5), "{all_hits:?}");
    r8s.stop().await;
    sim.stop().await;
}

fn r8s_config_default_starts() -> usize {
    r8s::config::Config::default().cache.max_concurrent_starts
}
