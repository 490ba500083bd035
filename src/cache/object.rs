//! One cached object: the upstream's bytes, plus what is needed to key,
//! filter and order it, parsed in one pass when it arrives.
//!
//! Memory is the point: the body (JSON, or protobuf in a protobuf cache) is
//! stored once, in one exact-size buffer, and labels and selectable fields
//! are spans into it (one small allocation per object), so the cache costs
//! little more than the bytes it serves. [`super::protobuf`] parses the
//! protobuf bodies.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use crate::api::media::Encoding;
use crate::api::selector::{Selectors, supported_fields};
use crate::codec::json::{self, ListItem};
use crate::codec::protobuf as pb;

/// Where a label or field value lives in the object's body.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// `LABEL`, or the index of the field in `supported_fields(resource)`.
    pub(super) what: u8,
    pub(super) key_at: u32,
    pub(super) key_len: u16,
    pub(super) val_at: u32,
    pub(super) val_len: u16,
}

/// [`Span::what`] of a label.
pub(super) const LABEL: u8 = u8::MAX;

/// A label or field value kept as its own string: (what, key, value).
pub(super) type Owned = (u8, Box<str>, Box<str>);

/// A cached object.
#[derive(Debug)]
pub struct CachedObject {
    /// Storage key: `namespace/name`, or `name` for cluster-scoped objects.
    pub key: Arc<str>,
    /// Length of the namespace prefix of `key` (0 for cluster-scoped).
    pub ns_len: usize,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// The object as a get or watch event carries it: JSON with `kind` and
    /// `apiVersion`, or the protobuf body (`k8s\0` + `runtime.Unknown`).
    pub body: Bytes,
    /// Which of the two `body` is.
    pub encoding: Encoding,
    /// Where the list-item form starts in `body`. JSON: the byte after which
    /// it continues after `{` (skipping `"kind":..,"apiVersion":..,` for
    /// built-ins; 1 when nothing to skip). Protobuf: where the raw starts
    /// (it ends before the body's last four bytes).
    pub item_skip: usize,
    /// Where the `metadata` value is in `body` (for metadata-only answers).
    pub(super) meta: (u32, u32),
    /// Labels and selectable field values, as spans into `body`.
    pub(super) spans: Box<[Span]>,
    /// Values that could not be spans (JSON escapes, booleans): rare.
    pub(super) owned: Box<[Owned]>,
    /// The resource's selectable fields (index space of `Span::what`).
    pub(super) field_names: &'static [&'static str],
}

impl CachedObject {
    /// The namespace ("" for cluster-scoped).
    pub fn namespace(&self) -> &str {
        if self.ns_len == 0 {
            ""
        } else {
            &self.key[..self.ns_len]
        }
    }

    /// The name.
    pub fn name(&self) -> &str {
        if self.ns_len == 0 {
            &self.key
        } else {
            &self.key[self.ns_len + 1..]
        }
    }

    /// The `metadata` value as the upstream wrote it.
    pub fn metadata(&self) -> &[u8] {
        let (at, len) = self.meta;
        &self.body[at as usize..(at + len) as usize]
    }

    fn text(&self, at: u32, len: u16) -> &str {
        let b = &self.body[at as usize..at as usize + len as usize];
        std::str::from_utf8(b).unwrap_or("")
    }

    /// The value of label `k`.
    pub fn label(&self, k: &str) -> Option<&str> {
        self.spans
            .iter()
            .filter(|s| s.what == LABEL)
            .find(|s| self.text(s.key_at, s.key_len) == k)
            .map(|s| self.text(s.val_at, s.val_len))
            .or_else(|| {
                self.owned
                    .iter()
                    .find(|(w, key, _)| *w == LABEL && &**key == k)
                    .map(|(_, _, v)| &**v)
            })
    }

    /// The value of a selectable field (`spec.nodeName`, ...); "" when absent.
    pub fn field(&self, name: &str) -> &str {
        match name {
            "metadata.name" => return self.name(),
            "metadata.namespace" => return self.namespace(),
            _ => {}
        }
        let Some(idx) = self.field_names.iter().position(|f| *f == name) else {
            return "";
        };
        let idx = idx as u8;
        if let Some(s) = self.spans.iter().find(|s| s.what == idx) {
            return self.text(s.val_at, s.val_len);
        }
        if let Some((_, _, v)) = self.owned.iter().find(|(w, _, _)| *w == idx) {
            return v;
        }
        if matches!(name, "spec.hostNetwork" | "spec.unschedulable") {
            "false"
        } else {
            ""
        }
    }

    /// This JSON object's last state as seen at resource version `rv` (a
    /// delete found by a relist): same bytes, `metadata.resourceVersion`
    /// rewritten. [`super::history`] picks this or the protobuf one.
    pub(super) fn json_at_version(&self, rv: u64) -> CachedObject {
        let old = format!("\"resourceVersion\":\"{}\"", self.rv);
        let new = format!("\"resourceVersion\":\"{rv}\"");
        let text = String::from_utf8_lossy(&self.body);
        let json = match text.find(&old) {
            Some(at) => {
                let mut s = String::with_capacity(text.len() + 8);
                s.push_str(&text[..at]);
                s.push_str(&new);
                s.push_str(&text[at + old.len()..]);
                Bytes::from(s)
            }
            None => self.body.clone(),
        };
        let shift = json.len() as i64 - self.body.len() as i64;
        let at = text.find(&old).unwrap_or(usize::MAX) as i64;
        let moved = |p: u32| {
            if (p as i64) > at {
                (p as i64 + shift) as u32
            } else {
                p
            }
        };
        let meta = meta_span(&json).unwrap_or(self.meta);
        CachedObject {
            key: self.key.clone(),
            ns_len: self.ns_len,
            rv,
            body: json,
            encoding: Encoding::Json,
            item_skip: self.item_skip,
            meta,
            spans: self
                .spans
                .iter()
                .map(|s| Span {
                    key_at: moved(s.key_at),
                    val_at: moved(s.val_at),
                    ..*s
                })
                .collect(),
            owned: self.owned.clone(),
            field_names: self.field_names,
        }
    }

    /// Its `PartialObjectMetadata` as a get answers it, in its encoding:
    /// the metadata bytes cut from the object, never re-serialized.
    pub fn metadata_body(&self) -> Bytes {
        match self.encoding {
            Encoding::Json => Bytes::from(json::partial_object_metadata(self.metadata()).concat()),
            Encoding::Protobuf => {
                let meta = self.metadata();
                let head = pb::partial_object_metadata_head(meta.len());
                pb::envelope(
                    json::META_API_VERSION,
                    "PartialObjectMetadata",
                    &[&head, meta],
                )
            }
        }
    }

    /// A watch event of type `kind` carrying this object (or, with
    /// `metadata_only`, its `PartialObjectMetadata`), framed in its
    /// encoding: a JSON line, or a length-prefixed protobuf `WatchEvent`.
    pub fn watch_event(&self, kind: &str, metadata_only: bool) -> Bytes {
        match (self.encoding, metadata_only) {
            (Encoding::Json, false) => json::watch_line(kind, &self.body),
            (Encoding::Json, true) => {
                json::watch_line_of(kind, &json::partial_object_metadata(self.metadata()))
            }
            (Encoding::Protobuf, false) => pb::watch_frame(kind, &[&self.body]),
            (Encoding::Protobuf, true) => {
                let meta = self.metadata();
                let raw_head = pb::partial_object_metadata_head(meta.len());
                let head = pb::envelope_head(
                    json::META_API_VERSION,
                    "PartialObjectMetadata",
                    raw_head.len() + meta.len(),
                );
                pb::watch_frame(kind, &[&head, &raw_head, meta, pb::UNKNOWN_TAIL])
            }
        }
    }

    /// A protobuf object's own message (its body without the envelope).
    pub fn raw(&self) -> &[u8] {
        let end = self.body.len().saturating_sub(pb::UNKNOWN_TAIL.len());
        &self.body[self.item_skip.min(end)..end]
    }

    /// Bytes this object holds (for memory accounting).
    pub fn size(&self) -> usize {
        self.body.len()
            + self.key.len()
            + 16
            + self.spans.len() * std::mem::size_of::<Span>()
            + self
                .owned
                .iter()
                .map(|(_, k, v)| k.len() + v.len() + 40)
                .sum::<usize>()
            + std::mem::size_of::<Self>()
            + 16
    }

    /// Whether the object passes a request's selectors.
    pub fn matches(&self, s: &Selectors) -> bool {
        s.labels.matches(|k| self.label(k)) && s.fields.matches_str(|f| self.field(f))
    }
}

/// An object in a `PartialObjectMetadataList`: its metadata bytes, cut from
/// the cached JSON (never re-serialized).
pub struct MetadataItem(pub Arc<CachedObject>);

impl MetadataItem {
    /// [`ListItem::item_len`] of `o`'s metadata-only form.
    pub fn len_of(o: &CachedObject) -> usize {
        let meta = o.meta.1 as usize;
        match o.encoding {
            Encoding::Json => meta + json::PARTIAL_OBJECT_METADATA_HEAD.len() + 2,
            Encoding::Protobuf => pb::field_len(pb::field_len(meta)),
        }
    }
}

impl ListItem for MetadataItem {
    fn item_len(&self) -> usize {
        Self::len_of(&self.0)
    }

    fn write_item(&self, out: &mut bytes::BytesMut) {
        match self.0.encoding {
            Encoding::Json => {
                for part in json::partial_object_metadata(self.0.metadata()) {
                    out.extend_from_slice(part);
                }
            }
            Encoding::Protobuf => {
                let meta = self.0.metadata();
                pb::field_head(out, 2, pb::field_len(meta.len()));
                pb::field_head(out, 1, meta.len());
                out.extend_from_slice(meta);
            }
        }
    }
}

/// Lists stream straight from cached objects.
impl ListItem for CachedObject {
    fn item_len(&self) -> usize {
        match self.encoding {
            Encoding::Json => self.body.len() + 1,
            Encoding::Protobuf => pb::field_len(self.raw().len()),
        }
    }

    /// The list-item form: built-ins drop `kind`/`apiVersion`, as the
    /// apiserver does; a protobuf item is the object's raw (field 2 of the list).
    fn write_item(&self, out: &mut bytes::BytesMut) {
        match self.encoding {
            Encoding::Json => {
                out.extend_from_slice(b"{");
                out.extend_from_slice(&self.body[self.item_skip..]);
            }
            Encoding::Protobuf => {
                let raw = self.raw();
                pb::field_head(out, 2, raw.len());
                out.extend_from_slice(raw);
            }
        }
    }
}

/// Where the `metadata` value is in an object's JSON.
fn meta_span(json: &[u8]) -> Option<(u32, u32)> {
    let r = json::top_level_value(json, "metadata")?;
    Some((r.start as u32, r.len() as u32))
}

/// Objects by key, ordered as the apiserver lists them (`namespace/name`).
pub type Objects = imbl::OrdMap<Arc<str>, Arc<CachedObject>>;

/// A string borrowed from the input when it has no escapes.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct BStr<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: Option<std::collections::BTreeMap<BStr<'a>, BStr<'a>>>,
}

/// Value of one selectable field, as serde found it.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar<'a> {
    Str(#[serde(borrow)] Cow<'a, str>),
    Bool(bool),
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct SpecProbe<'a> {
    #[serde(borrow, default)]
    node_name: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    restart_policy: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    scheduler_name: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    service_account_name: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    host_network: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    unschedulable: Option<Scalar<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct StatusProbe<'a> {
    #[serde(borrow, default)]
    phase: Option<Scalar<'a>>,
    #[serde(borrow, default, rename = "podIP")]
    pod_ip: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    nominated_node_name: Option<Scalar<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(rename_all = "camelCase")]
struct InvolvedProbe<'a> {
    #[serde(borrow, default)]
    kind: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    namespace: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    name: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    uid: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    api_version: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    resource_version: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    field_path: Option<Scalar<'a>>,
}

#[derive(Deserialize, Default)]
struct SourceProbe<'a> {
    #[serde(borrow, default)]
    component: Option<Scalar<'a>>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Probe<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    metadata: Meta<'a>,
    #[serde(borrow, default)]
    spec: Option<SpecProbe<'a>>,
    #[serde(borrow, default)]
    status: Option<StatusProbe<'a>>,
    #[serde(borrow, default, rename = "type")]
    type_: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    reason: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    involved_object: Option<InvolvedProbe<'a>>,
    #[serde(borrow, default)]
    reporting_component: Option<Scalar<'a>>,
    #[serde(borrow, default)]
    source: Option<SourceProbe<'a>>,
}

impl<'a> Probe<'a> {
    fn field(&self, name: &str) -> Option<&Scalar<'a>> {
        let spec = self.spec.as_ref();
        let status = self.status.as_ref();
        let inv = self.involved_object.as_ref();
        match name {
            "spec.nodeName" => spec?.node_name.as_ref(),
            "spec.restartPolicy" => spec?.restart_policy.as_ref(),
            "spec.schedulerName" => spec?.scheduler_name.as_ref(),
            "spec.serviceAccountName" => spec?.service_account_name.as_ref(),
            "spec.hostNetwork" => spec?.host_network.as_ref(),
            "spec.unschedulable" => spec?.unschedulable.as_ref(),
            "status.phase" => status?.phase.as_ref(),
            "status.podIP" => status?.pod_ip.as_ref(),
            "status.nominatedNodeName" => status?.nominated_node_name.as_ref(),
            "type" => self.type_.as_ref(),
            "reason" => self.reason.as_ref(),
            "reportingComponent" => self.reporting_component.as_ref(),
            "source" => self.source.as_ref()?.component.as_ref(),
            "involvedObject.kind" => inv?.kind.as_ref(),
            "involvedObject.namespace" => inv?.namespace.as_ref(),
            "involvedObject.name" => inv?.name.as_ref(),
            "involvedObject.uid" => inv?.uid.as_ref(),
            "involvedObject.apiVersion" => inv?.api_version.as_ref(),
            "involvedObject.resourceVersion" => inv?.resource_version.as_ref(),
            "involvedObject.fieldPath" => inv?.field_path.as_ref(),
            _ => None,
        }
    }
}

/// Why an upstream object could not be cached.
#[derive(Debug, thiserror::Error)]
pub enum ObjectError {
    /// Not a JSON object with `metadata.name`.
    #[error("malformed object: {0}")]
    Malformed(String),
    /// `metadata.resourceVersion` is not a decimal integer.
    #[error("resourceVersion {0:?} is not a decimal integer")]
    BadResourceVersion(String),
}

/// What the cache needs to know about a resource to parse its objects.
#[derive(Debug, Clone)]
pub struct TypeInfo {
    /// `kind`.
    pub kind: String,
    /// `apiVersion` (`v1`, `apps/v1`).
    pub api_version: String,
    /// Plural resource name (for field selectors).
    pub resource: String,
    /// Whether the upstream's list items carry `kind`/`apiVersion` (custom
    /// resources) or not (built-ins); learned from the first list.
    pub items_typed: bool,
}

impl TypeInfo {
    /// Parses an upstream object (`src` may lack `kind`/`apiVersion`, as list
    /// items do) into a cached object owning an exact-size copy of its JSON.
    pub fn parse(&self, src: &[u8]) -> Result<CachedObject, ObjectError> {
        let p: Probe =
            serde_json::from_slice(src).map_err(|e| ObjectError::Malformed(e.to_string()))?;
        let name = p
            .metadata
            .name
            .as_deref()
            .filter(|n| !n.is_empty())
            .ok_or_else(|| ObjectError::Malformed("no metadata.name".into()))?;
        let rv_s = p.metadata.resource_version.as_deref().unwrap_or("");
        let rv = rv_s
            .parse::<u64>()
            .map_err(|_| ObjectError::BadResourceVersion(rv_s.to_string()))?;
        let ns = p.metadata.namespace.as_deref().unwrap_or("");
        let key: Arc<str> = if ns.is_empty() {
            Arc::from(name)
        } else {
            Arc::from(format!("{ns}/{name}"))
        };
        let prefix = format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
            self.kind, self.api_version
        );
        let add_prefix = p.kind.is_none() && src.len() > 1;
        // Offsets of borrowed strings shift by what is prepended.
        let shift = if add_prefix { prefix.len() - 1 } else { 0 };
        let base = src.as_ptr() as usize;
        let span_of = |s: &str| -> Option<(u32, u16)> {
            let at = (s.as_ptr() as usize).checked_sub(base)?;
            (at + s.len() <= src.len() && s.len() <= u16::MAX as usize)
                .then(|| ((at + shift) as u32, s.len() as u16))
        };
        let mut spans = Vec::new();
        let mut owned = Vec::new();
        let mut record = |what: u8, k: &Cow<str>, v: &str, v_borrowed: bool| {
            let ks = if let Cow::Borrowed(k) = k {
                span_of(k)
            } else {
                None
            };
            let vs = if v_borrowed { span_of(v) } else { None };
            match (ks, vs) {
                (Some((ka, kl)), Some((va, vl))) => spans.push(Span {
                    what,
                    key_at: ka,
                    key_len: kl,
                    val_at: va,
                    val_len: vl,
                }),
                (None, Some((va, vl))) if what != LABEL => spans.push(Span {
                    what,
                    key_at: 0,
                    key_len: 0,
                    val_at: va,
                    val_len: vl,
                }),
                _ => owned.push((what, Box::from(&**k), Box::from(v))),
            }
        };
        for (BStr(k), BStr(v)) in p.metadata.labels.iter().flatten() {
            record(LABEL, k, v, matches!(v, Cow::Borrowed(_)));
        }
        let field_names = supported_fields(&self.resource);
        for (i, f) in field_names.iter().enumerate() {
            match p.field(f) {
                Some(Scalar::Str(Cow::Borrowed(s))) if !s.is_empty() => {
                    record(i as u8, &Cow::Borrowed(""), s, true)
                }
                Some(Scalar::Str(Cow::Owned(s))) if !s.is_empty() => {
                    record(i as u8, &Cow::Owned(String::new()), s, false)
                }
                Some(Scalar::Bool(b)) => record(
                    i as u8,
                    &Cow::Owned(String::new()),
                    if *b { "true" } else { "false" },
                    false,
                ),
                _ => {}
            }
        }
        let ns_len = ns.len();
        let has_kind = !add_prefix;
        drop(p);
        let json = if add_prefix {
            let mut full = Vec::with_capacity(src.len() + prefix.len() - 1);
            full.extend_from_slice(prefix.as_bytes());
            full.extend_from_slice(&src[1..]);
            Bytes::from(full)
        } else {
            Bytes::copy_from_slice(src)
        };
        let item_skip = if !self.items_typed && (!has_kind || json.starts_with(prefix.as_bytes())) {
            prefix.len()
        } else {
            1
        };
        let meta = meta_span(&json).ok_or_else(|| ObjectError::Malformed("no metadata".into()))?;
        Ok(CachedObject {
            key,
            ns_len,
            rv,
            body: json,
            encoding: Encoding::Json,
            item_skip,
            meta,
            spans: spans.into_boxed_slice(),
            owned: owned.into_boxed_slice(),
            field_names,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::selector::{FieldSelector, LabelSelector};

    #[test]
    fn should_find_labels_and_fields_in_the_stored_bytes() {
        let t = TypeInfo {
            kind: "Pod".into(),
            api_version: "v1".into(),
            resource: "pods".into(),
            items_typed: false,
        };
        let src = br#"{"metadata":{"name":"p","namespace":"ns","resourceVersion":"7","labels":{"app":"web","esc\u0041":"x"}},"spec":{"nodeName":"n1","hostNetwork":true},"status":{"phase":"Running"}}"#;
        let o = t.parse(src).unwrap();
        assert_eq!((o.namespace(), o.name(), o.rv), ("ns", "p", 7));
        assert_eq!(o.label("app"), Some("web"));
        assert_eq!(
            o.label("escA"),
            Some("x"),
            "escaped keys fall back to owned strings"
        );
        assert_eq!(
            o.owned.len(),
            2,
            "only the escaped label and the boolean are owned"
        );
        assert_eq!(o.spans.len(), 3, "the rest are spans into the JSON");
        assert_eq!(o.label("nope"), None);
        assert_eq!(o.field("spec.nodeName"), "n1");
        assert_eq!(o.field("spec.hostNetwork"), "true");
        assert_eq!(o.field("status.phase"), "Running");
        assert_eq!(o.field("status.podIP"), "");
        assert!(
            o.body
                .starts_with(br#"{"kind":"Pod","apiVersion":"v1","metadata""#)
        );
        let mut out = bytes::BytesMut::new();
        o.write_item(&mut out);
        assert_eq!(&out[..], &src[..]);
        let sel = FieldSelector::parse(
            "spec.nodeName=n1,metadata.namespace=ns",
            supported_fields("pods"),
        )
        .unwrap();
        let labels = LabelSelector::parse("app in (web)").unwrap();
        assert!(o.matches(&Selectors {
            labels,
            fields: sel
        }));
    }
}
