//! `shardSelector` on built-in resources, from the cache: a list echoes
//! the selector in `ListMeta.shardInfo` (JSON and protobuf) and carries the
//! objects whose uid hashes into the ranges, byte for byte as the sim (1.36
//! with `ShardedListAndWatch` on) answers; streaming lists keep to the
//! shard; a bad selector gets 1.36's message; a sharded watch is counted
//! in `r8s_watch_shards`. (Against 1.36 itself, for custom resources:
//! `kube136_shard`.)

use std::collections::BTreeSet;

use prost::Message;
use serde_json::Value;

use crate::common::wire::ObjectList;
use crate::common::*;
use r8s::api::shard::{ShardSelector, fnv1a};

const LOWER: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x8000000000000000')";
const OUTER: &str = "shardRange(object.metadata.uid, '0x0000000000000000', '0x4000000000000000') || shardRange(object.metadata.uid, '0xc000000000000000', '0x10000000000000000')";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_echo_the_shard_and_keep_to_it_in_json_and_protobuf() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let all: Value = serde_json::from_str(
        &get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
            .await
            .text(),
    )
    .unwrap();
    let uids: Vec<(String, String)> = all["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            let m = &p["metadata"];
            (
                m["name"].as_str().unwrap().into(),
                m["uid"].as_str().unwrap().into(),
            )
        })
        .collect();
    assert!(uids.len() >= 40 && uids.iter().all(|(_, u)| !u.is_empty()));
    for selector in [LOWER, OUTER] {
        let shard = ShardSelector::parse(selector).unwrap();
        let want: BTreeSet<String> = uids
            .iter()
            .filter(|(_, u)| shard.selects(fnv1a(u)))
            .map(|(n, _)| n.clone())
            .collect();
        assert!(!want.is_empty() && want.len() < uids.len(), "{selector}");
        let url = format!(
            "{}/api/v1/pods?resourceVersion=0&shardSelector={}",
            r8s.url(),
            query_escape(selector)
        );
        let r = get(&url).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        let v: Value = serde_json::from_str(&r.text()).unwrap();
        assert_eq!(v["metadata"]["shardInfo"]["selector"], selector);
        let got: BTreeSet<String> = v["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        assert_eq!(got, want, "{selector}: JSON");
        let r = send(
            "GET",
            &url,
            &[("accept", "application/vnd.kubernetes.protobuf")],
            None,
        )
        .await;
        assert_eq!(r.status, 200);
        let unknown = crate::common::wire::Unknown::decode(&r.body[4..]).unwrap();
        let list = ObjectList::decode(unknown.raw.as_deref().unwrap()).unwrap();
        let meta = list.metadata.unwrap();
        assert_eq!(meta.shard_info.unwrap().selector.as_deref(), Some(selector));
        let got: BTreeSet<String> = list
            .items
            .iter()
            .map(|p| p.metadata.as_ref().unwrap().name.clone().unwrap())
            .collect();
        assert_eq!(got, want, "{selector}: protobuf");
        // The sim serves it as 1.36 does with the gate on: the same bytes.
        for accept in ["application/json", "application/vnd.kubernetes.protobuf"] {
            let path = format!(
                "/api/v1/pods?resourceVersion=0&shardSelector={}",
                query_escape(selector)
            );
            let (ours, theirs) =
                from_both(&r8s.url(), &sim.url(), &path, &[("accept", accept)]).await;
            assert_eq!(
                ours.body, theirs.body,
                "{selector}, {accept}: r8s and the sim"
            );
        }
        // A streaming list: the shard's objects, then the bookmark.
        let stream = format!(
            "{}/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=1&shardSelector={}",
            r8s.url(),
            query_escape(selector)
        );
        let r = get(&stream).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{selector}: streaming");
        let added: BTreeSet<String> = r
            .text()
            .lines()
            .map(|l| serde_json::from_str::<Value>(l).unwrap())
            .filter(|e| e["type"] == "ADDED")
            .map(|e| {
                e["object"]["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .to_string()
            })
            .collect();
        assert_eq!(added, want, "{selector}: streaming list");
        // Unsharded, no shardInfo.
        let plain: Value = serde_json::from_str(
            &get(&format!(
                "{}/api/v1/pods?resourceVersion=0&limit=5",
                r8s.url()
            ))
            .await
            .text(),
        )
        .unwrap();
        assert!(plain["metadata"].get("shardInfo").is_none());
    }
    // A bad selector: 1.36's message from both; the sim's code is 1.36's
    // 500, r8s's a 400.
    let bad = format!(
        "/api/v1/pods?shardSelector={}",
        query_escape("shardRange(object.metadata.name, '0x00', '0x80')")
    );
    let ours = get(&format!("{}{bad}", r8s.url())).await;
    let theirs = get(&format!("{}{bad}", sim.url())).await;
    assert_eq!((ours.status.as_u16(), theirs.status.as_u16()), (400, 500));
    assert_eq!(ours.json()["message"], theirs.json()["message"]);
    // A sharded watch is counted while it lasts.
    let shards = || async {
        let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
        metric(&m, r#"r8s_watch_shards{resource="v1/pods"}"#).unwrap_or(0.0)
    };
    let url = format!(
        "{}/api/v1/pods?watch=1&resourceVersion=0&timeoutSeconds=3&shardSelector={}",
        r8s.url(),
        query_escape(LOWER)
    );
    let watching = tokio::spawn(async move { get(&url).await });
    eventually("the sharded watch is counted", HANG, || async {
        (shards().await == 1.0).then_some(())
    })
    .await;
    let events = watching.await.unwrap().text();
    assert!(events.lines().count() > 0);
    eventually("the ended watch is no longer counted", HANG, || async {
        (shards().await == 0.0).then_some(())
    })
    .await;
}
