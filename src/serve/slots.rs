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
use std::sync::{Arc, Mutex};

use crate::api::selector::Selectors;
use crate::cache::store::Store;
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

/// Whether a read of `namespace` (`None`: every one) with `selectors` walks
/// every object of `store`, and they are at least [`COSTLY_WALK`]: a read
/// no index answers, whose CPU is spent whatever it returns.
pub fn costly_walk(store: &Store, namespace: Option<&str>, selectors: &Selectors) -> bool {
    namespace.is_none()
        && store
            .current()
            .whole_walk(selectors)
            .is_some_and(|n| n >= COSTLY_WALK)
}

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
    /// The name of its FlowSchema (what its wait is counted by).
    pub schema: &'a str,
}

impl<'a> Level<'a> {
    /// The level `class` names (`None`: a caller r8s cannot classify).
    pub fn of(class: Option<&'a Classification>) -> Option<Level<'a>> {
        class.map(|c| Level {
            level: &c.level,
            share_sum: c.share_sum,
            flow: c.flow,
            schema: &c.schema.name,
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
                    let set = QueueSet::new(seats, queuing);
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
        let queued = metrics::flowcontrol_inqueue(name, level.schema);
        let seat = set.seat(level.flow, queued).await?;
        let executing = metrics::flowcontrol_executing(name);
        executing.increment(1.0);
        Ok(ListSlot {
            _held: Held::Level { _seat: seat },
            executing: Some(executing),
        })
    }
}

/// The slots of cached watches open at once (every resource's):
/// `watch.max_watchers` in all, each priority level guaranteed its share as
/// with seats (in proportion to its shares; the exempt level unlimited).
/// A watch holds its slot for minutes, so it is never queued; while the
/// whole has room any level may take more than its share (nodes hold many
/// watches, and nothing is refused that was not before). Once the whole is
/// full, a watch of a level under its share takes the slot of one of the
/// level most over its share (from its flow holding the most, its newest
/// watch), which ends cleanly as at shutdown (a final bookmark: its client
/// resumes, and finds its level full); one of a level at its share is
/// refused at once (`concurrency-limit`). So one user's watches cannot
/// keep the nodes and controllers from theirs.
#[derive(Debug)]
pub struct WatchSlots {
    max: usize,
    state: Arc<Mutex<Watches>>,
}

/// Who holds the slots now.
#[derive(Debug, Default)]
struct Watches {
    open: usize,
    /// Each level's, by name.
    levels: HashMap<String, LevelWatches>,
    /// The next watch's number.
    numbered: u64,
}

#[derive(Debug)]
struct LevelWatches {
    /// Its share, as of its latest watch's classification.
    share: usize,
    open: usize,
    /// Its open watches by flow, each by number.
    flows: HashMap<u64, HashMap<u64, Arc<Preempt>>>,
    /// `r8s_flowcontrol_current_watches` of the level.
    gauge: ::metrics::Gauge,
}

impl LevelWatches {
    fn over(&self) -> usize {
        self.open.saturating_sub(self.share)
    }
}

/// Tells a watch that its slot was given to another level's watch.
#[derive(Debug, Default)]
pub struct Preempt {
    taken: std::sync::atomic::AtomicBool,
    notify: tokio::sync::Notify,
}

impl Preempt {
    /// Resolves once the watch's slot is taken from it (at once if it was
    /// before this is called); any number may wait.
    pub async fn taken(&self) {
        use std::sync::atomic::Ordering;
        loop {
            let notified = self.notify.notified();
            let mut notified = std::pin::pin!(notified);
            notified.as_mut().enable();
            if self.taken.load(Ordering::Acquire) {
                return;
            }
            notified.await;
        }
    }

    fn take(&self) {
        self.taken.store(true, std::sync::atomic::Ordering::Release);
        self.notify.notify_waiters();
    }
}

/// A watch's slot, held by its watcher until it ends.
#[derive(Debug)]
pub struct WatchSlot {
    state: Arc<Mutex<Watches>>,
    /// Its level's name, flow and number there, and what it is told by.
    held: Option<(String, u64, u64, Arc<Preempt>)>,
}

impl WatchSlot {
    /// What tells its watcher to end (`None`: a slot of the whole only,
    /// which nothing takes).
    pub fn preempt(&self) -> Option<Arc<Preempt>> {
        self.held.as_ref().map(|h| h.3.clone())
    }
}

impl WatchSlots {
    /// `max` slots (`watch.max_watchers`).
    pub fn new(max: usize) -> Self {
        WatchSlots {
            max,
            state: Arc::default(),
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

    /// A slot for a watch of `level` (`None`: a caller r8s cannot classify,
    /// which only the whole limits): free, or taken from the level most
    /// over its share where its own is under it, or refused.
    pub fn take(&self, level: Option<Level<'_>>) -> Result<WatchSlot, Refused> {
        let mut guard = self.state.locked();
        let s = &mut *guard;
        let Some(level) = level else {
            if s.open >= self.max {
                return Err(Refused::ConcurrencyLimit);
            }
            s.open += 1;
            return Ok(WatchSlot {
                state: self.state.clone(),
                held: None,
            });
        };
        let name = level.level.name.as_str();
        let share = self.share(level);
        let mine = s.levels.get(name).map_or(0, |l| l.open);
        if s.open >= self.max {
            // Full: only a level under its share takes a slot, from the
            // level most over its share.
            if mine >= share || !s.preempt_one(name) {
                return Err(Refused::ConcurrencyLimit);
            }
        } else {
            s.open += 1;
        }
        let n = s.numbered;
        s.numbered += 1;
        let l = s
            .levels
            .entry(name.to_string())
            .or_insert_with(|| LevelWatches {
                share,
                open: 0,
                flows: HashMap::new(),
                gauge: metrics::flowcontrol_watches(name),
            });
        l.share = share;
        l.open += 1;
        l.gauge.increment(1.0);
        let preempt = Arc::new(Preempt::default());
        l.flows
            .entry(level.flow)
            .or_default()
            .insert(n, preempt.clone());
        Ok(WatchSlot {
            state: self.state.clone(),
            held: Some((name.to_string(), level.flow, n, preempt)),
        })
    }
}

impl Watches {
    /// Ends the newest watch of the flow holding the most of the level most
    /// over its share (other than `not`), its slot handed on: false where
    /// no level is over its share.
    fn preempt_one(&mut self, not: &str) -> bool {
        let Some(l) = self
            .levels
            .iter_mut()
            .filter(|(name, l)| name.as_str() != not && l.over() > 0)
            .max_by_key(|(_, l)| l.over())
            .map(|(_, l)| l)
        else {
            return false;
        };
        let Some((&flow, _)) = l.flows.iter().max_by_key(|(_, w)| w.len()) else {
            return false;
        };
        let watches = l.flows.get_mut(&flow).expect("the flow just found");
        let newest = *watches.keys().max().expect("a flow holds a watch");
        let preempt = watches.remove(&newest).expect("its newest");
        if watches.is_empty() {
            l.flows.remove(&flow);
        }
        l.open -= 1;
        l.gauge.decrement(1.0);
        preempt.take();
        true
    }
}

impl Drop for WatchSlot {
    fn drop(&mut self) {
        let mut guard = self.state.locked();
        let s = &mut *guard;
        let Some((name, flow, n, _)) = &self.held else {
            s.open -= 1;
            return;
        };
        let Some(l) = s.levels.get_mut(name) else {
            return;
        };
        let Some(watches) = l.flows.get_mut(flow) else {
            // Taken from it: its place was handed on.
            return;
        };
        if watches.remove(n).is_none() {
            return;
        }
        if watches.is_empty() {
            l.flows.remove(flow);
        }
        l.open -= 1;
        l.gauge.decrement(1.0);
        s.open -= 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures_util::FutureExt;

    /// The built-in level `name` (of `levels`), for `flow`: kube-apiserver
    /// 1.36's suggested levels' shares sum to 245.
    fn builtin<'a>(levels: &'a [PriorityLevel], name: &str, flow: u64) -> Level<'a> {
        Level {
            level: levels.iter().find(|l| l.name == name).unwrap(),
            share_sum: 245,
            flow,
            schema: "test",
        }
    }

    #[tokio::test]
    async fn should_lend_no_more_slots_than_there_are_and_take_back_dropped_ones() {
        let lists = ListSlots::new(1);
        let slot = lists.take(None).await.unwrap();
        assert!(lists.take(None).await.is_err());
        drop(slot);
        assert!(lists.take(None).await.is_ok());
    }

    #[test]
    fn should_lend_idle_watch_slots_and_take_them_back_for_a_level_under_its_share() {
        let watches = WatchSlots::new(20);
        let levels = crate::fairness::builtin::priority_levels();
        let level = |name, flow| builtin(&levels, name, flow);
        let (alice, bob) = (level("global-default", 1), level("global-default", 2));
        let system = level("system", 3);
        assert_eq!(watches.share(alice), 2, "ceil(20 × 20 / 245)");
        assert_eq!(watches.share(system), 3, "ceil(20 × 30 / 245)");
        // The whole has room: a level takes more than its share.
        let mut hers: Vec<_> = (0..19)
            .map(|_| watches.take(Some(alice)).unwrap())
            .collect();
        let his = watches.take(Some(bob)).unwrap();
        assert_eq!(
            watches.take(Some(alice)).unwrap_err(),
            Refused::ConcurrencyLimit,
            "full, and her level over its share"
        );
        // A level under its share takes the newest watch of the flow
        // holding the most of the level most over its share.
        let newest = hers.last().unwrap().preempt().unwrap();
        let oldest = hers[0].preempt().unwrap();
        let nodes: Vec<_> = (0..3)
            .map(|_| watches.take(Some(system)).unwrap())
            .collect();
        assert!(
            newest.taken().now_or_never().is_some(),
            "her newest watch told to end"
        );
        assert!(oldest.taken().now_or_never().is_none(), "her oldest kept");
        assert!(
            his.preempt().unwrap().taken().now_or_never().is_none(),
            "bob's one watch kept: alice's flow holds the most"
        );
        assert_eq!(
            watches.take(Some(system)).unwrap_err(),
            Refused::ConcurrencyLimit,
            "system at its share"
        );
        let exempt = watches
            .take(Some(level("exempt", 4)))
            .expect("exempt takes one too");
        {
            let s = watches.state.locked();
            assert_eq!(s.open, 20);
            assert_eq!(s.levels["global-default"].open, 16);
        }
        // The watches told to end give back nothing twice when they go.
        hers.truncate(10);
        drop((hers, his, nodes, exempt));
        let s = watches.state.locked();
        assert_eq!(s.open, 0, "every slot given back once");
        assert!(s.levels.values().all(|l| l.open == 0 && l.flows.is_empty()));
    }

    #[test]
    fn should_limit_unclassified_watches_by_the_whole_only() {
        let watches = WatchSlots::new(2);
        let (a, b) = (watches.take(None).unwrap(), watches.take(None).unwrap());
        assert!(watches.take(None).is_err(), "both taken");
        assert!(a.preempt().is_none(), "nothing takes it");
        drop(a);
        let c = watches.take(None).expect("a dropped slot is free again");
        drop((b, c));
        assert_eq!(watches.state.locked().open, 0);
    }

    #[tokio::test(start_paused = true)]
    async fn should_share_list_slots_among_levels_by_their_shares() {
        let lists = ListSlots::new(32);
        let levels = crate::fairness::builtin::priority_levels();
        let level = |name, flow| builtin(&levels, name, flow);
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
