//! A `cache.resources` entry (`pods`, `v1/pods`, `apps/v1/deployments`, `*`,
//! `*.example.com`), parsed here alone: configuration checks it, discovery
//! resolves it, and `cache.indexes` keys name resources with it.

use std::fmt;
use std::str::FromStr;

/// What one `cache.resources` entry names.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ResourceEntry {
    /// `*` (every group: `suffix` empty) or `*.SUFFIX` (the groups whose
    /// names end in `.SUFFIX`; `suffix` keeps the leading dot).
    Pattern {
        /// What the groups' names end with.
        suffix: String,
    },
    /// `RESOURCE` (any group, its preferred version first), `VERSION/RESOURCE`
    /// (the core group) or `GROUP/VERSION/RESOURCE`.
    Named {
        /// The group, if named (`Some("")` for `VERSION/RESOURCE`: the core group).
        group: Option<String>,
        /// The version, if named.
        version: Option<String>,
        /// The resource's plural name.
        resource: String,
    },
}

/// The forms an entry takes, for the error that names a bad one.
pub const EXPECTED: &str = "expected RESOURCE, VERSION/RESOURCE or GROUP/VERSION/RESOURCE (e.g. pods, v1/pods, apps/v1/deployments), * or *.GROUP-SUFFIX (e.g. *.example.com)";

/// An entry that does not parse (the entry).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("bad value \"{0}\": {EXPECTED}")]
pub struct BadEntry(pub String);

impl FromStr for ResourceEntry {
    type Err = BadEntry;

    fn from_str(entry: &str) -> Result<Self, BadEntry> {
        let bad = || BadEntry(entry.to_string());
        let named = |g: Option<&str>, v: Option<&str>, r: &str| ResourceEntry::Named {
            group: g.map(str::to_string),
            version: v.map(str::to_string),
            resource: r.to_string(),
        };
        let parts: Vec<&str> = entry.split('/').collect();
        let parsed = match parts.as_slice() {
            ["*"] => ResourceEntry::Pattern {
                suffix: String::new(),
            },
            [p] if p.starts_with("*.") && valid_dns(&p[2..], true) => ResourceEntry::Pattern {
                suffix: p[1..].to_string(),
            },
            [r] if valid_dns(r, false) => named(None, None, r),
            [v, r] if valid_version(v) && valid_dns(r, false) => named(Some(""), Some(v), r),
            [g, v, r] if valid_dns(g, true) && valid_version(v) && valid_dns(r, false) => {
                named(Some(g), Some(v), r)
            }
            _ => return Err(bad()),
        };
        Ok(parsed)
    }
}

impl ResourceEntry {
    /// Whether this entry names `resource` of `group`/`version` (a pattern:
    /// any resource of its groups).
    pub fn names_in(&self, group: &str, version: &str, resource: &str) -> bool {
        match self {
            ResourceEntry::Pattern { suffix } => group.ends_with(suffix.as_str()),
            ResourceEntry::Named {
                group: g,
                version: v,
                resource: res,
            } => {
                res == resource
                    && g.as_deref().is_none_or(|g| g == group)
                    && v.as_deref().is_none_or(|v| v == version)
            }
        }
    }

    /// The resource's name, for a named entry.
    pub fn resource(&self) -> Option<&str> {
        match self {
            ResourceEntry::Named { resource, .. } => Some(resource),
            ResourceEntry::Pattern { .. } => None,
        }
    }

    /// How much the entry names (a pattern 0, `RESOURCE` 1, `VERSION/RESOURCE`
    /// 2, `GROUP/VERSION/RESOURCE` 3): a more specific entry's settings come
    /// after a less specific one's.
    pub fn specificity(&self) -> usize {
        match self {
            ResourceEntry::Pattern { .. } => 0,
            ResourceEntry::Named { version: None, .. } => 1,
            ResourceEntry::Named { group: Some(g), .. } if !g.is_empty() => 3,
            ResourceEntry::Named { .. } => 2,
        }
    }

    /// The group a named entry names, if it names one (`""`: the core group).
    pub fn group(&self) -> Option<&str> {
        match self {
            ResourceEntry::Named { group, .. } => group.as_deref(),
            ResourceEntry::Pattern { .. } => None,
        }
    }
}

impl fmt::Display for ResourceEntry {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ResourceEntry::Pattern { suffix } => write!(f, "*{suffix}"),
            ResourceEntry::Named {
                group,
                version,
                resource,
            } => match (group.as_deref(), version) {
                (Some(g), Some(v)) if !g.is_empty() => write!(f, "{g}/{v}/{resource}"),
                (_, Some(v)) => write!(f, "{v}/{resource}"),
                _ => f.write_str(resource),
            },
        }
    }
}

fn valid_version(v: &str) -> bool {
    let Some(rest) = v.strip_prefix('v') else {
        return false;
    };
    let digits = rest.chars().take_while(char::is_ascii_digit).count();
    if digits == 0 {
        return false;
    }
    let tail = &rest[digits..];
    tail.is_empty()
        || ["alpha", "beta"].iter().any(|p| {
            tail.strip_prefix(p)
                .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
        })
}

/// Whether `s` is a DNS label (`allow_dots`: subdomain) as Kubernetes
/// names are: lower-case letters, digits and `-`, at most 253 bytes.
pub fn valid_dns(s: &str, allow_dots: bool) -> bool {
    !s.is_empty()
        && s.len() <= 253
        && s.split('.').all(|l| {
            !l.is_empty()
                && l.bytes()
                    .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
                && !l.starts_with('-')
                && !l.ends_with('-')
        })
        && (allow_dots || !s.contains('.'))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> ResourceEntry {
        s.parse().unwrap()
    }

    #[test]
    fn should_accept_the_documented_forms_and_print_them_back() {
        for r in [
            "pods",
            "v1/pods",
            "apps/v1/deployments",
            "example.r8s.dev/v1/widgets",
            "*",
            "*.example.com",
            "*.crossplane.io",
            "batch/v1beta1/cronjobs",
        ] {
            assert_eq!(p(r).to_string(), r);
        }
        for r in [
            "Pods",
            "v/pods",
            "a/b/c/d",
            "",
            "apps/1/x",
            "*.",
            "*example.com",
            "*.Example.com",
            "**",
            "v1/*",
            "apps/v1/",
            "/pods",
            "v1beta/pods",
        ] {
            assert!(r.parse::<ResourceEntry>().is_err(), "{r}");
        }
    }

    #[test]
    fn should_name_resources_as_each_form_says() {
        let cases = [
            ("pods", ("", "v1", "pods"), true),
            ("pods", ("example.com", "v2", "pods"), true),
            ("v1/pods", ("", "v1", "pods"), true),
            ("v1/pods", ("example.com", "v1", "pods"), false),
            ("v2/pods", ("", "v1", "pods"), false),
            ("apps/v1/deployments", ("apps", "v1", "deployments"), true),
            (
                "apps/v1/deployments",
                ("apps", "v1beta1", "deployments"),
                false,
            ),
            ("*", ("", "v1", "pods"), true),
            ("*.example.com", ("a.example.com", "v1", "widgets"), true),
            ("*.example.com", ("example.com", "v1", "widgets"), false),
            ("*.example.com", ("apps", "v1", "deployments"), false),
        ];
        for (entry, (g, v, r), want) in cases {
            assert_eq!(
                p(entry).names_in(g, v, r),
                want,
                "{entry} names {g}/{v}/{r}"
            );
        }
        let order: Vec<usize> = ["*", "pods", "v1/pods", "apps/v1/deployments"]
            .iter()
            .map(|e| p(e).specificity())
            .collect();
        assert_eq!(order, [0, 1, 2, 3]);
        assert_eq!(p("example.com/v1/widgets").group(), Some("example.com"));
        assert_eq!(p("v1/pods").group(), Some(""));
        assert_eq!(p("pods").group(), None);
    }
}
