//! Faults between r8s and its upstream, injected by a TCP forwarder
//! (`r8s_sim::fault`): what r8s notices, what it tells, what clients get.

use std::time::{Duration, Instant};

use crate::common::*;
use r8s_sim::fault::{Forwarder, Mode};

async fn readyz(r8s: &R8s) -> (u16, String) {
    let r = get(&format!("{}/readyz", r8s.admin_url())).await;
    (r.status.as_u16(), r.text())
}

#[tokio::test(flavor = "multi_thread")]
async fn should_notice_a_silent_partition_pass_reads_through_and_resume_without_a_gap() {
    const MAX_STALENESS: u64 = 8;
    // Long enough to be noticed (past MAX_STALENESS) and for a read to be
    // seen passing through; the watch log keeps what happens meanwhile.
    const PARTITION: Duration = Duration::from_secs(20);
    let sim = start_sim(sim_config()).await;
    let fwd = Forwarder::start(sim.addr).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![fwd.url()];
    config.cache.resources = vec!["pods".into()];
    config.cache.encodings = vec!["json".into()];
    config.cache.max_staleness_seconds = MAX_STALENESS;
    let r8s = start_r8s_config(config).await;
    assert_eq!(readyz(&r8s).await.0, 200);

    // A client watching through r8s across the partition, from a list.
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .await
        .json();
    let replay = Replay::from_list(&list);
    let url = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds={}",
        r8s.url(),
        replay.last,
        PARTITION.as_secs() + 20
    );
    let (watched, watcher) = follow(url, replay, "watcher".into());

    // The partition: nothing passes either way, nothing is closed.
    fwd.set(Mode::Stall);
    let cut = Instant::now();
    for n in 0..20 {
        sim.touch("ns-1", "pod-00001", n);
    }
    // Stale once silent past cache.max_staleness_seconds: to the
    // millisecond in src/cache/staleness.rs's unit test (paused time); here, it
    // happens.
    let guard = HangGuard::new();
    let (code, why) = loop {
        let (code, why) = readyz(&r8s).await;
        if code != 200 {
            break (code, why);
        }
        guard.check(|| "a silent partition goes unnoticed".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    let noticed = cut.elapsed();
    assert_eq!(code, 503);
    assert!(why.contains("stale") && why.contains("v1/pods"), "{why}");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let staleness = sample(
        &m,
        r#"r8s_cache_staleness_seconds{resource="v1/pods",encoding="json"}"#,
    );
    assert!(staleness > MAX_STALENESS as f64, "{staleness}");
    assert!(
        sample(
            &m,
            r#"r8s_reflector_silent_total{resource="v1/pods",encoding="json"}"#
        ) >= 1.0
    );

    // Reads no longer come from the stale cache: they go to the upstream,
    // which cannot answer.
    let read = http::Request::get(format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    if let Ok(Ok(resp)) = tokio::time::timeout(Duration::from_secs(2), client().request(read)).await
    {
        assert_ne!(
            resp.headers().get("x-r8s-cache").map(|v| v.as_bytes()),
            Some(&b"hit"[..]),
            "a stale cache answered"
        );
    }

    // Heal; the cache converges and is ready again; the watcher goes on.
    tokio::time::sleep(PARTITION.saturating_sub(cut.elapsed())).await;
    fwd.set(Mode::Pass);
    let healed = Instant::now();
    let guard = HangGuard::new();
    while readyz(&r8s).await.0 != 200 {
        let why = readyz(&r8s).await.1;
        guard.check(|| format!("not ready again after the partition healed: {why}"));
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let recovered = healed.elapsed();
    for n in 20..25 {
        sim.touch("ns-1", "pod-00001", n);
    }
    let want = sim.sim.store.current_rv();
    let r = get(&format!("{}/api/v1/pods?resourceVersion={want}", r8s.url())).await;
    assert_eq!(r.headers["x-r8s-cache"], "hit");
    // The watcher (served from the cache, or `follow` fails) sees every
    // write, its watch never broken.
    let replay = eventually("the watcher sees every write", HANG, || {
        let r = watched.lock().unwrap().clone();
        let ended = watcher.is_finished();
        async move { (r.last >= want || ended).then_some(r) }
    })
    .await;
    assert!(
        !watcher.is_finished(),
        "the watch ended: {:?}",
        watcher.await
    );
    watcher.abort();
    assert!(replay.error.is_none(), "{:?}", replay.error);
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", replay.last).await;
    assert_eq!(
        replay.state, truth,
        "the watcher's state is the upstream's at {}",
        replay.last
    );
    // Each write reached the watcher as its own event: the reflector resumed
    // its watch where it was cut, it did not relist.
    assert_eq!(replay.events, 25, "every write, one event each");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert_eq!(
        sample(
            &m,
            r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#
        ),
        0.0
    );
    println!(
        "silent partition of {PARTITION:?}: noticed after {noticed:?} (cache.max_staleness_seconds = {MAX_STALENESS}), ready again {recovered:?} after healing; the watcher saw {} events, no gap",
        replay.events
    );
    r8s.stop().await;
    fwd.stop();
    sim.stop().await;
}

/// `cache.serve_stale = true` (the edge): past the staleness bound the
/// cache keeps answering "Any" reads and watches, each with a `Warning`
/// saying how old it is, and `/readyz` stays ready.
#[tokio::test(flavor = "multi_thread")]
async fn should_serve_a_stale_cache_with_a_warning_when_told() {
    const MAX_STALENESS: u64 = 4;
    let sim = start_sim(sim_config()).await;
    let fwd = Forwarder::start(sim.addr).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![fwd.url()];
    // Not pods: the partition test above counts pods' relists.
    config.cache.resources = vec!["v1/configmaps".into()];
    config.cache.max_staleness_seconds = MAX_STALENESS;
    config.cache.serve_stale = true;
    let r8s = start_r8s_config(config).await;
    let fresh = get(&format!(
        "{}/api/v1/configmaps?resourceVersion=0",
        r8s.url()
    ))
    .await;
    assert_eq!(fresh.headers["x-r8s-cache"], "hit");
    assert!(
        fresh.headers.get("warning").is_none(),
        "a fresh cache warns"
    );

    fwd.set(Mode::Stall);
    let guard = HangGuard::new();
    let list = loop {
        let list = get(&format!(
            "{}/api/v1/configmaps?resourceVersion=0",
            r8s.url()
        ))
        .await;
        if list.headers.get("warning").is_some() {
            break list;
        }
        guard.check(|| "never warned of a stale cache".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
    };
    assert_eq!(list.status, 200);
    assert_eq!(list.headers["x-r8s-cache"], "hit", "a stale cache served");
    let warning = list.headers["warning"].to_str().unwrap().to_string();
    assert!(
        warning.starts_with("299 - \"") && warning.contains("v1/configmaps"),
        "{warning}"
    );
    assert_eq!(readyz(&r8s).await.0, 200, "ready while served stale");
    let (_, verbose) = {
        let r = get(&format!("{}/readyz?verbose", r8s.admin_url())).await;
        (r.status, r.text())
    };
    assert!(verbose.contains("[+]caches served stale"), "{verbose}");
    // A watch from the cache too, with the same warning.
    let rv = list.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let w = get(&format!(
        "{}/api/v1/configmaps?watch=1&resourceVersion={rv}&timeoutSeconds=1",
        r8s.url()
    ))
    .await;
    assert_eq!(w.status, 200);
    assert_eq!(w.headers["x-r8s-cache"], "hit");
    assert!(w.headers["warning"].to_str().unwrap().starts_with("299 - "));
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    // Its JSON and protobuf stores, each a cache of its own.
    assert_eq!(sample(&m, "r8s_caches_served_stale"), 2.0, "{m}");

    // Heard again: no warning.
    fwd.set(Mode::Pass);
    let guard = HangGuard::new();
    while get(&format!(
        "{}/api/v1/configmaps?resourceVersion=0",
        r8s.url()
    ))
    .await
    .headers
    .contains_key("warning")
    {
        guard.check(|| "still warned of a stale cache after it heard again".into());
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    r8s.stop().await;
    fwd.stop();
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_close_connections_that_never_finish_their_headers_and_serve_the_rest() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.server.header_read_timeout_seconds = 2;
    let r8s = start_r8s_config(config).await;
    // Fifty clients that start a request and never finish its headers, and
    // ten that connect and send nothing at all.
    let mut stuck = Vec::new();
    for i in 0..60 {
        let mut c = tokio::net::TcpStream::connect(r8s.addr).await.unwrap();
        if i < 50 {
            c.write_all(
                b"GET /api/v1/pods?resourceVersion=0 HTTP/1.1\r\nHost: localhost\r\nX-Slow: ",
            )
            .await
            .unwrap();
        }
        stuck.push(c);
    }
    let t0 = Instant::now();
    // Everyone else is served meanwhile.
    let r = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url())).await;
    assert_eq!(
        (r.status.as_u16(), &r.headers["x-r8s-cache"]),
        (200, &"hit".parse().unwrap())
    );
    // And the stuck ones are closed after the bound, not before.
    for (i, mut c) in stuck.into_iter().enumerate() {
        let mut buf = [0u8; 256];
        let read = tokio::time::timeout(HANG, c.read(&mut buf))
            .await
            .unwrap_or_else(|_| {
                panic!(
                    "client {i} not closed within the header read timeout and some slack ({:?})",
                    t0.elapsed()
                )
            });
        match read {
            Ok(0) | Err(_) => {}
            Ok(n) => assert!(
                buf[..n].starts_with(b"HTTP/1.1 408"),
                "a stuck client gets nothing but the end (or a 408): {:?}",
                String::from_utf8_lossy(&buf[..n])
            ),
        }
    }
    let closed = t0.elapsed();
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    for reason in ["header_timeout", "no_request"] {
        assert!(
            sample(
                &m,
                &format!(r#"r8s_connections_closed_total{{reason="{reason}"}}"#)
            ) >= 1.0,
            "{reason} is counted"
        );
    }
    // Not before the timeout (a lower bound no busy machine can break);
    // that it closes at all is the hang guard's.
    assert!(
        closed >= Duration::from_millis(1500),
        "closed before the 2 s header timeout: {closed:?}"
    );
    r8s.stop().await;
    sim.stop().await;
}
