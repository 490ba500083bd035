//! Many watchers, one upstream watch: 1,000 concurrent watchers with mixed
//! selectors under churn for 20 s, across a forced relist and an upstream
//! outage, directly and through a second r8s (tiered fan-out). Every
//! watcher's stream, applied in order, must reproduce the upstream's state
//! (restricted to its selector) at its last version.

use std::sync::Arc;
use std::time::Duration;

use crate::common::mixed::{mixed_selector, selects};
use crate::common::*;
use tokio::sync::Semaphore;

const WATCHERS: usize = 1000;
/// Each watch asks to stay open this long, beyond the test's end: the test
/// follows every stream until it reaches the upstream's last version, then
/// closes them itself.
const WATCH_SECONDS: u64 = 600;

/// r8s in front of `upstream`, caching pods, sending each watcher a
/// bookmark every second: a watcher whose selector no late write matches
/// still learns that it is current, soon after the cache is.
async fn r8s_bookmarking(upstream: String) -> R8s {
    r8s_in_front_of(upstream)
        .caching(&["pods"])
        .with(|c| c.watch.bookmark_interval_seconds = 1)
        .start()
        .await
}

async fn run_fanout(tiered: bool) {
    let mut cfg = sim_config();
    cfg.pods = 1000;
    cfg.namespaces = 4;
    // 100 writes/s of pods shaped like a real apiserver's (~4.5 KB): the
    // bytes per second 200 writes/s of the earlier 2.3 KB pods made, which is
    // what a debug build of the test client, two r8s and the sim keep up
    // with on 2 cores.
    cfg.churn = 100.0;
    cfg.history = 100_000;
    let sim = start_sim(cfg).await;
    let first = r8s_bookmarking(sim.url()).await;
    let second = if tiered {
        Some(r8s_bookmarking(first.url()).await)
    } else {
        None
    };
    let target = second.as_ref().map_or(first.url(), |s| s.url());
    let label = if tiered { "tiered" } else { "direct" };

    // Spread the starts over a few seconds, as informers start.
    let gate = Arc::new(Semaphore::new(64));
    let mut opening = Vec::new();
    for i in 0..WATCHERS {
        let (collection, sel) = mixed_selector(i);
        let target = target.clone();
        let gate = gate.clone();
        opening.push(tokio::spawn(async move {
            let who = format!("watcher {i} ({collection}{sel})");
            let permit = gate.acquire_owned().await.unwrap();
            let (replay, query) =
                informer_start(&target, &collection, &sel, i % 2 == 1, &who).await;
            drop(permit);
            let url = format!(
                "{target}{collection}?watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&{query}{sel}"
            );
            // Served from the cache, or the follower fails.
            let (replay, task) = follow(url, replay, who);
            (i, collection, sel, replay, task)
        }));
    }

    // 20 s of churn, with a forced relist and an upstream outage in it.
    tokio::time::sleep(Duration::from_secs(5)).await;
    // The reflector misses 3 s of writes (deletes among them), then may not
    // resume: it must relist, and turn the difference into events.
    sim.sim.interrupt_watches(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.sim.store.expire_watches();
    sim.sim.accept_watches();
    tokio::time::sleep(Duration::from_secs(4)).await;
    sim.sim.interrupt_watches(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.sim.accept_watches();
    tokio::time::sleep(Duration::from_secs(5)).await;
    sim.sim.pause_churn(true);
    let end_rv = sim.sim.store.current_rv();

    let mut followers = Vec::new();
    for o in opening {
        followers.push(o.await.expect("a watcher opened"));
    }
    // Every stream reaches the upstream's last version (by its events or a
    // bookmark), however long the loaded machine makes it take, and none
    // ends meanwhile.
    eventually(&format!("{label}: every watcher at {end_rv}"), HANG, || {
        let done = followers
            .iter()
            .all(|(.., replay, task)| task.is_finished() || replay.lock().unwrap().last >= end_rv);
        async move { done.then_some(()) }
    })
    .await;
    let mut results = Vec::new();
    for (i, collection, sel, replay, task) in followers {
        if task.is_finished() {
            panic!(
                "{label} watcher {i} ({collection}{sel}): its watch ended: {:?}",
                task.await
            );
        }
        task.abort();
        let replay = replay.lock().unwrap().clone();
        results.push((i, collection, sel, replay));
    }
    eprintln!("{label}: every watch at {end_rv}; checking them");
    let mut total_events = 0;
    for (i, collection, sel, replay) in &results {
        let who = format!("{label} watcher {i} ({collection}{sel})");
        if i % 2 == 1 {
            assert!(
                replay.initial_end,
                "{who}: the initial-events-end bookmark came"
            );
        }
        assert!(
            replay.error.is_none(),
            "{who}: ended with {:?}",
            replay.error
        );
        assert_eq!(replay.last, end_rv, "{who}: no further than the upstream");
        total_events += replay.events;
    }
    // Each stream, applied in order, is the upstream's state at `end_rv`:
    // the sim's state there, read in this process, and each watcher's
    // selection made from it with the test's own reading of the few
    // selectors it uses (not the parsers under test).
    let (_, objects) = sim
        .sim
        .store
        .snapshot(r8s_sim::resources::pods_idx(), Some(end_rv))
        .expect("the current state");
    let pods: Vec<serde_json::Value> = objects.values().map(|o| o.value()).collect();
    for (i, collection, sel, replay) in &results {
        let want: std::collections::BTreeMap<String, u64> = pods
            .iter()
            .filter(|p| selects(collection, sel, p))
            .map(|p| (key_of(p), rv_of(p)))
            .collect();
        assert_eq!(
            replay.state, want,
            "{label} watcher {i} ({collection}{sel}): its stream replays to the upstream's state at {end_rv}"
        );
    }
    eprintln!("{label}: {total_events} events delivered");
    assert!(
        total_events > WATCHERS * 10,
        "{label}: the watchers saw the churn ({total_events} events)"
    );
    let m = get(&format!("{}/metrics", first.admin_url())).await.text();
    assert!(
        sample(
            &m,
            r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#
        ) >= 1.0,
        "{label}: the forced relist happened: {}",
        m.lines()
            .filter(|l| l.contains("reflector"))
            .collect::<Vec<_>>()
            .join("\n")
    );
    // (Both tiers run in this process and share its metrics registry, so the
    // second tier's own relists cannot be told apart here; its watchers'
    // consistency above is what counts.)
    if let Some(s) = second {
        s.stop().await;
    }
    first.stop().await;
    sim.stop().await;
}

/// Directly, then through a second r8s (one after the other: each is a
/// minute of a thousand streams, and the machine has two cores).
#[tokio::test(flavor = "multi_thread")]
async fn should_keep_a_thousand_watchers_consistent_across_relists_restarts_and_tiers() {
    run_fanout(false).await;
    run_fanout(true).await;
}
