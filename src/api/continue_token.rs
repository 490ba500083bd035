//! Continue tokens: one structure, two formats.
//!
//! A token is the unpadded base64url of `{"v":VERSION,"rv":N,"start":"<key>\u0000"}`,
//! as kube-apiserver's storage encodes it (`storage.EncodeContinue`); `rv`
//! is the list's resource version (-1: continue at the current state) and
//! `start` the key to resume at. The formats differ only in data:
//!
//! - [`Format::APISERVER`] (`meta.k8s.io/v1`): what the built-in upstream
//!   issues, decoded with the apiserver's 400 messages (`storage.DecodeContinue`).
//! - [`Format::R8S`] (`r8s.dev/v1`, with a checksum): what r8s issues for
//!   pages of its cache. r8s recognizes its own (an altered one is a 400) and
//!   passes any other token to the upstream. The resource version is the
//!   upstream's, so any r8s replica retaining that version can continue.
//!   Its tokens also carry how many items the list had left ([`Left`]), so
//!   that the next page's `remainingItemCount` is not counted again.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};

use super::status::Status;

/// A token format: its version string and whether it carries a checksum.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Format {
    version: &'static str,
    signed: bool,
}

impl Format {
    /// kube-apiserver's.
    pub const APISERVER: Format = Format {
        version: "meta.k8s.io/v1",
        signed: false,
    };
    /// r8s's own.
    pub const R8S: Format = Format {
        version: "r8s.dev/v1",
        signed: true,
    };

    /// FNV-1a over the version, the resource version, the key and what
    /// was left (when counted: tokens without it keep their checksum).
    fn checksum(self, rv: i64, start: &str, left: Option<&Left>) -> String {
        let mut h: u64 = 0xcbf29ce484222325;
        let left = left
            .into_iter()
            .flat_map(|l| l.items.to_le_bytes().into_iter().chain(l.namespace.bytes()));
        for b in self
            .version
            .bytes()
            .chain(rv.to_le_bytes())
            .chain(start.bytes())
            .chain(left)
        {
            h ^= u64::from(b);
            h = h.wrapping_mul(0x100000001b3);
        }
        format!("{h:016x}")
    }
}

#[derive(Serialize, Deserialize)]
struct Raw {
    v: String,
    rv: i64,
    start: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    left: Option<u64>,
    #[serde(default, rename = "in", skip_serializing_if = "Option::is_none")]
    namespace: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    sum: Option<String>,
}

/// A decoded continue token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContinueToken {
    /// The list's resource version; -1 means "continue at the current state".
    pub rv: i64,
    /// The key (relative to the list's prefix) to resume at, inclusive.
    pub start: String,
    /// What the list had left from `start` on, where it was counted (r8s's
    /// format only).
    pub left: Option<Left>,
}

/// How many items an unfiltered list had left after a page, and under which
/// namespace it counted them: the next page's `remainingItemCount` is this
/// less what that page takes, with no walk over the rest. The apiserver
/// counts with etcd; r8s would otherwise walk every item after each page.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Left {
    /// The items from the token's `start` on.
    pub items: u64,
    /// The namespace the list was under (`""`: all of them). A token used in
    /// another namespace's list does not count there.
    pub namespace: String,
}

/// Why a token does not decode in a format.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Invalid {
    /// Not base64url, from this byte on.
    NotBase64(usize),
    /// Not the token's JSON.
    NotJson(String),
    /// Another format's (its version).
    OtherVersion(String),
    /// A signed token whose checksum does not match.
    Altered,
    /// A resource version of 0.
    ZeroVersion,
    /// A key that is not a clean path (`..`, `//`).
    UncleanKey(String),
}

impl Invalid {
    /// Whether the token is simply not in the format asked for (another
    /// server's), rather than a broken one of its own.
    pub fn is_foreign(&self) -> bool {
        matches!(
            self,
            Invalid::NotBase64(_) | Invalid::NotJson(_) | Invalid::OtherVersion(_)
        )
    }

    /// The apiserver's 400 for a token of `format` that does not decode.
    pub fn into_status(self, format: Format) -> Status {
        let why = match self {
            Invalid::NotBase64(i) => format!("illegal base64 data at input byte {i}"),
            Invalid::NotJson(e) => e,
            Invalid::OtherVersion(v) => {
                // Unquoted, as kube-apiserver 1.36 writes it.
                format!("server does not recognize this encoded version {v}")
            }
            Invalid::Altered => "the token was altered".into(),
            Invalid::ZeroVersion => format!(
                "incorrect encoded start resourceVersion (version {})",
                format.version
            ),
            Invalid::UncleanKey(k) => k,
        };
        Status::bad_request(format!(
            "invalid continue token: continue key is not valid: {why}"
        ))
    }
}

impl ContinueToken {
    /// A token resuming after `last_key` of a list at `rv`.
    pub fn after(rv: i64, last_key: &str) -> Self {
        ContinueToken {
            rv,
            start: format!("{last_key}\u{0}"),
            left: None,
        }
    }

    /// This token, carrying what the list had left.
    pub fn with_left(self, left: Left) -> Self {
        ContinueToken {
            left: Some(left),
            ..self
        }
    }

    /// The token in `format`.
    pub fn encode(&self, format: Format) -> String {
        // Only a signed format carries the count: it is r8s's to trust.
        let left = self.left.as_ref().filter(|_| format.signed);
        let raw = Raw {
            v: format.version.into(),
            rv: self.rv,
            start: self.start.clone(),
            left: left.map(|l| l.items),
            namespace: left.map(|l| l.namespace.clone()),
            sum: format
                .signed
                .then(|| format.checksum(self.rv, &self.start, left)),
        };
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).expect("token serializes"))
    }

    /// Decodes a token of `format`, checking what the apiserver checks (and a
    /// signed format's checksum).
    pub fn decode(token: &str, format: Format) -> Result<Self, Invalid> {
        if let Some(i) = token
            .bytes()
            .position(|b| !(b.is_ascii_alphanumeric() || b == b'-' || b == b'_'))
        {
            return Err(Invalid::NotBase64(i));
        }
        let bytes = URL_SAFE_NO_PAD
            .decode(token)
            .map_err(|_| Invalid::NotBase64(token.len().saturating_sub(1)))?;
        let raw: Raw =
            serde_json::from_slice(&bytes).map_err(|e| Invalid::NotJson(e.to_string()))?;
        if raw.v != format.version {
            return Err(Invalid::OtherVersion(raw.v));
        }
        let left = match (raw.left, raw.namespace) {
            (Some(items), Some(namespace)) if format.signed => Some(Left { items, namespace }),
            _ => None,
        };
        if format.signed
            && raw.sum.as_deref() != Some(&format.checksum(raw.rv, &raw.start, left.as_ref()))
        {
            return Err(Invalid::Altered);
        }
        if raw.rv == 0 {
            return Err(Invalid::ZeroVersion);
        }
        if !is_clean(&raw.start) {
            return Err(Invalid::UncleanKey(raw.start));
        }
        Ok(ContinueToken {
            rv: raw.rv,
            start: raw.start,
            left,
        })
    }

    /// The 410 for a token whose version is no longer retained, carrying a
    /// replacement token (in the same format) that continues inconsistently
    /// from the same key, as the apiserver's storage answers.
    pub fn expired(&self, format: Format) -> Status {
        let mut s = Status::expired(
            "The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.",
        );
        s.continue_token = Some(
            ContinueToken {
                rv: -1,
                start: self.start.clone(),
                left: None,
            }
            .encode(format),
        );
        s
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

#[cfg(test)]
mod tests {
    use super::*;

    const APISERVER: Format = Format::APISERVER;
    const R8S: Format = Format::R8S;

    #[test]
    fn should_round_trip_the_apiservers_format() {
        let t = "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoicG9kLTAwMDExXHUwMDAwIn0";
        let d = ContinueToken::decode(t, APISERVER).unwrap();
        assert_eq!(d, ContinueToken::after(15821, "pod-00011"));
        assert_eq!(d.encode(APISERVER), t);
    }

    #[test]
    fn should_reject_bad_tokens_with_apiserver_messages() {
        let m = |t: &str| {
            ContinueToken::decode(t, APISERVER)
                .unwrap_err()
                .into_status(APISERVER)
                .message
        };
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
            "invalid continue token: continue key is not valid: server does not recognize this encoded version meta.k8s.io/v0"
        );
        assert_eq!(
            m("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MTU4MjEsInN0YXJ0IjoiLi4vbnMtMy9wb2QtMDAxMDMifQ"),
            "invalid continue token: continue key is not valid: ../ns-3/pod-00103"
        );
    }

    #[test]
    fn should_issue_replacement_token_on_expiry() {
        let s = ContinueToken::after(1, "pod-00102").expired(APISERVER);
        assert_eq!(
            s.continue_token.as_deref(),
            Some("eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6LTEsInN0YXJ0IjoicG9kLTAwMTAyXHUwMDAwIn0")
        );
        assert_eq!(s.code, 410);
        let r = ContinueToken::after(1, "pod-00102").expired(R8S);
        let replacement = ContinueToken::decode(r.continue_token.as_deref().unwrap(), R8S);
        assert_eq!(
            replacement.unwrap().rv,
            -1,
            "r8s's own, continuing at the current state"
        );
    }

    #[test]
    fn should_know_its_own_tokens_and_detect_tampering() {
        let t = ContinueToken::after(42, "ns-1/pod-7");
        assert_eq!(ContinueToken::decode(&t.encode(R8S), R8S), Ok(t.clone()));
        let mut raw: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(t.encode(R8S)).unwrap()).unwrap();
        raw["rv"] = serde_json::json!(41);
        let forged = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).unwrap());
        let e = ContinueToken::decode(&forged, R8S).unwrap_err();
        assert!(!e.is_foreign());
        assert_eq!(
            e.into_status(R8S).message,
            "invalid continue token: continue key is not valid: the token was altered"
        );
        let apiserver = t.encode(APISERVER);
        for foreign in [apiserver.as_str(), "garbage!!"] {
            let e = ContinueToken::decode(foreign, R8S).unwrap_err();
            assert!(e.is_foreign(), "{foreign}: {e:?}");
        }
        assert!(
            ContinueToken::decode(&t.encode(R8S), APISERVER)
                .unwrap_err()
                .is_foreign()
        );
    }

    #[test]
    fn should_carry_what_was_left_in_its_own_tokens_only() {
        let plain = ContinueToken::after(42, "pod-7");
        let t = plain.clone().with_left(Left {
            items: 1234,
            namespace: "ns-1".into(),
        });
        assert_eq!(ContinueToken::decode(&t.encode(R8S), R8S), Ok(t.clone()));
        assert_eq!(
            plain.encode(R8S),
            ContinueToken::after(42, "pod-7").encode(R8S),
            "a token without a count keeps the checksum it always had"
        );
        let mut raw: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(t.encode(R8S)).unwrap()).unwrap();
        for (field, forged) in [
            ("left", serde_json::json!(1)),
            ("in", serde_json::json!("ns-2")),
        ] {
            let mut r = raw.clone();
            r[field] = forged;
            let forged = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&r).unwrap());
            assert_eq!(
                ContinueToken::decode(&forged, R8S),
                Err(Invalid::Altered),
                "{field}"
            );
        }
        raw.as_object_mut().unwrap().remove("in");
        let half = URL_SAFE_NO_PAD.encode(serde_json::to_vec(&raw).unwrap());
        assert_eq!(ContinueToken::decode(&half, R8S), Err(Invalid::Altered));
        assert_eq!(
            ContinueToken::decode(&t.encode(APISERVER), APISERVER),
            Ok(plain),
            "the apiserver's format has no count"
        );
    }
}
