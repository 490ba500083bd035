//! Metric names (one place) and the typed calls that record them.

use std::collections::HashSet;
use std::sync::{OnceLock, RwLock};
use std::time::Duration;

use crate::sync::RwLockExt;
use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Requests answered, by verb, resource, HTTP code and cache result (`hit` / `pass`).
pub const REQUESTS_TOTAL: &str = "r8s_requests_total";
/// Request latency to the response head, by verb, resource and cache result.
pub const REQUEST_DURATION_SECONDS: &str = "r8s_request_duration_seconds";
/// Responses from the upstream by HTTP code (`0`: the exchange failed).
pub const UPSTREAM_REQUESTS_TOTAL: &str = "r8s_upstream_requests_total";
/// 1 while the upstream answers, 0 once no configured server accepts connections.
pub const UPSTREAM_UP: &str = "r8s_upstream_up";
/// Time from sending a request upstream to its response head, by server,
/// verb (the HTTP method, as client-go labels it) and code.
pub const UPSTREAM_REQUEST_DURATION_SECONDS: &str = "r8s_upstream_request_duration_seconds";
/// 1 for the upstream server requests go to first (the last that answered), 0 for the others.
pub const UPSTREAM_IN_USE: &str = "r8s_upstream_in_use";

/// 1, labelled with the version and commit r8s was built from.
pub const BUILD_INFO: &str = "r8s_build_info";

/// The commit r8s was built from (`build.rs`: `BUILD_GIT_COMMIT`, git, or "unknown").
pub const COMMIT: &str = env!("BUILD_GIT_COMMIT");

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

/// The `process_*` metrics an operator expects of any daemon (CPU seconds,
/// resident and virtual memory, open and maximum file descriptors, threads,
/// start time), read from /proc by a well-kept collector.
fn process() -> &'static metrics_process::Collector {
    static COLLECTOR: OnceLock<metrics_process::Collector> = OnceLock::new();
    COLLECTOR.get_or_init(metrics_process::Collector::default)
}

/// Refreshes the `process_*` metrics (before a scrape).
pub fn collect_process() {
    process().collect();
}

/// Installs the process-wide recorder once and returns its handle (for `/metrics`).
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let recorder = PrometheusBuilder::new()
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(REQUEST_DURATION_SECONDS.into()),
                    &[
                        0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5,
                        5.0, 10.0, 30.0, 60.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(
                        UPSTREAM_REQUEST_DURATION_SECONDS.into(),
                    ),
                    &[
                        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0,
                        10.0, 30.0, 60.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(WATCH_EVENT_DELIVERY_SECONDS.into()),
                    &[
                        0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
                        0.25, 0.5, 1.0, 5.0, 30.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(WATCH_LAG_EVENTS.into()),
                    &[0.0, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0],
                )
                .expect("bucket list is non-empty")
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(CONSISTENT_PROOF_SECONDS.into()),
                    &[
                        0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0,
                        5.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .set_buckets_for_metric(
                    metrics_exporter_prometheus::Matcher::Full(AUTH_REVIEW_DURATION_SECONDS.into()),
                    &[
                        0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
                    ],
                )
                .expect("bucket list is non-empty")
                .build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; r8s metrics go there");
            }
            metrics::describe_counter!(REQUESTS_TOTAL, "Requests answered by r8s.");
            metrics::describe_histogram!(
                REQUEST_DURATION_SECONDS,
                metrics::Unit::Seconds,
                "Time to the response head."
            );
            metrics::describe_counter!(
                UPSTREAM_REQUESTS_TOTAL,
                "Responses from each upstream server by code."
            );
            metrics::describe_gauge!(UPSTREAM_UP, "Whether each upstream server answers.");
            metrics::describe_histogram!(
                UPSTREAM_REQUEST_DURATION_SECONDS,
                metrics::Unit::Seconds,
                "Time from a request sent upstream to its response head."
            );
            metrics::describe_gauge!(
                UPSTREAM_IN_USE,
                "1 for the upstream server requests go to first."
            );
            metrics::describe_counter!(
                CONSISTENT_READS_TOTAL,
                "Consistent reads of cached resources: proven (from the cache) or passed."
            );
            metrics::describe_counter!(
                CONSISTENT_UPSTREAM_REQUESTS_TOTAL,
                "Requests proofs sent upstream: one-object LISTs and probe watches."
            );
            metrics::describe_histogram!(
                CONSISTENT_PROOF_SECONDS,
                metrics::Unit::Seconds,
                "Time a proven consistent read waited for its proof."
            );
            metrics::describe_gauge!(
                BUILD_INFO,
                "1, labelled with the version and commit r8s was built from."
            );
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "commit" => COMMIT)
                .set(1.0);
            process().describe();
            // Series that count rare events exist from the start at 0, so a
            // rule's rate() over them sees the first event (an absent series
            // has no rate) and dashboards show 0 rather than "no data".
            for name in [
                UPSTREAM_FAILOVERS_TOTAL,
                LIST_REJECTED_TOTAL,
                WATCH_REJECTED_TOTAL,
                WATCH_LOG_TRIMMED_BYTES_TOTAL,
            ] {
                metrics::counter!(name).increment(0);
            }
            for reason in ["no_request", "header_timeout", "write_timeout", "goaway"] {
                metrics::counter!(CONNECTIONS_CLOSED_TOTAL, "reason" => reason).increment(0);
            }
            handle
        })
        .clone()
}

/// Resource label values seen so far; past the cap, new ones become `other`
/// (paths are client input, and labels must stay bounded).
static RESOURCE_LABELS: RwLock<Option<HashSet<String>>> = RwLock::new(None);
const MAX_RESOURCE_LABELS: usize = 256;

/// A resource label, bounded: past 256 distinct values new ones become `other`.
pub fn resource_label(resource: &str) -> String {
    let ok = !resource.is_empty()
        && resource.len() <= 63
        && resource.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'/'
        });
    if !ok {
        return "other".into();
    }
    if let Some(set) = RESOURCE_LABELS.reading().as_ref()
        && set.contains(resource)
    {
        return resource.to_string();
    }
    let mut guard = RESOURCE_LABELS.writing();
    let set = guard.get_or_insert_with(HashSet::new);
    if set.contains(resource) || set.len() < MAX_RESOURCE_LABELS {
        set.insert(resource.to_string());
        resource.to_string()
    } else {
        "other".into()
    }
}

/// Records one answered request.
pub fn request(
    verb: &'static str,
    resource: &str,
    code: u16,
    cache: &'static str,
    elapsed: Duration,
) {
    let resource = resource_label(resource);
    metrics::counter!(REQUESTS_TOTAL, "verb" => verb, "resource" => resource.clone(), "code" => code.to_string(), "cache" => cache)
        .increment(1);
    metrics::histogram!(REQUEST_DURATION_SECONDS, "verb" => verb, "resource" => resource, "cache" => cache)
        .record(elapsed.as_secs_f64());
}

/// An upstream request's method as a label (client-go's `verb`): the
/// methods r8s relays by name, anything else `OTHER` (labels stay bounded).
fn method_label(m: &http::Method) -> &'static str {
    match *m {
        http::Method::GET => "GET",
        http::Method::POST => "POST",
        http::Method::PUT => "PUT",
        http::Method::PATCH => "PATCH",
        http::Method::DELETE => "DELETE",
        http::Method::HEAD => "HEAD",
        http::Method::OPTIONS => "OPTIONS",
        _ => "OTHER",
    }
}

/// Records an exchange with upstream `server`: its response's `code` (`0`
/// when the exchange failed after connecting) and the time to its head.
/// A response means the server is up.
pub fn upstream_response(server: &'static str, method: &http::Method, code: u16, took: Duration) {
    let (verb, code_label) = (method_label(method), code.to_string());
    metrics::counter!(UPSTREAM_REQUESTS_TOTAL, "server" => server, "code" => code_label.clone())
        .increment(1);
    metrics::histogram!(UPSTREAM_REQUEST_DURATION_SECONDS, "server" => server, "verb" => verb, "code" => code_label)
        .record(took.as_secs_f64());
    if code != 0 {
        metrics::gauge!(UPSTREAM_UP, "server" => server).set(1.0);
    }
}

/// Records that upstream `server` accepted no connection.
pub fn upstream_unreachable(server: &'static str) {
    metrics::counter!(UPSTREAM_REQUESTS_TOTAL, "server" => server, "code" => "0").increment(1);
    metrics::gauge!(UPSTREAM_UP, "server" => server).set(0.0);
}

/// Records which of the configured servers requests now go to first.
pub fn upstream_in_use(servers: &[&'static str], in_use: usize) {
    for (i, server) in servers.iter().enumerate() {
        let v = if i == in_use { 1.0 } else { 0.0 };
        metrics::gauge!(UPSTREAM_IN_USE, "server" => *server).set(v);
    }
}

/// Objects in a resource's cache.
pub const CACHE_OBJECTS: &str = "r8s_cache_objects";
/// Bytes a resource's cache holds: objects, and older versions its history and retained versions keep.
pub const CACHE_BYTES: &str = "r8s_cache_bytes";
/// The resource version a cache is at.
pub const CACHE_RESOURCE_VERSION: &str = "r8s_cache_resource_version";
/// 1 once a cache has synced (and while it stays usable), else 0.
pub const CACHE_SYNCED: &str = "r8s_cache_synced";
/// Relists by reason (`expired`, `malformed`, `watch_failed`).
pub const RELISTS_TOTAL: &str = "r8s_reflector_relists_total";
/// Watch streams restarted after ending cleanly.
pub const WATCH_RESTARTS_TOTAL: &str = "r8s_reflector_watch_restarts_total";
/// Upstream watch events by type.
pub const REFLECTOR_EVENTS_TOTAL: &str = "r8s_reflector_events_total";
/// Cached-resource requests by result (`hit`, or `pass` with its reason).
pub const CACHE_REQUESTS_TOTAL: &str = "r8s_cache_requests_total";

/// Which store a series is about: the resource (`v1/pods`, the same label
/// the request series carry) and the encoding it holds (`json`,
/// `protobuf`), as two labels so queries can join or sum on the resource.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StoreLabels {
    /// `group/version/resource` (`v1/pods` for the core group).
    pub resource: String,
    /// `json` or `protobuf`.
    pub encoding: &'static str,
}

impl StoreLabels {
    /// The labels of the store of `resource` (`v1/pods`) holding `encoding`.
    pub fn new(resource: String, encoding: &'static str) -> Self {
        StoreLabels { resource, encoding }
    }
}

impl std::fmt::Display for StoreLabels {
    /// `v1/pods` for the JSON store, `v1/pods (protobuf)` for the other, in logs.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.encoding {
            "json" => f.write_str(&self.resource),
            e => write!(f, "{} ({e})", self.resource),
        }
    }
}

/// A reflector's per-event series, looked up once when it starts: an
/// upstream event then records into handles, where building each labelled
/// key (a label string, a hash, a registry lookup) cost 7 times per event.
pub struct ReflectorSeries {
    objects: metrics::Gauge,
    bytes: metrics::Gauge,
    rv: metrics::Gauge,
    synced: metrics::Gauge,
    log_events: metrics::Gauge,
    log_bytes: metrics::Gauge,
    /// `r8s_reflector_events_total` by type, as [`EVENT_TYPES`] orders them.
    events: [metrics::Counter; 4],
}

/// The upstream event types a reflector applies (an ERROR event ends its watch).
const EVENT_TYPES: [&str; 4] = ["ADDED", "MODIFIED", "DELETED", "BOOKMARK"];

impl ReflectorSeries {
    /// The series of the store labelled `l` (its recorder must be
    /// installed first: handles taken before record nowhere).
    pub fn new(l: &StoreLabels) -> Self {
        let r = || l.resource.clone();
        let e = l.encoding;
        ReflectorSeries {
            objects: metrics::gauge!(CACHE_OBJECTS, "resource" => r(), "encoding" => e),
            bytes: metrics::gauge!(CACHE_BYTES, "resource" => r(), "encoding" => e),
            rv: metrics::gauge!(CACHE_RESOURCE_VERSION, "resource" => r(), "encoding" => e),
            synced: metrics::gauge!(CACHE_SYNCED, "resource" => r(), "encoding" => e),
            log_events: metrics::gauge!(WATCH_LOG_EVENTS, "resource" => r(), "encoding" => e),
            log_bytes: metrics::gauge!(WATCH_LOG_BYTES, "resource" => r(), "encoding" => e),
            events: EVENT_TYPES.map(|t| {
                metrics::counter!(REFLECTOR_EVENTS_TOTAL, "resource" => r(), "encoding" => e, "type" => t)
            }),
        }
    }

    /// Counts an upstream event of type `kind` (one of [`EVENT_TYPES`]).
    pub fn event(&self, kind: &str) {
        if let Some(i) = EVENT_TYPES.iter().position(|t| *t == kind) {
            self.events[i].increment(1);
        }
    }

    /// Records the cache's size and version after a change (`bytes`:
    /// objects and the older versions its history keeps alive), and its
    /// watch log's size.
    pub fn state(&self, objects: usize, rv: u64, bytes: usize, log: (usize, usize)) {
        self.objects.set(objects as f64);
        self.bytes.set(bytes as f64);
        self.rv.set(rv as f64);
        self.synced.set(1.0);
        self.log_events.set(log.0 as f64);
        self.log_bytes.set(log.1 as f64);
    }
}

/// Registers a cache's rare-event series at 0 when its reflector starts
/// (relists, watch resumes, silences, states behind, over budget, watches
/// ended), so alerts on their rate see the first one.
pub fn cache_series(l: &StoreLabels) {
    let (r, e) = (&l.resource, l.encoding);
    for reason in ["expired", "malformed", "diverged"] {
        metrics::counter!(RELISTS_TOTAL, "resource" => r.clone(), "encoding" => e, "reason" => reason)
            .increment(0);
    }
    for name in [
        WATCH_RESTARTS_TOTAL,
        REFLECTOR_SILENT_TOTAL,
        REFLECTOR_BEHIND_TOTAL,
    ] {
        metrics::counter!(name, "resource" => r.clone(), "encoding" => e).increment(0);
    }
    metrics::gauge!(CACHE_OVER_BUDGET, "resource" => r.clone(), "encoding" => e).set(0.0);
    metrics::gauge!(CACHE_SYNCED, "resource" => r.clone(), "encoding" => e).set(0.0);
}

/// Records whether a cache is usable.
pub fn cache_synced(l: &StoreLabels, synced: bool) {
    metrics::gauge!(CACHE_SYNCED, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .set(if synced { 1.0 } else { 0.0 });
}

/// Caches served past `cache.max_staleness_seconds` because `cache.serve_stale` is set.
pub const CACHES_SERVED_STALE: &str = "r8s_caches_served_stale";

/// Upstream silences noticed (no answer in time, or a watch silent past its
/// deadline: a silent partition), after which the reflector reconnects.
pub const REFLECTOR_SILENT_TOTAL: &str = "r8s_reflector_silent_total";
/// Seconds since a cache last heard from its upstream (an event, a
/// bookmark, a response, a watch ending on time).
pub const CACHE_STALENESS_SECONDS: &str = "r8s_cache_staleness_seconds";

/// Records that a cache's upstream went silent.
pub fn reflector_silent(l: &StoreLabels) {
    metrics::counter!(REFLECTOR_SILENT_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .increment(1);
}

/// Upstream states refused because they were older than the cache's (a
/// server behind the one the cache last followed): the cache keeps its
/// state and retries, never going back in time.
pub const REFLECTOR_BEHIND_TOTAL: &str = "r8s_reflector_behind_total";

/// Records an upstream state older than the cache's, refused.
pub fn reflector_behind(l: &StoreLabels) {
    metrics::counter!(REFLECTOR_BEHIND_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .increment(1);
}

/// Times requests were moved off an upstream server that went silent or
/// failed a reflector's request, to the next one.
pub const UPSTREAM_FAILOVERS_TOTAL: &str = "r8s_upstream_failovers_total";

/// Records a failover off an unusable server.
pub fn upstream_failover() {
    metrics::counter!(UPSTREAM_FAILOVERS_TOTAL).increment(1);
}

/// Records how long a cache has gone without word from its upstream.
pub fn cache_staleness(l: &StoreLabels, since: Duration) {
    metrics::gauge!(CACHE_STALENESS_SECONDS, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .set(since.as_secs_f64());
}

/// Sets how many caches are served past `cache.max_staleness_seconds`
/// (`cache.serve_stale`).
pub fn caches_served_stale(n: usize) {
    metrics::gauge!(CACHES_SERVED_STALE).set(n as f64);
}

/// Snapshots of a cache written to `persist.dir`, by `result`: `ok`, or
/// `error` (a full disk, a permission: logged, serving unaffected).
pub const PERSIST_WRITES_TOTAL: &str = "r8s_persist_writes_total";
/// Bytes of each cache's last snapshot written.
pub const PERSIST_SNAPSHOT_BYTES: &str = "r8s_persist_snapshot_bytes";
/// Snapshots read at start, by `result`: `loaded`, or why one was ignored
/// (`corrupt`, `truncated`, `foreign`, `format`, `unreadable`).
pub const PERSIST_LOADS_TOTAL: &str = "r8s_persist_loads_total";
/// Checks of a cache against its upstream, by `result`: `equal`,
/// `transient` (a difference gone at the second look), `diverged` (the cache
/// relists), `inconclusive` (no comparable state: the cache moved on or is
/// not serving, the upstream failed).
pub const CACHE_CONSISTENCY_CHECKS_TOTAL: &str = "r8s_cache_consistency_checks_total";

/// Registers a saved cache's persistence series at 0 (rare events, so a
/// rule's rate() over them sees the first).
pub fn persist_series(l: &StoreLabels) {
    for result in ["ok", "error"] {
        metrics::counter!(PERSIST_WRITES_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
            .increment(0);
    }
    for result in [
        "loaded",
        "corrupt",
        "truncated",
        "foreign",
        "format",
        "unreadable",
    ] {
        metrics::counter!(PERSIST_LOADS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
            .increment(0);
    }
}

/// Registers a checked cache's consistency series at 0.
pub fn consistency_series(l: &StoreLabels) {
    for result in ["equal", "transient", "diverged", "inconclusive"] {
        metrics::counter!(CACHE_CONSISTENCY_CHECKS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
            .increment(0);
    }
}

/// Records a snapshot written (`bytes`) or failed (`None`).
pub fn persist_write(l: &StoreLabels, bytes: Option<u64>) {
    let result = if bytes.is_some() { "ok" } else { "error" };
    metrics::counter!(PERSIST_WRITES_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
        .increment(1);
    if let Some(b) = bytes {
        metrics::gauge!(PERSIST_SNAPSHOT_BYTES, "resource" => l.resource.clone(), "encoding" => l.encoding)
            .set(b as f64);
    }
}

/// Records a snapshot read at start and what came of it.
pub fn persist_load(l: &StoreLabels, result: &'static str) {
    metrics::counter!(PERSIST_LOADS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
        .increment(1);
}

/// Records a consistency check of a cache.
pub fn consistency_check(l: &StoreLabels, result: &'static str) {
    metrics::counter!(CACHE_CONSISTENCY_CHECKS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "result" => result)
        .increment(1);
}

/// Records a relist.
pub fn relist(l: &StoreLabels, reason: &'static str) {
    metrics::counter!(RELISTS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding, "reason" => reason)
        .increment(1);
}

/// Records a watch restart.
pub fn watch_restart(l: &StoreLabels) {
    metrics::counter!(WATCH_RESTARTS_TOTAL, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .increment(1);
}

/// `r8s_cache_requests_total` handles by (resource, verb, result).
static CACHE_HANDLES: OnceLock<
    dashmap::DashMap<(String, &'static str, &'static str), metrics::Counter>,
> = OnceLock::new();

/// Records a request for a cached resource: `hit`, or the reason it passed
/// through. `resource` is a configured cache's label (a bounded set).
pub fn cache_request(resource: &str, verb: &'static str, result: &'static str) {
    let map = CACHE_HANDLES.get_or_init(dashmap::DashMap::new);
    let key = (resource.to_string(), verb, result);
    if let Some(c) = map.get(&key) {
        c.increment(1);
        return;
    }
    let c = metrics::counter!(CACHE_REQUESTS_TOTAL, "resource" => resource.to_string(), "verb" => verb, "result" => result);
    c.increment(1);
    map.insert(key, c);
}

/// Consistent reads (no `resourceVersion`) of cached resources r8s tried to
/// prove, by resource, `kind` (`streaming_list`, `list`) and `result`
/// (`proven`: answered from the cache; `passed`: sent to the upstream).
pub const CONSISTENT_READS_TOTAL: &str = "r8s_consistent_reads_total";
/// Time a proven consistent read waited for its proof, by resource and kind.
pub const CONSISTENT_PROOF_SECONDS: &str = "r8s_consistent_read_proof_seconds";

/// What proofs cost the upstream, by resource and `step`: `list` (the
/// one-object LISTs reading its version, one per round of requests) and
/// `probe` (the watches waiting for its bookmark).
pub const CONSISTENT_UPSTREAM_REQUESTS_TOTAL: &str = "r8s_consistent_upstream_requests_total";

/// Records a request a proof sent upstream (`list` or `probe`).
pub fn consistent_upstream_request(resource: &str, step: &'static str) {
    metrics::counter!(CONSISTENT_UPSTREAM_REQUESTS_TOTAL, "resource" => resource.to_string(), "step" => step)
        .increment(1);
}

/// Records a consistent read's proof: proven (and how long it took) or passed.
pub fn consistent_read(resource: &str, kind: &'static str, proven: bool, waited: Duration) {
    let result = if proven { "proven" } else { "passed" };
    metrics::counter!(CONSISTENT_READS_TOTAL, "resource" => resource.to_string(), "kind" => kind, "result" => result)
        .increment(1);
    if proven {
        metrics::histogram!(CONSISTENT_PROOF_SECONDS, "resource" => resource.to_string(), "kind" => kind)
            .record(waited.as_secs_f64());
    }
}

/// 1 while a resource's cache is evicted for exceeding its byte budget.
pub const CACHE_OVER_BUDGET: &str = "r8s_cache_over_budget";

/// Records whether a cache is over its byte budget.
pub fn over_budget(l: &StoreLabels, over: bool) {
    metrics::gauge!(CACHE_OVER_BUDGET, "resource" => l.resource.clone(), "encoding" => l.encoding)
        .set(if over { 1.0 } else { 0.0 });
}

/// Watches served from a resource's cache right now.
pub const WATCHERS: &str = "r8s_watchers";

/// A cached watch started (+1) or ended (-1).
pub fn watchers(resource: &str, delta: i64) {
    metrics::gauge!(WATCHERS, "resource" => resource.to_string()).increment(delta as f64);
}

/// Watch events written to clients by resource and type (BOOKMARK included).
pub const WATCH_EVENTS_SENT_TOTAL: &str = "r8s_watch_events_sent_total";
/// From an upstream event's arrival at r8s to its hand-off to a client's
/// connection (sampled: 1 in 16 events, every watcher that gets it).
pub const WATCH_EVENT_DELIVERY_SECONDS: &str = "r8s_watch_event_delivery_seconds";
/// Events a watcher's cursor is behind the log's head (sampled once per watcher per second).
pub const WATCH_LAG_EVENTS: &str = "r8s_watch_lag_events";
/// Cached watches ended, by reason (`timeout`, `client`, `too_old`, `too_new`, `shutdown`, `error`).
pub const WATCH_TERMINATED_TOTAL: &str = "r8s_watch_terminated_total";
/// Events in a resource's watch log.
pub const WATCH_LOG_EVENTS: &str = "r8s_watch_log_events";
/// Bytes a resource's watch log keeps alive.
pub const WATCH_LOG_BYTES: &str = "r8s_watch_log_bytes";
/// Watch log bytes dropped (oldest events first) to keep a cache within
/// `cache.max_bytes_per_resource` / `cache.max_bytes_total`.
pub const WATCH_LOG_TRIMMED_BYTES_TOTAL: &str = "r8s_watch_log_trimmed_bytes_total";

/// Records watch log bytes dropped for the byte budget.
pub fn watch_log_trimmed(bytes: usize) {
    metrics::counter!(WATCH_LOG_TRIMMED_BYTES_TOTAL).increment(bytes as u64);
}
/// Watches answered 429 because `watch.max_watchers` were open.
pub const WATCH_REJECTED_TOTAL: &str = "r8s_watch_rejected_total";

/// Why a cached watch ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WatchEnd {
    /// Its timeout passed.
    Timeout,
    /// The client went away.
    Client,
    /// The log's tail passed its cursor.
    TooOld,
    /// A streaming list of a version the cache did not reach in time.
    TooNew,
    /// r8s is shutting down (drained).
    Shutdown,
    /// r8s could not write the stream (compressing it failed).
    Error,
}

impl WatchEnd {
    /// Every reason, for the series registered at 0.
    pub const ALL: [WatchEnd; 6] = [
        WatchEnd::Timeout,
        WatchEnd::Client,
        WatchEnd::TooOld,
        WatchEnd::TooNew,
        WatchEnd::Shutdown,
        WatchEnd::Error,
    ];

    fn as_str(self) -> &'static str {
        match self {
            WatchEnd::Timeout => "timeout",
            WatchEnd::Client => "client",
            WatchEnd::TooOld => "too_old",
            WatchEnd::TooNew => "too_new",
            WatchEnd::Shutdown => "shutdown",
            WatchEnd::Error => "error",
        }
    }
}

/// A watch event's type, as the `type` label of the event counters.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EventType {
    /// An object added (or entering a watcher's selector).
    Added,
    /// An object modified.
    Modified,
    /// An object deleted (or leaving a watcher's selector).
    Deleted,
    /// A bookmark.
    Bookmark,
}

impl EventType {
    /// Every type, for the series registered at 0.
    pub const ALL: [EventType; 4] = [
        EventType::Added,
        EventType::Modified,
        EventType::Deleted,
        EventType::Bookmark,
    ];

    /// Its label value, as the apiserver names the type.
    pub fn as_str(self) -> &'static str {
        match self {
            EventType::Added => "ADDED",
            EventType::Modified => "MODIFIED",
            EventType::Deleted => "DELETED",
            EventType::Bookmark => "BOOKMARK",
        }
    }
}

/// Events counted by type between two flushes to their counters (a
/// watcher counts per event, and adds to the shared counters in batches).
#[derive(Debug, Default)]
pub struct EventCounts([u64; 4]);

impl EventCounts {
    /// Counts `n` events of type `t`.
    pub fn add(&mut self, t: EventType, n: u64) {
        self.0[t as usize] += n;
    }
}

/// One resource's watch metric handles, resolved once (the per-event path
/// only touches atomics).
pub struct WatchMetrics {
    /// By event type, as [`EventType::ALL`] orders them.
    sent: [metrics::Counter; 4],
    /// Delivery latency.
    pub delivery: metrics::Histogram,
    /// Cursor lag.
    pub lag: metrics::Histogram,
    watchers: metrics::Gauge,
    resource: String,
}

impl WatchMetrics {
    /// Handles for `resource` (call after [`install`]).
    pub fn new(resource: &str) -> Self {
        let r = resource.to_string();
        for why in WatchEnd::ALL {
            metrics::counter!(WATCH_TERMINATED_TOTAL, "resource" => r.clone(), "reason" => why.as_str())
                .increment(0);
        }
        let sent = EventType::ALL.map(
            |t| metrics::counter!(WATCH_EVENTS_SENT_TOTAL, "resource" => r.clone(), "type" => t.as_str()),
        );
        WatchMetrics {
            sent,
            delivery: metrics::histogram!(WATCH_EVENT_DELIVERY_SECONDS, "resource" => r.clone()),
            lag: metrics::histogram!(WATCH_LAG_EVENTS, "resource" => r.clone()),
            watchers: metrics::gauge!(WATCHERS, "resource" => r.clone()),
            resource: r,
        }
    }

    /// Adds the events `counts` holds to the counters, and empties it.
    pub fn sent(&self, counts: &mut EventCounts) {
        for (c, n) in self.sent.iter().zip(std::mem::take(&mut counts.0)) {
            if n > 0 {
                c.increment(n);
            }
        }
    }

    /// A watcher started.
    pub fn started(&self) {
        self.watchers.increment(1.0);
    }

    /// A watcher ended.
    pub fn ended(&self, why: WatchEnd) {
        self.watchers.decrement(1.0);
        metrics::counter!(WATCH_TERMINATED_TOTAL, "resource" => self.resource.clone(), "reason" => why.as_str())
            .increment(1);
    }
}

/// Watch events encoded (JSON lines, protobuf frames) since start, by
/// encoding, process-wide: one per event in the logs, plus the ADDED/DELETED
/// forms of objects crossing a watcher's selector and metadata-only forms;
/// none per watcher.
pub const WATCH_ENCODINGS_TOTAL: &str = "r8s_watch_encodings_total";

/// Publishes an encoding's count (`json`, `protobuf`; read from the watch
/// logs' counters at scrape time).
pub fn watch_encodings(encoding: &'static str, total: u64) {
    metrics::counter!(WATCH_ENCODINGS_TOTAL, "encoding" => encoding).absolute(total);
}

/// Items of gzip lists by how they were compressed: `reused` (in a run
/// compressed for an earlier list), `compressed` (in a run compressed for
/// this one, kept for the next), `live` (for this list only: heads, page
/// starts, selectors' sparse matches), process-wide.
pub const LIST_GZIP_ITEMS_TOTAL: &str = "r8s_list_gzip_items_total";

/// Bytes of the compressed runs gzip lists keep (all caches): the memory
/// compressed lists take.
pub const LIST_GZIP_RUN_BYTES: &str = "r8s_list_gzip_run_bytes";

/// Publishes the gzip lists' counters and the runs' bytes (read at scrape time).
pub fn list_gzip(items: [(&'static str, u64); 3], run_bytes: usize) {
    for (how, n) in items {
        metrics::counter!(LIST_GZIP_ITEMS_TOTAL, "how" => how).absolute(n);
    }
    metrics::gauge!(LIST_GZIP_RUN_BYTES).set(run_bytes as f64);
}

/// Client connections r8s closed for a bound, by reason: `no_request`
/// (nothing sent within `server.header_read_timeout_seconds`),
/// `header_timeout` (headers not finished within it), `write_timeout`
/// (nothing written for `server.write_timeout_seconds`: the client stopped
/// reading), `goaway` (an HTTP/2 connection sent GOAWAY for
/// `server.goaway_chance`; its open streams finish first).
pub const CONNECTIONS_CLOSED_TOTAL: &str = "r8s_connections_closed_total";

/// Records a client connection closed for a bound, or by GOAWAY.
pub fn connection_closed(reason: &'static str) {
    metrics::counter!(CONNECTIONS_CLOSED_TOTAL, "reason" => reason).increment(1);
}

/// Large lists refused (429) at `read.max_inflight_lists`.
pub const LIST_REJECTED_TOTAL: &str = "r8s_list_rejected_total";

/// Records a large list refused for `read.max_inflight_lists`.
pub fn list_rejected() {
    metrics::counter!(LIST_REJECTED_TOTAL).increment(1);
}

/// Records a watch refused for `watch.max_watchers`.
pub fn watch_rejected() {
    metrics::counter!(WATCH_REJECTED_TOTAL).increment(1);
}

/// Requests authenticated (`auth.mode = "delegated"`), by result
/// (`authenticated`, `certificate`, `anonymous`, `rejected`, `error`) and
/// whether a cached token review answered.
pub const AUTHN_TOTAL: &str = "r8s_authn_total";
/// Cache reads authorized, by decision (`allowed`, `denied`, `error`) and
/// whether a cached access review answered.
pub const AUTHZ_TOTAL: &str = "r8s_authz_total";
/// Expired allowing reviews reused because the upstream could not review
/// (`auth.stale_if_error_seconds`), by kind (`token`, `access`).
pub const AUTH_STALE_TOTAL: &str = "r8s_auth_stale_decisions_total";
/// Time of TokenReview / SubjectAccessReview calls to the upstream, by review (`token`, `access`).
pub const AUTH_REVIEW_DURATION_SECONDS: &str = "r8s_auth_review_duration_seconds";

/// The auth counters, registered once so the per-request path only
/// increments a handle (no registry lookup per request).
pub struct AuthCounters {
    authn: Vec<(&'static str, &'static str, metrics::Counter)>,
    authz: Vec<(&'static str, &'static str, metrics::Counter)>,
    stale: [metrics::Counter; 2],
}

const CACHED: [&str; 2] = ["true", "false"];

impl AuthCounters {
    /// Registers every `result`/`decision` × `cached` series.
    pub fn new() -> Self {
        let mut authn = Vec::new();
        for r in [
            "authenticated",
            "certificate",
            "anonymous",
            "rejected",
            "error",
        ] {
            for c in CACHED {
                authn.push((
                    r,
                    c,
                    metrics::counter!(AUTHN_TOTAL, "result" => r, "cached" => c),
                ));
            }
        }
        let mut authz = Vec::new();
        for d in ["allowed", "denied", "error"] {
            for c in CACHED {
                authz.push((
                    d,
                    c,
                    metrics::counter!(AUTHZ_TOTAL, "decision" => d, "cached" => c),
                ));
            }
        }
        let stale = ["token", "access"].map(|k| metrics::counter!(AUTH_STALE_TOTAL, "kind" => k));
        AuthCounters {
            authn,
            authz,
            stale,
        }
    }

    /// Records one expired review reused in an outage (`token` or `access`).
    pub fn stale(&self, access: bool) {
        self.stale[usize::from(access)].increment(1);
    }

    /// Records one authentication.
    pub fn authn(&self, result: &'static str, cached: &'static str) {
        bump(&self.authn, result, cached);
    }

    /// Records one authorization decision.
    pub fn authz(&self, decision: &'static str, cached: &'static str) {
        bump(&self.authz, decision, cached);
    }
}

impl Default for AuthCounters {
    fn default() -> Self {
        Self::new()
    }
}

fn bump(series: &[(&'static str, &'static str, metrics::Counter)], a: &str, b: &str) {
    if let Some((_, _, c)) = series.iter().find(|(x, y, _)| *x == a && *y == b) {
        c.increment(1);
    }
}

/// Records one review call to the upstream.
pub fn auth_review(review: &'static str, elapsed: Duration) {
    metrics::histogram!(AUTH_REVIEW_DURATION_SECONDS, "review" => review)
        .record(elapsed.as_secs_f64());
}
