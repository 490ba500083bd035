//! Configuration: built-in defaults < TOML file < `R8S_` environment < CLI flags.
//!
//! Every key is in `config/r8s.toml` with its default and why. Loading reports
//! every problem at once, each naming the key, the value and where it came from.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

/// The whole configuration.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct Config {
    /// Address of the Kubernetes API listener (loopback by default: a sidecar).
    pub listen: SocketAddr,
    /// Address of `/metrics`, `/healthz`, `/livez`, `/readyz`.
    pub admin_listen: SocketAddr,
    /// What happens on SIGTERM.
    pub shutdown: ShutdownConfig,
    /// The upstream kube-apiserver(s).
    pub upstream: UpstreamConfig,
    /// What to cache.
    pub cache: CacheConfig,
    /// Cached reads at the edges.
    pub read: ReadConfig,
    /// Cached watches.
    pub watch: WatchConfig,
    /// TLS for the API listener.
    pub tls: TlsConfig,
    /// Who may read what from the cache.
    pub auth: AuthConfig,
    /// Logging.
    pub log: LogConfig,
}

/// How to reach the upstream.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct UpstreamConfig {
    /// Servers of one cluster, tried in order on connection errors. Empty: the kubeconfig's server.
    pub servers: Vec<String>,
    /// Kubeconfig to take the server, CA and credentials from. Unset: `$KUBECONFIG`,
    /// `~/.kube/config`, or the in-cluster service account, in that order, when
    /// `servers` is empty; no credentials otherwise.
    pub kubeconfig: Option<PathBuf>,
    /// Kubeconfig context (unset: the current context).
    pub context: Option<String>,
    /// CA bundle to verify the upstream with (overrides the kubeconfig's).
    pub ca_file: Option<PathBuf>,
    /// Bearer token file, re-read as it rotates (overrides the kubeconfig's credentials).
    pub token_file: Option<PathBuf>,
    /// Bearer token (prefer `token_file`; redacted by `config check`).
    pub token: Option<String>,
    /// Skip TLS verification of the upstream (testing only).
    pub insecure_skip_tls_verify: bool,
    /// Seconds to wait for a TCP/TLS connection before failing over.
    pub connect_timeout_seconds: f64,
}

/// What r8s caches and how.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct CacheConfig {
    /// Resources: `pods`, `v1/pods`, `apps/v1/deployments`, `example.r8s.dev/v1/widgets`, or `*`.
    pub resources: Vec<String>,
    /// Resources `*` leaves out.
    pub exclude: Vec<String>,
    /// Items per upstream LIST page during (re)lists.
    pub page_size: usize,
    /// (Re)list with streaming lists (`sendInitialEvents`) where the upstream serves them.
    pub streaming_lists: bool,
    /// Seconds recent versions are kept for Exact reads and pagination.
    pub snapshot_retention_seconds: u64,
    /// At most this many retained versions per resource (bounds memory under churn).
    pub max_retained_versions: usize,
    /// Seconds a "not older than" read waits for the cache to catch up.
    pub wait_for_resource_version_seconds: f64,
    /// Bytes one resource's cache may hold before it is evicted and passed through (0: no limit).
    pub max_bytes_per_resource: u64,
    /// Bytes all caches together may hold (0: no limit).
    pub max_bytes_total: u64,
}

impl Default for CacheConfig {
    fn default() -> Self {
        CacheConfig {
            resources: Vec::new(),
            exclude: vec!["secrets".into(), "events".into()],
            page_size: 500,
            streaming_lists: true,
            snapshot_retention_seconds: 75,
            max_retained_versions: 10_000,
            wait_for_resource_version_seconds: 3.0,
            max_bytes_per_resource: 2 << 30,
            max_bytes_total: 8 << 30,
        }
    }
}

/// How cached reads behave at the edges.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ReadConfig {
    /// A read newer than the cache after the wait: `pass` (ask the upstream) or
    /// `504` (answer `Too large resource version` like kube-apiserver).
    pub on_too_new: OnTooNew,
}

/// Cached watches.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct WatchConfig {
    /// Seconds between bookmarks sent to clients that allow them.
    pub bookmark_interval_seconds: u64,
    /// Watches without `timeoutSeconds` end after a random time in [this, 2×this] seconds.
    pub min_timeout_seconds: u64,
    /// A watch from a version older than the history: `pass` (the upstream may
    /// still have it) or `410` (kube-apiserver's ERROR event).
    pub on_too_old: OnTooOld,
    /// Events each resource's watch log keeps (resumable watches reach back this far).
    pub history_events: usize,
    /// Bytes each resource's watch log may keep alive.
    pub history_bytes: u64,
    /// Cached watches open at once (all resources); more get 429 with `Retry-After`.
    pub max_watchers: usize,
}

impl Default for WatchConfig {
    fn default() -> Self {
        WatchConfig {
            bookmark_interval_seconds: 60,
            min_timeout_seconds: 1800,
            on_too_old: OnTooOld::Pass,
            // 5 minutes of churn at 100 writes/s.
            history_events: 30_000,
            history_bytes: 512 << 20,
            max_watchers: 100_000,
        }
    }
}

/// TLS for the API listener (unset: plain HTTP, for loopback sidecars).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct TlsConfig {
    /// Serving certificate (PEM chain); re-read when it changes.
    pub cert_file: Option<PathBuf>,
    /// Its private key (PEM); re-read when it changes.
    pub key_file: Option<PathBuf>,
    /// CA bundle (PEM) client certificates are verified against; unset: no client certificates.
    pub client_ca_file: Option<PathBuf>,
}

/// How requests are authenticated and cached reads authorized.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct AuthConfig {
    /// `delegated` (TokenReview + SubjectAccessReview against the upstream) or
    /// `none` (loopback only). Unset: `none` on loopback, `delegated` otherwise.
    pub mode: Option<AuthMode>,
    /// Requests without credentials are `system:anonymous`; false: 401.
    pub anonymous: bool,
    /// Seconds an authenticated token's review is reused.
    pub token_ttl_seconds: u64,
    /// Seconds a rejected token's review is reused.
    pub token_rejected_ttl_seconds: u64,
    /// Seconds an "allowed" access review is reused.
    pub decision_ttl_seconds: u64,
    /// Seconds a "denied" access review is reused.
    pub decision_denied_ttl_seconds: u64,
    /// Entries in each of the token and decision caches.
    pub cache_size: usize,
}

impl Default for AuthConfig {
    fn default() -> Self {
        AuthConfig {
            mode: None,
            anonymous: true,
            token_ttl_seconds: 120,
            token_rejected_ttl_seconds: 10,
            decision_ttl_seconds: 10,
            decision_denied_ttl_seconds: 5,
            cache_size: 10_000,
        }
    }
}

/// Whether r8s checks who is asking.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum AuthMode {
    /// Every request authenticated, every cached read authorized, by the upstream.
    #[serde(rename = "delegated")]
    Delegated,
    /// No checks: anyone who can connect reads with r8s's permissions.
    #[serde(rename = "none")]
    None,
}

/// Shutdown on SIGTERM.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct ShutdownConfig {
    /// How long in-flight requests may take to finish, in seconds.
    pub grace_seconds: u64,
    /// Cached watches get a final bookmark and close at random points over
    /// this many seconds, so clients do not reconnect all at once.
    pub watch_drain_seconds: f64,
}

impl Default for ShutdownConfig {
    fn default() -> Self {
        ShutdownConfig {
            grace_seconds: 30,
            watch_drain_seconds: 5.0,
        }
    }
}

/// What to do with a watch older than the history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnTooOld {
    /// Pass it through to the upstream.
    #[default]
    #[serde(rename = "pass")]
    Pass,
    /// Answer 200 with one `ERROR` event carrying a 410 `Expired` Status.
    #[serde(rename = "410")]
    Gone,
}

/// What to do with a read the cache is too old for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, Default)]
pub enum OnTooNew {
    /// Pass it through to the upstream.
    #[default]
    #[serde(rename = "pass")]
    Pass,
    /// Answer 504 with `Retry-After: 1`.
    #[serde(rename = "504")]
    Timeout,
}

impl Default for ReadConfig {
    fn default() -> Self {
        ReadConfig {
            on_too_new: OnTooNew::Pass,
        }
    }
}

/// Logging.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct LogConfig {
    /// A tracing filter: `info`, `r8s=debug`, ... (`RUST_LOG` overrides it).
    pub level: String,
}

impl Default for Config {
    fn default() -> Self {
        Config {
            listen: SocketAddr::from(([127, 0, 0, 1], 8001)),
            admin_listen: SocketAddr::from(([127, 0, 0, 1], 8081)),
            shutdown: ShutdownConfig::default(),
            upstream: UpstreamConfig::default(),
            cache: CacheConfig::default(),
            read: ReadConfig::default(),
            watch: WatchConfig::default(),
            tls: TlsConfig::default(),
            auth: AuthConfig::default(),
            log: LogConfig::default(),
        }
    }
}

impl Default for UpstreamConfig {
    fn default() -> Self {
        UpstreamConfig {
            servers: Vec::new(),
            kubeconfig: None,
            context: None,
            ca_file: None,
            token_file: None,
            token: None,
            insecure_skip_tls_verify: false,
            connect_timeout_seconds: 5.0,
        }
    }
}

impl Default for LogConfig {
    fn default() -> Self {
        LogConfig {
            level: "info".into(),
        }
    }
}

/// Values given on the command line (only those set override).
#[derive(Debug, Clone, Default, Serialize)]
pub struct Overrides {
    /// `--listen`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub listen: Option<String>,
    /// `--admin-listen`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub admin_listen: Option<String>,
    /// `--upstream`, `--kubeconfig`, `--context`.
    #[serde(skip_serializing_if = "UpstreamOverrides::is_empty")]
    pub upstream: UpstreamOverrides,
    /// `--cache`.
    #[serde(skip_serializing_if = "CacheOverrides::is_empty")]
    pub cache: CacheOverrides,
}

/// Upstream flags.
#[derive(Debug, Clone, Default, Serialize)]
pub struct UpstreamOverrides {
    /// `--upstream` (repeatable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub servers: Option<Vec<String>>,
    /// `--kubeconfig`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub kubeconfig: Option<PathBuf>,
    /// `--context`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<String>,
}

impl UpstreamOverrides {
    fn is_empty(&self) -> bool {
        self.servers.is_none() && self.kubeconfig.is_none() && self.context.is_none()
    }
}

/// Cache flags.
#[derive(Debug, Clone, Default, Serialize)]
pub struct CacheOverrides {
    /// `--cache` (repeatable).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub resources: Option<Vec<String>>,
}

impl CacheOverrides {
    fn is_empty(&self) -> bool {
        self.resources.is_none()
    }
}

/// Configuration problems, each on its own line.
#[derive(Debug, thiserror::Error)]
#[error("{}", .0.join("\n"))]
pub struct ConfigError(pub Vec<String>);

/// Loads defaults < `file` < `R8S_*` environment < `overrides`, then validates.
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
    let mut fig = Figment::from(Serialized::defaults(Config::default()));
    if let Some(path) = file {
        if let Err(e) = std::fs::metadata(path) {
            return Err(ConfigError(vec![format!(
                "config file {}: {e}; pass an existing TOML file to --config (see config/r8s.toml)",
                path.display()
            )]));
        }
        fig = fig.merge(Toml::file(path));
    }
    fig = fig
        .merge(Env::prefixed("R8S_").split("__").ignore(&["config"]))
        .merge(Serialized::defaults(overrides));
    let config: Config = fig
        .extract()
        .map_err(|e| ConfigError(e.into_iter().map(|e| describe(&fig, e)).collect()))?;
    config.validate().map_err(|errs| {
        ConfigError(
            errs.into_iter()
                .map(|(key, msg)| match fig.find_metadata(key) {
                    Some(m) => match &m.source {
                        Some(src) => format!("{msg} (from {} {src})", m.name),
                        None => format!("{msg} (from {})", m.name),
                    },
                    None => msg,
                })
                .collect(),
        )
    })?;
    Ok(config)
}

fn describe(fig: &Figment, e: figment::Error) -> String {
    use figment::error::Kind;
    let mut path = e.path.clone();
    if let Kind::UnknownField(f, _) = &e.kind
        && path.last() != Some(f)
    {
        path.push(f.clone());
    }
    let key = path.join(".");
    let source = e
        .metadata
        .as_ref()
        .map(|m| match &m.source {
            Some(s) => format!("{} ({s})", m.name),
            None => m.name.to_string(),
        })
        .unwrap_or_else(|| "configuration".into());
    match &e.kind {
        Kind::UnknownField(f, expected) => format!(
            "config: unknown key \"{key}\" in {source}: \"{f}\" is not a setting here (expected one of: {})",
            expected.join(", ")
        ),
        kind => {
            let value = fig
                .find_value(&key)
                .ok()
                .map(|v| match v.as_str() {
                    Some(s) => format!(" \"{s}\""),
                    None => format!(" {:?}", v),
                })
                .unwrap_or_default();
            format!("config: bad value{value} for key \"{key}\" in {source}: {kind}")
        }
    }
}

fn valid_version(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || ["alpha", "beta"].iter().any(|p| {
            tail.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
}

fn valid_dns(s: &str, allow_dots: bool) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && (allow_dots || !s.contains('.'))
}

/// Checks a `cache.resources` entry: `*`, `RESOURCE`, `VERSION/RESOURCE`, or `GROUP/VERSION/RESOURCE`.
pub fn validate_resource(entry: &str) -> Result<(), String> {
    let parts: Vec<&str> = entry.split('/').collect();
    let ok = match parts.as_slice() {
        ["*"] => true,
        [r] => valid_dns(r, false),
        [v, r] => valid_version(v) && valid_dns(r, false),
        [g, v, r] => valid_dns(g, true) && valid_version(v) && valid_dns(r, false),
        _ => false,
    };
    if ok {
        Ok(())
    } else {
        Err(format!(
            "config: bad value \"{entry}\" for key \"cache.resources\": expected RESOURCE, VERSION/RESOURCE or GROUP/VERSION/RESOURCE (e.g. pods, v1/pods, apps/v1/deployments) or *"
        ))
    }
}

impl Config {
    /// Checks what types alone cannot; every problem (key, message), not just the first.
    pub fn validate(&self) -> Result<(), Vec<(&'static str, String)>> {
        let mut errs = Vec::new();
        for s in &self.upstream.servers {
            let ok = s.parse::<http::Uri>().is_ok_and(|u| {
                matches!(u.scheme_str(), Some("http" | "https")) && u.host().is_some()
            });
            if !ok {
                errs.push(("upstream.servers", format!(
                    "config: bad value \"{s}\" for key \"upstream.servers\": expected an http:// or https:// URL with a host"
                )));
            }
        }
        if !(self.upstream.connect_timeout_seconds > 0.0
            && self.upstream.connect_timeout_seconds <= 600.0)
        {
            errs.push(("upstream.connect_timeout_seconds", format!(
                "config: bad value {} for key \"upstream.connect_timeout_seconds\": expected seconds in (0, 600]",
                self.upstream.connect_timeout_seconds
            )));
        }
        for r in &self.cache.resources {
            if let Err(e) = validate_resource(r) {
                errs.push(("cache.resources", e));
            }
        }
        let tls = &self.tls;
        if tls.cert_file.is_some() != tls.key_file.is_some() {
            let (key, missing) = if tls.cert_file.is_some() {
                ("tls.cert_file", "tls.key_file")
            } else {
                ("tls.key_file", "tls.cert_file")
            };
            errs.push((key, format!(
                "config: \"{key}\" is set but \"{missing}\" is not: TLS needs both the certificate and its key"
            )));
        }
        if tls.client_ca_file.is_some() && tls.cert_file.is_none() {
            errs.push(("tls.client_ca_file", "config: \"tls.client_ca_file\" needs TLS: set \"tls.cert_file\" and \"tls.key_file\" too".to_string()));
        }
        if self.auth.mode == Some(AuthMode::None) && !self.listen.ip().is_loopback() {
            errs.push(("auth.mode", format!(
                "config: auth.mode = \"none\" is only allowed when the API listens on loopback, but listen = {}: without authentication anyone who can reach that address reads every cached object (secrets included) with r8s's own permissions. Listen on 127.0.0.1 or [::1], or set auth.mode = \"delegated\"",
                self.listen
            )));
        }
        if self.auth.cache_size == 0 {
            errs.push((
                "auth.cache_size",
                "config: bad value 0 for key \"auth.cache_size\": expected at least 1 entry"
                    .to_string(),
            ));
        }
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&self.log.level) {
            errs.push((
                "log.level",
                format!(
                    "config: bad value \"{}\" for key \"log.level\": {e}",
                    self.log.level
                ),
            ));
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }

    /// The authentication mode in effect: as set, or by the listen address.
    pub fn auth_mode(&self) -> AuthMode {
        self.auth.mode.unwrap_or(if self.listen.ip().is_loopback() {
            AuthMode::None
        } else {
            AuthMode::Delegated
        })
    }

    /// The effective configuration as TOML, secrets redacted.
    pub fn to_redacted_toml(&self) -> String {
        let mut c = self.clone();
        if c.upstream.token.is_some() {
            c.upstream.token = Some("<redacted>".into());
        }
        toml::to_string_pretty(&c).unwrap_or_else(|e| format!("# cannot render: {e}\n"))
    }
}

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return figment::Error
mod tests {
    use super::*;
    use figment::Jail;

    #[test]
    fn should_layer_file_env_and_flags() {
        Jail::expect_with(|jail| {
            jail.create_file(
                "r8s.toml",
                "listen = \"127.0.0.1:9000\"\n[upstream]\nservers = [\"http://a:1\"]\n",
            )?;
            jail.set_env("R8S_ADMIN_LISTEN", "127.0.0.1:9001");
            jail.set_env("R8S_UPSTREAM__CONTEXT", "ctx");
            let o = Overrides {
                listen: Some("127.0.0.1:9002".into()),
                ..Default::default()
            };
            let c = load(Some(Path::new("r8s.toml")), &o).map_err(|e| e.to_string())?;
            assert_eq!(c.listen.port(), 9002);
            assert_eq!(c.admin_listen.port(), 9001);
            assert_eq!(c.upstream.servers, vec!["http://a:1".to_string()]);
            assert_eq!(c.upstream.context.as_deref(), Some("ctx"));
            Ok(())
        });
    }

    #[test]
    fn should_name_key_value_and_file() {
        Jail::expect_with(|jail| {
            jail.create_file("bad.toml", "upstrem = 1\n")?;
            let e = load(Some(Path::new("bad.toml")), &Overrides::default()).unwrap_err();
            let all = e.to_string();
            assert!(all.contains("unknown key \"upstrem\""), "{all}");
            assert!(all.contains("bad.toml"), "{all}");
            let e = load(Some(Path::new("missing.toml")), &Overrides::default()).unwrap_err();
            assert!(e.to_string().contains("missing.toml"));
            jail.create_file("bad2.toml", "listen = \"nope\"\n")?;
            let e = load(Some(Path::new("bad2.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("\"listen\"") && e.contains("nope") && e.contains("bad2.toml"),
                "{e}"
            );
            jail.create_file(
                "bad3.toml",
                "[cache]\nresources = [\"apps/x/deployments\"]\n",
            )?;
            let e = load(Some(Path::new("bad3.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("apps/x/deployments"), "{e}");
            Ok(())
        });
    }

    #[test]
    fn should_accept_documented_resource_forms() {
        for r in [
            "pods",
            "v1/pods",
            "apps/v1/deployments",
            "example.r8s.dev/v1/widgets",
            "*",
            "batch/v1beta1/cronjobs",
        ] {
            validate_resource(r).unwrap();
        }
        for r in ["Pods", "v/pods", "a/b/c/d", "", "apps/1/x"] {
            assert!(validate_resource(r).is_err(), "{r}");
        }
    }
}
