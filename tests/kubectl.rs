//! The real kubectl through r8s (pass-through), each command compared with the
//! same command sent straight to the sim.

use std::time::Duration;

use crate::common::*;

const T: Duration = Duration::from_secs(60);

fn ok(o: &std::process::Output) -> String {
    assert!(
        o.status.success(),
        "kubectl failed: {}\n{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    String::from_utf8_lossy(&o.stdout).into_owned()
}

/// `kubectl get pods` shows the columns kube-apiserver prints for pods,
/// straight from the sim and through r8s alike.
#[tokio::test(flavor = "multi_thread")]
async fn should_print_the_apiservers_pod_columns() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    for server in [sim.url(), r8s.url()] {
        let out = ok(&kubectl(&server, &["get", "pods", "-n", "ns-0"], None, T).await);
        let mut lines = out.lines();
        let head: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        assert_eq!(
            head,
            ["NAME", "READY", "STATUS", "RESTARTS", "AGE"],
            "{out}"
        );
        let first: Vec<&str> = lines.next().unwrap().split_whitespace().collect();
        // pod-00000: scheduled (every other pod is), its one container ready, 8 days old.
        assert_eq!(first, ["pod-00000", "1/1", "Running", "0", "8d"], "{out}");
        let pending = lines
            .find(|l| l.starts_with("pod-00003 "))
            .expect("pod-00003 listed");
        let cells: Vec<&str> = pending.split_whitespace().collect();
        assert_eq!(cells[1..4], ["0/1", "Pending", "0"], "{out}");
        let wide = ok(&kubectl(
            &server,
            &["get", "pods", "-n", "ns-0", "-o", "wide"],
            None,
            T,
        )
        .await);
        assert!(
            wide.lines().next().unwrap().contains("IP") && wide.contains("node-00"),
            "{wide}"
        );
    }
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_behave_like_the_sim_for_reads() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let (via, direct) = (r8s.url(), sim.url());

    let a = ok(&kubectl(&via, &["get", "pods", "-A"], None, T).await);
    let b = ok(&kubectl(&direct, &["get", "pods", "-A"], None, T).await);
    assert_eq!(a, b);
    assert!(a.lines().count() > 40, "{a}");

    let a = ok(&kubectl(&via, &["get", "pods", "-n", "ns-1", "-o", "json"], None, T).await);
    let b = ok(&kubectl(
        &direct,
        &["get", "pods", "-n", "ns-1", "-o", "json"],
        None,
        T,
    )
    .await);
    let (a, b): (serde_json::Value, serde_json::Value) = (
        serde_json::from_str(&a).unwrap(),
        serde_json::from_str(&b).unwrap(),
    );
    assert_eq!(a, b);
    assert!(!a["items"].as_array().unwrap().is_empty());

    let raw = "/api/v1/pods?resourceVersion=0";
    let a = ok(&kubectl(&via, &["get", "--raw", raw], None, T).await);
    let b = ok(&kubectl(&direct, &["get", "--raw", raw], None, T).await);
    assert_eq!(a, b);
    assert!(a.starts_with("{\"kind\":\"PodList\""), "{a}");

    let a = kubectl_for(
        &via,
        &["logs", "-f", "pod-00000", "-n", "ns-0", "-c", "main"],
        Duration::from_millis(3500),
    )
    .await;
    let b = kubectl_for(
        &direct,
        &["logs", "-f", "pod-00000", "-n", "ns-0", "-c", "main"],
        Duration::from_millis(3500),
    )
    .await;
    assert!(
        a.lines().count() >= 4,
        "logs -f streams a line a second after the first three: {a:?}"
    );
    assert_eq!(
        a.lines().take(4).collect::<Vec<_>>(),
        b.lines().take(4).collect::<Vec<_>>()
    );

    // Without authentication exec is refused, as `kubectl proxy` refuses it
    // (server.reject_paths); cleared, exec passes through as it came.
    let exec = [
        "exec",
        "-i",
        "pod-00000",
        "-n",
        "ns-0",
        "-c",
        "main",
        "--",
        "cat",
    ];
    let refused = kubectl(&via, &exec, Some("hello through r8s\n"), T).await;
    assert!(!refused.status.success(), "exec through r8s without auth");
    let err = String::from_utf8_lossy(&refused.stderr);
    assert!(
        err.contains("Forbidden") || err.contains("forbidden"),
        "{err}"
    );
    assert!(
        err.contains("server.reject_paths"),
        "the refusal names the setting: {err}"
    );
    r8s.stop().await;

    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.server.reject_paths = Vec::new();
    let r8s = start_r8s_config(config).await;
    let via = r8s.url();
    let a = kubectl(&via, &exec, Some("hello through r8s\n"), T).await;
    let b = kubectl(&direct, &exec, Some("hello through r8s\n"), T).await;
    assert_eq!(ok(&a), "hello through r8s\n");
    assert_eq!(ok(&a), ok(&b));
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_behave_like_the_sim_for_writes() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let (via, direct) = (r8s.url(), sim.url());

    let a = ok(&kubectl(
        &via,
        &[
            "create",
            "configmap",
            "cm-via",
            "-n",
            "default",
            "--from-literal=k=v",
        ],
        None,
        T,
    )
    .await);
    let b = ok(&kubectl(
        &direct,
        &[
            "create",
            "configmap",
            "cm-direct",
            "-n",
            "default",
            "--from-literal=k=v",
        ],
        None,
        T,
    )
    .await);
    assert_eq!(a.replace("cm-via", "X"), b.replace("cm-direct", "X"));
    let stored = configmap_value(&direct, "cm-via").await;
    assert_eq!(stored, "v", "the create through r8s reached the upstream");

    let dir = tempdir();
    let widget = |name: &str, size: u32| {
        let p = dir.join(format!("{name}-{size}.yaml"));
        std::fs::write(&p, format!(
            "apiVersion: example.r8s.dev/v1\nkind: Widget\nmetadata:\n  name: {name}\n  namespace: default\nspec:\n  size: {size}\n"
        )).unwrap();
        p.display().to_string()
    };
    let a = ok(&kubectl(&via, &["apply", "-f", &widget("w-via", 1)], None, T).await);
    let b = ok(&kubectl(&direct, &["apply", "-f", &widget("w-direct", 1)], None, T).await);
    assert_eq!(a.replace("w-via", "X"), b.replace("w-direct", "X"));
    assert!(a.contains("created"), "{a}");
    let a = ok(&kubectl(&via, &["apply", "-f", &widget("w-via", 2)], None, T).await);
    assert!(a.contains("configured"), "{a}");
    let size = ok(&kubectl(
        &direct,
        &[
            "get",
            "widgets",
            "w-via",
            "-n",
            "default",
            "-o",
            "jsonpath={.spec.size}",
        ],
        None,
        T,
    )
    .await);
    assert_eq!(size, "2");

    let a = ok(&kubectl(
        &via,
        &[
            "patch",
            "configmap",
            "cm-via",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"k":"patched"}}"#,
        ],
        None,
        T,
    )
    .await);
    let b = ok(&kubectl(
        &direct,
        &[
            "patch",
            "configmap",
            "cm-direct",
            "-n",
            "default",
            "--type",
            "merge",
            "-p",
            r#"{"data":{"k":"patched"}}"#,
        ],
        None,
        T,
    )
    .await);
    assert_eq!(a.replace("cm-via", "X"), b.replace("cm-direct", "X"));
    let v = configmap_value(&direct, "cm-via").await;
    assert_eq!(v, "patched");

    let a = ok(&kubectl(
        &via,
        &["delete", "configmap", "cm-via", "-n", "default"],
        None,
        T,
    )
    .await);
    let b = ok(&kubectl(
        &direct,
        &["delete", "configmap", "cm-direct", "-n", "default"],
        None,
        T,
    )
    .await);
    assert_eq!(a.replace("cm-via", "X"), b.replace("cm-direct", "X"));
    let gone = kubectl(
        &direct,
        &["get", "configmap", "cm-via", "-n", "default"],
        None,
        T,
    )
    .await;
    assert!(!gone.status.success());
    assert!(String::from_utf8_lossy(&gone.stderr).contains("NotFound"));
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_print_changes_with_get_watch_while_churning() {
    let mut cfg = sim_config();
    cfg.churn = 30.0;
    cfg.namespaces = 1;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let listing = ok(&kubectl(&sim.url(), &["get", "pods", "-n", "ns-0"], None, T).await);
    let initial = listing.lines().count();
    let via = kubectl_for(
        &r8s.url(),
        &["get", "pods", "-n", "ns-0", "-w"],
        Duration::from_secs(3),
    )
    .await;
    let direct = kubectl_for(
        &sim.url(),
        &["get", "pods", "-n", "ns-0", "-w"],
        Duration::from_secs(3),
    )
    .await;
    assert!(
        via.lines().count() > initial + 5,
        "changes printed through r8s: {} lines vs {initial}",
        via.lines().count()
    );
    assert!(direct.lines().count() > initial + 5);
    assert!(via.lines().next().unwrap().starts_with("NAME"));
    r8s.stop().await;
    sim.stop().await;
}

/// `data.k` of a configmap in `default`, read straight from the sim.
async fn configmap_value(server: &str, name: &str) -> String {
    let args = [
        "get",
        "configmap",
        name,
        "-n",
        "default",
        "-o",
        "jsonpath={.data.k}",
    ];
    ok(&kubectl(server, &args, None, T).await)
}

fn tempdir() -> std::path::PathBuf {
    let d = std::env::temp_dir().join(format!(
        "r8s-test-{}-{}",
        std::process::id(),
        fastrand_u64()
    ));
    std::fs::create_dir_all(&d).unwrap();
    d
}

fn fastrand_u64() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_nanos() as u64
}
