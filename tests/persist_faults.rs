//! Snapshots that cannot be trusted are ignored, never misread: a corrupt,
//! a truncated, another upstream's one, and one whose version the upstream
//! has compacted (a 410, then a relist) each end in a cache equal to the
//! upstream. A disk that fills up while a snapshot is written costs the
//! snapshot, not the serving.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::common::*;

fn temp_dir(what: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "r8s-{what}-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// r8s in front of `upstream` caching `resource`, saved to `dir`.
fn saved(upstream: String, dir: &Path, resource: &str) -> R8sBuilder {
    let dir = dir.to_path_buf();
    r8s_in_front_of(upstream)
        .caching(&[resource])
        .with(|c| c.persist.dir = Some(dir))
}

/// `r8s_persist_loads_total` of the JSON pods store for `result`.
fn loads(m: &str, result: &str) -> f64 {
    sample(
        m,
        &format!(
            r#"r8s_persist_loads_total{{resource="v1/pods",encoding="json",result="{result}"}}"#
        ),
    )
}

/// Starts r8s on `dir`, checks that its pods equal the upstream's, and
/// returns its metrics; stops it (saving snapshots).
async fn round(upstream: &r8s_sim::SimHandle, dir: &Path) -> String {
    let r = saved(upstream.url(), dir, "pods").start().await;
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r.url())).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    let cached = Replay::from_list(&list.json());
    let truth = truth_at(&upstream.url(), "/api/v1/pods", "", cached.last).await;
    assert_eq!(cached.state, truth, "the cache equals the upstream");
    let m = get(&format!("{}/metrics", r.admin_url())).await.text();
    r.stop().await;
    m
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_ignore_snapshots_it_cannot_trust_and_start_cold() {
    let sim = start_sim(sim_config()).await;
    let dir = temp_dir("faults");
    let json = dir.join("core_v1_pods.json.snap");
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "loaded"), 0.0, "nothing to load the first time");
    assert!(json.exists());

    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "loaded"), 1.0);

    // A flipped byte in the middle: the checksum says so.
    let mut bytes = std::fs::read(&json).unwrap();
    let mid = bytes.len() / 2;
    bytes[mid] ^= 0x20;
    std::fs::write(&json, &bytes).unwrap();
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "corrupt"), 1.0);

    // Cut short, as by a crash of the disk (r8s itself renames whole files).
    let bytes = std::fs::read(&json).unwrap();
    std::fs::write(&json, &bytes[..bytes.len() / 3]).unwrap();
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "truncated"), 1.0);

    // Not a snapshot at all.
    std::fs::write(&json, b"{\"kind\":\"PodList\"}").unwrap();
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "corrupt"), 2.0);

    // Another upstream's snapshot (another cluster, same directory).
    let other = start_sim(sim_config()).await;
    let m = round(&other, &dir).await;
    assert_eq!(loads(&m, "foreign"), 1.0);
    assert_eq!(
        sample(
            &m,
            r#"r8s_persist_loads_total{resource="v1/pods",encoding="protobuf",result="foreign"}"#
        ),
        1.0
    );
    other.stop().await;

    // The directory now holds the other upstream's: ours is foreign to it.
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "foreign"), 2.0);

    // A snapshot whose version the upstream compacted: 410, relist.
    for i in 0..5 {
        sim.touch("ns-1", "pod-00001", i);
    }
    sim.sim.compact();
    let m = round(&sim, &dir).await;
    assert_eq!(loads(&m, "loaded"), 2.0);
    assert!(
        sample(
            &m,
            r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#
        ) >= 1.0,
        "the compacted version made it relist"
    );
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_keep_serving_when_the_disk_is_full() {
    // A 4 KiB tmpfs: the nodes' snapshot does not fit.
    let dir = temp_dir("full");
    std::fs::create_dir_all(&dir).unwrap();
    let mounted = std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=4k,mode=0700", "tmpfs"])
        .arg(&dir)
        .status()
        .expect("mount runs");
    assert!(
        mounted.success(),
        "this test mounts a small tmpfs to fill (it needs root, as the test suite's apt-get does)"
    );
    /// Unmounts the tmpfs however the test ends.
    struct Mounted(PathBuf);
    impl Drop for Mounted {
        fn drop(&mut self) {
            let _ = std::process::Command::new("umount").arg(&self.0).status();
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
    let _mounted = Mounted(dir.clone());
    let sim = start_sim(r8s_sim::SimConfig {
        pods: 40,
        nodes: 40,
        ..sim_config()
    })
    .await;
    let r = saved(sim.url(), &dir, "v1/nodes")
        .with(|c| c.persist.interval_seconds = 1)
        .start()
        .await;
    let errors = r#"r8s_persist_writes_total{resource="v1/nodes",encoding="json",result="error"}"#;
    let mut m = String::new();
    for _ in 0..100 {
        m = get(&format!("{}/metrics", r.admin_url())).await.text();
        if sample(&m, errors) >= 2.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        sample(&m, errors) >= 2.0,
        "writes failed and were counted: {m}"
    );
    // Serving is unaffected, and no partial file is left behind.
    let list = get(&format!("{}/api/v1/nodes?resourceVersion=0", r.url())).await;
    assert_eq!(list.status, 200);
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    assert_eq!(list.json()["items"].as_array().unwrap().len(), 40);
    assert_eq!(get(&format!("{}/readyz", r.admin_url())).await.status, 200);
    let left: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .filter(|n| n.to_string_lossy().ends_with(".tmp"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
    r.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_serve_its_snapshot_while_the_upstream_is_down_with_serve_stale() {
    use r8s_sim::fault::{Forwarder, Mode};
    let sim = start_sim(sim_config()).await;
    let link = Forwarder::start(sim.addr).await;
    let dir = temp_dir("offline");
    let serving_stale = |c: &mut r8s::config::Config| {
        c.cache.serve_stale = true;
        c.cache.max_staleness_seconds = 4;
    };
    let r = saved(link.url(), &dir, "v1/configmaps")
        .with(serving_stale)
        .start()
        .await;
    // Once the first snapshot is written, changes go to the log only: a
    // graceful stop appends the last of them, so the next start comes back
    // at the last version applied, not at the snapshot's.
    let snap = dir.join("core_v1_configmaps.json.snap");
    for _ in 0..100 {
        if snap.exists() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(snap.exists(), "the first snapshot is written");
    for i in 0..5 {
        let body = format!(
            r#"{{"apiVersion":"v1","kind":"ConfigMap","metadata":{{"name":"late-{i}","namespace":"default"}},"data":{{"k":"v"}}}}"#
        );
        let created = send(
            "POST",
            &format!("{}/api/v1/namespaces/default/configmaps", sim.url()),
            &[("content-type", "application/json")],
            Some(&body),
        )
        .await;
        assert_eq!(created.status, 201, "{}", created.text());
    }
    let last = sim.sim.store.current_rv();
    let list_url = format!("{}/api/v1/configmaps?resourceVersion=0", r.url());
    let mut list = get(&list_url).await.json();
    for _ in 0..100 {
        if list["metadata"]["resourceVersion"].as_str() == Some(last.to_string().as_str()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
        list = get(&list_url).await.json();
    }
    assert_eq!(list["metadata"]["resourceVersion"], last.to_string());
    let want = list["items"].as_array().unwrap().len();
    r.stop().await;
    let snapshot_rv = {
        let bytes = std::fs::read(&snap).unwrap();
        let head_len = u32::from_le_bytes(bytes[20..24].try_into().unwrap()) as usize;
        let header: serde_json::Value = serde_json::from_slice(&bytes[24..24 + head_len]).unwrap();
        header["resource_version"].as_u64().unwrap()
    };
    assert!(
        snapshot_rv < last,
        "the writes are in the log, not the snapshot"
    );

    // The upstream is down when r8s starts: discovery, lists and watches
    // fail; a warm start resolves its resources from persist.dir.
    link.set(Mode::Closed);
    let r = saved(link.url(), &dir, "v1/configmaps")
        .with(serving_stale)
        .with(|c| c.upstream.connect_timeout_seconds = 1.0)
        .unready()
        .start()
        .await;
    let (url, admin_url) = (r.url(), r.admin_url());
    let list_url = format!("{url}/api/v1/configmaps?resourceVersion=0");
    let mut list = get(&list_url).await;
    for _ in 0..50 {
        if list.headers.get("x-r8s-cache").is_some_and(|v| v == "hit") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        list = get(&list_url).await;
    }
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(
        list.headers["x-r8s-cache"], "hit",
        "served from the snapshot"
    );
    assert_eq!(list.json()["items"].as_array().unwrap().len(), want);
    assert_eq!(
        list.json()["metadata"]["resourceVersion"],
        last.to_string(),
        "back at the last version applied (the snapshot's was {snapshot_rv})"
    );
    // Past cache.max_staleness_seconds, with the Warning serve_stale gives.
    tokio::time::sleep(Duration::from_secs(5)).await;
    let list = get(&list_url).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    assert!(list.headers.get("warning").is_some(), "{:?}", list.headers);

    // The upstream comes back: the watch resumes, and r8s is ready.
    link.set(Mode::Pass);
    let guard = HangGuard::new();
    while get(&format!("{admin_url}/readyz")).await.status != 200 {
        guard.check(|| "not ready after the upstream came back".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    r.stop().await;
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
