//! Fair under load (issue 76, item 2): one user holding a slow LIST of
//! every pod takes only their priority level's share of r8s's list slots;
//! their next lists wait their turn in the level's queues while a node's,
//! the controller-manager's, a service account's and a `system:masters`
//! user's full LISTs are answered, and are the ones refused (the
//! apiserver's 429) once their wait is over. Two users of one level
//! listing as fast as they can through one seat take turns. Each level's
//! share is `ceil(read.max_inflight_lists × its shares ÷ every level's)`:
//! r8s classifies by the configuration the sim serves (kube-apiserver
//! v1.21's suggested one: global-default 20 of 205 shares, one of eight
//! slots).

use crate::common::auth::AuthFiles;
use crate::common::*;
use crate::overload::{answer_head, stalled_get_as, stalled_list_as};

const USERS: &str = "alice-token,alice,uid-alice\n\
kcm-token,system:kube-controller-manager,uid-kcm\n\
app-token,system:serviceaccount:default:app,uid-app,\"system:serviceaccounts,system:serviceaccounts:default\"\n\
node-token,system:node:node-01,uid-node,\"system:nodes\"\n";

/// The series labels of alice's FlowSchema after her level's.
const SCHEMA: &str = ",flow_schema=\"global-default\"";

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
    fixture_with(files, pods, 100_000).await
}

/// [`fixture`] with `watches` watch slots.
async fn fixture_with(files: &AuthFiles, pods: usize, watches: usize) -> (r8s_sim::SimHandle, R8s) {
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
            c.watch.max_watchers = watches;
        })
        .start()
        .await;
    (sim, r8s)
}

/// The UID of the sim's FlowSchema or priority level `name`.
async fn served_uid(sim: &r8s_sim::SimHandle, resource: &str, name: &str) -> String {
    let path = format!("/apis/flowcontrol.apiserver.k8s.io/v1/{resource}/{name}");
    let r = get_as(&sim.url(), &path, "admin-token").await;
    assert_eq!(r.status, 200, "{}", r.text());
    r.json()["metadata"]["uid"].as_str().unwrap().to_string()
}

#[tokio::test(flavor = "multi_thread")]
async fn should_give_a_slow_user_only_its_levels_share_of_large_lists() {
    let files = AuthFiles::write("fairness", USERS, None);
    let (sim, r8s) = fixture(&files, 5000).await;
    let base = r8s.url();
    let all = "/api/v1/pods?resourceVersion=0";
    // Classified by the sim's own configuration (read, not r8s's built-in
    // one, which names no UIDs): alice is global-default's.
    let schema = served_uid(&sim, "flowschemas", "global-default").await;
    let level_uid = served_uid(&sim, "prioritylevelconfigurations", "global-default").await;
    let small = get_as(
        &base,
        "/api/v1/namespaces/default/pods?resourceVersion=0",
        "alice-token",
    )
    .await;
    assert_eq!(small.status, 200, "{}", small.text());
    assert_eq!(
        small.headers["x-kubernetes-pf-flowschema-uid"],
        schema.as_str()
    );
    assert_eq!(
        small.headers["x-kubernetes-pf-prioritylevel-uid"],
        level_uid.as_str()
    );
    // Alice opens 40 lists of every pod and reads none: her level's one
    // slot of eight streams the first, the others wait their turn in her
    // level's queues (before priority levels she took all eight slots,
    // and everyone else got 429).
    let held = stalled_list_as(r8s.addr, all, Some("alice-token")).await;
    let mut slow = Vec::new();
    for _ in 1..40 {
        slow.push(stalled_get_as(r8s.addr, all, Some("alice-token")).await);
    }
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let level = |m: &str, series: &str, more: &str| {
        sample(
            m,
            &format!("{series}{{priority_level=\"global-default\"{more}}}"),
        )
    };
    eventually("alice's lists queued", HANG, || async {
        let m = metrics().await;
        (level(&m, "r8s_flowcontrol_current_inqueue_requests", SCHEMA) == 39.0).then_some(())
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
    let nodes = served_uid(&sim, "flowschemas", "system-nodes").await;
    assert_eq!(
        node.headers["x-kubernetes-pf-flowschema-uid"],
        nodes.as_str()
    );
    // Hers past her share are the ones refused: the apiserver's 429 once
    // their wait in the queue is over (fairness::queues::QUEUE_WAIT).
    for c in &slow {
        assert_eq!(&answer_head(c).await, b"HTTP/1.1 429");
    }
    let m = metrics().await;
    let refused = ",flow_schema=\"global-default\",reason=\"time-out\"";
    assert_eq!(
        level(&m, "r8s_flowcontrol_rejected_requests_total", refused),
        39.0
    );
    assert_eq!(
        level(&m, "r8s_flowcontrol_current_inqueue_requests", SCHEMA),
        0.0
    );
    // The exempt level is never refused.
    assert_eq!(get_as(&base, all, "admin-token").await.status, 200);
    // Given back when the slow client goes.
    drop((held, slow));
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

/// Watch slots are lent while the whole has room, and taken back for a
/// level under its share once it is full (the watch taken ends cleanly; one
/// past its level's share is refused at once: it would hold its slot for
/// minutes); and a list or a watch whose selectors make it walk every pod
/// takes a seat before it walks, however little it returns.
#[tokio::test(flavor = "multi_thread")]
async fn should_share_watches_by_level_and_seat_reads_that_walk_every_object() {
    let files = AuthFiles::write("fairness-watch", USERS, None);
    // 16 watch slots: global-default's share ceil(16 × 20 / 205) = 2.
    let (sim, r8s) = fixture_with(&files, 5000, 16).await;
    let base = r8s.url();
    let watch = "/api/v1/pods?watch=1&resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-01";
    let metrics = || async { get(&format!("{}/metrics", r8s.admin_url())).await.text() };
    let level = |m: &str, series: &str, name: &str, more: &str| {
        sample(m, &format!("{series}{{priority_level=\"{name}\"{more}}}"))
    };
    let watches = |m: &str| level(m, "r8s_flowcontrol_current_watches", "global-default", "");
    // The whole has room: alice takes all sixteen.
    let mut open = Vec::new();
    for _ in 0..16 {
        let c = stalled_get_as(r8s.addr, watch, Some("alice-token")).await;
        assert_eq!(&answer_head(&c).await, b"HTTP/1.1 200");
        open.push(c);
    }
    let more = get_as(&base, watch, "alice-token").await;
    assert_eq!(
        more.status,
        429,
        "full, her level past its share: {}",
        more.text()
    );
    let m = metrics().await;
    assert_eq!(watches(&m), 16.0);
    assert_eq!(
        level(&m, "r8s_flowcontrol_nominal_watches", "global-default", ""),
        2.0
    );
    let refused = ",flow_schema=\"global-default\",reason=\"concurrency-limit\"";
    let rejected = "r8s_flowcontrol_rejected_requests_total";
    assert_eq!(level(&m, rejected, "global-default", refused), 1.0);
    // A node's watch and a controller's, their levels under their shares,
    // each take one of hers, which ends.
    for token in ["node-token", "kcm-token"] {
        let c = stalled_get_as(r8s.addr, watch, Some(token)).await;
        assert_eq!(&answer_head(&c).await, b"HTTP/1.1 200", "{token}");
        open.push(c);
    }
    let m = metrics().await;
    assert_eq!(watches(&m), 14.0, "two of hers taken");
    let preempted = "r8s_watch_terminated_total{resource=\"v1/pods\",reason=\"preempted\"}";
    eventually("her two watches ended", HANG, || async {
        (sample(&metrics().await, preempted) == 2.0).then_some(())
    })
    .await;
    drop(open);
    eventually("her watches' slots given back", HANG, || async {
        (watches(&metrics().await) == 0.0).then_some(())
    })
    .await;

    // A large list of hers holds her level's one seat; a list and a watch
    // selecting a few of every pod by label (no index) walk all 5,000:
    // each waits its turn for the seat rather than walk beside it.
    let all = "/api/v1/pods?resourceVersion=0";
    let held = stalled_list_as(r8s.addr, all, Some("alice-token")).await;
    let few = "/api/v1/pods?resourceVersion=0&labelSelector=app%3Dapp-0";
    let list = {
        let base = base.clone();
        tokio::spawn(async move { get_as(&base, few, "alice-token").await })
    };
    let walked = stalled_get_as(r8s.addr, &format!("{few}&watch=1"), Some("alice-token")).await;
    eventually("her walks queued", HANG, || async {
        let m = metrics().await;
        (level(
            &m,
            "r8s_flowcontrol_current_inqueue_requests",
            "global-default",
            SCHEMA,
        ) == 2.0)
            .then_some(())
    })
    .await;
    // A node's list, which its index answers, walks its node's pods only.
    let node = get_as(
        &base,
        "/api/v1/pods?resourceVersion=0&fieldSelector=spec.nodeName%3Dnode-01",
        "node-token",
    )
    .await;
    assert_eq!(node.status, 200);
    drop(held);
    let list = list.await.unwrap();
    assert_eq!(list.status, 200, "{}", list.text());
    let n = list.json()["items"].as_array().unwrap().len();
    assert!(n > 0 && n < 5000, "a few pods: {n}");
    assert_eq!(&answer_head(&walked).await, b"HTTP/1.1 200");
    r8s.stop().await;
    sim.stop().await;
}
