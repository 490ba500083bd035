//! The watch cache: per resource, a versioned store kept current by a reflector.
//!
//! - [`object`]: a cached object (upstream bytes + parsed metadata).
//! - [`store`]: immutable versions, one writer, lock-free readers.

pub mod object;
pub mod store;
pub mod token;

use std::collections::HashMap;
use std::sync::Arc;

use crate::upstream::discovery::Resolved;

/// One cached resource: what it is and its store.
pub struct ResourceCache {
    /// The resolved group/version/resource.
    pub resource: Resolved,
    /// Its versions.
    pub store: Arc<store::Store>,
    /// `kind` of its lists (`PodList`).
    pub list_kind: String,
    /// `group/version/resource`, for metric labels.
    pub label: String,
}

/// The caches by (group, version, resource): built at startup, then read-only.
pub type Caches = HashMap<(String, String, String), Arc<ResourceCache>>;
