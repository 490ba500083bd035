//! Get and list served from the cache, following the resource version
//! semantics of kube-apiserver's watch cache (`cacher.GetList`: "Any" from
//! the current version, "Not older than" after waiting for it, "Exact" from
//! the state at that version (current, pinned, or rewound with the watch
//! log), pages of one pinned version with continue tokens).
//!
//! A cached read goes through named steps, each a function from one type to
//! the next; any step may end it with the reason it passes through, so that
//! anything the apiserver would reject gets the apiserver's own answer:
//!
//! ```text
//! Asked ─decision─▶ Decided ─proof─▶ Proven ─snapshot─▶ Snapshot ─body─▶ Built ─respond─▶ Response
//! ```
//!
//! - scope, [`Asked`]: a get or list of a cached resource, parsed once
//!   (`ApiRequest::parse`);
//! - decision (`decision`), `Decided`: the store it is read from, the view
//!   and options, the Table asked for, whether it is a consistent read, how
//!   the answer is written (asking `serve::servable`, as watches do);
//! - proof (`proof`), `Proven`: the version a consistent read must reach;
//! - snapshot (`snapshot`), `Snapshot`: the cache version read, and the
//!   page a list resumes after;
//! - body (`body`), `Built`: the object or the page, or the apiserver's
//!   error (404, 410, 504);
//! - respond (`respond`): the response, a large list in one of the list
//!   slots, streamed.
//!
//! [`Reader::answer`] calls them in turn. [`super::Api::handle`] then
//! authorizes the caller for the response and finishes it (headers, audit,
//! metrics: `super::exchange`).

mod body;
mod decision;
mod proof;
mod respond;
mod snapshot;
mod steps;

use http::Response;

use super::outcome::PassReason;
use crate::body::Body;
pub use steps::{Asked, ReadPolicy, Reader};

impl Reader<'_> {
    /// The answer to a get or list from the cache, or why the upstream must
    /// give it: the steps in order. A consistent LIST (no `resourceVersion`,
    /// no `continue`) is answered only once the proofs show the cache as
    /// fresh as the upstream was when it arrived (`read.consistent_lists`),
    /// a consistent GET likewise (`read.consistent_gets`).
    pub async fn answer(&self, asked: Asked<'_>) -> Result<Response<Body>, PassReason> {
        let decided = decision::decide(asked)?;
        let proven = self.prove(decided).await?;
        // A list that walks every object takes its seat before it walks.
        let held = match costly_walk(&proven.decided) {
            false => None,
            true => match self.slots.seat_for(self.class).await {
                Ok(seat) => Some(seat),
                Err(_) => {
                    let reply = proven.decided.reply;
                    let payload = Err(respond::too_many());
                    return self.respond(steps::Built { payload, reply }, None).await;
                }
            },
        };
        let built = match self.snapshot(proven).await {
            Ok(snapshot) => body::body(snapshot),
            Err(early) => early,
        };
        self.respond(built, held).await
    }
}

/// Whether `d` is a list whose selectors make it walk every object of a
/// cache of at least [`COSTLY_WALK`](super::slots::COSTLY_WALK) (no index answers them) to return
/// some: its CPU is spent whatever it returns. (One without selectors
/// walks only what it returns, a large list if it is large.)
fn costly_walk(d: &steps::Decided<'_>) -> bool {
    let Ok(selectors) = &d.opts.selectors else {
        return false;
    };
    d.read == steps::Read::List
        && !selectors.is_empty()
        && super::slots::costly_walk(d.store, d.path.namespace.as_deref(), selectors)
}
