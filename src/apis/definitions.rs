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

impl Definitions {
    /// The CRD of `gvr` in `crds` now, if it has one there.
    fn now(&mut self, crds: &Store, gvr: &Gvr) -> Option<Read> {
        use std::hash::{Hash, Hasher};
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
        let crd: Crd = serde_json::from_slice(&o.body).ok()?;
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
        let served = spec
            .versions
            .iter()
            .any(|v| v.name == gvr.version() && v.served);
        let read = Read {
            definition: h.finish(),
            served,
        };
        self.read.insert(gvr.clone(), (o.rv, read));
        Some(read)
    }

    /// The cache of `gvr` starts now, under its CRD's definition in `crds`.
    pub(super) fn started(&mut self, crds: &Store, gvr: &Gvr) {
        match self.now(crds, gvr) {
            Some(r) => self.started.insert(gvr.clone(), r.definition),
            None => self.started.remove(gvr),
        };
    }

    /// Whether the CRD of `gvr` is in `crds` with another definition than
    /// its cache was started under. A cache started before the CRD was
    /// read (at startup, before the CRD cache synced) takes the one read
    /// now as its own.
    pub(super) fn changed(&mut self, crds: &Store, gvr: &Gvr) -> bool {
        let Some(now) = self.now(crds, gvr) else {
            return false;
        };
        self.started
            .insert(gvr.clone(), now.definition)
            .is_some_and(|was| was != now.definition)
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
