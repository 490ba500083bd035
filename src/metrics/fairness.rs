//! The series of priority and fairness, in the style of kube-apiserver's
//! own (`apiserver_flowcontrol_*`): requests dispatched and rejected by
//! priority level and FlowSchema, and each level's seats, nominal and held.
//! Label values are the cluster's own objects' names (a set its
//! administrators bound), each series made once.

use metrics::{Counter, Gauge};

use super::names;
use super::serving::Family;

/// Why a request gets no seat or slot of its level, as the apiserver's
/// `reason` label names them: every queue of its hand full; its level does
/// not queue (or a watch past its level's share); it waited too long.
pub const REJECT_REASONS: [&str; 3] = ["queue-full", "concurrency-limit", "time-out"];

/// `r8s_flowcontrol_dispatched_requests_total` by (level, schema).
static DISPATCHED: Family<(String, String), Counter> = Family::new();
/// `r8s_flowcontrol_rejected_requests_total` by (level, schema, reason).
static REJECTED: Family<(String, String, &'static str), Counter> = Family::new();
/// The seats series by level: (executing, nominal).
static SEATS: Family<String, (Gauge, Gauge)> = Family::new();
/// The watch series by level: (open, nominal).
static WATCHES: Family<String, (Gauge, Gauge)> = Family::new();
/// `r8s_flowcontrol_current_inqueue_requests` by (level, schema).
static INQUEUE: Family<(String, String), Gauge> = Family::new();

fn pair(level: &str, schema: &str) -> (String, String) {
    (level.to_string(), schema.to_string())
}

/// Records a request of `level` and `schema` that r8s answered itself.
pub fn flowcontrol_dispatched(level: &str, schema: &str) {
    DISPATCHED
        .get(pair(level, schema), |(l, s)| {
            metrics::counter!(names::FLOWCONTROL_DISPATCHED_TOTAL, "priority_level" => l.clone(), "flow_schema" => s.clone())
        })
        .increment(1);
}

/// Records a large list of `level` and `schema` refused for want of a
/// seat of its level, for `reason` (the apiserver's: `queue-full`,
/// `concurrency-limit`, `time-out`).
pub fn flowcontrol_rejected(level: &str, schema: &str, reason: &'static str) {
    rejected(level, schema, reason).increment(1);
}

fn rejected(level: &str, schema: &str, reason: &'static str) -> Counter {
    REJECTED.get(
        (level.to_string(), schema.to_string(), reason),
        |(l, s, r)| {
            metrics::counter!(names::FLOWCONTROL_REJECTED_TOTAL, "priority_level" => l.clone(), "flow_schema" => s.clone(), "reason" => *r)
        },
    )
}

/// `level`'s gauges of what it holds now and of its share, named `held`
/// and `share`, kept in `family`.
fn held_and_share(
    family: &Family<String, (Gauge, Gauge)>,
    level: &str,
    (held, share): (&'static str, &'static str),
) -> (Gauge, Gauge) {
    family.get(level.to_string(), |l| {
        (
            metrics::gauge!(held, "priority_level" => l.clone()),
            metrics::gauge!(share, "priority_level" => l.clone()),
        )
    })
}

fn seats(level: &str) -> (Gauge, Gauge) {
    let names = (
        names::FLOWCONTROL_EXECUTING_SEATS,
        names::FLOWCONTROL_NOMINAL_SEATS,
    );
    held_and_share(&SEATS, level, names)
}

/// The gauge of `level`'s seats held now (its holder adds one while it
/// holds a seat).
pub fn flowcontrol_executing(level: &str) -> Gauge {
    seats(level).0
}

/// Says `level` has `n` seats.
pub fn flowcontrol_nominal(level: &str, n: usize) {
    seats(level).1.set(n as f64);
}

/// Registers the dispatched, rejected and queued series of `level` and
/// `schema` (at 0 until something happens).
pub fn flowcontrol_registered(level: &str, schema: &str) {
    // An increment of 0 makes the series appear, at 0.
    DISPATCHED
        .get(pair(level, schema), |(l, s)| {
            metrics::counter!(names::FLOWCONTROL_DISPATCHED_TOTAL, "priority_level" => l.clone(), "flow_schema" => s.clone())
        })
        .increment(0);
    for reason in REJECT_REASONS {
        rejected(level, schema, reason).increment(0);
    }
    flowcontrol_inqueue(level, schema).increment(0.0);
}

/// The gauge of the requests of `level` and `schema` waiting in the
/// level's queues now.
pub fn flowcontrol_inqueue(level: &str, schema: &str) -> Gauge {
    INQUEUE.get(pair(level, schema), |(l, s)| {
        metrics::gauge!(names::FLOWCONTROL_INQUEUE, "priority_level" => l.clone(), "flow_schema" => s.clone())
    })
}

fn watches(level: &str) -> (Gauge, Gauge) {
    let names = (
        names::FLOWCONTROL_WATCHES,
        names::FLOWCONTROL_NOMINAL_WATCHES,
    );
    held_and_share(&WATCHES, level, names)
}

/// The gauge of `level`'s cached watches open now (each adds one while open).
pub fn flowcontrol_watches(level: &str) -> Gauge {
    watches(level).0
}

/// Says `level` may hold `n` of `watch.max_watchers`.
pub fn flowcontrol_nominal_watches(level: &str, n: usize) {
    watches(level).1.set(n as f64);
}
