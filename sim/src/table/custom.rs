//! The sim's Tables of custom resources: its own reading of the
//! apiextensions apiserver's table convertor. `Name`, then the version's
//! `additionalPrinterColumns` (an `Age` of `creationTimestamp` where it has
//! none), each the value at its path (dotted paths only), as the column's
//! type: integers truncated, a date as how long ago, `null` where there is
//! none or it is of another type.

use serde_json::{Value, json};

use super::cells::*;
use crate::resources::ResourceDef;

/// The columns, and each one's path and type.
pub(super) fn columns(def: &ResourceDef) -> (Vec<Value>, Vec<(String, String)>) {
    let defined = match def.columns.is_empty() {
        true => vec![
            json!({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp",
                            "description": CREATED_DOC}),
        ],
        false => def.columns.clone(),
    };
    let mut cols = vec![name_col()];
    let mut paths = Vec::new();
    for c in &defined {
        let path = text(&c["jsonPath"]).to_string();
        let doc = match text(&c["description"]) {
            "" => format!("Custom resource definition column (in JSONPath format): {path}"),
            d => d.to_string(),
        };
        let priority = c["priority"].as_u64().unwrap_or(0) as u8;
        cols.push(col(
            text(&c["name"]),
            text(&c["type"]),
            text(&c["format"]),
            priority,
            &doc,
        ));
        paths.push((path, text(&c["type"]).to_string()));
    }
    (cols, paths)
}

/// An object's cells under `paths`.
pub(super) fn cells(o: &Value, paths: &[(String, String)]) -> Vec<Value> {
    let mut out = vec![json!(text(&o["metadata"]["name"]))];
    for (path, ty) in paths {
        let at = path
            .trim_start_matches('.')
            .split('.')
            .filter(|k| !k.is_empty())
            .fold(o, |v, k| &v[k]);
        out.push(match (ty.as_str(), at) {
            (_, Value::Null) => Value::Null,
            ("integer", Value::Number(n)) => json!(n.as_i64().or(n.as_f64().map(|f| f as i64))),
            ("number", Value::Number(n)) => json!(n),
            ("boolean", Value::Bool(b)) => json!(b),
            ("string", Value::String(s)) => json!(s),
            ("string", v @ (Value::Number(_) | Value::Bool(_))) => json!(v.to_string()),
            ("date", v @ Value::String(_)) => json!(since(v).unwrap_or_else(|| "<invalid>".into())),
            _ => Value::Null,
        });
    }
    out
}
