//! Consistent streaming lists (client-go ≥ 1.35's informer sync): what one
//! costs the upstream when r8s proves it and answers from its cache, against
//! passing it through; the latency the proof adds; and how many proofs 100
//! informers starting within one second take.
//!
//! `cargo bench --bench consistent` (`BENCH_R8S_BIN=/path/to/r8s` measures
//! that build). The sim runs as its own process (10,000 pods shaped like a
//! real apiserver's, 10 namespaces, 50 writes/s to pods), r8s in front of it
//! through a byte-counting forwarder, caching pods and configmaps (which
//! nobody writes: every proof of them needs a probe and its bookmark).

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

use common::{Proc, cpu_time, free_port, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const PODS: usize = 10_000;
const CONSISTENT: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

type C = Client<HttpConnector, Empty<Bytes>>;

/// The r8s under test: `BENCH_R8S_BIN`, or this build's.
fn r8s_bin() -> String {
    std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// Forwards 127.0.0.1:`port` to `target`, counting the bytes the server sends.
async fn forwarder(port: u16, target: u16, to_client: Arc<AtomicU64>) {
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    loop {
        let (mut client, _) = l.accept().await.unwrap();
        let counted = to_client.clone();
        tokio::spawn(async move {
            let Ok(mut server) = TcpStream::connect(("127.0.0.1", target)).await else {
                return;
            };
            let (mut cr, mut cw) = client.split();
            let (mut sr, mut sw) = server.split();
            let up = tokio::io::copy(&mut cr, &mut sw);
            let down = async {
                let mut buf = vec![0u8; 64 << 10];
                loop {
                    let n = sr.read(&mut buf).await.unwrap_or(0);
                    if n == 0 {
                        return;
                    }
                    counted.fetch_add(n as u64, Ordering::Relaxed);
                    if cw.write_all(&buf[..n]).await.is_err() {
                        return;
                    }
                }
            };
            tokio::select! { _ = up => {}, _ = down => {} }
        });
    }
}

/// One consistent streaming list: time to the response head, to the
/// initial-events-end bookmark, bytes read, and `X-R8s-Cache`.
async fn streaming_list(c: &C, url: &str) -> (Duration, Duration, u64, String) {
    let t = Instant::now();
    let resp = c.get(url.parse().unwrap()).await.unwrap();
    let head = t.elapsed();
    assert_eq!(resp.status(), 200, "{url}");
    let cache = resp
        .headers()
        .get("x-r8s-cache")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let mut body = resp.into_body();
    let (mut bytes, mut tail) = (0u64, Vec::new());
    let finder = memchr::memmem::Finder::new(b"k8s.io/initial-events-end");
    while let Some(frame) = body.frame().await {
        let Ok(data) = frame.unwrap().into_data() else {
            continue;
        };
        bytes += data.len() as u64;
        tail.extend_from_slice(&data);
        if finder.find(&tail).is_some() {
            return (head, t.elapsed(), bytes, cache);
        }
        let keep = tail.len().saturating_sub(64);
        tail.drain(..keep);
    }
    panic!("{url}: ended before the initial-events-end bookmark");
}

fn pct(mut v: Vec<Duration>, p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1} ms", d.as_secs_f64() * 1000.0)
}

/// A counter's value from r8s's `/metrics` (0 if absent).
async fn counter(c: &C, admin: &str, series: &str) -> f64 {
    let r = c
        .get(format!("{admin}/metrics").parse().unwrap())
        .await
        .unwrap();
    let text =
        String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap();
    text.lines()
        .find_map(|l| l.strip_prefix(series).and_then(|v| v.trim().parse().ok()))
        .unwrap_or(0.0)
}

#[tokio::main]
async fn main() {
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let (sim_port, fwd_port, r8s_port, admin_port) =
        (free_port(), free_port(), free_port(), free_port());
    let sim_proc = sim(
        BIN,
        sim_port,
        &[
            "--pods",
            &PODS.to_string(),
            "--namespaces",
            "10",
            "--churn",
            "50",
        ],
    );
    let sim_pid = sim_proc.0.id();
    let sim_url = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim_url}/version")).await;
    let to_r8s = Arc::new(AtomicU64::new(0));
    tokio::spawn(forwarder(fwd_port, sim_port, to_r8s.clone()));
    let _r8s = Proc(
        Command::new(r8s_bin())
            .args([
                "serve",
                "--upstream",
                &format!("http://127.0.0.1:{fwd_port}"),
                "--listen",
                &format!("127.0.0.1:{r8s_port}"),
                "--admin-listen",
                &format!("127.0.0.1:{admin_port}"),
                "--cache",
                "pods",
                "--cache",
                "v1/configmaps",
            ])
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let r8s = format!("http://127.0.0.1:{r8s_port}");
    let admin = format!("http://127.0.0.1:{admin_port}");
    wait_ready(&c, &format!("{admin}/readyz")).await;
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The upstream's cost with nothing asked: churn, r8s's own watches.
    let window = Duration::from_secs(10);
    let (cpu0, b0) = (cpu_time(sim_pid), to_r8s.load(Ordering::Relaxed));
    tokio::time::sleep(window).await;
    let idle_cpu = (cpu_time(sim_pid) - cpu0).as_secs_f64() / window.as_secs_f64();
    let idle_bytes = (to_r8s.load(Ordering::Relaxed) - b0) as f64 / window.as_secs_f64();
    println!(
        "baseline: sim CPU {:.1} ms/s, bytes to r8s {:.0} B/s (churn, r8s's watches)",
        idle_cpu * 1000.0,
        idle_bytes
    );

    // Passed through: what the upstream does for each such request.
    let n = 10;
    let t = Instant::now();
    let cpu0 = cpu_time(sim_pid);
    let mut pass_bytes = 0;
    for _ in 0..n {
        let (_, _, bytes, _) =
            streaming_list(&c, &format!("{sim_url}/api/v1/pods?{CONSISTENT}")).await;
        pass_bytes += bytes;
    }
    let wall = t.elapsed().as_secs_f64();
    let pass_cpu = ((cpu_time(sim_pid) - cpu0).as_secs_f64() - idle_cpu * wall) / n as f64;
    let pass_bytes = pass_bytes as f64 / n as f64;
    println!(
        "passed through (the sim answering each itself): {:.1} MB, {:.1} ms of upstream CPU per list",
        pass_bytes / 1e6,
        pass_cpu * 1000.0
    );

    let mut asked = Vec::new();
    for (resource, label, path, n) in [
        ("pods (under churn)", "v1/pods", "/api/v1/pods", 50),
        (
            "configmaps (nobody writes them)",
            "v1/configmaps",
            "/api/v1/configmaps",
            20,
        ),
    ] {
        let steps = |step: &str| {
            format!(
                "r8s_consistent_upstream_requests_total{{resource=\"{label}\",step=\"{step}\"}}"
            )
        };
        let (l0, p0) = (
            counter(&c, &admin, &steps("list")).await,
            counter(&c, &admin, &steps("probe")).await,
        );
        let t = Instant::now();
        let (cpu0, b0) = (cpu_time(sim_pid), to_r8s.load(Ordering::Relaxed));
        let (mut heads, mut hits) = (Vec::new(), 0);
        for _ in 0..n {
            let (head, _, _, cache) =
                streaming_list(&c, &format!("{r8s}{path}?{CONSISTENT}")).await;
            heads.push(head);
            hits += usize::from(cache == "hit");
        }
        let wall = t.elapsed().as_secs_f64();
        let cpu = ((cpu_time(sim_pid) - cpu0).as_secs_f64() - idle_cpu * wall) / n as f64;
        let bytes = ((to_r8s.load(Ordering::Relaxed) - b0) as f64 - idle_bytes * wall) / n as f64;
        let lists = (counter(&c, &admin, &steps("list")).await - l0) / n as f64;
        let probes = (counter(&c, &admin, &steps("probe")).await - p0) / n as f64;
        asked.push((resource, lists, probes));
        println!(
            "proven, {resource}: {hits}/{n} hits; upstream per list {:.0} B ({:.4} % of passing it), {lists:.2} one-object LISTs and {probes:.2} probes, CPU {:.2} ms against a baseline of {:.0} ms/s (noise); added latency (to the response head) p50 {} p99 {}",
            bytes.max(0.0),
            100.0 * bytes.max(0.0) / pass_bytes,
            cpu * 1000.0,
            idle_cpu * 1000.0,
            ms(pct(heads.clone(), 50)),
            ms(pct(heads, 99)),
        );
    }

    // Consistent GETs (KEP-6404): proven from the cache, against the same
    // GET passed to the sim and the cache's own answer at resourceVersion=0.
    for (resource, path) in [
        ("pods (under churn)", "/api/v1/pods"),
        ("configmaps (nobody writes them)", "/api/v1/configmaps"),
    ] {
        let list = c
            .get(
                format!("{r8s}{path}?resourceVersion=0&limit=1")
                    .parse()
                    .unwrap(),
            )
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&list).unwrap();
        let m = &v["items"][0]["metadata"];
        let one = format!(
            "/api/v1/namespaces/{}/{}/{}",
            m["namespace"].as_str().unwrap(),
            path.rsplit('/').next().unwrap(),
            m["name"].as_str().unwrap()
        );
        let mut cells = Vec::new();
        for (how, url) in [
            ("through r8s, consistent", format!("{r8s}{one}")),
            ("straight to the sim", format!("{sim_url}{one}")),
            (
                "r8s at resourceVersion=0",
                format!("{r8s}{one}?resourceVersion=0"),
            ),
        ] {
            let (mut times, mut hits) = (Vec::new(), 0);
            for _ in 0..200 {
                let t = Instant::now();
                let r = c.get(url.parse().unwrap()).await.unwrap();
                let cache = r
                    .headers()
                    .get("x-r8s-cache")
                    .map(|v| v.to_str().unwrap().to_string())
                    .unwrap_or_default();
                assert!(r.status().is_success(), "{url}");
                let _ = r.into_body().collect().await.unwrap();
                times.push(t.elapsed());
                hits += usize::from(cache == "hit");
            }
            cells.push(format!(
                "{how} p50 {} p99 {} ({hits}/200 hits)",
                ms(pct(times.clone(), 50)),
                ms(pct(times, 99))
            ));
        }
        println!("consistent GET, {resource}: {}", cells.join("; "));
    }

    // 100 informers starting within one second.
    for (resource, label, path) in [
        ("pods", "v1/pods", "/api/v1/pods"),
        ("configmaps", "v1/configmaps", "/api/v1/configmaps"),
    ] {
        let list_series =
            format!("r8s_consistent_upstream_requests_total{{resource=\"{label}\",step=\"list\"}}");
        let probe_series = format!(
            "r8s_consistent_upstream_requests_total{{resource=\"{label}\",step=\"probe\"}}"
        );
        let (l0, p0) = (
            counter(&c, &admin, &list_series).await,
            counter(&c, &admin, &probe_series).await,
        );
        let start = Instant::now();
        let tasks: Vec<_> = (0..100)
            .map(|i| {
                let (c, url) = (c.clone(), format!("{r8s}{path}?{CONSISTENT}"));
                tokio::spawn(async move {
                    tokio::time::sleep_until((start + Duration::from_millis(i * 10)).into()).await;
                    streaming_list(&c, &url).await
                })
            })
            .collect();
        let mut heads = Vec::new();
        let mut hits = 0;
        for t in tasks {
            let (head, _, _, cache) = t.await.unwrap();
            heads.push(head);
            hits += usize::from(cache == "hit");
        }
        let (l1, p1) = (
            counter(&c, &admin, &list_series).await,
            counter(&c, &admin, &probe_series).await,
        );
        println!(
            "100 informers of {resource} within 1 s: {hits}/100 hits, {} one-object LISTs and {} probe watches upstream; latency p50 {} p99 {}",
            l1 - l0,
            p1 - p0,
            ms(pct(heads.clone(), 50)),
            ms(pct(heads, 99)),
        );
    }

    // Upstream CPU per request, on a quiet sim (no churn, so no baseline to
    // subtract): a passed-through streaming list, a proof's one-object LIST,
    // and a proof's probe watch (to its bookmark).
    drop(sim_proc);
    let quiet_port = free_port();
    let quiet = sim(
        BIN,
        quiet_port,
        &["--pods", &PODS.to_string(), "--namespaces", "10"],
    );
    let (qpid, q) = (quiet.0.id(), format!("http://127.0.0.1:{quiet_port}"));
    wait_ready(&c, &format!("{q}/version")).await;
    let per = |cpu0: Duration, n: usize| (cpu_time(qpid) - cpu0).as_secs_f64() * 1000.0 / n as f64;
    let cpu0 = cpu_time(qpid);
    for _ in 0..10 {
        streaming_list(&c, &format!("{q}/api/v1/pods?{CONSISTENT}")).await;
    }
    let pass_ms = per(cpu0, 10);
    let cpu0 = cpu_time(qpid);
    let mut rv = 0u64;
    for _ in 0..1000 {
        let req = http::Request::get(format!("{q}/api/v1/pods?limit=1"))
            .header(
                "accept",
                "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
            )
            .body(Empty::new())
            .unwrap();
        let body = c
            .request(req)
            .await
            .unwrap()
            .into_body()
            .collect()
            .await
            .unwrap()
            .to_bytes();
        let v: serde_json::Value = serde_json::from_slice(&body).unwrap();
        rv = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
    }
    let list_ms = per(cpu0, 1000);
    // Probes at once (each waits ~1 s for its bookmark), so that their CPU
    // adds up to many clock ticks: the process's CPU time counts in 10 ms.
    const PROBES: usize = 200;
    let cpu0 = cpu_time(qpid);
    let probes = (0..PROBES).map(|_| {
        let (c, q) = (c.clone(), q.clone());
        async move {
            // The one-object LIST above moved the watch cache to `rv`: a probe
            // from before it gets its bookmark 2 s before its deadline.
            let r = c
                .get(format!("{q}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=3", rv - 1).parse().unwrap())
                .await
                .unwrap();
            let body = r.into_body().collect().await.unwrap().to_bytes();
            assert!(String::from_utf8_lossy(&body).contains("BOOKMARK"));
        }
    });
    futures_util::future::join_all(probes).await;
    let probe_ms = per(cpu0, PROBES);
    println!(
        "quiet sim, upstream CPU: a passed-through streaming list {pass_ms:.1} ms, a one-object LIST {list_ms:.3} ms, a probe watch {probe_ms:.3} ms"
    );
    for (resource, lists, probes) in asked {
        let proven = lists * list_ms + probes * probe_ms;
        println!(
            "upstream CPU per proven list, {resource}: {proven:.3} ms ({:.3} % of passing it)",
            100.0 * proven / pass_ms
        );
    }
}
