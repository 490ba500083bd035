//! # r8s: a watch cache for the Kubernetes API
//!
//! # Layout
//! - [`api`]: Kubernetes API semantics shared by every side: paths, list/watch
//!   options, selectors, continue tokens, `Status` errors.
//! - [`sim`]: the built-in upstream (an in-memory kube-apiserver for tests, demos
//!   and benchmarks). Nothing outside `sim` depends on it but [`demo`].
#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod api;
