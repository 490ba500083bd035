//! Goldens: kube-apiserver's `TestPrintDeployment` (`pkg/printers/
//! internalversion/printers_test.go`), in JSON.

use std::time::{Duration, SystemTime};

use serde_json::json;

use super::*;

#[test]
fn should_print_deployments_as_the_apiservers_tests_do() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    // Created 1.9 s from now, as the test's: "0s".
    let created = humantime::format_rfc3339(now + Duration::from_millis(1900)).to_string();
    let o = json!({
        "metadata": {"name": "test1", "creationTimestamp": created},
        "spec": {
            "replicas": 5,
            "template": {"spec": {"containers": [
                {"name": "fake-container1", "image": "fake-image1"},
                {"name": "fake-container2", "image": "fake-image2"}]}},
            "selector": {"matchLabels": {"foo": "bar"}}},
        "status": {"replicas": 10, "updatedReplicas": 2, "availableReplicas": 1, "unavailableReplicas": 4}
    });
    let row = deployment_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now),
        [
            "test1",
            "0/5",
            "2",
            "1",
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2",
            "foo=bar"
        ]
    );
    assert_eq!(row.cells[2], Cell::Int(2), "an integer, as int64(2)");
}

fn containers2() -> serde_json::Value {
    json!({"spec": {"containers": [
        {"name": "fake-container1", "image": "fake-image1"},
        {"name": "fake-container2", "image": "fake-image2"}]}})
}

fn soon() -> (SystemTime, String) {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    let soon = humantime::format_rfc3339(now + Duration::from_millis(1900)).to_string();
    (now, soon)
}

/// `TestPrintReplicaSet`.
#[test]
fn should_print_replica_sets_as_the_apiservers_tests_do() {
    let (now, soon) = soon();
    let o = json!({
        "metadata": {"name": "test1", "creationTimestamp": soon},
        "spec": {"replicas": 5, "template": containers2(),
                 "selector": {"matchLabels": {"foo": "bar"}}},
        "status": {"replicas": 5, "readyReplicas": 2}
    });
    let row = replica_set_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now),
        [
            "test1",
            "5",
            "5",
            "2",
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2",
            "foo=bar"
        ]
    );
    assert_eq!(row.cells[1..4], [Cell::Int(5), Cell::Int(5), Cell::Int(2)]);
}

/// `TestPrintDaemonSet` and `TestPrintDaemonSetList`.
#[test]
fn should_print_daemon_sets_as_the_apiservers_tests_do() {
    let (now, soon) = soon();
    let o = json!({
        "metadata": {"name": "test1", "creationTimestamp": soon},
        "spec": {"template": containers2(), "selector": {"matchLabels": {"foo": "bar"}}},
        "status": {"currentNumberScheduled": 2, "desiredNumberScheduled": 3, "numberReady": 1,
                   "updatedNumberScheduled": 2, "numberAvailable": 0}
    });
    let row = daemon_set_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now),
        [
            "test1",
            "3",
            "2",
            "1",
            "2",
            "0",
            "<none>",
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2",
            "foo=bar"
        ]
    );
    let o = json!({
        "metadata": {"name": "daemonset2", "creationTimestamp": soon},
        "spec": {"template": {}, "selector": {"matchLabels": {"foo": "bar"}}},
        "status": {"currentNumberScheduled": 4, "desiredNumberScheduled": 2, "numberReady": 9,
                   "updatedNumberScheduled": 3, "numberAvailable": 3}
    });
    let row = daemon_set_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now)[..8],
        ["daemonset2", "2", "4", "9", "3", "3", "<none>", "0s"]
    );
    let o = json!({"metadata": {"name": "agent"},
                   "spec": {"template": {"spec": {"nodeSelector": {"kubernetes.io/os": "linux"}}}}});
    let row = daemon_set_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(row.texts(now)[6], "kubernetes.io/os=linux");
}

/// `printStatefulSet` (printers.go; printers_test.go has no test of it).
#[test]
fn should_print_stateful_sets_as_print_stateful_set_does() {
    let (now, soon) = soon();
    let o = json!({
        "metadata": {"name": "web", "creationTimestamp": soon},
        "spec": {"replicas": 3, "template": containers2()},
        "status": {"replicas": 3, "readyReplicas": 1}
    });
    let row = stateful_set_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(
        row.texts(now),
        [
            "web",
            "1/3",
            "0s",
            "fake-container1,fake-container2",
            "fake-image1,fake-image2"
        ]
    );
}

/// `printPodDisruptionBudget` (printers.go): each bound as its
/// `IntOrString`, `N/A` where unset; the allowed disruptions an integer.
#[test]
fn should_print_pod_disruption_budgets() {
    let (now, soon) = soon();
    let row =
        |o: serde_json::Value| pod_disruption_budget_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    let min = row(
        json!({"metadata": {"name": "db", "creationTimestamp": soon},
                         "spec": {"minAvailable": 2}, "status": {"disruptionsAllowed": 1}}),
    );
    assert_eq!(min.texts(now), ["db", "2", "N/A", "1", "0s"]);
    assert_eq!(min.cells[3], Cell::Int(1));
    let max = row(json!({"metadata": {"name": "web"}, "spec": {"maxUnavailable": "25%"}}));
    assert_eq!(max.texts(now), ["web", "N/A", "25%", "0", "<unknown>"]);
}
