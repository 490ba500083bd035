//! The Kubernetes API semantics r8s and its built-in upstream both speak:
//! paths, query parameters, selectors, continue tokens and `Status` errors.

pub mod continue_token;
pub mod gvr;
pub mod media;
pub mod params;
pub mod path;
pub mod query;
pub mod request;
pub mod selector;
pub mod shard;
pub mod status;
pub mod user;

pub use gvr::{ApiResource, Gvr};
pub use user::UserInfo;

use http::{HeaderValue, Response, StatusCode, header};

use crate::body::Body;

/// A JSON response with kube-apiserver's headers (`Content-Type`, `Cache-Control`).
pub fn json_response(code: StatusCode, body: Body) -> Response<Body> {
    let mut resp = Response::new(body);
    *resp.status_mut() = code;
    let h = resp.headers_mut();
    h.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    h.insert(
        header::CACHE_CONTROL,
        HeaderValue::from_static("no-cache, private"),
    );
    resp
}
