//! The shared tier's memory under churn: r8s with deploy/kubernetes/r8s.toml's
//! budgets and logs (its resources that the built-in upstream serves, both
//! encodings) in front of the sim's real-shaped pods under steady churn, with
//! watchers reading every change and a full list every few seconds, for
//! `MEMORY_SECONDS` (default 600). RSS is sampled every 10 s and compared with
//! deployment.yaml's memory limit; the byte budget's series say what r8s
//! counted. Results go to BENCHMARKS.md.
//!
//!   cargo bench --bench memory
//!   MEMORY_SECONDS=180 MEMORY_BUDGET_MIB=192 cargo bench --bench memory   # logs trimmed to a budget
//!   MEMORY_SECONDS=60 MEMORY_PODS=2000 MEMORY_CHURN=200 cargo bench --bench memory

mod common;

use std::time::{Duration, Instant};

use bytes::Bytes;
use common::*;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

type C = Client<HttpConnector, Full<Bytes>>;

/// A metric's value in Prometheus text (0 when absent), summed over every
/// series whose name and labels start with `prefix`.
fn sum(text: &str, prefix: &str) -> f64 {
    text.lines()
        .filter(|l| l.starts_with(prefix))
        .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
        .sum()
}

/// deployment.yaml's memory limit, in bytes.
fn shipped_limit() -> u64 {
    let y = std::fs::read_to_string(format!("{ROOT}/deploy/kubernetes/deployment.yaml")).unwrap();
    let limits = y.split("limits:").nth(1).expect("a limits section");
    let q = limits
        .lines()
        .find_map(|l| l.trim().strip_prefix("memory:"))
        .unwrap()
        .trim();
    let (n, unit) = q.split_at(q.find(|c: char| !c.is_ascii_digit()).unwrap_or(q.len()));
    let n: u64 = n.parse().unwrap();
    n * match unit {
        "Gi" => 1 << 30,
        "Mi" => 1 << 20,
        "" => 1,
        u => panic!("unit {u}"),
    }
}

/// The tier's configuration, for a bench on loopback: its [cache] and
/// [watch] as shipped, the resources the sim serves, no TLS, no auth.
fn tier_config(sim: &str, port: u16, admin: u16) -> String {
    let text = std::fs::read_to_string(format!("{ROOT}/deploy/kubernetes/r8s.toml")).unwrap();
    let mut v: toml::Table = toml::from_str(&text).unwrap();
    v.remove("tls");
    v.remove("auth");
    v.insert("listen".into(), format!("127.0.0.1:{port}").into());
    v.insert("admin_listen".into(), format!("127.0.0.1:{admin}").into());
    let served = [
        "pods",
        "configmaps",
        "services",
        "endpoints",
        "nodes",
        "namespaces",
        "apps/v1/deployments",
    ];
    let cache = v.get_mut("cache").unwrap().as_table_mut().unwrap();
    let shipped: Vec<String> = cache["resources"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r.as_str().unwrap().to_string())
        .collect();
    let kept: Vec<toml::Value> = shipped
        .iter()
        .filter(|r| served.contains(&r.as_str()))
        .map(|r| r.clone().into())
        .collect();
    println!(
        "caching {} of the tier's {} resources (the sim serves no {})",
        kept.len(),
        shipped.len(),
        shipped
            .iter()
            .filter(|r| !served.contains(&r.as_str()))
            .cloned()
            .collect::<Vec<_>>()
            .join(", ")
    );
    cache.insert("resources".into(), toml::Value::Array(kept));
    // MEMORY_BUDGET_MIB: a smaller cache.max_bytes_total (and per-resource
    // budget), to see the logs trimmed to fit it.
    if let Some(mib) = std::env::var("MEMORY_BUDGET_MIB")
        .ok()
        .and_then(|v| v.parse::<i64>().ok())
    {
        cache.insert("max_bytes_total".into(), (mib << 20).into());
        cache.insert("max_bytes_per_resource".into(), (mib << 20).into());
        println!(
            "cache.max_bytes_total and max_bytes_per_resource = {mib} MiB (MEMORY_BUDGET_MIB)"
        );
    }
    let mut up = toml::Table::new();
    up.insert("servers".into(), toml::Value::Array(vec![sim.into()]));
    v.insert("upstream".into(), up.into());
    toml::to_string(&v).unwrap()
}

#[tokio::main]
async fn main() {
    let seconds = env_or("MEMORY_SECONDS", 600);
    let pods = env_or("MEMORY_PODS", 10_000);
    let churn = env_or("MEMORY_CHURN", 500);
    let watchers = env_or("MEMORY_WATCHERS", 200);
    let limit = shipped_limit();
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let (sim_port, port, admin_port) = (free_port(), free_port(), free_port());
    let _sim = sim(
        BIN,
        sim_port,
        &[
            "--pods",
            &pods.to_string(),
            "--namespaces",
            "50",
            "--history",
            "100000",
        ],
    );
    let sim_url = format!("http://127.0.0.1:{sim_port}");
    wait_ready(&c, &format!("{sim_url}/version")).await;
    let dir = Scratch::new("memory");
    let cfg = dir.join("r8s.toml");
    std::fs::write(&cfg, tier_config(&sim_url, port, admin_port)).unwrap();
    let r8s = Proc(
        std::process::Command::new(BIN)
            .args(["serve", "--config"])
            .arg(&cfg)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    );
    let admin = format!("http://127.0.0.1:{admin_port}");
    wait_ready(&c, &format!("{admin}/readyz")).await;
    let pid = r8s.0.id();
    let synced_rss = rss_kib(pid) * 1024;
    let metrics = || async {
        let r = c
            .get(format!("{admin}/metrics").parse().unwrap())
            .await
            .unwrap();
        String::from_utf8(r.into_body().collect().await.unwrap().to_bytes().to_vec()).unwrap()
    };
    let m = metrics().await;
    let synced_bytes = sum(&m, "r8s_cache_bytes{");
    println!(
        "synced: {pods} pods, r8s_cache_bytes {:.1} MiB, RSS {:.1} MiB",
        synced_bytes / 1048576.0,
        synced_rss as f64 / 1048576.0
    );

    // Watchers of every pod change (HTTP/1.1 each), reading as fast as they can.
    let api = format!("http://127.0.0.1:{port}");
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..watchers {
        let (c, url) = (
            c.clone(),
            format!(
                "{api}/api/v1/pods?watch=1&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds={}",
                seconds + 60
            ),
        );
        tasks.spawn(async move {
            if let Ok(r) = c.get(url.parse().unwrap()).await {
                let mut body = r.into_body();
                while let Some(Ok(_)) = body.frame().await {}
            }
        });
    }
    // A full list, both encodings in turn, every 5 s.
    {
        let (c, api) = (c.clone(), api.clone());
        tasks.spawn(async move {
            for i in 0u64.. {
                let accept = if i % 2 == 0 {
                    "application/json"
                } else {
                    "application/vnd.kubernetes.protobuf"
                };
                let req = http::Request::get(format!("{api}/api/v1/pods?resourceVersion=0"))
                    .header("accept", accept)
                    .body(Full::default())
                    .unwrap();
                if let Ok(r) = c.request(req).await {
                    let _ = r.into_body().collect().await;
                }
                tokio::time::sleep(Duration::from_secs(5)).await;
            }
        });
    }
    // Churn: PATCHes of random pods (an annotation and a condition, as a
    // kubelet's status updates change them) at `churn` per second.
    {
        let (c, sim_url) = (c.clone(), sim_url.clone());
        tasks.spawn(async move {
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / churn as f64));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            let sem = std::sync::Arc::new(tokio::sync::Semaphore::new(64));
            for n in 0u64.. {
                tick.tick().await;
                let permit = sem.clone().acquire_owned().await.unwrap();
                let i = fastrand::u64(..pods);
                let ns = i % 50;
                let url = format!("{sim_url}/api/v1/namespaces/ns-{ns}/pods/pod-{i:05}");
                let body = format!(
                    r#"{{"metadata":{{"annotations":{{"bench/n":"{n}"}}}},"status":{{"conditions":[{{"type":"Ready","status":"True","lastProbeTime":null,"lastTransitionTime":"2026-11-25T10:{:02}:00Z"}}]}}}}"#,
                    n % 60
                );
                let c = c.clone();
                tokio::spawn(async move {
                    let req = http::Request::patch(url)
                        .header("content-type", "application/merge-patch+json")
                        .body(Full::new(Bytes::from(body)))
                        .unwrap();
                    if let Ok(r) = c.request(req).await {
                        let _ = r.into_body().collect().await;
                    }
                    drop(permit);
                });
            }
        });
    }

    let start = Instant::now();
    let mut peak = synced_rss;
    let mut rows = Vec::new();
    while start.elapsed() < Duration::from_secs(seconds) {
        tokio::time::sleep(Duration::from_secs(10)).await;
        let rss = rss_kib(pid) * 1024;
        peak = peak.max(rss);
        let m = metrics().await;
        let row = (
            start.elapsed().as_secs(),
            rss,
            sum(&m, "r8s_cache_bytes{"),
            sum(&m, "r8s_watch_log_bytes{"),
            sum(&m, "r8s_watch_log_events{"),
            sum(&m, "r8s_watch_log_trimmed_bytes_total"),
            sum(&m, "r8s_cache_over_budget{"),
            sum(
                &m,
                "r8s_reflector_events_total{resource=\"v1/pods\",encoding=\"json\",type=\"MODIFIED\"}",
            ),
        );
        eprintln!("{row:?}");
        rows.push(row);
    }
    let mib = |b: f64| b / 1048576.0;
    println!();
    println!(
        "| time | r8s RSS | r8s_cache_bytes (objects + logs) | r8s_watch_log_bytes | log events | trimmed | caches over budget | pod events applied (JSON) |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (i, r) in rows.iter().enumerate() {
        if i % 6 == 5 || i + 1 == rows.len() {
            println!(
                "| {} s | {:.0} MiB | {:.0} MiB | {:.0} MiB | {:.0} | {:.0} MiB | {:.0} | {:.0} |",
                r.0,
                mib(r.1 as f64),
                mib(r.2),
                mib(r.3),
                r.4,
                mib(r.5),
                r.6,
                r.7
            );
        }
    }
    let budget = toml::from_str::<toml::Table>(&std::fs::read_to_string(&cfg).unwrap()).unwrap()
        ["cache"]["max_bytes_total"]
        .as_integer()
        .unwrap() as f64;
    let last = rows.last().unwrap();
    println!();
    println!(
        "peak RSS {:.0} MiB against the shipped limit of {:.0} MiB ({:.0} %); counted {:.0} MiB of a {:.0} MiB budget; RSS / counted {:.2}",
        mib(peak as f64),
        mib(limit as f64),
        100.0 * peak as f64 / limit as f64,
        mib(last.2),
        mib(budget),
        last.1 as f64 / last.2
    );
    assert!(peak < limit, "RSS {peak} over the shipped limit {limit}");
    drop(r8s);
}
