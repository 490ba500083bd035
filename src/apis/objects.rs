//! The owner of the object caches of a node-local r8s (`node.name`,
//! [`crate::cache::objects`]): it starts the cache of a configmap or secret
//! the first time a local client asks for one its node's pods reference
//! (the node authorizer's graph: volumes, projected sources, `envFrom`,
//! `env` references, image pull secrets), and drops each once no pod of the
//! node references it. Each is one cache of one object, its upstream watch
//! (one per encoding) shared by every local client.

use std::collections::{BTreeSet, HashMap};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use tokio::sync::mpsc;

use super::life::{Running, Start, Starter};
use crate::api::{ApiResource, Gvr};
use crate::cache::ResourceCache;
use crate::cache::objects::{Ask, ObjectKey, ObjectsWriter};
use crate::cache::registry::Registry;
use crate::cache::scope::CacheScope;
use crate::cache::serving::Serving;
use crate::cache::view::View;
use crate::shutdown::Signal;

/// How often the references are read again, and the caches no pod
/// references dropped.
const PRUNE: Duration = Duration::from_secs(5);

/// The longest an ask waits for the pods' JSON store to catch up with
/// their freshest store (its upstream watch a moment behind the other's).
const CATCH_UP: Duration = Duration::from_secs(5);

/// The object caches' owner.
pub struct Objects {
    starter: Starter,
    writer: ObjectsWriter,
    /// The caches served, where the node's pods cache is.
    registry: Arc<Registry>,
    running: HashMap<ObjectKey, (Arc<ResourceCache>, Running)>,
    asks: mpsc::Receiver<Ask>,
    shutdown: Signal,
}

impl Objects {
    /// The owner of the caches `writer` changes, starting them with
    /// `starter`, answering `asks`, reading the node's pods from
    /// `registry`, until `shutdown`.
    pub fn new(
        starter: Starter,
        writer: ObjectsWriter,
        registry: Arc<Registry>,
        asks: mpsc::Receiver<Ask>,
        shutdown: Signal,
    ) -> Objects {
        Objects {
            starter,
            writer,
            registry,
            running: HashMap::new(),
            asks,
            shutdown,
        }
    }

    /// Answers asks and drops what no pod references, until shutdown.
    pub async fn run(mut self) {
        let mut prune = tokio::time::interval(PRUNE);
        prune.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            tokio::select! {
                ask = self.asks.recv() => match ask {
                    Some(ask) => self.answer(ask).await,
                    None => return,
                },
                _ = prune.tick() => self.prune(),
                _ = self.shutdown.wait() => return,
            }
        }
    }

    /// The cache of the object asked for: started where a pod of the node
    /// references it.
    async fn answer(&mut self, Ask { key, reply }: Ask) {
        if let Some((cache, _)) = self.running.get(&key) {
            let _ = reply.send(Some(cache.clone()));
            return;
        }
        if !self.referenced_now(&key).await {
            let _ = reply.send(None);
            return;
        }
        let scope = CacheScope::Object {
            namespace: key.namespace.clone(),
            name: key.name.clone(),
        };
        let launched =
            self.starter
                .launch(resource(key.resource), scope, Start::Now, &self.shutdown);
        tracing::info!(resource = key.resource, namespace = %key.namespace, name = %key.name, "caching an object the node's pods reference");
        self.writer.insert(key.clone(), launched.cache.clone());
        let _ = reply.send(Some(launched.cache.clone()));
        self.running.insert(key, (launched.cache, launched.running));
    }

    /// Whether a pod of the node references `key`, read from its pods'
    /// JSON store once that has caught up with the freshest of its stores
    /// (at most [`CATCH_UP`]): a client that saw a new pod in the protobuf
    /// one (a kubelet) asks for what it mounts at once, and would otherwise
    /// pass upstream.
    async fn referenced_now(&self, key: &ObjectKey) -> bool {
        let Some(pods) = self.registry.get(&Gvr::from_static("", "v1", "pods")) else {
            return false;
        };
        let newest = pods.stores().map(|s| s.current().rv).max().unwrap_or(0);
        let mut changed = pods.store.subscribe();
        let deadline = tokio::time::Instant::now() + CATCH_UP;
        loop {
            if referenced(&self.registry).contains(key) {
                return true;
            }
            // Read again each time the JSON store changes, until it has
            // reached the freshest store's version (a bookmark may take
            // it there later than the pod itself arrives).
            if pods.store.current().rv >= newest {
                return false;
            }
            match tokio::time::timeout_at(deadline, changed.changed()).await {
                Ok(Ok(())) => {}
                _ => return false,
            }
        }
    }

    /// Drops the caches of objects no pod of the node references now, and
    /// the saved files of any (those of a run before this one), once the
    /// node's pods are known (their cache serving, fresh or from disk).
    fn prune(&mut self) {
        if self.running.is_empty() && self.starter.enrol.persist.is_none() {
            return;
        }
        let pods = self.registry.get(&Gvr::from_static("", "v1", "pods"));
        if !pods.is_some_and(|p| p.store.serving() == Serving::Ready) {
            return;
        }
        let wanted = referenced(&self.registry);
        let gone: Vec<ObjectKey> = self
            .running
            .keys()
            .filter(|k| !wanted.contains(k))
            .cloned()
            .collect();
        for key in gone {
            self.writer.remove(&key);
            if let Some((_, r)) = self.running.remove(&key) {
                drop(r.retire());
            }
            tracing::info!(resource = key.resource, namespace = %key.namespace, name = %key.name, "no pod of the node references it: its cache dropped");
        }
        if let Some((p, _)) = &self.starter.enrol.persist {
            p.discard_objects(|resource, namespace, name| {
                wanted
                    .iter()
                    .any(|k| k.resource == resource && k.namespace == namespace && k.name == name)
            });
        }
    }
}

/// A core configmaps or secrets resource.
fn resource(name: &'static str) -> ApiResource {
    ApiResource {
        gvr: Gvr::from_static("", "v1", name),
        kind: match name {
            "secrets" => "Secret".into(),
            _ => "ConfigMap".into(),
        },
        namespaced: true,
        selectable: &[],
    }
}

/// The configmaps and secrets the node's pods (its pods cache, JSON)
/// reference now.
fn referenced(registry: &Registry) -> BTreeSet<ObjectKey> {
    let mut out = BTreeSet::new();
    let Some(pods) = registry.get(&Gvr::from_static("", "v1", "pods")) else {
        return out;
    };
    for o in pods.store.current().objects.values() {
        if let Ok(pod) = serde_json::from_slice::<Value>(&o.body_as(View::OBJECT)) {
            references(&pod, &mut out);
        }
    }
    out
}

/// What `pod` references, as the node authorizer's graph adds edges from a
/// pod to configmaps and secrets.
pub fn references(pod: &Value, out: &mut BTreeSet<ObjectKey>) {
    let Some(ns) = pod["metadata"]["namespace"].as_str() else {
        return;
    };
    let mut add = |resource: &'static str, name: &Value| {
        if let Some(name) = name.as_str().filter(|n| !n.is_empty()) {
            out.insert(ObjectKey {
                resource,
                namespace: ns.to_string(),
                name: name.to_string(),
            });
        }
    };
    let spec = &pod["spec"];
    for v in spec["volumes"].as_array().into_iter().flatten() {
        add("configmaps", &v["configMap"]["name"]);
        add("secrets", &v["secret"]["secretName"]);
        for s in v["projected"]["sources"].as_array().into_iter().flatten() {
            add("configmaps", &s["configMap"]["name"]);
            add("secrets", &s["secret"]["name"]);
        }
    }
    for s in spec["imagePullSecrets"].as_array().into_iter().flatten() {
        add("secrets", &s["name"]);
    }
    let containers = ["initContainers", "containers", "ephemeralContainers"]
        .into_iter()
        .flat_map(|k| spec[k].as_array().into_iter().flatten());
    for c in containers {
        for e in c["envFrom"].as_array().into_iter().flatten() {
            add("configmaps", &e["configMapRef"]["name"]);
            add("secrets", &e["secretRef"]["name"]);
        }
        for e in c["env"].as_array().into_iter().flatten() {
            add("configmaps", &e["valueFrom"]["configMapKeyRef"]["name"]);
            add("secrets", &e["valueFrom"]["secretKeyRef"]["name"]);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_find_what_a_pod_references_as_the_node_authorizer_does() {
        let pod = serde_json::json!({
            "metadata": {"namespace": "ns-1", "name": "p"},
            "spec": {
                "volumes": [
                    {"name": "a", "configMap": {"name": "cm-vol"}},
                    {"name": "b", "secret": {"secretName": "s-vol"}},
                    {"name": "c", "projected": {"sources": [
                        {"configMap": {"name": "cm-proj"}}, {"secret": {"name": "s-proj"}},
                        {"serviceAccountToken": {"path": "t"}}]}},
                    {"name": "d", "emptyDir": {}}
                ],
                "imagePullSecrets": [{"name": "s-pull"}],
                "initContainers": [{"name": "i", "envFrom": [{"configMapRef": {"name": "cm-init"}}]}],
                "containers": [{"name": "c", "envFrom": [{"secretRef": {"name": "s-from"}}],
                    "env": [{"name": "X", "valueFrom": {"configMapKeyRef": {"name": "cm-key", "key": "k"}}},
                            {"name": "Y", "valueFrom": {"secretKeyRef": {"name": "s-key", "key": "k"}}},
                            {"name": "Z", "value": "plain"}]}]
            }
        });
        let mut out = BTreeSet::new();
        references(&pod, &mut out);
        let got: Vec<String> = out
            .iter()
            .map(|k| format!("{} {}/{}", k.resource, k.namespace, k.name))
            .collect();
        assert_eq!(
            got,
            [
                "configmaps ns-1/cm-init",
                "configmaps ns-1/cm-key",
                "configmaps ns-1/cm-proj",
                "configmaps ns-1/cm-vol",
                "secrets ns-1/s-from",
                "secrets ns-1/s-key",
                "secrets ns-1/s-proj",
                "secrets ns-1/s-pull",
                "secrets ns-1/s-vol",
            ]
        );
    }
}
