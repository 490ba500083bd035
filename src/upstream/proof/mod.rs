//! Proofs that a cache is as fresh as its upstream, so that consistent
//! reads (no `resourceVersion`: every client-go ≥ 1.35 informer's streaming
//! list) can be answered from it.
//!
//! The proof, why it is sound and what it costs are explained once, in
//! `docs/consistent-reads.md`. Here: [`Proofs::prove`] reads the upstream's
//! version `X` in rounds (a one-object LIST sent after the request
//! arrived), is done if the store is already there, else runs probes (a
//! watch from the stores' lowest version `C`, believed only at its
//! pre-deadline BOOKMARK `Y`) and stamps each store that has applied
//! everything up to the probe's floor ([`Stamper::advance_to`]); the request
//! is then served "not older than `X`", or passes through when the proof
//! fails. Proofs that keep failing for a resource make its consistent reads
//! pass at once for a while.

mod ask;
mod outcome;
mod prover;
#[cfg(test)]
mod timing_tests;

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::time::Instant;

use super::Upstream;
use super::version::KubeVersion;
use crate::cache::ResourceCache;
use crate::cache::store::Store;
use crate::cache::writer::Stamper;
use crate::config::Prove;
use crate::metrics;
use crate::sync::RwLockExt;
use ask::get_json;
pub use outcome::Unproven;
use prover::Prover;

/// How long the upstream's reported version is believed.
const VERSION_TTL: Duration = Duration::from_secs(60);
/// How long a failed `/version` stands before the next read asks again.
const VERSION_RETRY: Duration = Duration::from_secs(1);
/// Which consistent read is being proven (its metric label is the same).
pub type ConsistentKind = metrics::ConsistentRead;

/// What proving needs from the configuration (`read.*`).
#[derive(Debug, Clone)]
pub struct ProofPolicy {
    /// `read.consistent_streaming_lists`.
    pub streaming_lists: Prove,
    /// `read.consistent_lists`.
    pub lists: Prove,
    /// `read.consistent_gets`.
    pub gets: Prove,
    /// `read.prove_timeout_seconds`.
    pub timeout: Duration,
    /// `read.consistent_get_wait_seconds`.
    pub get_wait: Duration,
}

/// How long consistent GETs of a resource pass at once after one waited
/// past `read.consistent_get_wait_seconds`, before one is proven again.
const SLOW_GETS_PASS_FOR: Duration = Duration::from_secs(10);

/// Every cached resource's prover, and what they share.
pub struct Proofs {
    upstream: Arc<Upstream>,
    policy: ProofPolicy,
    /// By resource, as caches come (launched) and go (retired).
    provers: std::sync::RwLock<HashMap<crate::api::Gvr, Arc<Prover>>>,
    /// Whether the upstream reported 1.31 or later, and until when that
    /// answer holds (an async lock: one request asks, the others wait).
    version: tokio::sync::Mutex<Option<(Instant, bool)>>,
}

impl Proofs {
    /// No provers yet, against `upstream`: each cache's is added as it is
    /// launched ([`Proofs::add`]).
    pub fn new(upstream: Arc<Upstream>, policy: ProofPolicy) -> Self {
        Proofs {
            upstream,
            policy,
            provers: std::sync::RwLock::new(HashMap::new()),
            version: tokio::sync::Mutex::new(None),
        }
    }

    /// Proves reads of `cache` from now on, stamping its stores through
    /// `stamps` (each cache, as it is launched).
    pub fn add(&self, cache: &Arc<ResourceCache>, stamps: Vec<Stamper>) {
        let prover = Arc::new(Prover::new(cache.clone(), stamps));
        self.provers
            .writing()
            .insert(cache.resource.gvr.clone(), prover);
    }

    /// Proves nothing more of `gvr` (its cache was retired).
    pub fn remove(&self, gvr: &crate::api::Gvr) {
        self.provers.writing().remove(gvr);
    }

    /// The prover of `gvr`, if it has one.
    fn prover(&self, gvr: &crate::api::Gvr) -> Option<Arc<Prover>> {
        self.provers.reading().get(gvr).cloned()
    }

    /// Whether the upstream itself has reached `n` for `cache`'s resource:
    /// `Some(false)` when its version now (a one-object LIST, in the rounds
    /// proofs share) is older, `None` when it cannot say within
    /// `read.prove_timeout_seconds`. Asked once a read has waited in vain
    /// for `n`: where the upstream has not reached it either, its answer
    /// after the same wait is known (504 "Too large resource version"), and
    /// passing the read on would only double the client's wait.
    pub async fn upstream_reached(&self, cache: &ResourceCache, n: u64) -> Option<bool> {
        let prover = self.prover(&cache.resource.gvr)?;
        let x = tokio::time::timeout(
            self.policy.timeout,
            prover.target(&self.upstream, self.policy.timeout),
        )
        .await
        .ok()?
        .ok()?;
        Some(x >= n)
    }

    /// Waits until `store` (of `cache`) is provably at least as fresh as the
    /// upstream was when this call began, and returns the version it must
    /// be served "not older than"; or why not (the request passes through).
    /// Records `r8s_consistent_reads_total` and the proof's latency.
    pub async fn prove(
        &self,
        cache: &ResourceCache,
        store: &Store,
        kind: ConsistentKind,
    ) -> Result<u64, Unproven> {
        let start = Instant::now();
        let r = self.try_prove(cache, store, kind, start).await;
        if r != Err(Unproven::Off)
            && let Some(p) = self.prover(&cache.resource.gvr)
        {
            p.series.read(kind, r.is_ok(), start.elapsed());
        }
        r
    }

    async fn try_prove(
        &self,
        cache: &ResourceCache,
        store: &Store,
        kind: ConsistentKind,
        start: Instant,
    ) -> Result<u64, Unproven> {
        let mode = match kind {
            ConsistentKind::StreamingList => self.policy.streaming_lists,
            ConsistentKind::List => self.policy.lists,
            ConsistentKind::Get => self.policy.gets,
        };
        if mode == Prove::Pass {
            return Err(Unproven::Off);
        }
        let prover = self
            .prover(&cache.resource.gvr)
            .ok_or(Unproven::Unprovable)?;
        if kind == ConsistentKind::Get && prover.gets_passing() {
            return Err(Unproven::Failed);
        }
        let returned_at = self.upstream.liveness().seen().returned_at;
        if prover.paused(returned_at.map(tokio::time::Instant::from_std)) {
            return Err(Unproven::Failed);
        }
        let deadline = start + self.policy.timeout;
        if mode == Prove::Auto && !by(deadline, self.upstream_proves()).await? {
            return Err(Unproven::Unprovable);
        }
        if !by(deadline, prover.local(&self.upstream)).await?? {
            return Err(Unproven::Unprovable);
        }
        let x = by(deadline, prover.target(&self.upstream, self.policy.timeout)).await??;
        if store.current().rv >= x {
            prover.succeeded();
            return Ok(x);
        }
        // Subscribed before the probe can fail: only failures from now on count.
        let mut reports = prover.report.subscribe();
        prover.want(x, deadline, &self.upstream, self.policy.timeout);
        // A GET costs the upstream little and its caller much when it
        // waits: it waits for the cache a short while only, and when that
        // is not enough, the resource's GETs pass for a while.
        let wait_until = match kind {
            ConsistentKind::Get => deadline.min(Instant::now() + self.policy.get_wait),
            _ => deadline,
        };
        let failed = async {
            while reports.changed().await.is_ok() {
                if *reports.borrow_and_update() >= x {
                    return;
                }
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            reached = store.wait_for(x, wait_until.saturating_duration_since(Instant::now())) => {
                if !reached {
                    if kind == ConsistentKind::Get && wait_until < deadline {
                        prover.get_was_slow(SLOW_GETS_PASS_FOR);
                    }
                    return Err(Unproven::Failed);
                }
                prover.succeeded();
                Ok(x)
            }
            () = failed => Err(Unproven::Failed),
        }
    }

    /// Whether the upstream reports kube-apiserver 1.31 or later (asked at
    /// most once a minute, and a failed ask not again for a second; an
    /// upstream that cannot say is not proven against).
    async fn upstream_proves(&self) -> bool {
        // Held across the GET: a burst of first reads (a node pool's
        // kubelets) asks once and waits for that answer, not once each.
        let mut version = self.version.lock().await;
        if let Some((until, ok)) = *version
            && Instant::now() < until
        {
            return ok;
        }
        let (ok, ttl) = match get_json::<KubeVersion>(
            &self.upstream,
            "/version",
            "application/json",
        )
        .await
        {
            Ok(v) => {
                let ok = v.at_least(1, 31);
                if !ok {
                    tracing::info!(major = %v.major, minor = %v.minor, "the upstream predates 1.31: consistent reads pass through (read.consistent_streaming_lists = \"prove\" forces proofs)");
                }
                (ok, VERSION_TTL)
            }
            Err(e) => {
                tracing::debug!(error = %e, "GET /version failed; consistent reads pass through");
                (false, VERSION_RETRY)
            }
        };
        *version = Some((Instant::now() + ttl, ok));
        ok
    }
}

/// `f`, unless `deadline` comes first (the proof failed: too slow).
async fn by<T>(deadline: Instant, f: impl std::future::Future<Output = T>) -> Result<T, Unproven> {
    tokio::time::timeout_at(deadline, f)
        .await
        .map_err(|_| Unproven::Failed)
}
