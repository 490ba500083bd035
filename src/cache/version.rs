//! A consistent state of one resource at one resource version: its objects
//! by key, and the same objects in each of its [`super::index`]es (pods by
//! `spec.nodeName`, and what `cache.indexes` adds), kept together by the
//! only methods that change them.
//!
//! The indexes are what make a kubelet's list of its own pods cost what it
//! returns: the objects of one node are a range of one, in key order, so a
//! node-scoped list, page or streaming list reads those and no other.
//! Objects and indexes are persistent B-trees (`imbl::OrdMap`): a version
//! shares its structure with the one before it, and a reader's version
//! never changes.

use std::sync::Arc;

use imbl::OrdMap;

use super::index::{Index, IndexOn, Walk};
use super::object::{CachedObject, Objects};
use crate::api::selector::Selectors;

/// A consistent state of the resource at one resource version.
#[derive(Debug, Clone)]
pub struct Version {
    /// The upstream resource version this state is at.
    pub rv: u64,
    /// The objects.
    pub objects: Objects,
    /// Bytes the objects and their index entries take (accounting).
    pub bytes: usize,
    /// The objects again, by what each index keys them by.
    indexes: Vec<Index>,
}

impl Version {
    /// An empty state at version 0, with an empty index on each of `indexes`.
    pub fn empty(indexes: &[IndexOn]) -> Self {
        Version {
            rv: 0,
            objects: OrdMap::new(),
            bytes: 0,
            indexes: indexes.iter().cloned().map(Index::new).collect(),
        }
    }

    /// The bytes `o` takes in a version: itself, and its index entries.
    fn cost(&self, o: &CachedObject) -> usize {
        o.size() + self.indexes.iter().map(|i| i.cost(o)).sum::<usize>()
    }

    /// Puts `o` in place of the object at its key; the object it displaced.
    pub fn insert(&mut self, o: Arc<CachedObject>) -> Option<Arc<CachedObject>> {
        self.bytes += self.cost(&o);
        let prev = self.objects.insert(o.key.clone(), o.clone());
        if let Some(old) = &prev {
            self.bytes = self.bytes.saturating_sub(self.cost(old));
        }
        for index in &mut self.indexes {
            if let Some(old) = &prev {
                index.remove(old);
            }
            index.insert(&o);
        }
        prev
    }

    /// Takes out the object at `key`, if there is one.
    pub fn remove(&mut self, key: &Arc<str>) -> Option<Arc<CachedObject>> {
        let old = self.objects.remove(key)?;
        self.bytes = self.bytes.saturating_sub(self.cost(&old));
        for index in &mut self.indexes {
            index.remove(&old);
        }
        Some(old)
    }

    /// Replaces every object with `objects` (a relist, a restored snapshot).
    pub fn replace(&mut self, objects: Objects) {
        for index in &mut self.indexes {
            index.rebuild(objects.values());
        }
        self.objects = objects;
        self.bytes = self.objects.values().map(|o| self.cost(o)).sum();
    }

    /// The index on `on`, where this version keeps one.
    pub fn index(&self, on: &IndexOn) -> Option<&Index> {
        self.indexes.iter().find(|i| i.on == *on)
    }

    /// How many objects a read of every namespace with `selectors` walks,
    /// where it walks them all (no index pinned): what it costs whatever it
    /// returns. `None` where an index bounds the walk.
    pub fn whole_walk(&self, selectors: &Selectors) -> Option<usize> {
        let pinned = self
            .indexes
            .iter()
            .any(|i| i.on.pinned(selectors).is_some());
        (!pinned).then_some(self.objects.len())
    }

    /// The objects a read walks, in key order from the key `from`: those
    /// under the values its selectors pin an index to (the first index they
    /// pin, in the order configured), else the key range from `from`;
    /// either way only keys under `prefix` (a namespace's `ns/`, or `""`),
    /// which `from` starts with. What the read costs is then what it
    /// returns, plus what its other selectors drop.
    pub fn walk<'v>(&'v self, prefix: &'v str, from: &str, selectors: &Selectors) -> Walk<'v> {
        let under = move |(k, _): &(&Arc<str>, &Arc<CachedObject>)| k.starts_with(prefix);
        let pinned = self
            .indexes
            .iter()
            .find_map(|i| Some((i, i.on.pinned(selectors)?)));
        if let Some((index, values)) = pinned {
            return Box::new(index.ranges(&values, from).take_while(under));
        }
        let from: Arc<str> = Arc::from(from);
        Box::new(self.objects.range(from..).take_while(under))
    }
}
