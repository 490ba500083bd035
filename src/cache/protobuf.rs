//! Cached objects from protobuf: the upstream's body kept as it came, its
//! key, resource version, labels and selectable fields read from the bytes
//! (`ObjectMeta` and the few spec/status fields the apiserver lets clients
//! select on), never decoded into types.

use std::sync::Arc;

use bytes::Bytes;

use super::object::{CachedObject, LABEL, ObjectError, Owned, Span, TypeInfo};
use super::view::View;
use crate::api::media::Encoding;
use crate::api::selector::supported_fields;
use crate::codec::protobuf::{self as pb, Malformed, Value};

/// `ObjectMeta` field numbers r8s reads.
const META_NAME: u32 = 1;
const META_NAMESPACE: u32 = 3;
const META_UID: u32 = 5;
const META_RESOURCE_VERSION: u32 = 6;
const META_LABELS: u32 = 11;
const META_MANAGED_FIELDS: u32 = 17;

/// Where a selectable field lies in a core/v1 object's message (the
/// generated.proto numbers, stable across Kubernetes versions).
fn field_path(resource: &str, field: &str) -> Option<&'static [u32]> {
    Some(match (resource, field) {
        ("pods", "spec.nodeName") => &[2, 10],
        ("pods", "spec.restartPolicy") => &[2, 3],
        ("pods", "spec.schedulerName") => &[2, 19],
        ("pods", "spec.serviceAccountName") => &[2, 8],
        ("pods", "spec.hostNetwork") => &[2, 11],
        ("pods", "status.phase") => &[3, 1],
        ("pods", "status.podIP") => &[3, 6],
        ("pods", "status.nominatedNodeName") => &[3, 11],
        ("secrets", "type") => &[3],
        ("nodes", "spec.unschedulable") => &[2, 4],
        ("namespaces", "status.phase") => &[3, 1],
        ("events", "involvedObject.kind") => &[2, 1],
        ("events", "involvedObject.namespace") => &[2, 2],
        ("events", "involvedObject.name") => &[2, 3],
        ("events", "involvedObject.uid") => &[2, 4],
        ("events", "involvedObject.apiVersion") => &[2, 5],
        ("events", "involvedObject.resourceVersion") => &[2, 6],
        ("events", "involvedObject.fieldPath") => &[2, 7],
        ("events", "reason") => &[3],
        ("events", "source") => &[5, 1],
        ("events", "type") => &[9],
        ("events", "reportingComponent") => &[14],
        _ => return None,
    })
}

fn malformed(e: Malformed) -> ObjectError {
    ObjectError::Malformed(e.to_string())
}

impl TypeInfo {
    /// Parses a protobuf object: a whole body (`enveloped`, as a watch event
    /// carries it) or a list item (its raw, wrapped here in the envelope a
    /// GET would carry).
    pub fn parse_protobuf(&self, src: &[u8], enveloped: bool) -> Result<CachedObject, ObjectError> {
        let body = if enveloped {
            Bytes::copy_from_slice(src)
        } else {
            pb::envelope(&self.api_version, &self.kind, &[src])
        };
        let o = self.parse_protobuf_body(body)?;
        if self.drop_managed_fields && o.has_managed_fields() {
            // Kept without them (only objects that have them pay, once).
            return self.parse_protobuf_body(o.body_as(View::DROPPED));
        }
        Ok(o)
    }

    /// [`TypeInfo::parse_protobuf`] of the object (a whole body) of a watch
    /// event of type `kind`: the object is kept inside the event's frame as
    /// r8s's watchers get it (built here), for the event log to share.
    pub fn parse_protobuf_event(
        &self,
        src: &[u8],
        kind: &'static str,
    ) -> Result<CachedObject, ObjectError> {
        let frame = pb::watch_frame(kind, &[src]);
        let body = frame.slice(frame.len() - src.len()..);
        let mut o = self.parse_protobuf_body(body)?;
        if self.drop_managed_fields && o.has_managed_fields() {
            return self.parse_protobuf_event(&o.body_as(View::DROPPED), kind);
        }
        // A body the parser rewrote (see `canonical`) is no longer the frame's.
        if o.body.as_ptr() == frame[frame.len() - src.len()..].as_ptr() {
            o.framed = Some((kind, frame));
        }
        Ok(o)
    }

    fn parse_protobuf_body(&self, body: Bytes) -> Result<CachedObject, ObjectError> {
        let field_names = self.fields;
        // Field paths hold for core/v1 only (events.k8s.io's Event differs).
        let core = self.api_version == "v1";
        let paths: Vec<Option<&[u32]>> = field_names
            .iter()
            .map(|f| field_path(&self.resource, f).filter(|_| core))
            .collect();
        parse(body, field_names, &paths)
    }
}

/// A cached object over `body`, an enveloped protobuf object.
fn parse(
    body: Bytes,
    field_names: &'static [&'static str],
    paths: &[Option<&[u32]>],
) -> Result<CachedObject, ObjectError> {
    let u = pb::unwrap(&body).map_err(malformed)?;
    let base = body.as_ptr() as usize;
    // An absent field is an empty slice from elsewhere (a label without
    // its key or value): its offset is 0, it spans nothing.
    let offset = |s: &[u8]| {
        if s.is_empty() {
            0
        } else {
            (s.as_ptr() as usize - base) as u32
        }
    };
    let meta = pb::find(u.raw, 1)
        .map_err(malformed)?
        .ok_or_else(|| ObjectError::Malformed("no metadata".into()))?;
    fn text(b: &[u8]) -> Result<&str, ObjectError> {
        std::str::from_utf8(b).map_err(|_| ObjectError::Malformed("a string is not UTF-8".into()))
    }
    let (mut name, mut namespace, mut rv, mut uid) = ("", "", "", "");
    let mut spans = Vec::new();
    // Where the managedFields records lie in `meta`, and whether they are
    // one run (Go writes them so: field 17 is ObjectMeta's last).
    let mut managed: Option<(usize, usize)> = None;
    let mut scattered = false;
    for f in pb::fields(meta) {
        let f = f.map_err(malformed)?;
        if f.number == META_MANAGED_FIELDS {
            match managed {
                None => managed = Some((f.at, f.end)),
                Some((at, end)) if end == f.at => managed = Some((at, f.end)),
                Some(_) => scattered = true,
            }
        }
        let Value::Bytes(v) = f.value else { continue };
        match f.number {
            META_NAME => name = text(v)?,
            META_NAMESPACE => namespace = text(v)?,
            META_RESOURCE_VERSION => rv = text(v)?,
            META_UID => uid = text(v)?,
            META_LABELS => {
                let k = pb::find(v, 1).map_err(malformed)?.unwrap_or_default();
                let val = pb::find(v, 2).map_err(malformed)?.unwrap_or_default();
                text(k)?;
                text(val)?;
                spans.push(span(LABEL, offset(k), k.len(), offset(val), val.len())?);
            }
            _ => {}
        }
    }
    if name.is_empty() {
        return Err(ObjectError::Malformed("no metadata.name".into()));
    }
    let rv = rv
        .parse::<u64>()
        .map_err(|_| ObjectError::BadResourceVersion(rv.to_string()))?;
    let mut owned: Vec<Owned> = Vec::new();
    for (i, path) in paths.iter().enumerate() {
        let Some(path) = path else { continue };
        match pb::find_path(u.raw, path).map_err(malformed)? {
            Some(Value::Bytes(v)) if !v.is_empty() => {
                text(v)?;
                spans.push(span(i as u8, 0, 0, offset(v), v.len())?);
            }
            Some(Value::Varint(b)) => {
                let b = if b != 0 { "true" } else { "false" };
                owned.push((i as u8, Box::from(""), Box::from(b)));
            }
            _ => {}
        }
    }
    if managed.is_some() && (scattered || !canonical(&body, u.raw_at, meta)) {
        // Cut only from the layout an apiserver writes: anything else is
        // written so first (the same message, fields in another order).
        let body = canonical_body(&u, meta).map_err(malformed)?;
        let (managed, ok) = rewritten_layout(&body);
        if !ok {
            // Never expected: what `canonical_body` writes is canonical.
            return Err(ObjectError::Malformed(format!(
                "managedFields could not be laid out in one run ({managed} records)"
            )));
        }
        return parse(body, field_names, paths);
    }
    let managed = managed.map_or((0, 0), |(at, end)| {
        (offset(meta) + at as u32, (end - at) as u32)
    });
    let key: Arc<str> = if namespace.is_empty() {
        Arc::from(name)
    } else {
        Arc::from(format!("{namespace}/{name}"))
    };
    Ok(CachedObject {
        memo: crate::codec::run::Memo::new(&key),
        row: Default::default(),
        key,
        ns_len: namespace.len(),
        rv,
        uid_hash: crate::api::shard::fnv1a(uid),
        item_skip: u.raw_at,
        meta: (offset(meta), meta.len() as u32),
        managed,
        spans: spans.into_boxed_slice(),
        owned: owned.into_boxed_slice(),
        field_names,
        encoding: Encoding::Protobuf,
        body,
        framed: None,
    })
}

/// Whether the lengths enclosing `meta` (the metadata's in the raw, the
/// raw's in the envelope) are minimal varints and the body ends as every
/// apiserver's does, so that [`super::view`] can write them anew from
/// their values alone.
fn canonical(body: &[u8], raw_at: usize, meta: &[u8]) -> bool {
    // The field's one-byte tag, then its length as a minimal varint, read
    // back from where they must end (no buffer: this runs per object).
    let head_ok = |n: u32, at: usize, len: usize| {
        let head = pb::field_len(len) - len;
        let Some(from) = at.checked_sub(head) else {
            return false;
        };
        let mut v = len as u64;
        body[from] == (n << 3 | 2) as u8
            && body[from + 1..at].iter().enumerate().all(|(i, &b)| {
                let last = i + 2 == head;
                let want = if last {
                    v as u8
                } else {
                    (v as u8 & 0x7f) | 0x80
                };
                v >>= 7;
                b == want
            })
    };
    let raw_len = body.len().saturating_sub(raw_at + pb::UNKNOWN_TAIL.len());
    let meta_at = meta.as_ptr() as usize - body.as_ptr() as usize;
    body.ends_with(pb::UNKNOWN_TAIL)
        && head_ok(2, raw_at, raw_len)
        && head_ok(1, meta_at, meta.len())
}

/// Whether a body [`canonical_body`] wrote is laid out as [`parse`] cuts
/// it (so that parsing it again cannot rewrite it again), and how many
/// managedFields records it holds.
fn rewritten_layout(body: &[u8]) -> (usize, bool) {
    let Ok(u) = pb::unwrap(body) else {
        return (0, false);
    };
    let Ok(Some(meta)) = pb::find(u.raw, 1) else {
        return (0, false);
    };
    let (mut n, mut run, mut end) = (0, true, None);
    for f in pb::fields(meta) {
        let Ok(f) = f else { return (n, false) };
        if f.number == META_MANAGED_FIELDS {
            run &= end.is_none_or(|e| e == f.at);
            end = Some(f.end);
            n += 1;
        }
    }
    (n, run && canonical(body, u.raw_at, meta))
}

/// The body re-written as an apiserver writes it: metadata's fields in
/// order, managedFields' records after the others, minimal lengths.
fn canonical_body(u: &pb::Unknown<'_>, meta: &[u8]) -> Result<Bytes, Malformed> {
    let mut m = bytes::BytesMut::with_capacity(meta.len());
    let mut managed = bytes::BytesMut::new();
    for f in pb::fields(meta) {
        let f = f?;
        let to = if f.number == META_MANAGED_FIELDS {
            &mut managed
        } else {
            &mut m
        };
        to.extend_from_slice(&meta[f.at..f.end]);
    }
    m.extend_from_slice(&managed);
    let mut raw = bytes::BytesMut::with_capacity(u.raw.len());
    let mut meta_done = false;
    for f in pb::fields(u.raw) {
        let f = f?;
        match f.number {
            1 if !meta_done => {
                pb::bytes_field(&mut raw, 1, &m);
                meta_done = true;
            }
            1 => {}
            _ => raw.extend_from_slice(&u.raw[f.at..f.end]),
        }
    }
    let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
    Ok(pb::envelope(&text(u.api_version), &text(u.kind), &[&raw]))
}

fn span(
    what: u8,
    key_at: u32,
    key_len: usize,
    val_at: u32,
    val_len: usize,
) -> Result<Span, ObjectError> {
    let short = |n: usize| {
        u16::try_from(n).map_err(|_| ObjectError::Malformed("a label or field over 64 KiB".into()))
    };
    Ok(Span {
        what,
        key_at,
        key_len: short(key_len)?,
        val_at,
        val_len: short(val_len)?,
    })
}

/// A protobuf object's last state stamped with resource version `rv`: its
/// `ObjectMeta.resourceVersion` rewritten, every other byte kept.
pub(super) fn at_version(o: &CachedObject, rv: u64) -> CachedObject {
    let stamped = pb::unwrap(&o.body).ok().and_then(|u| {
        let raw = pb::with_metadata(u.raw, rv, None).ok()?;
        let api_version = std::str::from_utf8(u.api_version).ok()?;
        let kind = std::str::from_utf8(u.kind).ok()?;
        Some((
            api_version == "v1",
            pb::envelope(api_version, kind, &[&raw]),
        ))
    });
    let resource = resource_of(o.field_names);
    stamped
        .and_then(|(core, body)| {
            let paths: Vec<Option<&[u32]>> = o
                .field_names
                .iter()
                .map(|f| field_path(resource, f).filter(|_| core))
                .collect();
            parse(body, o.field_names, &paths).ok()
        })
        .unwrap_or_else(|| CachedObject {
            memo: crate::codec::run::Memo::new(&o.key),
            row: Default::default(),
            key: o.key.clone(),
            body: o.body.clone(),
            spans: o.spans.clone(),
            owned: o.owned.clone(),
            rv,
            framed: None,
            ..*o
        })
}

/// The resource whose selectable fields are `names` (they are one static per resource).
fn resource_of(names: &'static [&'static str]) -> &'static str {
    ["pods", "secrets", "nodes", "namespaces", "events"]
        .into_iter()
        .find(|r| std::ptr::eq(supported_fields(r), names))
        .unwrap_or("")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::selector::{FieldSelector, LabelSelector, Selectors};
    use crate::codec::json::ListItem;

    fn pod_raw(rv: &str) -> Vec<u8> {
        let mut meta = bytes::BytesMut::new();
        pb::bytes_field(&mut meta, 1, b"p");
        pb::bytes_field(&mut meta, 3, b"ns");
        pb::bytes_field(&mut meta, 5, b"13c3102a-ea00-469a-bb98-a197ea4c00d0");
        pb::bytes_field(&mut meta, 6, rv.as_bytes());
        let mut label = bytes::BytesMut::new();
        pb::bytes_field(&mut label, 1, b"app");
        pb::bytes_field(&mut label, 2, b"web");
        pb::bytes_field(&mut meta, 11, &label);
        let mut spec = bytes::BytesMut::new();
        pb::bytes_field(&mut spec, 10, b"n1");
        pb::varint_field(&mut spec, 11, 1);
        let mut status = bytes::BytesMut::new();
        pb::bytes_field(&mut status, 1, b"Running");
        let mut raw = bytes::BytesMut::new();
        pb::bytes_field(&mut raw, 1, &meta);
        pb::bytes_field(&mut raw, 2, &spec);
        pb::bytes_field(&mut raw, 3, &status);
        raw.to_vec()
    }

    fn info() -> TypeInfo {
        TypeInfo::for_tests("Pod", "v1", "pods")
    }

    #[test]
    fn should_read_key_labels_and_fields_from_the_bytes() {
        let raw = pod_raw("7");
        let o = info().parse_protobuf(&raw, false).unwrap();
        assert_eq!((o.namespace(), o.name(), o.rv), ("ns", "p", 7));
        assert_eq!(o.label("app"), Some("web"));
        assert_eq!(o.field("spec.nodeName"), "n1");
        assert_eq!(o.field("spec.hostNetwork"), "true");
        assert_eq!(o.field("status.phase"), "Running");
        assert_eq!(o.field("status.podIP"), "");
        assert_eq!(o.raw(), &raw[..], "a list item is the object's raw");
        assert!(o.body.starts_with(b"k8s\0\x0a\x09\x0a\x02v1\x12\x03Pod"));
        let mut item = bytes::BytesMut::new();
        o.write_item(&mut item);
        assert_eq!(item.len(), o.item_len());
        assert_eq!(&item[item.len() - raw.len()..], &raw[..]);
        let same = info().parse_protobuf(&o.body, true).unwrap();
        assert_eq!(same.body, o.body);
        // Arrived in a watch event: the body is a slice of the frame the log
        // shares, which is the frame r8s would build for it.
        let arrived = info().parse_protobuf_event(&o.body, "MODIFIED").unwrap();
        assert_eq!(arrived.body, o.body);
        let frame = arrived.framed_line("MODIFIED").unwrap();
        assert_eq!(frame, &o.watch_event("MODIFIED", false));
        assert!(frame.as_ptr_range().contains(&arrived.body.as_ptr()));
        assert!(arrived.framed_line("ADDED").is_none());
        let s = Selectors {
            labels: LabelSelector::parse("app=web").unwrap(),
            fields: FieldSelector::parse("spec.nodeName=n1", supported_fields("pods")).unwrap(),
            ..Default::default()
        };
        assert!(o.matches(&s));
        assert_eq!(o.metadata(), pb::find(&raw, 1).unwrap().unwrap());
        // Its uid's shard: the lower half (as 1.36 put this uid).
        let shard = |range: &str| Selectors {
            shard: Some(crate::api::shard::ShardSelector::parse(range).unwrap()),
            ..Default::default()
        };
        assert!(o.matches(&shard(
            "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')"
        )));
        assert!(!o.matches(&shard(
            "shardRange(object.metadata.uid, '0x8000000000000000', '0x10000000000000000')"
        )));
    }

    #[test]
    fn should_stamp_a_version_keeping_the_rest() {
        let o = info().parse_protobuf(&pod_raw("7"), false).unwrap();
        let d = at_version(&o, 1234);
        assert_eq!(d.rv, 1234);
        assert_eq!(d.field("spec.nodeName"), "n1");
        assert_eq!(d.label("app"), Some("web"));
        let want = info().parse_protobuf(&pod_raw("1234"), false).unwrap();
        assert_eq!(d.body, want.body);
    }

    #[test]
    fn should_read_a_label_without_its_key_or_value_as_empty() {
        // Found by the fuzzer: the absent half's offset was computed from an
        // empty slice that is not in the body (an overflow, then a panic on
        // the first read of the label in a release build).
        let mut meta = bytes::BytesMut::new();
        pb::bytes_field(&mut meta, 1, b"p");
        pb::bytes_field(&mut meta, 6, b"7");
        let mut label = bytes::BytesMut::new();
        pb::bytes_field(&mut label, 2, b"web");
        pb::bytes_field(&mut meta, 11, &label);
        let mut label = bytes::BytesMut::new();
        pb::bytes_field(&mut label, 1, b"app");
        pb::bytes_field(&mut meta, 11, &label);
        let mut raw = bytes::BytesMut::new();
        pb::bytes_field(&mut raw, 1, &meta);
        let o = info().parse_protobuf(&raw, false).unwrap();
        assert_eq!(o.label(""), Some("web"));
        assert_eq!(o.label("app"), Some(""));
        let s = Selectors {
            labels: LabelSelector::parse("app,!x").unwrap(),
            fields: FieldSelector::parse("", supported_fields("pods")).unwrap(),
            ..Default::default()
        };
        assert!(o.matches(&s));
    }

    #[test]
    fn should_refuse_malformed_objects() {
        assert!(info().parse_protobuf(b"\x0a\x05ab", false).is_err());
        assert!(info().parse_protobuf(b"{}", true).is_err());
        let no_rv = info().parse_protobuf(&pod_raw("x"), false);
        assert!(matches!(no_rv, Err(ObjectError::BadResourceVersion(_))));
    }
}
