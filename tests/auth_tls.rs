//! r8s over TLS in `delegated` mode: client certificates (CN → user, O →
//! groups) authorized for cache reads and impersonated on pass-through, token
//! clients through kubectl, ALPN (h2 and http/1.1), and a serving certificate
//! rotated on disk without a restart. Certificates are made here with rcgen.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use crate::common::*;
use base64::Engine;
use http_body_util::{BodyExt, Empty};
use hyper_util::rt::{TokioExecutor, TokioIo};
use r8s::config::{AuthMode, Config};

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, Issuer, KeyPair,
    KeyUsagePurpose,
};
use tokio_rustls::TlsConnector;
use tokio_rustls::rustls::pki_types::{CertificateDer, ServerName};

/// Beside r8s and admin ([`crate::common::auth::R8S_AND_ADMIN`]).
const USERS: &str = "alice-token,alice,uid-alice,\n";

struct Ca {
    issuer: Issuer<'static, KeyPair>,
    pem: String,
    der: CertificateDer<'static>,
}

fn new_ca(name: &str) -> Ca {
    let key = KeyPair::generate().unwrap();
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, name);
    p.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let cert = p.self_signed(&key).unwrap();
    Ca {
        pem: cert.pem(),
        der: cert.der().clone(),
        issuer: Issuer::new(p, key),
    }
}

/// A leaf certificate: (cert PEM, key PEM, cert DER).
type Leaf = (String, String, Vec<u8>);

/// A leaf certificate signed by `ca`.
fn leaf(ca: &Ca, cn: &str, orgs: &[&str], server: bool) -> Leaf {
    let key = KeyPair::generate().unwrap();
    let sans = if server {
        vec!["localhost".to_string(), "127.0.0.1".to_string()]
    } else {
        Vec::new()
    };
    let mut p = CertificateParams::new(sans).unwrap();
    p.distinguished_name.push(DnType::CommonName, cn);
    for o in orgs {
        p.distinguished_name.push(DnType::OrganizationName, *o);
    }
    p.extended_key_usages = vec![if server {
        ExtendedKeyUsagePurpose::ServerAuth
    } else {
        ExtendedKeyUsagePurpose::ClientAuth
    }];
    let cert = p.signed_by(&key, &ca.issuer).unwrap();
    (cert.pem(), key.serialize_pem(), cert.der().to_vec())
}

fn b64(s: &str) -> String {
    base64::engine::general_purpose::STANDARD.encode(s)
}

/// A kubeconfig with one context per user: token users and certificate users.
fn kubeconfig(dir: &Path, server: &str, ca_pem: &str, certs: &[(&str, &Leaf)]) -> PathBuf {
    let mut users = String::new();
    let mut contexts = String::new();
    for t in ["admin", "alice"] {
        users.push_str(&format!("- name: {t}\n  user:\n    token: {t}-token\n"));
        contexts.push_str(&format!(
            "- name: {t}\n  context: {{cluster: r8s, user: {t}}}\n"
        ));
    }
    for (name, (cert, key, _)) in certs {
        users.push_str(&format!(
            "- name: {name}\n  user:\n    client-certificate-data: {}\n    client-key-data: {}\n",
            b64(cert),
            b64(key)
        ));
        contexts.push_str(&format!(
            "- name: {name}\n  context: {{cluster: r8s, user: {name}}}\n"
        ));
    }
    let text = format!(
        "apiVersion: v1\nkind: Config\nclusters:\n- name: r8s\n  cluster:\n    server: {server}\n    certificate-authority-data: {}\nusers:\n{users}contexts:\n{contexts}current-context: admin\n",
        b64(ca_pem)
    );
    let p = dir.join("kubeconfig");
    std::fs::write(&p, text).unwrap();
    p
}

async fn kubectl_ctx(kubeconfig: &Path, context: &str, args: &[&str]) -> (bool, String, String) {
    let home = kubeconfig.parent().unwrap();
    let out = tokio::process::Command::new("kubectl")
        .arg("--kubeconfig")
        .arg(kubeconfig)
        .arg("--context")
        .arg(context)
        .arg("--cache-dir")
        .arg(home.join("cache"))
        .args(args)
        .env("HOME", home)
        .env_remove("KUBECONFIG")
        .kill_on_drop(true)
        .output();
    let out = tokio::time::timeout(HANG, out)
        .await
        .expect("kubectl finished")
        .unwrap();
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Opens a TLS connection offering `alpn`; returns it and the server's certificate.
async fn connect(
    addr: std::net::SocketAddr,
    ca: &CertificateDer<'static>,
    alpn: &[&[u8]],
) -> (
    tokio_rustls::client::TlsStream<tokio::net::TcpStream>,
    Vec<u8>,
) {
    let mut roots = tokio_rustls::rustls::RootCertStore::empty();
    roots.add(ca.clone()).unwrap();
    let provider = Arc::new(tokio_rustls::rustls::crypto::ring::default_provider());
    let mut cfg = tokio_rustls::rustls::ClientConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    cfg.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    let tcp = tokio::net::TcpStream::connect(addr).await.unwrap();
    let tls = TlsConnector::from(Arc::new(cfg))
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .unwrap();
    let served = tls.get_ref().1.peer_certificates().unwrap()[0].to_vec();
    (tls, served)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_identify_certificates_impersonate_them_and_speak_h2_over_tls() {
    let dir = std::env::temp_dir().join(format!("r8s-auth-tls-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = new_ca("r8s test CA");
    let server = leaf(&ca, "r8s", &[], true);
    let carol = leaf(&ca, "carol", &["devs"], false);
    let ops = leaf(&ca, "ops", &["system:masters"], false);
    let other_ca = new_ca("some other CA");
    let stranger = leaf(&other_ca, "mallory", &["system:masters"], false);
    let (cert_file, key_file, ca_file) =
        (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&cert_file, &server.0).unwrap();
    std::fs::write(&key_file, &server.1).unwrap();
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let files = AuthFiles::write("tls", USERS, None);

    let sim = start_sim(files.sim(sim_config())).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.upstream.token_file = Some(files.own_token.clone());
    config.cache.resources = vec!["pods".into(), "v1/configmaps".into()];
    config.auth.mode = Some(AuthMode::Delegated);
    config.tls.cert_file = Some(cert_file.clone());
    config.tls.key_file = Some(key_file.clone());
    config.tls.client_ca_file = Some(ca_file.clone());
    let r8s = start_r8s_config(config).await;
    let url = format!("https://127.0.0.1:{}", r8s.addr.port());
    let kc = kubeconfig(
        &dir,
        &url,
        &ca.pem,
        &[("carol", &carol), ("ops", &ops), ("stranger", &stranger)],
    );

    // A certificate client's cached read: authorized as carol (groups devs,
    // system:authenticated), answered from cache.
    let lists = sim.sim.count("list", "pods");
    let kube_cfg = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kc).unwrap(),
        &kube::config::KubeConfigOptions {
            context: Some("carol".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube_cfg).unwrap();
    let pods: kube::Api<k8s_openapi::api::core::v1::Pod> = kube::Api::namespaced(client, "ns-1");
    let listed = pods
        .list(&kube::api::ListParams::default().match_any())
        .await
        .unwrap();
    assert!(!listed.items.is_empty());
    assert_eq!(
        sim.sim.count("list", "pods"),
        lists,
        "the cached read went upstream"
    );

    // Pass-through: the sim sees r8s impersonating carol, and decides as carol.
    let (ok, out, err) = kubectl_ctx(
        &kc,
        "carol",
        &["get", "configmaps", "-n", "ns-1", "-o", "name"],
    )
    .await;
    assert!(ok, "{err}");
    assert!(out.contains("configmap/kube-root-ca.crt"), "{out}");
    let seen = sim.sim.impersonations();
    let (by, as_user) = seen.last().expect("the sim saw an impersonated request");
    assert_eq!(by, "r8s");
    assert_eq!(as_user.name, "carol");
    assert_eq!(as_user.groups, vec!["devs", "system:authenticated"]);
    let (ok, _, err) = kubectl_ctx(&kc, "carol", &["get", "secrets", "-n", "default"]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"secrets is forbidden: User "carol" cannot list resource "secrets" in API group "" in the namespace "default""#),
        "{err}"
    );

    // A certificate client's own impersonation is checked as the apiserver
    // would: carol may not, ops (system:masters) may.
    let (ok, _, err) = kubectl_ctx(
        &kc,
        "carol",
        &["--as", "bob", "get", "configmaps", "-n", "ns-1"],
    )
    .await;
    assert!(!ok);
    assert!(
        err.contains(r#"users "bob" is forbidden: User "carol" cannot impersonate resource "users" in API group "" at the cluster scope"#),
        "{err}"
    );
    let (ok, _, err) = kubectl_ctx(
        &kc,
        "ops",
        &["--as", "bob", "get", "configmaps", "-n", "ns-1"],
    )
    .await;
    assert!(ok, "{err}");
    let (by, as_user) = sim.sim.impersonations().last().cloned().unwrap();
    assert_eq!((by.as_str(), as_user.name.as_str()), ("r8s", "bob"));

    // A certificate from another CA gets through the handshake, as
    // kube-apiserver asks for client certificates without requiring them,
    // and gets its 401: it does not verify, and no token authenticates.
    let (ok, _, err) = kubectl_ctx(&kc, "stranger", &["get", "pods", "-n", "ns-1"]).await;
    assert!(!ok, "a certificate from an unknown CA was accepted");
    assert!(err.contains("Unauthorized"), "{err}");

    // Token clients over TLS with kubectl.
    let (ok, _, err) = kubectl_ctx(&kc, "alice", &["get", "secrets", "-A"]).await;
    assert!(!ok);
    assert!(
        err.contains(r#"secrets is forbidden: User "alice" cannot list resource "secrets" in API group "" at the cluster scope"#),
        "{err}"
    );
    let (ok, out, err) =
        kubectl_ctx(&kc, "admin", &["get", "pods", "-n", "ns-1", "-o", "name"]).await;
    assert!(ok && out.contains("pod/"), "{err}");

    // ALPN: h2 when offered, http/1.1 otherwise; both serve cached reads.
    for (alpn, want) in [
        (vec![&b"h2"[..], &b"http/1.1"[..]], &b"h2"[..]),
        (vec![&b"http/1.1"[..]], &b"http/1.1"[..]),
    ] {
        let (tls, _) = connect(r8s.addr, &ca.der, &alpn).await;
        assert_eq!(tls.get_ref().1.alpn_protocol(), Some(want));
        let req = http::Request::get(format!(
            "{url}/api/v1/namespaces/ns-1/pods?resourceVersion=0"
        ))
        .header("authorization", "Bearer admin-token")
        .body(Empty::<bytes::Bytes>::new())
        .unwrap();
        let resp = if want == b"h2" {
            let (mut send, conn) =
                hyper::client::conn::http2::handshake(TokioExecutor::new(), TokioIo::new(tls))
                    .await
                    .unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.unwrap()
        } else {
            let (mut send, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tls))
                .await
                .unwrap();
            tokio::spawn(conn);
            send.send_request(req).await.unwrap()
        };
        assert_eq!(resp.status(), 200);
        assert_eq!(resp.headers()["x-r8s-cache"], "hit");
        let body = resp.into_body().collect().await.unwrap().to_bytes();
        assert!(body.starts_with(br#"{"kind":"PodList""#));
    }

    // Rotate the serving certificate on disk: new connections get it, no restart.
    let (_, before) = connect(r8s.addr, &ca.der, &[b"h2"]).await;
    assert_eq!(before, server.2);
    let rotated = leaf(&ca, "r8s-rotated", &[], true);
    std::fs::write(&key_file, &rotated.1).unwrap();
    std::fs::write(&cert_file, &rotated.0).unwrap();
    eventually("the rotated certificate served", HANG, || async {
        let (_, served) = connect(r8s.addr, &ca.der, &[b"h2"]).await;
        (served == rotated.2).then_some(())
    })
    .await;
    let (ok, _, err) = kubectl_ctx(&kc, "admin", &["get", "pods", "-n", "ns-1"]).await;
    assert!(ok, "{err}");

    // Add the other CA to the client CA bundle: its clients get in, no restart.
    std::fs::write(&ca_file, format!("{}{}", ca.pem, other_ca.pem)).unwrap();
    eventually("the new client CA used", HANG, || async {
        let (ok, _, _) = kubectl_ctx(
            &kc,
            "stranger",
            &["get", "pods", "-n", "ns-1", "-o", "name"],
        )
        .await;
        ok.then_some(())
    })
    .await;

    r8s.stop().await;
    sim.stop().await;
}

#[tokio::test(flavor = "multi_thread")]
async fn should_close_tls_connections_that_send_nothing_after_the_handshake() {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let dir = std::env::temp_dir().join(format!("r8s-tls-idle-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = new_ca("r8s test CA");
    let server = leaf(&ca, "r8s", &[], true);
    let (cert_file, key_file) = (dir.join("tls.crt"), dir.join("tls.key"));
    std::fs::write(&cert_file, &server.0).unwrap();
    std::fs::write(&key_file, &server.1).unwrap();
    let sim = start_sim(sim_config()).await;
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.tls.cert_file = Some(cert_file);
    config.tls.key_file = Some(key_file);
    config.server.header_read_timeout_seconds = 2;
    let r8s = start_r8s_config(config).await;
    // Clients that complete the handshake (HTTP/1.1 and HTTP/2) and then
    // send nothing at all.
    let t0 = Instant::now();
    let mut idle = Vec::new();
    for alpn in [&[&b"http/1.1"[..]][..], &[&b"h2"[..]][..]] {
        idle.push(connect(r8s.addr, &ca.der, alpn).await.0);
    }
    // Another client is served meanwhile.
    let (mut busy, _) = connect(r8s.addr, &ca.der, &[b"http/1.1"]).await;
    busy.write_all(b"GET /version HTTP/1.1\r\nHost: localhost\r\n\r\n")
        .await
        .unwrap();
    let mut head = [0u8; 12];
    busy.read_exact(&mut head).await.unwrap();
    assert_eq!(&head, b"HTTP/1.1 200");
    for (i, mut c) in idle.into_iter().enumerate() {
        let mut buf = [0u8; 64];
        let read = tokio::time::timeout(HANG, c.read(&mut buf))
            .await
            .unwrap_or_else(|_| panic!("idle TLS client {i} still open after {:?}", t0.elapsed()));
        assert!(
            matches!(read, Ok(0) | Err(_)),
            "idle TLS client {i} got {read:?}"
        );
    }
    let closed = t0.elapsed();
    // Not before the timeout (a lower bound no busy machine can break);
    // that it closes at all is the hang guard's.
    assert!(
        closed >= Duration::from_millis(1500),
        "closed before the 2 s header timeout: {closed:?}"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(sample(&m, r#"r8s_connections_closed_total{reason="no_request"}"#) >= 2.0);
    r8s.stop().await;
    sim.stop().await;
}

/// A kubelet on the node-client tier (deploy/control-plane): a client certificate
/// for `system:node:n1` (group `system:nodes`) from the cluster's CA lists
/// and watches its pods and gets its node from the cache, authorized as the
/// node authorizer decides (another node's pods are refused), and its writes
/// reach the upstream as `system:node:n1`, impersonated by r8s.
#[tokio::test(flavor = "multi_thread")]
async fn should_serve_a_kubelets_certificate_from_cache_and_write_as_the_node() {
    use futures_util::StreamExt;
    use k8s_openapi::api::core::v1::{Node, Pod};
    use kube::api::{GetParams, ListParams, Patch, PatchParams, WatchEvent, WatchParams};

    let dir = std::env::temp_dir().join(format!("r8s-auth-node-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let ca = new_ca("cluster CA");
    let server = leaf(&ca, "r8s", &[], true);
    let kubelet = leaf(&ca, "system:node:n1", &["system:nodes"], false);
    let (cert_file, key_file, ca_file) =
        (dir.join("tls.crt"), dir.join("tls.key"), dir.join("ca.crt"));
    std::fs::write(&cert_file, &server.0).unwrap();
    std::fs::write(&key_file, &server.1).unwrap();
    std::fs::write(&ca_file, &ca.pem).unwrap();
    let files = AuthFiles::write("tls", USERS, None);
    let sim = start_sim(files.sim(sim_config())).await;
    // The node and a pod bound to it, made by an admin.
    let admin = [
        ("authorization", "Bearer admin-token"),
        ("content-type", "application/json"),
    ];
    for (path, body) in [
        (
            "/api/v1/nodes",
            r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"n1"}}"#,
        ),
        (
            "/api/v1/namespaces/ns-0/pods",
            r#"{"apiVersion":"v1","kind":"Pod","metadata":{"name":"on-n1"},"spec":{"nodeName":"n1","containers":[{"name":"c","image":"registry.k8s.io/pause:3.10"}]}}"#,
        ),
    ] {
        let r = send("POST", &format!("{}{path}", sim.url()), &admin, Some(body)).await;
        assert_eq!(r.status, 201, "{path}: {}", r.text());
    }
    let mut config = Config::default();
    config.upstream.servers = vec![sim.url()];
    config.upstream.token_file = Some(files.own_token.clone());
    config.cache.resources = vec!["pods".into(), "v1/nodes".into()];
    config.auth.mode = Some(AuthMode::Delegated);
    config.tls.cert_file = Some(cert_file);
    config.tls.key_file = Some(key_file);
    config.tls.client_ca_file = Some(ca_file);
    let r8s = start_r8s_config(config).await;
    let url = format!("https://127.0.0.1:{}", r8s.addr.port());
    let kc = kubeconfig(&dir, &url, &ca.pem, &[("n1", &kubelet)]);
    let kube_cfg = kube::Config::from_custom_kubeconfig(
        kube::config::Kubeconfig::read_from(&kc).unwrap(),
        &kube::config::KubeConfigOptions {
            context: Some("n1".into()),
            ..Default::default()
        },
    )
    .await
    .unwrap();
    let client = kube::Client::try_from(kube_cfg).unwrap();
    let pods: kube::Api<Pod> = kube::Api::all(client.clone());
    let nodes: kube::Api<Node> = kube::Api::all(client);
    let upstream_reads = || {
        (
            sim.sim.count("list", "pods"),
            sim.sim.count("watch", "pods"),
            sim.sim.count("get", "nodes"),
        )
    };
    let before = upstream_reads();

    // The kubelet's own pods and node, from the cache.
    let mine = pods
        .list(&ListParams::default().fields("spec.nodeName=n1").match_any())
        .await
        .unwrap();
    let names: Vec<_> = mine
        .items
        .iter()
        .map(|p| p.metadata.name.clone().unwrap())
        .collect();
    assert_eq!(names, ["on-n1"]);
    let node = nodes.get_with("n1", &GetParams::any()).await.unwrap();
    assert_eq!(node.metadata.name.as_deref(), Some("n1"));
    let rv = mine.metadata.resource_version.clone().unwrap();
    let mut watch = pods
        .watch(
            &WatchParams::default().fields("spec.nodeName=n1").timeout(5),
            "0",
        )
        .await
        .unwrap()
        .boxed();
    let first = tokio::time::timeout(HANG, watch.next())
        .await
        .expect("an event from the cached watch")
        .unwrap()
        .unwrap();
    let WatchEvent::Added(p) = first else {
        panic!("expected ADDED, got {first:?}");
    };
    assert_eq!(p.metadata.name.as_deref(), Some("on-n1"));
    assert_eq!(
        upstream_reads(),
        before,
        "a node's reads reached the upstream"
    );
    assert!(!rv.is_empty());

    // Another node's pods: refused, as the node authorizer refuses them.
    let err = pods
        .list(&ListParams::default().fields("spec.nodeName=n2").match_any())
        .await
        .unwrap_err();
    let kube::Error::Api(status) = err else {
        panic!("{err:?}");
    };
    assert_eq!(status.code, 403, "{status:?}");
    assert!(status.message.contains("system:node:n1"), "{status:?}");

    // A write (its node's status) reaches the upstream as the node.
    let patch = serde_json::json!({"status": {"conditions": [
        {"type": "Ready", "status": "True", "reason": "KubeletReady", "message": "kubelet is posting ready status"}
    ]}});
    nodes
        .patch_status("n1", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap();
    let (by, as_user) = sim.sim.impersonations().last().cloned().unwrap();
    assert_eq!(by, "r8s");
    assert_eq!(as_user.name, "system:node:n1");
    assert_eq!(as_user.groups, ["system:nodes", "system:authenticated"]);
    let stored = send(
        "GET",
        &format!("{}/api/v1/nodes/n1", sim.url()),
        &admin,
        None,
    )
    .await
    .json();
    assert_eq!(stored["status"]["conditions"][0]["reason"], "KubeletReady");
    // ... and is decided as the node: not another node's status.
    let other = nodes
        .patch_status("node-00", &PatchParams::default(), &Patch::Merge(&patch))
        .await
        .unwrap_err();
    assert!(
        matches!(other, kube::Error::Api(ref s) if s.code == 403),
        "{other:?}"
    );
    r8s.stop().await;
    sim.stop().await;
}
