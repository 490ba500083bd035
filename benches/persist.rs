//! Coming back warm, and what the consistency check costs: r8s (in this
//! process) caches pods in both encodings from the built-in upstream's
//! real-shaped pods, through a forwarder that counts the bytes the upstream
//! sends. It starts cold, stops (writing its snapshots), starts warm from them,
//! and lets the consistency check that follows a warm start run once.
//! Results go to BENCHMARKS.md.
//!
//!   cargo bench --bench persist                       # 10,000 pods
//!   PERSIST_PODS=100000 cargo bench --bench persist
//!   PERSIST_GZIP=false cargo bench --bench persist    # plain upstream bodies

mod common;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use common::counting_link;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use r8s::config::Config;
use r8s_sim::SimConfig;
use tokio::net::TcpListener;

type C = Client<HttpConnector, Empty<Bytes>>;

/// This process's CPU time (user + system).
fn cpu() -> Duration {
    common::cpu_time(std::process::id())
}

async fn text(c: &C, url: &str) -> String {
    let r = c.get(url.parse().unwrap()).await.unwrap();
    String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
}

fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

struct Running {
    admin: String,
    trigger: r8s::shutdown::Trigger,
    task: tokio::task::JoinHandle<()>,
}

async fn start(upstream: &str, dir: &std::path::Path) -> Running {
    let mut config = Config::default();
    config.upstream.servers = vec![upstream.to_string()];
    config.cache.resources = vec!["pods".into()];
    config.persist.dir = Some(dir.to_path_buf());
    config.upstream.compression = std::env::var("PERSIST_GZIP").as_deref() != Ok("false");
    // Only the warm start's own check, not periodic ones, during the run.
    config.cache.consistency_check_interval_seconds = 86_400;
    let prepared = r8s::prepare(config).await.unwrap();
    let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin_url = format!("http://{}", admin.local_addr().unwrap());
    let (trigger, signal) = r8s::shutdown::channel();
    let task = tokio::spawn(prepared.run(r8s::Listeners { api, admin }, signal));
    Running {
        admin: admin_url,
        trigger,
        task,
    }
}

fn main() {
    let pods: usize = std::env::var("PERSIST_PODS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(10_000);
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    rt.block_on(async move {
        let scratch = common::Scratch::new("persist");
        let dir = scratch.join("state");
        let seeded = Instant::now();
        let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let sim = r8s_sim::start(
            SimConfig {
                pods,
                namespaces: 50,
                ..SimConfig::default()
            },
            l,
        )
        .await
        .unwrap();
        println!("persist: {pods} pods seeded in {:?}", seeded.elapsed());
        let (link, bytes) = counting_link(sim.addr).await;
        let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());

        // Cold.
        let t = Instant::now();
        let cold = start(&link, &dir).await;
        common::wait_ready(&c, &format!("{}/readyz", cold.admin)).await;
        let cold_ready = t.elapsed();
        let cold_bytes = bytes.load(Ordering::Relaxed);
        let m = text(&c, &format!("{}/metrics", cold.admin)).await;
        let cached: f64 = ["json", "protobuf"]
            .iter()
            .map(|e| {
                metric(
                    &m,
                    &format!(r#"r8s_cache_bytes{{resource="v1/pods",encoding="{e}"}}"#),
                )
            })
            .sum();

        // The stop writes both snapshots (nothing else is in flight).
        let (t, c0) = (Instant::now(), cpu());
        cold.trigger.fire();
        cold.task.await.unwrap();
        let (write_wall, write_cpu) = (t.elapsed(), cpu() - c0);
        let on_disk: u64 = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().metadata().unwrap().len())
            .sum();

        // Warm.
        let before = bytes.load(Ordering::Relaxed);
        let (t, c0) = (Instant::now(), cpu());
        let warm = start(&link, &dir).await;
        common::wait_ready(&c, &format!("{}/readyz", warm.admin)).await;
        let (warm_ready, warm_cpu) = (t.elapsed(), cpu() - c0);
        let warm_bytes = bytes.load(Ordering::Relaxed) - before;

        // The consistency check after the warm start.
        let before = bytes.load(Ordering::Relaxed);
        let t = Instant::now();
        let checked = |m: &str| {
            ["json", "protobuf"].iter().all(|e| {
                metric(
                    m,
                    &format!(
                        r#"r8s_cache_consistency_checks_total{{resource="v1/pods",encoding="{e}",result="equal"}}"#
                    ),
                ) >= 1.0
            })
        };
        while !checked(&text(&c, &format!("{}/metrics", warm.admin)).await) {
            assert!(t.elapsed() < Duration::from_secs(300), "no consistency check");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let check_wall = t.elapsed();
        let check_bytes = bytes.load(Ordering::Relaxed) - before;
        warm.trigger.fire();
        warm.task.await.unwrap();

        let mib = |b: f64| b / (1 << 20) as f64;
        println!(
            "persist: cold start: ready in {cold_ready:.2?}, {:.1} MiB from the upstream; {:.1} MiB cached (both encodings)",
            mib(cold_bytes as f64),
            mib(cached)
        );
        println!(
            "persist: snapshots: {:.1} MiB on disk ({:.3} bytes per cached byte), written in {write_wall:.2?} wall, {write_cpu:.2?} CPU ({:.1} ns CPU per cached byte)",
            mib(on_disk as f64),
            on_disk as f64 / cached,
            write_cpu.as_nanos() as f64 / cached
        );
        println!(
            "persist: warm start: ready in {warm_ready:.2?} ({warm_cpu:.2?} CPU), {:.2} MiB from the upstream ({:.2} % of the cold start's)",
            mib(warm_bytes as f64),
            warm_bytes as f64 * 100.0 / cold_bytes as f64
        );
        println!(
            "persist: consistency check after it: {:.2} MiB from the upstream ({:.0} bytes per pod, {:.1} % of a cold start), {check_wall:.2?}",
            mib(check_bytes as f64),
            check_bytes as f64 / pods as f64,
            check_bytes as f64 * 100.0 / cold_bytes as f64
        );
        sim.stop().await;
    });
}
