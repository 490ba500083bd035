//! The process's recorder: installed once, every metric described (its
//! HELP), the histograms' buckets, and the process-wide series (registered
//! at 0 when it is installed, recorded through typed functions).

use std::sync::OnceLock;
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram};
use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use super::labels::{CacheStarted, ConnectionClosed, GzipItems, Review};
use super::names::{self, Kind};

/// The commit r8s was built from (`build.rs`: `BUILD_GIT_COMMIT`, git, or "unknown").
pub const COMMIT: &str = env!("BUILD_GIT_COMMIT");

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();
static GLOBAL: OnceLock<Global> = OnceLock::new();

/// Whether the recorder is installed: handles taken before record nowhere,
/// so nothing keeps one taken earlier.
pub fn installed() -> bool {
    HANDLE.get().is_some()
}

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

/// Each histogram's buckets, in seconds (or events).
const BUCKETS: &[(&str, &[f64])] = &[
    (
        names::REQUEST_DURATION_SECONDS,
        &[
            0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
            30.0, 60.0,
        ],
    ),
    (
        names::UPSTREAM_REQUEST_DURATION_SECONDS,
        &[
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0,
            60.0,
        ],
    ),
    (
        names::WATCH_EVENT_DELIVERY_SECONDS,
        &[
            0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
            5.0, 30.0,
        ],
    ),
    (
        names::UPSTREAM_CATCH_UP_SECONDS,
        &[0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 10.0, 30.0, 60.0, 120.0],
    ),
    (
        names::WATCH_LAG_EVENTS,
        &[0.0, 1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0],
    ),
    (
        names::CONSISTENT_PROOF_SECONDS,
        &[
            0.001, 0.005, 0.025, 0.1, 0.25, 0.5, 0.75, 1.0, 1.25, 1.5, 2.0, 2.5, 3.0, 5.0,
        ],
    ),
    (
        names::AUTH_REVIEW_DURATION_SECONDS,
        &[
            0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 5.0,
        ],
    ),
];

/// Installs the process-wide recorder once and returns its handle (for
/// `/metrics`): every metric described, the process-wide series registered.
pub fn install() -> PrometheusHandle {
    HANDLE
        .get_or_init(|| {
            let mut builder = PrometheusBuilder::new();
            for (name, buckets) in BUCKETS {
                builder = builder
                    .set_buckets_for_metric(Matcher::Full((*name).into()), buckets)
                    .expect("bucket lists are not empty");
            }
            let recorder = builder.build_recorder();
            let handle = recorder.handle();
            if metrics::set_global_recorder(recorder).is_err() {
                tracing::warn!("a metrics recorder was already installed; r8s metrics go there");
            }
            for (name, kind, help) in names::ALL {
                match kind {
                    Kind::Counter => metrics::describe_counter!(*name, *help),
                    Kind::Gauge => metrics::describe_gauge!(*name, *help),
                    Kind::Histogram => metrics::describe_histogram!(*name, *help),
                }
            }
            metrics::gauge!(names::BUILD_INFO, "version" => env!("CARGO_PKG_VERSION"), "commit" => COMMIT)
                .set(1.0);
            process().describe();
            let _ = GLOBAL.set(Global::new());
            handle
        })
        .clone()
}

/// The process-wide series, registered at 0.
struct Global {
    failovers: Counter,
    catch_up: Histogram,
    lists_rejected: Counter,
    watches_rejected: Counter,
    log_trimmed: Counter,
    connections_closed: Vec<Counter>,
    served_stale: Gauge,
    /// By [`CacheStarted::ALL`].
    caches: Vec<Gauge>,
    /// By encoding: json, protobuf.
    encodings: [Counter; 2],
    gzip_items: Vec<Counter>,
    gzip_run_bytes: Gauge,
    /// By [`Review::ALL`].
    reviews: Vec<Histogram>,
}

impl Global {
    fn new() -> Self {
        let zero = |c: Counter| {
            c.increment(0);
            c
        };
        Global {
            failovers: zero(metrics::counter!(names::UPSTREAM_FAILOVERS_TOTAL)),
            catch_up: metrics::histogram!(names::UPSTREAM_CATCH_UP_SECONDS),
            lists_rejected: zero(metrics::counter!(names::LIST_REJECTED_TOTAL)),
            watches_rejected: zero(metrics::counter!(names::WATCH_REJECTED_TOTAL)),
            log_trimmed: zero(metrics::counter!(names::WATCH_LOG_TRIMMED_BYTES_TOTAL)),
            connections_closed: ConnectionClosed::ALL
                .iter()
                .map(|r| {
                    zero(metrics::counter!(names::CONNECTIONS_CLOSED_TOTAL, "reason" => r.as_str()))
                })
                .collect(),
            served_stale: metrics::gauge!(names::CACHES_SERVED_STALE),
            caches: CacheStarted::ALL
                .iter()
                .map(|s| {
                    let g = metrics::gauge!(names::CACHES, "started" => s.as_str());
                    g.set(0.0);
                    g
                })
                .collect(),
            encodings: ["json", "protobuf"]
                .map(|e| metrics::counter!(names::WATCH_ENCODINGS_TOTAL, "encoding" => e)),
            gzip_items: GzipItems::ALL
                .iter()
                .map(|h| metrics::counter!(names::LIST_GZIP_ITEMS_TOTAL, "how" => h.as_str()))
                .collect(),
            gzip_run_bytes: metrics::gauge!(names::LIST_GZIP_RUN_BYTES),
            reviews: Review::ALL
                .iter()
                .map(|k| metrics::histogram!(names::AUTH_REVIEW_DURATION_SECONDS, "review" => k.as_str()))
                .collect(),
        }
    }
}

/// Records through the process-wide series, once installed.
fn global(record: impl FnOnce(&Global)) {
    if let Some(g) = GLOBAL.get() {
        record(g);
    }
}

/// Records a failover off an unusable upstream server.
pub fn upstream_failover() {
    global(|g| g.failovers.increment(1));
}

/// Records how long a cache took to be current after the upstream's return.
pub fn catch_up(took: std::time::Duration) {
    global(|g| g.catch_up.record(took.as_secs_f64()));
}

/// Records a large list refused for `read.max_inflight_lists`.
pub fn list_rejected() {
    global(|g| g.lists_rejected.increment(1));
}

/// Records a watch refused for `watch.max_watchers`.
pub fn watch_rejected() {
    global(|g| g.watches_rejected.increment(1));
}

/// Records watch log bytes dropped for the byte budget.
pub fn watch_log_trimmed(bytes: usize) {
    global(|g| g.log_trimmed.increment(bytes as u64));
}

/// Records a client connection closed for a bound, or by GOAWAY.
pub fn connection_closed(why: ConnectionClosed) {
    global(|g| g.connections_closed[why.index()].increment(1));
}

/// Counts a cache alive from its launch (`+1.0`) to its retirement (`-1.0`).
pub fn cache_alive(started: CacheStarted, change: f64) {
    global(|g| g.caches[started.index()].increment(change));
}

/// Sets how many caches are served past `cache.max_staleness_seconds`.
pub fn caches_served_stale(n: usize) {
    global(|g| g.served_stale.set(n as f64));
}

/// Publishes the watch events encoded so far, JSON and protobuf (read from
/// the watch logs' counters at scrape time).
pub fn watch_encodings(json: u64, protobuf: u64) {
    global(|g| {
        g.encodings[0].absolute(json);
        g.encodings[1].absolute(protobuf);
    });
}

/// Publishes the gzip lists' item counts (in [`GzipItems::ALL`]'s order)
/// and the runs' bytes (read at scrape time).
pub fn list_gzip(items: [u64; 3], run_bytes: usize) {
    global(|g| {
        for (c, n) in g.gzip_items.iter().zip(items) {
            c.absolute(n);
        }
        g.gzip_run_bytes.set(run_bytes as f64);
    });
}

/// Records one review call to the upstream.
pub fn auth_review(review: Review, took: Duration) {
    global(|g| g.reviews[review.index()].record(seconds(took)));
}

/// How long a histogram sample is, in its unit.
pub(super) fn seconds(d: Duration) -> f64 {
    d.as_secs_f64()
}
