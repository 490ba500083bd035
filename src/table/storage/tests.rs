//! Goldens: the cases of kube-apiserver's `TestPrintPersistentVolume` and
//! `TestPrintPersistentVolumeClaim` (printers_test.go), with the columns of
//! the printers' current code (`VolumeAttributesClass`, `Terminating`).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::*;

fn pv(o: Value) -> Vec<String> {
    persistent_volume_row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(SystemTime::UNIX_EPOCH)
}

fn pvc(o: Value) -> Vec<String> {
    persistent_volume_claim_row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(SystemTime::UNIX_EPOCH)
}

#[test]
fn should_print_persistent_volumes_as_print_persistent_volume_does() {
    let bound = json!({"metadata": {"name": "test1"},
        "spec": {"claimRef": {"name": "test", "namespace": "default"}, "accessModes": ["ReadOnlyMany"],
                 "capacity": {"storage": "4Gi"}},
        "status": {"phase": "Bound"}});
    assert_eq!(
        pv(bound),
        [
            "test1",
            "4Gi",
            "ROX",
            "",
            "Bound",
            "default/test",
            "",
            "<unset>",
            "",
            "<unknown>",
            "<unset>"
        ]
    );
    let failed = json!({"metadata": {"name": "test2"},
        "spec": {"accessModes": ["ReadOnlyMany"], "capacity": {"storage": "4Gi"}, "storageClassName": "my-scn",
                 "persistentVolumeReclaimPolicy": "Retain", "volumeMode": "Block",
                 "volumeAttributesClassName": "gold"},
        "status": {"phase": "Failed", "reason": "Recycle failed"}});
    assert_eq!(
        pv(failed),
        [
            "test2",
            "4Gi",
            "ROX",
            "Retain",
            "Failed",
            "",
            "my-scn",
            "gold",
            "Recycle failed",
            "<unknown>",
            "Block"
        ]
    );
    // Every mode, once each, in kube's order; the beta class annotation
    // before the spec's; a deleted volume Terminating; no capacity is 0.
    let deleting = json!({"metadata": {"name": "test3", "deletionTimestamp": "2026-11-28T00:00:00Z",
                                       "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
        "spec": {"accessModes": ["ReadWriteOncePod", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOnce"],
                 "storageClassName": "ignored"},
        "status": {"phase": "Released"}});
    assert_eq!(
        pv(deleting)[1..7],
        ["0", "RWO,RWX,RWOP", "", "Terminating", "", "beta"]
    );
}

#[test]
fn should_print_claims_as_print_persistent_volume_claim_does() {
    let bound = json!({"metadata": {"name": "test1"},
        "spec": {"volumeName": "my-volume", "storageClassName": "my-scn", "volumeMode": "Filesystem"},
        "status": {"phase": "Bound", "accessModes": ["ReadOnlyMany"], "capacity": {"storage": "4Gi"}}});
    assert_eq!(
        pvc(bound),
        [
            "test1",
            "Bound",
            "my-volume",
            "4Gi",
            "ROX",
            "my-scn",
            "<unset>",
            "<unknown>",
            "Filesystem"
        ]
    );
    // Not bound: no size or modes, whatever the status says.
    let pending = json!({"metadata": {"name": "test2"},
        "spec": {"resources": {"requests": {"storage": "1Gi"}}},
        "status": {"phase": "Pending", "accessModes": ["ReadWriteOnce"], "capacity": {"storage": "4Gi"}}});
    assert_eq!(
        pvc(pending),
        [
            "test2",
            "Pending",
            "",
            "",
            "",
            "",
            "<unset>",
            "<unknown>",
            "<unset>"
        ]
    );
    let lost = json!({"metadata": {"name": "test3", "deletionTimestamp": "2026-11-28T00:00:00Z",
                                   "annotations": {"volume.beta.kubernetes.io/storage-class": "beta"}},
        "spec": {"volumeName": "v", "storageClassName": "ignored", "volumeAttributesClassName": "gold"},
        "status": {"phase": "Lost"}});
    assert_eq!(
        pvc(lost),
        [
            "test3",
            "Terminating",
            "v",
            "0",
            "",
            "beta",
            "gold",
            "<unknown>",
            "<unset>"
        ]
    );
}
