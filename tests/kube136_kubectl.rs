//! kubectl through r8s against kubectl straight to Kubernetes 1.36 (the
//! kit; skipped without it, as `kube136.rs`): custom resources and their
//! definitions, printed by r8s from the cache, print as the apiserver
//! prints them, every list a hit.

use std::time::Duration;

use crate::common::*;
use crate::kube136::rig;
use crate::table_kinds::but_age;

/// kubectl with the kit's admin kubeconfig.
async fn kubectl_kit(kubeconfig: &std::path::Path, args: &[&str]) -> std::process::Output {
    let home = std::env::temp_dir().join(format!("r8s-kubectl-kit-{}", std::process::id()));
    std::fs::create_dir_all(&home).unwrap();
    let mut cmd = tokio::process::Command::new("kubectl");
    cmd.args(args)
        .env("KUBECONFIG", kubeconfig)
        .env("HOME", &home)
        .stdin(std::process::Stdio::null())
        .kill_on_drop(true);
    tokio::time::timeout(HANG, cmd.output())
        .await
        .expect("kubectl finished")
        .expect("kubectl is on the PATH")
}

#[tokio::test(flavor = "multi_thread")]
async fn should_print_custom_resources_through_kubectl_as_kube_apiserver_1_36_does() {
    let Some(rig) = rig("kube136 kubectl", 20).await else {
        return;
    };
    // Lists answered, by result, over every resource (kubectl lists a
    // kind in the version discovery prefers).
    let lists = || {
        let admin = rig.r8s.admin_url();
        async move {
            let m = get(&format!("{admin}/metrics")).await.text();
            let sum = |hit: bool| -> f64 {
                m.lines()
                    .filter(|l| {
                        l.starts_with("r8s_cache_requests_total{") && l.contains("verb=\"list\"")
                    })
                    .filter(|l| l.contains("result=\"hit\"") == hit)
                    .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
                    .sum()
            };
            (sum(true), sum(false))
        }
    };
    let cases: [&[&str]; 10] = [
        &["get", "widgets", "-A"],
        &["get", "widgets", "-A", "-o", "wide"],
        &["get", "widgets", "-A", "--show-labels"],
        &["get", "widgets", "-A", "-o", "name"],
        &["get", "widgets", "-n", "ns-a"],
        &["get", "widgets.v1.example.com", "-A"],
        &["get", "widgets.v2.example.com", "-A"],
        &["get", "gizmos"],
        &["get", "gizmos", "-o", "wide"],
        &["get", "crd"],
    ];
    let kubeconfig = rig.kube.kubeconfig();
    for args in cases {
        let before = lists().await;
        let via = kubectl(&rig.r8s.url(), args, None, Duration::from_secs(60)).await;
        assert!(
            via.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&via.stderr)
        );
        let after = lists().await;
        assert_eq!(
            (after.0 - before.0, after.1 - before.1),
            (1.0, 0.0),
            "{args:?}: one list, a hit"
        );
        let theirs = kubectl_kit(&kubeconfig, args).await;
        assert!(
            theirs.status.success(),
            "{args:?}: {}",
            String::from_utf8_lossy(&theirs.stderr)
        );
        assert_eq!(but_age(&via.stdout), but_age(&theirs.stdout), "{args:?}");
        assert!(but_age(&via.stdout).len() > 1, "{args:?}: rows");
    }
}
