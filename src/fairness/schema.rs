//! The cluster's priority and fairness configuration as r8s reads it:
//! FlowSchemas and PriorityLevelConfigurations (`flowcontrol.apiserver.k8s.io`,
//! any served version: v1, v1beta3, v1beta2, v1beta1), parsed once from
//! their JSON into the few fields classification and seating use.

use serde_json::Value;

/// Who a rule applies to (`subjects[]`), as the apiserver's `matchesSubject`
/// reads it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Subject {
    /// A user by name (`*`: every user).
    User(String),
    /// A group by name (`*`: every request).
    Group(String),
    /// A service account of `namespace` by `name` (`*`: every one there).
    ServiceAccount {
        /// Its namespace.
        namespace: String,
        /// Its name, or `*`.
        name: String,
    },
}

/// A `resourceRules[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ResourceRule {
    /// Verbs (`*`: all).
    pub verbs: Vec<String>,
    /// API groups (`*`: all).
    pub api_groups: Vec<String>,
    /// Resources, `resource/subresource` for a subresource (`*`: all).
    pub resources: Vec<String>,
    /// Namespaces (`*`: every one).
    pub namespaces: Vec<String>,
    /// Whether it matches requests without a namespace.
    pub cluster_scope: bool,
}

/// A `nonResourceRules[]` entry.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NonResourceRule {
    /// Verbs (`*`: all).
    pub verbs: Vec<String>,
    /// Paths, a trailing `*` a prefix (`*`: all).
    pub urls: Vec<String>,
}

/// One `rules[]` entry: subjects, and what they ask.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PolicyRules {
    /// Who.
    pub subjects: Vec<Subject>,
    /// Which resource requests.
    pub resource_rules: Vec<ResourceRule>,
    /// Which non-resource requests.
    pub non_resource_rules: Vec<NonResourceRule>,
}

/// How a FlowSchema tells one flow from another.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distinguisher {
    /// By the user's name.
    ByUser,
    /// By the request's namespace.
    ByNamespace,
}

/// A FlowSchema.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FlowSchema {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty for the built-in configuration).
    pub uid: String,
    /// `spec.matchingPrecedence` (lower first).
    pub precedence: i32,
    /// `spec.priorityLevelConfiguration.name`.
    pub priority_level: String,
    /// `spec.distinguisherMethod.type`, if any.
    pub distinguisher: Option<Distinguisher>,
    /// `spec.rules`.
    pub rules: Vec<PolicyRules>,
}

/// How a limited level queues (`limitResponse.queuing`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Queuing {
    /// `queues`.
    pub queues: u32,
    /// `handSize`.
    pub hand_size: u32,
    /// `queueLengthLimit`.
    pub queue_length_limit: u32,
}

/// A PriorityLevelConfiguration.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PriorityLevel {
    /// `metadata.name`.
    pub name: String,
    /// `metadata.uid` (empty for the built-in configuration).
    pub uid: String,
    /// `spec.type` is `Exempt`.
    pub exempt: bool,
    /// `nominalConcurrencyShares` (`assuredConcurrencyShares` before
    /// v1beta3; 30 when unset, as the apiserver defaults it).
    pub shares: u32,
    /// `limitResponse.queuing` (`None`: `Reject`, or exempt).
    pub queuing: Option<Queuing>,
}

/// Why an object could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{kind} {name:?}: {why}")]
pub struct SchemaError {
    /// FlowSchema or PriorityLevelConfiguration.
    pub kind: &'static str,
    /// Its name, as far as it was read.
    pub name: String,
    /// What is wrong.
    pub why: String,
}

/// The strings of `v[key]` (none where absent).
fn strings(v: &Value, key: &str) -> Vec<String> {
    v[key]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s.as_str().map(str::to_string))
        .collect()
}

fn meta(v: &Value) -> (String, String) {
    let m = &v["metadata"];
    (
        m["name"].as_str().unwrap_or_default().to_string(),
        m["uid"].as_str().unwrap_or_default().to_string(),
    )
}

impl FlowSchema {
    /// A FlowSchema from its JSON (any served version).
    pub fn from_json(v: &Value) -> Result<FlowSchema, SchemaError> {
        let (name, uid) = meta(v);
        let err = |why: &str| SchemaError {
            kind: "FlowSchema",
            name: name.clone(),
            why: why.to_string(),
        };
        let spec = &v["spec"];
        let priority_level = spec["priorityLevelConfiguration"]["name"]
            .as_str()
            .ok_or_else(|| err("no spec.priorityLevelConfiguration.name"))?
            .to_string();
        // 1000 where unset, as the apiserver defaults it.
        let precedence = match &spec["matchingPrecedence"] {
            Value::Null => 1000,
            p => p
                .as_i64()
                .and_then(|p| i32::try_from(p).ok())
                .ok_or_else(|| err("spec.matchingPrecedence is not an integer"))?,
        };
        let distinguisher = match spec["distinguisherMethod"]["type"].as_str() {
            None => None,
            Some("ByUser") => Some(Distinguisher::ByUser),
            Some("ByNamespace") => Some(Distinguisher::ByNamespace),
            Some(other) => return Err(err(&format!("distinguisherMethod {other:?}"))),
        };
        let rules = spec["rules"]
            .as_array()
            .into_iter()
            .flatten()
            .map(|r| PolicyRules {
                subjects: r["subjects"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .filter_map(subject)
                    .collect(),
                resource_rules: r["resourceRules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|rr| ResourceRule {
                        verbs: strings(rr, "verbs"),
                        api_groups: strings(rr, "apiGroups"),
                        resources: strings(rr, "resources"),
                        namespaces: strings(rr, "namespaces"),
                        cluster_scope: rr["clusterScope"].as_bool().unwrap_or(false),
                    })
                    .collect(),
                non_resource_rules: r["nonResourceRules"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|nr| NonResourceRule {
                        verbs: strings(nr, "verbs"),
                        urls: strings(nr, "nonResourceURLs"),
                    })
                    .collect(),
            })
            .collect();
        Ok(FlowSchema {
            name,
            uid,
            precedence,
            priority_level,
            distinguisher,
            rules,
        })
    }
}

/// A subject, where its kind names a member that is there (the
/// apiserver's `matchesSubject` matches nothing otherwise).
fn subject(s: &Value) -> Option<Subject> {
    let name = |k: &str| s[k]["name"].as_str().map(str::to_string);
    match s["kind"].as_str()? {
        "User" => name("user").map(Subject::User),
        "Group" => name("group").map(Subject::Group),
        "ServiceAccount" => Some(Subject::ServiceAccount {
            namespace: s["serviceAccount"]["namespace"].as_str()?.to_string(),
            name: name("serviceAccount")?,
        }),
        _ => None,
    }
}

impl PriorityLevel {
    /// A PriorityLevelConfiguration from its JSON (any served version).
    pub fn from_json(v: &Value) -> Result<PriorityLevel, SchemaError> {
        let (name, uid) = meta(v);
        let spec = &v["spec"];
        let count = |v: &Value, key: &str, default: u32| {
            v[key]
                .as_u64()
                .and_then(|n| u32::try_from(n).ok())
                .unwrap_or(default)
        };
        match spec["type"].as_str() {
            Some("Exempt") => Ok(PriorityLevel {
                name,
                uid,
                exempt: true,
                shares: count(&spec["exempt"], "nominalConcurrencyShares", 0),
                queuing: None,
            }),
            Some("Limited") => {
                let limited = &spec["limited"];
                let shares = match &limited["nominalConcurrencyShares"] {
                    Value::Null => count(limited, "assuredConcurrencyShares", 30),
                    _ => count(limited, "nominalConcurrencyShares", 30),
                };
                let response = &limited["limitResponse"];
                let queuing = match response["type"].as_str() {
                    Some("Queue") => {
                        let q = &response["queuing"];
                        Some(Queuing {
                            queues: count(q, "queues", 64),
                            hand_size: count(q, "handSize", 8),
                            queue_length_limit: count(q, "queueLengthLimit", 50),
                        })
                    }
                    _ => None,
                };
                Ok(PriorityLevel {
                    name,
                    uid,
                    exempt: false,
                    shares,
                    queuing,
                })
            }
            other => Err(SchemaError {
                kind: "PriorityLevelConfiguration",
                name,
                why: format!("spec.type {other:?}"),
            }),
        }
    }
}
