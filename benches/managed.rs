//! Issue 55's goals, on the sim's real-shaped pods (managedFields of two or
//! three managers, as `../shared/reference/13-pods-as-served.json`):
//!
//! (a) a scheduler-shaped informer (protobuf, every pod) with and without
//!     `drop=metadata.managedFields`: its list's bytes, an event's bytes,
//!     its objects' memory once decoded (k8s-openapi `Pod`s, counted by
//!     this process's allocator), and r8s's CPU per event delivered to
//!     1,000 such watchers under a steady write rate;
//! (b) r8s's memory per pod with `cache.managed_fields = "drop"` against
//!     `keep` (its `r8s_cache_bytes` and its RSS);
//! (c) four sharded informers on pods (`shardSelector`, a quarter of the
//!     uid hash space each, 250 watchers apiece): each one's share of the
//!     events, and r8s's CPU per delivered event against 1,000 unsharded.
//!
//! `cargo bench --bench managed` (results in BENCHMARKS.md); knobs:
//! `MANAGED_PODS` (10,000), `MANAGED_WATCHERS` (1,000), `MANAGED_RATE`
//! (writes/s, 100), `MANAGED_SECONDS` (20). The sim and r8s are the release
//! binary in their own processes; r8s's CPU and RSS are read from `/proc`.

mod common;

use std::alloc::{GlobalAlloc, Layout, System};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicIsize, AtomicU64, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, cpu_time, env_or, free_port, rss_kib, wait_ready};

/// Bytes this process holds on its heap, to weigh decoded objects.
struct Counting;

static LIVE: AtomicIsize = AtomicIsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        LIVE.fetch_add(l.size() as isize, Ordering::Relaxed);
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        LIVE.fetch_sub(l.size() as isize, Ordering::Relaxed);
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, new: usize) -> *mut u8 {
        LIVE.fetch_add(new as isize - l.size() as isize, Ordering::Relaxed);
        unsafe { System.realloc(p, l, new) }
    }
}

#[global_allocator]
static ALLOC: Counting = Counting;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const DROP: &str = ";drop=metadata.managedFields";

type C = Client<HttpConnector, Full<Bytes>>;

struct Setup {
    sim: String,
    r8s: String,
    admin: String,
    r8s_proc: Proc,
    _sim_proc: Proc,
    c: C,
}

impl Setup {
    /// The sim with `pods` pods, and r8s caching them with `env` (`R8S_*`).
    async fn start(pods: usize, env: &[(&str, &str)]) -> Setup {
        let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let (sim_port, port, admin_port) = (free_port(), free_port(), free_port());
        let sim = format!("http://127.0.0.1:{sim_port}");
        let sim_proc = Proc(
            Command::new(BIN)
                .args(["sim", "--listen", &format!("127.0.0.1:{sim_port}")])
                .args(["--pods", &pods.to_string(), "--namespaces", "20"])
                .args(["--history", "100000"])
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        wait_ready(&c, &format!("{sim}/version")).await;
        let r8s_proc = Proc(
            Command::new(BIN)
                .args(["serve", "--upstream", &sim, "--cache", "pods"])
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
                .envs(env.iter().copied())
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let admin = format!("http://127.0.0.1:{admin_port}");
        wait_ready(&c, &format!("{admin}/readyz")).await;
        Setup {
            sim,
            r8s: format!("http://127.0.0.1:{port}"),
            admin,
            r8s_proc,
            _sim_proc: sim_proc,
            c,
        }
    }

    async fn get(&self, url: &str, accept: &str) -> Bytes {
        let req = http::Request::get(url)
            .header("accept", accept)
            .body(Full::default())
            .unwrap();
        let r = self.c.request(req).await.unwrap();
        assert!(r.status().is_success(), "{url}: {}", r.status());
        r.into_body().collect().await.unwrap().to_bytes()
    }

    /// One series of r8s's metrics.
    async fn metric(&self, series: &str) -> f64 {
        let m = self
            .get(&format!("{}/metrics", self.admin), "text/plain")
            .await;
        String::from_utf8_lossy(&m)
            .lines()
            .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
            .unwrap_or(0.0)
    }

    /// Every pod's path on the sim and uid, and the cache's version.
    async fn pods(&self) -> (Vec<String>, Vec<String>, u64) {
        let b = self
            .get(
                &format!("{}/api/v1/pods?resourceVersion=0", self.r8s),
                "application/json",
            )
            .await;
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        let paths = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| {
                let m = &p["metadata"];
                format!(
                    "/api/v1/namespaces/{}/pods/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                )
            })
            .collect();
        let rv = v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let uids = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["uid"].as_str().unwrap().to_string())
            .collect();
        (paths, uids, rv)
    }
}

/// What one group of watchers read: protobuf frames (events) and bytes.
#[derive(Default)]
struct Read {
    events: AtomicU64,
    bytes: AtomicU64,
}

/// A watch read to its end, counting its frames (4-byte lengths) and bytes.
async fn watch(c: C, url: String, accept: String, read: Arc<Read>, open: Arc<AtomicU64>) {
    let req = http::Request::get(&url)
        .header("accept", &accept)
        .body(Full::default())
        .unwrap();
    let resp = c.request(req).await.expect("a watch");
    assert_eq!(resp.status(), 200, "{url}");
    open.fetch_add(1, Ordering::Relaxed);
    let mut body = resp.into_body();
    let mut buf: Vec<u8> = Vec::new();
    while let Some(Ok(f)) = body.frame().await {
        let Ok(d) = f.into_data() else { continue };
        read.bytes.fetch_add(d.len() as u64, Ordering::Relaxed);
        buf.extend_from_slice(&d);
        let mut at = 0;
        while buf.len() >= at + 4 {
            let len = u32::from_be_bytes(buf[at..at + 4].try_into().unwrap()) as usize;
            if buf.len() < at + 4 + len {
                break;
            }
            read.events.fetch_add(1, Ordering::Relaxed);
            at += 4 + len;
        }
        buf.drain(..at);
    }
}

/// Writes to random pods (seeded) at `rate` per second for `secs` seconds;
/// the pods written (their indexes in `paths`).
async fn write(setup: &Setup, paths: &[String], rate: f64, secs: u64) -> Vec<usize> {
    let mut rng = fastrand::Rng::with_seed(55);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
    let end = Instant::now() + Duration::from_secs(secs);
    let mut tasks = tokio::task::JoinSet::new();
    let mut picked = Vec::new();
    while Instant::now() < end {
        tick.tick().await;
        let i = rng.usize(..paths.len());
        picked.push(i);
        let url = format!("{}{}", setup.sim, paths[i]);
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros();
        let body = format!(r#"{{"metadata":{{"annotations":{{"bench/sent":"{stamp}"}}}}}}"#);
        let c = setup.c.clone();
        tasks.spawn(async move {
            let req = http::Request::patch(url)
                .header("content-type", "application/merge-patch+json")
                .body(Full::new(Bytes::from(body)))
                .unwrap();
            let r = c.request(req).await.unwrap();
            let _ = r.into_body().collect().await;
        });
    }
    while tasks.join_next().await.is_some() {}
    picked
}

/// What a run measured.
struct Ran {
    /// r8s's CPU per delivered event, µs.
    per_event: f64,
    /// What each group of watchers read.
    reads: Vec<Arc<Read>>,
    /// The uids of the pods written, a write each.
    written: Vec<String>,
    /// Every pod's uid.
    uids: Vec<String>,
}

/// Opens the watchers (`(query, accept, group)` each), writes, waits for
/// every event to arrive; r8s's CPU per delivered event and what each group read.
async fn run(setup: &Setup, watchers: &[(String, String, usize)], groups: usize, rate: f64) -> Ran {
    let (paths, uids, rv) = setup.pods().await;
    let reads: Vec<Arc<Read>> = (0..groups).map(|_| Arc::default()).collect();
    let open = Arc::new(AtomicU64::new(0));
    let mut tasks = Vec::new();
    for (query, accept, g) in watchers {
        let url = format!(
            "{}/api/v1/pods?watch=1&resourceVersion={rv}{query}",
            setup.r8s
        );
        let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        tasks.push(tokio::spawn(watch(
            c,
            url,
            accept.clone(),
            reads[*g].clone(),
            open.clone(),
        )));
    }
    while open.load(Ordering::Relaxed) < watchers.len() as u64 {
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    let secs = env_or("MANAGED_SECONDS", 20);
    let cpu0 = cpu_time(setup.r8s_proc.0.id());
    let picked = write(setup, &paths, rate, secs).await;
    let written = picked.len();
    // Every write reaches every watcher it concerns: wait until the events
    // stop coming (a second without one).
    let total = || {
        reads
            .iter()
            .map(|r| r.events.load(Ordering::Relaxed))
            .sum::<u64>()
    };
    let mut last = total();
    loop {
        tokio::time::sleep(Duration::from_secs(1)).await;
        let now = total();
        if now == last {
            break;
        }
        last = now;
    }
    let cpu = cpu_time(setup.r8s_proc.0.id()) - cpu0;
    for t in tasks {
        t.abort();
    }
    let delivered = total();
    println!(
        "    {} watchers, {written} writes ({rate}/s): {delivered} events delivered, r8s CPU {:.2} s",
        watchers.len(),
        cpu.as_secs_f64()
    );
    Ran {
        per_event: cpu.as_secs_f64() * 1e6 / delivered as f64,
        reads,
        written: picked.into_iter().map(|i| uids[i].clone()).collect(),
        uids,
    }
}

/// Writes a second (`MANAGED_RATE`, 100).
fn rate() -> f64 {
    env_or("MANAGED_RATE", 100.0)
}

/// Heap bytes `f`'s result holds.
fn weigh<T>(f: impl FnOnce() -> T) -> (T, isize) {
    let before = LIVE.load(Ordering::Relaxed);
    let t = f();
    (t, LIVE.load(Ordering::Relaxed) - before)
}

async fn informer_drop(pods: usize) {
    println!(
        "## (a) a scheduler-shaped informer, with and without drop=metadata.managedFields ({pods} pods)\n"
    );
    let setup = Setup::start(pods, &[]).await;
    let list = format!("{}/api/v1/pods?resourceVersion=0", setup.r8s);
    println!("| | list, protobuf | list, JSON | its pods decoded (k8s-openapi, heap) |");
    println!("|---|---|---|---|");
    let mut rows = Vec::new();
    for drop in ["", DROP] {
        let pb = setup.get(&list, &format!("{PROTOBUF}{drop}")).await;
        let json = setup.get(&list, &format!("application/json{drop}")).await;
        let (decoded, heap) = weigh(|| {
            serde_json::from_slice::<k8s_openapi::List<k8s_openapi::api::core::v1::Pod>>(&json)
                .unwrap()
        });
        assert_eq!(decoded.items.len(), pods);
        assert_eq!(
            decoded
                .items
                .iter()
                .any(|p| p.metadata.managed_fields.is_some()),
            drop.is_empty()
        );
        std::mem::drop(decoded);
        rows.push((pb.len(), json.len(), heap));
        println!(
            "| {} | {:.1} MB ({} B a pod) | {:.1} MB | {:.1} MB ({} B a pod) |",
            if drop.is_empty() { "whole" } else { "drop" },
            pb.len() as f64 / 1e6,
            pb.len() / pods,
            json.len() as f64 / 1e6,
            heap as f64 / 1e6,
            heap as usize / pods
        );
    }
    println!(
        "| drop / whole | {:.3} | {:.3} | {:.3} |\n",
        rows[1].0 as f64 / rows[0].0 as f64,
        rows[1].1 as f64 / rows[0].1 as f64,
        rows[1].2 as f64 / rows[0].2 as f64
    );
    let n = env_or("MANAGED_WATCHERS", 1_000);
    let mut cost = Vec::new();
    for drop in ["", DROP] {
        let watchers: Vec<(String, String, usize)> = (0..n)
            .map(|_| (String::new(), format!("{PROTOBUF}{drop}"), 0))
            .collect();
        let Ran {
            per_event, reads, ..
        } = run(&setup, &watchers, 1, rate()).await;
        let r = &reads[0];
        let (events, bytes) = (
            r.events.load(Ordering::Relaxed),
            r.bytes.load(Ordering::Relaxed),
        );
        println!(
            "    {}: r8s CPU {per_event:.2} µs per delivered event; {} B an event on the wire",
            if drop.is_empty() { "whole" } else { "drop" },
            bytes / events.max(1)
        );
        cost.push((per_event, bytes / events.max(1)));
    }
    println!(
        "\n| {n} protobuf watchers | r8s CPU per delivered event | bytes an event |\n|---|---|---|\n| whole | {:.2} µs | {} |\n| drop | {:.2} µs | {} |\n| drop / whole | **{:.3}×** | {:.3} |\n",
        cost[0].0,
        cost[0].1,
        cost[1].0,
        cost[1].1,
        cost[1].0 / cost[0].0,
        cost[1].1 as f64 / cost[0].1 as f64
    );
}

async fn memory_per_pod(pods: usize) {
    println!("## (b) r8s's memory per pod, cache.managed_fields = keep / drop ({pods} pods)\n");
    println!(
        "| cache.managed_fields | r8s_cache_bytes JSON | protobuf | per pod (both) | r8s RSS | RSS per pod |"
    );
    println!("|---|---|---|---|---|---|");
    let mut per = Vec::new();
    for mode in ["keep", "drop"] {
        let setup = Setup::start(pods, &[("R8S_CACHE__MANAGED_FIELDS", mode)]).await;
        tokio::time::sleep(Duration::from_secs(2)).await;
        let json = setup
            .metric(r#"r8s_cache_bytes{resource="v1/pods",encoding="json"}"#)
            .await;
        let pb = setup
            .metric(r#"r8s_cache_bytes{resource="v1/pods",encoding="protobuf"}"#)
            .await;
        let rss = rss_kib(setup.r8s_proc.0.id()) as f64 * 1024.0;
        println!(
            "| {mode} | {:.1} MB | {:.1} MB | {:.0} B | {:.0} MB | {:.0} B |",
            json / 1e6,
            pb / 1e6,
            (json + pb) / pods as f64,
            rss / 1e6,
            rss / pods as f64
        );
        per.push(((json + pb) / pods as f64, rss / pods as f64));
    }
    println!(
        "| drop saves | | | **{:.0} B a pod ({:.0} %)** | | {:.0} B a pod |\n",
        per[0].0 - per[1].0,
        100.0 * (per[0].0 - per[1].0) / per[0].0,
        per[0].1 - per[1].1
    );
}

/// The quarter `i` of the uid hash space, as a `shardSelector` value (escaped).
fn quarter(i: u64) -> String {
    let bound = |q: u64| match q {
        4 => "'0x10000000000000000'".to_string(),
        q => format!("'0x{:016x}'", q << 62),
    };
    let s = format!(
        "shardRange(object.metadata.uid, {}, {})",
        bound(i),
        bound(i + 1)
    );
    s.replace(' ', "%20")
        .replace('\'', "%27")
        .replace(',', "%2C")
        .replace('(', "%28")
        .replace(')', "%29")
}

async fn sharded(pods: usize) {
    let n = env_or("MANAGED_WATCHERS", 1_000);
    println!(
        "## (c) four sharded informers against unsharded ({pods} pods, {n} protobuf watchers)\n"
    );
    let setup = Setup::start(pods, &[]).await;
    let plain: Vec<(String, String, usize)> = (0..n)
        .map(|_| (String::new(), PROTOBUF.to_string(), 0))
        .collect();
    let shards: Vec<(String, String, usize)> = (0..n)
        .map(|i| {
            let q = (i % 4) as u64;
            (
                format!("&shardSelector={}", quarter(q)),
                PROTOBUF.to_string(),
                q as usize,
            )
        })
        .collect();
    // Unsharded at the same write rate (four times the deliveries), and at
    // a quarter of it (the same deliveries a second as the shards': what a
    // delivery costs depends on how many come at once, as events that
    // arrive together go out in one write).
    let unsharded = run(&setup, &plain, 1, rate()).await.per_event;
    // Pairs, alternated (the machine's state drifts over minutes): the
    // last sharded run's deliveries are the table's.
    let mut pairs = Vec::new();
    for _ in 0..env_or("MANAGED_PAIRS", 3) - 1 {
        let quarter = run(&setup, &plain, 1, rate() / 4.0).await.per_event;
        pairs.push((quarter, run(&setup, &shards, 4, rate()).await.per_event));
    }
    let unsharded_quarter = run(&setup, &plain, 1, rate() / 4.0).await.per_event;
    let Ran {
        per_event,
        reads,
        written,
        uids,
    } = run(&setup, &shards, 4, rate()).await;
    let of = |uid: &String| (r8s::api::shard::fnv1a(uid) >> 62) as usize;
    let (mut pods_in, mut writes_in) = ([0usize; 4], [0usize; 4]);
    uids.iter().for_each(|u| pods_in[of(u)] += 1);
    written.iter().for_each(|u| writes_in[of(u)] += 1);
    println!(
        "| shard | its pods | events a watcher got | its pods' writes | share of the events |"
    );
    println!("|---|---|---|---|---|");
    for (i, r) in reads.iter().enumerate() {
        let got = r.events.load(Ordering::Relaxed) as f64 / (n / 4) as f64;
        println!(
            "| {i} (uid hash in [{i}/4, {}/4)) | {} ({:.4}) | {got:.1} | {} | **{:.4}** |",
            i + 1,
            pods_in[i],
            pods_in[i] as f64 / uids.len() as f64,
            writes_in[i],
            got / written.len() as f64
        );
    }
    pairs.push((unsharded_quarter, per_event));
    let mut ratios: Vec<f64> = pairs.iter().map(|(u, s)| s / u).collect();
    ratios.sort_by(f64::total_cmp);
    println!(
        "\nsharded / unsharded at the same deliveries a second, pair by pair: {}; median **{:.3}×**",
        pairs
            .iter()
            .map(|(u, s)| format!("{s:.2} / {u:.2} µs = {:.3}×", s / u))
            .collect::<Vec<_>>()
            .join(", "),
        ratios[ratios.len() / 2]
    );
    let r = rate();
    println!(
        "\n| r8s CPU per delivered event | unsharded | sharded, {r}/s | sharded / unsharded |\n|---|---|---|---|\n| unsharded at {r} writes/s (4× the deliveries) | {unsharded:.2} µs | {per_event:.2} µs | {:.3}× |\n| unsharded at {} writes/s (the same deliveries a second) | {unsharded_quarter:.2} µs | {per_event:.2} µs | {:.3}× |\n",
        per_event / unsharded,
        r / 4.0,
        per_event / unsharded_quarter
    );
}

#[tokio::main]
async fn main() {
    let pods = env_or("MANAGED_PODS", 10_000);
    let only = std::env::args().nth(1).filter(|a| !a.starts_with('-'));
    let want = |part: &str| only.as_deref().is_none_or(|o| o == part);
    if want("informer") {
        informer_drop(pods).await;
    }
    if want("memory") {
        memory_per_pod(pods).await;
    }
    if want("sharded") {
        sharded(pods).await;
    }
}
