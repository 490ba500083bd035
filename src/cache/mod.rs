//! The watch cache: per resource, a versioned store kept current by a reflector.
//!
//! - [`object`]: a cached object (upstream bytes + parsed metadata).
//! - [`view`]: what an answer shows of each object (its metadata only,
//!   without managedFields), cut from its bytes.
//! - [`json`], [`protobuf`]: cached objects parsed from the upstream's bodies.
//! - [`store`]: immutable versions; a reader holds the store's lock only
//!   to take one (an `Arc`), never while it serializes or waits.
//! - [`version`]: one version's objects and their indexes, changed together.
//! - [`index`]: objects by a field's or a label's value (pods by node).
//! - [`writer`]: a store's one writer (a typed handle), and a proof's stamper.
//! - [`scope`]: what part of a resource a cache holds (a node's pods).
//! - [`objects`]: the caches of single objects a node's pods reference.
//! - [`registry`]: the caches served now, which change as the upstream's API does.
//! - [`serving`]: whether a store answers requests, and its transitions.
//! - [`budget`]: byte budgets shared by the stores, and how they make room.
//! - [`event`]: one change as watchers get it, each form serialized once.
//! - [`history`]: the event log watchers read, indexed by trigger.
//! - [`wakers`]: the indexed watchers each event wakes.
//! - [`staleness`]: how long a store has gone without word from its upstream.

pub mod budget;
pub mod event;
pub mod history;
pub mod index;
#[cfg(test)]
mod index_tests;
pub mod json;
pub mod object;
pub mod objects;
pub mod protobuf;
pub mod registry;
pub mod scope;
pub mod serving;
pub mod staleness;
pub mod store;
#[cfg(test)]
mod store_tests;
pub mod version;
pub mod view;
pub mod wakers;
pub mod writer;

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::media::Encoding;
use crate::api::{ApiResource, Gvr};

/// One cached resource: what it is and its stores, one per encoding cached.
pub struct ResourceCache {
    /// What it caches.
    pub resource: ApiResource,
    /// Which of its objects: all, or a node's (`node.name`).
    pub scope: scope::CacheScope,
    /// Its versions in JSON.
    pub store: Arc<store::Store>,
    /// Its versions in protobuf (with `protobuf` in `cache.encodings`):
    /// filled by a reflector of its own, so each object is held in the
    /// upstream's own protobuf bytes. A custom resource has no protobuf
    /// encoding; this holds its objects' `PartialObjectMetadata`, which is
    /// all a protobuf client can be answered with.
    pub protobuf: Option<Arc<store::Store>>,
    /// `kind` of its lists (`PodList`).
    pub list_kind: String,
    /// `group/version/resource`, for metric labels.
    pub label: String,
    /// Its watch metric handles, resolved on first use (after the recorder is installed).
    pub watch_metrics: std::sync::OnceLock<Arc<crate::metrics::WatchMetrics>>,
    /// A custom resource's Table printer, made from its definition the first
    /// time a Table is asked for once r8s has read that definition
    /// (`serve`). A cache is restarted when its definition changes, so one
    /// printer serves the cache's life, and every row it kept with it.
    pub custom_printer: std::sync::OnceLock<Arc<crate::table::Custom>>,
}

impl ResourceCache {
    /// The cache of `resource`'s objects in `scope`: a JSON store, and a
    /// protobuf one with `protobuf`, each as `limits` say, indexed on
    /// `indexes` and counted against `budget`. The
    /// stores' writers are returned apart, for their reflectors.
    pub fn new(
        resource: ApiResource,
        protobuf: bool,
        limits: store::Limits,
        budget: &Arc<budget::Budget>,
        indexes: &[index::IndexOn],
        scope: scope::CacheScope,
    ) -> (Arc<ResourceCache>, Vec<writer::Writer>) {
        let make = |encoding| {
            store::Store::new(store::Options::of(
                &resource,
                encoding,
                limits,
                budget.clone(),
                indexes
                    .iter()
                    .filter(|i| i.held_in(&resource, encoding))
                    .cloned()
                    .collect(),
                scope.clone(),
            ))
        };
        let (json_w, json) = make(Encoding::Json);
        let mut writers = vec![json_w];
        let protobuf = protobuf.then(|| {
            let (w, s) = make(Encoding::Protobuf);
            writers.push(w);
            s
        });
        let cache = ResourceCache {
            list_kind: format!("{}List", resource.kind),
            label: resource.gvr.to_string(),
            watch_metrics: Default::default(),
            custom_printer: Default::default(),
            store: json,
            protobuf,
            resource,
            scope,
        };
        (Arc::new(cache), writers)
    }

    /// The store holding this resource in `encoding`, if one does.
    pub fn store_for(&self, encoding: Encoding) -> Option<&Arc<store::Store>> {
        match encoding {
            Encoding::Json => Some(&self.store),
            Encoding::Protobuf => self.protobuf.as_ref(),
        }
    }

    /// Every store of this resource.
    pub fn stores(&self) -> impl Iterator<Item = &Arc<store::Store>> {
        std::iter::once(&self.store).chain(self.protobuf.as_ref())
    }

    /// The watch metric handles of this resource.
    pub fn watch_metrics(&self) -> Arc<crate::metrics::WatchMetrics> {
        self.watch_metrics
            .get_or_init(|| Arc::new(crate::metrics::WatchMetrics::new(&self.label)))
            .clone()
    }
}

/// Caches by group/version/resource (one map of the [`registry::Registry`]).
pub type Caches = HashMap<Gvr, Arc<ResourceCache>>;
