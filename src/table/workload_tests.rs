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
