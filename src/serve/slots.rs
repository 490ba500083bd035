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

use crate::fairness::queues::{QueueSet, Refused, Seat};
use crate::fairness::schema::{PriorityLevel, Queuing};
use crate::metrics;
use crate::sync::MutexExt;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A list at least this large (its estimated bytes) is large: it holds one
/// of `read.max_inflight_lists` slots while it streams. Smaller ones cost
/// too little to count, and are never refused.
pub const LARGE_LIST: usize = 1 << 20;

/// The slots of large lists streaming at once: `read.max_inflight_lists`,
/// shared among the priority levels as the apiserver shares its
/// concurrency, in proportion to their `nominalConcurrencyShares`
/// ([`crate::fairness::seats`]; the exempt level is not limited), and
/// queued fairly by flow within a level as its queuing says
/// ([`crate::fairness::queues`]). One user's lists can then take no more
/// than their level's share, and wait their turn behind other flows'. A
/// request r8s cannot classify (`auth.mode = "none"`) takes one of the
/// whole, or is refused at once.
#[derive(Debug)]
pub struct ListSlots {
    total: usize,
    all: Arc<Semaphore>,
    /// Each level's queue set, by name, with the seats and queuing it was
    /// made for (replaced when either changes; lists holding or awaiting a
    /// seat of the old one keep it).
    levels: Mutex<HashMap<String, LevelSeats>>,
}

#[derive(Debug)]
struct LevelSeats {
    seats: usize,
    queuing: Option<Queuing>,
    set: Arc<QueueSet>,
}

/// A large list's slot, held by its body until it is written (or
/// dropped), counted among its level's seats held while it is.
#[derive(Debug)]
pub struct ListSlot {
    _held: Held,
    executing: Option<::metrics::Gauge>,
}

/// What a slot holds, given back when it is dropped: one of the whole, or
/// a seat of a level.
#[derive(Debug)]
enum Held {
    Whole { _permit: OwnedSemaphorePermit },
    Level { _seat: Seat },
}

impl Drop for ListSlot {
    fn drop(&mut self) {
        if let Some(g) = &self.executing {
            g.decrement(1.0);
        }
    }
}

/// A request's priority level, what its share is of, and its flow.
#[derive(Debug, Clone, Copy)]
pub struct Level<'a> {
    /// The level.
    pub level: &'a PriorityLevel,
    /// The sum of every level's `nominalConcurrencyShares`.
    pub share_sum: u32,
    /// Its flow (the FlowSchema and distinguisher, hashed).
    pub flow: u64,
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
        crate::fairness::seats(self.total, level.level, level.share_sum)
    }

    /// A slot of `level`'s (`None`: of the whole): at once if one is free,
    /// else after its flow's turn in its level's queues, or refused.
    pub async fn take(&self, level: Option<Level<'_>>) -> Result<ListSlot, Refused> {
        let Some(level) = level else {
            let permit = self
                .all
                .clone()
                .try_acquire_owned()
                .map_err(|_| Refused::QueueFull)?;
            return Ok(ListSlot {
                _held: Held::Whole { _permit: permit },
                executing: None,
            });
        };
        let (seats, queuing) = (self.seats(level), level.level.queuing);
        let name = level.level.name.as_str();
        let set = {
            let mut levels = self.levels.locked();
            match levels.get(name) {
                Some(l) if l.seats == seats && l.queuing == queuing => l.set.clone(),
                _ => {
                    let set = QueueSet::new(name, seats, queuing);
                    let made = LevelSeats {
                        seats,
                        queuing,
                        set: set.clone(),
                    };
                    levels.insert(name.to_string(), made);
                    set
                }
            }
        };
        let seat = set.seat(level.flow).await?;
        let executing = metrics::flowcontrol_executing(name);
        executing.increment(1.0);
        Ok(ListSlot {
            _held: Held::Level { _seat: seat },
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

    #[tokio::test]
    async fn should_lend_no_more_slots_than_there_are_and_take_back_dropped_ones() {
        let watches = WatchSlots::new(2);
        let (a, b) = (watches.take().unwrap(), watches.take().unwrap());
        assert!(watches.take().is_none(), "both taken");
        drop(a);
        let c = watches.take().expect("a dropped slot is free again");
        drop((b, c));
        assert_eq!(watches.open.load(Ordering::Acquire), 0);

        let lists = ListSlots::new(1);
        let slot = lists.take(None).await.unwrap();
        assert!(lists.take(None).await.is_err());
        drop(slot);
        assert!(lists.take(None).await.is_ok());
    }

    #[tokio::test(start_paused = true)]
    async fn should_share_list_slots_among_levels_by_their_shares() {
        let lists = ListSlots::new(32);
        let levels: Vec<PriorityLevel> = crate::fairness::builtin::priority_levels();
        let level = |name: &str, flow| Level {
            level: levels.iter().find(|l| l.name == name).unwrap(),
            // kube-apiserver 1.36's suggested levels' shares sum to 245.
            share_sum: 245,
            flow,
        };
        let low = level("global-default", 1);
        assert_eq!(lists.seats(low), 3, "ceil(32 × 20 / 245)");
        assert_eq!(lists.seats(level("workload-low", 1)), 14);
        assert_eq!(lists.seats(level("catch-all", 1)), 1, "at least one");
        let mut held = Vec::new();
        for _ in 0..3 {
            held.push(lists.take(Some(low)).await.unwrap());
        }
        // Its share taken: the next waits its turn, and past its wait is refused.
        assert_eq!(lists.take(Some(low)).await.unwrap_err(), Refused::TimedOut);
        let system = level("system", 2);
        assert!(
            lists.take(Some(system)).await.is_ok(),
            "another level's seats are its own"
        );
        // catch-all does not queue: refused at once.
        let catch_all = level("catch-all", 3);
        let one = lists.take(Some(catch_all)).await.unwrap();
        assert_eq!(
            lists.take(Some(catch_all)).await.unwrap_err(),
            Refused::QueueFull
        );
        let exempt = level("exempt", 4);
        let mut many = Vec::new();
        for _ in 0..100 {
            many.push(lists.take(Some(exempt)).await.unwrap());
        }
        assert!(
            lists.take(None).await.is_ok(),
            "the unclassified share the whole"
        );
        // A seat given back goes to the one waiting.
        let waiter = lists.take(Some(low));
        let (got, ()) = tokio::join!(waiter, async { drop(held.pop()) });
        assert!(got.is_ok());
        drop((held, many, one));
    }
}
