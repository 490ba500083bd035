//! What became of a request, in one vocabulary: answered from the cache,
//! passed to the upstream (for a reason, when the resource is cached), or
//! refused. The cached paths (`read`, `watch`) return it; only
//! the finish (`super::exchange::Exchange::finish`) turns it into the
//! `X-R8s-Cache` header and metrics.

use http::{HeaderName, HeaderValue, Response};

use crate::auth::Refusal;
use crate::body::Body;

/// The response header saying where an answer came from (`hit` or `pass`).
pub const CACHE_HEADER: HeaderName = HeaderName::from_static("x-r8s-cache");

/// Why a request for a cached resource went to the upstream.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum PassReason {
    /// Not a get, list or watch of the resource itself (writes, subresources).
    Verb,
    /// No `resourceVersion`: a "Most Recent" read, which only the upstream can answer.
    MostRecent,
    /// The cache has not synced yet.
    NotSynced,
    /// The cache has heard nothing from its upstream for longer than
    /// `cache.max_staleness_seconds` (a silent partition, a stalled upstream).
    Stale,
    /// The cache was evicted for its byte budget.
    OverBudget,
    /// The resource's versions are not integers: it is never cached.
    NotCacheable,
    /// The resource is no longer served upstream: its cache was retired
    /// (a request that found it just before).
    Removed,
    /// An `Accept` the cache does not answer (YAML, CBOR, a Table watch,
    /// unknown).
    MediaType,
    /// A Table of a kind r8s has no printer for, or of an object its printer
    /// could not read: the upstream prints it.
    NoPrinter,
    /// An encoding the resource is not cached in: protobuf without
    /// `protobuf` in `cache.encodings`.
    Encoding,
    /// A request the apiserver would reject: it gives its own error.
    Invalid,
    /// A field selector on a field the cache does not hold: a custom
    /// resource's field its CRD did not name selectable when the cache
    /// started (or r8s does not read its CRD: `customresourcedefinitions`
    /// not in `cache.resources`), or one asked of its protobuf store, which
    /// holds metadata only.
    FieldSelector,
    /// A request outside a scoped cache (`node.name`): a list or watch of
    /// pods or nodes whose field selector does not require the node's
    /// name, or a get of an object the cache does not hold.
    OutOfScope,
    /// "Not older than" a version the cache did not reach in time (`read.on_too_new = "pass"`).
    TooNew,
    /// An Exact read of a version the cache no longer retains.
    NotRetained,
    /// A continue token r8s did not issue (the apiserver's own).
    ForeignContinue,
    /// A watch from a version older than the watch log (`watch.on_too_old = "pass"`).
    TooOld,
    /// A consistent read whose proof failed or did not complete within
    /// `read.prove_timeout_seconds` (or recent proofs of the resource failed).
    Unproven,
    /// A consistent read r8s does not prove: an upstream older than 1.31
    /// (`auto`), or an aggregated API.
    Unprovable,
}

impl PassReason {
    /// Every reason, in the order `docs/caching.md` lists them.
    pub const ALL: [PassReason; 19] = [
        PassReason::Verb,
        PassReason::MostRecent,
        PassReason::NotSynced,
        PassReason::Stale,
        PassReason::OverBudget,
        PassReason::NotCacheable,
        PassReason::Removed,
        PassReason::MediaType,
        PassReason::NoPrinter,
        PassReason::Encoding,
        PassReason::Invalid,
        PassReason::FieldSelector,
        PassReason::OutOfScope,
        PassReason::TooNew,
        PassReason::NotRetained,
        PassReason::ForeignContinue,
        PassReason::TooOld,
        PassReason::Unproven,
        PassReason::Unprovable,
    ];

    /// Its name in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            PassReason::Verb => "verb",
            PassReason::MostRecent => "most_recent",
            PassReason::NotSynced => "not_synced",
            PassReason::Stale => "stale",
            PassReason::OverBudget => "over_budget",
            PassReason::NotCacheable => "not_cacheable",
            PassReason::Removed => "removed",
            PassReason::MediaType => "media_type",
            PassReason::NoPrinter => "no_printer",
            PassReason::Encoding => "encoding",
            PassReason::Invalid => "invalid",
            PassReason::FieldSelector => "field_selector",
            PassReason::OutOfScope => "out_of_scope",
            PassReason::TooNew => "too_new",
            PassReason::NotRetained => "not_retained",
            PassReason::ForeignContinue => "foreign_continue",
            PassReason::TooOld => "too_old",
            PassReason::Unproven => "unproven",
            PassReason::Unprovable => "unprovable",
        }
    }
}

/// How the cache answered a request for a cached resource.
pub enum Answer {
    /// Served from the cache (an object, a list, a watch, or the apiserver's
    /// own error for it, such as 404 or 410).
    Hit(Response<Body>),
    /// For the upstream to answer.
    Pass(PassReason),
    /// The caller may not read it (403), or its access could not be checked (503).
    Refused(Refusal),
}

/// The `result` of a request for a cached resource (`r8s_cache_requests_total`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CacheResult {
    /// Served from the cache.
    Hit,
    /// Refused by r8s's authorization.
    Refused,
    /// Passed to the upstream.
    Pass(PassReason),
}

impl CacheResult {
    /// Every result, as `docs/caching.md` lists them.
    pub fn all() -> impl Iterator<Item = CacheResult> {
        [CacheResult::Hit, CacheResult::Refused]
            .into_iter()
            .chain(PassReason::ALL.map(CacheResult::Pass))
    }

    /// Its name in metrics.
    pub fn as_str(self) -> &'static str {
        match self {
            CacheResult::Hit => "hit",
            CacheResult::Refused => "refused",
            CacheResult::Pass(r) => r.as_str(),
        }
    }

    /// What the audit record says became of the request.
    pub fn audited(self) -> crate::audit::Outcome {
        match self {
            CacheResult::Hit => crate::audit::Outcome::Hit,
            CacheResult::Refused => crate::audit::Outcome::Refused,
            CacheResult::Pass(r) => crate::audit::Outcome::Pass(r.as_str()),
        }
    }

    /// Where its response comes from.
    pub fn origin(self) -> Origin {
        match self {
            CacheResult::Hit => Origin::Cache,
            CacheResult::Refused => Origin::Auth,
            CacheResult::Pass(_) => Origin::Upstream,
        }
    }
}

/// Where a response came from: its `X-R8s-Cache` header and the `cache`
/// label of `r8s_requests_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// r8s's cache (`hit`).
    Cache,
    /// The upstream (`pass`).
    Upstream,
    /// r8s's authentication or authorization refused it (`auth`; no header).
    Auth,
}

impl Origin {
    /// The `cache` label of `r8s_requests_total`.
    pub fn label(self) -> &'static str {
        match self {
            Origin::Cache => "hit",
            Origin::Upstream => "pass",
            Origin::Auth => "auth",
        }
    }

    /// The `X-R8s-Cache` value, if any.
    pub fn header(self) -> Option<HeaderValue> {
        match self {
            Origin::Cache => Some(HeaderValue::from_static("hit")),
            Origin::Upstream => Some(HeaderValue::from_static("pass")),
            Origin::Auth => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The table of results in `docs/caching.md` names exactly the values r8s records.
    #[test]
    fn should_match_the_readme_table_of_results() {
        let readme = include_str!("../../docs/caching.md");
        let start = readme
            .find("| `result` | `X-R8s-Cache` |")
            .expect("docs/caching.md has the table of results");
        let rows: Vec<(String, String)> = readme[start..]
            .lines()
            .skip(2)
            .take_while(|l| l.starts_with('|'))
            .map(|l| {
                let cells: Vec<&str> = l.split('|').map(str::trim).collect();
                (
                    cells[1].trim_matches('`').to_string(),
                    cells[2].trim_matches('`').to_string(),
                )
            })
            .collect();
        let want: Vec<(String, String)> = CacheResult::all()
            .map(|r| {
                let header = r.origin().header();
                let header = header.as_ref().map_or("(none)", |h| h.to_str().unwrap());
                (r.as_str().to_string(), header.to_string())
            })
            .collect();
        assert_eq!(rows, want);
    }
}
