//! Graceful drain: when r8s shuts down with 1,000 watches open, every client
//! gets a final BOOKMARK before its stream closes, and kube-rs watchers
//! resume from it against another r8s without relisting. (Its own binary: it
//! reads the process-wide `r8s_watchers` gauge.)
//!
//! The clients reach r8s through a TCP forwarder in the test (as through a
//! Kubernetes Service): new connections go to r8s A until it is told to shut
//! down, then to r8s B. The forwarder reads what passes: the last watch event
//! on each of A's connections, and every request that reaches B.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use crate::common::*;
use futures_util::StreamExt;
use k8s_openapi::api::core::v1::Pod;
use kube::runtime::{WatchStreamExt, watcher};
use r8s_sim::fault::{Forwarder, Observe, Observer};

const WATCHERS: usize = 1_000;

/// What the forwarder saw.
#[derive(Default)]
struct Seen {
    /// Connections to A that carried watch events and that A closed.
    a_watches_closed: AtomicUsize,
    /// ... whose last event was a BOOKMARK.
    a_closed_after_bookmark: AtomicUsize,
    /// Watch requests that reached B.
    b_watches: AtomicUsize,
    /// Other requests that reached B (a relist would be one).
    b_other: AtomicUsize,
}

/// Splits a byte stream into lines, skipping over long non-event lines (list
/// bodies) without holding them.
#[derive(Default)]
struct Lines {
    pending: Vec<u8>,
    skipping: bool,
}

impl Lines {
    fn feed(&mut self, data: &[u8], mut each: impl FnMut(&[u8])) {
        let mut rest = data;
        while let Some(nl) = rest.iter().position(|b| *b == b'\n') {
            if !self.skipping {
                self.pending.extend_from_slice(&rest[..nl]);
                each(&self.pending);
            }
            self.pending.clear();
            self.skipping = false;
            rest = &rest[nl + 1..];
        }
        if !self.skipping {
            self.pending.extend_from_slice(rest);
            if self.pending.len() > 64 * 1024 {
                self.pending.clear();
                self.skipping = true;
            }
        }
    }
}

/// What the forwarder reads of one connection: at B, every request line;
/// at A, whether the last watch event before A closed it was a BOOKMARK.
struct Reading {
    at_b: bool,
    seen: Arc<Seen>,
    requests: Lines,
    answers: Lines,
    last_was_bookmark: Option<bool>,
}

impl Observer for Reading {
    fn to_server(&mut self, bytes: &[u8]) {
        if !self.at_b {
            return;
        }
        let seen = &self.seen;
        self.requests.feed(bytes, |l| {
            if l.starts_with(b"GET ") || l.starts_with(b"POST ") {
                let watch = String::from_utf8_lossy(l).contains("watch=");
                let c = if watch {
                    &seen.b_watches
                } else {
                    &seen.b_other
                };
                c.fetch_add(1, Ordering::Relaxed);
            }
        });
    }

    fn to_client(&mut self, bytes: &[u8]) {
        let last = &mut self.last_was_bookmark;
        self.answers.feed(bytes, |l| {
            if l.starts_with(b"{\"type\":\"") {
                *last = Some(l.starts_with(b"{\"type\":\"BOOKMARK\""));
            }
        });
    }

    fn server_closed(&mut self) {
        // A closed a connection that carried a watch.
        if let (false, Some(bookmark)) = (self.at_b, self.last_was_bookmark) {
            self.seen.a_watches_closed.fetch_add(1, Ordering::Relaxed);
            if bookmark {
                self.seen
                    .a_closed_after_bookmark
                    .fetch_add(1, Ordering::Relaxed);
            }
        }
    }
}

/// One kube-rs watcher's view.
#[derive(Default)]
struct View {
    /// Lists done (`InitDone` events): 1 unless it relisted.
    lists: usize,
    /// `namespace/name` → resourceVersion.
    state: BTreeMap<String, u64>,
    /// Errors the watcher reported (it retries them with backoff).
    errors: usize,
}

fn key_rv(p: &Pod) -> (String, u64) {
    let m = &p.metadata;
    (
        format!(
            "{}/{}",
            m.namespace.clone().unwrap_or_default(),
            m.name.clone().unwrap_or_default()
        ),
        m.resource_version
            .as_deref()
            .unwrap_or("0")
            .parse()
            .unwrap(),
    )
}

async fn r8s_caching_pods(sim: &str) -> R8s {
    r8s_in_front_of(sim)
        .caching(&["pods"])
        .with(|c| c.shutdown.watch_drain_seconds = 3.0)
        .start()
        .await
}

#[tokio::test(flavor = "multi_thread")]
async fn should_drain_watchers_with_a_final_bookmark_and_let_kube_rs_resume_elsewhere() {
    let mut cfg = sim_config();
    // Few pods: a thousand kube-rs watchers each decode every one of them
    // into a typed Pod when they list (a debug build's cost), and what is
    // drained is the watches, not the lists.
    cfg.pods = 25;
    // A write every 200 ms: a thousand debug-built watchers decode each
    // one; at 20 a second they fell 20 s behind, the test's time, not r8s's.
    cfg.churn = 5.0;
    cfg.history = 100_000;
    let sim = start_sim(cfg).await;
    let a = r8s_caching_pods(&sim.url()).await;
    let b = r8s_caching_pods(&sim.url()).await;
    let (a_addr, b_addr) = (a.addr, b.addr);

    let seen = Arc::new(Seen::default());
    let reading: Observe = {
        let seen = seen.clone();
        Arc::new(move |to: SocketAddr| {
            Box::new(Reading {
                at_b: to != a_addr,
                seen: seen.clone(),
                requests: Lines::default(),
                answers: Lines::default(),
                last_was_bookmark: None,
            }) as Box<dyn Observer>
        })
    };
    let fwd = Forwarder::start_observed(a_addr, Some(reading)).await;
    let front = fwd.url();

    // kube-rs watchers with bookmarks, listing at "any" version.
    let client = kube::Client::try_from(kube::Config::new(front.parse().unwrap())).unwrap();
    let views: Vec<Arc<Mutex<View>>> = (0..WATCHERS).map(|_| Arc::default()).collect();
    let mut tasks = Vec::new();
    for view in &views {
        let (api, view) = (kube::Api::<Pod>::all(client.clone()), view.clone());
        tasks.push(tokio::spawn(async move {
            let config = watcher::Config {
                page_size: None,
                ..watcher::Config::default().any_semantic()
            };
            let mut s = std::pin::pin!(watcher(api, config).default_backoff());
            let mut listing = BTreeMap::new();
            while let Some(ev) = s.next().await {
                let mut v = view.lock().unwrap();
                match ev {
                    Err(_) => v.errors += 1,
                    // `Init` comes before each list is asked for, so a list
                    // that failed and was asked again (a thousand connecting
                    // at once to a busy machine) would count twice: a
                    // relist is a second list done.
                    Ok(watcher::Event::Init) => listing.clear(),
                    Ok(watcher::Event::InitApply(p)) => {
                        let (k, rv) = key_rv(&p);
                        listing.insert(k, rv);
                    }
                    Ok(watcher::Event::InitDone) => {
                        v.lists += 1;
                        v.state = std::mem::take(&mut listing);
                    }
                    Ok(watcher::Event::Apply(p)) => {
                        let (k, rv) = key_rv(&p);
                        v.state.insert(k, rv);
                    }
                    Ok(watcher::Event::Delete(p)) => {
                        v.state.remove(&key_rv(&p).0);
                    }
                }
            }
        }));
    }
    let b_admin = b.admin_url();
    let watching = |want: usize| {
        let admin = b_admin.clone();
        async move {
            let guard = HangGuard::new();
            loop {
                // A scrape may wait long: 1,000 kube-rs watchers share this
                // process's runtime with both r8s while they list.
                let m = send("GET", &format!("{admin}/metrics"), &[], None)
                    .await
                    .text();
                // One registry for both r8s in this process: the sum of their watchers.
                if metric(&m, r#"r8s_watchers{resource="v1/pods"}"#).unwrap_or(0.0) >= want as f64 {
                    return;
                }
                guard.check(|| format!("{want} watchers did not open"));
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
    };
    watching(WATCHERS).await;
    tokio::time::sleep(Duration::from_secs(2)).await;

    // SIGTERM for A (what the signal handler fires); new connections go to B.
    fwd.retarget(b_addr);
    let stopping = tokio::spawn(a.stop());
    tokio::time::timeout(HANG, stopping)
        .await
        .expect("A drained and stopped")
        .unwrap();
    watching(WATCHERS).await;
    let guard = HangGuard::new();
    while seen.b_watches.load(Ordering::Relaxed) < WATCHERS {
        guard.check(|| {
            format!(
                "watchers resumed at B: {}",
                seen.b_watches.load(Ordering::Relaxed)
            )
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    // Every watcher follows the churn through B: stop it and compare.
    tokio::time::sleep(Duration::from_secs(3)).await;
    sim.sim.pause_churn(true);
    let rv = sim.sim.store.current_rv();
    let truth = truth_at(&sim.url(), "/api/v1/pods", "", rv).await;
    let guard = HangGuard::new();
    loop {
        let behind = views
            .iter()
            .filter(|v| v.lock().unwrap().state != truth)
            .count();
        if behind == 0 {
            break;
        }
        guard.check(|| {
            format!("{behind} of {WATCHERS} kube-rs watchers do not hold the sim's state at {rv}")
        });
        tokio::time::sleep(Duration::from_millis(200)).await;
    }

    let closed = seen.a_watches_closed.load(Ordering::Relaxed);
    let with_bookmark = seen.a_closed_after_bookmark.load(Ordering::Relaxed);
    assert_eq!(closed, WATCHERS, "A closed every watch it held");
    assert_eq!(
        with_bookmark, WATCHERS,
        "every watch A closed ended with a BOOKMARK"
    );
    // (lists done, errors reported) of each watcher that listed again.
    let relisted: Vec<(usize, usize)> = views
        .iter()
        .map(|v| {
            let v = v.lock().unwrap();
            (v.lists, v.errors)
        })
        .filter(|(n, _)| *n != 1)
        .collect();
    assert!(
        relisted.is_empty(),
        "{} kube-rs watchers listed more than once (lists, errors): {relisted:?}",
        relisted.len()
    );
    assert_eq!(
        seen.b_other.load(Ordering::Relaxed),
        0,
        "no list (or any other request) reached B, only watches"
    );
    let errors: usize = views.iter().map(|v| v.lock().unwrap().errors).sum();
    eprintln!(
        "drain: {closed} watches closed by A after a bookmark, {} watches resumed at B, {errors} client errors retried",
        seen.b_watches.load(Ordering::Relaxed)
    );
    for t in tasks {
        t.abort();
    }
    fwd.stop();
    b.stop().await;
    sim.stop().await;
}
