//! Following the upstream's API while r8s runs: a cache for each resource
//! `cache.resources` names once the upstream serves it, and none for one it
//! no longer serves.
//!
//! The [`Follower`] owns the set of caches (the registry's one
//! [`Registrar`]) and each cache's lifetime ([`Running`]). It resolves
//! `cache.resources` again every `cache.discovery_interval_seconds`, and
//! soon after any change to the cached `customresourcedefinitions` or
//! `apiservices` (a CRD created, established, given a version, deleted).
//!
//! - A resource that appears gets a cache at once, in the registry but
//!   syncing (its requests pass through as `not_synced`); its reflectors
//!   start when it gets a turn: at most `cache.max_concurrent_starts` caches
//!   started at run time list at once, each holding its turn until its first
//!   sync. Its reads are proven as the others' are.
//! - A resource no longer served is retired: out of the registry first (its
//!   requests pass through, to the upstream's 404), then its reflectors are
//!   stopped and its stores emptied through their writers (their bytes
//!   released, their open watches ended, as kube-apiserver ends them).
//! - A resource whose CRD's definition changed (its spec, its accepted
//!   names, its `uid`) is restarted, as kube-apiserver recreates its storage:
//!   retired, and started again once the old cache is (`definitions`).
//! - A discovery that fails changes nothing; a group/version whose own list
//!   fails (an aggregated API down) keeps its caches as they are; a cache
//!   discovery leaves out goes when its CRD says so, or when a second look
//!   leaves it out too (`left_out`).
//!
//! Startup is the follower's first round ([`Follower::begin`]): the caches
//! resolved at startup start at once, warm from their snapshots, and are
//! retired the same way as any other. Every cache, at startup or at run
//! time, is built and run in one place, [`Starter::launch`] (`life`, the
//! one caller of `ResourceCache::new`): saved to `persist.dir`, consistency
//! checked and proven alike; a retired one is announced to both
//! ([`Retired`]), and the persist writer removes its files.
//!
//! A node-local r8s's caches of single objects (the configmaps and secrets
//! its node's pods reference) have an owner of their own ([`objects`]),
//! which launches them with the same [`Starter`].

mod definitions;
mod left_out;
mod life;
pub mod objects;

pub use self::life::{Enrol, Launched, Persisted, Retired, Running, Start, Starter};

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, watch};
use tokio::task::JoinHandle;

use self::definitions::Definitions;
use self::left_out::LeftOut;
use crate::admin::Health;
use crate::api::{ApiResource, Gvr};
use crate::cache::registry::Registrar;
use crate::cache::store::Store;
use crate::config::ResourceEntry;
use crate::shutdown::Signal;
use crate::upstream::discovery::{self, Resolved};

/// The resources whose changes make the follower look again soon.
const API_RESOURCES: [(&str, &str, &str); 2] = [
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions"),
    ("apiregistration.k8s.io", "v1", "apiservices"),
];

/// How long after a change to a CRD or APIService the follower looks, and
/// looks once more (discovery can lag the object that changed it).
const SOON: Duration = Duration::from_millis(250);
const AGAIN: Duration = Duration::from_secs(2);

/// Owns the caches and keeps them following the upstream's API.
pub struct Follower {
    registrar: Registrar,
    running: HashMap<Gvr, Running>,
    starter: Starter,
    /// `cache.resources` as written (what `persist.dir` keeps) and parsed.
    entries: Vec<String>,
    parsed: Vec<ResourceEntry>,
    exclude: Vec<String>,
    /// `cache.discovery_interval_seconds` (`None`: 0, resolved at startup only).
    interval: Option<Duration>,
    turns: Arc<Semaphore>,
    health: Arc<Health>,
    /// The CRD and APIService stores, watched for changes.
    api_changes: Vec<ApiObjects>,
    /// The definitions the running caches of custom resources were started
    /// under.
    definitions: Definitions,
    /// The running caches the last look at discovery left out, kept.
    left_out: LeftOut,
    shutdown: Signal,
}

impl Follower {
    /// The follower of `cache.resources` (less `cache.exclude`), owning the
    /// registry through `registrar`, until `shutdown`; it has no cache until
    /// its first round ([`Follower::begin`]).
    pub fn new(
        registrar: Registrar,
        starter: Starter,
        cache: &crate::config::CacheConfig,
        health: Arc<Health>,
        shutdown: Signal,
    ) -> Self {
        Follower {
            registrar,
            running: HashMap::new(),
            starter,
            entries: cache.resources.clone(),
            parsed: cache.entries(),
            exclude: cache.exclude.clone(),
            interval: (cache.discovery_interval_seconds > 0)
                .then(|| Duration::from_secs(cache.discovery_interval_seconds)),
            turns: Arc::new(Semaphore::new(cache.max_concurrent_starts.max(1))),
            health,
            api_changes: Vec::new(),
            definitions: Definitions::default(),
            left_out: LeftOut::default(),
            shutdown,
        }
    }

    /// The first round, at startup: a cache for each of `resources` (what
    /// `cache.resources` resolved to), started at once, warm from its
    /// snapshot where `persist.dir` has one, and served (syncing) at once.
    /// What they have in `persist.dir` is what the tasks they enrolled with
    /// start from.
    pub fn begin(&mut self, resources: Vec<ApiResource>) -> Persisted {
        let mut persisted = Persisted::default();
        for r in resources {
            persisted.add(self.start(r, Start::Now));
        }
        self.watch_api_changes();
        persisted
    }

    /// Follows until shutdown; then waits for every cache's reflectors.
    pub async fn run(mut self) {
        let shutdown = self.shutdown.clone();
        let Some(interval) = self.interval.filter(|_| !self.entries.is_empty()) else {
            shutdown.wait().await;
            return self.stopped().await;
        };
        let mut tick = tokio::time::interval(interval);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.reset();
        let mut again: Option<tokio::time::Instant> = None;
        loop {
            let again_at = again.unwrap_or_else(|| tokio::time::Instant::now() + interval);
            tokio::select! {
                _ = tick.tick() => {}
                () = changed(&mut self.api_changes) => {
                    tokio::time::sleep(SOON).await;
                    again = Some(tokio::time::Instant::now() + AGAIN);
                }
                _ = tokio::time::sleep_until(again_at), if again.is_some() => again = None,
                _ = shutdown.wait() => break,
            }
            self.refresh().await;
            // A cache left out once is looked at again soon, not a period on.
            if self.left_out.unconfirmed() && again.is_none() {
                again = Some(tokio::time::Instant::now() + AGAIN);
            }
        }
        self.stopped().await;
    }

    /// Once shutdown has begun: until every cache's reflectors have stopped.
    async fn stopped(mut self) {
        for (_, r) in self.running.drain() {
            let _ = r.done.await;
        }
    }

    /// Resolves `cache.resources` again, and starts and retires caches to
    /// match.
    async fn refresh(&mut self) {
        let resolved =
            match discovery::resolve(&self.starter.upstream, &self.parsed, &self.exclude).await {
                Ok(r) => r,
                Err(e) => {
                    tracing::warn!(error = %e, "discovery failed; the caches stay as they are");
                    return;
                }
            };
        if self.follow(resolved)
            && let Some((p, _)) = &self.starter.enrol.persist
        {
            let all = self.registrar.registry().all();
            let resources: Vec<ApiResource> = all.values().map(|c| c.resource.clone()).collect();
            // What a start while the upstream is unreachable resolves to.
            let (p, entries, exclude) = (p.clone(), self.entries.clone(), self.exclude.clone());
            let save = move || p.save_resources(&entries, &exclude, &resources);
            let _ = tokio::task::spawn_blocking(save).await;
        }
    }

    /// Starts a cache for each resource `resolved` names that has none,
    /// retires those of resources it no longer names, and restarts those
    /// whose definition changed. Whether any cache came or went.
    fn follow(&mut self, resolved: Resolved) -> bool {
        let Resolved {
            resources,
            waiting,
            unlisted,
        } = resolved;
        let unknown = |g: &Gvr| {
            unlisted
                .iter()
                .any(|(group, version)| g.group() == group && g.version() == version)
        };
        let left_out: Vec<Gvr> = self
            .running
            .keys()
            .filter(|g| !unknown(g) && !resources.iter().any(|r| &r.gvr == *g))
            .cloned()
            .collect();
        let crds = self.crds();
        let definitions = &mut self.definitions;
        let gone = self
            .left_out
            .judge(left_out, |g| definitions.verdict(crds.as_deref(), g));
        let changed = !gone.is_empty();
        for gvr in gone {
            self.retire(&gvr);
        }
        let mut started = false;
        for r in resources {
            if !self.running.contains_key(&r.gvr) {
                self.start_paced(r, None);
                started = true;
            } else if let Some(crds) = &crds
                && let started_with = self
                    .registrar
                    .registry()
                    .get(&r.gvr)
                    .map_or(&[][..], |c| c.resource.selectable)
                && self.definitions.changed(crds, &r.gvr, started_with)
            {
                self.restart(r);
            }
        }
        self.health.set_waiting(waiting);
        self.watch_api_changes();
        changed || started
    }

    /// The CRD cache, if it serves now: what custom resources' definitions
    /// are read from.
    fn crds(&self) -> Option<Arc<Store>> {
        let (group, version, resource) = API_RESOURCES[0];
        let c = self
            .registrar
            .registry()
            .get(&Gvr::new(group, version, resource))?;
        (c.store.serving() == crate::cache::store::Serving::Ready).then(|| c.store.clone())
    }

    /// Restarts the cache of `resource`, whose CRD's spec or accepted names
    /// changed: kube-apiserver recreates the storage then (its watches
    /// end, its clients relist), and what was cached may have been
    /// converted under the old definition (a webhook since added, another
    /// storage version). The new cache fills once the old one is retired,
    /// and its requests pass through until it syncs.
    fn restart(&mut self, resource: ApiResource) {
        let Some(old) = self.running.remove(&resource.gvr) else {
            return;
        };
        self.registrar.remove(&resource.gvr);
        self.starter.proofs.remove(&resource.gvr);
        tracing::info!(resource = %resource.gvr, "its CustomResourceDefinition changed (or was first read, naming selectable fields its objects were not read for): restarting its cache (its watches end and its requests pass through until it syncs again), as the apiserver recreates its storage");
        let after = old.retire();
        self.start_paced(resource, Some(after));
    }

    /// Starts a cache for `resource` while r8s runs: in the registry at
    /// once (syncing), its reflectors when it gets a turn (and `after` the
    /// cache it replaces is retired).
    fn start_paced(&mut self, resource: ApiResource, after: Option<JoinHandle<()>>) {
        let start = Start::Paced {
            turns: self.turns.clone(),
            after,
        };
        let gvr = resource.gvr.clone();
        self.start(resource, start);
        tracing::info!(resource = %gvr, "served upstream now: caching it (its requests pass through until it syncs)");
    }

    /// Launches a cache for `resource` as `start` says, and serves it
    /// (syncing) at once: what it owns is built before it is served, so its
    /// first consistent read finds its prover.
    fn start(&mut self, mut resource: ApiResource, start: Start) -> Persisted {
        if let Some(crds) = self.crds() {
            resource.selectable = self.definitions.started(&crds, &resource.gvr);
        }
        let Launched {
            cache,
            running,
            persisted,
        } = {
            let scope = self.starter.scope_of(&resource);
            self.starter.launch(resource, scope, start, &self.shutdown)
        };
        self.registrar.add(cache.clone());
        self.running.insert(cache.resource.gvr.clone(), running);
        persisted
    }

    /// Retires the cache of `gvr`: its requests pass through from now on.
    fn retire(&mut self, gvr: &Gvr) {
        if let Some(r) = self.running.remove(gvr) {
            self.registrar.remove(gvr);
            self.starter.proofs.remove(gvr);
            self.definitions.retired(gvr);
            tracing::info!(resource = %gvr, "no longer served upstream: retiring its cache (its requests pass through)");
            drop(r.retire());
        }
    }

    /// Watches the CRD and APIService caches, if there are any now.
    fn watch_api_changes(&mut self) {
        let registry = self.registrar.registry();
        self.api_changes.retain(|a| {
            registry
                .get(&a.gvr)
                .is_some_and(|c| Arc::ptr_eq(&c.store, &a.store))
        });
        for (group, version, resource) in API_RESOURCES {
            let gvr = Gvr::new(group, version, resource);
            if self.api_changes.iter().any(|a| a.gvr == gvr) {
                continue;
            }
            if let Some(c) = registry.get(&gvr) {
                let (store, versions) = (c.store.clone(), c.store.subscribe());
                let seen = fingerprint(&store);
                self.api_changes.push(ApiObjects {
                    gvr,
                    store,
                    versions,
                    seen,
                });
            }
        }
    }
}

/// A cache whose objects changing (a CRD, an APIService) may change what the
/// upstream serves.
struct ApiObjects {
    gvr: Gvr,
    store: Arc<Store>,
    versions: watch::Receiver<u64>,
    /// Its objects as last seen ([`fingerprint`]).
    seen: (usize, u64),
}

/// What changes whenever a store's objects do, and not when only its
/// version moves (a bookmark): how many there are, and the newest one's
/// version (an object added or changed raises it, one deleted lowers the
/// count).
fn fingerprint(store: &Store) -> (usize, u64) {
    let v = store.current();
    let newest = v.objects.values().map(|o| o.rv).max().unwrap_or(0);
    (v.objects.len(), newest)
}

/// Until the objects of any of `watched` change (never, if there are none).
async fn changed(watched: &mut [ApiObjects]) {
    if watched.is_empty() {
        return std::future::pending().await;
    }
    loop {
        let waits = watched.iter_mut().map(|a| Box::pin(a.versions.changed()));
        let (r, i, _) = futures_util::future::select_all(waits).await;
        if r.is_err() {
            // Its cache is gone: the next look at the registry drops it.
            return std::future::pending().await;
        }
        let now = fingerprint(&watched[i].store);
        if now != watched[i].seen {
            watched[i].seen = now;
            return;
        }
    }
}
