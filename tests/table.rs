//! Tables from the cache (`kubectl get`): pods printed by r8s from its JSON
//! cache, compared with the sim's own printer (a separate implementation)
//! and with kubectl's output straight from the sim, lists and watches;
//! kinds r8s has no printer for pass through.

use std::time::Duration;

use serde_json::Value;

use crate::common::*;
use r8s::config::{Config, Prove};

const TABLE_V1: &str = "application/json;as=Table;v=v1;g=meta.k8s.io";
const TABLE_V1BETA1: &str = "application/json;as=Table;v=v1beta1;g=meta.k8s.io";
const T: Duration = Duration::from_secs(60);

async fn table(url: &str, accept: &str) -> Resp {
    send("GET", url, &[("Accept", accept)], None).await
}

/// The cells of each row.
fn rows(t: &Value) -> Vec<Vec<Value>> {
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

/// Rows with their Age cell (at `age`) left out: the sim seeds these
/// objects as it starts, so their ages are seconds, and two answers a
/// second apart differ there.
fn rows_but_age(t: &Value, age: usize) -> Vec<Vec<Value>> {
    rows(t)
        .into_iter()
        .map(|mut r| {
            r.remove(age);
            r
        })
        .collect()
}

/// Every kind r8s prints but pods (whose own tests are above), as kubectl
/// is asked for them (by their short names where they have one), their
/// resources, and whether they are listed in every namespace.
const KINDS: [(&str, &str, &str); 28] = [
    ("nodes", "v1/nodes", CLUSTER),
    ("namespaces", "v1/namespaces", CLUSTER),
    ("cm", "v1/configmaps", ALL),
    ("secrets", "v1/secrets", ALL),
    ("svc", "v1/services", ALL),
    ("ep", "v1/endpoints", ALL),
    ("events", "v1/events", ALL),
    ("deploy", "apps/v1/deployments", ALL),
    (
        "crd",
        "apiextensions.k8s.io/v1/customresourcedefinitions",
        CLUSTER,
    ),
    ("rs", "apps/v1/replicasets", ALL),
    ("sts", "apps/v1/statefulsets", ALL),
    ("ds", "apps/v1/daemonsets", ALL),
    ("jobs", "batch/v1/jobs", ALL),
    ("cj", "batch/v1/cronjobs", ALL),
    ("netpol", "networking.k8s.io/v1/networkpolicies", ALL),
    ("roles", "rbac.authorization.k8s.io/v1/roles", ALL),
    (
        "clusterroles",
        "rbac.authorization.k8s.io/v1/clusterroles",
        CLUSTER,
    ),
    (
        "rolebindings",
        "rbac.authorization.k8s.io/v1/rolebindings",
        ALL,
    ),
    (
        "clusterrolebindings",
        "rbac.authorization.k8s.io/v1/clusterrolebindings",
        CLUSTER,
    ),
    ("leases", "coordination.k8s.io/v1/leases", ALL),
    ("sc", "storage.k8s.io/v1/storageclasses", CLUSTER),
    ("pv", "v1/persistentvolumes", CLUSTER),
    ("pvc", "v1/persistentvolumeclaims", ALL),
    ("pdb", "policy/v1/poddisruptionbudgets", ALL),
    ("ing", "networking.k8s.io/v1/ingresses", ALL),
    ("endpointslices", "discovery.k8s.io/v1/endpointslices", ALL),
    ("hpa", "autoscaling/v2/horizontalpodautoscalers", ALL),
    ("sa", "v1/serviceaccounts", ALL),
];

/// kubectl's flag for every namespace.
const ALL: &str = "-A";
/// Its flag for a cluster-scoped kind (whose `get -A -w` kubectl prints
/// with an empty NAMESPACE column): none that changes what it asks.
const CLUSTER: &str = "--all-namespaces=false";

/// kubectl's output as cells, with the AGE column left out where there is
/// one. Cells are cut where the header's columns start (kubectl pads every
/// column to its widest cell), so a header or cell with a space in it
/// (`ACCESS MODES`, `0 2 * * *`) stays one cell and an empty one stays.
fn but_age(out: &[u8]) -> Vec<Vec<String>> {
    let text = String::from_utf8_lossy(out);
    let mut lines = text.lines();
    let head = lines.next().unwrap_or_default();
    let b = head.as_bytes();
    let starts: Vec<usize> = (0..b.len())
        .filter(|&i| b[i] != b' ' && (i == 0 || (i >= 2 && b[i - 1] == b' ' && b[i - 2] == b' ')))
        .collect();
    let cells = |line: &str| -> Vec<String> {
        starts
            .iter()
            .enumerate()
            .map(|(n, &a)| {
                let z = starts
                    .get(n + 1)
                    .copied()
                    .unwrap_or(line.len())
                    .min(line.len());
                line.get(a.min(z)..z).unwrap_or_default().trim().to_string()
            })
            .collect()
    };
    let head_cells = cells(head);
    // Events have none: their times are the sim's, hours ago.
    let age = head_cells.iter().position(|h| h == "AGE");
    std::iter::once(head)
        .chain(lines)
        .map(|l| {
            let mut c = cells(l);
            if let Some(age) = age {
                c.remove(age);
            }
            c
        })
        .collect()
}

/// Nodes, namespaces, config maps, secrets, services, endpoints, events, the
/// workload kinds, definitions, RBAC, leases, storage classes and network
/// policies: r8s's printers and the sim's print the same Tables (lists
/// and watches), and kubectl the same output through r8s (every list and
/// watch a hit) as straight from the sim.
#[tokio::test(flavor = "multi_thread")]
async fn should_print_the_core_and_workload_kinds() {
    let sim = start_sim(sim_config()).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = [
        "nodes",
        "namespaces",
        "configmaps",
        "secrets",
        "services",
        "endpoints",
        "events",
        "deployments",
        "replicasets",
        "statefulsets",
        "daemonsets",
        "jobs",
        "cronjobs",
        "customresourcedefinitions",
        "networkpolicies",
        "roles",
        "clusterroles",
        "rolebindings",
        "clusterrolebindings",
        "leases",
        "storageclasses",
        "persistentvolumes",
        "persistentvolumeclaims",
        "poddisruptionbudgets",
        "ingresses",
        "endpointslices",
        "horizontalpodautoscalers",
        "serviceaccounts",
    ]
    .map(String::from)
    .to_vec();
    config.cache.exclude = vec![];
    config.read.consistent_lists = Prove::Prove;
    // kubectl's watch (no timeoutSeconds) ends after 1-2 s, and kubectl with it.
    config.watch.min_timeout_seconds = 1;
    let r8s = start_r8s_config(config).await;
    let paths = [
        ("/api/v1/nodes", 3),
        ("/api/v1/namespaces", 2),
        ("/api/v1/configmaps", 2),
        ("/api/v1/secrets", 3),
        ("/api/v1/services", 5),
        ("/api/v1/endpoints", 2),
        ("/api/v1/events", 0),
        ("/apis/apps/v1/deployments", 4),
        ("/apis/apps/v1/replicasets", 4),
        ("/apis/apps/v1/statefulsets", 2),
        ("/apis/apps/v1/daemonsets", 7),
        ("/apis/batch/v1/jobs", 4),
        ("/apis/batch/v1/cronjobs", 6),
        // `Created At`, a date the apiserver's default convertor writes.
        ("/apis/apiextensions.k8s.io/v1/customresourcedefinitions", 1),
        ("/apis/networking.k8s.io/v1/networkpolicies", 2),
        ("/apis/rbac.authorization.k8s.io/v1/roles", 1),
        ("/apis/rbac.authorization.k8s.io/v1/clusterroles", 1),
        ("/apis/rbac.authorization.k8s.io/v1/rolebindings", 2),
        ("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings", 2),
        ("/apis/coordination.k8s.io/v1/leases", 2),
        ("/apis/storage.k8s.io/v1/storageclasses", 5),
        ("/api/v1/persistentvolumes", 9),
        ("/api/v1/persistentvolumeclaims", 7),
        ("/apis/policy/v1/poddisruptionbudgets", 4),
        ("/apis/networking.k8s.io/v1/ingresses", 5),
        ("/apis/discovery.k8s.io/v1/endpointslices", 4),
        ("/apis/autoscaling/v2/horizontalpodautoscalers", 6),
        ("/api/v1/serviceaccounts", 2),
    ];
    for (path, age) in paths {
        let via = table(&format!("{}{path}?resourceVersion=0", r8s.url()), TABLE_V1).await;
        assert_eq!(via.headers["x-r8s-cache"], "hit", "{path}");
        let via = via.json();
        let direct = table(&format!("{}{path}?resourceVersion=0", sim.url()), TABLE_V1)
            .await
            .json();
        assert_eq!(
            via["columnDefinitions"], direct["columnDefinitions"],
            "{path}"
        );
        assert_eq!(
            rows_but_age(&via, age),
            rows_but_age(&direct, age),
            "{path}"
        );
        assert!(!rows(&via).is_empty(), "{path}");
    }
    // What `kubectl get -w` streams, each kind at once (each waits out its
    // timeout): the same Table events, the column definitions with the first
    // only, the initial events' end a row of the printer's empty object.
    let q = "?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1";
    let initial = |events: Vec<Value>| {
        let end = events.iter().position(|e| e["type"] == "BOOKMARK");
        events[..=end.expect("the end of the initial events")].to_vec()
    };
    let streams = futures_util::future::join_all(paths.map(|(path, age)| {
        let (through, straight) = (
            format!("{}{path}{q}", r8s.url()),
            format!("{}{path}{q}", sim.url()),
        );
        async move {
            let (via, direct) =
                tokio::join!(table_events(&through, age), table_events(&straight, age));
            (path, via, direct.0)
        }
    }))
    .await;
    for (path, (via, cache), direct) in streams {
        assert_eq!(cache, "hit", "{path}");
        assert_eq!(initial(via), initial(direct), "{path}");
    }
    let hits = |resource: &'static str| {
        let admin = r8s.admin_url();
        async move {
            let m = get(&format!("{admin}/metrics")).await.text();
            metric(
                &m,
                &format!(
                    r#"r8s_cache_requests_total{{resource="{resource}",verb="list",result="hit"}}"#
                ),
            )
            .unwrap_or(0.0)
        }
    };
    let asks: Vec<(Vec<&str>, &str)> = KINDS
        .iter()
        .flat_map(|&(kind, resource, all)| {
            [
                vec!["get", kind, all],
                vec!["get", kind, all, "-o", "wide"],
                vec!["get", kind, all, "--show-labels"],
                vec!["get", kind, all, "-o", "name"],
            ]
            .map(|args| (args, resource))
        })
        .collect();
    // One resource's asks one after another (each must be one hit more),
    // the resources side by side.
    let resources: std::collections::BTreeSet<&str> = asks.iter().map(|a| a.1).collect();
    let (r8s_url, sim_url) = (r8s.url(), sim.url());
    futures_util::future::join_all(resources.into_iter().map(|resource| {
        let (asks, hits) = (&asks, &hits);
        let (r8s_url, sim_url) = (&r8s_url, &sim_url);
        async move {
            for (args, _) in asks.iter().filter(|a| a.1 == resource) {
                let before = hits(resource).await;
                let via = kubectl(r8s_url, args, None, T).await;
                assert_eq!(hits(resource).await - before, 1.0, "{args:?}");
                let direct = kubectl(sim_url, args, None, T).await;
                assert!(
                    via.status.success(),
                    "{args:?}: {}",
                    String::from_utf8_lossy(&via.stderr)
                );
                assert_eq!(but_age(&via.stdout), but_age(&direct.stdout), "{args:?}");
            }
        }
    }))
    .await;
    // kubectl get -w of each kind through r8s, all at once: the list, then
    // the watch (a hit) until r8s ends it (`watch.min_timeout_seconds`).
    let watches = |resource: &'static str| {
        let admin = r8s.admin_url();
        async move {
            let m = get(&format!("{admin}/metrics")).await.text();
            let series = format!(
                r#"r8s_cache_requests_total{{resource="{resource}",verb="watch",result="hit"}}"#
            );
            metric(&m, &series).unwrap_or(0.0)
        }
    };
    let mut before = Vec::new();
    for (_, resource, _) in KINDS {
        before.push(watches(resource).await);
    }
    let url = r8s.url();
    let outs = futures_util::future::join_all(KINDS.map(|(kind, _, all)| {
        let url = url.clone();
        async move { kubectl(&url, &["get", kind, all, "-w"], None, T).await }
    }))
    .await;
    for (((kind, resource, all), out), before) in KINDS.iter().zip(outs).zip(before) {
        assert!(
            out.status.success(),
            "{kind}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let listed = kubectl(&sim.url(), &["get", kind, all], None, T).await;
        assert_eq!(
            but_age(&out.stdout),
            but_age(&listed.stdout),
            "get {kind} -w"
        );
        assert_eq!(watches(resource).await - before, 1.0, "get {kind} -w");
    }
    r8s.stop().await;
    sim.stop().await;
}

/// A watch stream's events (its body, whole: the watch ends at its
/// `timeoutSeconds`), with each row's cell at `age` left out, and the
/// answer's cache header (none from the sim).
async fn table_events(url: &str, age: usize) -> (Vec<Value>, String) {
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
    touch(&sim, "ns-0", &names[0], 1);
    touch(&sim, "ns-0", &names[1], 1);
    touch(&sim, "ns-0", &names[0], 2);
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
    touch(&sim, "ns-0", &names[1], 2);
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
