//! A Table in JSON, as kube-apiserver's encoder writes it: head (kind,
//! version, list metadata, columns), rows with their `object`, Go's string
//! escapes.

use std::time::SystemTime;

use bytes::{BufMut, BytesMut};

use super::cell::{Cell, Column, Row, cell_text};

/// `s` as a JSON string the way Go's `encoding/json` writes it: `<`, `>`
/// and `&` escaped too (`\u003c`), as the apiserver's answers have them.
pub fn put_json_str(out: &mut BytesMut, s: &str) {
    out.put_u8(b'"');
    let mut start = 0;
    for (i, ch) in s.char_indices() {
        let esc: Option<&str> = match ch {
            '"' => Some("\\\""),
            '\\' => Some("\\\\"),
            '\n' => Some("\\n"),
            '\r' => Some("\\r"),
            '\t' => Some("\\t"),
            '<' => Some("\\u003c"),
            '>' => Some("\\u003e"),
            '&' => Some("\\u0026"),
            '\u{2028}' => Some("\\u2028"),
            '\u{2029}' => Some("\\u2029"),
            c if (c as u32) < 0x20 => None,
            _ => continue,
        };
        out.put_slice(&s.as_bytes()[start..i]);
        match esc {
            Some(e) => out.put_slice(e.as_bytes()),
            None => out.put_slice(format!("\\u{:04x}", ch as u32).as_bytes()),
        }
        start = i + ch.len_utf8();
    }
    out.put_slice(&s.as_bytes()[start..]);
    out.put_u8(b'"');
}

/// The `columnDefinitions` array.
pub fn put_columns(out: &mut BytesMut, columns: &[Column]) {
    out.put_u8(b'[');
    for (i, c) in columns.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        out.put_slice(b"{\"name\":");
        put_json_str(out, &c.name);
        out.put_slice(b",\"type\":");
        put_json_str(out, &c.ty);
        out.put_slice(b",\"format\":");
        put_json_str(out, &c.format);
        out.put_slice(b",\"description\":");
        put_json_str(out, &c.description);
        out.put_slice(format!(",\"priority\":{}}}", c.priority).as_bytes());
    }
    out.put_u8(b']');
}

/// What a row carries as its `object` (`includeObject`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowObject<'a> {
    /// `None`: `null`.
    None,
    /// `Metadata` (the default): a `PartialObjectMetadata` of the Table's
    /// version around the object's `metadata`.
    Metadata(&'a [u8]),
    /// `Object`: the object itself.
    Object(&'a [u8]),
}

/// One row, `{"cells":[...],"conditions":[...],"object":...}`, at `now`,
/// in a Table of `api_version`.
pub fn put_row(
    out: &mut BytesMut,
    row: &Row,
    object: RowObject,
    api_version: &str,
    now: SystemTime,
) {
    out.put_slice(b"{\"cells\":[");
    let mut text = String::new();
    for (i, c) in row.cells.iter().enumerate() {
        if i > 0 {
            out.put_u8(b',');
        }
        match c {
            Cell::Int(n) => out.put_slice(n.to_string().as_bytes()),
            Cell::Float(f) => out.put_slice(f.to_string().as_bytes()),
            Cell::Bool(b) => out.put_slice(if *b { b"true" } else { b"false" }),
            Cell::Null => out.put_slice(b"null"),
            Cell::Text(t) => put_json_str(out, t),
            _ => {
                text.clear();
                cell_text(c, now, &mut text);
                put_json_str(out, &text);
            }
        }
    }
    out.put_u8(b']');
    if let Some(c) = row.condition {
        out.put_slice(b",\"conditions\":[{\"type\":\"Completed\",\"status\":\"True\",\"reason\":");
        put_json_str(out, c.reason);
        out.put_slice(b",\"message\":");
        put_json_str(out, c.message);
        out.put_slice(b"}]");
    }
    out.put_slice(b",\"object\":");
    match object {
        RowObject::None => out.put_slice(b"null"),
        RowObject::Object(body) => out.put_slice(body),
        RowObject::Metadata(meta) => {
            out.put_slice(b"{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":");
            put_json_str(out, api_version);
            out.put_slice(b",\"metadata\":");
            out.put_slice(meta);
            out.put_u8(b'}');
        }
    }
    out.put_u8(b'}');
}

/// The Table's head, up to the opening `[` of `rows`: kind, version, list
/// metadata (`resourceVersion`, `continue`, `remainingItemCount`) and the
/// columns (`None`: `null`, as a watch's Tables after its first have them).
pub fn put_head(
    out: &mut BytesMut,
    api_version: &str,
    rv: u64,
    cont: Option<&str>,
    remaining: Option<u64>,
    columns: Option<&[Column]>,
) {
    out.put_slice(b"{\"kind\":\"Table\",\"apiVersion\":");
    put_json_str(out, api_version);
    out.put_slice(format!(",\"metadata\":{{\"resourceVersion\":\"{rv}\"").as_bytes());
    if let Some(c) = cont {
        out.put_slice(b",\"continue\":");
        put_json_str(out, c);
    }
    if let Some(n) = remaining {
        out.put_slice(format!(",\"remainingItemCount\":{n}").as_bytes());
    }
    out.put_slice(b"},\"columnDefinitions\":");
    match columns {
        Some(columns) => put_columns(out, columns),
        None => out.put_slice(b"null"),
    }
    out.put_slice(b",\"rows\":[");
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::table::cell::Cell;

    #[test]
    fn should_escape_strings_as_go_does() {
        let mut b = BytesMut::new();
        put_json_str(&mut b, "<none> a&b \"q\" \\ \u{1}\n");
        assert_eq!(&b[..], br#""\u003cnone\u003e a\u0026b \"q\" \\ \u0001\n""#);
    }

    #[test]
    fn should_write_a_row_with_its_object_as_asked() {
        let row = Row {
            cells: vec![Cell::Text("p".into()), Cell::Int(3), Cell::Since(None)],
            condition: None,
        };
        let now = SystemTime::UNIX_EPOCH;
        let mut b = BytesMut::new();
        put_row(&mut b, &row, RowObject::None, "meta.k8s.io/v1", now);
        assert_eq!(
            &b[..],
            br#"{"cells":["p",3,"\u003cunknown\u003e"],"object":null}"#
        );
        b.clear();
        put_row(
            &mut b,
            &row,
            RowObject::Metadata(br#"{"name":"p"}"#),
            "meta.k8s.io/v1beta1",
            now,
        );
        assert_eq!(
            &b[..],
            br#"{"cells":["p",3,"\u003cunknown\u003e"],"object":{"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1beta1","metadata":{"name":"p"}}}"#
        );
    }
}
