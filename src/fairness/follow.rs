//! Keeps the classifier in force equal to the cluster's priority and
//! fairness configuration: its FlowSchemas and PriorityLevelConfigurations
//! (`flowcontrol.apiserver.k8s.io`, the version discovery prefers) listed
//! with r8s's own credentials, then watched; any change lists both again
//! and replaces the classifier. Where the upstream serves no such group, or
//! r8s may not read it, the apiserver's own configuration is in force
//! (said once in the log) and the group is asked for again every minute; a
//! request that fails (an upstream outage) leaves the last read in force.

use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;

use super::classify::Classifier;
use super::current::Writer;
use super::schema::{FlowSchema, PriorityLevel};
use crate::api::media::Encoding;
use crate::shutdown::Signal;
use crate::upstream::Upstream;

/// The group's discovery document.
const GROUP: &str = "/apis/flowcontrol.apiserver.k8s.io";
/// How long the group is not asked for again once it is not there.
const ABSENT_RETRY: Duration = Duration::from_secs(60);
/// Between attempts after an error.
const ERROR_RETRY: Duration = Duration::from_secs(5);
/// The most an answer (a list, a watch event) may hold.
const MAX_BYTES: usize = 8 << 20;
/// How long each watch is asked to last.
const WATCH_SECONDS: u32 = 300;

/// Why the configuration could not be read this time.
#[derive(Debug, thiserror::Error)]
enum FollowError {
    /// The upstream serves no flowcontrol group, or r8s may not read it
    /// (the status).
    #[error("GET {0}: {1}")]
    Absent(String, u16),
    /// Anything else: a failed request, an answer that does not parse.
    #[error("{0}")]
    Failed(String),
}

/// One listing: the objects, and the versions to watch from.
struct Listed {
    schemas: Vec<FlowSchema>,
    levels: Vec<PriorityLevel>,
    version: String,
    rvs: [String; 2],
}

/// Follows the configuration until `shutdown`, replacing the classifier
/// through `writer`.
pub async fn run(upstream: Arc<Upstream>, writer: Writer, shutdown: Signal) {
    // The last failure said (each said once), and whether the cluster's
    // configuration is in force (kept through a failed request: an
    // upstream outage does not change how requests are classified).
    let (mut said, mut following) = (None::<String>, false);
    loop {
        let wait = match list(&upstream).await {
            Ok(listed) => {
                let (s, l) = (listed.schemas.len(), listed.levels.len());
                writer.set(Classifier::new(listed.schemas, listed.levels));
                if !following {
                    tracing::info!(flow_schemas = s, priority_levels = l, version = %listed.version, "priority and fairness: classifying by the cluster's configuration");
                }
                (said, following) = (None, true);
                tokio::select! {
                    watched = watch(&upstream, &listed.version, &listed.rvs) => match watched {
                        Watched::Changed => Duration::ZERO,
                        Watched::Ended => Duration::from_secs(1),
                        Watched::Failed => ERROR_RETRY,
                    },
                    _ = shutdown.wait() => return,
                }
            }
            Err(e) => {
                let text = e.to_string();
                let absent = matches!(e, FollowError::Absent(..));
                if said.as_deref() != Some(text.as_str()) {
                    match (absent, following) {
                        (false, true) => {
                            tracing::warn!(error = %text, "priority and fairness: the cluster's configuration could not be read again; the last read stays in force")
                        }
                        _ => {
                            tracing::warn!(error = %text, "priority and fairness: classifying by kube-apiserver's own configuration (mandatory and suggested) until the cluster's can be read")
                        }
                    }
                    said = Some(text);
                }
                if absent || !following {
                    writer.set(Classifier::builtin());
                    following = false;
                }
                match absent {
                    true => ABSENT_RETRY,
                    false => ERROR_RETRY,
                }
            }
        };
        tokio::select! {
            _ = tokio::time::sleep(wait) => {}
            _ = shutdown.wait() => return,
        }
    }
}

/// `GET path` as JSON, or why not.
async fn get(upstream: &Arc<Upstream>, path: &str) -> Result<Value, FollowError> {
    let reply = upstream
        .get(path, "application/json")
        .await
        .map_err(|e| FollowError::Failed(e.to_string()))?;
    match reply.status().as_u16() {
        200 => reply
            .json(MAX_BYTES)
            .await
            .map_err(|e| FollowError::Failed(format!("GET {path}: {e}"))),
        s @ (401 | 403 | 404) => Err(FollowError::Absent(path.to_string(), s)),
        s => Err(FollowError::Failed(format!("GET {path}: {s}"))),
    }
}

/// Both resources listed, in the version discovery prefers.
async fn list(upstream: &Arc<Upstream>) -> Result<Listed, FollowError> {
    let group = get(upstream, GROUP).await?;
    let version = group["preferredVersion"]["version"]
        .as_str()
        .ok_or_else(|| FollowError::Failed(format!("GET {GROUP}: no preferredVersion")))?
        .to_string();
    let base = format!("{GROUP}/{version}");
    let schemas = get(upstream, &format!("{base}/flowschemas")).await?;
    let levels = get(upstream, &format!("{base}/prioritylevelconfigurations")).await?;
    let items = |v: &Value| v["items"].as_array().cloned().unwrap_or_default();
    let rv = |v: &Value| {
        v["metadata"]["resourceVersion"]
            .as_str()
            .unwrap_or("")
            .to_string()
    };
    // An object the apiserver would ignore as broken is left out, said.
    let parsed_schemas = items(&schemas)
        .iter()
        .filter_map(|o| {
            FlowSchema::from_json(o)
                .inspect_err(
                    |e| tracing::warn!(error = %e, "priority and fairness: a FlowSchema left out"),
                )
                .ok()
        })
        .collect();
    let parsed_levels = items(&levels)
        .iter()
        .filter_map(|o| {
            PriorityLevel::from_json(o)
                .inspect_err(|e| tracing::warn!(error = %e, "priority and fairness: a priority level left out"))
                .ok()
        })
        .collect();
    Ok(Listed {
        schemas: parsed_schemas,
        levels: parsed_levels,
        rvs: [rv(&schemas), rv(&levels)],
        version,
    })
}

/// How a watch of the configuration ended.
enum Watched {
    /// An event other than a bookmark: something changed (or an `ERROR`,
    /// such as a version too old: either way, list again).
    Changed,
    /// The stream ended (its timeout, a closed connection).
    Ended,
    /// It could not be opened (a failed request, a status other than 200).
    Failed,
}

/// Watches both resources from their lists' versions; returns at the first
/// change (any event but a bookmark), or when either watch ends or fails.
async fn watch(upstream: &Arc<Upstream>, version: &str, rvs: &[String; 2]) -> Watched {
    let one = |resource: &'static str, rv: &str| {
        let path = format!(
            "{GROUP}/{version}/{resource}?watch=1&allowWatchBookmarks=true&timeoutSeconds={WATCH_SECONDS}&resourceVersion={rv}"
        );
        async move {
            let Ok(reply) = upstream.get(&path, "application/json").await else {
                return Watched::Failed;
            };
            if reply.status() != http::StatusCode::OK {
                return Watched::Failed;
            }
            let mut units = reply.units(Encoding::Json, MAX_BYTES);
            while let Ok(Some(line)) = units.next().await {
                let kind = serde_json::from_slice::<Value>(&line)
                    .ok()
                    .and_then(|v| v["type"].as_str().map(str::to_string));
                if kind.as_deref() != Some("BOOKMARK") {
                    return Watched::Changed;
                }
            }
            Watched::Ended
        }
    };
    tokio::select! {
        w = one("flowschemas", &rvs[0]) => w,
        w = one("prioritylevelconfigurations", &rvs[1]) => w,
    }
}
