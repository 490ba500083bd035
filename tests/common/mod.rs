//! Test harness: the sim and r8s in-process on 127.0.0.1:0, a raw HTTP client,
//! and kubectl with a throwaway kubeconfig and cache.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Output;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use r8s::config::Config;
use r8s::shutdown::{self, Trigger};
use r8s_sim::{self as sim, SimConfig, SimHandle};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

pub mod answers;
pub mod auth;
pub mod crd;
pub mod forge;
pub mod kube121;
pub mod kube136;
pub mod mixed;
pub mod proxy;
pub mod wire;

#[allow(unused_imports)]
pub use auth::AuthFiles;

/// A sim for tests: no churn unless asked, short waits.
pub fn sim_config() -> SimConfig {
    SimConfig {
        pods: 40,
        namespaces: 3,
        future_rv_wait: Duration::from_millis(300),
        ..SimConfig::default()
    }
}

pub async fn start_sim(cfg: SimConfig) -> SimHandle {
    let l = TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(cfg, l).await.unwrap()
}

/// A running r8s.
pub struct R8s {
    pub addr: SocketAddr,
    pub admin: SocketAddr,
    trigger: Trigger,
    task: JoinHandle<()>,
}

impl R8s {
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }
    pub fn admin_url(&self) -> String {
        format!("http://{}", self.admin)
    }
    pub async fn stop(self) {
        self.trigger.fire();
        let _ = tokio::time::timeout(Duration::from_secs(10), self.task).await;
    }
}

pub async fn start_r8s(upstreams: Vec<String>) -> R8s {
    start_r8s_caching(upstreams, &[]).await
}

/// The resources the cache tests cache.
pub const CACHED: &[&str] = &[
    "pods",
    "v1/configmaps",
    "apps/v1/deployments",
    "example.r8s.dev/v1/widgets",
    "v1/nodes",
    "v1/namespaces",
];

/// r8s caching `resources`, ready (every cache synced) when this returns.
pub async fn start_r8s_caching(upstreams: Vec<String>, resources: &[&str]) -> R8s {
    let mut config = Config::default();
    config.upstream.servers = upstreams;
    config.cache.resources = resources.iter().map(|s| s.to_string()).collect();
    start_r8s_config(config).await
}

/// r8s with this configuration (test defaults for timeouts), ready when it returns.
pub async fn start_r8s_config(config: Config) -> R8s {
    R8sBuilder::from_config(config).start().await
}

/// An r8s to start in front of an upstream: `r8s_in_front_of(url)`, then
/// what it caches and any other setting, then [`R8sBuilder::start`].
pub struct R8sBuilder {
    config: Config,
    ready: bool,
}

/// An r8s in front of `upstream` (a URL), caching nothing yet.
pub fn r8s_in_front_of(upstream: impl Into<String>) -> R8sBuilder {
    let mut config = Config::default();
    config.upstream.servers = vec![upstream.into()];
    R8sBuilder::from_config(config)
}

impl R8sBuilder {
    /// `config` as given, with the tests' shorter waits.
    pub fn from_config(mut config: Config) -> Self {
        config.cache.wait_for_resource_version_seconds = 0.2;
        // A consistent GET waits for the cache as long as a LIST does: a
        // verdict of "hit" must not depend on how busy the machine is.
        config.read.consistent_get_wait_seconds = config.read.prove_timeout_seconds;
        config.upstream.connect_timeout_seconds = 2.0;
        config.shutdown.grace_seconds = 5;
        R8sBuilder {
            config,
            ready: true,
        }
    }

    /// Caches these `cache.resources` entries.
    pub fn caching(mut self, resources: &[&str]) -> Self {
        self.config.cache.resources = resources.iter().map(|s| s.to_string()).collect();
        self
    }

    /// Any other setting.
    pub fn with(mut self, change: impl FnOnce(&mut Config)) -> Self {
        change(&mut self.config);
        self
    }

    /// Returns without waiting for `/readyz` (an upstream that is down).
    pub fn unready(mut self) -> Self {
        self.ready = false;
        self
    }

    /// The configuration it will start with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// Starts it on 127.0.0.1:0 (API and admin); once every cache has
    /// synced, unless [`R8sBuilder::unready`].
    pub async fn start(self) -> R8s {
        let wait = self.ready && !self.config.cache.resources.is_empty();
        let prepared = r8s::prepare(self.config).await.unwrap();
        let api = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let admin = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let (addr, admin_addr) = (api.local_addr().unwrap(), admin.local_addr().unwrap());
        let (trigger, signal) = shutdown::channel();
        let task = tokio::spawn(prepared.run(r8s::Listeners { api, admin }, signal));
        let r = R8s {
            addr,
            admin: admin_addr,
            trigger,
            task,
        };
        if wait {
            let guard = HangGuard::new();
            while get(&format!("{}/readyz", r.admin_url())).await.status != StatusCode::OK {
                guard.check(|| "caches did not sync".into());
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
        r
    }
}

/// A response, read whole (or until its limit passed: `complete` says which).
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
    /// Whether the body ended before the limit (a watch may be cut by it).
    pub complete: bool,
}

impl Resp {
    /// What a client sees of a connection the server refused (its TLS
    /// handshake failed): status 495 (no HTTP answer came), the reason.
    pub fn refused(why: &str) -> Resp {
        Resp {
            status: StatusCode::from_u16(495).unwrap(),
            headers: HeaderMap::new(),
            body: Bytes::from(why.to_string()),
            complete: true,
        }
    }

    /// What a client sees of a request never answered within its limit:
    /// status 599 (no HTTP answer came), what was sent.
    pub fn hung(what: &str) -> Resp {
        Resp {
            status: StatusCode::from_u16(599).unwrap(),
            ..Resp::refused(what)
        }
    }

    pub fn json(&self) -> serde_json::Value {
        assert!(
            self.complete,
            "the body was cut by the request's time limit after {} bytes (a slow server, or a \
             machine too busy): {}",
            self.body.len(),
            String::from_utf8_lossy(&self.body[..self.body.len().min(300)])
        );
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn client() -> Client<HttpConnector, Full<Bytes>> {
    Client::builder(TokioExecutor::new()).build(HttpConnector::new())
}

/// One request, body read to the end. Its only bound is [`HANG`]: a
/// response that never ends is a hang, whatever the machine's speed.
pub async fn send(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    let limit = HANG;
    let mut b = Request::builder()
        .method(Method::from_bytes(method.as_bytes()).unwrap())
        .uri(url);
    for (k, v) in headers {
        b = b.header(*k, *v);
    }
    let req = b
        .body(Full::new(Bytes::from(body.unwrap_or("").to_string())))
        .unwrap();
    let resp = tokio::time::timeout(limit, client().request(req))
        .await
        .unwrap_or_else(|_| panic!("{method} {url}: no response within {limit:?} (hung)"))
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    read_response(resp, &format!("{method} {url}"), limit).await
}

/// The same GET of `path` to r8s (at `r8s`, a hit and a 200, asserted) and
/// to the sim (at `sim`, a 200): both answers, to compare.
pub async fn from_both(r8s: &str, sim: &str, path: &str, headers: &[(&str, &str)]) -> (Resp, Resp) {
    let ours = send("GET", &format!("{r8s}{path}"), headers, None).await;
    let theirs = send("GET", &format!("{sim}{path}"), headers, None).await;
    assert_eq!(ours.status, 200, "{path} {headers:?}: {}", ours.text());
    assert_eq!(ours.headers["x-r8s-cache"], "hit", "{path} {headers:?}");
    assert_eq!(theirs.status, 200, "{path} {headers:?}");
    (ours, theirs)
}

/// `resp` read to its end, or until `limit` from now (`complete` says which).
pub async fn read_response(
    resp: http::Response<hyper::body::Incoming>,
    what: &str,
    limit: Duration,
) -> Resp {
    let (parts, body) = resp.into_parts();
    let mut collected = Vec::new();
    let deadline = Instant::now() + limit;
    let mut body = body;
    let complete = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.frame()).await {
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    collected.extend_from_slice(&d);
                }
            }
            Ok(Some(Err(e))) => panic!("{what}: body error {e}"),
            Ok(None) => break true,
            Err(_) => break false,
        }
    };
    Resp {
        status: parts.status,
        headers: parts.headers,
        body: Bytes::from(collected),
        complete,
    }
}

pub async fn get(url: &str) -> Resp {
    send("GET", url, &[], None).await
}

/// Runs kubectl against `server` with an empty kubeconfig and a private cache dir.
pub async fn kubectl(
    server: &str,
    args: &[&str],
    stdin: Option<&str>,
    timeout: Duration,
) -> Output {
    let dir = std::env::temp_dir().join(format!("r8s-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    if !kubeconfig.exists() {
        std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    }
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.arg("--server")
        .arg(server)
        .arg("--cache-dir")
        .arg(dir.join("cache"));
    cmd.args(args);
    cmd.env("KUBECONFIG", &kubeconfig).env("HOME", &dir);
    cmd.stdin(if stdin.is_some() {
        std::process::Stdio::piped()
    } else {
        std::process::Stdio::null()
    });
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn().expect("kubectl is on the PATH");
    if let Some(input) = stdin {
        use tokio::io::AsyncWriteExt;
        let mut s = child.stdin.take().unwrap();
        s.write_all(input.as_bytes()).await.unwrap();
        drop(s);
    }
    let pid = child.id();
    match tokio::time::timeout(timeout, child.wait_with_output()).await {
        Ok(o) => o.unwrap(),
        Err(_) => panic!("kubectl {args:?} (pid {pid:?}) did not finish in {timeout:?}"),
    }
}

/// Runs kubectl for `dur` then interrupts it; returns what it printed (for `-w`, `logs -f`).
pub async fn kubectl_for(server: &str, args: &[&str], dur: Duration) -> String {
    let dir = std::env::temp_dir().join(format!("r8s-kubectl-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, "apiVersion: v1\nkind: Config\n").unwrap();
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.arg("--server")
        .arg(server)
        .arg("--cache-dir")
        .arg(dir.join("cache"))
        .args(args);
    cmd.env("KUBECONFIG", &kubeconfig).env("HOME", &dir);
    cmd.stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .stdin(std::process::Stdio::null());
    cmd.kill_on_drop(true);
    let mut child = cmd.spawn().expect("kubectl is on the PATH");
    let mut out = child.stdout.take().unwrap();
    let mut buf = Vec::new();
    let _ = tokio::time::timeout(
        dur,
        tokio::io::AsyncReadExt::read_to_end(&mut out, &mut buf),
    )
    .await;
    let _ = child.kill().await;
    String::from_utf8_lossy(&buf).into_owned()
}

/// A client's view of one watch stream, applied event by event and checked
/// the way an informer relies on it: versions never go back, no duplicates,
/// ADDED only for what it lacks, MODIFIED/DELETED only for what it has.
#[derive(Debug, Default, Clone)]
pub struct Replay {
    /// `namespace/name` → resourceVersion.
    pub state: std::collections::BTreeMap<String, u64>,
    /// The last version seen (event or bookmark).
    pub last: u64,
    /// Events applied (bookmarks excluded).
    pub events: usize,
    /// Bookmarks seen.
    pub bookmarks: usize,
    /// Whether the initial-events-end bookmark came.
    pub initial_end: bool,
    /// An ERROR event, if the stream ended with one.
    pub error: Option<serde_json::Value>,
    /// In the initial events of a streaming list (versions are arbitrary there).
    pub initial: bool,
    last_type: String,
    /// The last few events, for failure messages.
    recent: std::collections::VecDeque<String>,
}

impl Replay {
    /// Starts from a listed state at `rv`.
    pub fn from_list(list: &serde_json::Value) -> Self {
        let mut r = Replay::default();
        for it in list["items"].as_array().unwrap() {
            r.state.insert(key_of(it), rv_of(it));
        }
        r.last = list["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        r
    }

    /// Starts a streaming list (`sendInitialEvents=true`).
    pub fn streaming() -> Self {
        Replay {
            initial: true,
            ..Default::default()
        }
    }

    /// Applies one watch event; panics (naming `who`) on anything an informer could not trust.
    pub fn apply(&mut self, e: &serde_json::Value, who: &str) {
        let t = e["type"].as_str().unwrap_or("?");
        if t == "ERROR" {
            self.error = Some(e["object"].clone());
            return;
        }
        let rv = rv_of(&e["object"]);
        if t == "BOOKMARK" {
            let end = e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true";
            if end {
                assert!(
                    self.initial,
                    "{who}: initial-events-end outside a streaming list"
                );
                self.initial = false;
                self.initial_end = true;
            } else {
                assert!(!self.initial, "{who}: bookmark among the initial events");
                assert!(rv >= self.last, "{who}: bookmark {rv} after {}", self.last);
            }
            self.last = self.last.max(rv);
            self.bookmarks += 1;
            return;
        }
        let k = key_of(&e["object"]);
        if self.recent.len() == 6 {
            self.recent.pop_front();
        }
        self.recent.push_back(format!("{t} {k} {rv}"));
        if self.initial {
            assert_eq!(t, "ADDED", "{who}: initial events are ADDED");
            assert!(
                self.state.insert(k.clone(), rv).is_none(),
                "{who}: {k} twice"
            );
            self.last = self.last.max(rv);
            self.events += 1;
            return;
        }
        // The deletes a relist finds carry the relist's version (when they
        // happened is unknown), which the relist's last change may share.
        let relist_delete = t == "DELETED" && rv == self.last;
        assert!(
            rv > self.last || relist_delete,
            "{who}: {t} {k} at {rv} after {} (versions must increase); recent: {:?}",
            self.last,
            self.recent
        );
        match t {
            "ADDED" => assert!(
                self.state.insert(k.clone(), rv).is_none(),
                "{who}: ADDED {k} it already had"
            ),
            "MODIFIED" => assert!(
                self.state.insert(k.clone(), rv).is_some(),
                "{who}: MODIFIED {k} it never had"
            ),
            "DELETED" => assert!(
                self.state.remove(&k).is_some(),
                "{who}: DELETED {k} it never had"
            ),
            other => panic!("{who}: unexpected event type {other}"),
        }
        self.last = rv;
        self.last_type = t.to_string();
        self.events += 1;
    }
}

/// `namespace/name` of an object.
pub fn key_of(o: &serde_json::Value) -> String {
    let m = &o["metadata"];
    format!(
        "{}/{}",
        m["namespace"].as_str().unwrap_or(""),
        m["name"].as_str().unwrap_or("")
    )
}

/// `metadata.resourceVersion` as a number.
pub fn rv_of(o: &serde_json::Value) -> u64 {
    o["metadata"]["resourceVersion"]
        .as_str()
        .and_then(|s| s.parse().ok())
        .unwrap_or_else(|| panic!("no resourceVersion: {o}"))
}

/// Reads a watch at `url` as it streams, applying each event to `replay`,
/// until the server ends it (or `limit` passes). Returns the replay and the
/// `x-r8s-cache` header.
pub async fn watch_replay(
    url: &str,
    replay: Replay,
    limit: Duration,
    who: &str,
) -> (Replay, String) {
    watch_replay_stalled(url, replay, limit, who, None, None).await
}

/// [`watch_replay`] by a client that, with `stall`, reads nothing after the
/// response head until `stall` is set to true (with a 4 KiB socket receive
/// buffer, so the server feels it); with `until`, it also stops once it has
/// seen the version `until` is set to (0: not yet known), however long the
/// watch would have gone on.
pub async fn watch_replay_stalled(
    url: &str,
    mut replay: Replay,
    limit: Duration,
    who: &str,
    stall: Option<tokio::sync::watch::Receiver<bool>>,
    mut until: Option<tokio::sync::watch::Receiver<u64>>,
) -> (Replay, String) {
    let mut conn = HttpConnector::new();
    if stall.is_some() {
        conn.set_recv_buffer_size(Some(4096));
    }
    let client: Client<HttpConnector, Full<Bytes>> =
        Client::builder(TokioExecutor::new()).build(conn);
    let req = Request::get(url).body(Full::new(Bytes::new())).unwrap();
    let resp = tokio::time::timeout(HANG, client.request(req))
        .await
        .unwrap_or_else(|_| panic!("{who}: no response"))
        .unwrap_or_else(|e| panic!("{who}: {e}"));
    assert_eq!(resp.status(), StatusCode::OK, "{who}");
    let served = resp
        .headers()
        .get("x-r8s-cache")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    let mut body = resp.into_body();
    if let Some(mut resume) = stall {
        let _ = resume.wait_for(|go| *go).await;
    }
    let mut buf: Vec<u8> = Vec::new();
    let deadline = Instant::now() + limit;
    let reached = |until: &Option<tokio::sync::watch::Receiver<u64>>, last: u64| {
        until
            .as_ref()
            .is_some_and(|u| *u.borrow() > 0 && last >= *u.borrow())
    };
    loop {
        if reached(&until, replay.last) {
            break;
        }
        let left = deadline.saturating_duration_since(Instant::now());
        let frame = tokio::time::timeout(left, body.frame());
        let frame = match until.as_mut() {
            Some(u) => tokio::select! {
                f = frame => f,
                changed = u.changed() => {
                    if changed.is_err() {
                        until = None;
                    }
                    continue;
                }
            },
            None => frame.await,
        };
        match frame {
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    buf.extend_from_slice(&d);
                    while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                        let line: Vec<u8> = buf.drain(..=nl).collect();
                        let e: LightEvent = serde_json::from_slice(&line).unwrap_or_else(|err| {
                            panic!(
                                "{who}: bad line ({err}): {}",
                                String::from_utf8_lossy(&line)
                            )
                        });
                        replay.apply(&e.into_value(), who);
                    }
                }
            }
            Ok(Some(Err(e))) => panic!("{who}: stream broke: {e}"),
            Ok(None) => break,
            Err(_) => panic!("{who}: the server did not end the watch within {limit:?}"),
        }
    }
    assert!(buf.is_empty(), "{who}: a partial line at the end");
    (replay, served)
}

/// The sim's truth for a collection at exactly `rv`: `namespace/name` → resourceVersion.
pub async fn truth_at(
    sim_url: &str,
    collection: &str,
    selector: &str,
    rv: u64,
) -> std::collections::BTreeMap<String, u64> {
    let r = get(&format!(
        "{sim_url}{collection}?resourceVersion={rv}&resourceVersionMatch=Exact{selector}"
    ))
    .await;
    assert_eq!(r.status, 200, "truth at {rv}: {}", r.text());
    r.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| (key_of(it), rv_of(it)))
        .collect()
}

/// A client following one watch at `url`; its replay (which panics on any
/// version going back, duplicate or gap an informer could not trust) is
/// shared so the test can see how far it got while it runs.
pub fn follow(url: String, replay: Replay, who: String) -> (Arc<Mutex<Replay>>, JoinHandle<()>) {
    let shared = Arc::new(Mutex::new(replay));
    let mine = shared.clone();
    let task = tokio::spawn(async move {
        let req = http::Request::get(url)
            .body(Full::new(Bytes::new()))
            .unwrap();
        let resp = client()
            .request(req)
            .await
            .unwrap_or_else(|e| panic!("{who}: {e}"));
        assert_eq!(resp.status(), 200, "{who}");
        assert_eq!(
            resp.headers()["x-r8s-cache"],
            "hit",
            "{who}: served from the cache"
        );
        let mut body = resp.into_body();
        let mut buf: Vec<u8> = Vec::new();
        while let Some(frame) = body.frame().await {
            let Ok(data) = frame
                .unwrap_or_else(|e| panic!("{who}: the watch broke: {e}"))
                .into_data()
            else {
                continue;
            };
            buf.extend_from_slice(&data);
            while let Some(nl) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=nl).collect();
                let e: serde_json::Value = serde_json::from_slice(&line).unwrap();
                mine.lock().unwrap().apply(&e, &who);
            }
        }
    });
    (shared, task)
}

/// How an informer starts watching `collection` (with selector query
/// `sel`) at `target`: client-go's classic start (`streaming` false: a list
/// at RV=0, then a watch from its version) or its streaming list (from
/// "any" version). Returns the replay to start from and the watch query.
pub async fn informer_start(
    target: &str,
    collection: &str,
    sel: &str,
    streaming: bool,
    who: &str,
) -> (Replay, String) {
    if streaming {
        return (
            Replay::streaming(),
            "sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0".into(),
        );
    }
    // Many informers start at once (a thousand 4.5 MB lists in the fan-out
    // test): on a slow or busy machine one may take well over the 10 s `get`
    // allows. The limit only guards against a hang; how fast lists are is
    // measured in benches/, not here.
    let url = format!("{target}{collection}?resourceVersion=0{sel}");
    let list = send("GET", &url, &[], None).await;
    assert_eq!(list.status, 200, "{who}: {}", list.text());
    let r = Replay::from_list(&list.json());
    let q = format!("resourceVersion={}", r.last);
    (r, q)
}

/// One number from a Prometheus text exposition (`name{labels}` exactly as
/// written), or `None` when the series is not there.
pub fn metric(text: &str, series: &str) -> Option<f64> {
    text.lines().find_map(|l| {
        l.strip_prefix(series)
            .filter(|rest| rest.starts_with(' '))
            .and_then(|rest| rest.trim().parse().ok())
    })
}

/// The number of a series that must exist (r8s registers its series at 0):
/// a renamed or missing series fails the test instead of reading as 0.
/// The hang guard of a wait with [`eventually`]: what no machine, however
/// slow or busy, takes for a step the product does in seconds.
pub const HANG: Duration = Duration::from_secs(120);

/// Waits until `check` returns `Some`, asking every 100 ms, and returns
/// what it returned. `hang` is a guard against a test that would never end,
/// not a bound the test asserts: set it far beyond what a slow, busy machine
/// takes (the verdict must not depend on the machine's speed). Past it, the
/// test fails saying `what` did not happen.
pub async fn eventually<T, F, Fut>(what: &str, hang: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let guard = HangGuard::of(hang);
    loop {
        if let Some(t) = check().await {
            return t;
        }
        guard.check(|| what.to_string());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

/// A wait loop's hang guard, for loops that [`eventually`] does not fit
/// (they act as they wait, or say what they saw): [`HangGuard::check`]
/// fails the test once [`HANG`] has passed since it was made. Like
/// `eventually`'s, a guard against a test that would never end, never a
/// bound the test asserts.
pub struct HangGuard {
    started: tokio::time::Instant,
    hang: Duration,
}

impl HangGuard {
    /// A guard of [`HANG`] from now.
    pub fn new() -> Self {
        Self::of(HANG)
    }

    /// A guard of `hang` from now (set far beyond what a slow, busy machine takes).
    pub fn of(hang: Duration) -> Self {
        HangGuard {
            started: tokio::time::Instant::now(),
            hang,
        }
    }

    /// Fails the test if it has waited past its hang, saying `why` (made
    /// only then: what it still waits for, and what it saw). The suite's
    /// one place that fails a test on the wall clock, and a guard against a
    /// hang, not a verdict.
    pub fn check(&self, why: impl FnOnce() -> String) {
        if self.started.elapsed() >= self.hang {
            panic!(
                "{}: not after {:?} (a hang guard, far beyond what it takes)",
                why(),
                self.hang
            );
        }
    }

    /// What is left before the guard fails: the limit for one read in the loop.
    pub fn left(&self) -> Duration {
        self.hang.saturating_sub(self.started.elapsed())
    }
}

impl Default for HangGuard {
    fn default() -> Self {
        Self::new()
    }
}

/// The value of `series` in the text exposition at `url` (`/metrics`), 0 if absent.
pub async fn scrape(url: &str, series: &str) -> f64 {
    metric(&get(url).await.text(), series).unwrap_or(0.0)
}

pub fn sample(text: &str, series: &str) -> f64 {
    metric(text, series).unwrap_or_else(|| {
        let family = series.split('{').next().unwrap_or(series);
        let seen: Vec<&str> = text.lines().filter(|l| l.starts_with(family)).collect();
        panic!("no series {series} in the exposition; of {family}: {seen:?}")
    })
}

/// The parts of a watch event a replay needs, parsed without building the
/// whole object (a thousand streams parse a lot of JSON).
#[derive(serde::Deserialize)]
struct LightEvent {
    #[serde(rename = "type")]
    kind: String,
    object: LightObject,
}

#[derive(serde::Deserialize)]
struct LightObject {
    #[serde(default)]
    metadata: serde_json::Map<String, serde_json::Value>,
    #[serde(default)]
    code: Option<u16>,
    #[serde(default)]
    message: Option<String>,
    #[serde(default)]
    reason: Option<String>,
}

impl LightEvent {
    fn into_value(self) -> serde_json::Value {
        serde_json::json!({
            "type": self.kind,
            "object": {
                "metadata": self.object.metadata,
                "code": self.object.code,
                "message": self.object.message,
                "reason": self.object.reason,
            }
        })
    }
}

/// The objects of a YAML stream as JSON, decoded by kubectl without a server
/// (`--local` asks no apiserver, whatever the kind; removing an annotation
/// nobody set changes nothing, it is only the way to have kubectl print).
pub fn decode_yaml(yaml: &str) -> Vec<serde_json::Value> {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let file = std::env::temp_dir().join(format!("r8s-yaml-{}-{n}.yaml", std::process::id()));
    std::fs::write(&file, yaml).unwrap();
    let out = std::process::Command::new("kubectl")
        .args(["annotate", "--local", "-o", "json", "-f"])
        .arg(&file)
        .arg("r8s.dev/none-")
        .env("KUBECONFIG", "/dev/null")
        .output()
        .expect("kubectl is on the PATH");
    let _ = std::fs::remove_file(&file);
    assert!(
        out.status.success(),
        "kubectl could not decode the manifests: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::Deserializer::from_slice(&out.stdout)
        .into_iter::<serde_json::Value>()
        .map(|v| v.expect("kubectl prints JSON"))
        .collect()
}

/// `s` percent-encoded for a query parameter's value.
pub fn query_escape(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' => {
                char::from(b).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}
