//! Proofs that fail pass their requests through, and are counted; requests
//! join only proofs that read the upstream's version after they arrived.
//! The upstream is the sim behind a scripted proxy that breaks the proof's
//! one-object LIST or its probe watch on command.

mod common;

use std::convert::Infallible;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http::{Request, Response, StatusCode};
use http_body_util::combinators::BoxBody;
use http_body_util::{BodyExt, Full, StreamBody};
use hyper::body::{Frame, Incoming};
use hyper_util::rt::TokioIo;
use r8s::config::Config;
use r8s::sim::{Generation, SimConfig};
use tokio::net::TcpListener;

type Body = BoxBody<Bytes, Box<dyn std::error::Error + Send + Sync>>;

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
    addr: std::net::SocketAddr,
    fault: Arc<Mutex<Fault>>,
    seen: Arc<Mutex<Seen>>,
}

fn full(status: StatusCode, body: &'static str) -> Response<Body> {
    Response::builder()
        .status(status)
        .header("content-type", "application/json")
        .body(
            Full::new(Bytes::from_static(body.as_bytes()))
                .map_err(|e| match e {})
                .boxed(),
        )
        .unwrap()
}

async fn forward(sim: &str, req: Request<Incoming>) -> Response<Body> {
    let uri = format!("{sim}{}", req.uri().path_and_query().unwrap());
    let mut out = Request::builder().method(req.method()).uri(uri);
    for (k, v) in req.headers() {
        out = out.header(k, v);
    }
    let body = req.into_body().collect().await.unwrap().to_bytes();
    let resp = client()
        .request(out.body(Full::new(body)).unwrap())
        .await
        .unwrap();
    resp.map(|b| b.map_err(|e| Box::new(e) as _).boxed())
}

async fn handle(
    sim: String,
    fault: Arc<Mutex<Fault>>,
    seen: Arc<Mutex<Seen>>,
    req: Request<Incoming>,
) -> Result<Response<Body>, &'static str> {
    let q = req.uri().query().unwrap_or("").to_string();
    let configmaps = req.uri().path() == "/api/v1/configmaps";
    let has = |pair: &str| q.split('&').any(|p| p == pair);
    let list = configmaps && has("limit=1") && !q.contains("resourceVersion");
    let probe = configmaps && has("watch=1") && has("timeoutSeconds=3");
    let f = *fault.lock().unwrap();
    if list {
        seen.lock().unwrap().lists.push(Instant::now());
        match f {
            Fault::ListReset => return Err("reset"),
            Fault::List500 => {
                return Ok(full(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"etcdserver: request timed out","code":500}"#,
                ));
            }
            Fault::ListDelay(d) => {
                let resp = forward(&sim, req).await;
                tokio::time::sleep(d).await;
                return Ok(resp);
            }
            _ => {}
        }
    }
    if probe {
        match f {
            Fault::Probe503 => {
                return Ok(full(
                    StatusCode::SERVICE_UNAVAILABLE,
                    r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"unavailable","code":503}"#,
                ));
            }
            Fault::ProbeError => {
                return Ok(full(
                    StatusCode::OK,
                    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\",\"message\":\"too old resource version: 5 (9)\",\"reason\":\"Expired\",\"code\":410}}\n",
                ));
            }
            Fault::ProbeEnds => return Ok(full(StatusCode::OK, "")),
            Fault::ProbeSilent => {
                let (tx, rx) = tokio::sync::mpsc::channel::<Result<Frame<Bytes>, Infallible>>(1);
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_secs(10)).await;
                    drop(tx);
                });
                let stream = tokio_stream_from(rx);
                return Ok(Response::new(
                    StreamBody::new(stream).map_err(|e| match e {}).boxed(),
                ));
            }
            _ => {}
        }
    }
    Ok(forward(&sim, req).await)
}

/// A receiver as a stream of frames.
fn tokio_stream_from(
    mut rx: tokio::sync::mpsc::Receiver<Result<Frame<Bytes>, Infallible>>,
) -> impl futures_util::Stream<Item = Result<Frame<Bytes>, Infallible>> {
    futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx))
}

async fn start_proxy(sim: String) -> Proxy {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = l.local_addr().unwrap();
    let fault = Arc::new(Mutex::new(Fault::None));
    let seen = Arc::new(Mutex::new(Seen::default()));
    let (f, s) = (fault.clone(), seen.clone());
    tokio::spawn(async move {
        loop {
            let Ok((conn, _)) = l.accept().await else {
                return;
            };
            let (sim, f, s) = (sim.clone(), f.clone(), s.clone());
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(move |req| {
                    handle(sim.clone(), f.clone(), s.clone(), req)
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(conn), svc)
                    .await;
            });
        }
    });
    Proxy { addr, fault, seen }
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
        Duration::from_secs(15),
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
    let mut config = Config::default();
    config.upstream.servers = vec![format!("http://{}", proxy.addr)];
    config.cache.resources = vec!["v1/configmaps".into()];
    start_r8s_config(config).await
}

fn series(m: &str, s: &str) -> f64 {
    metric(m, s)
}

/// A current apiserver writing pods 100 times a second, behind the proxy.
async fn churning_behind_proxy() -> (r8s::sim::SimHandle, Proxy) {
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
        let mut tries = 0;
        let (r, before, cache, took) = loop {
            let r = r8s_behind(&proxy).await;
            let before = get(&format!("{}/metrics", r.admin_url())).await.text();
            *proxy.fault.lock().unwrap() = fault;
            let (cache, took) = consistent(&r.url()).await;
            *proxy.fault.lock().unwrap() = Fault::None;
            tries += 1;
            // The store's own watch may reach the upstream's version (a
            // bookmark) before or while the probe is asked for: proven
            // rightly, without the fault in play (seen once under a loaded
            // CI run). A fresh r8s tries again; a fault that never makes its
            // request pass still fails below.
            if cache == "hit" && tries < 4 {
                r.stop().await;
                continue;
            }
            break (r, before, cache, took);
        };
        assert_eq!(cache, "pass", "{fault:?} ({tries} tries)");
        // Only a silent probe waits out read.prove_timeout_seconds (3 s).
        if fault != Fault::ProbeSilent {
            assert!(
                took < Duration::from_millis(2500),
                "{fault:?}: passed after {took:?}"
            );
        }
        let m = get(&format!("{}/metrics", r.admin_url())).await.text();
        assert_eq!(
            series(&m, passed) - series(&before, passed),
            1.0,
            "{fault:?}"
        );
        assert_eq!(
            series(&m, unproven) - series(&before, unproven),
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
