//! What auditing costs the reads r8s answers: one r8s without auditing, one
//! writing `Metadata` events of every request to a log file, and one writing
//! `RequestResponse` events (the answers' bodies too), side by side in front
//! of one sim with `AUDIT_PODS` pods (10,000; real-shaped).
//! Goals (issue 54): a cached GET ≤ 1.1× the CPU without auditing; a
//! cached LIST of 10,000 pods ≤ 1.02×; 10,000 watchers opened at once:
//! every event written or counted dropped.
//!
//! `cargo bench --bench audit` (results in BENCHMARKS.md; `AUDIT_ROUNDS`,
//! `AUDIT_GETS`, `AUDIT_LISTS`, `AUDIT_WATCHERS` and `AUDIT_IN_PROCESS` size
//! it; `AUDIT_THIRD` picks the third r8s). Rounds alternate among the three
//! r8s so all see the same machine; r8s's CPU is read from /proc. First,
//! the audit path alone is timed in this process. Everything runs on
//! 127.0.0.1 and stops by itself.

mod common;

use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;

use common::{Proc, Scratch, cpu_time, env_or, free_port, load, sim, wait_ready};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

type C = Client<HttpConnector, Empty<Bytes>>;

async fn fetch(c: &C, url: &str) {
    let resp = c
        .request(http::Request::get(url).body(Empty::new()).unwrap())
        .await
        .unwrap();
    assert_eq!(resp.status(), 200, "{url}");
    assert_eq!(resp.headers()["x-r8s-cache"], "hit", "{url}");
    resp.into_body().collect().await.unwrap();
}

/// What a process has spent so far: CPU (user and system), system CPU
/// alone, and its threads' context switches.
#[derive(Clone, Copy, Default)]
struct Usage {
    cpu: Duration,
    sys: Duration,
    switches: u64,
}

impl Usage {
    fn of(pid: u32) -> Usage {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        // Fields after the parenthesized command name; stime is the 15th.
        let rest = &stat[stat.rfind(')').unwrap() + 2..];
        let stime: u64 = rest.split_whitespace().nth(12).unwrap().parse().unwrap();
        let mut switches = 0;
        for t in std::fs::read_dir(format!("/proc/{pid}/task"))
            .unwrap()
            .flatten()
        {
            let status = std::fs::read_to_string(t.path().join("status")).unwrap_or_default();
            switches += status
                .lines()
                .filter(|l| l.contains("ctxt_switches:"))
                .filter_map(|l| l.split_whitespace().last()?.parse::<u64>().ok())
                .sum::<u64>();
        }
        Usage {
            cpu: cpu_time(pid),
            // USER_HZ is 100 on Linux.
            sys: Duration::from_millis(stime * 10),
            switches,
        }
    }

    fn since(self, before: Usage) -> Usage {
        Usage {
            cpu: self.cpu - before.cpu,
            sys: self.sys - before.sys,
            switches: self.switches - before.switches,
        }
    }

    fn add(&mut self, other: Usage) {
        self.cpu += other.cpu;
        self.sys += other.sys;
        self.switches += other.switches;
    }
}

/// What r8s spent over `per × clients` fetches of `url`.
async fn round(c: &C, url: &str, pid: u32, clients: usize, per: usize) -> Usage {
    let before = Usage::of(pid);
    let url: Arc<str> = url.into();
    load(vec![c.clone(); clients], per, move |c| {
        let url = url.clone();
        async move { fetch(&c, &url).await }
    })
    .await;
    Usage::of(pid).since(before)
}

/// CPU per request of each r8s over rounds in turn (each round starting
/// with the next one, so drift in the machine spreads over all); the
/// system CPU and context switches shown beside.
async fn compare(
    c: &C,
    urls: [&str; 3],
    pids: [u32; 3],
    rounds: usize,
    clients: usize,
    per: usize,
) -> [Duration; 3] {
    let mut spent = [Usage::default(); 3];
    for i in 0..rounds {
        for j in 0..3 {
            let k = (i + j) % 3;
            spent[k].add(round(c, urls[k], pids[k], clients, per).await);
        }
    }
    let n = (rounds * clients * per) as u32;
    let sys = spent.map(|u| format!("{:.2}", u.sys.as_secs_f64() * 1e6 / f64::from(n)));
    let sw = spent.map(|u| format!("{:.3}", u.switches as f64 / f64::from(n)));
    println!(
        "(of which system CPU, µs a request: {}; context switches a request: {})",
        sys.join(", "),
        sw.join(", ")
    );
    spent.map(|u| u.cpu / n)
}

/// The body `url` answers.
async fn body(c: &C, url: &str) -> Bytes {
    c.get(url.parse().unwrap())
        .await
        .unwrap()
        .into_body()
        .collect()
        .await
        .unwrap()
        .to_bytes()
}

async fn metric(c: &C, admin: &str, series: &str) -> f64 {
    let body = body(c, &format!("{admin}/metrics")).await;
    String::from_utf8_lossy(&body)
        .lines()
        .find(|l| l.starts_with(series) && l[series.len()..].starts_with(' '))
        .and_then(|l| l.rsplit(' ').next()?.parse().ok())
        .unwrap_or(0.0)
}

/// `n` watches of one pod opened at once over HTTP/2 (100 streams a
/// connection), each read to its end (`timeoutSeconds=2`).
async fn watchers(api: &str, n: usize) {
    let addr: std::net::SocketAddr = api.trim_start_matches("http://").parse().unwrap();
    let path = "/api/v1/namespaces/ns-1/pods?watch=1&resourceVersion=0&timeoutSeconds=2&fieldSelector=metadata.name%3Dpod-00001";
    let mut all = tokio::task::JoinSet::new();
    for _ in 0..n.div_ceil(100) {
        let io = hyper_util::rt::TokioIo::new(tokio::net::TcpStream::connect(addr).await.unwrap());
        let (send, conn) = hyper::client::conn::http2::handshake(TokioExecutor::new(), io)
            .await
            .unwrap();
        tokio::spawn(conn);
        for _ in 0..100 {
            let mut send = send.clone();
            all.spawn(async move {
                futures_util::future::poll_fn(|cx| send.poll_ready(cx))
                    .await
                    .unwrap();
                let req = http::Request::get(format!("http://{addr}{path}"))
                    .body(Empty::<Bytes>::new())
                    .unwrap();
                let resp = send.send_request(req).await.unwrap();
                assert_eq!(resp.status(), 200);
                resp.into_body().collect().await.unwrap();
            });
        }
    }
    while let Some(r) = all.join_next().await {
        r.unwrap();
    }
}

/// The audit path alone, in this process: CPU per GET of making its record,
/// its events and their writing to a log file (the writer thread's CPU
/// included), less the same response made and read without a record.
/// No sockets, no other process: the part of the GETs' difference below
/// that is auditing's own code.
async fn in_process(dir: &Scratch, answer: Bytes, n: usize) -> (Duration, Duration) {
    use r8s::api::request::ApiRequest;
    use r8s::audit::{Auditor, Facts, Outcome};
    let cfg = r8s::config::AuditConfig {
        policy_file: Some(dir.join("policy.yaml")),
        log_path: Some(dir.join("in-process.log")),
        ..Default::default()
    };
    let (auditor, writers) = Auditor::start(&cfg).await.unwrap().unwrap();
    let method = http::Method::GET;
    let uri: http::Uri = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0"
        .parse()
        .unwrap();
    let mut headers = http::HeaderMap::new();
    headers.insert(
        "user-agent",
        "kubectl/v1.36.3 (linux/amd64) kubernetes/abcdef0"
            .parse()
            .unwrap(),
    );
    headers.insert("accept", "application/json".parse().unwrap());
    let request = ApiRequest::parse(&method, &uri, &headers).unwrap();
    let peer: std::net::IpAddr = "127.0.0.1".parse().unwrap();
    let me = std::process::id();
    let respond = || {
        let mut resp = http::Response::new(r8s::body::full(answer.clone()));
        resp.headers_mut()
            .insert("content-type", "application/json".parse().unwrap());
        resp
    };
    let mut took = [Duration::ZERO; 2];
    for audited in [false, true, false, true] {
        let cpu0 = cpu_time(me);
        for _ in 0..n {
            let mut resp = respond();
            // (Every request's, audited or not.)
            let id = std::hint::black_box(r8s::audit::id_of(&headers));
            if audited {
                let pending = auditor.begin(Facts {
                    id: &id,
                    method: &method,
                    uri: &uri,
                    headers: &headers,
                    peer,
                    received: std::time::SystemTime::now(),
                    user: None,
                    impersonated: None,
                    request: Some(&request),
                });
                if let Some(p) = pending {
                    p.finish(&mut resp, Outcome::Hit, None);
                }
            }
            resp.into_body().collect().await.unwrap();
        }
        took[usize::from(audited)] += cpu_time(me) - cpu0;
    }
    drop(auditor);
    writers.finish(Duration::from_secs(30)).await;
    let per = (2 * n) as u32;
    (took[0] / per, took[1] / per)
}

#[tokio::main]
async fn main() {
    let pods: usize = env_or("AUDIT_PODS", 10_000);
    let dir = Scratch::new("audit");
    let policy = dir.join("policy.yaml");
    std::fs::write(
        &policy,
        "apiVersion: audit.k8s.io/v1\nkind: Policy\nrules:\n- level: Metadata\n",
    )
    .unwrap();
    let log = dir.join("audit.log");
    let c: C = Client::builder(TokioExecutor::new()).build(HttpConnector::new());
    let sim_port = free_port();
    let _sim = sim(
        BIN,
        sim_port,
        &["--pods", &pods.to_string(), "--namespaces", "10"],
    );
    let sim = format!("http://127.0.0.1:{sim_port}");
    let serve = |name: &str, audit: &str| {
        let (port, admin) = (free_port(), free_port());
        let config = dir.join(&format!("{name}.toml"));
        std::fs::write(
            &config,
            format!(
                "listen = \"127.0.0.1:{port}\"\nadmin_listen = \"127.0.0.1:{admin}\"\n[upstream]\nservers = [\"{sim}\"]\n[cache]\nresources = [\"pods\"]\n[watch]\nmax_watchers = 100000\n{audit}"
            ),
        )
        .unwrap();
        let p = Proc(
            Command::new(BIN)
                .args(["serve", "--config"])
                .arg(&config)
                .stderr(Stdio::null())
                .spawn()
                .unwrap(),
        );
        (
            p,
            format!("http://127.0.0.1:{port}"),
            format!("http://127.0.0.1:{admin}"),
        )
    };
    let (plain, plain_url, plain_admin) = serve("plain", "");
    let audit = format!(
        "[audit]\npolicy_file = \"{}\"\nlog_path = \"{}\"\n",
        policy.display(),
        log.display()
    );
    let (audited, audited_url, audited_admin) = serve("audited", &audit);
    // The third r8s: `RequestResponse` events, or (`AUDIT_THIRD`) one that
    // splits the `Metadata` r8s's cost: `none` consults a policy that says
    // `None` (a record begun, nothing written), `devnull` writes its events
    // to /dev/null (all but the file's own cost), `received` writes
    // `Metadata` events to a file under a policy that omits
    // `RequestReceived`, as Kubernetes' documented policies do (one event a
    // GET instead of two).
    let third: String = env_or("AUDIT_THIRD", "bodies".to_string());
    let (level, third_log) = match third.as_str() {
        "bodies" => ("RequestResponse", dir.join("bodies.log")),
        "none" => ("None", dir.join("none.log")),
        "devnull" => ("Metadata", "/dev/null".into()),
        "received" => ("Metadata", dir.join("received.log")),
        other => panic!("AUDIT_THIRD={other}: bodies, none, devnull or received"),
    };
    let omit = if third == "received" {
        "omitStages:\n- RequestReceived\n"
    } else {
        ""
    };
    let bodies_policy = dir.join("bodies.yaml");
    std::fs::write(
        &bodies_policy,
        format!("apiVersion: audit.k8s.io/v1\nkind: Policy\n{omit}rules:\n- level: {level}\n"),
    )
    .unwrap();
    let bodies = format!(
        "[audit]\npolicy_file = \"{}\"\nlog_path = \"{}\"\nlog_maxbackup = 1\nlog_maxsize = {}\n",
        bodies_policy.display(),
        third_log.display(),
        if third == "devnull" { 0 } else { 100 },
    );
    let (with_bodies, bodies_url, bodies_admin) = serve("bodies", &bodies);
    for admin in [&plain_admin, &audited_admin, &bodies_admin] {
        wait_ready(&c, &format!("{admin}/readyz")).await;
    }
    let pids = [plain.0.id(), audited.0.id(), with_bodies.0.id()];

    let pod = body(
        &c,
        &format!("{plain_url}/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0"),
    )
    .await;
    let n = env_or("AUDIT_IN_PROCESS", 200_000);
    let (bare, audited_here) = in_process(&dir, pod, n).await;
    println!(
        "The audit path in this process (no sockets): a GET's response made and read {:.2} µs; with its Metadata record, events and their writing to a file {:.2} µs: +{:.2} µs ({} × 2 each)",
        bare.as_secs_f64() * 1e6,
        audited_here.as_secs_f64() * 1e6,
        (audited_here.as_secs_f64() - bare.as_secs_f64()) * 1e6,
        n
    );
    println!();

    println!(
        "r8s without auditing, and with Metadata events of every request to a log file; {pods} pods (sim)"
    );
    println!();
    println!(
        "| request | rounds × requests | r8s CPU per request, no audit | Metadata | ratio | {} | ratio |",
        match third.as_str() {
            "bodies" => "RequestResponse",
            "none" => "level None",
            "received" => "Metadata, RequestReceived omitted",
            _ => "Metadata to /dev/null",
        }
    );
    println!("|---|---|---|---|---|---|---|");
    let get = "/api/v1/namespaces/ns-3/pods/pod-00003?resourceVersion=0";
    let list = "/api/v1/pods?resourceVersion=0";
    let rounds = env_or("AUDIT_ROUNDS", 6);
    for (what, path, clients, per, unit) in [
        (
            "GET one pod, resourceVersion=0",
            get,
            8,
            env_or("AUDIT_GETS", 20_000) / 8,
            1e6,
        ),
        (
            "LIST every pod, resourceVersion=0",
            list,
            1,
            env_or("AUDIT_LISTS", 10),
            1e3,
        ),
    ] {
        let urls = [&plain_url, &audited_url, &bodies_url].map(|u| format!("{u}{path}"));
        let urls = [urls[0].as_str(), urls[1].as_str(), urls[2].as_str()];
        let [p, m, b] = compare(&c, urls, pids, rounds, clients, per).await;
        let unit_name = if unit == 1e6 { "µs" } else { "ms" };
        let f = |d: Duration| format!("{:.2} {unit_name}", d.as_secs_f64() * unit);
        println!(
            "| {what} ({pods} pods) | {rounds} × {} | {} | {} | {:.3} | {} | {:.3} |",
            clients * per,
            f(p),
            f(m),
            m.as_secs_f64() / p.as_secs_f64(),
            f(b),
            b.as_secs_f64() / p.as_secs_f64()
        );
    }

    // 10,000 watchers at once: every event written or counted dropped.
    let n: usize = env_or("AUDIT_WATCHERS", 10_000);
    let written = r#"r8s_audit_events_total{backend="log"}"#;
    // The rounds' last events written first (the writer lets a burst gather).
    let mut before = metric(&c, &audited_admin, written).await;
    loop {
        tokio::time::sleep(Duration::from_millis(200)).await;
        let now = metric(&c, &audited_admin, written).await;
        if now == before {
            break;
        }
        before = now;
    }
    let dropped_series = [
        r#"r8s_audit_events_dropped_total{backend="log",reason="queue_full"}"#,
        r#"r8s_audit_events_dropped_total{backend="log",reason="write_error"}"#,
    ];
    let mut dropped_before = 0.0;
    for s in dropped_series {
        dropped_before += metric(&c, &audited_admin, s).await;
    }
    let lines_before = std::fs::read_to_string(&log).unwrap().lines().count();
    let cpu0 = cpu_time(pids[1]);
    watchers(&audited_url, n).await;
    // Three events a watch: RequestReceived, ResponseStarted, ResponseComplete.
    let want = (3 * n) as f64;
    let (mut w, mut d) = (0.0, 0.0);
    for _ in 0..600 {
        w = metric(&c, &audited_admin, written).await - before;
        d = -dropped_before;
        for s in dropped_series {
            d += metric(&c, &audited_admin, s).await;
        }
        if w + d >= want {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let cpu = cpu_time(pids[1]) - cpu0;
    let lines = std::fs::read_to_string(&log).unwrap().lines().count() - lines_before;
    println!();
    println!(
        "{n} watchers opened at once (HTTP/2, 100 streams a connection): {want} events made; {w} written ({lines} lines in the file), {d} counted dropped; unaccounted: {}; r8s CPU {:.2} s",
        want - w - d,
        cpu.as_secs_f64()
    );
    assert_eq!(w + d, want, "every event written or counted dropped");
    assert_eq!(
        w as usize, lines,
        "every event counted written is in the file"
    );
}
