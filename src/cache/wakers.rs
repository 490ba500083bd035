//! Wakes the watchers waiting on a trigger (indexed watchers: pods of one
//! node, one name, one namespace): each event wakes only those it concerns,
//! so a kubelet's watch costs nothing when other nodes' pods change.

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
    /// Registers a watcher woken by the events on `trigger` only.
    pub fn register(&self, trigger: Trigger) -> TriggerGuard<'_> {
        let notify = Arc::new(Notify::new());
        self.by_trigger
            .locked()
            .entry(trigger)
            .or_default()
            .push(notify.clone());
        TriggerGuard {
            wakers: self,
            trigger,
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
    trigger: Trigger,
    /// Woken (with a stored permit, so no wake-up is lost) by each event on the trigger.
    pub notify: Arc<Notify>,
}

impl Drop for TriggerGuard<'_> {
    fn drop(&mut self) {
        let mut m = self.wakers.by_trigger.locked();
        if let Some(v) = m.get_mut(&self.trigger) {
            v.retain(|n| !Arc::ptr_eq(n, &self.notify));
            if v.is_empty() {
                m.remove(&self.trigger);
            }
        }
    }
}
