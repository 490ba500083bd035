//! One cached object: the upstream's bytes, plus the metadata needed to key,
//! filter and order it, parsed once when it arrives. No JSON tree is kept.

use std::borrow::Cow;
use std::sync::Arc;

use bytes::Bytes;
use serde::Deserialize;

use crate::api::selector::{FieldSelector, LabelSelector};

/// A cached object.
#[derive(Debug)]
pub struct CachedObject {
    /// Storage key: `namespace/name`, or `name` for cluster-scoped objects.
    pub key: Arc<str>,
    /// Length of the namespace prefix of `key` (0 for cluster-scoped).
    pub ns_len: usize,
    /// `metadata.resourceVersion`.
    pub rv: u64,
    /// `metadata.labels`.
    pub labels: Box<[(Box<str>, Box<str>)]>,
    /// Values of the selectable fields this resource supports (beyond metadata).
    pub fields: Box<[(&'static str, Box<str>)]>,
    /// The object's JSON with `kind` and `apiVersion` (as a get or watch event carries it).
    pub json: Bytes,
    /// Byte offset in `json` where the list-item form starts after `{`
    /// (skips `"kind":..,"apiVersion":..,` for built-ins; 1 when nothing to skip).
    pub item_skip: usize,
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

    /// Bytes this object holds (for memory accounting).
    pub fn size(&self) -> usize {
        self.json.len()
            + self.key.len()
            + self
                .labels
                .iter()
                .map(|(k, v)| k.len() + v.len() + 32)
                .sum::<usize>()
            + self.fields.iter().map(|(_, v)| v.len() + 24).sum::<usize>()
            + std::mem::size_of::<Self>()
    }

    /// Whether the object passes a request's selectors.
    pub fn matches(&self, labels: &LabelSelector, fields: &FieldSelector) -> bool {
        labels.matches(|k| {
            self.labels
                .iter()
                .find(|(lk, _)| &**lk == k)
                .map(|(_, v)| &**v)
        }) && fields.matches(|f| match f {
            "metadata.name" => self.name().to_string(),
            "metadata.namespace" => self.namespace().to_string(),
            f => self
                .fields
                .iter()
                .find(|(k, _)| *k == f)
                .map(|(_, v)| v.to_string())
                .unwrap_or_default(),
        })
    }

    /// Writes the list-item form (built-ins drop `kind`/`apiVersion`, as the apiserver does).
    pub fn write_item(&self, out: &mut bytes::BytesMut) {
        out.extend_from_slice(b"{");
        out.extend_from_slice(&self.json[self.item_skip..]);
    }
}

#[derive(Deserialize)]
struct Meta<'a> {
    #[serde(borrow, default)]
    name: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    namespace: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "resourceVersion")]
    resource_version: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    labels: Option<std::collections::BTreeMap<Cow<'a, str>, Cow<'a, str>>>,
}

#[derive(Deserialize)]
struct Probe<'a> {
    #[serde(borrow, default)]
    kind: Option<Cow<'a, str>>,
    #[serde(borrow)]
    metadata: Meta<'a>,
    #[serde(borrow, default)]
    spec: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    status: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default, rename = "type")]
    type_: Option<Cow<'a, str>>,
    #[serde(borrow, default)]
    reason: Option<Cow<'a, str>>,
    #[serde(borrow, default, rename = "involvedObject")]
    involved_object: Option<&'a serde_json::value::RawValue>,
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

fn field_of(raw: Option<&serde_json::value::RawValue>, path: &str) -> Option<String> {
    let v: serde_json::Value = serde_json::from_str(raw?.get()).ok()?;
    match v.pointer(path)? {
        serde_json::Value::String(s) => Some(s.clone()),
        serde_json::Value::Bool(b) => Some(b.to_string()),
        serde_json::Value::Number(n) => Some(n.to_string()),
        _ => None,
    }
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
    /// Parses an upstream object (`json` may lack `kind`/`apiVersion`, as list items do).
    pub fn parse(&self, json: Bytes) -> Result<CachedObject, ObjectError> {
        let (key, ns_len, rv, labels, fields, has_kind) = self.probe(&json)?;
        self.finish(json, key, ns_len, rv, labels, fields, has_kind)
    }

    #[allow(clippy::type_complexity)]
    fn probe(
        &self,
        json: &[u8],
    ) -> Result<
        (
            Arc<str>,
            usize,
            u64,
            Box<[(Box<str>, Box<str>)]>,
            Vec<(&'static str, Box<str>)>,
            bool,
        ),
        ObjectError,
    > {
        let p: Probe =
            serde_json::from_slice(json).map_err(|e| ObjectError::Malformed(e.to_string()))?;
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
        let labels = p
            .metadata
            .labels
            .unwrap_or_default()
            .into_iter()
            .map(|(k, v)| (Box::from(&*k), Box::from(&*v)))
            .collect();
        let mut fields: Vec<(&'static str, Box<str>)> = Vec::new();
        for f in crate::api::selector::supported_fields(&self.resource) {
            let v = match *f {
                "metadata.name" | "metadata.namespace" => continue,
                "type" => p.type_.as_deref().map(str::to_string),
                "reason" => p.reason.as_deref().map(str::to_string),
                f if f.starts_with("spec.") => {
                    field_of(p.spec, &format!("/{}", f[5..].replace('.', "/")))
                }
                f if f.starts_with("status.") => {
                    field_of(p.status, &format!("/{}", f[7..].replace('.', "/")))
                }
                f if f.starts_with("involvedObject.") => field_of(
                    p.involved_object,
                    &format!("/{}", f[15..].replace('.', "/")),
                ),
                _ => None,
            };
            let v = v.unwrap_or_else(|| {
                if matches!(*f, "spec.hostNetwork" | "spec.unschedulable") {
                    "false".into()
                } else {
                    String::new()
                }
            });
            fields.push((f, v.into_boxed_str()));
        }
        let has_kind = p.kind.is_some();
        let ns_len = ns.len();
        Ok((key, ns_len, rv, labels, fields, has_kind))
    }

    #[allow(clippy::too_many_arguments)]
    fn finish(
        &self,
        json: Bytes,
        key: Arc<str>,
        ns_len: usize,
        rv: u64,
        labels: Box<[(Box<str>, Box<str>)]>,
        fields: Vec<(&'static str, Box<str>)>,
        has_kind: bool,
    ) -> Result<CachedObject, ObjectError> {
        let prefix = format!(
            "{{\"kind\":\"{}\",\"apiVersion\":\"{}\",",
            self.kind, self.api_version
        );
        let json = if !has_kind {
            let mut full = Vec::with_capacity(json.len() + prefix.len());
            full.extend_from_slice(prefix.as_bytes());
            full.extend_from_slice(&json[1..]);
            Bytes::from(full)
        } else {
            json
        };
        let item_skip = if !self.items_typed && json.starts_with(prefix.as_bytes()) {
            prefix.len()
        } else {
            1
        };
        Ok(CachedObject {
            ns_len,
            key,
            rv,
            labels,
            fields: fields.into_boxed_slice(),
            json,
            item_skip,
        })
    }
}
