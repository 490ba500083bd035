//! A node pool restarting (issue 41): with 150,000 real-shaped pods on 5,000
//! nodes in the sim and r8s caching pods in front of it,
//!
//! - (a) 5,000 kubelet-shaped starts at once: a protobuf list of the node's
//!   pods at `resourceVersion=0` with `limit=500`, then a watch from the
//!   list's version, kept open;
//! - (b) 5,000 starts as client-go ≥ 0.35 makes them: a consistent
//!   streaming list of the node's pods (no `resourceVersion`), read to its
//!   initial-events-end bookmark;
//! - (c) then 100 pod writes/s to the sim for 10 s, each to a pod of a
//!   different node, and the time until the watcher of that node has it.
//!
//! For each start phase: wall time, r8s CPU, the p50/p99 time to the
//! initial state, and what r8s asked its upstream meanwhile (responses by
//! `r8s_upstream_requests_total`, proofs' lists by
//! `r8s_consistent_upstream_requests_total`).
//!
//! `cargo bench --bench storm` (results in BENCHMARKS.md). `STORM_PODS` and
//! `STORM_NODES` change the size (150000 and 5000). The sim and r8s run as
//! separate processes on 127.0.0.1 and stop by themselves; the bench holds
//! 5,000 connections, so it needs that many open files (it says so).

mod common;

use std::collections::HashMap;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::{Buf, Bytes, BytesMut};
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::mpsc;

use common::{Proc, cpu_time, env_or, free_port, rss_kib, sim, wait_ready};
use r8s::codec::protobuf as pb;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";

type C = Client<HttpConnector, Empty<Bytes>>;

fn node(i: usize) -> String {
    format!("node-{i:02}")
}

/// A protobuf list's version and its items' `namespace/name`.
fn list_of(body: &[u8]) -> (String, Vec<String>) {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let u = pb::unwrap(body).expect("a protobuf list");
    let (mut rv, mut items) = (String::new(), Vec::new());
    for f in pb::fields(u.raw) {
        let f = f.unwrap();
        let pb::Value::Bytes(v) = f.value else {
            continue;
        };
        match f.number {
            1 => rv = text(pb::find(v, 2).unwrap()),
            2 => {
                let meta = pb::find(v, 1).unwrap().unwrap();
                let (name, ns) = (
                    text(pb::find(meta, 1).unwrap()),
                    text(pb::find(meta, 3).unwrap()),
                );
                items.push(format!("{ns}/{name}"));
            }
            _ => {}
        }
    }
    (rv, items)
}

/// What r8s has asked its upstream so far: every response, and proofs' lists.
async fn upstream_requests(c: &C, admin: &str) -> (f64, f64) {
    let resp = c
        .get(format!("{admin}/metrics").parse().unwrap())
        .await
        .unwrap();
    let text = resp.into_body().collect().await.unwrap().to_bytes();
    let text = String::from_utf8_lossy(&text);
    let sum = |prefix: &str, also: &str| -> f64 {
        text.lines()
            .filter(|l| l.starts_with(prefix) && l.contains(also))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum()
    };
    (
        sum("r8s_upstream_requests_total{", ""),
        sum("r8s_consistent_upstream_requests_total{", "step=\"list\""),
    )
}

/// One start phase, measured.
struct Phase {
    what: &'static str,
    wall: Duration,
    cpu: Duration,
    ready: Vec<Duration>,
    upstream: (f64, f64),
}

impl Phase {
    fn print(&self) {
        let mut ready = self.ready.clone();
        ready.sort();
        let at = |p: usize| ready[(ready.len() * p / 100).min(ready.len() - 1)];
        println!(
            "| {} | {} | {:.2} s | {:.2} s | {:.0} ms | {:.0} ms | {} | {} |",
            self.what,
            ready.len(),
            self.wall.as_secs_f64(),
            self.cpu.as_secs_f64(),
            at(50).as_secs_f64() * 1e3,
            at(99).as_secs_f64() * 1e3,
            self.upstream.0,
            self.upstream.1,
        );
    }
}

/// Reads a protobuf watch stream's frames (4-byte length, then the event)
/// and reports each one's arrival as `node`'s.
async fn frames(
    mut body: hyper::body::Incoming,
    node: usize,
    arrived: mpsc::UnboundedSender<(usize, Instant)>,
) {
    let mut buf = BytesMut::new();
    while let Some(Ok(f)) = body.frame().await {
        let Ok(d) = f.into_data() else { continue };
        buf.extend_from_slice(&d);
        while buf.len() >= 4 {
            let len = u32::from_be_bytes(buf[..4].try_into().unwrap()) as usize;
            if buf.len() < 4 + len {
                break;
            }
            buf.advance(4 + len);
            if arrived.send((node, Instant::now())).is_err() {
                return;
            }
        }
    }
}

#[tokio::main]
async fn main() {
    let pods = env_or("STORM_PODS", 150_000);
    let nodes = env_or("STORM_NODES", 5_000);
    let c: C = Client::builder(TokioExecutor::new())
        .pool_max_idle_per_host(nodes * 2)
        .build(HttpConnector::new());
    let files = rlimit_files();
    assert!(
        files > (nodes as u64) * 2 + 100,
        "the bench holds {nodes} watches: raise the open-files limit (ulimit -n) above {}, it is {files}",
        nodes * 2 + 100
    );
    println!(
        "machine: {} cores; {pods} pods on {nodes} nodes",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    let sim_port = free_port();
    let started = Instant::now();
    let _sim = sim(
        BIN,
        sim_port,
        &[
            "--pods",
            &pods.to_string(),
            "--nodes",
            &nodes.to_string(),
            "--namespaces",
            "10",
            "--history",
            "100000",
        ],
    );
    let sim_url = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim_url}/version")).await;
    eprintln!("sim up after {:?}", started.elapsed());
    let (port, admin_port) = (free_port(), free_port());
    let started = Instant::now();
    let r8s = Proc(
        Command::new(BIN)
            .args(["serve", "--upstream", &sim_url, "--cache", "pods"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
            .stderr(match std::env::var("STORM_R8S_LOG") {
                Ok(path) => Stdio::from(std::fs::File::create(path).unwrap()),
                Err(_) => Stdio::null(),
            })
            .spawn()
            .unwrap(),
    );
    let admin = format!("http://127.0.0.1:{admin_port}");
    wait_ready(&c, &format!("{admin}/readyz")).await;
    let pid = r8s.0.id();
    println!(
        "r8s synced in {:.1} s, RSS {} MiB",
        started.elapsed().as_secs_f64(),
        rss_kib(pid) / 1024
    );
    let base = format!("http://127.0.0.1:{port}/api/v1/pods");
    let sel = |n: usize| format!("fieldSelector=spec.nodeName%3D{}", node(n));
    println!();
    println!(
        "| phase | starts | wall | r8s CPU | p50 to initial state | p99 | upstream responses | proof lists |"
    );
    println!("|---|---|---|---|---|---|---|---|");

    // (a) Kubelets: list at 0, then watch from the list's version.
    let (arrived_tx, mut arrived) = mpsc::unbounded_channel();
    let (up0, cpu0, t0) = (
        upstream_requests(&c, &admin).await,
        cpu_time(pid),
        Instant::now(),
    );
    let mut tasks = Vec::new();
    for n in 0..nodes {
        let (c, base, sel, tx) = (c.clone(), base.clone(), sel(n), arrived_tx.clone());
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let url = format!("{base}?resourceVersion=0&limit=500&{sel}");
            let req = http::Request::get(url).header("accept", PROTOBUF);
            let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
            assert_eq!(resp.headers()["x-r8s-cache"], "hit");
            let body = resp.into_body().collect().await.unwrap().to_bytes();
            let (rv, items) = list_of(&body);
            let listed = start.elapsed();
            let url = format!("{base}?watch=1&resourceVersion={rv}&timeoutSeconds=900&{sel}");
            let req = http::Request::get(url).header("accept", PROTOBUF);
            let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
            assert!(resp.status().is_success());
            let watching = start.elapsed();
            tokio::spawn(frames(resp.into_body(), n, tx));
            (listed, watching, items)
        }));
    }
    let mut ready = Vec::new();
    let mut names = Vec::new();
    for t in tasks {
        let (_, watching, items) = t.await.unwrap();
        ready.push(watching);
        names.push(items);
    }
    let wall = t0.elapsed();
    let up = upstream_requests(&c, &admin).await;
    Phase {
        what: "(a) kubelet starts: protobuf list at 0, limit=500, then a watch from it",
        wall,
        cpu: cpu_time(pid) - cpu0,
        ready,
        upstream: (up.0 - up0.0, up.1 - up0.1),
    }
    .print();
    let listed: usize = names.iter().map(Vec::len).sum();
    eprintln!("(a) listed {listed} pods over {nodes} nodes");

    // (b) client-go ≥ 0.35: a consistent streaming list of the node.
    let (up0, cpu0, t0) = (up, cpu_time(pid), Instant::now());
    let mut tasks = Vec::new();
    for n in 0..nodes {
        let (c, base, sel) = (c.clone(), base.clone(), sel(n));
        tasks.push(tokio::spawn(async move {
            let start = Instant::now();
            let url = format!(
                "{base}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=900&{sel}"
            );
            let req = http::Request::get(url).header("accept", PROTOBUF);
            let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
            assert_eq!(resp.headers()["x-r8s-cache"], "hit");
            let mut body = resp.into_body();
            let mut seen = Vec::new();
            const END: &[u8] = b"k8s.io/initial-events-end";
            while let Some(f) = body.frame().await {
                if let Ok(d) = f.unwrap().into_data() {
                    seen.extend_from_slice(&d);
                    if seen.windows(END.len()).any(|w| w == END) {
                        return start.elapsed();
                    }
                }
            }
            panic!("a streaming list ended before its initial-events-end bookmark");
        }));
    }
    let mut ready = Vec::new();
    for t in tasks {
        ready.push(t.await.unwrap());
    }
    let wall = t0.elapsed();
    let up = upstream_requests(&c, &admin).await;
    Phase {
        what: "(b) client-go 0.35 starts: consistent streaming list of the node",
        wall,
        cpu: cpu_time(pid) - cpu0,
        ready,
        upstream: (up.0 - up0.0, up.1 - up0.1),
    }
    .print();

    // (c) 100 writes/s to the sim, each to a pod of another node; the time
    // until that node's watcher (from (a)) has the event.
    tokio::time::sleep(Duration::from_secs(1)).await;
    while arrived.try_recv().is_ok() {}
    let writes = 1_000.min(nodes);
    let sent: Arc<std::sync::Mutex<HashMap<usize, Instant>>> = Arc::default();
    let wc: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let cpu0 = cpu_time(pid);
    let mut tick = tokio::time::interval(Duration::from_millis(10));
    let mut writers = Vec::new();
    for i in 0..writes {
        tick.tick().await;
        // Spread over the nodes that have a pod.
        let n = (i * 7_919) % nodes;
        let Some(key) = names[n].first().cloned() else {
            continue;
        };
        let (ns, name) = key.split_once('/').unwrap();
        let url = format!("{sim_url}/api/v1/namespaces/{ns}/pods/{name}");
        let (wc, sent) = (wc.clone(), sent.clone());
        writers.push(tokio::spawn(async move {
            let patch = format!(r#"{{"metadata":{{"labels":{{"storm":"w{i}"}}}}}}"#);
            let req = http::Request::patch(url)
                .header("content-type", "application/merge-patch+json")
                .body(Full::new(Bytes::from(patch)))
                .unwrap();
            sent.lock().unwrap().insert(n, Instant::now());
            let resp = wc.request(req).await.unwrap();
            assert!(resp.status().is_success(), "{}", resp.status());
        }));
    }
    for w in writers {
        w.await.unwrap();
    }
    let deadline = Instant::now() + Duration::from_secs(30);
    let mut delivered = Vec::new();
    let expected = sent.lock().unwrap().len();
    while delivered.len() < expected && Instant::now() < deadline {
        let Ok(Some((n, at))) = tokio::time::timeout(Duration::from_secs(5), arrived.recv()).await
        else {
            break;
        };
        if let Some(s) = sent.lock().unwrap().remove(&n) {
            delivered.push(at.saturating_duration_since(s));
        }
    }
    delivered.sort();
    let at = |p: usize| delivered[(delivered.len() * p / 100).min(delivered.len() - 1)];
    println!();
    println!(
        "(c) {} writes at 100/s to {nodes} node watchers: {} delivered, latency from the write sent p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms; r8s CPU {:.2} s",
        expected,
        delivered.len(),
        at(50).as_secs_f64() * 1e3,
        at(99).as_secs_f64() * 1e3,
        delivered.last().unwrap().as_secs_f64() * 1e3,
        (cpu_time(pid) - cpu0).as_secs_f64()
    );
    println!("r8s RSS at the end: {} MiB", rss_kib(pid) / 1024);
    if std::env::var("STORM_DEBUG").is_ok() {
        let resp = c
            .get(format!("{admin}/metrics").parse().unwrap())
            .await
            .unwrap();
        let text = resp.into_body().collect().await.unwrap().to_bytes();
        for l in String::from_utf8_lossy(&text).lines() {
            if l.contains("upstream") && !l.starts_with('#') && !l.contains("_bucket") {
                eprintln!("{l}");
            }
        }
    }
    drop(r8s);
}

/// The soft limit on open files (`ulimit -n`).
fn rlimit_files() -> u64 {
    std::fs::read_to_string("/proc/self/limits")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Max open files"))
                .and_then(|l| l.split_whitespace().nth(3)?.parse().ok())
        })
        .unwrap_or(0)
}
