//! The caches being served, by resource: read by every request, and changed
//! while r8s runs as the upstream's API changes (a custom resource
//! established, a version no longer served, a CRD deleted).
//!
//! Readers take the current map (one read lock and a reference count); the
//! one [`Registrar`] swaps in a new map with a cache added or removed, so a
//! request sees a whole map, before or after a change.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, RwLock};

use super::{Caches, ResourceCache, store::Store};
use crate::api::Gvr;
use crate::sync::{MutexExt, RwLockExt};

/// The caches being served now.
#[derive(Default)]
pub struct Registry {
    caches: RwLock<Arc<Caches>>,
    /// The labels of caches removed and not added again.
    retired: Mutex<HashSet<String>>,
}

impl Registry {
    /// An empty registry, and the one handle that fills and changes it.
    pub fn new() -> (Arc<Registry>, Registrar) {
        let registry = Arc::new(Registry {
            caches: RwLock::new(Arc::new(Caches::new())),
            retired: Mutex::default(),
        });
        (registry.clone(), Registrar(registry))
    }

    /// The cache of `gvr`, if it is served from a cache now.
    pub fn get(&self, gvr: &Gvr) -> Option<Arc<ResourceCache>> {
        self.caches.reading().get(gvr).cloned()
    }

    /// Every cache now (a map that later changes do not touch).
    pub fn all(&self) -> Arc<Caches> {
        self.caches.reading().clone()
    }

    /// Every store of every cache now.
    pub fn stores(&self) -> Vec<Arc<Store>> {
        self.all()
            .values()
            .flat_map(|c| c.stores())
            .cloned()
            .collect()
    }

    /// The labels (`group/version/resource`) of the caches removed and not
    /// added again: what `/metrics` no longer describes.
    pub fn retired(&self) -> HashSet<String> {
        self.retired.locked().clone()
    }

    /// How many caches there are now.
    pub fn len(&self) -> usize {
        self.caches.reading().len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// The one handle that adds and removes caches: whoever holds it owns the
/// set of caches (the API follower, `crate::apis`).
pub struct Registrar(Arc<Registry>);

impl Registrar {
    /// The registry it changes.
    pub fn registry(&self) -> &Arc<Registry> {
        &self.0
    }

    /// Serves `cache` from now on (replacing one of the same resource).
    pub fn add(&mut self, cache: Arc<ResourceCache>) {
        let mut caches = self.0.caches.writing();
        let mut next = Caches::clone(&caches);
        self.0.retired.locked().remove(&cache.label);
        next.insert(cache.resource.gvr.clone(), cache);
        *caches = Arc::new(next);
    }

    /// Stops serving `gvr` from a cache: its requests pass through from now
    /// on. Returns the cache, if there was one.
    pub fn remove(&mut self, gvr: &Gvr) -> Option<Arc<ResourceCache>> {
        let mut caches = self.0.caches.writing();
        if !caches.contains_key(gvr) {
            return None;
        }
        let mut next = Caches::clone(&caches);
        let removed = next.remove(gvr);
        *caches = Arc::new(next);
        if let Some(c) = &removed {
            self.0.retired.locked().insert(c.label.clone());
        }
        removed
    }
}
