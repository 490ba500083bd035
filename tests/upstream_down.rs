//! `r8s_upstream_up`, `r8s_upstream_in_use` and the upstream request series,
//! per configured server: an operator with several upstreams sees which
//! answer and which one r8s uses.

use std::time::Duration;

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn should_report_each_upstream_server_and_the_one_in_use() {
    let port = {
        let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        l.local_addr().unwrap().port()
    };
    let dead = format!("http://127.0.0.1:{port}");
    let r8s = start_r8s(vec![dead.clone()]).await;
    let r = get(&format!("{}/api/v1/pods", r8s.url())).await;
    assert_eq!(r.status, 503);
    tokio::time::sleep(Duration::from_millis(200)).await;
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(&format!("r8s_upstream_up{{server=\"{dead}\"}} 0")),
        "{m}"
    );
    assert!(
        m.contains(r#"r8s_requests_total{verb="list",resource="pods",code="503",cache="pass"}"#),
        "{m}"
    );
    r8s.stop().await;

    // The dead server first, the sim second: requests fail over to the sim,
    // which is up and in use; the dead one is down and not in use.
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![dead.clone(), sim.url()]).await;
    assert_eq!(get(&format!("{}/api/v1/pods", r8s.url())).await.status, 200);
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let live = sim.url().trim_end_matches('/').to_string();
    for (series, want) in [
        (format!("r8s_upstream_up{{server=\"{live}\"}}"), 1.0),
        (format!("r8s_upstream_up{{server=\"{dead}\"}}"), 0.0),
        (format!("r8s_upstream_in_use{{server=\"{live}\"}}"), 1.0),
        (format!("r8s_upstream_in_use{{server=\"{dead}\"}}"), 0.0),
    ] {
        assert!(
            m.lines().any(|l| l == format!("{series} {want}")),
            "{series} {want}: {m}"
        );
    }
    let timed = sample(
        &m,
        &format!(
            "r8s_upstream_request_duration_seconds_count{{server=\"{live}\",verb=\"GET\",code=\"200\"}}"
        ),
    );
    assert!(timed >= 1.0, "{m}");
    // Read from a later scrape: one scrape renders the counters before the
    // histograms, and r8s's own requests upstream (its caches' and
    // priority and fairness's lists and watches) go on in between; each is
    // counted before it is timed.
    let later = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        sample(
            &later,
            &format!("r8s_upstream_requests_total{{server=\"{live}\",code=\"200\"}}")
        ) >= timed,
        "{later}"
    );
    r8s.stop().await;
    sim.stop().await;
}
