//! `auth.mode = "delegated"`: r8s serves from cache only what the apiserver
//! would show the caller, at cache speed, and passes the rest through under
//! the caller's own identity. The sim plays kube-apiserver with a
//! `--token-auth-file` and an ABAC policy file, both re-read on change.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use crate::common::*;
use r8s::config::Config;
use r8s_sim::SimHandle;

/// Beside r8s and admin ([`crate::common::auth::R8S_AND_ADMIN`]).
const USERS: &str = "alice-token,alice,uid-alice,
carol-token,carol,uid-carol,\"devs\"
node-00-token,system:node:node-00,uid-node-00,\"system:nodes\"
dave-token,dave,uid-dave,
erin-token,erin,uid-erin,
frank-token,frank,uid-frank,
";

/// Beyond what any authenticated user may read (all but secrets and
/// namespaces): carol may read secrets in ns-1; dave only the secret
/// api-key in ns-1 (a Role with `resourceNames`); erin the namespace ns-2
/// (a RoleBinding in ns-2 to a ClusterRole on namespaces); frank the
/// namespace ns-2 cluster-wide by name (a ClusterRole with `resourceNames`).
const POLICY: &str = r#"{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"carol","namespace":"ns-1","resource":"secrets","apiGroup":"*","readonly":true}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"dave","namespace":"ns-1","resource":"secrets","apiGroup":"*","readonly":true,"resourceNames":["api-key"]}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"erin","namespace":"ns-2","resource":"namespaces","apiGroup":"*","readonly":true}}
{"apiVersion":"abac.authorization.kubernetes.io/v1beta1","kind":"Policy","spec":{"user":"frank","namespace":"*","resource":"namespaces","apiGroup":"*","readonly":true,"resourceNames":["ns-2"]}}
"#;

struct Env {
    sim: SimHandle,
    r8s: R8s,
    tokens: PathBuf,
    policy: PathBuf,
}

/// A sim with tokens and policy files (plus `users` more users `user-i`),
/// a secret in ns-1, and r8s in delegated mode caching pods, secrets,
/// configmaps and namespaces with r8s's own token.
async fn setup(name: &str, users: usize, tweak: impl FnOnce(&mut Config)) -> Env {
    let mut more = USERS.to_string();
    for i in 0..users {
        more.push_str(&format!("user-{i}-token,user-{i},uid-{i},\n"));
    }
    let files = AuthFiles::write(name, &more, Some(POLICY));
    let sim = start_sim(files.sim(sim_config())).await;
    let created = req(
        "POST",
        &sim.url(),
        "/api/v1/namespaces/ns-1/secrets",
        Some("admin-token"),
        Some(r#"{"apiVersion":"v1","kind":"Secret","metadata":{"name":"api-key"},"data":{"k":"dg=="}}"#),
    )
    .await;
    assert_eq!(created.status, 201, "{}", created.text());
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods", "v1/secrets", "v1/configmaps", "v1/namespaces"])
        .with(|c| files.delegate(c))
        .with(tweak)
        .start()
        .await;
    Env {
        sim,
        r8s,
        tokens: files.tokens,
        policy: files.policy.expect("a policy"),
    }
}

async fn req(
    method: &str,
    base: &str,
    path: &str,
    token: Option<&str>,
    body: Option<&str>,
) -> Resp {
    let auth = token.map(|t| format!("Bearer {t}"));
    let mut headers = vec![("accept", "application/json")];
    if let Some(a) = &auth {
        headers.push(("authorization", a.as_str()));
    }
    if body.is_some() {
        headers.push(("content-type", "application/json"));
    }
    send(method, &format!("{base}{path}"), &headers, body).await
}

/// A request's status, and its body unless it is a watch that started
/// (its events are not what this compares, and it would run on).
async fn status_of(
    method: &str,
    base: &str,
    path: &str,
    token: Option<&str>,
) -> (http::StatusCode, bytes::Bytes) {
    let mut b = http::Request::builder()
        .method(method)
        .uri(format!("{base}{path}"))
        .header("accept", "application/json");
    if let Some(t) = token {
        b = b.header("authorization", format!("Bearer {t}"));
    }
    let req = b
        .body(http_body_util::Full::new(bytes::Bytes::new()))
        .unwrap();
    let r = tokio::time::timeout(HANG, client().request(req))
        .await
        .expect("an answer (hung)")
        .unwrap();
    let status = r.status();
    if status == 200 && path.contains("watch=1") {
        return (status, bytes::Bytes::new());
    }
    let body = http_body_util::BodyExt::collect(r.into_body())
        .await
        .unwrap()
        .to_bytes();
    (status, body)
}

fn cache_result(r: &Resp) -> &str {
    r.headers
        .get("x-r8s-cache")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("")
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_from_cache_only_what_the_apiserver_would_show() {
    let env = setup("show", 0, |_| {}).await;
    let (r8s, sim) = (env.r8s.url(), env.sim.url());

    // admin (system:masters) lists secrets from the cache.
    let r = req(
        "GET",
        &r8s,
        "/api/v1/secrets?resourceVersion=0",
        Some("admin-token"),
        None,
    )
    .await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(cache_result(&r), "hit");
    let names: Vec<String> = r.json()["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|o| o["metadata"]["name"].as_str().unwrap().to_string())
        .collect();
    assert!(names.contains(&"db-password".to_string()) && names.contains(&"api-key".to_string()));

    // alice: 403 on secrets for get, list and watch, cluster-wide and
    // namespaced, with the sim's exact body; 200 on pods.
    for path in [
        "/api/v1/secrets?resourceVersion=0",
        "/api/v1/namespaces/default/secrets?resourceVersion=0",
        "/api/v1/namespaces/default/secrets/db-password?resourceVersion=0",
        "/api/v1/secrets?watch=1&resourceVersion=0",
        "/api/v1/namespaces/ns-1/secrets?watch=1&resourceVersion=0",
    ] {
        let via = req("GET", &r8s, path, Some("alice-token"), None).await;
        let direct = req("GET", &sim, path, Some("alice-token"), None).await;
        assert_eq!(via.status, 403, "{path}: {}", via.text());
        assert_eq!(via.body, direct.body, "{path}");
        for h in ["content-type", "cache-control", "x-content-type-options"] {
            assert_eq!(via.headers.get(h), direct.headers.get(h), "{path}: {h}");
        }
        assert_eq!(via.headers["x-content-type-options"], "nosniff");
    }
    let r = req(
        "GET",
        &r8s,
        "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        Some("alice-token"),
        None,
    )
    .await;
    assert_eq!((r.status.as_u16(), cache_result(&r)), (200, "hit"));
    assert!(!r.json()["items"].as_array().unwrap().is_empty());

    // A kubelet lists its own node's pods from cache: the access review carries
    // the field selector, which the node authorizer decides on.
    let own = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-00&resourceVersion=0";
    let r = req("GET", &r8s, own, Some("node-00-token"), None).await;
    assert_eq!(
        (r.status.as_u16(), cache_result(&r)),
        (200, "hit"),
        "{}",
        r.text()
    );
    assert!(!r.json()["items"].as_array().unwrap().is_empty());
    for other in [
        "/api/v1/pods?resourceVersion=0",
        "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-01&resourceVersion=0",
    ] {
        let via = req("GET", &r8s, other, Some("node-00-token"), None).await;
        let direct = req("GET", &sim, other, Some("node-00-token"), None).await;
        assert_eq!(
            (via.status.as_u16(), &via.body),
            (403, &direct.body),
            "{other}"
        );
    }

    // No token, and a bad token: the same status and body as the sim's.
    for token in [None, Some("not-a-token")] {
        for path in [
            "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
            "/api/v1/secrets?resourceVersion=0",
        ] {
            let via = req("GET", &r8s, path, token, None).await;
            let direct = req("GET", &sim, path, token, None).await;
            assert_eq!(via.status, direct.status, "{token:?} {path}");
            assert_eq!(via.body, direct.body, "{token:?} {path}");
            let want = if token.is_some() { 401 } else { 403 };
            assert_eq!(via.status, want, "{token:?} {path}: {}", via.text());
        }
    }

    let m = get(&format!("{}/metrics", env.r8s.admin_url()))
        .await
        .text();
    assert!(
        sample(&m, r#"r8s_authz_total{decision="denied",cached="false"}"#) >= 1.0,
        "{m}"
    );
    assert!(sample(&m, r#"r8s_authn_total{result="rejected",cached="false"}"#) >= 1.0);
    env.r8s.stop().await;
    env.sim.stop().await;
}

/// Answers from r8s and the sim straight for the same request, which must
/// agree on status and body (a watch: status); r8s's answer.
async fn same_as_sim(env: &Env, path: &str, token: &str) -> Resp {
    let via = req("GET", &env.r8s.url(), path, Some(token), None).await;
    let direct = req("GET", &env.sim.url(), path, Some(token), None).await;
    assert_eq!(
        via.status,
        direct.status,
        "{path} as {token}: {}",
        via.text()
    );
    if !path.contains("watch=1") {
        assert_eq!(via.body, direct.body, "{path} as {token}");
    }
    via
}

#[tokio::test(flavor = "multi_thread")]
async fn should_authorize_single_object_reads_as_request_info_does() {
    let env = setup("names", 0, |_| {}).await;

    // dave's Role names one secret: his informer of it lists and watches
    // with a name selector, served from cache.
    let one =
        "/api/v1/namespaces/ns-1/secrets?resourceVersion=0&fieldSelector=metadata.name%3Dapi-key";
    let r = same_as_sim(&env, one, "dave-token").await;
    assert_eq!(
        (r.status.as_u16(), cache_result(&r)),
        (200, "hit"),
        "{}",
        r.text()
    );
    let items = r.json()["items"].as_array().unwrap().clone();
    assert_eq!(items.len(), 1);
    assert_eq!(items[0]["metadata"]["name"], "api-key");
    let w = format!("{one}&watch=1&timeoutSeconds=1");
    let r = same_as_sim(&env, &w, "dave-token").await;
    assert_eq!((r.status.as_u16(), cache_result(&r)), (200, "hit"));
    assert!(r.text().contains(r#""name":"api-key""#), "{}", r.text());

    // Anything else is denied, and the 403 names the object asked for.
    let other = "/api/v1/namespaces/ns-1/secrets?resourceVersion=0&fieldSelector=metadata.name%3Ddb-password";
    let r = same_as_sim(&env, other, "dave-token").await;
    assert_eq!(r.status, 403);
    let s = r.json();
    assert_eq!(
        s["message"],
        r#"secrets "db-password" is forbidden: User "dave" cannot list resource "secrets" in API group "" in the namespace "ns-1""#
    );
    assert_eq!(s["details"]["name"], "db-password");
    assert!(
        r.body.ends_with(b"}\n"),
        "a Status ends as Go's encoder ends it"
    );
    let all = "/api/v1/namespaces/ns-1/secrets?resourceVersion=0";
    let r = same_as_sim(&env, all, "dave-token").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        r#"secrets is forbidden: User "dave" cannot list resource "secrets" in API group "" in the namespace "ns-1""#
    );
    assert!(r.json()["details"].get("name").is_none());

    // erin's RoleBinding in ns-2 grants ns-2 itself: the namespace object
    // is in its own namespace.
    let r = same_as_sim(
        &env,
        "/api/v1/namespaces/ns-2?resourceVersion=0",
        "erin-token",
    )
    .await;
    assert_eq!(
        (r.status.as_u16(), cache_result(&r)),
        (200, "hit"),
        "{}",
        r.text()
    );
    assert_eq!(r.json()["metadata"]["name"], "ns-2");
    let r = same_as_sim(
        &env,
        "/api/v1/namespaces/ns-1?resourceVersion=0",
        "erin-token",
    )
    .await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        r#"namespaces "ns-1" is forbidden: User "erin" cannot get resource "namespaces" in API group "" in the namespace "ns-1""#
    );
    // Listing namespaces is cluster-scoped even when it names one: not hers.
    let named = "/api/v1/namespaces?resourceVersion=0&fieldSelector=metadata.name%3Dns-2";
    let r = same_as_sim(&env, named, "erin-token").await;
    assert_eq!(r.status, 403);
    assert_eq!(
        r.json()["message"],
        r#"namespaces "ns-2" is forbidden: User "erin" cannot list resource "namespaces" in API group "" at the cluster scope"#
    );
    // frank's ClusterRole names ns-2: he may list and watch it by name.
    let r = same_as_sim(&env, named, "frank-token").await;
    assert_eq!(
        (r.status.as_u16(), cache_result(&r)),
        (200, "hit"),
        "{}",
        r.text()
    );
    assert_eq!(r.json()["items"].as_array().unwrap().len(), 1);
    let r = same_as_sim(
        &env,
        &format!("{named}&watch=1&timeoutSeconds=1"),
        "frank-token",
    )
    .await;
    assert_eq!((r.status.as_u16(), cache_result(&r)), (200, "hit"));
    let r = same_as_sim(&env, "/api/v1/namespaces?resourceVersion=0", "frank-token").await;
    assert_eq!(r.status, 403);
    env.r8s.stop().await;
    env.sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_401_without_credentials_when_anonymous_is_off() {
    let env = setup("anon-off", 0, |c| c.auth.anonymous = false).await;
    let r8s = env.r8s.url();
    for path in [
        "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        "/api/v1/namespaces/ns-1/pods",
        "/version",
    ] {
        let r = req("GET", &r8s, path, None, None).await;
        assert_eq!(r.status, 401, "{path}");
        assert_eq!(
            r.body,
            bytes::Bytes::from_static(br#"{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"Unauthorized","reason":"Unauthorized","code":401}
"#)
        );
    }
    let r = req(
        "GET",
        &r8s,
        "/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        Some("alice-token"),
        None,
    )
    .await;
    assert_eq!(r.status, 200);
    env.r8s.stop().await;
    env.sim.stop().await;
}

/// Polls `path` as `token` until its status is `want`: the change upstream
/// takes effect once the cached answer's TTL has passed. That it does so at
/// the TTL, to the millisecond, is for the unit tests of src/auth/cache.rs (in paused
/// time); here a hang guard.
async fn answered_after_the_ttl(base: &str, path: &str, token: &str, want: u16) {
    let guard = HangGuard::new();
    loop {
        let r = req("GET", base, path, Some(token), None).await;
        if r.status == want {
            return;
        }
        guard.check(|| format!("{path} as {token}: still {}", r.status));
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_stop_revoked_tokens_and_permissions_within_their_ttl() {
    const TTL: Duration = Duration::from_secs(3);
    let env = setup("revoke", 0, |c| {
        c.auth.token_ttl_seconds = TTL.as_secs();
        c.auth.decision_ttl_seconds = TTL.as_secs();
    })
    .await;
    let r8s = env.r8s.url();
    let pods = "/api/v1/namespaces/ns-1/pods?resourceVersion=0";
    let secrets = "/api/v1/namespaces/ns-1/secrets?resourceVersion=0";
    assert_eq!(
        req("GET", &r8s, pods, Some("alice-token"), None)
            .await
            .status,
        200
    );
    let r = req("GET", &r8s, secrets, Some("carol-token"), None).await;
    assert_eq!((r.status.as_u16(), cache_result(&r)), (200, "hit"));

    // Revoke alice's token upstream: refused by r8s once the token TTL has passed.
    std::fs::write(
        &env.tokens,
        format!("{}{}", crate::common::auth::R8S_AND_ADMIN, USERS)
            .replace("alice-token,alice,uid-alice,\n", ""),
    )
    .unwrap();
    answered_after_the_ttl(&r8s, pods, "alice-token", 401).await;
    // And stays refused (the rejection is cached, not flapping).
    assert_eq!(
        req("GET", &r8s, pods, Some("alice-token"), None)
            .await
            .status,
        401
    );

    // Remove carol's grant upstream: cached reads stop once the decision TTL has passed.
    std::fs::write(&env.policy, "").unwrap();
    answered_after_the_ttl(&r8s, secrets, "carol-token", 403).await;
    // Her other permissions are untouched.
    assert_eq!(
        req("GET", &r8s, pods, Some("carol-token"), None)
            .await
            .status,
        200
    );
    env.r8s.stop().await;
    env.sim.stop().await;
}

fn reviews(sim: &SimHandle) -> (u64, u64) {
    (
        sim.sim.count("create", "tokenreviews"),
        sim.sim.count("create", "subjectaccessreviews"),
    )
}

/// `n` cached GETs per token, `concurrency` at a time; every one must be a 200 hit.
async fn cached_reads(base: &str, tokens: &[String], n: usize, concurrency: usize) {
    let jobs: Vec<(String, usize)> = tokens
        .iter()
        .flat_map(|t| (0..n).map(move |i| (t.clone(), i)))
        .collect();
    let jobs = Arc::new(std::sync::Mutex::new(jobs));
    let mut tasks = Vec::new();
    for _ in 0..concurrency {
        let (jobs, base) = (jobs.clone(), base.to_string());
        tasks.push(tokio::spawn(async move {
            let client = client();
            loop {
                let Some((token, i)) = jobs.lock().unwrap().pop() else {
                    return;
                };
                let uri = format!(
                    "{base}/api/v1/namespaces/ns-{}/pods?resourceVersion=0&limit=1",
                    i % 3
                );
                let r = client
                    .request(
                        http::Request::get(uri)
                            .header("authorization", format!("Bearer {token}"))
                            .body(http_body_util::Full::new(bytes::Bytes::new()))
                            .unwrap(),
                    )
                    .await
                    .unwrap();
                assert_eq!(r.status(), 200);
                assert_eq!(r.headers()["x-r8s-cache"], "hit");
                http_body_util::BodyExt::collect(r.into_body())
                    .await
                    .unwrap();
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_cost_a_handful_of_reviews_per_user_not_per_request() {
    // Answers cached longer than the test runs on any machine: what is
    // counted is reviews per user, not expiries (a busy machine once took
    // more than the default 10 s of a decision, and reviewed each twice).
    let env = setup("count", 100, |c| {
        c.auth.token_ttl_seconds = 3600;
        c.auth.decision_ttl_seconds = 3600;
    })
    .await;
    let r8s = env.r8s.url();
    let before = reviews(&env.sim);
    cached_reads(&r8s, &["alice-token".to_string()], 10_000, 32).await;
    let after = reviews(&env.sim);
    let (tr, sar) = (after.0 - before.0, after.1 - before.1);
    // One token review; one access review per namespace read (3).
    assert!(tr <= 2, "10,000 reads by one user cost {tr} token reviews");
    assert!(
        sar <= 5,
        "10,000 reads by one user cost {sar} access reviews"
    );

    let users: Vec<String> = (0..100).map(|i| format!("user-{i}-token")).collect();
    let before = reviews(&env.sim);
    // 100 users × 100 reads of one namespace each, interleaved.
    let jobs = Arc::new(std::sync::Mutex::new(
        (0..100)
            .flat_map(|_| users.iter().cloned())
            .collect::<Vec<_>>(),
    ));
    let mut tasks = Vec::new();
    for _ in 0..32 {
        let (jobs, base) = (jobs.clone(), r8s.clone());
        tasks.push(tokio::spawn(async move {
            loop {
                let Some(token) = jobs.lock().unwrap().pop() else {
                    return;
                };
                let r = req(
                    "GET",
                    &base,
                    "/api/v1/namespaces/ns-2/pods?resourceVersion=0&limit=1",
                    Some(&token),
                    None,
                )
                .await;
                assert_eq!(
                    (r.status.as_u16(), cache_result(&r)),
                    (200, "hit"),
                    "{token}"
                );
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let after = reviews(&env.sim);
    let (tr, sar) = (after.0 - before.0, after.1 - before.1);
    assert!(
        (100..=105).contains(&tr),
        "100 users × 100 reads cost {tr} token reviews"
    );
    assert!(
        (100..=105).contains(&sar),
        "100 users × 100 reads cost {sar} access reviews"
    );
    let m = get(&format!("{}/metrics", env.r8s.admin_url()))
        .await
        .text();
    assert!(
        sample(
            &m,
            r#"r8s_authn_total{result="authenticated",cached="true"}"#
        ) >= 19_000.0
    );
    assert!(
        sample(
            &m,
            r#"r8s_auth_review_duration_seconds_count{review="token"}"#
        ) >= 100.0
    );
    env.r8s.stop().await;
    env.sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_answer_every_request_with_the_apiservers_status() {
    let env = setup("matrix", 0, |c| c.auth.decision_denied_ttl_seconds = 60).await;
    let (r8s, sim) = (env.r8s.url(), env.sim.url());
    let users = [
        Some("admin-token"),
        Some("alice-token"),
        Some("carol-token"),
        Some("dave-token"),
        Some("erin-token"),
        Some("frank-token"),
        Some("node-00-token"),
        None,
        Some("wrong-token"),
    ];
    let mut requests: Vec<(&str, String)> = Vec::new();
    for resource in ["pods", "secrets", "configmaps"] {
        for ns in [None, Some("default"), Some("ns-1")] {
            let base = match ns {
                Some(ns) => format!("/api/v1/namespaces/{ns}/{resource}"),
                None => format!("/api/v1/{resource}"),
            };
            for rv in ["resourceVersion=0", "resourceVersion=", "resourceVersion=1"] {
                requests.push(("GET", format!("{base}?{rv}")));
                requests.push(("GET", format!("{base}?watch=1&timeoutSeconds=1&{rv}")));
                if ns.is_some() {
                    for name in ["kube-root-ca.crt", "db-password", "api-key", "missing"] {
                        requests.push(("GET", format!("{base}/{name}?{rv}")));
                    }
                }
            }
            if ns.is_some() {
                requests.push(("DELETE", format!("{base}/missing")));
            }
        }
    }
    // Single-object informers (a name selector; RBAC `resourceNames`), and
    // namespace objects, which are in their own namespace.
    for name in ["api-key", "db-password"] {
        for base in ["/api/v1/namespaces/ns-1/secrets", "/api/v1/secrets"] {
            for rv in ["resourceVersion=0", "resourceVersion="] {
                for watch in ["", "watch=1&timeoutSeconds=1&"] {
                    requests.push((
                        "GET",
                        format!("{base}?{watch}fieldSelector=metadata.name%3D{name}&{rv}"),
                    ));
                }
            }
        }
    }
    for ns in ["ns-1", "ns-2", "missing"] {
        for rv in ["resourceVersion=0", "resourceVersion="] {
            requests.push(("GET", format!("/api/v1/namespaces/{ns}?{rv}")));
            for watch in ["", "watch=1&timeoutSeconds=1&"] {
                requests.push((
                    "GET",
                    format!("/api/v1/namespaces?{watch}fieldSelector=metadata.name%3D{ns}&{rv}"),
                ));
            }
        }
    }
    // Kubelet-style reads, which the (sim's) node authorizer decides on the field selector.
    for node in ["node-00", "node-01"] {
        for rv in ["resourceVersion=0", "resourceVersion="] {
            for watch in ["", "watch=1&timeoutSeconds=1&"] {
                requests.push((
                    "GET",
                    format!("/api/v1/pods?{watch}fieldSelector=spec.nodeName%3D{node}&{rv}"),
                ));
            }
        }
    }
    let mut checked = 0;
    let mut by_status = std::collections::BTreeMap::<u16, usize>::new();
    for token in users {
        for (method, path) in &requests {
            let via = status_of(method, &r8s, path, token).await;
            let direct = status_of(method, &sim, path, token).await;
            assert_eq!(
                via.0, direct.0,
                "{method} {path} as {token:?}: r8s {} vs sim {}\n{:?}\n{:?}",
                via.0, direct.0, via.1, direct.1
            );
            // Every body but a watch stream's (which `status_of` leaves empty).
            assert_eq!(
                via.1, direct.1,
                "{method} {path} as {token:?}: r8s's body vs the sim's"
            );
            *by_status.entry(via.0.as_u16()).or_default() += 1;
            checked += 1;
        }
    }
    // The matrix covers every answer kind: allowed, missing, denied, unauthenticated.
    for code in [200, 401, 403, 404] {
        assert!(
            by_status.get(&code).copied().unwrap_or(0) > 0,
            "no {code} in {by_status:?}"
        );
    }
    assert!(checked > 500, "{checked}");
    env.r8s.stop().await;
    env.sim.stop().await;
}
