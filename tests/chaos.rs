//! The chaos run: 1,000 watchers with mixed selectors through r8s while the
//! upstream churns, restarts, is forced to expire r8s's watch (410, relist),
//! has its connections reset and stalls silently, at random times. Every
//! watcher must end with exactly the upstream's state for its selector,
//! having seen versions only increase, each change once; the watches it
//! lost (client-visible ERRORs, which would make an informer relist) are
//! counted: the goal is none.
//!
//! The suite runs 30 s at 200 writes/s. The full run (RELIABILITY.md):
//! `CHAOS_SECONDS=300 CHAOS_WRITES=500 cargo test --release --test suite chaos:: -- --nocapture`.
//! Faults scale with the duration: per 5 minutes, 20 restarts, 5 forced
//! 410s, 10 connection resets and 3 stalls of 20 s (at least one of each).

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::mixed::{mixed_selector, selects};
use crate::common::*;
use r8s_sim::fault::{Forwarder, Mode};
use tokio::sync::Semaphore;

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(default)
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Fault {
    /// The upstream restarts: connections reset, watches refused for 1 s
    /// (its store kept, as etcd keeps it).
    Restart,
    /// Resuming r8s's watch answers 410: r8s must relist.
    Expire,
    /// Every connection between r8s and its upstream is reset.
    Reset,
    /// Nothing passes either way, nothing closes, for 20 s.
    Stall,
    /// The stall ends.
    Heal,
}

/// The faults of a run of `secs`, at random times (seeded), in order.
fn timeline(secs: u64, rng: &mut fastrand::Rng) -> Vec<(Duration, Fault)> {
    let per = |n: u64| (n * secs).div_ceil(300).max(1);
    let window = secs.saturating_sub(30).max(1) as f64;
    let at = |rng: &mut fastrand::Rng| Duration::from_secs_f64(5.0 + rng.f64() * window);
    let mut t = Vec::new();
    for (fault, n) in [
        (Fault::Restart, per(20)),
        (Fault::Expire, per(5)),
        (Fault::Reset, per(10)),
    ] {
        for _ in 0..n {
            t.push((at(rng), fault));
        }
    }
    // Stalls in slots of their own, so they never overlap.
    let stalls = per(3);
    let slot = window / stalls as f64;
    for k in 0..stalls {
        let start = 5.0 + k as f64 * slot + rng.f64() * (slot - 20.0).max(0.0);
        t.push((Duration::from_secs_f64(start), Fault::Stall));
        t.push((Duration::from_secs_f64(start + 20.0), Fault::Heal));
    }
    t.sort_by_key(|(d, _)| *d);
    t
}

/// The upstream's state for each watcher's selector now: one read of every
/// pod, and each selection made from it with the test's own reading of the
/// selectors ([`selects`]), as `namespace/name` → resourceVersion.
async fn truths_now(
    sim: &str,
    selections: impl Iterator<Item = (String, String)>,
) -> BTreeMap<String, BTreeMap<String, u64>> {
    let r = get(&format!("{sim}/api/v1/pods")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let all = r.json();
    let pods = all["items"].as_array().unwrap();
    let mut truths = BTreeMap::new();
    for (collection, sel) in selections {
        let k = format!("{collection}?{sel}");
        if let std::collections::btree_map::Entry::Vacant(e) = truths.entry(k) {
            e.insert(
                pods.iter()
                    .filter(|p| selects(&collection, &sel, p))
                    .map(|p| (key_of(p), rv_of(p)))
                    .collect(),
            );
        }
    }
    truths
}

#[tokio::test(flavor = "multi_thread")]
async fn should_keep_every_watcher_exact_through_restarts_410s_resets_and_stalls() {
    let secs = env("CHAOS_SECONDS", 30);
    let writes = env("CHAOS_WRITES", 200);
    let watchers = env("CHAOS_WATCHERS", 1000) as usize;
    let mut rng = fastrand::Rng::with_seed(env("CHAOS_SEED", 12));

    let mut cfg = sim_config();
    cfg.pods = 1000;
    cfg.namespaces = 4;
    cfg.churn = writes as f64;
    cfg.history = 1_000_000;
    let sim = start_sim(cfg).await;
    let fwd = Forwarder::start(sim.addr).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![fwd.url()];
    config.cache.resources = vec!["pods".into()];
    config.cache.encodings = vec!["json".into()];
    let r8s = start_r8s_config(config).await;
    let target = r8s.url();

    // The watchers start as informers do, half with a list and a watch from
    // its version, half with a streaming list.
    let began = Instant::now();
    let gate = Arc::new(Semaphore::new(64));
    let mut opening = Vec::new();
    for i in 0..watchers {
        let (collection, sel) = mixed_selector(i);
        let (target, gate) = (target.clone(), gate.clone());
        opening.push(tokio::spawn(async move {
            let who = format!("watcher {i} ({collection}{sel})");
            let _p = gate.acquire_owned().await.unwrap();
            let (replay, query) =
                informer_start(&target, &collection, &sel, i % 2 == 1, &who).await;
            let url = format!(
                "{target}{collection}?watch=1&allowWatchBookmarks=true&timeoutSeconds={}&{query}{sel}",
                secs + 600
            );
            (collection, sel, follow(url, replay, who))
        }));
    }
    let mut followers = Vec::new();
    for o in opening {
        followers.push(o.await.unwrap());
    }

    let opened = began.elapsed();

    // The run: churn throughout, the faults at their times.
    let faults = timeline(secs, &mut rng);
    let start = Instant::now();
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    for (at, fault) in &faults {
        tokio::time::sleep(at.saturating_sub(start.elapsed())).await;
        match fault {
            Fault::Restart => {
                fwd.reset_all();
                sim.sim.interrupt_watches(true);
                tokio::time::sleep(Duration::from_secs(1)).await;
                sim.sim.accept_watches();
            }
            Fault::Expire => sim.sim.expire_watches(),
            Fault::Reset => fwd.reset_all(),
            Fault::Stall => fwd.set(Mode::Stall),
            Fault::Heal => fwd.set(Mode::Pass),
        }
        *counts.entry(format!("{fault:?}")).or_default() += 1;
    }
    tokio::time::sleep(Duration::from_secs(secs).saturating_sub(start.elapsed())).await;
    sim.sim.pause_churn(true);
    tokio::time::sleep(Duration::from_millis(500)).await;
    let written = sim.sim.store.current_rv();

    // Every watcher converges on the upstream's state for its selector.
    let truths = truths_now(
        &sim.url(),
        followers.iter().map(|(c, s, _)| (c.clone(), s.clone())),
    )
    .await;
    let truths_read = began.elapsed();
    let guard = HangGuard::new();
    let settle = Instant::now();
    loop {
        let mut behind = Vec::new();
        for (i, (collection, sel, (replay, task))) in followers.iter().enumerate() {
            let r = replay.lock().unwrap();
            if task.is_finished() {
                drop(r);
                continue; // reported below
            }
            if r.state != truths[&format!("{collection}?{sel}")] {
                behind.push(i);
            }
        }
        if behind.is_empty() {
            break;
        }
        guard.check(|| {
            format!(
                "{} watchers never reached the upstream's state, e.g. {:?}",
                behind.len(),
                &behind[..behind.len().min(5)]
            )
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let settled = settle.elapsed();

    // None ended: no panic (a version going back, a duplicate, a change for
    // an object it did not have), no ERROR, no broken stream.
    let mut events = 0;
    let mut errors = 0;
    let mut ended = Vec::new();
    for (i, (_, _, (replay, task))) in followers.iter().enumerate() {
        let r = replay.lock().unwrap();
        events += r.events;
        if r.error.is_some() {
            errors += 1;
        }
        if task.is_finished() {
            ended.push(i);
        }
    }
    let mut panicked = Vec::new();
    for i in &ended {
        let (_, _, (_, task)) = &mut followers[*i];
        if let Err(e) = task.await {
            panicked.push(format!("{e}"));
        }
    }
    for (_, _, (_, task)) in &followers {
        task.abort();
    }
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let series = |s: &str| sample(&m, s);
    let relists = series(
        r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#,
    );
    let restarts =
        series(r#"r8s_reflector_watch_restarts_total{resource="v1/pods",encoding="json"}"#);
    let silences = series(r#"r8s_reflector_silent_total{resource="v1/pods",encoding="json"}"#);
    println!(
        "chaos: {watchers} watchers, {secs} s at {writes} writes/s ({written} versions), faults {counts:?}; opened in {opened:.1?}, truths read at {truths_read:.1?}"
    );
    println!(
        "  every watcher exact {settled:.1?} after the writes stopped; {events} events delivered; client-visible ERRORs {errors}, watches ended {}, client relists 0; r8s relisted {relists} times, resumed its watch {restarts} times, noticed {silences} silences",
        ended.len()
    );
    assert!(panicked.is_empty(), "watchers failed: {panicked:?}");
    assert!(ended.is_empty(), "watches ended: {ended:?}");
    assert_eq!(errors, 0, "client-visible ERRORs");
    assert!(relists >= counts.get("Expire").copied().unwrap_or(0) as f64);
    r8s.stop().await;
    fwd.stop();
    sim.stop().await;
}
