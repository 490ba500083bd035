//! One cached object: the upstream's bytes, plus what is needed to key,
//! filter and order it, parsed in one pass when it arrives.
//!
//! Memory is the point: the body (JSON, or protobuf in a protobuf cache) is
//! stored once, in one exact-size buffer, and labels and selectable fields
//! are spans into it (one small allocation per object), so the cache costs
//! little more than the bytes it serves. [`super::json`] and
//! [`super::protobuf`] parse the upstream's bodies into it.

use std::sync::{Arc, OnceLock};

use bytes::Bytes;

use crate::api::media::Encoding;
use crate::api::selector::Selectors;
use crate::api::shard::{ShardKey, fnv1a};
use crate::codec::json;
use crate::codec::protobuf as pb;
use crate::codec::run::Memo;
use crate::table::{Printer, Row};

/// Where a label or field value lives in the object's body.
#[derive(Debug, Clone, Copy)]
pub(super) struct Span {
    /// `LABEL`, or the index of the field in its type's `fields`.
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
    /// `metadata.uid`'s 64-bit FNV-1a hash, the shard a `shardSelector` on
    /// uids puts it in (uids never change: nor does its shard).
    pub uid_hash: u64,
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
    /// Where `metadata.managedFields` lies in `body`, and how long, with
    /// what goes with it (JSON: a comma; protobuf: every field 17 record,
    /// one run): what [`super::view`] cuts for `drop=metadata.managedFields`.
    /// `(0, 0)` without any.
    pub(super) managed: (u32, u32),
    /// Labels and selectable field values, as spans into `body`.
    pub(super) spans: Box<[Span]>,
    /// Values that could not be spans (JSON escapes, booleans): rare.
    pub(super) owned: Box<[Owned]>,
    /// The resource's selectable fields (index space of `Span::what`).
    pub(super) field_names: &'static [&'static str],
    /// The watch event this object arrived in, as r8s's watchers get it,
    /// and its type: `body` is a slice of it, so the event log and the
    /// store share one copy of the object's bytes. None for objects from a
    /// list, and for changed copies ([`super::history`]'s `at_version`).
    pub(super) framed: Option<(&'static str, Bytes)>,
    /// What gzip lists keep for it: the compressed runs that start at it.
    pub(super) memo: Memo,
    /// Its Table row, made the first time a Table asks for it (most
    /// objects are never printed: an empty cell costs 16 bytes); `None`
    /// inside when its printer could not read it.
    pub(super) row: OnceLock<Option<Box<Row>>>,
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

    /// Its row in a Table printed by `printer`: made once, from its JSON
    /// (`None` for a protobuf body, or one the printer cannot read).
    pub fn row(&self, printer: &Printer) -> Option<&Row> {
        self.row
            .get_or_init(|| match self.encoding {
                Encoding::Json => printer.row(&self.body).map(Box::new),
                Encoding::Protobuf => None,
            })
            .as_deref()
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

    /// The watch event of type `kind` this object arrived in (see
    /// [`CachedObject::framed`]), when it arrived in one of that type.
    pub fn framed_line(&self, kind: &str) -> Option<&Bytes> {
        self.framed
            .as_ref()
            .filter(|(k, _)| *k == kind)
            .map(|(_, l)| l)
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
        s.labels.matches(|k| self.label(k))
            && s.fields.matches_str(|f| self.field(f))
            && s.shard.as_ref().is_none_or(|shard| {
                shard.selects(match shard.key() {
                    ShardKey::Uid => self.uid_hash,
                    ShardKey::Namespace => fnv1a(self.namespace()),
                })
            })
    }
}

/// Objects by key, ordered as the apiserver lists them (`namespace/name`).
pub type Objects = imbl::OrdMap<Arc<str>, Arc<CachedObject>>;

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
    /// `cache.managed_fields = "drop"`: its objects are kept without
    /// `metadata.managedFields`, so every answer comes without them.
    pub drop_managed_fields: bool,
    /// The field labels its objects are filtered on ([`crate::api::ApiResource::fields`]):
    /// each object keeps where their values lie.
    pub fields: &'static [&'static str],
}

#[cfg(test)]
impl TypeInfo {
    /// A unit test's built-in type: `kind` of `api_version`, plural
    /// `resource`, its list items without `kind`, managedFields kept.
    pub(crate) fn for_tests(kind: &str, api_version: &str, resource: &str) -> TypeInfo {
        TypeInfo {
            kind: kind.into(),
            api_version: api_version.into(),
            resource: resource.into(),
            items_typed: false,
            drop_managed_fields: false,
            fields: crate::api::selector::supported_fields(resource),
        }
    }
}

impl TypeInfo {
    /// What a store of `resource` in `encoding` holds: the resource's own
    /// type, except a custom resource's protobuf store, which holds what the
    /// apiserver does give in protobuf, each object's
    /// `PartialObjectMetadata` (for metadata-only informers).
    pub fn of(resource: &crate::api::ApiResource, encoding: Encoding) -> TypeInfo {
        let builtin = resource.gvr.is_builtin();
        let (kind, api_version) = if encoding == Encoding::Protobuf && !builtin {
            (
                "PartialObjectMetadata".to_string(),
                json::META_API_VERSION.to_string(),
            )
        } else {
            (resource.kind.clone(), resource.gvr.api_version())
        };
        TypeInfo {
            kind,
            api_version,
            resource: resource.gvr.resource().to_string(),
            // Built-in types' list items carry no kind; custom resources'
            // do. A paged LIST confirms it from the first page.
            items_typed: !builtin,
            drop_managed_fields: false,
            fields: resource.fields(encoding),
        }
    }
}
