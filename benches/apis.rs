//! Caches that follow the API (issue 44): how long after a CRD is
//! established its first cache hit comes, and what a new CRD costs the
//! upstream. r8s (`cache.resources = ["*"]`, the defaults otherwise) and the
//! sim run in this process; each round creates a CRD and one object of it,
//! polls a `resourceVersion=0` list through r8s every 2 ms until it is a
//! hit, counts the sim's requests meanwhile by kind, then deletes the CRD
//! and waits until r8s passes its requests again (its cache retired).
//!
//!   cargo bench --bench apis
//!   APIS_ROUNDS=50 cargo bench --bench apis

mod common;

use std::collections::HashMap;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use serde_json::json;

use common::env_or;

type C = Client<HttpConnector, Full<Bytes>>;

const CRDS: &str = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions";

async fn send(c: &C, method: &str, url: &str, body: Option<String>) -> (u16, String, String) {
    let mut req = http::Request::builder().method(method).uri(url);
    if body.is_some() {
        req = req.header("content-type", "application/json");
    }
    let req = req
        .body(Full::new(Bytes::from(body.unwrap_or_default())))
        .unwrap();
    let resp = c.request(req).await.unwrap();
    let status = resp.status().as_u16();
    let cache = resp
        .headers()
        .get("x-r8s-cache")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
        .to_string();
    let body = resp.into_body().collect().await.unwrap().to_bytes();
    (status, cache, String::from_utf8_lossy(&body).into_owned())
}

/// The requests in `after` not in `before`, by kind: discovery (`/api`,
/// `/apis` documents), lists, watches, and the rest.
fn spent(before: &HashMap<String, u64>, after: &HashMap<String, u64>) -> [u64; 4] {
    let mut out = [0; 4];
    for (k, n) in after {
        let d = n - before.get(k).copied().unwrap_or(0);
        let slot = if k.starts_with("get /api") {
            0
        } else if k.starts_with("list ") {
            1
        } else if k.starts_with("watch ") {
            2
        } else {
            3
        };
        out[slot] += d;
    }
    out
}

#[tokio::main(flavor = "multi_thread")]
async fn main() {
    let rounds: usize = env_or("APIS_ROUNDS", 20);
    let sim_listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = r8s_sim::start(r8s_sim::SimConfig::default(), sim_listener)
        .await
        .unwrap();
    let sim_url = format!("http://{}", sim.addr);
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim_url.clone()];
    config.cache.resources = vec!["*".into()];
    let prepared = r8s::prepare(config).await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let (url, admin_url) = (
        format!("http://{}", api.local_addr().unwrap()),
        format!("http://{}", admin.local_addr().unwrap()),
    );
    let (trigger, signal) = r8s::shutdown::channel();
    let task = tokio::spawn(prepared.run(r8s::Listeners { api, admin }, signal));
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    while send(&c, "GET", &format!("{admin_url}/readyz"), None)
        .await
        .0
        != 200
    {
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut took = Vec::new();
    let mut cost = Vec::new();
    for i in 0..rounds {
        let (group, plural) = (format!("r{i}.bench.example.com"), "things");
        let crd = json!({
            "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
            "metadata": {"name": format!("{plural}.{group}")},
            "spec": {"group": group, "scope": "Namespaced",
                     "names": {"plural": plural, "singular": "thing", "kind": "Thing", "listKind": "ThingList"},
                     "versions": [{"name": "v1", "served": true, "storage": true,
                                   "schema": {"openAPIV3Schema": {"type": "object", "x-kubernetes-preserve-unknown-fields": true}}}]}
        });
        let before = sim.sim.counts();
        let (s, _, b) = send(&c, "POST", &format!("{url}{CRDS}"), Some(crd.to_string())).await;
        assert_eq!(s, 201, "{b}");
        // The sim establishes a CRD as it creates it.
        let established = Instant::now();
        let things = format!("{url}/apis/{group}/v1/namespaces/ns-0/{plural}");
        let thing = json!({"apiVersion": format!("{group}/v1"), "kind": "Thing", "metadata": {"name": "t"}});
        let (s, _, b) = send(&c, "POST", &things, Some(thing.to_string())).await;
        assert_eq!(s, 201, "{b}");
        // This loop's own passes are LISTs upstream too: left out below.
        let mut passed = 0;
        loop {
            let (s, cache, _) = send(&c, "GET", &format!("{things}?resourceVersion=0"), None).await;
            if s == 200 && cache == "hit" {
                break;
            }
            passed += 1;
            assert!(established.elapsed() < Duration::from_secs(60));
            tokio::time::sleep(Duration::from_millis(2)).await;
        }
        took.push(established.elapsed());
        // Settled: the second look 2 s after the change included.
        tokio::time::sleep(Duration::from_secs(3)).await;
        let mut spent = spent(&before, &sim.sim.counts());
        spent[1] -= passed;
        cost.push(spent);
        let (s, _, b) = send(&c, "DELETE", &format!("{url}{CRDS}/{plural}.{group}"), None).await;
        assert_eq!(s, 200, "{b}");
        loop {
            let (s, cache, _) = send(&c, "GET", &format!("{things}?resourceVersion=0"), None).await;
            if s == 404 && cache == "pass" {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    took.sort();
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let n = took.len();
    println!(
        "time from a CRD established to its first cache hit, {n} rounds: p50 {:.0} ms, p90 {:.0} ms, max {:.0} ms",
        ms(took[n / 2]),
        ms(took[n * 9 / 10]),
        ms(took[n - 1])
    );
    let avg = |i: usize| cost.iter().map(|c| c[i]).sum::<u64>() as f64 / cost.len() as f64;
    println!(
        "upstream requests per new CRD in its first 3 s (the bench's own creations and polls left out of lists; other: the creations): discovery {:.1}, lists {:.1}, watches {:.1}, other {:.1}",
        avg(0),
        avg(1),
        avg(2),
        avg(3)
    );
    trigger.fire();
    let _ = task.await;
}
