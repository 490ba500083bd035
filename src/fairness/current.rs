//! The classifier in force: read by every request ([`Current::get`]),
//! replaced only through its one [`Writer`] (the follower of the cluster's
//! configuration, [`super::follow`]).

use std::sync::{Arc, RwLock};

use super::classify::Classifier;
use crate::sync::RwLockExt;

/// The classifier requests are classified by now.
#[derive(Debug)]
pub struct Current {
    classifier: RwLock<Arc<Classifier>>,
}

/// The one handle that replaces it.
#[derive(Debug)]
pub struct Writer {
    current: Arc<Current>,
}

impl Current {
    /// Starting from `classifier` (the apiserver's own configuration, until
    /// the cluster's is read), with the one writer that replaces it.
    pub fn new(classifier: Classifier) -> (Arc<Current>, Writer) {
        let current = Arc::new(Current {
            classifier: RwLock::new(Arc::new(classifier)),
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
        *self.current.classifier.writing() = Arc::new(classifier);
    }
}
