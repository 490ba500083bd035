//! The media type of an answer, negotiated from the request's `Accept` and
//! `Accept-Encoding` once, with the rest of the request.
//!
//! The cache serves JSON; anything else (Table, YAML, protobuf) is the
//! upstream's to negotiate, 406 included.

use http::{HeaderMap, header};

/// A media type the cache answers in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MediaType {
    /// `application/json`.
    Json,
}

/// What `Accept` asks for, if the cache can answer it: its first entry must
/// take plain JSON (absent, `*/*`, `application/*` and `application/json`
/// do, with no parameters but `q` and `charset`).
pub fn negotiate(headers: &HeaderMap) -> Option<MediaType> {
    let Some(accept) = headers.get(header::ACCEPT).and_then(|v| v.to_str().ok()) else {
        return Some(MediaType::Json);
    };
    let first = accept.split(',').next().unwrap_or("").trim();
    if first.is_empty() {
        return Some(MediaType::Json);
    }
    let mut parts = first.split(';').map(str::trim);
    let mime = parts.next().unwrap_or("");
    let params_ok = parts.all(|p| p.starts_with("q=") || p.starts_with("charset="));
    (params_ok && matches!(mime, "application/json" | "*/*" | "application/*"))
        .then_some(MediaType::Json)
}

/// Whether the client takes a gzipped body (`Accept-Encoding: gzip`, not `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut p = e.split(';').map(str::trim);
            p.next() == Some("gzip") && p.all(|q| q != "q=0")
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with(name: header::HeaderName, v: &str) -> HeaderMap {
        let mut h = HeaderMap::new();
        h.insert(name, v.parse().unwrap());
        h
    }

    #[test]
    fn should_take_json_first_and_gzip_unless_refused() {
        assert_eq!(negotiate(&HeaderMap::new()), Some(MediaType::Json));
        for a in [
            "application/json",
            "*/*",
            "application/json;q=0.9, */*",
            "application/*",
        ] {
            assert_eq!(
                negotiate(&with(header::ACCEPT, a)),
                Some(MediaType::Json),
                "{a}"
            );
        }
        for a in [
            "application/vnd.kubernetes.protobuf, */*",
            "application/json;as=Table;v=v1;g=meta.k8s.io",
            "application/yaml",
        ] {
            assert_eq!(negotiate(&with(header::ACCEPT, a)), None, "{a}");
        }
        assert!(accepts_gzip(&with(header::ACCEPT_ENCODING, "br, gzip")));
        assert!(!accepts_gzip(&with(header::ACCEPT_ENCODING, "gzip;q=0")));
        assert!(!accepts_gzip(&HeaderMap::new()));
    }
}
