//! What `auth.mode = "delegated"` costs a cached read once its token and
//! decision are cached: one r8s with no auth (loopback, `none`) and one
//! delegated, side by side in front of one sim, answering the same GET from
//! cache. The goal: an authorized GET costs ≤ 1.2× an unauthenticated one.
//!
//! `cargo bench --bench auth` (results in BENCHMARKS.md);
//! `BENCH_R8S_BIN=/path/to/r8s` measures that r8s binary instead. Rounds alternate
//! between the two so both see the same machine; r8s's CPU per request is
//! read from /proc, latency at the client. Everything runs on 127.0.0.1 and
//! stops by itself.

mod common;

use std::process::{Command, Stdio};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, Scratch, cpu_time, free_port, load, sim, wait_ready};
use std::sync::Arc;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// The r8s under test: `BENCH_R8S_BIN` (another build, to compare), or this
/// build's (the sim is always this build's).
fn r8s_bin() -> String {
    std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string())
}
const ROUNDS: usize = 6;
const PER_ROUND: usize = 40_000;
const CONCURRENCY: usize = 8;

type C = Client<HttpConnector, Empty<Bytes>>;

async fn fetch(c: &C, url: &str, token: Option<&str>) -> http::StatusCode {
    let mut b = http::Request::get(url);
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let resp = c.request(b.body(Empty::new()).unwrap()).await.unwrap();
    let status = resp.status();
    if status == 200 && url.contains("resourceVersion=0") {
        assert_eq!(resp.headers()["x-r8s-cache"], "hit", "{url}");
    }
    resp.into_body().collect().await.unwrap();
    status
}

/// One round: latencies of `PER_ROUND` GETs by `CONCURRENCY` clients, and
/// the server's CPU time over the round.
async fn round(
    url: &str,
    token: Option<&'static str>,
    pid: u32,
) -> (Vec<Duration>, Duration, Duration) {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let cpu0 = cpu_time(pid);
    let url: Arc<str> = url.into();
    let l = load(vec![c; CONCURRENCY], PER_ROUND / CONCURRENCY, move |c| {
        let url = url.clone();
        async move {
            assert_eq!(fetch(&c, &url, token).await, 200);
        }
    })
    .await;
    (l.latencies, l.wall, cpu_time(pid) - cpu0)
}

fn us(d: Duration) -> String {
    format!("{:.0} µs", d.as_secs_f64() * 1e6)
}

#[tokio::main]
async fn main() {
    let dir = Scratch::new("auth");
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        "r8s-token,r8s,uid-r8s,\"system:masters\"\nalice-token,alice,uid-alice,\n",
    )
    .unwrap();
    let own = dir.join("r8s-token");
    std::fs::write(&own, "r8s-token").unwrap();

    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let sim_port = free_port();
    let tokens_arg = tokens.display().to_string();
    let _sim = sim(BIN, sim_port, &["--pods", "1000", "--tokens", &tokens_arg]);
    let sim = format!("http://127.0.0.1:{sim_port}");
    let serve = |name: &str, auth: &str| {
        let (port, admin) = (free_port(), free_port());
        let config = dir.join(&format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n[upstream]\nservers = [\"{sim}\"]\ntoken_file = \"{}\"\n[cache]\nresources = [\"pods\"]\n[auth]\nmode = \"{auth}\"\n",
                own.display()
            ),
        )
        .unwrap();
        let p = Proc(
            Command::new(r8s_bin())
                .args(["serve", "--config"])
                .arg(&config)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        (
            p,
            format!("http://127.0.0.1:{port}"),
            format!("http://127.0.0.1:{admin}"),
        )
    };
    let (none, none_url, none_admin) = serve("none", "none");
    let (deleg, deleg_url, deleg_admin) = serve("delegated", "delegated");
    wait_ready(&c, &format!("{none_admin}/readyz")).await;
    wait_ready(&c, &format!("{deleg_admin}/readyz")).await;

    let path = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0";
    let plain = format!("{none_url}{path}");
    let authed = format!("{deleg_url}{path}");
    // The delegated r8s refuses without a token, and fills its caches on the first read.
    assert_eq!(fetch(&c, &authed, None).await, 403);
    assert_eq!(fetch(&c, &authed, Some("alice-token")).await, 200);

    let (mut lat_n, mut lat_d) = (Vec::new(), Vec::new());
    let (mut cpu_n, mut cpu_d, mut wall_n, mut wall_d) = (
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
        Duration::ZERO,
    );
    for i in 0..ROUNDS {
        // Alternate which goes first, so drift in the machine cancels.
        let order = if i % 2 == 0 {
            [false, true]
        } else {
            [true, false]
        };
        for d in order {
            if d {
                let (l, w, cpu) = round(&authed, Some("alice-token"), deleg.0.id()).await;
                lat_d.extend(l);
                cpu_d += cpu;
                wall_d += w;
            } else {
                let (l, w, cpu) = round(&plain, None, none.0.id()).await;
                lat_n.extend(l);
                cpu_n += cpu;
                wall_n += w;
            }
        }
    }
    let n = (ROUNDS * PER_ROUND) as f64;
    lat_n.sort();
    lat_d.sort();
    let pct = |v: &Vec<Duration>, p: usize| v[v.len() * p / 100];
    let m = c
        .get(format!("{deleg_admin}/metrics").parse().unwrap())
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes();
    let text = String::from_utf8_lossy(&m);
    let reviews: Vec<&str> = text
        .lines()
        .filter(|l| l.starts_with("r8s_auth_review_duration_seconds_count"))
        .collect();
    println!(
        "GET one pod, resourceVersion=0, from cache; {ROUNDS} alternating rounds of {PER_ROUND} requests, {CONCURRENCY} concurrent clients each"
    );
    println!();
    println!("| r8s | p50 | p99 | req/s | r8s CPU per request |");
    println!("|---|---|---|---|---|");
    // To a tenth of a µs: before/after comparisons differ by less than one.
    let cpu_per = |cpu: Duration| format!("{:.1} µs", cpu.as_secs_f64() / n * 1e6);
    println!(
        "| auth.mode = none, no token | {} | {} | {:.0} | {} |",
        us(pct(&lat_n, 50)),
        us(pct(&lat_n, 99)),
        n / wall_n.as_secs_f64(),
        cpu_per(cpu_n)
    );
    println!(
        "| auth.mode = delegated, bearer token (cached review and decision) | {} | {} | {:.0} | {} |",
        us(pct(&lat_d, 50)),
        us(pct(&lat_d, 99)),
        n / wall_d.as_secs_f64(),
        cpu_per(cpu_d)
    );
    println!();
    println!(
        "ratio delegated / none: CPU per request {:.3}, p50 {:.3}, p99 {:.3}, throughput {:.3}",
        cpu_d.as_secs_f64() / cpu_n.as_secs_f64(),
        pct(&lat_d, 50).as_secs_f64() / pct(&lat_n, 50).as_secs_f64(),
        pct(&lat_d, 99).as_secs_f64() / pct(&lat_n, 99).as_secs_f64(),
        wall_n.as_secs_f64() / wall_d.as_secs_f64(),
    );
    println!("reviews made by the delegated r8s over the run: {reviews:?}");
}
