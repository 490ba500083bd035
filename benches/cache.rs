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
use http_body_util::{BodyExt, Empty, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use tokio::net::TcpListener;

use common::{Proc, cpu_time, free_port, rss_kib};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// The r8s under test: `BENCH_R8S_BIN`, or this build's.
fn r8s_bin() -> String {
    std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string())
}
const PODS: usize = 10_000;

type C = Client<HttpConnector, Empty<Bytes>>;

async fn fetch(c: &C, url: &str) -> Bytes {
    let resp = c.get(url.parse().unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes()
}

async fn wait_ready(c: &C, url: &str) {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        if let Ok(r) = c.get(url.parse().unwrap()).await
            && r.status().is_success()
        {
            return;
        }
        assert!(Instant::now() < deadline, "{url} never became ready");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// The floor, in a process of its own (as r8s is): this benchmark binary
/// re-executed as `floor FILE PORT`, answering every request with the file.
fn floor(body: &Bytes, name: &str) -> (Proc, String) {
    let path = std::env::temp_dir().join(format!("r8s-floor-{}-{name}", std::process::id()));
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
                let svc = hyper::service::service_fn(move |_req| {
                    let b = body.clone();
                    async move {
                        let mut r = http::Response::new(Full::new(b));
                        r.headers_mut()
                            .insert("content-type", "application/json".parse().unwrap());
                        Ok::<_, std::convert::Infallible>(r)
                    }
                });
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    }
}

/// (p50, p99, requests per second) over `n` requests by `conc` clients.
async fn measure(url: &str, n: usize, conc: usize) -> (Duration, Duration, f64) {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    for _ in 0..5 {
        fetch(&c, url).await;
    }
    let start = Instant::now();
    let mut tasks = Vec::new();
    for _ in 0..conc {
        let (c, url) = (c.clone(), url.to_string());
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::new();
            for _ in 0..n / conc {
                let t = Instant::now();
                fetch(&c, &url).await;
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut all = Vec::new();
    for t in tasks {
        all.extend(t.await.unwrap());
    }
    let rps = all.len() as f64 / start.elapsed().as_secs_f64();
    all.sort();
    (all[all.len() / 2], all[all.len() * 99 / 100], rps)
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
    let (sim_port, r8s_port, r8s_admin, bare_port, bare_admin) = (
        free_port(),
        free_port(),
        free_port(),
        free_port(),
        free_port(),
    );
    let _sim = Proc(
        Command::new(BIN)
            .args([
                "sim",
                "--listen",
                &format!("127.0.0.1:{sim_port}"),
                "--pods",
                &PODS.to_string(),
                "--namespaces",
                "10",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let sim = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim}/version")).await;
    let serve = |port: u16, admin: u16, cache: bool| {
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
        Proc(cmd.stderr(Stdio::null()).spawn().unwrap())
    };
    let r8s_proc = serve(r8s_port, r8s_admin, true);
    let bare_proc = serve(bare_port, bare_admin, false);
    let r8s = format!("http://127.0.0.1:{r8s_port}");
    wait_ready(&c, &format!("http://127.0.0.1:{r8s_admin}/readyz")).await;
    wait_ready(&c, &format!("http://127.0.0.1:{bare_admin}/readyz")).await;

    let list_path = "/api/v1/pods?resourceVersion=0";
    let get_path = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0";
    let list = fetch(&c, &format!("{r8s}{list_path}")).await;
    let one = fetch(&c, &format!("{r8s}{get_path}")).await;
    let (_lf, list_floor) = floor(&list, "list");
    let (_gf, get_floor) = floor(&one, "get");
    wait_ready(&c, &format!("{list_floor}/")).await;
    wait_ready(&c, &format!("{get_floor}/")).await;

    // Touch both servers equally before reading RSS.
    for _ in 0..3 {
        fetch(&c, &format!("{r8s}{list_path}")).await;
        fetch(&c, &format!("http://127.0.0.1:{bare_port}/version")).await;
    }
    let (rss_cache, rss_bare) = (rss_kib(r8s_proc.0.id()), rss_kib(bare_proc.0.id()));
    let cached_json = list.len();
    let ratio = (rss_cache.saturating_sub(rss_bare) * 1024) as f64 / cached_json as f64;

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
    println!();
    println!(
        "LIST latency ratio (p50, r8s / floor): {:.2} (goal ≤ 1.5)",
        l50.as_secs_f64() / lf50.as_secs_f64()
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
        "RSS: r8s caching {PODS} pods {} MiB, r8s caching nothing {} MiB, cached JSON {:.1} MiB → {ratio:.2} bytes of RSS per cached byte (goal ≤ 1.5)",
        rss_cache / 1024,
        rss_bare / 1024,
        cached_json as f64 / (1 << 20) as f64
    );
}
