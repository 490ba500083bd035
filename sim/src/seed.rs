//! Sample objects (pods shaped like a real apiserver's, ~4.5 KB each, spread over namespaces and nodes) and
//! the background churn that drives watch traffic in tests and benchmarks.

use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};

use crate::resources::pods_idx;
use crate::state::Sim;
use crate::store::{Mutation, key};
use crate::write::uuid;
use r8s::api::status::Status;

mod base;
mod kinds;

use base::{ago, meta, now, put};

const TIERS: [&str; 4] = ["frontend", "backend", "cache", "batch"];

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
    kinds::seed_workloads(sim, user_ns, &deployments, nodes);
    kinds::seed_cluster(sim, user_ns);
    kinds::seed_storage_and_traffic(sim, user_ns);
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
    // Priority and fairness, last of all.
    kinds::seed_flowcontrol(sim);
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
