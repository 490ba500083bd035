//! Audit events for the requests r8s answers, in kube-apiserver's format.
//!
//! A read answered from the cache never reaches the apiserver, so it is
//! in no audit log unless r8s writes it. With `audit.policy_file` set, r8s
//! evaluates kube-apiserver's policy ([`policy`]) for each request and
//! writes `audit.k8s.io/v1` `Event`s ([`event`]) at its stages, as the
//! apiserver's audit filter does: `RequestReceived`, `ResponseStarted` for
//! long-running requests (watches), `ResponseComplete` once the body is
//! done, or `Panic`. Each goes to every backend, each bounded: the log
//! file's spool ([`spool`]), rotated ([`rotate`]), or standard output, and
//! the webhook's queue ([`sink`], [`webhook`]). Requests passed to the upstream are audited
//! there, as the caller; r8s audits them too only with `audit.passthrough`.
//!
//! Every response carries an `Audit-Id` (the request's own, if it came
//! with one), the same as its events', and so does a request passed on:
//! the apiserver's event for it has the same ID.

mod auditor;
pub mod event;
pub mod policy;
mod policy_raw;
mod record;
pub mod rotate;
pub mod sink;
pub mod spool;
pub mod webhook;

use http::{HeaderMap, HeaderName, HeaderValue};

use crate::config::AuditConfig;
pub use auditor::{AuditError, Auditor, Writers};
pub use record::{Authz, Facts, Outcome, Pending};

/// The header carrying a request's audit ID, both ways.
pub const AUDIT_ID: HeaderName = HeaderName::from_static("audit-id");

/// The request's audit ID: the `Audit-Id` it came with, else a new one.
pub fn id_of(headers: &HeaderMap) -> HeaderValue {
    match headers.get(&AUDIT_ID) {
        Some(v) if !v.is_empty() => v.clone(),
        _ => HeaderValue::try_from(event::new_id()).unwrap_or(HeaderValue::from_static("-")),
    }
}

/// Checks what of `audit.*` the configuration's own checks cannot: the
/// policy file, read as the apiserver reads it. Each problem as (key, message).
pub fn check(cfg: &AuditConfig) -> Vec<(String, String)> {
    match &cfg.policy_file {
        Some(p) => match policy::Policy::load(p) {
            Ok(_) => Vec::new(),
            Err(e) => vec![(
                "audit.policy_file".into(),
                format!("audit.policy_file: {e}"),
            )],
        },
        None => Vec::new(),
    }
}
