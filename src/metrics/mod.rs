//! Metrics: every name in one table with its HELP ([`names`]), label values
//! as enums ([`labels`]), and one way to record: handles made once, with
//! each label value registered at 0, held by what records them (a
//! reflector's [`ReflectorSeries`], a resource's [`WatchMetrics`], the auth
//! layer's [`AuthCounters`]), looked up once per value where a label comes
//! with the request ([`serving::Family`]), or process-wide ([`recorder`]).
//! Call sites pass enums and plain numbers, never label strings of their own.

pub mod audit;
pub mod fairness;
pub mod labels;
pub mod names;
pub mod recorder;
pub mod serving;
pub mod store;

pub use audit::AuditCounters;
pub use fairness::{
    REJECT_REASONS, flowcontrol_dispatched, flowcontrol_executing, flowcontrol_inqueue,
    flowcontrol_nominal, flowcontrol_nominal_watches, flowcontrol_registered, flowcontrol_rejected,
    flowcontrol_watches,
};
pub use labels::*;
pub use names::*;
pub use recorder::{
    COMMIT, auth_review, cache_alive, caches_served_stale, catch_up, collect_process,
    connection_closed, install, list_gzip, list_rejected, upstream_failover, watch_encodings,
    watch_log_trimmed, watch_rejected,
};
pub use serving::{
    AuthCounters, EventCounts, ProofSeries, WatchMetrics, cache_request, request, upstream_in_use,
    upstream_response, upstream_unreachable,
};
pub use store::{
    ConsistencySeries, PersistSeries, ReflectorSeries, StalenessSeries, without_stores,
};
