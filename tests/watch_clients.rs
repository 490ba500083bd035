//! Real clients watching through r8s under churn: `kubectl get pods -w -o
//! json` and kube-rs's `watcher` (with bookmarks) see every change the sim
//! makes, served from r8s's cache, with one upstream watch per resource;
//! directly and through a second r8s (tiered fan-out). (Its own binary: it
//! reads process-wide metrics.)

use std::collections::BTreeSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::watcher;
use serde_json::Value;

/// (namespace/name, resourceVersion) of every pod change after `after` in the sim.
async fn sim_changes(sim_url: &str, after: u64, upto: u64) -> BTreeSet<(String, u64)> {
    let w = send(
        "GET",
        &format!("{sim_url}/api/v1/pods?watch=1&resourceVersion={after}&timeoutSeconds=1"),
        &[],
        None,
    )
    .await;
    w.text()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .map(|e| (key_of(&e["object"]), rv_of(&e["object"])))
        .filter(|(_, rv)| *rv <= upto)
        .collect()
}

async fn run(tiered: bool) {
    let mut cfg = sim_config();
    cfg.pods = 100;
    cfg.churn = 40.0;
    cfg.history = 100_000;
    let sim = start_sim(cfg).await;
    // kubectl's consistent lists pass through: a proof's probe is an upstream
    // watch too, opened only when the cache is behind (so as busy as the
    // machine is), and this test counts the reflectors' watches. Proofs are
    // `consistent.rs`'s.
    let caching = |upstream: String| {
        let mut config = r8s::config::Config::default();
        config.upstream.servers = vec![upstream];
        config.cache.resources = vec!["pods".into()];
        config.read.consistent_lists = r8s::config::Prove::Pass;
        start_r8s_config(config)
    };
    let first = caching(sim.url()).await;
    let second = if tiered {
        Some(caching(first.url()).await)
    } else {
        None
    };
    let (target, admin) = second
        .as_ref()
        .map_or((first.url(), first.admin_url()), |s| {
            (s.url(), s.admin_url())
        });
    let label = if tiered {
        "through a second r8s"
    } else {
        "direct"
    };

    // kubectl: lists (most recent: passed through), then watches from the list's version.
    let kubectl = tokio::spawn({
        let target = target.clone();
        async move {
            kubectl_for(
                &target,
                &["get", "pods", "-A", "-w", "-o", "json"],
                Duration::from_secs(14),
            )
            .await
        }
    });
    // kube-rs: watcher with bookmarks, listing at "any" version (a cache hit).
    let seen: Arc<Mutex<BTreeSet<(String, u64)>>> = Arc::default();
    let kube_task = tokio::spawn({
        let (target, seen) = (target.clone(), seen.clone());
        async move {
            let client =
                kube::Client::try_from(kube::Config::new(target.parse().unwrap())).unwrap();
            let api: kube::Api<Pod> = kube::Api::all(client);
            let config = watcher::Config::default().any_semantic();
            let config = watcher::Config {
                page_size: None,
                ..config
            };
            let mut s = std::pin::pin!(watcher(api, config));
            while let Some(ev) = s.next().await {
                let ev = ev.expect("kube-rs watches through r8s");
                let obj = match ev {
                    watcher::Event::Apply(p)
                    | watcher::Event::Delete(p)
                    | watcher::Event::InitApply(p) => p,
                    _ => continue,
                };
                let k = format!(
                    "{}/{}",
                    obj.metadata.namespace.unwrap_or_default(),
                    obj.metadata.name.unwrap_or_default()
                );
                let rv = obj
                    .metadata
                    .resource_version
                    .unwrap_or_default()
                    .parse()
                    .unwrap();
                seen.lock().unwrap().insert((k, rv));
            }
        }
    });
    tokio::time::sleep(Duration::from_secs(3)).await;
    let start = sim.sim.store.current_rv();
    let m = get(&format!("{admin}/metrics")).await.text();
    assert!(
        sample(&m, r#"r8s_watchers{resource="v1/pods"}"#) >= 2.0,
        "{label}: both clients' watches are served by r8s"
    );
    tokio::time::sleep(Duration::from_secs(6)).await;
    sim.sim.pause_churn(true);
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let end = sim.sim.store.current_rv();
    let upstream_watches = sim.sim.count("watch", "pods");
    let want = sim_changes(&sim.url(), start, end).await;
    assert!(
        want.len() > 100,
        "{label}: the sim churned ({} changes)",
        want.len()
    );

    let out = kubectl.await.unwrap();
    let printed: BTreeSet<(String, u64)> = serde_json::Deserializer::from_str(&out)
        .into_iter::<Value>()
        .map(|v| v.expect("kubectl printed JSON objects"))
        .map(|o| (key_of(&o), rv_of(&o)))
        .collect();
    let missing: Vec<_> = want.difference(&printed).collect();
    assert!(missing.is_empty(), "{label}: kubectl -w missed {missing:?}");
    kube_task.abort();
    let got = seen.lock().unwrap().clone();
    let missing: Vec<_> = want.difference(&got).collect();
    assert!(
        missing.is_empty(),
        "{label}: kube-rs's watcher missed {missing:?}"
    );

    let m = get(&format!("{admin}/metrics")).await.text();
    assert_eq!(
        upstream_watches,
        2,
        "{label}: one upstream watch per encoding cached (JSON, protobuf) however many clients and tiers: {}",
        m.lines()
            .filter(|l| l.contains("cache_requests"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    if let Some(s) = second {
        s.stop().await;
    }
    first.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_show_real_clients_every_change_from_the_cache_directly_and_tiered() {
    run(false).await;
    run(true).await;
}
