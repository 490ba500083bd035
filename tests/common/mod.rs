//! Test harness: the sim and r8s in-process on 127.0.0.1:0, a raw HTTP client,
//! and kubectl with a throwaway kubeconfig and cache.
#![allow(dead_code)]

use std::net::SocketAddr;
use std::process::Output;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http::{HeaderMap, Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use r8s::config::Config;
use r8s::shutdown::{self, Trigger};
use r8s::sim::{self, SimConfig, SimHandle};
use tokio::net::TcpListener;
use tokio::task::JoinHandle;

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
pub async fn start_r8s_config(mut config: Config) -> R8s {
    let resources = config.cache.resources.clone();
    config.cache.wait_for_resource_version_seconds = 0.2;
    config.upstream.connect_timeout_seconds = 2.0;
    config.shutdown.grace_seconds = 5;
    let prepared = r8s::prepare(config).await.unwrap();
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
    if !resources.is_empty() {
        let deadline = Instant::now() + Duration::from_secs(20);
        while get(&format!("{}/readyz", r.admin_url())).await.status != StatusCode::OK {
            assert!(Instant::now() < deadline, "caches did not sync");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    r
}

/// A response, read whole.
#[derive(Debug)]
pub struct Resp {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Resp {
    pub fn json(&self) -> serde_json::Value {
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

/// One request, body read to the end (bounded by `limit`).
pub async fn send(
    method: &str,
    url: &str,
    headers: &[(&str, &str)],
    body: Option<&str>,
    limit: Duration,
) -> Resp {
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
        .unwrap_or_else(|_| panic!("{method} {url}: no response within {limit:?}"))
        .unwrap_or_else(|e| panic!("{method} {url}: {e}"));
    let (parts, body) = resp.into_parts();
    let mut collected = Vec::new();
    let deadline = Instant::now() + limit;
    let mut body = body;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        match tokio::time::timeout(left, body.frame()).await {
            Ok(Some(Ok(f))) => {
                if let Ok(d) = f.into_data() {
                    collected.extend_from_slice(&d);
                }
            }
            Ok(Some(Err(e))) => panic!("{method} {url}: body error {e}"),
            Ok(None) | Err(_) => break,
        }
    }
    Resp {
        status: parts.status,
        headers: parts.headers,
        body: Bytes::from(collected),
    }
}

pub async fn get(url: &str) -> Resp {
    send("GET", url, &[], None, Duration::from_secs(10)).await
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
