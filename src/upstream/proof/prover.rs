//! One resource's proofs: rounds reading the upstream's version `X`, and
//! probes that stamp the resource's stores once they are proven at `Y`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::ask::{get_json, probe, read_version};
use super::outcome::{ProofError, Unproven};
use crate::cache::ResourceCache;
use crate::cache::store::Serving;
use crate::cache::writer::Stamper;
use crate::metrics::{self, ProofStep};
use crate::sync::MutexExt;
use crate::upstream::Upstream;

/// Consecutive failed proofs after which a resource's consistent reads pass
/// at once, for [`FIRST_PAUSE`] doubling up to [`MAX_PAUSE`].
const FAILURES_BEFORE_PAUSE: u32 = 2;
const FIRST_PAUSE: Duration = Duration::from_secs(30);
const MAX_PAUSE: Duration = Duration::from_secs(300);
/// One resource's proofs: rounds reading `X`, probes proving the stores.
pub struct Prover {
    cache: Arc<ResourceCache>,
    /// Its series (`r8s_consistent_*`).
    pub(super) series: metrics::ProofSeries,
    /// The resource's stores, as a proof may move them.
    stampers: Vec<Stamper>,
    rounds: Mutex<Rounds>,
    probes: Mutex<Probes>,
    /// The highest `X` a failed probe (or failed round) leaves unproven:
    /// requests waiting for at most this pass through.
    pub(super) report: watch::Sender<u64>,
    /// Whether the resource is the upstream's own (not an aggregated API).
    local: Mutex<Option<bool>>,
    /// Until when consistent GETs pass at once: one waited past
    /// `read.consistent_get_wait_seconds` for the cache to catch up (a
    /// resource nobody writes, on an upstream whose bookmarks are slow).
    gets_pass_until: Mutex<Option<Instant>>,
}

#[derive(Default)]
struct Rounds {
    /// The round gathering requests: its LIST has not been sent yet.
    next: Option<watch::Sender<Option<Result<u64, Unproven>>>>,
    /// Whether a task is reading rounds.
    reading: bool,
}

#[derive(Default)]
struct Probes {
    /// The highest `X` a waiting request needs, and until when it waits.
    wanted: u64,
    until: Option<Instant>,
    running: bool,
    failures: u32,
    paused_until: Option<Instant>,
    /// When the pause began.
    paused_since: Option<Instant>,
}

impl Probes {
    /// Whether proving is paused; a pause from before the upstream's last
    /// return is lifted.
    fn paused(&mut self, returned_at: Option<Instant>) -> bool {
        if let (Some(since), Some(back)) = (self.paused_since, returned_at)
            && since < back
        {
            self.paused_until = None;
            self.paused_since = None;
            self.failures = 0;
        }
        self.paused_until.is_some_and(|t| Instant::now() < t)
    }
}

impl Prover {
    /// The prover of `cache`, stamping its stores through `stampers`.
    pub fn new(cache: Arc<ResourceCache>, stampers: Vec<Stamper>) -> Self {
        Prover {
            series: metrics::ProofSeries::new(&cache.label),
            cache,
            stampers,
            rounds: Mutex::new(Rounds::default()),
            probes: Mutex::new(Probes::default()),
            report: watch::Sender::new(0),
            local: Mutex::new(None),
            gets_pass_until: Mutex::new(None),
        }
    }

    /// Whether consistent GETs pass at once, a recent one having waited in vain.
    pub(super) fn gets_passing(&self) -> bool {
        self.gets_pass_until
            .locked()
            .is_some_and(|t| Instant::now() < t)
    }

    /// A consistent GET waited in vain: GETs pass at once for `period`.
    pub(super) fn get_was_slow(&self, period: Duration) {
        *self.gets_pass_until.locked() = Some(Instant::now() + period);
    }

    fn path(&self) -> String {
        self.cache.resource.gvr.collection_path()
    }

    /// The probe's collection and selector: a scoped cache's own watch sees
    /// only its scope, so its probe watches the same (its bookmark then
    /// follows every change in the scope).
    fn probed(&self) -> String {
        let path = self.cache.scope.collection_path(&self.cache.resource.gvr);
        match self.cache.scope.field_selector() {
            None => path,
            Some(s) => format!(
                "{path}?{}",
                crate::api::query::encode([("fieldSelector", s.as_str())])
            ),
        }
    }

    /// Whether recent proofs failed and consistent reads pass at once. A
    /// pause that began before the upstream's last return (`returned_at`)
    /// is over: the failures were the outage's.
    pub(super) fn paused(&self, returned_at: Option<Instant>) -> bool {
        self.probes.locked().paused(returned_at)
    }

    /// Counts a failed proof; pauses proving after a few in a row.
    fn failed(&self, why: &ProofError) {
        self.series.failed();
        let mut p = self.probes.locked();
        p.failures += 1;
        if p.failures >= FAILURES_BEFORE_PAUSE {
            let doublings = (p.failures - FAILURES_BEFORE_PAUSE).min(4);
            let pause = (FIRST_PAUSE * 2u32.pow(doublings)).min(MAX_PAUSE);
            p.paused_until = Some(Instant::now() + pause);
            p.paused_since = Some(Instant::now());
            tracing::info!(resource = %self.cache.label, error = %why, failures = p.failures, ?pause, "consistent reads pass through for a while: proofs keep failing");
        } else {
            tracing::debug!(resource = %self.cache.label, error = %why, "proof failed");
        }
    }

    /// A proof succeeded: failures are counted in a row, so the count restarts.
    pub(super) fn succeeded(&self) {
        let mut p = self.probes.locked();
        p.failures = 0;
        p.paused_until = None;
        p.paused_since = None;
    }

    /// Whether the upstream stores this resource itself: a group's
    /// `APIService` with a `service` is an aggregated API, whose versions
    /// are not the upstream's etcd revisions. Asked once.
    pub(super) async fn local(&self, upstream: &Arc<Upstream>) -> Result<bool, Unproven> {
        if let Some(l) = *self.local.locked() {
            return Ok(l);
        }
        let gvr = &self.cache.resource.gvr;
        if gvr.group().is_empty() {
            *self.local.locked() = Some(true);
            return Ok(true);
        }
        #[derive(Deserialize)]
        struct ApiService {
            #[serde(default)]
            spec: ApiServiceSpec,
        }
        #[derive(Deserialize, Default)]
        struct ApiServiceSpec {
            #[serde(default)]
            service: Option<serde_json::Value>,
        }
        let path = format!(
            "/apis/apiregistration.k8s.io/v1/apiservices/{}.{}",
            gvr.version(),
            gvr.group()
        );
        let local = match get_json::<ApiService>(upstream, &path, "application/json").await {
            Ok(s) => s.spec.service.is_none_or(|v| v.is_null()),
            // No aggregation layer (the built-in upstream): it serves
            // everything it has itself.
            Err(ProofError::Status {
                code: StatusCode::NOT_FOUND,
                ..
            }) => true,
            Err(e) => {
                tracing::debug!(resource = %self.cache.label, error = %e, "could not tell whether the resource is aggregated");
                return Err(Unproven::Failed);
            }
        };
        if !local {
            tracing::info!(resource = %self.cache.label, "an aggregated API: its consistent reads pass through");
        }
        *self.local.locked() = Some(local);
        Ok(local)
    }

    /// The upstream's version `X` of this resource, read by a round whose
    /// LIST is sent after this call began.
    pub(super) async fn target(
        self: &Arc<Self>,
        upstream: &Arc<Upstream>,
        timeout: Duration,
    ) -> Result<u64, Unproven> {
        let mut rx = {
            let mut r = self.rounds.locked();
            let rx = r
                .next
                .get_or_insert_with(|| watch::Sender::new(None))
                .subscribe();
            if !r.reading {
                r.reading = true;
                tokio::spawn(self.clone().read_rounds(upstream.clone(), timeout));
            }
            rx
        };
        let answer = rx.wait_for(Option::is_some).await;
        match answer.as_deref() {
            Ok(Some(r)) => *r,
            _ => Err(Unproven::Failed),
        }
    }

    /// Reads rounds one after another while requests are gathering.
    async fn read_rounds(self: Arc<Self>, upstream: Arc<Upstream>, timeout: Duration) {
        loop {
            let round = {
                let mut r = self.rounds.locked();
                match r.next.take() {
                    Some(round) => round,
                    None => {
                        r.reading = false;
                        return;
                    }
                }
            };
            // Everyone in `round` arrived before this LIST is sent.
            self.series.upstream(ProofStep::List);
            let x = tokio::time::timeout(timeout, read_version(&upstream, &self.path())).await;
            let answer = match x.unwrap_or(Err(ProofError::NoAnswer(timeout))) {
                Ok(x) => Ok(x),
                Err(e) => {
                    self.failed(&e);
                    Err(Unproven::Failed)
                }
            };
            round.send_replace(Some(answer));
        }
    }

    /// A request needs the stores at `x` by `until`: probes run until they are.
    pub(super) fn want(
        self: &Arc<Self>,
        x: u64,
        until: Instant,
        upstream: &Arc<Upstream>,
        timeout: Duration,
    ) {
        let mut p = self.probes.locked();
        p.wanted = p.wanted.max(x);
        p.until = Some(p.until.map_or(until, |u| u.max(until)));
        if !p.running {
            p.running = true;
            tokio::spawn(self.clone().run_probes(upstream.clone(), timeout));
        }
    }

    /// `C`: the lowest version of the resource's serving stores (the JSON
    /// and protobuf ones can be at different versions); `None` if none serves.
    fn lowest(&self) -> Option<u64> {
        self.stampers
            .iter()
            .map(Stamper::store)
            .filter(|s| s.serving() == Serving::Ready)
            .map(|s| s.current().rv)
            .min()
    }

    /// Probes while a request waits for a version the stores have not reached.
    async fn run_probes(self: Arc<Self>, upstream: Arc<Upstream>, timeout: Duration) {
        loop {
            let c = self.lowest();
            let wanted = {
                let mut p = self.probes.locked();
                let waiting = p.until.is_some_and(|u| Instant::now() < u);
                if !waiting || c.is_some_and(|c| c >= p.wanted) {
                    p.running = false;
                    return;
                }
                p.wanted
            };
            let result = match c {
                Some(c) if c > 0 => {
                    self.series.upstream(ProofStep::Probe);
                    probe(&upstream, &self.probed(), c, timeout).await
                }
                _ => Err(ProofError::Upstream(
                    "no store of the resource is serving".into(),
                )),
            };
            match result {
                Ok((floor, y)) => {
                    self.succeeded();
                    let stamps = self.stampers.iter().map(|s| async move {
                        if s.store().wait_for(floor, timeout).await {
                            s.advance_to(floor, y);
                        }
                    });
                    futures_util::future::join_all(stamps).await;
                    tracing::debug!(resource = %self.cache.label, floor, y, wanted, "proved");
                }
                Err(e) => {
                    self.failed(&e);
                    let mut p = self.probes.locked();
                    // Everyone waiting now passes through.
                    self.report.send_replace(p.wanted);
                    p.running = false;
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
pub(super) mod tests {
    use super::*;
    use crate::api::media::Encoding;
    use crate::api::{ApiResource, Gvr};
    use crate::cache::store::{Change, Store};
    use crate::cache::writer::Writer;

    /// A pods store at `rv` in `encoding`, and its writer.
    pub(crate) fn store(rv: u64, encoding: Encoding) -> (Writer, Arc<Store>) {
        Writer::for_tests("v1/pods", encoding, rv)
    }

    /// The pods cache of `store` (and `protobuf`).
    pub(crate) fn pods_cache(store: Arc<Store>, protobuf: Option<Arc<Store>>) -> ResourceCache {
        ResourceCache {
            scope: Default::default(),
            resource: ApiResource {
                gvr: Gvr::from_static("", "v1", "pods"),
                kind: "Pod".into(),
                namespaced: true,
                selectable: &[],
            },
            store,
            protobuf,
            list_kind: "PodList".into(),
            label: "v1/pods".into(),
            watch_metrics: Default::default(),
            custom_printer: Default::default(),
        }
    }

    /// An upstream that answers every request with `body` (a watch
    /// stream, ended by closing the connection) and records the request
    /// lines it was sent.
    async fn scripted_upstream(body: &'static str) -> (Arc<Upstream>, Arc<Mutex<Vec<String>>>) {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}", listener.local_addr().unwrap());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let log = seen.clone();
        tokio::spawn(async move {
            while let Ok((mut conn, _)) = listener.accept().await {
                let log = log.clone();
                tokio::spawn(async move {
                    let mut head = Vec::new();
                    let mut buf = [0u8; 1024];
                    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
                        match conn.read(&mut buf).await {
                            Ok(0) | Err(_) => return,
                            Ok(n) => head.extend_from_slice(&buf[..n]),
                        }
                    }
                    let line = String::from_utf8_lossy(&head);
                    log.locked()
                        .push(line.lines().next().unwrap_or("").to_string());
                    let answer = format!(
                        "HTTP/1.1 200 OK\r\ncontent-type: application/json\r\nconnection: close\r\n\r\n{body}"
                    );
                    let _ = conn.write_all(answer.as_bytes()).await;
                });
            }
        });
        let config = crate::config::UpstreamConfig {
            servers: vec![url],
            ..Default::default()
        };
        (Arc::new(Upstream::new(&config).await.unwrap()), seen)
    }

    /// The JSON and protobuf stores of one resource follow their own
    /// watches: a real probe (against an upstream whose watch from `C`
    /// sends a change at 25, then a bookmark at 40) starts from the lower
    /// store's version, and each store is stamped to 40 only once it has
    /// applied everything up to max(`C`, `L`) = 25.
    #[tokio::test]
    async fn should_probe_from_the_lowest_store_and_stamp_each_from_its_floor() {
        let (upstream, requests) = scripted_upstream(concat!(
            r#"{"type":"MODIFIED","object":{"metadata":{"name":"a","resourceVersion":"25"}}}"#,
            "\n",
            r#"{"type":"BOOKMARK","object":{"metadata":{"resourceVersion":"40"}}}"#,
            "\n",
        ))
        .await;
        let ((jw, json), (mut pw, pb)) = (store(30, Encoding::Json), store(20, Encoding::Protobuf));
        let cache = pods_cache(json.clone(), Some(pb.clone()));
        let p = Arc::new(Prover::new(
            Arc::new(cache),
            vec![jw.stamper(), pw.stamper()],
        ));
        assert_eq!(p.lowest(), Some(20), "C is the lower store's version");
        let within = Duration::from_secs(10);
        p.want(40, Instant::now() + within, &upstream, within);
        assert!(
            json.wait_for(40, within).await,
            "the JSON store (at 30, past the floor 25) is stamped"
        );
        assert_eq!(
            pb.current().rv,
            20,
            "the protobuf store has not applied 25: it is not stamped"
        );
        // Its own watch applies 25: the probe's stamp follows.
        pw.apply(vec![Change::Progress(25)]);
        assert!(pb.wait_for(40, within).await, "stamped once at the floor");
        assert_eq!(p.lowest(), Some(40));
        let sent = requests.locked().clone();
        assert_eq!(sent.len(), 1, "one probe: {sent:?}");
        assert!(
            sent[0].starts_with(
                "GET /api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=20&"
            ),
            "the probe watches from C: {sent:?}"
        );
    }
}
