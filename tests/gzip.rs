//! gzip lists from the cache (runs compressed once and spliced into later
//! lists) unzip to exactly the plain list, in every variant a client asks
//! for; and errors negotiate as kube-apiserver's `ErrorNegotiated` does.

mod common;

use std::io::Read;
use std::time::{Duration, Instant};

use common::*;

const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
const METADATA_PB: &str = "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json";
const METADATA_JSON: &str = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1";

async fn fetch(url: &str, accept: &str, gzip: bool) -> Resp {
    let mut headers = vec![("accept", accept)];
    if gzip {
        headers.push(("accept-encoding", "gzip"));
    }
    let r = send("GET", url, &headers, None, Duration::from_secs(20)).await;
    assert_eq!(r.status, 200, "{url} ({accept}): {}", r.text());
    assert_eq!(r.headers["x-r8s-cache"], "hit", "{url} ({accept})");
    r
}

/// The gzip answer to `url` unzips, with a single-member and a
/// multi-member decoder, to the plain answer, byte for byte.
async fn check(url: &str, accept: &str) -> usize {
    let plain = fetch(url, accept, false).await;
    let gz = fetch(url, accept, true).await;
    assert_eq!(gz.headers["content-encoding"], "gzip", "{url} ({accept})");
    assert!(plain.headers.get("content-encoding").is_none());
    assert_eq!(gz.headers["content-type"], plain.headers["content-type"]);
    let mut one = Vec::new();
    flate2::read::GzDecoder::new(&gz.body[..])
        .read_to_end(&mut one)
        .unwrap();
    assert!(
        one == plain.body[..],
        "{url} ({accept}): the gzip list is not the list"
    );
    let mut multi = Vec::new();
    flate2::read::MultiGzDecoder::new(&gz.body[..])
        .read_to_end(&mut multi)
        .unwrap();
    assert!(multi == plain.body[..]);
    assert!(
        gz.body.len() * 8 < plain.body.len(),
        "{url}: {} of {}",
        gz.body.len(),
        plain.body.len()
    );
    gz.body.len()
}

/// Every page of a JSON list, each checked as a list of its own.
async fn check_pages(url: &str, accept: &str, limit: usize) -> usize {
    let mut cont = String::new();
    let mut pages = 0;
    loop {
        let page = format!("{url}&limit={limit}{cont}");
        let plain = fetch(&page, accept, false).await;
        if plain.body.len() >= 128 * 1024 {
            check(&page, accept).await;
            pages += 1;
        }
        let next = plain.json()["metadata"]["continue"]
            .as_str()
            .unwrap_or("")
            .to_string();
        if next.is_empty() {
            return pages;
        }
        cont = format!("&continue={next}");
    }
}

async fn reused(r8s: &R8s) -> f64 {
    let m = get(&format!("{}/metrics", r8s.admin_url())).await.text();
    metric(&m, r#"r8s_list_gzip_items_total{how="reused"}"#)
}

#[tokio::test(flavor = "multi_thread")]
async fn should_gzip_every_list_variant_to_exactly_the_plain_list() {
    let mut cfg = sim_config();
    cfg.pods = 600;
    let sim = start_sim(cfg).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let all = format!("{}/api/v1/pods?resourceVersion=0", r8s.url());
    let ns = format!(
        "{}/api/v1/namespaces/ns-1/pods?resourceVersion=0",
        r8s.url()
    );
    let accepts = ["application/json", PROTOBUF, METADATA_PB, METADATA_JSON];
    for round in 0..3 {
        let before = reused(&r8s).await;
        for accept in accepts {
            check(&all, accept).await;
            check(&ns, accept).await;
            check(&format!("{all}&labelSelector=tier%3Dfrontend"), accept).await;
            check(&format!("{all}&labelSelector=tier%21%3Dbatch"), accept).await;
        }
        assert!(check_pages(&all, "application/json", 150).await >= 3);
        assert!(check_pages(&all, METADATA_JSON, 400).await >= 1);
        // The second round splices what the first compressed.
        if round > 0 {
            assert!(
                reused(&r8s).await > before + 1000.0,
                "round {round}: no run reused"
            );
        }
        // Churn between rounds: changed pods, deleted ones, new ones.
        churn(&sim, round);
        let target = sim.sim.store.current_rv();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let v = fetch(
                &format!("{}/api/v1/pods?resourceVersion=0&limit=1", r8s.url()),
                "application/json",
                false,
            )
            .await;
            let rv: u64 = v.json()["metadata"]["resourceVersion"]
                .as_str()
                .unwrap()
                .parse()
                .unwrap();
            if rv >= target {
                break;
            }
            assert!(Instant::now() < deadline, "r8s did not reach {target}");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
    r8s.stop().await;
    sim.stop().await;
}

/// Changes 40 pods of the sim, deletes 3 and copies 3 under new names.
fn churn(sim: &r8s::sim::SimHandle, round: usize) {
    use r8s::sim::store::{Mutation, key};
    let res = r8s::sim::resources::pods_idx();
    for n in 0..46 {
        let ns = format!("ns-{}", n % 3);
        let keys = sim.sim.store.keys_in_namespace(res, &ns);
        let k = keys[(n * 13 + round * 7) % keys.len()].clone();
        let name = k.rsplit('/').next().unwrap().to_string();
        match n {
            0..40 => touch(sim, &ns, &name, round * 100 + n),
            40..43 => {
                sim.sim
                    .store
                    .mutate(res, &k, |_, _| Ok(Mutation::Delete))
                    .unwrap();
            }
            _ => {
                let mut v = sim.sim.store.get(res, &k).unwrap().value.clone();
                let copy = format!("{name}-copy{round}");
                v["metadata"]["name"] = copy.clone().into();
                v["metadata"]["uid"] = format!("copy-{round}-{n}").into();
                let nk = key(Some(&ns), &copy);
                sim.sim
                    .store
                    .mutate(res, &nk, |_, _| Ok(Mutation::Put(v)))
                    .unwrap();
            }
        }
    }
}

/// The error answers of a cached read, from r8s and from the sim (kube-apiserver's stand-in).
async fn error_answer(base: &str, accept: &str) -> (u16, String, Vec<u8>) {
    let r = send(
        "GET",
        &format!("{base}/api/v1/namespaces/ns-0/pods/no-such-pod?resourceVersion=0"),
        &[("accept", accept)],
        None,
        Duration::from_secs(10),
    )
    .await;
    let ct = r.headers[http::header::CONTENT_TYPE]
        .to_str()
        .unwrap()
        .to_string();
    (r.status.as_u16(), ct, r.body.to_vec())
}

#[tokio::test(flavor = "multi_thread")]
async fn should_negotiate_errors_as_the_apiserver_does() {
    let sim = start_sim(sim_config()).await;
    let r8s = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    let metadata =
        "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1";
    let cases = [
        // client-go's metadata client: the protobuf clause asks for a
        // transform, which an error cannot take; JSON is next.
        (
            format!("{metadata},application/json"),
            "application/json",
            false,
        ),
        // Without a JSON fallback: WriteRawJSON's indented JSON.
        (metadata.to_string(), "application/json", true),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io".to_string(),
            "application/json",
            true,
        ),
        (
            "application/json;as=Table;v=v1;g=meta.k8s.io,application/json".to_string(),
            "application/json",
            false,
        ),
        // A plain protobuf client gets a protobuf Status.
        (PROTOBUF.to_string(), PROTOBUF, false),
    ];
    for (accept, content_type, raw) in cases {
        let ours = error_answer(&r8s.url(), &accept).await;
        let theirs = error_answer(&sim.url(), &accept).await;
        assert_eq!(ours.0, 404, "{accept}");
        assert_eq!(ours.1, content_type, "{accept}");
        assert_eq!(ours, theirs, "{accept}: r8s and the apiserver differ");
        if content_type == "application/json" {
            let text = String::from_utf8(ours.2).unwrap();
            assert_eq!(
                text.starts_with("{\n  \"kind\": \"Status\""),
                raw,
                "{accept}: {text}"
            );
            assert_eq!(text.ends_with('\n'), !raw, "{accept}");
            let v: serde_json::Value = serde_json::from_str(&text).unwrap();
            assert_eq!(v["reason"], "NotFound");
        }
    }
    r8s.stop().await;
    sim.stop().await;
}
