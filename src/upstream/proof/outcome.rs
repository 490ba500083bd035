//! What a proof comes to: why a consistent read was not proven (it passes
//! through), and why one step of a proof failed (logged).

use std::time::Duration;

use http::StatusCode;

/// Why a consistent read was not proven (it passes through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unproven {
    /// Proving is off for this kind of read (`pass`).
    Off,
    /// Not an upstream or resource r8s proves against: older than 1.31
    /// under `auto`, or an aggregated API.
    Unprovable,
    /// The proof failed (its LIST or probe), did not complete in time, or
    /// recent ones failed.
    Failed,
}

/// Why one step of a proof failed (logged; the request passes through).
#[derive(Debug, thiserror::Error)]
pub enum ProofError {
    /// The request could not be made, or its answer read.
    #[error("{0}")]
    Upstream(String),
    /// A status other than 200 (`what` names the request).
    #[error("{what} answered {code}")]
    Status {
        /// The request.
        what: &'static str,
        /// Its status.
        code: StatusCode,
    },
    /// The probe watch sent an ERROR event (a too-old `C` arrives as 410).
    #[error("the probe watch sent an ERROR event")]
    ErrorEvent,
    /// The probe watch ended before its bookmark.
    #[error("the probe watch ended before its bookmark")]
    EndedEarly,
    /// No answer in time.
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
    /// No bookmark in time.
    #[error("no bookmark within {0:?}")]
    NoBookmark(Duration),
    /// An answer that is not what was asked for.
    #[error("malformed {0}")]
    Malformed(&'static str),
}
