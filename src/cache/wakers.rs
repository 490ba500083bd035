//! Wakes the watchers waiting on a trigger (indexed watchers: pods of one
//! node, one name, one namespace; sharded watchers, on the buckets of their
//! ranges): each event wakes only those it concerns, so a kubelet's watch
//! costs nothing when other nodes' pods change, nor a shard's when other
//! shards' objects do.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::Notify;

use super::history::Trigger;
use crate::sync::MutexExt;

/// The indexed watchers of one store, by trigger.
#[derive(Default)]
pub(super) struct Wakers {
    by_trigger: Mutex<HashMap<Trigger, Vec<Arc<Notify>>>>,
}

impl Wakers {
    /// Registers a watcher woken by the events on `triggers` only (any of them).
    pub fn register(&self, triggers: &[Trigger]) -> TriggerGuard<'_> {
        let notify = Arc::new(Notify::new());
        let mut m = self.by_trigger.locked();
        for t in triggers {
            m.entry(*t).or_default().push(notify.clone());
        }
        TriggerGuard {
            wakers: self,
            triggers: triggers.into(),
            notify,
        }
    }

    /// Wakes the watchers of the `touched` triggers, or every indexed
    /// watcher with `all` (the log turned over a quarter, or was reset:
    /// each must look again).
    pub fn wake(&self, touched: &[Trigger], all: bool) {
        if touched.is_empty() && !all {
            return;
        }
        let m = self.by_trigger.locked();
        if all {
            m.values().flatten().for_each(|n| n.notify_one());
            return;
        }
        // (A watcher of several triggers an event touches is notified
        // twice: one stored permit, one wake-up.)
        for t in touched {
            for n in m.get(t).into_iter().flatten() {
                n.notify_one();
            }
        }
    }
}

/// An indexed watcher's registration; unregisters when dropped.
pub struct TriggerGuard<'a> {
    wakers: &'a Wakers,
    triggers: Box<[Trigger]>,
    /// Woken (with a stored permit, so no wake-up is lost) by each event on the trigger.
    pub notify: Arc<Notify>,
}

impl Drop for TriggerGuard<'_> {
    fn drop(&mut self) {
        let mut m = self.wakers.by_trigger.locked();
        for t in &self.triggers {
            if let Some(v) = m.get_mut(t) {
                v.retain(|n| !Arc::ptr_eq(n, &self.notify));
                if v.is_empty() {
                    m.remove(t);
                }
            }
        }
    }
}
