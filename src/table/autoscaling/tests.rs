//! Goldens: kube-apiserver's `TestPrintHPA` (printers_test.go), its cases
//! as autoscaling/v2 JSON.

use std::time::SystemTime;

use serde_json::{Value, json};

use super::*;

/// The test's autoscaler: of `some-rc`, 2 to 10 replicas, 4 running.
fn hpa(metric: Value, current: Value) -> Vec<String> {
    let mut o = json!({"metadata": {"name": "some-hpa"},
        "spec": {"scaleTargetRef": {"kind": "ReplicationController", "name": "some-rc"},
                 "minReplicas": 2, "maxReplicas": 10},
        "status": {"currentReplicas": 4, "desiredReplicas": 5}});
    if !metric.is_null() {
        o["spec"]["metrics"] = json!([metric]);
    }
    if !current.is_null() {
        o["status"]["currentMetrics"] = json!([current]);
    }
    let row = hpa_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(row.cells[4], Cell::Int(10));
    row.texts(SystemTime::UNIX_EPOCH)
}

fn targets(metric: Value, current: Value) -> String {
    hpa(metric, current)[2].clone()
}

#[test]
fn should_print_autoscalers_as_the_apiservers_tests_do() {
    let none = Value::Null;
    let mut unset = json!({"metadata": {"name": "some-hpa"},
        "spec": {"scaleTargetRef": {"kind": "ReplicationController", "name": "some-rc"}, "maxReplicas": 10},
        "status": {"currentReplicas": 4}});
    let row = hpa_row(&serde_json::to_vec(&unset).unwrap()).unwrap();
    assert_eq!(
        row.texts(SystemTime::UNIX_EPOCH),
        [
            "some-hpa",
            "ReplicationController/some-rc",
            "<none>",
            "<unset>",
            "10",
            "4",
            "<unknown>"
        ]
    );
    unset["spec"]["minReplicas"] = json!(2);
    let (avg, val) = (
        json!({"type": "AverageValue", "averageValue": "100m"}),
        json!({"type": "Value", "value": "100m"}),
    );
    let external = |target: &Value| json!({"type": "External", "external": {"metric": {"name": "some-external-metric"}, "target": target}});
    let object = |target: &Value| json!({"type": "Object", "object": {"describedObject": {"kind": "Service", "name": "some-service"}, "metric": {"name": "some-service-metric"}, "target": target}});
    let cases = [
        (external(&avg), none.clone(), "<unknown>/100m (avg)"),
        (
            external(&avg),
            json!({"type": "External", "external": {"metric": {"name": "some-external-metric"}, "current": {"averageValue": "50m"}}}),
            "50m/100m (avg)",
        ),
        (external(&val), none.clone(), "<unknown>/100m"),
        (
            external(&val),
            json!({"type": "External", "external": {"metric": {"name": "some-external-metric"}, "current": {"value": "50m"}}}),
            "50m/100m",
        ),
        (
            json!({"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "target": avg}}),
            none.clone(),
            "<unknown>/100m",
        ),
        (
            json!({"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "target": avg}}),
            json!({"type": "Pods", "pods": {"metric": {"name": "some-pods-metric"}, "current": {"averageValue": "50m"}}}),
            "50m/100m",
        ),
        (object(&val), none.clone(), "<unknown>/100m"),
        (
            object(&val),
            json!({"type": "Object", "object": {"metric": {"name": "some-service-metric"}, "current": {"value": "50m"}}}),
            "50m/100m",
        ),
        (
            json!({"type": "Resource", "resource": {"name": "cpu", "target": avg}}),
            none.clone(),
            "cpu: <unknown>/100m",
        ),
        (
            json!({"type": "Resource", "resource": {"name": "cpu", "target": avg}}),
            json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageValue": "50m"}}}),
            "cpu: 50m/100m",
        ),
        (
            json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}),
            none.clone(),
            "cpu: <unknown>/80%",
        ),
        (
            json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 80}}}),
            json!({"type": "Resource", "resource": {"name": "cpu", "current": {"averageUtilization": 50, "averageValue": "40m"}}}),
            "cpu: 50%/80%",
        ),
        (
            json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "application", "target": avg}}),
            none.clone(),
            "cpu: <unknown>/100m",
        ),
        (
            json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "target": avg}}),
            json!({"type": "ContainerResource", "containerResource": {"name": "cpu", "container": "application", "current": {"averageValue": "50m"}}}),
            "cpu: 50m/100m",
        ),
    ];
    for (metric, current, want) in cases {
        assert_eq!(targets(metric.clone(), current), want, "{metric}");
    }
    assert_eq!(hpa(none.clone(), none.clone())[3], "2");
}

/// `formatHPAMetrics`' other branches (printers.go): two metrics shown,
/// then how many more; a target without utilization is `<auto>`; a type
/// it does not know.
#[test]
fn should_show_two_metrics_then_how_many_more() {
    let cpu =
        json!({"type": "Resource", "resource": {"name": "cpu", "target": {"type": "Utilization"}}});
    let odd = json!({"type": "Weather"});
    let mut o = json!({"metadata": {"name": "h"}, "spec": {"maxReplicas": 3,
        "metrics": [cpu, odd, cpu, cpu]}});
    let row = |o: &Value| {
        hpa_row(&serde_json::to_vec(o).unwrap())
            .unwrap()
            .texts(SystemTime::UNIX_EPOCH)
    };
    assert_eq!(
        row(&o)[2],
        "cpu: <unknown>/<auto>, <unknown type> + 2 more..."
    );
    o["spec"]["metrics"] = json!([cpu, odd]);
    assert_eq!(row(&o)[2], "cpu: <unknown>/<auto>, <unknown type>");
}
