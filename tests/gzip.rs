//! gzip lists from the cache (runs compressed once and spliced into later
//! lists) unzip to exactly the plain list, in every variant a client asks
//! for; and errors negotiate as kube-apiserver's `ErrorNegotiated` does.

use std::io::Read;
use std::time::{Duration, Instant};

use crate::common::*;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const METADATA_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

async fn fetch(url: &str, accept: &str, gzip: bool) -> Resp {
    let mut headers = vec![("accept", accept)];
    if gzip {
        headers.push(("accept-encoding", "gzip"));
    }
    let r = send("GET", url, &headers, None).await;
    assert_eq!(r.status, 200, "{url} ({accept}): {}", r.text());
    assert_eq!(r.headers["x-r8s-cache"], "hit", "{url} ({accept})");
    r
}

/// The gzip answer to `url` unzips, with a single-member and a
/// multi-member decoder, to the plain answer, byte for byte.
async fn check(url: &str, accept: &str) -> usize {
    let plain = fetch(url, accept, false).await;
    let gz = fetch(url, accept, true).await;
    assert_eq!(gz.headers["content-encoding"], "gzip", "{url} ({accept})");
    assert!(plain.headers.get("content-encoding").is_none());
    assert_eq!(gz.headers["content-type"], plain.headers["content-type"]);
    let mut one = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut one)
        .unwrap();
    assert!(
        one == plain.body[..],
        "{url} ({accept}): the gzip list is not the list"
    );
    let mut multi = Vec::new();
    flate2::read::MultiGzDecoder::new(&gz.body[..])
        .read_to_end(&mut multi)
        .unwrap();
    assert!(multi == plain.body[..]);
    assert!(
        gz.body.len() * 8 < plain.body.len(),
        "{url}: {} of {}",
        gz.body.len(),
        plain.body.len()
    );
    gz.body.len()
}

/// Every page of a JSON list, each checked as a list of its own.
async fn check_pages(url: &str, accept: &str, limit: usize) -> usize {
    let mut cont = String::new();
    let mut pages = 0;
    loop {
        let page = format!("{url}&limit={limit}{cont}");
        let plain = fetch(&page, accept, false).await;
        if plain.body.len() >= 128 * 1024 {
            check(&page, accept).await;
            pages += 1;
        }
        let next = plain.json()["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if next.is_empty() {
            return pages;
        }
        cont = format!("&continue={next}");
    }
}

async fn reused(r8s: &R8s) -> f64 {
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    sample(&m, r#"r8s_list_gzip_items_total{how="reused"}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_gzip_every_list_variant_to_exactly_the_plain_list() {
    let mut cfg = sim_config();
    cfg.pods = 600;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let all = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    let ns = format!(
        "{}/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        r8s.url()
    );
    let accepts = ["application/json", PROTOBUF, METADATA_PB, METADATA_JSON];
    for round in 0..3 {
        let before = reused(&r8s).await;
        for accept in accepts {
            check(&all, accept).await;
            check(&ns, accept).await;
            check(&format!("{all}&labelSelector=tier%3Dfrontend"), accept).await;
            check(&format!("{all}&labelSelector=tier%21%3Dbatch"), accept).await;
        }
        assert!(check_pages(&all, "application/json", 150).await >= 3);
        assert!(check_pages(&all, METADATA_JSON, 400).await >= 1);
        // The second round splices what the first compressed.
        if round > 0 {
            assert!(
                reused(&r8s).await > before + 1000.0,
                "round {round}: no run reused"
            );
        }
        // Churn between rounds: changed pods, deleted ones, new ones.
        churn(&sim, round);
        let target = sim.sim.store.current_rv();
        let guard = HangGuard::new();
        loop {
            let v = fetch(
                &format!("{}/api/v1/pods?resourceVersion=0&limit=1", r8s.url()),
                "application/json",
                false,
            )
            .await;
            let rv: u64 = v.json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            if rv >= target {
                break;
            }
            guard.check(|| format!("r8s did not reach {target}"));
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    r8s.stop().await;
    sim.stop().await;
}

/// Changes 40 pods of the sim, deletes 3 and copies 3 under new names.
fn churn(sim: &r8s_sim::SimHandle, round: usize) {
    use r8s_sim::store::{Mutation, key};
    let res = r8s_sim::resources::pods_idx();
    for n in 0..46 {
        let ns = format!("ns-{}", n % 3);
        let keys = sim.sim.store.keys_in_namespace(res, &ns);
        let k = keys[(n * 13 + round * 7) % keys.len()].clone();
        let name = k.rsplit('/').next().unwrap().to_string();
        match n {
            0..40 => sim.touch(&ns, &name, round * 100 + n),
            40..43 => {
                sim.sim
                    .store
                    .mutate(res, &k, |_, _| Ok(Mutation::Delete))
                    .unwrap();
            }
            _ => {
                let mut v = sim.sim.store.get(res, &k).unwrap().value();
                let copy = format!("{name}-copy{round}");
                v["metadata"]["name"] = copy.clone().into();
                v["metadata"]["uid"] = format!("copy-{round}-{n}").into();
                let nk = key(Some(&ns), &copy);
                sim.sim
                    .store
                    .mutate(res, &nk, |_, _| Ok(Mutation::Put(v)))
                    .unwrap();
            }
        }
    }
}

/// The error answers of a cached read, from r8s and from the sim (kube-apiserver's stand-in).
async fn error_answer(base: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let r = send(
        "GET",
        &format!("{base}/api/v1/namespaces/ns-0/pods/no-such-pod?resourceVersion=0"),
        &[("accept", accept)],
        None,
    )
    .await;
    let ct = r.headers[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    (r.status.as_u16(), ct, r.body.to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn should_negotiate_errors_as_the_apiserver_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let metadata =
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let cases = [
        // client-go's metadata client: the protobuf clause asks for a
        // transform, which an error cannot take; JSON is next.
        (
            format!("{metadata},application/json"),
            "application/json",
            false,
        ),
        // Without a JSON fallback: WriteRawJSON's indented JSON.
        (metadata.to_string(), "application/json", true),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io".to_string(),
            "application/json",
            true,
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json".to_string(),
            "application/json",
            false,
        ),
        // A plain protobuf client gets a protobuf Status.
        (PROTOBUF.to_string(), PROTOBUF, false),
    ];
    for (accept, content_type, raw) in cases {
        let ours = error_answer(&r8s.url(), &accept).await;
        let theirs = error_answer(&sim.url(), &accept).await;
        assert_eq!(ours.0, 404, "{accept}");
        assert_eq!(ours.1, content_type, "{accept}");
        assert_eq!(ours, theirs, "{accept}: r8s and the apiserver differ");
        if content_type == "application/json" {
            let text = String::from_utf8(ours.2).unwrap();
            assert_eq!(
                text.starts_with("{\n  \"kind\": \"Status\""),
                raw,
                "{accept}: {text}"
            );
            assert_eq!(text.ends_with('\n'), !raw, "{accept}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["reason"], "NotFound");
        }
    }
    r8s.stop().await;
    sim.stop().await;
}

/// A watch's whole body (it ends at `timeoutSeconds`), with `accept` and
/// maybe gzip; and its `content-encoding`.
async fn watch_body(url: &str, accept: &str, gzip: bool) -> (Vec<u8>, Option<String>) {
    let r = fetch(url, accept, gzip).await;
    let enc = r
        .headers
        .get("content-encoding")
        .map(|v| v.to_str().unwrap().to_string());
    (r.body.to_vec(), enc)
}

fn gunzip_one(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    let mut multi = Vec::new();
    flate2::read::MultiGzDecoder::new(b)
        .read_to_end(&mut multi)
        .unwrap();
    assert!(out == multi);
    out
}

#[tokio::test(flavor = "multi_thread")]
async fn should_gzip_streaming_lists_as_kube_apiserver_1_37_does() {
    let mut cfg = sim_config();
    cfg.minor = 37;
    cfg.pods = 400;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let base = format!("{}/api/v1/pods?watch=1&timeoutSeconds=2", r8s.url());
    let list = format!(
        "{base}&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true"
    );
    // No change meanwhile, no periodic bookmark within 2 s: the gzip stream
    // holds exactly the plain one's bytes (initial events, the end bookmark).
    for accept in [
        "application/json",
        PROTOBUF,
        METADATA_PB.replace("List", "").as_str(),
    ] {
        for round in 0..2 {
            let (plain, enc) = watch_body(&list, accept, false).await;
            assert_eq!(enc, None);
            let (gz, enc) = watch_body(&list, accept, true).await;
            assert_eq!(enc.as_deref(), Some("gzip"), "{accept}");
            let unzipped = gunzip_one(&gz);
            assert!(
                unzipped == plain,
                "{accept}, round {round}: the gzip stream is not the stream"
            );
            assert!(
                gz.len() * 5 < plain.len(),
                "{accept}: {} of {}",
                gz.len(),
                plain.len()
            );
        }
    }
    // A plain watch is never compressed.
    let (_, enc) = watch_body(
        &format!("{base}&resourceVersion=0"),
        "application/json",
        true,
    )
    .await;
    assert_eq!(enc, None);
    r8s.stop().await;
    sim.stop().await;
}

/// kube-apiserver compresses streaming lists only from 1.37
/// (`WatchListCompression`): in front of 1.36, r8s answers a client that
/// accepts gzip as 1.36 does, uncompressed.
#[tokio::test(flavor = "multi_thread")]
async fn should_not_gzip_streaming_lists_where_the_upstreams_version_does_not() {
    let mut cfg = sim_config();
    cfg.pods = 400;
    cfg.minor = 36;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let path = "/api/v1/pods?watch=1&timeoutSeconds=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true";
    for accept in ["application/json", PROTOBUF] {
        let headers = [("accept", accept), ("accept-encoding", "gzip")];
        let direct = send("GET", &format!("{}{path}", sim.url()), &headers, None).await;
        assert_eq!(
            direct.headers.get("content-encoding"),
            None,
            "{accept}: the sim, as 1.36, does not compress"
        );
        let (cached, enc) = watch_body(&format!("{}{path}", r8s.url()), accept, true).await;
        assert_eq!(enc, None, "{accept}: nor does r8s in front of it");
        assert!(cached.len() > 400 * 500 && direct.body.len() > 400 * 500);
    }
    r8s.stop().await;
    sim.stop().await;
}

/// A gzip watch stream read as it arrives, inflated the way Go's
/// `compress/flate` hands bytes over (client-go's): only up to the last
/// sync point (an empty stored block), the end of the window aside.
struct GoReader {
    body: hyper::body::Incoming,
    raw: Vec<u8>,
    inflate: flate2::Decompress,
    plain: Vec<u8>,
    /// The final deflate block is in.
    ended: bool,
}

impl GoReader {
    fn new(body: hyper::body::Incoming) -> Self {
        GoReader {
            body,
            raw: Vec::new(),
            inflate: flate2::Decompress::new(false),
            plain: Vec::new(),
            ended: false,
        }
    }

    /// Reads the next frame within `wait`; false if none came (or the end).
    async fn read(&mut self, wait: Duration) -> bool {
        use http_body_util::BodyExt;
        let Ok(frame) = tokio::time::timeout(wait, self.body.frame()).await else {
            return false;
        };
        let Some(frame) = frame else { return false };
        let Ok(data) = frame.unwrap().into_data() else {
            return true;
        };
        self.raw.extend_from_slice(&data);
        let mut input: &[u8] = &data;
        if self.raw.len() == data.len() {
            input = &input[10..]; // the gzip header
        }
        while !input.is_empty() && !self.ended {
            let before = self.inflate.total_in();
            self.plain.reserve(64 * 1024);
            let status = self
                .inflate
                .decompress_vec(input, &mut self.plain, flate2::FlushDecompress::Sync)
                .unwrap();
            // What follows the final block is the trailer, not deflate.
            self.ended = status == flate2::Status::StreamEnd;
            input = &input[(self.inflate.total_in() - before) as usize..];
        }
        true
    }

    /// Reads until nothing comes for 300 ms, then says whether what arrived
    /// ends on a sync point: whether a Go client has all of it.
    async fn settle(&mut self) -> bool {
        while self.read(Duration::from_millis(300)).await {}
        self.raw.ends_with(&[0, 0, 0xff, 0xff])
    }

    /// The whole event lines inflated so far.
    fn lines(&self) -> Vec<serde_json::Value> {
        // Whole lines only: a chunk of the initial events may end mid-line.
        let end = self
            .plain
            .iter()
            .rposition(|b| *b == b'\n')
            .map_or(0, |i| i + 1);
        self.plain[..end]
            .split(|b| *b == b'\n')
            .filter(|l| !l.is_empty())
            .map(|l| serde_json::from_slice(l).unwrap())
            .collect()
    }
}

fn initial_events_ended(seen: &[serde_json::Value]) -> bool {
    seen.iter().any(|e| {
        e["type"] == "BOOKMARK"
            && e["object"]["metadata"]["annotations"]["k8s.io/initial-events-end"] == "true"
    })
}

/// Opens a gzip streaming list of pods at `base`.
async fn gzip_watch_list(base: &str) -> GoReader {
    let url = format!(
        "{base}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=6"
    );
    let req = http::Request::get(&url)
        .header("accept-encoding", "gzip")
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.headers()["content-encoding"], "gzip");
    GoReader::new(resp.into_body())
}

#[tokio::test(flavor = "multi_thread")]
async fn should_send_each_event_of_a_gzip_streaming_list_as_it_happens() {
    let mut cfg = sim_config();
    cfg.minor = 37;
    cfg.pods = 300;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    // The sim's own stream ends each flush on a sync point as well (what
    // r8s's reflector reads, and what the informer tool checks against).
    let mut direct = gzip_watch_list(&sim.url()).await;
    assert!(
        direct.settle().await,
        "the sim's flush ends off a sync point"
    );
    assert!(initial_events_ended(&direct.lines()));
    drop(direct);
    let mut stream = gzip_watch_list(&r8s.url()).await;
    // Inflated as it arrives: every event must be readable once its bytes
    // are in, without waiting for more (each is flushed).
    let mut touched = false;
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        assert!(
            stream.read(deadline - Instant::now()).await,
            "the events come while the watch is open"
        );
        let seen = stream.lines();
        if initial_events_ended(&seen) && !touched {
            assert_eq!(seen.iter().filter(|e| e["type"] == "ADDED").count(), 300);
            // Nothing follows the bookmark until a change: a Go client must
            // have it already.
            assert!(stream.settle().await, "the bookmark is not flushed");
            for n in 0..3 {
                sim.touch("ns-0", &first_pod(&sim, n), 900 + n);
            }
            touched = true;
        }
        let modified = seen.iter().filter(|e| e["type"] == "MODIFIED").count();
        if touched && modified == 3 {
            break;
        }
    }
    assert!(stream.settle().await, "an event is not flushed");
    // The rest of the stream, to its clean end: one gzip member whose
    // trailer checks out.
    while stream.read(Duration::from_secs(10)).await {}
    let whole = gunzip_one(&stream.raw);
    assert!(whole.starts_with(&stream.plain));
    r8s.stop().await;
    sim.stop().await;
}

/// The name of the `n`th pod of namespace ns-0.
fn first_pod(sim: &r8s_sim::SimHandle, n: usize) -> String {
    let keys = sim
        .sim
        .store
        .keys_in_namespace(r8s_sim::resources::pods_idx(), "ns-0");
    keys[n].rsplit('/').next().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_kube_rs_a_gzip_streaming_list() {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::{WatchStreamExt, reflector, watcher};
    let mut cfg = sim_config();
    cfg.minor = 37;
    cfg.pods = 300;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let before = {
        let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        ["reused", "compressed", "live"]
            .iter()
            .map(|h| sample(&m, &format!("r8s_list_gzip_items_total{{how=\"{h}\"}}")))
            .sum::<f64>()
    };
    // kube-rs's `gzip` feature unzips what comes gzipped. It asks watches
    // for `identity` (its decoder reads one gzip member); r8s's stream is a
    // single member, so a
    // kube-rs client that asks for gzip on watches too reads it.
    let mut config = kube::Config::new(r8s.url().parse().unwrap());
    config.headers.push((
        http::header::ACCEPT_ENCODING,
        http::HeaderValue::from_static("gzip"),
    ));
    let client = kube::Client::try_from(config).unwrap();
    let api: kube::Api<Pod> = kube::Api::all(client);
    let (reader, writer) = reflector::store();
    let config = watcher::Config::default().streaming_lists().any_semantic();
    let stream = reflector(writer, watcher(api, config)).applied_objects();
    let task = tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(ev) = s.next().await {
            ev.expect("a gzip streaming list through r8s works");
        }
    });
    tokio::time::timeout(HANG, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    sim.touch("ns-1", &pod_in(&sim, "ns-1"), 4242);
    let guard = HangGuard::new();
    loop {
        let state = reader.state();
        let touched = state.iter().any(|p| {
            p.metadata
                .annotations
                .as_ref()
                .is_some_and(|a| a.get("r8s.dev/touch").map(String::as_str) == Some("4242"))
        });
        if state.len() == 300 && touched {
            break;
        }
        guard.check(|| format!("the reflector has {} pods", state.len()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    task.abort();
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let after: f64 = ["reused", "compressed", "live"]
        .iter()
        .map(|h| sample(&m, &format!("r8s_list_gzip_items_total{{how=\"{h}\"}}")))
        .sum();
    assert!(
        after - before >= 300.0,
        "the initial events were not compressed ({before} → {after})"
    );
    r8s.stop().await;
    sim.stop().await;
}

fn pod_in(sim: &r8s_sim::SimHandle, ns: &str) -> String {
    let keys = sim
        .sim
        .store
        .keys_in_namespace(r8s_sim::resources::pods_idx(), ns);
    keys[0].rsplit('/').next().unwrap().to_string()
}

/// r8s caching pods from `sim` through a byte-counting link, its lists
/// and watches asking for gzip or not, relisting with streaming lists or
/// paged LISTs: the bytes its start read from the upstream.
async fn start_through_link(
    sim: &r8s_sim::SimHandle,
    compression: bool,
    streaming_lists: bool,
) -> (R8s, r8s_sim::fault::Forwarder, u64) {
    let link = r8s_sim::fault::Forwarder::start(sim.addr).await;
    let r = r8s_in_front_of(link.url())
        .caching(&["pods"])
        .with(|c| {
            c.upstream.compression = compression;
            c.cache.streaming_lists = streaming_lists;
        })
        .start()
        .await;
    let bytes = link.bytes_to_clients();
    (r, link, bytes)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_read_its_upstream_gzipped_as_client_go_does() {
    let mut cfg = sim_config();
    cfg.minor = 37;
    cfg.pods = 2000;
    cfg.namespaces = 4;
    let sim = start_sim(cfg).await;
    let sim_list = get(&format!("{}/api/v1/pods", sim.url())).await.json();
    let items = |v: &serde_json::Value| v["items"].as_array().unwrap().clone();
    for streaming in [true, false] {
        let mut bytes = [0u64; 2];
        for (i, compression) in [false, true].into_iter().enumerate() {
            let (r, _link, n) = start_through_link(&sim, compression, streaming).await;
            bytes[i] = n;
            // What r8s serves is exactly the upstream's state, in both encodings.
            let json = fetch(
                &format!("{}/api/v1/pods?resourceVersion=0", r.url()),
                "application/json",
                false,
            )
            .await
            .json();
            let (a, b) = (items(&json), items(&sim_list));
            if a != b {
                let i = a.iter().zip(b.iter()).position(|(x, y)| x != y);
                eprintln!(
                    "{} vs {} items; first difference at {i:?}",
                    a.len(),
                    b.len()
                );
                if let Some(i) = i {
                    eprintln!(
                        "r8s: {}
sim: {}",
                        a[i], b[i]
                    );
                }
            }
            assert!(
                a == b,
                "streaming {streaming}, gzip {compression}: the cache is not the upstream's state"
            );
            let pb = fetch(
                &format!("{}/api/v1/pods?resourceVersion=0", r.url()),
                PROTOBUF,
                false,
            )
            .await;
            assert!(pb.body.len() > 2000 * 1000);
            r.stop().await;
        }
        println!(
            "streaming lists {streaming}: a start read {} bytes plain, {} with gzip",
            bytes[0], bytes[1]
        );
        assert!(
            bytes[1] * 5 < bytes[0],
            "streaming lists {streaming}: {} bytes with gzip against {} plain",
            bytes[1],
            bytes[0]
        );
    }
    sim.stop().await;
}
