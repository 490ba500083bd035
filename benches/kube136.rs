//! Consistent reads through r8s in front of kube-apiserver 1.36 (issue 51,
//! item 6): what the proof costs against a current upstream, which serves
//! its own consistent reads from its watch cache by asking etcd for
//! progress.
//!
//! `KUBE_APISERVER_136_KIT=../shared/tools/kube-apiserver-1.36 cargo bench --bench kube136`
//! (`K136_OBJECTS`, `K136_ROUNDS`, `K136_CHURN` change the defaults: 2,000
//! widgets of ~3 KB, 200 requests per row, 50 writes/s). The kit runs with
//! its own state and ports; r8s (this build) in front of it over TLS with
//! `*`, `read.consistent_lists = "auto"` (and `read.consistent_gets`, "auto"
//! by default: a GET of one object is a row too, issue 55). Each row: the same request
//! straight to the apiserver, through r8s as a consistent read (proved),
//! and through r8s at `resourceVersion=0` (the cache's answer without a
//! proof), one after another, p50 and p99; and how many of r8s's
//! consistent answers were hits. Two resources: `widgets` (written by the
//! churn in its phase) and `gadgets` (never written after seeding: every
//! proof of it needs a probe, as etcd's revision moves on without it).
//! Their CRDs name `.spec.nodeName` selectable: the rows of one node's
//! objects are what a DaemonSet agent watching its node's custom resources
//! asks.

mod common;

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName};
use serde_json::{Value, json};
use tokio::net::TcpStream;

use common::{Proc, env_or, free_port};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const LIST: &str = "limit=500";
const STREAM: &str =
    "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true";

/// The kit, started in a scratch folder; stopped when dropped.
struct Kit {
    dir: PathBuf,
    state: PathBuf,
    port: u16,
    token: String,
    tls: tokio_rustls::TlsConnector,
}

impl Kit {
    fn start(dir: PathBuf) -> Kit {
        let state = std::env::temp_dir().join(format!("r8s-bench-kube136-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&state);
        std::fs::create_dir_all(&state).unwrap();
        let port = free_port();
        let out = Command::new(dir.join("start.sh"))
            .env("STATE_DIR", &state)
            .env("ETCD_DATA", state.join("etcd"))
            .env("ETCD_PORT", free_port().to_string())
            .env("ETCD_PEER_PORT", free_port().to_string())
            .env("API_PORT", port.to_string())
            .env("AUTH_PORT", free_port().to_string())
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let env = std::fs::read_to_string(state.join("pki/tokens.env")).unwrap();
        let token = env
            .split_whitespace()
            .find_map(|w| w.strip_prefix("MODERN_TOKEN_ADMIN="))
            .unwrap()
            .to_string();
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(state.join("pki/ca.crt")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let config = rustls::ClientConfig::builder_with_provider(Arc::new(
            rustls::crypto::ring::default_provider(),
        ))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
        Kit {
            dir,
            state,
            port,
            token,
            tls: tokio_rustls::TlsConnector::from(Arc::new(config)),
        }
    }

    /// One request over a new TLS connection: status, `X-R8s-Cache`, body.
    async fn send(&self, method: &str, path: &str, body: Option<Value>) -> (u16, Value) {
        let tcp = TcpStream::connect(("127.0.0.1", self.port)).await.unwrap();
        let tls = self
            .tls
            .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
            .await
            .unwrap();
        let (mut tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        let ct = if method == "PATCH" {
            "application/merge-patch+json"
        } else {
            "application/json"
        };
        let req = http::Request::builder()
            .method(method)
            .uri(path)
            .header("host", "127.0.0.1")
            .header("authorization", format!("Bearer {}", self.token))
            .header("content-type", ct)
            .body(Full::new(Bytes::from(
                body.map(|b| b.to_string()).unwrap_or_default(),
            )))
            .unwrap();
        let r = tx.send_request(req).await.unwrap();
        let status = r.status().as_u16();
        let b = r.into_body().collect().await.unwrap().to_bytes();
        (status, serde_json::from_slice(&b).unwrap_or(Value::Null))
    }
}

impl Drop for Kit {
    fn drop(&mut self) {
        let _ = Command::new(self.dir.join("stop.sh"))
            .env("STATE_DIR", &self.state)
            .output();
        let _ = std::fs::remove_dir_all(&self.state);
    }
}

/// A reusable connection to `port` (plain HTTP, r8s) or through TLS (the kit).
enum Conn {
    Plain(hyper::client::conn::http1::SendRequest<Full<Bytes>>),
    Tls(hyper::client::conn::http1::SendRequest<Full<Bytes>>, String),
}

async fn connect(port: u16, tls: Option<&Kit>) -> Conn {
    let tcp = TcpStream::connect(("127.0.0.1", port)).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    match tls {
        None => {
            let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
                .await
                .unwrap();
            tokio::spawn(conn);
            Conn::Plain(tx)
        }
        Some(k) => {
            let s = k
                .tls
                .connect(ServerName::try_from("127.0.0.1").unwrap(), tcp)
                .await
                .unwrap();
            let (tx, conn) = hyper::client::conn::http1::handshake(TokioIo::new(s))
                .await
                .unwrap();
            tokio::spawn(conn);
            Conn::Tls(tx, k.token.clone())
        }
    }
}

/// Reads `path` on `conn`: a list whole, a streaming list up to its
/// initial-events-end bookmark. Its latency and `X-R8s-Cache`.
async fn read(conn: &mut Conn, path: &str) -> (Duration, String) {
    let (tx, token) = match conn {
        Conn::Plain(tx) => (tx, None),
        Conn::Tls(tx, t) => (tx, Some(t.clone())),
    };
    let mut b = http::Request::get(path).header("host", "127.0.0.1");
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let start = Instant::now();
    let r = tx
        .send_request(b.body(Full::new(Bytes::new())).unwrap())
        .await
        .unwrap();
    assert_eq!(r.status(), 200, "{path}");
    let hit = r
        .headers()
        .get("x-r8s-cache")
        .map_or("-", |v| v.to_str().unwrap())
        .to_string();
    let mut body = r.into_body();
    let finder = memchr::memmem::Finder::new(b"k8s.io/initial-events-end");
    let mut tail = Vec::new();
    while let Some(f) = body.frame().await {
        if let Ok(d) = f.unwrap().into_data() {
            tail.extend_from_slice(&d);
            if finder.find(&tail).is_some() {
                break;
            }
            let keep = tail.len().saturating_sub(64);
            tail.drain(..keep);
        }
    }
    (start.elapsed(), hit)
}

fn pct(v: &mut [Duration], p: usize) -> Duration {
    v.sort();
    v[(v.len() * p / 100).min(v.len() - 1)]
}

fn ms(d: Duration) -> String {
    format!("{:.1}", d.as_secs_f64() * 1000.0)
}

fn widget(kind: &str, i: usize) -> Value {
    // About the size of a pod as the apiserver serves it (~3 KB).
    json!({"apiVersion": "example.com/v1", "kind": kind,
           "metadata": {"name": format!("{}-{i:05}", kind.to_lowercase()), "namespace": format!("ns-{}", i % 10),
                        "labels": {"app": format!("app-{}", i % 50), "tier": "web"},
                        "annotations": {"note": "x".repeat(600)}},
           "spec": {"size": i, "color": "red", "nodeName": format!("node-{}", i % 50),
                    "notes": "n".repeat(1800)}})
}

fn crd(plural: &str, kind: &str) -> Value {
    json!({"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
           "metadata": {"name": format!("{plural}.example.com")},
           "spec": {"group": "example.com", "scope": "Namespaced",
                    "names": {"plural": plural, "singular": kind.to_lowercase(), "kind": kind},
                    "versions": [{"name": "v1", "served": true, "storage": true,
                                  "schema": {"openAPIV3Schema": {"type": "object", "properties": {
                                      "spec": {"type": "object", "properties": {
                                          "size": {"type": "integer"}, "color": {"type": "string"},
                                          "nodeName": {"type": "string"}, "notes": {"type": "string"}}}}}},
                                  // A DaemonSet agent's objects, by node (KEP-4358).
                                  "selectableFields": [{"jsonPath": ".spec.nodeName"}]}]}})
}

#[tokio::main]
async fn main() {
    let Some(dir) = std::env::var_os("KUBE_APISERVER_136_KIT").map(PathBuf::from) else {
        eprintln!("kube136: skipped (set KUBE_APISERVER_136_KIT to the 1.36 kit's folder)");
        return;
    };
    let objects: usize = env_or("K136_OBJECTS", 2000);
    let rounds: usize = env_or("K136_ROUNDS", 200);
    let churn: u64 = env_or("K136_CHURN", 50);
    let kit = Arc::new(Kit::start(std::fs::canonicalize(&dir).unwrap()));
    for (plural, kind) in [("widgets", "Widget"), ("gadgets", "Gadget")] {
        let (s, _) = kit
            .send(
                "POST",
                "/apis/apiextensions.k8s.io/v1/customresourcedefinitions",
                Some(crd(plural, kind)),
            )
            .await;
        assert_eq!(s, 201);
    }
    for plural in ["widgets", "gadgets"] {
        while kit
            .send("GET", &format!("/apis/example.com/v1/{plural}"), None)
            .await
            .0
            != 200
        {
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
    let t = Instant::now();
    for (plural, kind, n) in [
        ("widgets", "Widget", objects),
        ("gadgets", "Gadget", objects / 4),
    ] {
        let tasks: Vec<_> = (0..8)
            .map(|w| {
                let kit = kit.clone();
                tokio::spawn(async move {
                    for i in (w..n).step_by(8) {
                        let ns = format!("ns-{}", i % 10);
                        let (s, b) = kit
                            .send(
                                "POST",
                                &format!("/apis/example.com/v1/namespaces/{ns}/{plural}"),
                                Some(widget(kind, i)),
                            )
                            .await;
                        assert_eq!(s, 201, "{b}");
                    }
                })
            })
            .collect();
        for t in tasks {
            t.await.unwrap();
        }
    }
    eprintln!(
        "seeded {objects} widgets and {} gadgets in {:?}",
        objects / 4,
        t.elapsed()
    );
    let (port, admin) = (free_port(), free_port());
    let r8s = Proc(
        Command::new(BIN)
            .args(["serve", "--kubeconfig"])
            .arg(kit.state.join("pki/admin.kubeconfig"))
            .args(["--cache", "*", "--listen", &format!("127.0.0.1:{port}")])
            .args(["--admin-listen", &format!("127.0.0.1:{admin}")])
            .env("R8S_READ__CONSISTENT_LISTS", "auto")
            .stderr(
                std::fs::File::create(kit.state.join("r8s.log")).map_or(Stdio::null(), Stdio::from),
            )
            .spawn()
            .unwrap(),
    );
    let c = hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
        .build_http::<http_body_util::Empty<Bytes>>();
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let ready = c
            .get(format!("http://127.0.0.1:{admin}/readyz").parse().unwrap())
            .await;
        if ready.is_ok_and(|r| r.status() == 200) {
            break;
        }
        if Instant::now() > deadline {
            let log = std::fs::read_to_string(kit.state.join("r8s.log")).unwrap_or_default();
            panic!("r8s did not become ready in front of the kit:\n{log}");
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!("## Consistent reads against kube-apiserver 1.36 (`benches/kube136.rs`)");
    println!();
    println!(
        "{objects} widgets and {} gadgets of ~3 KB; {rounds} requests per cell, one at a time, each on a kept connection; milliseconds, p50 / p99.",
        objects / 4
    );
    println!();
    println!(
        "| phase | request | straight to 1.36 | through r8s, consistent (proved) | hits | through r8s, `resourceVersion=0` |"
    );
    println!("|---|---|---|---|---|---|");
    for phase in ["idle", "churn"] {
        let writing = Arc::new(std::sync::atomic::AtomicBool::new(phase == "churn"));
        let writer = {
            let (kit, writing) = (kit.clone(), writing.clone());
            tokio::spawn(async move {
                let mut i = 0usize;
                let gap = Duration::from_micros(1_000_000 / churn.max(1));
                while writing.load(std::sync::atomic::Ordering::Relaxed) {
                    let n = i % objects;
                    let path = format!(
                        "/apis/example.com/v1/namespaces/ns-{}/widgets/widget-{n:05}",
                        n % 10
                    );
                    kit.send("PATCH", &path, Some(json!({"spec": {"size": i}})))
                        .await;
                    i += 1;
                    tokio::time::sleep(gap).await;
                }
            })
        };
        for (plural, one) in [("widgets", "widget-00003"), ("gadgets", "gadget-00003")] {
            let base = format!("/apis/example.com/v1/namespaces/ns-3/{plural}");
            // One node's objects, in every namespace: a selectable field
            // (answered from the cache since stop 67; passed through before).
            let node =
                format!("/apis/example.com/v1/{plural}?fieldSelector=spec.nodeName%3Dnode-7");
            for (shape, path) in [
                ("LIST limit=500 (ns-3)", format!("{base}?{LIST}")),
                ("streaming list (ns-3)", format!("{base}?{STREAM}")),
                ("GET (ns-3)", format!("{base}/{one}")),
                ("LIST of one node's (all namespaces)", node.clone()),
                (
                    "streaming list of one node's (all namespaces)",
                    format!("{node}&{STREAM}"),
                ),
            ] {
                let streaming = shape.starts_with("streaming list");
                let any = if shape.starts_with("GET") {
                    format!("{path}?resourceVersion=0")
                } else {
                    format!("{path}&resourceVersion=0")
                };
                let mut straight = connect(kit.port, Some(&kit)).await;
                let mut via = connect(port, None).await;
                let mut via_any = connect(port, None).await;
                let (mut a, mut b, mut z, mut hits) = (Vec::new(), Vec::new(), Vec::new(), 0);
                for _ in 0..rounds {
                    if streaming {
                        // A watch read to its bookmark leaves its connection
                        // busy: a new one each time, made before the clock starts.
                        straight = connect(kit.port, Some(&kit)).await;
                        via = connect(port, None).await;
                        via_any = connect(port, None).await;
                    }
                    a.push(read(&mut straight, &path).await.0);
                    let (d, hit) = read(&mut via, &path).await;
                    b.push(d);
                    hits += usize::from(hit == "hit");
                    z.push(read(&mut via_any, &any).await.0);
                }
                println!(
                    "| {phase} | {plural}, {shape} | {} / {} | {} / {} | {hits}/{rounds} | {} / {} |",
                    ms(pct(&mut a, 50)),
                    ms(pct(&mut a, 99)),
                    ms(pct(&mut b, 50)),
                    ms(pct(&mut b, 99)),
                    ms(pct(&mut z, 50)),
                    ms(pct(&mut z, 99)),
                );
            }
        }
        writing.store(false, std::sync::atomic::Ordering::Relaxed);
        writer.await.unwrap();
    }
    drop(r8s);
}
