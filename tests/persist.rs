//! A restart comes back warm (`persist.dir`): the caches are loaded from
//! their snapshots and the upstream watches resume from the snapshots'
//! versions, at a small fraction of a cold start's upstream bytes; every
//! write made while r8s was down is served after it; watchers reconnecting
//! with their versions go on without a relist.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use crate::common::*;
use r8s_sim::fault::Forwarder;

use r8s_sim::SimConfig;

/// A fresh directory under the system's temporary one.
fn temp_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "r8s-{what}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// r8s in front of `upstream` caching pods, saved to `dir`.
fn saved(upstream: String, dir: &Path) -> R8sBuilder {
    let dir = dir.to_path_buf();
    r8s_in_front_of(upstream).caching(&["pods"]).with(|c| {
        c.persist.dir = Some(dir);
        // Plain bodies, so bytes are counted as the warm-start goal states them
        // (a warm start's bytes against a cold start's). With gzip (the
        // default) a cold start reads about a tenth of them, while the watch
        // events a warm start resumes with are never compressed by the
        // apiserver (a plain watch): BENCHMARKS.md gives both.
        c.upstream.compression = false;
    })
}

async fn metrics_of(r: &R8s) -> String {
    get(&format!("{}/metrics", r.admin_url())).await.text()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_come_back_warm_after_a_restart_under_churn() {
    // Enough pods that a cold start's lists dwarf what a warm one reads
    // (the 20× below), few enough that the test client's parse of them is
    // not the test's time.
    const PODS: usize = 3_000;
    let sim = start_sim(SimConfig {
        pods: PODS,
        namespaces: 10,
        churn: 20.0,
        history: 100_000,
        ..sim_config()
    })
    .await;
    let dir = temp_dir("warm");

    // Cold: both encodings listed from the upstream.
    // One link to the upstream for both runs (a snapshot names the upstream
    // by its address, so r8s must come back to the same one), counting bytes.
    let link = Forwarder::start(sim.addr).await;
    let r1 = saved(link.url(), &dir).start().await;
    let cold_bytes = link.bytes_to_clients();
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r1.url())).await;
    assert_eq!(list.status, 200);
    let replay = Replay::from_list(&list.json());
    assert!(replay.state.len().abs_diff(PODS) < 100);
    let watch = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=600&resourceVersion={}",
        r1.url(),
        replay.last
    );
    let watcher = tokio::spawn(async move {
        watch_replay(&watch, replay, Duration::from_secs(60), "watcher").await
    });
    tokio::time::sleep(Duration::from_secs(2)).await;

    // A graceful stop saves the caches; the watcher's stream ends with it.
    // The churn pauses from here until the warm start is ready: what r8s
    // misses while down is then the 20 writes below, however long a busy
    // machine takes to stop and start it. (With the churn on, each second
    // of that added 20 events per encoding to what the warm start read: a
    // loaded run read 5.05 % of a cold start, against the bound of 5 %.)
    sim.sim.pause_churn(true);
    r1.stop().await;
    let (replay, served) = watcher.await.unwrap();
    assert_eq!(served, "hit");
    assert!(replay.error.is_none(), "{:?}", replay.error);
    let files: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(
        files.contains(&"core_v1_pods.json.snap".to_string())
            && files.contains(&"core_v1_pods.protobuf.snap".to_string()),
        "{files:?}"
    );
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = |p: &PathBuf| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode(&dir), 0o700);
        assert_eq!(mode(&dir.join("core_v1_pods.json.snap")), 0o600);
    }

    // Writes while r8s is down.
    let mut written = Vec::new();
    let pods = r8s_sim::resources::pods_idx();
    for i in 0..20 {
        let keys = sim
            .sim
            .store
            .keys_in_namespace(pods, &format!("ns-{}", i % 10));
        let key = &keys[i % keys.len()];
        let (ns, name) = key.split_once('/').unwrap();
        sim.touch(ns, name, 1000 + i);
        let rv = sim
            .sim
            .store
            .get(r8s_sim::resources::pods_idx(), &format!("{ns}/{name}"))
            .unwrap()
            .rv;
        // The churn that goes on may delete a pod; not these, which the
        // checks below look for (it deleted one in a loaded CI run).
        sim.sim.spare_from_churn(key);
        written.push((format!("{ns}/{name}"), rv));
    }

    // Warm: loaded from the snapshots, watches resumed; then the churn
    // goes on.
    let before = link.bytes_to_clients();
    let started = Instant::now();
    let r2 = saved(link.url(), &dir).start().await;
    let ready_after = started.elapsed();
    let warm_bytes = link.bytes_to_clients() - before;
    sim.sim.pause_churn(false);
    let m = metrics_of(&r2).await;
    for e in ["json", "protobuf"] {
        assert_eq!(
            sample(
                &m,
                &format!(
                    r#"r8s_persist_loads_total{{resource="v1/pods",encoding="{e}",result="loaded"}}"#
                )
            ),
            1.0,
            "{e}: {}",
            m.lines()
                .filter(|l| l.contains("persist"))
                .collect::<Vec<_>>()
                .join("\n")
        );
        assert_eq!(
            sample(
                &m,
                &format!(
                    r#"r8s_reflector_relists_total{{resource="v1/pods",encoding="{e}",reason="expired"}}"#
                )
            ),
            0.0,
            "{e}"
        );
    }
    println!(
        "cold start: {cold_bytes} upstream bytes; warm start: {warm_bytes} ({:.2} %), ready after {ready_after:?}",
        warm_bytes as f64 * 100.0 / cold_bytes as f64
    );
    // The consistency check that follows a warm start.
    let checked = |m: &str| {
        ["json", "protobuf"].iter().all(|e| {
            sample(
                m,
                &format!(
                    r#"r8s_cache_consistency_checks_total{{resource="v1/pods",encoding="{e}",result="equal"}}"#
                ),
            ) >= 1.0
        })
    };
    let guard = HangGuard::new();
    while !checked(&metrics_of(&r2).await) {
        guard.check(|| "no consistency check after the warm start".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    println!(
        "warm start with its consistency check: {} upstream bytes",
        link.bytes_to_clients() - before
    );
    assert!(
        warm_bytes * 20 < cold_bytes,
        "warm start read {warm_bytes} bytes from the upstream, a cold one {cold_bytes}"
    );

    // Every write made while r8s was down is served.
    let newest = written.iter().map(|(_, rv)| *rv).max().unwrap();
    let list = get(&format!(
        "{}/api/v1/pods?resourceVersion={newest}",
        r2.url()
    ))
    .await;
    assert_eq!(list.status, 200);
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    let served = Replay::from_list(&list.json());
    for (key, rv) in &written {
        assert!(
            served.state.get(key).is_some_and(|at| at >= rv),
            "{key} written at {rv} while r8s was down; served {:?}",
            served.state.get(key)
        );
    }

    // The watcher reconnects with its version: no relist, every change.
    let watch = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&timeoutSeconds=3&resourceVersion={}",
        r2.url(),
        replay.last
    );
    let before = replay.events;
    let (replay, served) = watch_replay(&watch, replay, Duration::from_secs(30), "watcher").await;
    assert_eq!(served, "hit");
    assert!(replay.error.is_none(), "{:?}", replay.error);
    assert!(replay.events >= before + written.len());
    for (key, rv) in &written {
        assert!(replay.state[key] >= *rv, "{key}");
    }
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", replay.last).await;
    assert_eq!(
        replay.state, truth,
        "the watcher's state equals the upstream's"
    );

    // The cache itself equals the upstream at its version.
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r2.url())).await;
    let cached = Replay::from_list(&list.json());
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", cached.last).await;
    assert_eq!(cached.state, truth);

    r2.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
