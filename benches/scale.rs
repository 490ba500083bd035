//! Reads that cost what they return (issue 41): at 10,000, 50,000 and
//! 150,000 real-shaped pods on 5,000 nodes, what a node-scoped list (a
//! kubelet's, in protobuf, `limit=500`), a node-scoped streaming list, a
//! namespace's list and label-selector lists (`app=`, `app in (..)`) cost
//! r8s, per request. The indexed build is told `cache.indexes` (pods by
//! node, the default, and by `app`).
//!
//! `cargo bench --bench scale` (results in BENCHMARKS.md). The sim and r8s
//! run as separate processes (release binaries); r8s's CPU per request is
//! its user+system time over the requests (`/proc/PID/stat`) divided by
//! them. `BENCH_SCAN_BIN=/path/to/r8s` runs the same reads, in the same run
//! and against the same sim, on another build: one without the node index
//! (bab1b5d) scans every pod for them. `SCALE_PODS=10000,150000` picks the
//! sizes; `BENCH_R8S_BIN` runs another build as the subject and the sim;
//! `SCALE_NODE_READS_ONLY` measures the node-scoped reads only;
//! `BENCH_READY_SECONDS` waits longer for a sync. Everything runs on
//! 127.0.0.1 and stops by itself.

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, cpu_time, free_port, load, rss_kib, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
/// Nodes the pods are spread over (the scale Kubernetes tests itself at);
/// `SCALE_NODES` changes it (333 nodes give 10,000 pods the 15 pods per
/// node that 5,000 nodes give 150,000).
fn nodes() -> usize {
    std::env::var("SCALE_NODES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(5_000)
}
/// Concurrent clients, each on its own connection.
const CLIENTS: usize = 16;

type C = Client<HttpConnector, Empty<Bytes>>;

/// A GET with `accept`; the body, whole.
async fn fetch(c: &C, url: &str, accept: &str) -> Bytes {
    let req = http::Request::get(url).header("accept", accept);
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    assert_eq!(resp.headers()["x-r8s-cache"], "hit", "{url}");
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// A streaming list, read until its initial-events-end bookmark.
async fn stream_initial(c: &C, url: &str) -> usize {
    let resp = c
        .request(http::Request::get(url).body(Empty::new()).unwrap())
        .await
        .unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let mut body = resp.into_body();
    let mut seen = Vec::new();
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.unwrap().into_data() {
            seen.extend_from_slice(&d);
            if memchr_end(&seen) {
                return seen.len();
            }
        }
    }
    panic!("{url}: ended before its initial-events-end bookmark");
}

fn memchr_end(seen: &[u8]) -> bool {
    const END: &[u8] = b"\"k8s.io/initial-events-end\":\"true\"";
    seen.windows(END.len()).any(|w| w == END)
}

/// One kind of read, measured: r8s CPU per request and latency.
struct Measured {
    what: String,
    requests: usize,
    cpu_per: Duration,
    p50: Duration,
    p99: Duration,
    bytes: usize,
}

/// Runs `per` requests on each of `CLIENTS` clients through `call` and
/// reads what they cost r8s (process `pid`).
async fn measure<F, Fut>(what: &str, pid: u32, per: usize, call: F) -> Measured
where
    F: Fn(usize) -> Fut + Clone + Send + Sync + 'static,
    Fut: std::future::Future<Output = usize> + Send,
{
    let counter = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let bytes = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let before = cpu_time(pid);
    let l = load((0..CLIENTS).collect(), per, {
        let (counter, bytes, call) = (counter.clone(), bytes.clone(), call.clone());
        move |_| {
            let (counter, bytes, call) = (counter.clone(), bytes.clone(), call.clone());
            async move {
                let i = counter.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
                let n = call(i).await;
                bytes.fetch_add(n, std::sync::atomic::Ordering::Relaxed);
            }
        }
    })
    .await;
    let requests = CLIENTS * per;
    Measured {
        what: what.to_string(),
        requests,
        cpu_per: (cpu_time(pid) - before) / requests as u32,
        p50: l.percentile(50),
        p99: l.percentile(99),
        bytes: bytes.load(std::sync::atomic::Ordering::Relaxed) / requests,
    }
}

/// The nodes to read, a fixed spread over all of them (the same for every build).
fn node(i: usize) -> String {
    format!("node-{:02}", (i * 7_919) % nodes())
}

/// Starts `bin` caching pods from `sim` and measures the four reads.
async fn run_build(
    c: &C,
    bin: &str,
    sim: &str,
    pods: usize,
    config: Option<&std::path::Path>,
) -> (Vec<Measured>, u64, Duration) {
    let (port, admin) = (free_port(), free_port());
    let started = Instant::now();
    // A build that scans answers a node-scoped read in milliseconds, not
    // microseconds: fewer of them measure it as well.
    let (node_per, stream_per) = if config.is_some() {
        (512, 128)
    } else {
        (16, 8)
    };
    let mut cmd = Command::new(bin);
    cmd.arg("serve");
    if let Some(config) = config {
        cmd.arg("--config").arg(config);
    }
    let r8s = Proc(
        cmd.args(["--upstream", sim, "--cache", "pods"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    let synced = started.elapsed();
    let pid = r8s.0.id();
    let rss = rss_kib(pid);
    let base = format!("http://127.0.0.1:{port}/api/v1");
    let mut out = Vec::new();
    let pb = "application/vnd.kubernetes.protobuf";
    // Warm the paths (allocator, gzip-less plain lists) before counting.
    fetch(
        c,
        &format!(
            "{base}/pods?resourceVersion=0&limit=500&fieldSelector=spec.nodeName%3D{}",
            node(0)
        ),
        pb,
    )
    .await;
    let list = {
        let (c, base) = (c.clone(), base.clone());
        move |i: usize| {
            let (c, base) = (c.clone(), base.clone());
            async move {
                let url = format!(
                    "{base}/pods?resourceVersion=0&limit=500&fieldSelector=spec.nodeName%3D{}",
                    node(i)
                );
                fetch(&c, &url, pb).await.len()
            }
        }
    };
    out.push(
        measure(
            "node-scoped LIST (protobuf, limit=500)",
            pid,
            node_per,
            list,
        )
        .await,
    );
    let streaming = {
        let (c, base) = (c.clone(), base.clone());
        move |i: usize| {
            let (c, base) = (c.clone(), base.clone());
            async move {
                let url = format!(
                    "{base}/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=30&fieldSelector=spec.nodeName%3D{}",
                    node(i)
                );
                stream_initial(&c, &url).await
            }
        }
    };
    out.push(
        measure(
            "node-scoped streaming list (JSON)",
            pid,
            stream_per,
            streaming,
        )
        .await,
    );
    // At a million pods a namespace's list is 300 MB: `SCALE_NODE_READS_ONLY`
    // measures the node-scoped reads (and the memory) only.
    if std::env::var("SCALE_NODE_READS_ONLY").is_ok() {
        drop(r8s);
        return (out, rss, synced);
    }
    let per_ns = (pods / 10 / 1_000).clamp(1, 4);
    let namespace = {
        let (c, base) = (c.clone(), base.clone());
        move |i: usize| {
            let (c, base) = (c.clone(), base.clone());
            async move {
                let url = format!("{base}/namespaces/ns-{}/pods?resourceVersion=0", i % 10);
                fetch(&c, &url, pb).await.len()
            }
        }
    };
    out.push(
        measure(
            "namespace LIST (protobuf, a tenth of the pods)",
            pid,
            per_ns,
            namespace,
        )
        .await,
    );
    let label = {
        let (c, base) = (c.clone(), base.clone());
        move |i: usize| {
            let (c, base) = (c.clone(), base.clone());
            async move {
                let url = format!(
                    "{base}/pods?resourceVersion=0&labelSelector=app%3Dapp-{}",
                    i % 20
                );
                fetch(&c, &url, pb).await.len()
            }
        }
    };
    out.push(measure("label LIST (protobuf, app=app-N)", pid, 4, label).await);
    let tier = {
        let (c, base) = (c.clone(), base.clone());
        move |i: usize| {
            let (c, base) = (c.clone(), base.clone());
            async move {
                let url = format!(
                    "{base}/pods?resourceVersion=0&limit=500&labelSelector=app%20in%20(app-{},app-{})",
                    i % 20,
                    (i + 7) % 20
                );
                fetch(&c, &url, pb).await.len()
            }
        }
    };
    out.push(
        measure(
            "label set LIST (protobuf, app in (..), limit=500)",
            pid,
            16,
            tier,
        )
        .await,
    );
    drop(r8s);
    (out, rss, synced)
}

#[tokio::main]
async fn main() {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let subject = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let scan = std::env::var("BENCH_SCAN_BIN").ok();
    let sizes: Vec<usize> = std::env::var("SCALE_PODS")
        .unwrap_or_else(|_| "10000,50000,150000".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    println!(
        "machine: {} cores; r8s: {subject}; full-scan build: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        scan.as_deref().unwrap_or("(none)")
    );
    println!();
    println!(
        "| pods | build | read | requests | r8s CPU per request | p50 | p99 | bytes per answer |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let mut summary = Vec::new();
    // The indexed build indexes pods by node (the default) and by `app`.
    let config = std::env::temp_dir().join(format!("r8s-scale-{}.toml", std::process::id()));
    // `SCALE_CACHE_CONFIG` adds `[cache]` keys: at a million pods the sim's
    // protobuf streaming list outlasts the upstream watch's deadline (a
    // quarter to a half of `max_staleness_seconds`, plus a quarter), so that
    // run sets `max_staleness_seconds = 1200`.
    let extra = std::env::var("SCALE_CACHE_CONFIG").unwrap_or_default();
    std::fs::write(
        &config,
        format!("[cache]\nindexes = {{ pods = [\"spec.nodeName\", \"label:app\"] }}\n{extra}\n"),
    )
    .unwrap();
    for pods in sizes {
        let port = free_port();
        let started = Instant::now();
        let _sim = sim(
            &subject,
            port,
            &[
                "--pods",
                &pods.to_string(),
                "--nodes",
                &nodes().to_string(),
                "--namespaces",
                "10",
                "--history",
                "10000",
            ],
        );
        let sim_url = format!("http://127.0.0.1:{port}");
        wait_ready(&c, &format!("{sim_url}/version")).await;
        eprintln!("sim with {pods} pods up after {:?}", started.elapsed());
        let builds: Vec<(&str, String)> = std::iter::once(("indexed", subject.clone()))
            .chain(scan.clone().map(|b| ("full scan", b)))
            .collect();
        for (label, bin) in builds {
            let config = (label == "indexed").then_some(config.as_path());
            let (rows, rss, synced) = run_build(&c, &bin, &sim_url, pods, config).await;
            for m in &rows {
                println!(
                    "| {pods} | {label} | {} | {} | {:.2} ms | {:.2} ms | {:.2} ms | {} |",
                    m.what,
                    m.requests,
                    m.cpu_per.as_secs_f64() * 1e3,
                    m.p50.as_secs_f64() * 1e3,
                    m.p99.as_secs_f64() * 1e3,
                    m.bytes
                );
            }
            summary.push(format!(
                "{pods} pods, {label}: synced in {synced:?}, RSS after sync {:.0} MiB ({:.0} bytes per pod, both encodings)",
                rss as f64 / 1024.0,
                rss as f64 * 1024.0 / pods as f64
            ));
        }
    }
    println!();
    for s in summary {
        println!("{s}");
    }
    let _ = std::fs::remove_file(config);
}
