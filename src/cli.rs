//! The command line: `r8s serve`, `r8s sim`, `r8s demo`, `r8s config check`.

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand};

use crate::config::{AuditOverrides, CacheOverrides, LogOverrides, Overrides, UpstreamOverrides};

/// r8s: a watch cache for the Kubernetes API.
///
/// r8s sits in front of kube-apiserver(s), list-watches the resources it is
/// told to cache, serves get/list/watch from memory and passes everything else
/// through unchanged. Settings come from built-in defaults, then the TOML file
/// given with --config, then R8S_* environment variables (R8S_LISTEN,
/// R8S_UPSTREAM__SERVERS='["https://a:6443"]', ...), then flags.
#[derive(Debug, Parser)]
#[command(
    name = "r8s",
    version = concat!(env!("CARGO_PKG_VERSION"), " (", env!("BUILD_GIT_COMMIT"), ")"),
    propagate_version = true
)]
pub struct Cli {
    /// What to run.
    #[command(subcommand)]
    pub command: Command,
}

/// Subcommands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the r8s daemon in front of an upstream kube-apiserver.
    Serve(ServeArgs),
    /// Run the built-in upstream alone: an in-memory kube-apiserver stand-in for tests and benchmarks.
    #[cfg(feature = "sim")]
    Sim(SimArgs),
    /// Run the built-in upstream with sample objects and r8s in front of it, and print what to try.
    #[cfg(feature = "sim")]
    Demo(DemoArgs),
    /// Inspect the configuration.
    #[command(subcommand)]
    Config(ConfigCommand),
}

/// `r8s config ...`.
#[derive(Debug, Subcommand)]
pub enum ConfigCommand {
    /// Validate the configuration and print the effective result (secrets redacted).
    Check(ServeArgs),
}

/// Flags of `serve` (and `config check`); each also settable in the file and as `R8S_*`.
#[derive(Debug, Args, Clone, Default)]
pub struct ServeArgs {
    /// TOML configuration file (every key documented in config/r8s.toml). [env: R8S_CONFIG]
    #[arg(long, value_name = "FILE", env = "R8S_CONFIG")]
    pub config: Option<PathBuf>,
    /// Address for the Kubernetes API. [config: listen; default 127.0.0.1:8001]
    #[arg(long, value_name = "ADDR")]
    pub listen: Option<String>,
    /// Address for /metrics, /healthz, /livez, /readyz. [config: admin_listen; default 127.0.0.1:8081]
    #[arg(long, value_name = "ADDR")]
    pub admin_listen: Option<String>,
    /// Upstream kube-apiserver URL; repeat for several servers of one cluster, tried in order
    /// (the next on a connection error, or when a cache finds one silent or failing).
    /// [config: upstream.servers; default: the kubeconfig's server]
    #[arg(long = "upstream", value_name = "URL")]
    pub upstream: Vec<String>,
    /// Kubeconfig for the upstream's CA and credentials (exec plugins and rotating token files
    /// included). Unset: $KUBECONFIG, ~/.kube/config or the in-cluster service account.
    /// [config: upstream.kubeconfig]
    #[arg(long, value_name = "PATH")]
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context to use. [config: upstream.context; default: the current context]
    #[arg(long, value_name = "NAME")]
    pub context: Option<String>,
    /// A resource to cache: pods, v1/pods, apps/v1/deployments, example.r8s.dev/v1/widgets, * (every
    /// resource), or *.example.com (every resource of the groups ending in .example.com); repeatable.
    /// [config: cache.resources]
    #[arg(long = "cache", value_name = "RESOURCE")]
    pub cache: Vec<String>,
    /// Audit policy in kube-apiserver's format: audit events are written for the requests r8s
    /// answers, as the policy says. Needs --audit-log-path or --audit-webhook-config-file.
    /// [config: audit.policy_file]
    #[arg(long, value_name = "FILE")]
    pub audit_policy_file: Option<PathBuf>,
    /// File audit events are written to, one JSON line each, rotated by size; - for standard
    /// output. [config: audit.log_path; rotation: audit.log_maxsize, audit.log_maxbackup, ...]
    #[arg(long, value_name = "PATH")]
    pub audit_log_path: Option<PathBuf>,
    /// Kubeconfig naming the webhook audit events are POSTed to, batched.
    /// [config: audit.webhook_config_file; batching: audit.webhook_batch_*]
    #[arg(long, value_name = "FILE")]
    pub audit_webhook_config_file: Option<PathBuf>,
    /// Log format: text, or json (kube components' field names: ts, caller, msg, v, err).
    /// [config: log.format; default text]
    #[arg(long, value_name = "FORMAT")]
    pub log_format: Option<String>,
}

impl ServeArgs {
    /// The flags that were given, as configuration overrides.
    pub fn overrides(&self) -> Overrides {
        Overrides {
            listen: self.listen.clone(),
            admin_listen: self.admin_listen.clone(),
            upstream: UpstreamOverrides {
                servers: (!self.upstream.is_empty()).then(|| self.upstream.clone()),
                kubeconfig: self.kubeconfig.clone(),
                context: self.context.clone(),
            },
            cache: CacheOverrides {
                resources: (!self.cache.is_empty()).then(|| self.cache.clone()),
            },
            audit: AuditOverrides {
                policy_file: self.audit_policy_file.clone(),
                log_path: self.audit_log_path.clone(),
                webhook_config_file: self.audit_webhook_config_file.clone(),
            },
            log: LogOverrides {
                format: self.log_format.clone(),
            },
        }
    }
}

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
