//! What one watcher is sent: its namespace and selectors, and the indexed
//! value they pin (its trigger).

use crate::api::selector::Selectors;
use crate::cache::history::Trigger;
use crate::cache::object::CachedObject;

/// A watcher's namespace and selectors.
pub struct Filter {
    /// The namespace of the request's path, if any.
    pub namespace: Option<String>,
    /// Its label and field selectors.
    pub selectors: Selectors,
}

impl Filter {
    /// Whether everything passes (no namespace, no selector).
    pub fn everything(&self) -> bool {
        self.namespace.is_none() && self.selectors.is_empty()
    }

    /// Whether `o` passes.
    pub fn passes(&self, o: &CachedObject) -> bool {
        self.namespace
            .as_deref()
            .is_none_or(|ns| o.namespace() == ns)
            && o.matches(&self.selectors)
    }

    /// What may concern this filter, for waking its watcher: its trigger;
    /// for a shard, the hash buckets its ranges reach (an object outside
    /// them can neither pass nor leave the filter); `None`: anything.
    pub fn wakes_on(&self, nodes_indexed: bool) -> Option<Box<[Trigger]>> {
        if let Some(t) = self.trigger(nodes_indexed) {
            return Some(Box::new([t]));
        }
        let shard = self.selectors.shard.as_ref()?;
        Some(
            shard
                .buckets()
                .into_iter()
                .map(|b| Trigger::shard(shard.key(), b))
                .collect(),
        )
    }

    /// The indexed value this filter pins, if any: only events concerning it
    /// can pass (or leave) the filter.
    pub fn trigger(&self, nodes_indexed: bool) -> Option<Trigger> {
        let fields = &self.selectors.fields;
        if nodes_indexed && let Some(n) = fields.exact("spec.nodeName") {
            return Some(Trigger::node(n));
        }
        if let Some(n) = fields.exact("metadata.name") {
            return Some(Trigger::name(n));
        }
        self.namespace
            .as_deref()
            .or_else(|| fields.exact("metadata.namespace"))
            .map(Trigger::namespace)
    }
}
