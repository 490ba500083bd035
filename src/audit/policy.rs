//! The audit policy: kube-apiserver's `audit.k8s.io/v1` `Policy` file, read
//! and refused as the apiserver reads and refuses it (its messages, word for
//! word: `k8s.io/apiserver/pkg/audit/policy/reader.go` and
//! `pkg/apis/audit/validation`), and the first rule a request matches
//! (`policy/checker.go`).

use std::path::Path;

use serde_json::Value;

use crate::api::UserInfo;

use super::policy_raw::{GroupResources, Raw, json_type};

/// How much of a request an event records (`level`), least first.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Level {
    /// No event.
    None,
    /// Who, what, when, and the response's status.
    Metadata,
    /// And the request's body.
    Request,
    /// And the response's body.
    RequestResponse,
}

impl Level {
    /// Every level, as the apiserver lists them in its messages.
    pub const ALL: [Level; 4] = [
        Level::None,
        Level::Metadata,
        Level::Request,
        Level::RequestResponse,
    ];

    /// Its name in policies and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Level::None => "None",
            Level::Metadata => "Metadata",
            Level::Request => "Request",
            Level::RequestResponse => "RequestResponse",
        }
    }
}

/// When in a request's life an event is made (`stage`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stage {
    /// As soon as the request is read, before it is answered.
    RequestReceived,
    /// Once the response's head is sent: long-running requests (watches) only.
    ResponseStarted,
    /// Once the response's body is done.
    ResponseComplete,
    /// The handler panicked.
    Panic,
}

impl Stage {
    /// Every stage, as the apiserver lists them in its messages.
    pub const ALL: [Stage; 4] = [
        Stage::RequestReceived,
        Stage::ResponseStarted,
        Stage::ResponseComplete,
        Stage::Panic,
    ];

    /// Its name in policies and events.
    pub fn as_str(self) -> &'static str {
        match self {
            Stage::RequestReceived => "RequestReceived",
            Stage::ResponseStarted => "ResponseStarted",
            Stage::ResponseComplete => "ResponseComplete",
            Stage::Panic => "Panic",
        }
    }

    fn parse(s: &str) -> Option<Stage> {
        Stage::ALL.into_iter().find(|st| st.as_str() == s)
    }
}

/// A set of stages (a rule's `omitStages`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stages(u8);

impl Stages {
    /// Whether `stage` is in the set.
    pub fn has(self, stage: Stage) -> bool {
        self.0 & (1 << stage as u8) != 0
    }

    fn add(&mut self, stage: Stage) {
        self.0 |= 1 << stage as u8;
    }

    fn union(self, other: Stages) -> Stages {
        Stages(self.0 | other.0)
    }
}

/// What the policy says of one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Decision {
    /// How much its events record.
    pub level: Level,
    /// The stages it makes no event at.
    pub omit_stages: Stages,
    /// Whether bodies are recorded without `metadata.managedFields`.
    pub omit_managed_fields: bool,
}

/// A request as the policy's rules see it (the apiserver's authorizer
/// attributes).
#[derive(Debug, Clone, Copy)]
pub struct Attributes<'a> {
    /// Who is asking; `None` before authentication (a 401).
    pub user: Option<&'a UserInfo>,
    /// The request's verb: `get`, `list`, `watch`, `create`, ... (for a
    /// path that is not a resource, the HTTP method in lower case).
    pub verb: &'a str,
    /// What it is for.
    pub target: Target<'a>,
}

/// What a request is for.
#[derive(Debug, Clone, Copy)]
pub enum Target<'a> {
    /// A resource (its namespace and name empty where it has none).
    Resource {
        /// API group (`""`: the core group).
        group: &'a str,
        /// Resource, plural.
        resource: &'a str,
        /// Subresource, or `""`.
        subresource: &'a str,
        /// Namespace, or `""`.
        namespace: &'a str,
        /// Object name, or `""`.
        name: &'a str,
    },
    /// Any other path (`/version`, `/apis`, `/healthz`).
    Path(&'a str),
}

/// One rule of the policy, checked.
#[derive(Debug, Clone)]
struct Rule {
    level: Level,
    users: Vec<String>,
    user_groups: Vec<String>,
    verbs: Vec<String>,
    resources: Vec<GroupResources>,
    namespaces: Vec<String>,
    non_resource_urls: Vec<String>,
    omit_stages: Stages,
    omit_managed_fields: Option<bool>,
}

/// A policy, read and checked.
#[derive(Debug, Clone)]
pub struct Policy {
    rules: Vec<Rule>,
    omit_stages: Stages,
    omit_managed_fields: bool,
}

/// What reading a policy found wrong, in the apiserver's words.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("loading audit policy file: {0}")]
pub struct PolicyError(pub String);

impl Policy {
    /// Reads the policy at `path`, as `--audit-policy-file` is read; also
    /// says what lenient reading let pass (unknown fields), to be logged.
    pub fn load(path: &Path) -> Result<(Policy, Option<String>), PolicyError> {
        let shown = path.display();
        let bytes = std::fs::read(path)
            .map_err(|e| PolicyError(format!("failed to read file path \"{shown}\": {e}")))?;
        Policy::from_bytes(&bytes).map_err(|e| PolicyError(format!("{e}: from file {shown}")))
    }

    /// Reads a policy from YAML (or JSON); the error as the apiserver words it.
    pub fn from_bytes(bytes: &[u8]) -> Result<(Policy, Option<String>), String> {
        let text = std::str::from_utf8(bytes)
            .map_err(|e| format!("failed decoding: yaml: invalid UTF-8: {e}"))?;
        let doc: Value = if text.trim().is_empty() {
            Value::Null
        } else {
            serde_saphyr::from_str(text).map_err(|e| {
                let first = e.to_string();
                let first = first.lines().next().unwrap_or("").to_string();
                format!("failed decoding: yaml: {first}")
            })?
        };
        let internal = "unknown group version field audit.k8s.io/__internal, Kind=Policy in policy";
        let Value::Object(doc) = doc else {
            if doc.is_null() {
                return Err(internal.into());
            }
            return Err(format!(
                "failed decoding: json: cannot unmarshal {} into Go value of type v1.Policy",
                json_type(&doc)
            ));
        };
        let api_version = doc.get("apiVersion").and_then(Value::as_str).unwrap_or("");
        let kind = doc.get("kind").and_then(Value::as_str).unwrap_or("");
        if api_version.is_empty() {
            return Err(internal.into());
        }
        if api_version != "audit.k8s.io/v1" || !(kind.is_empty() || kind == "Policy") {
            let kind = if kind.is_empty() { "Policy" } else { kind };
            return Err(format!(
                "failed decoding: no kind \"{kind}\" is registered for version \"{api_version}\" \
                 in scheme \"pkg/runtime/scheme.go:111\""
            ));
        }
        let (raw, unknown) = Raw::decode(&doc).map_err(|e| format!("failed decoding: {e}"))?;
        let errs = raw.validate();
        match errs.len() {
            0 => {}
            1 => return Err(errs.into_iter().next().unwrap_or_default()),
            _ => return Err(format!("[{}]", errs.join(", "))),
        }
        if raw.rules.is_empty() {
            return Err("loaded illegal policy with 0 rules".into());
        }
        let warning = (!unknown.is_empty()).then(|| {
            let fields: Vec<String> = unknown
                .iter()
                .map(|f| format!("unknown field \"{f}\""))
                .collect();
            format!("strict decoding error: {}", fields.join(", "))
        });
        Ok((Policy::from_raw(raw), warning))
    }

    /// The checked policy, each rule with the policy's own `omitStages` added
    /// to its own (as the apiserver's evaluator is made).
    fn from_raw(raw: Raw) -> Policy {
        let stages = |list: &[String]| {
            let mut set = Stages::default();
            for s in list {
                if let Some(st) = Stage::parse(s) {
                    set.add(st);
                }
            }
            set
        };
        let omit_stages = stages(&raw.omit_stages);
        let rules = raw
            .rules
            .into_iter()
            .map(|r| Rule {
                level: Level::ALL
                    .into_iter()
                    .find(|l| l.as_str() == r.level)
                    .unwrap_or(Level::None),
                omit_stages: stages(&r.omit_stages).union(omit_stages),
                users: r.users,
                user_groups: r.user_groups,
                verbs: r.verbs,
                resources: r.resources,
                namespaces: r.namespaces,
                non_resource_urls: r.non_resource_urls,
                omit_managed_fields: r.omit_managed_fields,
            })
            .collect();
        Policy {
            rules,
            omit_stages,
            omit_managed_fields: raw.omit_managed_fields,
        }
    }

    /// What the first rule `attrs` matches says; no rule: `None`.
    pub fn evaluate(&self, attrs: &Attributes<'_>) -> Decision {
        for r in &self.rules {
            if r.matches(attrs) {
                return Decision {
                    level: r.level,
                    omit_stages: r.omit_stages,
                    omit_managed_fields: r.omit_managed_fields.unwrap_or(self.omit_managed_fields),
                };
            }
        }
        Decision {
            level: Level::None,
            omit_stages: self.omit_stages,
            omit_managed_fields: self.omit_managed_fields,
        }
    }
}

fn has(list: &[String], v: &str) -> bool {
    list.iter().any(|s| s == v)
}

impl Rule {
    fn matches(&self, a: &Attributes<'_>) -> bool {
        if !self.users.is_empty() && !a.user.is_some_and(|u| has(&self.users, &u.name)) {
            return false;
        }
        if !self.user_groups.is_empty()
            && !a
                .user
                .is_some_and(|u| u.groups.iter().any(|g| has(&self.user_groups, g)))
        {
            return false;
        }
        if !self.verbs.is_empty() && !has(&self.verbs, a.verb) {
            return false;
        }
        if !self.namespaces.is_empty() || !self.resources.is_empty() {
            return self.matches_resource(&a.target);
        }
        if !self.non_resource_urls.is_empty() {
            let Target::Path(path) = a.target else {
                return false;
            };
            return self.non_resource_urls.iter().any(|spec| {
                spec == "*"
                    || spec == path
                    || (spec.ends_with('*') && path.starts_with(spec.trim_end_matches('*')))
            });
        }
        true
    }

    fn matches_resource(&self, target: &Target<'_>) -> bool {
        let Target::Resource {
            group,
            resource,
            subresource,
            namespace,
            name,
        } = *target
        else {
            return false;
        };
        if !self.namespaces.is_empty() && !has(&self.namespaces, namespace) {
            return false;
        }
        if self.resources.is_empty() {
            return true;
        }
        let combined = if subresource.is_empty() {
            resource.to_string()
        } else {
            format!("{resource}/{subresource}")
        };
        self.resources
            .iter()
            .filter(|gr| gr.group == group || gr.group == "*")
            .any(|gr| {
                gr.resources.is_empty()
                    || gr.resources.iter().any(|res| {
                        (gr.resource_names.is_empty() || has(&gr.resource_names, name))
                            && (*res == combined
                                || res == "*"
                                || (!subresource.is_empty()
                                    && res.strip_prefix("*/") == Some(subresource))
                                || res.strip_suffix("/*") == Some(resource))
                    })
            })
    }
}

#[cfg(test)]
mod tests;
