//! Overload is answered, not absorbed: large lists past
//! `read.max_inflight_lists` get the apiserver's 429, clients that stop
//! reading are cut off after `server.write_timeout_seconds`, and nobody else
//! notices either.

mod common;

use std::time::{Duration, Instant};

use common::*;
use r8s::config::Config;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

/// Sends `GET path` and never reads the answer (a 4 KiB receive buffer, so
/// the server soon feels it).
async fn stalled_get(addr: std::net::SocketAddr, path: &str) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    let mut c = s.connect(addr).await.unwrap();
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: r8s\r\n\r\n").as_bytes())
        .await
        .unwrap();
    c
}

/// A sim of 5,000 pods (about 10 MB of JSON: a large list) and r8s caching
/// them, configured by `tune`.
async fn large(tune: impl FnOnce(&mut Config)) -> (r8s::sim::SimHandle, R8s) {
    let mut sc = sim_config();
    sc.pods = 5000;
    let sim = start_sim(sc).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.cache.encodings = vec!["json".into()];
    tune(&mut config);
    let r8s = start_r8s_config(config).await;
    (sim, r8s)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_refuse_large_lists_past_the_bound_with_the_apiservers_429() {
    let (sim, r8s) = large(|c| c.read.max_inflight_lists = 2).await;
    let all = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    // Two clients take both slots: they ask for every pod and read nothing.
    let mut stuck = Vec::new();
    for _ in 0..2 {
        stuck.push(stalled_get(r8s.addr, "/api/v1/pods?resourceVersion=0").await);
    }
    let deadline = Instant::now() + Duration::from_secs(10);
    let refused = loop {
        let r = get(&all).await;
        if r.status == 429 {
            break r;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        assert!(
            Instant::now() < deadline,
            "a third large list was never refused"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The apiserver's answer when priority and fairness has no seat.
    assert_eq!(refused.headers["retry-after"], "1");
    assert_eq!(refused.headers["content-type"], "application/json");
    assert_eq!(
        refused.json(),
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Too many requests, please try again later.",
            "reason": "TooManyRequests", "details": {"retryAfterSeconds": 1}, "code": 429
        })
    );
    // Small lists and gets are never refused.
    let small = get(&format!(
        "{}/api/v1/namespaces/ns-1/pods?resourceVersion=0&labelSelector=app%3Dnone",
        r8s.url()
    ))
    .await;
    assert_eq!(
        (small.status.as_u16(), &small.headers["x-r8s-cache"]),
        (200, &"hit".parse().unwrap())
    );
    let one = get(&format!(
        "{}/api/v1/namespaces/ns-1/pods/pod-00001?resourceVersion=0",
        r8s.url()
    ))
    .await;
    assert_eq!(one.status, 200);
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(metric(&m, "r8s_list_rejected_total") >= 1.0);

    // A client that goes away gives its slot back.
    drop(stuck.pop());
    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let r = get(&all).await;
        if r.status == 200 {
            assert_eq!(r.json()["items"].as_array().unwrap().len(), 5000);
            break;
        }
        assert_eq!(r.status, 429);
        assert!(Instant::now() < deadline, "the slot was never given back");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r8s.stop().await;
    sim.stop().await;
}
