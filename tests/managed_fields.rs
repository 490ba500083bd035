//! `Accept: ...;drop=metadata.managedFields` (KEP-5958) from the cache: a
//! get, a list (whole, by label, paged, gzipped), a watch and a streaming
//! list, in JSON and protobuf, whole and metadata-only, each answered from
//! r8s's cache byte for byte as the sim answers it. The sim drops the field
//! its own way (the parsed object without it, encoded again); r8s cuts it
//! from the bytes it holds. Clients that did not ask still get it.

use std::io::Read;

use bytes::Bytes;
use http_body_util::{BodyExt, Full};

use crate::common::*;
use r8s_sim::SimHandle;

const DROP: &str = ";drop=metadata.managedFields";
const JSON: &str = "application/json";
const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const META: &str = ";as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
const META_LIST: &str = ";as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

/// The same request to r8s (a hit, asserted) and to the sim: both answers.
async fn both(r8s: &R8s, sim: &SimHandle, path: &str, headers: &[(&str, &str)]) -> (Resp, Resp) {
    from_both(&r8s.url(), &sim.url(), path, headers).await
}

fn gunzip(b: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(b)
        .read_to_end(&mut out)
        .unwrap();
    out
}

fn has_managed_fields(body: &[u8]) -> bool {
    body.windows(b"managedFields".len()).any(|w| w == b"managedFields")
        // In protobuf: every seeded pod's first manager's name.
        || body
            .windows(b"kube-controller-manager".len())
            .any(|w| w == b"kube-controller-manager")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_answer_reads_without_managed_fields_as_the_sim_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let all = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .await
        .json();
    let pod = &all["items"][0]["metadata"];
    let (ns, name) = (
        pod["namespace"].as_str().unwrap(),
        pod["name"].as_str().unwrap(),
    );
    assert!(
        pod["managedFields"].is_array(),
        "the sim's pods carry managedFields"
    );
    let one = format!("/api/v1/namespaces/{ns}/pods/{name}?resourceVersion=0");
    let lists = [
        "/api/v1/pods?resourceVersion=0".to_string(),
        format!("/api/v1/namespaces/{ns}/pods?resourceVersion=0"),
        "/api/v1/pods?resourceVersion=0&labelSelector=version%3Dv1".to_string(),
    ];
    for encoding in [JSON, PROTOBUF] {
        for (shape, path) in [("", &one), (META, &one)]
            .into_iter()
            .chain(lists.iter().flat_map(|l| [("", l), (META_LIST, l)]))
        {
            let full = format!("{encoding}{shape}");
            let dropped = format!("{full}{DROP}");
            let (ours, theirs) = both(&r8s, &sim, path, &[("accept", &dropped)]).await;
            assert_eq!(
                ours.body, theirs.body,
                "{path} as {dropped}: r8s and the sim"
            );
            assert_eq!(ours.headers["content-type"], theirs.headers["content-type"]);
            assert!(!has_managed_fields(&ours.body), "{path} as {dropped}");
            // Asked without it, the field is there: the cut is the drop's.
            let (whole, _) = both(&r8s, &sim, path, &[("accept", &full)]).await;
            assert!(has_managed_fields(&whole.body), "{path} as {full}");
            assert!(whole.body.len() > ours.body.len(), "{path} as {full}");
            // Gzipped: the same bytes, compressed (lists are, when large).
            let gz = [("accept", dropped.as_str()), ("accept-encoding", "gzip")];
            let (ours, theirs) = both(&r8s, &sim, path, &gz).await;
            let unzip = |r: &Resp| match r.headers.get("content-encoding") {
                Some(_) => gunzip(&r.body),
                None => r.body.to_vec(),
            };
            assert_eq!(unzip(&ours), unzip(&theirs), "{path} as {dropped}, gzip");
        }
    }
    // Pages (tokens differ between r8s and the sim; the items do not).
    for accept in [format!("{JSON}{DROP}"), format!("{JSON}{META_LIST}{DROP}")] {
        let mut items = Vec::new();
        let mut cont = String::new();
        loop {
            let url = format!("{}/api/v1/pods?limit=7&resourceVersion=0{cont}", r8s.url());
            let page = send("GET", &url, &[("accept", &accept)], None).await;
            assert_eq!(page.headers["x-r8s-cache"], "hit");
            let v = page.json();
            items.extend(v["items"].as_array().unwrap().iter().cloned());
            match v["metadata"]["continue"].as_str() {
                Some(c) if !c.is_empty() => cont = format!("&continue={c}"),
                _ => break,
            }
        }
        let whole = send(
            "GET",
            &format!("{}/api/v1/pods?resourceVersion=0", sim.url()),
            &[("accept", &accept)],
            None,
        )
        .await
        .json();
        assert_eq!(
            items,
            *whole["items"].as_array().unwrap(),
            "pages as {accept}"
        );
    }
    r8s.stop().await;
    sim.stop().await;
}

/// Reads `n` events of a watch: JSON lines, or protobuf frames (their
/// 4-byte length included), as sent.
async fn events(body: &mut hyper::body::Incoming, protobuf: bool, n: usize) -> Vec<Vec<u8>> {
    let mut buf = Vec::new();
    let mut out = Vec::new();
    let read = async {
        while out.len() < n {
            let frame = body.frame().await.expect("the watch ended early").unwrap();
            buf.extend_from_slice(&frame.into_data().unwrap_or_default());
            loop {
                let len = if protobuf {
                    match buf.get(..4) {
                        Some(h) => 4 + u32::from_be_bytes(h.try_into().unwrap()) as usize,
                        None => break,
                    }
                } else {
                    match buf.iter().position(|b| *b == b'\n') {
                        Some(nl) => nl + 1,
                        None => break,
                    }
                };
                if buf.len() < len {
                    break;
                }
                out.push(buf.drain(..len).collect());
            }
        }
    };
    tokio::time::timeout(HANG, read)
        .await
        .expect("events within the hang bound");
    out
}

async fn open(url: &str, accept: &str) -> (hyper::body::Incoming, String) {
    let req = http::Request::get(url)
        .header("accept", accept)
        .body(Full::new(Bytes::new()))
        .unwrap();
    let resp = client().request(req).await.unwrap();
    assert_eq!(resp.status(), 200, "{url} as {accept}");
    let cache = resp
        .headers()
        .get("x-r8s-cache")
        .map(|v| v.to_str().unwrap().to_string())
        .unwrap_or_default();
    (resp.into_body(), cache)
}

/// r8s's list of pods, its version, and its first pod's namespace and name.
async fn first_pod(r8s: &R8s) -> (serde_json::Value, String, String, String) {
    let list = get(&format!("{}/api/v1/pods?resourceVersion=0", r8s.url()))
        .await
        .json();
    let rv = list["metadata"]["resourceVersion"]
        .as_str()
        .unwrap()
        .to_string();
    let pod = &list["items"][0]["metadata"];
    let ns = pod["namespace"].as_str().unwrap().to_string();
    let name = pod["name"].as_str().unwrap().to_string();
    (list, rv, ns, name)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_watch_without_managed_fields_as_the_sim_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let (list, rv, ns, name) = first_pod(&r8s).await;
    let (ns, name) = (ns.as_str(), name.as_str());
    let accepts = [
        format!("{JSON}{DROP}"),
        format!("{PROTOBUF}{DROP}"),
        format!("{JSON}{META}{DROP}"),
        format!("{PROTOBUF}{META}{DROP}"),
        // Watchers that did not ask, beside them, on the same events.
        JSON.to_string(),
        format!("{PROTOBUF}{META}"),
    ];
    let path = format!("/api/v1/pods?watch=1&resourceVersion={rv}");
    let mut watches = Vec::new();
    for accept in &accepts {
        let (ours, cache) = open(&format!("{}{path}", r8s.url()), accept).await;
        assert_eq!(cache, "hit", "{accept}");
        let (theirs, _) = open(&format!("{}{path}", sim.url()), accept).await;
        watches.push((accept, ours, theirs));
    }
    sim.touch(ns, name, 1);
    sim.touch(ns, name, 2);
    for (accept, mut ours, mut theirs) in watches {
        let protobuf = accept.starts_with(PROTOBUF);
        let (a, b) = (
            events(&mut ours, protobuf, 2).await,
            events(&mut theirs, protobuf, 2).await,
        );
        assert_eq!(a, b, "watch as {accept}: r8s and the sim");
        let dropped = accept.ends_with(DROP);
        for e in &a {
            assert_eq!(has_managed_fields(e), !dropped, "watch as {accept}");
        }
    }
    // A streaming list: the initial events, in key order, as the sim's.
    for accept in [format!("{JSON}{DROP}"), format!("{PROTOBUF}{META}{DROP}")] {
        let path = "/api/v1/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0";
        let n = list["items"].as_array().unwrap().len();
        let (mut ours, cache) = open(&format!("{}{path}", r8s.url()), &accept).await;
        assert_eq!(cache, "hit", "streaming as {accept}");
        let (mut theirs, _) = open(&format!("{}{path}", sim.url()), &accept).await;
        let protobuf = accept.starts_with(PROTOBUF);
        let (a, b) = (
            events(&mut ours, protobuf, n).await,
            events(&mut theirs, protobuf, n).await,
        );
        assert_eq!(a, b, "streaming list as {accept}: r8s and the sim");
        assert!(a.iter().all(|e| !has_managed_fields(e)), "{accept}");
    }
    r8s.stop().await;
    sim.stop().await;
}

/// `cache.managed_fields = "drop"`: the cache never stores them, so every
/// answer from it comes without them, asked or not: byte for byte what
/// the sim answers a client that asks for the drop.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn should_keep_nothing_of_managed_fields_when_told_to_drop_them() {
    let sim = start_sim(sim_config()).await;
    let r8s = r8s_in_front_of(sim.url())
        .caching(&["pods"])
        .with(|c| c.cache.managed_fields = r8s::config::ManagedFields::Drop)
        .start()
        .await;
    let (_, rv, ns, name) = first_pod(&r8s).await;
    let (ns, name) = (ns.as_str(), name.as_str());
    let one = format!("/api/v1/namespaces/{ns}/pods/{name}?resourceVersion=0");
    for encoding in [JSON, PROTOBUF] {
        for (shape, path) in [
            ("", one.as_str()),
            (META, one.as_str()),
            ("", "/api/v1/pods?resourceVersion=0"),
            (META_LIST, "/api/v1/pods?resourceVersion=0"),
        ] {
            let plain = format!("{encoding}{shape}");
            let ours = send(
                "GET",
                &format!("{}{path}", r8s.url()),
                &[("accept", &plain)],
                None,
            )
            .await;
            assert_eq!(ours.headers["x-r8s-cache"], "hit", "{path} as {plain}");
            let theirs = send(
                "GET",
                &format!("{}{path}", sim.url()),
                &[("accept", &format!("{plain}{DROP}"))],
                None,
            )
            .await;
            assert_eq!(
                ours.body, theirs.body,
                "{path} as {plain}: r8s and the sim's drop"
            );
        }
    }
    // Events too, and a change's.
    let path = format!("/api/v1/pods?watch=1&resourceVersion={rv}");
    let (mut ours, cache) = open(&format!("{}{path}", r8s.url()), PROTOBUF).await;
    assert_eq!(cache, "hit");
    let (mut theirs, _) = open(
        &format!("{}{path}", sim.url()),
        &format!("{PROTOBUF}{DROP}"),
    )
    .await;
    sim.touch(ns, name, 1);
    assert_eq!(
        events(&mut ours, true, 1).await,
        events(&mut theirs, true, 1).await
    );
    r8s.stop().await;
    sim.stop().await;
}
