//! The built-in upstream: an in-memory stand-in for kube-apiserver.
//!
//! Faithful to kube-apiserver wherever it implements something (status
//! codes, `Status` bodies, watch framing, resource version semantics), so
//! that r8s can be tested against it, demoed and benchmarked without a
//! cluster. A crate of its own (`r8s-sim`), beside r8s, that uses r8s's
//! library only through its public API: the tests and benchmarks start it to
//! run r8s against it, and the binary (`cmd/`, `r8s-cmd`) depends on it for
//! `r8s sim` and `r8s demo`, only with its default feature `sim`. The
//! library, and so the product, never sees it (`tests/structure.rs`).
//!
//! - [`state`]: the running sim's state, configuration and request shape.
//! - [`route`]: each request to its handler.
//! - [`store`]: etcd-like multi-version storage with a compaction window.
//! - [`resources`]: the served types and discovery documents; [`catalog`]:
//!   the types served now (CRDs' versions come and go, [`crd`]), and the
//!   aggregated discovery document (`APIGroupDiscoveryList`) for clients
//!   that ask for it, as kubectl and client-go do.
//! - [`read`]: get and list (resource version semantics, paging, selectors, tables).
//! - [`watch`]: watch streams (initial events, bookmarks, timeouts).
//! - [`mod@write`]: create, update, patch, delete, `status`.
//! - [`auth`]: tokens file, a small authorizer, TokenReview / SubjectAccessReview.
//! - [`exec`]: `pods/log` and the WebSocket `pods/exec`.
//! - [`protobuf`]: protobuf answers, and decoding the protobuf bodies client-go writes.
//! - [`schema`]: the protobuf layouts of the served kinds.
//! - [`seed`]: realistic sample objects and background churn.
//! - [`demo`]: `r8s demo`, the sim with r8s in front, in one process.
//! - [`cli`]: the flags of `r8s sim` and `r8s demo`.
//! - [`fault`]: a forwarder that breaks the network between r8s and its
//!   upstream on command; [`fuzz`]: fuzz targets seeded with the sim's
//!   answers. The tests' and the benchmarks' tools around the sim.

#![warn(missing_docs)]

pub mod auth;
pub mod catalog;
pub mod cli;
pub mod crd;
pub mod demo;
pub mod exec;
pub mod fault;
pub mod fuzz;
pub mod protobuf;
pub mod read;
pub mod resources;
pub mod route;
pub mod schema;
pub mod seed;
pub mod state;
pub mod store;
pub mod table;
pub mod watch;
pub mod write;

use std::net::SocketAddr;
use std::sync::Arc;
use std::time::Duration;

use tokio::net::TcpListener;
use tokio::task::JoinHandle;

use r8s::shutdown::{self, Trigger};

pub use state::{Generation, Req, Sim, SimConfig};

/// A started sim: its address, state, and how to stop it.
pub struct SimHandle {
    /// Where it listens.
    pub addr: SocketAddr,
    /// Its state (request counts, store).
    pub sim: Arc<Sim>,
    trigger: Trigger,
    task: JoinHandle<()>,
}

impl SimHandle {
    /// Writes pod `ns/name` again with the annotation `r8s.dev/touch: n`:
    /// a change of one object, for what must see one (a watch's events, a
    /// version to move past). Panics if the pod does not exist.
    pub fn touch(&self, ns: &str, name: &str, n: usize) {
        self.update_pod("touch", ns, name, |pod| {
            pod["metadata"]["annotations"]["r8s.dev/touch"] = n.to_string().into();
        });
    }

    /// Binds pod `ns/name` to `node` (`spec.nodeName`), as the scheduler's
    /// binding does: a pod entering a node's field selector. Panics if the
    /// pod does not exist.
    pub fn bind(&self, ns: &str, name: &str, node: &str) {
        self.update_pod("bind", ns, name, |pod| {
            pod["spec"]["nodeName"] = node.into()
        });
    }

    /// Pod `ns/name` changed by `change` and written (a new version);
    /// panics, naming `what`, if it does not exist or is not written.
    fn update_pod(
        &self,
        what: &str,
        ns: &str,
        name: &str,
        change: impl FnOnce(&mut serde_json::Value),
    ) {
        let pods = resources::pods_idx();
        let key = store::key(Some(ns), name);
        let mut pod = self
            .sim
            .store
            .get(pods, &key)
            .unwrap_or_else(|| panic!("{what}: no pod {ns}/{name}"))
            .value();
        change(&mut pod);
        self.sim
            .store
            .mutate(pods, &key, |_, _| Ok(store::Mutation::Put(pod)))
            .unwrap_or_else(|e| panic!("{what}: {ns}/{name} not written: {e:?}"));
    }

    /// `http://addr`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    /// Stops serving and waits for the listener to close.
    pub async fn stop(self) {
        self.trigger.fire();
        let _ = self.task.await;
    }
}

/// Seeds a sim and serves it on `listener` until stopped.
pub async fn start(config: SimConfig, listener: TcpListener) -> std::io::Result<SimHandle> {
    let addr = listener.local_addr()?;
    let (trigger, signal) = shutdown::channel();
    let tokens = match &config.tokens {
        Some(p) => Some(auth::Tokens::load(p, config.policy.as_deref())?),
        None => None,
    };
    let sim = Arc::new(Sim::new(config.clone(), tokens, signal.clone()));
    seed::seed(&sim);
    if config.churn > 0.0 {
        tokio::spawn(seed::churn(sim.clone()));
    }
    let s = sim.clone();
    let task = tokio::spawn(r8s::server::serve(
        listener,
        None,
        move |req, _peer| {
            let s = s.clone();
            async move { s.handle(req).await }
        },
        signal,
        r8s::server::Timeouts {
            grace: Duration::from_secs(5),
            header_read: Duration::from_secs(32),
            write: Duration::from_secs(60),
            goaway_chance: 0.0,
        },
    ));
    Ok(SimHandle {
        addr,
        sim,
        trigger,
        task,
    })
}
