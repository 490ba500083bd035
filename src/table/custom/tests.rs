//! Goldens: Kubernetes 1.36.3's Table of a custom resource with a column of
//! each type and kind of path (recorded from the 1.36 kit,
//! `../shared/tools/kube-apiserver-1.36`, on 2026-11-28: its definition and
//! objects below, the cells it answered in the comments' order).

use std::time::SystemTime;

use serde_json::{Value, json};

use super::*;
use crate::table::json::{RowObject, put_row};

fn definition() -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
        "metadata": {"name": "gadgets.example.com"},
        "spec": {"group": "example.com", "scope": "Namespaced",
            "versions": [{"name": "v1", "served": true, "storage": true,
                "additionalPrinterColumns": [
                    {"name": "Count", "type": "integer", "jsonPath": ".spec.count"},
                    {"name": "Ratio", "type": "number", "jsonPath": ".spec.ratio"},
                    {"name": "On", "type": "boolean", "jsonPath": ".spec.on"},
                    {"name": "Label", "type": "string", "jsonPath": ".spec.label", "description": "The gadget's label."},
                    {"name": "AsText", "type": "string", "jsonPath": ".spec.count"},
                    {"name": "FloatText", "type": "string", "jsonPath": ".spec.ratio"},
                    {"name": "BoolText", "type": "string", "jsonPath": ".spec.on"},
                    {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"},
                    {"name": "First", "type": "string", "jsonPath": ".spec.items[0]", "priority": 1},
                    {"name": "Missing", "type": "string", "jsonPath": ".spec.nothing"},
                    {"name": "IntOfString", "type": "integer", "jsonPath": ".spec.label"},
                    {"name": "When", "type": "date", "jsonPath": ".spec.when"},
                    {"name": "Bad", "type": "date", "jsonPath": ".spec.label"},
                    {"name": "Key", "type": "string", "format": "byte", "jsonPath": ".metadata.labels.app"},
                    {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}]}]}})
}

fn printer() -> Custom {
    Custom::from_definition(&serde_json::to_vec(&definition()).unwrap(), "v1").unwrap()
}

/// 1.36 answered at 10:27:19, 147 minutes after the g1's `when`.
fn now() -> SystemTime {
    humantime::parse_rfc3339("2026-11-28T10:27:19Z").unwrap()
}

fn gadget(name: &str, labels: Value, spec: Value) -> Vec<u8> {
    serde_json::to_vec(&json!({"apiVersion": "example.com/v1", "kind": "Gadget",
        "metadata": {"creationTimestamp": "2026-11-28T10:27:19Z", "generation": 1, "labels": labels,
            "name": name, "namespace": "default", "resourceVersion": "26"},
        "spec": spec}))
    .unwrap()
}

/// The row as the apiserver's JSON writes it.
fn cells(row: &Row) -> Value {
    let mut out = BytesMut::new();
    put_row(&mut out, row, RowObject::None, "meta.k8s.io/v1", now());
    serde_json::from_slice::<Value>(&out).unwrap()["cells"].clone()
}

#[test]
fn should_define_columns_as_1_36_does() {
    let p = printer();
    let got: Vec<(String, String, String, i32)> = p
        .columns()
        .iter()
        .map(|c| {
            (
                c.name.to_string(),
                c.ty.to_string(),
                c.format.to_string(),
                c.priority,
            )
        })
        .collect();
    assert_eq!(got[0], ("Name".into(), "string".into(), "name".into(), 0));
    assert_eq!(got[9], ("First".into(), "string".into(), "".into(), 1));
    assert_eq!(got[14], ("Key".into(), "string".into(), "byte".into(), 0));
    assert_eq!(p.columns()[4].description, "The gadget's label.");
    assert_eq!(
        p.columns()[8].description,
        "Custom resource definition column (in JSONPath format): .status.conditions[?(@.type==\"Ready\")].status"
    );
    assert_eq!(p.columns().len(), 16);
}

#[test]
fn should_print_cells_as_1_36_does() {
    let p = printer();
    let g1 = gadget(
        "g1",
        json!({"app": "alpha"}),
        json!({"count": 3, "ratio": 2.5, "on": true, "label": "blue <b>", "items": ["x", "y"], "when": "2026-11-28T08:00:00Z"}),
    );
    assert_eq!(
        cells(&p.row(&g1).unwrap()),
        json!([
            "g1",
            3,
            2.5,
            true,
            "blue <b>",
            "3",
            "2.5",
            "true",
            null,
            "x",
            null,
            null,
            "147m",
            "<invalid>",
            "alpha",
            "0s"
        ])
    );
    let g2 = gadget(
        "g2",
        json!(null),
        json!({"count": 7.9, "ratio": 4, "on": false, "label": "", "items": [], "when": "not a time"}),
    );
    assert_eq!(
        cells(&p.row(&g2).unwrap()),
        json!([
            "g2",
            7,
            4,
            false,
            "",
            "7.9",
            "4",
            "false",
            null,
            null,
            null,
            null,
            "<invalid>",
            "<unknown>",
            null,
            "0s"
        ])
    );
    // 1.36 answered g3 with a ratio of 1e21 written "1e+21"; r8s writes
    // floats as Go does between 1e-6 and 1e21 only, and passes the rest.
    let g3 = |ratio: Value| {
        gadget(
            "g3",
            json!(null),
            json!({"count": "12", "ratio": ratio, "on": "yes", "label": 5, "items": [{"a": 1, "<": [true]}], "when": 5}),
        )
    };
    assert!(p.row(&g3(json!(1e21))).is_none());
    assert_eq!(
        cells(&p.row(&g3(json!(0.5))).unwrap()),
        json!([
            "g3",
            null,
            0.5,
            null,
            "5",
            "12",
            "0.5",
            "yes",
            null,
            "{\"\\u003c\":[true],\"a\":1}",
            null,
            5,
            null,
            null,
            null,
            "0s"
        ])
    );
}

/// A status condition's value by a filter (the commonest custom column).
#[test]
fn should_find_a_condition_by_its_type() {
    let d = json!({"spec": {"versions": [{"name": "v1", "additionalPrinterColumns": [
        {"name": "Ready", "type": "string", "jsonPath": ".status.conditions[?(@.type==\"Ready\")].status"}]}]}});
    let p = Custom::from_definition(&serde_json::to_vec(&d).unwrap(), "v1").unwrap();
    let o = json!({"metadata": {"name": "c"}, "status": {"conditions": [
        {"type": "Other", "status": "False"}, {"type": "Ready", "status": "True"}]}});
    let row = p.row(&serde_json::to_vec(&o).unwrap()).unwrap();
    assert_eq!(cells(&row), json!(["c", "True"]));
    assert!(Custom::from_definition(&serde_json::to_vec(&d).unwrap(), "v2").is_none());
}

/// A definition with no columns is printed with an Age column, described as
/// `creationTimestamp` is (1.36's Table of such a resource, recorded the same
/// day).
#[test]
fn should_print_an_age_where_the_definition_has_no_columns() {
    let d = json!({"spec": {"versions": [{"name": "v1", "served": true}]}});
    let p = Custom::from_definition(&serde_json::to_vec(&d).unwrap(), "v1").unwrap();
    let names: Vec<&str> = p.columns().iter().map(|c| &*c.name).collect();
    assert_eq!(names, ["Name", "Age"]);
    assert_eq!(p.columns()[1].ty, "date");
    assert_eq!(p.columns()[1].description, CREATED_DOC);
    let o = json!({"metadata": {"name": "p1", "creationTimestamp": "2026-11-28T10:27:19Z"}});
    assert_eq!(
        cells(&p.row(&serde_json::to_vec(&o).unwrap()).unwrap()),
        json!(["p1", "0s"])
    );
}
