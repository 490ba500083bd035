//! A node-local r8s holding its node's own credentials (issue 75, item 3),
//! against kube-apiserver v1.21 (the Node authorizer, NodeRestriction,
//! real RBAC, its audit log): the kubelet's requests, presenting the node's
//! identity, pass as r8s with nothing added and arrive as the node; its
//! reads of its node are served from the cache; a certificate caller of
//! another identity is refused with a 403 that says why (r8s may not
//! impersonate); a token caller passes with its token; and when the
//! node's certificate rotates, r8s presents the new one.

use std::path::{Path, PathBuf};

use crate::common::forge::{CN, Forge, O, Use, utf8};
use crate::common::kube121::Kube121;
use crate::common::kube136::{Identity, delegated_r8s};
use crate::common::*;

const ADMIN: &str = "node-local-admin-token";

/// A certificate for node `name` (`CN=system:node:NAME`, `O=system:nodes`).
fn node_cert(forge: &Forge, file: &str, name: &str) -> Identity {
    forge.issue(
        file,
        &[
            vec![utf8(O, "system:nodes")],
            vec![utf8(CN, &format!("system:node:{name}"))],
        ],
        Use::Client,
    )
}

/// Writes `id`'s certificate and key where r8s reads its own, each whole
/// (written aside, then renamed), as the kubelet swaps its current one.
fn install(id: &Identity, dir: &Path) -> (PathBuf, PathBuf) {
    let (cert, key) = (dir.join("client.crt"), dir.join("client.key"));
    for (from, to) in [(&id.key, &key), (&id.cert, &cert)] {
        let aside = to.with_extension("new");
        std::fs::copy(from, &aside).unwrap();
        std::fs::rename(&aside, to).unwrap();
    }
    (cert, key)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_pass_its_nodes_own_requests_as_itself_and_follow_the_rotation() {
    let tokens = format!("{ADMIN},admin,admin,\"system:masters\"\n");
    let Some(kit) = Kube121::start("node_local", &tokens) else {
        return;
    };
    let (ca_crt, ca_key) = kit.ca();
    let forge = Forge::of_kit(&ca_crt, &ca_key, kit.dir());
    let n7 = node_cert(&forge, "node-07", "node-07");
    let n8 = node_cert(&forge, "node-08", "node-08");
    let own = kit.dir().join("r8s-own");
    std::fs::create_dir_all(&own).unwrap();
    let (cert, key) = install(&n7, &own);
    let kubeconfig = own.join("kubeconfig");
    kit.cert_kubeconfig(&kubeconfig, &cert, &key);
    let r8s = delegated_r8s(kubeconfig, &["pods", "nodes"], None, kit.serving_tls())
        .with(|c| {
            c.node.name = "node-07".into();
            c.auth.impersonate_certificate_clients = false;
            c.upstream.version = "1.21".into();
        })
        .start()
        .await;
    let port = r8s.addr.port();
    let json = [("content-type", "application/json")];
    let node = r#"{"apiVersion":"v1","kind":"Node","metadata":{"name":"node-07"}}"#;

    // The kubelet registers its node through r8s: it arrives as the node
    // itself, nothing impersonated (NodeRestriction lets a node create its
    // own Node only).
    let mark = kit.audit_mark();
    let r = kit
        .send_tls(port, Some(&n7), "POST", "/api/v1/nodes", &json, Some(node))
        .await;
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.headers["x-r8s-cache"], "pass");
    let id = r.headers["audit-id"].to_str().unwrap().to_string();
    let event = kit.audit_event(mark, &id, "the node's registration").await;
    assert_eq!(event["user"]["username"], "system:node:node-07", "{event}");
    assert!(event.get("impersonatedUser").is_none(), "{event}");

    // Its reads of its node and its pods come from the cache.
    eventually("node-07 from the cache", HANG, || async {
        let r = kit
            .send_tls(
                port,
                Some(&n7),
                "GET",
                "/api/v1/nodes/node-07?resourceVersion=0",
                &[],
                None,
            )
            .await;
        (r.status == 200 && r.headers["x-r8s-cache"] == "hit").then_some(())
    })
    .await;
    let pods = "/api/v1/pods?fieldSelector=spec.nodeName%3Dnode-07&resourceVersion=0";
    let r = kit.send_tls(port, Some(&n7), "GET", pods, &[], None).await;
    assert_eq!(
        (r.status.as_u16(), &r.headers["x-r8s-cache"]),
        (200, &"hit".parse().unwrap())
    );

    // Another node's certificate: r8s may not impersonate it, and says so;
    // nothing reaches the apiserver.
    let mark = kit.audit_mark();
    let r = kit
        .send_tls(port, Some(&n8), "GET", "/api/v1/nodes/node-08", &[], None)
        .await;
    assert_eq!(r.status, 403, "{}", r.text());
    let message = r.json()["message"].as_str().unwrap().to_string();
    assert!(
        message.contains("system:node:node-08")
            && message.contains("auth.impersonate_certificate_clients"),
        "{message}"
    );
    let id = r.headers["audit-id"].to_str().unwrap().to_string();
    assert!(kit.audit_events(mark, &id).is_empty(), "sent upstream");

    // A token caller passes with its own token.
    let bearer = format!("Bearer {ADMIN}");
    let r = kit
        .send_tls(
            port,
            None,
            "GET",
            "/api/v1/namespaces/default",
            &[("authorization", &bearer)],
            None,
        )
        .await;
    assert_eq!(r.status, 200, "{}", r.text());

    // The node's certificate rotates to one the apiserver does not trust:
    // r8s presents it (the node's own requests now get the apiserver's
    // 401); then to a new one of the cluster's CA: they pass again.
    let elsewhere = kit.dir().join("stranger");
    std::fs::create_dir_all(&elsewhere).unwrap();
    let stranger = Forge::stranger(&elsewhere);
    install(&node_cert(&stranger, "node-07-bad", "node-07"), &own);
    let passed = |want: u16| {
        let n7 = &n7;
        let kit = &kit;
        move || async move {
            // No version: before 1.31 a consistent GET is not proven, so it passes.
            let r = kit
                .send_tls(port, Some(n7), "GET", "/api/v1/nodes/node-07", &[], None)
                .await;
            (r.status == want).then_some(())
        }
    };
    eventually(
        "r8s presenting the rotated (untrusted) certificate",
        HANG,
        passed(401),
    )
    .await;
    install(&node_cert(&forge, "node-07-new", "node-07"), &own);
    eventually("r8s presenting the new certificate", HANG, passed(200)).await;
    r8s.stop().await;
}

/// `tls.self_signed`: a node-local r8s on loopback makes its own serving
/// certificate once (for 127.0.0.1; its key 0600), a client trusting that
/// certificate as its CA (the kubelet's kubeconfig names it) connects, and
/// a restart keeps it.
#[tokio::test(flavor = "multi_thread")]
async fn should_make_its_own_loopback_certificate_once_and_keep_it() {
    use std::os::unix::fs::PermissionsExt;

    let sim = start_sim(sim_config()).await;
    let dir = std::env::temp_dir().join(format!("r8s-self-signed-{}", fastrand::u64(..)));
    let (cert, key) = (dir.join("tls/tls.crt"), dir.join("tls/tls.key"));
    let start = || {
        let (cert, key) = (cert.clone(), key.clone());
        r8s_in_front_of(sim.url())
            .caching(&["namespaces"])
            .with(move |c| {
                c.tls.cert_file = Some(cert);
                c.tls.key_file = Some(key);
                c.tls.self_signed = true;
            })
            .start()
    };
    let r8s = start().await;
    assert_eq!(
        std::fs::metadata(&key).unwrap().permissions().mode() & 0o777,
        0o600
    );
    let made = std::fs::read(&cert).unwrap();
    let ask = |port: u16| {
        let cert = cert.clone();
        async move {
            crate::common::kube136::Sent {
                ca: &cert,
                port,
                identity: None,
            }
            .send(
                "GET",
                "/api/v1/namespaces?resourceVersion=0",
                &[],
                None,
                HANG,
            )
            .await
        }
    };
    let r = ask(r8s.addr.port()).await;
    assert_eq!(r.status, 200, "{}", r.text());
    assert_eq!(r.headers["x-r8s-cache"], "hit");
    r8s.stop().await;
    let again = start().await;
    assert_eq!(std::fs::read(&cert).unwrap(), made, "kept across restarts");
    assert_eq!(ask(again.addr.port()).await.status, 200);
    again.stop().await;
    sim.stop().await;
    std::fs::remove_dir_all(dir).unwrap();
}
