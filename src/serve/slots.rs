//! The slots cached answers hold while they stream: a large list holds one
//! of `read.max_inflight_lists`, a watch one of `watch.max_watchers`. Past
//! them the answer is the apiserver's 429, as its priority and fairness
//! answers a request it has no slot for. Live state, owned by the API
//! ([`super::Api`]) and lent to each answer as a slot it gives back when
//! dropped; the policies ([`super::read::ReadPolicy`],
//! [`super::watch::WatchPolicy`]) hold settings only.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A list at least this large (its estimated bytes) is large: it holds one
/// of `read.max_inflight_lists` slots while it streams. Smaller ones cost
/// too little to count, and are never refused.
pub const LARGE_LIST: usize = 1 << 20;

/// The slots of large lists streaming at once.
#[derive(Debug)]
pub struct ListSlots(Arc<Semaphore>);

/// A large list's slot, held by its body until it is written (or dropped).
pub type ListSlot = OwnedSemaphorePermit;

impl ListSlots {
    /// `n` slots (`read.max_inflight_lists`).
    pub fn new(n: usize) -> Self {
        ListSlots(Arc::new(Semaphore::new(n)))
    }

    /// A slot, if one is free.
    pub fn take(&self) -> Option<ListSlot> {
        self.0.clone().try_acquire_owned().ok()
    }
}

/// The slots of cached watches open at once (every resource's).
#[derive(Debug)]
pub struct WatchSlots {
    open: Arc<AtomicUsize>,
    max: usize,
}

/// A watch's slot, held by its watcher until it ends.
#[derive(Debug)]
pub struct WatchSlot(Arc<AtomicUsize>);

impl WatchSlots {
    /// `max` slots (`watch.max_watchers`).
    pub fn new(max: usize) -> Self {
        WatchSlots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
        }
    }

    /// A slot, if one is free.
    pub fn take(&self) -> Option<WatchSlot> {
        if self.open.fetch_add(1, Ordering::AcqRel) >= self.max {
            self.open.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(WatchSlot(self.open.clone()))
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_lend_no_more_slots_than_there_are_and_take_back_dropped_ones() {
        let watches = WatchSlots::new(2);
        let (a, b) = (watches.take().unwrap(), watches.take().unwrap());
        assert!(watches.take().is_none(), "both taken");
        drop(a);
        let c = watches.take().expect("a dropped slot is free again");
        drop((b, c));
        assert_eq!(watches.open.load(Ordering::Acquire), 0);

        let lists = ListSlots::new(1);
        let slot = lists.take().unwrap();
        assert!(lists.take().is_none());
        drop(slot);
        assert!(lists.take().is_some());
    }
}
