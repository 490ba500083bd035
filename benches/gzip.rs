//! gzip lists: r8s's bytes on the wire against kube-apiserver's gzip (Go's
//! `compress/gzip` at level 1 over the same body, as its response writer
//! does), and r8s's CPU per gzip list against the same list uncompressed,
//! on the sim's real-shaped pods, idle and under churn.
//!
//! `cargo bench --bench gzip` (results in BENCHMARKS.md). The Go side runs
//! when `go` is on the PATH (`apt-get install golang-go`): `benches/go/
//! apiserver_gzip.go` compresses each body r8s served. `BENCH_R8S_BIN=/path/to/r8s`
//! measures another r8s binary (an older build); `BENCH_PODS=N` another size;
//! `BENCH_ONLY=watchlist` only the streaming lists (informer starts).

mod common;

use std::io::{Read, Write};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, cpu_time, free_port, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const ROUNDS: u32 = 30;

const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// client-go's metadata informers.
const METADATA: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";

type C = Client<HttpConnector, Empty<Bytes>>;

/// A GET with `accept`; the body as sent and whether it came gzipped.
async fn fetch(c: &C, url: &str, accept: &str, gzip: bool) -> (Bytes, bool) {
    let mut req = http::Request::get(url).header("accept", accept);
    if gzip {
        req = req.header("accept-encoding", "gzip");
    }
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let gz = resp.headers().get("content-encoding").is_some();
    (resp.into_body().collect().await.unwrap().to_bytes(), gz)
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// Kube-apiserver's gzip: the Go program, built once.
struct Go(Option<std::path::PathBuf>);

impl Go {
    fn build() -> Go {
        let src = concat!(
            concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
            "/benches/go/apiserver_gzip.go"
        );
        let out = std::env::temp_dir().join(format!("r8s-apiserver-gzip-{}", std::process::id()));
        let ok = Command::new("go")
            .args(["build", "-o"])
            .arg(&out)
            .arg(src)
            .status()
            .is_ok_and(|s| s.success());
        Go(ok.then_some(out))
    }

    /// Go's level-1 gzip of `body`: its bytes and best time of 5.
    fn gzip(&self, body: &[u8]) -> Option<(usize, Duration)> {
        let mut child = Command::new(self.0.as_ref()?)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .ok()?;
        child.stdin.take().unwrap().write_all(body).unwrap();
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8(out.stdout).unwrap();
        let mut f = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
        Some((f.next()? as usize, Duration::from_nanos(f.next()?)))
    }
}

impl Drop for Go {
    fn drop(&mut self) {
        if let Some(p) = &self.0 {
            let _ = std::fs::remove_file(p);
        }
    }
}

/// A sim and an r8s in front of it, as their own processes.
struct Setup {
    _sim: Proc,
    r8s: Proc,
    base: String,
    admin: String,
}

async fn setup(c: &C, pods: usize, churn: u32) -> Setup {
    let (sim_port, port, admin) = (free_port(), free_port(), free_port());
    let sim = Proc(
        Command::new(BIN)
            .args(["sim", "--listen", &format!("127.0.0.1:{sim_port}")])
            // 1.37 gzips streaming lists, and r8s follows its upstream's version.
            .args(["--kube-minor", "37"])
            .args(["--pods", &pods.to_string(), "--churn", &churn.to_string()])
            .args(["--history", "100000"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let upstream = format!("http://127.0.0.1:{sim_port}");
    wait_ready(c, &format!("{upstream}/version")).await;
    let bin = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let r8s = Proc(
        Command::new(bin)
            .args(["serve", "--upstream", &upstream, "--cache", "pods"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    Setup {
        _sim: sim,
        r8s,
        base: format!("http://127.0.0.1:{port}/api/v1"),
        admin: format!("http://127.0.0.1:{admin}"),
    }
}

fn mb(n: usize) -> String {
    format!("{:.2} MB", n as f64 / 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

/// The time to gzip `body` at `level` with the deflate r8s is built with
/// (zlib-rs), in 64 KiB writes, best of 3, and the bytes out.
fn compress_here(body: &[u8], level: u32) -> (usize, Duration) {
    let mut best = Duration::MAX;
    let mut size = 0;
    for _ in 0..3 {
        let start = Instant::now();
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::new(level));
        for chunk in body.chunks(64 * 1024) {
            enc.write_all(chunk).unwrap();
        }
        size = enc.finish().unwrap().len();
        best = best.min(start.elapsed());
    }
    (size, best)
}

/// One row of the bytes table: r8s's gzip against Go's of the same body.
fn bytes_row(go: &Go, name: &str, bodies: &[(Bytes, Bytes)]) {
    let plain: usize = bodies.iter().map(|(p, _)| p.len()).sum();
    let ours: usize = bodies.iter().map(|(_, g)| g.len()).sum();
    let mut theirs = 0;
    let mut worst: f64 = 0.0;
    for (p, g) in bodies {
        assert!(gunzip(g) == p[..], "{name}: the gzip body is not the list");
        if let Some((n, _)) = go.gzip(p) {
            theirs += n;
            worst = worst.max(g.len() as f64 / n as f64);
        }
    }
    let vs = if theirs > 0 {
        format!(
            "{:.2}×{}",
            ours as f64 / theirs as f64,
            if bodies.len() > 1 {
                format!(" (worst page {worst:.2}×)")
            } else {
                String::new()
            }
        )
    } else {
        "(go not installed)".into()
    };
    println!(
        "| {name} | {} | {} | {} | {vs} |",
        mb(plain),
        mb(ours),
        if theirs > 0 { mb(theirs) } else { "-".into() },
    );
}

/// Every page of a JSON list of `limit` items, plain and gzip (the same
/// page twice: pages of one retained version).
async fn pages(c: &C, url: &str, limit: usize) -> Vec<(Bytes, Bytes)> {
    let mut out = Vec::new();
    let mut cont = String::new();
    loop {
        let u = format!("{url}&limit={limit}{cont}");
        let (plain, _) = fetch(c, &u, JSON, false).await;
        let (gz, zipped) = fetch(c, &u, JSON, true).await;
        let v: serde_json::Value = serde_json::from_slice(&plain).unwrap();
        let next = v["metadata"]["continue"].as_str().unwrap_or("").to_string();
        // Small last pages are not compressed (under 128 KiB).
        if zipped {
            out.push((plain, gz));
        }
        if next.is_empty() {
            return out;
        }
        cont = format!("&continue={next}");
    }
}

/// r8s's CPU per list over `ROUNDS` lists, less `idle` CPU per second
/// (churn applied meanwhile).
async fn cpu_per_list(c: &C, pid: u32, url: &str, accept: &str, gzip: bool, idle: f64) -> Duration {
    let before = cpu_time(pid);
    let start = Instant::now();
    for _ in 0..ROUNDS {
        fetch(c, url, accept, gzip).await;
    }
    let spent = cpu_time(pid) - before;
    let background = Duration::from_secs_f64(idle * start.elapsed().as_secs_f64());
    spent.saturating_sub(background) / ROUNDS
}

/// r8s's CPU per second with no requests (applying churn).
async fn idle_cpu(pid: u32) -> f64 {
    let before = cpu_time(pid);
    tokio::time::sleep(Duration::from_secs(3)).await;
    (cpu_time(pid) - before).as_secs_f64() / 3.0
}

async fn cpu_table(c: &C, s: &Setup, lists: &[(&str, &str)], churn: u32) {
    let pid = s.r8s.0.id();
    let url = format!("{}/pods?resourceVersion=0", s.base);
    let idle = if churn > 0 { idle_cpu(pid).await } else { 0.0 };
    for (name, accept) in lists {
        // The first gzip list compresses the runs (none are kept yet, or
        // churn changed some).
        let before = cpu_time(pid);
        fetch(c, &url, accept, true).await;
        let first = cpu_time(pid) - before;
        cpu_per_list(c, pid, &url, accept, false, idle).await; // warm
        let plain = cpu_per_list(c, pid, &url, accept, false, idle).await;
        let gzip = cpu_per_list(c, pid, &url, accept, true, idle).await;
        println!(
            "| {name}{} | {} | {} | {} | {:.2}× |",
            if churn > 0 {
                format!(", {churn} writes/s")
            } else {
                String::new()
            },
            ms(plain),
            ms(first),
            ms(gzip),
            gzip.as_secs_f64() / plain.as_secs_f64()
        );
    }
}

/// Informer starts measured: streaming lists that end 1 s after they start
/// (the initial events, the end bookmark, nothing else at idle).
const STARTS: u32 = 10;

/// An informer's start (a streaming list, as client-go 1.35+ opens it) in
/// each encoding, plain and gzip (`server.watchlist_compression`): bytes
/// on the wire and r8s's CPU per start.
async fn watchlist_table(c: &C, s: &Setup, go: &Go, pods: usize) {
    let pid = s.r8s.0.id();
    let url = format!(
        "{}/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1",
        s.base
    );
    println!();
    println!("## An informer's start: a streaming list of {pods} pods");
    println!();
    println!(
        "| streaming list | plain bytes | gzip bytes | Go level 1 of the plain stream | r8s CPU, plain | r8s CPU, gzip (first) | r8s CPU, gzip | gzip / plain CPU |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let watches = [
        ("JSON", JSON),
        ("protobuf", PROTOBUF),
        (
            "metadata-only protobuf",
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
        ),
    ];
    for (name, accept) in watches {
        let before = cpu_time(pid);
        let (gz, zipped) = fetch(c, &url, accept, true).await;
        let first = cpu_time(pid) - before;
        assert!(zipped, "{name}: the streaming list is not gzip");
        let (plain, zipped) = fetch(c, &url, accept, false).await;
        assert!(!zipped);
        assert!(
            gunzip(&gz) == plain[..],
            "{name}: the gzip stream is not the stream"
        );
        let per_start = |gzip: bool| {
            let url = url.clone();
            async move {
                let before = cpu_time(pid);
                for _ in 0..STARTS {
                    fetch(c, &url, accept, gzip).await;
                }
                (cpu_time(pid) - before) / STARTS
            }
        };
        let plain_cpu = per_start(false).await;
        let gzip_cpu = per_start(true).await;
        println!(
            "| {name} | {} | {} ({:.1}× fewer) | {} | {} | {} | {} | {:.2}× |",
            mb(plain.len()),
            mb(gz.len()),
            plain.len() as f64 / gz.len() as f64,
            go.gzip(&plain).map_or("-".into(), |(n, _)| mb(n)),
            ms(plain_cpu),
            ms(first),
            ms(gzip_cpu),
            gzip_cpu.as_secs_f64() / plain_cpu.as_secs_f64(),
        );
    }
}

#[tokio::main]
async fn main() {
    let pods: usize = std::env::var("BENCH_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let go = Go::build();
    if std::env::var("BENCH_ONLY").as_deref() == Ok("watchlist") {
        let s = setup(&c, pods, 0).await;
        watchlist_table(&c, &s, &go, pods).await;
        return;
    }
    let lists = [
        ("JSON", JSON),
        ("protobuf", PROTOBUF),
        ("metadata-only protobuf", METADATA),
    ];

    let s = setup(&c, pods, 0).await;
    let all = format!("{}/pods?resourceVersion=0", s.base);
    println!("## {pods} pods, idle");
    println!();
    println!(
        "| r8s CPU per list | plain | gzip, first (runs compressed) | gzip, then | gzip / plain |"
    );
    println!("|---|---|---|---|---|");
    cpu_table(&c, &s, &lists, 0).await;
    println!();
    println!("| list | plain | r8s gzip | kube-apiserver gzip (Go level 1) | r8s / apiserver |");
    println!("|---|---|---|---|---|");
    for (name, accept) in lists {
        let (plain, _) = fetch(&c, &all, accept, false).await;
        let (gz, zipped) = fetch(&c, &all, accept, true).await;
        assert!(zipped);
        bytes_row(&go, &format!("all pods, {name}"), &[(plain, gz)]);
    }
    let (json_list, _) = fetch(&c, &all, JSON, false).await;
    let paged = pages(&c, &all, 500).await;
    bytes_row(&go, "all pods, JSON, pages of 500", &paged);
    let paged = pages(
        &c,
        &format!("{}/namespaces/ns-1/pods?resourceVersion=0", s.base),
        500,
    )
    .await;
    bytes_row(&go, "namespace ns-1, JSON, pages of 500", &paged);
    for (name, query, accept) in [
        (
            "labelSelector=tier=frontend, JSON",
            "labelSelector=tier%3Dfrontend",
            JSON,
        ),
        (
            "labelSelector=tier=frontend, protobuf",
            "labelSelector=tier%3Dfrontend",
            PROTOBUF,
        ),
        (
            "labelSelector=tier!=frontend, JSON",
            "labelSelector=tier%21%3Dfrontend",
            JSON,
        ),
        (
            "fieldSelector=spec.nodeName=node-03, JSON",
            "fieldSelector=spec.nodeName%3Dnode-03",
            JSON,
        ),
        (
            "fieldSelector=spec.nodeName=node-03, protobuf",
            "fieldSelector=spec.nodeName%3Dnode-03",
            PROTOBUF,
        ),
    ] {
        let url = format!("{all}&{query}");
        let (plain, _) = fetch(&c, &url, accept, false).await;
        let (gz, zipped) = fetch(&c, &url, accept, true).await;
        if zipped {
            bytes_row(&go, name, &[(plain, gz)]);
        }
    }
    watchlist_table(&c, &s, &go, pods).await;
    println!();
    println!(
        "| compressor (the JSON list, {}, one core) | bytes | time | MB/s | bytes vs Go level 1 |",
        mb(json_list.len())
    );
    println!("|---|---|---|---|---|");
    let go_size = go.gzip(&json_list).map(|(n, t)| {
        println!(
            "| kube-apiserver: Go compress/gzip level 1 | {} | {} | {:.0} | 1.00× |",
            mb(n),
            ms(t),
            json_list.len() as f64 / 1e6 / t.as_secs_f64()
        );
        n
    });
    for level in 1..=6 {
        let (n, t) = compress_here(&json_list, level);
        println!(
            "| zlib-rs level {level} | {} | {} | {:.0} | {} |",
            mb(n),
            ms(t),
            json_list.len() as f64 / 1e6 / t.as_secs_f64(),
            go_size.map_or("-".into(), |g| format!("{:.2}×", n as f64 / g as f64))
        );
    }
    let (metrics, _) = fetch(&c, &format!("{}/metrics", s.admin), "text/plain", false).await;
    let text = String::from_utf8_lossy(&metrics);
    for line in text.lines().filter(|l| l.starts_with("r8s_list_gzip")) {
        println!("{line}");
    }
    drop(s);

    let s = setup(&c, pods, 100).await;
    println!();
    println!("## {pods} pods, 100 writes/s");
    println!();
    println!(
        "| r8s CPU per list | plain | gzip, first (runs compressed) | gzip, then | gzip / plain |"
    );
    println!("|---|---|---|---|---|");
    cpu_table(&c, &s, &lists, 100).await;
    println!();
    println!("| list | plain | r8s gzip | kube-apiserver gzip (Go level 1) | r8s / apiserver |");
    println!("|---|---|---|---|---|");
    let all = format!("{}/pods?resourceVersion=0", s.base);
    for (name, accept) in lists {
        let (plain, _) = fetch(&c, &all, accept, false).await;
        let (gz, _) = fetch(&c, &all, accept, true).await;
        // Not the same version under churn: compare each with Go's gzip of itself.
        let plain_of_gz = Bytes::from(gunzip(&gz));
        let _ = plain;
        bytes_row(
            &go,
            &format!("all pods, {name}, under churn"),
            &[(plain_of_gz, gz)],
        );
    }
}
