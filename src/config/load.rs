//! Loading: built-in defaults < TOML file < `R8S_` environment < CLI flags,
//! every problem reported at once, each naming the key, the value and where
//! it came from.

use std::path::{Path, PathBuf};

use figment::Figment;
use figment::providers::{Env, Format, Serialized, Toml};
use serde::Serialize;

use super::settings::Config;
use super::validate::number;

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
    /// `--audit-policy-file`, `--audit-log-path`, `--audit-webhook-config-file`.
    #[serde(skip_serializing_if = "AuditOverrides::is_empty")]
    pub audit: AuditOverrides,
    /// `--log-format`.
    #[serde(skip_serializing_if = "LogOverrides::is_empty")]
    pub log: LogOverrides,
    /// `--node`.
    #[serde(skip_serializing_if = "NodeOverrides::is_empty")]
    pub node: NodeOverrides,
}

/// Node flags.
#[derive(Debug, Clone, Default, Serialize)]
pub struct NodeOverrides {
    /// `--node`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl NodeOverrides {
    fn is_empty(&self) -> bool {
        self.name.is_none()
    }
}

/// Audit flags, named as kube-apiserver's.
#[derive(Debug, Clone, Default, Serialize)]
pub struct AuditOverrides {
    /// `--audit-policy-file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub policy_file: Option<PathBuf>,
    /// `--audit-log-path`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub log_path: Option<PathBuf>,
    /// `--audit-webhook-config-file`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub webhook_config_file: Option<PathBuf>,
}

impl AuditOverrides {
    fn is_empty(&self) -> bool {
        self.policy_file.is_none() && self.log_path.is_none() && self.webhook_config_file.is_none()
    }
}

/// Logging flags.
#[derive(Debug, Clone, Default, Serialize)]
pub struct LogOverrides {
    /// `--log-format`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub format: Option<String>,
}

impl LogOverrides {
    fn is_empty(&self) -> bool {
        self.format.is_none()
    }
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

/// Checks of a loaded configuration that need what the layers above
/// `config` know (which fields a resource can be indexed by): each problem
/// as (key, message), the key dotted as the configuration nests it.
pub type Check<'a> = &'a dyn Fn(&Config) -> Vec<(String, String)>;

/// Loads defaults < `file` < `R8S_*` environment < `overrides`, then validates.
pub fn load(file: Option<&Path>, overrides: &Overrides) -> Result<Config, ConfigError> {
    load_checked(file, overrides, &|_| Vec::new())
}

/// [`load`], with `check`'s problems reported beside the values' own, each
/// naming where its value came from.
pub fn load_checked(
    file: Option<&Path>,
    overrides: &Overrides,
    check: Check<'_>,
) -> Result<Config, ConfigError> {
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
    let mut errs: Vec<(String, String)> = match config.validate() {
        Ok(()) => Vec::new(),
        Err(errs) => errs.into_iter().map(|(k, m)| (k.to_string(), m)).collect(),
    };
    errs.extend(check(&config));
    if !errs.is_empty() {
        return Err(ConfigError(
            errs.into_iter()
                .map(|(key, msg)| match fig.find_metadata(&key) {
                    Some(m) => format!("{msg} (from {})", source(m, &key)),
                    None => msg,
                })
                .collect(),
        ));
    }
    Ok(config)
}

/// Where a key's value came from, in words: the file, the environment
/// variable or the command line.
fn source(m: &figment::Metadata, key: &str) -> String {
    if m.name.contains("environment variable") {
        format!(
            "environment variable R8S_{}",
            key.replace('.', "__").to_ascii_uppercase()
        )
    } else if m.name.ends_with("::Overrides") {
        "the command line".into()
    } else {
        match &m.source {
            Some(src) => format!("{} {src}", m.name),
            None => m.name.to_string(),
        }
    }
}

/// A value as it was given.
fn render(v: &figment::value::Value) -> String {
    use figment::value::Value;
    match v {
        Value::String(_, s) => format!("\"{s}\""),
        Value::Num(_, n) => match (n.to_i128(), n.to_f64()) {
            (Some(i), _) => i.to_string(),
            (None, Some(f)) => number(f),
            (None, None) => format!("{n:?}"),
        },
        Value::Bool(_, b) => b.to_string(),
        other => format!("{other:?}"),
    }
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
        .map(|m| source(m, &key))
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
                .map(|v| format!(" {}", render(&v)))
                .unwrap_or_default();
            format!("config: bad value{value} for key \"{key}\" in {source}: {kind}")
        }
    }
}
