//! Priority and fairness classification (issue 76, item 1) against
//! kube-apiserver v1.21's own (the kit runs APF with 1.21's suggested
//! configuration and names, on every answer it classified, the FlowSchema
//! and priority level by UID): r8s's classifier, built from the kit's
//! FlowSchemas and priority levels as served, must name the same for every
//! caller and request, and again after a FlowSchema is added.
//!
//! Each request's RequestInfo is written out by hand here (verb, group,
//! resource, subresource, namespace, or path), so the classifier alone is
//! held to the apiserver: r8s's reading of requests has its own tests.

use r8s::fairness::classify::{Asked, Classifier, Who};
use r8s::fairness::schema::{FlowSchema, PriorityLevel};
use serde_json::Value;

use crate::common::kube121::Kube121;
use crate::common::kube136::delegated_r8s;
use crate::common::*;

const ADMIN: &str = "fairness-admin-token";

/// Callers: a static token each (`token,user,uid,"groups"`), and what the
/// apiserver adds (`system:authenticated`).
const CALLERS: &[(&str, &str, &str)] = &[
    (ADMIN, "admin", "system:masters"),
    ("t-alice", "alice", ""),
    ("t-node", "system:node:node-01", "system:nodes"),
    ("t-kcm", "system:kube-controller-manager", ""),
    ("t-sched", "system:kube-scheduler", ""),
    (
        "t-rs",
        "system:serviceaccount:kube-system:replicaset-controller",
        "system:serviceaccounts,system:serviceaccounts:kube-system",
    ),
    (
        "t-ep",
        "system:serviceaccount:kube-system:endpoint-controller",
        "system:serviceaccounts,system:serviceaccounts:kube-system",
    ),
    (
        "t-app",
        "system:serviceaccount:default:app",
        "system:serviceaccounts,system:serviceaccounts:default",
    ),
];

/// Requests: method, path, and the RequestInfo the apiserver reads in it.
fn requests() -> Vec<(&'static str, &'static str, Asked<'static>)> {
    let path = |verb, path| Asked::NonResource { verb, path };
    vec![
        (
            "GET",
            "/api/v1/pods",
            Asked::resource("list", "", "pods", "", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns-1/pods",
            Asked::resource("list", "", "pods", "", "ns-1"),
        ),
        (
            "GET",
            "/api/v1/namespaces/kube-system/configmaps/c",
            Asked::resource("get", "", "configmaps", "", "kube-system"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/kube-system/configmaps/c",
            Asked::resource("update", "", "configmaps", "", "kube-system"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            Asked::resource("get", "coordination.k8s.io", "leases", "", "kube-system"),
        ),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/l",
            Asked::resource("update", "coordination.k8s.io", "leases", "", "kube-system"),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/node-01",
            Asked::resource(
                "get",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
            ),
        ),
        (
            "GET",
            "/apis/coordination.k8s.io/v1/leases",
            Asked::resource("list", "coordination.k8s.io", "leases", "", ""),
        ),
        (
            "GET",
            "/api/v1/nodes/node-01",
            Asked::resource("get", "", "nodes", "", ""),
        ),
        (
            "PATCH",
            "/api/v1/nodes/node-01/status",
            Asked::resource("patch", "", "nodes", "status", ""),
        ),
        (
            "GET",
            "/api/v1/namespaces/ns-1/endpoints/e",
            Asked::resource("get", "", "endpoints", "", "ns-1"),
        ),
        (
            "PUT",
            "/api/v1/namespaces/ns-1/endpoints/e",
            Asked::resource("update", "", "endpoints", "", "ns-1"),
        ),
        (
            "POST",
            "/api/v1/namespaces/ns-1/pods/p/binding",
            Asked::resource("create", "", "pods", "binding", "ns-1"),
        ),
        (
            "GET",
            "/apis/apps/v1/replicasets",
            Asked::resource("list", "apps", "replicasets", "", ""),
        ),
        (
            "DELETE",
            "/apis/apps/v1/namespaces/ns-1/replicasets/r",
            Asked::resource("delete", "apps", "replicasets", "", "ns-1"),
        ),
        ("GET", "/healthz", path("get", "/healthz")),
        ("GET", "/healthz/etcd", path("get", "/healthz/etcd")),
        ("GET", "/readyz", path("get", "/readyz")),
        ("GET", "/version", path("get", "/version")),
        ("GET", "/api", path("get", "/api")),
        ("GET", "/apis", path("get", "/apis")),
        ("GET", "/metrics", path("get", "/metrics")),
    ]
}

/// The kit's FlowSchemas and priority levels, as served (1.21: v1beta1).
async fn configuration(kit: &Kube121) -> Classifier {
    let auth = format!("Bearer {ADMIN}");
    let list = |resource: &'static str| {
        let auth = auth.clone();
        async move {
            let r = kit
                .send_tls(
                    kit.port,
                    None,
                    "GET",
                    &format!("/apis/flowcontrol.apiserver.k8s.io/v1beta1/{resource}"),
                    &[("authorization", auth.as_str())],
                    None,
                )
                .await;
            assert_eq!(r.status, 200, "{}", r.text());
            r.json()["items"].as_array().unwrap().clone()
        }
    };
    let schemas: Vec<FlowSchema> = list("flowschemas")
        .await
        .iter()
        .map(|o| FlowSchema::from_json(o).unwrap())
        .collect();
    let levels: Vec<PriorityLevel> = list("prioritylevelconfigurations")
        .await
        .iter()
        .map(|o| PriorityLevel::from_json(o).unwrap())
        .collect();
    assert!(
        schemas.len() >= 10 && levels.len() >= 6,
        "the suggested configuration"
    );
    Classifier::new(schemas, levels)
}

/// Each caller (and an anonymous one): its name, its groups as the
/// apiserver sees them, and its `Authorization` header.
fn callers() -> Vec<(&'static str, Vec<String>, Option<String>)> {
    let anonymous = ("", "system:anonymous", "");
    CALLERS
        .iter()
        .chain([&anonymous])
        .map(|(token, user, extra)| {
            let mut groups: Vec<String> = extra
                .split(',')
                .filter(|g| !g.is_empty())
                .map(str::to_string)
                .collect();
            groups.push(match *user {
                "system:anonymous" => "system:unauthenticated".into(),
                _ => "system:authenticated".into(),
            });
            let auth = (!token.is_empty()).then(|| format!("Bearer {token}"));
            (*user, groups, auth)
        })
        .collect()
}

/// A request sent to `port` (the kit, or r8s serving its certificate) as a
/// caller: its status, the FlowSchema and priority level UIDs it names,
/// and where r8s said the answer came from.
async fn send(
    kit: &Kube121,
    port: u16,
    auth: Option<&str>,
    method: &str,
    path: &str,
) -> (u16, Option<String>, Option<String>, String) {
    let mut headers = vec![("content-type", "application/merge-patch+json")];
    if let Some(a) = auth {
        headers.push(("authorization", a));
    }
    let body = (method != "GET" && method != "DELETE").then_some("{}");
    let r = kit.send_tls(port, None, method, path, &headers, body).await;
    let header = |name: &str| {
        r.headers
            .get(name)
            .map(|v| v.to_str().unwrap_or_default().to_string())
    };
    (
        r.status.as_u16(),
        header("x-kubernetes-pf-flowschema-uid"),
        header("x-kubernetes-pf-prioritylevel-uid"),
        header("x-r8s-cache").unwrap_or_default(),
    )
}

/// Every caller's every request, sent to the kit and classified here; the
/// differences, and how many answers the kit classified.
async fn compare(kit: &Kube121, c: &Classifier) -> (Vec<String>, usize) {
    let (mut differences, mut classified) = (Vec::new(), 0);
    for (user, groups, auth) in callers() {
        for (method, path, asked) in requests() {
            let (status, fs, pl, _) = send(kit, kit.port, auth.as_deref(), method, path).await;
            let Some(fs) = fs else {
                differences.push(format!(
                    "{user} {method} {path}: the kit classified nothing ({status})"
                ));
                continue;
            };
            classified += 1;
            let ours = c.classify(
                Who {
                    name: user,
                    groups: &groups,
                },
                asked,
            );
            if (ours.schema.uid.as_str(), ours.level.uid.as_str())
                != (fs.as_str(), pl.as_deref().unwrap_or(""))
            {
                differences.push(format!(
                    "{user} {method} {path}: ours {} / {}, the kit's UIDs {fs} / {pl:?}",
                    ours.schema.name, ours.level.name
                ));
            }
        }
    }
    (differences, classified)
}

/// Every caller's every read of a resource r8s caches, sent to r8s and to
/// the kit: the differences in the UIDs they name, and how many of r8s's
/// answers it made itself (hits, and its own refusals).
async fn compare_through(kit: &Kube121, r8s: u16) -> (Vec<String>, usize) {
    let (mut differences, mut own) = (Vec::new(), 0);
    for (user, _, auth) in callers() {
        for (method, path, _) in requests().into_iter().filter(|r| r.0 == "GET") {
            if !path.starts_with("/api") || path == "/api" || path == "/apis" {
                continue;
            }
            // At any version, which the cache answers (1.21's consistent
            // reads cannot be proven, and pass).
            let path = &format!("{path}?resourceVersion=0");
            let theirs = send(kit, kit.port, auth.as_deref(), method, path).await;
            let ours = send(kit, r8s, auth.as_deref(), method, path).await;
            // A refusal of r8s's own carries no X-R8s-Cache.
            if ours.3 == "hit" || ours.3.is_empty() {
                own += 1;
            }
            if (ours.0, &ours.1, &ours.2) != (theirs.0, &theirs.1, &theirs.2) {
                differences.push(format!(
                    "{user} {method} {path} ({}): r8s {ours:?}, the kit {theirs:?}",
                    ours.3
                ));
            }
        }
    }
    (differences, own)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_classify_every_request_as_kube_apiserver_121_does() {
    let tokens: String = CALLERS
        .iter()
        .map(|(t, u, g)| format!("{t},{u},{u},\"{g}\"\n"))
        .collect();
    let Some(kit) = Kube121::start("fairness_kit", &tokens) else {
        return;
    };
    let c = configuration(&kit).await;
    let (differences, classified) = compare(&kit, &c).await;
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    assert_eq!(classified, (CALLERS.len() + 1) * requests().len());

    // Through r8s (delegated, caching what the reads ask for): its own
    // answers name what the kit's do, once it has read the kit's schemas.
    let r8s = delegated_r8s(
        kit.token_kubeconfig(ADMIN),
        &[
            "pods",
            "configmaps",
            "nodes",
            "endpoints",
            "coordination.k8s.io/v1/leases",
            "apps/v1/replicasets",
        ],
        None,
        kit.serving_tls(),
    )
    .with(|c| c.upstream.version = "1.21".into())
    .start()
    .await;
    let port = r8s.addr.port();
    let (differences, own) = eventually("r8s classifying as the kit", HANG, || async {
        let (d, own) = compare_through(&kit, port).await;
        d.is_empty().then_some((d, own))
    })
    .await;
    assert!(differences.is_empty());
    let reads = (CALLERS.len() + 1) * 9;
    assert!(own * 2 > reads, "most answers r8s's own: {own} of {reads}");

    // FlowSchemas added while running: alice's reads in ns-1 first, to
    // workload-low, and her lists there, at the same precedence, to
    // global-default.
    let mine: Value = serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta1", "kind": "FlowSchema",
        "metadata": {"name": "alice-reads"},
        "spec": {"priorityLevelConfiguration": {"name": "workload-low"}, "matchingPrecedence": 50,
            "distinguisherMethod": {"type": "ByNamespace"},
            "rules": [{"subjects": [{"kind": "User", "user": {"name": "alice"}}],
                "resourceRules": [{"verbs": ["get", "list"], "apiGroups": ["*"], "resources": ["*"],
                    "namespaces": ["ns-1"], "clusterScope": false}]}]}});
    kit.create(
        "/apis/flowcontrol.apiserver.k8s.io/v1beta1/flowschemas",
        &mine,
    )
    .await;
    // Another at the same precedence, for her lists only: ties go by name.
    let mut first = mine.clone();
    first["metadata"]["name"] = "alice-aaa".into();
    first["spec"]["priorityLevelConfiguration"]["name"] = "global-default".into();
    first["spec"]["rules"][0]["resourceRules"][0]["verbs"] = serde_json::json!(["list"]);
    kit.create(
        "/apis/flowcontrol.apiserver.k8s.io/v1beta1/flowschemas",
        &first,
    )
    .await;
    let c = configuration(&kit).await;
    let alice = ["system:authenticated".to_string()];
    let got = c.classify(
        Who {
            name: "alice",
            groups: &alice,
        },
        Asked::resource("list", "", "pods", "", "ns-1"),
    );
    assert_eq!(got.schema.name, "alice-aaa");
    let got = c.classify(
        Who {
            name: "alice",
            groups: &alice,
        },
        Asked::resource("get", "", "pods", "", "ns-1"),
    );
    assert_eq!(got.schema.name, "alice-reads");
    // The kit's controller applies a new schema within moments: compare
    // until it has (every request alike), then once more.
    eventually(
        "the kit classifying by the new FlowSchema",
        HANG,
        || async { compare(&kit, &c).await.0.is_empty().then_some(()) },
    )
    .await;
    let (differences, _) = compare(&kit, &c).await;
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    // r8s follows: its watch of the schemas sees them.
    eventually("r8s classifying by the new FlowSchemas", HANG, || async {
        compare_through(&kit, port).await.0.is_empty().then_some(())
    })
    .await;
    let (differences, _) = compare_through(&kit, port).await;
    assert!(differences.is_empty(), "{}", differences.join("\n"));
    r8s.stop().await;
}
