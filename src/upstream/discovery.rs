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

/// Resource lists: (group, version, resources).
type Lists = Vec<(String, String, Vec<Value>)>;

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

/// Resource lists of every served group/version: (group, version,
/// resources), each group's preferred version first (a bare resource name
/// resolves to it); and the group/versions whose list did not come (an
/// aggregated API that is down), left out.
async fn all_lists(
    upstream: &Arc<Upstream>,
) -> Result<(Lists, Vec<(String, String)>), DiscoveryError> {
    let mut out = Vec::new();
    let mut unlisted = Vec::new();
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
        let mut versions: Vec<String> = g["versions"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|v| v["version"].as_str().map(str::to_string))
            .collect();
        versions.sort_by_key(|v| *v != preferred);
        for version in versions {
            let list = match get_json(upstream, &format!("/apis/{name}/{version}")).await {
                Ok(list) => list,
                Err(e) => {
                    tracing::warn!(error = %e, "a group/version's discovery failed; its resources are left as they were");
                    unlisted.push((name.clone(), version));
                    continue;
                }
            };
            out.push((
                name.clone(),
                version,
                list["resources"].as_array().cloned().unwrap_or_default(),
            ));
        }
    }
    Ok((out, unlisted))
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

/// What `cache.resources` names now.
#[derive(Debug, Default, Clone, PartialEq)]
pub struct Resolved {
    /// The resources to cache.
    pub resources: Vec<ApiResource>,
    /// The entries named explicitly that the upstream does not serve (yet):
    /// waited for, not an error (a CRD installed after r8s starts).
    pub waiting: Vec<String>,
    /// The group/versions whose discovery failed: what they serve is not
    /// known (their caches are kept as they are).
    pub unlisted: Vec<(String, String)>,
}

/// Resolves the entries (`pods`, `v1/pods`, `apps/v1/deployments`, `*`):
/// `*` is every served version of every resource that supports list and
/// watch, less `exclude`.
pub async fn resolve(
    upstream: &Arc<Upstream>,
    entries: &[String],
    exclude: &[String],
) -> Result<Resolved, DiscoveryError> {
    if entries.is_empty() {
        return Ok(Resolved::default());
    }
    let mut waiting = Vec::new();
    let (lists, unlisted) = all_lists(upstream).await?;
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
            let list = match get_json(upstream, &path).await {
                Ok(list) => list,
                // Not served (404), or not now: checked again later.
                Err(_) => Value::Null,
            };
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
            waiting.push(entry.clone());
            continue;
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
    Ok(Resolved {
        resources: out,
        waiting,
        unlisted,
    })
}
