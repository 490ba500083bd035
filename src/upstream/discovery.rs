//! Resolves `cache.resources` entries against the upstream's discovery:
//! group, version, kind, scope, and whether list and watch are supported.

use std::sync::Arc;

use serde_json::Value;

use super::Upstream;
use crate::api::{ApiResource, Gvr};

/// Why the configured resources could not be resolved.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The upstream did not answer discovery.
    #[error("discovery: GET {path}: {reason}")]
    Upstream {
        /// The path.
        path: String,
        /// What failed.
        reason: String,
    },
    /// A configured entry names nothing the upstream serves.
    #[error("cache.resources: {entry:?} is not served by the upstream")]
    NotServed {
        /// The entry.
        entry: String,
    },
    /// A configured entry cannot be list-watched.
    #[error("cache.resources: {entry:?} does not support list and watch (verbs: {verbs})")]
    NoListWatch {
        /// The entry.
        entry: String,
        /// Its verbs.
        verbs: String,
    },
}

/// The most of a discovery document r8s reads.
const MAX_DOCUMENT: usize = 64 << 20;

async fn get_json(upstream: &Arc<Upstream>, path: &str) -> Result<Value, DiscoveryError> {
    let err = |reason: String| DiscoveryError::Upstream {
        path: path.to_string(),
        reason,
    };
    let reply = upstream
        .get(path, "application/json")
        .await
        .map_err(|e| err(e.to_string()))?;
    let status = reply.status();
    if !status.is_success() {
        return Err(err(format!("HTTP {status}")));
    }
    reply
        .json(MAX_DOCUMENT)
        .await
        .map_err(|e| err(e.to_string()))
}

/// Resource lists of every served group/version: (group, version, resources).
async fn all_lists(
    upstream: &Arc<Upstream>,
) -> Result<Vec<(String, String, Vec<Value>)>, DiscoveryError> {
    let mut out = Vec::new();
    let core = get_json(upstream, "/api/v1").await?;
    out.push((
        String::new(),
        "v1".to_string(),
        core["resources"].as_array().cloned().unwrap_or_default(),
    ));
    let groups = get_json(upstream, "/apis").await?;
    for g in groups["groups"].as_array().cloned().unwrap_or_default() {
        let name = g["name"].as_str().unwrap_or_default().to_string();
        let preferred = g["preferredVersion"]["version"]
            .as_str()
            .unwrap_or_default()
            .to_string();
        for v in g["versions"].as_array().cloned().unwrap_or_default() {
            let version = v["version"].as_str().unwrap_or_default().to_string();
            if version != preferred {
                continue;
            }
            let list = get_json(upstream, &format!("/apis/{name}/{version}")).await?;
            out.push((
                name.clone(),
                version,
                list["resources"].as_array().cloned().unwrap_or_default(),
            ));
        }
    }
    Ok(out)
}

fn verbs(r: &Value) -> Vec<String> {
    r["verbs"]
        .as_array()
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_string))
                .collect()
        })
        .unwrap_or_default()
}

fn resolved(group: &str, version: &str, r: &Value) -> ApiResource {
    ApiResource {
        gvr: Gvr::new(
            group.to_string(),
            version.to_string(),
            r["name"].as_str().unwrap_or_default().to_string(),
        ),
        kind: r["kind"].as_str().unwrap_or_default().to_string(),
        namespaced: r["namespaced"].as_bool().unwrap_or(false),
    }
}

/// Resolves the entries (`pods`, `v1/pods`, `apps/v1/deployments`, `*`).
pub async fn resolve(
    upstream: &Arc<Upstream>,
    entries: &[String],
    exclude: &[String],
) -> Result<Vec<ApiResource>, DiscoveryError> {
    if entries.is_empty() {
        return Ok(Vec::new());
    }
    let lists = all_lists(upstream).await?;
    let mut out: Vec<ApiResource> = Vec::new();
    let mut push = |r: ApiResource| {
        if !out.contains(&r) {
            out.push(r);
        }
    };
    for entry in entries {
        if entry == "*" {
            for (g, v, rs) in &lists {
                for r in rs {
                    let name = r["name"].as_str().unwrap_or_default();
                    let vs = verbs(r);
                    if name.contains('/')
                        || exclude.iter().any(|e| e == name)
                        || !(vs.iter().any(|v| v == "list") && vs.iter().any(|v| v == "watch"))
                    {
                        continue;
                    }
                    push(resolved(g, v, r));
                }
            }
            continue;
        }
        let parts: Vec<&str> = entry.split('/').collect();
        let (group, version, resource) = match parts.as_slice() {
            [r] => (None, None, *r),
            [v, r] => (Some(""), Some(*v), *r),
            [g, v, r] => (Some(*g), Some(*v), *r),
            _ => {
                return Err(DiscoveryError::NotServed {
                    entry: entry.clone(),
                });
            }
        };
        let mut found = None;
        if let (Some(g), Some(v)) = (group, version) {
            let path = if g.is_empty() {
                format!("/api/{v}")
            } else {
                format!("/apis/{g}/{v}")
            };
            let list = get_json(upstream, &path)
                .await
                .map_err(|_| DiscoveryError::NotServed {
                    entry: entry.clone(),
                })?;
            if let Some(r) = list["resources"]
                .as_array()
                .and_then(|a| a.iter().find(|r| r["name"] == resource))
            {
                found = Some((g.to_string(), v.to_string(), r.clone()));
            }
        } else {
            found = lists.iter().find_map(|(g, v, rs)| {
                rs.iter()
                    .find(|r| r["name"] == resource)
                    .map(|r| (g.clone(), v.clone(), r.clone()))
            });
        }
        let Some((g, v, r)) = found else {
            return Err(DiscoveryError::NotServed {
                entry: entry.clone(),
            });
        };
        let vs = verbs(&r);
        if !(vs.iter().any(|v| v == "list") && vs.iter().any(|v| v == "watch")) {
            return Err(DiscoveryError::NoListWatch {
                entry: entry.clone(),
                verbs: vs.join(","),
            });
        }
        push(resolved(&g, &v, &r));
    }
    Ok(out)
}
