//! Query parameters of get, list and watch, parsed and validated as kube-apiserver does.
//!
//! The messages are the apiserver's: `ValidateListOptions` (422 `Invalid`
//! with one cause per violation), `strconv.ParseInt`/`ParseBool` (400), and
//! the label and field selector parsers of apimachinery (400).

use super::query::Query;
use super::selector::{FieldSelector, LabelSelector, Selectors};
use super::shard::ShardSelector;
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
#[derive(Debug, Clone, PartialEq)]
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
    /// `labelSelector`, raw (as authorizers see it).
    pub label_selector: String,
    /// `fieldSelector`, raw (as authorizers see it).
    pub field_selector: String,
    /// The selectors parsed, or the apiserver's 400 for the first bad one.
    pub selectors: Result<Selectors, Status>,
    /// `shardSelector` (absent or empty: none), or why 1.36 refuses it:
    /// r8s answers that itself, as an upstream without sharding would
    /// ignore the selector.
    pub shard_selector: Result<Option<ShardSelector>, Status>,
    /// `allowWatchBookmarks`.
    pub allow_watch_bookmarks: bool,
    /// `sendInitialEvents` (None when unset).
    pub send_initial_events: Option<bool>,
    /// `timeoutSeconds` (None when unset): 0 is the server's default, a
    /// negative one a watch that ends at once (the apiserver's context is
    /// done before it starts).
    pub timeout_seconds: Option<i64>,
    /// `pretty` (None when unset).
    pub pretty: Option<bool>,
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

impl ListOptions {
    /// The options of a request whose field selector may use `fields` (a
    /// built-in resource's; `None`: a custom resource's, whose selectable
    /// fields its CRD names, checked by its cache: here, the selector's
    /// syntax only); bad numbers and booleans are 400s like the apiserver's.
    /// Each parameter's first value counts.
    pub fn parse(query: &Query, fields: Option<&[&str]>) -> Result<Self, Status> {
        let text = |k: &str| query.get(k).unwrap_or_default().to_string();
        let int = |k: &str| query.get(k).map(parse_int).transpose();
        let label_selector = text("labelSelector");
        let field_selector = text("fieldSelector");
        let shard_selector = match query.get("shardSelector").filter(|s| !s.is_empty()) {
            None => Ok(None),
            Some(s) => ShardSelector::parse(s)
                .map(Some)
                .map_err(Status::bad_request),
        };
        let selectors = LabelSelector::parse(&label_selector)
            .and_then(|labels| {
                let fields = match fields {
                    Some(supported) => FieldSelector::parse(&field_selector, supported)?,
                    None => FieldSelector::parse_syntax(&field_selector)?,
                };
                let shard = shard_selector.as_ref().ok().cloned().flatten();
                Ok(Selectors {
                    labels,
                    fields,
                    shard,
                })
            })
            .map_err(Status::bad_request);
        Ok(ListOptions {
            watch: query.flag("watch"),
            resource_version: text("resourceVersion"),
            resource_version_match: text("resourceVersionMatch"),
            limit: int("limit")?.unwrap_or(0),
            continue_token: text("continue"),
            label_selector,
            field_selector,
            selectors,
            shard_selector,
            allow_watch_bookmarks: query.flag("allowWatchBookmarks"),
            send_initial_events: query.opt_flag("sendInitialEvents"),
            timeout_seconds: int("timeoutSeconds")?,
            pretty: query.pretty(),
        })
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
    use crate::api::selector::supported_fields;

    fn parse(q: &str) -> Result<ListOptions, Status> {
        ListOptions::parse(&Query::parse(Some(q)), Some(supported_fields("pods")))
    }

    fn msg(q: &str) -> String {
        parse(q).unwrap().validate().unwrap_err().message
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
            parse("limit=abc").unwrap_err().message,
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
            parse(q).unwrap().validate().unwrap();
        }
    }
}
