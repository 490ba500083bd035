//! Failover between upstream servers never goes back in time. Two tiers:
//! r8s A in front of r8s B1 and B2, both in front of the sim, each link
//! through a fault forwarder. The server A follows dies while the other is
//! held behind (its own upstream stalled): A must wait for it rather than
//! serve or send anything older than it already has.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;
use r8s::config::Config;
use r8s_sim::SimHandle;
use r8s_sim::fault::{Forwarder, Mode};
use tokio::task::JoinHandle;

/// The two tiers and the links between them.
struct Tiers {
    sim: SimHandle,
    /// B1 → sim, B2 → sim.
    up: [Forwarder; 2],
    b: [R8s; 2],
    /// A → B1, A → B2.
    down: [Forwarder; 2],
    a: R8s,
}

async fn tier(upstream: String, max_staleness: u64) -> R8s {
    let mut config = Config::default();
    config.upstream.servers = vec![upstream];
    config.cache.resources = vec!["pods".into()];
    config.cache.encodings = vec!["json".into()];
    config.cache.max_staleness_seconds = max_staleness;
    start_r8s_config(config).await
}

impl Tiers {
    async fn start(a_max_staleness: u64) -> Tiers {
        let sim = start_sim(sim_config()).await;
        let up = [
            Forwarder::start(sim.addr).await,
            Forwarder::start(sim.addr).await,
        ];
        let b = [tier(up[0].url(), 120).await, tier(up[1].url(), 120).await];
        let down = [
            Forwarder::start(b[0].addr).await,
            Forwarder::start(b[1].addr).await,
        ];
        let mut config = Config::default();
        config.upstream.servers = vec![down[0].url(), down[1].url()];
        config.cache.resources = vec!["pods".into()];
        config.cache.encodings = vec!["json".into()];
        config.cache.max_staleness_seconds = a_max_staleness;
        let a = start_r8s_config(config).await;
        Tiers {
            sim,
            up,
            b,
            down,
            a,
        }
    }

    /// A's cached list: its version, or None when A passed the read on.
    async fn a_version(&self) -> Option<u64> {
        let r = get(&format!("{}/api/v1/pods?resourceVersion=0", self.a.url())).await;
        assert_eq!(r.status, 200, "{}", r.text());
        (r.headers["x-r8s-cache"] == "hit").then(|| {
            r.json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap()
        })
    }

    /// Waits until A's cache is at `rv` at least; checks on the way that a
    /// version A serves is never older than one it served before.
    async fn a_reaches(&self, rv: u64, served: &mut u64, what: &str) {
        let guard = HangGuard::new();
        loop {
            if let Some(v) = self.a_version().await {
                assert!(v >= *served, "{what}: A served {v} after {served}");
                *served = v;
                if v >= rv {
                    return;
                }
            }
            guard.check(|| format!("{what}: A never reached {rv} (at {served})"));
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    /// The B that A's reflector follows now: the one a write reaches A
    /// through (A talks to its B through `down`; metrics cannot say, all
    /// in-process r8s share one recorder). The write is counted in `writes`.
    async fn followed(&self, writes: &mut usize, served: &mut u64) -> usize {
        // Asked again when both carried bytes (a watch renewed or moved
        // while the write went through).
        for _ in 0..10 {
            let before = [
                self.down[0].bytes_to_clients(),
                self.down[1].bytes_to_clients(),
            ];
            self.sim.touch("ns-0", "pod-00000", *writes);
            *writes += 1;
            let rv = self.sim.sim.store.current_rv();
            self.a_reaches(rv, served, "finding the B that A follows")
                .await;
            let moved = [
                self.down[0].bytes_to_clients() > before[0],
                self.down[1].bytes_to_clients() > before[1],
            ];
            match moved {
                [true, false] => return 0,
                [false, true] => return 1,
                _ => tokio::time::sleep(Duration::from_millis(100)).await,
            }
        }
        panic!("writes kept reaching A through both Bs");
    }

    async fn stop(self) {
        self.a.stop().await;
        for b in self.b {
            b.stop().await;
        }
        for f in self.up.into_iter().chain(self.down) {
            f.stop();
        }
        self.sim.stop().await;
    }
}

/// Starts a watcher through A from A's current list.
async fn watcher(t: &Tiers) -> (Arc<Mutex<Replay>>, JoinHandle<()>) {
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", t.a.url()))
        .await
        .json();
    let replay = Replay::from_list(&list);
    let url = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=3600",
        t.a.url(),
        replay.last
    );
    follow(url, replay, "the watcher through A".into())
}

/// Waits until the watcher has seen `rv`, and checks its state is the sim's there.
async fn watcher_reaches(
    sim: &SimHandle,
    w: &(Arc<Mutex<Replay>>, JoinHandle<()>),
    rv: u64,
) -> Replay {
    let guard = HangGuard::new();
    loop {
        let r = w.0.lock().unwrap().clone();
        if r.last >= rv {
            let truth = truth_at(&sim.url(), "/api/v1/pods", "", r.last).await;
            assert_eq!(
                r.state, truth,
                "the watcher's state is the sim's at {}",
                r.last
            );
            return r;
        }
        assert!(
            !w.1.is_finished(),
            "the watcher through A ended at {} (wanted {rv})",
            r.last
        );
        guard.check(|| format!("the watcher through A is stuck at {} (wanted {rv})", r.last));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_fail_over_to_a_server_behind_without_going_back_100_times() {
    const ROUNDS: usize = 100;
    let t = Tiers::start(120).await;
    let w = watcher(&t).await;
    let mut served = 0;
    let mut writes = 0;
    let started = Instant::now();
    for round in 0..ROUNDS {
        // The B that A follows dies; the other is held behind.
        let victim = t.followed(&mut writes, &mut served).await;
        let survivor = 1 - victim;
        let what = format!("round {round}");

        // The survivor falls behind: its upstream is stalled.
        t.up[survivor].set(Mode::Stall);
        for _ in 0..3 {
            t.sim.touch("ns-1", "pod-00001", writes);
            writes += 1;
        }
        let ahead = t.sim.sim.store.current_rv();
        t.a_reaches(ahead, &mut served, &what).await;

        // The server A follows dies: its connections are reset, new ones refused.
        let before = t.down[survivor].bytes_to_clients();
        t.down[victim].set(Mode::Refuse);
        t.down[victim].reset_all();
        for _ in 0..2 {
            t.sim.touch("ns-2", "pod-00002", writes);
            writes += 1;
        }
        // A moves to the survivor, which is behind: A waits for it, serving
        // what it has, never anything older.
        let guard = HangGuard::new();
        while t.down[survivor].bytes_to_clients() <= before {
            guard.check(|| format!("{what}: A never moved to the other server"));
            if let Some(v) = t.a_version().await {
                assert!(v >= served, "{what}: A served {v} after {served}");
                served = v;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        for _ in 0..3 {
            if let Some(v) = t.a_version().await {
                assert!(
                    v >= ahead && v >= served,
                    "{what}: A served {v} after {served}"
                );
                served = v;
            }
        }

        // The survivor catches up; so do A and its watcher, without a gap.
        t.up[survivor].set(Mode::Pass);
        let now = t.sim.sim.store.current_rv();
        t.a_reaches(now, &mut served, &what).await;
        t.down[victim].set(Mode::Pass);
    }
    let last = t.sim.sim.store.current_rv();
    let replay = watcher_reaches(&t.sim, &w, last).await;
    assert_eq!(
        replay.events, writes,
        "every write reached the watcher through A once, as its own event"
    );
    let m = get(&format!("{}/metrics", t.a.admin_url())).await.text();
    let relists: f64 = ["expired", "malformed"]
        .iter()
        .map(|r| {
            sample(
                &m,
                &format!(r#"r8s_reflector_relists_total{{resource="v1/pods",encoding="json",reason="{r}"}}"#),
            )
        })
        .sum();
    // (The recorder is shared by every r8s in this process: this counts
    // A's relists and the Bs' together, and every one of them is 0.)
    assert_eq!(
        relists, 0.0,
        "A resumed its watch at each failover; it never relisted"
    );
    let behind = sample(
        &m,
        r#"r8s_reflector_behind_total{resource="v1/pods",encoding="json"}"#,
    );
    println!(
        "{ROUNDS} failovers to a server held behind in {:?}: {writes} writes, every one seen once by the watcher through A, versions never went back; relists {relists}, states refused as older {behind}",
        started.elapsed()
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_fail_over_from_a_silent_server_without_going_back() {
    const ROUNDS: usize = 4;
    // A notices a silent server within about 6 s (a quarter of the bound
    // per request, watches of 2 to 4 s).
    let t = Tiers::start(8).await;
    let w = watcher(&t).await;
    let mut served = 0;
    let mut writes = 0;
    for round in 0..ROUNDS {
        let victim = t.followed(&mut writes, &mut served).await;
        let survivor = 1 - victim;
        let what = format!("silent round {round}");
        t.up[survivor].set(Mode::Stall);
        t.sim.touch("ns-1", "pod-00001", writes);
        writes += 1;
        let ahead = t.sim.sim.store.current_rv();
        t.a_reaches(ahead, &mut served, &what).await;

        // The server A follows goes silent: nothing passes, nothing closes.
        let before = t.down[survivor].bytes_to_clients();
        t.down[victim].set(Mode::Stall);
        t.sim.touch("ns-2", "pod-00002", writes);
        writes += 1;
        let cut = Instant::now();
        let guard = HangGuard::new();
        while t.down[survivor].bytes_to_clients() <= before {
            guard.check(|| format!("{what}: A never left the silent server"));
            if let Some(v) = t.a_version().await {
                assert!(v >= served, "{what}: A served {v} after {served}");
                served = v;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let noticed = cut.elapsed();
        t.up[survivor].set(Mode::Pass);
        let now = t.sim.sim.store.current_rv();
        t.a_reaches(now, &mut served, &what).await;
        println!("{what}: A moved off the silent server after {noticed:?}");
        // The silent one heals, its stalled connections reset (as a
        // middlebox that lost them would).
        t.down[victim].reset_all();
        t.down[victim].set(Mode::Pass);
    }
    let replay = watcher_reaches(&t.sim, &w, t.sim.sim.store.current_rv()).await;
    assert_eq!(replay.events, writes);
    let m = get(&format!("{}/metrics", t.a.admin_url())).await.text();
    assert!(
        sample(&m, "r8s_upstream_failovers_total") >= ROUNDS as f64,
        "{m}"
    );
    assert!(
        sample(
            &m,
            r#"r8s_reflector_silent_total{resource="v1/pods",encoding="json"}"#
        ) >= ROUNDS as f64
    );
    t.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_a_streaming_list_of_a_version_not_reached_as_the_cacher_does() {
    let sim = start_sim(sim_config()).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.read.on_too_new = r8s::config::OnTooNew::Timeout;
    let r8s = start_r8s_config(config).await;
    let cur = sim.sim.store.current_rv();
    let path = format!(
        "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=30",
        cur + 1000
    );
    let mut bodies = Vec::new();
    for base in [sim.url(), r8s.url()] {
        // The ERROR comes after the wait for the version (0.3 s on the sim,
        // 0.2 s on r8s in tests), not at the watch's end: read for 25 s of
        // its 30, an ERROR sent at the end would not be seen.
        let (replay, served) = watch_replay(
            &format!("{base}{path}"),
            Replay::streaming(),
            Duration::from_secs(25),
            &base,
        )
        .await;
        assert_eq!(replay.events, 0, "{base}");
        let err = replay
            .error
            .unwrap_or_else(|| panic!("{base}: no ERROR event"));
        assert_eq!(err["code"], 504, "{base}: {err}");
        assert_eq!(err["reason"], "Timeout", "{base}: {err}");
        let msg = err["message"].as_str().unwrap();
        assert!(
            msg.starts_with(&format!(
                "Timeout: Too large resource version: {}, current: ",
                cur + 1000
            )),
            "{base}: {msg}"
        );
        bodies.push(served);
    }
    assert_eq!(bodies[1], "hit", "r8s answered from its cache");
    // With the default (`pass`), r8s asks the upstream's version: beyond
    // it too, r8s gives the same 504 itself rather than pass the request
    // on to wait a second time (kube-apiserver 1.36's answer after one wait).
    let r8s_pass = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let (replay, served) = watch_replay(
        &format!("{}{path}", r8s_pass.url()),
        Replay::streaming(),
        Duration::from_secs(10),
        "r8s (pass)",
    )
    .await;
    assert_eq!(served, "hit");
    assert_eq!(replay.error.unwrap()["code"], 504);
    r8s_pass.stop().await;
    r8s.stop().await;
    sim.stop().await;
}
