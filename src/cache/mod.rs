//! The watch cache: per resource, a versioned store kept current by a reflector.
//!
//! - [`object`]: a cached object (upstream bytes + parsed metadata).
//! - [`store`]: immutable versions, one writer, lock-free readers.
//! - [`history`]: the event log watchers read, indexed by trigger.

pub mod history;
pub mod object;
pub mod store;

use std::collections::HashMap;
use std::sync::Arc;

use crate::api::{ApiResource, Gvr};

/// One cached resource: what it is and its store.
pub struct ResourceCache {
    /// What it caches.
    pub resource: ApiResource,
    /// Its versions.
    pub store: Arc<store::Store>,
    /// `kind` of its lists (`PodList`).
    pub list_kind: String,
    /// `group/version/resource`, for metric labels.
    pub label: String,
    /// Its watch metric handles, resolved on first use (after the recorder is installed).
    pub watch_metrics: std::sync::OnceLock<Arc<crate::metrics::WatchMetrics>>,
}

impl ResourceCache {
    /// The watch metric handles of this resource.
    pub fn watch_metrics(&self) -> Arc<crate::metrics::WatchMetrics> {
        self.watch_metrics
            .get_or_init(|| Arc::new(crate::metrics::WatchMetrics::new(&self.label)))
            .clone()
    }
}

/// The caches by group/version/resource: built at startup, then read-only.
pub type Caches = HashMap<Gvr, Arc<ResourceCache>>;
