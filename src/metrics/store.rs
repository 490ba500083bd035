//! The series of one store (labels `resource` and `encoding`), each set
//! held by what records it: its reflector, the consistency check, the
//! snapshot writer, readiness. Made once (after the recorder is
//! installed), with every label value registered at 0.

use metrics::{Counter, Gauge};

use super::labels::{
    Consistency, EventType, PersistKind, PersistLoad, PersistWrite, Relist, StoreLabels,
};
use super::names;

/// A counter of `name` for the store labelled `l`, registered at 0.
fn counter(name: &'static str, l: &StoreLabels) -> Counter {
    let c = metrics::counter!(name, "resource" => l.resource.clone(), "encoding" => l.encoding);
    c.increment(0);
    c
}

/// The same, with one more label.
fn counter_by(
    name: &'static str,
    l: &StoreLabels,
    key: &'static str,
    value: &'static str,
) -> Counter {
    let c = metrics::counter!(name, "resource" => l.resource.clone(), "encoding" => l.encoding, key => value);
    c.increment(0);
    c
}

fn gauge(name: &'static str, l: &StoreLabels) -> Gauge {
    metrics::gauge!(name, "resource" => l.resource.clone(), "encoding" => l.encoding)
}

/// A reflector's series: the cache's size, version and health, its events,
/// relists, restarts, silences and refusals (an upstream event records into
/// these handles: building each labelled key cost 7 lookups per event).
pub struct ReflectorSeries {
    objects: Gauge,
    bytes: Gauge,
    rv: Gauge,
    synced: Gauge,
    over_budget: Gauge,
    log_events: Gauge,
    log_bytes: Gauge,
    /// By [`EventType::ALL`].
    events: Vec<Counter>,
    /// By [`Relist::ALL`].
    relists: Vec<Counter>,
    restarts: Counter,
    silent: Counter,
    behind: Counter,
}

impl ReflectorSeries {
    /// The series of the store labelled `l`; not synced, not over budget.
    pub fn new(l: &StoreLabels) -> Self {
        let s = ReflectorSeries {
            objects: gauge(names::CACHE_OBJECTS, l),
            bytes: gauge(names::CACHE_BYTES, l),
            rv: gauge(names::CACHE_RESOURCE_VERSION, l),
            synced: gauge(names::CACHE_SYNCED, l),
            over_budget: gauge(names::CACHE_OVER_BUDGET, l),
            log_events: gauge(names::WATCH_LOG_EVENTS, l),
            log_bytes: gauge(names::WATCH_LOG_BYTES, l),
            events: EventType::ALL
                .iter()
                .map(|t| counter_by(names::REFLECTOR_EVENTS_TOTAL, l, "type", t.as_str()))
                .collect(),
            relists: Relist::ALL
                .iter()
                .map(|r| counter_by(names::RELISTS_TOTAL, l, "reason", r.as_str()))
                .collect(),
            restarts: counter(names::WATCH_RESTARTS_TOTAL, l),
            silent: counter(names::REFLECTOR_SILENT_TOTAL, l),
            behind: counter(names::REFLECTOR_BEHIND_TOTAL, l),
        };
        s.synced.set(0.0);
        s.over_budget.set(0.0);
        s
    }

    /// Counts an upstream event applied.
    pub fn event(&self, t: EventType) {
        self.events[t.index()].increment(1);
    }

    /// Records the cache's size and version after a change (`bytes`:
    /// objects and the older versions its history keeps alive), its watch
    /// log's size, and that it is synced.
    pub fn state(&self, objects: usize, rv: u64, bytes: usize, log: (usize, usize)) {
        self.objects.set(objects as f64);
        self.bytes.set(bytes as f64);
        self.rv.set(rv as f64);
        self.synced.set(1.0);
        self.log_events.set(log.0 as f64);
        self.log_bytes.set(log.1 as f64);
    }

    /// The cache stopped being usable (evicted, uncacheable).
    pub fn unsynced(&self) {
        self.synced.set(0.0);
    }

    /// Whether the cache is evicted over its byte budget.
    pub fn over_budget(&self, over: bool) {
        self.over_budget.set(if over { 1.0 } else { 0.0 });
    }

    /// Counts a relist.
    pub fn relist(&self, why: Relist) {
        self.relists[why.index()].increment(1);
    }

    /// Counts an upstream watch opened again.
    pub fn watch_restart(&self) {
        self.restarts.increment(1);
    }

    /// Counts an upstream silence noticed.
    pub fn silent(&self) {
        self.silent.increment(1);
    }

    /// Counts an upstream state refused as older than the cache's.
    pub fn behind(&self) {
        self.behind.increment(1);
    }
}

/// A checked store's consistency series.
pub struct ConsistencySeries {
    /// By [`Consistency::ALL`].
    checks: Vec<Counter>,
}

impl ConsistencySeries {
    /// The series of the store labelled `l`, every result at 0.
    pub fn new(l: &StoreLabels) -> Self {
        ConsistencySeries {
            checks: Consistency::ALL
                .iter()
                .map(|r| {
                    counter_by(
                        names::CACHE_CONSISTENCY_CHECKS_TOTAL,
                        l,
                        "result",
                        r.as_str(),
                    )
                })
                .collect(),
        }
    }

    /// Counts a check's finding.
    pub fn check(&self, found: Consistency) {
        self.checks[found.index()].increment(1);
    }
}

/// A saved store's snapshot and log series.
#[derive(Clone)]
pub struct PersistSeries {
    /// By [`PersistWrite::ALL`].
    writes: Vec<Counter>,
    bytes: Gauge,
    /// By [`PersistLoad::ALL`].
    loads: Vec<Counter>,
    /// By [`PersistLoad::ALL`].
    log_loads: Vec<Counter>,
    /// By [`PersistKind::ALL`].
    written: Vec<Counter>,
    log_bytes: Gauge,
    age: Gauge,
    replay: Gauge,
    behind: Counter,
}

impl PersistSeries {
    /// The series of the store labelled `l`, every result at 0.
    pub fn new(l: &StoreLabels) -> Self {
        PersistSeries {
            writes: PersistWrite::ALL
                .iter()
                .map(|r| counter_by(names::PERSIST_WRITES_TOTAL, l, "result", r.as_str()))
                .collect(),
            bytes: gauge(names::PERSIST_SNAPSHOT_BYTES, l),
            loads: PersistLoad::ALL
                .iter()
                .map(|r| counter_by(names::PERSIST_LOADS_TOTAL, l, "result", r.as_str()))
                .collect(),
            log_loads: PersistLoad::ALL
                .iter()
                .map(|r| counter_by(names::PERSIST_LOG_LOADS_TOTAL, l, "result", r.as_str()))
                .collect(),
            written: PersistKind::ALL
                .iter()
                .map(|k| counter_by(names::PERSIST_WRITTEN_BYTES_TOTAL, l, "kind", k.as_str()))
                .collect(),
            log_bytes: gauge(names::PERSIST_LOG_BYTES, l),
            age: gauge(names::PERSIST_SNAPSHOT_AGE_SECONDS, l),
            replay: gauge(names::PERSIST_REPLAY_SECONDS, l),
            behind: counter(names::PERSIST_BEHIND_TOTAL, l),
        }
    }

    /// Counts `bytes` written to disk as `kind`.
    pub fn wrote(&self, kind: PersistKind, bytes: u64) {
        self.written[kind.index()].increment(bytes);
    }

    /// Records the bytes of the store's log on disk.
    pub fn log_bytes(&self, bytes: u64) {
        self.log_bytes.set(bytes as f64);
    }

    /// Records the time since the store's last full snapshot.
    pub fn snapshot_age(&self, age: std::time::Duration) {
        self.age.set(age.as_secs_f64());
    }

    /// Records how long loading and replaying took at start.
    pub fn replayed(&self, took: std::time::Duration) {
        self.replay.set(took.as_secs_f64());
    }

    /// Records what came of a log replayed at start.
    pub fn log_loaded(&self, result: PersistLoad) {
        self.log_loads[result.index()].increment(1);
    }

    /// Counts the log losing its place (a full snapshot follows).
    pub fn behind(&self) {
        self.behind.increment(1);
    }

    /// Records a snapshot written (`bytes`) or failed (`None`).
    pub fn written(&self, bytes: Option<u64>) {
        match bytes {
            Some(b) => {
                self.writes[PersistWrite::Ok.index()].increment(1);
                self.bytes.set(b as f64);
            }
            None => self.writes[PersistWrite::Error.index()].increment(1),
        }
    }

    /// Records what came of the snapshot read at start.
    pub fn loaded(&self, result: PersistLoad) {
        self.loads[result.index()].increment(1);
    }
}

/// How long a store has gone without word from its upstream (readiness records it).
pub struct StalenessSeries(Gauge);

impl StalenessSeries {
    /// The series of the store labelled `l`.
    pub fn new(l: &StoreLabels) -> Self {
        StalenessSeries(gauge(names::CACHE_STALENESS_SECONDS, l))
    }

    /// Records the time since the store last heard from its upstream.
    pub fn record(&self, since: std::time::Duration) {
        self.0.set(since.as_secs_f64());
    }
}

/// The gauges that describe a store's state: those of a retired cache
/// describe nothing any more, and are left out of `/metrics`
/// ([`without_stores`]).
const STORE_GAUGES: [&str; 8] = [
    names::CACHE_OBJECTS,
    names::CACHE_BYTES,
    names::CACHE_RESOURCE_VERSION,
    names::CACHE_SYNCED,
    names::CACHE_OVER_BUDGET,
    names::CACHE_STALENESS_SECONDS,
    names::WATCH_LOG_EVENTS,
    names::WATCH_LOG_BYTES,
];

/// `rendered` (the exposition text) without the store gauges of the
/// resources `gone` names (`group/version/resource`): a retired cache is
/// gone from the metrics as from the registry (the recorder cannot forget a
/// series). Its counters stay: they only go up, and its requests go on.
pub fn without_stores(rendered: String, gone: &std::collections::HashSet<String>) -> String {
    if gone.is_empty() {
        return rendered;
    }
    let dropped = |line: &str| {
        let Some((name, rest)) = line.split_once('{') else {
            return false;
        };
        STORE_GAUGES.contains(&name)
            && rest
                .split_once("resource=\"")
                .and_then(|(_, v)| v.split_once('"'))
                .is_some_and(|(resource, _)| gone.contains(resource))
    };
    let mut out = String::with_capacity(rendered.len());
    for line in rendered.lines().filter(|l| !dropped(l)) {
        out.push_str(line);
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_leave_out_only_the_store_gauges_of_resources_gone() {
        let text = "# HELP r8s_cache_objects Objects.\n\
                    # TYPE r8s_cache_objects gauge\n\
                    r8s_cache_objects{resource=\"late.example.com/v1/gadgets\",encoding=\"json\"} 1\n\
                    r8s_cache_objects{resource=\"v1/pods\",encoding=\"json\"} 7\n\
                    r8s_cache_requests_total{resource=\"late.example.com/v1/gadgets\",verb=\"list\",result=\"hit\"} 3\n";
        let gone = ["late.example.com/v1/gadgets".to_string()].into();
        let out = without_stores(text.to_string(), &gone);
        assert!(!out.contains("r8s_cache_objects{resource=\"late"), "{out}");
        assert!(
            out.contains("r8s_cache_objects{resource=\"v1/pods\""),
            "{out}"
        );
        assert!(
            out.contains("r8s_cache_requests_total{resource=\"late"),
            "{out}"
        );
        assert!(out.contains("# TYPE r8s_cache_objects gauge"), "{out}");
        assert_eq!(without_stores(text.to_string(), &Default::default()), text);
    }
}
