//! Resolves `cache.resources` entries against the upstream's discovery:
//! group, version, kind, scope, and whether list and watch are supported.

use std::sync::Arc;

use serde_json::Value;

use super::Upstream;
use crate::api::{ApiResource, Gvr};
use crate::config::ResourceEntry;

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
    get_json_as(upstream, path, "application/json").await
}

async fn get_json_as(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &str,
) -> Result<Value, DiscoveryError> {
    get_served(upstream, path, accept)
        .await?
        .ok_or_else(|| DiscoveryError::Upstream {
            path: path.to_string(),
            reason: format!("HTTP {}", http::StatusCode::NOT_FOUND),
        })
}

/// `path`'s document, or `None` where the upstream answers 404: the legacy
/// group (`/api`) is not served by every apiserver (a standalone or an
/// aggregated one serves `/apis` alone), and a missing group is no error.
async fn get_served(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &str,
) -> Result<Option<Value>, DiscoveryError> {
    let err = |reason: String| DiscoveryError::Upstream {
        path: path.to_string(),
        reason,
    };
    let reply = upstream
        .get(path, accept)
        .await
        .map_err(|e| err(e.to_string()))?;
    let status = reply.status();
    if status == http::StatusCode::NOT_FOUND {
        return Ok(None);
    }
    if !status.is_success() {
        return Err(err(format!("HTTP {status}")));
    }
    reply
        .json(MAX_DOCUMENT)
        .await
        .map(Some)
        .map_err(|e| err(e.to_string()))
}

/// What r8s asks `/api` and `/apis` for: the aggregated document
/// (kube-apiserver 1.30+, or 1.26–1.29's beta), else the plain one.
const AGGREGATED: &str = "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList,\
     application/json;g=apidiscovery.k8s.io;v=v2beta1;as=APIGroupDiscoveryList,application/json";

/// Resource lists of every served group/version: (group, version,
/// resources), each group's preferred version first (a bare resource name
/// resolves to it); and the group/versions whose list did not come (an
/// aggregated API that is down), left out. Two requests where the upstream
/// serves aggregated discovery; else one per group/version.
async fn all_lists(
    upstream: &Arc<Upstream>,
) -> Result<(Lists, Vec<(String, String)>), DiscoveryError> {
    // Anything else than the aggregated document (an older upstream, or a
    // failure) falls back to the plain documents. No `/api` at all (404) is
    // an upstream without the legacy group: `/apis` alone says what it serves.
    let core = get_served(upstream, "/api", AGGREGATED).await;
    let aggregated_core = match &core {
        Ok(Some(core)) => core["kind"] == "APIGroupDiscoveryList",
        Ok(None) => true,
        Err(_) => false,
    };
    if aggregated_core {
        let groups = get_json_as(upstream, "/apis", AGGREGATED).await?;
        if groups["kind"] == "APIGroupDiscoveryList" {
            let mut out = (Vec::new(), Vec::new());
            if let Ok(Some(core)) = &core {
                aggregated(core, &mut out);
            }
            aggregated(&groups, &mut out);
            return Ok(out);
        }
    }
    legacy_lists(upstream).await
}

/// The lists of an aggregated discovery document (`APIGroupDiscoveryList`)
/// added to `out`, in the plain lists' shape; a version whose `freshness`
/// is `Stale` (an aggregated API whose discovery failed) goes to the
/// unlisted.
fn aggregated(doc: &Value, out: &mut (Lists, Vec<(String, String)>)) {
    for g in doc["items"].as_array().into_iter().flatten() {
        let group = g["metadata"]["name"].as_str().unwrap_or_default();
        for v in g["versions"].as_array().into_iter().flatten() {
            let version = v["version"].as_str().unwrap_or_default().to_string();
            if v["freshness"] == "Stale" {
                out.1.push((group.to_string(), version));
                continue;
            }
            let resources = v["resources"].as_array().into_iter().flatten();
            // Subresources are listed under their resource here: the
            // metrics name them as the plain document does (`pods/log`).
            let subresources = resources.clone().flat_map(|r| {
                let name = r["resource"].as_str().unwrap_or_default();
                r["subresources"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(move |s| Some(format!("{name}/{}", s["subresource"].as_str()?)))
            });
            crate::metrics::discovered(subresources.collect::<Vec<_>>().iter().map(String::as_str));
            let resources = resources
                .map(|r| {
                    serde_json::json!({
                        "name": r["resource"], "kind": r["responseKind"]["kind"],
                        "namespaced": r["scope"] == "Namespaced", "verbs": r["verbs"],
                    })
                })
                .collect();
            out.0.push((group.to_string(), version, resources));
        }
    }
}

/// [`all_lists`] from the plain documents: `/api/v1` (where served), `/apis`,
/// then each group/version's.
async fn legacy_lists(
    upstream: &Arc<Upstream>,
) -> Result<(Lists, Vec<(String, String)>), DiscoveryError> {
    let mut out = Vec::new();
    let mut unlisted = Vec::new();
    if let Some(core) = get_served(upstream, "/api/v1", "application/json").await? {
        out.push((
            String::new(),
            "v1".to_string(),
            core["resources"].as_array().cloned().unwrap_or_default(),
        ));
    }
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
        selectable: &[],
    }
}

/// Fills in the custom resources' selectable fields (`ApiResource::selectable`)
/// from their CRDs, read in one LIST: discovery does not say which fields a
/// field selector may use. Where the CRDs cannot be read (no permission, an
/// upstream down), the fields stay unknown and such selectors pass through
/// (`field_selector`) until a cache of the CRDs tells the follower, which
/// then starts those caches again.
pub async fn learn_selectable_fields(upstream: &Arc<Upstream>, resources: &mut [ApiResource]) {
    if resources.iter().all(|r| r.gvr.is_builtin()) {
        return;
    }
    let path = format!("/apis/{}/{}/{}", CRDS.0, CRDS.1, CRDS.2);
    let list = match get_served(upstream, &path, "application/json").await {
        Ok(Some(list)) => list,
        Ok(None) => return,
        Err(e) => {
            tracing::warn!(error = %e, "cannot read the CustomResourceDefinitions: custom resources' field selectors on their selectableFields pass through (field_selector) until r8s reads them (grant list on customresourcedefinitions, or cache them)");
            return;
        }
    };
    let items = list["items"].as_array().map(Vec::as_slice).unwrap_or(&[]);
    for r in resources.iter_mut().filter(|r| !r.gvr.is_builtin()) {
        let name = format!("{}.{}", r.gvr.resource(), r.gvr.group());
        if let Some(crd) = items
            .iter()
            .find(|c| c["metadata"]["name"] == name.as_str())
            && let Ok(body) = serde_json::to_vec(crd)
        {
            r.selectable = crate::api::gvr::crd_selectable_fields(&body, r.gvr.version());
        }
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

/// The CRDs' resource, which an entry with a pattern brings in: the
/// follower watches it to follow the API within a second, and reads the
/// definitions its caches were started under from it.
const CRDS: (&str, &str, &str) = ("apiextensions.k8s.io", "v1", "customresourcedefinitions");

/// Resolves the entries (`pods`, `v1/pods`, `apps/v1/deployments`, `*`,
/// `*.example.com`): `*` is every served version of every resource that
/// supports list and watch, less `exclude`; `*.example.com` the same of
/// the groups whose names end in `.example.com` (and `customresourcedefinitions`
/// with them, unless excluded).
pub async fn resolve(
    upstream: &Arc<Upstream>,
    entries: &[ResourceEntry],
    exclude: &[String],
) -> Result<Resolved, DiscoveryError> {
    if entries.is_empty() {
        return Ok(Resolved::default());
    }
    let mut waiting = Vec::new();
    let (lists, unlisted) = all_lists(upstream).await?;
    // What the upstream serves names its requests in the metrics.
    crate::metrics::discovered(
        lists
            .iter()
            .flat_map(|(_, _, resources)| resources.iter().filter_map(|r| r["name"].as_str())),
    );
    let mut out: Vec<ApiResource> = Vec::new();
    let mut push = |r: ApiResource| {
        if !out.contains(&r) {
            out.push(r);
        }
    };
    let with_crds = entries
        .iter()
        .any(|e| matches!(e, ResourceEntry::Pattern { suffix } if !suffix.is_empty()));
    for entry in entries {
        if let ResourceEntry::Pattern { .. } = entry {
            let crds = |g: &str, v: &str, r: &Value| {
                with_crds && (g, v, r["name"].as_str().unwrap_or_default()) == CRDS
            };
            for (g, v, rs) in &lists {
                for r in rs {
                    let name = r["name"].as_str().unwrap_or_default();
                    if !(entry.names_in(g, v, name) || crds(g, v, r)) {
                        continue;
                    }
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
        // Not served, or not now (its group/version's discovery failed):
        // waited for, and looked for again later.
        let found = lists.iter().find_map(|(g, v, rs)| {
            rs.iter()
                .find(|r| entry.names_in(g, v, r["name"].as_str().unwrap_or_default()))
                .map(|r| (g.clone(), v.clone(), r.clone()))
        });
        let Some((g, v, r)) = found else {
            waiting.push(entry.to_string());
            continue;
        };
        let vs = verbs(&r);
        if !(vs.iter().any(|v| v == "list") && vs.iter().any(|v| v == "watch")) {
            return Err(DiscoveryError::NoListWatch {
                entry: entry.to_string(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn should_read_aggregated_discovery_as_the_plain_lists_and_skip_stale_versions() {
        let doc = json!({"kind": "APIGroupDiscoveryList", "apiVersion": "apidiscovery.k8s.io/v2", "items": [
            {"metadata": {"name": "late.example.com"}, "versions": [
                {"version": "v2", "freshness": "Current", "resources": [
                    {"resource": "gadgets", "responseKind": {"group": "", "version": "", "kind": "Gadget"},
                     "scope": "Namespaced", "verbs": ["get", "list", "watch"],
                     "subresources": [{"subresource": "status", "verbs": ["get"]}]},
                    {"resource": "clusterthings", "responseKind": {"kind": "ClusterThing"},
                     "scope": "Cluster", "verbs": ["get", "list", "watch"]}]},
                {"version": "v1", "freshness": "Current", "resources": []}]},
            {"metadata": {"name": "metrics.k8s.io"}, "versions": [
                {"version": "v1beta1", "freshness": "Stale", "resources": []}]}]});
        let mut out = (Vec::new(), Vec::new());
        aggregated(&doc, &mut out);
        let (lists, unlisted) = out;
        let names: Vec<(&str, &str, usize)> = lists
            .iter()
            .map(|(g, v, rs)| (g.as_str(), v.as_str(), rs.len()))
            .collect();
        // The preferred version first, as the group lists them.
        assert_eq!(
            names,
            [("late.example.com", "v2", 2), ("late.example.com", "v1", 0)]
        );
        assert_eq!(
            unlisted,
            [("metrics.k8s.io".to_string(), "v1beta1".to_string())]
        );
        let gadgets = resolved("late.example.com", "v2", &lists[0].2[0]);
        assert_eq!(gadgets.kind, "Gadget");
        assert!(gadgets.namespaced);
        assert_eq!(verbs(&lists[0].2[0]), ["get", "list", "watch"]);
        let things = resolved("late.example.com", "v2", &lists[0].2[1]);
        assert_eq!(
            (things.kind.as_str(), things.namespaced),
            ("ClusterThing", false)
        );
    }
}
