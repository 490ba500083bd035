//! The daemon's flags: those of `r8s serve` and `r8s config check`, each a
//! configuration override. The command line around them (the subcommands)
//! is the binary's (cmd/src/main.rs); the sim's flags are the sim's.

use std::path::PathBuf;

use clap::Args;

use crate::config::{
    AuditOverrides, CacheOverrides, LogOverrides, NodeOverrides, Overrides, UpstreamOverrides,
};

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
    /// Serve one node's clients from loopback (node-local): cache only the pods bound to NAME
    /// (spec.nodeName) and its own Node; their other requests pass through. Set it from the
    /// downward API (spec.nodeName) or the host name. [config: node.name; env: R8S_NODE__NAME]
    #[arg(long = "node", value_name = "NAME")]
    pub node: Option<String>,
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
            node: NodeOverrides {
                name: self.node.clone(),
            },
        }
    }
}
