//! Goldens: kube-apiserver's `TestPrintEvent` (`pkg/printers/
//! internalversion/printers_test.go`), its wide cases (the apiserver prints
//! every column), in JSON.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000)
}

/// `days` ago, as `metav1.Time` writes it (whole seconds).
fn ago(days: u64) -> String {
    humantime::format_rfc3339_seconds(now() - Duration::from_secs(days * 86_400)).to_string()
}

/// `days` ago, as `metav1.MicroTime` writes it.
fn micro_ago(days: u64) -> String {
    humantime::format_rfc3339_micros(now() - Duration::from_secs(days * 86_400)).to_string()
}

fn event(name: &str, extra: Value) -> Vec<String> {
    let mut o = json!({
        "metadata": {"name": name},
        "source": {"component": "kubelet", "host": "Node1"},
        "involvedObject": {"kind": "Deployment", "name": "Deployment Name", "fieldPath": "spec.containers{foo}"},
        "reason": "Event Reason", "message": "Message Data", "type": "Warning"
    });
    for (k, v) in extra.as_object().unwrap() {
        o[k] = v.clone();
    }
    event_row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(now())
}

fn want(last: &str, name: &str, first: &str, count: &str, source: &str) -> Vec<String> {
    [
        last,
        "Warning",
        "Event Reason",
        "deployment/Deployment Name",
        "spec.containers{foo}",
        source,
        "Message Data",
        first,
        count,
        name,
    ]
    .map(String::from)
    .to_vec()
}

#[test]
fn should_print_events_as_the_apiservers_tests_do() {
    let k = "kubelet, Node1";
    assert_eq!(
        event(
            "event2",
            json!({"firstTimestamp": ago(3), "lastTimestamp": ago(2), "count": 6})
        ),
        want("2d", "event2", "3d", "6", k)
    );
    // Without firstTimestamp: the event time.
    assert_eq!(
        event(
            "event3",
            json!({"eventTime": micro_ago(3), "lastTimestamp": ago(3), "count": 1})
        ),
        want("3d", "event3", "3d", "1", k)
    );
    // Without lastTimestamp: the first.
    assert_eq!(
        event(
            "event4",
            json!({"eventTime": micro_ago(3), "firstTimestamp": ago(3), "count": 1})
        ),
        want("3d", "event4", "3d", "1", k)
    );
    assert_eq!(
        event("event5", json!({"eventTime": micro_ago(3), "count": 1})),
        want("3d", "event5", "3d", "1", k)
    );
    // A series: its last observation and count.
    assert_eq!(
        event(
            "event6",
            json!({"eventTime": micro_ago(3),
                "series": {"count": 2, "lastObservedTime": micro_ago(2)}})
        ),
        want("2d", "event6", "3d", "2", k)
    );
    // A singleton of the new API: no count, 1.
    assert_eq!(
        event("event7", json!({"eventTime": micro_ago(3)})),
        want("3d", "event7", "3d", "1", k)
    );
    // No source: the reporting controller and instance.
    assert_eq!(
        event(
            "event2",
            json!({"source": {}, "reportingComponent": "kubelet", "reportingInstance": "test",
                "firstTimestamp": ago(3), "lastTimestamp": ago(2), "count": 6})
        ),
        want("2d", "event2", "3d", "6", "kubelet, test")
    );
}

/// The first case, not wide: a pod's event, its kind lower-cased, the
/// source's component alone.
#[test]
fn should_print_a_pods_event() {
    let o = json!({
        "metadata": {"name": "event1"},
        "source": {"component": "kubelet"},
        "involvedObject": {"kind": "Pod", "name": "Pod Name", "fieldPath": "spec.containers{foo}"},
        "reason": "Event Reason", "message": "  Message Data\n",
        "firstTimestamp": ago(3), "lastTimestamp": ago(2), "count": 6, "type": "Normal"
    });
    let t = event_row(&serde_json::to_vec(&o).unwrap())
        .unwrap()
        .texts(now());
    assert_eq!(
        [&t[0], &t[1], &t[2], &t[3], &t[5], &t[6]],
        [
            "2d",
            "Normal",
            "Event Reason",
            "pod/Pod Name",
            "kubelet",
            "Message Data"
        ]
    );
}
