//! The query string: decoded once per request, here and nowhere else, and
//! built here for the requests r8s sends upstream.

use super::status::Status;

/// A decoded query string: every `key=value` pair in order (as Go's
/// `url.ParseQuery` keeps them).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Query {
    pairs: Vec<(String, String)>,
}

/// Go's `url.QueryUnescape`: `+` is a space, `%XX` a byte; `None` for a
/// malformed escape. Bytes that are not UTF-8 become U+FFFD (nothing r8s
/// matches them against could hold them either).
fn query_unescape(s: &str) -> Option<String> {
    if !s.contains(['%', '+']) {
        return Some(s.to_string());
    }
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'%' => {
                let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
                if !hex.bytes().all(|c| c.is_ascii_hexdigit()) {
                    return None;
                }
                out.push(u8::from_str_radix(hex, 16).ok()?);
                i += 3;
            }
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

impl Query {
    /// Decodes a raw query as kube-apiserver's handlers do (Go's
    /// `url.ParseQuery`, its error ignored): pairs split on `&` only; a pair
    /// with a `;` in it, or a malformed escape, is left out (Go 1.17+); the
    /// one place r8s and the built-in upstream decode a query string.
    pub fn parse(raw: Option<&str>) -> Self {
        let pairs = raw
            .unwrap_or("")
            .split('&')
            .filter(|pair| !pair.is_empty() && !pair.contains(';'))
            .filter_map(|pair| {
                let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                Some((query_unescape(k)?, query_unescape(v)?))
            })
            .collect();
        Query { pairs }
    }

    /// The first value of `name` (Go's `url.Values.Get`, but `None` when absent).
    pub fn get(&self, name: &str) -> Option<&str> {
        self.pairs
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// Every value of `name`, in order (`command` of an exec).
    pub fn all<'a>(&'a self, name: &'a str) -> impl Iterator<Item = &'a str> + 'a {
        self.pairs
            .iter()
            .filter(move |(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as kube-apiserver reads `watch`, `follow`,
    /// `allowWatchBookmarks` and `sendInitialEvents` (RequestInfo and the
    /// parameter codec: `runtime.Convert_Slice_string_To_bool`): absent is
    /// false; the first value `0` or `false` (any case) is false, and any
    /// other (`1`, `bogus`, empty) true.
    pub fn flag(&self, name: &str) -> bool {
        self.opt_flag(name).unwrap_or(false)
    }

    /// [`Query::flag`], `None` when the parameter is absent.
    pub fn opt_flag(&self, name: &str) -> Option<bool> {
        self.get(name)
            .map(|v| !(v == "0" || v.eq_ignore_ascii_case("false")))
    }

    /// `pretty` as the apiserver's handlers read it: absent or empty is
    /// `None` (the user agent decides), else `strconv.ParseBool`, false
    /// where that fails.
    pub fn pretty(&self) -> Option<bool> {
        self.get("pretty")
            .filter(|v| !v.is_empty())
            .map(|v| parse_bool(v).unwrap_or(false))
    }
}

/// Go's `strconv.ParseBool`, with its error as the apiserver's 400.
pub fn parse_bool(v: &str) -> Result<bool, Status> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(Status::bad_request(format!(
            "strconv.ParseBool: parsing \"{v}\": invalid syntax"
        ))),
    }
}

/// A query string from `pairs`, each value form-encoded.
pub fn encode<'a>(pairs: impl IntoIterator<Item = (&'a str, &'a str)>) -> String {
    let mut s = form_urlencoded::Serializer::new(String::new());
    for (k, v) in pairs {
        s.append_pair(k, v);
    }
    s.finish()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_decode_once_and_keep_every_value() {
        let q = Query::parse(Some(
            "command=sh&command=-c&command=echo%20a%26b&watch=1&labelSelector=app+in+(a)&watch=0",
        ));
        assert_eq!(
            q.all("command").collect::<Vec<_>>(),
            ["sh", "-c", "echo a&b"]
        );
        assert_eq!(q.get("labelSelector"), Some("app in (a)"));
        assert!(q.flag("watch"), "the first value counts");
        // As kube-apiserver 1.36 reads them: only `0` and `false` are false.
        for (raw, want) in [
            ("watch=yes", Some(true)),
            ("watch=bogus", Some(true)),
            ("watch=", Some(true)),
            ("watch=FaLsE", Some(false)),
            ("watch=0&watch=1", Some(false)),
            ("other=1", None),
        ] {
            assert_eq!(Query::parse(Some(raw)).opt_flag("watch"), want, "{raw}");
        }
        assert_eq!(Query::parse(Some("pretty=bogus")).pretty(), Some(false));
        assert_eq!(Query::parse(Some("pretty=")).pretty(), None);
        assert_eq!(q.get("missing"), None);
        // Go's ParseQuery: a pair with a `;` or a malformed escape is left
        // out, the rest kept.
        let q = Query::parse(Some(
            "fieldSelector=metadata.name%3Dw-1;&limit=1&a=%zz&b=%4&c=ok&&d",
        ));
        assert_eq!(q.get("fieldSelector"), None);
        assert_eq!(
            (q.get("limit"), q.get("a"), q.get("b")),
            (Some("1"), None, None)
        );
        assert_eq!((q.get("c"), q.get("d")), (Some("ok"), Some("")));
        assert_eq!(Query::parse(Some("x;y=1")).get("x;y"), None);
        assert_eq!(
            Query::parse(Some("k%3Dv=a%2Bb+c")).get("k=v"),
            Some("a+b c")
        );
        assert_eq!(
            encode([("limit", "500"), ("continue", "a=b&c")]),
            "limit=500&continue=a%3Db%26c"
        );
    }
}
