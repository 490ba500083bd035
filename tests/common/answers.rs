//! Answers as a client reads them, for comparing r8s with a real
//! apiserver: bodies read with serde_json and with protobuf messages
//! declared here as a client declares them (never with r8s's own parsers),
//! and compared field by field. Each `compare` returns the differences
//! found, in words.

use prost::Message;
use serde_json::{Value, json};

use super::Resp;
use super::wire::{ListMeta, MetaList, Object as PartialObjectMetadata, Unknown, WatchEvent};

/// The differences between the apiserver's answer to a get or list and
/// r8s's; `floor`: what the list's version must be.
pub fn compare(theirs: &Resp, ours: &Resp, floor: Floor) -> Vec<String> {
    let mut out = Vec::new();
    compare_into(&mut out, theirs, ours, floor);
    out
}

/// The differences between two answers to a watch: status and headers,
/// the events (periodic bookmarks aside), the initial-events-end bookmark's
/// version against `floor`.
pub fn compare_watch(theirs: &Resp, ours: &Resp, floor: Floor) -> Vec<String> {
    let mut out = Vec::new();
    compare_watch_into(&mut out, theirs, ours, floor);
    out
}

/// The body as a client reads it: inflated where gzipped.
pub fn body_of(r: &Resp) -> Vec<u8> {
    use std::io::Read;
    if r.headers
        .get("content-encoding")
        .is_some_and(|e| e == "gzip")
    {
        let mut out = Vec::new();
        flate2::read::MultiGzDecoder::new(&r.body[..])
            .read_to_end(&mut out)
            .unwrap();
        out
    } else {
        r.body.to_vec()
    }
}

pub fn header(r: &Resp, name: &str) -> String {
    r.headers
        .get(name)
        .map(|v| v.to_str().unwrap().replace(' ', "").to_lowercase())
        .unwrap_or_default()
}

/// A `Status` as a client compares it: the resource version now (which
/// two caches need not share) left out of a 504's message.
pub fn status_of(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(m) = v["message"].as_str()
        && let Some(i) = m.find(", current: ")
    {
        v["message"] = json!(m[..i].to_string());
    }
    v
}

/// What a list holds, as a client reads it: items whole, the version,
/// the rest of its metadata.
struct ListView {
    kind: Value,
    items: Vec<Value>,
    rv: u64,
    more: bool,
    remaining: Value,
}

fn list_view(v: &Value) -> ListView {
    let cont = v["metadata"]["continue"].as_str().unwrap_or("");
    ListView {
        kind: json!([v["kind"], v["apiVersion"]]),
        items: v["items"].as_array().cloned().unwrap_or_default(),
        rv: rv_of(v),
        more: !cont.is_empty(),
        remaining: v["metadata"]["remainingItemCount"].clone(),
    }
}

pub fn names(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|i| {
            format!(
                "{}/{}",
                i["metadata"]["namespace"].as_str().unwrap_or(""),
                i["metadata"]["name"].as_str().unwrap_or("")
            )
        })
        .collect()
}

/// What a request asks of a list's version: exactly N, or not older than N.
#[derive(Clone, Copy)]
pub enum Floor {
    /// Exactly N.
    Exact(u64),
    /// Not older than N.
    AtLeast(u64),
}

/// Compares a get or list's answers; `floor`: what its version must be.
/// Whether both answered with the same status (else the difference is
/// recorded, and nothing more is worth comparing); their media types and
/// encodings compared.
fn same_heads(out: &mut Vec<String>, theirs: &Resp, ours: &Resp) -> bool {
    if theirs.status != ours.status {
        out.push(format!(
            "status {} against {}: {} / {}",
            ours.status,
            theirs.status,
            ours.text(),
            theirs.text()
        ));
        return false;
    }
    for h in ["content-type", "content-encoding"] {
        let (a, b) = (header(theirs, h), header(ours, h));
        if a != b {
            out.push(format!("{h} {b:?} against {a:?}"));
        }
    }
    true
}

fn compare_into(out: &mut Vec<String>, theirs: &Resp, ours: &Resp, floor: Floor) {
    if same_heads(out, theirs, ours) {
        compare_bodies(out, theirs, ours, floor);
    }
}

/// The bodies of two answers of the same status.
fn compare_bodies(out: &mut Vec<String>, theirs: &Resp, ours: &Resp, floor: Floor) {
    let (tb, ob) = (body_of(theirs), body_of(ours));
    let ct = header(theirs, "content-type");
    if !ct.starts_with("application/json") {
        if ct.starts_with("application/vnd.kubernetes.protobuf") && theirs.status == 200 {
            compare_protobuf_list(out, &tb, &ob, floor);
        } else if tb != ob {
            out.push(format!("body ({ct}) differs"));
        }
        return;
    }
    let (Ok(t), Ok(o)) = (
        serde_json::from_slice::<Value>(&tb),
        serde_json::from_slice::<Value>(&ob),
    ) else {
        if tb != ob {
            out.push("bodies differ (not JSON)".into());
        }
        return;
    };
    if t["kind"] == "Status" || theirs.status != 200 {
        if status_of(&t) != status_of(&o) {
            out.push(format!("Status {o} against {t}"));
        }
        return;
    }
    if t["kind"] == "Table" {
        compare_tables(out, &t, &o, floor);
        return;
    }
    let list = t["kind"].as_str().is_some_and(|k| k.ends_with("List"))
        && t["metadata"]["resourceVersion"].is_string();
    if !list {
        if t != o {
            out.push(format!("object {o} against {t}"));
        }
        return;
    }
    let (tl, ol) = (list_view(&t), list_view(&o));
    if tl.kind != ol.kind {
        out.push(format!("kind {} against {}", ol.kind, tl.kind));
    }
    if tl.items != ol.items {
        out.push(format!(
            "items {:?} against {:?}",
            names(&ol.items),
            names(&tl.items)
        ));
    }
    if (tl.more, &tl.remaining) != (ol.more, &ol.remaining) {
        out.push(format!(
            "pages: continue {} remainingItemCount {} against {} {}",
            ol.more, ol.remaining, tl.more, tl.remaining
        ));
    }
    check_floor(out, tl.rv, ol.rv, floor);
}

/// Two Tables: their columns; their rows, cell by cell and with their
/// objects, but for `date` columns (ages are written when the answer is
/// made, and two answers may fall either side of a second); their pages,
/// as lists' are compared; their version against the floor.
fn compare_tables(out: &mut Vec<String>, t: &Value, o: &Value, floor: Floor) {
    if t["columnDefinitions"] != o["columnDefinitions"] || t["kind"] != o["kind"] {
        out.push(format!(
            "columns {} against {}",
            o["columnDefinitions"], t["columnDefinitions"]
        ));
        return;
    }
    let dates: Vec<usize> = t["columnDefinitions"]
        .as_array()
        .into_iter()
        .flatten()
        .enumerate()
        .filter(|(_, c)| c["type"] == "date")
        .map(|(i, _)| i)
        .collect();
    let rows = |v: &Value| -> Vec<Value> {
        v["rows"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| {
                let mut r = r.clone();
                if let Some(cells) = r["cells"].as_array_mut() {
                    for &i in dates.iter().rev() {
                        if i < cells.len() {
                            cells.remove(i);
                        }
                    }
                }
                r
            })
            .collect()
    };
    let (tr, or) = (rows(t), rows(o));
    if tr != or {
        out.push(format!("items (rows) {or:?} against {tr:?}"));
    }
    let page = |v: &Value| {
        (
            v["metadata"]["continue"]
                .as_str()
                .is_some_and(|c| !c.is_empty()),
            v["metadata"]["remainingItemCount"].clone(),
        )
    };
    if page(t) != page(o) {
        out.push(format!("pages: {:?} against {:?}", page(o), page(t)));
    }
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .unwrap_or(0)
    };
    check_floor(out, rv(t), rv(o), floor);
}

pub fn check_floor(out: &mut Vec<String>, theirs: u64, ours: u64, floor: Floor) {
    match floor {
        Floor::Exact(n) if theirs != n || ours != n => out.push(format!(
            "resourceVersion {ours} against {theirs}, asked exactly {n}"
        )),
        Floor::AtLeast(n) if ours < n || theirs < n => out.push(format!(
            "resourceVersion {ours} against {theirs}, asked not older than {n}"
        )),
        _ if ours != theirs => out.push(format!("list resourceVersion {ours} against {theirs}")),
        _ => {}
    }
}

/// Strips a protobuf body's `k8s\0` magic, for decoding as `Unknown`.
fn unknown(body: &[u8]) -> Unknown {
    assert_eq!(&body[..4], b"k8s\0", "the protobuf magic");
    Unknown::decode(&body[4..]).unwrap()
}

fn compare_protobuf_list(out: &mut Vec<String>, theirs: &[u8], ours: &[u8], floor: Floor) {
    let (t, o) = (unknown(theirs), unknown(ours));
    if t.type_meta != o.type_meta {
        out.push(format!(
            "protobuf type {:?} against {:?}",
            o.type_meta, t.type_meta
        ));
        return;
    }
    let list = t
        .type_meta
        .as_ref()
        .and_then(|m| m.kind.as_deref())
        .is_some_and(|k| k.ends_with("List"));
    if !list {
        if t != o {
            out.push("protobuf object differs".into());
        }
        return;
    }
    let (Ok(tl), Ok(ol)) = (
        MetaList::decode(t.raw.as_deref().unwrap_or_default()),
        MetaList::decode(o.raw.as_deref().unwrap_or_default()),
    ) else {
        out.push("protobuf list does not decode".into());
        return;
    };
    if tl.items != ol.items {
        out.push(format!(
            "protobuf items: {} against {}",
            ol.items.len(),
            tl.items.len()
        ));
    }
    let (tm, om) = (
        tl.metadata.unwrap_or_default(),
        ol.metadata.unwrap_or_default(),
    );
    let more = |m: &ListMeta| m.cont.as_deref().is_some_and(|c| !c.is_empty());
    if (more(&tm), tm.remaining_item_count) != (more(&om), om.remaining_item_count) {
        out.push("protobuf pages differ".into());
    }
    let rv = |m: &ListMeta| {
        m.resource_version
            .as_deref()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0)
    };
    check_floor(out, rv(&tm), rv(&om), floor);
}

/// A watch's events as a client reads them: type, key, version; the
/// bookmarks' annotations; an ERROR's Status.
pub fn events(r: &Resp, protobuf: bool) -> Vec<(String, String, u64, Value)> {
    let body = body_of(r);
    let mut out = Vec::new();
    if protobuf {
        let mut rest = &body[..];
        while rest.len() >= 4 {
            let n = u32::from_be_bytes(rest[..4].try_into().unwrap()) as usize;
            let frame = &rest[4..4 + n];
            rest = &rest[4 + n..];
            // A frame is a bare WatchEvent (the raw serializer); its object
            // a whole protobuf body.
            let ev = WatchEvent::decode(frame).unwrap();
            let obj = unknown(&ev.object.unwrap().raw.unwrap());
            let meta = PartialObjectMetadata::decode(obj.raw.as_deref().unwrap())
                .unwrap()
                .metadata
                .unwrap_or_default();
            out.push((
                ev.r#type.unwrap_or_default(),
                format!(
                    "{}/{}",
                    meta.namespace.unwrap_or_default(),
                    meta.name.unwrap_or_default()
                ),
                meta.resource_version
                    .unwrap_or_default()
                    .parse()
                    .unwrap_or(0),
                json!(meta.annotations),
            ));
        }
        return out;
    }
    for line in body.split(|b| *b == b'\n').filter(|l| !l.is_empty()) {
        let ev: Value = serde_json::from_slice(line).unwrap();
        let o = &ev["object"];
        let t = ev["type"].as_str().unwrap().to_string();
        if t == "ERROR" {
            out.push((t, String::new(), 0, status_of(o)));
            continue;
        }
        if o["kind"] == "Table" {
            out.push(table_event(t, o));
            continue;
        }
        let m = &o["metadata"];
        out.push((
            t,
            format!(
                "{}/{}",
                m["namespace"].as_str().unwrap_or(""),
                m["name"].as_str().unwrap_or("")
            ),
            m["resourceVersion"]
                .as_str()
                .unwrap_or("0")
                .parse()
                .unwrap_or(0),
            json!([o["kind"], o["apiVersion"], m["annotations"]]),
        ));
    }
    out
}

/// A Table watch's event: its type, its row's object's name, the Table's
/// version, and what else it carries: whether it has the column
/// definitions, its cells but ages (written when each is sent), its row's
/// object (with the annotation that ends a streaming list's initial events).
fn table_event(t: String, o: &Value) -> (String, String, u64, Value) {
    let row = &o["rows"][0];
    let m = &row["object"]["metadata"];
    let age = |s: &str| {
        s == "<unknown>"
            || (!s.is_empty()
                && s.trim_end_matches(|c: char| c.is_ascii_digit() || "smhdy".contains(c))
                    .is_empty()
                && s.ends_with(|c: char| "smhdy".contains(c)))
    };
    let cells: Vec<&Value> = row["cells"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| !c.as_str().is_some_and(age))
        .collect();
    (
        t,
        format!(
            "{}/{}",
            m["namespace"].as_str().unwrap_or(""),
            m["name"].as_str().unwrap_or("")
        ),
        o["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("0")
            .parse()
            .unwrap_or(0),
        json!([o["columnDefinitions"].is_array(), cells, row["object"]]),
    )
}

fn compare_watch_into(out: &mut Vec<String>, theirs: &Resp, ours: &Resp, floor: Floor) {
    if !same_heads(out, theirs, ours) {
        return;
    }
    if theirs.status != 200 {
        compare_bodies(out, theirs, ours, floor);
        return;
    }
    let pb = header(theirs, "content-type").contains("protobuf");
    let (t, o) = (events(theirs, pb), events(ours, pb));
    // Periodic bookmarks come when each server's timer says: compared
    // apart from the events; the one ending the initial events is an event.
    let ends = |e: &(String, String, u64, Value)| {
        e.0 == "BOOKMARK" && e.3.to_string().contains("initial-events-end")
    };
    let strip = |es: &[(String, String, u64, Value)]| -> Vec<(String, String, u64, Value)> {
        es.iter()
            .filter(|e| e.0 != "BOOKMARK" || ends(e))
            .map(|e| {
                let mut e = e.clone();
                if ends(&e) {
                    // Its version is the list's: checked against the floor.
                    e.2 = 0;
                }
                e
            })
            .collect()
    };
    let (ts, os) = (strip(&t), strip(&o));
    if ts != os {
        let show = |es: &[(String, String, u64, Value)]| {
            es.iter()
                .map(|e| format!("{} {} {} {}", e.0, e.1, e.2, e.3))
                .collect::<Vec<_>>()
                .join("; ")
        };
        out.push(format!("events [{}] against [{}]", show(&os), show(&ts)));
    }
    let end_rv = |es: &[(String, String, u64, Value)]| es.iter().find(|e| ends(e)).map(|e| e.2);
    if let (Some(a), Some(b)) = (end_rv(&t), end_rv(&o)) {
        check_floor(out, a, b, floor);
    }
}

/// A body's `metadata.resourceVersion`.
pub fn rv_of(v: &Value) -> u64 {
    v["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion in {v}"))
}
