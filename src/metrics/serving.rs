//! The series of serving: requests (by verb, resource, code, cache), cached
//! resources' requests and watches, consistent reads' proofs, auth, and
//! the upstream's answers. Handles are made once: per resource or
//! reviewer when made (every label value at 0), or, where a label comes
//! with the request (a resource path, a code, a server), looked up once
//! per value in a [`Family`].

use std::hash::Hash;
use std::sync::OnceLock;
use std::time::Duration;

use dashmap::DashMap;
use metrics::{Counter, Gauge, Histogram};

use super::labels::{
    Authn, Authz, Cached, ConsistentRead, EventType, ProofStep, Proven, Review, WatchEnd,
    method_label, resource_label,
};
use super::names;
use super::recorder::{installed, seconds};

/// Handles by label values, each looked up once (cached only once the
/// recorder is installed: a handle taken before records nowhere).
pub struct Family<K, H> {
    handles: OnceLock<DashMap<K, H>>,
}

impl<K: Eq + Hash, H: Clone> Family<K, H> {
    /// An empty family.
    pub const fn new() -> Self {
        Family {
            handles: OnceLock::new(),
        }
    }

    /// The handles of `key`, made by `make` the first time.
    pub fn get(&self, key: K, make: impl FnOnce(&K) -> H) -> H {
        if !installed() {
            return make(&key);
        }
        let map = self.handles.get_or_init(DashMap::new);
        if let Some(h) = map.get(&key) {
            return h.clone();
        }
        let h = make(&key);
        map.insert(key, h.clone());
        h
    }
}

impl<K: Eq + Hash, H: Clone> Default for Family<K, H> {
    fn default() -> Self {
        Self::new()
    }
}

/// `r8s_requests_total` and its latency, by (verb, resource, code, cache).
static REQUESTS: Family<(&'static str, String, u16, &'static str), (Counter, Histogram)> =
    Family::new();

/// Records one answered request: its verb, resource (bounded by
/// [`resource_label`]), code, where it was answered (`hit`, `pass`,
/// `refused`) and the time to its response head.
pub fn request(verb: &'static str, resource: &str, code: u16, cache: &'static str, took: Duration) {
    let key = (verb, resource_label(resource), code, cache);
    let (count, latency) = REQUESTS.get(key, |(verb, resource, code, cache)| {
        (
            metrics::counter!(names::REQUESTS_TOTAL, "verb" => *verb, "resource" => resource.clone(), "code" => code.to_string(), "cache" => *cache),
            metrics::histogram!(names::REQUEST_DURATION_SECONDS, "verb" => *verb, "resource" => resource.clone(), "cache" => *cache),
        )
    });
    count.increment(1);
    latency.record(seconds(took));
}

/// `r8s_cache_requests_total` by (resource, verb, result).
static CACHE_REQUESTS: Family<(String, &'static str, &'static str), Counter> = Family::new();

/// Records a request for a cached resource: `hit`, `refused`, or the reason
/// it passed through. `resource` is a configured cache's label (a bounded set).
pub fn cache_request(resource: &str, verb: &'static str, result: &'static str) {
    CACHE_REQUESTS
        .get((resource.to_string(), verb, result), |(r, verb, result)| {
            metrics::counter!(names::CACHE_REQUESTS_TOTAL, "resource" => r.clone(), "verb" => *verb, "result" => *result)
        })
        .increment(1);
}

/// One upstream server's series.
#[derive(Clone)]
struct ServerSeries {
    up: Gauge,
    in_use: Gauge,
    unreachable: Counter,
}

static SERVERS: Family<&'static str, ServerSeries> = Family::new();
/// An upstream server's responses by (server, verb, code).
static RESPONSES: Family<(&'static str, &'static str, u16), (Counter, Histogram)> = Family::new();

fn server(name: &'static str) -> ServerSeries {
    SERVERS.get(name, |s| ServerSeries {
        up: metrics::gauge!(names::UPSTREAM_UP, "server" => *s),
        in_use: metrics::gauge!(names::UPSTREAM_IN_USE, "server" => *s),
        unreachable: metrics::counter!(names::UPSTREAM_REQUESTS_TOTAL, "server" => *s, "code" => "0"),
    })
}

/// Records an exchange with upstream `server`: its response's `code` (`0`
/// when the exchange failed after connecting) and the time to its head.
/// A response means the server is up.
pub fn upstream_response(
    server_name: &'static str,
    method: &http::Method,
    code: u16,
    took: Duration,
) {
    let (count, latency) = RESPONSES.get((server_name, method_label(method), code), |(s, verb, code)| {
        (
            metrics::counter!(names::UPSTREAM_REQUESTS_TOTAL, "server" => *s, "code" => code.to_string()),
            metrics::histogram!(names::UPSTREAM_REQUEST_DURATION_SECONDS, "server" => *s, "verb" => *verb, "code" => code.to_string()),
        )
    });
    count.increment(1);
    latency.record(seconds(took));
    if code != 0 {
        server(server_name).up.set(1.0);
    }
}

/// Records that upstream `server` accepted no connection.
pub fn upstream_unreachable(server_name: &'static str) {
    let s = server(server_name);
    s.unreachable.increment(1);
    s.up.set(0.0);
}

/// Records which of the configured servers requests now go to first.
pub fn upstream_in_use(servers: &[&'static str], in_use: usize) {
    for (i, name) in servers.iter().enumerate() {
        server(name).in_use.set(if i == in_use { 1.0 } else { 0.0 });
    }
}

/// Events counted by type between two flushes to their counters (a
/// watcher counts per event, and adds to the shared counters in batches).
#[derive(Debug, Default)]
pub struct EventCounts([u64; 4]);

impl EventCounts {
    /// Counts `n` events of type `t`.
    pub fn add(&mut self, t: EventType, n: u64) {
        self.0[t.index()] += n;
    }
}

/// One resource's watch series, made once (the per-event path only
/// touches atomics).
pub struct WatchMetrics {
    /// By [`EventType::ALL`].
    sent: Vec<Counter>,
    /// By [`WatchEnd::ALL`].
    ended: Vec<Counter>,
    /// Delivery latency.
    pub delivery: Histogram,
    /// Cursor lag.
    pub lag: Histogram,
    watchers: Gauge,
    shards: Gauge,
}

impl WatchMetrics {
    /// The series of `resource`, every end reason at 0.
    pub fn new(resource: &str) -> Self {
        let r = || resource.to_string();
        WatchMetrics {
            sent: EventType::ALL
                .iter()
                .map(|t| metrics::counter!(names::WATCH_EVENTS_SENT_TOTAL, "resource" => r(), "type" => t.as_str()))
                .collect(),
            ended: WatchEnd::ALL
                .iter()
                .map(|why| {
                    let c = metrics::counter!(names::WATCH_TERMINATED_TOTAL, "resource" => r(), "reason" => why.as_str());
                    c.increment(0);
                    c
                })
                .collect(),
            delivery: metrics::histogram!(names::WATCH_EVENT_DELIVERY_SECONDS, "resource" => r()),
            lag: metrics::histogram!(names::WATCH_LAG_EVENTS, "resource" => r()),
            watchers: metrics::gauge!(names::WATCHERS, "resource" => r()),
            shards: metrics::gauge!(names::WATCH_SHARDS, "resource" => r()),
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

    /// A watcher started (`sharded`: limited to a shard by a `shardSelector`).
    pub fn started(&self, sharded: bool) {
        self.watchers.increment(1.0);
        if sharded {
            self.shards.increment(1.0);
        }
    }

    /// A watcher ended (`sharded` as it started).
    pub fn ended(&self, why: WatchEnd, sharded: bool) {
        self.watchers.decrement(1.0);
        if sharded {
            self.shards.decrement(1.0);
        }
        self.ended[why.index()].increment(1);
    }
}

/// One resource's proof series.
pub struct ProofSeries {
    /// By [`ConsistentRead::ALL`], then [`Proven::ALL`].
    reads: Vec<Vec<Counter>>,
    /// By [`ConsistentRead::ALL`].
    waited: Vec<Histogram>,
    /// By [`ProofStep::ALL`].
    upstream: Vec<Counter>,
    /// Proofs that failed.
    failures: Counter,
}

impl ProofSeries {
    /// The series of `resource`, every count at 0.
    pub fn new(resource: &str) -> Self {
        let r = || resource.to_string();
        let zero = |c: Counter| {
            c.increment(0);
            c
        };
        ProofSeries {
            reads: ConsistentRead::ALL
                .iter()
                .map(|k| {
                    Proven::ALL
                        .iter()
                        .map(|p| zero(metrics::counter!(names::CONSISTENT_READS_TOTAL, "resource" => r(), "kind" => k.as_str(), "result" => p.as_str())))
                        .collect()
                })
                .collect(),
            waited: ConsistentRead::ALL
                .iter()
                .map(|k| metrics::histogram!(names::CONSISTENT_PROOF_SECONDS, "resource" => r(), "kind" => k.as_str()))
                .collect(),
            upstream: ProofStep::ALL
                .iter()
                .map(|s| zero(metrics::counter!(names::CONSISTENT_UPSTREAM_REQUESTS_TOTAL, "resource" => r(), "step" => s.as_str())))
                .collect(),
            failures: zero(metrics::counter!(names::CONSISTENT_PROOF_FAILURES_TOTAL, "resource" => r())),
        }
    }

    /// Records a consistent read: proven (after `waited`) or passed.
    pub fn read(&self, kind: ConsistentRead, proven: bool, waited: Duration) {
        let result = if proven {
            Proven::Proven
        } else {
            Proven::Passed
        };
        self.reads[kind.index()][result.index()].increment(1);
        if proven {
            self.waited[kind.index()].record(seconds(waited));
        }
    }

    /// Records a request a proof sent upstream.
    pub fn upstream(&self, step: ProofStep) {
        self.upstream[step.index()].increment(1);
    }

    /// Records a failed proof.
    pub fn failed(&self) {
        self.failures.increment(1);
    }
}

/// The auth series, made once so the per-request path only increments a
/// handle (no registry lookup per request).
pub struct AuthCounters {
    /// By [`Authn::ALL`], then [`Cached::ALL`].
    authn: Vec<Vec<Counter>>,
    /// By [`Authz::ALL`], then [`Cached::ALL`].
    authz: Vec<Vec<Counter>>,
    /// By [`Review::ALL`].
    stale: Vec<Counter>,
}

impl AuthCounters {
    /// Every series, registered.
    pub fn new() -> Self {
        let by_cached =
            |name: &'static str, key: &'static str, value: &'static str| -> Vec<Counter> {
                Cached::ALL
                    .iter()
                    .map(|c| metrics::counter!(name, key => value, "cached" => c.as_str()))
                    .collect()
            };
        AuthCounters {
            authn: Authn::ALL
                .iter()
                .map(|r| by_cached(names::AUTHN_TOTAL, "result", r.as_str()))
                .collect(),
            authz: Authz::ALL
                .iter()
                .map(|d| by_cached(names::AUTHZ_TOTAL, "decision", d.as_str()))
                .collect(),
            stale: Review::ALL
                .iter()
                .map(|k| metrics::counter!(names::AUTH_STALE_TOTAL, "kind" => k.as_str()))
                .collect(),
        }
    }

    /// Records one authentication.
    pub fn authn(&self, result: Authn, cached: Cached) {
        self.authn[result.index()][cached.index()].increment(1);
    }

    /// Records one authorization decision.
    pub fn authz(&self, decision: Authz, cached: Cached) {
        self.authz[decision.index()][cached.index()].increment(1);
    }

    /// Records one expired review reused in an outage.
    pub fn stale(&self, review: Review) {
        self.stale[review.index()].increment(1);
    }
}

impl Default for AuthCounters {
    fn default() -> Self {
        Self::new()
    }
}
