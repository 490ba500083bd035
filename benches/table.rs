//! Tables from the cache (issue 53): what `kubectl get pods -A` costs r8s,
//! every page a hit, and a Table page of 500 pods against a JSON page of
//! the same pods, at `TABLE_PODS` real-shaped pods (150,000 by default).
//!
//! `cargo bench --bench table` (results in BENCHMARKS.md). The sim and r8s
//! run as separate processes (the release binary); r8s's CPU is its
//! user+system time (`/proc/PID/stat`) over the requests. kubectl's walk is
//! its requests made here as kubectl makes them: `limit=500`, no
//! `resourceVersion` (proven from the cache: `read.consistent_lists =
//! "prove"`), then each `continue`, `Accept` as kubectl sends it. The first
//! walk prints every row (rows are made once per object version and kept);
//! the next walks find them made. Everything runs on 127.0.0.1 and stops by
//! itself.

mod common;

use std::process::{Command, Stdio};
use std::time::Instant;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, cpu_time, env_or, free_port, rss_kib, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
/// What kubectl 1.3x sends for `get`.
const KUBECTL_TABLE: &str = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json;as=Table;v=v1beta1;g=meta.k8s.io,application/json";

type C = Client<HttpConnector, Empty<Bytes>>;

/// A GET with `accept`: the body, whole, and its `continue`.
async fn page(c: &C, url: &str, accept: &str) -> (Bytes, Option<String>) {
    let req = http::Request::get(url).header("accept", accept);
    let resp = c.request(req.body(Empty::new()).unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    assert_eq!(resp.headers()["x-r8s-cache"], "hit", "{url}");
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    // The list's metadata comes first: read `continue` from the head only.
    let head = &body[..body.len().min(4096)];
    let cont = std::str::from_utf8(head)
        .ok()
        .and_then(|h| h.split("\"continue\":\"").nth(1))
        .and_then(|rest| rest.split('"').next())
        .map(str::to_string);
    (body, cont)
}

/// Every page of `base` (`limit=500`, no resourceVersion), as kubectl walks
/// it: pages and bytes.
async fn walk(c: &C, base: &str, accept: &str) -> (usize, usize) {
    let (mut pages, mut bytes) = (0, 0);
    let mut url = format!("{base}?limit=500");
    loop {
        let (body, cont) = page(c, &url, accept).await;
        pages += 1;
        bytes += body.len();
        match cont {
            Some(t) => url = format!("{base}?limit=500&continue={t}"),
            None => return (pages, bytes),
        }
    }
}

#[tokio::main]
async fn main() {
    let pods: usize = env_or("TABLE_PODS", 150_000);
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let sim_port = free_port();
    let _sim = sim(
        BIN,
        sim_port,
        &["--pods", &pods.to_string(), "--namespaces", "100"],
    );
    let upstream = format!("http://127.0.0.1:{sim_port}");
    let (port, admin) = (free_port(), free_port());
    let r8s = Proc(
        Command::new(BIN)
            .args(["serve", "--upstream", &upstream, "--cache", "pods"])
            .args(["--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .env("R8S_READ__CONSISTENT_LISTS", "prove")
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let pid = r8s.0.id();
    wait_ready(&c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    let url = format!("http://127.0.0.1:{port}");
    let all = format!("{url}/api/v1/pods");
    println!("r8s caching {pods} pods: RSS {} MiB", rss_kib(pid) / 1024);

    // kubectl get pods -A: the first walk makes every row, later ones reuse them.
    for run in ["first (rows made)", "second", "third"] {
        let (before, t) = (cpu_time(pid), Instant::now());
        let (pages, bytes) = walk(&c, &all, KUBECTL_TABLE).await;
        println!(
            "kubectl get pods -A, {run}: {pages} pages, {:.1} MB, r8s CPU {:?}, wall {:?}; RSS {} MiB",
            bytes as f64 / 1e6,
            cpu_time(pid) - before,
            t.elapsed(),
            rss_kib(pid) / 1024
        );
    }
    // The same walk in JSON (kubectl -o json, an informer's pages).
    let (before, t) = (cpu_time(pid), Instant::now());
    let (pages, bytes) = walk(&c, &all, "application/json").await;
    println!(
        "the same walk in JSON: {pages} pages, {:.1} MB, r8s CPU {:?}, wall {:?}",
        bytes as f64 / 1e6,
        cpu_time(pid) - before,
        t.elapsed()
    );

    // One page of 500, again and again: Table against JSON. The first page
    // of all pods counts the 149,500 after it (`remainingItemCount`); the
    // first of one namespace's 1,500 counts 1,000.
    const ROUNDS: u32 = 200;
    for (which, one) in [
        ("of all pods", format!("{all}?limit=500&resourceVersion=0")),
        (
            "of a namespace",
            format!("{url}/api/v1/namespaces/ns-7/pods?limit=500&resourceVersion=0"),
        ),
    ] {
        for (name, accept) in [("JSON", "application/json"), ("Table", KUBECTL_TABLE)] {
            page(&c, &one, accept).await;
            let before = cpu_time(pid);
            let t = Instant::now();
            let mut bytes = 0;
            for _ in 0..ROUNDS {
                bytes += page(&c, &one, accept).await.0.len();
            }
            println!(
                "the first page {which}, 500 pods as {name}: r8s CPU {:?} per page, {:.0} KB, wall {:?} per page",
                (cpu_time(pid) - before) / ROUNDS,
                bytes as f64 / ROUNDS as f64 / 1e3,
                t.elapsed() / ROUNDS
            );
        }
    }
}
