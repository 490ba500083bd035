//! The printer of kinds kube-apiserver has no printer for: its default
//! Table convertor (`rest.NewDefaultTableConvertor`, `staging/src/k8s.io/
//! apiserver/pkg/registry/rest/table.go`), `Name` and `Created At`. r8s
//! uses it only where the apiserver does: custom resource definitions (as
//! the 1.36 kit shows), roles and cluster roles (whose registries use it;
//! `printers.go` has no printer of them).

use std::time::SystemTime;

use super::cell::{CREATED_DOC, Cell, Column, Meta, Row, Text, parse_time};

/// The default convertor's columns.
pub static COLUMNS: &[Column] = &[
    Column::name(),
    Column::typed("Created At", "date", CREATED_DOC),
];

/// `creationTimestamp` in UTC, to the second (`time.RFC3339`), the zero
/// time's `0001-01-01T00:00:00Z` without one (a bookmark's empty object).
fn created(t: Option<SystemTime>) -> String {
    match t {
        Some(t) => humantime::format_rfc3339_seconds(t).to_string(),
        None => "0001-01-01T00:00:00Z".into(),
    }
}

/// An object's row: its name and when it was created.
pub fn row(body: &[u8]) -> Option<Row> {
    #[derive(serde::Deserialize, Default)]
    #[serde(default)]
    struct Object<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
    }
    let o: Object = serde_json::from_slice(body).ok()?;
    let at = o
        .metadata
        .creation_timestamp
        .as_deref()
        .and_then(parse_time);
    Some(Row {
        cells: vec![o.metadata.name(), Cell::Text(Text::from(created(at)))],
        condition: None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As the 1.36 kit prints a definition and the bookmark ending a
    /// streaming list of them.
    #[test]
    fn should_print_the_name_and_creation_in_utc() {
        let row = row(br#"{"metadata":{"name":"gadgets.example.com","creationTimestamp":"2026-11-28T12:49:20Z"}}"#).unwrap();
        let now = SystemTime::UNIX_EPOCH;
        assert_eq!(
            row.texts(now),
            ["gadgets.example.com", "2026-11-28T12:49:20Z"]
        );
        let empty = super::row(br#"{"metadata":{"resourceVersion":"4"}}"#).unwrap();
        assert_eq!(empty.texts(now), ["", "0001-01-01T00:00:00Z"]);
        assert_eq!(COLUMNS[1].ty, "date");
    }
}
