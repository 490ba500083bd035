//! End-to-end pass-through overhead: the same requests straight to the
//! built-in upstream (the floor) and through r8s, in one run.
//!
//! `cargo bench --bench passthrough` (results in BENCHMARKS.md). Everything
//! runs on 127.0.0.1; request counts are bounded.

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use r8s_sim::{self as sim, SimConfig};
use tokio::net::TcpListener;

type C = Client<HttpConnector, Empty<Bytes>>;

async fn fetch(c: &C, url: &str) -> usize {
    let resp = c.get(url.parse().unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes().len()
}

struct Stats {
    p50: Duration,
    p99: Duration,
    rps: f64,
    bytes: usize,
}

async fn measure(url: String, requests: usize, concurrency: usize) -> Stats {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    for _ in 0..20 {
        fetch(&c, &url).await;
    }
    let start = Instant::now();
    let per = requests / concurrency;
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (c, url) = (c.clone(), url.clone());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            let mut bytes = 0;
            for _ in 0..per {
                let t = Instant::now();
                bytes = fetch(&c, &url).await;
                lat.push(t.elapsed());
            }
            (lat, bytes)
        }));
    }
    let mut all = Vec::new();
    let mut bytes = 0;
    for t in tasks {
        let (l, b) = t.await.unwrap();
        all.extend(l);
        bytes = b;
    }
    let total = start.elapsed();
    all.sort();
    Stats {
        p50: all[all.len() / 2],
        p99: all[all.len() * 99 / 100],
        rps: all.len() as f64 / total.as_secs_f64(),
        bytes,
    }
}

#[tokio::main]
async fn main() {
    let sim = sim::start(
        SimConfig {
            pods: 2000,
            namespaces: 10,
            ..SimConfig::default()
        },
        TcpListener::bind("127.0.0.1:0").await.unwrap(),
    )
    .await
    .unwrap();
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    let prepared = r8s::prepare(config).await.unwrap();
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let r8s_url = format!("http://{}", api.local_addr().unwrap());
    let (trigger, signal) = r8s::shutdown::channel();
    let task = tokio::spawn(prepared.run(r8s::Listeners { api, admin }, signal));

    println!("| request | concurrency | path | p50 | p99 | req/s | body bytes |");
    println!("|---|---|---|---|---|---|---|");
    let cases = [
        (
            "get one pod",
            "/api/v1/namespaces/ns-3/pods/pod-00003",
            4000,
            1,
        ),
        (
            "get one pod",
            "/api/v1/namespaces/ns-3/pods/pod-00003",
            8000,
            8,
        ),
        ("list 200 pods (ns)", "/api/v1/namespaces/ns-3/pods", 400, 4),
        (
            "list 2000 pods RV=0",
            "/api/v1/pods?resourceVersion=0",
            60,
            2,
        ),
    ];
    for (name, path, n, conc) in cases {
        for (label, base) in [
            ("direct (floor)", sim.url()),
            ("through r8s", r8s_url.clone()),
        ] {
            let s = measure(format!("{base}{path}"), n, conc).await;
            println!(
                "| {name} | {conc} | {label} | {:.3} ms | {:.3} ms | {:.0} | {} |",
                s.p50.as_secs_f64() * 1e3,
                s.p99.as_secs_f64() * 1e3,
                s.rps,
                s.bytes
            );
        }
    }
    trigger.fire();
    let _ = task.await;
    sim.stop().await;
}
