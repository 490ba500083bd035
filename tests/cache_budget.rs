//! Byte budgets. Its own binary: it reads process-wide gauges that other
//! r8s instances in the same process would also set.

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn should_pass_through_a_resource_over_its_byte_budget() {
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into(), "v1/configmaps".into()];
    config.cache.max_bytes_per_resource = 20_000;
    let r8s = start_r8s_config(config).await;
    let pods = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url())).await;
    assert_eq!(pods.status, 200);
    assert_eq!(
        pods.headers["x-r8s-cache"], "pass",
        "pods (about 100 KB) exceed 20 KB"
    );
    assert_eq!(
        pods.json()["items"].as_array().unwrap().len(),
        40,
        "answered by the upstream, whole"
    );
    let cms = get(&format!(
        "{}/api/v1/configmaps?resourceVersion=0",
        r8s.url()
    ))
    .await;
    assert_eq!(cms.headers["x-r8s-cache"], "hit", "configmaps fit");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(r#"r8s_cache_over_budget{resource="v1/pods",encoding="json"} 1"#),
        "{m}"
    );
    assert!(
        m.contains(
            r#"r8s_cache_requests_total{resource="v1/pods",verb="list",result="over_budget"}"#
        ),
        "{m}"
    );
    r8s.stop().await;
    sim.stop().await;
}

/// `cache.max_bytes_total` counts the watch logs: under churn that would
/// take a cache over it, the log's oldest events go (counted in
/// `r8s_watch_log_trimmed_bytes_total`) and the objects stay served, instead
/// of the cache being evicted; objects and logs together stay within it.
#[tokio::test(flavor = "multi_thread")]
async fn should_shorten_the_watch_log_before_evicting_under_churn() {
    let sim = start_sim(sim_config()).await;
    let series = |m: &str, name: &str, e: &str| {
        sample(
            m,
            &format!(r#"{name}{{resource="apps/v1/deployments",encoding="{e}"}}"#),
        )
    };
    let held =
        |m: &str| series(m, "r8s_cache_bytes", "json") + series(m, "r8s_cache_bytes", "protobuf");
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["apps/v1/deployments".into()];
    let r8s = start_r8s_config(config.clone()).await;
    let synced = held(&get(&format!("{}/metrics", r8s.admin_url())).await.text());
    assert!(synced > 0.0);
    r8s.stop().await;

    // Room for the objects and a short log, not for 100 changes' worth.
    let budget = synced as u64 + 40_000;
    config.cache.max_bytes_total = budget;
    let r8s = start_r8s_config(config).await;
    let padding = "x".repeat(1500);
    let mut rv = String::new();
    for i in 0..100 {
        let body = format!(r#"{{"metadata":{{"annotations":{{"churn":"{i}-{padding}"}}}}}}"#);
        let r = send(
            "PATCH",
            &format!(
                "{}/apis/apps/v1/namespaces/ns-0/deployments/app-0",
                sim.url()
            ),
            &[("content-type", "application/merge-patch+json")],
            Some(&body),
        )
        .await;
        assert_eq!(r.status, 200, "{}", r.text());
        rv = r.json()["metadata"]["resourceVersion"]
            .as_str()
            .unwrap()
            .to_string();
    }
    // The cache reaches the last change and still answers from memory.
    let list = get(&format!(
        "{}/apis/apps/v1/deployments?resourceVersion={rv}&resourceVersionMatch=NotOlderThan",
        r8s.url()
    ))
    .await;
    assert_eq!(list.status, 200, "{}", list.text());
    assert_eq!(
        list.headers["x-r8s-cache"], "hit",
        "evicted instead of trimmed"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    for e in ["json", "protobuf"] {
        assert_eq!(series(&m, "r8s_cache_over_budget", e), 0.0, "{e}: {m}");
    }
    assert!(sample(&m, "r8s_watch_log_trimmed_bytes_total") > 0.0, "{m}");
    assert!(
        held(&m) <= budget as f64,
        "objects and logs hold {} bytes over a budget of {budget}",
        held(&m)
    );
    r8s.stop().await;
    sim.stop().await;
}
