//! Cached objects from JSON: key, resource version, labels and selectable
//! fields found in one borrowing parse of the upstream's bytes, kept as
//! spans into one exact-size copy of them.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use super::object::{CachedObject, LABEL, ObjectError, Span, TypeInfo};
use super::view::View;
use crate::api::media::Encoding;
use crate::codec::json;

/// A string borrowed from the input when it has no escapes.
#[derive(Deserialize, PartialEq, Eq, PartialOrd, Ord)]
struct BStr<'a>(#[serde(borrow)] Cow<'a, str>);

#[derive(Deserialize, Default)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    uid: Option<Cow<'a, str>>,
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

/// What a custom resource's object is read for: its kind and metadata. Its
/// other members are its CRD's own, of any shape (a `spec.nodeName` that is
/// a number, a `source` that is a string): its selectable fields are found
/// by their paths ([`json::value_at`]), never by the built-ins' probes.
#[derive(Deserialize)]
struct CustomProbe<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    metadata: Meta<'a>,
}

#[derive(Deserialize, Default)]
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

impl TypeInfo {
    /// Parses an upstream object (`src` may lack `kind`/`apiVersion`, as list
    /// items do) into a cached object owning an exact-size copy of its JSON.
    pub fn parse(&self, src: &[u8]) -> Result<CachedObject, ObjectError> {
        self.parse_event(src, None)
    }

    /// [`TypeInfo::parse`] of the object of a watch event of type `kind`:
    /// the object is kept inside the event's line as r8s's watchers get it
    /// (built here, in the same buffer), for the event log to share.
    pub fn parse_event(
        &self,
        src: &[u8],
        kind: Option<&'static str>,
    ) -> Result<CachedObject, ObjectError> {
        let o = self.parse_json(src, kind)?;
        if self.drop_managed_fields && o.has_managed_fields() {
            // Kept without them: parsed again from the bytes without them
            // (only objects that have them pay, once, as they arrive).
            return self.parse_json(&o.body_as(View::DROPPED), kind);
        }
        Ok(o)
    }

    fn parse_json(
        &self,
        src: &[u8],
        kind: Option<&'static str>,
    ) -> Result<CachedObject, ObjectError> {
        let malformed = |e: serde_json::Error| ObjectError::Malformed(e.to_string());
        let custom = self.is_custom();
        let p: Probe = if custom {
            let c: CustomProbe = serde_json::from_slice(src).map_err(malformed)?;
            Probe {
                kind: c.kind,
                metadata: c.metadata,
                ..Probe::default()
            }
        } else {
            serde_json::from_slice(src).map_err(malformed)?
        };
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
        let uid_hash = crate::api::shard::fnv1a(p.metadata.uid.as_deref().unwrap_or(""));
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
        let field_names = self.fields;
        for (i, f) in field_names.iter().enumerate() {
            if custom {
                // (`metadata.*` are the key's; absent and `null` are "".)
                if let Some(v) = custom_value(src, f).map_err(malformed)? {
                    match v {
                        Cow::Borrowed(s) => record(i as u8, &Cow::Borrowed(""), s, true),
                        Cow::Owned(s) => record(i as u8, &Cow::Owned(String::new()), &s, false),
                    }
                }
                continue;
            }
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
        let body_len = if add_prefix {
            src.len() + prefix.len() - 1
        } else {
            src.len()
        };
        let head_len = kind.map_or(0, json::watch_line_head_len);
        let tail = if kind.is_some() {
            json::WATCH_LINE_TAIL
        } else {
            b""
        };
        let mut full = Vec::with_capacity(head_len + body_len + tail.len());
        if let Some(k) = kind {
            json::put_watch_line_head(&mut full, k);
        }
        if add_prefix {
            full.extend_from_slice(prefix.as_bytes());
            full.extend_from_slice(&src[1..]);
        } else {
            full.extend_from_slice(src);
        }
        full.extend_from_slice(tail);
        let full = Bytes::from(full);
        let json = full.slice(head_len..head_len + body_len);
        let framed = kind.map(|k| (k, full));
        let item_skip = if !self.items_typed && (!has_kind || json.starts_with(prefix.as_bytes())) {
            prefix.len()
        } else {
            1
        };
        let meta = meta_span(&json).ok_or_else(|| ObjectError::Malformed("no metadata".into()))?;
        let (m0, mlen) = (meta.0 as usize, meta.1 as usize);
        let managed = json::top_level_member(&json[m0..m0 + mlen], "managedFields")
            .map_or((0, 0), |r| ((m0 + r.start) as u32, r.len() as u32));
        Ok(CachedObject {
            memo: crate::codec::run::Memo::new(&key),
            row: Default::default(),
            key,
            ns_len,
            rv,
            uid_hash,
            body: json,
            encoding: Encoding::Json,
            item_skip,
            meta,
            managed,
            spans: spans.into_boxed_slice(),
            owned: owned.into_boxed_slice(),
            field_names,
            framed,
        })
    }
}

impl TypeInfo {
    /// Whether its objects are a custom resource's (whole: a custom
    /// resource's protobuf store holds `PartialObjectMetadata`).
    fn is_custom(&self) -> bool {
        let group = self.api_version.rsplit_once('/').map_or("", |(g, _)| g);
        !crate::api::gvr::is_builtin_group(group)
    }
}

/// The value of a custom resource's selectable field `label` (`spec.color`)
/// in `src`, as apiextensions-apiserver's field set gives it
/// (`fmt.Sprint` of the value): a string's text, an integer's or boolean's
/// as written; `None` for "" (absent, `null`, an empty string). The CRD
/// allows only strings, integers and booleans; anything else counts as
/// absent. Borrowed from `src` but for a string with escapes.
fn custom_value<'s>(src: &'s [u8], label: &str) -> Result<Option<Cow<'s, str>>, serde_json::Error> {
    let Some(r) = json::value_at(src, label) else {
        return Ok(None);
    };
    let v = &src[r];
    let text = |b: &'s [u8]| std::str::from_utf8(b).ok().map(Cow::Borrowed);
    Ok(match v.first() {
        Some(b'"') if v.len() > 2 && !v.contains(&b'\\') => text(&v[1..v.len() - 1]),
        Some(b'"') => {
            Some(Cow::<str>::Owned(serde_json::from_slice::<String>(v)?)).filter(|s| !s.is_empty())
        }
        Some(b't' | b'f' | b'-' | b'0'..=b'9') => text(v),
        _ => None,
    })
}

/// This JSON object's last state as seen at resource version `rv` (a
/// delete found by a relist): same bytes, `metadata.resourceVersion`
/// rewritten. [`super::history`] picks this or the protobuf one.
pub(super) fn at_version(o: &CachedObject, rv: u64) -> CachedObject {
    let old = format!("\"resourceVersion\":\"{}\"", o.rv);
    let new = format!("\"resourceVersion\":\"{rv}\"");
    let text = String::from_utf8_lossy(&o.body);
    let json = match text.find(&old) {
        Some(at) => {
            let mut s = String::with_capacity(text.len() + 8);
            s.push_str(&text[..at]);
            s.push_str(&new);
            s.push_str(&text[at + old.len()..]);
            Bytes::from(s)
        }
        None => o.body.clone(),
    };
    let shift = json.len() as i64 - o.body.len() as i64;
    let at = text.find(&old).unwrap_or(usize::MAX) as i64;
    let moved = |p: u32| {
        if (p as i64) > at {
            (p as i64 + shift) as u32
        } else {
            p
        }
    };
    let meta = meta_span(&json).unwrap_or(o.meta);
    CachedObject {
        memo: crate::codec::run::Memo::new(&o.key),
        row: Default::default(),
        key: o.key.clone(),
        ns_len: o.ns_len,
        rv,
        uid_hash: o.uid_hash,
        body: json,
        encoding: Encoding::Json,
        item_skip: o.item_skip,
        meta,
        managed: match o.managed {
            (_, 0) => (0, 0),
            (at, len) => (moved(at), len),
        },
        spans: o
            .spans
            .iter()
            .map(|s| Span {
                key_at: moved(s.key_at),
                val_at: moved(s.val_at),
                ..*s
            })
            .collect(),
        owned: o.owned.clone(),
        field_names: o.field_names,
        framed: None,
    }
}

/// Where the `metadata` value is in an object's JSON.
fn meta_span(json: &[u8]) -> Option<(u32, u32)> {
    let r = json::top_level_value(json, "metadata")?;
    Some((r.start as u32, r.len() as u32))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::selector::{FieldSelector, LabelSelector, Selectors, supported_fields};
    use crate::codec::json::ListItem;

    #[test]
    fn should_find_labels_and_fields_in_the_stored_bytes() {
        let t = TypeInfo::for_tests("Pod", "v1", "pods");
        let src = br#"{"metadata":{"name":"p","namespace":"ns","uid":"026a5438-d349-42d8-bf13-db56e82697dc","resourceVersion":"7","labels":{"app":"web","esc\u0041":"x"}},"spec":{"nodeName":"n1","hostNetwork":true},"status":{"phase":"Running"}}"#;
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
            fields: sel,
            ..Default::default()
        }));
        // Its uid's shard: the upper half (as 1.36 put this uid); its
        // namespace's, by the namespace's own hash.
        let shard = |range: &str| Selectors {
            shard: Some(crate::api::shard::ShardSelector::parse(range).unwrap()),
            ..Default::default()
        };
        let (low, high) = (
            "'0x0000000000000000', '0x8000000000000000')",
            "'0x8000000000000000', '0x10000000000000000')",
        );
        assert!(!o.matches(&shard(&format!("shardRange(object.metadata.uid, {low}"))));
        assert!(o.matches(&shard(&format!("shardRange(object.metadata.uid, {high}"))));
        let ns_high = crate::api::shard::fnv1a("ns") >= 1 << 63;
        assert_eq!(
            o.matches(&shard(&format!(
                "shardRange(object.metadata.namespace, {high}"
            ))),
            ns_high
        );
        assert_eq!(at_version(&o, 9).uid_hash, o.uid_hash);
    }

    /// A custom resource's selectable fields, as apiextensions-apiserver's
    /// `selectableFields` reads them (`fmt.Sprint` of the value at the path;
    /// "" where absent or `null`), whatever shape its other members have.
    #[test]
    fn should_read_a_custom_resources_selectable_fields_by_path() {
        let resource = crate::api::ApiResource {
            gvr: crate::api::Gvr::from_static("example.com", "v1", "widgets"),
            kind: "Widget".into(),
            namespaced: true,
            selectable: crate::api::gvr::intern_fields(
                [
                    "spec.color",
                    "spec.size",
                    "spec.on",
                    "spec.deep.er",
                    "spec.gone",
                    "status.nil",
                ]
                .into_iter(),
            ),
        };
        let t = TypeInfo::of(&resource, Encoding::Json);
        assert_eq!(
            t.fields.len(),
            8,
            "metadata.name, metadata.namespace and the six"
        );
        // `spec.nodeName` a number, `source` a string, `status.phase` an
        // object: none of the built-ins' shapes is asked of it.
        let src = br#"{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","namespace":"ns","resourceVersion":"3"},"spec":{"color":"r\u00e9d","size":-42,"on":false,"deep":{"er":"x"},"nodeName":5},"source":"s","status":{"phase":{"a":1},"nil":null}}"#;
        let o = t.parse(src).unwrap();
        assert_eq!(o.field("spec.color"), "r\u{e9}d");
        assert_eq!(o.field("spec.size"), "-42");
        assert_eq!(o.field("spec.on"), "false");
        assert_eq!(o.field("spec.deep.er"), "x");
        assert_eq!(o.field("spec.gone"), "");
        assert_eq!(o.field("status.nil"), "");
        assert_eq!(o.field("metadata.name"), "w");
        assert_eq!(o.owned.len(), 1, "only the escaped string is owned");
        let sel = |s: &str| Selectors {
            fields: FieldSelector::parse(s, t.fields).unwrap(),
            ..Default::default()
        };
        assert!(o.matches(&sel("spec.color=r\u{e9}d,spec.size=-42,spec.on=false")));
        assert!(o.matches(&sel("spec.gone=,status.nil=")));
        assert!(!o.matches(&sel("spec.on!=false")));
        // The protobuf store (`PartialObjectMetadata`) holds no selectable field.
        assert_eq!(
            TypeInfo::of(&resource, Encoding::Protobuf).fields,
            ["metadata.name", "metadata.namespace"]
        );
    }
}
