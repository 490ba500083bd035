//! Watch fan-out: many watchers on one r8s, fed by writes to the upstream.
//!
//! `cargo bench --bench watch` (results in BENCHMARKS.md). The sim and r8s run
//! as separate processes (the release binary), so r8s's CPU and RSS are its
//! own (read from `/proc`); the watchers are raw HTTP/1.1 connections in this
//! process, and this process is also the writer: it PATCHes pods on the sim at
//! a steady rate, stamping each with its send time (`bench/sent`, Unix µs), so
//! sampled watchers measure end-to-end delivery (write sent → event read).
//!
//! (a) 10,000 watchers on all pods, 100 writes/s: delivery latency, r8s CPU per
//!     delivered event, RSS per idle watcher, encodings per event.
//! (b) kubelet-style watchers (`fieldSelector=spec.nodeName=node-i`, one per
//!     node, each node running one pod), 1,000 writes/s spread over the pods
//!     of the first 1,000 nodes: r8s CPU per write with 0, 1,000, 5,000 and
//!     10,000 watchers (only the watchers no write concerns grow).
//! (c) an upstream event's cost with no watchers (r8s CPU per write at 1,000
//!     writes/s, JSON only), and r8s's RSS with a 75 s history at 100
//!     writes/s against the JSON it caches (`-- upstream`).
//!
//! Everything runs on 127.0.0.1 and stops by itself.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use common::{Proc, free_port, rss_kib, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

type C = Client<HttpConnector, Full<Bytes>>;

/// CPU time (user + system) a process has used.
fn cpu(pid: u32) -> Duration {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    let after = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f[11].parse::<u64>().unwrap() + f[12].parse::<u64>().unwrap();
    Duration::from_secs_f64(ticks as f64 / clock_ticks() as f64)
}

fn clock_ticks() -> u64 {
    static T: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
    *T.get_or_init(|| {
        Command::new("getconf")
            .arg("CLK_TCK")
            .output()
            .ok()
            .and_then(|o| String::from_utf8(o.stdout).ok())
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(100)
    })
}

fn now_us() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_micros() as u64
}

async fn fetch(c: &C, url: &str) -> Bytes {
    let resp = c.get(url.parse().unwrap()).await.unwrap();
    assert!(resp.status().is_success(), "{url}: {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// A metric's value in Prometheus text (0 when absent).
fn metric(text: &str, series: &str) -> f64 {
    text.lines()
        .find_map(|l| l.strip_prefix(series)?.trim().parse().ok())
        .unwrap_or(0.0)
}

/// The sim and an r8s caching pods in front of it.
struct Setup {
    sim: String,
    r8s: SocketAddr,
    admin: String,
    r8s_proc: Proc,
    _sim_proc: Proc,
    c: C,
}

impl Setup {
    async fn start(sim_args: &[&str]) -> Setup {
        Setup::start_with(sim_args, &[]).await
    }

    /// [`Setup::start`], with r8s's environment (`R8S_*` settings) added.
    async fn start_with(sim_args: &[&str], r8s_env: &[(&str, String)]) -> Setup {
        let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
        let (sim_port, port, admin_port) = (free_port(), free_port(), free_port());
        let sim_listen = format!("127.0.0.1:{sim_port}");
        let sim_proc = Proc(
            Command::new(BIN)
                .args(["sim", "--listen", &sim_listen, "--history", "100000"])
                .args(sim_args)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let sim = format!("http://{sim_listen}");
        wait_ready(&c, &format!("{sim}/version")).await;
        // `BENCH_R8S_BIN=/path/to/r8s` measures that r8s (an earlier build).
        let r8s_bin = std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string());
        let r8s_proc = Proc(
            Command::new(r8s_bin)
                .args(["serve", "--upstream", &sim, "--cache", "pods"])
                .args(["--listen", &format!("127.0.0.1:{port}")])
                .args(["--admin-listen", &format!("127.0.0.1:{admin_port}")])
                .envs(r8s_env.iter().map(|(k, v)| (*k, v.as_str())))
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        let admin = format!("http://127.0.0.1:{admin_port}");
        wait_ready(&c, &format!("{admin}/readyz")).await;
        Setup {
            sim,
            r8s: ([127, 0, 0, 1], port).into(),
            admin,
            r8s_proc,
            _sim_proc: sim_proc,
            c,
        }
    }

    /// The sim of part (a): `ALL_PODS` pods over `NAMESPACES` namespaces.
    async fn all_pods() -> Setup {
        Setup::start(&[
            "--pods",
            &ALL_PODS.to_string(),
            "--namespaces",
            &NAMESPACES.to_string(),
        ])
        .await
    }

    fn pid(&self) -> u32 {
        self.r8s_proc.0.id()
    }

    async fn metrics(&self) -> String {
        String::from_utf8(
            fetch(&self.c, &format!("{}/metrics", self.admin))
                .await
                .to_vec(),
        )
        .unwrap()
    }

    /// The cache's current resource version (watches start there: no initial
    /// events), from a list that selects nothing: a page (`limit=1`) would
    /// pin the version for its continue token, and the superseded pods with
    /// it, which is not the load being measured.
    async fn rv(&self) -> u64 {
        let b = fetch(
            &self.c,
            &format!(
                "http://{}/api/v1/pods?resourceVersion=0&fieldSelector=metadata.name%3Dr8s-bench-none",
                self.r8s
            ),
        )
        .await;
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap()
    }
}

/// What the watchers have read.
#[derive(Default)]
struct Tally {
    /// Events (not bookmarks) read, all watchers.
    events: AtomicU64,
    /// Watchers whose response head arrived.
    open: AtomicUsize,
    /// End-to-end latencies (µs) read by the sampled watchers.
    latencies: Mutex<Vec<u64>>,
    /// Each watcher's path and its own event count.
    per: Mutex<Vec<(String, Arc<AtomicU64>)>>,
}

/// An event line's start (the object's own `{"type":` fields, as in pod
/// conditions, are never at a line's start: lines follow a `\n`, from the
/// previous event or the chunk header).
const EVENT: &[u8] = b"{\"type\":\"";
const LINE_EVENT: &[u8] = b"\n{\"type\":\"";
const LINE_BOOKMARK: &[u8] = b"\n{\"type\":\"BOOKMARK\"";
const SENT: &[u8] = b"\"bench/sent\":\"";
/// A protobuf frame's event type (`WatchEvent` field 1) of the three event types.
const PB_EVENTS: [&[u8]; 3] = [b"\x0a\x05ADDED", b"\x0a\x08MODIFIED", b"\x0a\x07DELETED"];
/// The stamp's map entry in protobuf: key, then field 2 (tag, length, digits).
const PB_SENT: &[u8] = b"bench/sent\x12";
/// Bytes a protobuf reader carries between reads: more than a marker or a stamp.
const PB_CARRY: usize = 48;

/// Reads a watch stream's bytes: counts the events, and (sampled) records
/// each one's latency from its send stamp. Events are lines; the partial last
/// one is carried. Unsampled readers only keep the last few bytes, enough not
/// to miss a split marker.
struct Reader {
    buf: Vec<u8>,
    sampled: bool,
    /// Protobuf frames (counted by their event type field) rather than JSON lines.
    protobuf: bool,
    tally: Arc<Tally>,
    own: Arc<AtomicU64>,
}

impl Reader {
    fn new(sampled: bool, protobuf: bool, tally: Arc<Tally>, path: &str) -> Self {
        let own = Arc::new(AtomicU64::new(0));
        tally
            .per
            .lock()
            .unwrap()
            .push((path.to_string(), own.clone()));
        Reader {
            buf: Vec::with_capacity(if sampled { 8192 } else { 64 }),
            sampled,
            protobuf,
            tally,
            own,
        }
    }

    fn count(&self, n: u64) {
        self.tally.events.fetch_add(n, Ordering::Relaxed);
        self.own.fetch_add(n, Ordering::Relaxed);
    }

    /// Protobuf frames: each event's type field counted once (markers and
    /// stamps wholly inside the bytes carried from the last read were seen).
    fn feed_protobuf(&mut self, data: &[u8]) {
        let carried = self.buf.len();
        self.buf.extend_from_slice(data);
        let buf = &self.buf;
        let n: u64 = PB_EVENTS
            .iter()
            .map(|pat| {
                memchr::memmem::find_iter(buf, pat)
                    .filter(|at| at + pat.len() > carried)
                    .count() as u64
            })
            .sum();
        let mut lats = Vec::new();
        if self.sampled {
            for at in memchr::memmem::find_iter(buf, PB_SENT) {
                let len_at = at + PB_SENT.len();
                let Some(&len) = buf.get(len_at) else {
                    continue;
                };
                let end = len_at + 1 + len as usize;
                if end > buf.len() || end <= carried {
                    continue;
                }
                let at_us: u64 = std::str::from_utf8(&buf[len_at + 1..end])
                    .unwrap()
                    .parse()
                    .unwrap();
                lats.push(now_us().saturating_sub(at_us));
            }
        }
        self.count(n);
        if !lats.is_empty() {
            self.tally.latencies.lock().unwrap().extend(lats);
        }
        let keep = self.buf.len().min(PB_CARRY);
        self.buf.drain(..self.buf.len() - keep);
    }

    fn feed(&mut self, data: &[u8]) {
        if self.protobuf {
            return self.feed_protobuf(data);
        }
        if !self.sampled {
            // Bytes carried from the last read: a marker wholly inside them was counted.
            let carried = self.buf.len();
            self.buf.extend_from_slice(data);
            let new = |pat: &[u8]| {
                memchr::memmem::find_iter(&self.buf, pat)
                    .filter(|at| at + pat.len() > carried)
                    .count() as u64
            };
            let n = new(LINE_EVENT) - new(LINE_BOOKMARK);
            self.count(n);
            let keep = self.buf.len().min(LINE_BOOKMARK.len() - 1);
            self.buf.drain(..self.buf.len() - keep);
            return;
        }
        self.buf.extend_from_slice(data);
        let mut done = 0;
        while let Some(nl) = memchr::memchr(b'\n', &self.buf[done..]) {
            let line = &self.buf[done..done + nl];
            if line.starts_with(EVENT) && !line.starts_with(&LINE_BOOKMARK[1..]) {
                self.count(1);
                if let Some(i) = memchr::memmem::find(line, SENT) {
                    let digits = &line[i + SENT.len()..];
                    let end = digits.iter().position(|b| *b == b'"').unwrap();
                    let at: u64 = std::str::from_utf8(&digits[..end])
                        .unwrap()
                        .parse()
                        .unwrap();
                    let lat = now_us().saturating_sub(at);
                    self.tally.latencies.lock().unwrap().push(lat);
                }
            }
            done += nl + 1;
        }
        self.buf.drain(..done);
    }
}

/// One watch on its own HTTP/1.1 connection (as kubelets and most
/// non-Go clients watch), read raw: chunk headers never start a line, so
/// counting lines that start an event is exact.
async fn watcher(addr: SocketAddr, path: String, sampled: bool, protobuf: bool, tally: Arc<Tally>) {
    let mut s = TcpStream::connect(addr).await.expect("connect to r8s");
    let _ = s.set_nodelay(true);
    let accept = if protobuf {
        "application/vnd.kubernetes.protobuf, */*"
    } else {
        "application/json"
    };
    // The address as the Host: r8s refuses other names without authentication
    // (server.accept_hosts).
    let req = format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nAccept: {accept}\r\n\r\n");
    s.write_all(req.as_bytes()).await.unwrap();
    let mut buf = vec![0u8; 8192];
    let mut have = 0;
    // The response head.
    loop {
        let n = s.read(&mut buf[have..]).await.unwrap();
        assert!(n > 0, "r8s closed a watch before answering");
        have += n;
        if let Some(end) = memchr::memmem::find(&buf[..have], b"\r\n\r\n") {
            assert!(
                buf.starts_with(b"HTTP/1.1 200"),
                "{path}: {}",
                String::from_utf8_lossy(&buf[..end])
            );
            buf.copy_within(end + 4..have, 0);
            have -= end + 4;
            break;
        }
    }
    tally.open.fetch_add(1, Ordering::Relaxed);
    let mut reader = Reader::new(sampled, protobuf, tally, &path);
    // The first chunk header's line ends before the first event.
    reader.feed(b"\n");
    reader.feed(&buf[..have]);
    loop {
        match s.read(&mut buf).await {
            Ok(0) | Err(_) => return,
            Ok(n) => reader.feed(&buf[..n]),
        }
    }
}

/// Watches multiplexed on one HTTP/2 connection (h2c), as client-go's
/// informers in one process share theirs.
async fn h2_watchers(addr: SocketAddr, paths: Vec<(String, bool)>, tally: Arc<Tally>) {
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(addr).await.expect("connect"));
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let mut streams = tokio::task::JoinSet::new();
    for (path, sampled) in paths {
        let mut send = send.clone();
        send.ready().await.expect("h2 connection");
        let req = http::Request::get(format!("http://{addr}{path}"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        let resp = send.send_request(req).await.expect("h2 watch");
        assert_eq!(resp.status(), 200, "{path}");
        tally.open.fetch_add(1, Ordering::Relaxed);
        let tally = tally.clone();
        streams.spawn(async move {
            let mut body = resp.into_body();
            let mut reader = Reader::new(sampled, false, tally, &path);
            reader.feed(b"\n");
            while let Some(Ok(f)) = body.frame().await {
                if let Ok(d) = f.into_data() {
                    reader.feed(&d);
                }
            }
        });
    }
    while streams.join_next().await.is_some() {}
}

/// Writes to the sim at a steady rate until stopped.
struct Writer {
    task: tokio::task::JoinHandle<()>,
    inflight: Arc<tokio::sync::Semaphore>,
    written: Arc<AtomicU64>,
    /// The paths written, in the order the writes succeeded.
    done: Arc<Mutex<Vec<String>>>,
}

const INFLIGHT: u32 = 64;

impl Writer {
    /// PATCHes `pick()`'s pods on the sim at `rate` per second, each stamped
    /// with its send time.
    fn start(sim: String, rate: f64, pick: impl Fn() -> String + Send + 'static) -> Writer {
        let inflight = Arc::new(tokio::sync::Semaphore::new(INFLIGHT as usize));
        let written = Arc::new(AtomicU64::new(0));
        let done: Arc<Mutex<Vec<String>>> = Arc::default();
        let (sem, count, log) = (inflight.clone(), written.clone(), done.clone());
        let task = tokio::spawn(async move {
            let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
            let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / rate));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Burst);
            loop {
                tick.tick().await;
                let permit = sem.clone().acquire_owned().await.unwrap();
                let path = pick();
                let url = format!("{sim}{path}");
                let body = format!(
                    r#"{{"metadata":{{"annotations":{{"bench/sent":"{}"}}}}}}"#,
                    now_us()
                );
                let (c, count, log) = (c.clone(), count.clone(), log.clone());
                tokio::spawn(async move {
                    let req = http::Request::patch(url)
                        .header("content-type", "application/merge-patch+json")
                        .body(Full::new(Bytes::from(body)))
                        .unwrap();
                    if let Ok(r) = c.request(req).await
                        && r.status().is_success()
                    {
                        let _ = r.into_body().collect().await;
                        count.fetch_add(1, Ordering::Relaxed);
                        log.lock().unwrap().push(path);
                    }
                    drop(permit);
                });
            }
        });
        Writer {
            task,
            inflight,
            written,
            done,
        }
    }

    fn written(&self) -> u64 {
        self.written.load(Ordering::Relaxed)
    }

    /// Stops writing, waits for the writes in flight, and returns the paths written.
    async fn stop(self) -> Vec<String> {
        self.task.abort();
        let _ = self.inflight.acquire_many(INFLIGHT).await;
        std::mem::take(&mut *self.done.lock().unwrap())
    }
}

/// How watchers reach r8s.
#[derive(Clone, Copy, PartialEq)]
enum Transport {
    /// One HTTP/1.1 connection per watcher.
    H1,
    /// 100 watchers per HTTP/2 connection.
    H2,
    /// One HTTP/1.1 connection per watcher, in protobuf (client-go's typed informers' encoding).
    H1Protobuf,
}

const PER_H2_CONN: usize = 100;

/// Opens `paths` as watchers (every `sample`-th sampled) and waits for their heads.
async fn open_watchers(
    setup: &Setup,
    paths: Vec<String>,
    sample: usize,
    tally: &Arc<Tally>,
    transport: Transport,
) -> Vec<tokio::task::JoinHandle<()>> {
    let want = tally.open.load(Ordering::Relaxed) + paths.len();
    let mut handles = Vec::with_capacity(paths.len());
    match transport {
        Transport::H1 | Transport::H1Protobuf => {
            for (i, p) in paths.into_iter().enumerate() {
                handles.push(tokio::spawn(watcher(
                    setup.r8s,
                    p,
                    i % sample == 0,
                    transport == Transport::H1Protobuf,
                    tally.clone(),
                )));
                if i % 500 == 499 {
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
            }
        }
        Transport::H2 => {
            let paths: Vec<(String, bool)> = paths
                .into_iter()
                .enumerate()
                .map(|(i, p)| (p, i % sample == 0))
                .collect();
            for chunk in paths.chunks(PER_H2_CONN) {
                handles.push(tokio::spawn(h2_watchers(
                    setup.r8s,
                    chunk.to_vec(),
                    tally.clone(),
                )));
            }
        }
    }
    let deadline = Instant::now() + Duration::from_secs(120);
    while tally.open.load(Ordering::Relaxed) < want {
        assert!(Instant::now() < deadline, "watchers did not all open");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    handles
}

fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * p) as usize] as f64 / 1000.0
}

/// The delivery histogram's (p50, p99) upper bucket bounds (ms) between two scrapes.
fn delivery_buckets(before: &str, after: &str) -> (String, String) {
    let prefix = r#"r8s_watch_event_delivery_seconds_bucket{resource="v1/pods",le=""#;
    let buckets = |t: &str| -> Vec<(String, f64)> {
        t.lines()
            .filter_map(|l| {
                let rest = l.strip_prefix(prefix)?;
                let (le, v) = rest.split_once("\"} ")?;
                Some((le.to_string(), v.trim().parse().ok()?))
            })
            .collect()
    };
    let (b, a) = (buckets(before), buckets(after));
    let d: Vec<(String, f64)> = a
        .iter()
        .map(|(le, v)| {
            let old = b.iter().find(|(l, _)| l == le).map_or(0.0, |x| x.1);
            (le.clone(), v - old)
        })
        .collect();
    let total = d.last().map_or(0.0, |x| x.1);
    let at = |q: f64| {
        d.iter()
            .find(|(_, v)| *v >= q * total)
            .map(|(le, _)| match le.parse::<f64>() {
                Ok(s) => format!("≤ {} ms", s * 1e3),
                Err(_) => le.clone(),
            })
            .unwrap_or_default()
    };
    (at(0.5), at(0.99))
}

const ALL_WATCHERS: usize = 10_000;
const ALL_PODS: usize = 1_000;
const NAMESPACES: usize = 10;

/// Waits until r8s's cache has every write the sim took, then until the
/// watchers have read everything: `want` deliveries in all when the caller
/// knows them (a step's own, so no step counts another's backlog), else
/// until the count stops moving for 3 s. Gives up when the count has not
/// moved for 30 s (a row then shows the shortfall) or after 10 minutes.
async fn settled(setup: &Setup, tally: &Tally, want: Option<u64>) -> u64 {
    let sim_rv = {
        let b = fetch(&setup.c, &format!("{}/api/v1/pods?limit=1", setup.sim)).await;
        let v: serde_json::Value = serde_json::from_slice(&b).unwrap();
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse::<u64>()
            .unwrap()
    };
    let deadline = Instant::now() + Duration::from_secs(120);
    while setup.rv().await < sim_rv && Instant::now() < deadline {
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let deadline = Instant::now() + Duration::from_secs(600);
    let quiet = if want.is_some() { 30 } else { 3 };
    let mut last = tally.events.load(Ordering::Relaxed);
    let mut still = Instant::now();
    while Instant::now() < deadline && want.is_none_or(|w| last < w) {
        tokio::time::sleep(Duration::from_millis(250)).await;
        let now = tally.events.load(Ordering::Relaxed);
        if now != last {
            (last, still) = (now, Instant::now());
        } else if still.elapsed() >= Duration::from_secs(quiet) {
            break;
        }
    }
    if want.is_some() {
        // Anything past what was expected: duplicates or another step's events.
        tokio::time::sleep(Duration::from_millis(500)).await;
        last = tally.events.load(Ordering::Relaxed);
    }
    last
}

/// RSS per idle watcher: `n` watchers opened and left idle (no writes) on
/// a fresh r8s, against its RSS before.
async fn idle_rss(n: usize, transport: Transport) {
    let setup = Setup::all_pods().await;
    // Touch the cache as the watchers will (the version, a list) first.
    let _ = fetch(
        &setup.c,
        &format!("http://{}/api/v1/pods?resourceVersion=0", setup.r8s),
    )
    .await;
    let before = rss_kib(setup.pid());
    let tally = Arc::new(Tally::default());
    let path = watch_path(setup.rv().await);
    let _open = open_watchers(&setup, vec![path; n], 100, &tally, transport).await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let open = metric(&setup.metrics().await, WATCHERS);
    assert_eq!(open as usize, n, "r8s holds every watcher");
    let after = rss_kib(setup.pid());
    let per = (after.saturating_sub(before)) as f64 * 1024.0 / n as f64;
    println!(
        "| {} | {n} | {:.1} MiB | {:.1} MiB | {per:.0} bytes |",
        match transport {
            Transport::H1 => "HTTP/1.1, a connection each",
            Transport::H2 => "HTTP/2, 100 per connection",
            Transport::H1Protobuf => "HTTP/1.1, protobuf",
        },
        before as f64 / 1024.0,
        after as f64 / 1024.0,
    );
}

const WATCHERS: &str = r#"r8s_watchers{resource="v1/pods"}"#;

fn watch_path(rv: u64) -> String {
    format!("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}")
}

/// (a) Watchers on all pods at 100 writes/s: RSS per idle watcher, then
/// delivery as watchers grow to 10,000 (HTTP/1.1), and 10,000 over HTTP/2.
/// The delivery steps `steps=h1:1000,h2:2500,...` names (transports
/// `h1`, `h2`, `h1pb`; counts growing within a transport), or None.
fn parse_steps(arg: &str) -> Option<Vec<(Transport, usize)>> {
    arg.strip_prefix("steps=")?
        .split(',')
        .map(|s| {
            let (t, n) = s.split_once(':')?;
            let t = match t {
                "h1" => Transport::H1,
                "h2" => Transport::H2,
                "h1pb" => Transport::H1Protobuf,
                _ => return None,
            };
            Some((t, n.parse().ok()?))
        })
        .collect()
}

async fn all_pods(steps: Option<Vec<(Transport, usize)>>) {
    println!(
        "(a) {ALL_PODS} real-shaped pods (the sim's, ~4.4 KB of JSON each); watchers on all pods from the current version, with bookmarks."
    );
    println!();
    if steps.is_none() {
        println!("| idle watchers | count | r8s RSS before | with them | RSS per watcher |");
        println!("|---|---|---|---|---|");
        idle_rss(ALL_WATCHERS, Transport::H1).await;
        idle_rss(ALL_WATCHERS, Transport::H2).await;
    }
    let setup = Setup::all_pods().await;

    println!();
    println!("| transport | watchers | {DELIVER_COLUMNS}");
    println!("|---|---|{}", "---|".repeat(12));
    let steps = steps.unwrap_or_else(|| {
        vec![
            (Transport::H1, 1_000),
            (Transport::H1, 2_500),
            (Transport::H1, 5_000),
            (Transport::H1, ALL_WATCHERS),
            (Transport::H2, 2_500),
            (Transport::H2, 5_000),
            (Transport::H2, ALL_WATCHERS),
            (Transport::H1Protobuf, ALL_WATCHERS),
        ]
    });
    let mut open: Vec<tokio::task::JoinHandle<()>> = Vec::new();
    let mut transport = Transport::H1;
    let mut tally = Arc::new(Tally::default());
    for (t, target) in steps {
        if t != transport {
            for h in open.drain(..) {
                h.abort();
            }
            while metric(&setup.metrics().await, WATCHERS) > 0.0 {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            transport = t;
            tally = Arc::new(Tally::default());
        }
        let rv = setup.rv().await;
        // Watchers of earlier steps stay open and counted. (Not `open.len()`:
        // over HTTP/2 a handle holds a connection of 100 watchers. Counting
        // handles opened 2,475 watchers too many at the 5,000 step and 4,925
        // more at 10,000, which the rows' expected deliveries did not count.)
        let already = tally.open.load(Ordering::Relaxed);
        let mut new = open_watchers(
            &setup,
            vec![watch_path(rv); target - already],
            100,
            &tally,
            t,
        )
        .await;
        open.append(&mut new);
        let row = deliver(&setup, &tally, 100.0, Expect::EachWrite(target), || {
            let i = fastrand::usize(..ALL_PODS);
            format!("/api/v1/namespaces/ns-{}/pods/pod-{i:05}", i % NAMESPACES)
        })
        .await;
        println!(
            "| {} | {target} | {row} |",
            match t {
                Transport::H1 => "HTTP/1.1",
                Transport::H2 => "HTTP/2",
                Transport::H1Protobuf => "HTTP/1.1, protobuf",
            }
        );
    }
    let m = setup.metrics().await;
    println!();
    for e in ["json", "protobuf"] {
        let events = store_events(&m, e);
        let encodings = metric(
            &m,
            &format!("r8s_watch_encodings_total{{encoding=\"{e}\"}}"),
        );
        println!(
            "(a) {e} encodings: {encodings} for {events} upstream events = {:.3} per event, with up to {ALL_WATCHERS} watchers",
            encodings / events.max(1.0)
        );
    }
}

/// What a write should reach: every watcher, or (kubelets) the watcher of
/// the written pod's node, if open (pod 2k runs on node k).
enum Expect {
    EachWrite(usize),
    NodesBelow(usize),
}

fn phase_base(path: &str, before: &std::collections::HashMap<String, u64>) -> u64 {
    before.get(path).copied().unwrap_or(0)
}

/// The header of [`deliver`]'s rows.
const DELIVER_COLUMNS: &str = "writes/s | events delivered/s | r8s CPU (cores) | r8s CPU per write | r8s CPU per delivered event | bench client CPU (cores) | end-to-end p50 | p99 | max | r8s hand-off p50 | p99 | delivered / expected |";

/// Runs the writer at `rate` for 5 s of warm-up and 20 s measured, then
/// checks that the watchers in `tally` got what they should have. Returns a
/// table row's cells.
async fn deliver(
    setup: &Setup,
    tally: &Arc<Tally>,
    rate: f64,
    expect: Expect,
    pick: impl Fn() -> String + Send + 'static,
) -> String {
    let events_before = settled(setup, tally, None).await;
    let per_before: std::collections::HashMap<String, u64> = tally
        .per
        .lock()
        .unwrap()
        .iter()
        .map(|(p, n)| (p.clone(), n.load(Ordering::Relaxed)))
        .collect();
    let upstream_before = upstream_events(&setup.metrics().await);
    let w = Writer::start(setup.sim.clone(), rate, pick);
    tokio::time::sleep(Duration::from_secs(5)).await;
    tally.latencies.lock().unwrap().clear();
    let me = std::process::id();
    let (m0, cpu0, own0, ev0, wr0, t0) = (
        setup.metrics().await,
        cpu(setup.pid()),
        cpu(me),
        tally.events.load(Ordering::Relaxed),
        w.written(),
        Instant::now(),
    );
    tokio::time::sleep(Duration::from_secs(20)).await;
    let (m1, cpu1, own1, ev1, wr1, secs) = (
        setup.metrics().await,
        cpu(setup.pid()),
        cpu(me),
        tally.events.load(Ordering::Relaxed),
        w.written(),
        t0.elapsed().as_secs_f64(),
    );
    let paths = w.stop().await;
    let mut lat = std::mem::take(&mut *tally.latencies.lock().unwrap());
    lat.sort_unstable();
    let delivered = ev1 - ev0;
    let cpu_s = (cpu1 - cpu0).as_secs_f64();
    let (h50, h99) = delivery_buckets(&m0, &m1);
    // The writes are done: once r8s's cache has them all, the upstream events
    // it applied are this step's, and so is what they owe the watchers.
    settled(setup, tally, Some(0)).await;
    let upstream = upstream_events(&setup.metrics().await) - upstream_before;
    // Kubelet-style watchers: what each node's watcher is owed this step.
    let mut want: std::collections::HashMap<usize, u64> = Default::default();
    let expected = match expect {
        Expect::EachWrite(n) => upstream as u64 * n as u64,
        Expect::NodesBelow(open) => {
            for p in &paths {
                let i: usize = p.rsplit("pod-").next().unwrap().parse().unwrap();
                if i / 2 < open {
                    *want.entry(i / 2).or_default() += 1;
                }
            }
            want.values().sum()
        }
    };
    let events_after = settled(setup, tally, Some(events_before + expected)).await;
    if let Expect::NodesBelow(_) = expect {
        // Watchers whose count is off (counts are cumulative: compare the phase's part).
        let per = tally.per.lock().unwrap();
        let mut off = 0;
        for (path, n) in per.iter() {
            let node: usize = path.rsplit("node-").next().unwrap().parse().unwrap();
            let got = n.load(Ordering::Relaxed);
            let w = *want.get(&node).unwrap_or(&0);
            if got != w + phase_base(path, &per_before) {
                off += 1;
                if off <= 3 {
                    eprintln!(
                        "node-{node}: got {got} (before {}), want {w} more",
                        phase_base(path, &per_before)
                    );
                }
            }
        }
        if off > 0 {
            eprintln!("{off} kubelet watchers off");
        }
    }
    let writes = (wr1 - wr0) as f64;
    format!(
        "{:.0} | {:.0} | {:.3} | {:.1} µs | {:.2} µs | {:.2} | {:.1} ms | {:.1} ms | {:.1} ms | {h50} | {h99} | {} / {}",
        writes / secs,
        delivered as f64 / secs,
        cpu_s / secs,
        cpu_s * 1e6 / writes.max(1.0),
        cpu_s * 1e6 / delivered.max(1) as f64,
        (own1 - own0).as_secs_f64() / secs,
        pct(&lat, 0.5),
        pct(&lat, 0.99),
        pct(&lat, 1.0),
        events_after - events_before,
        expected,
    )
}

/// Upstream change events the reflector has received (pods).
fn upstream_events(m: &str) -> f64 {
    store_events(m, "json")
}

/// Upstream events one store of `v1/pods` (`json` or `protobuf`) applied.
fn store_events(m: &str, encoding: &str) -> f64 {
    ["ADDED", "MODIFIED", "DELETED"]
        .iter()
        .map(|t| {
            metric(
                m,
                &format!(r#"r8s_reflector_events_total{{resource="v1/pods",encoding="{encoding}",type="{t}"}}"#),
            )
        })
        .sum()
}

const NODES: usize = 10_000;

/// (b) kubelet-style watchers at 1,000 writes/s over the nodes' pods.
async fn kubelets() {
    // Pod 2k runs on node k: 20,000 pods, 10,000 of them on the 10,000 nodes.
    let setup = Setup::start(&[
        "--pods",
        &(2 * NODES).to_string(),
        "--namespaces",
        &NAMESPACES.to_string(),
        "--nodes",
        &NODES.to_string(),
    ])
    .await;
    let enc0 = metric(
        &setup.metrics().await,
        r#"r8s_watch_encodings_total{encoding="json"}"#,
    );
    let ev0 = upstream_events(&setup.metrics().await);
    println!(
        "(b) {} pods, {NODES} nodes running one each; writes spread evenly over the pods of the first 1,000 nodes.",
        2 * NODES
    );
    println!();
    println!("| kubelet watchers (HTTP/1.1) | {DELIVER_COLUMNS}");
    println!("|---|{}", "---|".repeat(12));
    let tally = Arc::new(Tally::default());
    let mut open = Vec::new();
    for target in [0, 1_000, 5_000, NODES] {
        let rv = setup.rv().await;
        let paths = (open.len()..target)
            .map(|n| {
                format!(
                    "/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&fieldSelector=spec.nodeName%3Dnode-{n:02}"
                )
            })
            .collect();
        let mut new = open_watchers(&setup, paths, 10, &tally, Transport::H1).await;
        open.append(&mut new);
        // Each write concerns one node of the first 1,000 (each has its
        // watcher from the second step on): what grows is only the number
        // of watchers no write concerns.
        let row = deliver(
            &setup,
            &tally,
            1_000.0,
            Expect::NodesBelow(target),
            move || {
                let i = 2 * fastrand::usize(..1_000);
                format!("/api/v1/namespaces/ns-{}/pods/pod-{i:05}", i % NAMESPACES)
            },
        )
        .await;
        println!("| {target} | {row} |");
    }
    let m = setup.metrics().await;
    let enc = metric(&m, r#"r8s_watch_encodings_total{encoding="json"}"#) - enc0;
    let ev = upstream_events(&m) - ev0;
    println!();
    println!(
        "(b) encodings: {enc} for {ev} upstream events = {:.3} per event, with up to {NODES} watchers",
        enc / ev.max(1.0)
    );
}

/// kube-apiserver's cacher keeps 75 s of events: at 100 writes/s, 7,500.
const HISTORY_75S: usize = 7_500;
const UPSTREAM_PODS: usize = 10_000;

/// (c) What an upstream event costs r8s with no watchers (CPU per event at
/// 1,000 writes/s), and what a 75 s history at 100 writes/s holds (RSS
/// against the JSON it caches). r8s caches pods in JSON only.
async fn upstream_cost() {
    let env = [
        ("R8S_CACHE__ENCODINGS", r#"["json"]"#.to_string()),
        ("R8S_WATCH__HISTORY_EVENTS", HISTORY_75S.to_string()),
    ];
    let setup = Setup::start_with(
        &[
            "--pods",
            &UPSTREAM_PODS.to_string(),
            "--namespaces",
            &NAMESPACES.to_string(),
        ],
        &env,
    )
    .await;
    let pick = || {
        let i = fastrand::usize(..UPSTREAM_PODS);
        format!("/api/v1/namespaces/ns-{}/pods/pod-{i:05}", i % NAMESPACES)
    };
    println!(
        "(c) {UPSTREAM_PODS} pods, JSON only, no watchers; `watch.history_events` {HISTORY_75S} (75 s at 100 writes/s)."
    );
    println!();
    println!("| watchers | {DELIVER_COLUMNS}");
    println!("|---|{}", "---|".repeat(12));
    let synced = rss_kib(setup.pid()) as f64 * 1024.0;
    let tally = Arc::new(Tally::default());
    let row = deliver(&setup, &tally, 1_000.0, Expect::EachWrite(0), pick).await;
    println!("| 0 | {row} |");
    let churned = rss_kib(setup.pid()) as f64 * 1024.0;
    // Memory: 80 s at 100 writes/s, so the log holds only those writes.
    let w = Writer::start(setup.sim.clone(), 100.0, pick);
    tokio::time::sleep(Duration::from_secs(80)).await;
    w.stop().await;
    settled(&setup, &tally, Some(0)).await;
    let m = setup.metrics().await;
    let store = r#"{resource="v1/pods",encoding="json"}"#;
    let log_events = metric(&m, &format!("r8s_watch_log_events{store}"));
    let log_bytes = metric(&m, &format!("r8s_watch_log_bytes{store}"));
    let cache_bytes = metric(&m, &format!("r8s_cache_bytes{store}"));
    // The JSON cached: the current pods (their bytes as a GET serves them)
    // and the older versions the log keeps (one per event, about the same size).
    let list = fetch(
        &setup.c,
        &format!("http://{}/api/v1/pods?resourceVersion=0", setup.r8s),
    )
    .await;
    let per_pod = list.len() as f64 / UPSTREAM_PODS as f64 + 30.0;
    let json = per_pod * (UPSTREAM_PODS as f64 + log_events);
    let rss = rss_kib(setup.pid()) as f64 * 1024.0;
    let mib = |b: f64| b / (1024.0 * 1024.0);
    println!();
    println!(
        "| pods | log events | JSON cached (pods + log) | r8s_cache_bytes | r8s_watch_log_bytes | log bytes per event | r8s RSS: synced, no log | after 1,000 writes/s | with the 75 s log | RSS / JSON cached |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    println!(
        "| {UPSTREAM_PODS} | {log_events} | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.0} B (pod ~{per_pod:.0} B) | {:.1} MiB | {:.1} MiB | {:.1} MiB | {:.2} |",
        mib(json),
        mib(cache_bytes),
        mib(log_bytes),
        log_bytes / log_events.max(1.0),
        mib(synced),
        mib(churned),
        mib(rss),
        rss / json
    );
}

/// Watch attempts over HTTP/2 (100 per connection): the answers, and the
/// open watches' bodies (kept, unread, so their watches stay open).
#[derive(Default)]
struct Attempts {
    open: Vec<hyper::body::Incoming>,
    refused: usize,
    /// Refusals carrying `Retry-After: 1`.
    retry_after: usize,
    other: usize,
}

async fn h2_attempts(addr: SocketAddr, path: String, n: usize) -> Attempts {
    let io = hyper_util::rt::TokioIo::new(TcpStream::connect(addr).await.expect("connect"));
    let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
        .await
        .expect("h2 handshake");
    tokio::spawn(conn);
    let mut a = Attempts::default();
    for _ in 0..n {
        let mut send = send.clone();
        if send.ready().await.is_err() {
            a.other += 1;
            continue;
        }
        let req = http::Request::get(format!("http://{addr}{path}"))
            .body(http_body_util::Empty::<Bytes>::new())
            .unwrap();
        match send.send_request(req).await {
            Ok(r) if r.status() == 200 => a.open.push(r.into_body()),
            Ok(r) if r.status() == 429 => {
                a.refused += 1;
                if r.headers().get("retry-after").is_some_and(|v| v == "1") {
                    a.retry_after += 1;
                }
            }
            _ => a.other += 1,
        }
    }
    a
}

/// Overload: twice `watch.max_watchers` watch attempts (`OVERLOAD_WATCHERS`,
/// default 100,000) over HTTP/2: the excess get 429 with `Retry-After`,
/// r8s stays up and serves; RSS per open watcher.
async fn overload() {
    let max: usize = std::env::var("OVERLOAD_WATCHERS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(100_000);
    let setup = Setup::start_with(
        &[
            "--pods",
            &ALL_PODS.to_string(),
            "--namespaces",
            &NAMESPACES.to_string(),
        ],
        &[("R8S_WATCH__MAX_WATCHERS", max.to_string())],
    )
    .await;
    let _ = fetch(
        &setup.c,
        &format!("http://{}/api/v1/pods?resourceVersion=0", setup.r8s),
    )
    .await;
    let before = rss_kib(setup.pid());
    let path = watch_path(setup.rv().await);
    let attempts = 2 * max;
    let t0 = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..attempts.div_ceil(PER_H2_CONN) {
        tasks.spawn(h2_attempts(setup.r8s, path.clone(), PER_H2_CONN));
    }
    let mut all = Attempts::default();
    while let Some(a) = tasks.join_next().await {
        let a = a.unwrap();
        all.open.extend(a.open);
        all.refused += a.refused;
        all.retry_after += a.retry_after;
        all.other += a.other;
    }
    let took = t0.elapsed();
    tokio::time::sleep(Duration::from_secs(3)).await;
    let after = rss_kib(setup.pid());
    let watchers = metric(&setup.metrics().await, WATCHERS) as usize;
    let list = fetch(
        &setup.c,
        &format!("http://{}/api/v1/pods?resourceVersion=0", setup.r8s),
    )
    .await;
    let served = serde_json::from_slice::<serde_json::Value>(&list).unwrap()["items"]
        .as_array()
        .map_or(0, |i| i.len());
    let per = after.saturating_sub(before) as f64 * 1024.0 / all.open.len().max(1) as f64;
    println!(
        "overload: {attempts} watch attempts over HTTP/2 in {took:.1?}, watch.max_watchers = {max}"
    );
    println!(
        "| attempts | open (r8s_watchers) | 429 (with Retry-After: 1) | other | RSS before | RSS after | per open watcher | a list meanwhile |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    println!(
        "| {attempts} | {} ({watchers}) | {} ({}) | {} | {:.1} MiB | {:.1} MiB | {per:.0} bytes | {served} of {ALL_PODS} pods |",
        all.open.len(),
        all.refused,
        all.retry_after,
        all.other,
        before as f64 / 1024.0,
        after as f64 / 1024.0,
    );
    drop(all);
}

#[tokio::main]
async fn main() {
    // `cargo bench --bench watch -- all` (or `kubelets`, `upstream`) runs one part;
    // `-- overload` runs only the watch.max_watchers overload;
    // `-- steps=h2:1000,h2:2500` runs only those delivery steps of (a).
    let args: Vec<String> = std::env::args().collect();
    let which = if args.iter().any(|a| a == "all") {
        "all"
    } else if args.iter().any(|a| a == "overload") {
        return overload().await;
    } else if args.iter().any(|a| a == "kubelets") {
        "kubelets"
    } else if args.iter().any(|a| a == "upstream") {
        "upstream"
    } else {
        ""
    };
    println!(
        "machine: {} cores; r8s: {BIN}",
        std::thread::available_parallelism().map_or(0, |n| n.get())
    );
    if let Some(steps) = args.iter().find_map(|a| parse_steps(a)) {
        return all_pods(Some(steps)).await;
    }
    if which.is_empty() || which == "all" {
        all_pods(None).await;
    }
    if which.is_empty() || which == "kubelets" {
        kubelets().await;
    }
    if which.is_empty() || which == "upstream" {
        upstream_cost().await;
    }
}
