//! The Kubernetes API semantics r8s and its built-in upstream both speak:
//! paths, query parameters, selectors, continue tokens and `Status` errors.

pub mod continue_token;
pub mod params;
pub mod path;
pub mod selector;
pub mod status;
