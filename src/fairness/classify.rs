//! Which FlowSchema and priority level a request belongs to, and its flow,
//! exactly as kube-apiserver's priority and fairness filter decides
//! (`pkg/util/flowcontrol`: `rule.go`, the controller's ordering): the
//! schemas in `matchingPrecedence` order, then by name, those whose level
//! does not exist left out (dangling), the first whose rules match the
//! user and the request wins; its distinguisher names the flow.

use std::collections::HashMap;
use std::hash::{Hash, Hasher};
use std::sync::Arc;

use super::builtin;
use super::schema::{
    Distinguisher, FlowSchema, NonResourceRule, PolicyRules, PriorityLevel, ResourceRule, Subject,
};

/// What a request asks, as the filter's `RequestDigest` holds it (from the
/// request's RequestInfo: its verb, group, resource, subresource and
/// namespace, or its path).
#[derive(Debug, Clone, Copy)]
pub enum Asked<'a> {
    /// A resource request.
    Resource {
        /// RequestInfo's verb.
        verb: &'a str,
        /// The API group (`""` for core).
        api_group: &'a str,
        /// The resource.
        resource: &'a str,
        /// The subresource (`""`: none).
        subresource: &'a str,
        /// The namespace (`""`: none).
        namespace: &'a str,
    },
    /// A non-resource request.
    NonResource {
        /// RequestInfo's verb (the method's, lower-cased).
        verb: &'a str,
        /// The path.
        path: &'a str,
    },
}

impl<'a> Asked<'a> {
    /// A resource request: RequestInfo's verb, API group, resource,
    /// subresource and namespace (`""` for none).
    pub fn resource(
        verb: &'a str,
        api_group: &'a str,
        resource: &'a str,
        subresource: &'a str,
        namespace: &'a str,
    ) -> Asked<'a> {
        Asked::Resource {
            verb,
            api_group,
            resource,
            subresource,
            namespace,
        }
    }
}

/// Who asks: the user the apiserver would see (after impersonation).
#[derive(Debug, Clone, Copy)]
pub struct Who<'a> {
    /// The user's name.
    pub name: &'a str,
    /// Its groups.
    pub groups: &'a [String],
}

/// Where a request goes.
#[derive(Debug, Clone)]
pub struct Classification {
    /// The FlowSchema that matched.
    pub schema: Arc<FlowSchema>,
    /// Its priority level.
    pub level: Arc<PriorityLevel>,
    /// The flow within the level: the schema's name and its distinguisher,
    /// hashed (what shuffle sharding deals queues by).
    pub flow: u64,
    /// The apiserver's `X-Kubernetes-PF-*` headers naming both by UID, made
    /// once per configuration (none for a UID-less built-in object).
    pub headers: Arc<[(http::HeaderName, http::HeaderValue)]>,
    /// The sum of every level's `nominalConcurrencyShares` (what the
    /// level's share of r8s's capacity is of).
    pub share_sum: u32,
}

/// A schema in matching order, with its level and their headers.
#[derive(Debug, Clone)]
struct Entry {
    schema: Arc<FlowSchema>,
    level: Arc<PriorityLevel>,
    headers: Arc<[(http::HeaderName, http::HeaderValue)]>,
}

impl Entry {
    fn new(schema: Arc<FlowSchema>, level: Arc<PriorityLevel>) -> Entry {
        let headers = [
            (super::FLOW_SCHEMA_UID, &schema.uid),
            (super::PRIORITY_LEVEL_UID, &level.uid),
        ]
        .into_iter()
        .filter(|(_, uid)| !uid.is_empty())
        .filter_map(|(name, uid)| Some((name, http::HeaderValue::from_str(uid).ok()?)))
        .collect();
        Entry {
            schema,
            level,
            headers,
        }
    }
}

/// The configuration a request is classified by, ordered once.
#[derive(Debug, Clone)]
pub struct Classifier {
    /// Matching order: precedence, then name; none dangling.
    schemas: Vec<Entry>,
    levels: HashMap<String, Arc<PriorityLevel>>,
    /// Where nothing matches: the catch-all schema (always there).
    catch_all: Entry,
    /// The sum of every level's shares.
    share_sum: u32,
}

impl Classifier {
    /// The configuration of `schemas` and `levels` (the cluster's), as the
    /// apiserver's controller digests them: a level whose type and name
    /// disagree (only `exempt` is exempt) left out, the mandatory levels
    /// imagined where missing, schemas whose level is missing (dangling)
    /// left out, the rest in precedence then name order, and a missing
    /// mandatory `exempt` schema put first, `catch-all` last.
    pub fn new(mut schemas: Vec<FlowSchema>, mut levels: Vec<PriorityLevel>) -> Classifier {
        levels.retain(|l| l.exempt == (l.name == "exempt"));
        for m in ["exempt", "catch-all"] {
            if !levels.iter().any(|l| l.name == m) {
                levels.extend(
                    builtin::priority_levels()
                        .into_iter()
                        .filter(|l| l.name == m),
                );
            }
        }
        let levels: HashMap<String, Arc<PriorityLevel>> = levels
            .into_iter()
            .map(|l| (l.name.clone(), Arc::new(l)))
            .collect();
        schemas.retain(|s| levels.contains_key(&s.priority_level));
        schemas.sort_by(|a, b| (a.precedence, &a.name).cmp(&(b.precedence, &b.name)));
        let mandatory = |name: &str| {
            builtin::flow_schemas()
                .into_iter()
                .find(|s| s.name == name)
                .expect("a mandatory FlowSchema")
        };
        if !schemas.iter().any(|s| s.name == "exempt") {
            schemas.insert(0, mandatory("exempt"));
        }
        if !schemas.iter().any(|s| s.name == "catch-all") {
            schemas.push(mandatory("catch-all"));
        }
        let schemas: Vec<Entry> = schemas
            .into_iter()
            .map(|s| {
                let level = levels[&s.priority_level].clone();
                Entry::new(Arc::new(s), level)
            })
            .collect();
        let catch_all = schemas
            .iter()
            .find(|e| e.schema.name == "catch-all")
            .cloned()
            .expect("catch-all is there");
        let share_sum = levels.values().map(|l| l.shares).sum();
        Classifier {
            schemas,
            levels,
            catch_all,
            share_sum,
        }
    }

    /// kube-apiserver's own configuration (mandatory and suggested).
    pub fn builtin() -> Classifier {
        Classifier::new(builtin::flow_schemas(), builtin::priority_levels())
    }

    /// Each schema's priority level and name, in matching order.
    pub fn schemas(&self) -> impl Iterator<Item = (&str, &str)> {
        self.schemas
            .iter()
            .map(|e| (e.level.name.as_str(), e.schema.name.as_str()))
    }

    /// The sum of every level's shares.
    pub fn share_sum(&self) -> u32 {
        self.share_sum
    }

    /// The priority levels, by name.
    pub fn levels(&self) -> &HashMap<String, Arc<PriorityLevel>> {
        &self.levels
    }

    /// Where `who`'s request `asked` goes.
    pub fn classify(&self, who: Who<'_>, asked: Asked<'_>) -> Classification {
        let entry = self
            .schemas
            .iter()
            .find(|e| e.schema.rules.iter().any(|r| matches_rules(who, asked, r)))
            .unwrap_or(&self.catch_all);
        let Entry {
            schema,
            level,
            headers,
        } = entry.clone();
        let distinguisher = match (schema.distinguisher, asked) {
            (None, _) => "",
            (Some(Distinguisher::ByUser), _) => who.name,
            (Some(Distinguisher::ByNamespace), Asked::Resource { namespace, .. }) => namespace,
            (Some(Distinguisher::ByNamespace), Asked::NonResource { .. }) => "",
        };
        let mut h = std::collections::hash_map::DefaultHasher::new();
        (schema.name.as_str(), distinguisher).hash(&mut h);
        Classification {
            flow: h.finish(),
            schema,
            level,
            headers,
            share_sum: self.share_sum,
        }
    }
}

fn matches_rules(who: Who<'_>, asked: Asked<'_>, rules: &PolicyRules) -> bool {
    if !rules.subjects.iter().any(|s| matches_subject(who, s)) {
        return false;
    }
    match asked {
        Asked::Resource { .. } => rules
            .resource_rules
            .iter()
            .any(|r| matches_resource(asked, r)),
        Asked::NonResource { verb, path } => rules
            .non_resource_rules
            .iter()
            .any(|r| matches_non_resource(verb, path, r)),
    }
}

const SA_PREFIX: &str = "system:serviceaccount:";

fn matches_subject(who: Who<'_>, subject: &Subject) -> bool {
    match subject {
        Subject::User(name) => name == "*" || name == who.name,
        Subject::Group(name) => name == "*" || who.groups.iter().any(|g| g == name),
        Subject::ServiceAccount { namespace, name } => {
            let Some(rest) = who.name.strip_prefix(SA_PREFIX) else {
                return false;
            };
            let Some(rest) = rest.strip_prefix(namespace.as_str()) else {
                return false;
            };
            match name.as_str() {
                // serviceAccountMatchesNamespace: the separator follows.
                "*" => rest.starts_with(':'),
                // serviceaccount.MatchesUsername: exactly NS:NAME.
                _ => rest.strip_prefix(':') == Some(name.as_str()),
            }
        }
    }
}

/// `x` in `list`, or `list` is the wildcard alone (the apiserver's
/// `containsString`: validation keeps the wildcard alone).
fn contains(x: &str, list: &[String], wildcard: &str) -> bool {
    (list.len() == 1 && list[0] == wildcard) || list.iter().any(|y| y == x)
}

fn matches_resource(asked: Asked<'_>, rule: &ResourceRule) -> bool {
    let Asked::Resource {
        verb,
        api_group,
        resource,
        subresource,
        namespace,
    } = asked
    else {
        return false;
    };
    if !contains(verb, &rule.verbs, "*") {
        return false;
    }
    // `resource/subresource` against each entry, without joining them.
    let named = |y: &String| match subresource {
        "" => y == resource,
        sub => y.split_once('/') == Some((resource, sub)),
    };
    let any = rule.resources.len() == 1 && rule.resources[0] == "*";
    if !(any || rule.resources.iter().any(named)) || !contains(api_group, &rule.api_groups, "*") {
        return false;
    }
    match namespace {
        "" => rule.cluster_scope,
        ns => contains(ns, &rule.namespaces, "*"),
    }
}

fn matches_non_resource(verb: &str, path: &str, rule: &NonResourceRule) -> bool {
    if !contains(verb, &rule.verbs, "*") {
        return false;
    }
    rule.urls.iter().any(|url| {
        if url == "*" || url == path {
            return true;
        }
        let prefix = url.strip_suffix('*').unwrap_or(url);
        match prefix.ends_with('/') {
            true => path.starts_with(prefix),
            false => path
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.starts_with('/')),
        }
    })
}

#[cfg(test)]
mod tests;
