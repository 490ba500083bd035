//! The flags of `r8s sim` and `r8s demo`: the sim's, so that a binary built
//! without it has neither.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::Args;

use crate::{Generation, SimConfig};

/// Flags of `sim`.
#[derive(Debug, Args, Clone)]
pub struct SimArgs {
    /// Address to serve the Kubernetes API on.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:6443")]
    pub listen: SocketAddr,
    /// Pods to seed (shaped like a real apiserver's: about 4.5 KB of JSON each).
    #[arg(long, value_name = "N", default_value_t = 100)]
    pub pods: usize,
    /// Namespaces ns-0..ns-(N-1) to spread the pods over.
    #[arg(long, value_name = "N", default_value_t = 4)]
    pub namespaces: usize,
    /// Nodes to seed; every other pod is scheduled on one (pod 2k on node k mod N).
    /// 0: one node per 100 pods, between 1 and 50.
    #[arg(long, value_name = "N", default_value_t = 0)]
    pub nodes: usize,
    /// Background writes per second (pod updates, some creates and deletes); 0 for none.
    #[arg(long, value_name = "WRITES_PER_SEC", default_value_t = 0.0)]
    pub churn: f64,
    /// Events kept for watch resumption and old reads (the compaction window).
    #[arg(long, value_name = "EVENTS", default_value_t = 10_000)]
    pub history: usize,
    /// kube-apiserver --token-auth-file style CSV (token,user,uid,"group1,group2");
    /// turns on authentication (401 for bad tokens) and a small authorizer.
    #[arg(long, value_name = "FILE")]
    pub tokens: Option<PathBuf>,
    /// kube-apiserver ABAC policy file (one JSON Policy per line) whose rules add
    /// to the built-in ones; re-read when it changes. Needs --tokens.
    #[arg(long, value_name = "FILE", requires = "tokens")]
    pub policy: Option<PathBuf>,
    /// Behave as a kube-apiserver before 1.31 where it matters to r8s's
    /// proofs: `/version` says 1.30, a consistent read does not advance the
    /// watch cache, and a watch's bookmarks carry its resource's last change
    /// (none for a resource without changes).
    #[arg(long = "before-1-31")]
    pub before_1_31: bool,
    /// The Kubernetes minor version `/version` reports, and the sim answers
    /// as, where versions differ on the wire: 33 ends streaming lists with
    /// the list blueprint annotation, 37 gzips them (r8s in front follows
    /// the version its upstream reports).
    #[arg(long, value_name = "MINOR", default_value_t = 36, conflicts_with = "before_1_31",
          value_parser = clap::value_parser!(u16).range(31..))]
    pub kube_minor: u16,
}

/// Flags of `demo`.
#[derive(Debug, Args, Clone)]
pub struct DemoArgs {
    /// Address for r8s's Kubernetes API.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8001")]
    pub listen: SocketAddr,
    /// Address for r8s's /metrics and health endpoints.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:8081")]
    pub admin_listen: SocketAddr,
    /// Address for the built-in upstream (port 0: any free port).
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:0")]
    pub sim_listen: SocketAddr,
    /// Pods to seed.
    #[arg(long, value_name = "N", default_value_t = 200)]
    pub pods: usize,
    /// Background writes per second, so that watches show changes.
    #[arg(long, value_name = "WRITES_PER_SEC", default_value_t = 1.0)]
    pub churn: f64,
}

impl SimArgs {
    /// The sim these flags ask for.
    pub fn config(&self) -> SimConfig {
        SimConfig {
            pods: self.pods,
            namespaces: self.namespaces,
            nodes: self.nodes,
            churn: self.churn,
            history: self.history,
            tokens: self.tokens.clone(),
            policy: self.policy.clone(),
            generation: if self.before_1_31 {
                Generation::Pre131
            } else {
                Generation::Current
            },
            minor: self.kube_minor,
            ..SimConfig::default()
        }
    }
}
