//! The reflector against a scripted fake apiserver: resources whose versions
//! are not integers pass through; malformed watch data makes it relist and
//! never serve a half-applied state; discovery resolves `*` and rejects
//! unknown entries at startup.

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::common::*;
use bytes::Bytes;
use http_body_util::Full;
use hyper_util::rt::TokioIo;

#[derive(Default)]
struct Script {
    cm_lists: AtomicUsize,
    cm_watches: AtomicUsize,
    secret_lists: AtomicUsize,
    secret_watches: AtomicUsize,
}

/// A secret `a/s` at `rv`, as a list item or event object.
fn secret(rv: u64) -> String {
    format!(
        r#"{{"kind":"Secret","apiVersion":"v1","metadata":{{"name":"s","namespace":"a","resourceVersion":"{rv}"}},"data":{{"v":"{rv}"}}}}"#
    )
}

fn json(s: &str) -> http::Response<Full<Bytes>> {
    let mut r = http::Response::new(Full::new(Bytes::from(s.to_string())));
    r.headers_mut()
        .insert("content-type", "application/json".parse().unwrap());
    r
}

async fn fake_apiserver(script: Arc<Script>) -> String {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", l.local_addr().unwrap());
    tokio::spawn(async move {
        loop {
            let (s, _) = l.accept().await.unwrap();
            let script = script.clone();
            tokio::spawn(async move {
                let svc = hyper::service::service_fn(
                    move |req: http::Request<hyper::body::Incoming>| {
                        let script = script.clone();
                        async move {
                            let q = req.uri().query().unwrap_or("").to_string();
                            let r = match req.uri().path() {
                                "/version" => json(
                                    r#"{"major":"1","minor":"33","gitVersion":"v1.33.0-fake"}"#,
                                ),
                                "/api/v1" => json(
                                    r#"{"kind":"APIResourceList","groupVersion":"v1","resources":[
                                {"name":"pods","namespaced":true,"kind":"Pod","verbs":["get","list","watch"]},
                                {"name":"configmaps","namespaced":true,"kind":"ConfigMap","verbs":["get","list","watch"]},
                                {"name":"secrets","namespaced":true,"kind":"Secret","verbs":["get","list","watch"]},
                                {"name":"bindings","namespaced":true,"kind":"Binding","verbs":["create"]}]}"#,
                                ),
                                "/apis" => json(r#"{"kind":"APIGroupList","groups":[]}"#),
                                "/api/v1/pods" => json(
                                    r#"{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"abc"},"items":[{"metadata":{"name":"p","namespace":"a","resourceVersion":"abc"}}]}"#,
                                ),
                                // Like kube-apiserver 1.21: resourceVersionMatch on a watch is a 422.
                                _ if q.contains("sendInitialEvents") => {
                                    let mut r = json(
                                        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden for watch","reason":"Invalid","code":422}"#,
                                    );
                                    *r.status_mut() = http::StatusCode::UNPROCESSABLE_ENTITY;
                                    r
                                }
                                "/api/v1/configmaps" if q.contains("watch=") => {
                                    if script.cm_watches.fetch_add(1, Ordering::SeqCst) == 0 {
                                        // A good event, then garbage: the reflector must relist.
                                        json(
                                            "{\"type\":\"MODIFIED\",\"object\":{\"kind\":\"ConfigMap\",\"apiVersion\":\"v1\",\"metadata\":{\"name\":\"c\",\"namespace\":\"a\",\"resourceVersion\":\"6\"},\"data\":{\"v\":\"2\"}}}\n{\"type\":\"MODIFIED\",\"object\":{\"metadata\":\n",
                                        )
                                    } else {
                                        tokio::time::sleep(Duration::from_secs(30)).await;
                                        json("")
                                    }
                                }
                                "/api/v1/configmaps" => {
                                    let n = script.cm_lists.fetch_add(1, Ordering::SeqCst);
                                    let (rv, v) = if n == 0 { ("5", "1") } else { ("7", "3") };
                                    json(&format!(
                                        r#"{{"kind":"ConfigMapList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{{"metadata":{{"name":"c","namespace":"a","resourceVersion":"{rv}"}},"data":{{"v":"{v}"}}}}]}}"#
                                    ))
                                }
                                // Secrets go back in time: an event older than the
                                // one before it, then a list older than the cache.
                                "/api/v1/secrets" if q.contains("watch=") => {
                                    if script.secret_watches.fetch_add(1, Ordering::SeqCst) == 0 {
                                        json(&format!(
                                            "{{\"type\":\"MODIFIED\",\"object\":{}}}\n{{\"type\":\"MODIFIED\",\"object\":{}}}\n",
                                            secret(12),
                                            secret(11)
                                        ))
                                    } else {
                                        tokio::time::sleep(Duration::from_secs(30)).await;
                                        json("")
                                    }
                                }
                                "/api/v1/secrets" => {
                                    let rv =
                                        match script.secret_lists.fetch_add(1, Ordering::SeqCst) {
                                            0 => 10,
                                            1 | 2 => 9,
                                            _ => 15,
                                        };
                                    json(&format!(
                                        r#"{{"kind":"SecretList","apiVersion":"v1","metadata":{{"resourceVersion":"{rv}"}},"items":[{}]}}"#,
                                        secret(rv)
                                    ))
                                }
                                "/api/v1/namespaces/a/pods/p" => json(
                                    r#"{"kind":"Pod","apiVersion":"v1","metadata":{"name":"p","namespace":"a","resourceVersion":"abc"}}"#,
                                ),
                                _ => {
                                    let mut r = json(
                                        r#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"not found","reason":"NotFound","code":404}"#,
                                    );
                                    *r.status_mut() = http::StatusCode::NOT_FOUND;
                                    r
                                }
                            };
                            Ok::<_, Infallible>(r)
                        }
                    },
                );
                let _ = hyper::server::conn::http1::Builder::new()
                    .serve_connection(TokioIo::new(s), svc)
                    .await;
            });
        }
    });
    url
}

#[tokio::test(flavor = "multi_thread")]
async fn should_pass_through_uncacheable_resources_and_relist_on_malformed_data() {
    let script = Arc::new(Script::default());
    let up = fake_apiserver(script.clone()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![up];
    config.cache.resources = vec!["pods".into(), "v1/configmaps".into()];
    let r8s = start_r8s_config(config).await;

    let p = get(&format!(
        "{}/api/v1/namespaces/a/pods/p?resourceVersion=0",
        r8s.url()
    ))
    .await;
    assert_eq!(p.status, 200);
    assert_eq!(
        p.headers["x-r8s-cache"], "pass",
        "resourceVersion \"abc\" is not cacheable"
    );

    // The malformed line made the reflector relist; the cache holds the relisted state.
    let guard = HangGuard::new();
    loop {
        let c = get(&format!(
            "{}/api/v1/namespaces/a/configmaps?resourceVersion=0",
            r8s.url()
        ))
        .await;
        if c.headers["x-r8s-cache"] == "hit" && c.json()["metadata"]["resourceVersion"] == "7" {
            assert_eq!(c.json()["items"][0]["data"]["v"], "3");
            break;
        }
        guard.check(|| format!("relisted after malformed data: {}", c.text()));
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert!(script.cm_lists.load(Ordering::SeqCst) >= 2);
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(r#"r8s_reflector_relists_total{resource="v1/configmaps",encoding="json",reason="malformed"}"#),
        "{m}"
    );
    r8s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_resolve_star_and_wait_for_entries_not_served_yet() {
    let sim = start_sim(sim_config()).await;
    let up = std::sync::Arc::new(
        r8s::upstream::Upstream::new(&r8s::config::UpstreamConfig {
            servers: vec![sim.url()],
            ..Default::default()
        })
        .await
        .unwrap(),
    );
    let entries = |es: &[&str]| -> Vec<r8s::config::ResourceEntry> {
        es.iter().map(|e| e.parse().unwrap()).collect()
    };
    let all = r8s::upstream::discovery::resolve(
        &up,
        &entries(&["*"]),
        &["secrets".into(), "events".into()],
    )
    .await
    .unwrap();
    let labels: Vec<String> = all.resources.iter().map(|r| r.gvr.to_string()).collect();
    for want in [
        "v1/pods",
        "v1/configmaps",
        "apps/v1/deployments",
        "example.r8s.dev/v1/widgets",
        "v1/nodes",
    ] {
        assert!(labels.contains(&want.to_string()), "{want} in {labels:?}");
    }
    assert!(
        !labels.iter().any(|l| l.ends_with("/secrets")
            || l.ends_with("/events")
            || l.contains("tokenreviews")),
        "{labels:?}"
    );
    // Not served (yet): waited for, not an error (a CRD installed later).
    let some =
        r8s::upstream::discovery::resolve(&up, &entries(&["apps/v1/nopes", "nopes", "pods"]), &[])
            .await
            .unwrap();
    assert_eq!(some.waiting, ["apps/v1/nopes", "nopes"]);
    assert_eq!(some.resources.len(), 1);
    // A malformed entry is a startup error, before discovery.
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["a/b/c/d".into()];
    let e = r8s::prepare(config).await.err().expect("a malformed entry");
    assert!(e.to_string().contains("\"a/b/c/d\""), "{e}");
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["nopes".into()];
    assert!(
        r8s::prepare(config).await.is_ok(),
        "an entry not served yet is waited for"
    );
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_never_go_back_in_time_when_the_upstream_does() {
    let script = Arc::new(Script::default());
    let up = fake_apiserver(script.clone()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![up];
    config.cache.resources = vec!["v1/secrets".into()];
    config.cache.encodings = vec!["json".into()];
    let r8s = start_r8s_config(config).await;
    // The upstream sent 12, then an event at 11 (the reflector relists),
    // then lists at 9 twice (refused: the cache keeps 12), then 15. No
    // read in between sees a version older than one read before.
    let mut seen = 0u64;
    let mut versions = Vec::new();
    let guard = HangGuard::new();
    while seen < 15 {
        let c = get(&format!("{}/api/v1/secrets?resourceVersion=0", r8s.url())).await;
        if c.headers["x-r8s-cache"] == "hit" {
            let v: u64 = c.json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            assert!(v >= seen, "the cache went back from {seen} to {v}");
            if v != seen {
                versions.push(v);
            }
            seen = v;
        }
        guard.check(|| format!("stuck at {seen}: {versions:?}"));
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        script.secret_lists.load(Ordering::SeqCst),
        4,
        "two older lists refused, the third taken"
    );
    assert!(
        !versions.contains(&11) && !versions.contains(&9),
        "{versions:?}"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        sample(
            &m,
            r#"r8s_reflector_behind_total{resource="v1/secrets",encoding="json"}"#
        ) >= 2.0
    );
    assert_eq!(
        sample(
            &m,
            r#"r8s_reflector_relists_total{resource="v1/secrets",encoding="json",reason="malformed"}"#
        ),
        1.0
    );
    r8s.stop().await;
}

/// The version of `base`'s cached pods (a hit).
async fn cached_version(base: &str) -> u64 {
    let r = get(&format!("{base}/api/v1/pods?resourceVersion=0")).await;
    assert_eq!(r.headers["x-r8s-cache"], "hit");
    r.json()["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap()
}

/// Waits until `base`'s cached pods are at `rv` at least.
async fn reaches(base: &str, rv: u64) {
    let guard = HangGuard::new();
    loop {
        let v = cached_version(base).await;
        if v >= rv {
            return;
        }
        guard.check(|| format!("r8s stuck at {v} (wanted {rv})"));
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_catch_up_with_an_upstream_behind_and_relist_after_it_compacts() {
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    config.cache.encodings = vec!["json".into()];
    let r8s = start_r8s_config(config).await;
    let base = r8s.url();
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .await
        .json();
    let replay = Replay::from_list(&list);
    let url = format!(
        "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={}&timeoutSeconds=120",
        r8s.url(),
        replay.last
    );
    let w = follow(url, replay, "watcher".into());

    // The upstream falls behind: its watches deliver nothing while it takes
    // writes. r8s serves what it has and knows it lacks the rest.
    let v0 = cached_version(&base).await;
    sim.sim.hold_watches(true);
    for n in 0..5 {
        sim.touch("ns-1", "pod-00001", n);
    }
    let ahead = sim.sim.store.current_rv();
    tokio::time::sleep(Duration::from_millis(300)).await;
    assert_eq!(
        cached_version(&base).await,
        v0,
        "nothing arrived while held"
    );
    let r = get(&format!(
        "{}/api/v1/pods?resourceVersion={ahead}",
        r8s.url()
    ))
    .await;
    assert_eq!(r.status, 200);
    assert_eq!(
        r.headers["x-r8s-cache"], "pass",
        "a version the cache has not reached is asked of the upstream"
    );
    sim.sim.hold_watches(false);
    reaches(&base, ahead).await;

    // It falls behind again and compacts past what r8s has: r8s's watch
    // cannot resume (410) and it relists, turning the difference into events.
    sim.sim.hold_watches(true);
    for n in 5..8 {
        sim.touch("ns-2", "pod-00002", n);
    }
    sim.sim.compact();
    let compacted = sim.sim.store.current_rv();
    reaches(&base, compacted).await;
    sim.sim.hold_watches(false);
    let guard = HangGuard::new();
    let replay = loop {
        let r = w.0.lock().unwrap().clone();
        if r.last >= compacted {
            break r;
        }
        assert!(!w.1.is_finished(), "the watcher ended at {}", r.last);
        guard.check(|| format!("the watcher is stuck at {}", r.last));
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let truth = get(&format!("{}/api/v1/pods", sim.url())).await.json();
    assert_eq!(replay.state, Replay::from_list(&truth).state);
    // 5 events as they happened; the 3 the compaction swallowed come as
    // the relist's one MODIFIED (the same pod, three times).
    assert_eq!(replay.events, 6, "{replay:?}");
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        sample(
            &m,
            r#"r8s_reflector_relists_total{resource="v1/pods",encoding="json",reason="expired"}"#
        ) >= 1.0
    );
    w.1.abort();
    r8s.stop().await;
    sim.stop().await;
}
