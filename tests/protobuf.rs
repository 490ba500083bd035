//! Protobuf clients served from the cache: every built-in kind byte for byte,
//! a client-go-like protobuf informer (prost decoding) under churn, and a
//! streaming list ending in the annotated protobuf bookmark.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use crate::common::wire::{Object as Pod, ObjectList as PodList, ObjectMeta, Unknown, WatchEvent};
use crate::common::*;
use base64::Engine;
use bytes::BytesMut;
use prost::Message;
use r8s::codec::protobuf as pb;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf, */*";

/// A body's `runtime.Unknown` (after the `k8s\0` magic).
fn unknown(body: &[u8]) -> Unknown {
    let rest = body.strip_prefix(b"k8s\0").expect("the k8s protobuf magic");
    Unknown::decode(rest).expect("a runtime.Unknown")
}

/// A watch stream's events, decoded as client-go's protobuf watch decoder does.
fn frames(body: &[u8]) -> Vec<(String, Unknown)> {
    let mut buf = BytesMut::from(body);
    let mut out = Vec::new();
    while buf.len() >= 4 {
        let len = u32::from_be_bytes([buf[0], buf[1], buf[2], buf[3]]) as usize;
        assert!(buf.len() >= 4 + len, "a whole frame");
        let frame = buf.split_to(4 + len);
        let ev = WatchEvent::decode(&frame[4..]).expect("a WatchEvent");
        let raw = ev.object.and_then(|o| o.raw).unwrap_or_default();
        out.push((ev.r#type.unwrap_or_default(), unknown(&raw)));
    }
    assert!(buf.is_empty(), "no partial frame at the end");
    out
}

fn key(m: &ObjectMeta) -> String {
    format!(
        "{}/{}",
        m.namespace.as_deref().unwrap_or(""),
        m.name.as_deref().unwrap_or("")
    )
}

/// A GET as client-go's typed clients send it (protobuf first).
async fn pb_get(url: String) -> Resp {
    send("GET", &url, &[("accept", PROTOBUF)], None).await
}

#[tokio::test(flavor = "multi_thread")]
async fn should_serve_every_builtin_kind_in_the_upstreams_protobuf() {
    let sim = start_sim(sim_config()).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["*".into()];
    config.cache.exclude = vec![];
    let r8s = start_r8s_config(config).await;
    let mut kinds = 0;
    for def in r8s_sim::resources::builtins()
        .iter()
        .filter(|d| d.gvr.is_builtin())
    {
        let path = format!(
            "/{}?resourceVersion=0",
            def.gvr.collection_path().trim_start_matches('/')
        );
        let straight = pb_get(format!("{}{path}", sim.url())).await;
        let cached = pb_get(format!("{}{path}", r8s.url())).await;
        assert_eq!(straight.status, 200, "{path}");
        assert_eq!(cached.headers["x-r8s-cache"], "hit", "{path}");
        assert_eq!(
            cached.headers["content-type"], "application/vnd.kubernetes.protobuf",
            "{path}"
        );
        assert!(
            straight.body == cached.body,
            "{path}: the cache's protobuf is the upstream's, byte for byte"
        );
        let u = unknown(&cached.body);
        assert_eq!(
            u.type_meta.unwrap().kind.unwrap(),
            format!("{}List", def.kind)
        );
        let list = PodList::decode(u.raw.unwrap().as_slice()).unwrap();
        let json = get(&format!("{}{path}", sim.url())).await.json();
        let names: Vec<String> = json["items"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| i["metadata"]["name"].as_str().unwrap().to_string())
            .collect();
        let got: Vec<String> = list
            .items
            .iter()
            .map(|p| p.metadata.clone().unwrap().name.unwrap())
            .collect();
        assert_eq!(got, names, "{path}: the same objects as its JSON");
        assert!(!names.is_empty(), "{path}: the sim seeds every kind");
        kinds += 1;
    }
    assert!(kinds >= 9, "every built-in kind the sim serves: {kinds}");
    r8s.stop().await;
    sim.stop().await;
}

/// As the upstream's version ends it: 1.32 and 1.33 with the list's
/// blueprint, 1.34 on without (kubernetes PR 132326).
#[tokio::test(flavor = "multi_thread")]
async fn should_end_a_protobuf_streaming_list_with_the_annotated_bookmark() {
    for minor in [33, 36] {
        end_bookmark_as(minor).await;
    }
}

async fn end_bookmark_as(minor: u16) {
    let mut cfg = sim_config();
    cfg.minor = minor;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let path = "/api/v1/namespaces/ns-1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0&allowWatchBookmarks=true&timeoutSeconds=1";
    let straight = pb_get(format!("{}{path}", sim.url())).await;
    let cached = pb_get(format!("{}{path}", r8s.url())).await;
    assert_eq!(cached.headers["x-r8s-cache"], "hit");
    assert_eq!(
        cached.headers["content-type"],
        "application/vnd.kubernetes.protobuf;stream=watch"
    );
    let (a, b) = (frames(&straight.body), frames(&cached.body));
    let added = b.iter().take_while(|(t, _)| t == "ADDED").count();
    assert!(added > 5, "the namespace's pods first");
    let (t, end) = &b[added];
    assert_eq!(t, "BOOKMARK", "then the bookmark ending the initial events");
    assert_eq!(b.len(), added + 1, "nothing else within the second");
    let raw = end.raw.clone().unwrap();
    let pod = Pod::decode(raw.as_slice()).unwrap();
    let meta = pod.metadata.unwrap();
    assert_eq!(
        meta.annotations
            .get("k8s.io/initial-events-end")
            .map(String::as_str),
        Some("true")
    );
    let blueprint = meta.annotations.get("k8s.io/initial-events-list-blueprint");
    assert_eq!(blueprint.is_some(), minor == 33, "1.{minor}: {blueprint:?}");
    if let Some(b) = blueprint {
        let u = unknown(&base64::engine::general_purpose::STANDARD.decode(b).unwrap());
        assert_eq!(u.type_meta.unwrap().kind.as_deref(), Some("PodList"));
        assert!(
            PodList::decode(u.raw.unwrap().as_slice())
                .unwrap()
                .items
                .is_empty()
        );
    }
    // The type's empty fields, as the upstream's own bookmark has them.
    let (_, sim_end) = a.last().unwrap();
    let (mine, theirs) = (raw, sim_end.raw.clone().unwrap());
    for field in [2, 3] {
        assert_eq!(
            pb::find(&mine, field).unwrap(),
            pb::find(&theirs, field).unwrap(),
            "field {field} of the bookmark: the upstream's empty spec and status"
        );
    }
    assert_eq!(mine.len(), theirs.len());
    r8s.stop().await;
    sim.stop().await;
}

/// What a protobuf informer holds: key → resource version.
type State = BTreeMap<String, String>;

#[tokio::test(flavor = "multi_thread")]
async fn should_keep_a_protobuf_informer_equal_to_the_upstream_under_churn() {
    let mut cfg = sim_config();
    cfg.churn = 200.0;
    cfg.history = 200_000;
    let sim = start_sim(cfg).await;
    let mut config = r8s::config::Config::default();
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = vec!["pods".into()];
    // Upstream watches renewed no sooner than every 5 min (a quarter of the
    // bound), so that the count below is of watches opened, not renewed.
    config.cache.max_staleness_seconds = 1200;
    let r8s = start_r8s_config(config).await;
    // List at resourceVersion=0, then watch from the list's version with
    // bookmarks, resuming from the last version seen, as client-go's reflector.
    let list = pb_get(format!("{}/api/v1/pods?resourceVersion=0", r8s.url())).await;
    assert_eq!(list.headers["x-r8s-cache"], "hit");
    let list = PodList::decode(unknown(&list.body).raw.unwrap().as_slice()).unwrap();
    let mut state: State = list
        .items
        .iter()
        .map(|p| {
            let m = p.metadata.as_ref().unwrap();
            (key(m), m.resource_version.clone().unwrap())
        })
        .collect();
    let mut rv: u64 = list
        .metadata
        .unwrap()
        .resource_version
        .unwrap()
        .parse()
        .unwrap();
    let mut events = 0;
    // 20 s of churn, in watches of 5 s resumed from the last version seen
    // (what is tested is the resumption, not how long it goes on).
    let until = Instant::now() + Duration::from_secs(20);
    while Instant::now() < until {
        let w = send(
            "GET",
            &format!(
                "{}/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion={rv}&timeoutSeconds=5",
                r8s.url()
            ),
            &[("accept", PROTOBUF)],
            None,
        )
        .await;
        assert_eq!(w.headers["x-r8s-cache"], "hit");
        for (t, u) in frames(&w.body) {
            let pod = Pod::decode(u.raw.unwrap().as_slice()).unwrap();
            let m = pod.metadata.unwrap();
            let v = m.resource_version.clone().unwrap();
            let n: u64 = v.parse().unwrap();
            assert!(n >= rv, "versions never go back: {n} after {rv}");
            rv = n;
            match t.as_str() {
                "ADDED" | "MODIFIED" => {
                    state.insert(key(&m), v);
                    events += 1;
                }
                "DELETED" => {
                    state.remove(&key(&m));
                    events += 1;
                }
                "BOOKMARK" => {}
                other => panic!("unexpected {other} event"),
            }
        }
    }
    assert!(events > 600, "the informer saw the churn: {events} events");
    let truth = get(&format!(
        "{}/api/v1/pods?resourceVersion={rv}&resourceVersionMatch=Exact",
        sim.url()
    ))
    .await
    .json();
    let want: State = truth["items"]
        .as_array()
        .unwrap()
        .iter()
        .map(|i| {
            let m = &i["metadata"];
            (
                format!(
                    "{}/{}",
                    m["namespace"].as_str().unwrap(),
                    m["name"].as_str().unwrap()
                ),
                m["resourceVersion"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    assert_eq!(state, want, "the informer's state is the sim's at {rv}");
    assert_eq!(
        sim.sim.count("watch", "pods"),
        2,
        "one upstream watch per encoding (JSON, protobuf), however long the informer runs"
    );
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    assert!(
        m.contains(r#"r8s_cache_requests_total{resource="v1/pods",verb="watch",result="hit"}"#),
        "{m}"
    );
    let protobuf_encodings = m
        .lines()
        .find_map(|l| {
            l.strip_prefix(r#"r8s_watch_encodings_total{encoding="protobuf"}"#)?
                .trim()
                .parse::<f64>()
                .ok()
        })
        .unwrap_or(0.0);
    assert!(
        protobuf_encodings >= events as f64 * 0.9,
        "each upstream event encoded once in protobuf ({protobuf_encodings} for {events} delivered)"
    );
    r8s.stop().await;
    sim.stop().await;
}
