//! Pass-through behaviour: event-by-event streaming, failover, 503s, bad
//! input, admin endpoints, and a real kube-rs reflector through r8s.

use std::time::{Duration, Instant};

use crate::common::*;
use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use r8s_sim::store::{Mutation, key};
use tokio::io::{AsyncReadExt, AsyncWriteExt};

fn touch_pod(sim: &r8s_sim::SimHandle, name: &str, n: u32) {
    let res = r8s_sim::resources::pods_idx();
    let k = key(Some("ns-0"), name);
    let mut v = sim.sim.store.get(res, &k).unwrap().value();
    v["metadata"]["annotations"]["test/n"] = serde_json::json!(n.to_string());
    sim.sim
        .store
        .mutate(res, &k, |_, _| Ok(Mutation::Put(v)))
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn should_relay_each_watch_event_before_the_next_exists() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let rv = sim.sim.store.current_rv();
    let url = format!(
        "{}/api/v1/namespaces/ns-0/pods?watch=1&resourceVersion={rv}",
        r8s.url()
    );
    let req = http::Request::get(url)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200);
    assert_eq!(resp.headers()["x-r8s-cache"], "pass");
    let mut body = resp.into_body();
    let written = Instant::now();
    touch_pod(&sim, "pod-00000", 1);
    // The upstream sends nothing more until the next write: a first event
    // held back (buffered) would never come, and the hang guard fails it.
    let frame = tokio::time::timeout(HANG, body.frame())
        .await
        .expect("the first event arrives while the upstream has sent nothing after it")
        .unwrap()
        .unwrap();
    let first = frame.into_data().unwrap();
    let elapsed = written.elapsed();
    let ev: serde_json::Value = serde_json::from_slice(&first).unwrap();
    assert_eq!(ev["type"], "MODIFIED");
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        (rv + 1).to_string()
    );
    // Only now does the upstream produce a second event.
    touch_pod(&sim, "pod-00000", 2);
    let second = tokio::time::timeout(HANG, body.frame())
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    let ev: serde_json::Value = serde_json::from_slice(&second.into_data().unwrap()).unwrap();
    assert_eq!(
        ev["object"]["metadata"]["resourceVersion"],
        (rv + 2).to_string()
    );
    eprintln!("first event relayed {elapsed:?} after the write");
    r8s.stop().await;
    sim.stop().await;
}

async fn closed_port() -> u16 {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    l.local_addr().unwrap().port()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_503_naming_an_unreachable_upstream() {
    let port = closed_port().await;
    let r8s = start_r8s(vec![format!("http://127.0.0.1:{port}")]).await;
    // (`get` gives up at its own limit: a hang fails there.)
    let r = get(&format!("{}/api/v1/pods", r8s.url())).await;
    assert_eq!(r.status, 503);
    let s = r.json();
    assert_eq!(s["kind"], "Status");
    assert_eq!(s["reason"], "ServiceUnavailable");
    assert!(
        s["message"]
            .as_str()
            .unwrap()
            .contains(&format!("127.0.0.1:{port}")),
        "{s}"
    );
    let ready = get(&format!("{}/readyz", r8s.admin_url())).await;
    assert_eq!(
        ready.status, 503,
        "not ready while the upstream is unreachable"
    );
    r8s.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_fail_over_to_the_next_server_on_connection_errors() {
    let sim = start_sim(sim_config()).await;
    let port = closed_port().await;
    let r8s = start_r8s(vec![format!("http://127.0.0.1:{port}"), sim.url()]).await;
    let r = get(&format!(
        "{}/api/v1/namespaces/ns-0/pods/pod-00000",
        r8s.url()
    ))
    .await;
    assert_eq!(r.status, 200);
    let body =
        r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"failover"},"data":{"k":"v"}}"#;
    let r = send(
        "POST",
        &format!("{}/api/v1/namespaces/default/configmaps", r8s.url()),
        &[("content-type", "application/json")],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 201, "{}", r.text());
    let stored = get(&format!(
        "{}/api/v1/namespaces/default/configmaps/failover",
        sim.url()
    ))
    .await;
    assert_eq!(
        stored.json()["data"]["k"],
        "v",
        "the body reached the second server whole"
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_survive_malformed_requests() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let long = "a".repeat(8000);
    let paths = [
        "/api/v1/namespaces//pods".to_string(),
        "/api/v1/%ZZ/%00".to_string(),
        "/apis/a/b/c/d/e/f/g/h/i".to_string(),
        "/api/v1/pods?watch=%zz&limit=%".to_string(),
        "/api/v1/pods?labelSelector=((((&fieldSelector=,,,=".to_string(),
        "/api/v1/pods?resourceVersion=99999999999999999999999".to_string(),
        "/api/v1/pods?timeoutSeconds=-1&watch=maybe".to_string(),
        format!("/api/v1/namespaces/{long}/pods"),
        "/api/v1/namespaces/ns-0/pods/pod-00000/exec?command=cat".to_string(),
        "/../../etc/passwd".to_string(),
    ];
    for p in &paths {
        for base in [sim.url(), r8s.url()] {
            let r = send(
                "GET",
                &format!("{base}{p}"),
                &[("accept", "application/json;as=Bogus")],
                None,
            )
            .await;
            assert!(r.status.as_u16() >= 200, "{p}");
            if r.status.as_u16() >= 400 && p.starts_with("/api") {
                assert_eq!(r.json()["kind"], "Status", "{p}: {}", r.text());
            }
        }
    }
    // Raw garbage on the socket: hyper answers 400; r8s keeps serving.
    for junk in [
        "GET /\x7f\x01 HTTP/1.1\r\n\r\n",
        "BREW / HTCPCP/1.0\r\n\r\n",
        "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: nope\r\n\r\n",
    ] {
        let mut s = tokio::net::TcpStream::connect(r8s.addr).await.unwrap();
        s.write_all(junk.as_bytes()).await.unwrap();
        let mut buf = vec![0u8; 256];
        let _ = tokio::time::timeout(Duration::from_secs(2), s.read(&mut buf)).await;
    }
    for bad_header in [
        ("content-type", "x/y;;;=="),
        ("authorization", "Bearer"),
        ("upgrade", "nonsense"),
    ] {
        let _ = send(
            "GET",
            &format!("{}/api/v1/pods?limit=1", r8s.url()),
            &[bad_header],
            None,
        )
        .await;
    }
    let v = get(&format!("{}/version", r8s.url())).await;
    assert_eq!(v.status, 200, "still serving after the junk");
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_export_health_and_request_metrics() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    assert_eq!(
        get(&format!("{}/healthz", r8s.admin_url())).await.status,
        200
    );
    assert_eq!(get(&format!("{}/livez", r8s.admin_url())).await.status, 200);
    let guard = HangGuard::new();
    while get(&format!("{}/readyz", r8s.admin_url())).await.status != 200 {
        guard.check(|| "ready once the upstream answered /version".into());
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    let _ = get(&format!("{}/api/v1/namespaces/ns-0/pods", r8s.url())).await;
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(r#"r8s_requests_total{verb="list",resource="pods",code="200",cache="pass"}"#),
        "{m}"
    );
    assert!(
        m.contains(
            r#"r8s_request_duration_seconds_bucket{verb="list",resource="pods",cache="pass",le="#
        ),
        "{m}"
    );
    assert!(
        m.contains(&format!(
            r#"r8s_upstream_requests_total{{server="{}",code="200"}}"#,
            sim.url().trim_end_matches('/')
        )),
        "{m}"
    );
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_feed_a_kube_rs_reflector_through_r8s() {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::Pod;
    use kube::runtime::{WatchStreamExt, reflector, watcher};

    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let client = kube::Client::try_from(kube::Config::new(r8s.url().parse().unwrap())).unwrap();
    let api: kube::Api<Pod> = kube::Api::namespaced(client, "ns-0");
    let (reader, writer) = reflector::store();
    let stream = reflector(writer, watcher(api, watcher::Config::default())).applied_objects();
    let task = tokio::spawn(async move {
        let mut s = std::pin::pin!(stream);
        while let Some(ev) = s.next().await {
            ev.expect("watch through r8s works");
        }
    });
    tokio::time::timeout(HANG, reader.wait_until_ready())
        .await
        .unwrap()
        .unwrap();
    let want = 14; // pods 0, 3, ..., 39 in ns-0
    assert_eq!(reader.state().len(), want);
    touch_pod(&sim, "pod-00003", 7);
    let guard = HangGuard::new();
    loop {
        let seen = reader.state().iter().any(|p| {
            p.metadata
                .annotations
                .as_ref()
                .and_then(|a| a.get("test/n"))
                .map(String::as_str)
                == Some("7")
        });
        if seen {
            break;
        }
        guard.check(|| "the reflector saw the change through r8s".into());
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    task.abort();
    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_use_kubeconfig_credentials_and_forward_client_tokens_unchanged() {
    let dir = std::env::temp_dir().join(format!("r8s-kc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let tokens = dir.join("tokens.csv");
    std::fs::write(
        &tokens,
        "admin-token,admin,1,\"system:masters\"\nalice-token,alice,2,\"\"\n",
    )
    .unwrap();
    let mut cfg = sim_config();
    cfg.tokens = Some(tokens);
    let sim = start_sim(cfg).await;
    let kubeconfig = dir.join("kubeconfig");
    std::fs::write(&kubeconfig, format!(
        "apiVersion: v1\nkind: Config\ncurrent-context: sim\nclusters:\n- name: sim\n  cluster:\n    server: {}\n\
         users:\n- name: admin\n  user:\n    token: admin-token\ncontexts:\n- name: sim\n  context:\n    cluster: sim\n    user: admin\n",
        sim.url()
    )).unwrap();
    let mut config = r8s::config::Config::default();
    config.upstream.kubeconfig = Some(kubeconfig);
    let prepared = r8s::prepare(config).await.unwrap();
    let api = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let admin = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let base = format!("http://{}", api.local_addr().unwrap());
    let (trigger, signal) = r8s::shutdown::channel();
    let task = tokio::spawn(prepared.run(r8s::Listeners { api, admin }, signal));

    // No client credentials: r8s's own (admin, from the kubeconfig) are used.
    let r = get(&format!("{base}/api/v1/namespaces/default/secrets")).await;
    assert_eq!(r.status, 200, "{}", r.text());
    // A client's own token is forwarded unchanged, and the upstream decides.
    let r = send(
        "GET",
        &format!("{base}/api/v1/namespaces/default/secrets"),
        &[("authorization", "Bearer alice-token")],
        None,
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    assert_eq!(
        r.json()["message"],
        "secrets is forbidden: User \"alice\" cannot list resource \"secrets\" in API group \"\" in the namespace \"default\""
    );
    let r = send(
        "GET",
        &format!("{base}/api/v1/pods"),
        &[("authorization", "Bearer wrong")],
        None,
    )
    .await;
    assert_eq!(r.status, 401);
    assert_eq!(r.json()["reason"], "Unauthorized");
    trigger.fire();
    let _ = task.await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_accept_http2_from_clients() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let o = tokio::process::Command::new("curl")
        .args([
            "-s",
            "-o",
            "/dev/null",
            "-w",
            "%{http_version} %{http_code}",
            "--http2-prior-knowledge",
        ])
        .arg(format!("{}/api/v1/namespaces/ns-0/pods?limit=1", r8s.url()))
        .output()
        .await
        .expect("curl is on the PATH");
    assert_eq!(String::from_utf8_lossy(&o.stdout), "2 200");
    r8s.stop().await;
    sim.stop().await;
}

/// `auth.mode = "none"` acts as r8s for whoever connects, so it takes only
/// what `kubectl proxy` takes: a loopback `Host` (a DNS-rebinding page sends
/// its own name) and no exec or attach, each refused with a 403 `Status`.
#[tokio::test(flavor = "multi_thread")]
async fn should_refuse_foreign_hosts_and_exec_without_auth_as_kubectl_proxy_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s(vec![sim.url()]).await;
    let port = r8s.addr.port();
    let pods = format!("{}/api/v1/namespaces/ns-0/pods", r8s.url());
    for host in [format!("localhost:{port}"), format!("127.0.0.1:{port}")] {
        let r = send("GET", &pods, &[("host", host.as_str())], None).await;
        assert_eq!(r.status, 200, "{host}: {}", r.text());
    }
    for host in [
        format!("rebind.example:{port}"),
        "localhost.evil.example".into(),
    ] {
        let r = send("GET", &pods, &[("host", host.as_str())], None).await;
        assert_eq!(r.status, 403, "{host}: {}", r.text());
        let s = r.json();
        assert_eq!(
            (s["kind"].as_str(), s["reason"].as_str()),
            (Some("Status"), Some("Forbidden"))
        );
        assert!(
            s["message"]
                .as_str()
                .unwrap()
                .contains("server.accept_hosts"),
            "{s}"
        );
    }
    // A write with a foreign Host never reaches the upstream.
    let body = r#"{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"rebound"}}"#;
    let r = send(
        "POST",
        &format!("{}/api/v1/namespaces/default/configmaps", r8s.url()),
        &[
            ("host", "rebind.example"),
            ("content-type", "application/json"),
        ],
        Some(body),
    )
    .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let stored = get(&format!(
        "{}/api/v1/namespaces/default/configmaps/rebound",
        sim.url()
    ))
    .await;
    assert_eq!(stored.status, 404, "the write was not made");
    for path in ["exec?command=sh", "attach?stdin=true", "%65xec?command=sh"] {
        let url = format!("{}/api/v1/namespaces/ns-0/pods/pod-00000/{path}", r8s.url());
        let r = send("POST", &url, &[], None).await;
        assert_eq!(r.status, 403, "{path}: {}", r.text());
        assert!(r.text().contains("server.reject_paths"), "{}", r.text());
    }
    r8s.stop().await;

    // Widened by the operator: another name is accepted.
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.server.accept_hosts = vec![r"^r8s\.local$".into()];
    let r8s = start_r8s_config(config).await;
    let pods = format!("{}/api/v1/namespaces/ns-0/pods", r8s.url());
    let r = send("GET", &pods, &[("host", "r8s.local:1")], None).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let r = get(&pods).await;
    assert_eq!(
        r.status,
        403,
        "127.0.0.1 is no longer in the list: {}",
        r.text()
    );
    r8s.stop().await;
    sim.stop().await;
}
