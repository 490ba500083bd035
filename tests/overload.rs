//! Overload is answered, not absorbed: large lists past
//! `read.max_inflight_lists` get the apiserver's 429, clients that stop
//! reading are cut off after `server.write_timeout_seconds`, and nobody else
//! notices either.

use std::time::{Duration, Instant};

use crate::common::*;
use r8s::config::Config;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpSocket, TcpStream};

/// Sends `GET path` and never reads the answer (a 4 KiB receive buffer, so
/// the server soon feels it).
async fn stalled_get(addr: std::net::SocketAddr, path: &str) -> TcpStream {
    stalled_get_as(addr, path, None).await
}

/// [`stalled_get`] with a bearer token, if any.
pub(crate) async fn stalled_get_as(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> TcpStream {
    let s = TcpSocket::new_v4().unwrap();
    s.set_recv_buffer_size(4096).unwrap();
    let mut c = s.connect(addr).await.unwrap();
    let auth = token.map_or(String::new(), |t| format!("Authorization: Bearer {t}\r\n"));
    c.write_all(format!("GET {path} HTTP/1.1\r\nHost: localhost\r\n{auth}\r\n").as_bytes())
        .await
        .unwrap();
    c
}

/// The start of the answer's status line on a stalled connection
/// (`HTTP/1.1 200`), seen without reading it.
pub(crate) async fn answer_head(c: &TcpStream) -> [u8; 12] {
    let mut head = [0u8; 12];
    while c.peek(&mut head).await.unwrap() < head.len() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    head
}

/// [`stalled_get`] of a large list that r8s has admitted: its answer's head
/// says 200 (seen without reading it, so the client still reads nothing).
async fn stalled_list(addr: std::net::SocketAddr, path: &str) -> TcpStream {
    stalled_list_as(addr, path, None).await
}

/// [`stalled_list`] with a bearer token, if any.
pub(crate) async fn stalled_list_as(
    addr: std::net::SocketAddr,
    path: &str,
    token: Option<&str>,
) -> TcpStream {
    let guard = HangGuard::new();
    loop {
        let c = stalled_get_as(addr, path, token).await;
        if &answer_head(&c).await == b"HTTP/1.1 200" {
            return c;
        }
        // Refused (another list held the slot): ask again.
        guard.check(|| "a stalled list was never admitted".into());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A sim of 5,000 pods (about 10 MB of JSON: a large list) and r8s caching
/// them, configured by `tune`.
async fn large(tune: impl FnOnce(&mut Config)) -> (r8s_sim::SimHandle, R8s) {
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
        stuck.push(stalled_list(r8s.addr, "/api/v1/pods?resourceVersion=0").await);
    }
    let guard = HangGuard::new();
    let refused = loop {
        let r = get(&all).await;
        if r.status == 429 {
            break r;
        }
        assert_eq!(r.status, 200, "{}", r.text());
        guard.check(|| "a third large list was never refused".into());
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
    assert!(sample(&m, "r8s_list_rejected_total") >= 1.0);

    // A client that goes away gives its slot back.
    drop(stuck.pop());
    let guard = HangGuard::new();
    loop {
        let r = get(&all).await;
        if r.status == 200 {
            assert_eq!(r.json()["items"].as_array().unwrap().len(), 5000);
            break;
        }
        assert_eq!(r.status, 429);
        guard.check(|| "the slot was never given back".into());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    r8s.stop().await;
    sim.stop().await;
}

/// Reads what `c` has until the server ends the connection; panics if it
/// is still open after `within`. Returns the bytes read.
async fn drained(mut c: TcpStream, within: Duration, who: &str) -> usize {
    use tokio::io::AsyncReadExt;
    let mut buf = vec![0u8; 64 * 1024];
    let mut n = 0;
    let deadline = Instant::now() + within;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, c.read(&mut buf)).await {
            Ok(Ok(0)) | Ok(Err(_)) => return n,
            Ok(Ok(k)) => n += k,
            Err(_) => panic!("{who}: still open after {within:?} ({n} bytes read)"),
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_close_connections_that_stop_reading_and_serve_the_rest() {
    const BOUND: u64 = 2;
    // Three seats: two lists' and a watch's initial events' (every pod: a
    // walk of them all, which holds a seat as a list does).
    let (sim, r8s) = large(|c| {
        c.read.max_inflight_lists = 3;
        c.server.write_timeout_seconds = BOUND;
    })
    .await;
    let all = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    let full = get(&all).await.body.len();
    // Two lists and a watch of every pod whose clients read nothing, and an
    // idle watch (one namespace's, its selector matches nothing) whose
    // client reads nothing.
    let t0 = Instant::now();
    let lists = [
        stalled_list(r8s.addr, "/api/v1/pods?resourceVersion=0").await,
        stalled_list(r8s.addr, "/api/v1/pods?resourceVersion=0").await,
    ];
    let watch = stalled_get(r8s.addr, "/api/v1/pods?watch=1&resourceVersion=0").await;
    let idle = stalled_get(
        r8s.addr,
        "/api/v1/namespaces/ns-0/pods?watch=1&resourceVersion=0&labelSelector=app%3Dnone&timeoutSeconds=30",
    )
    .await;
    // While they hold their seats, a third large list is refused.
    tokio::time::sleep(Duration::from_millis(500)).await;
    assert_eq!(get(&all).await.status, 429);
    // After the bound they are cut off, and their slots come back.
    tokio::time::sleep(Duration::from_secs(BOUND + 2).saturating_sub(t0.elapsed())).await;
    for (i, c) in lists.into_iter().enumerate() {
        let n = drained(c, Duration::from_secs(3), &format!("stalled list {i}")).await;
        assert!(n < full, "stalled list {i} got the whole list ({n} bytes)");
    }
    let n = drained(watch, Duration::from_secs(3), "stalled watch").await;
    assert!(n < full, "the stalled watch got everything ({n} bytes)");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        sample(
            &m,
            r#"r8s_connections_closed_total{reason="write_timeout"}"#
        ) >= 3.0,
        "each cut-off is counted"
    );
    let r = get(&all).await;
    assert_eq!(r.status, 200, "the slots were given back");
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 5000);
    // The idle watch had nothing to write: still open, its head read now.
    let mut idle = idle;
    let mut head = vec![0u8; 4096];
    let k = tokio::time::timeout(
        Duration::from_secs(2),
        tokio::io::AsyncReadExt::read(&mut idle, &mut head),
    )
    .await
    .expect("the idle watch's head")
    .unwrap();
    assert!(
        head[..k].starts_with(b"HTTP/1.1 200 OK"),
        "{}",
        String::from_utf8_lossy(&head[..k])
    );
    assert!(
        tokio::time::timeout(
            Duration::from_millis(500),
            tokio::io::AsyncReadExt::read(&mut idle, &mut head)
        )
        .await
        .is_err(),
        "an idle watch is not cut off"
    );
    println!(
        "stalled lists and watch cut off within {:?} of a {BOUND} s bound",
        t0.elapsed()
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_bound_request_headers_and_bodies_as_the_apiserver_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let pods = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    // Headers: kube-apiserver reads 1 MiB (and 4 KiB more) of them, over
    // HTTP/1.1 and HTTP/2 alike; past that, 431.
    let big = "x".repeat(600 << 10);
    let r = send("GET", &pods, &[("x-big", &big)], None).await;
    assert_eq!(
        (r.status.as_u16(), &r.headers["x-r8s-cache"]),
        (200, &"hit".parse().unwrap())
    );
    let huge = "x".repeat(1100 << 10);
    let r = send("GET", &pods, &[("x-big", &huge)], None).await;
    assert_eq!(r.status, 431);
    let h2: hyper_util::client::legacy::Client<_, http_body_util::Full<bytes::Bytes>> =
        hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
            .http2_only(true)
            .http2_max_header_list_size(4 << 20)
            .build_http();
    let token = "t".repeat(100 << 10);
    let req = http::Request::get(&pods)
        .header("x-long-token", token)
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = h2
        .request(req)
        .await
        .expect("HTTP/2 with 100 KiB of headers");
    assert_eq!(resp.version(), http::Version::HTTP_2);
    assert_eq!(
        resp.status(),
        200,
        "hyper's own HTTP/2 default refused headers over 16 KiB"
    );

    // Bodies: writes pass through; the upstream reads 3 MiB of one and
    // answers 413 past that (the built-in upstream as kube-apiserver).
    let cm = |name: &str, size: usize| {
        serde_json::json!({
            "apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": "default"},
            "data": {"v": "x".repeat(size)}
        })
        .to_string()
    };
    let url = format!("{}/api/v1/namespaces/default/configmaps", r8s.url());
    let ct = [("content-type", "application/json")];
    let r = send("POST", &url, &ct, Some(&cm("fits", 2 << 20))).await;
    assert_eq!(
        r.status,
        201,
        "{}",
        String::from_utf8_lossy(&r.body[..200.min(r.body.len())])
    );
    let r = send("POST", &url, &ct, Some(&cm("too-big", 4 << 20))).await;
    assert_eq!(r.status, 413);
    assert_eq!(
        r.json(),
        serde_json::json!({
            "kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
            "message": "Request entity too large: limit is 3145728",
            "reason": "RequestEntityTooLarge", "code": 413
        })
    );
    r8s.stop().await;
    sim.stop().await;
}

/// An HTTP/2 client of r8s, as client-go is: one connection, reopened (and
/// the request retried) when the server has sent GOAWAY.
struct H2 {
    addr: std::net::SocketAddr,
    sender: Option<hyper::client::conn::http2::SendRequest<http_body_util::Empty<bytes::Bytes>>>,
    connections: usize,
}

impl H2 {
    async fn connect(&mut self) {
        let io = hyper_util::rt::TokioIo::new(TcpStream::connect(self.addr).await.unwrap());
        let (sender, conn) =
            hyper::client::conn::http2::handshake(hyper_util::rt::TokioExecutor::new(), io)
                .await
                .unwrap();
        tokio::spawn(conn);
        self.sender = Some(sender);
        self.connections += 1;
    }

    /// Sends `GET path`; the response head, its body left to the caller.
    async fn get(&mut self, path: &str) -> http::Response<hyper::body::Incoming> {
        for _ in 0..3 {
            if self.sender.as_ref().is_none_or(|s| s.is_closed()) {
                self.connect().await;
            }
            let sender = self.sender.as_mut().unwrap();
            let req = http::Request::get(format!("http://{}{path}", self.addr))
                .body(http_body_util::Empty::new())
                .unwrap();
            // A request raced with GOAWAY is refused, never processed: retried
            // on a new connection, as Go's transport retries it.
            let sent = match sender.ready().await {
                Ok(()) => sender.send_request(req).await,
                Err(e) => Err(e),
            };
            match sent {
                Ok(resp) => return resp,
                Err(_) => self.sender = None,
            }
        }
        panic!("three connections in a row refused GET {path}");
    }
}

/// `server.goaway_chance`: an HTTP/2 client's requests move to new
/// connections now and then (so they spread over replicas behind a Service),
/// while a watch open on the old connection keeps its events; at the default
/// of 0 one connection carries everything.
#[tokio::test(flavor = "multi_thread")]
async fn should_send_goaway_by_chance_without_cutting_open_watches() {
    use http_body_util::BodyExt;
    let sim = start_sim(sim_config()).await;
    for (chance, requests) in [(0.02, 1000), (0.0, 300)] {
        let mut config = Config::default();
        config.upstream.servers = vec![sim.url()];
        config.cache.resources = vec!["pods".into()];
        config.server.goaway_chance = chance;
        let r8s = start_r8s_config(config).await;
        let mut client = H2 {
            addr: r8s.addr,
            sender: None,
            connections: 0,
        };
        let watch = client
            .get("/api/v1/namespaces/ns-0/pods?watch=1&resourceVersion=0&allowWatchBookmarks=false")
            .await;
        assert_eq!(watch.status(), 200);
        // The watch opened the first connection. (Its own response may draw
        // the GOAWAY, 1 run in 50, so where the first list goes is chance:
        // nothing below depends on it.)
        assert_eq!(client.connections, 1);
        let mut watch = watch.into_body();
        for _ in 0..requests {
            let r = client
                .get("/api/v1/namespaces/ns-0/pods?resourceVersion=0&limit=1")
                .await;
            assert_eq!(r.status(), 200);
            r.into_body().collect().await.unwrap();
        }
        if chance > 0.0 {
            // 1,000 draws at 1/50 (the watch's response and the first 999
            // lists' lead to a new connection): fewer than 2 GOAWAYs has odds
            // of 0.98^1000 + 1000 x 0.02 x 0.98^999 = 3.6e-8.
            assert!(
                client.connections >= 3,
                "{} connections for {requests} requests at goaway_chance {chance}",
                client.connections
            );
            let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
            let sent = sample(&m, "r8s_connections_closed_total{reason=\"goaway\"}");
            assert!(sent >= (client.connections - 1) as f64, "{sent}");
        } else {
            assert_eq!(client.connections, 1, "no GOAWAY at goaway_chance 0");
        }
        // The watch opened on the first connection still gets its events.
        sim.touch("ns-0", "pod-00000", requests);
        let marker = format!("\"r8s.dev/touch\":\"{requests}\"");
        let mut seen = Vec::new();
        let deadline = Instant::now() + Duration::from_secs(10);
        while !String::from_utf8_lossy(&seen).contains(&marker) {
            let left = deadline.saturating_duration_since(Instant::now());
            let frame = tokio::time::timeout(left, watch.frame())
                .await
                .expect("the watch on the first connection sees the change")
                .expect("the watch is still open")
                .unwrap();
            if let Ok(data) = frame.into_data() {
                seen.extend_from_slice(&data);
            }
        }
        r8s.stop().await;
    }
    sim.stop().await;
}
