//! A consistent state of one resource at one resource version: its objects
//! by key, and (in a store that indexes pods' nodes) the same objects by
//! `spec.nodeName`, kept together by the only methods that change them.
//!
//! The node index is what makes a kubelet's list of its own pods cost what
//! it returns: the objects of one node are a range of it, in key order, so
//! a node-scoped list, page or streaming list reads those and no other.
//! Both maps are persistent B-trees (`imbl::OrdMap`): a version shares its
//! structure with the one before it, and a reader's version never changes.

use std::sync::Arc;

use imbl::OrdMap;

use super::object::{CachedObject, Objects};

/// Pods by node: (`spec.nodeName`, key) to the object (`""` for a pod not
/// yet scheduled), in key order within each node.
pub type NodeIndex = OrdMap<(Arc<str>, Arc<str>), Arc<CachedObject>>;

/// What one entry of the node index takes beyond the node's name: its place
/// in the B-tree (the two keys and the value, 3 pointers, and the tree's
/// share per entry). Counted in [`Version::bytes`], so in `r8s_cache_bytes`
/// and the byte budgets.
pub(super) const NODE_ENTRY_BYTES: usize = 48;

/// A consistent state of the resource at one resource version.
#[derive(Debug, Clone)]
pub struct Version {
    /// The upstream resource version this state is at.
    pub rv: u64,
    /// The objects.
    pub objects: Objects,
    /// Bytes the objects and the node index take (accounting).
    pub bytes: usize,
    /// The objects by node, in a store that indexes them.
    by_node: Option<NodeIndex>,
}

impl Version {
    /// An empty state at version 0, indexing nodes or not.
    pub fn empty(node_index: bool) -> Self {
        Version {
            rv: 0,
            objects: OrdMap::new(),
            bytes: 0,
            by_node: node_index.then(OrdMap::new),
        }
    }

    /// The bytes `o` takes in a version: itself, and its index entry.
    fn cost(&self, o: &CachedObject) -> usize {
        match &self.by_node {
            Some(_) => o.size() + NODE_ENTRY_BYTES + node_of(o).len(),
            None => o.size(),
        }
    }

    /// Puts `o` in place of the object at its key; the object it displaced.
    pub fn insert(&mut self, o: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        self.bytes += self.cost(&o);
        let prev = self.objects.insert(o.key.clone(), o.clone());
        if let Some(old) = &prev {
            self.bytes = self.bytes.saturating_sub(self.cost(old));
        }
        if let Some(index) = &mut self.by_node {
            if let Some(old) = &prev {
                index.remove(&(Arc::from(node_of(old)), old.key.clone()));
            }
            index.insert((Arc::from(node_of(&o)), o.key.clone()), o);
        }
        prev
    }

    /// Takes out the object at `key`, if there is one.
    pub fn remove(&mut self, key: &Arc<str>) -> Option<Arc<CachedObject>> {
        let old = self.objects.remove(key)?;
        self.bytes = self.bytes.saturating_sub(self.cost(&old));
        if let Some(index) = &mut self.by_node {
            index.remove(&(Arc::from(node_of(&old)), old.key.clone()));
        }
        Some(old)
    }

    /// Replaces every object with `objects` (a relist, a restored snapshot).
    pub fn replace(&mut self, objects: Objects) {
        if let Some(index) = &mut self.by_node {
            *index = objects
                .values()
                .map(|o| ((Arc::from(node_of(o)), o.key.clone()), o.clone()))
                .collect();
        }
        self.objects = objects;
        self.bytes = self.objects.values().map(|o| self.cost(o)).sum();
    }

    /// Whether this version indexes pods by node.
    pub fn indexes_nodes(&self) -> bool {
        self.by_node.is_some()
    }

    /// The objects of `node` whose keys are at or after `from`, in key order;
    /// `None` when this version does not index nodes.
    pub fn on_node<'v>(
        &'v self,
        node: &str,
        from: &str,
    ) -> Option<impl Iterator<Item = (&'v Arc<str>, &'v Arc<CachedObject>)> + 'v> {
        let index = self.by_node.as_ref()?;
        let node: Arc<str> = Arc::from(node);
        let start = (node.clone(), Arc::from(from));
        Some(
            index
                .range(start..)
                .take_while(move |((n, _), _)| *n == node)
                .map(|((_, k), o)| (k, o)),
        )
    }
}

impl Version {
    /// The objects a read walks, in key order from the key `from`: those of
    /// `node` where the read pins one and this version indexes nodes, else
    /// the key range from `from`; either way only keys under `prefix` (a
    /// namespace's `ns/`, or `""`), which `from` starts with. What the read
    /// costs is then what it returns, plus what its other selectors drop.
    pub fn walk<'v>(
        &'v self,
        prefix: &'v str,
        from: &str,
        node: Option<&str>,
    ) -> Box<dyn Iterator<Item = (&'v Arc<str>, &'v Arc<CachedObject>)> + Send + 'v> {
        let under = move |(k, _): &(&Arc<str>, &Arc<CachedObject>)| k.starts_with(prefix);
        if let Some(on_node) = node.and_then(|n| self.on_node(n, from)) {
            return Box::new(on_node.take_while(under));
        }
        let from: Arc<str> = Arc::from(from);
        Box::new(self.objects.range(from..).take_while(under))
    }
}

/// The node a pod is on (`""` for one not scheduled yet).
fn node_of(o: &CachedObject) -> &str {
    o.field("spec.nodeName")
}
