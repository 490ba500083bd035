//! `shardSelector` (KEP-5866) against Kubernetes 1.36 with
//! `ShardedListAndWatch` on: r8s, in front of the kit's apiserver, answers
//! sharded lists, paged lists and watches of a custom resource from its
//! cache with the objects 1.36 selects, and refuses bad selectors with
//! 1.36's messages. Skipped, saying so, without the kit
//! (`KUBE_APISERVER_136_KIT`).

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::Value;

use crate::common::kube136::Kube136;
use crate::common::*;

/// The names a list (or a watch's ADDED events) carries.
fn names(body: &str, watch: bool) -> BTreeSet<String> {
    let items: Vec<Value> = if watch {
        body.lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "ADDED")
            .map(|e| e["object"].clone())
            .collect()
    } else {
        let v: Value = serde_json::from_str(body).unwrap_or_else(|e| panic!("{e}: {body}"));
        v["items"].as_array().cloned().unwrap_or_default()
    };
    crate::common::answers::names(&items).into_iter().collect()
}

fn range(key: &str, start: u128, end: u128) -> String {
    let bound = |v: u128| {
        if v == 1 << 64 {
            "0x10000000000000000".to_string()
        } else {
            format!("0x{v:016x}")
        }
    };
    format!(
        "shardRange(object.metadata.{key}, '{}', '{}')",
        bound(start),
        bound(end)
    )
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_shard_lists_and_watches_as_kube_136_does() {
    let Some(kube) =
        Kube136::start_with("kube136_shard", "--feature-gates=ShardedListAndWatch=true")
    else {
        return;
    };
    let n = 60;
    let widget = |i: usize| {
        let ns = format!("ns-{}", i % 4);
        let w = serde_json::json!({"apiVersion": "example.com/v1", "kind": "Widget",
            "metadata": {"name": format!("w-{i:02}"), "namespace": ns}, "spec": {"size": i}});
        (format!("/apis/example.com/v1/namespaces/{ns}/widgets"), w)
    };
    let widgets: Vec<_> = (0..n).map(widget).collect();
    kube.define_and_create_all(&crate::kube136::definitions()[0], &widgets)
        .await;
    let r8s = kube
        .r8s()
        .with(|c| c.cache.resources = vec!["example.com/v1/widgets".into()])
        .start()
        .await;
    let all = "/apis/example.com/v1/widgets";
    let limit = Duration::from_secs(30);
    let admin = kube.token("ADMIN");
    // r8s has them all.
    let url = format!("{}{all}?resourceVersion=0", r8s.url());
    eventually("r8s caches every widget", HANG, || async {
        let r = send("GET", &url, &[], None).await;
        (r.status == 200 && names(&r.text(), false).len() == n).then_some(())
    })
    .await;
    let q = 1u128 << 62;
    let selectors = [
        range("uid", 0, 2 * q),
        range("uid", 2 * q, 4 * q),
        format!("{} || {}", range("uid", 0, q), range("uid", 3 * q, 4 * q)),
        range("uid", q, 3 * q),
        range("namespace", 0, 2 * q),
        range("namespace", 2 * q, 4 * q),
    ];
    let mut covered = BTreeSet::new();
    for s in &selectors {
        let list = format!("{all}?resourceVersion=0&shardSelector={}", query_escape(s));
        let theirs = kube.send_as(&admin, "GET", &list, &[], None, limit).await;
        assert_eq!(theirs.status, 200, "1.36 {s}: {}", theirs.text());
        let want = names(&theirs.text(), false);
        let ours = send("GET", &format!("{}{list}", r8s.url()), &[], None).await;
        assert_eq!(ours.status, 200, "r8s {s}: {}", ours.text());
        assert_eq!(ours.headers["x-r8s-cache"], "hit", "{s}");
        assert_eq!(names(&ours.text(), false), want, "{s}");
        // 1.36 echoes no shardInfo on a custom resource's list: nor does r8s.
        let meta: Value = serde_json::from_str::<Value>(&ours.text()).unwrap()["metadata"].clone();
        assert!(meta.get("shardInfo").is_none(), "{s}: {meta}");
        covered.extend(want.iter().cloned());
        // Paged through r8s, the same shard.
        let mut paged = BTreeSet::new();
        let mut cont = String::new();
        loop {
            let page = format!(
                "{}{all}?limit=7&shardSelector={}{}",
                r8s.url(),
                query_escape(s),
                if cont.is_empty() {
                    String::new()
                } else {
                    format!("&continue={}", query_escape(&cont))
                }
            );
            let r = send("GET", &page, &[], None).await;
            assert_eq!(r.status, 200, "{s}: {}", r.text());
            paged.extend(names(&r.text(), false));
            let v: Value = serde_json::from_str(&r.text()).unwrap();
            cont = v["metadata"]["continue"].as_str().unwrap_or("").to_string();
            if cont.is_empty() {
                break;
            }
        }
        assert_eq!(paged, want, "{s}: paged");
        // A watch from resourceVersion=0: the shard's objects, ADDED.
        let watch = format!(
            "{all}?watch=1&resourceVersion=0&timeoutSeconds=1&shardSelector={}",
            query_escape(s)
        );
        // (Side by side: each lasts its timeoutSeconds.)
        let ours_url = format!("{}{watch}", r8s.url());
        let (theirs, ours) = tokio::join!(
            kube.send_as(&admin, "GET", &watch, &[], None, limit),
            send("GET", &ours_url, &[], None)
        );
        assert_eq!(ours.headers["x-r8s-cache"], "hit", "{s}: watch");
        assert_eq!(
            names(&ours.text(), true),
            names(&theirs.text(), true),
            "{s}: watch"
        );
        assert_eq!(names(&ours.text(), true), want, "{s}: watch");
    }
    assert_eq!(covered.len(), n, "the halves cover every widget");
    // Refused with 1.36's words (r8s's code is 400: 1.36 answers 500).
    for bad in [
        "   ".to_string(),
        range("uid", 2 * q, q),
        "shardRange(object.metadata.name, '0x00', '0x80')".to_string(),
        format!("{} && {}", range("uid", 0, q), range("uid", q, 2 * q)),
        format!("{} || {}", range("uid", 0, q), range("namespace", q, 2 * q)),
        "shardRange(object.metadata.uid, '0x0', '0x8000000000000000')".to_string(),
        "shardRange(".to_string(),
    ] {
        let list = format!(
            "{all}?resourceVersion=0&shardSelector={}",
            query_escape(&bad)
        );
        let theirs = kube.send_as(&admin, "GET", &list, &[], None, limit).await;
        let ours = send("GET", &format!("{}{list}", r8s.url()), &[], None).await;
        let message =
            |r: &Resp| serde_json::from_str::<Value>(&r.text()).unwrap()["message"].clone();
        assert_eq!(theirs.status, 500, "1.36 {bad}");
        assert_eq!(ours.status, 400, "r8s {bad}");
        assert_eq!(message(&ours), message(&theirs), "{bad}");
    }
}
