//! Byte budgets shared by every store (`cache.max_bytes_per_resource`,
//! `cache.max_bytes_total`): a cache over either first gives up watch log
//! events, and only when its objects alone do not fit stops being served
//! (its requests pass through) instead of growing without bound.
//!
//! Making room is the one way a store's writer changes other stores: over
//! the total, [`Budget::trim_others`] drops the oldest events of the other
//! stores' logs, largest log first. Watchers that far behind start again,
//! as when `watch.history_*` trims a log; no object is touched.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, Weak};

use crate::sync::MutexExt;

/// A store's watch log as the budget sees it: its size, and a way to make
/// it smaller (implemented by `cache::store::Store`).
pub(super) trait TrimmedLog: Send + Sync {
    /// Bytes the log keeps alive.
    fn log_bytes(&self) -> usize;
    /// Drops the oldest events until the log is `by` bytes smaller (or
    /// holds one event); the bytes freed.
    fn trim(&self, by: usize) -> usize;
}

/// Byte budgets, shared by every store.
#[derive(Debug)]
pub struct Budget {
    total: AtomicUsize,
    /// Bytes one resource's cache may hold (0: no limit).
    pub max_per_resource: usize,
    /// Bytes all caches together may hold (0: no limit).
    pub max_total: usize,
    /// Every store counted here (enrolled by `Store::new`), whose watch
    /// logs give way when the total is over.
    stores: Mutex<Vec<Weak<dyn TrimmedLog>>>,
}

/// How far a store is past its budgets, in bytes (0: within).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) struct Over {
    /// Past `max_per_resource`.
    pub own: usize,
    /// Past `max_total`.
    pub total: usize,
}

impl Over {
    /// Within both budgets.
    pub fn none(self) -> bool {
        self.own == 0 && self.total == 0
    }
}

impl Budget {
    /// Budgets of these sizes (0: no limit).
    pub fn new(max_per_resource: usize, max_total: usize) -> Self {
        Budget {
            total: AtomicUsize::new(0),
            max_per_resource,
            max_total,
            stores: Mutex::new(Vec::new()),
        }
    }

    /// No budget at all (tests, tools).
    pub fn unlimited() -> Arc<Self> {
        Arc::new(Budget::new(0, 0))
    }

    /// Bytes held by all caches.
    pub fn total(&self) -> usize {
        self.total.load(Ordering::Relaxed)
    }

    /// Counts `delta` bytes more (or fewer) held; never below zero.
    pub(super) fn adjust(&self, delta: isize) {
        if delta >= 0 {
            self.total
                .fetch_add(delta.unsigned_abs(), Ordering::Relaxed);
        } else {
            let _ = self
                .total
                .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |t| {
                    Some(t.saturating_sub(delta.unsigned_abs()))
                });
        }
    }

    /// Counts `store`'s watch log among those that give way when the total is over.
    pub(super) fn enroll(&self, store: Arc<dyn TrimmedLog>) {
        let mut stores = self.stores.locked();
        stores.retain(|s| s.strong_count() > 0);
        stores.push(Arc::downgrade(&store));
    }

    /// How far a store holding `held` bytes is past the budgets.
    pub(super) fn over(&self, held: usize) -> Over {
        let past = |max: usize, n: usize| if max > 0 { n.saturating_sub(max) } else { 0 };
        Over {
            own: past(self.max_per_resource, held),
            total: past(self.max_total, self.total()),
        }
    }

    /// Trims the other stores' watch logs, largest first, until the total
    /// is within its budget; whether it is.
    pub(super) fn trim_others(&self, except: &dyn TrimmedLog) -> bool {
        let mut others: Vec<(usize, Arc<dyn TrimmedLog>)> = self
            .stores
            .locked()
            .iter()
            .filter_map(Weak::upgrade)
            .filter(|s| !std::ptr::addr_eq(Arc::as_ptr(s), except))
            .map(|s| (s.log_bytes(), s))
            .collect();
        others.sort_by_key(|(log, _)| std::cmp::Reverse(*log));
        let mut over = self.over(0).total;
        for (_, other) in others {
            if over == 0 {
                break;
            }
            other.trim(over);
            over = self.over(0).total;
        }
        over == 0
    }
}
