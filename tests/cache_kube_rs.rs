//! kube-rs's reflector pointed at r8s: with the Any semantic its lists are
//! cache hits; with the default MostRecent they are consistent lists, proven
//! and served from the cache too (`read.consistent_lists = "auto"`); both
//! stores equal the upstream's objects. (Its own binary: it reads process-wide metrics.)

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, reflector, watcher};

/// A kube-rs reflector over `api`, synced (its list went through r8s):
/// its store, and the task that keeps it watching.
async fn synced_reflector<K>(
    api: kube::Api<K>,
    config: watcher::Config,
) -> (reflector::Store<K>, tokio::task::JoinHandle<()>)
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, config)).applied_objects();
    let task = tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(ev) = s.next().await {
            ev.expect("watch through r8s works");
        }
    });
    tokio::time::timeout(HANG, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    (reader, task)
}

/// The objects a kube-rs reflector over `api` holds once its list (and the
/// watch after it, given `settle`) went through r8s.
async fn reflect<K>(api: kube::Api<K>, config: watcher::Config, settle: Duration) -> Vec<Arc<K>>
where
    K: kube::Resource
        + Clone
        + std::fmt::Debug
        + serde::de::DeserializeOwned
        + Send
        + Sync
        + 'static,
    K::DynamicType: Default + Eq + std::hash::Hash + Clone,
{
    let (reader, task) = synced_reflector(api, config).await;
    tokio::time::sleep(settle).await;
    task.abort();
    reader.state()
}

async fn names_via_reflector(url: &str, config: watcher::Config) -> Vec<String> {
    let client = kube::Client::try_from(kube::Config::new(url.parse().unwrap())).unwrap();
    let api: kube::Api<Pod> = kube::Api::all(client);
    let state = reflect(api, config, Duration::ZERO).await;
    let mut names: Vec<String> = state
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p.metadata.namespace.clone().unwrap_or_default(),
                p.metadata.name.clone().unwrap_or_default()
            )
        })
        .collect();
    names.sort();
    names
}

/// The metrics recorder is one per process, shared by every r8s in it: the
/// tests here count cache hits for `v1/pods`, so they take turns.
static METRICS: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

#[tokio::test(flavor = "multi_thread")]
async fn should_build_equal_stores_with_any_and_most_recent_semantics() {
    let _turn = METRICS.lock().await;
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let truth = get(&format!("{}/api/v1/pods", sim.url())).await.json();
    let mut want: Vec<String> = truth["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}/{}",
                p["metadata"]["namespace"].as_str().unwrap(),
                p["metadata"]["name"].as_str().unwrap()
            )
        })
        .collect();
    want.sort();

    let before = count(
        &get(&format!("{}/metrics", r8s.admin_url())).await.text(),
        "list",
    );
    // kube-core drops resourceVersion=0 from a list that also has a limit
    // (params.rs), so the Any semantic only reaches the server unpaged.
    let any_config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    }
    .any_semantic();
    let any = names_via_reflector(&r8s.url(), any_config).await;
    assert_eq!(any, want);
    let after = count(
        &get(&format!("{}/metrics", r8s.admin_url())).await.text(),
        "list",
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let lines: Vec<&str> = m.lines().filter(|l| l.contains("cache_requests")).collect();
    assert!(
        after > before,
        "the Any-semantic list was served from cache ({before} → {after}): {lines:#?}"
    );

    let most_recent = names_via_reflector(&r8s.url(), watcher::Config::default()).await;
    assert_eq!(most_recent, want);
    assert!(
        count(
            &get(&format!("{}/metrics", r8s.admin_url())).await.text(),
            "list"
        ) > after,
        "MostRecent lists are proven and served"
    );
    r8s.stop().await;
    sim.stop().await;
}

/// `r8s_cache_requests_total` hits on pods for `verb`.
fn count(metrics: &str, verb: &str) -> u64 {
    let prefix =
        format!(r#"r8s_cache_requests_total{{resource="v1/pods",verb="{verb}",result="hit"}}"#);
    metrics
        .lines()
        .find(|l| l.starts_with(&prefix))
        .and_then(|l| l.rsplit(' ').next())
        .and_then(|v| v.parse().ok())
        .unwrap_or(0)
}

/// kube-rs's metadata-only watcher (an `Api<PartialObjectMeta<Pod>>`:
/// `Accept: application/json;as=PartialObjectMetadata[List];g=meta.k8s.io;v=v1`)
/// through r8s: its list and its watch are served from the cache, and its
/// store holds every pod's metadata, labels included, and no spec.
#[tokio::test(flavor = "multi_thread")]
async fn should_serve_kube_rs_metadata_watcher_from_the_cache() {
    let _turn = METRICS.lock().await;
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let truth = get(&format!("{}/api/v1/pods", sim.url())).await.json();
    let mut want: Vec<(String, String)> = truth["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["labels"]["app"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    want.sort();
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let before = metrics().await;

    let client = kube::Client::try_from(kube::Config::new(r8s.url().parse().unwrap())).unwrap();
    // An Api of PartialObjectMeta makes metadata-only requests.
    let api: kube::Api<kube::core::PartialObjectMeta<Pod>> = kube::Api::all(client);
    let config = watcher::Config {
        page_size: None,
        ..watcher::Config::default()
    }
    .any_semantic();
    // Time for the watch that follows the list to start.
    let state = reflect(api, config, Duration::from_millis(500)).await;
    let mut got: Vec<(String, String)> = state
        .iter()
        .map(|p| {
            let m = &p.metadata;
            (
                format!(
                    "{}/{}",
                    m.namespace.clone().unwrap_or_default(),
                    m.name.clone().unwrap_or_default()
                ),
                m.labels
                    .as_ref()
                    .and_then(|l| l.get("app").cloned())
                    .unwrap_or_default(),
            )
        })
        .collect();
    got.sort();
    assert_eq!(got, want, "every pod's metadata, labels included");
    for p in &state {
        let kind = p.types.as_ref().map(|t| t.kind.as_str());
        assert_eq!(kind, Some("PartialObjectMetadata"), "metadata-only answers");
    }
    let after = metrics().await;
    assert!(
        count(&after, "list") > count(&before, "list"),
        "the metadata list was a cache hit"
    );
    assert!(
        count(&after, "watch") > count(&before, "watch"),
        "the metadata watch was a cache hit"
    );
    r8s.stop().await;
    sim.stop().await;
}

/// Adds `drop=metadata.managedFields` to every clause of a request's
/// `Accept` (`application/json` where it has none), as a client-go with
/// `ManagedFieldsOptOutClient` on does (KEP-5958); kube-rs has no option
/// for it yet, so a tower layer of its client's own stack does it.
fn dropping_managed_fields(
    mut req: http::Request<kube::client::Body>,
) -> http::Request<kube::client::Body> {
    let accept = req
        .headers()
        .get(http::header::ACCEPT)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("application/json")
        .split(',')
        .map(|c| format!("{};drop=metadata.managedFields", c.trim()))
        .collect::<Vec<_>>()
        .join(",");
    req.headers_mut()
        .insert(http::header::ACCEPT, accept.parse().unwrap());
    req
}

/// A kube-rs reflector whose client asks `drop=metadata.managedFields`:
/// its list (consistent, proven) and its watch are served from r8s's
/// cache, and no object it holds carries managedFields, though every pod
/// of the sim has them, before and after a change.
#[tokio::test(flavor = "multi_thread")]
async fn should_serve_a_kube_rs_reflector_that_drops_managed_fields() {
    let _turn = METRICS.lock().await;
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let truth = get(&format!("{}/api/v1/pods", sim.url())).await.json();
    let items = truth["items"].as_array().unwrap();
    assert!(
        items
            .iter()
            .all(|p| p["metadata"]["managedFields"].is_array())
    );
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let (lists, watches) = (
        count(&metrics().await, "list"),
        count(&metrics().await, "watch"),
    );

    let config = kube::Config::new(r8s.url().parse().unwrap());
    let client = kube::client::ClientBuilder::try_from(config)
        .unwrap()
        .with_layer(&tower::util::MapRequestLayer::new(dropping_managed_fields))
        .build();
    let api: kube::Api<Pod> = kube::Api::all(client);
    let (reader, task) = synced_reflector(api, watcher::Config::default()).await;
    assert_eq!(reader.state().len(), items.len());
    assert!(
        reader
            .state()
            .iter()
            .all(|p| p.metadata.managed_fields.is_none())
    );
    // A change, seen through the watch: still without them.
    let first = &items[0]["metadata"];
    let (ns, name) = (
        first["namespace"].as_str().unwrap(),
        first["name"].as_str().unwrap(),
    );
    sim.touch(ns, name, 1);
    let changed = eventually("the change reaches the reflector", HANG, || {
        let reader = reader.clone();
        async move {
            reader.state().into_iter().find(|p| {
                p.metadata.name.as_deref() == Some(name)
                    && p.metadata
                        .annotations
                        .as_ref()
                        .is_some_and(|a| a.contains_key("r8s.dev/touch"))
            })
        }
    })
    .await;
    assert!(changed.metadata.managed_fields.is_none());
    task.abort();
    let m = metrics().await;
    assert!(
        count(&m, "list") > lists,
        "the list was served from the cache"
    );
    assert!(
        count(&m, "watch") > watches,
        "the watch was served from the cache"
    );
    r8s.stop().await;
    sim.stop().await;
}
