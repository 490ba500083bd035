//! The slots cached answers hold while they stream: a large list holds one
//! of `read.max_inflight_lists`, a watch one of `watch.max_watchers`. Past
//! them the answer is the apiserver's 429, as its priority and fairness
//! answers a request it has no slot for. Live state, owned by the API
//! ([`super::Api`]) and lent to each answer as a slot it gives back when
//! dropped; the policies ([`super::read::ReadPolicy`],
//! [`super::watch::WatchPolicy`]) hold settings only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::fairness::schema::PriorityLevel;
use crate::sync::MutexExt;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A list at least this large (its estimated bytes) is large: it holds one
/// of `read.max_inflight_lists` slots while it streams. Smaller ones cost
/// too little to count, and are never refused.
pub const LARGE_LIST: usize = 1 << 20;

/// The slots of large lists streaming at once: `read.max_inflight_lists`,
/// shared among the priority levels as the apiserver shares its
/// concurrency, in proportion to their `nominalConcurrencyShares`
/// (`ceil(total × shares ÷ the sum of every level's)`, at least one; the
/// exempt level takes none). One user's lists can then take no more than
/// their level's share, whatever they hold. A request r8s cannot classify
/// (`auth.mode = "none"`) takes one of the whole.
#[derive(Debug)]
pub struct ListSlots {
    total: usize,
    all: Arc<Semaphore>,
    /// Each level's seats, by name: its count and its semaphore (replaced
    /// when its count changes; lists streaming keep the old one's).
    levels: Mutex<HashMap<String, (usize, Arc<Semaphore>)>>,
}

/// A large list's slot, held by its body until it is written (or
/// dropped), counted among its level's seats held while it is.
#[derive(Debug)]
pub struct ListSlot {
    _permit: OwnedSemaphorePermit,
    executing: Option<metrics::Gauge>,
}

impl Drop for ListSlot {
    fn drop(&mut self) {
        if let Some(g) = &self.executing {
            g.decrement(1.0);
        }
    }
}

/// A request's priority level, and what its share is of.
#[derive(Debug, Clone, Copy)]
pub struct Level<'a> {
    /// The level.
    pub level: &'a PriorityLevel,
    /// The sum of every level's `nominalConcurrencyShares`.
    pub share_sum: u32,
}

impl ListSlots {
    /// `n` slots (`read.max_inflight_lists`).
    pub fn new(n: usize) -> Self {
        ListSlots {
            total: n,
            all: Arc::new(Semaphore::new(n)),
            levels: Mutex::new(HashMap::new()),
        }
    }

    /// The seats of `level` out of the total ([`crate::fairness::seats`]).
    pub fn seats(&self, level: Level<'_>) -> usize {
        crate::fairness::seats(self.total, level.level, level.share_sum).min(Semaphore::MAX_PERMITS)
    }

    /// A slot of `level`'s (`None`: of the whole), if one is free.
    pub fn take(&self, level: Option<Level<'_>>) -> Option<ListSlot> {
        let Some(level) = level else {
            let permit = self.all.clone().try_acquire_owned().ok()?;
            return Some(ListSlot {
                _permit: permit,
                executing: None,
            });
        };
        let seats = self.seats(level);
        let name = level.level.name.as_str();
        let sem = {
            let mut levels = self.levels.locked();
            match levels.get(name) {
                Some((n, sem)) if *n == seats => sem.clone(),
                _ => {
                    let sem = Arc::new(Semaphore::new(seats));
                    levels.insert(name.to_string(), (seats, sem.clone()));
                    sem
                }
            }
        };
        let permit = sem.try_acquire_owned().ok()?;
        let executing = crate::metrics::flowcontrol_executing(name);
        executing.increment(1.0);
        Some(ListSlot {
            _permit: permit,
            executing: Some(executing),
        })
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
        let slot = lists.take(None).unwrap();
        assert!(lists.take(None).is_none());
        drop(slot);
        assert!(lists.take(None).is_some());
    }

    #[test]
    fn should_share_list_slots_among_levels_by_their_shares() {
        let lists = ListSlots::new(32);
        let levels: Vec<PriorityLevel> = crate::fairness::builtin::priority_levels();
        let level = |name: &str| Level {
            level: levels.iter().find(|l| l.name == name).unwrap(),
            // kube-apiserver 1.36's suggested levels' shares sum to 245.
            share_sum: 245,
        };
        let low = level("global-default");
        assert_eq!(lists.seats(low), 3, "ceil(32 × 20 / 245)");
        assert_eq!(lists.seats(level("workload-low")), 14);
        assert_eq!(lists.seats(level("catch-all")), 1, "at least one");
        let held: Vec<ListSlot> = (0..3).map(|_| lists.take(Some(low)).unwrap()).collect();
        assert!(lists.take(Some(low)).is_none(), "its share taken");
        let system = level("system");
        assert!(
            lists.take(Some(system)).is_some(),
            "another level's seats are its own"
        );
        let exempt = level("exempt");
        let many: Vec<ListSlot> = (0..100)
            .map(|_| lists.take(Some(exempt)).unwrap())
            .collect();
        assert!(
            lists.take(None).is_some(),
            "the unclassified share the whole"
        );
        drop((held, many));
        assert!(lists.take(Some(low)).is_some());
    }
}
