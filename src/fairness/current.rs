//! The classifier in force: read by every request ([`Current::get`]),
//! replaced only through its one [`Writer`] (the follower of the cluster's
//! configuration, [`super::follow`]).

use std::sync::{Arc, RwLock};

use super::classify::Classifier;
use crate::metrics;
use crate::sync::RwLockExt;

/// The classifier requests are classified by now.
#[derive(Debug)]
pub struct Current {
    classifier: RwLock<Arc<Classifier>>,
    /// r8s's large-list slots (`read.max_inflight_lists`), which each
    /// configuration's levels share (their series are published with it).
    list_seats: usize,
}

/// The one handle that replaces it.
#[derive(Debug)]
pub struct Writer {
    current: Arc<Current>,
}

impl Current {
    /// Starting from `classifier` (the apiserver's own configuration, until
    /// the cluster's is read), with the one writer that replaces it.
    /// `list_seats`: `read.max_inflight_lists`.
    pub fn new(classifier: Classifier, list_seats: usize) -> (Arc<Current>, Writer) {
        publish(&classifier, list_seats);
        let current = Arc::new(Current {
            classifier: RwLock::new(Arc::new(classifier)),
            list_seats,
        });
        let writer = Writer {
            current: current.clone(),
        };
        (current, writer)
    }

    /// The classifier in force (a pointer copied under a read lock).
    pub fn get(&self) -> Arc<Classifier> {
        self.classifier.reading().clone()
    }
}

impl Writer {
    /// Puts `classifier` in force.
    pub fn set(&self, classifier: Classifier) {
        publish(&classifier, self.current.list_seats);
        *self.current.classifier.writing() = Arc::new(classifier);
    }
}

/// Each level's seats of `list_seats`, and every series of its levels and
/// schemas at their current values (at 0 where nothing happened yet), so a
/// dashboard and an alert see every level before its first request.
fn publish(classifier: &Classifier, list_seats: usize) {
    for level in classifier.levels().values().filter(|l| !l.exempt) {
        let seats = super::seats(list_seats, level, classifier.share_sum());
        metrics::flowcontrol_nominal(&level.name, seats);
        metrics::flowcontrol_executing(&level.name).increment(0.0);
        metrics::flowcontrol_inqueue(&level.name).increment(0.0);
    }
    for (level, schema) in classifier.schemas() {
        metrics::flowcontrol_registered(level, schema);
    }
}
