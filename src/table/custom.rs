//! A custom resource's printer: `Name`, then the `additionalPrinterColumns`
//! its definition gives the served version, as the apiextensions apiserver
//! prints them (`pkg/registry/customresource/tableconvertor`): each column's
//! first JSONPath result, coerced to the column's type (`cellForJSONValue`),
//! a `string` column printed as client-go's jsonpath prints it; what is
//! missing or of another type is `null`.
//!
//! Checked against Kubernetes 1.36.3's answers (`custom/tests.rs`).

use std::borrow::Cow;

use bytes::BytesMut;
use serde::Deserialize;
use serde_json::Value;

use super::cell::{CREATED_DOC, Cell, Column, Row, Text};
use super::json::put_json_str;
use super::jsonpath::JsonPath;

/// A column's type, as the definition gives it.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Integer,
    Number,
    Boolean,
    String,
    Date,
}

/// The printer of one version of a custom resource.
#[derive(Debug)]
pub struct Custom {
    columns: Vec<Column>,
    paths: Vec<(JsonPath, Kind)>,
}

#[derive(Deserialize)]
struct Definition {
    spec: DefinitionSpec,
}

#[derive(Deserialize)]
struct DefinitionSpec {
    #[serde(default)]
    versions: Vec<DefinitionVersion>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct DefinitionVersion {
    name: String,
    #[serde(default)]
    additional_printer_columns: Vec<PrinterColumn>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct PrinterColumn {
    name: String,
    #[serde(rename = "type")]
    ty: String,
    #[serde(default)]
    format: String,
    #[serde(default)]
    description: String,
    #[serde(default)]
    priority: i32,
    json_path: String,
}

impl Custom {
    /// The printer of `version` from its CustomResourceDefinition's JSON;
    /// `None` where the definition does not serve it, or a column's path or
    /// type is one r8s does not print as the apiserver does.
    pub fn from_definition(crd: &[u8], version: &str) -> Option<Custom> {
        let d: Definition = serde_json::from_slice(crd).ok()?;
        let v = d.spec.versions.into_iter().find(|v| v.name == version)?;
        let mut columns = vec![Column::name()];
        let mut paths = Vec::new();
        let mut defined = v.additional_printer_columns;
        if defined.is_empty() {
            // `serveDefaultColumnsIfEmpty`: an Age column, documented as
            // `creationTimestamp` is.
            defined.push(PrinterColumn {
                name: "Age".into(),
                ty: "date".into(),
                format: String::new(),
                description: CREATED_DOC.into(),
                priority: 0,
                json_path: ".metadata.creationTimestamp".into(),
            });
        }
        for c in defined {
            let kind = match c.ty.as_str() {
                "integer" => Kind::Integer,
                "number" => Kind::Number,
                "boolean" => Kind::Boolean,
                "string" => Kind::String,
                "date" => Kind::Date,
                _ => return None,
            };
            paths.push((JsonPath::parse(&c.json_path)?, kind));
            let description = match c.description.as_str() {
                "" => format!(
                    "Custom resource definition column (in JSONPath format): {}",
                    c.json_path
                ),
                _ => c.description,
            };
            columns.push(Column {
                name: Cow::Owned(c.name),
                ty: Cow::Owned(c.ty),
                format: Cow::Owned(c.format),
                description: Cow::Owned(description),
                priority: c.priority,
            });
        }
        Some(Custom { columns, paths })
    }

    /// The columns: `Name`, then the definition's.
    pub fn columns(&self) -> &[Column] {
        &self.columns
    }

    /// An object's row from its JSON; `None` when it is not JSON or holds
    /// a value r8s would print unlike the apiserver.
    pub fn row(&self, body: &[u8]) -> Option<Row> {
        let v: Value = serde_json::from_slice(body).ok()?;
        let name = v.pointer("/metadata/name").and_then(Value::as_str);
        let mut cells = vec![Cell::Text(Text::from(name.unwrap_or("")))];
        for (path, kind) in &self.paths {
            cells.push(cell(*kind, path.first(&v).ok()?)?);
        }
        Some(Row {
            cells,
            condition: None,
        })
    }
}

/// `cellForJSONValue`, and for `string` columns client-go's printing of the
/// value; `None` for a value r8s cannot write as Go does.
fn cell(kind: Kind, v: Option<&Value>) -> Option<Cell> {
    let Some(v) = v.filter(|v| !v.is_null()) else {
        return Some(Cell::Null);
    };
    Some(match (kind, v) {
        (Kind::Integer, Value::Number(n)) => match n.as_i64() {
            Some(i) => Cell::Int(i),
            // Go truncates a float64 to int64.
            None => Cell::Int(n.as_f64()? as i64),
        },
        (Kind::Number, Value::Number(n)) => Cell::Float(json_float(n.as_f64()?)?),
        (Kind::Boolean, Value::Bool(b)) => Cell::Bool(*b),
        (Kind::String, v) => Cell::Text(Text::from(go_text(v)?)),
        (Kind::Date, Value::String(s)) => match s.as_str() {
            "" | "null" => Cell::Since(None),
            s => match humantime::parse_rfc3339_weak(s) {
                Ok(t) => Cell::Since(Some(t)),
                // An offset other than Z: Go reads it, humantime does not.
                Err(_) if has_offset(s) => return None,
                Err(_) => Cell::Text(Text::from("<invalid>")),
            },
        },
        _ => Cell::Null,
    })
}

/// Whether an RFC 3339 time ends with a `+hh:mm` or `-hh:mm` offset.
fn has_offset(s: &str) -> bool {
    let b = s.as_bytes();
    b.len() > 6 && matches!(b[b.len() - 6], b'+' | b'-') && b[b.len() - 3] == b':'
}

/// A float64 as a cell: what r8s writes with Rust's shortest form equals
/// Go's JSON only between 1e-6 and 1e21; elsewhere the Table passes.
fn json_float(f: f64) -> Option<f64> {
    let a = f.abs();
    (f.is_finite() && (a == 0.0 || (1e-6..1e21).contains(&a))).then_some(f)
}

/// A value as client-go's jsonpath prints it: a string as it is, a number
/// or boolean as Go's `fmt` writes it (`%v`), an object or array as
/// `json.Marshal` does.
fn go_text(v: &Value) -> Option<String> {
    Some(match v {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => match n.as_i64() {
            Some(i) => i.to_string(),
            None => {
                let f = n.as_f64()?;
                // `%v`: exponent form below 1e-4 and from 1e21.
                let a = f.abs();
                if a != 0.0 && !(1e-4..1e21).contains(&a) {
                    return None;
                }
                f.to_string()
            }
        },
        Value::Null => return None,
        v => {
            let mut out = BytesMut::new();
            go_json(v, &mut out)?;
            String::from_utf8(out.to_vec()).ok()?
        }
    })
}

/// `json.Marshal` of a decoded value: keys in order, Go's escapes.
fn go_json(v: &Value, out: &mut BytesMut) -> Option<()> {
    match v {
        Value::Null => out.extend_from_slice(b"null"),
        Value::Bool(b) => out.extend_from_slice(if *b { b"true" } else { b"false" }),
        Value::Number(n) => match n.as_i64() {
            Some(i) => out.extend_from_slice(i.to_string().as_bytes()),
            None => out.extend_from_slice(json_float(n.as_f64()?)?.to_string().as_bytes()),
        },
        Value::String(s) => put_json_str(out, s),
        Value::Array(a) => {
            out.extend_from_slice(b"[");
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b",");
                }
                go_json(x, out)?;
            }
            out.extend_from_slice(b"]");
        }
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.extend_from_slice(b"{");
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b",");
                }
                put_json_str(out, k);
                out.extend_from_slice(b":");
                go_json(&m[k], out)?;
            }
            out.extend_from_slice(b"}");
        }
    }
    Some(())
}

#[cfg(test)]
mod tests;
