//! What an operator's Prometheus scrapes besides the cache's own series:
//! the process (`process_*`), the build (`r8s_build_info`), and the
//! upstream requests the cache saved.

use crate::common::*;

#[tokio::test(flavor = "multi_thread")]
async fn should_export_process_build_and_requests_saved() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let lists = sim.sim.count("list", "pods");
    for _ in 0..5 {
        let r = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url())).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit");
    }
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();

    for series in [
        "process_resident_memory_bytes",
        "process_virtual_memory_bytes",
        "process_open_fds",
        "process_max_fds",
        "process_threads",
        "process_start_time_seconds",
    ] {
        assert!(sample(&m, series) > 0.0, "{series} in {m}");
    }
    assert!(
        m.lines()
            .any(|l| l.starts_with("process_cpu_seconds_total ")),
        "process_cpu_seconds_total"
    );

    // The build: this crate's version, and the commit it was built from.
    let commit = r8s::metrics::COMMIT;
    let build = format!(
        r#"r8s_build_info{{version="{}",commit="{commit}"}}"#,
        env!("CARGO_PKG_VERSION")
    );
    assert_eq!(sample(&m, &build), 1.0, "{build} in {m}");
    if let Ok(out) = std::process::Command::new("git")
        .args(["rev-parse", "--short=12", "HEAD"])
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        && out.status.success()
    {
        assert_eq!(commit, String::from_utf8_lossy(&out.stdout).trim());
    }

    // Requests saved: each hit is one request the upstream did not get.
    let hits = sample(
        &m,
        r#"r8s_requests_total{verb="list",resource="pods",code="200",cache="hit"}"#,
    );
    assert!(hits >= 5.0, "{hits}");
    assert_eq!(
        sim.sim.count("list", "pods"),
        lists,
        "the upstream saw none of them"
    );
    r8s.stop().await;
    sim.stop().await;
}
