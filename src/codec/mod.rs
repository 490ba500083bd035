//! Wire encodings of what r8s serves from its cache.
//!
//! - [`json`]: list envelopes streamed from pre-serialized items.

pub mod json;
