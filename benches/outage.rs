//! Catching up after the upstream's return (issue 43): r8s (a release
//! binary, its own process) caches configmaps from the sim through the
//! fault forwarder (`sim/src/fault.rs`). Each round a client opens a
//! watch through r8s, the upstream goes away for `OUTAGE_SECONDS` (45) in
//! one of three shapes (connections refused; reset; the open ones
//! black-holed for good and new ones reset), heals, and a configmap is
//! created at once: the round's time is from the heal to that ADDED event
//! reaching the client. `OUTAGE_ROUNDS` (10) rounds per shape and build;
//! with `BENCH_BEFORE_BIN` the build before runs beside the subject, each
//! with its own sim and forwarder. Results go to BENCHMARKS.md.
//!
//!   BENCH_BEFORE_BIN=/tmp/r8s-before cargo bench --bench outage
//!   OUTAGE_SECONDS=20 OUTAGE_ROUNDS=3 cargo bench --bench outage

mod common;

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use r8s_sim::fault::{Forwarder, Mode};

use common::{Proc, env_or, free_port, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

type C = Client<HttpConnector, Full<Bytes>>;

#[derive(Clone, Copy, Debug)]
enum Shape {
    Refused,
    Reset,
    BlackHoled,
}

/// One build's rounds: the catch-up times of each shape.
async fn run_build(bin: String, label: &'static str) -> Vec<(Shape, Vec<Duration>)> {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let port = free_port();
    let _sim = sim(&bin, port, &["--pods", "100"]);
    let sim_url = format!("http://127.0.0.1:{port}");
    wait_ready(&c, &format!("{sim_url}/version")).await;
    let fwd = Forwarder::start(format!("127.0.0.1:{port}").parse().unwrap()).await;
    let (api, admin) = (free_port(), free_port());
    let _r8s = Proc(
        Command::new(&bin)
            .args(["serve", "--upstream", &fwd.url(), "--cache", "configmaps"])
            .args(["--listen", &format!("127.0.0.1:{api}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(&c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    let outage = Duration::from_secs(env_or("OUTAGE_SECONDS", 45));
    let rounds = env_or("OUTAGE_ROUNDS", 10);
    let base = format!("http://127.0.0.1:{api}/api/v1/namespaces/default/configmaps");
    let mut out = Vec::new();
    let mut n = 0;
    for shape in [Shape::Refused, Shape::Reset, Shape::BlackHoled] {
        let mut times = Vec::new();
        for _ in 0..rounds {
            n += 1;
            let name = format!("after-{n}");
            // A client's watch through r8s, from the cache's version now.
            let list = c
                .get(format!("{base}?resourceVersion=0").parse().unwrap())
                .await
                .unwrap();
            let body = list.into_body().collect().await.unwrap().to_bytes();
            let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
            let rv = v["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .to_string();
            let watch = c
                .get(
                    format!("{base}?watch=1&resourceVersion={rv}&timeoutSeconds=600")
                        .parse()
                        .unwrap(),
                )
                .await
                .unwrap();
            let mut events = watch.into_body();
            match shape {
                Shape::Refused => {
                    fwd.set(Mode::Closed);
                    fwd.reset_all();
                }
                Shape::Reset => {
                    fwd.set(Mode::Refuse);
                    fwd.reset_all();
                }
                Shape::BlackHoled => {
                    fwd.set(Mode::Refuse);
                    fwd.black_hole_all();
                }
            }
            tokio::time::sleep(outage).await;
            fwd.set(Mode::Pass);
            let healed = Instant::now();
            let created = hyper_util::client::legacy::Client::builder(TokioExecutor::new())
                .build::<_, Full<Bytes>>(HttpConnector::new())
                .request(
                    http::Request::post(format!("{sim_url}/api/v1/namespaces/default/configmaps"))
                        .header("content-type", "application/json")
                        .body(Full::new(Bytes::from(format!(
                            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"{name}"}}}}"#
                        ))))
                        .unwrap(),
                )
                .await
                .unwrap();
            assert_eq!(created.status(), 201);
            let needle = format!("\"name\":\"{name}\"");
            let mut seen = Vec::new();
            let arrived = loop {
                let f = tokio::time::timeout(Duration::from_secs(120), events.frame())
                    .await
                    .expect("the write reached the watch within 120 s")
                    .expect("the watch stayed open")
                    .unwrap();
                if let Ok(d) = f.into_data() {
                    seen.extend_from_slice(&d);
                    if seen.windows(needle.len()).any(|w| w == needle.as_bytes()) {
                        break healed.elapsed();
                    }
                }
            };
            eprintln!("{label} {shape:?}: caught up {arrived:?} after healing");
            times.push(arrived);
            drop(events);
            // Settle before the next round (a black hole's watches restart).
            tokio::time::sleep(Duration::from_secs(2)).await;
        }
        out.push((shape, times));
    }
    out
}

#[tokio::main]
async fn main() {
    let subject = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let before = std::env::var("BENCH_BEFORE_BIN").ok();
    println!(
        "machine: {} cores; outage {} s, {} rounds per shape; r8s: {subject}; before: {}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        env_or("OUTAGE_SECONDS", 45),
        env_or("OUTAGE_ROUNDS", 10),
        before.as_deref().unwrap_or("(none)")
    );
    let after = tokio::spawn(run_build(subject, "after"));
    let before = before.map(|b| tokio::spawn(run_build(b, "before")));
    let mut results = vec![("after", after.await.unwrap())];
    if let Some(b) = before {
        results.insert(0, ("before", b.await.unwrap()));
    }
    println!();
    println!("| build | shape | rounds | p50 catch-up | worst |");
    println!("|---|---|---|---|---|");
    for (label, shapes) in results {
        for (shape, mut times) in shapes {
            times.sort();
            let p50 = times[times.len() / 2];
            let worst = times[times.len() - 1];
            println!(
                "| {label} | {shape:?} | {} | {:.2} s | {:.2} s |",
                times.len(),
                p50.as_secs_f64(),
                worst.as_secs_f64()
            );
        }
    }
}
