//! `r8s_upstream_up` is process-wide, so this runs in its own test binary.

mod common;

use std::time::Duration;

use common::*;

#[tokio::test(flavor = "multi_thread")]
async fn should_report_the_upstream_down() {
    let port = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let r8s = start_r8s(vec![format!("http://127.0.0.1:{port}")]).await;
    let r = get(&format!("{}/api/v1/pods", r8s.url())).await;
    assert_eq!(r.status, 503);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(m.contains("r8s_upstream_up 0"), "{m}");
    assert!(
        m.contains(r#"r8s_requests_total{verb="list",resource="pods",code="503",cache="pass"}"#),
        "{m}"
    );
    r8s.stop().await;

    // And back up: a reachable upstream sets the gauge to 1.
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    assert_eq!(get(&format!("{}/api/v1/pods", r8s.url())).await.status, 200);
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(m.contains("r8s_upstream_up 1"), "{m}");
    r8s.stop().await;
    sim.stop().await;
}
