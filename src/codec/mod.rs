//! Wire encodings of what r8s serves from its cache.
//!
//! - [`gzip`]: gzip lists, their runs of items compressed once and reused.
//! - [`crc`]: gzip's CRC-32 of streams spliced from pieces compressed once.
//! - [`gunzip`]: gzip bodies read from the upstream, inflated as they arrive.
//! - [`run`]: those runs, kept on the item each starts at.
//! - [`json`]: list envelopes streamed from pre-serialized items.
//! - [`protobuf`]: the `k8s\0` envelope, lists, watch frames and bookmarks.

pub mod crc;
pub mod gunzip;
pub mod gzip;
pub mod json;
pub mod protobuf;
pub mod run;

/// A list's `metadata` (`ListMeta`), written at the head of its body in
/// either encoding ([`json::list_head`], [`protobuf::list_head_of`]).
#[derive(Debug, Clone, Copy)]
pub struct ListMeta<'a> {
    /// `resourceVersion`: the cache version the list is of.
    pub rv: u64,
    /// `continue`: the next page's token, when there is one.
    pub cont: Option<&'a str>,
    /// `remainingItemCount`, when it is known.
    pub remaining: Option<u64>,
    /// `shardInfo.selector`: the canonical shard selector the list was
    /// limited by (nothing in it needs escaping in JSON).
    pub shard: Option<&'a str>,
}

/// The `BOOKMARK` ending a streaming list's initial events, as the
/// upstream's Kubernetes version writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum InitialEnd {
    /// Annotated `k8s.io/initial-events-end: "true"` alone (1.34 on).
    #[default]
    Plain,
    /// With `k8s.io/initial-events-list-blueprint` too, the base64 of an
    /// empty list of the kind (1.32 and 1.33; kubernetes PR 132326 removed it).
    WithBlueprint,
}
