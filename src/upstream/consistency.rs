//! The consistency check: from time to time, proof that each cache holds
//! what the upstream holds, as kube-apiserver 1.34 checks its own watch
//! cache against etcd (KEP-4988).
//!
//! For each cached resource, one paged, metadata-only LIST (protobuf where
//! the upstream offers it) gives the namespace, name and resourceVersion of
//! every object, which are compared with each of the resource's stores:
//!
//! - at exactly the version the stores are at (`resourceVersionMatch=Exact`
//!   at the lowest of them; a store ahead is rewound to it with its event
//!   log), where the upstream can still serve that version;
//! - where it cannot (410: compacted, common for quiet resources), with the
//!   upstream's newest state at `U`, once each store has caught up with `U`
//!   and rewound to it: what events newer than the cache's version changed
//!   is left out by comparing at the same version.
//!
//! A difference is looked at again moments later; one still there is a
//! divergence: logged with up to 10 keys, counted, and the store relists
//! (its reflector is told). A check that cannot compare (the upstream
//! fails, a store moved on past its log) is inconclusive, never a
//! divergence.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use http::StatusCode;
use serde::Deserialize;
use tokio::sync::Notify;

use super::Upstream;
use crate::api::ApiResource;
use crate::api::query;
use crate::cache::scope::CacheScope;
use crate::cache::store::{Serving, Store};
use crate::codec::protobuf as pb;
use crate::metrics::{self, Consistency};
use crate::shutdown::Signal;

/// How long a difference is given to go away before it counts.
const CONFIRM_AFTER: Duration = Duration::from_secs(2);
/// How long a store may take to catch up with the upstream's newest version.
const CATCH_UP: Duration = Duration::from_secs(10);
/// Keys named in a divergence's log line.
const KEYS_LOGGED: usize = 10;
/// Items per LIST page.
const PAGE: usize = 500;
/// The most of one metadata page r8s reads (500 items' metadata is far less).
const MAX_PAGE: usize = 256 << 20;

/// One store of a resource, and how to make it relist.
pub struct Checked {
    /// The store.
    pub store: Arc<Store>,
    /// Rings its reflector to relist.
    pub relist: Arc<Notify>,
    /// Its checks' series (every result registered at 0).
    series: metrics::ConsistencySeries,
}

impl Checked {
    /// The store `store`, whose reflector `relist` rings.
    pub fn new(store: Arc<Store>, relist: Arc<Notify>) -> Self {
        let series = metrics::ConsistencySeries::new(store.labels());
        Checked {
            store,
            relist,
            series,
        }
    }
}

/// One cached resource and its stores.
pub struct Target {
    /// The resource.
    pub resource: ApiResource,
    /// Its stores (JSON, protobuf).
    pub stores: Vec<Checked>,
    /// Fires once its cache is retired: it is checked no more (its list
    /// would be the upstream's 404).
    pub retired: crate::shutdown::Signal,
}

/// The upstream's (key, resourceVersion) of every object at one version.
struct Listed {
    rv: u64,
    items: BTreeMap<String, u64>,
    bytes: u64,
}

/// Why the upstream's list could not be had.
#[derive(Debug)]
enum ListError {
    /// 410: the version asked for is compacted.
    Expired,
    /// Anything else.
    Failed(String),
}

/// What one comparison of a store found.
enum Found {
    /// The same objects at the same versions.
    Equal,
    /// These keys differ (missing, extra, or at another version).
    Differs(Vec<String>),
    /// No comparison was possible, and why.
    Inconclusive(String),
}

#[derive(Deserialize)]
struct JsonMeta {
    #[serde(default)]
    name: String,
    #[serde(default)]
    namespace: String,
    #[serde(default, rename = "resourceVersion")]
    resource_version: String,
    #[serde(default, rename = "continue")]
    cont: String,
}

#[derive(Deserialize)]
struct JsonItem {
    metadata: JsonMeta,
}

#[derive(Deserialize)]
struct JsonList {
    metadata: JsonMeta,
    #[serde(default)]
    items: Vec<JsonItem>,
}

fn key_of(namespace: &str, name: &str) -> String {
    if namespace.is_empty() {
        name.to_string()
    } else {
        format!("{namespace}/{name}")
    }
}

fn parse_rv(s: &str) -> Result<u64, ListError> {
    s.parse()
        .map_err(|_| ListError::Failed(format!("resourceVersion {s:?} is not an integer")))
}

/// One page of a `PartialObjectMetadataList` into `items`: its version and
/// continue token.
fn page(
    body: &[u8],
    protobuf: bool,
    items: &mut BTreeMap<String, u64>,
) -> Result<(u64, String), ListError> {
    if !protobuf {
        let list: JsonList =
            serde_json::from_slice(body).map_err(|e| ListError::Failed(e.to_string()))?;
        for i in list.items {
            let m = i.metadata;
            items.insert(
                key_of(&m.namespace, &m.name),
                parse_rv(&m.resource_version)?,
            );
        }
        return Ok((
            parse_rv(&list.metadata.resource_version)?,
            list.metadata.cont,
        ));
    }
    let bad = |e: pb::Malformed| ListError::Failed(e.to_string());
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let u = pb::unwrap(body).map_err(bad)?;
    let (mut rv, mut cont) = (String::new(), String::new());
    for f in pb::fields(u.raw) {
        let f = f.map_err(bad)?;
        let pb::Value::Bytes(v) = f.value else {
            continue;
        };
        match f.number {
            1 => {
                rv = text(pb::find(v, 2).map_err(bad)?);
                cont = text(pb::find(v, 3).map_err(bad)?);
            }
            2 => {
                let meta = pb::find(v, 1).map_err(bad)?.unwrap_or_default();
                let name = text(pb::find(meta, 1).map_err(bad)?);
                let ns = text(pb::find(meta, 3).map_err(bad)?);
                let item_rv = text(pb::find(meta, 6).map_err(bad)?);
                items.insert(key_of(&ns, &name), parse_rv(&item_rv)?);
            }
            _ => {}
        }
    }
    Ok((parse_rv(&rv)?, cont))
}

/// Compares a store's state with the upstream's (at the same version).
fn compare(store: &BTreeMap<&str, u64>, upstream: &BTreeMap<String, u64>) -> Vec<String> {
    let mut differ: Vec<String> = upstream
        .iter()
        .filter(|(k, rv)| store.get(k.as_str()) != Some(rv))
        .map(|(k, _)| k.clone())
        .collect();
    differ.extend(
        store
            .keys()
            .filter(|k| !upstream.contains_key(**k))
            .map(|k| k.to_string()),
    );
    differ.sort();
    differ
}

/// Checks every target sent on `added` (each cache as it is launched)
/// every `interval` until it is retired or `shutdown`, and once at the start
/// when `warm` (the caches came from snapshots). Those launched before this
/// task began are checked from the start, later ones from the next check on.
pub async fn run(
    upstream: Arc<Upstream>,
    mut added: tokio::sync::mpsc::UnboundedReceiver<Target>,
    interval: Duration,
    warm: bool,
    shutdown: Signal,
) {
    let mut targets = Vec::new();
    while let Ok(t) = added.try_recv() {
        targets.push(t);
    }
    if warm {
        // Once every store has resumed its watch (or given up on it), and 5
        // to 15 s later: not on top of the start's own requests, and not in
        // step with every replica of a fleet rolled at once.
        let settled = async {
            while !targets
                .iter()
                .flat_map(|t| &t.stores)
                .all(|s| s.store.settled() && !s.store.staleness().stale())
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            tokio::time::sleep(
                Duration::from_secs(5) + Duration::from_secs(10).mul_f64(fastrand::f64()),
            )
            .await;
        };
        tokio::select! {
            _ = settled => check_all(&upstream, &targets, &shutdown).await,
            _ = shutdown.wait() => return,
        }
    }
    loop {
        // 10 % of jitter: replicas started together drift apart.
        let next = interval.mul_f64(0.9 + 0.2 * fastrand::f64());
        tokio::select! {
            _ = tokio::time::sleep(next) => {}
            _ = shutdown.wait() => return,
        }
        while let Ok(t) = added.try_recv() {
            targets.push(t);
        }
        targets.retain(|t| !t.retired.fired());
        check_all(&upstream, &targets, &shutdown).await;
    }
}

async fn check_all(upstream: &Arc<Upstream>, targets: &[Target], shutdown: &Signal) {
    for t in targets {
        if shutdown.fired() {
            return;
        }
        // Retired during this round: its list would be the upstream's 404.
        if t.retired.fired() {
            continue;
        }
        check(upstream, t).await;
    }
}

/// Checks one resource: compares, and looks again at what differed.
async fn check(upstream: &Arc<Upstream>, t: &Target) {
    let started = Instant::now();
    let (first, bytes) = compare_all(upstream, t).await;
    let mut confirm = Vec::new();
    for (s, found) in t.stores.iter().zip(first) {
        match found {
            Found::Equal => s.series.check(Consistency::Equal),
            Found::Inconclusive(why) => {
                tracing::debug!(resource = %s.store.labels(), %why, "consistency check inconclusive");
                s.series.check(Consistency::Inconclusive);
            }
            Found::Differs(keys) => confirm.push((s, keys)),
        }
    }
    let mut total = bytes;
    if !confirm.is_empty() {
        tokio::time::sleep(CONFIRM_AFTER).await;
        let (again, bytes) = compare_all(upstream, t).await;
        total += bytes;
        for (s, keys) in confirm {
            let i = t
                .stores
                .iter()
                .position(|x| Arc::ptr_eq(&x.store, &s.store))
                .unwrap_or(0);
            let still: Vec<String> = match &again[i] {
                Found::Differs(now) => keys.into_iter().filter(|k| now.contains(k)).collect(),
                Found::Equal => Vec::new(),
                // Not looked at again: the first finding is not confirmed.
                Found::Inconclusive(_) => Vec::new(),
            };
            if still.is_empty() {
                s.series.check(Consistency::Transient);
                continue;
            }
            tracing::warn!(
                resource = %s.store.labels(),
                differing = still.len(),
                keys = ?still.iter().take(KEYS_LOGGED).collect::<Vec<_>>(),
                "the cache diverged from the upstream (objects missing, extra or at other versions, twice); relisting"
            );
            s.series.check(Consistency::Diverged);
            s.relist.notify_one();
        }
    }
    tracing::debug!(resource = %t.resource.gvr, upstream_bytes = total, took = ?started.elapsed(), "consistency check done");
}

/// One comparison of every store of `t` with the upstream: what each found,
/// and the bytes read from the upstream.
async fn compare_all(upstream: &Arc<Upstream>, t: &Target) -> (Vec<Found>, u64) {
    let serving = |s: &Checked| s.store.serving() == Serving::Ready && !s.store.staleness().stale();
    let Some(low) = t
        .stores
        .iter()
        .filter(|s| serving(s))
        .map(|s| s.store.current().rv)
        .min()
    else {
        return (
            t.stores
                .iter()
                .map(|_| Found::Inconclusive("not serving".into()))
                .collect(),
            0,
        );
    };
    // The stores of one resource share a scope (a node's pods): its list is of that.
    let scope = t
        .stores
        .first()
        .map(|s| s.store.scope().clone())
        .unwrap_or_default();
    let listed = match list(upstream, &t.resource, &scope, Some(low)).await {
        Ok(l) => Ok(l),
        Err(ListError::Expired) => list(upstream, &t.resource, &scope, None).await,
        Err(e) => Err(e),
    };
    let listed = match listed {
        Ok(l) => l,
        Err(ListError::Expired) => return (inconclusive(t, "the upstream's list expired"), 0),
        Err(ListError::Failed(why)) => return (inconclusive(t, &why), 0),
    };
    let mut found = Vec::new();
    for s in &t.stores {
        if !serving(s) {
            found.push(Found::Inconclusive("not serving".into()));
            continue;
        }
        if !s.store.wait_for(listed.rv, CATCH_UP).await {
            found.push(Found::Inconclusive(format!(
                "the cache did not reach the upstream's version {} within {CATCH_UP:?}",
                listed.rv
            )));
            continue;
        }
        let Some(v) = s.store.at(listed.rv) else {
            found.push(Found::Inconclusive(format!(
                "the cache can no longer tell its state at {}",
                listed.rv
            )));
            continue;
        };
        let mine: BTreeMap<&str, u64> = v.objects.values().map(|o| (&*o.key, o.rv)).collect();
        let differ = compare(&mine, &listed.items);
        found.push(if differ.is_empty() {
            Found::Equal
        } else {
            Found::Differs(differ)
        });
    }
    (found, listed.bytes)
}

fn inconclusive(t: &Target, why: &str) -> Vec<Found> {
    t.stores
        .iter()
        .map(|_| Found::Inconclusive(why.to_string()))
        .collect()
}

/// The upstream's objects of `resource` in `scope` (keys and versions), at
/// exactly `rv`, or at its newest version.
async fn list(
    upstream: &Arc<Upstream>,
    resource: &ApiResource,
    scope: &CacheScope,
    rv: Option<u64>,
) -> Result<Listed, ListError> {
    let mut items = BTreeMap::new();
    let mut cont = String::new();
    let mut bytes = 0;
    let limit = PAGE.to_string();
    let rv_s = rv.map(|r| r.to_string()).unwrap_or_default();
    loop {
        let mut pairs = vec![("limit", limit.as_str())];
        if !cont.is_empty() {
            pairs.push(("continue", cont.as_str()));
        } else if rv.is_some() {
            pairs.push(("resourceVersion", rv_s.as_str()));
            pairs.push(("resourceVersionMatch", "Exact"));
        }
        let uri = format!(
            "{}?{}{}",
            scope.collection_path(&resource.gvr),
            query::encode(pairs),
            scope.query_suffix()
        );
        let reply = upstream
            .get(
                &uri,
                "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1",
            )
            .await
            .map_err(|e| ListError::Failed(e.to_string()))?;
        match reply.status() {
            StatusCode::OK => {}
            StatusCode::GONE => return Err(ListError::Expired),
            s => return Err(ListError::Failed(format!("LIST: HTTP {s}"))),
        }
        let protobuf = reply.is_protobuf();
        let body = reply
            .bytes(MAX_PAGE)
            .await
            .map_err(|e| ListError::Failed(e.to_string()))?;
        bytes += body.len() as u64;
        let (at, next) = page(&body, protobuf, &mut items)?;
        if next.is_empty() {
            return Ok(Listed {
                rv: at,
                items,
                bytes,
            });
        }
        cont = next;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Gvr;
    use crate::api::media::Encoding;
    use crate::cache::writer::Writer;
    use crate::config::UpstreamConfig;
    use std::sync::Mutex;

    /// A target of `resource` whose one store serves an empty state at 5,
    /// and the trigger that retires it.
    fn target(
        resource: &'static str,
        kind: &str,
    ) -> (
        Target,
        crate::shutdown::Trigger,
        crate::cache::writer::Writer,
    ) {
        let (writer, store) = Writer::for_tests(&format!("v1/{resource}"), Encoding::Json, 5);
        let (trigger, retired) = crate::shutdown::channel();
        let t = Target {
            resource: ApiResource {
                gvr: Gvr::from_static("", "v1", resource),
                kind: kind.into(),
                namespaced: true,
                selectable: &[],
            },
            stores: vec![Checked::new(store, Arc::new(Notify::new()))],
            retired,
        };
        (t, trigger, writer)
    }

    /// The checks' cadence, in paused time: every `interval` give or take
    /// 10 %, a cache launched meanwhile from the next check on, a retired
    /// one no more.
    #[tokio::test(start_paused = true)]
    async fn should_check_every_interval_from_launch_to_retirement() {
        let upstream = Upstream::new(&UpstreamConfig {
            servers: vec!["http://127.0.0.1:1".into()],
            ..Default::default()
        })
        .await
        .unwrap();
        let began = tokio::time::Instant::now();
        let asked: Arc<Mutex<Vec<(u64, String)>>> = Arc::default();
        let log = asked.clone();
        upstream.answer_with(Arc::new(move |parts| {
            let path = parts.uri.path().to_string();
            log.lock().unwrap().push((began.elapsed().as_secs(), path));
            http::Response::builder()
                .header("content-type", "application/json")
                .body(crate::body::full(
                    r#"{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{"resourceVersion":"5"},"items":[]}"#,
                ))
                .unwrap()
        }));
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        let (pods, retire_pods, _pods_writer) = target("pods", "Pod");
        tx.send(pods).unwrap_or_else(|_| panic!("sent"));
        let (stop, shutdown) = crate::shutdown::channel();
        let interval = Duration::from_secs(600);
        let task = tokio::spawn(run(Arc::new(upstream), rx, interval, false, shutdown));
        let wait = |s| tokio::time::sleep(Duration::from_secs(s));
        let checks = |asked: &Arc<Mutex<Vec<(u64, String)>>>| asked.lock().unwrap().clone();

        wait(539).await;
        assert!(
            checks(&asked).is_empty(),
            "none before 90 % of the interval"
        );
        wait(122).await;
        let first = checks(&asked);
        assert_eq!(first.len(), 1, "{first:?}");
        assert_eq!(first[0].1, "/api/v1/pods");
        assert!((540..=660).contains(&first[0].0), "{first:?}");

        // A cache launched now: checked from the next check on.
        let (configmaps, _retire_cm, _cm_writer) = target("configmaps", "ConfigMap");
        tx.send(configmaps).unwrap_or_else(|_| panic!("sent"));
        wait(661).await;
        let second = checks(&asked)[1..].to_vec();
        assert_eq!(
            second.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
            ["/api/v1/pods", "/api/v1/configmaps"]
        );
        assert!(
            (540..=660).contains(&(second[0].0 - first[0].0)),
            "{second:?}"
        );

        // Pods retired: no more of its lists.
        retire_pods.fire();
        wait(661).await;
        let third = checks(&asked)[3..].to_vec();
        assert_eq!(
            third.iter().map(|(_, p)| p.as_str()).collect::<Vec<_>>(),
            ["/api/v1/configmaps"]
        );
        stop.fire();
        task.await.unwrap();
    }

    #[test]
    fn should_name_missing_extra_and_changed_keys() {
        let upstream: BTreeMap<String, u64> = [
            ("a/x".to_string(), 1),
            ("a/y".to_string(), 2),
            ("a/z".to_string(), 3),
        ]
        .into();
        let store: BTreeMap<&str, u64> = [("a/x", 1), ("a/y", 5), ("b/q", 4)].into();
        assert_eq!(compare(&store, &upstream), ["a/y", "a/z", "b/q"]);
        let same: BTreeMap<&str, u64> = upstream.iter().map(|(k, v)| (k.as_str(), *v)).collect();
        assert!(compare(&same, &upstream).is_empty());
    }

    #[test]
    fn should_read_json_metadata_pages() {
        let body = br#"{"kind":"PartialObjectMetadataList","metadata":{"resourceVersion":"12","continue":"c"},"items":[{"metadata":{"name":"p","namespace":"n","resourceVersion":"7"}},{"metadata":{"name":"node1","resourceVersion":"9"}}]}"#;
        let mut items = BTreeMap::new();
        let (rv, cont) = page(body, false, &mut items).unwrap_or_else(|_| panic!("parses"));
        assert_eq!((rv, cont.as_str()), (12, "c"));
        assert_eq!(
            items,
            [("n/p".to_string(), 7), ("node1".to_string(), 9)].into()
        );
    }
}
