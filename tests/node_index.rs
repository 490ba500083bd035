//! Node-scoped reads (a kubelet's or a DaemonSet agent's list of its own
//! node's pods) are served from the pods stores' node index, and reads
//! pinned to a label's values from a `cache.indexes` label index. Under
//! churn, every such read, in JSON and in protobuf, plain, paged, at an
//! exact older version and as a streaming list, equals the upstream's
//! state at the version it says it is at.

use std::collections::BTreeMap;

use crate::common::*;
use r8s::codec::protobuf as pb;

/// `namespace/name` → resourceVersion of a JSON list, and its version.
fn json_items(list: &serde_json::Value) -> (u64, BTreeMap<String, u64>) {
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .parse()
        .unwrap();
    let items = list["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|it| (key_of(it), rv_of(it)))
        .collect();
    (rv, items)
}

/// The same of a protobuf list (`k8s\0` + Unknown{raw: XList{1 ListMeta, 2 items}}),
/// and its continue token.
fn protobuf_items(body: &[u8]) -> (u64, BTreeMap<String, u64>, String) {
    let text = |b: Option<&[u8]>| String::from_utf8_lossy(b.unwrap_or_default()).into_owned();
    let u = pb::unwrap(body).unwrap();
    let (mut rv, mut cont, mut items) = (0, String::new(), BTreeMap::new());
    for f in pb::fields(u.raw) {
        let f = f.unwrap();
        let pb::Value::Bytes(v) = f.value else {
            continue;
        };
        match f.number {
            1 => {
                rv = text(pb::find(v, 2).unwrap()).parse().unwrap();
                cont = text(pb::find(v, 3).unwrap());
            }
            2 => {
                let meta = pb::find(v, 1).unwrap().unwrap();
                let (name, ns) = (
                    text(pb::find(meta, 1).unwrap()),
                    text(pb::find(meta, 3).unwrap()),
                );
                let item_rv = text(pb::find(meta, 6).unwrap()).parse().unwrap();
                items.insert(format!("{ns}/{name}"), item_rv);
            }
            _ => {}
        }
    }
    (rv, items, cont)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_node_scoped_reads_from_the_index_as_the_upstream_answers_them() {
    let mut cfg = sim_config();
    cfg.pods = 600;
    cfg.nodes = 20;
    cfg.churn = 100.0;
    cfg.history = 100_000;
    let sim = start_sim(cfg).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| {
            // Beside the default node index, one on a label the churn changes.
            c.cache.indexes.insert(
                "v1/pods".into(),
                vec!["label:tier".into(), "spec.nodeName".into()],
            );
        })
        .start()
        .await;
    let (base, truth_url) = (r8s.url(), sim.url());
    let pods = "/api/v1/pods";
    let mut checked = 0;
    let reads = [
        "&fieldSelector=spec.nodeName%3Dnode-00",
        "&fieldSelector=spec.nodeName%3Dnode-07",
        "&fieldSelector=spec.nodeName%3Dnode-19",
        // A set of values merged in key order, and one narrowed by a node.
        "&labelSelector=tier%20in%20(cache,batch,cache)",
        "&labelSelector=tier%20in%20(frontend,backend),team!%3Dteam-3&fieldSelector=spec.nodeName%3Dnode-04",
    ];
    for sel in reads {
        let truth = |rv| truth_at(&truth_url, pods, sel, rv);

        // A plain list, JSON and protobuf, each at the version it names.
        let r = get(&format!("{base}{pods}?resourceVersion=0{sel}")).await;
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        let (rv, items) = json_items(&r.json());
        assert!(!items.is_empty(), "{sel} has pods");
        assert_eq!(items, truth(rv).await, "{sel}, JSON, at {rv}");
        let older = rv;
        let r = send(
            "GET",
            &format!("{base}{pods}?resourceVersion=0{sel}"),
            &[("accept", "application/vnd.kubernetes.protobuf")],
            None,
        )
        .await;
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        let (rv, items, _) = protobuf_items(&r.body);
        assert_eq!(items, truth(rv).await, "{sel}, protobuf, at {rv}");

        // Pages of 4, JSON and protobuf: one version, every item once.
        for protobuf in [false, true] {
            let accept = if protobuf {
                "application/vnd.kubernetes.protobuf"
            } else {
                "application/json"
            };
            let (mut all, mut cont, mut at) = (BTreeMap::new(), String::new(), None);
            loop {
                let q = if cont.is_empty() {
                    format!("resourceVersion=0&limit=4{sel}")
                } else {
                    format!("limit=4&continue={cont}{sel}")
                };
                let r = send(
                    "GET",
                    &format!("{base}{pods}?{q}"),
                    &[("accept", accept)],
                    None,
                )
                .await;
                assert_eq!(r.status, 200, "{}", r.text());
                let (rv, items, next) = if protobuf {
                    protobuf_items(&r.body)
                } else {
                    let list = r.json();
                    let (rv, items) = json_items(&list);
                    let next = list["metadata"]["continue"]
                        .as_str()
                        .unwrap_or("")
                        .to_string();
                    (rv, items, next)
                };
                assert!(items.len() <= 4);
                assert!(at.is_none_or(|a| a == rv), "every page of one version");
                at = Some(rv);
                for (k, v) in items {
                    assert!(all.insert(k, v).is_none(), "an item on two pages");
                }
                if next.is_empty() {
                    break;
                }
                cont = next;
            }
            let rv = at.unwrap();
            assert_eq!(
                all,
                truth(rv).await,
                "{sel}, pages (protobuf {protobuf}), at {rv}"
            );
        }

        // Exactly the older version, rebuilt from the watch log.
        let r = get(&format!(
            "{base}{pods}?resourceVersion={older}&resourceVersionMatch=Exact{sel}"
        ))
        .await;
        assert_eq!(r.headers["x-r8s-cache"], "hit", "{}", r.text());
        let (rv, items) = json_items(&r.json());
        assert_eq!(rv, older);
        assert_eq!(items, truth(older).await, "{sel}, Exact at {older}");

        // A streaming list of the node (client-go ≥ 1.35's kubelet start).
        let r = send(
            "GET",
            &format!(
                "{base}{pods}?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1{sel}"
            ),
            &[],
            None,
        )
        .await;
        assert_eq!(r.headers["x-r8s-cache"], "hit");
        let mut replay = Replay::streaming();
        for line in r.text().lines().filter(|l| !l.is_empty()) {
            replay.apply(&serde_json::from_str(line).unwrap(), sel);
            if replay.initial_end {
                break;
            }
        }
        assert!(replay.initial_end, "{sel}: the initial events end");
        assert_eq!(
            replay.state,
            truth(replay.last).await,
            "{sel}, streaming list at {}",
            replay.last
        );
        checked += 1;
    }
    assert_eq!(checked, reads.len());
    r8s.stop().await;
    sim.stop().await;
}
