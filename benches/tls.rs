//! Serving from the cache over TLS against its floor over TLS (issue 14,
//! goal 5): a trivial rustls + hyper server that answers every request with
//! the very same bytes, over the same certificate, cipher suites and ALPN.
//! The ratio to that floor is what r8s adds on top of TLS itself.
//!
//! `cargo bench --bench tls` (results in BENCHMARKS.md). r8s runs with
//! `auth.mode = "delegated"` in front of the sim, and every request carries a
//! bearer token (its review and decision are cached after the first). The
//! sim, r8s and the floor are processes of their own; CPU per request is each
//! server's user+system time over a run (`/proc/PID/stat`) divided by the
//! requests. Everything runs on 127.0.0.1 and stops by itself.
//!
//! `BENCH_R8S_BIN=/path/to/r8s cargo bench --bench tls` measures that binary.

mod common;

use std::net::SocketAddr;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::{TokioExecutor, TokioIo};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, ServerName};
use tokio::net::{TcpListener, TcpStream};

use common::{Proc, Scratch, answering, cpu_time, free_port, load, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const PODS: usize = 10_000;
const TOKEN: &str = "admin-token";
/// What client-go's typed clients ask for.
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, */*";

/// The r8s under test: `BENCH_R8S_BIN`, or this build's.
fn r8s_bin() -> String {
    std::env::var("BENCH_R8S_BIN").unwrap_or_else(|_| BIN.to_string())
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The floor, in a process of its own: this binary re-executed as
/// `floor BODY CERT KEY PORT`, answering every request with BODY over TLS
/// (ALPN `h2` and `http/1.1`, as r8s offers).
async fn floor_server(body: Bytes, cert: &str, key: &str, port: u16) {
    let certs = CertificateDer::pem_file_iter(cert)
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let key = PrivateKeyDer::from_pem_file(key).unwrap();
    let mut cfg = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .unwrap();
    cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(cfg));
    let l = TcpListener::bind(("127.0.0.1", port)).await.unwrap();
    loop {
        let (s, _) = l.accept().await.unwrap();
        let _ = s.set_nodelay(true);
        let (body, acceptor) = (body.clone(), acceptor.clone());
        tokio::spawn(async move {
            let Ok(tls) = acceptor.accept(s).await else {
                return;
            };
            let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                .serve_connection(TokioIo::new(tls), answering(body))
                .await;
        });
    }
}

/// Starts a floor serving `body`; returns it and its address.
fn floor(scratch: &Scratch, body: &Bytes, name: &str, cert: &str, key: &str) -> (Proc, SocketAddr) {
    let path = scratch.join(&format!("floor-{name}"));
    std::fs::write(&path, body).unwrap();
    let port = free_port();
    let child = Command::new(std::env::current_exe().unwrap())
        .args([
            "floor",
            &path.display().to_string(),
            cert,
            key,
            &port.to_string(),
        ])
        .spawn()
        .unwrap();
    (Proc(child), SocketAddr::from(([127, 0, 0, 1], port)))
}

/// A client's TLS settings: trusts the bench's certificate, offers one ALPN.
fn client_config(ca: &CertificateDer<'static>, alpn: &[u8]) -> Arc<rustls::ClientConfig> {
    let mut roots = rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let mut cfg = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = vec![alpn.to_vec()];
    Arc::new(cfg)
}

/// One client connection: HTTP/1.1 or HTTP/2 over TLS.
#[derive(Clone)]
enum Conn {
    H1(Arc<tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Empty<Bytes>>>>),
    H2(hyper::client::conn::http2::SendRequest<Empty<Bytes>>),
}

async fn connect(addr: SocketAddr, cfg: &Arc<rustls::ClientConfig>) -> Conn {
    let tcp = TcpStream::connect(addr).await.unwrap();
    tcp.set_nodelay(true).unwrap();
    let tls = tokio_rustls::TlsConnector::from(cfg.clone())
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let h2 = tls.get_ref().1.alpn_protocol() == Some(b"h2");
    if h2 {
        let (send, conn) =
            hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                .await
                .unwrap();
        tokio::spawn(conn);
        Conn::H2(send)
    } else {
        let (send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
            .await
            .unwrap();
        tokio::spawn(conn);
        Conn::H1(Arc::new(tokio::sync::Mutex::new(send)))
    }
}

/// A GET of `path` with the bench's token and `accept`; returns the body.
async fn fetch(conn: &Conn, path: &str, accept: Option<&str>) -> Bytes {
    let mut req = http::Request::get(path)
        .header("host", "localhost")
        .header("authorization", format!("Bearer {TOKEN}"));
    if let Some(a) = accept {
        req = req.header("accept", a);
    }
    let req = req.body(Empty::new()).unwrap();
    let resp = match conn {
        Conn::H1(s) => {
            let mut s = s.lock().await;
            s.ready().await.unwrap();
            s.send_request(req).await.unwrap()
        }
        Conn::H2(s) => {
            let mut s = s.clone();
            s.ready().await.unwrap();
            let mut req = req;
            *req.uri_mut() = format!("https://localhost{path}").parse().unwrap();
            s.send_request(req).await.unwrap()
        }
    };
    assert!(resp.status().is_success(), "{path}: {}", resp.status());
    resp.into_body().collect().await.unwrap().to_bytes()
}

/// What one measured run gave.
struct Run {
    p50: Duration,
    p99: Duration,
    rps: f64,
    /// The server's CPU per request.
    cpu: Duration,
}

/// `n` GETs of `path` by `conc` clients: over HTTP/1.1 a connection each,
/// over HTTP/2 `conc` streams on one connection (as client-go multiplexes).
async fn measure(
    addr: SocketAddr,
    pid: u32,
    cfg: &Arc<rustls::ClientConfig>,
    path: &str,
    accept: Option<&'static str>,
    n: usize,
    conc: usize,
) -> Run {
    let shared = connect(addr, cfg).await;
    let mut conns = Vec::new();
    for i in 0..conc {
        conns.push(match (&shared, i) {
            (Conn::H2(_), _) | (_, 0) => shared.clone(),
            _ => connect(addr, cfg).await,
        });
    }
    for c in &conns {
        fetch(c, path, accept).await;
    }
    let cpu0 = cpu_time(pid);
    let path: Arc<str> = path.into();
    let l = load(conns, n / conc, move |c| {
        let path = path.clone();
        async move {
            fetch(&c, &path, accept).await;
        }
    })
    .await;
    Run {
        p50: l.percentile(50),
        p99: l.percentile(99),
        rps: l.rate(),
        cpu: (cpu_time(pid) - cpu0) / l.latencies.len() as u32,
    }
}

fn fmt(d: Duration) -> String {
    if d >= Duration::from_millis(1) {
        format!("{:.2} ms", d.as_secs_f64() * 1e3)
    } else {
        format!("{:.1} µs", d.as_secs_f64() * 1e6)
    }
}

/// Prints the floor's row, r8s's row and their ratios.
fn rows(what: &str, floor: &Run, r8s: &Run) {
    for (who, r) in [("floor", floor), ("r8s cache", r8s)] {
        println!(
            "| {what} | {who} | {} | {} | {:.0} | {} |",
            fmt(r.p50),
            fmt(r.p99),
            r.rps,
            fmt(r.cpu)
        );
    }
    println!(
        "| {what} | r8s / floor | {:.2} | {:.2} | {:.2} | {:.2} |",
        r8s.p50.as_secs_f64() / floor.p50.as_secs_f64(),
        r8s.p99.as_secs_f64() / floor.p99.as_secs_f64(),
        r8s.rps / floor.rps,
        r8s.cpu.as_secs_f64() / floor.cpu.as_secs_f64().max(1e-9)
    );
}

#[tokio::main]
async fn main() {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("floor") {
        let body = Bytes::from(std::fs::read(&args[2]).unwrap());
        floor_server(body, &args[3], &args[4], args[5].parse().unwrap()).await;
        return;
    }
    let dir = Scratch::new("tls");
    let ck =
        rcgen::generate_simple_self_signed(vec!["localhost".into(), "127.0.0.1".into()]).unwrap();
    let (cert, key) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert, ck.cert.pem()).unwrap();
    std::fs::write(&key, ck.signing_key.serialize_pem()).unwrap();
    let ca = ck.cert.der().clone();
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        format!(
            "r8s-token,r8s,uid-r8s,\"system:masters\"\n{TOKEN},admin,uid-admin,\"system:masters\"\n"
        ),
    )
    .unwrap();
    let own = dir.join("r8s-token");
    std::fs::write(&own, "r8s-token").unwrap();

    let c: Client<HttpConnector, Empty<Bytes>> =
        Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let sim_port = free_port();
    let tokens_arg = tokens.display().to_string();
    let _sim = sim(
        BIN,
        sim_port,
        &["--pods", &PODS.to_string(), "--tokens", &tokens_arg],
    );
    let (port, admin) = (free_port(), free_port());
    let config = dir.join("r8s.toml");
    std::fs::write(
        &config,
        format!(
            "listen = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n[upstream]\nservers = [\"http://127.0.0.1:{sim_port}\"]\ntoken_file = \"{}\"\n[cache]\nresources = [\"pods\"]\n[auth]\nmode = \"delegated\"\n[tls]\ncert_file = \"{}\"\nkey_file = \"{}\"\n",
            own.display(),
            cert.display(),
            key.display()
        ),
    )
    .unwrap();
    let r8s_proc = Proc(
        Command::new(r8s_bin())
            .args(["serve", "--config"])
            .arg(&config)
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    wait_ready(&c, &format!("http://127.0.0.1:{admin}/readyz")).await;
    let r8s = SocketAddr::from(([127, 0, 0, 1], port));
    let pid = r8s_proc.0.id();

    let h1 = client_config(&ca, b"http/1.1");
    let h2 = client_config(&ca, b"h2");
    let list_path = "/api/v1/pods?resourceVersion=0";
    let get_path = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0";
    let probe = connect(r8s, &h1).await;
    let list = fetch(&probe, list_path, None).await;
    let pb_list = fetch(&probe, list_path, Some(PROTOBUF)).await;
    let one = fetch(&probe, get_path, None).await;
    let pb_one = fetch(&probe, get_path, Some(PROTOBUF)).await;
    assert!(pb_list.starts_with(b"k8s\0") && pb_one.starts_with(b"k8s\0"));
    let (cs, ks) = (cert.display().to_string(), key.display().to_string());
    let floors = [
        floor(&dir, &list, "list", &cs, &ks),
        floor(&dir, &pb_list, "pb-list", &cs, &ks),
        floor(&dir, &one, "get", &cs, &ks),
        floor(&dir, &pb_one, "pb-get", &cs, &ks),
    ];
    for (_, addr) in &floors {
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).await.is_err() {
            assert!(Instant::now() < deadline, "floor {addr} never listened");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    let at = |i: usize| (floors[i].1, floors[i].0.0.id());

    println!(
        "TLS 1.3 (rustls, ring) both sides; r8s with auth.mode = delegated and a bearer token; {PODS} pods; JSON list {:.1} MB, protobuf list {:.1} MB",
        list.len() as f64 / 1e6,
        pb_list.len() as f64 / 1e6
    );
    println!();
    println!("| what | server | p50 | p99 | req/s | server CPU per request |");
    println!("|---|---|---|---|---|---|");
    /// One row: what is asked, of which floor, how, how many times, how many at once.
    struct Case<'a> {
        what: &'a str,
        floor: usize,
        accept: Option<&'static str>,
        path: &'a str,
        tls: &'a Arc<rustls::ClientConfig>,
        n: usize,
        conc: usize,
    }
    let case = |what, floor, accept, path, tls, n, conc| Case {
        what,
        floor,
        accept,
        path,
        tls,
        n,
        conc,
    };
    let cases = [
        case("LIST RV=0, JSON, HTTP/1.1", 0, None, list_path, &h1, 60, 1),
        case(
            "LIST RV=0, protobuf, HTTP/1.1",
            1,
            Some(PROTOBUF),
            list_path,
            &h1,
            150,
            1,
        ),
        case("LIST RV=0, JSON, HTTP/2", 0, None, list_path, &h2, 60, 1),
        case(
            "GET RV=0, JSON, HTTP/1.1, 8 clients",
            2,
            None,
            get_path,
            &h1,
            20_000,
            8,
        ),
        case(
            "GET RV=0, protobuf, HTTP/2, 8 streams",
            3,
            Some(PROTOBUF),
            get_path,
            &h2,
            20_000,
            8,
        ),
    ];
    for c in cases {
        let (faddr, fpid) = at(c.floor);
        let fl = measure(faddr, fpid, c.tls, "/", c.accept, c.n, c.conc).await;
        let r = measure(r8s, pid, c.tls, c.path, c.accept, c.n, c.conc).await;
        rows(c.what, &fl, &r);
    }
}
