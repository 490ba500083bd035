//! Continue tokens in kube-apiserver's format: unpadded base64url of
//! `{"v":"meta.k8s.io/v1","rv":N,"start":"<key>\u0000"}`.
//!
//! Using the apiserver's format means a token r8s issues is one the upstream
//! would also accept, and the error messages match (`reference/05_continue_tokens.txt`).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::status::Status;

const VERSION: &str = "meta.k8s.io/v1";

#[derive(Serialize, Deserialize)]
struct Raw {
    v: String,
    rv: i64,
    start: String,
}

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The list's resource version; -1 means "continue at the current state".
    pub rv: i64,
    /// The key (relative to the list's prefix) to resume at, inclusive.
    pub start: String,
}

impl ContinueToken {
    /// A token resuming after `last_key` of a list at `rv`.
    pub fn after(rv: i64, last_key: &str) -> Self {
        ContinueToken {
            rv,
            start: format!("{last_key}\u{0}"),
        }
    }

    /// The encoded token.
    pub fn encode(&self) -> String {
        let raw = Raw {
            v: VERSION.into(),
            rv: self.rv,
            start: self.start.clone(),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).expect("token serializes"))
    }

    /// Decodes a token; failures are the apiserver's 400 `BadRequest`.
    pub fn decode(token: &str) -> Result<Self, Status> {
        let bad = |m: String| {
            Status::bad_request(format!(
                "invalid continue token: continue key is not valid: {m}"
            ))
        };
        if let Some(i) = token
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        {
            return Err(bad(format!("illegal base64 data at input byte {i}")));
        }
        let bytes = URL_SAFE_NO_PAD.decode(token).map_err(|_| {
            bad(format!(
                "illegal base64 data at input byte {}",
                token.len().saturating_sub(1)
            ))
        })?;
        let raw: Raw = serde_json::from_slice(&bytes).map_err(|e| bad(e.to_string()))?;
        if raw.v != VERSION {
            return Err(bad(format!(
                "server does not recognize this encoded version \"{}\"",
                raw.v
            )));
        }
        if raw.rv == 0 {
            return Err(bad(format!(
                "incorrect encoded start resourceVersion (version {VERSION})"
            )));
        }
        if !is_clean(&raw.start) {
            return Err(bad(raw.start));
        }
        Ok(ContinueToken {
            rv: raw.rv,
            start: raw.start,
        })
    }
}

/// Go's `path.Clean(p) == p` for the keys tokens carry.
fn is_clean(p: &str) -> bool {
    !(p.is_empty()
        || p == "."
        || p == ".."
        || p.starts_with("../")
        || p.starts_with("./")
        || p.contains("//")
        || p.contains("/./")
        || p.contains("/../")
        || p.ends_with("/.")
        || p.ends_with("/..")
        || p.ends_with('/'))
}

/// The 410 for a token whose version is no longer retained, carrying a
/// replacement token that continues inconsistently from the same key.
pub fn expired(token: &ContinueToken) -> Status {
    let mut s = Status::expired(
        "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
    );
    s.continue_token = Some(
        ContinueToken {
            rv: -1,
            start: token.start.clone(),
        }
        .encode(),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_round_trip_the_apiservers_format() {
        let t = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMDExXHUwMDAwIn0";
        let d = ContinueToken::decode(t).unwrap();
        assert_eq!(d, ContinueToken::after(15821, "pod-00011"));
        assert_eq!(d.encode(), t);
    }

    #[test]
    fn should_reject_bad_tokens_with_apiserver_messages() {
        let m = |t: &str| ContinueToken::decode(t).unwrap_err().message;
        assert_eq!(
            m("garbage!!"),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 7"
        );
        assert_eq!(
            m("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MSwic3RhcnQiOiJwb2QtMDAxMDJcdTAwMDAifQ=="),
            "invalid continue token: continue key is not valid: illegal base64 data at input byte 74"
        );
        assert_eq!(
            m("eyJ2IjoibWV0YS5rOHMuaW8vdjAiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMTAyXHUwMDAwIn0"),
            "invalid continue token: continue key is not valid: server does not recognize this encoded version \"meta.k8s.io/v0\""
        );
        assert_eq!(
            m("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoiLi4vbnMtMy9wb2QtMDAxMDMifQ"),
            "invalid continue token: continue key is not valid: ../ns-3/pod-00103"
        );
    }

    #[test]
    fn should_issue_replacement_token_on_expiry() {
        let s = expired(&ContinueToken::after(1, "pod-00102"));
        assert_eq!(
            s.continue_token.as_deref(),
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoicG9kLTAwMTAyXHUwMDAwIn0")
        );
        assert_eq!(s.code, 410);
    }
}
