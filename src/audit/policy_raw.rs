//! An audit policy as written, before it is checked: decoded as the
//! apiserver's lenient decoder decodes it (a value of the wrong type refused
//! in Go's words, an unknown field only noted), and validated as its
//! `ValidatePolicy` validates it, problem by problem, in its words.

use serde_json::{Map, Value};

/// A policy as written.
#[derive(Debug, Default)]
pub(super) struct Raw {
    pub(super) rules: Vec<RawRule>,
    pub(super) omit_stages: Vec<String>,
    pub(super) omit_managed_fields: bool,
}

/// A rule as written.
#[derive(Debug, Default)]
pub(super) struct RawRule {
    pub(super) level: String,
    pub(super) users: Vec<String>,
    pub(super) user_groups: Vec<String>,
    pub(super) verbs: Vec<String>,
    pub(super) resources: Vec<GroupResources>,
    pub(super) namespaces: Vec<String>,
    pub(super) non_resource_urls: Vec<String>,
    pub(super) omit_stages: Vec<String>,
    pub(super) omit_managed_fields: Option<bool>,
}

/// A rule's `resources` entry.
#[derive(Debug, Clone, Default)]
pub(super) struct GroupResources {
    pub(super) group: String,
    pub(super) resources: Vec<String>,
    pub(super) resource_names: Vec<String>,
}

/// A JSON value's type, as Go's decoder names it in its errors.
pub(super) fn json_type(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "bool",
        Value::Number(_) => "number",
        Value::String(_) => "string",
        Value::Array(_) => "array",
        Value::Object(_) => "object",
    }
}

/// Go's `json: cannot unmarshal ...` for a field of `owner` at `path`.
fn wrong(v: &Value, owner: &str, path: &str, go_type: &str) -> String {
    format!(
        "json: cannot unmarshal {} into Go struct field {owner}.{path} of type {go_type}",
        json_type(v)
    )
}

fn string<'v>(v: &'v Value, owner: &str, path: &str, go_type: &str) -> Result<&'v str, String> {
    match v {
        Value::Null => Ok(""),
        Value::String(s) => Ok(s),
        _ => Err(wrong(v, owner, path, go_type)),
    }
}

fn array<'v>(v: &'v Value, owner: &str, path: &str, go_type: &str) -> Result<&'v [Value], String> {
    match v {
        Value::Null => Ok(&[]),
        Value::Array(a) => Ok(a),
        _ => Err(wrong(v, owner, path, go_type)),
    }
}

fn object<'v>(
    v: &'v Value,
    owner: &str,
    path: &str,
    go_type: &str,
) -> Result<Option<&'v Map<String, Value>>, String> {
    match v {
        Value::Null => Ok(None),
        Value::Object(m) => Ok(Some(m)),
        _ => Err(wrong(v, owner, path, go_type)),
    }
}

fn strings(v: &Value, owner: &str, path: &str, elem: &str) -> Result<Vec<String>, String> {
    array(v, owner, path, &format!("[]{elem}"))?
        .iter()
        .map(|s| string(s, owner, path, elem).map(str::to_string))
        .collect()
}

/// A boolean; YAML 1.1's words too, as the apiserver's YAML reader takes them.
fn boolean(v: &Value, owner: &str, path: &str) -> Result<Option<bool>, String> {
    const YES: [&str; 11] = [
        "y", "Y", "yes", "Yes", "YES", "true", "True", "TRUE", "on", "On", "ON",
    ];
    const NO: [&str; 11] = [
        "n", "N", "no", "No", "NO", "false", "False", "FALSE", "off", "Off", "OFF",
    ];
    match v {
        Value::Null => Ok(None),
        Value::Bool(b) => Ok(Some(*b)),
        Value::String(s) if YES.contains(&s.as_str()) => Ok(Some(true)),
        Value::String(s) if NO.contains(&s.as_str()) => Ok(Some(false)),
        _ => Err(wrong(v, owner, path, "bool")),
    }
}

impl Raw {
    /// Decodes a policy document (its `apiVersion` and `kind` already
    /// checked); also the unknown fields, by path.
    pub(super) fn decode(doc: &Map<String, Value>) -> Result<(Raw, Vec<String>), String> {
        let mut raw = Raw::default();
        let mut unknown = Vec::new();
        for (k, v) in doc {
            match k.as_str() {
                "apiVersion" | "kind" | "metadata" => {}
                "rules" => {
                    for (i, r) in array(v, "Policy", "rules", "[]v1.PolicyRule")?
                        .iter()
                        .enumerate()
                    {
                        let r = object(r, "Policy", "rules", "v1.PolicyRule")?;
                        raw.rules
                            .push(RawRule::decode(r.unwrap_or(&Map::new()), i, &mut unknown)?);
                    }
                }
                "omitStages" => raw.omit_stages = strings(v, "Policy", "omitStages", "v1.Stage")?,
                "omitManagedFields" => {
                    raw.omit_managed_fields =
                        boolean(v, "Policy", "omitManagedFields")?.unwrap_or(false)
                }
                _ => unknown.push(k.clone()),
            }
        }
        Ok((raw, unknown))
    }

    /// Every problem, in the order and words of the apiserver's
    /// `validation.ValidatePolicy`.
    pub(super) fn validate(&self) -> Vec<String> {
        let mut errs = stage_errors(&self.omit_stages, "omitStages");
        for (i, r) in self.rules.iter().enumerate() {
            r.validate(&format!("rules[{i}]"), &mut errs);
        }
        errs
    }
}

const STAGES: [&str; 4] = [
    "RequestReceived",
    "ResponseStarted",
    "ResponseComplete",
    "Panic",
];

fn stage_errors(stages: &[String], path: &str) -> Vec<String> {
    stages
        .iter()
        .enumerate()
        .filter(|(_, s)| !STAGES.contains(&s.as_str()))
        .map(|(i, s)| {
            format!(
                "{path}[{i}]: Invalid value: {}: allowed stages are {}",
                quote(s),
                STAGES.join(",")
            )
        })
        .collect()
}

/// A string as Go's `%q` writes it (for the characters a policy has).
fn quote(s: &str) -> String {
    serde_json::to_string(s).unwrap_or_default()
}

/// Go's RFC 1123 subdomain check (`validation.IsDNS1123Subdomain`).
fn subdomain_errors(s: &str) -> Vec<String> {
    let mut errs = Vec::new();
    if s.len() > 253 {
        errs.push("must be no more than 253 characters".to_string());
    }
    let label_ok = |l: &str| {
        let b = l.as_bytes();
        let alnum = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
        !b.is_empty()
            && alnum(b[0])
            && alnum(b[b.len() - 1])
            && b.iter().all(|&c| alnum(c) || c == b'-')
    };
    if !s.split('.').all(label_ok) {
        errs.push(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, \
             '-' or '.', and must start and end with an alphanumeric character (e.g. \
             'example.com', regex used for validation is \
             '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
                .to_string(),
        );
    }
    errs
}

impl RawRule {
    fn decode(
        r: &Map<String, Value>,
        i: usize,
        unknown: &mut Vec<String>,
    ) -> Result<RawRule, String> {
        let mut rule = RawRule::default();
        for (k, v) in r {
            let at = format!("rules.{k}");
            let list = |v: &Value| strings(v, "PolicyRule", &at, "string");
            match k.as_str() {
                "level" => rule.level = string(v, "PolicyRule", &at, "v1.Level")?.to_string(),
                "users" => rule.users = list(v)?,
                "userGroups" => rule.user_groups = list(v)?,
                "verbs" => rule.verbs = list(v)?,
                "namespaces" => rule.namespaces = list(v)?,
                "nonResourceURLs" => rule.non_resource_urls = list(v)?,
                "omitStages" => rule.omit_stages = strings(v, "PolicyRule", &at, "v1.Stage")?,
                "omitManagedFields" => {
                    rule.omit_managed_fields = boolean(v, "PolicyRule", &at)?;
                }
                "resources" => {
                    for g in array(v, "PolicyRule", &at, "[]v1.GroupResources")? {
                        let g = object(g, "PolicyRule", &at, "v1.GroupResources")?;
                        let g = g.cloned().unwrap_or_default();
                        rule.resources.push(GroupResources::decode(&g, i, unknown)?);
                    }
                }
                _ => unknown.push(format!("rules[{i}].{k}")),
            }
        }
        Ok(rule)
    }

    fn validate(&self, path: &str, errs: &mut Vec<String>) {
        const LEVELS: [&str; 4] = ["None", "Metadata", "Request", "RequestResponse"];
        if self.level.is_empty() {
            errs.push(format!("{path}.level: Required value"));
        } else if !LEVELS.contains(&self.level.as_str()) {
            let supported: Vec<String> = LEVELS.iter().map(|l| quote(l)).collect();
            errs.push(format!(
                "{path}.level: Unsupported value: {}: supported values: {}",
                quote(&self.level),
                supported.join(", ")
            ));
        }
        for (i, url) in self.non_resource_urls.iter().enumerate() {
            if url == "*" {
                continue;
            }
            let at = format!("{path}.nonResourceURLs[{i}]: Invalid value: {}", quote(url));
            if !url.starts_with('/') {
                errs.push(format!(
                    "{at}: non-resource URL rules must begin with a '/' character"
                ));
            }
            if !url.is_empty() && url[..url.len() - 1].contains('*') {
                errs.push(format!(
                    "{at}: non-resource URL wildcards '*' must be the final character of the rule"
                ));
            }
        }
        for gr in &self.resources {
            if !gr.group.is_empty() && gr.group != "*" {
                let msgs = subdomain_errors(&gr.group);
                if !msgs.is_empty() {
                    errs.push(format!(
                        "{path}.resources.group: Invalid value: {}: {}",
                        quote(&gr.group),
                        msgs.join(",")
                    ));
                }
            }
            if !gr.resource_names.is_empty() && gr.resources.is_empty() {
                errs.push(format!(
                    "{path}.resources.resourceNames: Invalid value: {}: using resourceNames \
                     requires at least one resource",
                    list(&gr.resource_names)
                ));
            }
        }
        errs.extend(stage_errors(
            &self.omit_stages,
            &format!("{path}.omitStages"),
        ));
        if !self.non_resource_urls.is_empty()
            && (!self.resources.is_empty() || !self.namespaces.is_empty())
        {
            errs.push(format!(
                "{path}.nonResourceURLs: Invalid value: {}: rules cannot apply to both regular \
                 resources and non-resource URLs",
                list(&self.non_resource_urls)
            ));
        }
    }
}

/// A list of strings as the apiserver's field errors print one.
fn list(items: &[String]) -> String {
    serde_json::to_string(items).unwrap_or_default()
}

impl GroupResources {
    fn decode(
        g: &Map<String, Value>,
        i: usize,
        unknown: &mut Vec<String>,
    ) -> Result<GroupResources, String> {
        let mut gr = GroupResources::default();
        for (k, v) in g {
            let at = format!("rules.resources.{k}");
            match k.as_str() {
                "group" => gr.group = string(v, "GroupResources", &at, "string")?.to_string(),
                "resources" => gr.resources = strings(v, "GroupResources", &at, "string")?,
                "resourceNames" => gr.resource_names = strings(v, "GroupResources", &at, "string")?,
                _ => unknown.push(format!("rules[{i}].resources[].{k}")),
            }
        }
        Ok(gr)
    }
}
