//! Many watchers, one upstream watch: 1,000 concurrent watchers with mixed
//! selectors under churn for half a minute, across a forced relist and an upstream
//! outage, directly and through a second r8s (tiered fan-out). Every
//! watcher's stream, applied in order, must reproduce the upstream's state
//! (restricted to its selector) at its last version.

use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use tokio::sync::Semaphore;

const WATCHERS: usize = 1000;
/// Every watch asks the server to end it this long after the first opened
/// (its `timeoutSeconds` is what is left then): past the test's 28 s of
/// churn, with a margin for the second tier to catch up.
const WATCHES_END: u64 = 45;
/// The shortest `timeoutSeconds` a watch asks for: on a machine so busy
/// that the thousand take long to open, the last still outlasts the churn
/// by this much.
const WATCH_SECONDS_AT_LEAST: u64 = 16;

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
    let first = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let second = if tiered {
        Some(start_r8s_caching(vec![first.url()], &["pods"]).await)
    } else {
        None
    };
    let target = second.as_ref().map_or(first.url(), |s| s.url());
    let label = if tiered { "tiered" } else { "direct" };

    // Spread the starts over a few seconds, as informers start.
    let gate = Arc::new(Semaphore::new(64));
    let began = std::time::Instant::now();
    let mut tasks = Vec::new();
    for i in 0..WATCHERS {
        let (collection, sel) = mixed_selector(i);
        let target = target.clone();
        let gate = gate.clone();
        tasks.push(tokio::spawn(async move {
            let who = format!("watcher {i} ({collection}{sel})");
            let permit = gate.acquire_owned().await.unwrap();
            let (replay, query) =
                informer_start(&target, &collection, &sel, i % 2 == 1, &who).await;
            drop(permit);
            let seconds = WATCHES_END
                .saturating_sub(began.elapsed().as_secs())
                .max(WATCH_SECONDS_AT_LEAST);
            let url = format!(
                "{target}{collection}?watch=1&allowWatchBookmarks=true&timeoutSeconds={seconds}&{query}{sel}"
            );
            let (replay, served) =
                watch_replay(&url, replay, Duration::from_secs(seconds + 30), &who).await;
            assert_eq!(served, "hit", "{who}: served from the cache");
            assert!(replay.error.is_none(), "{who}: ended with {:?}", replay.error);
            (i, collection, sel, replay)
        }));
    }

    // Half a minute of churn, with a forced relist and an upstream outage in it.
    tokio::time::sleep(Duration::from_secs(8)).await;
    // The reflector misses 3 s of writes (deletes among them), then may not
    // resume: it must relist, and turn the difference into events.
    sim.sim.interrupt_watches(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.sim.store.expire_watches();
    sim.sim.accept_watches();
    tokio::time::sleep(Duration::from_secs(6)).await;
    sim.sim.interrupt_watches(true);
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.sim.accept_watches();
    // Every watch, open until well after this, goes at least this far: past
    // the relist and the outage.
    let past_faults = sim.sim.store.current_rv();
    tokio::time::sleep(Duration::from_secs(8)).await;
    sim.sim.pause_churn(true);
    let end_rv = sim.sim.store.current_rv();

    let mut results = Vec::new();
    for t in tasks {
        results.push(t.await.expect("watcher task"));
    }
    eprintln!("{label}: the watches ended; checking them");
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
            (past_faults..=end_rv).contains(&replay.last),
            "{who}: its stream went past the relist and the outage ({past_faults}) and no further than the upstream ({end_rv}): {}",
            replay.last
        );
        total_events += replay.events;
    }
    // Each stream, applied in order, is the upstream's state at the last
    // version it reached (most reach `end_rv`; a client the loaded machine
    // kept behind ends earlier, as its final bookmark says): the sim's state
    // at each such version, read in this process, and each watcher's
    // selection made from it with the test's own reading of the few
    // selectors it uses (not the parsers under test).
    let mut at_version: std::collections::BTreeMap<u64, Vec<serde_json::Value>> =
        Default::default();
    for (_, _, _, replay) in &results {
        if let std::collections::btree_map::Entry::Vacant(e) = at_version.entry(replay.last) {
            let (_, objects) = sim
                .sim
                .store
                .snapshot(r8s::sim::resources::pods_idx(), Some(replay.last))
                .expect("within the sim's history");
            e.insert(objects.values().map(|o| o.value()).collect());
        }
    }
    for (i, collection, sel, replay) in &results {
        let want: std::collections::BTreeMap<String, u64> = at_version[&replay.last]
            .iter()
            .filter(|p| selects(collection, sel, p))
            .map(|p| (key_of(p), rv_of(p)))
            .collect();
        assert_eq!(
            replay.state, want,
            "{label} watcher {i} ({collection}{sel}): its stream replays to the upstream's state at {}",
            replay.last
        );
    }
    eprintln!(
        "{label}: {} watchers ended at {end_rv}, where the churn stopped; the others at {} other versions",
        results.iter().filter(|(.., r)| r.last == end_rv).count(),
        at_version.len() - usize::from(at_version.contains_key(&end_rv))
    );
    assert!(
        total_events > WATCHERS * 20,
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
