//! Continue tokens: one structure, two formats.
//!
//! A token is the unpadded base64url of `{"v":VERSION,"rv":N,"start":"<key>\u0000"}`,
//! as kube-apiserver's storage encodes it (`storage.EncodeContinue`); `rv`
//! is the list's resource version (-1: continue at the current state) and
//! `start` the key to resume at. The formats differ only in data:
//!
//! - [`Format::APISERVER`] (`meta.k8s.io/v1`): what the built-in upstream
//!   issues, decoded with the apiserver's 400 messages (`storage.DecodeContinue`).
//! - [`Format::R8S`] (`r8s.dev/v1`, with a keyed checksum): what r8s issues
//!   for pages of its cache. r8s recognizes its own format and passes any
//!   other token to the upstream. The resource version is the upstream's, so
//!   any r8s replica retaining that version can continue; the version and
//!   key are checked as the apiserver checks its own (a version of 0 or
//!   below -1, a key that is empty, absolute or not clean: its 400). Its
//!   tokens also carry how many items the list had left ([`Left`]), so that
//!   the next page's `remainingItemCount` is not counted again: that count
//!   is believed only under the checksum, an HMAC under a key this process
//!   made and never shows, so nothing of a token r8s did not write (forged,
//!   or another replica's) is echoed; such a token's page is counted anew.

use std::sync::LazyLock;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use ring::hmac;
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

    /// An HMAC-SHA256 (under [`KEY`], 8 bytes of it in hex) over the
    /// version, the resource version, the key and what was left.
    fn checksum(self, rv: i64, start: &str, left: Option<&Left>) -> String {
        let mut ctx = hmac::Context::with_key(&KEY);
        ctx.update(self.version.as_bytes());
        ctx.update(&rv.to_le_bytes());
        ctx.update(&(start.len() as u64).to_le_bytes());
        ctx.update(start.as_bytes());
        if let Some(l) = left {
            ctx.update(&l.items.to_le_bytes());
            ctx.update(l.namespace.as_bytes());
        }
        let tag = ctx.sign();
        tag.as_ref()[..8]
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }
}

/// The key r8s's own tokens are checksummed under: made at start, never
/// stored or shown, so only this process can write a checksum it accepts.
static KEY: LazyLock<hmac::Key> = LazyLock::new(|| {
    let mut key = [0u8; 32];
    if ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut key).is_err() {
        // No OS randomness: the key still differs per process.
        for chunk in key.chunks_mut(8) {
            chunk.copy_from_slice(&fastrand::u64(..).to_le_bytes());
        }
    }
    hmac::Key::new(hmac::HMAC_SHA256, &key)
});

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
    /// A resource version of 0 (or, in r8s's format, below -1: r8s writes
    /// only a list's version, or -1 for "the current state").
    BadVersion,
    /// An empty key.
    EmptyKey,
    /// A key that is not a clean path (`..`, `//`; in r8s's format, one
    /// that is not relative).
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
            Invalid::BadVersion => format!(
                "incorrect encoded start resourceVersion (version {})",
                format.version
            ),
            Invalid::EmptyKey => format!("encoded start key empty (version {})", format.version),
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

    /// Decodes a token of `format`, checking what the apiserver checks; a
    /// signed format's count of what was left is kept only under its
    /// checksum (a token this process wrote).
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
        let left = left
            .filter(|l| raw.sum.as_deref() == Some(&format.checksum(raw.rv, &raw.start, Some(l))));
        if raw.rv == 0 || (format.signed && raw.rv < -1) {
            return Err(Invalid::BadVersion);
        }
        if raw.start.is_empty() {
            return Err(Invalid::EmptyKey);
        }
        // `storage.DecodeContinue`: a key made absolute, then cleaned, must
        // be unchanged (the apiserver's own accept one leading slash; r8s
        // writes none).
        let relative = match raw.start.strip_prefix('/') {
            Some(rest) if !format.signed => rest,
            Some(_) => return Err(Invalid::UncleanKey(raw.start)),
            None => raw.start.as_str(),
        };
        if !relative.is_empty() && !is_clean(relative) {
            return Err(Invalid::UncleanKey(raw.start));
        }
        let start = relative.to_string();
        Ok(ContinueToken {
            rv: raw.rv,
            start,
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

/// Go's `path.Clean("/" + p) == "/" + p` for the keys tokens carry.
fn is_clean(p: &str) -> bool {
    !(p.is_empty()
        || p.starts_with('/')
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

    /// A token of `format` with these raw fields.
    fn raw_token(v: serde_json::Value) -> String {
        URL_SAFE_NO_PAD.encode(serde_json::to_vec(&v).unwrap())
    }

    fn fields(token: &str) -> serde_json::Value {
        serde_json::from_slice(&URL_SAFE_NO_PAD.decode(token).unwrap()).unwrap()
    }

    #[test]
    fn should_know_its_own_tokens_and_check_them_as_the_apiserver_does() {
        let t = ContinueToken::after(42, "ns-1/pod-7");
        assert_eq!(ContinueToken::decode(&t.encode(R8S), R8S), Ok(t.clone()));
        // Another version or key is a list continued there, as the
        // apiserver continues its own tokens.
        let mut raw = fields(&t.encode(R8S));
        raw["rv"] = serde_json::json!(41);
        assert_eq!(ContinueToken::decode(&raw_token(raw), R8S).unwrap().rv, 41);
        // What the apiserver refuses, and what r8s never writes: a version of
        // 0 or below -1, an empty key, one not relative or not clean.
        let m = |rv: i64, start: &str| {
            let raw = serde_json::json!({"v": "r8s.dev/v1", "rv": rv, "start": start});
            ContinueToken::decode(&raw_token(raw), R8S).map_err(|e| e.into_status(R8S).message)
        };
        let bad_rv = "invalid continue token: continue key is not valid: \
                      incorrect encoded start resourceVersion (version r8s.dev/v1)";
        assert_eq!(m(0, "a"), Err(bad_rv.into()));
        assert_eq!(m(-7, "a"), Err(bad_rv.into()));
        assert_eq!(m(-1, "a").unwrap().rv, -1, "the current state");
        assert_eq!(
            m(5, ""),
            Err(
                "invalid continue token: continue key is not valid: encoded start key empty \
                 (version r8s.dev/v1)"
                    .into()
            )
        );
        for key in ["/ns-1/pod-7", "//x", "ns-1/../x", "../x", "ns-1/", "./x"] {
            assert_eq!(
                m(5, key),
                Err(format!(
                    "invalid continue token: continue key is not valid: {key}"
                )),
                "{key}"
            );
        }
        // The apiserver's own format takes one leading slash (DecodeContinue).
        let own = |start: &str| {
            let raw = serde_json::json!({"v": "meta.k8s.io/v1", "rv": 5, "start": start});
            ContinueToken::decode(&raw_token(raw), APISERVER).map(|t| t.start)
        };
        assert_eq!(own("/ns-1/p\u{0}"), Ok("ns-1/p\u{0}".to_string()));
        assert!(own("//ns-1/p").is_err());
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
    fn should_believe_what_was_left_only_in_tokens_it_wrote() {
        let plain = ContinueToken::after(42, "pod-7");
        let t = plain.clone().with_left(Left {
            items: 1234,
            namespace: "ns-1".into(),
        });
        assert_eq!(ContinueToken::decode(&t.encode(R8S), R8S), Ok(t.clone()));
        // Altered, or written without this process's key (forged, or
        // another replica's): the rest of the token holds, the count is
        // not believed.
        let raw = fields(&t.encode(R8S));
        for (field, forged) in [
            ("left", serde_json::json!(1)),
            ("in", serde_json::json!("ns-2")),
            ("sum", serde_json::json!("0123456789abcdef")),
        ] {
            let mut r = raw.clone();
            r[field] = forged;
            assert_eq!(
                ContinueToken::decode(&raw_token(r), R8S),
                Ok(plain.clone()),
                "{field}"
            );
        }
        let mut half = raw.clone();
        half.as_object_mut().unwrap().remove("in");
        assert_eq!(
            ContinueToken::decode(&raw_token(half), R8S),
            Ok(plain.clone())
        );
        assert_eq!(
            ContinueToken::decode(&t.encode(APISERVER), APISERVER),
            Ok(plain),
            "the apiserver's format has no count"
        );
    }
}
