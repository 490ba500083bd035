//! Wire encodings of what r8s serves from its cache.
//!
//! - [`json`]: list envelopes streamed from pre-serialized items.
//! - [`protobuf`]: the `k8s\0` envelope, lists, watch frames and bookmarks.

pub mod json;
pub mod protobuf;
