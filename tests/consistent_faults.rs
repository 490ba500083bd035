//! Proofs that fail pass their requests through, and are counted; requests
//! join only proofs that read the upstream's version after they arrived.
//! The upstream is the sim behind a scripted proxy that breaks the proof's
//! one-object LIST or its probe watch on command.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::proxy::{HttpProxy, Intercept};
use crate::common::*;
use http::StatusCode;
use r8s_sim::{Generation, SimConfig};

/// What the proxy does to the proof's requests for configmaps.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Fault {
    None,
    /// The one-object LIST's connection is closed without an answer.
    ListReset,
    /// The one-object LIST is answered 500.
    List500,
    /// The one-object LIST is answered after this long.
    ListDelay(Duration),
    /// The probe watch is answered 503.
    Probe503,
    /// The probe watch sends an ERROR event (a 410, as a too-old `C` arrives).
    ProbeError,
    /// The probe watch ends before any bookmark.
    ProbeEnds,
    /// The probe watch sends nothing, and does not end.
    ProbeSilent,
}

#[derive(Default)]
struct Seen {
    /// When each one-object LIST reached the proxy.
    lists: Vec<Instant>,
}

struct Proxy {
    http: HttpProxy,
    fault: Arc<Mutex<Fault>>,
    seen: Arc<Mutex<Seen>>,
}

const STATUS_500: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","code":500}"#;
const STATUS_503: &str = r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"unavailable","code":503}"#;
const ERROR_410: &str = "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 5 (9)\",\"reason\":\"Expired\",\"code\":410}}\n";

/// What the fault does to this request: the proof's one-object LIST of
/// configmaps and its probe watch are broken as `fault` says, the rest pass.
fn intercept(fault: Fault, seen: &Mutex<Seen>, req: &http::request::Parts) -> Intercept {
    let q = req.uri.query().unwrap_or("");
    let configmaps = req.uri.path() == "/api/v1/configmaps";
    let has = |pair: &str| q.split('&').any(|p| p == pair);
    let list = configmaps && has("limit=1") && !q.contains("resourceVersion");
    let probe = configmaps && has("watch=1") && has("timeoutSeconds=3");
    if list {
        seen.lock().unwrap().lists.push(Instant::now());
        match fault {
            Fault::ListReset => return Intercept::Reset,
            Fault::List500 => {
                return Intercept::Answer(StatusCode::INTERNAL_SERVER_ERROR, STATUS_500);
            }
            Fault::ListDelay(d) => return Intercept::Delay(d),
            _ => {}
        }
    }
    if probe {
        match fault {
            Fault::Probe503 => {
                return Intercept::Answer(StatusCode::SERVICE_UNAVAILABLE, STATUS_503);
            }
            Fault::ProbeError => return Intercept::Answer(StatusCode::OK, ERROR_410),
            Fault::ProbeEnds => return Intercept::Answer(StatusCode::OK, ""),
            Fault::ProbeSilent => return Intercept::Silent(Duration::from_secs(10)),
            _ => {}
        }
    }
    Intercept::Forward
}

async fn start_proxy(sim: String) -> Proxy {
    let fault = Arc::new(Mutex::new(Fault::None));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (f, s) = (fault.clone(), seen.clone());
    let http = HttpProxy::start(sim, move |req| intercept(*f.lock().unwrap(), &s, req)).await;
    Proxy { http, fault, seen }
}

/// A consistent streaming list of configmaps: its `X-R8s-Cache`, once its
/// initial events end (or the answer starts, for a pass).
async fn consistent(url: &str) -> (String, Duration) {
    let t = Instant::now();
    let r = send(
        "GET",
        &format!(
            "{url}/api/v1/configmaps?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1"
        ),
        &[],
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert!(
        r.text().contains("\"k8s.io/initial-events-end\":\"true\""),
        "a whole streaming list: {}",
        r.text()
    );
    let cache = r
        .headers
        .get("x-r8s-cache")
        .unwrap()
        .to_str()
        .unwrap()
        .to_string();
    (cache, t.elapsed())
}

async fn r8s_behind(proxy: &Proxy) -> R8s {
    r8s_in_front_of(proxy.http.url())
        .caching(&["v1/configmaps"])
        .start()
        .await
}

/// The same with a proof's timeout of `prove_timeout` seconds.
async fn r8s_behind_waiting(proxy: &Proxy, prove_timeout: f64) -> R8s {
    r8s_in_front_of(proxy.http.url())
        .caching(&["v1/configmaps"])
        .with(|c| c.read.prove_timeout_seconds = prove_timeout)
        .start()
        .await
}

/// A current apiserver writing pods 100 times a second, behind the proxy.
async fn churning_behind_proxy() -> (r8s_sim::SimHandle, Proxy) {
    let sim = start_sim(SimConfig {
        churn: 100.0,
        generation: Generation::Current,
        ..sim_config()
    })
    .await;
    let proxy = start_proxy(sim.url()).await;
    (sim, proxy)
}

/// Each way a proof can fail makes its request pass through, counted as
/// passed and `unproven`; each on a fresh r8s (two failures in a row pause
/// proving). One test: the metrics are the process's.
#[tokio::test(flavor = "multi_thread")]
async fn should_pass_through_when_a_proof_fails() {
    let (sim, proxy) = churning_behind_proxy().await;
    // Healthy first: the idle configmaps are proven through the proxy.
    let r = r8s_behind(&proxy).await;
    assert_eq!(consistent(&r.url()).await.0, "hit");
    r.stop().await;
    let passed = "r8s_consistent_reads_total{resource=\"v1/configmaps\",kind=\"streaming_list\",result=\"passed\"}";
    let proven = "r8s_consistent_reads_total{resource=\"v1/configmaps\",kind=\"streaming_list\",result=\"proven\"}";
    let unproven =
        "r8s_cache_requests_total{resource=\"v1/configmaps\",verb=\"watch\",result=\"unproven\"}";
    for fault in [
        Fault::ListReset,
        Fault::List500,
        Fault::Probe503,
        Fault::ProbeError,
        Fault::ProbeEnds,
        Fault::ProbeSilent,
    ] {
        // Only a silent probe waits out read.prove_timeout_seconds: the
        // others, given the longest (60 s), must be decided long before it
        // (in milliseconds); the silent one gets 3 s.
        let silent = fault == Fault::ProbeSilent;
        let r = r8s_behind_waiting(&proxy, if silent { 3.0 } else { 60.0 }).await;
        let before = get(&format!("{}/metrics", r.admin_url())).await.text();
        // The store's own watch must not win the proof meanwhile (a
        // bookmark at the upstream's version, which a current apiserver's
        // progress makes possible): the upstream holds its watches until
        // the proof is decided, and a write after the hold puts the
        // version the proof reads past anything a held watch could carry.
        // So only the probe could prove it, and the fault breaks the proof.
        sim.sim.hold_watches(true);
        let wrote = send(
            "POST",
            &format!("{}/api/v1/namespaces/ns-0/configmaps", sim.url()),
            &[("content-type", "application/json")],
            Some(&format!(
                r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"during-{}"}}}}"#,
                format!("{fault:?}").to_lowercase()
            )),
        )
        .await;
        assert_eq!(wrote.status, 201, "{}", wrote.text());
        *proxy.fault.lock().unwrap() = fault;
        // Far short of the 60 s timeout, far beyond the milliseconds a
        // failed proof takes to be decided, however busy the machine.
        let guard = HangGuard::of(Duration::from_secs(if silent { 120 } else { 40 }));
        let request = tokio::spawn({
            let url = r.url();
            async move { consistent(&url).await }
        });
        // Decided once counted; then the upstream may stream a pass-through
        // (a streaming list is one of its watches).
        let admin = r.admin_url();
        let decided = |m: &str| {
            sample(m, passed) + sample(m, proven)
                > sample(&before, passed) + sample(&before, proven)
        };
        while !decided(&get(&format!("{admin}/metrics")).await.text()) {
            guard.check(|| format!("{fault:?}: undecided (waiting out the proof's timeout?)"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        *proxy.fault.lock().unwrap() = Fault::None;
        sim.sim.hold_watches(false);
        let (cache, _) = request.await.unwrap();
        assert_eq!(cache, "pass", "{fault:?}");
        let m = get(&format!("{}/metrics", r.admin_url())).await.text();
        assert_eq!(
            sample(&m, passed) - sample(&before, passed),
            1.0,
            "{fault:?}"
        );
        assert_eq!(
            // (Counted per request, so absent until the first: 0.)
            sample(&m, unproven) - metric(&before, unproven).unwrap_or(0.0),
            1.0,
            "{fault:?}"
        );
        r.stop().await;
    }
    sim.stop().await;
}

/// A request that arrives while a proof's LIST is in flight does not join
/// it (that LIST may have been answered before the request's own write):
/// it waits for the next. Requests that arrive together share one.
#[tokio::test(flavor = "multi_thread")]
async fn should_join_only_a_proof_that_read_after_the_request_arrived() {
    let (sim, proxy) = churning_behind_proxy().await;
    let r = r8s_behind(&proxy).await;
    *proxy.fault.lock().unwrap() = Fault::ListDelay(Duration::from_millis(600));
    let url = r.url();
    let first = tokio::spawn({
        let url = url.clone();
        async move { consistent(&url).await }
    });
    tokio::time::sleep(Duration::from_millis(250)).await;
    // The first round's LIST is in flight (held by the proxy): these ten wait for the next.
    let sent = Instant::now();
    let later: Vec<_> = (0..10)
        .map(|_| {
            let url = url.clone();
            tokio::spawn(async move { consistent(&url).await })
        })
        .collect();
    assert_eq!(first.await.unwrap().0, "hit");
    for l in later {
        assert_eq!(l.await.unwrap().0, "hit");
    }
    let lists = proxy.seen.lock().unwrap().lists.clone();
    assert_eq!(lists.len(), 2, "one round for the first, one for the ten");
    assert!(
        lists[0] < sent,
        "the first round was in flight when the ten arrived"
    );
    assert!(lists[1] > sent, "the ten's round read after they arrived");
    r.stop().await;
    sim.stop().await;
}
