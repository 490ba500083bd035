//! r8s's own continue tokens: opaque to clients, versioned, tamper-evident.
//!
//! `base64url({"v":"r8s.dev/v1","rv":N,"start":"<key>\u0000","sum":"<fnv64>"})`.
//! The resource version is the upstream's, so any r8s replica that retains
//! that version can continue the list; tokens in the apiserver's own format
//! are recognized as foreign and passed through.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use crate::api::status::Status;

const VERSION: &str = "r8s.dev/v1";

#[derive(Serialize, Deserialize)]
struct Raw {
    v: String,
    rv: i64,
    start: String,
    #[serde(default)]
    sum: String,
}

fn checksum(rv: i64, start: &str) -> String {
    let mut h: u64 = 0xcbf29ce484222325;
    for b in VERSION.bytes().chain(rv.to_le_bytes()).chain(start.bytes()) {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x100000001b3);
    }
    format!("{h:016x}")
}

/// A decoded r8s continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The list's resource version (-1: continue at the current version).
    pub rv: i64,
    /// The key to resume at (inclusive; the last key plus `\0`).
    pub start: String,
}

impl Token {
    /// A token resuming after `last_key` of a list at `rv`.
    pub fn after(rv: u64, last_key: &str) -> Self {
        Token {
            rv: rv as i64,
            start: format!("{last_key}\u{0}"),
        }
    }

    /// The encoded token.
    pub fn encode(&self) -> String {
        let raw = Raw {
            v: VERSION.into(),
            rv: self.rv,
            start: self.start.clone(),
            sum: checksum(self.rv, &self.start),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).expect("token serializes"))
    }

    /// `Ok(Some)` for an intact r8s token, `Ok(None)` for anything r8s did not
    /// issue (pass it through), `Err` for an r8s token that was altered.
    pub fn decode(token: &str) -> Result<Option<Self>, Status> {
        let Ok(bytes) = URL_SAFE_NO_PAD.decode(token) else {
            return Ok(None);
        };
        let Ok(raw) = serde_json::from_slice::<Raw>(&bytes) else {
            return Ok(None);
        };
        if raw.v != VERSION {
            return Ok(None);
        }
        if raw.sum != checksum(raw.rv, &raw.start) || raw.rv == 0 {
            return Err(Status::bad_request(
                "invalid continue token: continue key is not valid: the token was altered",
            ));
        }
        Ok(Some(Token {
            rv: raw.rv,
            start: raw.start,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_round_trip_and_detect_tampering() {
        let t = Token::after(42, "ns-1/pod-7");
        assert_eq!(Token::decode(&t.encode()).unwrap(), Some(t.clone()));
        let mut raw: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(t.encode()).unwrap()).unwrap();
        raw["rv"] = serde_json::json!(41);
        let forged = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).unwrap());
        assert!(Token::decode(&forged).is_err());
        let apiserver =
            "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMDExXHUwMDAwIn0";
        assert_eq!(
            Token::decode(apiserver).unwrap(),
            None,
            "the apiserver's tokens are foreign"
        );
        assert_eq!(Token::decode("garbage!!").unwrap(), None);
    }
}
