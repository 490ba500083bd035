//! The classifier in force: read by every request ([`Current::get`]),
//! replaced only through its one [`Writer`] (the follower of the cluster's
//! configuration, [`super::follow`]).

use std::sync::{Arc, RwLock};

use super::Capacity;
use super::classify::Classifier;
use crate::metrics;
use crate::sync::RwLockExt;

/// The classifier requests are classified by now.
#[derive(Debug)]
pub struct Current {
    classifier: RwLock<Arc<Classifier>>,
    /// What each configuration's levels share (their series are
    /// published with it).
    capacity: Capacity,
}

/// The one handle that replaces it.
#[derive(Debug)]
pub struct Writer {
    current: Arc<Current>,
}

impl Current {
    /// Starting from `classifier` (the apiserver's own configuration, until
    /// the cluster's is read), with the one writer that replaces it.
    /// `capacity`: what its levels share.
    pub fn new(classifier: Classifier, capacity: Capacity) -> (Arc<Current>, Writer) {
        publish(&classifier, capacity);
        let current = Arc::new(Current {
            classifier: RwLock::new(Arc::new(classifier)),
            capacity,
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
        publish(&classifier, self.current.capacity);
        *self.current.classifier.writing() = Arc::new(classifier);
    }
}

/// Each level's share of `capacity`, and every series of its levels and
/// schemas at their current values (at 0 where nothing happened yet), so a
/// dashboard and an alert see every level before its first request.
fn publish(classifier: &Classifier, capacity: Capacity) {
    for level in classifier.levels().values().filter(|l| !l.exempt) {
        let seats = super::seats(capacity.seats, level, classifier.share_sum());
        metrics::flowcontrol_nominal(&level.name, seats);
        let watches = super::seats(capacity.watches, level, classifier.share_sum());
        metrics::flowcontrol_nominal_watches(&level.name, watches);
        metrics::flowcontrol_watches(&level.name).increment(0.0);
        metrics::flowcontrol_executing(&level.name).increment(0.0);
    }
    for (level, schema) in classifier.schemas() {
        metrics::flowcontrol_registered(level, schema);
    }
}
