//! Goldens: nodes from kube-apiserver's `TestPrintNodeStatus`,
//! `TestPrintNodeRole`, `TestPrintNodeOSImage`, `TestPrintNodeKernelVersion`,
//! `TestPrintNodeContainerRuntimeVersion`, `TestPrintNodeName`,
//! `TestPrintNodeExternalIP` and `TestPrintNodeInternalIP`
//! (`pkg/printers/internalversion/printers_test.go`); the others from
//! `printNamespace`, `printConfigMap`, `printSecret` and
//! `printServiceAccount` in `printers.go`.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn texts(f: fn(&[u8]) -> Option<Row>, o: Value) -> Vec<String> {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    f(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(now)
}

fn node(o: Value) -> Vec<String> {
    let mut t = texts(node_row, o);
    t.truncate(5);
    t
}

fn wide_node(o: Value) -> Vec<String> {
    texts(node_row, o)
}

#[test]
fn should_print_a_nodes_status() {
    let ready = |s: &str| json!({"type": "Ready", "status": s});
    for (name, unschedulable, conditions, want) in [
        ("foo1", false, json!([ready("True")]), "Ready"),
        (
            "foo2",
            true,
            json!([ready("True")]),
            "Ready,SchedulingDisabled",
        ),
        (
            "foo3",
            false,
            json!([ready("True"), ready("True")]),
            "Ready",
        ),
        ("foo4", false, json!([ready("False")]), "NotReady"),
        (
            "foo5",
            true,
            json!([ready("False")]),
            "NotReady,SchedulingDisabled",
        ),
        (
            "foo6",
            false,
            json!([{"type": "InvalidValue", "status": "True"}]),
            "Unknown",
        ),
        ("foo7", false, json!([{}]), "Unknown"),
        (
            "foo8",
            true,
            json!([{"type": "InvalidValue", "status": "True"}]),
            "Unknown,SchedulingDisabled",
        ),
        ("foo9", true, json!([{}]), "Unknown,SchedulingDisabled"),
    ] {
        assert_eq!(
            node(
                json!({"metadata": {"name": name}, "spec": {"unschedulable": unschedulable},
                "status": {"conditions": conditions}})
            ),
            [name, want, "<none>", "<unknown>", ""],
            "{name}"
        );
    }
}

#[test]
fn should_print_a_nodes_roles_and_name() {
    assert_eq!(
        node(json!({"metadata": {"name": "foo9"}})),
        ["foo9", "Unknown", "<none>", "<unknown>", ""]
    );
    assert_eq!(
        node(json!({"metadata": {"name": "foo10", "labels": {
            "node-role.kubernetes.io/master": "", "node-role.kubernetes.io/control-plane": "",
            "node-role.kubernetes.io/proxy": "", "kubernetes.io/role": "node"}}})),
        [
            "foo10",
            "Unknown",
            "control-plane,master,node,proxy",
            "<unknown>",
            ""
        ]
    );
    assert_eq!(
        node(json!({"metadata": {"name": "foo11", "labels": {"kubernetes.io/role": "node"}}})),
        ["foo11", "Unknown", "node", "<unknown>", ""]
    );
    assert_eq!(
        node(json!({"metadata": {"name": "127.0.0.1"}, "status": {}}))[0],
        "127.0.0.1"
    );
    assert_eq!(
        node(json!({"metadata": {"name": ""}, "status": {}})),
        ["", "Unknown", "<none>", "<unknown>", ""]
    );
}

#[test]
fn should_print_a_nodes_wide_columns() {
    let ext = json!([{"type": "ExternalIP", "address": "1.1.1.1"}]);
    let base = ["Unknown", "<none>", "<unknown>", ""];
    let row = |name: &str, rest: [&str; 5]| {
        let mut v = vec![name.to_string()];
        v.extend(base.iter().map(|s| s.to_string()));
        v.extend(rest.iter().map(|s| s.to_string()));
        v
    };
    for (info, want) in [
        (
            json!({"osImage": "fake-os-image"}),
            [
                "<none>",
                "1.1.1.1",
                "fake-os-image",
                "<unknown>",
                "<unknown>",
            ],
        ),
        (
            json!({"kernelVersion": "fake-kernel-version"}),
            [
                "<none>",
                "1.1.1.1",
                "<unknown>",
                "fake-kernel-version",
                "<unknown>",
            ],
        ),
        (
            json!({"containerRuntimeVersion": "foo://1.2.3"}),
            ["<none>", "1.1.1.1", "<unknown>", "<unknown>", "foo://1.2.3"],
        ),
        (
            json!({}),
            ["<none>", "1.1.1.1", "<unknown>", "<unknown>", "<unknown>"],
        ),
    ] {
        assert_eq!(
            wide_node(
                json!({"metadata": {"name": "foo1"}, "status": {"nodeInfo": info, "addresses": ext}})
            ),
            row("foo1", want)
        );
    }
    let addresses = |a: Value| {
        wide_node(json!({"metadata": {"name": "n"}, "status": {"addresses": a}}))[5..7].to_vec()
    };
    assert_eq!(
        addresses(json!([{"type": "InternalIP", "address": "1.1.1.1"}])),
        ["1.1.1.1", "<none>"]
    );
    assert_eq!(
        addresses(
            json!([{"type": "ExternalIP", "address": "2.2.2.2"}, {"type": "InternalIP", "address": "3.3.3.3"},
            {"type": "ExternalIP", "address": "4.4.4.4"}])
        ),
        ["3.3.3.3", "2.2.2.2"]
    );
    assert_eq!(
        addresses(
            json!([{"type": "InternalIP", "address": "2.2.2.2"}, {"type": "ExternalIP", "address": "3.3.3.3"},
            {"type": "InternalIP", "address": "4.4.4.4"}])
        ),
        ["2.2.2.2", "3.3.3.3"]
    );
}

#[test]
fn should_count_keys_never_print_values() {
    let created = "2026-11-27T23:00:00Z";
    assert_eq!(
        texts(
            namespace_row,
            json!({"metadata": {"name": "ns-1", "creationTimestamp": created}, "status": {"phase": "Active"}})
        ),
        ["ns-1", "Active", "60m"]
    );
    assert_eq!(
        texts(
            config_map_row,
            json!({"metadata": {"name": "c"}, "data": {"a": "1", "b": "2"}, "binaryData": {"c": "AA=="}})
        ),
        ["c", "3", "<unknown>"]
    );
    assert_eq!(
        texts(config_map_row, json!({"metadata": {"name": "empty"}})),
        ["empty", "0", "<unknown>"]
    );
    let s = json!({"metadata": {"name": "s"}, "type": "kubernetes.io/tls", "data": {"tls.crt": "c2VjcmV0", "tls.key": "a2V5"}});
    assert_eq!(
        texts(secret_row, s.clone()),
        ["s", "kubernetes.io/tls", "2", "<unknown>"]
    );
    // The count is a number in the JSON, as the apiserver's int64 cell.
    let r = secret_row(&serde_json::to_vec(&s).unwrap()).unwrap();
    assert_eq!(r.cells[2], Cell::Int(2));
    assert_eq!(
        texts(
            service_account_row,
            json!({"metadata": {"name": "default"}, "secrets": [{"name": "t"}]})
        ),
        ["default", "1", "<unknown>"]
    );
}
