//! The caches of single objects a node's pods reference (`node.name`: the
//! configmaps and secrets its kubelet watches one by one, by name). One is
//! started when a local client first asks for an object its node's pods
//! reference, is shared by every local client from then on, and is dropped
//! once no pod references it. Read by every request that names one;
//! changed only by their owner (`apis::objects`) through its
//! [`ObjectsWriter`].

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::ResourceCache;
use crate::api::request::{ApiRequest, Verb};
use crate::sync::RwLockExt;

/// The resources whose objects are cached one by one.
pub const RESOURCES: [&str; 2] = ["configmaps", "secrets"];

/// One object: a core configmap or secret, by namespace and name.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct ObjectKey {
    /// `configmaps` or `secrets`.
    pub resource: &'static str,
    /// Its namespace.
    pub namespace: String,
    /// Its name.
    pub name: String,
}

impl ObjectKey {
    /// The object `ar` names, if it is one of [`RESOURCES`]: a get of it, or
    /// a list or watch in its namespace whose field selector requires its
    /// name (a kubelet's single-object watch).
    pub fn of(ar: &ApiRequest) -> Option<ObjectKey> {
        let gvr = &ar.path.gvr;
        let resource = RESOURCES
            .into_iter()
            .find(|r| gvr.group().is_empty() && gvr.version() == "v1" && gvr.resource() == *r)?;
        let namespace = ar.path.namespace.clone()?;
        if ar.path.subresource.is_some() {
            return None;
        }
        let name = match (ar.verb, &ar.path.name) {
            (Verb::Get | Verb::Watch, Some(name)) => name.clone(),
            (Verb::List | Verb::Watch, None) => {
                let opts = ar.options.as_ref().ok()?;
                let selectors = opts.selectors.as_ref().ok()?;
                selectors.fields.exact("metadata.name")?.to_string()
            }
            _ => return None,
        };
        Some(ObjectKey {
            resource,
            namespace,
            name,
        })
    }
}

/// A request for the cache of an object not cached yet: its owner starts it
/// where the node's pods reference the object, and answers with it.
pub struct Ask {
    /// The object.
    pub key: ObjectKey,
    /// Where the cache (or `None`: not referenced, not started) goes.
    pub reply: oneshot::Sender<Option<Arc<ResourceCache>>>,
}

/// The object caches served now, and the way to ask for another.
pub struct ObjectCaches {
    caches: RwLock<HashMap<ObjectKey, Arc<ResourceCache>>>,
    /// Bounded: a burst of asks beyond it passes through (`try_send`).
    asks: mpsc::Sender<Ask>,
}

/// How many asks wait for the owner at most; beyond, a request passes.
const ASKS: usize = 256;

impl ObjectCaches {
    /// None yet; the one handle that changes them; and the asks, for their
    /// owner.
    pub fn new() -> (Arc<ObjectCaches>, ObjectsWriter, mpsc::Receiver<Ask>) {
        let (tx, rx) = mpsc::channel(ASKS);
        let caches = Arc::new(ObjectCaches {
            caches: RwLock::default(),
            asks: tx,
        });
        (caches.clone(), ObjectsWriter(caches), rx)
    }

    /// The cache of `key` if it is cached now.
    pub fn get(&self, key: &ObjectKey) -> Option<Arc<ResourceCache>> {
        self.caches.reading().get(key).cloned()
    }

    /// How many objects are cached now.
    pub fn len(&self) -> usize {
        self.caches.reading().len()
    }

    /// Whether none is.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The cache of `key`: the one cached now, else one its owner starts
    /// where the node's pods reference the object; waited for until it has
    /// synced, for at most `within` (the answer an upstream round trip
    /// would take anyway; past it, the request passes as a cache syncing
    /// does). `None`: not referenced, or the owner is busy or gone.
    pub async fn cache_for(&self, key: ObjectKey, within: Duration) -> Option<Arc<ResourceCache>> {
        let cache = match self.get(&key) {
            Some(c) => c,
            None => {
                let (reply, answer) = oneshot::channel();
                self.asks.try_send(Ask { key, reply }).ok()?;
                answer.await.ok()??
            }
        };
        let _ = tokio::time::timeout(within, settled(&cache)).await;
        Some(cache)
    }
}

/// Until every store of `cache` has settled (synced, or given up on).
async fn settled(cache: &ResourceCache) {
    for s in cache.stores() {
        let mut rx = s.subscribe();
        while !s.settled() {
            if rx.changed().await.is_err() {
                return;
            }
        }
    }
}

/// The one handle that adds and removes object caches.
pub struct ObjectsWriter(Arc<ObjectCaches>);

impl ObjectsWriter {
    /// Serves `cache` for `key` from now on.
    pub fn insert(&self, key: ObjectKey, cache: Arc<ResourceCache>) {
        self.0.caches.writing().insert(key, cache);
    }

    /// Serves `key` no more.
    pub fn remove(&self, key: &ObjectKey) {
        self.0.caches.writing().remove(key);
    }
}
