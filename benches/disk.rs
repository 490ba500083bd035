//! What `persist.dir` costs the disk (issue 42): r8s (a release binary, a
//! process of its own) caches pods in both encodings from the sim's
//! real-shaped pods under 50 writes/s, with `persist.dir` set. For each build
//! and size it measures the bytes r8s writes (its `/proc/PID/io` `wchar`: it
//! serves no client here, so that is the disk's share but for a few bytes of
//! requests), then a warm restart after 1 minute of churn and another after
//! `DISK_SECONDS` (600): time to ready, and the bytes the upstream sent
//! meanwhile (through a counting link). Results go to BENCHMARKS.md.
//!
//!   cargo bench --bench disk
//!   BENCH_BEFORE_BIN=/tmp/r8s-before cargo bench --bench disk   # and the build before
//!   DISK_PODS=10000,150000 DISK_SECONDS=300 DISK_CHURN=50 cargo bench --bench disk

mod common;

use std::process::{Command, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::Empty;
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, Scratch, counting_link, env_or, free_port, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

type C = Client<HttpConnector, Empty<Bytes>>;

/// Bytes a process has passed to `write` and its kind so far.
fn wchar(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/io")).unwrap_or_default();
    s.lines()
        .find_map(|l| l.strip_prefix("wchar:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(0)
}

/// Bytes in the files of `dir`.
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .filter_map(|e| e.metadata().ok())
                .map(|m| m.len())
                .sum()
        })
        .unwrap_or(0)
}

/// A running r8s, stopped gracefully (SIGTERM, then waited for) when asked.
struct R8s {
    proc: Proc,
    admin: u16,
}

impl R8s {
    fn start(bin: &str, upstream: &str, config: &std::path::Path) -> R8s {
        let (port, admin) = (free_port(), free_port());
        let proc = Proc(
            Command::new(bin)
                .arg("serve")
                .arg("--config")
                .arg(config)
                .args(["--upstream", upstream, "--cache", "pods"])
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        R8s { proc, admin }
    }

    fn pid(&self) -> u32 {
        self.proc.0.id()
    }

    /// Stops it gracefully; returns the bytes it wrote in all, its last
    /// writes while it drained included.
    fn stop(mut self) -> u64 {
        let pid = self.pid();
        let mut last = wchar(pid);
        let _ = Command::new("kill")
            .args(["-TERM", &pid.to_string()])
            .status();
        // Its last writes happen while it drains: read them until it exits.
        let deadline = Instant::now() + Duration::from_secs(120);
        loop {
            if let Ok(Some(_)) = self.proc.0.try_wait() {
                return last;
            }
            last = last.max(wchar(pid));
            assert!(Instant::now() < deadline, "r8s did not stop");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// One build's run at one size.
struct Run {
    /// Bytes written per minute in the first minute (a cold start: the
    /// first snapshots) and in the rest (after a warm restart).
    stints: Vec<f64>,
    /// Bytes written per minute of churn, and the minutes measured.
    per_minute: f64,
    minutes: f64,
    /// Bytes on disk at the end.
    on_disk: u64,
    /// Warm restarts: (after how long, time to ready, upstream bytes).
    restarts: Vec<(Duration, Duration, u64)>,
}

async fn run_build(c: &C, bin: &str, sim_addr: std::net::SocketAddr, long: Duration) -> Run {
    let scratch = Scratch::new("disk");
    let dir = scratch.join("persist");
    let config = scratch.join("r8s.toml");
    std::fs::write(
        &config,
        format!(
            "[persist]\ndir = {:?}\n[cache]\nmax_bytes_per_resource = 0\nmax_bytes_total = 0\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    // One link for every run: a snapshot names its upstream by address.
    let (link, upstream_bytes) = counting_link(sim_addr).await;
    let mut r = R8s::start(bin, &link, &config);
    wait_ready(c, &format!("http://127.0.0.1:{}/readyz", r.admin)).await;
    let (mut written, mut churned) = (0u64, Duration::ZERO);
    let mut restarts = Vec::new();
    let mut stints = Vec::new();
    for stint in [
        Duration::from_secs(60),
        long.saturating_sub(Duration::from_secs(60)),
    ] {
        let from = wchar(r.pid());
        tokio::time::sleep(stint).await;
        churned += stint;
        // The churn's writes, not the shutdown's (reported apart).
        let stint_bytes = wchar(r.pid()) - from;
        written += stint_bytes;
        stints.push(stint_bytes as f64 / stint.as_secs_f64() * 60.0);
        let _ = r.stop();
        let before = upstream_bytes.load(Ordering::Relaxed);
        let started = Instant::now();
        r = R8s::start(bin, &link, &config);
        wait_ready(c, &format!("http://127.0.0.1:{}/readyz", r.admin)).await;
        restarts.push((
            churned,
            started.elapsed(),
            upstream_bytes.load(Ordering::Relaxed) - before,
        ));
        eprintln!(
            "{bin}: restarted after {churned:?} of churn: {:?}",
            restarts.last()
        );
    }
    let _ = r.stop();
    Run {
        stints,
        per_minute: written as f64 / churned.as_secs_f64() * 60.0,
        minutes: churned.as_secs_f64() / 60.0,
        on_disk: dir_bytes(&dir),
        restarts,
    }
}

#[tokio::main]
async fn main() {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let subject = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
    let before = std::env::var("BENCH_BEFORE_BIN").ok();
    let long = Duration::from_secs(env_or("DISK_SECONDS", 600));
    let churn = env_or("DISK_CHURN", 50);
    let sizes: Vec<usize> = std::env::var("DISK_PODS")
        .unwrap_or_else(|_| "10000,150000".into())
        .split(',')
        .map(|s| s.trim().parse().unwrap())
        .collect();
    println!(
        "machine: {} cores; r8s: {subject}; before: {}; {churn} writes/s; restarts after 60 s and {long:?}",
        std::thread::available_parallelism().map_or(0, |n| n.get()),
        before.as_deref().unwrap_or("(none)")
    );
    println!();
    println!(
        "| pods | build | written per minute of churn | first minute (cold start) | the rest (warm) | minutes | on disk at the end | warm restart after 1 min: ready in, upstream bytes | after {} min |",
        long.as_secs() / 60
    );
    println!("|---|---|---|---|---|---|---|---|---|");
    for pods in sizes {
        let port = free_port();
        let _sim = sim(
            &subject,
            port,
            &[
                "--pods",
                &pods.to_string(),
                "--nodes",
                "5000",
                "--namespaces",
                "10",
                "--churn",
                &churn.to_string(),
                "--history",
                "1000000",
            ],
        );
        wait_ready(&c, &format!("http://127.0.0.1:{port}/version")).await;
        let addr: std::net::SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
        let builds = before
            .iter()
            .map(|b| ("before", b.clone()))
            .chain(std::iter::once(("after", subject.clone())));
        for (label, bin) in builds {
            let r = run_build(&c, &bin, addr, long).await;
            let restart = |i: usize| {
                r.restarts.get(i).map_or("-".to_string(), |(_, t, b)| {
                    format!("{:.2} s, {:.1} MB", t.as_secs_f64(), *b as f64 / 1e6)
                })
            };
            let stint = |i: usize| r.stints.get(i).map_or(0.0, |b| b / 1e6);
            println!(
                "| {pods} | {label} | {:.1} MB | {:.1} MB | {:.1} MB | {:.0} | {:.1} MB | {} | {} |",
                r.per_minute / 1e6,
                stint(0),
                stint(1),
                r.minutes,
                r.on_disk as f64 / 1e6,
                restart(0),
                restart(1),
            );
        }
    }
}
