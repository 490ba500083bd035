//! One cache's life, written once: a cache and everything it owns are built
//! by [`Starter::launch`] (the one place a [`ResourceCache`] is made), for
//! the caches resolved at startup and for those started while r8s runs
//! alike, and ended by [`Running::retire`].
//!
//! What a cache owns, per store (JSON, protobuf): its reflector (warm from
//! its snapshot where `persist.dir` has one, at startup), the notifier the consistency
//! check rings to make it relist, its persist target, its entry in the
//! consistency check, and its stamper (through which its prover moves it).
//! A concern every cache gains is added here, once.
//!
//! Retirement is announced, not discovered: the owners a cache enrolled
//! with (the persist writer, the consistency check) hold its [`Retired`]
//! signal, which fires once its reflectors have stopped and its stores are
//! emptied.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{Semaphore, mpsc};
use tokio::task::JoinHandle;

use crate::api::ApiResource;
use crate::cache::index;
use crate::cache::object::TypeInfo;
use crate::cache::scope::CacheScope;
use crate::cache::store::Limits;
use crate::cache::{ResourceCache, budget::Budget};
use crate::metrics::{self, CacheStarted};
use crate::persist::{self, Persist};
use crate::shutdown::{self, Signal, Trigger};
use crate::upstream::proof::Proofs;
use crate::upstream::reflector::{Reflector, ReflectorConfig};
use crate::upstream::{Upstream, consistency};

/// The longest a cache started at run time holds its turn without syncing
/// (an upstream that fails its lists does not hold every start back).
const TURN: Duration = Duration::from_secs(60);

/// Fires once a cache is retired: its reflectors stopped, its stores
/// emptied (never at shutdown, when they are kept for the next start). What
/// the owners it enrolled with drop it by; they read it with `fired()`.
pub type Retired = Signal;

/// What starting a cache takes: the same at startup and at run time.
#[derive(Clone)]
pub struct Starter {
    /// The upstream its reflectors list and watch.
    pub upstream: Arc<Upstream>,
    /// How they do.
    pub reflecting: ReflectorConfig,
    /// What each store keeps.
    pub limits: Limits,
    /// The byte budgets every store shares.
    pub budget: Arc<Budget>,
    /// Whether a protobuf store is kept beside the JSON one.
    pub protobuf: bool,
    /// `cache.indexes`.
    pub indexes: std::collections::BTreeMap<String, Vec<String>>,
    /// The provers of consistent reads, which learn of each cache.
    pub proofs: Arc<Proofs>,
    /// Where each cache is enrolled to be saved and checked.
    pub enrol: Enrol,
    /// `node.name`: the node whose pods and Node the caches hold (`None`:
    /// every object).
    pub node: Option<String>,
}

/// Where each cache is enrolled: `persist.dir`'s writer (for the stores it
/// covers) and the consistency check (each `None` when off). Their intakes
/// are channels, so caches launched before their owner's task is spawned
/// (those resolved at startup) wait in them.
#[derive(Default, Clone)]
pub struct Enrol {
    /// The directory, and its writer's intake.
    pub persist: Option<(Arc<Persist>, mpsc::UnboundedSender<persist::Target>)>,
    /// The consistency check's intake.
    pub checks: Option<mpsc::UnboundedSender<consistency::Target>>,
}

/// What [`Starter::launch`] started.
pub struct Launched {
    /// The cache, to be served once it is in the registry.
    pub cache: Arc<ResourceCache>,
    /// The cache's life, running.
    pub running: Running,
    /// What of it `persist.dir` holds.
    pub persisted: Persisted,
}

/// What of one or more caches `persist.dir` holds: what the persist
/// writer and the consistency check start from.
#[derive(Default)]
pub struct Persisted {
    /// Whether any of their stores starts from a snapshot.
    pub warm: bool,
    /// Their stores' identities (none when `persist.dir` is off): the
    /// files of any other are discarded.
    pub saved: Vec<persist::format::Identity>,
}

impl Persisted {
    /// Adds another cache's.
    pub fn add(&mut self, other: Persisted) {
        self.warm |= other.warm;
        self.saved.extend(other.saved);
    }
}

/// When a launched cache's reflectors may start.
pub enum Start {
    /// At once (the caches resolved at startup).
    Now,
    /// Once one of `turns` is free, held until the cache first syncs, and
    /// once `after` (the retirement of the cache it replaces) has ended: two
    /// caches of one resource never fill at once.
    Paced {
        /// The turns of caches started while r8s runs.
        turns: Arc<Semaphore>,
        /// The retirement of the cache it replaces, if any.
        after: Option<JoinHandle<()>>,
    },
}

impl Start {
    /// The `started` label of `r8s_caches`.
    fn started(&self) -> CacheStarted {
        match self {
            Start::Now => CacheStarted::Startup,
            Start::Paced { .. } => CacheStarted::RunTime,
        }
    }
}

impl Starter {
    /// The scope of `resource`'s cache in this r8s: its node's pods and
    /// Node where `node.name` is set, else all of it.
    pub fn scope_of(&self, resource: &ApiResource) -> CacheScope {
        let scope = CacheScope::of_node(self.node.as_deref(), &resource.gvr);
        if !scope.is_whole() {
            tracing::info!(resource = %resource.gvr, %scope, "caching the node's objects only (node.name): requests outside them pass through");
        }
        scope
    }

    /// Builds the cache of `resource` (its stores and their writers, with
    /// the indexes `cache.indexes` gives it) and everything it owns, and
    /// runs it until it is retired or `shutdown`: a reflector per store
    /// (warm from its snapshot where there is one, when it starts
    /// [`Start::Now`]), enrolled to be saved and checked, proven through its
    /// stampers.
    pub fn launch(
        &self,
        resource: ApiResource,
        scope: CacheScope,
        start: Start,
        shutdown: &Signal,
    ) -> Launched {
        let indexes = index::configured(&self.indexes, &resource);
        // One object's cache (a node's pods' configmap) is its own: not
        // proven (its reads are by name, at any version).
        let object = matches!(scope, CacheScope::Object { .. });
        let (cache, writers) = ResourceCache::new(
            resource,
            self.protobuf,
            self.limits,
            &self.budget,
            &indexes,
            scope,
        );
        let (gone, retired) = shutdown::channel();
        // Only a cache resolved at startup starts from its snapshot: one
        // started while r8s runs is new upstream, or replaces a cache whose
        // definition changed (its snapshot is of the old one).
        let from_snapshot = matches!(start, Start::Now);
        let resource = &cache.resource;
        let stamps = writers.iter().map(|w| w.stamper()).collect();
        let (mut reflectors, mut checked, mut saved, mut warm) =
            (Vec::new(), Vec::new(), Vec::new(), false);
        for w in writers {
            let store = w.store().clone();
            let relist = Arc::new(tokio::sync::Notify::new());
            let mut r = Reflector::new(
                self.upstream.clone(),
                resource.clone(),
                w,
                self.reflecting.clone(),
            )
            .relist_on(relist.clone());
            if let Some((p, saving)) = self
                .enrol
                .persist
                .as_ref()
                .filter(|(p, _)| p.covers(&resource.gvr, store.scope()))
            {
                let mut info = TypeInfo::of(resource, store.encoding());
                info.drop_managed_fields = self.reflecting.drop_managed_fields;
                let identity = p.identity(&resource.gvr, store.encoding(), &info, store.scope());
                let target = persist::Target::new(store.clone(), identity.clone(), retired.clone());
                if from_snapshot && p.has_snapshot(&identity) {
                    warm = true;
                    let (p, t) = (p.clone(), target.clone());
                    r = r.warm_from(tokio::task::spawn_blocking(move || p.load(&t, &info)));
                }
                let _ = saving.send(target);
                saved.push(identity);
            }
            checked.push(consistency::Checked::new(store, relist));
            reflectors.push(r);
        }
        if let Some(checks) = &self.enrol.checks {
            let _ = checks.send(consistency::Target {
                resource: resource.clone(),
                stores: checked,
                retired: retired.clone(),
            });
        }
        if !object {
            self.proofs.add(&cache, stamps);
        }
        metrics::cache_alive(start.started(), 1.0);
        let running = Running::spawn(cache.clone(), reflectors, start, gone, shutdown);
        Launched {
            cache,
            running,
            persisted: Persisted { warm, saved },
        }
    }
}

/// A cache's reflectors and stores while it lives: stopped (and its stores
/// emptied) by [`Running::retire`], or stopped by shutdown.
pub struct Running {
    retire: Trigger,
    /// Ends once its reflectors have stopped (and its stores are emptied,
    /// when retired).
    pub done: JoinHandle<()>,
}

impl Running {
    /// Runs `reflectors`, the reflectors of `cache`'s stores, as `start`
    /// says, until it is retired (then fires `gone`) or r8s shuts down.
    fn spawn(
        cache: Arc<ResourceCache>,
        reflectors: Vec<Reflector>,
        start: Start,
        gone: Trigger,
        shutdown: &Signal,
    ) -> Running {
        let (retire, retiring) = shutdown::channel();
        let stop = retiring.or(shutdown);
        let started = start.started();
        let life = async move {
            let turns = match start {
                Start::Now => None,
                Start::Paced { turns, after } => {
                    if let Some(after) = after {
                        let _ = after.await;
                    }
                    Some(turns)
                }
            };
            let retired = retiring.clone();
            live(cache, reflectors, turns, retiring, stop).await;
            // Retired (not stopped by shutdown): whatever enrolled it drops
            // it now, its reflectors stopped and its stores emptied.
            if retired.fired() {
                metrics::cache_alive(started, -1.0);
                gone.fire();
            }
        };
        let done = tokio::spawn(life);
        Running { retire, done }
    }

    /// Stops its reflectors and empties its stores; what ends once they are.
    pub fn retire(self) -> JoinHandle<()> {
        self.retire.fire();
        self.done
    }
}

/// A cache's life: its turn, its reflectors, and its end.
async fn live(
    cache: Arc<ResourceCache>,
    reflectors: Vec<Reflector>,
    turns: Option<Arc<Semaphore>>,
    retiring: Signal,
    stop: Signal,
) {
    let turn = match turns {
        Some(turns) => tokio::select! {
            t = turns.acquire_owned() => t.ok(),
            _ = stop.wait() => None,
        },
        None => None,
    };
    // Stopped before its turn: each reflector returns its writer at once.
    let running: Vec<JoinHandle<_>> = reflectors
        .into_iter()
        .map(|r| tokio::spawn(r.run(stop.clone())))
        .collect();
    if let Some(turn) = turn {
        let _ = tokio::time::timeout(TURN, synced(&cache, &stop)).await;
        drop(turn);
    }
    let mut writers = Vec::new();
    for r in running {
        if let Ok(w) = r.await {
            writers.push(w);
        }
    }
    if retiring.fired() {
        for w in writers {
            w.retire();
        }
        tracing::info!(resource = %cache.label, "cache retired: its objects dropped, its watches ended");
    }
}

/// Until every store of `cache` has settled (or `stop`).
async fn synced(cache: &ResourceCache, stop: &Signal) {
    for s in cache.stores() {
        let mut rx = s.subscribe();
        while !s.settled() {
            tokio::select! {
                changed = rx.changed() => if changed.is_err() { return },
                _ = stop.wait() => return,
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Gvr;
    use crate::cache::store::Serving;
    use crate::config::{Prove, UpstreamConfig};
    use crate::upstream::proof::ProofPolicy;

    /// A starter against an upstream nobody answers (its reflectors retry,
    /// which is all these tests need), enrolling with a consistency check
    /// whose intake the test holds.
    async fn starter() -> (Starter, mpsc::UnboundedReceiver<consistency::Target>) {
        let config = UpstreamConfig {
            servers: vec!["http://127.0.0.1:9".into()],
            ..Default::default()
        };
        let upstream = Arc::new(Upstream::new(&config).await.unwrap());
        let policy = ProofPolicy {
            streaming_lists: Prove::Auto,
            lists: Prove::Auto,
            gets: Prove::Auto,
            timeout: Duration::from_secs(1),
            get_wait: Duration::from_millis(50),
        };
        let (checks, intake) = mpsc::unbounded_channel();
        let starter = Starter {
            proofs: Arc::new(Proofs::new(upstream.clone(), policy)),
            upstream,
            reflecting: ReflectorConfig {
                page_size: 500,
                streaming_lists: false,
                max_backoff: Duration::from_secs(1),
                drop_managed_fields: false,
            },
            limits: Limits::for_tests(4, 100),
            budget: Arc::new(Budget::new(0, 0)),
            protobuf: true,
            indexes: Default::default(),
            enrol: Enrol {
                persist: None,
                checks: Some(checks),
            },
            node: None,
        };
        (starter, intake)
    }

    fn configmaps() -> ApiResource {
        ApiResource {
            gvr: Gvr::from_static("", "v1", "configmaps"),
            kind: "ConfigMap".into(),
            namespaced: true,
            selectable: &[],
        }
    }

    /// Retiring a cache empties its stores and then tells the owners it
    /// enrolled with; a shutdown stops it without telling them (its
    /// snapshots are the next start's).
    #[tokio::test]
    async fn should_announce_a_retirement_and_not_a_shutdown() {
        let (s, mut intake) = starter().await;
        let launched = s.launch(
            configmaps(),
            CacheScope::Whole,
            Start::Now,
            &Signal::never(),
        );
        let c = launched.cache.clone();
        assert_eq!(c.stores().count(), 2, "JSON and protobuf stores");
        let enrolled = intake.try_recv().expect("enrolled with the check");
        assert_eq!(enrolled.stores.len(), 2, "both stores checked");
        assert!(!enrolled.retired.fired());
        launched.running.retire().await.unwrap();
        assert!(enrolled.retired.fired(), "announced once retired");
        for store in c.stores() {
            assert_eq!(store.serving(), Serving::Removed, "emptied first");
        }

        let (stop, shutdown) = shutdown::channel();
        let launched = s.launch(configmaps(), CacheScope::Whole, Start::Now, &shutdown);
        let enrolled = intake.try_recv().expect("enrolled with the check");
        stop.fire();
        launched.running.done.await.unwrap();
        assert!(!enrolled.retired.fired(), "a shutdown is no retirement");
    }

    /// A cache started while r8s runs waits for a turn, and for the cache
    /// it replaces to be retired, before its reflectors start.
    #[tokio::test(start_paused = true)]
    async fn should_start_a_replacement_once_the_old_cache_is_retired() {
        let (s, _intake) = starter().await;
        let turns = Arc::new(Semaphore::new(1));
        let first = s.launch(
            configmaps(),
            CacheScope::Whole,
            Start::Now,
            &Signal::never(),
        );
        let old = first.cache.clone();
        let (hold, held) = shutdown::channel();
        let after = tokio::spawn(async move { held.wait().await });
        let paced = Start::Paced {
            turns: turns.clone(),
            after: Some(after),
        };
        let second = s.launch(configmaps(), CacheScope::Whole, paced, &Signal::never());
        tokio::time::sleep(Duration::from_secs(5)).await;
        assert_eq!(turns.available_permits(), 1, "no turn taken before `after`");
        hold.fire();
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert_eq!(
            turns.available_permits(),
            0,
            "its turn, held until it syncs"
        );
        second.running.retire().await.unwrap();
        assert_eq!(turns.available_permits(), 1, "given back when it ends");
        first.running.retire().await.unwrap();
        assert_eq!(old.store.serving(), Serving::Removed);
    }
}
