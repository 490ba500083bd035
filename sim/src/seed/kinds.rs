//! The seeds of the kinds besides pods, nodes and namespaces: workload
//! controllers, RBAC, leases, storage, traffic and autoscaling, a few of
//! each, written after every other object (so the versions of those stay
//! what they always were).

use serde_json::{Value, json};

use super::base::{ago, meta, now, put};
use crate::state::Sim;
use crate::write::uuid;

/// A replica set behind each deployment (`deployments`: their uids), a
/// daemon set on every node, a stateful set, a finished job and the cron
/// job that made it.
pub(super) fn seed_workloads(sim: &Sim, user_ns: &[String], deployments: &[String], nodes: usize) {
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
pub(super) fn seed_cluster(sim: &Sim, user_ns: &[String]) {
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
pub(super) fn seed_storage_and_traffic(sim: &Sim, user_ns: &[String]) {
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

/// The suggested priority and fairness configuration as a real apiserver
/// serves it: kube-apiserver v1.21's own FlowSchemas and priority levels
/// (taken from `../shared/tools/kube-1.21`, UIDs included; its
/// `v1beta1` objects served as `v1`, `assuredConcurrencyShares` as
/// `nominalConcurrencyShares`, with what `v1` defaults: `lendablePercent`
/// 0, an exempt level's `exempt` block). The sim's own copy, not r8s's built-in
/// one (1.36's, which has levels 1.21 lacks), so a test can tell which
/// configuration r8s classifies by.
pub(super) fn seed_flowcontrol(sim: &Sim) {
    let served: Value = serde_json::from_str(include_str!("flowcontrol.json"))
        .expect("the sim's flowcontrol configuration is JSON");
    let group = "flowcontrol.apiserver.k8s.io";
    for (field, resource) in [
        ("priorityLevelConfigurations", "prioritylevelconfigurations"),
        ("flowSchemas", "flowschemas"),
    ] {
        for v in served[field].as_array().into_iter().flatten() {
            put(sim, (group, "v1", resource), None, v.clone());
        }
    }
}
