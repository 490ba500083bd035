//! Byte budgets. Its own binary: it reads process-wide gauges that other
//! r8s instances in the same process would also set.

mod common;

use common::*;

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
