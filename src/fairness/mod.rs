//! API priority and fairness as kube-apiserver's (issue 76): the cluster's
//! FlowSchemas and priority levels read as the apiserver reads them
//! ([`schema`]; its own mandatory and suggested ones where the cluster's
//! cannot be read, [`builtin`]), and each request classified to a
//! FlowSchema, a priority level and a flow exactly as the apiserver's
//! filter classifies it ([`classify`]); the classifier in force
//! ([`current`]), kept equal to the cluster's configuration by its one
//! follower ([`follow`]); each level's share of a capacity ([`seats`]) and
//! its fair queues ([`queues`]).

pub mod builtin;
pub mod classify;
pub mod current;
pub mod follow;
pub mod queues;
pub mod schema;

/// The response header naming the UID of the FlowSchema a request matched,
/// as kube-apiserver's.
pub const FLOW_SCHEMA_UID: http::HeaderName =
    http::HeaderName::from_static("x-kubernetes-pf-flowschema-uid");
/// The response header naming the UID of its priority level.
pub const PRIORITY_LEVEL_UID: http::HeaderName =
    http::HeaderName::from_static("x-kubernetes-pf-prioritylevel-uid");

/// What r8s's priority levels share: the seats of costly cached reads
/// (`read.max_inflight_lists`) and the slots of cached watches
/// (`watch.max_watchers`).
#[derive(Debug, Clone, Copy)]
pub struct Capacity {
    /// `read.max_inflight_lists`.
    pub seats: usize,
    /// `watch.max_watchers`.
    pub watches: usize,
}

/// A priority level's seats of `total` (r8s's large-list slots, say), as
/// kube-apiserver divides its concurrency: `ceil(total × its shares ÷
/// share_sum)`, at least one; the exempt level is not limited.
pub fn seats(total: usize, level: &schema::PriorityLevel, share_sum: u32) -> usize {
    if level.exempt {
        return usize::MAX;
    }
    let share = total as u64 * u64::from(level.shares);
    let seats = share.div_ceil(u64::from(share_sum.max(1)));
    usize::try_from(seats)
        .unwrap_or(total)
        .clamp(1, total.max(1))
}
