//! Proofs that a cache is as fresh as its upstream, so that consistent
//! reads (no `resourceVersion`: every client-go ≥ 1.35 informer's streaming
//! list) can be answered from it.
//!
//! The proof, why it is sound and what it costs are explained once, in
//! `docs/consistent-reads.md`. Here: [`Proofs::prove`] reads the upstream's
//! version `X` in rounds (a one-object LIST sent after the request
//! arrived), is done if the store is already there, else runs probes (a
//! watch from the stores' lowest version `C`, believed only at its
//! pre-deadline BOOKMARK `Y`) and stamps each store that has applied
//! everything up to the probe's floor ([`Stamper::advance_to`]); the request
//! is then served "not older than `X`", or passes through when the proof
//! fails. Proofs that keep failing for a resource make its consistent reads
//! pass at once for a while.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;
use tokio::sync::watch;
use tokio::time::Instant;

use super::Upstream;
use super::client::{ReadError, Reply};
use crate::api::media::Encoding;
use crate::cache::ResourceCache;
use crate::cache::store::{Serving, Store};
use crate::cache::writer::Stamper;
use crate::config::Prove;
use crate::metrics::{self, ProofStep};
use crate::sync::MutexExt;

/// The probe watch's `timeoutSeconds`: the upstream's bookmark comes 2 s
/// before that deadline, about a second after the probe starts.
const PROBE_TIMEOUT_SECONDS: u64 = 3;
/// Consecutive failed proofs after which a resource's consistent reads pass
/// at once, for [`FIRST_PAUSE`] doubling up to [`MAX_PAUSE`].
const FAILURES_BEFORE_PAUSE: u32 = 2;
const FIRST_PAUSE: Duration = Duration::from_secs(30);
const MAX_PAUSE: Duration = Duration::from_secs(300);
/// How long the upstream's reported version is believed.
const VERSION_TTL: Duration = Duration::from_secs(60);
/// The most of a one-object LIST or `/version` r8s reads.
const MAX_ANSWER: usize = 4 << 20;

/// Which consistent read is being proven (its metric label is the same).
pub type ConsistentKind = metrics::ConsistentRead;

/// Why a consistent read was not proven (it passes through).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Unproven {
    /// Proving is off for this kind of read (`pass`).
    Off,
    /// Not an upstream or resource r8s proves against: older than 1.31
    /// under `auto`, or an aggregated API.
    Unprovable,
    /// The proof failed (its LIST or probe), did not complete in time, or
    /// recent ones failed.
    Failed,
}

/// What proving needs from the configuration (`read.*`).
#[derive(Debug, Clone)]
pub struct ProofPolicy {
    /// `read.consistent_streaming_lists`.
    pub streaming_lists: Prove,
    /// `read.consistent_lists`.
    pub lists: Prove,
    /// `read.prove_timeout_seconds`.
    pub timeout: Duration,
}

/// Why one step of a proof failed (logged; the request passes through).
#[derive(Debug, thiserror::Error)]
enum ProofError {
    #[error("{0}")]
    Upstream(String),
    #[error("{what} answered {code}")]
    Status {
        what: &'static str,
        code: StatusCode,
    },
    #[error("the probe watch sent an ERROR event")]
    ErrorEvent,
    #[error("the probe watch ended before its bookmark")]
    EndedEarly,
    #[error("no answer within {0:?}")]
    NoAnswer(Duration),
    #[error("no bookmark within {0:?}")]
    NoBookmark(Duration),
    #[error("malformed {0}")]
    Malformed(&'static str),
}

/// Every cached resource's prover, and what they share.
pub struct Proofs {
    upstream: Arc<Upstream>,
    policy: ProofPolicy,
    provers: HashMap<crate::api::Gvr, Arc<Prover>>,
    /// Whether the upstream reported 1.31 or later, and when it was asked.
    version: Mutex<Option<(Instant, bool)>>,
}

impl Proofs {
    /// Provers for `caches`, against `upstream`; each stamps its resource's
    /// stores through the [`Stamper`]s `stampers` holds for it.
    pub fn new(
        upstream: Arc<Upstream>,
        caches: &crate::cache::Caches,
        mut stampers: HashMap<crate::api::Gvr, Vec<Stamper>>,
        policy: ProofPolicy,
    ) -> Self {
        let provers = caches
            .iter()
            .map(|(gvr, c)| {
                let stamps = stampers.remove(gvr).unwrap_or_default();
                (gvr.clone(), Arc::new(Prover::new(c.clone(), stamps)))
            })
            .collect();
        Proofs {
            upstream,
            policy,
            provers,
            version: Mutex::new(None),
        }
    }

    /// Waits until `store` (of `cache`) is provably at least as fresh as the
    /// upstream was when this call began, and returns the version it must
    /// be served "not older than"; or why not (the request passes through).
    /// Records `r8s_consistent_reads_total` and the proof's latency.
    pub async fn prove(
        &self,
        cache: &ResourceCache,
        store: &Store,
        kind: ConsistentKind,
    ) -> Result<u64, Unproven> {
        let start = Instant::now();
        let r = self.try_prove(cache, store, kind, start).await;
        if r != Err(Unproven::Off)
            && let Some(p) = self.provers.get(&cache.resource.gvr)
        {
            p.series.read(kind, r.is_ok(), start.elapsed());
        }
        r
    }

    async fn try_prove(
        &self,
        cache: &ResourceCache,
        store: &Store,
        kind: ConsistentKind,
        start: Instant,
    ) -> Result<u64, Unproven> {
        let mode = match kind {
            ConsistentKind::StreamingList => self.policy.streaming_lists,
            ConsistentKind::List => self.policy.lists,
        };
        if mode == Prove::Pass {
            return Err(Unproven::Off);
        }
        let prover = self
            .provers
            .get(&cache.resource.gvr)
            .ok_or(Unproven::Unprovable)?;
        if prover.paused() {
            return Err(Unproven::Failed);
        }
        let deadline = start + self.policy.timeout;
        if mode == Prove::Auto && !by(deadline, self.upstream_proves()).await? {
            return Err(Unproven::Unprovable);
        }
        if !by(deadline, prover.local(&self.upstream)).await?? {
            return Err(Unproven::Unprovable);
        }
        let x = by(deadline, prover.target(&self.upstream, self.policy.timeout)).await??;
        if store.current().rv >= x {
            prover.succeeded();
            return Ok(x);
        }
        // Subscribed before the probe can fail: only failures from now on count.
        let mut reports = prover.report.subscribe();
        prover.want(x, deadline, &self.upstream, self.policy.timeout);
        let failed = async {
            while reports.changed().await.is_ok() {
                if *reports.borrow_and_update() >= x {
                    return;
                }
            }
            std::future::pending::<()>().await
        };
        tokio::select! {
            reached = store.wait_for(x, deadline.saturating_duration_since(Instant::now())) => {
                if !reached {
                    return Err(Unproven::Failed);
                }
                prover.succeeded();
                Ok(x)
            }
            () = failed => Err(Unproven::Failed),
        }
    }

    /// Whether the upstream reports kube-apiserver 1.31 or later (asked at
    /// most once a minute; an upstream that cannot say is not proven against).
    async fn upstream_proves(&self) -> bool {
        if let Some((at, ok)) = *self.version.locked()
            && at.elapsed() < VERSION_TTL
        {
            return ok;
        }
        match get_json::<Version>(&self.upstream, "/version", "application/json").await {
            Ok(v) => {
                let ok = v.at_least(1, 31);
                if !ok {
                    tracing::info!(major = %v.major, minor = %v.minor, "the upstream predates 1.31: consistent reads pass through (read.consistent_streaming_lists = \"prove\" forces proofs)");
                }
                *self.version.locked() = Some((Instant::now(), ok));
                ok
            }
            Err(e) => {
                tracing::debug!(error = %e, "GET /version failed; consistent reads pass through");
                false
            }
        }
    }
}

/// `f`, unless `deadline` comes first (the proof failed: too slow).
async fn by<T>(deadline: Instant, f: impl std::future::Future<Output = T>) -> Result<T, Unproven> {
    tokio::time::timeout_at(deadline, f)
        .await
        .map_err(|_| Unproven::Failed)
}

/// `/version`, the part that matters here.
#[derive(Deserialize)]
struct Version {
    major: String,
    minor: String,
}

impl Version {
    /// Whether it is `major.minor` or later (`"31+"` reads as 31).
    fn at_least(&self, major: u64, minor: u64) -> bool {
        let num = |s: &str| {
            s.trim_end_matches(|c: char| !c.is_ascii_digit())
                .parse::<u64>()
                .ok()
        };
        match (num(&self.major), num(&self.minor)) {
            (Some(a), Some(b)) => (a, b) >= (major, minor),
            _ => false,
        }
    }
}

/// One resource's proofs: rounds reading `X`, probes proving the stores.
struct Prover {
    cache: Arc<ResourceCache>,
    /// Its series (`r8s_consistent_*`).
    series: metrics::ProofSeries,
    /// The resource's stores, as a proof may move them.
    stampers: Vec<Stamper>,
    rounds: Mutex<Rounds>,
    probes: Mutex<Probes>,
    /// The highest `X` a failed probe (or failed round) leaves unproven:
    /// requests waiting for at most this pass through.
    report: watch::Sender<u64>,
    /// Whether the resource is the upstream's own (not an aggregated API).
    local: Mutex<Option<bool>>,
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
}

impl Prover {
    fn new(cache: Arc<ResourceCache>, stampers: Vec<Stamper>) -> Self {
        Prover {
            series: metrics::ProofSeries::new(&cache.label),
            cache,
            stampers,
            rounds: Mutex::new(Rounds::default()),
            probes: Mutex::new(Probes::default()),
            report: watch::Sender::new(0),
            local: Mutex::new(None),
        }
    }

    fn path(&self) -> String {
        self.cache.resource.gvr.collection_path()
    }

    /// Whether recent proofs failed and consistent reads pass at once.
    fn paused(&self) -> bool {
        self.probes
            .locked()
            .paused_until
            .is_some_and(|t| Instant::now() < t)
    }

    /// Counts a failed proof; pauses proving after a few in a row.
    fn failed(&self, why: &ProofError) {
        let mut p = self.probes.locked();
        p.failures += 1;
        if p.failures >= FAILURES_BEFORE_PAUSE {
            let doublings = (p.failures - FAILURES_BEFORE_PAUSE).min(4);
            let pause = (FIRST_PAUSE * 2u32.pow(doublings)).min(MAX_PAUSE);
            p.paused_until = Some(Instant::now() + pause);
            tracing::info!(resource = %self.cache.label, error = %why, failures = p.failures, ?pause, "consistent reads pass through for a while: proofs keep failing");
        } else {
            tracing::debug!(resource = %self.cache.label, error = %why, "proof failed");
        }
    }

    /// A proof succeeded: failures are counted in a row, so the count restarts.
    fn succeeded(&self) {
        let mut p = self.probes.locked();
        p.failures = 0;
        p.paused_until = None;
    }

    /// Whether the upstream stores this resource itself: a group's
    /// `APIService` with a `service` is an aggregated API, whose versions
    /// are not the upstream's etcd revisions. Asked once.
    async fn local(&self, upstream: &Arc<Upstream>) -> Result<bool, Unproven> {
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
    async fn target(
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
    fn want(self: &Arc<Self>, x: u64, until: Instant, upstream: &Arc<Upstream>, timeout: Duration) {
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
                    probe(&upstream, &self.path(), c, timeout).await
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

/// `GET path` with r8s's credentials, answered 200 (`what` names it in the error).
async fn get(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &'static str,
    what: &'static str,
) -> Result<Reply, ProofError> {
    let reply = upstream
        .get(path, accept)
        .await
        .map_err(|e| ProofError::Upstream(e.to_string()))?;
    if reply.status() != StatusCode::OK {
        return Err(ProofError::Status {
            what,
            code: reply.status(),
        });
    }
    Ok(reply)
}

/// `GET path` with r8s's credentials, a JSON answer of at most [`MAX_ANSWER`].
async fn get_json<T: serde::de::DeserializeOwned>(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &'static str,
) -> Result<T, ProofError> {
    get(upstream, path, accept, "a GET")
        .await?
        .json(MAX_ANSWER)
        .await
        .map_err(|e| match e {
            ReadError::Json(_) => ProofError::Malformed("JSON answer"),
            e => ProofError::Upstream(e.to_string()),
        })
}

/// The metadata of a list or object: all a proof reads of either.
#[derive(Deserialize)]
struct Meta {
    metadata: MetaRv,
}

#[derive(Deserialize)]
struct MetaRv {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

fn parse_rv(s: &str, what: &'static str) -> Result<u64, ProofError> {
    s.parse::<u64>()
        .ok()
        .filter(|rv| *rv > 0)
        .ok_or(ProofError::Malformed(what))
}

/// `X`: the upstream's current version of the resource at `path`, from a
/// consistent one-object LIST (metadata only).
async fn read_version(upstream: &Arc<Upstream>, path: &str) -> Result<u64, ProofError> {
    let list: Meta = get_json(
        upstream,
        &format!("{path}?limit=1"),
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await
    .map_err(|e| match e {
        ProofError::Status { code, .. } => ProofError::Status {
            what: "the one-object LIST",
            code,
        },
        e => e,
    })?;
    parse_rv(&list.metadata.resource_version, "LIST version")
}

/// One line of the probe's watch stream: its type and its object's version.
#[derive(Deserialize)]
struct ProbeEvent {
    #[serde(rename = "type")]
    kind: String,
    object: Meta,
}

/// Watches `path` from `c` until the upstream's pre-deadline BOOKMARK at
/// `Y`: every change in (`c`, `Y`] came before it, the last at `L`.
/// Returns (max(`c`, `L`), `Y`): a store at the first is the upstream's
/// state at the second.
async fn probe(
    upstream: &Arc<Upstream>,
    path: &str,
    c: u64,
    within: Duration,
) -> Result<(u64, u64), ProofError> {
    let read = async {
        let uri = format!(
            "{path}?watch=1&allowWatchBookmarks=true&resourceVersion={c}&timeoutSeconds={PROBE_TIMEOUT_SECONDS}"
        );
        let reply = get(
            upstream,
            &uri,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
            "the probe watch",
        )
        .await?;
        let mut lines = reply.units(Encoding::Json, MAX_ANSWER);
        let mut last = c;
        loop {
            let line = match lines.next().await {
                Ok(Some(line)) => line,
                Ok(None) => return Err(ProofError::EndedEarly),
                Err(ReadError::TooLong(_)) => {
                    return Err(ProofError::Malformed("watch line (too long)"));
                }
                Err(e) => return Err(ProofError::Upstream(e.to_string())),
            };
            let ev: ProbeEvent =
                serde_json::from_slice(&line).map_err(|_| ProofError::Malformed("watch line"))?;
            match ev.kind.as_str() {
                "ERROR" => return Err(ProofError::ErrorEvent),
                "BOOKMARK" => {
                    let y = parse_rv(&ev.object.metadata.resource_version, "bookmark")?;
                    if y < last {
                        return Err(ProofError::Malformed("bookmark older than an event"));
                    }
                    return Ok((last, y));
                }
                "ADDED" | "MODIFIED" | "DELETED" => {
                    let rv = parse_rv(&ev.object.metadata.resource_version, "event version")?;
                    last = last.max(rv);
                }
                _ => return Err(ProofError::Malformed("event type")),
            }
        }
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| ProofError::NoBookmark(within))?
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::media::Encoding;
    use crate::api::{ApiResource, Gvr};
    use crate::cache::budget::Budget;
    use crate::cache::store::{Change, Limits, Options};
    use crate::cache::writer::Writer;
    use crate::metrics::StoreLabels;

    fn store(rv: u64, encoding: Encoding) -> (Writer, Arc<Store>) {
        let limits = Limits {
            retention: Duration::from_secs(60),
            max_retained: 10,
            history_events: 100,
            history_bytes: 0,
            max_staleness: Duration::ZERO,
            serve_stale: false,
        };
        let (mut w, s) = Store::new(Options {
            limits,
            budget: Budget::unlimited(),
            encoding,
            node_index: true,
            labels: StoreLabels::new("v1/pods".into(), encoding.as_str()),
        });
        w.apply(vec![Change::Replace(imbl::OrdMap::new(), rv)]);
        (w, s)
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
        let cache = ResourceCache {
            resource: ApiResource {
                gvr: Gvr::from_static("", "v1", "pods"),
                kind: "Pod".into(),
                namespaced: true,
            },
            store: json.clone(),
            protobuf: Some(pb.clone()),
            list_kind: "PodList".into(),
            label: "v1/pods".into(),
            watch_metrics: Default::default(),
        };
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

    #[test]
    fn should_read_kube_apiserver_versions() {
        let v = |major: &str, minor: &str| Version {
            major: major.into(),
            minor: minor.into(),
        };
        assert!(v("1", "31").at_least(1, 31));
        assert!(v("1", "35+").at_least(1, 31));
        assert!(!v("1", "30").at_least(1, 31));
        assert!(!v("1", "21+").at_least(1, 31));
        assert!(v("2", "0").at_least(1, 31));
        assert!(!v("", "").at_least(1, 31));
    }
}
