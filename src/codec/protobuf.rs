//! Kubernetes protobuf on the wire, as kube-apiserver writes it.
//!
//! Every body is the magic `k8s\0` and a `runtime.Unknown`
//! `{1 typeMeta{1 apiVersion, 2 kind}, 2 raw, 3 contentEncoding, 4 contentType}`
//! whose fields 3 and 4 are always written empty (every body ends
//! `1a 00 22 00`). A list's raw is `{1 ListMeta, 2 item, 2 item, ...}`, each
//! item the same bytes as the object's raw in a GET. A watch stream is frames
//! of a 4-byte big-endian length and a `metav1.WatchEvent{1 type, 2
//! RawExtension{1 raw}}` whose raw is the object's whole body (magic and
//! all). Go's generated marshallers write every non-pointer field, empty or
//! not, in field order; r8s never re-encodes an object, it only frames the
//! upstream's bytes and edits `ObjectMeta` where the apiserver would.
//!
//! This module is the byte layouts only: no Kubernetes types, no prost.

use super::InitialEnd;
use bytes::{BufMut, Bytes, BytesMut};

/// The four bytes every protobuf body starts with.
pub const MAGIC: &[u8] = b"k8s\0";
/// `runtime.Unknown`'s empty contentEncoding and contentType: every body's end.
pub const UNKNOWN_TAIL: &[u8] = &[0x1a, 0x00, 0x22, 0x00];
/// Wire type of length-delimited fields.
const LEN: u8 = 2;
/// Wire type of varints.
const VARINT: u8 = 0;

/// The tag byte(s) of field `n` with wire type `wt`.
fn tag(out: &mut BytesMut, n: u32, wt: u8) {
    varint(out, u64::from(n << 3 | u32::from(wt)));
}

/// Appends `v` as a protobuf varint.
pub fn varint(out: &mut BytesMut, mut v: u64) {
    while v >= 0x80 {
        out.put_u8((v as u8) | 0x80);
        v >>= 7;
    }
    out.put_u8(v as u8);
}

/// How many bytes `v` takes as a varint.
pub fn varint_len(v: u64) -> usize {
    let bits = 64 - (v | 1).leading_zeros() as usize;
    bits.div_ceil(7)
}

/// Bytes a length-delimited field with a one-byte tag and `len` bytes of value takes.
pub fn field_len(len: usize) -> usize {
    1 + varint_len(len as u64) + len
}

/// Appends field `n` holding `value` (a string, bytes or an embedded message).
pub fn bytes_field(out: &mut BytesMut, n: u32, value: &[u8]) {
    tag(out, n, LEN);
    varint(out, value.len() as u64);
    out.put_slice(value);
}

/// Appends the head of field `n` whose value of `len` bytes follows.
pub fn field_head(out: &mut BytesMut, n: u32, len: usize) {
    tag(out, n, LEN);
    varint(out, len as u64);
}

/// Appends varint field `n`.
pub fn varint_field(out: &mut BytesMut, n: u32, v: u64) {
    tag(out, n, VARINT);
    varint(out, v);
}

/// One field of a message as it lies in the bytes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Field<'a> {
    /// Field number.
    pub number: u32,
    /// The value: a varint's value, or a length-delimited field's bytes.
    pub value: Value<'a>,
    /// Where the whole field (tag included) lies in the message.
    pub at: usize,
    /// Where it ends.
    pub end: usize,
}

/// A field's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Value<'a> {
    /// Wire type 0.
    Varint(u64),
    /// Wire type 2.
    Bytes(&'a [u8]),
    /// Wire types 1 and 5 (no Kubernetes field r8s reads has one).
    Fixed(&'a [u8]),
}

impl<'a> Value<'a> {
    /// The bytes of a length-delimited value.
    pub fn bytes(self) -> Option<&'a [u8]> {
        match self {
            Value::Bytes(b) => Some(b),
            _ => None,
        }
    }
}

/// Why bytes are not a protobuf message.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Malformed {
    /// A varint, tag or length runs past the end.
    #[error("truncated protobuf at byte {0}")]
    Truncated(usize),
    /// A wire type protobuf does not have (or a group).
    #[error("unsupported protobuf wire type {0} at byte {1}")]
    WireType(u8, usize),
    /// No `k8s\0` magic or no `runtime.Unknown` raw.
    #[error("not a Kubernetes protobuf body")]
    NotEnveloped,
}

fn read_varint(b: &[u8], at: &mut usize) -> Result<u64, Malformed> {
    let start = *at;
    let mut v = 0u64;
    for shift in (0..64).step_by(7) {
        let byte = *b.get(*at).ok_or(Malformed::Truncated(start))?;
        *at += 1;
        v |= u64::from(byte & 0x7f) << shift;
        if byte < 0x80 {
            return Ok(v);
        }
    }
    Err(Malformed::Truncated(start))
}

/// The fields of a message, in the order they lie.
pub fn fields(msg: &[u8]) -> Fields<'_> {
    Fields { msg, at: 0 }
}

/// Iterator over a message's fields ([`fields`]).
pub struct Fields<'a> {
    msg: &'a [u8],
    at: usize,
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.msg.len() {
            return None;
        }
        let start = self.at;
        let r = (|| {
            let key = read_varint(self.msg, &mut self.at)?;
            let number = (key >> 3) as u32;
            let value = match (key & 7) as u8 {
                0 => Value::Varint(read_varint(self.msg, &mut self.at)?),
                2 => {
                    let len = read_varint(self.msg, &mut self.at)? as usize;
                    let end = self
                        .at
                        .checked_add(len)
                        .filter(|e| *e <= self.msg.len())
                        .ok_or(Malformed::Truncated(start))?;
                    let v = &self.msg[self.at..end];
                    self.at = end;
                    Value::Bytes(v)
                }
                wt @ (1 | 5) => {
                    let n = if wt == 1 { 8 } else { 4 };
                    let end = self.at + n;
                    let v = self
                        .msg
                        .get(self.at..end)
                        .ok_or(Malformed::Truncated(start))?;
                    self.at = end;
                    Value::Fixed(v)
                }
                wt => return Err(Malformed::WireType(wt, start)),
            };
            Ok(Field {
                number,
                value,
                at: start,
                end: self.at,
            })
        })();
        if r.is_err() {
            self.at = self.msg.len();
        }
        Some(r)
    }
}

/// The last value of length-delimited field `n` in `msg` (protobuf's rule for repeats).
pub fn find(msg: &[u8], n: u32) -> Result<Option<&[u8]>, Malformed> {
    let mut found = None;
    for f in fields(msg) {
        let f = f?;
        if f.number == n {
            found = f.value.bytes().or(found);
        }
    }
    Ok(found)
}

/// The value at a path of embedded messages (`[2, 10]`: field 10 of field 2).
pub fn find_path<'a>(msg: &'a [u8], path: &[u32]) -> Result<Option<Value<'a>>, Malformed> {
    let Some((last, outer)) = path.split_last() else {
        return Ok(None);
    };
    let mut cur = msg;
    for n in outer {
        match find(cur, *n)? {
            Some(m) => cur = m,
            None => return Ok(None),
        }
    }
    let mut found = None;
    for f in fields(cur) {
        let f = f?;
        if f.number == *last {
            found = Some(f.value);
        }
    }
    Ok(found)
}

/// An enveloped body's parts: where its type and raw lie.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Unknown<'a> {
    /// `typeMeta.apiVersion`.
    pub api_version: &'a [u8],
    /// `typeMeta.kind`.
    pub kind: &'a [u8],
    /// The object's (or list's) own message.
    pub raw: &'a [u8],
    /// Where `raw` starts in the body.
    pub raw_at: usize,
}

/// Opens an enveloped body (`k8s\0` + `runtime.Unknown`).
pub fn unwrap(body: &[u8]) -> Result<Unknown<'_>, Malformed> {
    let msg = body.strip_prefix(MAGIC).ok_or(Malformed::NotEnveloped)?;
    let mut out = Unknown {
        api_version: b"",
        kind: b"",
        raw: b"",
        raw_at: 0,
    };
    let mut raw = false;
    for f in fields(msg) {
        let f = f?;
        match (f.number, f.value) {
            (1, Value::Bytes(tm)) => {
                out.api_version = find(tm, 1)?.unwrap_or_default();
                out.kind = find(tm, 2)?.unwrap_or_default();
            }
            (2, Value::Bytes(r)) => {
                out.raw = r;
                out.raw_at = MAGIC.len() + f.end - r.len();
                raw = true;
            }
            _ => {}
        }
    }
    if raw {
        Ok(out)
    } else {
        Err(Malformed::NotEnveloped)
    }
}

/// The `typeMeta` message of `apiVersion`/`kind`.
fn type_meta(api_version: &str, kind: &str) -> BytesMut {
    let mut tm = BytesMut::with_capacity(api_version.len() + kind.len() + 4);
    bytes_field(&mut tm, 1, api_version.as_bytes());
    bytes_field(&mut tm, 2, kind.as_bytes());
    tm
}

/// The body up to the raw's bytes: magic, typeMeta, and the raw's field head
/// for a raw of `raw_len` bytes. The body is this, the raw, and [`UNKNOWN_TAIL`].
pub fn envelope_head(api_version: &str, kind: &str, raw_len: usize) -> BytesMut {
    let tm = type_meta(api_version, kind);
    let mut out = BytesMut::with_capacity(MAGIC.len() + tm.len() + 16);
    out.put_slice(MAGIC);
    bytes_field(&mut out, 1, &tm);
    field_head(&mut out, 2, raw_len);
    out
}

/// A whole enveloped body from a raw given in pieces.
pub fn envelope(api_version: &str, kind: &str, raw: &[&[u8]]) -> Bytes {
    let len = raw.iter().map(|p| p.len()).sum();
    let mut out = envelope_head(api_version, kind, len);
    out.reserve(len + UNKNOWN_TAIL.len());
    for p in raw {
        out.put_slice(p);
    }
    out.put_slice(UNKNOWN_TAIL);
    out.freeze()
}

/// A `ListMeta` as the apiserver writes it: `selfLink` and `continue`
/// written even when empty, `remainingItemCount` only when set.
pub fn list_meta(rv: &str, cont: &str, remaining: Option<u64>) -> BytesMut {
    let mut m = BytesMut::with_capacity(rv.len() + cont.len() + 16);
    bytes_field(&mut m, 1, b"");
    bytes_field(&mut m, 2, rv.as_bytes());
    bytes_field(&mut m, 3, cont.as_bytes());
    if let Some(n) = remaining {
        varint_field(&mut m, 4, n);
    }
    m
}

/// Appends `ListMeta.shardInfo` (field 5, `ShardInfo{1 selector}`) to a
/// [`list_meta`]: the shard selector a list was limited by.
pub fn shard_info(meta: &mut BytesMut, selector: &str) {
    field_head(meta, 5, field_len(selector.len()));
    bytes_field(meta, 1, selector.as_bytes());
}

/// The head of a list body whose items (each written as field 2 of the
/// list) take `items_len` bytes: then the items, then [`UNKNOWN_TAIL`].
pub fn list_head(api_version: &str, list_kind: &str, meta: &[u8], items_len: usize) -> Bytes {
    let raw_len = field_len(meta.len()) + items_len;
    let mut out = envelope_head(api_version, list_kind, raw_len);
    bytes_field(&mut out, 1, meta);
    out.freeze()
}

/// The head of a protobuf list of `kind` in `api_version` with `meta`,
/// whose items take `items_len` bytes ([`list_head`] around [`list_meta`]).
pub fn list_head_of(
    api_version: &str,
    kind: &str,
    meta: &super::ListMeta<'_>,
    items_len: usize,
) -> Bytes {
    let mut m = list_meta(
        &meta.rv.to_string(),
        meta.cont.unwrap_or(""),
        meta.remaining,
    );
    if let Some(selector) = meta.shard {
        shard_info(&mut m, selector);
    }
    list_head(api_version, kind, &m, items_len)
}

/// A `PartialObjectMetadata`'s raw around an object's metadata bytes: its
/// field 1 head, then the metadata.
pub fn partial_object_metadata_head(meta_len: usize) -> BytesMut {
    let mut h = BytesMut::with_capacity(6);
    field_head(&mut h, 1, meta_len);
    h
}

/// One watch frame: the 4-byte big-endian length, then `WatchEvent{1 type,
/// 2 RawExtension{1 raw}}` with `object` (a whole enveloped body, in pieces) as raw.
pub fn watch_frame(kind: &str, object: &[&[u8]]) -> Bytes {
    let raw_len: usize = object.iter().map(|p| p.len()).sum();
    let ext_len = field_len(raw_len);
    let event_len = field_len(kind.len()) + field_len(ext_len);
    let mut out = BytesMut::with_capacity(4 + event_len);
    out.put_u32(event_len as u32);
    bytes_field(&mut out, 1, kind.as_bytes());
    field_head(&mut out, 2, ext_len);
    field_head(&mut out, 1, raw_len);
    for p in object {
        out.put_slice(p);
    }
    out.freeze()
}

/// Splits one frame off the front of a watch stream's buffer: its
/// `WatchEvent` message, or `None` until the whole frame has arrived.
pub fn next_frame_raw(buf: &mut BytesMut) -> Option<Bytes> {
    if buf.len() < 4 {
        return None;
    }
    let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
    if buf.len() < 4 + len {
        return None;
    }
    Some(buf.split_to(4 + len).freeze().slice(4..))
}

/// A `WatchEvent` message's type and object (the whole enveloped body).
pub fn watch_event(event: &[u8]) -> Result<(&[u8], &[u8]), Malformed> {
    let mut kind = None;
    let mut object = None;
    for f in fields(event) {
        match f? {
            Field {
                number: 1,
                value: Value::Bytes(t),
                ..
            } => kind = Some(t),
            Field {
                number: 2,
                value: Value::Bytes(ext),
                ..
            } => object = Some(find(ext, 1)?.unwrap_or_default()),
            _ => {}
        }
    }
    match (kind, object) {
        (Some(k), Some(o)) => Ok((k, o)),
        _ => Err(Malformed::NotEnveloped),
    }
}

/// `metadata` (field 1) of an object's raw with `resourceVersion` (field 6)
/// set to `rv` and, if given, `annotations` (field 12) replaced by these
/// entries; the other fields kept as they lie. Then the whole raw with that
/// metadata, the other fields kept. `raw` is an object's own message.
pub fn with_metadata(
    raw: &[u8],
    rv: u64,
    annotations: Option<&[(&str, &str)]>,
) -> Result<BytesMut, Malformed> {
    let meta = find(raw, 1)?.unwrap_or_default();
    let rv = rv.to_string();
    let mut m = BytesMut::with_capacity(meta.len() + 64);
    let mut rv_done = false;
    let mut ann_done = annotations.is_none();
    let put_ann = |m: &mut BytesMut| {
        for (k, v) in annotations.unwrap_or_default() {
            let mut entry = BytesMut::new();
            bytes_field(&mut entry, 1, k.as_bytes());
            bytes_field(&mut entry, 2, v.as_bytes());
            bytes_field(m, 12, &entry);
        }
    };
    for f in fields(meta) {
        let f = f?;
        if !rv_done && f.number >= 6 {
            bytes_field(&mut m, 6, rv.as_bytes());
            rv_done = true;
        }
        if !ann_done && f.number >= 12 {
            put_ann(&mut m);
            ann_done = true;
        }
        match f.number {
            6 => {}
            12 if annotations.is_some() => {}
            _ => m.put_slice(&meta[f.at..f.end]),
        }
    }
    if !rv_done {
        bytes_field(&mut m, 6, rv.as_bytes());
    }
    if !ann_done {
        put_ann(&mut m);
    }
    let mut out = BytesMut::with_capacity(raw.len() + 64);
    let mut meta_done = false;
    for f in fields(raw) {
        let f = f?;
        if f.number == 1 {
            if !meta_done {
                bytes_field(&mut out, 1, &m);
                meta_done = true;
            }
            continue;
        }
        if !meta_done {
            bytes_field(&mut out, 1, &m);
            meta_done = true;
        }
        out.put_slice(&raw[f.at..f.end]);
    }
    if !meta_done {
        bytes_field(&mut out, 1, &m);
    }
    Ok(out)
}

/// The `ObjectMeta` fields a bookmark carries when nothing better is known:
/// the strings and numbers Go writes for an empty `ObjectMeta` (name,
/// generateName, namespace, selfLink, uid, generation, creationTimestamp),
/// resourceVersion to be set by [`with_metadata`].
pub const EMPTY_OBJECT_META: &[u8] = &[
    0x0a, 0x00, 0x12, 0x00, 0x1a, 0x00, 0x22, 0x00, 0x2a, 0x00, 0x38, 0x00, 0x42, 0x00,
];

/// The raw of a `BOOKMARK`: the watched type with every non-pointer field
/// empty and only `resourceVersion` (and for the end of a streaming list's
/// initial events, its annotations) set. `empty` is such an object as the
/// upstream sent it (its own bookmark: the exact empty fields of its
/// version of the type); without one, an object of only an empty `ObjectMeta`.
pub fn bookmark_raw(
    empty: Option<&[u8]>,
    rv: u64,
    annotations: Option<&[(&str, &str)]>,
) -> BytesMut {
    let mut fallback = BytesMut::new();
    let empty = match empty {
        Some(e) => e,
        None => {
            bytes_field(&mut fallback, 1, EMPTY_OBJECT_META);
            &fallback
        }
    };
    with_metadata(empty, rv, annotations).unwrap_or_else(|_| {
        let mut raw = BytesMut::new();
        bytes_field(&mut raw, 1, EMPTY_OBJECT_META);
        with_metadata(&raw, rv, annotations).expect("well-formed")
    })
}

/// A `BOOKMARK`'s whole body: `kind` (of `api_version`) empty but for
/// resource version `rv`, from the upstream's `empty` object of the type when
/// known; `initial_end`: the one ending a streaming list's initial events,
/// annotated `k8s.io/initial-events-end: "true"` (and, as 1.32 and 1.33 wrote
/// it, with the blueprint `k8s.io/initial-events-list-blueprint`: the base64
/// of an empty list of the kind, in protobuf).
pub fn bookmark(
    empty: Option<&[u8]>,
    api_version: &str,
    kind: &str,
    rv: u64,
    initial_end: Option<InitialEnd>,
) -> Bytes {
    use base64::Engine;
    let blueprint = (initial_end == Some(InitialEnd::WithBlueprint)).then(|| {
        base64::engine::general_purpose::STANDARD
            .encode(empty_list(api_version, &format!("{kind}List")))
    });
    let end = [("k8s.io/initial-events-end", "true")];
    let with_blueprint = blueprint.as_deref().map(|b| {
        [
            ("k8s.io/initial-events-end", "true"),
            ("k8s.io/initial-events-list-blueprint", b),
        ]
    });
    let annotations: Option<&[(&str, &str)]> = match (&with_blueprint, initial_end) {
        (Some(a), _) => Some(&a[..]),
        (None, Some(_)) => Some(&end[..]),
        (None, None) => None,
    };
    let raw = bookmark_raw(empty, rv, annotations);
    envelope(api_version, kind, &[&raw])
}

/// An empty list of `list_kind` as a whole body (the blueprint a streaming
/// list's last bookmark carries, base64-encoded, in the response's encoding).
pub fn empty_list(api_version: &str, list_kind: &str) -> Bytes {
    let meta = list_meta("", "", None);
    let mut raw = BytesMut::new();
    bytes_field(&mut raw, 1, &meta);
    envelope(api_version, list_kind, &[&raw])
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        s.split_whitespace()
            .map(|b| u8::from_str_radix(b, 16).unwrap())
            .collect()
    }

    #[test]
    fn should_write_the_reference_envelope_and_empty_list() {
        // Reference 12: the CRD list's 80 bytes, the metadata-only typeMeta.
        let meta = list_meta("10814", "", None);
        assert_eq!(&meta[..], &hex("0a 00 12 05 31 30 38 31 34 1a 00")[..]);
        let head = list_head(
            "apiextensions.k8s.io/v1",
            "CustomResourceDefinitionList",
            &meta,
            0,
        );
        let mut body = head.to_vec();
        body.extend_from_slice(UNKNOWN_TAIL);
        assert_eq!(body.len(), 80);
        assert_eq!(
            &body[..20],
            &hex("6b 38 73 00 0a 37 0a 17 61 70 69 65 78 74 65 6e 73 69 6f 6e")[..]
        );
        assert!(body.ends_with(&hex("31 34 1a 00 1a 00 22 00")));
        let u = unwrap(&body).unwrap();
        assert_eq!(u.kind, b"CustomResourceDefinitionList");
        assert_eq!(u.raw, &hex("0a 0b 0a 00 12 05 31 30 38 31 34 1a 00")[..]);
        assert_eq!(&body[u.raw_at..u.raw_at + u.raw.len()], u.raw);
        // An empty list with nothing set: selfLink, resourceVersion, continue empty.
        let e = empty_list("v1", "PodList");
        assert!(e.ends_with(&hex("12 08 0a 06 0a 00 12 00 1a 00 1a 00 22 00")));
    }

    #[test]
    fn should_write_the_reference_list_of_one_filtered_pod() {
        // `?fieldSelector=metadata.name=none`: 38 bytes, whole.
        let want = hex(
            "6b 38 73 00 0a 0d 0a 02 76 31 12 07 50 6f 64 4c 69 73 74 12 0d 0a 0b 0a 00 12 05 31 39 37 39 35 1a 00 1a 00 22 00",
        );
        let meta = list_meta("19795", "", None);
        let mut body = list_head("v1", "PodList", &meta, 0).to_vec();
        body.extend_from_slice(UNKNOWN_TAIL);
        assert_eq!(body, want);
        // With one 4073-byte item: raw 4089 = f9 1f, item head 12 e9 1f.
        let item = vec![0u8; 4073];
        let head = list_head("v1", "PodList", &meta, field_len(item.len()));
        assert_eq!(&head[19..22], &hex("12 f9 1f")[..]);
        let mut b = BytesMut::new();
        field_head(&mut b, 2, item.len());
        assert_eq!(&b[..], &hex("12 e9 1f")[..]);
    }

    #[test]
    fn should_frame_a_watch_event_as_the_reference() {
        // Frame 2 of the reference watch: the metadata-only bookmark, 90 bytes.
        let raw = bookmark_raw(None, 19797, None);
        // PartialObjectMetadata has only field 1: the bookmark of v1.21's
        // ObjectMeta also writes clusterName (15): learned from the upstream.
        let meta_121 =
            hex("0a 17 0a 00 12 00 1a 00 22 00 2a 00 32 05 31 39 37 39 37 38 00 42 00 7a 00");
        let learned = bookmark_raw(Some(&meta_121), 19797, None);
        assert_eq!(&learned[..], &meta_121[..]);
        assert_eq!(
            &raw[..],
            &hex("0a 15 0a 00 12 00 1a 00 22 00 2a 00 32 05 31 39 37 39 37 38 00 42 00")[..]
        );
        let body = envelope("meta.k8s.io/v1", "PartialObjectMetadata", &[&learned]);
        assert_eq!(body.len(), 76);
        let frame = watch_frame("BOOKMARK", &[&body]);
        assert_eq!(frame.len(), 4 + 90);
        assert_eq!(
            &frame[..28],
            &hex(
                "00 00 00 5a 0a 08 42 4f 4f 4b 4d 41 52 4b 12 4e 0a 4c 6b 38 73 00 0a 27 0a 0e 6d 65"
            )[..]
        );
        let mut buf = BytesMut::from(&frame[..]);
        buf.extend_from_slice(&frame[..10]);
        let event = next_frame_raw(&mut buf).unwrap();
        let (kind, object) = watch_event(&event).unwrap();
        assert_eq!((kind, object), (&b"BOOKMARK"[..], &body[..]));
        assert_eq!(buf.len(), 10, "the next frame's start is kept");
        assert!(next_frame_raw(&mut buf).is_none());
    }

    #[test]
    fn should_stamp_a_pod_bookmark_as_the_reference() {
        // Frame 2 of the reference's full-object watch: Pod{metadata, spec, status} empty.
        let meta = "0a 17 0a 00 12 00 1a 00 22 00 2a 00 32 05 31 39 37 39 36 38 00 42 00 7a 00";
        let spec = "12 1c 1a 00 32 00 42 00 4a 00 52 00 58 00 60 00 68 00 82 01 00 8a 01 00 9a 01 00 c2 01 00";
        let status = "1a 0e 0a 00 1a 00 22 00 2a 00 32 00 4a 00 5a 00";
        let upstream = hex(&format!("{meta} {spec} {status}"));
        assert_eq!(upstream.len(), 71);
        let raw = bookmark_raw(Some(&upstream), 19796, None);
        assert_eq!(&raw[..], &upstream[..]);
        let later = bookmark_raw(Some(&upstream), 1_000_000, None);
        assert_eq!(later.len(), 73);
        assert_eq!(find(&later, 2).unwrap(), find(&upstream, 2).unwrap());
        let m = find(&later, 1).unwrap().unwrap();
        assert_eq!(find(m, 6).unwrap(), Some(&b"1000000"[..]));
        assert_eq!(find(m, 15).unwrap(), Some(&b""[..]));
        // The end of initial events: annotations between rv and clusterName.
        let end = bookmark_raw(
            Some(&upstream),
            5,
            Some(&[("k8s.io/initial-events-end", "true")]),
        );
        let m = find(&end, 1).unwrap().unwrap();
        let numbers: Vec<u32> = fields(m).map(|f| f.unwrap().number).collect();
        assert_eq!(numbers, vec![1, 2, 3, 4, 5, 6, 7, 8, 12, 15]);
        let entry = find(m, 12).unwrap().unwrap();
        assert_eq!(
            find(entry, 1).unwrap(),
            Some(&b"k8s.io/initial-events-end"[..])
        );
        assert_eq!(find(entry, 2).unwrap(), Some(&b"true"[..]));
    }

    #[test]
    fn should_refuse_what_is_not_protobuf() {
        assert_eq!(unwrap(b"{\"kind\":1}"), Err(Malformed::NotEnveloped));
        assert!(matches!(
            unwrap(b"k8s\0\x0a\x09\x0a"),
            Err(Malformed::Truncated(_))
        ));
        assert!(
            fields(&[0x0b]).next().unwrap().is_err(),
            "a group is refused"
        );
        let mut buf = BytesMut::from(&[0, 0, 0, 3, 0x0a, 0x05, 0x41][..]);
        assert!(watch_event(&next_frame_raw(&mut buf).unwrap()).is_err());
    }

    #[test]
    fn should_size_varints() {
        for v in [
            0u64,
            1,
            127,
            128,
            16383,
            16384,
            u64::from(u32::MAX),
            u64::MAX,
        ] {
            let mut b = BytesMut::new();
            varint(&mut b, v);
            assert_eq!(b.len(), varint_len(v), "{v}");
            let mut at = 0;
            assert_eq!(read_varint(&b, &mut at).unwrap(), v);
        }
    }
}
