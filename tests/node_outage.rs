//! A node-local r8s (`node.name`) rebooted during a control-plane outage
//! comes back from `persist.dir` with its node's pods, its Node and the
//! configmaps (and, only with `persist.include_secrets`, the secrets) its
//! pods reference, and serves them with the upstream still unreachable;
//! writes fail fast with the apiserver-shaped 503; once the upstream is
//! back it catches up, and files of objects no pod references any more are
//! removed.

use std::path::{Path, PathBuf};

use crate::common::*;
use r8s_sim::fault::{Forwarder, Mode};

const NODE: &str = "node-01";

/// A fresh directory under the system's temporary one.
fn temp_dir() -> PathBuf {
    let d = std::env::temp_dir().join(format!(
        "r8s-node-outage-{}-{}",
        std::process::id(),
        fastrand::u64(..)
    ));
    let _ = std::fs::remove_dir_all(&d);
    d
}

/// A node-local r8s in front of `upstream`, saved to `dir`, serving stale
/// caches through an outage.
fn node_local(upstream: String, dir: &Path, secrets: bool) -> R8sBuilder {
    let dir = dir.to_path_buf();
    r8s_in_front_of(upstream)
        .caching(&["pods", "nodes"])
        .with(move |c| {
            c.node.name = NODE.into();
            c.persist.dir = Some(dir);
            c.persist.include_secrets = secrets;
            c.cache.serve_stale = true;
        })
}

/// The names of the files in `dir`.
fn files(dir: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    out.sort();
    out
}

/// `POST` of `object` to `path` at `base`, as JSON.
async fn post(base: &str, path: &str, object: serde_json::Value) -> Resp {
    send(
        "POST",
        &format!("{base}{path}"),
        &[("content-type", "application/json")],
        Some(&object.to_string()),
    )
    .await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_come_back_from_a_reboot_during_an_outage_with_what_its_node_reads() {
    for secrets in [false, true] {
        come_back(secrets).await;
    }
}

async fn come_back(secrets: bool) {
    let mut cfg = sim_config();
    cfg.pods = 40;
    cfg.nodes = 4;
    let sim = start_sim(cfg).await;
    let truth = sim.url();
    // One link for both runs (a snapshot names its upstream by address).
    let link = Forwarder::start(sim.addr).await;
    let dir = temp_dir();
    let r1 = node_local(link.url(), &dir, secrets).start().await;
    let base = r1.url();
    let node_pods = format!("/api/v1/pods?fieldSelector=spec.nodeName%3D{NODE}&resourceVersion=0");
    let before = get(&format!("{base}{node_pods}")).await;
    assert_eq!(before.headers["x-r8s-cache"], "hit");
    let ns = before.json()["items"][0]["metadata"]["namespace"]
        .as_str()
        .unwrap()
        .to_string();

    // A pod of the node that reads a secret and a configmap of its own.
    let made = post(
        &truth,
        &format!("/api/v1/namespaces/{ns}/secrets"),
        serde_json::json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "app-secret", "namespace": ns}, "data": {"k": "dg=="}}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let made = post(
        &truth,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap",
        "metadata": {"name": "app-config", "namespace": ns}, "data": {"a": "b"}}),
    )
    .await;
    assert_eq!(made.status, 201, "{}", made.text());
    let made = post(&truth, &format!("/api/v1/namespaces/{ns}/pods"), serde_json::json!({
        "apiVersion": "v1", "kind": "Pod",
        "metadata": {"name": "app", "namespace": ns},
        "spec": {"nodeName": NODE, "containers": [{"name": "c", "image": "app:1",
            "envFrom": [{"configMapRef": {"name": "app-config"}}],
            "env": [{"name": "K", "valueFrom": {"secretKeyRef": {"name": "app-secret", "key": "k"}}}]}]}})).await;
    assert_eq!(made.status, 201, "{}", made.text());
    let by_name = |resource: &str, name: &str| {
        format!(
            "/api/v1/namespaces/{ns}/{resource}?fieldSelector=metadata.name%3D{name}&resourceVersion=0"
        )
    };
    let (config, secret) = (
        by_name("configmaps", "app-config"),
        by_name("secrets", "app-secret"),
    );
    let node = format!("/api/v1/nodes/{NODE}?resourceVersion=0");
    let hit = |base: String, path: String| async move {
        let r = get(&format!("{base}{path}")).await;
        (r.headers["x-r8s-cache"] == "hit").then_some(r)
    };
    let mut seen = Vec::new();
    for path in [&config, &secret, &node_pods, &node] {
        let r = eventually(&format!("{path} from the cache"), HANG, || {
            hit(base.clone(), path.clone())
        })
        .await;
        seen.push(r.json());
    }

    // A reboot: stopped (its caches saved), the control plane gone.
    r1.stop().await;
    let saved = files(&dir);
    let object = |name: &str| saved.iter().any(|f| f.contains(&format!("~{ns}~{name}.")));
    assert!(object("app-config"), "the configmap saved: {saved:?}");
    assert_eq!(
        object("app-secret"),
        secrets,
        "the secret saved only with include_secrets: {saved:?}"
    );
    link.set(Mode::Refuse);
    // Ready (systemd's READY=1, a probe's 200) from its snapshots alone.
    let r2 = node_local(link.url(), &dir, secrets).start().await;
    let base = r2.url();
    for (path, was) in [&config, &secret, &node_pods, &node].into_iter().zip(&seen) {
        let r = get(&format!("{base}{path}")).await;
        let from_disk = path != &secret || secrets;
        if from_disk {
            assert_eq!(
                r.headers["x-r8s-cache"],
                "hit",
                "{path} after the reboot: {}",
                r.text()
            );
            assert_eq!(&r.json(), was, "{path} as before the reboot");
        } else {
            // Not on disk: it passes, to the outage's 503.
            assert_eq!(r.status, 503, "{path}: {}", r.text());
        }
    }
    // A write fails fast, as the apiserver's 503, naming the upstream.
    let w = post(
        &base,
        &format!("/api/v1/namespaces/{ns}/configmaps"),
        serde_json::json!({
        "apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "during"}}),
    )
    .await;
    assert_eq!(w.status, 503, "{}", w.text());
    assert_eq!(w.json()["kind"], "Status");
    assert_eq!(w.headers["retry-after"], "1");
    assert!(
        w.json()["message"]
            .as_str()
            .unwrap()
            .contains(&link.addr.to_string()),
        "{}",
        w.text()
    );

    // Back: writes flow, the caches catch up, and the pod gone, its
    // objects' caches and files go.
    link.set(Mode::Pass);
    let gone = eventually("a write after the outage", HANG, || async {
        let r = send(
            "DELETE",
            &format!("{base}/api/v1/namespaces/{ns}/pods/app"),
            &[],
            None,
        )
        .await;
        (r.status == 200).then_some(r)
    })
    .await;
    assert_eq!(gone.json()["metadata"]["name"], "app");
    eventually("the configmap's cache and files dropped", HANG, || async {
        let r = get(&format!("{base}{config}")).await;
        let left = files(&dir).iter().any(|f| f.contains('~'));
        (r.headers["x-r8s-cache"] == "pass" && !left).then_some(())
    })
    .await;
    let pods_now = get(&format!("{truth}{node_pods}")).await.json();
    eventually("the node's pods caught up", HANG, || async {
        let r = get(&format!("{base}{node_pods}")).await;
        let names = |l: &serde_json::Value| {
            let mut n: Vec<String> = l["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
                .collect();
            n.sort();
            n
        };
        (r.headers["x-r8s-cache"] == "hit" && names(&r.json()) == names(&pods_now)).then_some(())
    })
    .await;
    r2.stop().await;
    link.stop();
    sim.stop().await;
    let _ = std::fs::remove_dir_all(&dir);
}
