//! A node-local r8s (`--node`, issue 75) at 150,000 real-shaped pods on
//! 5,000 nodes (the sim): its memory, CPU at rest, start-up time and
//! upstream watches against a full cache of the same resources; what its
//! start reaches the upstream with, cold and warm (`persist.dir`); and a
//! fleet of node-local r8s side by side syncing from one tier (a full r8s)
//! at once: the tier's CPU and the time until all are ready.
//!
//! `cargo bench --bench node_local` (results in BENCHMARKS.md). The sim,
//! the tier and each node-local r8s run as separate processes (release
//! binaries); memory is each one's RSS, CPU its user+system time
//! (`/proc/PID/stat`). `NODE_LOCAL_PODS` (150000), `NODE_LOCAL_FLEET` (how
//! many node-local r8s sync at once, 40), `BENCH_R8S_BIN` runs another
//! build. Everything runs on 127.0.0.1 and stops by itself.

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, Scratch, counting_link, cpu_time, env_or, free_port, rss_kib, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const NODES: usize = 5_000;
/// What both caches hold: a kubelet's reads.
const RESOURCES: [&str; 3] = ["pods", "nodes", "services"];

type C = Client<HttpConnector, Empty<Bytes>>;

/// An r8s in front of `upstream`, on ports of its own, `node` scoped (or
/// not), with `env`; returns once ready, with its admin port and how long
/// that took.
async fn start(
    c: &C,
    bin: &str,
    upstream: &str,
    node: Option<&str>,
    env: &[(&str, String)],
) -> (Proc, u16, u16, Duration) {
    let (port, admin) = (free_port(), free_port());
    let mut cmd = Command::new(bin);
    cmd.args(["serve", "--upstream", upstream])
        .args(["--listen", &format!("127.0.0.1:{port}")])
        .args(["--admin-listen", &format!("127.0.0.1:{admin}")]);
    for r in RESOURCES {
        cmd.args(["--cache", r]);
    }
    if let Some(n) = node {
        cmd.args(["--node", n]);
    }
    for (k, v) in env {
        cmd.env(k, v);
    }
    let started = Instant::now();
    let p = Proc(cmd.stderr(Stdio::null()).spawn().unwrap());
    wait_ready(c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    (p, port, admin, started.elapsed())
}

/// `/metrics` of the r8s whose admin port is `admin`.
async fn metrics(c: &C, admin: u16) -> String {
    let r = c
        .get(format!("http://127.0.0.1:{admin}/metrics").parse().unwrap())
        .await
        .unwrap();
    String::from_utf8_lossy(&r.into_body().collect().await.unwrap().to_bytes()).into_owned()
}

/// Its stores (one upstream watch each) and the objects they hold.
fn stores_and_objects(text: &str) -> (usize, f64) {
    let lines: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("r8s_cache_objects{"))
        .collect();
    let objects = lines
        .iter()
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum();
    (lines.len(), objects)
}

/// RSS and CPU at rest over `rest`, after a settling second.
async fn at_rest(pid: u32, rest: Duration) -> (u64, Duration) {
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before = cpu_time(pid);
    tokio::time::sleep(rest).await;
    (rss_kib(pid), cpu_time(pid) - before)
}

/// `POST` of the JSON `body` to `url`: its status.
async fn post(url: &str, body: &'static str) -> u16 {
    let c: Client<HttpConnector, http_body_util::Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let req = hyper::Request::post(url)
        .header("content-type", "application/json")
        .body(http_body_util::Full::new(Bytes::from_static(
            body.as_bytes(),
        )))
        .unwrap();
    c.request(req).await.unwrap().status().as_u16()
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}

#[tokio::main]
async fn main() {
    let bin = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let pods: usize = env_or("NODE_LOCAL_PODS", 150_000);
    let fleet: usize = env_or("NODE_LOCAL_FLEET", 40);
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let port = free_port();
    let started = Instant::now();
    let _sim = sim(
        &bin,
        port,
        &[
            "--pods",
            &pods.to_string(),
            "--nodes",
            &NODES.to_string(),
            "--namespaces",
            "10",
            "--history",
            "10000",
        ],
    );
    let sim_url = format!("http://127.0.0.1:{port}");
    wait_ready(&c, &format!("{sim_url}/version")).await;
    eprintln!(
        "sim with {pods} pods on {NODES} nodes up after {:?}",
        started.elapsed()
    );
    let rest = Duration::from_secs(10);

    // One r8s of each kind, alone in front of the sim.
    println!(
        "| cache | ready after | RSS | CPU at rest (10 s) | upstream watches | objects held |"
    );
    println!("|---|---|---|---|---|---|");
    // A secret a pod of node-01 mounts (the sim's pods mount configmaps only).
    let secret = r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"app-secret","namespace":"ns-1"},"data":{"k":"dg=="}}"#;
    let pod = r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"uses-secret","namespace":"ns-1"},"spec":{"nodeName":"node-01","containers":[{"name":"c","image":"app:1"}],"volumes":[{"name":"s","secret":{"secretName":"app-secret"}}]}}"#;
    for (path, body) in [("secrets", secret), ("pods", pod)] {
        let r = post(&format!("{sim_url}/api/v1/namespaces/ns-1/{path}"), body).await;
        assert_eq!(r, 201, "{path} made in the sim");
    }
    let mut hits = Vec::new();
    for node in [None, Some("node-01")] {
        let (p, port, admin, ready) = start(&c, &bin, &sim_url, node, &[]).await;
        let (rss, cpu) = at_rest(p.0.id(), rest).await;
        let (stores, objects) = stores_and_objects(&metrics(&c, admin).await);
        if node.is_some() {
            // What its kubelet reads, each a hit: its pods listed and
            // watched, the secret its pod mounts watched by name.
            let base = format!("http://127.0.0.1:{port}");
            for path in [
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-01&resourceVersion=0",
                "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-01&watch=1&resourceVersion=0&timeoutSeconds=1",
                "/api/v1/namespaces/ns-1/secrets?fieldSelector=metadata.name%3Dapp-secret&resourceVersion=0",
                "/api/v1/namespaces/ns-1/secrets?fieldSelector=metadata.name%3Dapp-secret&watch=1&resourceVersion=0&timeoutSeconds=1",
            ] {
                let r = c
                    .get(format!("{base}{path}").parse().unwrap())
                    .await
                    .unwrap();
                let cache = r
                    .headers()
                    .get("x-r8s-cache")
                    .map(|v| v.to_str().unwrap_or("").to_string());
                let _ = r.into_body().collect().await;
                hits.push(format!("{path}: {}", cache.unwrap_or_default()));
            }
        }
        println!(
            "| {} | {:.2} s | {:.1} MiB | {:.0} ms (10 ms ticks) | {stores} | {objects} |",
            node.map_or("full".to_string(), |n| format!("node-local ({n})")),
            ready.as_secs_f64(),
            mib(rss),
            cpu.as_secs_f64() * 1000.0
        );
    }
    println!();
    for h in &hits {
        println!("- {h}");
    }

    // A node's r8s starting through a link that counts what the upstream
    // sends: cold, then again warm from its snapshots.
    let (link, sent) = counting_link(format!("127.0.0.1:{port}").parse().unwrap()).await;
    let scratch = Scratch::new("node-local");
    let persist = [(
        "R8S_PERSIST__DIR",
        scratch.join("persist").display().to_string(),
    )];
    println!();
    println!("| node-local start | bytes from the upstream | ready after |");
    println!("|---|---|---|");
    for label in ["cold", "warm (persist.dir)"] {
        let before = sent.load(Ordering::Relaxed);
        let (p, _, _, ready) = start(&c, &bin, &link, Some("node-02"), &persist).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let bytes = sent.load(Ordering::Relaxed) - before;
        println!("| {label} | {bytes} | {:.2} s |", ready.as_secs_f64());
        // SIGTERM, and its last snapshots written.
        let _ = Command::new("kill").arg(p.0.id().to_string()).status();
        tokio::time::sleep(Duration::from_secs(3)).await;
        drop(p);
    }
    // What the kubelet itself would ask the upstream for without r8s: its
    // node's pods, as one list.
    let before = sent.load(Ordering::Relaxed);
    let r = c
        .get(
            format!("{link}/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-02&resourceVersion=0")
                .parse()
                .unwrap(),
        )
        .await
        .unwrap();
    let _ = r.into_body().collect().await.unwrap();
    println!(
        "| (a kubelet's own list of its pods, without r8s) | {} | |",
        sent.load(Ordering::Relaxed) - before
    );

    // A fleet of node-local r8s syncing at once from one tier.
    let (tier, tier_port, tier_admin, _) = start(&c, &bin, &sim_url, None, &[]).await;
    let tier_url = format!("http://127.0.0.1:{tier_port}");
    let tier_pid = tier.0.id();
    let cpu_before = cpu_time(tier_pid);
    let started = Instant::now();
    let mut starting = Vec::new();
    for i in 0..fleet {
        let (bin, tier_url, c) = (bin.clone(), tier_url.clone(), c.clone());
        let node = format!("node-{:02}", 100 + i);
        starting.push(tokio::spawn(async move {
            start(&c, &bin, &tier_url, Some(&node), &[]).await
        }));
    }
    let mut members = Vec::new();
    for s in starting {
        members.push(s.await.unwrap());
    }
    let all_ready = started.elapsed();
    let tier_cpu = cpu_time(tier_pid) - cpu_before;
    let rss: Vec<u64> = members.iter().map(|(p, ..)| rss_kib(p.0.id())).collect();
    let (stores, _) = stores_and_objects(&metrics(&c, tier_admin).await);
    println!();
    println!(
        "| fleet | all ready after | tier CPU for their syncs | per node-local sync | node-local RSS (mean) | tier's upstream watches |"
    );
    println!("|---|---|---|---|---|---|");
    println!(
        "| {fleet} node-local r8s | {:.2} s | {:.0} ms | {:.2} ms | {:.1} MiB | {stores} |",
        all_ready.as_secs_f64(),
        tier_cpu.as_secs_f64() * 1000.0,
        tier_cpu.as_secs_f64() * 1000.0 / fleet as f64,
        mib(rss.iter().sum::<u64>() / rss.len().max(1) as u64)
    );
    drop(members);
    drop(tier);
}
