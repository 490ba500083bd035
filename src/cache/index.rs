//! Secondary indexes of a version's objects: by a selectable field's value
//! (pods by `spec.nodeName`, kube-apiserver's own index) or by a label's
//! (`cache.indexes`), each a range per value in key order, so a read its
//! selectors pin to a few values costs what those values hold.
//!
//! An index is a persistent B-tree (`imbl::OrdMap`) of (value, key) to the
//! object, changed only through [`super::version::Version`]'s methods, so
//! it always says what a scan of the version's objects would.

use std::collections::BTreeMap;
use std::fmt;
use std::iter::Peekable;
use std::sync::Arc;

use imbl::OrdMap;

use super::object::CachedObject;
use crate::api::ApiResource;
use crate::api::media::Encoding;
use crate::api::selector::{self, Selectors};
use crate::config::ResourceEntry;

/// What one index entry takes beyond its value's bytes: its place in the
/// B-tree (two keys and the value, 40 bytes, and the tree's share per
/// entry) and its value's own allocation. Counted in the version's bytes,
/// so in `r8s_cache_bytes` and the byte budgets. (benches/scale.rs measured
/// about 100 bytes of RSS per entry of two indexes on 150,000 pods.)
pub(super) const ENTRY_BYTES: usize = 80;

/// What an index keys a resource's objects by.
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub enum IndexOn {
    /// A selectable field: every object is in it, under its value (`""`
    /// when unset, as a field selector sees it).
    Field(Arc<str>),
    /// A label key: the objects that carry the label, under its value.
    Label(Arc<str>),
}

/// The prefix that names a label index in `cache.indexes`.
const LABEL_PREFIX: &str = "label:";

impl IndexOn {
    /// Parses a `cache.indexes` entry of `resource` (its plural name):
    /// `label:KEY`, or a field its field selectors support. The error says
    /// why the entry cannot be indexed.
    pub fn parse(resource: &str, entry: &str) -> Result<IndexOn, String> {
        Self::parse_among(resource, selector::supported_fields(resource), entry)
    }

    /// [`IndexOn::parse`] for `r`'s stores: a custom resource's fields are
    /// those its CRD names selectable (read when its cache starts).
    pub fn parse_for(r: &ApiResource, entry: &str) -> Result<IndexOn, String> {
        Self::parse_among(r.gvr.resource(), r.fields(Encoding::Json), entry)
    }

    fn parse_among(resource: &str, fields: &[&str], entry: &str) -> Result<IndexOn, String> {
        if let Some(key) = entry.strip_prefix(LABEL_PREFIX) {
            selector::validate_label_key(key)?;
            return Ok(IndexOn::Label(Arc::from(key)));
        }
        match entry {
            "metadata.namespace" => Err(
                "metadata.namespace needs no index: reads of a namespace go by key range".into(),
            ),
            f if fields.contains(&f) => Ok(IndexOn::Field(Arc::from(f))),
            f => Err(format!(
                "{resource} cannot be indexed by \"{f}\": expected \"label:KEY\" or one of its selectable fields ({})",
                fields.join(", ")
            )),
        }
    }

    /// Whether `r`'s store in `encoding` holds what it keys by (a custom
    /// resource's protobuf store holds no selectable field of its own).
    pub fn held_in(&self, r: &ApiResource, encoding: Encoding) -> bool {
        match self {
            IndexOn::Field(f) => r.holds(encoding, f),
            IndexOn::Label(_) => true,
        }
    }

    /// The value `o` is indexed under; `None` when it is not in the index.
    fn value_of<'o>(&self, o: &'o CachedObject) -> Option<&'o str> {
        match self {
            IndexOn::Field(f) => Some(o.field(f)),
            IndexOn::Label(k) => o.label(k),
        }
    }

    /// The values a read's selectors pin this index to: every object they
    /// can match is under one of them (each named once). `None` when they
    /// do not pin it, and the read cannot use this index.
    pub fn pinned<'s>(&self, s: &'s Selectors) -> Option<Vec<&'s str>> {
        match self {
            IndexOn::Field(f) => s.fields.exact(f).map(|v| vec![v]),
            IndexOn::Label(k) => s.labels.values(k),
        }
    }
}

/// The indexes `cache.indexes` gives `r`'s stores, each once: those under
/// its short name, then `VERSION/RESOURCE`, then `GROUP/VERSION/RESOURCE`,
/// each in the order listed (entries already checked by [`check`]; one that
/// does not parse is left out).
pub fn configured(indexes: &BTreeMap<String, Vec<String>>, r: &ApiResource) -> Vec<IndexOn> {
    let mut out = Vec::new();
    // The resource's short name first (the default's `pods`), then by version, then by group.
    let mut entries: Vec<_> = indexes
        .iter()
        .filter_map(|(e, ons)| Some((e.parse::<ResourceEntry>().ok()?, e, ons)))
        .filter(|(e, _, _)| e.resource().is_some() && r.gvr.named_by(e))
        .collect();
    entries.sort_by_key(|(e, _, _)| e.specificity());
    for (_, entry, ons) in entries {
        for on in ons {
            match IndexOn::parse_for(r, on) {
                Ok(on) if !out.contains(&on) => out.push(on),
                Ok(_) => {}
                Err(e) => tracing::warn!(resource = %entry, "cache.indexes: {e}"),
            }
        }
    }
    out
}

/// Checks `cache.indexes`: each key names resources as `cache.resources`
/// does, and each entry is a label key or a field the resource's selectors
/// support. Every problem as (config key, message).
pub fn check(indexes: &BTreeMap<String, Vec<String>>) -> Vec<(String, String)> {
    let mut errs = Vec::new();
    for (entry, ons) in indexes {
        // Figment finds a key's source by its dotted path.
        let key = match entry.contains('.') {
            true => "cache.indexes".to_string(),
            false => format!("cache.indexes.{entry}"),
        };
        let parsed = entry.parse::<ResourceEntry>().ok();
        let Some((parsed, resource)) = parsed.as_ref().and_then(|p| Some((p, p.resource()?)))
        else {
            errs.push((key, format!(
                "config: bad key \"{entry}\" in \"cache.indexes\": expected a resource as in cache.resources (pods, v1/pods, apps/v1/deployments)"
            )));
            continue;
        };
        // A custom resource's (`GROUP/VERSION/RESOURCE`): its fields are its
        // CRD's, checked when its cache starts.
        let custom = parsed
            .group()
            .is_some_and(|g| !crate::api::gvr::is_builtin_group(g));
        for on in ons {
            let parsed = match custom {
                true => custom_entry(on),
                false => IndexOn::parse(resource, on).map(|_| ()),
            };
            if let Err(e) = parsed {
                errs.push((
                    key.clone(),
                    format!("config: bad value \"{on}\" for key \"cache.indexes.{entry}\": {e}"),
                ));
            }
        }
    }
    errs
}

/// What can be checked of a custom resource's `cache.indexes` entry before
/// its CRD is read: a label key, or a field label as `selectableFields`
/// name them (`spec.x.y`).
fn custom_entry(on: &str) -> Result<(), String> {
    if let Some(key) = on.strip_prefix(LABEL_PREFIX) {
        return selector::validate_label_key(key);
    }
    if on == "metadata.namespace" {
        return Err(
            "metadata.namespace needs no index: reads of a namespace go by key range".into(),
        );
    }
    let simple = on.split('.').all(|p| {
        !p.is_empty()
            && p.bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
    });
    match simple {
        true => Ok(()),
        false => Err(format!(
            "\"{on}\" is not a field label (expected \"label:KEY\", metadata.name, or a path its CRD names in selectableFields, such as spec.nodeName)"
        )),
    }
}

impl fmt::Display for IndexOn {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            IndexOn::Field(field) => f.write_str(field),
            IndexOn::Label(key) => write!(f, "{LABEL_PREFIX}{key}"),
        }
    }
}

/// (value, key) to the object, in key order within each value.
type Entries = OrdMap<(Arc<str>, Arc<str>), Arc<CachedObject>>;

/// One index of one version.
#[derive(Debug, Clone)]
pub struct Index {
    /// What it keys by.
    pub on: IndexOn,
    entries: Entries,
}

/// An index's walk, or a key range's: (key, object) in key order.
pub type Walk<'v> = Box<dyn Iterator<Item = (&'v Arc<str>, &'v Arc<CachedObject>)> + Send + 'v>;

impl Index {
    /// An empty index on `on`.
    pub fn new(on: IndexOn) -> Self {
        Index {
            on,
            entries: OrdMap::new(),
        }
    }

    /// The bytes `o`'s entry takes (0 when it has none).
    pub(super) fn cost(&self, o: &CachedObject) -> usize {
        self.on.value_of(o).map_or(0, |v| ENTRY_BYTES + v.len())
    }

    /// Adds `o`'s entry, if it has one.
    pub(super) fn insert(&mut self, o: &Arc<CachedObject>) {
        if let Some(v) = self.on.value_of(o) {
            self.entries
                .insert((Arc::from(v), o.key.clone()), o.clone());
        }
    }

    /// Takes out `o`'s entry, if it has one.
    pub(super) fn remove(&mut self, o: &CachedObject) {
        if let Some(v) = self.on.value_of(o) {
            self.entries.remove(&(Arc::from(v), o.key.clone()));
        }
    }

    /// Rebuilds it from `objects` (a relist, a restored snapshot).
    pub(super) fn rebuild<'o>(&mut self, objects: impl Iterator<Item = &'o Arc<CachedObject>>) {
        self.entries = objects
            .filter_map(|o| {
                let v = self.on.value_of(o)?;
                Some(((Arc::from(v), o.key.clone()), o.clone()))
            })
            .collect();
    }

    /// The objects under `value` whose keys are at or after `from`, in key order.
    pub fn range<'v>(&'v self, value: &str, from: &str) -> Walk<'v> {
        let value: Arc<str> = Arc::from(value);
        let start = (value.clone(), Arc::from(from));
        Box::new(
            self.entries
                .range(start..)
                .take_while(move |((v, _), _)| *v == value)
                .map(|((_, k), o)| (k, o)),
        )
    }

    /// The objects under any of `values` (each named once) from `from`,
    /// merged in key order.
    pub fn ranges<'v>(&'v self, values: &[&str], from: &str) -> Walk<'v> {
        match values {
            [one] => self.range(one, from),
            many => Box::new(Merge(
                many.iter()
                    .map(|v| self.range(v, from).peekable())
                    .collect(),
            )),
        }
    }
}

/// Key-ordered walks merged into one (an object is under one value of an
/// index, so no key comes twice). A read pins few values: the smallest head
/// is found by looking at each.
struct Merge<'v>(Vec<Peekable<Walk<'v>>>);

impl<'v> Iterator for Merge<'v> {
    type Item = (&'v Arc<str>, &'v Arc<CachedObject>);

    fn next(&mut self) -> Option<Self::Item> {
        let mut least: Option<(usize, &Arc<str>)> = None;
        for (i, walk) in self.0.iter_mut().enumerate() {
            if let Some(&(k, _)) = walk.peek()
                && least.is_none_or(|(_, l)| k < l)
            {
                least = Some((i, k));
            }
        }
        let (i, _) = least?;
        self.0[i].next()
    }
}
