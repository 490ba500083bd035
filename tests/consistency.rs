//! The consistency check (`cache.consistency_check_interval_seconds`): with
//! nothing wrong it finds nothing, under churn; a change the cache's watch
//! never heard of (planted in the built-in upstream) is found within one
//! interval, the cache relists, and ends equal to the upstream. Its
//! watchers, whose event log can no longer be trusted, get the apiserver's
//! 410 and relist, as from an apiserver whose watch cache was rebuilt.

use std::time::{Duration, Instant};

use crate::common::*;
use r8s::config::Config;
use r8s_sim::SimConfig;

fn series(result: &str) -> String {
    format!(
        r#"r8s_cache_consistency_checks_total{{resource="v1/pods",encoding="json",result="{result}"}}"#
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_find_nothing_under_churn_and_catch_a_planted_divergence() {
    let sim = start_sim(SimConfig {
        pods: 300,
        churn: 20.0,
        ..sim_config()
    })
    .await;
    let mut c = Config::default();
    c.upstream.servers = vec![sim.url()];
    c.cache.resources = vec!["pods".into()];
    c.cache.consistency_check_interval_seconds = 2;
    // Watchers past the log get the apiserver's 410 (not a pass-through to
    // the upstream, which here cannot replay the planted change).
    c.watch.on_too_old = r8s::config::OnTooOld::Gone;
    let r = start_r8s_config(c).await;
    let metrics = async || get(&format!("{}/metrics", r.admin_url())).await.text();

    // Nothing wrong: checks find the cache equal, at the cache's version.
    let guard = HangGuard::new();
    loop {
        let m = metrics().await;
        if sample(&m, &series("equal")) >= 3.0
            && sample(
                &m,
                r#"r8s_cache_consistency_checks_total{resource="v1/pods",encoding="protobuf",result="equal"}"#,
            ) >= 3.0
        {
            assert_eq!(sample(&m, &series("diverged")), 0.0);
            break;
        }
        guard.check(|| format!("no equal checks: {m}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // A watcher of r8s, from now.
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    let replay = Replay::from_list(&list.json());
    let watch = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=12&resourceVersion={}",
        r.url(),
        replay.last
    );
    let watcher = tokio::spawn(async move {
        watch_replay(&watch, replay, Duration::from_secs(40), "watcher").await
    });

    // The upstream changes a pod no watch hears of.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let pods = r8s_sim::resources::pods_idx();
    sim.sim.pause_churn(true);
    let key = sim.sim.store.keys_in_namespace(pods, "ns-2")[0].clone();
    // A churn write to it would carry the planted change to r8s's watch
    // and end the divergence before a check could confirm it.
    sim.sim.spare_from_churn(&key);
    let mut planted = sim.sim.store.get(pods, &key).unwrap().value();
    planted["metadata"]["labels"]["planted"] = "yes".into();
    let planted_rv = sim.sim.store.tamper(pods, &key, planted);
    sim.sim.pause_churn(false);
    let planted_at = Instant::now();

    // Found within one interval (and its confirmation), then relisted.
    let relists =
        r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="diverged"}"#;
    let m = eventually("the divergence caught and relisted", HANG, || async {
        let m = metrics().await;
        (sample(&m, relists) >= 1.0).then_some(m)
    })
    .await;
    assert!(sample(&m, &series("diverged")) >= 1.0, "{m}");
    println!("caught after {:?}", planted_at.elapsed());
    let guard = HangGuard::new();
    loop {
        let got = get(&format!(
            "{}/api/v1/namespaces/{}/pods/{}?resourceVersion=0",
            r.url(),
            key.split('/').next().unwrap(),
            key.split('/').nth(1).unwrap()
        ))
        .await;
        if got.json()["metadata"]["labels"]["planted"] == "yes" {
            break;
        }
        guard.check(|| "the relist did not bring the planted change".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The cache equals the upstream; the watcher was told.
    sim.sim.pause_churn(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    let cached = Replay::from_list(&list.json());
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", cached.last).await;
    assert_eq!(cached.state, truth);
    let (seen, _) = watcher.await.unwrap();
    let error = seen.error.expect("the watcher was ended by the relist");
    assert_eq!(error["code"], 410, "{error}");
    assert!(
        cached.state.get(&key).is_some_and(|rv| *rv >= planted_rv),
        "a relisting watcher gets the planted change: {:?}",
        cached.state.get(&key)
    );

    // Equal again afterwards.
    let before = sample(&metrics().await, &series("equal"));
    let guard = HangGuard::new();
    while sample(&metrics().await, &series("equal")) < before + 1.0 {
        guard.check(|| "no equal check after the relist".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    r.stop().await;
    sim.stop().await;
}
