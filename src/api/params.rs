//! Query parameters of get, list and watch, parsed and validated as kube-apiserver does.
//!
//! The messages are the apiserver's (`ValidateListOptions`, `strconv` errors);
//! see `shared/reference/04_rvmatch_validation.txt`.

use super::status::{Cause, Status};

/// `resourceVersionMatch`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RvMatch {
    /// `Exact`.
    Exact,
    /// `NotOlderThan`.
    NotOlderThan,
}

/// The options of a get, list or watch request.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ListOptions {
    /// `watch=true` (or a `/watch/` path).
    pub watch: bool,
    /// `resourceVersion`, raw (empty when unset).
    pub resource_version: String,
    /// `resourceVersionMatch`, raw (empty when unset).
    pub resource_version_match: String,
    /// `limit` (0 or negative means no limit, as the apiserver treats it).
    pub limit: i64,
    /// `continue`, raw (empty when unset).
    pub continue_token: String,
    /// `labelSelector`, raw.
    pub label_selector: String,
    /// `fieldSelector`, raw.
    pub field_selector: String,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents` (None when unset).
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds` (None when unset).
    pub timeout_seconds: Option<u64>,
    /// `pretty` (None when unset).
    pub pretty: Option<bool>,
}

/// Go's `strconv.ParseBool`.
pub fn parse_bool(v: &str) -> Result<bool, Status> {
    match v {
        "1" | "t" | "T" | "TRUE" | "true" | "True" => Ok(true),
        "0" | "f" | "F" | "FALSE" | "false" | "False" => Ok(false),
        _ => Err(Status::bad_request(format!(
            "strconv.ParseBool: parsing \"{v}\": invalid syntax"
        ))),
    }
}

fn parse_int(v: &str) -> Result<i64, Status> {
    v.parse::<i64>().map_err(|_| {
        Status::bad_request(format!("strconv.ParseInt: parsing \"{v}\": invalid syntax"))
    })
}

/// Parses a resource version as the apiserver's storage does (`strconv.ParseUint`).
pub fn parse_rv(v: &str) -> Result<u64, String> {
    v.parse::<u64>().map_err(|_| {
        format!("resourceVersion: Invalid value: \"{v}\": strconv.ParseUint: parsing \"{v}\": invalid syntax")
    })
}

/// kube-apiserver pretty-prints JSON for `curl` user agents unless `pretty=false`
/// (and for anyone with `pretty=true`); watch streams never are.
pub fn pretty(param: Option<bool>, watch: bool, headers: &http::HeaderMap) -> bool {
    param.unwrap_or_else(|| {
        !watch
            && headers
                .get(http::header::USER_AGENT)
                .and_then(|v| v.to_str().ok())
                .is_some_and(|ua| ua.starts_with("curl/"))
    })
}

/// The first value of each parameter, in the order of the query string.
pub fn query_pairs(query: Option<&str>) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in form_urlencoded::parse(query.unwrap_or("").as_bytes()) {
        if !out.iter().any(|(ek, _)| ek.as_str() == k) {
            out.push((k.into_owned(), v.into_owned()));
        }
    }
    out
}

impl ListOptions {
    /// Parses the query string; bad numbers and booleans are 400s like the apiserver's.
    pub fn parse(query: Option<&str>) -> Result<Self, Status> {
        let mut o = ListOptions::default();
        for (k, v) in query_pairs(query) {
            match k.as_str() {
                "watch" => o.watch = parse_bool(&v)?,
                "resourceVersion" => o.resource_version = v,
                "resourceVersionMatch" => o.resource_version_match = v,
                "limit" => o.limit = parse_int(&v)?,
                "continue" => o.continue_token = v,
                "labelSelector" => o.label_selector = v,
                "fieldSelector" => o.field_selector = v,
                "allowWatchBookmarks" => o.allow_watch_bookmarks = parse_bool(&v)?,
                "sendInitialEvents" => o.send_initial_events = Some(parse_bool(&v)?),
                "timeoutSeconds" => {
                    let t = parse_int(&v)?;
                    o.timeout_seconds = Some(t.max(0) as u64);
                }
                "pretty" => o.pretty = Some(parse_bool(&v)?),
                _ => {}
            }
        }
        Ok(o)
    }

    /// The parsed `resourceVersionMatch`, once [`ListOptions::validate`] passed.
    pub fn rv_match(&self) -> Option<RvMatch> {
        match self.resource_version_match.as_str() {
            "Exact" => Some(RvMatch::Exact),
            "NotOlderThan" => Some(RvMatch::NotOlderThan),
            _ => None,
        }
    }

    /// `ValidateListOptions` with the WatchList feature on (current kube-apiserver).
    pub fn validate(&self) -> Result<(), Status> {
        let mut causes = Vec::new();
        let forbidden = |m: &str| Cause {
            reason: "FieldValueForbidden",
            message: format!("Forbidden: {m}"),
            field: Some("resourceVersionMatch".into()),
        };
        let not_supported = |v: &str, supported: &str| Cause {
            reason: "FieldValueNotSupported",
            message: format!("Unsupported value: \"{v}\": supported values: {supported}"),
            field: Some("resourceVersionMatch".into()),
        };
        let m = self.resource_version_match.as_str();
        if self.watch {
            if self.send_initial_events.is_some() && m != "NotOlderThan" {
                causes.push(forbidden(
                    "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan",
                ));
            }
            if !m.is_empty() {
                if self.send_initial_events.is_none() {
                    causes.push(forbidden(
                        "resourceVersionMatch is forbidden for watch unless sendInitialEvents is provided",
                    ));
                }
                if m != "NotOlderThan" {
                    causes.push(not_supported(m, "\"NotOlderThan\""));
                }
                if !self.continue_token.is_empty() {
                    causes.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
            }
        } else {
            if !m.is_empty() {
                if self.resource_version.is_empty() {
                    causes.push(forbidden(
                        "resourceVersionMatch is forbidden unless resourceVersion is provided",
                    ));
                }
                if !self.continue_token.is_empty() {
                    causes.push(forbidden(
                        "resourceVersionMatch is forbidden when continue is provided",
                    ));
                }
                if m != "Exact" && m != "NotOlderThan" {
                    causes.push(not_supported(m, "\"Exact\", \"NotOlderThan\", \"\""));
                }
                if m == "Exact" && self.resource_version == "0" {
                    causes.push(forbidden(
                        "resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\"",
                    ));
                }
            }
            if self.send_initial_events.is_some() {
                causes.push(Cause {
                    reason: "FieldValueForbidden",
                    message: "Forbidden: sendInitialEvents is forbidden for list".into(),
                    field: Some("sendInitialEvents".into()),
                });
            }
        }
        if causes.is_empty() {
            Ok(())
        } else {
            Err(Status::invalid_list_options(causes))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn msg(q: &str) -> String {
        ListOptions::parse(Some(q))
            .unwrap()
            .validate()
            .unwrap_err()
            .message
    }

    #[test]
    fn should_reject_like_the_apiserver() {
        assert_eq!(
            msg("resourceVersionMatch=NotOlderThan"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch is forbidden unless resourceVersion is provided"
        );
        assert_eq!(
            msg("resourceVersion=10&resourceVersionMatch=Bogus"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Unsupported value: \"Bogus\": supported values: \"Exact\", \"NotOlderThan\", \"\""
        );
        assert_eq!(
            msg("resourceVersion=0&resourceVersionMatch=Exact&limit=2"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: resourceVersionMatch \"exact\" is forbidden for resourceVersion \"0\""
        );
        assert_eq!(
            msg("watch=1&sendInitialEvents=true"),
            "ListOptions.meta.k8s.io \"\" is invalid: resourceVersionMatch: Forbidden: sendInitialEvents requires setting resourceVersionMatch to NotOlderThan"
        );
        assert_eq!(
            ListOptions::parse(Some("limit=abc")).unwrap_err().message,
            "strconv.ParseInt: parsing \"abc\": invalid syntax"
        );
    }

    #[test]
    fn should_accept_valid_combinations() {
        for q in [
            "watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&resourceVersion=0",
            "resourceVersion=5&resourceVersionMatch=Exact&limit=2",
            "limit=-5",
            "watch=true&resourceVersion=7",
        ] {
            ListOptions::parse(Some(q)).unwrap().validate().unwrap();
        }
    }
}
