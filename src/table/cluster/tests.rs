//! Goldens from the printers' code (`printRoleBinding`,
//! `printClusterRoleBinding`, `printLease`, `printStorageClass` in
//! printers.go; printers_test.go tests none of them).

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000)
}

fn texts(row: fn(&[u8]) -> Option<Row>, o: Value) -> Vec<String> {
    row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(now())
}

fn ago(secs: u64) -> String {
    humantime::format_rfc3339(now() - Duration::from_secs(secs)).to_string()
}

#[test]
fn should_print_bindings_with_their_role_and_subjects() {
    let o = json!({
        "metadata": {"name": "read-pods", "creationTimestamp": ago(300)},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "view"},
        "subjects": [
            {"kind": "User", "name": "jane"},
            {"kind": "Group", "name": "devs"},
            {"kind": "ServiceAccount", "name": "ci", "namespace": "tools"},
            {"kind": "User", "name": "joe"},
            {"kind": "Robot", "name": "r2"},
            {"kind": "ServiceAccount", "name": "deploy", "namespace": "tools"}]
    });
    assert_eq!(
        texts(binding_row, o),
        [
            "read-pods",
            "ClusterRole/view",
            "5m",
            "jane, joe",
            "devs",
            "tools/ci, tools/deploy"
        ]
    );
    let bare = json!({"metadata": {"name": "b"}, "roleRef": {"kind": "Role", "name": "r"}});
    assert_eq!(
        texts(binding_row, bare),
        ["b", "Role/r", "<unknown>", "", "", ""]
    );
    assert_eq!(
        ROLE_BINDING_COLUMNS[3].description,
        "Users in the roleBinding"
    );
    assert_eq!(
        CLUSTER_ROLE_BINDING_COLUMNS[5].description,
        "ServiceAccounts in the clusterRoleBinding"
    );
}

#[test]
fn should_print_a_leases_holder() {
    let held = json!({"metadata": {"name": "kube-scheduler", "creationTimestamp": ago(7200)},
                      "spec": {"holderIdentity": "cp-1_5f2c", "leaseDurationSeconds": 15}});
    assert_eq!(
        texts(lease_row, held),
        ["kube-scheduler", "cp-1_5f2c", "120m"]
    );
    let free = json!({"metadata": {"name": "free"}, "spec": {}});
    assert_eq!(texts(lease_row, free), ["free", "", "<unknown>"]);
}

#[test]
fn should_print_storage_classes_with_the_defaults_they_leave_unset() {
    let o = json!({"metadata": {"name": "standard", "creationTimestamp": ago(90_000),
                                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"}},
                   "provisioner": "rancher.io/local-path", "reclaimPolicy": "Retain",
                   "volumeBindingMode": "WaitForFirstConsumer", "allowVolumeExpansion": true});
    let row = storage_class_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now()),
        [
            "standard (default)",
            "rancher.io/local-path",
            "Retain",
            "WaitForFirstConsumer",
            "true",
            "25h"
        ]
    );
    assert_eq!(
        row.cells[4],
        Cell::Bool(true),
        "a boolean cell, as Go's bool"
    );
    let beta = json!({"metadata": {"name": "old",
                                   "annotations": {"storageclass.beta.kubernetes.io/is-default-class": "true"}},
                      "provisioner": "p"});
    assert_eq!(
        texts(storage_class_row, beta),
        [
            "old (default)",
            "p",
            "Delete",
            "Immediate",
            "false",
            "<unknown>"
        ]
    );
    let not = json!({"metadata": {"name": "x", "annotations": {"storageclass.kubernetes.io/is-default-class": "yes"}},
                     "provisioner": "p"});
    assert_eq!(texts(storage_class_row, not)[0], "x");
}
