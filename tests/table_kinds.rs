//! Every kind r8s prints but pods (`table.rs` has those): r8s's printers
//! and the sim's (written apart) print the same Tables, lists and watches,
//! and kubectl (`get`, `-o wide`, `--show-labels`, `-o name`, `-w`) prints
//! the same through r8s, every request a hit, as straight from the sim.

use serde_json::Value;

use crate::common::*;
use crate::table::{T, TABLE_V1, rows, table, table_events};
use r8s::config::{Config, Prove};

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
const KINDS: [(&str, &str, &str); 29] = [
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
    ("widgets", "example.r8s.dev/v1/widgets", ALL),
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
pub(crate) fn but_age(out: &[u8]) -> Vec<Vec<String>> {
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
        "example.r8s.dev/v1/widgets",
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
        ("/apis/example.r8s.dev/v1/widgets", 1),
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
    // Its list and its watch hits, counted.
    let watches = |resource: &'static str| {
        let admin = r8s.admin_url();
        async move {
            let m = get(&format!("{admin}/metrics")).await.text();
            let hits = |verb: &str| {
                let series = format!(
                    r#"r8s_cache_requests_total{{resource="{resource}",verb="{verb}",result="hit"}}"#
                );
                metric(&m, &series).unwrap_or(0.0)
            };
            (hits("list"), hits("watch"))
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
        let after = watches(resource).await;
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (1.0, 1.0),
            "get {kind} -w: its list and its watch, hits"
        );
    }
    r8s.stop().await;
    sim.stop().await;
}
