//! Fair under load (issue 76, item 2): one user holding a slow LIST of
//! every pod takes only their priority level's share of r8s's list slots;
//! their next lists wait their turn in the level's queues while a node's,
//! the controller-manager's, a service account's and a `system:masters`
//! user's full LISTs are answered, and are the ones refused (the
//! apiserver's 429) once their wait is over. Two users of one level
//! listing as fast as they can through one seat take turns. Each level's
//! share is `ceil(read.max_inflight_lists × its shares ÷ every level's)`:
//! the sim serves no FlowSchemas, so r8s classifies by kube-apiserver's own
//! (global-default 20 of 245 shares: one of eight slots).

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

/// The sim with `pods` pods and `files`' users, and r8s in front of it
/// (delegated, JSON only, 8 list slots).
async fn fixture(files: &AuthFiles, pods: usize) -> (r8s_sim::SimHandle, R8s) {
    let mut sc = files.sim(sim_config());
    sc.pods = pods;
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
    (sim, r8s)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_give_a_slow_user_only_its_levels_share_of_large_lists() {
    let files = AuthFiles::write("fairness", USERS, None);
    let (sim, r8s) = fixture(&files, 5000).await;
    let base = r8s.url();
    let all = "/api/v1/pods?resourceVersion=0";
    // Alice holds one large list unread: her level's one slot of eight.
    let held = stalled_list_as(r8s.addr, all, Some("alice-token")).await;
    // Her next lists wait their turn in her level's queues (before priority
    // levels she took all eight slots, and everyone else got 429).
    let queued: Vec<_> = (0..3)
        .map(|_| {
            let base = base.clone();
            tokio::spawn(async move { get_as(&base, all, "alice-token").await })
        })
        .collect();
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let level = |m: &str, series: &str, more: &str| {
        sample(
            m,
            &format!("{series}{{priority_level=\"global-default\"{more}}}"),
        )
    };
    eventually("alice's lists queued", HANG, || async {
        let m = metrics().await;
        (level(&m, "r8s_flowcontrol_current_inqueue_requests", "") == 3.0).then_some(())
    })
    .await;
    let m = metrics().await;
    assert_eq!(level(&m, "r8s_flowcontrol_nominal_seats", ""), 1.0);
    assert_eq!(
        level(&m, "r8s_flowcontrol_current_executing_seats", ""),
        1.0
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
    // Hers past her share are the ones refused: the apiserver's 429 once
    // their wait in the queue is over (fairness::queues::QUEUE_WAIT).
    for q in queued {
        let r = q.await.unwrap();
        assert_eq!(r.status, 429, "{}", r.text());
        assert_eq!(r.headers["retry-after"], "1");
    }
    let m = metrics().await;
    let refused = ",flow_schema=\"global-default\",reason=\"time-out\"";
    assert_eq!(
        level(&m, "r8s_flowcontrol_rejected_requests_total", refused),
        3.0
    );
    assert_eq!(
        level(&m, "r8s_flowcontrol_current_inqueue_requests", ""),
        0.0
    );
    // The exempt level is never refused.
    assert_eq!(get_as(&base, all, "admin-token").await.status, 200);
    // Given back when the slow client goes.
    drop(held);
    let r = get_as(&base, all, "alice-token").await;
    assert_eq!(r.status, 200, "her seat is free again");
    r8s.stop().await;
    sim.stop().await;
}

/// Two users of one level listing every pod as fast as they can, two
/// clients each, through one seat: they take turns, so each gets about half.
#[tokio::test(flavor = "multi_thread")]
async fn should_share_a_level_between_two_users_listing_as_fast_as_they_can() {
    let users = format!("{USERS}bob-token,bob,uid-bob\n");
    let files = AuthFiles::write("fairness-two", &users, None);
    let (sim, r8s) = fixture(&files, 2000).await;
    let base = r8s.url();
    let all = "/api/v1/pods?resourceVersion=0";
    const LISTS: usize = 60;
    let done = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let mut clients = Vec::new();
    for token in ["alice-token", "bob-token"] {
        for _ in 0..2 {
            let (base, done) = (base.clone(), done.clone());
            clients.push(tokio::spawn(async move {
                let mut mine = 0usize;
                while done.load(std::sync::atomic::Ordering::SeqCst) < LISTS {
                    let r = get_as(&base, all, token).await;
                    assert_eq!(r.status, 200, "{token}: {}", r.text());
                    done.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
                    mine += 1;
                }
                (token, mine)
            }));
        }
    }
    let mut by_user = std::collections::BTreeMap::new();
    for c in clients {
        let (token, n) = c.await.unwrap();
        *by_user.entry(token).or_insert(0usize) += n;
    }
    let (a, b) = (by_user["alice-token"], by_user["bob-token"]);
    eprintln!("one seat, {LISTS} lists: alice {a}, bob {b}");
    assert!(
        a.abs_diff(b) * 5 <= a.max(b),
        "within 20 % of each other: alice {a}, bob {b}"
    );
    r8s.stop().await;
    sim.stop().await;
}
