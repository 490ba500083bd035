//! Sample objects (pods shaped like a real apiserver's, ~4.5 KB each, spread over namespaces and nodes) and
//! the background churn that drives watch traffic in tests and benchmarks.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use super::resources::{find, pods_idx};
use super::state::Sim;
use super::store::{Mutation, key};
use super::write::uuid;
use r8s::api::Gvr;
use r8s::api::status::Status;

fn now() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

const TIERS: [&str; 4] = ["frontend", "backend", "cache", "batch"];

/// A timestamp `ago_s` seconds before now (RFC 3339, as the apiserver writes them).
fn ago(ago_s: u64) -> String {
    let t = std::time::SystemTime::now() - Duration::from_secs(ago_s);
    humantime::format_rfc3339_seconds(t).to_string()
}

/// `n` characters as Kubernetes' name generator draws them.
fn suffix(rng: &mut fastrand::Rng, n: usize) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    (0..n)
        .map(|_| ALPHABET[rng.usize(..ALPHABET.len())] as char)
        .collect()
}

/// `n` hex digits (digests, container ids).
fn hex(rng: &mut fastrand::Rng, n: usize) -> String {
    (0..n)
        .map(|_| char::from_digit(rng.u32(..16), 16).expect("a hex digit"))
        .collect()
}

/// A UUID drawn from `rng`.
fn seeded_uid(rng: &mut fastrand::Rng) -> String {
    let h = hex(rng, 32);
    format!(
        "{}-{}-4{}-a{}-{}",
        &h[..8],
        &h[8..12],
        &h[13..16],
        &h[17..20],
        &h[20..]
    )
}

/// A pod shaped like those a real kube-apiserver serves
/// (`shared/reference/13-pods-as-served.json`): made by a ReplicaSet
/// (`generateName`, `ownerReferences`), `managedFields` of two managers
/// (the controller-manager's spec, the kubelet's status), every spec
/// default the apiserver fills in, both default tolerations, the projected
/// service-account token volume, and a status with conditions and
/// container statuses. Names, uids, IPs, hashes and timestamps differ per pod;
/// every other pod is scheduled (on node `i/2 mod nodes`) and running, the
/// rest pending.
pub fn pod(ns: &str, name: &str, i: usize, nodes: usize) -> Value {
    let node = i
        .is_multiple_of(2)
        .then(|| format!("node-{:02}", (i / 2) % nodes.max(1)));
    let phase = if node.is_some() { "Running" } else { "Pending" };
    // Drawn from the pod's index: every sim seeds the same pods (tests
    // compare two), each pod unlike the next.
    let mut rng = fastrand::Rng::with_seed(0x5eed_0000 + i as u64);
    let app = format!("app-{}", i % 20);
    let hash = suffix(&mut rng, 10);
    let rs = format!("{app}-{hash}");
    let rs_uid = seeded_uid(&mut rng);
    // 8 to 307 days old: `kubectl get pods` prints whole days, which do not
    // tick over between two listings compared in a test.
    let age = 86_400 * (8 + i as u64 % 300) + (i as u64 * 37) % 3_600;
    let created = ago(age);
    let started = ago(age - 20);
    let token_volume = format!("kube-api-access-{}", suffix(&mut rng, 5));
    let pod_ip = format!(
        "10.{}.{}.{}",
        244 + (i / 62_500) % 8,
        (i / 250) % 250,
        i % 250 + 2
    );
    let host_ip = format!(
        "192.168.{}.{}",
        (i / 2) % nodes.max(1) / 250,
        (i / 2) % nodes.max(1) % 250 + 10
    );
    let image = format!("registry.example.com/{app}:1.{}.{}", i % 9, i % 4);
    let cm_fields = json!({
        "f:metadata": {"f:generateName": {}, "f:labels": {".": {}, "f:app": {}, "f:pod-template-hash": {}, "f:team": {}, "f:tier": {}, "f:version": {}, "f:shard": {}},
            "f:ownerReferences": {".": {}, format!("k:{{\"uid\":\"{rs_uid}\"}}"): {".": {}, "f:apiVersion": {}, "f:blockOwnerDeletion": {}, "f:controller": {}, "f:kind": {}, "f:name": {}, "f:uid": {}}}},
        "f:spec": {"f:containers": {"k:{\"name\":\"main\"}": {".": {}, "f:env": {".": {}, "k:{\"name\":\"APP_NAME\"}": {".": {}, "f:name": {}, "f:value": {}}, "k:{\"name\":\"POD_NAME\"}": {".": {}, "f:name": {}, "f:valueFrom": {".": {}, "f:fieldRef": {}}}},
            "f:image": {}, "f:imagePullPolicy": {}, "f:name": {}, "f:ports": {".": {}, "k:{\"containerPort\":8080,\"protocol\":\"TCP\"}": {".": {}, "f:containerPort": {}, "f:name": {}, "f:protocol": {}}},
            "f:resources": {".": {}, "f:limits": {".": {}, "f:memory": {}}, "f:requests": {".": {}, "f:cpu": {}, "f:memory": {}}}, "f:terminationMessagePath": {}, "f:terminationMessagePolicy": {}}},
            "f:dnsPolicy": {}, "f:enableServiceLinks": {}, "f:restartPolicy": {}, "f:schedulerName": {}, "f:securityContext": {}, "f:terminationGracePeriodSeconds": {}}
    });
    let mut managed = vec![
        json!({"manager": "kube-controller-manager", "operation": "Update", "apiVersion": "v1",
        "time": created, "fieldsType": "FieldsV1", "fieldsV1": cm_fields}),
    ];
    let mut spec = json!({
        "volumes": [{"name": token_volume, "projected": {"sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
            {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
        ], "defaultMode": 420}}],
        "containers": [{
            "name": "main", "image": image,
            "ports": [{"name": "http", "containerPort": 8080, "protocol": "TCP"}],
            "env": [
                {"name": "APP_NAME", "value": app},
                {"name": "POD_NAME", "valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.name"}}}
            ],
            "resources": {"limits": {"memory": "256Mi"}, "requests": {"cpu": "100m", "memory": "128Mi"}},
            "volumeMounts": [{"name": token_volume, "readOnly": true, "mountPath": "/var/run/secrets/kubernetes.io/serviceaccount"}],
            "terminationMessagePath": "/dev/termination-log", "terminationMessagePolicy": "File",
            "imagePullPolicy": "IfNotPresent"
        }],
        "restartPolicy": "Always", "terminationGracePeriodSeconds": 30, "dnsPolicy": "ClusterFirst",
        "serviceAccountName": "default", "serviceAccount": "default", "securityContext": {},
        "schedulerName": "default-scheduler",
        "tolerations": [
            {"key": "node.kubernetes.io/not-ready", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300},
            {"key": "node.kubernetes.io/unreachable", "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": 300}
        ],
        "priority": 0, "enableServiceLinks": true, "preemptionPolicy": "PreemptLowerPriority"
    });
    let scheduled = json!({"type": "PodScheduled", "status": if node.is_some() { "True" } else { "False" },
        "lastProbeTime": null, "lastTransitionTime": created});
    let mut status = json!({"phase": phase, "conditions": [scheduled], "qosClass": "Burstable"});
    if node.is_none() {
        status["conditions"][0]["reason"] = json!("Unschedulable");
        status["conditions"][0]["message"] = json!(
            "0/3 nodes are available: 3 Insufficient cpu. preemption: 0/3 nodes are available: 3 No preemption victims found for incoming pod."
        );
    }
    if let Some(n) = &node {
        spec["nodeName"] = json!(n);
        let cond = |t: &str| json!({"type": t, "status": "True", "lastProbeTime": null, "lastTransitionTime": started});
        status = json!({
            "phase": phase,
            "conditions": [cond("Initialized"), cond("Ready"), cond("ContainersReady"),
                json!({"type": "PodScheduled", "status": "True", "lastProbeTime": null, "lastTransitionTime": created})],
            "hostIP": host_ip, "podIP": pod_ip, "podIPs": [{"ip": pod_ip}],
            "startTime": created,
            "containerStatuses": [{
                "name": "main", "state": {"running": {"startedAt": started}}, "lastState": {},
                "ready": true, "restartCount": (i % 3) as u64, "image": image,
                "imageID": format!("registry.example.com/{app}@sha256:{}", hex(&mut rng, 64)),
                "containerID": format!("containerd://{}", hex(&mut rng, 64)),
                "started": true
            }],
            "qosClass": "Burstable"
        });
        managed.push(json!({"manager": "kubelet", "operation": "Update", "apiVersion": "v1", "time": started,
            "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {
                "f:conditions": {"k:{\"type\":\"ContainersReady\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                    "k:{\"type\":\"Initialized\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}},
                    "k:{\"type\":\"Ready\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:status": {}, "f:type": {}}},
                "f:containerStatuses": {}, "f:hostIP": {}, "f:phase": {}, "f:podIP": {},
                "f:podIPs": {".": {}, format!("k:{{\"ip\":\"{pod_ip}\"}}"): {".": {}, "f:ip": {}}}, "f:startTime": {}}}}));
    } else {
        managed.push(json!({"manager": "kube-scheduler", "operation": "Update", "apiVersion": "v1", "time": created,
            "fieldsType": "FieldsV1", "subresource": "status", "fieldsV1": {"f:status": {
                "f:conditions": {".": {}, "k:{\"type\":\"PodScheduled\"}": {".": {}, "f:lastProbeTime": {}, "f:lastTransitionTime": {}, "f:message": {}, "f:reason": {}, "f:status": {}, "f:type": {}}}}}}));
    }
    json!({
        "kind": "Pod", "apiVersion": "v1",
        "metadata": {
            "name": name, "generateName": format!("{rs}-"), "namespace": ns, "uid": uuid(),
            "creationTimestamp": created,
            "labels": {"app": app, "pod-template-hash": hash, "tier": TIERS[i % 4],
                       "team": format!("team-{}", i % 7), "version": format!("v{}", i % 3 + 1), "shard": (i % 16).to_string()},
            "annotations": {"example.com/owner": "platform-team@example.com", "sim/index": i.to_string()},
            "ownerReferences": [{"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": rs, "uid": rs_uid,
                                 "controller": true, "blockOwnerDeletion": true}],
            "managedFields": managed
        },
        "spec": spec,
        "status": status
    })
}

fn put(
    sim: &Sim,
    resource: (&'static str, &'static str, &'static str),
    ns: Option<&str>,
    v: Value,
) {
    let res = find(&Gvr::from_static(resource.0, resource.1, resource.2))
        .expect("seeded resource is served");
    let name = v["metadata"]["name"]
        .as_str()
        .unwrap_or_default()
        .to_string();
    let _ = sim
        .store
        .mutate(res, &key(ns, &name), |_, _| Ok(Mutation::Put(v)));
}

fn meta(name: &str, ns: Option<&str>) -> Value {
    let mut m = json!({"name": name, "uid": uuid(), "creationTimestamp": now()});
    if let Some(ns) = ns {
        m["namespace"] = json!(ns);
    }
    m
}

/// Seeds namespaces, nodes, pods, and a few of every other type.
pub fn seed(sim: &Sim) {
    let cfg = &sim.config;
    let nodes = cfg.node_count();
    let mut namespaces: Vec<String> = vec!["default".into(), "kube-system".into()];
    namespaces.extend((0..cfg.namespaces.max(1)).map(|i| format!("ns-{i}")));
    for ns in &namespaces {
        put(
            sim,
            ("", "v1", "namespaces"),
            None,
            json!({"kind": "Namespace", "apiVersion": "v1",
            "metadata": meta(ns, None), "spec": {"finalizers": ["kubernetes"]}, "status": {"phase": "Active"}}),
        );
        put(
            sim,
            ("", "v1", "configmaps"),
            Some(ns),
            json!({"kind": "ConfigMap", "apiVersion": "v1",
            "metadata": meta("kube-root-ca.crt", Some(ns)), "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nsim\n-----END CERTIFICATE-----\n"}}),
        );
    }
    for n in 0..nodes {
        let name = format!("node-{n:02}");
        put(
            sim,
            ("", "v1", "nodes"),
            None,
            json!({"kind": "Node", "apiVersion": "v1",
            "metadata": {"name": name, "uid": uuid(), "creationTimestamp": now(), "labels": {"kubernetes.io/hostname": name}},
            "spec": {"podCIDR": format!("10.244.{n}.0/24")},
            "status": {"conditions": [{"type": "Ready", "status": "True"}], "nodeInfo": {"kubeletVersion": "v1.33.0"}}}),
        );
    }
    put(
        sim,
        ("", "v1", "services"),
        Some("default"),
        json!({"kind": "Service", "apiVersion": "v1",
        "metadata": meta("kubernetes", Some("default")),
        "spec": {"clusterIP": "10.96.0.1", "clusterIPs": ["10.96.0.1"], "selector": {"component": "apiserver"}, "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": 6443}], "type": "ClusterIP"}}),
    );
    put(
        sim,
        ("", "v1", "events"),
        Some("default"),
        json!({"kind": "Event", "apiVersion": "v1",
        "metadata": meta("kubernetes.sim", Some("default")),
        "involvedObject": {"kind": "Service", "namespace": "default", "name": "kubernetes", "apiVersion": "v1"},
        "reason": "Seeded", "message": "the sim seeded its objects", "source": {"component": "sim"},
        "firstTimestamp": ago(36_000), "lastTimestamp": ago(36_000), "count": 1, "type": "Normal",
        "eventTime": null, "reportingComponent": "sim", "reportingInstance": ""}),
    );
    put(
        sim,
        ("", "v1", "endpoints"),
        Some("default"),
        json!({"kind": "Endpoints", "apiVersion": "v1",
        "metadata": meta("kubernetes", Some("default")),
        "subsets": [{"addresses": [{"ip": "10.0.0.1"}], "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}]}),
    );
    put(
        sim,
        ("", "v1", "secrets"),
        Some("default"),
        json!({"kind": "Secret", "apiVersion": "v1",
        "metadata": meta("db-password", Some("default")), "type": "Opaque", "data": {"password": "aHVudGVyMg=="}}),
    );
    let user_ns = &namespaces[2..];
    let deployments: Vec<String> = user_ns.iter().map(|_| uuid()).collect();
    for (i, ns) in user_ns.iter().enumerate() {
        put(
            sim,
            ("apps", "v1", "deployments"),
            Some(ns),
            json!({"kind": "Deployment", "apiVersion": "apps/v1",
            "metadata": {"name": format!("app-{i}"), "namespace": ns, "uid": deployments[i], "creationTimestamp": now(), "generation": 1},
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": format!("app-{i}")}},
                     "template": {"metadata": {"labels": {"app": format!("app-{i}")}}, "spec": {"containers": [{"name": "main", "image": "registry.example.com/app:1.4.2"}]}}},
            "status": {"replicas": 3, "updatedReplicas": 3, "readyReplicas": 3, "availableReplicas": 3}}),
        );
    }
    put(
        sim,
        ("example.r8s.dev", "v1", "widgets"),
        Some("default"),
        json!({"kind": "Widget", "apiVersion": "example.r8s.dev/v1",
        "metadata": {"name": "sprocket", "namespace": "default", "uid": uuid(), "creationTimestamp": now(), "generation": 1},
        "spec": {"size": 3, "color": "blue"}}),
    );
    for i in 0..cfg.pods {
        let ns = &user_ns[i % user_ns.len()];
        let name = format!("pod-{i:05}");
        put(sim, ("", "v1", "pods"), Some(ns), pod(ns, &name, i, nodes));
    }
    // The widgets' definition, as a cluster serving them stores it (last,
    // so the other objects keep the versions they always had).
    let mut widgets = json!({"kind": "CustomResourceDefinition", "apiVersion": "apiextensions.k8s.io/v1",
        "metadata": {"name": "widgets.example.r8s.dev", "uid": uuid(), "creationTimestamp": now(), "generation": 1},
        "spec": {"group": "example.r8s.dev", "scope": "Namespaced",
                 "names": {"plural": "widgets", "singular": "widget", "kind": "Widget", "listKind": "WidgetList", "shortNames": ["wd"]},
                 "versions": [{"name": "v1", "served": true, "storage": true,
                               "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}});
    super::crd::prepare(&mut widgets).expect("the widgets' definition is valid");
    put(
        sim,
        ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
        None,
        widgets,
    );
    // The workload kinds, after everything above (whose versions they
    // leave as they were).
    seed_workloads(sim, user_ns, &deployments, nodes);
    seed_cluster(sim, user_ns);
    seed_storage_and_traffic(sim, user_ns);
    // Each namespace's default service account; the first namespace's CI
    // one lists a token secret, as clusters before 1.24 made them.
    for ns in &namespaces {
        put(
            sim,
            ("", "v1", "serviceaccounts"),
            Some(ns),
            json!({"kind": "ServiceAccount", "apiVersion": "v1", "metadata": meta("default", Some(ns))}),
        );
    }
    if let Some(ns) = user_ns.first() {
        put(
            sim,
            ("", "v1", "serviceaccounts"),
            Some(ns),
            json!({"kind": "ServiceAccount", "apiVersion": "v1", "metadata": meta("ci", Some(ns)),
            "secrets": [{"name": "ci-token-x7k2p"}], "automountServiceAccountToken": false}),
        );
    }
}

/// A replica set behind each deployment (`deployments`: their uids), a
/// daemon set on every node, a stateful set, a finished job and the cron
/// job that made it.
fn seed_workloads(sim: &Sim, user_ns: &[String], deployments: &[String], nodes: usize) {
    let containers = |name: &str, image: &str| json!([{"name": name, "image": image}]);
    let template = |app: &str, name: &str, image: &str| json!({"metadata": {"labels": {"app": app}}, "spec": {"containers": containers(name, image)}});
    let owned = |name: &str, ns: &str, owner: (&str, &str, &str, &Value)| {
        let mut m = meta(name, Some(ns));
        m["generation"] = json!(1);
        let (api_version, kind, owner, uid) = owner;
        m["ownerReferences"] = json!([{"apiVersion": api_version, "kind": kind, "name": owner,
            "uid": uid, "controller": true, "blockOwnerDeletion": true}]);
        m
    };
    for (i, ns) in user_ns.iter().enumerate() {
        let app = format!("app-{i}");
        put(
            sim,
            ("apps", "v1", "replicasets"),
            Some(ns),
            json!({"kind": "ReplicaSet", "apiVersion": "apps/v1",
            "metadata": owned(&format!("{app}-7d4b9c8f6"), ns, ("apps/v1", "Deployment", &app, &json!(deployments[i]))),
            "spec": {"replicas": 3, "selector": {"matchLabels": {"app": app}},
                     "template": template(&app, "main", "registry.example.com/app:1.4.2")},
            "status": {"replicas": 3, "fullyLabeledReplicas": 3, "readyReplicas": 3, "availableReplicas": 3, "observedGeneration": 1}}),
        );
    }
    let mut agent = meta("node-agent", Some("kube-system"));
    agent["generation"] = json!(1);
    let n = nodes as i64;
    put(
        sim,
        ("apps", "v1", "daemonsets"),
        Some("kube-system"),
        json!({"kind": "DaemonSet", "apiVersion": "apps/v1", "metadata": agent,
        "spec": {"selector": {"matchLabels": {"app": "node-agent"}},
                 "template": {"metadata": {"labels": {"app": "node-agent"}},
                              "spec": {"nodeSelector": {"kubernetes.io/os": "linux"},
                                       "containers": containers("agent", "registry.example.com/node-agent:0.9.1")}},
                 "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 1, "maxSurge": 0}},
                 "revisionHistoryLimit": 10},
        "status": {"currentNumberScheduled": n, "desiredNumberScheduled": n, "numberReady": n,
                   "updatedNumberScheduled": n, "numberAvailable": n, "observedGeneration": 1}}),
    );
    let Some(ns) = user_ns.first() else { return };
    let mut db = meta("db", Some(ns));
    db["generation"] = json!(1);
    put(
        sim,
        ("apps", "v1", "statefulsets"),
        Some(ns),
        json!({"kind": "StatefulSet", "apiVersion": "apps/v1", "metadata": db,
        "spec": {"replicas": 3, "serviceName": "db", "selector": {"matchLabels": {"app": "db"}},
                 "template": template("db", "postgres", "registry.example.com/postgres:16.4"),
                 "podManagementPolicy": "OrderedReady", "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
                 "revisionHistoryLimit": 10},
        "status": {"replicas": 3, "readyReplicas": 2, "currentReplicas": 3, "updatedReplicas": 3, "availableReplicas": 2,
                   "currentRevision": "db-5b8c7d", "updateRevision": "db-5b8c7d", "observedGeneration": 1, "collisionCount": 0}}),
    );
    let job_spec = json!({"completions": 1, "parallelism": 1, "backoffLimit": 6,
        "selector": {"matchLabels": {"batch.kubernetes.io/controller-uid": "5f0c3e2a-1b7d-4c9e-8a6f-2d4b1e9c7a30"}},
        "template": {"metadata": {"labels": {"job-name": "backup"}},
                     "spec": {"containers": containers("backup", "registry.example.com/backup:2.1.0"), "restartPolicy": "OnFailure"}}});
    let mut cron = meta("backup", Some(ns));
    cron["generation"] = json!(1);
    let cron_uid = cron["uid"].clone();
    put(
        sim,
        ("batch", "v1", "cronjobs"),
        Some(ns),
        json!({"kind": "CronJob", "apiVersion": "batch/v1", "metadata": cron,
        "spec": {"schedule": "0 2 * * *", "timeZone": "Etc/UTC", "concurrencyPolicy": "Forbid", "suspend": false,
                 "successfulJobsHistoryLimit": 3, "failedJobsHistoryLimit": 1,
                 "jobTemplate": {"metadata": {}, "spec": job_spec.clone()}},
        "status": {"lastScheduleTime": ago(5_400), "lastSuccessfulTime": ago(5_250)}}),
    );
    let job = owned(
        "backup-29412345",
        ns,
        ("batch/v1", "CronJob", "backup", &cron_uid),
    );
    put(
        sim,
        ("batch", "v1", "jobs"),
        Some(ns),
        json!({"kind": "Job", "apiVersion": "batch/v1", "metadata": job, "spec": job_spec,
        "status": {"conditions": [{"type": "Complete", "status": "True",
                                   "lastProbeTime": ago(5_250), "lastTransitionTime": ago(5_250)}],
                   "startTime": ago(5_400), "completionTime": ago(5_250), "succeeded": 1, "ready": 0, "terminating": 0}}),
    );
}

/// Roles and their bindings, leader-election leases, storage classes and
/// network policies, a few of each.
fn seed_cluster(sim: &Sim, user_ns: &[String]) {
    let rbac = |kind: &str, name: &str, ns: Option<&str>, body: Value| {
        let mut v = json!({"kind": kind, "apiVersion": "rbac.authorization.k8s.io/v1", "metadata": meta(name, ns)});
        for (k, x) in body.as_object().into_iter().flatten() {
            v[k] = x.clone();
        }
        v
    };
    let read = json!({"rules": [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list", "watch"]}]});
    put(
        sim,
        ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        None,
        rbac("ClusterRole", "view", None, read.clone()),
    );
    put(
        sim,
        ("rbac.authorization.k8s.io", "v1", "clusterroles"),
        None,
        rbac(
            "ClusterRole",
            "admin",
            None,
            json!({"rules": [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]}),
        ),
    );
    put(
        sim,
        ("rbac.authorization.k8s.io", "v1", "clusterrolebindings"),
        None,
        rbac(
            "ClusterRoleBinding",
            "viewers",
            None,
            json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
            "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": "devs"},
                         {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]}),
        ),
    );
    let leases = [
        ("kube-scheduler", "cp-0_5f2c9e"),
        ("kube-controller-manager", "cp-0_81d0a3"),
    ];
    for (name, holder) in leases {
        put(
            sim,
            ("coordination.k8s.io", "v1", "leases"),
            Some("kube-system"),
            json!({"kind": "Lease", "apiVersion": "coordination.k8s.io/v1", "metadata": meta(name, Some("kube-system")),
            "spec": {"holderIdentity": holder, "leaseDurationSeconds": 15, "leaseTransitions": 1}}),
        );
    }
    let mut standard = meta("standard", None);
    standard["annotations"] = json!({"storageclass.kubernetes.io/is-default-class": "true"});
    put(
        sim,
        ("storage.k8s.io", "v1", "storageclasses"),
        None,
        json!({"kind": "StorageClass", "apiVersion": "storage.k8s.io/v1", "metadata": standard,
        "provisioner": "rancher.io/local-path", "reclaimPolicy": "Delete", "volumeBindingMode": "WaitForFirstConsumer"}),
    );
    put(
        sim,
        ("storage.k8s.io", "v1", "storageclasses"),
        None,
        json!({"kind": "StorageClass", "apiVersion": "storage.k8s.io/v1", "metadata": meta("fast", None),
        "provisioner": "ebs.csi.aws.com", "parameters": {"type": "gp3"}, "reclaimPolicy": "Retain",
        "volumeBindingMode": "Immediate", "allowVolumeExpansion": true}),
    );
    let Some(ns) = user_ns.first() else { return };
    put(
        sim,
        ("rbac.authorization.k8s.io", "v1", "roles"),
        Some(ns),
        rbac("Role", "pod-reader", Some(ns), read),
    );
    put(
        sim,
        ("rbac.authorization.k8s.io", "v1", "rolebindings"),
        Some(ns),
        rbac(
            "RoleBinding",
            "read-pods",
            Some(ns),
            json!({
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "pod-reader"},
            "subjects": [{"kind": "ServiceAccount", "name": "ci", "namespace": ns},
                         {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "jane"}]}),
        ),
    );
    for (name, selector) in [
        ("default-deny", json!({})),
        ("allow-web", json!({"matchLabels": {"app": "app-0"}})),
    ] {
        put(
            sim,
            ("networking.k8s.io", "v1", "networkpolicies"),
            Some(ns),
            json!({"kind": "NetworkPolicy", "apiVersion": "networking.k8s.io/v1", "metadata": meta(name, Some(ns)),
            "spec": {"podSelector": selector, "policyTypes": ["Ingress"]}}),
        );
    }
}

/// The stateful set's volume and its claims (one bound, one pending), its
/// disruption budget, an ingress in front of the first app and its
/// autoscaler, and the API server's endpoint slice.
fn seed_storage_and_traffic(sim: &Sim, user_ns: &[String]) {
    put(
        sim,
        ("discovery.k8s.io", "v1", "endpointslices"),
        Some("default"),
        json!({"kind": "EndpointSlice", "apiVersion": "discovery.k8s.io/v1",
        "metadata": {"name": "kubernetes", "namespace": "default", "uid": uuid(), "creationTimestamp": now(),
                     "labels": {"kubernetes.io/service-name": "kubernetes", "endpointslice.kubernetes.io/managed-by": "endpointslice-controller.k8s.io"}},
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": true, "serving": true, "terminating": false}}],
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}]}),
    );
    let Some(ns) = user_ns.first() else { return };
    put(
        sim,
        ("", "v1", "persistentvolumes"),
        None,
        json!({"kind": "PersistentVolume", "apiVersion": "v1", "metadata": meta("pv-data-db-0", None),
        "spec": {"capacity": {"storage": "10Gi"}, "hostPath": {"path": "/var/lib/sim/pv-data-db-0", "type": ""},
                 "accessModes": ["ReadWriteOnce"], "claimRef": {"kind": "PersistentVolumeClaim", "namespace": ns, "name": "data-db-0", "apiVersion": "v1"},
                 "persistentVolumeReclaimPolicy": "Delete", "storageClassName": "standard", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound"}}),
    );
    let claim = |name: &str, bound: bool| {
        let mut c = json!({"kind": "PersistentVolumeClaim", "apiVersion": "v1", "metadata": meta(name, Some(ns)),
            "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "10Gi"}},
                     "storageClassName": "standard", "volumeMode": "Filesystem"},
            "status": {"phase": "Pending"}});
        if bound {
            c["spec"]["volumeName"] = json!(format!("pv-{name}"));
            c["status"] = json!({"phase": "Bound", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "10Gi"}});
        }
        c
    };
    put(
        sim,
        ("", "v1", "persistentvolumeclaims"),
        Some(ns),
        claim("data-db-0", true),
    );
    put(
        sim,
        ("", "v1", "persistentvolumeclaims"),
        Some(ns),
        claim("data-db-1", false),
    );
    put(
        sim,
        ("policy", "v1", "poddisruptionbudgets"),
        Some(ns),
        json!({"kind": "PodDisruptionBudget", "apiVersion": "policy/v1", "metadata": meta("db", Some(ns)),
        "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "db"}}},
        "status": {"observedGeneration": 1, "disruptionsAllowed": 0, "currentHealthy": 2, "desiredHealthy": 2, "expectedPods": 3}}),
    );
    put(
        sim,
        ("networking.k8s.io", "v1", "ingresses"),
        Some(ns),
        json!({"kind": "Ingress", "apiVersion": "networking.k8s.io/v1", "metadata": meta("web", Some(ns)),
        "spec": {"ingressClassName": "nginx",
                 "tls": [{"hosts": ["app.example.com"], "secretName": "web-tls"}],
                 "rules": [{"host": "app.example.com", "http": {"paths": [{"path": "/", "pathType": "Prefix",
                            "backend": {"service": {"name": "app-0", "port": {"number": 80}}}}]}}]},
        "status": {"loadBalancer": {"ingress": [{"ip": "203.0.113.10"}]}}}),
    );
    put(
        sim,
        ("autoscaling", "v2", "horizontalpodautoscalers"),
        Some(ns),
        json!({"kind": "HorizontalPodAutoscaler", "apiVersion": "autoscaling/v2", "metadata": meta("app-0", Some(ns)),
        "spec": {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "app-0"},
                 "minReplicas": 2, "maxReplicas": 10,
                 "metrics": [{"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}},
                             {"type": "Resource", "resource": {"name": "memory", "target": {"type": "AverageValue", "averageValue": "512Mi"}}}]},
        "status": {"observedGeneration": 1, "currentReplicas": 3, "desiredReplicas": 3,
                   "currentMetrics": [{"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 42, "averageValue": "210m"}}},
                                      {"type": "Resource", "resource": {"name": "memory", "current": {"averageValue": "301Mi"}}}]}}),
    );
}

/// Writes at `config.churn` per second: mostly pod updates, sometimes a
/// delete or a create, keeping the pod count about level.
pub async fn churn(sim: Arc<Sim>) {
    let period = Duration::from_secs_f64(1.0 / sim.config.churn);
    let mut tick = tokio::time::interval(period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let res = pods_idx();
    let nodes = sim.config.node_count();
    let mut n: u64 = 0;
    let mut next_index = sim.config.pods;
    // Pod i lives in ns-(i mod namespaces), as seeded.
    let namespaces = sim.config.namespaces.max(1);
    // Seeded: a run's sequence of writes (which pod, what change) is the
    // same every time; only when each lands varies.
    let mut rng = fastrand::Rng::with_seed(0xc4a7_0000 ^ sim.config.pods as u64);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            _ = sim.shutdown().wait() => return,
        }
        // No await below: the guard is held for one write, and
        // `pause_churn` waits for it.
        let _writing = sim.churn_write();
        if sim.churn_paused() {
            continue;
        }
        n += 1;
        // A pod picked by its number, found by key: a walk to a random
        // position in the map would cost a scan of the cluster per write
        // (at 150,000 pods it held the churn to a fraction of its rate).
        // A number whose pod was deleted is a missed write.
        if next_index == 0 {
            continue;
        }
        let i = rng.usize(..next_index);
        let k = key(
            Some(&format!("ns-{}", i % namespaces)),
            &format!("pod-{i:05}"),
        );
        let Some(obj) = sim.store.get(res, &k) else {
            continue;
        };
        let k = &k;
        if sim.spared(k) {
            continue;
        }
        let roll = rng.u8(..100);
        let result = if roll < 5 {
            sim.store.mutate(res, k, |cur, _| match cur {
                Some(_) => Ok(Mutation::Delete),
                None => Err(Status::not_found("pods", k)),
            })
        } else if roll < 10 {
            let ns = format!("ns-{}", next_index % namespaces);
            let name = format!("pod-{next_index:05}");
            let v = pod(&ns, &name, next_index, nodes);
            next_index += 1;
            sim.store
                .mutate(res, &key(Some(&ns), &name), |_, _| Ok(Mutation::Put(v)))
        } else {
            let mut v = obj.value();
            v["metadata"]["annotations"]["sim/churn"] = json!(n.to_string());
            if roll < 30 {
                // Labels move too, so selector watchers see objects enter and leave.
                v["metadata"]["labels"]["tier"] = json!(TIERS[rng.usize(..TIERS.len())]);
            }
            sim.store.mutate(res, k, |cur, _| match cur {
                Some(_) => Ok(Mutation::Put(v)),
                None => Err(Status::not_found("pods", k)),
            })
        };
        if let Err(e) = result {
            tracing::debug!(error = %e, "churn write skipped");
        }
    }
}
