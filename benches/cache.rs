//! Serving from the cache against its floor: a trivial HTTP server that
//! returns the very same bytes (no routing, no cache, no filtering).
//!
//! `cargo bench --bench cache` (results in BENCHMARKS.md). The sim and r8s run
//! as separate processes (the release binary), so r8s's RSS can be measured:
//! RSS per cached byte = (RSS of r8s caching pods − RSS of r8s caching nothing)
//! ÷ bytes of the pods' JSON. r8s's CPU per request is its user+system time
//! over a run (`/proc/PID/stat`) divided by the requests: steadier than
//! latency on a shared machine. Everything runs on 127.0.0.1 and stops by itself.
//!
//! `BENCH_R8S_BIN=/path/to/r8s cargo bench --bench cache` measures that r8s binary
//! (e.g. a build of an older commit) against the same sim and floor, for
//! before/after comparisons run alternately on one machine.

mod common;

use std::process::{Command, Stdio};

use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use common::{Proc, Scratch, answering, cpu_time, free_port, load, rss_kib, sim, wait_ready};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// The r8s under test: `BENCH_R8S_BIN`, or this build's.
fn r8s_bin() -> String {
    std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string())
}
const PODS: usize = 10_000;

type C = Client<HttpConnector, Empty<Bytes>>;

async fn fetch(c: &C, url: &str) -> Bytes {
    fetch_as(c, url, None).await
}

/// What client-go's typed clients ask for.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, */*";

/// A GET with `accept` (none: JSON).
async fn fetch_as(c: &C, url: &str, accept: Option<&str>) -> Bytes {
    let mut req = http::Request::get(url);
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// The floor, in a process of its own (as r8s is): this benchmark binary
/// re-executed as `floor FILE PORT`, answering every request with the file.
fn floor(scratch: &Scratch, body: &Bytes, name: &str) -> (Proc, String) {
    let path = scratch.join(&format!("floor-{name}"));
    std::fs::write(&path, body).unwrap();
    let port = free_port();
    let child = Command::new(std::env::current_exe().unwrap())
        .args(["floor", &path.display().to_string(), &port.to_string()])
        .spawn()
        .unwrap();
    (Proc(child), format!("http://127.0.0.1:{port}"))
}

/// Floor mode: serve `body` to every request on `port` until killed.
async fn floor_server(body: Bytes, port: u16) {
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let _ = s.set_nodelay(true);
            let body = body.clone();
            tokio::spawn(async move {
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), answering(body))
                    .await;
            });
        }
    }
}

/// (p50, p99, requests per second) over `n` requests by `conc` clients.
async fn measure(url: &str, n: usize, conc: usize) -> (Duration, Duration, f64) {
    measure_as(url, n, conc, None).await
}

/// [`measure`] with an `Accept`.
async fn measure_as(
    url: &str,
    n: usize,
    conc: usize,
    accept: Option<&'static str>,
) -> (Duration, Duration, f64) {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    for _ in 0..5 {
        fetch_as(&c, url, accept).await;
    }
    let url: Arc<str> = url.into();
    let l = load(vec![c; conc], n / conc, move |c| {
        let url = url.clone();
        async move {
            fetch_as(&c, &url, accept).await;
        }
    })
    .await;
    (l.percentile(50), l.percentile(99), l.rate())
}

fn ms(d: Duration) -> String {
    format!("{:.2} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("floor") {
        let body = Bytes::from(std::fs::read(&args[2]).unwrap());
        floor_server(body, args[3].parse().unwrap()).await;
        return;
    }
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let (sim_port, r8s_port, r8s_admin, bare_port, bare_admin, json_port, json_admin) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    // An r8s holding pods in JSON only, to tell the two encodings' memory apart.
    let scratch = Scratch::new("cache");
    let json_only = scratch.join("json-only.toml");
    std::fs::write(&json_only, "[cache]\nencodings = [\"json\"]\n").unwrap();
    let _sim = sim(
        BIN,
        sim_port,
        &["--pods", &PODS.to_string(), "--namespaces", "10"],
    );
    let sim = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim}/version")).await;
    let serve = |port: u16, admin: u16, cache: bool, config: Option<&std::path::Path>| {
        let mut cmd = Command::new(r8s_bin());
        cmd.args([
            "serve",
            "--upstream",
            &sim,
            "--listen",
            &format!("127.0.0.1:{port}"),
            "--admin-listen",
            &format!("127.0.0.1:{admin}"),
        ]);
        if cache {
            cmd.args(["--cache", "pods"]);
        }
        if let Some(path) = config {
            cmd.args(["--config", &path.display().to_string()]);
        }
        Proc(cmd.stderr(Stdio::null()).spawn().unwrap())
    };
    let r8s_proc = serve(r8s_port, r8s_admin, true, None);
    let bare_proc = serve(bare_port, bare_admin, false, None);
    let json_proc = serve(json_port, json_admin, true, Some(&json_only));
    let r8s = format!("http://127.0.0.1:{r8s_port}");
    wait_ready(&c, &format!("http://127.0.0.1:{r8s_admin}/readyz")).await;
    wait_ready(&c, &format!("http://127.0.0.1:{bare_admin}/readyz")).await;
    wait_ready(&c, &format!("http://127.0.0.1:{json_admin}/readyz")).await;

    let list_path = "/api/v1/pods?resourceVersion=0";
    let get_path = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0";
    let list = fetch(&c, &format!("{r8s}{list_path}")).await;
    let one = fetch(&c, &format!("{r8s}{get_path}")).await;
    let pb_list = fetch_as(&c, &format!("{r8s}{list_path}"), Some(PROTOBUF)).await;
    let pb_one = fetch_as(&c, &format!("{r8s}{get_path}"), Some(PROTOBUF)).await;
    assert!(pb_list.starts_with(b"k8s\0") && pb_one.starts_with(b"k8s\0"));
    let (_lf, list_floor) = floor(&scratch, &list, "list");
    let (_gf, get_floor) = floor(&scratch, &one, "get");
    let (_plf, pb_list_floor) = floor(&scratch, &pb_list, "pb-list");
    let (_pgf, pb_get_floor) = floor(&scratch, &pb_one, "pb-get");
    for f in [&list_floor, &get_floor, &pb_list_floor, &pb_get_floor] {
        wait_ready(&c, &format!("{f}/")).await;
    }

    // Touch the servers equally before reading RSS.
    let json_r8s = format!("http://127.0.0.1:{json_port}");
    for _ in 0..3 {
        fetch(&c, &format!("{r8s}{list_path}")).await;
        fetch_as(&c, &format!("{r8s}{list_path}"), Some(PROTOBUF)).await;
        fetch(&c, &format!("{json_r8s}{list_path}")).await;
        fetch(&c, &format!("{json_r8s}{list_path}")).await;
        fetch(&c, &format!("http://127.0.0.1:{bare_port}/version")).await;
    }
    let (rss_cache, rss_bare, rss_json) = (
        rss_kib(r8s_proc.0.id()),
        rss_kib(bare_proc.0.id()),
        rss_kib(json_proc.0.id()),
    );
    let cached_json = list.len();
    let cached_both = list.len() + pb_list.len();
    let ratio = (rss_cache.saturating_sub(rss_bare) * 1024) as f64 / cached_both as f64;
    let ratio_json = (rss_json.saturating_sub(rss_bare) * 1024) as f64 / cached_json as f64;

    println!("| what | path | p50 | p99 | req/s |");
    println!("|---|---|---|---|---|");
    let pid = r8s_proc.0.id();
    let (lf50, lf99, lfr) = measure(&format!("{list_floor}/"), 100, 1).await;
    let cpu = cpu_time(pid);
    let (l50, l99, lr) = measure(&format!("{r8s}{list_path}"), 100, 1).await;
    let list_cpu = (cpu_time(pid) - cpu) / (100 + 5);
    println!(
        "| LIST {PODS} pods RV=0 ({} MB) | floor | {} | {} | {lfr:.1} |",
        list.len() / 1_000_000,
        ms(lf50),
        ms(lf99)
    );
    println!(
        "| LIST {PODS} pods RV=0 | r8s cache | {} | {} | {lr:.1} |",
        ms(l50),
        ms(l99)
    );
    let (gf50, gf99, gfr) = measure(&format!("{get_floor}/"), 20_000, 8).await;
    let cpu = cpu_time(pid);
    let (g50, g99, gr) = measure(&format!("{r8s}{get_path}"), 20_000, 8).await;
    let get_cpu = (cpu_time(pid) - cpu) / (20_000 + 5);
    println!(
        "| GET one pod (8 clients) | floor | {} | {} | {gfr:.0} |",
        ms(gf50),
        ms(gf99)
    );
    println!(
        "| GET one pod (8 clients) | r8s cache | {} | {} | {gr:.0} |",
        ms(g50),
        ms(g99)
    );
    let (plf50, plf99, plfr) =
        measure_as(&format!("{pb_list_floor}/"), 300, 1, Some(PROTOBUF)).await;
    let cpu = cpu_time(pid);
    let (pl50, pl99, plr) = measure_as(&format!("{r8s}{list_path}"), 300, 1, Some(PROTOBUF)).await;
    let pb_list_cpu = (cpu_time(pid) - cpu) / (300 + 5);
    println!(
        "| LIST {PODS} pods RV=0, protobuf ({} MB) | floor | {} | {} | {plfr:.1} |",
        pb_list.len() / 1_000_000,
        ms(plf50),
        ms(plf99)
    );
    println!(
        "| LIST {PODS} pods RV=0, protobuf | r8s cache | {} | {} | {plr:.1} |",
        ms(pl50),
        ms(pl99)
    );
    let (pgf50, pgf99, pgfr) =
        measure_as(&format!("{pb_get_floor}/"), 20_000, 8, Some(PROTOBUF)).await;
    let cpu = cpu_time(pid);
    let (pg50, pg99, pgr) =
        measure_as(&format!("{r8s}{get_path}"), 20_000, 8, Some(PROTOBUF)).await;
    let pb_get_cpu = (cpu_time(pid) - cpu) / (20_000 + 5);
    println!(
        "| GET one pod, protobuf (8 clients) | floor | {} | {} | {pgfr:.0} |",
        ms(pgf50),
        ms(pgf99)
    );
    println!(
        "| GET one pod, protobuf (8 clients) | r8s cache | {} | {} | {pgr:.0} |",
        ms(pg50),
        ms(pg99)
    );
    println!();
    println!(
        "LIST latency ratio (p50, r8s / floor): JSON {:.2}, protobuf {:.2} (goal ≤ 1.5)",
        l50.as_secs_f64() / lf50.as_secs_f64(),
        pl50.as_secs_f64() / plf50.as_secs_f64()
    );
    println!(
        "GET throughput ratio (r8s / floor), protobuf: {:.2} (goal ≥ 0.7)",
        pgr / pgfr
    );
    println!(
        "r8s CPU per protobuf request: LIST {:.2} ms, GET {:.1} µs",
        pb_list_cpu.as_secs_f64() * 1e3,
        pb_get_cpu.as_secs_f64() * 1e6
    );
    println!(
        "GET throughput ratio (r8s / floor): {:.2} (goal ≥ 0.7)",
        gr / gfr
    );
    println!(
        "r8s CPU per request: LIST {:.2} ms, GET {:.1} µs",
        list_cpu.as_secs_f64() * 1e3,
        get_cpu.as_secs_f64() * 1e6
    );
    println!(
        "RSS, JSON only: r8s caching {PODS} pods {} MiB, r8s caching nothing {} MiB, cached JSON {:.1} MiB → {ratio_json:.2} bytes of RSS per cached byte (goal ≤ 1.5)",
        rss_json / 1024,
        rss_bare / 1024,
        cached_json as f64 / (1 << 20) as f64
    );
    println!(
        "RSS, JSON and protobuf: r8s caching {PODS} pods {} MiB, cached JSON + protobuf {:.1} MiB ({:.1} + {:.1}) → {ratio:.2} bytes of RSS per cached byte",
        rss_cache / 1024,
        cached_both as f64 / (1 << 20) as f64,
        cached_json as f64 / (1 << 20) as f64,
        pb_list.len() as f64 / (1 << 20) as f64
    );
    concurrent_lists(&json_r8s, json_proc.0.id(), rss_json).await;
}

/// 100 clients list every pod at once from the JSON-only r8s (default
/// `read.max_inflight_lists`, 32): how many are answered, how many refused
/// with 429, and how far RSS rises over its idle value while they stream.
async fn concurrent_lists(r8s: &str, pid: u32, idle_kib: u64) {
    const CLIENTS: usize = 100;
    let url = format!("{r8s}/api/v1/pods?resourceVersion=0");
    let peak = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(idle_kib));
    let sampling = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(true));
    let sampler = {
        let (peak, sampling) = (peak.clone(), sampling.clone());
        tokio::spawn(async move {
            while sampling.load(std::sync::atomic::Ordering::Relaxed) {
                peak.fetch_max(rss_kib(pid), std::sync::atomic::Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
        })
    };
    let start = std::sync::Arc::new(tokio::sync::Barrier::new(CLIENTS));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..CLIENTS {
        let (url, start) = (url.clone(), start.clone());
        tasks.spawn(async move {
            // A connection each, as separate clients have.
            let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
            start.wait().await;
            let resp = c.get(url.parse().unwrap()).await.unwrap();
            let status = resp.status().as_u16();
            let mut body = resp.into_body();
            let mut bytes = 0usize;
            while let Some(Ok(f)) = body.frame().await {
                if let Ok(d) = f.into_data() {
                    bytes += d.len();
                }
            }
            (status, bytes)
        });
    }
    let t0 = Instant::now();
    let (mut ok, mut refused, mut other) = (0, 0, 0);
    while let Some(r) = tasks.join_next().await {
        match r.unwrap() {
            (200, _) => ok += 1,
            (429, _) => refused += 1,
            _ => other += 1,
        }
    }
    let took = t0.elapsed();
    sampling.store(false, std::sync::atomic::Ordering::Relaxed);
    let _ = sampler.await;
    let peak = peak.load(std::sync::atomic::Ordering::Relaxed);
    println!();
    println!(
        "| {CLIENTS} concurrent LISTs of {PODS} pods (JSON) | answered | 429 | other | time | RSS idle | RSS peak | growth |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| read.max_inflight_lists = 32 | {ok} | {refused} | {other} | {took:.1?} | {} MiB | {} MiB | {:.1} MiB (goal ≤ 64) |",
        idle_kib / 1024,
        peak / 1024,
        peak.saturating_sub(idle_kib) as f64 / 1024.0
    );
}
