//! Proofs in paused time against an upstream in memory
//! ([`crate::upstream::memory`]): how long a proof waits for the upstream
//! (`read.prove_timeout_seconds`, to the millisecond), and how proving
//! pauses after failures in a row (30 s, then doubling), asking nothing
//! of the upstream meanwhile.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use http::Response;
use tokio::time::Instant;

use super::prover::tests::{pods_cache, store};
use super::{ConsistentKind, ProofPolicy, Proofs, Unproven};
use crate::api::media::Encoding;
use crate::body::{self, Body};
use crate::cache::ResourceCache;
use crate::cache::store::Store;
use crate::cache::writer::Writer;
use crate::config::{Prove, UpstreamConfig};
use crate::upstream::Upstream;

const TIMEOUT: Duration = Duration::from_secs(3);

struct Rig {
    proofs: Proofs,
    cache: Arc<ResourceCache>,
    store: Arc<Store>,
    /// The store's writer, held for the test's life as a reflector holds it.
    _writer: Writer,
    /// The requests the upstream was sent.
    log: Arc<Mutex<Vec<String>>>,
}

/// Proofs (forced: `prove`) of a pods store at `rv` against an upstream
/// that answers with `answer`, given each request's path and query.
async fn rig(rv: u64, answer: impl Fn(&str) -> Response<Body> + Send + Sync + 'static) -> Rig {
    let upstream = Upstream::new(&UpstreamConfig {
        servers: vec!["http://127.0.0.1:1".into()],
        ..Default::default()
    })
    .await
    .unwrap();
    let log = Arc::new(Mutex::new(Vec::new()));
    let seen = log.clone();
    upstream.answer_with(Arc::new(move |parts| {
        let pq = parts.uri.path_and_query().unwrap().to_string();
        seen.lock().unwrap().push(pq.clone());
        answer(&pq)
    }));
    let proofs = Proofs::new(
        Arc::new(upstream),
        ProofPolicy {
            streaming_lists: Prove::Prove,
            lists: Prove::Prove,
            gets: Prove::Prove,
            timeout: TIMEOUT,
            get_wait: TIMEOUT,
        },
    );
    let (writer, store) = store(rv, Encoding::Json);
    let cache = Arc::new(pods_cache(store.clone(), None));
    proofs.add(&cache, vec![writer.stamper()]);
    Rig {
        proofs,
        cache,
        store,
        _writer: writer,
        log,
    }
}

impl Rig {
    /// One consistent list's proof: its outcome and how long it took.
    async fn prove(&self) -> (Result<u64, Unproven>, Duration) {
        let began = Instant::now();
        let r = self
            .proofs
            .prove(&self.cache, &self.store, ConsistentKind::List)
            .await;
        let took = began.elapsed();
        // The proof's own tasks settle (they count its failure) before
        // the test goes on; paused time moves only when all are idle.
        tokio::time::sleep(Duration::from_millis(1)).await;
        (r, took)
    }

    fn asked(&self) -> usize {
        self.log.lock().unwrap().len()
    }
}

fn list_at(rv: u64) -> Response<Body> {
    Response::new(body::full(format!(
        r#"{{"kind":"PartialObjectMetadataList","apiVersion":"meta.k8s.io/v1","metadata":{{"resourceVersion":"{rv}"}},"items":[]}}"#
    )))
}

/// A store already at the upstream's version is proven at once.
#[tokio::test(start_paused = true)]
async fn should_prove_at_once_a_store_at_the_upstreams_version() {
    let r = rig(30, |_| list_at(30)).await;
    assert_eq!(r.prove().await, (Ok(30), Duration::ZERO));
    assert_eq!(*r.log.lock().unwrap(), ["/api/v1/pods?limit=1"]);
}

/// A store behind: the probe's bookmark proves it, and it is stamped.
#[tokio::test(start_paused = true)]
async fn should_stamp_a_store_behind_once_a_probe_proves_it() {
    let r = rig(20, |pq| {
        if pq.contains("watch=1") {
            Response::new(body::full(
                "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"40\"}}}\n",
            ))
        } else {
            list_at(30)
        }
    })
    .await;
    assert_eq!(r.prove().await, (Ok(30), Duration::ZERO));
    assert_eq!(r.store.current().rv, 40, "stamped at the bookmark");
    let log = r.log.lock().unwrap();
    assert!(
        log[1].starts_with("/api/v1/pods?watch=1&allowWatchBookmarks=true&resourceVersion=20&"),
        "{log:?}"
    );
}

/// An upstream that never finishes its answer: each proof gives up at
/// exactly `read.prove_timeout_seconds`; after two in a row, consistent
/// reads pass at once for 30 s, asking nothing; the next failure pauses
/// them for 60 s.
#[tokio::test(start_paused = true)]
async fn should_give_up_at_the_timeout_and_pause_after_failures_in_a_row() {
    let held = Arc::new(Mutex::new(Vec::new()));
    let keep = held.clone();
    let r = rig(20, move |_| {
        let (tx, body) = body::channel(1);
        keep.lock().unwrap().push(tx);
        Response::new(body)
    })
    .await;
    let failed = (Err(Unproven::Failed), TIMEOUT);
    let at_once = (Err(Unproven::Failed), Duration::ZERO);
    assert_eq!(r.prove().await, failed);
    assert_eq!(r.prove().await, failed);
    assert_eq!(r.asked(), 2);

    // Paused: 30 s from the second failure.
    assert_eq!(r.prove().await, at_once);
    tokio::time::sleep(Duration::from_secs(29)).await;
    assert_eq!(r.prove().await, at_once);
    assert_eq!(r.asked(), 2, "nothing asked while paused");
    tokio::time::sleep(Duration::from_secs(1)).await;

    // Over: asked again, failed again, paused for twice as long.
    assert_eq!(r.prove().await, failed);
    assert_eq!(r.asked(), 3);
    tokio::time::sleep(Duration::from_secs(59)).await;
    assert_eq!(r.prove().await, at_once);
    tokio::time::sleep(Duration::from_secs(1)).await;
    assert_eq!(r.prove().await, failed);
    assert_eq!(r.asked(), 4);
}
