//! gzip of a large list: r8s's bytes on the wire and CPU against
//! kube-apiserver's gzip (Go's `compress/gzip` at level 1 over the whole
//! body, as its response writer does), on the same bytes.
//!
//! `cargo bench --bench gzip` (results in BENCHMARKS.md). The Go side runs
//! when `go` is on the PATH (`apt-get install golang-go`): `benches/go/
//! apiserver_gzip.go` compresses the list r8s serves. `BENCH_R8S_BIN=/path/to/r8s`
//! measures another r8s binary (an older build) against the same list.

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
const PODS: usize = 10_000;
const ROUNDS: u32 = 40;

type C = Client<HttpConnector, Empty<Bytes>>;

/// A GET; returns the body as sent and its `content-encoding`.
async fn fetch(c: &C, url: &str, gzip: bool) -> (Bytes, Option<String>) {
    let mut req = http::Request::get(url);
    if gzip {
        req = req.header("accept-encoding", "gzip");
    }
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    let enc = resp
        .headers()
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_string());
    (resp.into_body().collect().await.unwrap().to_bytes(), enc)
}

/// r8s's CPU per list over `ROUNDS` lists.
async fn cpu_per_list(c: &C, url: &str, pid: u32, gzip: bool) -> Duration {
    let before = cpu_time(pid);
    for _ in 0..ROUNDS {
        fetch(c, url, gzip).await;
    }
    (cpu_time(pid) - before) / ROUNDS
}

/// The time to gzip `body` in 64 KiB writes (as a list streams) at `level`
/// with the deflate r8s is built with, best of 5, and the bytes out.
fn compress_here(body: &[u8], level: u32) -> (usize, Duration) {
    let mut best = Duration::MAX;
    let mut size = 0;
    for _ in 0..5 {
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

/// Go's gzip at level 1 over `body` (kube-apiserver's), if Go is installed.
fn compress_go(body: &[u8]) -> Option<(usize, Duration)> {
    let program = concat!(env!("CARGO_MANIFEST_DIR"), "/benches/go/apiserver_gzip.go");
    let mut child = Command::new("go")
        .args(["run", program])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .ok()?;
    child.stdin.take().unwrap().write_all(body).unwrap();
    let out = child.wait_with_output().unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut f = text.split_whitespace().map(|x| x.parse::<u64>().unwrap());
    Some((f.next()? as usize, Duration::from_nanos(f.next()?)))
}

fn mb(n: usize) -> String {
    format!("{:.2} MB", n as f64 / 1e6)
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1e3)
}

#[tokio::main]
async fn main() {
    let r8s_bin = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let (sim_port, port, admin) = (free_port(), free_port(), free_port());
    let _sim = Proc(
        Command::new(BIN)
            .args(["sim", "--listen", &format!("127.0.0.1:{sim_port}")])
            .args(["--pods", &PODS.to_string(), "--namespaces", "10"])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let sim = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim}/version")).await;
    let r8s = Proc(
        Command::new(&r8s_bin)
            .args(["serve", "--upstream", &sim, "--cache", "pods"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(&c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    let url = format!("http://127.0.0.1:{port}/api/v1/pods?resourceVersion=0");

    let (plain, _) = fetch(&c, &url, false).await;
    let (wire, enc) = fetch(&c, &url, true).await;
    assert_eq!(enc.as_deref(), Some("gzip"));
    let mut unzipped = Vec::new();
    flate2::read::GzDecoder::new(&wire[..])
        .read_to_end(&mut unzipped)
        .unwrap();
    assert!(unzipped == plain, "the gzip list is not the list");

    let pid = r8s.0.id();
    cpu_per_list(&c, &url, pid, false).await; // warm both paths
    cpu_per_list(&c, &url, pid, true).await;
    let cpu_plain = cpu_per_list(&c, &url, pid, false).await;
    let cpu_gzip = cpu_per_list(&c, &url, pid, true).await;
    println!("list of {PODS} pods from r8s's cache: {}", mb(plain.len()));
    println!(
        "| served by | bytes on the wire | r8s CPU per list | of which gzip | gzip CPU per MB of list |"
    );
    println!("|---|---|---|---|---|");
    let gz = cpu_gzip.saturating_sub(cpu_plain);
    println!(
        "| {r8s_bin} | {} ({:.1}× smaller) | {} (plain: {}) | {} | {:.2} ms |",
        mb(wire.len()),
        plain.len() as f64 / wire.len() as f64,
        ms(cpu_gzip),
        ms(cpu_plain),
        ms(gz),
        gz.as_secs_f64() * 1e3 / (plain.len() as f64 / 1e6),
    );

    println!();
    println!(
        "| compressor (same list, one core, best of 5) | bytes | time | time per MB of list | bytes vs kube-apiserver |"
    );
    println!("|---|---|---|---|---|");
    let go = compress_go(&plain);
    let vs = |n: usize| match go {
        Some((g, _)) => format!("{:.2}×", n as f64 / g as f64),
        None => "(go not installed)".into(),
    };
    if let Some((size, t)) = go {
        println!(
            "| kube-apiserver's: Go compress/gzip level 1 | {} | {} | {:.2} ms | 1.00× |",
            mb(size),
            ms(t),
            t.as_secs_f64() * 1e3 / (plain.len() as f64 / 1e6)
        );
    }
    for level in 1..=6 {
        let (size, t) = compress_here(&plain, level);
        println!(
            "| r8s's deflate (zlib-rs) level {level}{} | {} | {} | {:.2} ms | {} |",
            if level == r8s::codec::json::GZIP_LEVEL {
                " (r8s's)"
            } else {
                ""
            },
            mb(size),
            ms(t),
            t.as_secs_f64() * 1e3 / (plain.len() as f64 / 1e6),
            vs(size)
        );
    }
}
