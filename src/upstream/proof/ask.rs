//! What a proof asks the upstream, through the upstream client: its
//! version of a resource (a one-object LIST), a probe watch to its
//! pre-deadline bookmark, and small JSON documents (`/version`, an
//! `APIService`).

use std::sync::Arc;
use std::time::Duration;

use http::StatusCode;
use serde::Deserialize;

use super::outcome::ProofError;
use crate::api::media::Encoding;
use crate::upstream::Upstream;
use crate::upstream::client::{ReadError, Reply};

/// The probe watch's `timeoutSeconds`: the upstream's bookmark comes 2 s
/// before that deadline, about a second after the probe starts.
pub const PROBE_TIMEOUT_SECONDS: u64 = 3;
/// The most of a one-object LIST or `/version` r8s reads.
const MAX_ANSWER: usize = 4 << 20;

/// `GET path` with r8s's credentials, answered 200 (`what` names it in the error).
async fn get(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &'static str,
    what: &'static str,
) -> Result<Reply, ProofError> {
    let reply = upstream
        .get(path, accept)
        .await
        .map_err(|e| ProofError::Upstream(e.to_string()))?;
    if reply.status() != StatusCode::OK {
        return Err(ProofError::Status {
            what,
            code: reply.status(),
        });
    }
    Ok(reply)
}

/// `GET path` with r8s's credentials, a JSON answer of at most [`MAX_ANSWER`].
pub async fn get_json<T: serde::de::DeserializeOwned>(
    upstream: &Arc<Upstream>,
    path: &str,
    accept: &'static str,
) -> Result<T, ProofError> {
    get(upstream, path, accept, "a GET")
        .await?
        .json(MAX_ANSWER)
        .await
        .map_err(|e| match e {
            ReadError::Json(_) => ProofError::Malformed("JSON answer"),
            e => ProofError::Upstream(e.to_string()),
        })
}

/// The metadata of a list or object: all a proof reads of either.
#[derive(Deserialize)]
struct Meta {
    metadata: MetaRv,
}

#[derive(Deserialize)]
struct MetaRv {
    #[serde(rename = "resourceVersion", default)]
    resource_version: String,
}

fn parse_rv(s: &str, what: &'static str) -> Result<u64, ProofError> {
    s.parse::<u64>()
        .ok()
        .filter(|rv| *rv > 0)
        .ok_or(ProofError::Malformed(what))
}

/// `X`: the upstream's current version of the resource at `path`, from a
/// consistent one-object LIST (metadata only).
pub async fn read_version(upstream: &Arc<Upstream>, path: &str) -> Result<u64, ProofError> {
    let list: Meta = get_json(
        upstream,
        &format!("{path}?limit=1"),
        "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json",
    )
    .await
    .map_err(|e| match e {
        ProofError::Status { code, .. } => ProofError::Status {
            what: "the one-object LIST",
            code,
        },
        e => e,
    })?;
    parse_rv(&list.metadata.resource_version, "LIST version")
}

/// One line of the probe's watch stream: its type and its object's version.
#[derive(Deserialize)]
struct ProbeEvent {
    #[serde(rename = "type")]
    kind: String,
    object: Meta,
}

/// Watches `path` (a collection, with a query where the cache is scoped) from `c` until the upstream's pre-deadline BOOKMARK at
/// `Y`: every change in (`c`, `Y`] came before it, the last at `L`.
/// Returns (max(`c`, `L`), `Y`): a store at the first is the upstream's
/// state at the second.
pub async fn probe(
    upstream: &Arc<Upstream>,
    path: &str,
    c: u64,
    within: Duration,
) -> Result<(u64, u64), ProofError> {
    let read = async {
        let sep = if path.contains('?') { '&' } else { '?' };
        let uri = format!(
            "{path}{sep}watch=1&allowWatchBookmarks=true&resourceVersion={c}&timeoutSeconds={PROBE_TIMEOUT_SECONDS}"
        );
        let reply = get(
            upstream,
            &uri,
            "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json",
            "the probe watch",
        )
        .await?;
        let mut lines = reply.units(Encoding::Json, MAX_ANSWER);
        let mut last = c;
        loop {
            let line = match lines.next().await {
                Ok(Some(line)) => line,
                Ok(None) => return Err(ProofError::EndedEarly),
                Err(ReadError::TooLong(_)) => {
                    return Err(ProofError::Malformed("watch line (too long)"));
                }
                Err(e) => return Err(ProofError::Upstream(e.to_string())),
            };
            let ev: ProbeEvent =
                serde_json::from_slice(&line).map_err(|_| ProofError::Malformed("watch line"))?;
            match ev.kind.as_str() {
                "ERROR" => return Err(ProofError::ErrorEvent),
                "BOOKMARK" => {
                    let y = parse_rv(&ev.object.metadata.resource_version, "bookmark")?;
                    if y < last {
                        return Err(ProofError::Malformed("bookmark older than an event"));
                    }
                    return Ok((last, y));
                }
                "ADDED" | "MODIFIED" | "DELETED" => {
                    let rv = parse_rv(&ev.object.metadata.resource_version, "event version")?;
                    last = last.max(rv);
                }
                _ => return Err(ProofError::Malformed("event type")),
            }
        }
    };
    tokio::time::timeout(within, read)
        .await
        .map_err(|_| ProofError::NoBookmark(within))?
}
