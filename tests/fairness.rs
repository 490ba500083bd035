//! Fair under load (issue 76, item 2, its first acceptance point): one
//! user holding as many slow LISTs of every pod as r8s has list slots takes
//! only their priority level's share; a node's, the controller-manager's, a
//! service account's and a `system:masters` user's full LISTs are all
//! answered meanwhile, and only the slow user's lists past its share are
//! refused with the apiserver's 429. Each level's share is
//! `ceil(read.max_inflight_lists × its shares ÷ every level's)`: the sim
//! serves no FlowSchemas, so r8s classifies by kube-apiserver's own
//! (global-default 20 of 245 shares, workload-high 40, workload-low 100,
//! system 30, exempt none).

use crate::common::auth::AuthFiles;
use crate::common::*;
use crate::overload::stalled_list_as;

const USERS: &str = "alice-token,alice,uid-alice\n\
kcm-token,system:kube-controller-manager,uid-kcm\n\
app-token,system:serviceaccount:default:app,uid-app,\"system:serviceaccounts,system:serviceaccounts:default\"\n\
node-token,system:node:node-01,uid-node,\"system:nodes\"\n";

/// `GET path` at `base` with a bearer token.
async fn get_as(base: &str, path: &str, token: &str) -> Resp {
    let auth = format!("Bearer {token}");
    send(
        "GET",
        &format!("{base}{path}"),
        &[("authorization", auth.as_str())],
        None,
    )
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn should_give_a_slow_user_only_its_levels_share_of_large_lists() {
    let files = AuthFiles::write("fairness", USERS, None);
    let mut sc = files.sim(sim_config());
    sc.pods = 5000;
    sc.nodes = 4;
    let sim = start_sim(sc).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| {
            files.delegate(c);
            c.cache.encodings = vec!["json".into()];
            c.read.max_inflight_lists = 8;
        })
        .start()
        .await;
    let base = r8s.url();
    let all = "/api/v1/pods?resourceVersion=0";
    // Alice holds one large list unread: her level's one slot of eight.
    let held = stalled_list_as(r8s.addr, all, Some("alice-token")).await;
    // Past it she is refused, as many times as she asks; before priority
    // levels she took all eight.
    for _ in 0..7 {
        let r = get_as(&base, all, "alice-token").await;
        assert_eq!(r.status, 429, "{}", r.text());
        assert_eq!(r.headers["retry-after"], "1");
    }
    // Seen as the apiserver's priority and fairness shows it.
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    let level = |series: &str, more: &str| {
        sample(
            &m,
            &format!("{series}{{priority_level=\"global-default\"{more}}}"),
        )
    };
    assert_eq!(level("r8s_flowcontrol_nominal_seats", ""), 1.0);
    assert_eq!(level("r8s_flowcontrol_current_executing_seats", ""), 1.0);
    assert_eq!(
        level(
            "r8s_flowcontrol_rejected_requests_total",
            ",flow_schema=\"global-default\",reason=\"concurrency-limit\""
        ),
        7.0
    );
    // Everyone else's full lists are answered meanwhile, from the cache.
    for token in ["kcm-token", "app-token", "admin-token"] {
        let r = get_as(&base, all, token).await;
        assert_eq!(r.status, 200, "{token}: {}", r.text());
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        assert_eq!(r.json()["items"].as_array().unwrap().len(), 5000);
    }
    let node = get_as(
        &base,
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-01",
        "node-token",
    )
    .await;
    assert_eq!(
        (node.status.as_u16(), &node.headers["x-r8s-cache"]),
        (200, &"hit".parse().unwrap())
    );
    // A level's share is its own: the controller-manager's two
    // (workload-high) held, its third is refused, and alice's level is
    // still full.
    let kcm: Vec<_> = held_lists(r8s.addr, all, "kcm-token", 2).await;
    let r = get_as(&base, all, "kcm-token").await;
    assert_eq!(r.status, 429, "{}", r.text());
    assert_eq!(get_as(&base, all, "alice-token").await.status, 429);
    // The exempt level is never refused.
    assert_eq!(get_as(&base, all, "admin-token").await.status, 200);
    // Given back when the slow client goes.
    drop((held, kcm));
    eventually("alice's slot given back", HANG, || async {
        (get_as(&base, all, "alice-token").await.status == 200).then_some(())
    })
    .await;
    r8s.stop().await;
    sim.stop().await;
}

/// `n` large lists as `token`, each admitted and held unread.
async fn held_lists(
    addr: std::net::SocketAddr,
    path: &str,
    token: &str,
    n: usize,
) -> Vec<tokio::net::TcpStream> {
    let mut held = Vec::new();
    for _ in 0..n {
        held.push(stalled_list_as(addr, path, Some(token)).await);
    }
    held
}
