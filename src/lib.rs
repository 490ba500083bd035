//! # r8s: a watch cache for the Kubernetes API
//!
//! How the pieces fit (data flow, module map, resource-version rules,
//! invariants): `docs/architecture.md`.
//!
//! # Layout
//! Bottom layer first; a module uses only its own layer (without a loop) or
//! lower ones (`tests/structure.rs` checks it, and that no two files import
//! each other, directly or around a loop).
//!
//! 1. Plumbing that knows no Kubernetes: [`body`] (the response body type),
//!    [`sync`] (locks), [`shutdown`] (the shutdown signal), [`metrics`]
//!    (every metric's name and HELP in one table, label values as enums,
//!    handles made once), [`config`]
//!    (settings: defaults < TOML < `R8S_` env < flags, every value checked
//!    before a port is bound), [`logging`] (log lines: text, or kube
//!    components' JSON).
//! 2. The API's vocabulary: [`api`] (paths and [`api::Gvr`], the request
//!    decoded once as [`api::request::ApiRequest`], list/watch options,
//!    selectors, continue tokens, `Status` errors, users) and [`codec`]
//!    (wire encodings: list envelopes streamed from stored items, watch lines)
//!    and [`table`] (kube-apiserver's printers: the rows and columns of the
//!    Tables `kubectl get` asks for).
//! 3. [`cache`]: per resource, a versioned store, its event log and its
//!    serving state.
//! 4. What talks to the outside: [`upstream`] (the kube-apiserver(s):
//!    credentials, failover, discovery, the reflectors that fill the caches,
//!    the consistency check), [`persist`] (the caches' snapshots on local
//!    disk), [`tls`] (the listener's certificates, and who a client certificate
//!    names) and [`audit`] (audit
//!    events for the requests r8s answers, to a file or a webhook).
//! 5. [`auth`] (who is asking, whether they may read from the cache),
//!    [`fairness`] (which FlowSchema, priority level and flow a request
//!    is, as the apiserver's priority and fairness classifies it) and
//!    [`server`] (the HTTP accept loop, which knows nothing of auth).
//! 6. The listeners: [`serve`] (the API: the corridor every request walks,
//!    drawn in its module doc), [`admin`] (`/metrics`, health), [`notify`]
//!    (the same health, told to systemd), [`probe`] (the upstream's `/version`
//!    behind that health).
//! 7. Wiring: [`apis`] (the caches' lifetimes: a cache for each resource
//!    that appears upstream, none for one that goes), this file
//!    ([`prepare`], [`Prepared::run`]), [`cli`].
//!
//! The built-in upstream, an in-memory kube-apiserver for tests, demos and
//! benchmarks, is the crate `r8s-sim` (`sim/`), which uses this library
//! through its public API; nothing here uses it.
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod admin;
pub mod api;
pub mod apis;
pub mod audit;
pub mod auth;
pub mod body;
pub mod cache;
pub mod cli;
pub mod codec;
pub mod config;
pub mod fairness;
pub mod logging;
pub mod metrics;
pub mod notify;
pub mod persist;
pub mod probe;
pub mod serve;
pub mod server;
pub mod shutdown;
pub mod sync;
pub mod table;
pub mod tls;
pub mod upstream;

use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;

use crate::admin::Health;
use crate::config::Config;
use crate::shutdown::Signal;
use crate::upstream::Upstream;

/// What `r8s --version` prints: the package's version and the commit it was
/// built from (`build.rs`).
pub const VERSION: &str = concat!(
    env!("CARGO_PKG_VERSION"),
    " (",
    env!("BUILD_GIT_COMMIT"),
    ")"
);

/// The bound listeners r8s serves on.
pub struct Listeners {
    /// The Kubernetes API.
    pub api: TcpListener,
    /// `/metrics` and health.
    pub admin: TcpListener,
}

/// r8s, set up and ready to serve: everything that can fail on bad
/// configuration has been checked before any port is bound.
pub struct Prepared {
    config: Config,
    upstream: Arc<Upstream>,
    /// Where reviews go (`auth.review_kubeconfig`, else the upstream).
    reviewer: Arc<Upstream>,
    /// What `cache.resources` resolved to: the follower's first round
    /// caches them (no cache is built before [`Prepared::run`]).
    resources: Vec<api::ApiResource>,
    /// The `cache.resources` entries the upstream does not serve yet.
    waiting: Vec<String>,
    tls: Option<Arc<tls::Tls>>,
    /// `auth.mode = "none"`'s Host and path filters, compiled.
    local: auth::local::LocalGuard,
    /// `persist.dir`, opened (None: nothing is saved).
    persist: Option<Arc<persist::Persist>>,
    /// The auditor and its backends' writers (None: no auditing).
    audit: Option<(Arc<audit::Auditor>, audit::Writers)>,
}

/// Why r8s could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum PrepareError {
    /// Values out of range (a configuration that did not come through [`config::load()`]).
    #[error(transparent)]
    Config(#[from] config::ConfigError),
    /// Credentials, TLS or the server list.
    #[error(transparent)]
    Upstream(#[from] upstream::SetupError),
    /// `cache.resources` against the upstream's discovery.
    #[error(transparent)]
    Discovery(#[from] upstream::discovery::DiscoveryError),
    /// `tls.*` files.
    #[error(transparent)]
    Tls(#[from] tls::TlsError),
    /// `persist.dir`.
    #[error(transparent)]
    Persist(#[from] persist::PersistError),
    /// `audit.*`: the policy, the log file, the webhook's kubeconfig.
    #[error(transparent)]
    Audit(#[from] audit::AuditError),
}

/// The checks of a configuration that need more than `config` knows:
/// `cache.indexes` against the resources' selectable fields. Pass it to
/// [`config::load_checked`].
pub fn check_config(config: &Config) -> Vec<(String, String)> {
    let mut problems = cache::index::check(&config.cache.indexes);
    problems.extend(audit::check(&config.audit));
    problems
}

/// Checks the configuration: its values (again, for a configuration built by
/// hand), then against the world: kubeconfig, CA, credentials,
/// and (when caching) the upstream's discovery for every `cache.resources` entry.
pub async fn prepare(config: Config) -> Result<Prepared, PrepareError> {
    let mut errs: Vec<String> = match config.validate() {
        Ok(()) => Vec::new(),
        Err(errs) => errs.into_iter().map(|(_, m)| m).collect(),
    };
    errs.extend(check_config(&config).into_iter().map(|(_, m)| m));
    if !errs.is_empty() {
        return Err(config::ConfigError(errs).into());
    }
    let local =
        auth::local::LocalGuard::new(&config.server).map_err(|e| config::ConfigError(vec![e]))?;
    let tls = tls::Tls::load(&config.tls)?;
    let upstream = Arc::new(Upstream::new(&config.upstream).await?);
    let reviewer = match &config.auth.review_kubeconfig {
        Some(kubeconfig) => Arc::new(
            Upstream::new(&config::UpstreamConfig {
                kubeconfig: Some(kubeconfig.clone()),
                ..Default::default()
            })
            .await?,
        ),
        None => upstream.clone(),
    };
    let audit = audit::Auditor::start(&config.audit).await?;
    let persist =
        persist::Persist::open(&config.persist, upstream.identity().to_string())?.map(Arc::new);
    let (entries, exclude) = (&config.cache.resources, &config.cache.exclude);
    let parsed = config.cache.entries();
    let resolved = match upstream::discovery::resolve(&upstream, &parsed, exclude).await {
        Ok(mut r) => {
            if let Some(p) = &persist {
                p.save_resources(entries, exclude, &r.resources);
            }
            upstream::discovery::learn_selectable_fields(&upstream, &mut r.resources).await;
            r
        }
        // Unreachable: a warm start resolves as the last start did, and its
        // caches wait for the upstream (or, with cache.serve_stale, serve).
        Err(e @ upstream::discovery::DiscoveryError::Upstream { .. }) => {
            match persist
                .as_ref()
                .and_then(|p| p.load_resources(entries, exclude))
            {
                Some(resources) => {
                    tracing::warn!(error = %e, "the upstream does not answer discovery; resolving cache.resources as the last start did, from persist.dir");
                    upstream::discovery::Resolved {
                        resources,
                        ..Default::default()
                    }
                }
                None => return Err(e.into()),
            }
        }
        Err(e) => return Err(e.into()),
    };
    Ok(Prepared {
        config,
        upstream,
        reviewer,
        resources: resolved.resources,
        waiting: resolved.waiting,
        tls,
        local,
        persist,
        audit,
    })
}

impl Prepared {
    /// Serves until `shutdown` fires, then drains in-flight requests for the
    /// configured grace period and returns. In steps: the follower's first
    /// round starts the caches (reflectors, warm from snapshots), then the
    /// tasks they enrolled with (snapshots, the consistency check), then
    /// what keeps health and metrics current; serve the admin listener,
    /// build the API, serve it, drain.
    pub async fn run(self, listeners: Listeners, shutdown: Signal) {
        let metrics = metrics::install();
        let Prepared {
            config,
            upstream,
            reviewer,
            resources,
            waiting,
            tls,
            local,
            persist,
            audit,
        } = self;
        let (auditor, audit_writers) = audit.unzip();
        upstream.report_in_use();
        tracing::info!(
            api = %listeners.api.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            admin = %listeners.admin.local_addr().map(|a| a.to_string()).unwrap_or_default(),
            upstream = ?upstream.server_names(),
            "r8s serving"
        );
        log_auth_mode(&config, &upstream, tls.is_some());
        let (caches, registrar) = cache::registry::Registry::new();
        let health = Arc::new(Health::new(caches.clone()));
        health.set_waiting(waiting);
        let proofs = Arc::new(upstream::proof::Proofs::new(
            upstream.clone(),
            upstream::proof::ProofPolicy {
                streaming_lists: config.read.consistent_streaming_lists,
                lists: config.read.consistent_lists,
                gets: config.read.consistent_gets,
                timeout: Duration::from_secs_f64(config.read.prove_timeout_seconds),
                get_wait: Duration::from_secs_f64(config.read.consistent_get_wait_seconds),
            },
        ));
        let (enrol, owners) = enrolment(&config, persist);
        let starter = apis::Starter {
            upstream: upstream.clone(),
            reflecting: reflecting(&config),
            limits: limits(&config),
            budget: Arc::new(cache::budget::Budget::new(
                config.cache.max_bytes_per_resource as usize,
                config.cache.max_bytes_total as usize,
            )),
            protobuf: config.cache.encodings.iter().any(|e| e == "protobuf"),
            indexes: config.cache.indexes.clone(),
            proofs: proofs.clone(),
            enrol,
            node: Some(config.node.name.clone()).filter(|n| !n.is_empty()),
        };
        // A node-local r8s caches the configmaps and secrets its node's pods
        // reference, one by one, as they are first asked for.
        let objects = starter.node.is_some().then(|| {
            let (objects, writer, asks) = cache::objects::ObjectCaches::new();
            let owner = apis::objects::Objects::new(
                starter.clone(),
                writer,
                caches.clone(),
                asks,
                shutdown.clone(),
            );
            tokio::spawn(owner.run());
            objects
        });
        let mut follower = apis::Follower::new(
            registrar,
            starter,
            &config.cache,
            health.clone(),
            shutdown.clone(),
        );
        let persisted = follower.begin(resources);
        let saving = start_owners(owners, persisted, &upstream, &shutdown);
        // After the first round: health's sync check judges the caches it
        // started (an empty registry would read as synced).
        let probe = probe::Probe::from(&config);
        let notifying = spawn_upkeep(&upstream, &health, probe, &metrics, tls.as_ref(), &shutdown);
        tokio::spawn(follower.run());
        let admin = serve_admin(listeners.admin, &config, health, metrics, &shutdown);
        let api = build_api(
            &config,
            (upstream, reviewer),
            (caches, objects),
            local,
            proofs,
            auditor,
            &shutdown,
        );
        serve_api(listeners.api, &config, tls, api, shutdown).await;
        if let Some(w) = audit_writers {
            // Every request is done: the events they made are queued.
            w.finish(AUDIT_FLUSH).await;
        }
        // systemd hears STOPPING=1 before the process is gone (a drain with
        // nothing to drain ends at once).
        let _ = notifying.await;
        let _ = admin.await;
        if let Some(saving) = saving {
            // The last snapshots, taken when shutdown began.
            let _ = saving.await;
        }
        tracing::info!("r8s stopped");
    }
}

/// The tasks that caches enrol with, before they are spawned: what their
/// intakes' other ends become.
struct Owners {
    /// `persist.dir`'s writer: the directory and its intake.
    persist: Option<(Arc<persist::Persist>, Receiver<persist::Target>)>,
    /// The consistency check's intake, and its interval.
    checks: Option<(Receiver<upstream::consistency::Target>, Duration)>,
}

/// The receiving end of an enrolment intake.
type Receiver<T> = tokio::sync::mpsc::UnboundedReceiver<T>;

/// The intakes every cache enrols with (the persist writer's, the
/// consistency check's; each only when on), and their other ends.
fn enrolment(config: &Config, persist: Option<Arc<persist::Persist>>) -> (apis::Enrol, Owners) {
    let mut enrol = apis::Enrol::default();
    let mut owners = Owners {
        persist: None,
        checks: None,
    };
    if let Some(p) = persist {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        enrol.persist = Some((p.clone(), tx));
        owners.persist = Some((p, rx));
    }
    let check_every = config.cache.consistency_check_interval_seconds;
    if check_every > 0 {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        enrol.checks = Some(tx);
        owners.checks = Some((rx, Duration::from_secs(check_every)));
    }
    (enrol, owners)
}

/// Spawns the tasks the caches enrolled with, once the first round has
/// launched them: the snapshot writer (once the files of caches no longer
/// resolved are gone) and the consistency check (told whether any cache
/// started warm). Returns the snapshot writer's task.
fn start_owners(
    owners: Owners,
    persisted: apis::Persisted,
    upstream: &Arc<Upstream>,
    shutdown: &Signal,
) -> Option<tokio::task::JoinHandle<()>> {
    let saving = owners.persist.map(|(p, rx)| {
        p.discard_others(&persisted.saved);
        tracing::info!(
            stores = persisted.saved.len(),
            "caches are saved to persist.dir"
        );
        tokio::spawn(p.run(rx, shutdown.clone()))
    });
    if let Some((rx, every)) = owners.checks {
        tokio::spawn(upstream::consistency::run(
            upstream.clone(),
            rx,
            every,
            persisted.warm,
            shutdown.clone(),
        ));
    }
    saving
}

/// What each store keeps, from the configuration.
fn limits(config: &Config) -> cache::store::Limits {
    cache::store::Limits {
        retention: Duration::from_secs(config.cache.snapshot_retention_seconds),
        max_retained: config.cache.max_retained_versions,
        history_events: config.watch.history_events,
        history_bytes: config.watch.history_bytes as usize,
        max_staleness: Duration::from_secs(config.cache.max_staleness_seconds),
        serve_stale: config.cache.serve_stale,
    }
}

/// How reflectors list and watch, from the configuration.
fn reflecting(config: &Config) -> upstream::reflector::ReflectorConfig {
    upstream::reflector::ReflectorConfig {
        page_size: config.cache.page_size,
        streaming_lists: config.cache.streaming_lists,
        max_backoff: Duration::from_secs_f64(config.upstream.max_backoff_seconds),
        drop_managed_fields: config.cache.managed_fields == config::ManagedFields::Drop,
    }
}

/// Spawns what keeps the process's view current: histogram upkeep, the
/// upstream probe behind readiness, systemd's notifications, TLS reloads.
/// Returns the notifications' task: it ends once it has told systemd that
/// r8s is stopping, which must happen before the process exits.
fn spawn_upkeep(
    upstream: &Arc<Upstream>,
    health: &Arc<Health>,
    probe: probe::Probe,
    metrics: &metrics_exporter_prometheus::PrometheusHandle,
    tls: Option<&Arc<tls::Tls>>,
    shutdown: &Signal,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(metrics_upkeep(metrics.clone(), shutdown.clone()));
    tokio::spawn(probe::run(
        upstream.clone(),
        health.clone(),
        probe,
        shutdown.clone(),
    ));
    let notifying = tokio::spawn(notify::run(health.clone(), shutdown.clone()));
    tokio::spawn(upstream.clone().follow_credentials(shutdown.clone()));
    if let Some(t) = tls {
        tokio::spawn(t.clone().reload(shutdown.clone()));
    }
    notifying
}

/// Says how requests are authenticated, and warns where that is unsafe.
fn log_auth_mode(config: &Config, upstream: &Upstream, tls: bool) {
    match config.auth_mode() {
        config::AuthMode::None => tracing::warn!(
            "auth.mode = \"none\": no authentication or authorization; every client that can connect acts as r8s, with its credentials and permissions (allowed only because the API listens on loopback; foreign Hosts and server.reject_paths are refused)"
        ),
        config::AuthMode::Delegated => {
            tracing::info!(
                anonymous = config.auth.anonymous,
                "auth.mode = \"delegated\": tokens by TokenReview, cache reads by SubjectAccessReview"
            );
            if !tls {
                tracing::warn!(
                    "auth.mode = \"delegated\" without TLS: bearer tokens cross the network in clear text; set tls.cert_file and tls.key_file"
                );
            }
            if !upstream.has_credentials() {
                tracing::warn!(
                    "auth.mode = \"delegated\" but r8s has no credentials of its own: token and access reviews go to the upstream anonymously and will likely be refused"
                );
            }
        }
    }
}

/// The server bounds both listeners share, and each one's own.
fn timeouts(config: &Config, grace: Duration, goaway_chance: f64) -> server::Timeouts {
    server::Timeouts {
        grace,
        header_read: Duration::from_secs(config.server.header_read_timeout_seconds),
        write: Duration::from_secs(config.server.write_timeout_seconds),
        goaway_chance,
    }
}

/// How long, at shutdown, the audit backends may take to write out their queues.
const AUDIT_FLUSH: Duration = Duration::from_secs(10);

/// Serves `/metrics` and health on the admin listener until shutdown.
fn serve_admin(
    listener: TcpListener,
    config: &Config,
    health: Arc<Health>,
    metrics: metrics_exporter_prometheus::PrometheusHandle,
    shutdown: &Signal,
) -> tokio::task::JoinHandle<()> {
    tokio::spawn(server::serve(
        listener,
        None,
        move |req, _| {
            let resp = admin::handle(&req, &health, &metrics);
            async move { resp }
        },
        shutdown.clone(),
        timeouts(config, Duration::from_secs(1), 0.0),
    ))
}

/// The API as the configuration says: auth, proofs, read and watch policies.
fn build_api(
    config: &Config,
    (upstream, reviewer): (Arc<Upstream>, Arc<Upstream>),
    (caches, objects): (
        Arc<cache::registry::Registry>,
        Option<Arc<cache::objects::ObjectCaches>>,
    ),
    local: auth::local::LocalGuard,
    proofs: Arc<upstream::proof::Proofs>,
    audit: Option<Arc<audit::Auditor>>,
    shutdown: &Signal,
) -> Arc<serve::Api> {
    // Priority and fairness: the apiserver's own configuration until the
    // cluster's is read, then the cluster's, kept current.
    let (fairness, classifier) = fairness::current::Current::new(
        fairness::classify::Classifier::builtin(),
        fairness::Capacity {
            seats: config.read.max_inflight_lists,
            watches: config.watch.max_watchers,
        },
    );
    tokio::spawn(fairness::follow::run(
        upstream.clone(),
        classifier,
        shutdown.clone(),
    ));
    Arc::new(serve::Api {
        fairness,
        audit,
        auth: auth::Auth::new(
            config.auth_mode(),
            &config.auth,
            local,
            reviewer,
            upstream.clone(),
        ),
        upstream,
        proofs,
        caches,
        objects,
        policy: serve::read::ReadPolicy {
            wait: Duration::from_secs_f64(config.cache.wait_for_resource_version_seconds),
            on_too_new: config.read.on_too_new,
        },
        list_slots: serve::slots::ListSlots::new(config.read.max_inflight_lists),
        watch_slots: serve::slots::WatchSlots::new(config.watch.max_watchers),
        watch_policy: serve::watch::WatchPolicy {
            bookmark_interval: Duration::from_secs(config.watch.bookmark_interval_seconds),
            min_timeout: Duration::from_secs(config.watch.min_timeout_seconds),
            on_too_old: config.watch.on_too_old,
            drain: Duration::from_secs_f64(config.shutdown.watch_drain_seconds),
            compress_watch_lists: config.server.watchlist_compression,
        },
        shutdown: shutdown.clone(),
    })
}

/// Serves the API until shutdown, then drains it for `shutdown.grace_seconds`.
async fn serve_api(
    listener: TcpListener,
    config: &Config,
    tls: Option<Arc<tls::Tls>>,
    api: Arc<serve::Api>,
    shutdown: Signal,
) {
    let grace = Duration::from_secs(config.shutdown.grace_seconds);
    server::serve(
        listener,
        tls,
        move |req, peer| api.clone().handle(req, peer),
        shutdown,
        timeouts(config, grace, config.server.goaway_chance),
    )
    .await;
}

/// Folds recorded histogram samples into their buckets every few seconds, so
/// memory stays flat however rarely `/metrics` is scraped.
async fn metrics_upkeep(handle: metrics_exporter_prometheus::PrometheusHandle, shutdown: Signal) {
    let mut tick = tokio::time::interval(Duration::from_secs(5));
    loop {
        tokio::select! {
            _ = tick.tick() => handle.run_upkeep(),
            _ = shutdown.wait() => return,
        }
    }
}
