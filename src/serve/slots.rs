//! The slots cached answers hold while they stream: a costly read (a large
//! list, a list that walks many objects, a watch's initial events) holds a
//! seat of `read.max_inflight_lists`, a watch one of `watch.max_watchers`,
//! each of its priority level's share. Past them the answer is the
//! apiserver's 429, as its priority and fairness answers a request it has
//! no seat for. Live state, owned by the API
//! ([`super::Api`]) and lent to each answer as a slot it gives back when
//! dropped; the policies ([`super::read::ReadPolicy`],
//! [`super::watch::WatchPolicy`]) hold settings only.

use std::collections::HashMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use crate::fairness::classify::Classification;
use crate::fairness::queues::{QueueSet, Refused, Seat};
use crate::fairness::schema::{PriorityLevel, Queuing};
use crate::metrics;
use crate::sync::MutexExt;

use tokio::sync::{OwnedSemaphorePermit, Semaphore};

/// A list at least this large (its estimated bytes) is large: it holds one
/// of `read.max_inflight_lists` slots while it streams. Smaller ones cost
/// too little to count, and are never refused.
pub const LARGE_LIST: usize = 1 << 20;

/// A read that walks at least this many objects whatever it returns (a
/// selector no index answers, over every namespace; a watch's initial
/// events) costs CPU enough to hold a seat while it walks and streams, as
/// the apiserver's work estimate counts the objects a list must examine.
pub const COSTLY_WALK: usize = 5_000;

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

impl<'a> Level<'a> {
    /// The level `class` names (`None`: a caller r8s cannot classify).
    pub fn of(class: Option<&'a Classification>) -> Option<Level<'a>> {
        class.map(|c| Level {
            level: &c.level,
            share_sum: c.share_sum,
            flow: c.flow,
        })
    }
}

/// Counts a request of `class` refused for want of a seat or a slot.
fn rejected(class: Option<&Classification>, refused: Refused) {
    if let Some(c) = class {
        metrics::flowcontrol_rejected(&c.level.name, &c.schema.name, refused.reason());
    }
}

impl ListSlots {
    /// A seat for a costly read of `class`, as [`ListSlots::take`] gives
    /// one; a refusal is counted (`r8s_list_rejected_total` and its level's).
    pub async fn seat_for(&self, class: Option<&Classification>) -> Result<ListSlot, Refused> {
        let taken = self.take(Level::of(class)).await;
        if let Err(refused) = taken {
            metrics::list_rejected();
            rejected(class, refused);
        }
        taken
    }

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
                .map_err(|_| Refused::ConcurrencyLimit)?;
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

/// The slots of cached watches open at once (every resource's):
/// `watch.max_watchers` in all, shared among the priority levels as list
/// seats are (in proportion to their shares; the exempt level only within
/// the whole). A watch holds its slot for minutes, so one past its level's
/// share is refused at once (`concurrency-limit`), never queued: one
/// user's watches cannot take the slots the nodes' and controllers' need.
#[derive(Debug)]
pub struct WatchSlots {
    open: Arc<AtomicUsize>,
    max: usize,
    /// Each level's watches open now, by name.
    levels: Mutex<HashMap<String, Arc<AtomicUsize>>>,
}

/// A watch's slot, held by its watcher until it ends.
#[derive(Debug)]
pub struct WatchSlot {
    open: Arc<AtomicUsize>,
    /// Its level's count, and the gauge of it.
    level: Option<(Arc<AtomicUsize>, ::metrics::Gauge)>,
}

impl WatchSlots {
    /// `max` slots (`watch.max_watchers`).
    pub fn new(max: usize) -> Self {
        WatchSlots {
            open: Arc::new(AtomicUsize::new(0)),
            max,
            levels: Mutex::new(HashMap::new()),
        }
    }

    /// A slot for a watch of `class`, as [`WatchSlots::take`] gives one; a
    /// refusal is counted (`r8s_watch_rejected_total` and its level's).
    pub fn slot_for(&self, class: Option<&Classification>) -> Result<WatchSlot, Refused> {
        let taken = self.take(Level::of(class));
        if let Err(refused) = taken {
            metrics::watch_rejected();
            rejected(class, refused);
        }
        taken
    }

    /// `level`'s share of the slots ([`crate::fairness::seats`]).
    pub fn share(&self, level: Level<'_>) -> usize {
        crate::fairness::seats(self.max, level.level, level.share_sum)
    }

    /// A slot of the whole and of `level`'s share (`None`: of the whole
    /// only), if both have one free.
    pub fn take(&self, level: Option<Level<'_>>) -> Result<WatchSlot, Refused> {
        let open = self.open.clone();
        if !take_one(&open, self.max) {
            return Err(Refused::ConcurrencyLimit);
        }
        let mut slot = WatchSlot { open, level: None };
        let Some(level) = level else {
            return Ok(slot);
        };
        let name = level.level.name.as_str();
        let count = {
            let mut levels = self.levels.locked();
            match levels.get(name) {
                Some(c) => c.clone(),
                None => levels.entry(name.to_string()).or_default().clone(),
            }
        };
        // Dropping `slot` gives back its place in the whole.
        if !take_one(&count, self.share(level)) {
            return Err(Refused::ConcurrencyLimit);
        }
        let gauge = metrics::flowcontrol_watches(name);
        gauge.increment(1.0);
        slot.level = Some((count, gauge));
        Ok(slot)
    }
}

/// One of `max` from `count`, if it has one.
fn take_one(count: &AtomicUsize, max: usize) -> bool {
    if count.fetch_add(1, Ordering::AcqRel) >= max {
        count.fetch_sub(1, Ordering::AcqRel);
        return false;
    }
    true
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        self.open.fetch_sub(1, Ordering::AcqRel);
        if let Some((count, gauge)) = &self.level {
            count.fetch_sub(1, Ordering::AcqRel);
            gauge.decrement(1.0);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn should_lend_no_more_slots_than_there_are_and_take_back_dropped_ones() {
        let watches = WatchSlots::new(2);
        let (a, b) = (watches.take(None).unwrap(), watches.take(None).unwrap());
        assert!(watches.take(None).is_err(), "both taken");
        drop(a);
        let c = watches.take(None).expect("a dropped slot is free again");
        drop((b, c));
        assert_eq!(watches.open.load(Ordering::Acquire), 0);

        let lists = ListSlots::new(1);
        let slot = lists.take(None).await.unwrap();
        assert!(lists.take(None).await.is_err());
        drop(slot);
        assert!(lists.take(None).await.is_ok());
    }

    #[test]
    fn should_share_watch_slots_among_levels_and_refuse_past_a_share_at_once() {
        let watches = WatchSlots::new(20);
        let levels: Vec<PriorityLevel> = crate::fairness::builtin::priority_levels();
        let level = |name: &str| Level {
            level: levels.iter().find(|l| l.name == name).unwrap(),
            share_sum: 245,
            flow: 1,
        };
        let low = level("global-default");
        assert_eq!(watches.share(low), 2, "ceil(20 × 20 / 245)");
        let mine: Vec<_> = (0..2).map(|_| watches.take(Some(low)).unwrap()).collect();
        assert_eq!(
            watches.take(Some(low)).unwrap_err(),
            Refused::ConcurrencyLimit
        );
        assert_eq!(
            watches.open.load(Ordering::Acquire),
            2,
            "the refused one gave its place back"
        );
        let system = watches
            .take(Some(level("system")))
            .expect("another level's share");
        let exempt: Vec<_> = (0..17)
            .map(|_| watches.take(Some(level("exempt"))).unwrap())
            .collect();
        assert!(
            watches.take(Some(level("exempt"))).is_err(),
            "the exempt level within the whole"
        );
        drop((mine, system, exempt));
        assert_eq!(watches.open.load(Ordering::Acquire), 0);
        assert!(watches.take(Some(low)).is_ok(), "its share given back");
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
            Refused::ConcurrencyLimit
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
