//! The Kubernetes API listener: the corridor every request walks, as
//! named steps ([`Api::handle`]).
//!
//! ```text
//! request ─▶ scope: Exchange::begin (ApiRequest::parse: path, verb, scope, query, options, selectors, media: once)
//!         ─▶ Auth::authenticate ──────────────────────────────▶ refused (401/503)
//!         ─▶ decision: a cache for its group/version/resource?
//!              no ───────────────────────────────────────────▶ passthrough::forward
//!              yes ─▶ watch::plan / read: decide, prove, snapshot, body
//!                        ├─ PassReason ──────────────────────▶ passthrough::forward
//!                        └─ hit ─▶ Auth::authorize ─ denied ───▶ refused (403/503)
//!                                     └─ allowed ─────────────▶ the cache's answer
//!         ─▶ the audit record (`audit::Pending`), where auditing is on
//!         ─▶ finish: Exchange::finish (`X-R8s-Cache`, `Audit-Id` and every metric, in one place)
//! ```
//!
//! - [`exchange`]: one request's scope and its finish.
//! - [`servable`]: whether the cache may answer, from what (reads and watches).
//! - [`read`]: get and list from the cache; [`watch`]: watches from the
//!   cache's event log; [`passthrough`]: everything else, relayed upstream.
//! - [`slots`]: what large lists and watches hold while they stream.
//! - [`outcome`]: the vocabulary of what became of a request.

pub mod exchange;
pub mod outcome;
mod page;
pub mod passthrough;
pub mod read;
pub mod servable;
pub mod slots;
pub mod table;
pub mod watch;

use std::sync::Arc;

use http::{Request, Response};
use hyper::body::Incoming;

use crate::api::request::{ApiRequest, Verb};
use crate::api::status::Status;
use crate::audit;
use crate::audit::Auditor;
use crate::auth::{Auth, Caller, Refusal};
use crate::body::Body;
use crate::cache::ResourceCache;
use crate::cache::objects::{ObjectCaches, ObjectKey};
use crate::cache::registry::Registry;
use crate::fairness;
use crate::fairness::classify::{Asked, Classification, Who};
use crate::server::Peer;
use crate::shutdown::Signal;
use crate::upstream::Upstream;
use crate::upstream::proof::Proofs;
use exchange::Exchange;
use outcome::{Answer, CacheResult, Origin};
use slots::{ListSlots, WatchSlots};

/// The longest a request for an object a node's pods reference waits for
/// its cache, started on that request, to sync while the upstream answers:
/// the object's list is the round trip the request would have made anyway,
/// so a slow upstream delays both alike (past it, it passes).
const OBJECT_WAIT: std::time::Duration = std::time::Duration::from_secs(30);

/// The same with the upstream not answering: long enough for the cache to
/// load its snapshot from the node's disk (`persist.dir`, after a reboot
/// during an outage); one with none passes after it, to the outage's 503.
const OBJECT_WAIT_DOWN: std::time::Duration = std::time::Duration::from_secs(5);

/// Everything the API listener needs.
pub struct Api {
    /// Who is asking, and may they read from the cache.
    pub auth: Auth,
    /// The upstream.
    pub upstream: Arc<Upstream>,
    /// The caches, by group/version/resource.
    pub caches: Arc<Registry>,
    /// A node-local r8s's caches of single objects its node's pods
    /// reference (`node.name`; `None` otherwise).
    pub objects: Option<Arc<ObjectCaches>>,
    /// How cached reads behave.
    pub policy: read::ReadPolicy,
    /// How cached watches behave.
    pub watch_policy: watch::WatchPolicy,
    /// The slots of large lists streaming now (`read.max_inflight_lists`).
    pub list_slots: ListSlots,
    /// The slots of cached watches open now (`watch.max_watchers`).
    pub watch_slots: WatchSlots,
    /// Ends streams at shutdown.
    pub shutdown: Signal,
    /// Proves caches fresh for consistent reads.
    pub proofs: Arc<Proofs>,
    /// Writes audit events, where `audit.policy_file` is set.
    pub audit: Option<Arc<Auditor>>,
    /// The priority and fairness classifier in force.
    pub fairness: Arc<fairness::current::Current>,
}

impl Api {
    /// Answers one API request from `peer`: scope, authentication, the
    /// decision (a cache, or the upstream), the answer, the audit record,
    /// the finish.
    pub async fn handle(
        self: Arc<Self>,
        req: Request<Incoming>,
        peer: Arc<Peer>,
    ) -> Response<Body> {
        let ex = Exchange::begin(&req, self.audit.is_some());
        let caller = match self.authenticate(&ex, &req, &peer).await {
            Ok(caller) => caller,
            Err(refused) => return ex.finish(refused, Origin::Auth, None),
        };
        let cache = match self.decide(&ex, &caller) {
            Some(cache) => Some(cache),
            None => self.object_cache(&ex, &caller).await,
        };
        // Recorded where r8s may answer it, or where passes are audited too.
        let pending = self
            .audit
            .as_ref()
            .filter(|a| cache.is_some() || a.audits_passes())
            .and_then(|a| a.begin(ex.facts(&req, &peer, Some(&caller))));
        let (Some(ar), Some(cache)) = (&ex.ar, cache) else {
            let streaming = ex.ar.as_ref().is_some_and(|ar| ar.streaming);
            let (mut resp, outcome, origin) = match self.forward(req, &ex, streaming, &caller).await
            {
                Ok(resp) => (resp, audit::Outcome::Pass(""), Origin::Upstream),
                Err(refused) => (refused, audit::Outcome::Refused, Origin::Auth),
            };
            if let Some(p) = pending {
                p.finish(&mut resp, outcome, None);
            }
            return ex.finish(resp, origin, None);
        };
        let class = self.classify(ar, &caller);
        let (answer, authz) = self
            .answer_from_cache(&cache, ar, &caller, class.as_ref())
            .await;
        let (mut resp, result) = match answer {
            Answer::Hit(mut resp) => {
                stamp(&mut resp, class.as_ref());
                (resp, CacheResult::Hit)
            }
            Answer::Refused(refusal) => {
                let mut resp = refusal.into_response(ex.errors);
                stamp(&mut resp, class.as_ref());
                (resp, CacheResult::Refused)
            }
            Answer::Pass(reason) => match self.forward(req, &ex, ar.streaming, &caller).await {
                Ok(resp) => (resp, CacheResult::Pass(reason)),
                Err(refused) => (refused, CacheResult::Refused),
            },
        };
        if let Some(p) = pending {
            p.finish(&mut resp, result.audited(), authz);
        }
        ex.finish(resp, result.origin(), Some((&cache, result)))
    }

    /// Who sends `req`, or the refusal (401, 503) to send back, audited
    /// where auditing is on.
    async fn authenticate(
        &self,
        ex: &Exchange,
        req: &Request<Incoming>,
        peer: &Peer,
    ) -> Result<Caller, Response<Body>> {
        let auth = self
            .auth
            .authenticate(req.uri(), req.headers(), peer.certificate.as_ref());
        auth.await.map_err(|refusal| {
            let resp = refusal.into_response(ex.errors);
            if let Some(a) = &self.audit {
                a.unauthenticated(ex.facts(req, peer, None), &resp);
            }
            resp
        })
    }

    /// The decision: the cache that may answer the request, if any (the
    /// caller may be served from one, its resource is cached, and its path
    /// is one the upstream routes: a cluster-scoped resource under a
    /// namespace gets the upstream's own 404).
    fn decide(&self, ex: &Exchange, caller: &Caller) -> Option<Arc<ResourceCache>> {
        let ar = ex.ar.as_ref().filter(|_| caller.cacheable())?;
        let cache = self.caches.get(&ar.path.gvr)?;
        ar.path.routed(cache.resource.namespaced).then_some(cache)
    }

    /// The cache of the one object `ex`'s request names, where this r8s
    /// caches the objects its node's pods reference: started on first ask,
    /// waited for until synced (at most [`OBJECT_WAIT`] while the upstream
    /// answers, [`OBJECT_WAIT_DOWN`] while it does not).
    async fn object_cache(&self, ex: &Exchange, caller: &Caller) -> Option<Arc<ResourceCache>> {
        let objects = self.objects.as_ref()?;
        let ar = ex.ar.as_ref().filter(|_| caller.cacheable())?;
        let key = ObjectKey::of(ar)?;
        let wait = match self.upstream.liveness().seen().answering {
            true => OBJECT_WAIT,
            false => OBJECT_WAIT_DOWN,
        };
        objects.cache_for(key, wait).await
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
        class: Option<&Classification>,
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
            return self.watch_from_cache(cache, ar, caller, class).await;
        }
        let reader = read::Reader {
            policy: &self.policy,
            proofs: &self.proofs,
            slots: &self.list_slots,
            class,
        };
        match reader.answer(read::Asked { cache, ar }).await {
            Err(reason) => (Answer::Pass(reason), None),
            Ok(resp) => match self.auth.authorize(caller, ar).await {
                Ok(why) => (Answer::Hit(resp), Some(audit::Authz::Allow(why))),
                Err(refusal) => refused(refusal),
            },
        }
    }

    /// A watch from `cache`: planned and proven, the caller authorized,
    /// then started (its watcher in one of its level's watch slots; costly
    /// initial events in one of its level's seats).
    async fn watch_from_cache(
        &self,
        cache: &Arc<ResourceCache>,
        ar: &ApiRequest,
        caller: &Caller,
        class: Option<&Classification>,
    ) -> (Answer, Option<audit::Authz>) {
        let plan = match watch::plan(cache, ar, &self.watch_policy, self.upstream.wire_rules()) {
            Ok(plan) => plan.prove(&self.proofs).await,
            Err(reason) => Err(reason),
        };
        let plan = match plan {
            Err(reason) => return (Answer::Pass(reason), None),
            Ok(plan) => plan,
        };
        let why = match self.auth.authorize(caller, ar).await {
            Ok(why) => why,
            Err(refusal) => return refused(refusal),
        };
        let authz = Some(audit::Authz::Allow(why));
        let plan = match plan.settle(&self.policy, &self.proofs).await {
            Ok(plan) => plan,
            Err(reason) => return (Answer::Pass(reason), authz),
        };
        let seat = match plan.costly() {
            false => None,
            true => match self.list_slots.seat_for(class).await {
                Ok(seat) => Some(seat),
                Err(_) => return (Answer::Hit(plan.refused()), authz),
            },
        };
        let slots = (&self.watch_slots, class);
        let resp = plan.start(&self.watch_policy, slots, seat, &self.shutdown);
        (Answer::Hit(resp), authz)
    }

    /// What the apiserver's priority and fairness filter would make of the
    /// request: its FlowSchema, priority level and flow. `None` for a
    /// caller r8s does not know (`auth.mode = "none"`: its requests go
    /// upstream as r8s).
    fn classify(&self, ar: &ApiRequest, caller: &Caller) -> Option<Classification> {
        let user = caller.user()?;
        let asked = Asked::Resource {
            verb: ar.scope.verb,
            api_group: ar.path.gvr.group(),
            resource: ar.path.gvr.resource(),
            subresource: &ar.scope.subresource,
            namespace: &ar.scope.namespace,
        };
        let who = Who {
            name: &user.name,
            groups: &user.groups,
        };
        Some(self.fairness.get().classify(who, asked))
    }

    /// Relays `req` upstream with its audit ID (the upstream's event has it too).
    /// Passes `req` upstream as `caller`; `Err`: r8s's own refusal (an
    /// identity that cannot go upstream unchanged), never sent.
    async fn forward(
        &self,
        mut req: Request<Incoming>,
        ex: &Exchange,
        streaming: bool,
        caller: &Caller,
    ) -> Result<Response<Body>, Response<Body>> {
        req.headers_mut().insert(audit::AUDIT_ID, ex.id.clone());
        let (up, stop) = (&self.upstream, &self.shutdown);
        let how = self.auth.forwarding();
        passthrough::forward(up, req, streaming, stop, caller, ex.errors, &how).await
    }
}

/// Stamps an answer r8s made itself with what the apiserver's priority and
/// fairness filter says of the request: the UIDs of its FlowSchema and
/// priority level (a pass-through answer carries the upstream's own; a
/// built-in configuration has no UIDs to name); counts it dispatched, where
/// it was not refused for want of a seat.
fn stamp(resp: &mut Response<Body>, class: Option<&Classification>) {
    let Some(c) = class else {
        return;
    };
    for (name, value) in c.headers.iter() {
        resp.headers_mut().insert(name.clone(), value.clone());
    }
    if resp.status() != http::StatusCode::TOO_MANY_REQUESTS {
        crate::metrics::flowcontrol_dispatched(&c.level.name, &c.schema.name);
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
        Refusal::Unauthorized | Refusal::Status(_) | Refusal::Internal(_) => None,
    };
    (Answer::Refused(refusal), authz)
}
