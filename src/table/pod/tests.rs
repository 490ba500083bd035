//! Goldens: kube-apiserver's `TestPrintPod`
//! (`pkg/printers/internalversion/printers_test.go`), each pod written as
//! its JSON, "now" fixed and the restarts' instants set relative to it.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

/// 2026-11-28T00:00:00Z.
fn now() -> SystemTime {
    SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000)
}

/// `now` minus `secs`, as the API writes an instant.
fn ago(secs: u64) -> String {
    humantime::format_rfc3339_seconds(now() - Duration::from_secs(secs)).to_string()
}

/// `n` containers, as `make([]api.Container, n)` (names left empty).
fn containers(n: usize) -> Value {
    Value::Array(vec![json!({"name": ""}); n])
}

fn cells(pod: Value) -> (Vec<String>, Option<&'static RowCondition>) {
    let r = row(&serde_json::to_vec(&pod).unwrap()).expect("a pod's row");
    let mut t = r.texts(now());
    t.truncate(5);
    (t, r.condition)
}

fn assert_row(pod: Value, want: [&str; 5]) {
    let name = pod["metadata"]["name"].clone();
    let (got, _) = cells(pod);
    assert_eq!(got, want, "{name}");
}

fn running(ready: bool, restarts: i64) -> Value {
    json!({"ready": ready, "restartCount": restarts, "state": {"running": {}}})
}

#[test]
fn should_print_readiness_and_the_phase() {
    assert_row(
        json!({"metadata": {"name": "test1"}, "spec": {"containers": containers(2)},
            "status": {"phase": "podPhase", "containerStatuses": [running(true, 3), {"restartCount": 3}]}}),
        ["test1", "1/2", "podPhase", "6", "<unknown>"],
    );
    // A container's error overrides the pod's phase.
    assert_row(
        json!({"metadata": {"name": "test2"}, "spec": {"containers": containers(2)},
            "status": {"phase": "podPhase", "containerStatuses": [running(true, 3),
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]}}),
        ["test2", "1/2", "ContainerWaitingReason", "6", "<unknown>"],
    );
    // Terminated too, and the first container's reason wins.
    assert_row(
        json!({"metadata": {"name": "test3"}, "spec": {"containers": containers(2)},
            "status": {"phase": "podPhase", "containerStatuses": [
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3},
                {"state": {"terminated": {"reason": "ContainerTerminatedReason"}}, "restartCount": 3}]}}),
        ["test3", "0/2", "ContainerWaitingReason", "6", "<unknown>"],
    );
    // Ready is not enough for running.
    assert_row(
        json!({"metadata": {"name": "test4"}, "spec": {"containers": containers(2)},
            "status": {"phase": "podPhase", "containerStatuses": [running(true, 3), {"ready": true, "restartCount": 3}]}}),
        ["test4", "1/2", "podPhase", "6", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test5"}, "spec": {"containers": containers(2)},
            "status": {"reason": "podReason", "phase": "podPhase",
                "containerStatuses": [running(true, 3), {"ready": true, "restartCount": 3}]}}),
        ["test5", "1/2", "podReason", "6", "<unknown>"],
    );
}

#[test]
fn should_say_not_ready_or_running_when_one_container_completed() {
    let statuses = json!([
        {"ready": true, "restartCount": 3, "state": {"terminated": {"reason": "Completed", "exitCode": 0}}},
        running(true, 3)
    ]);
    assert_row(
        json!({"metadata": {"name": "test6"}, "spec": {"containers": containers(2)},
            "status": {"phase": "Running", "reason": "", "containerStatuses": statuses}}),
        ["test6", "1/2", "NotReady", "6", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test6"}, "spec": {"containers": containers(2)},
            "status": {"phase": "Running", "reason": "", "containerStatuses": statuses,
                "conditions": [{"type": "Ready", "status": "True"}]}}),
        ["test6", "1/2", "Running", "6", "<unknown>"],
    );
}

#[test]
fn should_print_init_steps_and_when_the_last_restart_was() {
    let restarting = |n: i64, secs: u64| {
        json!({"ready": false, "restartCount": n, "state": {"running": {}},
            "lastState": {"terminated": {"finishedAt": ago(secs)}}})
    };
    let waiting = json!({"ready": false, "state": {"waiting": {}}});
    assert_row(
        json!({"metadata": {"name": "test7"}, "spec": {"initContainers": containers(1), "containers": containers(1)},
            "status": {"phase": "podPhase", "initContainerStatuses": [restarting(3, 10)],
                "containerStatuses": [{"ready": false, "restartCount": 0, "state": {"waiting": {}}}]}}),
        ["test7", "0/1", "Init:0/1", "3 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test8"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
            "status": {"phase": "podPhase", "initContainerStatuses": [restarting(3, 10), waiting],
                "containerStatuses": [waiting]}}),
        ["test8", "0/1", "Init:0/2", "3 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test9"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
            "status": {"phase": "podPhase", "initContainerStatuses": [
                {"ready": false, "state": {"terminated": {}}}, restarting(3, 10)],
                "containerStatuses": [waiting]}}),
        ["test9", "0/1", "Init:1/2", "3 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test10"}, "spec": {"initContainers": containers(2), "containers": containers(1)},
            "status": {"phase": "podPhase", "initContainerStatuses": [
                {"ready": false, "restartCount": 2, "state": {"terminated": {}},
                    "lastState": {"terminated": {"finishedAt": ago(120)}}},
                restarting(3, 10)],
                "containerStatuses": [waiting]}}),
        ["test10", "0/1", "Init:1/2", "5 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test11"}, "spec": {"initContainers": containers(1), "containers": containers(1)},
            "status": {"phase": "Running", "initContainerStatuses": [
                {"ready": false, "restartCount": 2, "state": {"terminated": {}},
                    "lastState": {"terminated": {"finishedAt": ago(120)}}}],
                "containerStatuses": [restarting(4, 20)]}}),
        ["test11", "0/1", "Running", "4 (20s ago)", "<unknown>"],
    );
}

#[test]
fn should_print_the_latest_restart_in_days() {
    let day = 86_400;
    let restarted = |n: i64, secs: u64| {
        json!({"ready": true, "restartCount": n, "state": {"running": {}},
            "lastState": {"terminated": {"finishedAt": ago(secs)}}})
    };
    assert_row(
        json!({"metadata": {"name": "test12"}, "spec": {"containers": containers(1)},
            "status": {"phase": "Running", "containerStatuses": [restarted(3, 5 * day)]}}),
        ["test12", "1/1", "Running", "3 (5d ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test13"}, "spec": {"containers": containers(2)},
            "status": {"phase": "Running", "containerStatuses": [running(true, 0), restarted(3, 10 * day)]}}),
        ["test13", "2/2", "Running", "3 (10d ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test14"}, "spec": {"containers": containers(2)},
            "status": {"phase": "Running", "containerStatuses": [restarted(6, 5 * day), restarted(3, 20 * day)]}}),
        ["test14", "2/2", "Running", "9 (5d ago)", "<unknown>"],
    );
}

#[test]
fn should_print_gated_ended_and_deleted_pods() {
    assert_row(
        json!({"metadata": {"name": "test15"}, "spec": {"containers": containers(2)},
            "status": {"phase": "podPhase", "conditions": [
                {"type": "PodScheduled", "status": "False", "reason": "SchedulingGated"}]}}),
        ["test15", "0/2", "SchedulingGated", "0", "<unknown>"],
    );
    let ended = |name: &str, phase: &str, reason: &str, code: i64, deleted: bool| {
        let mut p = json!({"metadata": {"name": name}, "spec": {"containers": containers(1)},
            "status": {"phase": phase, "containerStatuses": [{"ready": false, "restartCount": 0,
                "state": {"terminated": {"reason": reason, "exitCode": code}}}]}});
        if deleted {
            p["metadata"]["deletionTimestamp"] = json!(ago(10));
        }
        p
    };
    let (c, cond) = cells(ended("test16", "Succeeded", "Completed", 0, false));
    assert_eq!(c, ["test16", "0/1", "Completed", "0", "<unknown>"]);
    assert_eq!(cond, Some(&SUCCEEDED));
    let (c, cond) = cells(ended("test17", "Failed", "Error", 1, false));
    assert_eq!(c, ["test17", "0/1", "Error", "0", "<unknown>"]);
    assert_eq!(cond, Some(&FAILED));
    // An ended pod being deleted still says how it ended.
    let (c, cond) = cells(ended("test18", "Succeeded", "Completed", 0, true));
    assert_eq!(c, ["test18", "0/1", "Completed", "0", "<unknown>"]);
    assert_eq!(cond, Some(&SUCCEEDED));
}

#[test]
fn should_say_terminating_for_a_live_pod_being_deleted() {
    for (name, phase, statuses) in [
        (
            "test19",
            "Running",
            json!([{"ready": false, "restartCount": 0, "state": {"running": {}}}]),
        ),
        ("test20", "Pending", json!([])),
    ] {
        assert_row(
            json!({"metadata": {"name": name, "deletionTimestamp": ago(10)},
                "spec": {"containers": containers(1)},
                "status": {"phase": phase, "containerStatuses": statuses}}),
            [name, "0/1", "Terminating", "0", "<unknown>"],
        );
    }
}

/// `TestPrintPodWithRestartableInitContainer`: sidecars count as
/// containers, and their restarts count once the pod is initialized.
#[test]
fn should_count_sidecars_as_kube_does() {
    let spec = json!({"initContainers": [
        {"name": "restartable-init-1", "restartPolicy": "Always"},
        {"name": "restartable-init-2", "restartPolicy": "Always"}],
        "containers": containers(1)});
    let first = |started: bool, state: Value| {
        json!({"name": "restartable-init-1", "ready": false, "restartCount": 3, "state": state,
            "started": started, "lastState": {"terminated": {"finishedAt": ago(10)}}})
    };
    let second = |started: bool, state: Value| json!({"name": "restartable-init-2", "ready": false, "state": state, "started": started});
    let waiting = json!([{"ready": false, "restartCount": 0, "state": {"waiting": {}}}]);
    let init = |s: &str| json!([{"type": "Initialized", "status": s}]);
    assert_row(
        json!({"metadata": {"name": "test1"}, "spec": spec, "status": {"phase": "Pending",
            "initContainerStatuses": [first(false, json!({"running": {}})), second(false, json!({"waiting": {}}))],
            "containerStatuses": waiting, "conditions": init("False")}}),
        ["test1", "0/3", "Init:0/2", "3 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test1"}, "spec": spec, "status": {"phase": "Pending",
            "initContainerStatuses": [first(true, json!({"running": {}})), second(false, json!({"running": {}}))],
            "containerStatuses": waiting, "conditions": init("False")}}),
        ["test1", "0/3", "Init:1/2", "3 (10s ago)", "<unknown>"],
    );
    assert_row(
        json!({"metadata": {"name": "test2"}, "spec": spec, "status": {"phase": "Running",
            "initContainerStatuses": [first(true, json!({"running": {}})), second(true, json!({"running": {}}))],
            "containerStatuses": [{"ready": true, "restartCount": 4, "state": {"running": {}},
                "lastState": {"terminated": {"finishedAt": ago(20)}}}],
            "conditions": init("True")}}),
        ["test2", "1/3", "Running", "7 (10s ago)", "<unknown>"],
    );
    let error = json!({"terminated": {"reason": "Error", "exitCode": 137}});
    let (c, cond) = cells(
        json!({"metadata": {"name": "test3"}, "spec": spec, "status": {"phase": "Succeeded",
        "initContainerStatuses": [first(false, error.clone()), second(false, error)],
        "containerStatuses": [{"ready": false, "restartCount": 4,
            "state": {"terminated": {"reason": "Completed", "exitCode": 0}},
            "lastState": {"terminated": {"finishedAt": ago(20)}}}],
        "conditions": init("True")}}),
    );
    assert_eq!(c, ["test3", "0/3", "Completed", "7 (10s ago)", "<unknown>"]);
    assert_eq!(cond, Some(&SUCCEEDED));
    // Statuses of containers the spec does not have.
    assert_row(
        json!({"metadata": {"name": "test4"}, "spec": {
                "initContainers": [{"name": "init1", "image": "initimage"},
                    {"name": "sidecar1", "image": "sidecarimage", "restartPolicy": "Always"}],
                "containers": [{"name": "container1", "image": "containerimage"}]},
            "status": {"phase": "Running",
                "initContainerStatuses": [{"name": "initinvalid"}, {"name": "init1"}, {"name": "sidecar1"}],
                "containerStatuses": [{"name": "containerinvalid"}, {"name": "container1"}]}}),
        ["test4", "0/2", "Init:0/2", "0", "<unknown>"],
    );
}

/// `TestPrintPodwide`: the IP (the first of `podIPs`), node, nominated
/// node and readiness gates passed.
#[test]
fn should_print_the_wide_columns() {
    let gated = |ips: Value| {
        json!({"metadata": {"name": "test1"},
            "spec": {"containers": containers(2), "nodeName": "test1", "readinessGates": [
                {"conditionType": "condition1"}, {"conditionType": "condition2"}, {"conditionType": "condition3"}]},
            "status": {"conditions": [{"type": "condition1", "status": "False"}, {"type": "condition2", "status": "True"}],
                "phase": "podPhase", "podIPs": ips, "nominatedNodeName": "node1",
                "containerStatuses": [running(true, 3), {"restartCount": 3}]}})
    };
    let wide = |pod: Value| {
        row(&serde_json::to_vec(&pod).unwrap())
            .unwrap()
            .texts(now())
    };
    let want = [
        "test1",
        "1/2",
        "podPhase",
        "6",
        "<unknown>",
        "1.1.1.1",
        "test1",
        "node1",
        "1/3",
    ];
    assert_eq!(wide(gated(json!([{"ip": "1.1.1.1"}]))), want);
    assert_eq!(
        wide(gated(json!([{"ip": "1.1.1.1"}, {"ip": "2001:db8::"}]))),
        want
    );
    assert_eq!(
        wide(
            json!({"metadata": {"name": "test2"}, "spec": {"containers": containers(2), "nodeName": ""},
            "status": {"phase": "podPhase", "containerStatuses": [running(true, 3),
                {"state": {"waiting": {"reason": "ContainerWaitingReason"}}, "restartCount": 3}]}})
        ),
        [
            "test2",
            "1/2",
            "ContainerWaitingReason",
            "6",
            "<unknown>",
            "<none>",
            "<none>",
            "<none>",
            "<none>"
        ]
    );
}

/// `TestPrintPodConditions`: ended pods carry a `Completed` condition.
#[test]
fn should_mark_ended_pods_completed() {
    let pod = |name: &str, phase: &str| {
        json!({"metadata": {"name": name, "labels": {"a": "1", "b": "2"}}, "spec": {"containers": containers(2)},
            "status": {"phase": phase, "containerStatuses": [running(true, 3), {"restartCount": 3}]}})
    };
    assert_eq!(
        cells(pod("test1", "Running")),
        (
            vec![
                "test1".into(),
                "1/2".into(),
                "Running".into(),
                "6".into(),
                "<unknown>".into()
            ],
            None
        )
    );
    assert_eq!(cells(pod("test1", "Succeeded")).1, Some(&SUCCEEDED));
    assert_eq!(
        cells(pod("test2", "Failed")),
        (
            vec![
                "test2".into(),
                "1/2".into(),
                "Failed".into(),
                "6".into(),
                "<unknown>".into()
            ],
            Some(&FAILED)
        )
    );
}

#[test]
fn should_print_the_age_when_asked() {
    let pod = json!({"metadata": {"name": "p", "creationTimestamp": ago(3 * 3600 + 60)},
        "spec": {"containers": containers(1)}, "status": {"phase": "Pending"}});
    assert_eq!(cells(pod).0[4], "3h1m");
}
