//! Authentication and authorization for the sim, in kube-apiserver's shapes:
//! a `--token-auth-file` CSV, a small rule set, impersonation, and the
//! TokenReview / SubjectAccessReview APIs answering from the same data.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use bytes::Bytes;
use http::{HeaderMap, HeaderValue, Response, StatusCode, header};
use serde_json::{Value, json};

use r8s::api::params::ListOptions;
use r8s::api::path::ResourcePath;
use r8s::api::request::{Scope, Verb};
use r8s::api::status::{Status, Target};
use r8s::body::Body;
use r8s::sync::MutexExt;

/// An authenticated (or anonymous) user.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct User {
    /// User name.
    pub name: String,
    /// UID.
    pub uid: String,
    /// Groups (including `system:authenticated` / `system:unauthenticated`).
    pub groups: Vec<String>,
}

impl User {
    fn anonymous() -> Self {
        User {
            name: "system:anonymous".into(),
            uid: String::new(),
            groups: vec!["system:unauthenticated".into()],
        }
    }
    fn is_master(&self) -> bool {
        self.groups.iter().any(|g| g == "system:masters")
    }
}

/// A file parsed on first use and re-read whenever its mtime changes, so a
/// test can revoke a token or a permission by rewriting it.
struct Reloading<T> {
    path: PathBuf,
    parse: fn(&Path) -> std::io::Result<T>,
    state: Mutex<(Option<SystemTime>, T)>,
}

impl<T: Clone> Reloading<T> {
    fn load(path: &Path, parse: fn(&Path) -> std::io::Result<T>) -> std::io::Result<Self> {
        let value = parse(path)?;
        let mtime = std::fs::metadata(path).and_then(|m| m.modified()).ok();
        Ok(Reloading {
            path: path.to_path_buf(),
            parse,
            state: Mutex::new((mtime, value)),
        })
    }

    fn with<R>(&self, f: impl FnOnce(&T) -> R) -> R {
        let mut st = self.state.locked();
        let mtime = std::fs::metadata(&self.path)
            .and_then(|m| m.modified())
            .ok();
        if mtime != st.0
            && let Ok(v) = (self.parse)(&self.path)
        {
            *st = (mtime, v);
        }
        f(&st.1)
    }
}

/// One line of a kube-apiserver ABAC policy file
/// (`--authorization-policy-file`): `{"apiVersion":
/// "abac.authorization.kubernetes.io/v1beta1", "kind": "Policy", "spec": {...}}`.
#[derive(Debug, Clone, Default, serde::Deserialize)]
#[serde(rename_all = "camelCase", default)]
struct PolicySpec {
    user: String,
    group: String,
    readonly: bool,
    api_group: String,
    namespace: String,
    resource: String,
    /// Not ABAC's: RBAC's `resourceNames`. When set, only requests for one
    /// of these objects match (a list or watch only with a `metadata.name`
    /// field selector naming one).
    resource_names: Vec<String>,
}

impl PolicySpec {
    fn matches(&self, user: &User, verb: &str, target: &Resource<'_>) -> bool {
        let who = (!self.user.is_empty() && (self.user == "*" || self.user == user.name))
            || (!self.group.is_empty() && (self.group == "*" || user.groups.contains(&self.group)));
        let field = |rule: &str, v: &str| rule == "*" || rule == v;
        let ns = target.namespace;
        who && (!self.readonly || matches!(verb, "get" | "list" | "watch"))
            && field(&self.api_group, target.group)
            && field(&self.resource, target.resource)
            && (self.namespace == "*" || (!ns.is_empty() && self.namespace == ns))
            && (self.resource_names.is_empty()
                || self.resource_names.iter().any(|n| n == target.name))
    }
}

/// What an authorizer decides on besides the user and verb.
#[derive(Debug, Clone, Copy)]
pub struct Resource<'a> {
    /// API group.
    pub group: &'a str,
    /// Resource, with `/subresource` if any.
    pub resource: &'a str,
    /// Namespace (empty: cluster scope).
    pub namespace: &'a str,
    /// Object name (empty: none).
    pub name: &'a str,
    /// The raw field selector (the node authorizer decides on it).
    pub field_selector: &'a str,
}

fn read_policy(path: &Path) -> std::io::Result<Vec<PolicySpec>> {
    #[derive(serde::Deserialize)]
    struct Line {
        spec: PolicySpec,
    }
    let text = std::fs::read_to_string(path)?;
    text.lines()
        .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
        .map(|l| {
            serde_json::from_str::<Line>(l)
                .map(|l| l.spec)
                .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))
        })
        .collect()
}

/// Impersonated requests remembered (the latest).
const MAX_IMPERSONATIONS: usize = 1000;

/// The tokens file and the optional policy file, both re-read when they
/// change (so revocations take effect), and who impersonated whom.
pub struct Tokens {
    tokens: Reloading<HashMap<String, User>>,
    policy: Option<Reloading<Vec<PolicySpec>>>,
    impersonations: Mutex<Vec<(String, User)>>,
}

fn parse_csv_line(line: &str) -> Vec<String> {
    let mut out = vec![String::new()];
    let mut quoted = false;
    for c in line.chars() {
        match c {
            '"' => quoted = !quoted,
            ',' if !quoted => out.push(String::new()),
            c => out.last_mut().expect("non-empty").push(c),
        }
    }
    out.into_iter().map(|s| s.trim().to_string()).collect()
}

fn read_tokens(path: &Path) -> std::io::Result<HashMap<String, User>> {
    let text = std::fs::read_to_string(path)?;
    let mut map = HashMap::new();
    for line in text
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        let f = parse_csv_line(line);
        if f.len() < 3 {
            continue;
        }
        let mut groups: Vec<String> = f
            .get(3)
            .map(|g| {
                g.split(',')
                    .map(str::trim)
                    .filter(|g| !g.is_empty())
                    .map(str::to_string)
                    .collect()
            })
            .unwrap_or_default();
        groups.push("system:authenticated".into());
        map.insert(
            f[0].clone(),
            User {
                name: f[1].clone(),
                uid: f[2].clone(),
                groups,
            },
        );
    }
    Ok(map)
}

impl Tokens {
    /// Loads the CSV file `token,user,uid,"group1,group2"` and, if given, an
    /// ABAC policy file whose rules add to the built-in ones.
    pub fn load(path: &Path, policy: Option<&Path>) -> std::io::Result<Self> {
        Ok(Tokens {
            tokens: Reloading::load(path, read_tokens)?,
            policy: policy
                .map(|p| Reloading::load(p, read_policy))
                .transpose()?,
            impersonations: Mutex::new(Vec::new()),
        })
    }

    fn lookup(&self, token: &str) -> Option<User> {
        self.tokens.with(|m| m.get(token).cloned())
    }

    /// Who impersonated whom so far: (the authenticated user, the user acted as).
    pub fn impersonations(&self) -> Vec<(String, User)> {
        self.impersonations.locked().clone()
    }

    /// Who is asking: a bearer token, or anonymous; impersonation applied for masters.
    pub fn authenticate(&self, headers: &HeaderMap) -> Result<User, Status> {
        let user = match headers
            .get(header::AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
        {
            None => User::anonymous(),
            Some(v) => {
                let token = v.strip_prefix("Bearer ").ok_or_else(Status::unauthorized)?;
                self.lookup(token.trim()).ok_or_else(Status::unauthorized)?
            }
        };
        let Some(as_user) = headers
            .get("impersonate-user")
            .and_then(|v| v.to_str().ok())
        else {
            return Ok(user);
        };
        if !user.is_master() {
            return Err(Status::new(
                403,
                "Forbidden",
                format!(
                    "users \"{as_user}\" is forbidden: User \"{}\" cannot impersonate resource \"users\" in API group \"\" at the cluster scope",
                    user.name
                ),
            ));
        }
        let mut groups: Vec<String> = headers
            .get_all("impersonate-group")
            .iter()
            .filter_map(|v| v.to_str().ok().map(str::to_string))
            .collect();
        if !groups.iter().any(|g| g == "system:authenticated") {
            groups.push("system:authenticated".into());
        }
        let uid = headers
            .get("impersonate-uid")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        let acting = User {
            name: as_user.to_string(),
            uid: uid.to_string(),
            groups,
        };
        let mut seen = self.impersonations.locked();
        if seen.len() == MAX_IMPERSONATIONS {
            seen.remove(0);
        }
        seen.push((user.name, acting.clone()));
        Ok(acting)
    }

    /// Authorizes `verb` on a resource path, with the namespace and name
    /// RequestInfo gives it (its `scope`; `options`: `None` when they did
    /// not decode); 403 in the apiserver's words.
    pub fn authorize(
        &self,
        user: Option<&User>,
        verb: Verb,
        rp: &ResourcePath,
        scope: &Scope,
        options: Option<&ListOptions>,
    ) -> Result<(), Status> {
        let anon = User::anonymous();
        let user = user.unwrap_or(&anon);
        let resource = match &rp.subresource {
            Some(s) => format!("{}/{s}", rp.gvr.resource()),
            None => rp.gvr.resource().to_string(),
        };
        let (name, namespace) = (scope.name.as_str(), scope.namespace.as_str());
        let target = Resource {
            group: rp.gvr.group(),
            resource: &resource,
            namespace,
            name,
            field_selector: options.map_or("", |o| o.field_selector.as_str()),
        };
        if self.allows(user, verb.as_str(), &target) {
            return Ok(());
        }
        let target = Target {
            group: rp.gvr.group(),
            resource: rp.gvr.resource(),
            subresource: rp.subresource.as_deref(),
            namespace: Some(namespace),
            name: Some(name),
        };
        Err(Status::forbidden(&user.name, verb.as_str(), &target, ""))
    }

    /// The sim's rule set: `system:masters` may do anything; nodes
    /// (`system:node:NAME` in `system:nodes`) only what the node authorizer
    /// with selectors allows them here: get nodes, list/watch pods with
    /// `fieldSelector=spec.nodeName=NAME`, and patch or update their own
    /// node's status; other authenticated users may get,
    /// list and watch everything but secrets and namespaces; anonymous
    /// nothing; plus whatever the policy file grants.
    pub fn allows(&self, user: &User, verb: &str, target: &Resource<'_>) -> bool {
        if user.is_master() {
            return true;
        }
        if user.groups.iter().any(|g| g == "system:nodes") {
            let node = user.name.strip_prefix("system:node:").unwrap_or_default();
            return match (verb, target.resource) {
                ("get", "nodes") => true,
                ("list" | "watch", "pods") => {
                    !node.is_empty() && target.field_selector == format!("spec.nodeName={node}")
                }
                // Its own Node's status, as the node authorizer and
                // NodeRestriction let a kubelet write it.
                ("patch" | "update", "nodes/status") => !node.is_empty() && target.name == node,
                _ => false,
            };
        }
        let authenticated = user.groups.iter().any(|g| g == "system:authenticated");
        if authenticated
            && matches!(verb, "get" | "list" | "watch")
            && !matches!(target.resource, "secrets" | "namespaces")
        {
            return true;
        }
        self.policy
            .as_ref()
            .is_some_and(|p| p.with(|rules| rules.iter().any(|r| r.matches(user, verb, target))))
    }
}

/// A review's field selector as the sim's rules read it (`key=value`, ...):
/// its `rawSelector`, or its `requirements` (what kube-apiserver and r8s
/// send), each `In` or `NotIn` of one value written back as a term.
fn field_selector(fs: &Value) -> String {
    if let Some(raw) = fs["rawSelector"].as_str() {
        return raw.to_string();
    }
    let terms: Vec<String> = fs["requirements"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|r| {
            let key = r["key"].as_str()?;
            let value = match r["values"].as_array()?.as_slice() {
                [v] => v.as_str()?,
                _ => return None,
            };
            let op = match r["operator"].as_str()? {
                "In" => "=",
                "NotIn" => "!=",
                _ => return None,
            };
            Some(format!("{key}{op}{value}"))
        })
        .collect();
    terms.join(",")
}

/// Whether the path is one of the review APIs.
pub fn is_review(rp: &ResourcePath) -> bool {
    matches!(
        (rp.gvr.group(), rp.gvr.resource()),
        ("authentication.k8s.io", "tokenreviews")
            | ("authorization.k8s.io", "subjectaccessreviews")
    )
}

/// `POST` a TokenReview or SubjectAccessReview, answered from `tokens`
/// (none: every token is rejected, every resource access denied).
pub fn review(
    tokens: Option<&Tokens>,
    method: &http::Method,
    rp: &ResourcePath,
    body: &Bytes,
) -> Result<Response<Body>, Status> {
    if method != http::Method::POST {
        return Err(Status::method_not_allowed());
    }
    let mut v: Value = serde_json::from_slice(body).map_err(|e| {
        Status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
    })?;
    let status = if rp.gvr.resource() == "tokenreviews" {
        let token = v["spec"]["token"].as_str().unwrap_or_default();
        match tokens.and_then(|t| t.lookup(token)) {
            Some(u) => json!({"authenticated": true,
                "user": {"username": u.name, "uid": u.uid, "groups": u.groups}}),
            None => json!({"authenticated": false, "user": {}, "error": "invalid bearer token"}),
        }
    } else {
        let spec = &v["spec"];
        let groups: Vec<String> = spec["groups"]
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|g| g.as_str().map(str::to_string))
                    .collect()
            })
            .unwrap_or_default();
        let user = User {
            name: spec["user"].as_str().unwrap_or_default().to_string(),
            uid: spec["uid"].as_str().unwrap_or_default().to_string(),
            groups,
        };
        let ok = if let Some(ra) = spec.get("resourceAttributes") {
            let res = match ra["subresource"].as_str().filter(|s| !s.is_empty()) {
                Some(s) => format!("{}/{s}", ra["resource"].as_str().unwrap_or_default()),
                None => ra["resource"].as_str().unwrap_or_default().to_string(),
            };
            fn text(v: &Value) -> &str {
                v.as_str().unwrap_or_default()
            }
            let target = Resource {
                group: text(&ra["group"]),
                resource: &res,
                namespace: text(&ra["namespace"]),
                name: text(&ra["name"]),
                field_selector: &field_selector(&ra["fieldSelector"]),
            };
            tokens.is_some_and(|t| t.allows(&user, text(&ra["verb"]), &target))
        } else {
            true
        };
        if ok {
            json!({"allowed": true, "reason": "allowed by the r8s sim's rules"})
        } else {
            json!({"allowed": false})
        }
    };
    v["status"] = status;
    v["metadata"] = json!({"creationTimestamp": null});
    let bytes = serde_json::to_vec(&v).expect("JSON serializes");
    let mut resp = r8s::api::json_response(StatusCode::CREATED, r8s::body::full_line(bytes.into()));
    resp.headers_mut().insert(
        "x-content-type-options",
        HeaderValue::from_static("nosniff"),
    );
    Ok(resp)
}
