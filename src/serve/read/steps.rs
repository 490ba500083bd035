//! The types a cached read passes from step to step (`super`'s module doc
//! has the sequence), and what every step reads from: the [`Reader`].

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http::HeaderValue;

use crate::api::continue_token::ContinueToken;
use crate::api::media::{Encoding, ErrorEncoding};
use crate::api::params::ListOptions;
use crate::api::path::ResourcePath;
use crate::api::request::ApiRequest;
use crate::api::status::Status;
use crate::cache::ResourceCache;
use crate::cache::object::CachedObject;
use crate::cache::store::{Store, Version};
use crate::cache::view::{Shown, View};
use crate::codec::json::ListBody;
use crate::config::OnTooNew;
use crate::serve::outcome::PassReason;
use crate::serve::slots::ListSlots;
use crate::serve::table::{TableAsk, TableItem};
use crate::upstream::proof::{ConsistentKind, Proofs};

/// How cached reads behave: settings only (the slots of
/// `read.max_inflight_lists` are [`ListSlots`], the API's).
#[derive(Debug, Clone)]
pub struct ReadPolicy {
    /// How long a "not older than" read waits for the cache.
    pub wait: Duration,
    /// What happens after that.
    pub on_too_new: OnTooNew,
}

/// What a cached read needs besides the request: its policy, the provers
/// of consistent reads, and the slots large lists take.
pub struct Reader<'a> {
    /// How cached reads behave.
    pub policy: &'a ReadPolicy,
    /// Proves a cache fresh for a consistent read.
    pub proofs: &'a Proofs,
    /// The slots of `read.max_inflight_lists`.
    pub slots: &'a ListSlots,
    /// The request's priority level and FlowSchema (`None`: a caller r8s
    /// cannot classify).
    pub class: Option<&'a crate::fairness::classify::Classification>,
}

/// The scope: a get or list of a cached resource.
#[derive(Clone, Copy)]
pub struct Asked<'c> {
    /// The resource's cache.
    pub cache: &'c ResourceCache,
    /// The request, parsed.
    pub ar: &'c ApiRequest,
}

/// A get or a list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Read {
    Get,
    List,
}

/// The decision: the cache answers, from this store, in this shape.
pub(super) struct Decided<'c> {
    pub(super) cache: &'c ResourceCache,
    pub(super) read: Read,
    /// The store of the negotiated encoding.
    pub(super) store: &'c Store,
    pub(super) path: &'c ResourcePath,
    pub(super) opts: &'c ListOptions,
    /// What each object shows.
    pub(super) view: View,
    /// The Table asked for, if one was.
    pub(super) table: Option<TableAsk>,
    /// What a consistent read is proven as (`None`: not a consistent read).
    pub(super) consistent: Option<ConsistentKind>,
    pub(super) reply: Reply,
}

/// How the answer is written: decided with the rest, carried to the
/// response.
pub(super) struct Reply {
    pub(super) encoding: Encoding,
    /// Pretty-printed JSON (curl's `pretty`).
    pub(super) pretty: bool,
    /// The client accepts gzip.
    pub(super) gzip: bool,
    /// How r8s's own errors are encoded.
    pub(super) errors: ErrorEncoding,
    /// A stale cache's `Warning` (`cache.serve_stale`).
    pub(super) warning: Option<HeaderValue>,
}

/// The proof: a consistent read's floor, the version the upstream was at
/// when it arrived (`None` for any other read).
pub(super) struct Proven<'c> {
    pub(super) decided: Decided<'c>,
    pub(super) floor: Option<u64>,
}

/// The snapshot: the cache version the read is answered from.
pub(super) struct Snapshot<'c> {
    pub(super) decided: Decided<'c>,
    pub(super) version: Arc<Version>,
    /// The page a list continues after, decoded from its token.
    pub(super) resume: Option<ContinueToken>,
}

/// The body: what the answer sends, or how the read ends without one.
pub(super) struct Built {
    pub(super) payload: Result<Payload, Early>,
    pub(super) reply: Reply,
}

/// How a read ends without a payload: the apiserver's error, answered from
/// the cache (a 404, a 410 for an expired continue token, a 504), or passed
/// through.
pub(super) enum Early {
    Status(Status),
    Pass(PassReason),
}

/// What a hit sends: one object's bytes, or a streamed list.
pub(super) enum Payload {
    Bytes(Bytes),
    List(ListBody<Arc<CachedObject>>),
    Shown(ListBody<Shown>),
    Table(ListBody<TableItem>),
}
