//! Tables from the cache (`kubectl get`): pods printed by r8s from its JSON
//! cache, compared with the sim's own printer (a separate implementation)
//! and with kubectl's output straight from the sim, lists and watches;
//! kinds r8s has no printer for pass through. (Every other kind:
//! `table_kinds.rs`.)

use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use r8s::config::{Config, Prove};

pub(crate) const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const TABLE_V1BETA1: &str = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
pub(crate) const T: Duration = Duration::from_secs(60);

pub(crate) async fn table(url: &str, accept: &str) -> Resp {
    send("GET", url, &[("Accept", accept)], None).await
}

/// The cells of each row.
pub(crate) fn rows(t: &Value) -> Vec<Vec<Value>> {
    t["rows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["cells"].as_array().unwrap().clone())
        .collect()
}

fn names(t: &Value) -> Vec<String> {
    t["columnDefinitions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap().to_string())
        .collect()
}

async fn r8s_for(sim: &r8s_sim::SimHandle, consistent: Prove) -> R8s {
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    // Widgets without their definition cached: r8s has no printer for them.
    config.cache.resources = vec!["pods".into(), "example.r8s.dev/v1/widgets".into()];
    config.read.consistent_lists = consistent;
    start_r8s_config(config).await
}

/// Every page of a pods Table, a get's Table, each `includeObject` and
/// both Table versions: hits, with the sim's rows.
#[tokio::test(flavor = "multi_thread")]
async fn should_print_pods_from_the_cache_as_the_upstream_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_for(&sim, Prove::Pass).await;
    let path = "/api/v1/namespaces/ns-0/pods?resourceVersion=0";

    // Page by page: resourceVersion, continue and remainingItemCount carried.
    let mut cont = String::new();
    let mut printed = Vec::new();
    loop {
        let url = format!("{}{path}&limit=4{cont}", r8s.url());
        let r = table(&url, TABLE_V1).await;
        assert_eq!(r.status, 200, "{}", r.text());
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        let t = r.json();
        assert_eq!(t["kind"], "Table");
        assert_eq!(t["apiVersion"], "meta.k8s.io/v1");
        assert_eq!(
            names(&t),
            [
                "Name",
                "Ready",
                "Status",
                "Restarts",
                "Age",
                "IP",
                "Node",
                "Nominated Node",
                "Readiness Gates"
            ]
        );
        for row in t["rows"].as_array().unwrap() {
            assert_eq!(row["object"]["kind"], "PartialObjectMetadata");
            assert_eq!(row["object"]["apiVersion"], "meta.k8s.io/v1");
        }
        printed.extend(rows(&t));
        match t["metadata"]["continue"].as_str() {
            Some(c) => {
                assert!(t["metadata"]["remainingItemCount"].as_u64().unwrap() > 0);
                cont = format!("&continue={c}");
            }
            None => break,
        }
    }
    // The sim prints the same pods with its own printer.
    let direct = table(&format!("{}{path}", sim.url()), TABLE_V1)
        .await
        .json();
    assert_eq!(printed, rows(&direct));
    assert!(printed.len() > 8, "{printed:?}");

    // One pod; v1beta1, whose rows carry v1beta1 metadata.
    let one = format!(
        "{}/api/v1/namespaces/ns-0/pods/pod-00000?resourceVersion=0",
        r8s.url()
    );
    let r = table(&one, TABLE_V1BETA1).await;
    assert_eq!(r.headers["x-r8s-cache"], "hit");
    let t = r.json();
    assert_eq!(t["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(t["rows"][0]["cells"][0], "pod-00000");
    assert_eq!(t["rows"][0]["object"]["apiVersion"], "meta.k8s.io/v1beta1");
    assert_eq!(
        t["metadata"]["resourceVersion"],
        t["rows"][0]["object"]["metadata"]["resourceVersion"]
    );

    // includeObject: None (null) and Object (the pod).
    let none = table(&format!("{one}&includeObject=None"), TABLE_V1)
        .await
        .json();
    assert_eq!(none["rows"][0]["object"], Value::Null);
    let whole = table(&format!("{one}&includeObject=Object"), TABLE_V1).await;
    assert_eq!(whole.headers["x-r8s-cache"], "hit");
    let pod = get(&one).await.json();
    assert_eq!(whole.json()["rows"][0]["object"], pod);
    // A value the apiserver refuses is its to refuse.
    let bad = table(&format!("{one}&includeObject=All"), TABLE_V1).await;
    assert_eq!(bad.headers["x-r8s-cache"], "pass");

    r8s.stop().await;
    sim.stop().await;
}

/// What r8s cannot print is the upstream's: a kind without a printer here
/// (a custom resource whose definition it does not cache), listed or
/// watched.
#[tokio::test(flavor = "multi_thread")]
async fn should_pass_what_it_cannot_print() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_for(&sim, Prove::Pass).await;
    let r = table(
        &format!(
            "{}/apis/example.r8s.dev/v1/widgets?resourceVersion=0",
            r8s.url()
        ),
        TABLE_V1,
    )
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(r.headers["x-r8s-cache"], "pass");
    assert_eq!(r.json()["kind"], "Table");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert_eq!(
        sample(
            &m,
            r#"r8s_cache_requests_total{resource="example.r8s.dev/v1/widgets",verb="list",result="no_printer"}"#
        ),
        1.0
    );
    let w = send(
        "GET",
        &format!(
            "{}/apis/example.r8s.dev/v1/widgets?watch=1&resourceVersion=0&timeoutSeconds=1",
            r8s.url()
        ),
        &[("Accept", TABLE_V1)],
        None,
    )
    .await;
    assert_eq!(w.headers["x-r8s-cache"], "pass");
    r8s.stop().await;
    sim.stop().await;
}

/// kubectl's own requests (consistent, paged, as Tables) through r8s that
/// proves consistent lists: every list a hit, the output kubectl prints
/// straight from the sim.
#[tokio::test(flavor = "multi_thread")]
async fn should_answer_kubectl_get_from_the_cache() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_for(&sim, Prove::Prove).await;
    let hits = || async {
        let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        metric(
            &m,
            r#"r8s_cache_requests_total{resource="v1/pods",verb="list",result="hit"}"#,
        )
        .unwrap_or(0.0)
    };
    let before = hits().await;
    for args in [
        &["get", "pods", "-A"][..],
        &["get", "pods", "-n", "ns-1", "-o", "wide"],
        &["get", "pods", "-n", "ns-2", "--show-labels"],
        &["get", "pods", "-A", "-o", "name"],
        &["get", "pods", "-A", "--chunk-size", "7"],
    ] {
        let via = kubectl(&r8s.url(), args, None, T).await;
        let direct = kubectl(&sim.url(), args, None, T).await;
        assert!(
            via.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&via.stderr)
        );
        assert_eq!(
            String::from_utf8_lossy(&via.stdout),
            String::from_utf8_lossy(&direct.stdout),
            "{args:?}"
        );
    }
    // -A's 40 pods in pages of 7 are 6 lists; each other command one.
    assert_eq!(hits().await - before, 10.0);
    r8s.stop().await;
    sim.stop().await;
}

/// A watch stream's events (its body, whole: the watch ends at its
/// `timeoutSeconds`), with each row's cell at `age` left out, and the
/// answer's cache header (none from the sim).
pub(crate) async fn table_events(url: &str, age: usize) -> (Vec<Value>, String) {
    let r = table(url, TABLE_V1).await;
    assert_eq!(r.status, 200, "{url}: {}", r.text());
    assert_eq!(
        r.headers.get("content-type").map(|v| v.to_str().unwrap()),
        Some("application/json"),
        "{url}: {:?}",
        r.headers
    );
    let events = r
        .text()
        .lines()
        .map(|l| {
            let mut e: Value = serde_json::from_str(l).unwrap();
            for row in e["object"]["rows"].as_array_mut().unwrap() {
                row["cells"].as_array_mut().unwrap().remove(age);
            }
            e
        })
        .collect();
    let cache = r.headers.get("x-r8s-cache").map(|v| v.to_str().unwrap());
    (events, cache.unwrap_or_default().to_string())
}

/// A Table watch of `path` through r8s (a hit) and straight to the sim,
/// side by side (each waits out its `timeoutSeconds`), ages left out.
async fn both_watches(r8s: &R8s, sim: &r8s_sim::SimHandle, path: &str) -> (Vec<Value>, Vec<Value>) {
    let (through, straight) = (
        format!("{}{path}", r8s.url()),
        format!("{}{path}", sim.url()),
    );
    let ((via, cache), (direct, _)) =
        tokio::join!(table_events(&through, 4), table_events(&straight, 4));
    assert_eq!(cache, "hit", "{path}");
    (via, direct)
}

/// `kubectl get -w`'s watches as Tables, from the cache: every event a
/// Table of one row, the column definitions with the first only, a
/// bookmark the printer's row of the empty object, streaming lists and
/// each `includeObject` as the sim writes them; and kubectl's own watch a
/// hit, printing each change.
#[tokio::test(flavor = "multi_thread")]
async fn should_watch_tables_from_the_cache() {
    let sim = start_sim(sim_config()).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    // kubectl's watch (no timeoutSeconds) ends after 1-2 s, and kubectl with it.
    config.watch.min_timeout_seconds = 1;
    let r8s = start_r8s_config(config).await;
    let rv_of_list = |url: String| async move {
        get(&url).await.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let pods = "/api/v1/namespaces/ns-0/pods";
    let from = rv_of_list(format!("{}{pods}", sim.url())).await;
    let names: Vec<String> = get(&format!("{}{pods}", sim.url())).await.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    sim.touch("ns-0", &names[0], 1);
    sim.touch("ns-0", &names[1], 1);
    sim.touch("ns-0", &names[0], 2);
    let to = rv_of_list(format!("{}{pods}", sim.url())).await;
    eventually("r8s has the changes", HANG, || {
        let url = format!("{}{pods}?resourceVersion=0", r8s.url());
        async move { (rv_of_list(url).await >= to).then_some(()) }
    })
    .await;

    for include in ["", "&includeObject=None", "&includeObject=Object"] {
        let q = format!("?watch=1&resourceVersion={from}&timeoutSeconds=1{include}");
        let (via, direct) = both_watches(&r8s, &sim, &format!("{pods}{q}")).await;
        assert_eq!(via.len(), 3, "{q}");
        for (a, b) in via.iter().zip(&direct) {
            assert_eq!(a, b, "{q}");
        }
        assert_eq!(via.len(), direct.len(), "{q}");
        assert!(via[0]["object"]["columnDefinitions"].is_array());
        assert!(
            via[1..]
                .iter()
                .all(|e| e["object"]["columnDefinitions"].is_null())
        );
        assert_eq!(
            via[2]["object"]["metadata"]["resourceVersion"],
            to.to_string()
        );
    }
    // A streaming list: ADDED for each pod, then the bookmark ending them
    // (with its metadata whatever `includeObject` says); a later bookmark
    // (when r8s sends one) is the printer's row of the empty object.
    for include in ["", "&includeObject=None", "&includeObject=Object"] {
        let q = format!(
            "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion={to}&allowWatchBookmarks=true&timeoutSeconds=1{include}"
        );
        let initial = |events: Vec<Value>| {
            let end = events
                .iter()
                .position(|e| e["type"] == "BOOKMARK")
                .expect("the end of the initial events");
            events[..=end].to_vec()
        };
        let (via, direct) = both_watches(&r8s, &sim, &format!("{pods}{q}")).await;
        let (via_initial, direct_initial) = (initial(via.clone()), initial(direct));
        assert_eq!(via_initial.len(), names.len() + 1, "{q}");
        for (a, b) in via_initial.iter().zip(&direct_initial) {
            assert_eq!(a, b, "{q}");
        }
        assert_eq!(via_initial.len(), direct_initial.len(), "{q}");
        let end = &via_initial[names.len()]["object"];
        assert_eq!(
            end["rows"][0]["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"],
            "true",
            "{q}"
        );
        for later in &via[names.len() + 1..] {
            assert_eq!(later["type"], "BOOKMARK", "{q}");
            assert_eq!(later["object"]["rows"][0]["cells"][0], "", "{q}");
        }
    }

    // kubectl get -w: the list, then the change made while it watches.
    let watchers = || async {
        let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        metric(&m, r#"r8s_watchers{resource="v1/pods"}"#).unwrap_or(0.0)
    };
    let args = ["get", "pods", "-n", "ns-0", "-w"];
    let url = r8s.url();
    let watching = tokio::spawn(async move { kubectl(&url, &args, None, T).await });
    eventually("kubectl watches through r8s", HANG, || async {
        (watchers().await >= 1.0).then_some(())
    })
    .await;
    sim.touch("ns-0", &names[1], 2);
    let via = watching.await.unwrap();
    let listed = kubectl(&sim.url(), &["get", "pods", "-n", "ns-0"], None, T).await;
    let listed = String::from_utf8_lossy(&listed.stdout).to_string();
    let changed = listed
        .lines()
        .find(|l| l.starts_with(&format!("{} ", names[1])))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&via.stdout),
        format!("{listed}{changed}\n"),
        "{}",
        String::from_utf8_lossy(&via.stderr)
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        metric(
            &m,
            r#"r8s_cache_requests_total{resource="v1/pods",verb="watch",result="hit"}"#
        )
        .unwrap_or(0.0)
            >= 7.0
    );
    r8s.stop().await;
    sim.stop().await;
}
