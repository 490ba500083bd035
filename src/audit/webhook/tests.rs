//! The webhook backend against a server of the test's own: a batch it
//! refuses is tried 5 times, then dropped and counted; once it takes
//! batches again, events are written.

use std::sync::atomic::{AtomicU16, AtomicUsize, Ordering};

use http_body_util::BodyExt;
use hyper::service::service_fn;
use hyper_util::rt::{TokioExecutor, TokioIo};

use super::*;
use crate::audit::sink::{Queue, tests::counted};

/// A webhook answering every POST with `status`, keeping what it was sent.
struct Hook {
    url: String,
    status: Arc<AtomicU16>,
    posts: Arc<AtomicUsize>,
    bodies: Arc<std::sync::Mutex<Vec<serde_json::Value>>>,
}

async fn hook() -> Hook {
    let l = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/audit", l.local_addr().unwrap());
    let status = Arc::new(AtomicU16::new(503));
    let posts = Arc::new(AtomicUsize::new(0));
    let bodies = Arc::new(std::sync::Mutex::new(Vec::new()));
    let (s, p, b) = (status.clone(), posts.clone(), bodies.clone());
    tokio::spawn(async move {
        loop {
            let Ok((tcp, _)) = l.accept().await else {
                return;
            };
            let (s, p, b) = (s.clone(), p.clone(), b.clone());
            tokio::spawn(async move {
                let svc = service_fn(move |req: http::Request<hyper::body::Incoming>| {
                    let (s, p, b) = (s.clone(), p.clone(), b.clone());
                    async move {
                        assert_eq!(req.uri().path(), "/audit");
                        let body = req.into_body().collect().await.unwrap().to_bytes();
                        p.fetch_add(1, Ordering::SeqCst);
                        let code = s.load(Ordering::SeqCst);
                        if code == 200 {
                            b.lock()
                                .unwrap()
                                .push(serde_json::from_slice(&body).unwrap());
                        }
                        Ok::<_, std::convert::Infallible>(
                            http::Response::builder()
                                .status(code)
                                .body(http_body_util::Full::new(Bytes::new()))
                                .unwrap(),
                        )
                    }
                });
                let _ = hyper_util::server::conn::auto::Builder::new(TokioExecutor::new())
                    .serve_connection(TokioIo::new(tcp), svc)
                    .await;
            });
        }
    });
    Hook {
        url,
        status,
        posts,
        bodies,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_retry_a_refused_batch_then_drop_and_count_it_and_send_again_later() {
    let hook = hook().await;
    let dir = std::env::temp_dir().join(format!("r8s-webhook-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let kubeconfig = dir.join("webhook.kubeconfig");
    std::fs::write(
        &kubeconfig,
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: hook\n  cluster:\n    server: {}\n\
             users:\n- name: r8s\n  user: {{}}\ncontexts:\n- name: hook\n  context: {{cluster: hook, user: r8s}}\n\
             current-context: hook\n",
            hook.url
        ),
    )
    .unwrap();
    let target = Arc::new(Target::from_kubeconfig(&kubeconfig).await.unwrap());
    let recorder = metrics_exporter_prometheus::PrometheusBuilder::new().build_recorder();
    let handle = recorder.handle();
    let counters = metrics::with_local_recorder(&recorder, || Arc::new(AuditCounters::new()));
    let (q, rx) = Queue::new(AuditBackend::Webhook, 100, counters.clone());
    let batching = Batching {
        max_size: 3,
        max_wait: Duration::from_millis(1),
        throttle_qps: 0.0,
        throttle_burst: 1,
        initial_backoff: Duration::from_millis(1),
    };
    let task = tokio::spawn(run(target, rx, batching, counters));
    let failed = r#"r8s_audit_events_dropped_total{backend="webhook",reason="send_failed"}"#;
    let written = r#"r8s_audit_events_total{backend="webhook"}"#;
    // Down (503): one event, one batch, five tries, dropped and counted.
    q.send(Bytes::from_static(b"{\"n\":0}\n"));
    // (A hang guard of about 2 minutes, far beyond the few milliseconds it takes.)
    for _ in 0..24_000 {
        if counted(&handle, failed) >= 1.0 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(
        counted(&handle, failed),
        1.0,
        "the refused batch, counted (posts: {})",
        hook.posts.load(Ordering::SeqCst)
    );
    assert_eq!(hook.posts.load(Ordering::SeqCst), 5, "tries per batch");
    // Up again: events go through, as an EventList.
    hook.status.store(200, Ordering::SeqCst);
    for n in 1..=4 {
        q.send(Bytes::from(format!("{{\"n\":{n}}}\n")));
    }
    drop(q);
    task.await.unwrap();
    assert_eq!(counted(&handle, written), 4.0);
    assert_eq!(counted(&handle, failed), 1.0);
    let bodies = hook.bodies.lock().unwrap();
    let mut items = Vec::new();
    for b in bodies.iter() {
        assert_eq!(b["kind"], "EventList");
        assert_eq!(b["apiVersion"], "audit.k8s.io/v1");
        assert!(
            b["items"].as_array().unwrap().len() <= 3,
            "batches of at most 3"
        );
        items.extend(
            b["items"]
                .as_array()
                .unwrap()
                .iter()
                .map(|i| i["n"].as_i64().unwrap()),
        );
    }
    assert_eq!(items, vec![1, 2, 3, 4]);
    std::fs::remove_dir_all(&dir).unwrap();
}
