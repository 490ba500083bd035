//! Issue 42: crashes while appending and compacting. r8s (the binary) caches
//! pods from the sim under churn with `persist.dir` and a small compaction
//! ratio, so that compactions run every few seconds, and is killed (SIGKILL) at
//! seeded random moments; between runs its newest log is sometimes cut at a
//! random offset or has a byte flipped. Every start must come back to a state
//! that equals the upstream's at the version it serves: nothing lost, nothing
//! applied twice.

use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use crate::common::*;
use r8s_sim::SimConfig;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// A child killed however the test ends.
struct Killed(Child);

impl Drop for Killed {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts r8s caching pods from `upstream` with `config`; returns it and its
/// API and admin addresses (from its "r8s serving" line).
async fn start(upstream: &str, config: &Path) -> (Killed, String, String) {
    let mut child = Command::new(BIN)
        .arg("serve")
        .arg("--config")
        .arg(config)
        .args(["--upstream", upstream, "--cache", "pods"])
        .args(["--listen", "127.0.0.1:0", "--admin-listen", "127.0.0.1:0"])
        .env("RUST_LOG", "info")
        .env_remove("R8S_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let child = Killed(child);
    let addrs = tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "r8s ended early");
            if line.contains("r8s serving") {
                let field = |name: &str| {
                    let v = line.split(&format!("{name}=")).nth(1).unwrap();
                    v.split_whitespace().next().unwrap().to_string()
                };
                let addrs = (field("api"), field("admin"));
                // Keep draining stderr so r8s never blocks on it.
                std::thread::spawn(move || {
                    let mut sink = String::new();
                    while r.read_line(&mut sink).is_ok_and(|n| n > 0) {
                        sink.clear();
                    }
                });
                return addrs;
            }
        }
    });
    let (api, admin) = tokio::time::timeout(HANG, addrs)
        .await
        .expect("r8s printed its serving line")
        .unwrap();
    let ready = format!("http://{admin}/readyz");
    for _ in 0..600 {
        if get(&ready).await.status == 200 {
            return (child, format!("http://{api}"), format!("http://{admin}"));
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("r8s never became ready");
}

/// The store's newest log segment of `encoding` that holds records, if any.
fn newest_segment(dir: &Path, encoding: &str) -> Option<PathBuf> {
    let prefix = format!("core_v1_pods.{encoding}.");
    let mut segs: Vec<PathBuf> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            let n = p.file_name().unwrap().to_string_lossy();
            n.starts_with(&prefix) && n.ends_with(".log")
        })
        .filter(|p| {
            let bytes = std::fs::read(p).unwrap();
            bytes.len() > records_start(&bytes)
        })
        .collect();
    segs.sort();
    segs.pop()
}

/// Where a segment's records start (after its header).
fn records_start(bytes: &[u8]) -> usize {
    if bytes.len() < 16 {
        return usize::MAX;
    }
    let head_len = u32::from_le_bytes(bytes[12..16].try_into().unwrap()) as usize;
    16 + head_len + 4
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_equal_the_upstream_after_crashes_while_appending_and_compacting() {
    let sim = start_sim(SimConfig {
        pods: 300,
        namespaces: 3,
        churn: 40.0,
        history: 1_000_000,
        ..sim_config()
    })
    .await;
    let dir = std::env::temp_dir().join(format!("r8s-crash-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let config = dir.with_extension("toml");
    std::fs::write(
        &config,
        format!(
            "[persist]\ndir = {:?}\ninterval_seconds = 1\ncompaction_ratio = 0.3\n",
            dir.display().to_string()
        ),
    )
    .unwrap();
    let mut rng = fastrand::Rng::with_seed(42);
    let (mut warm, mut refused_tails, mut compactions) = (0, 0.0, 0.0);
    for round in 0..8 {
        let (child, api, admin) = start(&sim.url(), &config).await;
        // What it serves equals the upstream at the version it serves.
        let list = get(&format!("{api}/api/v1/pods?resourceVersion=0")).await;
        assert_eq!(list.status, 200);
        assert_eq!(list.headers["x-r8s-cache"], "hit", "round {round}");
        let body = list.json();
        let rv: u64 = body["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .parse()
            .unwrap();
        let served: std::collections::BTreeMap<String, u64> = body["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|it| (key_of(it), rv_of(it)))
            .collect();
        let truth = truth_at(&sim.url(), "/api/v1/pods", "", rv).await;
        assert_eq!(served, truth, "round {round}: r8s at {rv} against the sim");
        let m = get(&format!("{admin}/metrics")).await.text();
        warm += sample(
            &m,
            r#"r8s_persist_loads_total{resource="v1/pods",encoding="json",result="loaded"}"#,
        ) as usize;
        for encoding in ["json", "protobuf"] {
            // Snapshots are never damaged here: each one written was whole.
            for result in ["truncated", "corrupt"] {
                let series = format!(
                    r#"r8s_persist_loads_total{{resource="v1/pods",encoding="{encoding}",result="{result}"}}"#
                );
                assert_eq!(sample(&m, &series), 0.0, "round {round}: {series}");
            }
            for result in ["truncated", "corrupt"] {
                refused_tails += sample(
                    &m,
                    &format!(
                        r#"r8s_persist_log_loads_total{{resource="v1/pods",encoding="{encoding}",result="{result}"}}"#
                    ),
                );
            }
        }
        // Run until each encoding has a snapshot and a log with records on
        // disk (however long a busy machine takes), then a while more
        // (appending, compacting), then crash: the damage below then always
        // lands in a log the next start reads.
        eventually("a snapshot and a log of each encoding", HANG, || async {
            ["json", "protobuf"]
                .iter()
                .all(|e| {
                    dir.join(format!("core_v1_pods.{e}.snap")).exists()
                        && newest_segment(&dir, e).is_some()
                })
                .then_some(())
        })
        .await;
        tokio::time::sleep(Duration::from_millis(rng.u64(500..4_000))).await;
        let m = get(&format!("{admin}/metrics")).await.text();
        compactions += sample(
            &m,
            r#"r8s_persist_writes_total{resource="v1/pods",encoding="json",result="ok"}"#,
        );
        drop(child);
        // Segments are removed once a compaction covers them.
        for encoding in ["json", "protobuf"] {
            let prefix = format!("core_v1_pods.{encoding}.");
            let segments = std::fs::read_dir(&dir)
                .unwrap()
                .filter(|e| {
                    let n = e.as_ref().unwrap().file_name();
                    let n = n.to_string_lossy();
                    n.starts_with(&prefix) && n.ends_with(".log")
                })
                .count();
            assert!(
                segments <= 6,
                "round {round}: {segments} {encoding} segments"
            );
        }
        // Sometimes damage the newest log: cut it, or flip a byte.
        let encoding = if rng.bool() { "json" } else { "protobuf" };
        if let Some(seg) = newest_segment(&dir, encoding) {
            let mut bytes = std::fs::read(&seg).unwrap();
            let (start, len) = (records_start(&bytes), bytes.len());
            if len > start {
                let at = rng.usize(start..len);
                match round % 3 {
                    1 => bytes.truncate(at),
                    2 => bytes[at] ^= 1 << rng.u32(0..8),
                    _ => {}
                }
                std::fs::write(&seg, &bytes).unwrap();
            }
        }
    }
    assert!(warm >= 6, "most starts came back warm: {warm} of 8");
    assert!(compactions >= 4.0, "compactions completed: {compactions}");
    assert!(refused_tails >= 1.0, "damaged logs were cut with a reason");
    let _ = std::fs::remove_dir_all(&dir);
    let _ = std::fs::remove_file(&config);
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_fall_behind_and_compact_when_the_log_cannot_keep_up() {
    // A watch log of 5 events under 40 writes/s: between two appends the
    // store's log moves past the writer's cursor, as behind a disk slower
    // than the changes. Serving goes on; the log is given up and compacted.
    let sim = start_sim(SimConfig {
        pods: 200,
        namespaces: 2,
        churn: 40.0,
        history: 1_000_000,
        ..sim_config()
    })
    .await;
    let dir = std::env::temp_dir().join(format!("r8s-behind-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let saved = |d: PathBuf| {
        r8s_in_front_of(sim.url())
            .caching(&["pods"])
            .with(move |c| {
                c.persist.dir = Some(d);
                c.persist.interval_seconds = 1;
                c.watch.history_events = 5;
            })
    };
    let r = saved(dir.clone()).start().await;
    let behind = r#"r8s_persist_behind_total{resource="v1/pods",encoding="json"}"#;
    let mut m = String::new();
    for _ in 0..100 {
        m = get(&format!("{}/metrics", r.admin_url())).await.text();
        if sample(&m, behind) >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        sample(&m, behind) >= 1.0,
        "the log fell behind and it was counted"
    );
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit", "serving goes on");
    r.stop().await;
    // What is on disk is a true state of the upstream's.
    let r = saved(dir.clone()).start().await;
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    assert_eq!(
        sample(
            &m,
            r#"r8s_persist_loads_total{resource="v1/pods",encoding="json",result="loaded"}"#
        ),
        1.0
    );
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    let cached = Replay::from_list(&list.json());
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", cached.last).await;
    assert_eq!(cached.state, truth, "the cache equals the upstream");
    r.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_run_one_compaction_at_a_time_at_its_pace() {
    // At 64 KiB/s a first snapshot of 300 pods (about 1.3 MB of JSON)
    // takes some 20 s: meanwhile changes go to one new segment per store,
    // and the snapshot grows at the pace.
    let sim = start_sim(SimConfig {
        pods: 300,
        namespaces: 3,
        churn: 40.0,
        ..sim_config()
    })
    .await;
    let dir = std::env::temp_dir().join(format!("r8s-paced-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let d = dir.clone();
    let r = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(move |c| {
            c.persist.dir = Some(d);
            c.persist.interval_seconds = 1;
            c.persist.max_write_bytes_per_second = 65_536;
        })
        .start()
        .await;
    tokio::time::sleep(Duration::from_secs(5)).await;
    let names: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    for encoding in ["json", "protobuf"] {
        let prefix = format!("core_v1_pods.{encoding}.");
        let segments = names
            .iter()
            .filter(|n| n.starts_with(&prefix) && n.ends_with(".log"))
            .count();
        assert!(segments <= 1, "{encoding}: {segments} segments: {names:?}");
    }
    let tmp = names.iter().filter(|n| n.ends_with(".snap.tmp")).count();
    assert_eq!(tmp, 1, "one compaction at a time: {names:?}");
    assert!(
        !names.iter().any(|n| n.ends_with(".snap")),
        "no snapshot done yet at 64 KiB/s: {names:?}"
    );
    let written: u64 = names
        .iter()
        .filter(|n| n.ends_with(".snap.tmp"))
        .map(|n| std::fs::metadata(dir.join(n)).map_or(0, |m| m.len()))
        .sum();
    // 5 s at 64 KiB/s, plus one step and one buffer of 256 KiB each.
    assert!(
        written <= 5 * 65_536 + (512 << 10),
        "{written} bytes in 5 s"
    );
    r.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
