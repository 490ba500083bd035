//! What the benchmarks share: child processes that stop with the benchmark,
//! free loopback ports, a process's RSS and CPU, waiting for a server.
#![allow(dead_code)]

use std::process::Child;

/// A number from the environment variable `name`, or `default` when it is
/// unset or not a number (the benchmarks' knobs: `DISK_PODS`, ...).
pub fn env_or<T: std::str::FromStr>(name: &str, default: T) -> T {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

/// A child process (the sim, r8s, a floor server), killed when dropped.
pub struct Proc(pub Child);

impl Drop for Proc {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A port free on 127.0.0.1 right now (for a child to listen on).
///
/// Taken below the kernel's ephemeral range (32768 and up by default), and
/// never the same one twice in a run: a port the kernel hands out for
/// `:0` can be handed out again, or taken by one of the benchmark's own
/// outgoing connections, before the child binds it (`AddrInUse`).
pub fn free_port() -> u16 {
    use std::sync::atomic::{AtomicU16, Ordering};
    const LOW: u16 = 20_000;
    const SPAN: u16 = 12_000;
    static NEXT: AtomicU16 = AtomicU16::new(0);
    // Start where this process's id points, so benches run side by side
    // look in different places.
    let _ = NEXT.compare_exchange(
        0,
        (std::process::id() % u32::from(SPAN)) as u16 + 1,
        Ordering::Relaxed,
        Ordering::Relaxed,
    );
    for _ in 0..SPAN {
        let port = LOW + NEXT.fetch_add(1, Ordering::Relaxed) % SPAN;
        if std::net::TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port on 127.0.0.1 between {LOW} and {}", LOW + SPAN)
}

/// A process's resident set size, in KiB.
pub fn rss_kib(pid: u32) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with("VmRSS:"))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|v| v.parse().ok())
        .unwrap()
}

/// CPU time a process has used so far (user + system), from `/proc/PID/stat`.
pub fn cpu_time(pid: u32) -> std::time::Duration {
    let s = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
    // Fields after the parenthesized command name; utime and stime are 14 and 15.
    let rest = &s[s.rfind(')').unwrap() + 2..];
    let f: Vec<u64> = rest
        .split_whitespace()
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    let ticks = f[11] + f[12];
    // USER_HZ is 100 on Linux (the ABI fixes it for /proc).
    std::time::Duration::from_millis(ticks * 10)
}

/// Waits until `url` answers 2xx (a server started, a cache synced), for at
/// most 3 minutes (`BENCH_READY_SECONDS` waits longer).
pub async fn wait_ready<B>(
    c: &hyper_util::client::legacy::Client<hyper_util::client::legacy::connect::HttpConnector, B>,
    url: &str,
) where
    B: http_body::Body + Default + Send + Unpin + 'static,
    B::Data: Send,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    // A million pods take minutes to seed and to sync: `BENCH_READY_SECONDS`
    // waits longer than the default 180 s.
    let wait = std::env::var("BENCH_READY_SECONDS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(180);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(wait);
    loop {
        if let Ok(r) = c.get(url.parse().unwrap()).await
            && r.status().is_success()
        {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{url} never became ready"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// What [`load`] measured: every call's latency, sorted, and the wall time.
pub struct Load {
    /// Each call's latency, shortest first.
    pub latencies: Vec<std::time::Duration>,
    /// From the first call started to the last one answered.
    pub wall: std::time::Duration,
}

impl Load {
    /// The latency below which `p` percent of the calls answered.
    pub fn percentile(&self, p: usize) -> std::time::Duration {
        self.latencies[self.latencies.len() * p / 100]
    }

    /// Calls answered per second.
    pub fn rate(&self) -> f64 {
        self.latencies.len() as f64 / self.wall.as_secs_f64()
    }
}

/// Runs `per` timed calls of `call` one after another on each of `clients`,
/// all clients at once (each on a task of its own).
pub async fn load<T, F, Fut>(clients: Vec<T>, per: usize, call: F) -> Load
where
    T: Clone + Send + 'static,
    F: Fn(T) -> Fut + Clone + Send + 'static,
    Fut: std::future::Future<Output = ()> + Send,
{
    let start = std::time::Instant::now();
    let mut tasks = Vec::new();
    for c in clients {
        let call = call.clone();
        tasks.push(tokio::spawn(async move {
            let mut lat = Vec::with_capacity(per);
            for _ in 0..per {
                let t = std::time::Instant::now();
                call(c.clone()).await;
                lat.push(t.elapsed());
            }
            lat
        }));
    }
    let mut latencies = Vec::new();
    for t in tasks {
        latencies.extend(t.await.unwrap());
    }
    let wall = start.elapsed();
    latencies.sort();
    Load { latencies, wall }
}

/// `r8s sim` (the binary `bin`) on 127.0.0.1:`port` with `args` (how many
/// pods, a tokens file), its log discarded.
pub fn sim(bin: &str, port: u16, args: &[&str]) -> Proc {
    Proc(
        std::process::Command::new(bin)
            .args(["sim", "--listen", &format!("127.0.0.1:{port}")])
            .args(args)
            .stderr(std::process::Stdio::null())
            .spawn()
            .unwrap(),
    )
}

/// A benchmark run's own directory under the system's temp dir (certificates,
/// tokens, configs, the bodies its floors serve), removed when dropped.
pub struct Scratch(std::path::PathBuf);

impl Scratch {
    /// `r8s-bench-NAME-PID`, created empty.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(format!("r8s-bench-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        Scratch(dir)
    }

    /// The path of `file` in it.
    pub fn join(&self, file: &str) -> std::path::PathBuf {
        self.0.join(file)
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A floor's response: the bytes it was given, whole.
pub type FloorResponse = http::Response<http_body_util::Full<bytes::Bytes>>;

/// What a floor answers every request with: `body`, labelled protobuf when
/// it is a Kubernetes protobuf envelope and JSON otherwise, as r8s sent it.
pub fn answering(
    body: bytes::Bytes,
) -> impl hyper::service::Service<
    http::Request<hyper::body::Incoming>,
    Response = FloorResponse,
    Error = std::convert::Infallible,
    Future = std::future::Ready<Result<FloorResponse, std::convert::Infallible>>,
> + Clone {
    let content_type = if body.starts_with(b"k8s\0") {
        "application/vnd.kubernetes.protobuf"
    } else {
        "application/json"
    };
    hyper::service::service_fn(move |_req| {
        let mut r = http::Response::new(http_body_util::Full::new(body.clone()));
        r.headers_mut().insert(
            http::header::CONTENT_TYPE,
            http::HeaderValue::from_static(content_type),
        );
        std::future::ready(Ok(r))
    })
}

/// Forwards 127.0.0.1:(free port) to `target`, counting the bytes sent back.
pub async fn counting_link(
    target: std::net::SocketAddr,
) -> (String, std::sync::Arc<std::sync::atomic::AtomicU64>) {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    let count = std::sync::Arc::new(std::sync::atomic::AtomicU64::new(0));
    let counted = count.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = l.accept().await {
            let counted = counted.clone();
            tokio::spawn(async move {
                let Ok(server) = tokio::net::TcpStream::connect(target).await else {
                    return;
                };
                let (mut cr, mut cw) = client.into_split();
                let (mut sr, mut sw) = server.into_split();
                let up = tokio::spawn(async move { tokio::io::copy(&mut cr, &mut sw).await });
                let mut buf = vec![0u8; 64 << 10];
                use tokio::io::{AsyncReadExt, AsyncWriteExt};
                loop {
                    match sr.read(&mut buf).await {
                        Ok(0) | Err(_) => break,
                        Ok(n) => {
                            counted.fetch_add(n as u64, std::sync::atomic::Ordering::Relaxed);
                            if cw.write_all(&buf[..n]).await.is_err() {
                                break;
                            }
                        }
                    }
                }
                up.abort();
            });
        }
    });
    (url, count)
}
