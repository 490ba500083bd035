//! The Kubernetes API listener: the corridor every request walks.
//!
//! ```text
//! request ─▶ ApiRequest::parse (path, verb, query, options, selectors, media: once)
//!         ─▶ Auth::authenticate ──────────────────────────────▶ refused (401/503)
//!         ─▶ a cache for its group/version/resource?
//!              no ───────────────────────────────────────────▶ passthrough::forward
//!              yes ─▶ watch::plan / read::answer ─ PassReason ─▶ passthrough::forward
//!                        └─ hit ─▶ Auth::authorize ─ denied ───▶ refused (403/503)
//!                                     └─ allowed ─────────────▶ the cache's answer
//!         ─▶ the audit record (`audit::Pending`), where auditing is on
//!         ─▶ finish: `X-R8s-Cache`, `Audit-Id` and every metric, in one place
//! ```
//!
//! - [`read`]: get and list from the cache; [`watch`]: watches from the
//!   cache's event log; [`passthrough`]: everything else, relayed upstream.
//! - [`outcome`]: the vocabulary of what became of a request.

pub mod outcome;
mod page;
pub mod passthrough;
pub mod read;
pub mod table;
pub mod watch;

use std::borrow::Cow;
use std::sync::Arc;
use std::time::{Instant, SystemTime};

use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;

use crate::api::media::ErrorEncoding;
use crate::api::request::{ApiRequest, Verb};
use crate::api::status::Status;
use crate::audit;
use crate::audit::Auditor;
use crate::auth::{Auth, Caller, Refusal};
use crate::body::Body;
use crate::cache::ResourceCache;
use crate::cache::registry::Registry;
use crate::metrics;
use crate::server::Peer;
use crate::shutdown::Signal;
use crate::upstream::Upstream;
use crate::upstream::proof::Proofs;
use outcome::{Answer, CACHE_HEADER, CacheResult, Source};

/// Everything the API listener needs.
pub struct Api {
    /// Who is asking, and may they read from the cache.
    pub auth: Auth,
    /// The upstream.
    pub upstream: Arc<Upstream>,
    /// The caches, by group/version/resource.
    pub caches: Arc<Registry>,
    /// How cached reads behave.
    pub policy: read::ReadPolicy,
    /// How cached watches behave.
    pub watch_policy: watch::WatchPolicy,
    /// Ends streams at shutdown.
    pub shutdown: Signal,
    /// Proves caches fresh for consistent reads.
    pub proofs: Arc<Proofs>,
    /// Writes audit events, where `audit.policy_file` is set.
    pub audit: Option<Arc<Auditor>>,
}

impl Api {
    /// Answers one API request from `peer`.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: Arc<Peer>,
    ) -> Response<Body> {
        let start = Instant::now();
        // (Read only for an audit record.)
        let received = match self.audit {
            Some(_) => SystemTime::now(),
            None => SystemTime::UNIX_EPOCH,
        };
        let id = audit::id_of(req.headers());
        let ar = ApiRequest::parse(req.method(), req.uri(), req.headers());
        // r8s's own errors come in the negotiated encoding.
        let errors = ar.as_ref().map_or(ErrorEncoding::Json, |ar| ar.errors);
        let (verb, resource) = match &ar {
            Some(ar) => (ar.verb, ar.resource_label()),
            None => (Verb::Other, Cow::Owned(non_resource_label(req.uri()))),
        };
        let facts = |user, impersonated| audit::Facts {
            id: &id,
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            peer: peer.addr.ip(),
            received,
            user,
            impersonated,
            request: ar.as_ref(),
        };
        let caller = match self
            .auth
            .authenticate(req.uri(), req.headers(), peer.certificate.as_ref())
            .await
        {
            Ok(caller) => caller,
            Err(refusal) => {
                let resp = refusal.into_response(errors);
                if let Some(a) = &self.audit {
                    a.unauthenticated(facts(None, None), &resp);
                }
                return finish(resp, verb, &resource, Source::Auth, None, start, id);
            }
        };
        let cached = ar
            .as_ref()
            .filter(|_| caller.cacheable())
            .and_then(|ar| Some((ar, self.caches.get(&ar.path.gvr)?)))
            // A path the upstream does not route (a cluster-scoped resource
            // under a namespace) gets the upstream's own 404.
            .filter(|(ar, c)| ar.path.routed(c.resource.namespaced));
        // Recorded where r8s may answer it, or where passes are audited too.
        let pending = self
            .audit
            .as_ref()
            .filter(|a| cached.is_some() || a.audits_passes())
            .and_then(|a| {
                let (user, impersonated) = caller.audit_users();
                a.begin(facts(user, impersonated))
            });
        let cached = cached.as_ref().map(|(ar, c)| (*ar, c));
        let Some((ar, cache)) = cached else {
            let streaming = ar.as_ref().is_some_and(|ar| ar.streaming);
            let mut resp = self.forward(req, &id, streaming, &caller).await;
            if let Some(p) = pending {
                p.finish(&mut resp, audit::Outcome::Pass(""), None);
            }
            return finish(resp, verb, &resource, Source::Upstream, None, start, id);
        };
        let (answer, authz) = self.answer_from_cache(cache, ar, &caller).await;
        let (mut resp, result) = match answer {
            Answer::Hit(resp) => (resp, CacheResult::Hit),
            Answer::Refused(refusal) => (refusal.into_response(errors), CacheResult::Refused),
            Answer::Pass(reason) => (
                self.forward(req, &id, ar.streaming, &caller).await,
                CacheResult::Pass(reason),
            ),
        };
        if let Some(p) = pending {
            let outcome = match result {
                CacheResult::Hit => audit::Outcome::Hit,
                CacheResult::Refused => audit::Outcome::Refused,
                CacheResult::Pass(r) => audit::Outcome::Pass(r.as_str()),
            };
            p.finish(&mut resp, outcome, authz);
        }
        finish(
            resp,
            verb,
            &resource,
            result.source(),
            Some((cache, result)),
            start,
            id,
        )
    }

    /// Answers from `cache` if it can and `caller` may see the answer, and
    /// says how r8s's authorization went, if it was asked.
    /// Authorized only once the cache would answer, so requests passed through
    /// cost no review: a watch before its watcher starts, a read after its
    /// answer is built (dropped unsent if the caller may not see it).
    async fn answer_from_cache(
        &self,
        cache: &Arc<ResourceCache>,
        ar: &ApiRequest,
        caller: &Caller,
    ) -> (Answer, Option<audit::Authz>) {
        table::learn_custom_printer(&self.caches, cache, ar);
        if let Some(bad) = shard_refusal(ar) {
            // Authorized first, as the apiserver's filters come before its handler.
            return match self.auth.authorize(caller, ar).await {
                Ok(why) => (
                    Answer::Refused(Refusal::Status(bad)),
                    Some(audit::Authz::Allow(why)),
                ),
                Err(refusal) => refused(refusal),
            };
        }
        if ar.verb == Verb::Watch && ar.path.subresource.is_none() {
            let plan = match watch::plan(cache, ar, &self.watch_policy, self.upstream.wire_rules())
            {
                Ok(plan) => plan.prove(&self.proofs).await,
                Err(reason) => Err(reason),
            };
            return match plan {
                Err(reason) => (Answer::Pass(reason), None),
                Ok(plan) => match self.auth.authorize(caller, ar).await {
                    Ok(why) => {
                        let authz = Some(audit::Authz::Allow(why));
                        match plan.settle(&self.policy, &self.proofs).await {
                            Ok(plan) => (
                                Answer::Hit(plan.start(&self.watch_policy, &self.shutdown)),
                                authz,
                            ),
                            Err(reason) => (Answer::Pass(reason), authz),
                        }
                    }
                    Err(refusal) => refused(refusal),
                },
            };
        }
        match read::answer(cache, ar, &self.policy, &self.proofs).await {
            Err(reason) => (Answer::Pass(reason), None),
            Ok(resp) => match self.auth.authorize(caller, ar).await {
                Ok(why) => (Answer::Hit(resp), Some(audit::Authz::Allow(why))),
                Err(refusal) => refused(refusal),
            },
        }
    }

    /// Relays `req` upstream with its audit ID (the upstream's event has it too).
    async fn forward(
        &self,
        mut req: Request<Incoming>,
        audit_id: &HeaderValue,
        streaming: bool,
        caller: &Caller,
    ) -> Response<Body> {
        req.headers_mut().insert(audit::AUDIT_ID, audit_id.clone());
        passthrough::forward(&self.upstream, req, streaming, &self.shutdown, caller).await
    }
}

/// A list's or watch's `shardSelector` that 1.36 refuses: r8s refuses it
/// too, with 1.36's message (as a 400, where 1.36 answers 500 for this
/// client's error), for an upstream without sharding would ignore it.
fn shard_refusal(ar: &ApiRequest) -> Option<Status> {
    if !matches!(ar.verb, Verb::List | Verb::Watch) {
        return None;
    }
    ar.options
        .as_ref()
        .ok()?
        .shard_selector
        .as_ref()
        .err()
        .cloned()
}

/// A refusal, and how the audit log records r8s's authorization of it.
fn refused(refusal: Refusal) -> (Answer, Option<audit::Authz>) {
    let authz = match &refusal {
        Refusal::Forbidden { reason, .. } => Some(audit::Authz::Forbid(reason.clone())),
        Refusal::Unavailable(_) => Some(audit::Authz::Error),
        Refusal::Unauthorized | Refusal::Status(_) => None,
    };
    (Answer::Refused(refusal), authz)
}

/// The metrics' resource for a non-resource path: its first segment (`/apis`, `/version`).
fn non_resource_label(uri: &Uri) -> String {
    let first = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    format!("/{first}")
}

/// Stamps where the answer came from and its audit ID, and records the
/// request: the one place that does either. `cached`: the resource's cache
/// and what it made of it.
fn finish(
    mut resp: Response<Body>,
    verb: Verb,
    resource: &str,
    source: Source,
    cached: Option<(&ResourceCache, CacheResult)>,
    start: Instant,
    audit_id: HeaderValue,
) -> Response<Body> {
    if let Some(v) = source.header() {
        resp.headers_mut().insert(CACHE_HEADER, v);
    }
    resp.headers_mut().insert(audit::AUDIT_ID, audit_id);
    if let Some((cache, result)) = cached {
        metrics::cache_request(&cache.label, verb.as_str(), result.as_str());
    }
    metrics::request(
        verb.as_str(),
        resource,
        resp.status().as_u16(),
        source.label(),
        start.elapsed(),
    );
    resp
}
