//! The settings r8s reads, with their defaults (every key is documented in
//! `config/r8s.toml` with its default and why).

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address of the Kubernetes API listener (loopback by default: a sidecar).
    pub listen: SocketAddr,
    /// Address of `/metrics`, `/healthz`, `/livez`, `/readyz`.
    pub admin_listen: SocketAddr,
    /// What happens on SIGTERM.
    pub shutdown: ShutdownConfig,
    /// How the listeners treat their clients' connections.
    pub server: ServerConfig,
    /// The upstream kube-apiserver(s).
    pub upstream: UpstreamConfig,
    /// What to cache.
    pub cache: CacheConfig,
    /// Cached reads at the edges.
    pub read: ReadConfig,
    /// Cached watches.
    pub watch: WatchConfig,
    /// TLS for the API listener.
    pub tls: TlsConfig,
    /// Who may read what from the cache.
    pub auth: AuthConfig,
    /// Logging.
    pub log: LogConfig,
    /// Audit events for the requests r8s answers (kube-apiserver's format).
    pub audit: AuditConfig,
    /// Snapshots of the caches on local disk, for a warm restart.
    pub persist: PersistConfig,
    /// The node a node-local r8s serves.
    pub node: NodeConfig,
}

/// A node-local r8s: the node whose clients it serves, and so what its
/// caches hold.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NodeConfig {
    /// The node's name (empty: not node-local). Its pods cache holds the
    /// pods bound to it, its nodes cache its own Node; requests outside
    /// that pass through.
    pub name: String,
}

/// Where and how often the caches are saved, so a restart resumes its
/// upstream watches instead of relisting everything.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct PersistConfig {
    /// Directory of the snapshots (created 0700; unset: nothing is saved).
    pub dir: Option<PathBuf>,
    /// Seconds between appends of each cache's changes to its log.
    pub interval_seconds: u64,
    /// Save `secrets` too (snapshots are plaintext on disk).
    pub include_secrets: bool,
    /// A cache's log is compacted into a new snapshot once it holds this
    /// fraction of the snapshot's bytes (and at least 64 KiB).
    pub compaction_ratio: f64,
    /// The pace of compactions (snapshots), in bytes per second; the log's
    /// appends are never paced.
    pub max_write_bytes_per_second: u64,
}

impl Default for PersistConfig {
    fn default() -> Self {
        PersistConfig {
            dir: None,
            interval_seconds: 1,
            include_secrets: false,
            compaction_ratio: 0.5,
            max_write_bytes_per_second: 8 << 20,
        }
    }
}

/// How to reach the upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Servers of one cluster, tried in order (the next on a connection error, or
    /// when a cache finds one silent or failing). Empty: the kubeconfig's server.
    pub servers: Vec<String>,
    /// Kubeconfig to take the server, CA and credentials from. Unset: `$KUBECONFIG`,
    /// `~/.kube/config`, or the in-cluster service account, in that order, when
    /// `servers` is empty; no credentials otherwise.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (unset: the current context).
    pub context: Option<String>,
    /// CA bundle to verify the upstream with (overrides the kubeconfig's).
    pub ca_file: Option<PathBuf>,
    /// Bearer token file, re-read as it rotates (overrides the kubeconfig's credentials).
    pub token_file: Option<PathBuf>,
    /// Bearer token (prefer `token_file`; redacted by `config check`).
    pub token: Option<String>,
    /// Skip TLS verification of the upstream (testing only).
    pub insecure_skip_tls_verify: bool,
    /// Seconds to wait for a TCP/TLS connection before failing over.
    pub connect_timeout_seconds: f64,
    /// The longest wait between a cache's failed list or watch and its
    /// retry (full jitter); the upstream's return cuts it short.
    pub max_backoff_seconds: f64,
    /// Seconds between `/version` probes while the upstream answers (every
    /// second, or this if shorter, while it does not).
    pub probe_interval_seconds: f64,
    /// How long a `/version` probe waits before the upstream counts as not
    /// answering: a slow answer under load is not an outage.
    pub probe_timeout_seconds: f64,
    /// Ask for gzip on r8s's own lists and watches (`Accept-Encoding: gzip`,
    /// as client-go does unless told `disable-compression`).
    pub compression: bool,
    /// The Kubernetes version (`1.21`) of an upstream whose `/version` says
    /// no number (a build without version stamps). Empty: none assumed.
    pub version: String,
}

/// What r8s caches and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Resources: `pods`, `v1/pods`, `apps/v1/deployments`, `example.r8s.dev/v1/widgets`, or `*`.
    pub resources: Vec<String>,
    /// Resources `*` leaves out.
    pub exclude: Vec<String>,
    /// Items per upstream LIST page during (re)lists.
    pub page_size: usize,
    /// Indexes per resource, named as in `resources` (`pods`, `v1/pods`,
    /// `apps/v1/deployments`):
    /// a selectable field (`spec.nodeName`) or `label:KEY`. A list, page or
    /// streaming list whose selectors pin an index to a few values reads
    /// those objects only.
    pub indexes: BTreeMap<String, Vec<String>>,
    /// (Re)list with streaming lists (`sendInitialEvents`) where the upstream serves them.
    pub streaming_lists: bool,
    /// Encodings held, each by its own reflector: `json` (always; custom
    /// resources and metadata-only JSON need it) and `protobuf` (what
    /// client-go's typed clients ask for; custom resources' metadata only).
    pub encodings: Vec<String>,
    /// Seconds a version pages were cut from is kept for their continue tokens.
    pub snapshot_retention_seconds: u64,
    /// At most this many versions kept for continue tokens per resource (bounds memory).
    pub max_retained_versions: usize,
    /// Seconds a "not older than" read waits for the cache to catch up.
    pub wait_for_resource_version_seconds: f64,
    /// Bytes one resource's cache may hold before it is evicted and passed through (0: no limit).
    pub max_bytes_per_resource: u64,
    /// Bytes all caches together may hold (0: no limit).
    pub max_bytes_total: u64,
    /// Seconds a cache may go without word from its upstream (an event, a
    /// bookmark, a watch answered or ended) before it stops serving (reads
    /// and watches pass through) and `/readyz` fails. The reflector's
    /// watches are bounded to half of it, so a silent partition is noticed.
    pub max_staleness_seconds: u64,
    /// Past `max_staleness_seconds`, keep serving "Any" reads and watches
    /// from the cache (each answer with a `Warning` saying how old it is)
    /// and stay ready, instead of passing through: for edge sites that
    /// must work disconnected, never for a shared tier.
    pub serve_stale: bool,
    /// Seconds between checks that each cache holds what the upstream holds
    /// (namespace, name and resourceVersion of every object; 0: never).
    pub consistency_check_interval_seconds: u64,
    /// Seconds between resolutions of `resources` against the upstream's
    /// discovery while r8s runs (resources that appear get a cache, those
    /// gone lose theirs); also soon after any change to the cached CRDs or
    /// APIServices. 0: resolved at startup only.
    pub discovery_interval_seconds: u64,
    /// Caches started while r8s runs that may be syncing (listing) at once:
    /// a cluster installing 500 CRDs does not start 500 lists at once.
    pub max_concurrent_starts: usize,
    /// `keep` (default) or `drop`: objects are kept without
    /// `metadata.managedFields`, to save memory; every answer from the cache
    /// then comes without them (`kubectl get --show-managed-fields` shows
    /// none; reads that pass through still carry them).
    pub managed_fields: ManagedFields,
}

/// What the cache keeps of `metadata.managedFields` (`cache.managed_fields`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
#[serde(rename_all = "lowercase")]
pub enum ManagedFields {
    /// Kept: answers carry them unless a client asks
    /// `drop=metadata.managedFields`.
    #[default]
    Keep,
    /// Never stored: no answer from the cache carries them.
    Drop,
}

impl CacheConfig {
    /// `resources`, parsed (entries that do not parse were refused by
    /// [`Config::validate`]; left out here).
    pub fn entries(&self) -> Vec<super::entry::ResourceEntry> {
        self.resources
            .iter()
            .filter_map(|e| e.parse().ok())
            .collect()
    }
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            resources: Vec::new(),
            exclude: vec!["secrets".into(), "events".into()],
            page_size: 500,
            indexes: BTreeMap::from([("pods".into(), vec!["spec.nodeName".into()])]),
            streaming_lists: true,
            encodings: vec!["json".into(), "protobuf".into()],
            snapshot_retention_seconds: 75,
            max_retained_versions: 10_000,
            wait_for_resource_version_seconds: 3.0,
            max_bytes_per_resource: 2 << 30,
            max_bytes_total: 8 << 30,
            max_staleness_seconds: 120,
            serve_stale: false,
            consistency_check_interval_seconds: 600,
            discovery_interval_seconds: 30,
            max_concurrent_starts: 4,
            managed_fields: ManagedFields::Keep,
        }
    }
}

/// How cached reads behave at the edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReadConfig {
    /// A read newer than the cache after the wait: `pass` (ask the upstream,
    /// unless it has not reached the version either: then its 504, from r8s)
    /// or `504` (answer `Too large resource version` like kube-apiserver).
    pub on_too_new: OnTooNew,
    /// Costly cached reads at once (large lists, lists and watches' initial
    /// events that walk every object of a large cache), shared among the
    /// priority levels; past a level's share, queued, then 429 with
    /// `Retry-After: 1`.
    pub max_inflight_lists: usize,
    /// Consistent streaming lists (`sendInitialEvents=true`, no
    /// `resourceVersion`: every client-go ≥ 1.35 informer's sync): served
    /// from the cache once it is proven as fresh as the upstream (`auto`:
    /// on upstreams reporting 1.31 or later; `prove`: always; `pass`: never).
    pub consistent_streaming_lists: Prove,
    /// Consistent LISTs (no `resourceVersion`, kubectl's): `auto` (the
    /// default: from the cache once proven, on upstreams reporting 1.31 or
    /// later, where the proof costs milliseconds), `prove` (whatever the
    /// upstream: up to a second or two of added latency on older ones) or
    /// `pass` (the upstream answers).
    pub consistent_lists: Prove,
    /// Consistent GETs (no `resourceVersion`: what controllers read before
    /// they write): `auto`, `prove` or `pass`, as `consistent_lists`, with
    /// the same proof; a proof slow or failed passes the GET through.
    pub consistent_gets: Prove,
    /// Seconds a consistent read waits for its proof before it passes through.
    pub prove_timeout_seconds: f64,
    /// Seconds a consistent GET waits for the cache to reach the upstream's
    /// version (the wait a resource nobody writes needs, for a bookmark)
    /// before it passes through; after one did, that resource's consistent
    /// GETs pass for 10 s. A GET costs the upstream little, and a
    /// controller that waits for it much.
    pub consistent_get_wait_seconds: f64,
}

/// Whether consistent reads are proven and served from the cache.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum Prove {
    /// Prove where the upstream's bookmarks are trustworthy: kube-apiserver
    /// 1.31 or later (it requests progress from etcd for consistent reads).
    #[default]
    #[serde(rename = "auto")]
    Auto,
    /// Prove whatever the upstream's version.
    #[serde(rename = "prove")]
    Prove,
    /// Never: consistent reads go to the upstream.
    #[serde(rename = "pass")]
    Pass,
}

/// Cached watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// Seconds between bookmarks sent to clients that allow them.
    pub bookmark_interval_seconds: u64,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this] seconds.
    pub min_timeout_seconds: u64,
    /// A watch from a version older than the history: `pass` (the upstream may
    /// still have it) or `410` (kube-apiserver's ERROR event).
    pub on_too_old: OnTooOld,
    /// Events each resource's watch log keeps (resumable watches reach back this far).
    pub history_events: usize,
    /// Bytes each resource's watch log may keep alive.
    pub history_bytes: u64,
    /// Cached watches open at once (all resources), each priority level
    /// guaranteed its share once it is full; past it, 429 with `Retry-After`.
    pub max_watchers: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            bookmark_interval_seconds: 60,
            min_timeout_seconds: 1800,
            on_too_old: OnTooOld::Pass,
            // 5 minutes of churn at 100 writes/s.
            history_events: 30_000,
            history_bytes: 512 << 20,
            max_watchers: 100_000,
        }
    }
}

/// TLS for the API listener (unset: plain HTTP, for loopback sidecars).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// Serving certificate (PEM chain); re-read when it changes.
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM); re-read when it changes.
    pub key_file: Option<PathBuf>,
    /// CA bundle (PEM) client certificates are verified against; unset: no client certificates.
    pub client_ca_file: Option<PathBuf>,
    /// Where `cert_file` and `key_file` do not exist, make them: a
    /// self-signed certificate for loopback (`localhost`, 127.0.0.1, ::1),
    /// kept and reused, which a node's kubelet trusts as its CA.
    pub self_signed: bool,
}

/// How requests are authenticated and cached reads authorized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `delegated` (TokenReview + SubjectAccessReview against the upstream) or
    /// `none` (loopback only). Unset: `none` on loopback, `delegated` otherwise.
    pub mode: Option<AuthMode>,
    /// Requests without credentials are `system:anonymous`; false: 401.
    pub anonymous: bool,
    /// Seconds an authenticated token's review is reused.
    pub token_ttl_seconds: u64,
    /// Seconds a rejected token's review is reused.
    pub token_rejected_ttl_seconds: u64,
    /// Seconds an "allowed" access review is reused.
    pub decision_ttl_seconds: u64,
    /// Seconds a "denied" access review is reused.
    pub decision_denied_ttl_seconds: u64,
    /// Entries in each of the token and decision caches.
    pub cache_size: usize,
    /// Seconds after its review an allowing answer (an authenticated token,
    /// an allowed access) is still reused when the upstream cannot review
    /// (unreachable, timed out, 5xx); denials never are. 0: never.
    pub stale_if_error_seconds: u64,
    /// How long a TokenReview or SubjectAccessReview waits for the upstream's
    /// answer before it counts as failed (then `stale_if_error_seconds`
    /// applies): a black-holed upstream must not hang cached reads. 10 s, as
    /// kube-apiserver's delegated authentication and authorization wait.
    pub review_timeout_seconds: f64,
    /// Whether a client-certificate caller other than r8s's own identity
    /// upstream passes through as r8s impersonating it (r8s needs the
    /// grant); false: such a request is refused (403), and only callers
    /// presenting r8s's own identity (a kubelet behind its node's r8s)
    /// pass, as r8s.
    pub impersonate_certificate_clients: bool,
    /// A kubeconfig for the server TokenReviews and SubjectAccessReviews go
    /// to (as kube-apiserver's `--authentication-kubeconfig` and
    /// `--authorization-kubeconfig`); unset: the upstream.
    pub review_kubeconfig: Option<PathBuf>,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            mode: None,
            anonymous: true,
            token_ttl_seconds: 120,
            token_rejected_ttl_seconds: 10,
            decision_ttl_seconds: 10,
            decision_denied_ttl_seconds: 5,
            cache_size: 10_000,
            stale_if_error_seconds: 300,
            review_timeout_seconds: 10.0,
            review_kubeconfig: None,
            impersonate_certificate_clients: true,
        }
    }
}

/// Whether r8s checks who is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMode {
    /// Every request authenticated, every cached read authorized, by the upstream.
    #[serde(rename = "delegated")]
    Delegated,
    /// No checks: anyone who can connect reads with r8s's permissions.
    #[serde(rename = "none")]
    None,
}

/// The listeners' bounds on their clients.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ServerConfig {
    /// Seconds an HTTP/1.1 client may take to send a request's headers
    /// before its connection is closed (kube-apiserver: 32).
    pub header_read_timeout_seconds: u64,
    /// Seconds a connection's writes may make no progress (a client that
    /// stopped reading) before it is closed.
    pub write_timeout_seconds: u64,
    /// `auth.mode = "none"` only: regular expressions, one of which the
    /// request's host (without port) must match (`kubectl proxy --accept-hosts`).
    pub accept_hosts: Vec<String>,
    /// `auth.mode = "none"` only: regular expressions no request path may
    /// match (`kubectl proxy --reject-paths`).
    pub reject_paths: Vec<String>,
    /// The probability of GOAWAY after a response on an HTTP/2 connection
    /// (kube-apiserver's `--goaway-chance`), so clients rebalance; 0: never.
    pub goaway_chance: f64,
    /// Streaming lists (`sendInitialEvents=true`) are gzip-encoded for
    /// clients that accept gzip where the upstream's version does so
    /// (kube-apiserver 1.37's `WatchListCompression`); false: never.
    pub watchlist_compression: bool,
}

/// `kubectl proxy --accept-hosts`'s default: loopback names only.
pub const DEFAULT_ACCEPT_HOSTS: [&str; 3] = [r"^localhost$", r"^127\.0\.0\.1$", r"^\[::1\]$"];

/// `kubectl proxy --reject-paths`'s default: no exec, no attach.
pub const DEFAULT_REJECT_PATHS: [&str; 2] = [r"^/api/.*/pods/.*/exec", r"^/api/.*/pods/.*/attach"];

impl ServerConfig {
    /// `accept_hosts` and `reject_paths` compiled (Go's RE2 syntax and Rust's
    /// `regex` agree on what these filters use); the first that does not
    /// compile, as a message naming its key.
    pub fn local_filters(&self) -> Result<(Vec<regex::Regex>, Vec<regex::Regex>), String> {
        let compile = |key: &str, patterns: &[String]| {
            patterns
                .iter()
                .map(|p| {
                    regex::Regex::new(p)
                        .map_err(|e| format!("config: bad value \"{p}\" for key \"{key}\": {e}"))
                })
                .collect::<Result<Vec<_>, _>>()
        };
        Ok((
            compile("server.accept_hosts", &self.accept_hosts)?,
            compile("server.reject_paths", &self.reject_paths)?,
        ))
    }
}

impl Default for ServerConfig {
    fn default() -> Self {
        let own = |v: &[&str]| v.iter().map(|s| s.to_string()).collect();
        ServerConfig {
            header_read_timeout_seconds: 32,
            write_timeout_seconds: 60,
            accept_hosts: own(&DEFAULT_ACCEPT_HOSTS),
            reject_paths: own(&DEFAULT_REJECT_PATHS),
            goaway_chance: 0.0,
            watchlist_compression: true,
        }
    }
}

/// Shutdown on SIGTERM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// How long in-flight requests may take to finish, in seconds.
    pub grace_seconds: u64,
    /// Cached watches get a final bookmark and close at random points over
    /// this many seconds, so clients do not reconnect all at once.
    pub watch_drain_seconds: f64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            grace_seconds: 30,
            watch_drain_seconds: 5.0,
        }
    }
}

/// What to do with a watch older than the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnTooOld {
    /// Pass it through to the upstream.
    #[default]
    #[serde(rename = "pass")]
    Pass,
    /// Answer 200 with one `ERROR` event carrying a 410 `Expired` Status.
    #[serde(rename = "410")]
    Gone,
}

/// What to do with a read the cache is too old for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnTooNew {
    /// Pass it through to the upstream.
    #[default]
    #[serde(rename = "pass")]
    Pass,
    /// Answer 504 with `Retry-After: 1`.
    #[serde(rename = "504")]
    Timeout,
}

impl Default for ReadConfig {
    fn default() -> Self {
        ReadConfig {
            on_too_new: OnTooNew::Pass,
            max_inflight_lists: 32,
            consistent_streaming_lists: Prove::Auto,
            consistent_lists: Prove::Auto,
            consistent_gets: Prove::Auto,
            prove_timeout_seconds: 3.0,
            consistent_get_wait_seconds: 0.05,
        }
    }
}

/// Logging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter: `info`, `r8s=debug`, ... (`RUST_LOG` overrides it).
    pub level: String,
    /// `text`, or `json`: one object per line, its fields named as kube
    /// components' JSON logs name them (`ts`, `caller`, `msg`, `v`, `err`).
    pub format: LogFormat,
}

/// How log lines are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum LogFormat {
    /// For people: time, level, target, message, fields.
    Text,
    /// For log pipelines: kube's JSON format.
    Json,
}

/// Audit events for the requests r8s answers, in kube-apiserver's format
/// and under its policy; the keys named as its `--audit-*` flags.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuditConfig {
    /// The audit policy (kube-apiserver's `--audit-policy-file` format);
    /// unset: no auditing.
    pub policy_file: Option<PathBuf>,
    /// The file events are written to, one JSON line each; `-`: standard output.
    pub log_path: Option<PathBuf>,
    /// Megabytes before the log file is rotated (0: never).
    pub log_maxsize: u64,
    /// Rotated files kept (0: all).
    pub log_maxbackup: usize,
    /// Days a rotated file is kept (0: forever).
    pub log_maxage: u64,
    /// Gzip rotated files.
    pub log_compress: bool,
    /// Events queued for the log file at most; past it they are dropped and counted.
    pub log_buffer_size: usize,
    /// A kubeconfig naming the webhook events are POSTed to (kube-apiserver's
    /// `--audit-webhook-config-file` format); unset: no webhook.
    pub webhook_config_file: Option<PathBuf>,
    /// Events queued for the webhook at most; past it they are dropped and counted.
    pub webhook_batch_buffer_size: usize,
    /// Events per webhook batch at most.
    pub webhook_batch_max_size: usize,
    /// Seconds a batch waits to fill before it is sent.
    pub webhook_batch_max_wait_seconds: f64,
    /// Limit the batches sent per second.
    pub webhook_batch_throttle_enable: bool,
    /// Batches per second on average, when throttled.
    pub webhook_batch_throttle_qps: f64,
    /// Batches sent at once when the rate has not been used.
    pub webhook_batch_throttle_burst: u32,
    /// Seconds before a failed batch's first retry (then ×1.5, 5 tries in all).
    pub webhook_initial_backoff_seconds: f64,
    /// Also audit requests passed to the upstream (which audits them itself,
    /// as the caller), annotated `r8s.io/cache: pass`.
    pub passthrough: bool,
}

impl Default for AuditConfig {
    fn default() -> Self {
        AuditConfig {
            policy_file: None,
            log_path: None,
            log_maxsize: 100,
            log_maxbackup: 100,
            log_maxage: 366,
            log_compress: false,
            log_buffer_size: 10_000,
            webhook_config_file: None,
            webhook_batch_buffer_size: 10_000,
            webhook_batch_max_size: 400,
            webhook_batch_max_wait_seconds: 30.0,
            webhook_batch_throttle_enable: true,
            webhook_batch_throttle_qps: 10.0,
            webhook_batch_throttle_burst: 15,
            webhook_initial_backoff_seconds: 10.0,
            passthrough: false,
        }
    }
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8001)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            shutdown: ShutdownConfig::default(),
            server: ServerConfig::default(),
            upstream: UpstreamConfig::default(),
            cache: CacheConfig::default(),
            read: ReadConfig::default(),
            watch: WatchConfig::default(),
            tls: TlsConfig::default(),
            auth: AuthConfig::default(),
            log: LogConfig::default(),
            audit: AuditConfig::default(),
            persist: PersistConfig::default(),
            node: NodeConfig::default(),
        }
    }
}

impl UpstreamConfig {
    /// `version` as (major, minor): `None` where it is empty or not a
    /// `MAJOR.MINOR` version.
    pub fn assumed_version(&self) -> Option<(u16, u16)> {
        let (major, minor) = self.version.split_once('.')?;
        Some((major.parse().ok()?, minor.parse().ok()?))
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            servers: Vec::new(),
            kubeconfig: None,
            context: None,
            ca_file: None,
            token_file: None,
            token: None,
            insecure_skip_tls_verify: false,
            connect_timeout_seconds: 5.0,
            max_backoff_seconds: 5.0,
            probe_interval_seconds: 5.0,
            probe_timeout_seconds: 10.0,
            compression: true,
            version: String::new(),
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
            format: LogFormat::Text,
        }
    }
}

impl Config {
    /// The authentication mode in effect: as set, or by the listen address.
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.mode.unwrap_or(if self.listen.ip().is_loopback() {
            AuthMode::None
        } else {
            AuthMode::Delegated
        })
    }

    /// The effective configuration as TOML, secrets redacted.
    pub fn to_redacted_toml(&self) -> String {
        let mut c = self.clone();
        if c.upstream.token.is_some() {
            c.upstream.token = Some("<redacted>".into());
        }
        toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}
