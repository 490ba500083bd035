//! The running sim's state and what every handler shares: its
//! configuration, the request as handlers see it, and JSON helpers.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http::{HeaderMap, Method, Response, StatusCode};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use serde_json::Value;

use crate::{auth, store};
use r8s::api::media::Choice;
use r8s::api::query::Query;
use r8s::api::status::Status;
use r8s::body::{self, Body};
use r8s::shutdown::Signal;
use r8s::sync::MutexExt;

/// How the sim is set up.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Pods to seed.
    pub pods: usize,
    /// Namespaces `ns-0..` to spread them over.
    pub namespaces: usize,
    /// Nodes `node-00..` the scheduled pods (every other one) spread over;
    /// 0: one per 100 pods, between 1 and 50.
    pub nodes: usize,
    /// Background writes per second (0: none).
    pub churn: f64,
    /// Events kept for resuming watches and old reads (the compaction window).
    pub history: usize,
    /// kube-apiserver `--token-auth-file` style CSV; authentication on when set.
    pub tokens: Option<PathBuf>,
    /// ABAC policy file (JSON lines) adding to the built-in rules; needs `tokens`.
    pub policy: Option<PathBuf>,
    /// Interval between watch bookmarks.
    pub bookmark_interval: Duration,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this].
    pub min_watch_timeout: Duration,
    /// How long a read at a future resource version waits before 504.
    pub future_rv_wait: Duration,
    /// Which kube-apiserver it behaves as on the consistent-read path.
    pub generation: Generation,
    /// The minor version `/version` reports with [`Generation::Current`]
    /// (36: the sim answers as 1.36 does, and where the two differ 1.36 is
    /// right; r8s follows the version it reports, so 37 makes r8s gzip
    /// streaming lists as 1.37 does).
    pub minor: u16,
    /// How long every list takes at least (a LIST, a streaming list's
    /// initial events): an apiserver with large or busy lists, for tests of
    /// how a client paces them.
    pub list_delay: Duration,
}

/// Which kube-apiserver the sim behaves as where they differ for proofs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Generation {
    /// 1.31 or later (`/version` says 1.`minor`): a consistent read makes the
    /// watch cache request progress from etcd, so its version, and the
    /// bookmarks after it, advance to the read's version.
    #[default]
    Current,
    /// Before 1.31 (`/version` says 1.30): a watch's bookmarks carry the
    /// version of the last change of its resource, and a resource without
    /// changes since the watch began gets none.
    Pre131,
}

impl SimConfig {
    /// The Kubernetes version `/version` reports.
    pub fn version(&self) -> r8s::upstream::version::KubeVersion {
        let minor = match self.generation {
            Generation::Pre131 => 30,
            Generation::Current => self.minor,
        };
        r8s::upstream::version::KubeVersion {
            major: 1,
            minor,
            go: Some((1, minor.saturating_sub(10))),
        }
    }

    /// How a streaming list's initial events end in that version.
    pub fn initial_end(&self) -> r8s::codec::InitialEnd {
        if r8s::upstream::version::WireRules::of(Some(self.version())).list_blueprint {
            r8s::codec::InitialEnd::WithBlueprint
        } else {
            r8s::codec::InitialEnd::Plain
        }
    }

    /// The nodes to seed and schedule pods on.
    pub fn node_count(&self) -> usize {
        if self.nodes > 0 {
            self.nodes
        } else {
            (self.pods / 100).clamp(1, 50)
        }
    }
}

impl Default for SimConfig {
    fn default() -> Self {
        SimConfig {
            pods: 100,
            namespaces: 4,
            nodes: 0,
            churn: 0.0,
            history: 10_000,
            tokens: None,
            policy: None,
            bookmark_interval: Duration::from_secs(60),
            min_watch_timeout: Duration::from_secs(1800),
            future_rv_wait: Duration::from_secs(3),
            generation: Generation::Current,
            minor: 36,
            list_delay: Duration::ZERO,
        }
    }
}

/// The running sim's shared state.
pub struct Sim {
    /// The resource types it serves.
    pub resources: super::catalog::Catalog,
    /// Where each custom resource definition's objects are kept.
    pub(super) crds: super::catalog::Storages,
    /// Storage.
    pub store: store::Store,
    /// Configuration.
    pub config: SimConfig,
    /// The tokens file and authorizer, when authentication is on.
    pub(super) auth: Option<auth::Tokens>,
    counts: Mutex<HashMap<String, u64>>,
    shutdown: Signal,
    /// Bumped to end every open watch (a test hook: an upstream restart).
    watch_epoch: tokio::sync::watch::Sender<u64>,
    /// While set, new watches are refused with 503 (an upstream that is down).
    refuse_watches: std::sync::atomic::AtomicBool,
    /// While set, the background churn writes nothing.
    churn_paused: std::sync::atomic::AtomicBool,
    /// Held by the churn while it decides and makes one write: pausing
    /// takes it, so that no write already under way lands after the pause.
    churn_writing: Mutex<()>,
    /// Objects the background churn leaves alone (a test's planted change).
    spared: Mutex<std::collections::HashSet<String>>,
    /// While true, watches deliver nothing (the sim has fallen behind).
    held: tokio::sync::watch::Sender<bool>,
    /// The version of the last consistent read ([`Generation::Current`]:
    /// the watch cache requested progress up to it).
    progress: std::sync::atomic::AtomicU64,
    /// Lists being answered now (a LIST, or a streaming list's initial
    /// events), and the most at once: how a client paces its syncs.
    lists: [std::sync::atomic::AtomicUsize; 2],
}

/// A list being answered (counted in [`Sim::lists_in_flight`] while held).
pub struct Listing<'a>(&'a Sim);

impl Drop for Listing<'_> {
    fn drop(&mut self) {
        self.0.lists[0].fetch_sub(1, std::sync::atomic::Ordering::AcqRel);
    }
}

/// A request as the handlers see it.
pub struct Req {
    /// Method.
    pub method: Method,
    /// Headers.
    pub headers: HeaderMap,
    /// The query, decoded.
    pub query: Query,
    /// What kube-apiserver would answer its `Accept` with (the sim offering JSON only).
    pub media: Choice,
    /// The requesting user (after authentication and impersonation).
    pub user: Option<auth::User>,
}

impl Sim {
    /// A sim with an empty store.
    pub(super) fn new(config: SimConfig, auth: Option<auth::Tokens>, shutdown: Signal) -> Self {
        let resources = super::catalog::Catalog::default();
        Sim {
            store: store::Store::new(config.history, resources.items_typed()),
            resources,
            crds: super::catalog::Storages::default(),
            config,
            auth,
            counts: Mutex::new(HashMap::new()),
            shutdown,
            watch_epoch: tokio::sync::watch::channel(0).0,
            refuse_watches: std::sync::atomic::AtomicBool::new(false),
            churn_paused: std::sync::atomic::AtomicBool::new(false),
            churn_writing: Mutex::new(()),
            spared: Mutex::new(std::collections::HashSet::new()),
            held: tokio::sync::watch::channel(false).0,
            progress: std::sync::atomic::AtomicU64::new(0),
            lists: Default::default(),
        }
    }

    /// Counts a list being answered until the guard is dropped, after
    /// `list_delay`.
    pub(super) async fn listing(&self) -> Listing<'_> {
        use std::sync::atomic::Ordering::AcqRel;
        let now = self.lists[0].fetch_add(1, AcqRel) + 1;
        self.lists[1].fetch_max(now, AcqRel);
        let listing = Listing(self);
        if !self.config.list_delay.is_zero() {
            tokio::time::sleep(self.config.list_delay).await;
        }
        listing
    }

    /// Lists (LISTs, and streaming lists until their initial events are
    /// sent) being answered now, and the most answered at once since the
    /// last call (which resets it to now).
    pub fn lists_in_flight(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::AcqRel;
        let now = self.lists[0].load(std::sync::atomic::Ordering::Acquire);
        (now, self.lists[1].swap(now, AcqRel))
    }

    /// A consistent read (no `resourceVersion`) answered at `rv`: a current
    /// apiserver's watch cache has made progress up to it (etcd's progress
    /// notification), a pre-1.31 one has not.
    pub(super) fn consistent_read(&self, rv: u64) {
        if self.config.generation == Generation::Current {
            self.progress
                .fetch_max(rv, std::sync::atomic::Ordering::AcqRel);
        }
    }

    /// Up to where the watch cache has made progress without events
    /// (consistent reads, [`Generation::Current`] only).
    pub(super) fn progress(&self) -> u64 {
        self.progress.load(std::sync::atomic::Ordering::Acquire)
    }

    /// How many requests of `verb` on `resource` the sim has answered (e.g. `list`, `pods`).
    pub fn count(&self, verb: &str, resource: &str) -> u64 {
        let c = self.counts.locked();
        c.get(&format!("{verb} {resource}")).copied().unwrap_or(0)
    }

    /// Every request answered so far, by `"verb resource"` (`"get /apis"`
    /// for discovery and other paths outside the resources).
    pub fn counts(&self) -> HashMap<String, u64> {
        self.counts.locked().clone()
    }

    /// Counts one request of `verb` on `resource`.
    pub(super) fn bump(&self, verb: &str, resource: &str) {
        let mut c = self.counts.locked();
        *c.entry(format!("{verb} {resource}")).or_default() += 1;
    }

    /// Ends every open watch; with `refuse`, new watches get 503 until
    /// [`Sim::accept_watches`] (simulates an upstream restart or outage).
    pub fn interrupt_watches(&self, refuse: bool) {
        self.refuse_watches
            .store(refuse, std::sync::atomic::Ordering::SeqCst);
        self.watch_epoch.send_modify(|e| *e += 1);
    }

    /// Ends every open watch and makes resuming from before now answer 410,
    /// so watch clients (r8s's reflectors) must relist.
    pub fn expire_watches(&self) {
        self.store.expire_watches();
        self.interrupt_watches(false);
    }

    /// Compacts the history up to now, as etcd's compaction does, and ends
    /// every open watch (as a restart would): reads at older versions and
    /// watches resuming from them get 410.
    pub fn compact(&self) {
        self.store.compact();
        self.interrupt_watches(false);
    }

    /// Holds (or releases) every watch's deliveries: a sim that has fallen
    /// behind its writes, as a lagging apiserver's watch cache. Writes and
    /// reads go on; held events follow in order on release.
    pub fn hold_watches(&self, held: bool) {
        self.held.send_replace(held);
    }

    /// A receiver of whether watches are held.
    pub fn watches_held(&self) -> tokio::sync::watch::Receiver<bool> {
        self.held.subscribe()
    }

    /// Who impersonated whom so far: (authenticated user, user acted as).
    pub fn impersonations(&self) -> Vec<(String, auth::User)> {
        self.auth
            .as_ref()
            .map(|t| t.impersonations())
            .unwrap_or_default()
    }

    /// Pauses (or resumes) the background churn.
    pub fn pause_churn(&self, paused: bool) {
        self.churn_paused
            .store(paused, std::sync::atomic::Ordering::SeqCst);
        // A write the churn had begun before the flag is done when this returns.
        drop(self.churn_writing.locked());
    }

    /// Held while the churn makes one write (see [`Sim::pause_churn`]).
    pub(super) fn churn_write(&self) -> std::sync::MutexGuard<'_, ()> {
        self.churn_writing.locked()
    }

    /// Whether the churn is paused.
    pub fn churn_paused(&self) -> bool {
        self.churn_paused.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Keeps the background churn away from the object at `key` (a change
    /// planted by a test would otherwise be overwritten, and heard, by a
    /// churn write to the same object).
    pub fn spare_from_churn(&self, key: &str) {
        self.spared.locked().insert(key.to_string());
    }

    /// Whether the churn leaves the object at `key` alone.
    pub fn spared(&self, key: &str) -> bool {
        self.spared.locked().contains(key)
    }

    /// Accepts watches again after [`Sim::interrupt_watches`].
    pub fn accept_watches(&self) {
        self.refuse_watches
            .store(false, std::sync::atomic::Ordering::SeqCst);
    }

    /// A receiver that changes when watches are interrupted.
    pub fn watch_epoch(&self) -> tokio::sync::watch::Receiver<u64> {
        self.watch_epoch.subscribe()
    }

    /// Whether new watches are refused.
    pub fn refusing_watches(&self) -> bool {
        self.refuse_watches
            .load(std::sync::atomic::Ordering::SeqCst)
    }

    /// Whether the sim is shutting down (streams end).
    pub fn shutdown(&self) -> &Signal {
        &self.shutdown
    }
}

/// The largest write body kube-apiserver reads (`MaxRequestBodyBytes`, 3 MiB).
pub const MAX_BODY: usize = 3 << 20;

/// How much of a body past [`MAX_BODY`] the sim reads and drops before it
/// answers 413.
const MAX_DRAIN: usize = 64 << 20;

/// Reads a request body whole, as kube-apiserver does: 413 past [`MAX_BODY`].
///
/// The rest of an oversized body is read and dropped (up to [`MAX_DRAIN`])
/// before the 413 goes out: a connection closed with bytes unread is reset,
/// and the reset can destroy the 413 before the client reads it. Go's server
/// avoids that with a lingering close; draining is the sim's way to the same
/// answer every time.
pub async fn read_body(mut body: Incoming) -> Result<Bytes, Status> {
    let mut buf = bytes::BytesMut::new();
    let mut over = 0usize;
    while let Some(frame) = body.frame().await {
        let frame =
            frame.map_err(|e| Status::bad_request(format!("unable to read request body: {e}")))?;
        let Ok(data) = frame.into_data() else {
            continue;
        };
        if over == 0 && buf.len() + data.len() <= MAX_BODY {
            buf.extend_from_slice(&data);
            continue;
        }
        buf.clear();
        over += data.len();
        if over > MAX_DRAIN {
            break;
        }
    }
    if over > 0 {
        return Err(Status::entity_too_large(MAX_BODY));
    }
    Ok(buf.freeze())
}

/// Now, as the apiserver writes timestamps (RFC 3339, seconds).
pub fn now_rfc3339() -> String {
    humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string()
}

/// Serializes a JSON value.
pub fn to_bytes(v: &Value) -> Bytes {
    Bytes::from(serde_json::to_vec(v).expect("JSON serializes"))
}

/// A JSON response with the apiserver's headers, ending with a newline as
/// Go's encoder ends every body.
pub fn json_response(code: StatusCode, bytes: Bytes) -> Response<Body> {
    r8s::api::json_response(code, body::full_line(bytes))
}
