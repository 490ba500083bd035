//! The definitions of custom resources as their caches were started under
//! them: a change that makes kube-apiserver recreate a CRD's storage makes
//! the follower restart its caches; and what a CRD says of a version that
//! discovery leaves out.

use std::collections::HashMap;

use crate::api::Gvr;
use crate::cache::store::Store;

/// What the running caches of custom resources were started under: their
/// CRD's definition, as kube-apiserver tells a change that recreates the
/// storage (a new `uid`: deleted and made again; a new `generation`: any
/// change to the spec; other accepted names).
#[derive(Default)]
pub(super) struct Definitions {
    /// By resource: the definition its cache was started under.
    started: HashMap<Gvr, u64>,
    /// By resource: its CRD as last read, and the CRD's version then (each
    /// CRD is parsed once per change of it).
    read: HashMap<Gvr, (u64, Read)>,
}

/// What the follower reads of a resource's CRD.
#[derive(Clone, Copy)]
struct Read {
    /// A hash of its `uid`, `generation` and accepted names.
    definition: u64,
    /// Whether the CRD serves the resource's version.
    served: bool,
    /// The version's `selectableFields`, as field labels (`spec.color`).
    selectable: &'static [&'static str],
}

/// What a CRD in the CRD cache says of a resource discovery leaves out.
#[derive(Debug, PartialEq)]
pub(super) enum Verdict {
    /// Its CRD serves it: discovery is incomplete (an upstream mid-upgrade,
    /// or discovery lagging its CRD); its cache is kept.
    Served,
    /// Its CRD is gone, or no longer serves its version: retired now.
    Gone,
    /// Not a custom resource as far as the follower knows (or the CRD cache
    /// does not serve now): discovery alone decides.
    Unknown,
}

/// What of a CRD its definition is read from.
#[derive(serde::Deserialize)]
struct Crd<'a> {
    metadata: CrdMeta,
    #[serde(borrow, default)]
    spec: Option<&'a serde_json::value::RawValue>,
    #[serde(borrow, default)]
    status: Option<CrdStatus<'a>>,
}

#[derive(serde::Deserialize)]
struct CrdMeta {
    #[serde(default)]
    uid: String,
    #[serde(default)]
    generation: Option<i64>,
}

#[derive(serde::Deserialize)]
struct CrdStatus<'a> {
    #[serde(borrow, default, rename = "acceptedNames")]
    accepted_names: Option<&'a serde_json::value::RawValue>,
}

/// A CRD's versions, each with whether it is served.
#[derive(serde::Deserialize, Default)]
struct CrdSpec {
    #[serde(default)]
    versions: Vec<CrdVersion>,
}

#[derive(serde::Deserialize)]
struct CrdVersion {
    #[serde(default)]
    name: String,
    #[serde(default)]
    served: bool,
}

impl Read {
    /// What the CRD `body` says of its `version`.
    fn of(body: &[u8], version: &str) -> Option<Read> {
        use std::hash::{Hash, Hasher};
        let crd: Crd = serde_json::from_slice(body).ok()?;
        let mut h = std::collections::hash_map::DefaultHasher::new();
        crd.metadata.uid.hash(&mut h);
        // The apiserver raises `generation` on any change to the spec; an
        // upstream that does not set it is compared by the spec itself.
        match crd.metadata.generation {
            Some(g) => g.hash(&mut h),
            None => crd.spec.map(|s| s.get()).hash(&mut h),
        }
        let names = crd.status.and_then(|s| s.accepted_names);
        names.map(|n| n.get()).hash(&mut h);
        let spec: CrdSpec = crd
            .spec
            .and_then(|s| serde_json::from_str(s.get()).ok())
            .unwrap_or_default();
        let found = spec.versions.iter().find(|v| v.name == version);
        Some(Read {
            definition: h.finish(),
            served: found.is_some_and(|v| v.served),
            selectable: crate::api::gvr::crd_selectable_fields(body, version),
        })
    }
}

impl Definitions {
    /// The CRD of `gvr` in `crds` now, if it has one there.
    fn now(&mut self, crds: &Store, gvr: &Gvr) -> Option<Read> {
        if gvr.group().is_empty() {
            return None;
        }
        let name = format!("{}.{}", gvr.resource(), gvr.group());
        let v = crds.current();
        let o = v.objects.get(name.as_str())?;
        if let Some((rv, read)) = self.read.get(gvr)
            && *rv == o.rv
        {
            return Some(*read);
        }
        if o.encoding != crate::api::media::Encoding::Json {
            return None;
        }
        let read = Read::of(&o.body, gvr.version())?;
        self.read.insert(gvr.clone(), (o.rv, read));
        Some(read)
    }

    /// The cache of `gvr` starts now, under its CRD's definition in `crds`:
    /// the selectable fields that definition names (none if it is not there).
    pub(super) fn started(&mut self, crds: &Store, gvr: &Gvr) -> &'static [&'static str] {
        match self.now(crds, gvr) {
            Some(r) => {
                self.started.insert(gvr.clone(), r.definition);
                r.selectable
            }
            None => {
                self.started.remove(gvr);
                &[]
            }
        }
    }

    /// Whether the CRD of `gvr` is in `crds` with another definition than
    /// its cache was started under. A cache started before the CRD cache
    /// read it (at startup, before the CRD cache synced) takes the one read
    /// now as its own, unless that names other selectable fields than the
    /// cache's objects were read for (`started_with`): it starts again.
    pub(super) fn changed(&mut self, crds: &Store, gvr: &Gvr, started_with: &[&str]) -> bool {
        let Some(now) = self.now(crds, gvr) else {
            return false;
        };
        match self.started.insert(gvr.clone(), now.definition) {
            Some(was) => was != now.definition,
            None => now.selectable != started_with,
        }
    }

    /// What the CRD cache `crds` says of `gvr`, which discovery left out.
    pub(super) fn verdict(&mut self, crds: Option<&Store>, gvr: &Gvr) -> Verdict {
        let Some(crds) = crds.filter(|_| self.started.contains_key(gvr)) else {
            return Verdict::Unknown;
        };
        match self.now(crds, gvr) {
            Some(r) if r.served => Verdict::Served,
            _ => Verdict::Gone,
        }
    }

    /// The cache of `gvr` is gone.
    pub(super) fn retired(&mut self, gvr: &Gvr) {
        self.started.remove(gvr);
        self.read.remove(gvr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cache::object::TypeInfo;
    use crate::cache::store::Change;
    use crate::cache::writer::Writer;
    use std::sync::Arc;

    /// A CRD cache holding the widgets' CRD (generation 1), selecting by `selectable`.
    fn crds(selectable: &[&str]) -> (Writer, Arc<Store>) {
        let (mut w, s) = Writer::for_tests(
            "apiextensions.k8s.io/v1/customresourcedefinitions",
            crate::api::media::Encoding::Json,
            1,
        );
        let fields: Vec<_> = selectable
            .iter()
            .map(|f| serde_json::json!({"jsonPath": format!(".{f}")}))
            .collect();
        let crd = serde_json::json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": "widgets.example.com", "uid": "u", "generation": 1, "resourceVersion": "2"},
            "spec": {"versions": [{"name": "v1", "served": true, "selectableFields": fields}]}
        });
        let info = TypeInfo::for_tests(
            "CustomResourceDefinition",
            "apiextensions.k8s.io/v1",
            "customresourcedefinitions",
        );
        let o = info.parse(&serde_json::to_vec(&crd).unwrap()).unwrap();
        w.apply(vec![Change::Put(Arc::new(o))]);
        (w, s)
    }

    /// A cache started before the CRD cache read its CRD starts again only
    /// if the CRD names other selectable fields than it was started with.
    #[test]
    fn should_restart_a_cache_started_without_the_fields_its_crd_names() {
        let gvr = Gvr::from_static("example.com", "v1", "widgets");
        let (_w, with) = crds(&["spec.color"]);
        let mut d = Definitions::default();
        assert!(d.changed(&with, &gvr, &[]), "started without spec.color");
        assert!(
            !d.changed(&with, &gvr, &[]),
            "its definition is the started one now"
        );
        let mut d = Definitions::default();
        assert!(
            !d.changed(&with, &gvr, &["spec.color"]),
            "started with them (read at startup)"
        );
        let (_w, without) = crds(&[]);
        let mut d = Definitions::default();
        assert!(
            !d.changed(&without, &gvr, &[]),
            "no selectable fields: nothing to read"
        );
        let mut d = Definitions::default();
        assert_eq!(
            d.started(&with, &gvr),
            ["spec.color"],
            "a cache started at run time"
        );
    }

    #[test]
    fn should_read_a_versions_selectable_fields_as_field_labels() {
        let crd = serde_json::json!({
            "metadata": {"uid": "u", "generation": 2},
            "spec": {"versions": [
                {"name": "v1", "served": true,
                 "selectableFields": [{"jsonPath": ".spec.color"}, {"jsonPath": ".status.deep.phase"}]},
                {"name": "v2", "served": false}
            ]}
        });
        let body = serde_json::to_vec(&crd).unwrap();
        let v1 = Read::of(&body, "v1").unwrap();
        assert!(v1.served);
        assert_eq!(v1.selectable, ["spec.color", "status.deep.phase"]);
        let v2 = Read::of(&body, "v2").unwrap();
        assert!(!v2.served && v2.selectable.is_empty());
        assert_eq!(v1.definition, v2.definition, "one definition, the CRD's");
        let v3 = Read::of(&body, "v3").unwrap();
        assert!(!v3.served && v3.selectable.is_empty());
    }
}
