//! The audit series, made once and held by the auditor and its backends.

use metrics::Counter;

use super::labels::{AuditBackend, AuditDrop, AuditLevel};
use super::names;

/// Events written and dropped per backend, and requests per level.
pub struct AuditCounters {
    /// By [`AuditBackend::ALL`].
    written: Vec<Counter>,
    /// By [`AuditBackend::ALL`], then [`AuditDrop::ALL`].
    dropped: Vec<Vec<Counter>>,
    /// By [`AuditLevel::ALL`].
    levels: Vec<Counter>,
}

impl AuditCounters {
    /// Every series, registered at 0.
    pub fn new() -> Self {
        let zero = |c: Counter| {
            c.increment(0);
            c
        };
        AuditCounters {
            written: AuditBackend::ALL
                .iter()
                .map(|b| {
                    zero(metrics::counter!(names::AUDIT_EVENTS_TOTAL, "backend" => b.as_str()))
                })
                .collect(),
            dropped: AuditBackend::ALL
                .iter()
                .map(|b| {
                    AuditDrop::ALL
                        .iter()
                        .map(|r| {
                            zero(metrics::counter!(names::AUDIT_EVENTS_DROPPED_TOTAL,
                                "backend" => b.as_str(), "reason" => r.as_str()))
                        })
                        .collect()
                })
                .collect(),
            levels: AuditLevel::ALL
                .iter()
                .map(|l| zero(metrics::counter!(names::AUDIT_LEVEL_TOTAL, "level" => l.as_str())))
                .collect(),
        }
    }

    /// Counts `n` events written by `backend`.
    pub fn written(&self, backend: AuditBackend, n: u64) {
        self.written[backend.index()].increment(n);
    }

    /// Counts `n` events `backend` dropped, and why.
    pub fn dropped(&self, backend: AuditBackend, why: AuditDrop, n: u64) {
        self.dropped[backend.index()][why.index()].increment(n);
    }

    /// Counts a request audited at `level`.
    pub fn level(&self, level: AuditLevel) {
        self.levels[level.index()].increment(1);
    }
}

impl Default for AuditCounters {
    fn default() -> Self {
        Self::new()
    }
}
