//! Issue 76's acceptance scenario on kube-apiserver v1.21 itself (its own
//! priority and fairness configuration, real RBAC and the Node authorizer
//! deciding for r8s): one user opens 40 slow LISTs of every pod through
//! r8s, and meanwhile a node's, the controller-manager's and a
//! `system:masters` user's full LISTs all succeed, with no 429; the slow
//! user's lists past her level's share are the ones refused. Before issue
//! 76 her lists took every list slot and the others got 429.

use serde_json::json;

use crate::common::kube121::Kube121;
use crate::common::kube136::delegated_r8s;
use crate::common::*;
use crate::overload::{answer_head, stalled_get_as, stalled_list_as};

const ADMIN: &str = "load-admin-token";

const TOKENS: &str = "load-admin-token,admin,uid-admin,\"system:masters\"\n\
alice-token,alice,uid-alice\n\
kcm-token,system:kube-controller-manager,uid-kcm\n\
node-token,system:node:node-01,uid-node,\"system:nodes\"\n";

/// Pods enough for a list of every pod to be large (1 MiB or more), and
/// more than the sockets between a client and r8s buffer (12 MB), so a
/// client that reads none holds its list's seat.
const PODS: usize = 400;

/// `GET path` of r8s (plain HTTP on loopback) with a bearer token.
async fn get_as(r8s: &R8s, path: &str, token: &str) -> Resp {
    let auth = format!("Bearer {token}");
    let url = format!("{}{path}", r8s.url());
    send("GET", &url, &[("authorization", auth.as_str())], None).await
}

/// Alice may list pods (a role of the test's own: without the
/// controller-manager the aggregated ones are empty).
async fn grant_alice(kit: &Kube121) {
    kit.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterroles",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
            "metadata": {"name": "pod-reader"},
            "rules": [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}]}),
    )
    .await;
    kit.create(
        "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
        &json!({"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
            "metadata": {"name": "alice-reads-pods"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "pod-reader"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "alice"}]}),
    )
    .await;
}

/// [`PODS`] pods of about 30 KB each, some bound to node-01.
async fn make_pods(kit: &Kube121) {
    let note = "x".repeat(30_000);
    let pods: Vec<_> = (0..PODS)
        .map(|i| {
            json!({"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": format!("p-{i:04}"), "namespace": "default",
                    "annotations": {"note": note}},
                "spec": {"nodeName": if i % 10 == 0 { "node-01" } else { "node-02" },
                    "containers": [{"name": "c", "image": "registry.example.com/app:1"}]}})
        })
        .collect();
    for chunk in pods.chunks(20) {
        let made = chunk
            .iter()
            .map(|p| kit.create("/api/v1/namespaces/default/pods", p));
        futures_util::future::join_all(made).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_nodes_controllers_and_admins_while_one_user_holds_40_slow_lists() {
    let Some(kit) = Kube121::start("fairness_kit_load", TOKENS) else {
        return;
    };
    grant_alice(&kit).await;
    make_pods(&kit).await;
    // r8s delegated to the kit, plain HTTP on loopback (for the stalled
    // clients), 8 list slots: global-default's share ceil(8 × 20 / 205) = 1.
    let r8s = delegated_r8s(
        kit.token_kubeconfig(ADMIN),
        &["pods"],
        None,
        kit.serving_tls(),
    )
    .with(|c| {
        c.upstream.version = "1.21".into();
        c.tls = Default::default();
        c.read.max_inflight_lists = 8;
        c.cache.encodings = vec!["json".into()];
    })
    .start()
    .await;
    let all = "/api/v1/pods?resourceVersion=0";
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let global = |m: &str, series: &str| {
        sample(m, &format!("{series}{{priority_level=\"global-default\"}}"))
    };
    let queued = "r8s_flowcontrol_current_inqueue_requests{priority_level=\"global-default\",flow_schema=\"global-default\"}";
    // r8s classifies by the kit's own configuration once it has read it:
    // alice's answers name the kit's global-default by UID.
    eventually("r8s following the kit's configuration", HANG, || async {
        let r = get_as(
            &r8s,
            "/api/v1/namespaces/default/pods?resourceVersion=0&limit=1",
            "alice-token",
        )
        .await;
        (r.status == 200 && r.headers.contains_key("x-kubernetes-pf-flowschema-uid")).then_some(())
    })
    .await;
    let held = stalled_list_as(r8s.addr, all, Some("alice-token")).await;
    let mut slow = Vec::new();
    for _ in 1..40 {
        slow.push(stalled_get_as(r8s.addr, all, Some("alice-token")).await);
    }
    eventually("alice's lists queued", HANG, || async {
        let m = metrics().await;
        (sample(&m, queued) == 39.0).then_some(())
    })
    .await;
    // Meanwhile: the controller-manager's and an admin's full lists, and the
    // node's list of its pods (as its kubelet asks), all from the cache.
    for token in ["kcm-token", ADMIN] {
        let r = get_as(&r8s, all, token).await;
        assert_eq!(r.status, 200, "{token}: {}", r.text());
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{token}");
        assert_eq!(r.json()["items"].as_array().unwrap().len(), PODS);
    }
    let node = get_as(
        &r8s,
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-01",
        "node-token",
    )
    .await;
    assert_eq!(node.status, 200, "{}", node.text());
    assert_eq!(node.headers["x-r8s-cache"], "hit");
    assert_eq!(node.json()["items"].as_array().unwrap().len(), PODS / 10);
    // Hers past her share: the apiserver's 429 once their wait is over.
    let mut refused = 0;
    for c in &slow {
        refused += usize::from(&answer_head(c).await == b"HTTP/1.1 429");
    }
    assert_eq!(refused, 39, "every one of hers past her level's one seat");
    let m = metrics().await;
    assert_eq!(global(&m, "r8s_flowcontrol_current_executing_seats"), 1.0);
    drop((held, slow));
    r8s.stop().await;
}
