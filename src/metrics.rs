//! Metric names (one place) and the typed calls that record them.

use std::collections::HashSet;
use std::sync::{Mutex, OnceLock};
use std::time::Duration;

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};

/// Requests answered, by verb, resource, HTTP code and cache result (`hit` / `pass`).
pub const REQUESTS_TOTAL: &str = "r8s_requests_total";
/// Request latency to the response head, by verb, resource and cache result.
pub const REQUEST_DURATION_SECONDS: &str = "r8s_request_duration_seconds";
/// Responses from the upstream by HTTP code (`0`: the exchange failed).
pub const UPSTREAM_REQUESTS_TOTAL: &str = "r8s_upstream_requests_total";
/// 1 while the upstream answers, 0 once no configured server accepts connections.
pub const UPSTREAM_UP: &str = "r8s_upstream_up";

static HANDLE: OnceLock<PrometheusHandle> = OnceLock::new();

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
                "Responses from the upstream by code."
            );
            metrics::describe_gauge!(UPSTREAM_UP, "Whether the upstream answers.");
            handle
        })
        .clone()
}

/// Resource label values seen so far; past the cap, new ones become `other`
/// (paths are client input, and labels must stay bounded).
static RESOURCE_LABELS: Mutex<Option<HashSet<String>>> = Mutex::new(None);
const MAX_RESOURCE_LABELS: usize = 256;

fn resource_label(resource: &str) -> String {
    let ok = !resource.is_empty()
        && resource.len() <= 63
        && resource.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'.' || b == b'/'
        });
    if !ok {
        return "other".into();
    }
    let mut guard = RESOURCE_LABELS.lock().unwrap_or_else(|p| p.into_inner());
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

/// Records a response from the upstream (`0` when the exchange failed).
pub fn upstream_response(code: u16) {
    metrics::counter!(UPSTREAM_REQUESTS_TOTAL, "code" => code.to_string()).increment(1);
    if code != 0 {
        metrics::gauge!(UPSTREAM_UP).set(1.0);
    }
}

/// Records that no upstream server accepted a connection.
pub fn upstream_unreachable() {
    metrics::counter!(UPSTREAM_REQUESTS_TOTAL, "code" => "0").increment(1);
    metrics::gauge!(UPSTREAM_UP).set(0.0);
}
