//! Real kubelets through node-local r8s (issue 75, item 5): hollow nodes
//! (kubemark: the v1.21 kubelet's own code on a fake runtime) against the
//! v1.21 kit (the Node authorizer, NodeRestriction), each kubelet through
//! its own r8s, which holds its node's credentials and caches its node's
//! pods and Node only. Nodes register and are Ready, leases are renewed,
//! pod statuses are written, every list and watch of a kubelet is a hit at
//! its node's r8s (its pods, its Node, the configmaps and secrets its pods
//! mount), and each r8s holds its own node's pods and their objects only. With the
//! apiserver stopped, a kubelet restarted during the outage gets its pods
//! from its r8s; with the apiserver back, writes flow again.

use std::collections::BTreeMap;

use serde_json::{Value, json};

use crate::common::forge::{CN, Forge, O, Use, utf8};
use crate::common::kube121::Kube121;
use crate::common::kube136::{Sent, delegated_r8s};
use crate::common::*;

const ADMIN: &str = "node-kubelets-admin-token";
/// Node numbers (kubemark's kubelet ports are 20000 + N: apart from other tests').
const FIRST: usize = 60;
const NODES: usize = 3;

fn node(k: usize) -> String {
    format!("node-{k:02}")
}

/// A node-local r8s for `name`: the node's own credentials (the kubelet's
/// certificate, as hollow.sh would make it), a serving certificate it makes
/// itself for loopback (`tls.self_signed`, which the kubelet trusts as its
/// CA: [`serving_ca`]), the kit's CA for clients.
async fn node_local_r8s(kit: &Kube121, forge: &Forge, name: &str) -> R8s {
    let id = forge.issue(
        name,
        &[
            vec![utf8(O, "system:nodes")],
            vec![utf8(CN, &format!("system:node:{name}"))],
        ],
        Use::Client,
    );
    let (ca, _) = kit.ca();
    let kubeconfig = kit.dir().join(format!("{name}-r8s.kubeconfig"));
    kit.cert_kubeconfig(&kubeconfig, &id.cert, &id.key);
    let resources = [
        "pods",
        "nodes",
        "services",
        "storage.k8s.io/v1/csidrivers",
        "node.k8s.io/v1/runtimeclasses",
    ];
    let policy = kit.dir().join("r8s-audit-policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let log = kit.dir().join(format!("{name}-r8s-audit.log"));
    let serving = serving_ca(kit, name);
    let tls = (serving.clone(), serving.with_extension("key"), ca);
    let name = name.to_string();
    delegated_r8s(kubeconfig, &resources, None, tls)
        .with(move |c| {
            c.tls.self_signed = true;
            c.audit.policy_file = Some(policy);
            c.audit.log_path = Some(log);
            c.node.name = name;
            c.auth.impersonate_certificate_clients = false;
            c.upstream.version = "1.21".into();
        })
        .start()
        .await
}

/// The lists and watches node `name`'s r8s answered (its audit log's
/// events): (resource, verb, user, `r8s.io/cache`), how many.
fn answered(kit: &Kube121, name: &str) -> BTreeMap<(String, String, String, String), usize> {
    let text = std::fs::read_to_string(kit.dir().join(format!("{name}-r8s-audit.log")))
        .unwrap_or_default();
    let mut seen = BTreeMap::new();
    for e in text
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
    {
        let verb = e["verb"].as_str().unwrap_or_default();
        // A list once complete; a watch once started (it lasts).
        let counted = matches!(
            (verb, e["stage"].as_str()),
            ("list", Some("ResponseComplete")) | ("watch", Some("ResponseStarted"))
        );
        if !counted {
            continue;
        }
        let key = (
            e["objectRef"]["resource"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            verb.to_string(),
            e["user"]["username"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
            e["annotations"]["r8s.io/cache"]
                .as_str()
                .unwrap_or_default()
                .to_string(),
        );
        *seen.entry(key).or_default() += 1;
    }
    seen
}

/// `r8s_requests_total` of list and watch requests, by (resource, verb, cache).
fn lists_and_watches(metrics: &str) -> BTreeMap<(String, String, String), f64> {
    let label = |l: &str, k: &str| {
        l.split(&format!("{k}=\""))
            .nth(1)
            .and_then(|r| r.split('"').next())
            .unwrap_or_default()
            .to_string()
    };
    metrics
        .lines()
        .filter(|l| l.starts_with("r8s_requests_total{"))
        .filter(|l| matches!(label(l, "verb").as_str(), "list" | "watch"))
        .map(|l| {
            let n: f64 = l.rsplit(' ').next().unwrap().parse().unwrap();
            (
                (label(l, "resource"), label(l, "verb"), label(l, "cache")),
                n,
            )
        })
        .fold(BTreeMap::new(), |mut m, (k, n)| {
            *m.entry(k).or_default() += n;
            m
        })
}

/// The serving certificate node `name`'s r8s makes for itself: the CA its
/// kubelet trusts.
fn serving_ca(kit: &Kube121, name: &str) -> std::path::PathBuf {
    kit.dir().join(format!("{name}-r8s-tls/tls.crt"))
}

/// The certificate of node `name` the forge wrote under `dir`.
fn forge_identity(dir: &std::path::Path, name: &str) -> crate::common::kube136::Identity {
    crate::common::kube136::Identity {
        cert: dir.join(format!("{name}.crt")),
        key: dir.join(format!("{name}.key")),
    }
}

/// A pod bound to `node` that fits a hollow node (1 CPU, 4 GiB).
/// It mounts its node's configmap `cm-NODE` and secret `s-NODE`.
fn pod(name: &str, node: &str) -> Value {
    json!({"apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": "registry.example/app:1",
            "resources": {"requests": {"cpu": "10m", "memory": "16Mi"}},
            "volumeMounts": [{"name": "cm", "mountPath": "/cm"}, {"name": "s", "mountPath": "/s"}]}],
            "volumes": [{"name": "cm", "configMap": {"name": format!("cm-{node}")}},
                        {"name": "s", "secret": {"secretName": format!("s-{node}")}}]}})
}

async fn admin_get(kit: &Kube121, path: &str) -> Value {
    let bearer = format!("Bearer {ADMIN}");
    let r = kit
        .send_tls(
            kit.port,
            None,
            "GET",
            path,
            &[("authorization", &bearer)],
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{path}: {}", r.text());
    r.json()
}

/// Waits until pod `name`'s status is its kubelet's: a start time and its
/// container's status (the fake runtime's images never run, so the
/// container waits, as a real kubelet reports it).
async fn reported(kit: &Kube121, name: &str) {
    let path = format!("/api/v1/namespaces/default/pods/{name}");
    eventually(
        &format!("{name}'s status from its kubelet"),
        HANG,
        || async {
            let status = &admin_get(kit, &path).await["status"];
            let written = status["startTime"].is_string()
                && status["containerStatuses"]
                    .as_array()
                    .is_some_and(|c| !c.is_empty());
            written.then_some(())
        },
    )
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_real_kubelets_from_their_nodes_r8s_through_an_outage() {
    let tokens = format!("{ADMIN},admin,admin,\"system:masters\"\n");
    let Some(kit) = Kube121::start("node_kubelets", &tokens) else {
        return;
    };
    let (ca_crt, ca_key) = kit.ca();
    let hollow = kit.dir().join("hollow");
    std::fs::create_dir_all(&hollow).unwrap();
    let forge = Forge::of_kit(&ca_crt, &ca_key, &hollow);
    let mut r8s = Vec::new();
    for k in FIRST..FIRST + NODES {
        let r = node_local_r8s(&kit, &forge, &node(k)).await;
        let server = format!("https://127.0.0.1:{}", r.addr.port());
        kit.hollow(k, 1, &server, &serving_ca(&kit, &node(k)));
        r8s.push(r);
    }

    // Registered and Ready, through their r8s.
    for k in FIRST..FIRST + NODES {
        let path = format!("/api/v1/nodes/{}", node(k));
        eventually(&format!("{} Ready", node(k)), HANG, || async {
            let n = admin_get(&kit, &path).await;
            let ready = n["status"]["conditions"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|c| c["type"] == "Ready" && c["status"] == "True");
            ready.then_some(())
        })
        .await;
    }
    // Leases renewed: a later renewTime than the first seen.
    let lease = format!(
        "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/{}",
        node(FIRST)
    );
    let first = admin_get(&kit, &lease).await["spec"]["renewTime"].clone();
    eventually("the lease renewed", HANG, || async {
        (admin_get(&kit, &lease).await["spec"]["renewTime"] != first).then_some(())
    })
    .await;

    // Two pods a node, mounting the node's configmap and secret, their
    // statuses written by their kubelets.
    for k in FIRST..FIRST + NODES {
        let n = node(k);
        let cm = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": format!("cm-{n}"), "namespace": "default"}, "data": {"a": "b"}});
        kit.create("/api/v1/namespaces/default/configmaps", &cm)
            .await;
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": format!("s-{n}"), "namespace": "default"}, "data": {"k": "dg=="}});
        kit.create("/api/v1/namespaces/default/secrets", &secret)
            .await;
        for i in 0..2 {
            kit.create(
                "/api/v1/namespaces/default/pods",
                &pod(&format!("p-{k}-{i}"), &node(k)),
            )
            .await;
        }
    }
    for k in FIRST..FIRST + NODES {
        for i in 0..2 {
            reported(&kit, &format!("p-{k}-{i}")).await;
        }
    }

    // Each r8s holds its node's pods and Node only (the same pods its
    // scoped list answers; the whole list passes), and answered every list
    // and watch of its kubelet from them. (The r8s share one process, so
    // one metrics registry: the counts are summed over the three, and each
    // one's own requests are read from its audit log.)
    let m = get(&format!("{}/metrics", r8s[0].admin_url())).await.text();
    let seen = lists_and_watches(&m);
    let passed: Vec<_> = seen.iter().filter(|((_, _, c), _)| c != "hit").collect();
    assert!(
        passed.is_empty(),
        "lists and watches not from the cache: {passed:?}"
    );
    for (i, r) in r8s.iter().enumerate() {
        let name = node(FIRST + i);
        // Its kubelet's lists and watches, every one from the cache.
        let user = format!("system:node:{name}");
        for (resource, verb) in [
            ("pods", "list"),
            ("pods", "watch"),
            ("nodes", "watch"),
            ("configmaps", "list"),
            ("configmaps", "watch"),
            ("secrets", "list"),
            ("secrets", "watch"),
        ] {
            let key = (resource.into(), verb.into(), user.clone(), "hit".into());
            eventually(&format!("{key:?} at {name}'s r8s"), HANG, || async {
                answered(&kit, &name).contains_key(&key).then_some(())
            })
            .await;
        }
        let by_kubelet = answered(&kit, &name);
        let missed: Vec<_> = by_kubelet
            .keys()
            .filter(|k| k.2 == user && k.3 != "hit")
            .collect();
        assert!(
            missed.is_empty(),
            "{name}'s kubelet: not from the cache: {missed:?}"
        );
        // Its node's pods, and only those.
        let mine = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{name}&resourceVersion=0");
        let id = forge_identity(&hollow, &name);
        let ca = serving_ca(&kit, &name);
        let as_node = Sent {
            ca: &ca,
            port: r.addr.port(),
            identity: Some(&id),
        };
        let list = as_node.send("GET", &mine, &[], None, HANG).await;
        assert_eq!(list.headers["x-r8s-cache"], "hit");
        let names: Vec<String> = list.json()["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(
            names,
            [format!("p-{}-0", FIRST + i), format!("p-{}-1", FIRST + i)]
        );
        let all = "/api/v1/pods?resourceVersion=0";
        let all = as_node.send("GET", all, &[], None, HANG).await;
        assert_eq!(
            all.headers["x-r8s-cache"], "pass",
            "another node's pods are not held"
        );
    }
    assert_eq!(
        sample(
            &m,
            "r8s_cache_objects{resource=\"v1/nodes\",encoding=\"json\"}"
        ),
        1.0,
        "nodes held"
    );

    // The apiserver stops; a kubelet restarts during the outage and lists
    // its pods: from its r8s.
    let restarted = &r8s[0];
    let kubelet_lists = || {
        answered(&kit, &node(FIRST))
            .get(&(
                "pods".into(),
                "list".into(),
                format!("system:node:{}", node(FIRST)),
                "hit".into(),
            ))
            .copied()
            .unwrap_or(0)
    };
    let apiserver = kit.stop_apiserver();
    let before = kubelet_lists();
    kit.stop_hollow(&node(FIRST));
    let server = format!("https://127.0.0.1:{}", restarted.addr.port());
    kit.hollow(FIRST, 1, &server, &serving_ca(&kit, &node(FIRST)));
    eventually(
        "the restarted kubelet's list of its pods, from its r8s",
        HANG,
        || async { (kubelet_lists() > before).then_some(()) },
    )
    .await;

    // The apiserver returns: writes flow again (a new pod on the restarted
    // node has its status written by the kubelet, through r8s).
    kit.start_apiserver(&apiserver);
    eventually("the apiserver back", HANG, || async {
        tokio::net::TcpStream::connect(("127.0.0.1", kit.port))
            .await
            .ok()?;
        let r = kit
            .send_tls(kit.port, None, "GET", "/readyz", &[], None)
            .await;
        (r.status == 200).then_some(())
    })
    .await;
    let after = format!("p-{FIRST}-after");
    kit.create(
        "/api/v1/namespaces/default/pods",
        &pod(&after, &node(FIRST)),
    )
    .await;
    reported(&kit, &after).await;
    for r in r8s {
        r.stop().await;
    }
}
