//! The watch cache: per resource, a versioned store kept current by a reflector.
//!
//! - [`object`]: a cached object (upstream bytes + parsed metadata).
//! - [`store`]: immutable versions, one writer, lock-free readers.

pub mod object;
pub mod store;
