//! Label and field selectors: parsed once per request, matched per object.
//!
//! Syntax and error messages follow apimachinery's parsers
//! (`k8s.io/apimachinery/pkg/labels.Parse`, `pkg/fields.ParseSelector`),
//! whose failures kube-apiserver answers with 400 `BadRequest`.

use crate::api::shard::ShardSelector;
use serde_json::Value;

/// One label requirement operator.
#[derive(Debug, Clone, PartialEq, Eq)]
enum LabelOp {
    Exists,
    NotExists,
    Eq(String),
    NotEq(String),
    In(Vec<String>),
    NotIn(Vec<String>),
    Gt(i64),
    Lt(i64),
}

/// A parsed label selector; an empty one matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct LabelSelector {
    reqs: Vec<(String, LabelOp)>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Ident(String),
    Not,
    DoubleEq,
    Eq,
    NotEq,
    In,
    NotIn,
    Open,
    Close,
    Comma,
    Gt,
    Lt,
    End,
}

impl Tok {
    fn literal(&self) -> String {
        match self {
            Tok::Ident(s) => s.clone(),
            Tok::Not => "!".into(),
            Tok::DoubleEq => "==".into(),
            Tok::Eq => "=".into(),
            Tok::NotEq => "!=".into(),
            Tok::In => "in".into(),
            Tok::NotIn => "notin".into(),
            Tok::Open => "(".into(),
            Tok::Close => ")".into(),
            Tok::Comma => ",".into(),
            Tok::Gt => ">".into(),
            Tok::Lt => "<".into(),
            Tok::End => String::new(),
        }
    }
}

fn lex(s: &str) -> Vec<Tok> {
    let mut out = Vec::new();
    let b: Vec<char> = s.chars().collect();
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_whitespace() {
            i += 1;
            continue;
        }
        let two: String = b[i..(i + 2).min(b.len())].iter().collect();
        match two.as_str() {
            "==" => {
                out.push(Tok::DoubleEq);
                i += 2;
                continue;
            }
            "!=" => {
                out.push(Tok::NotEq);
                i += 2;
                continue;
            }
            _ => {}
        }
        let t = match c {
            '!' => Some(Tok::Not),
            '=' => Some(Tok::Eq),
            '(' => Some(Tok::Open),
            ')' => Some(Tok::Close),
            ',' => Some(Tok::Comma),
            '>' => Some(Tok::Gt),
            '<' => Some(Tok::Lt),
            _ => None,
        };
        if let Some(t) = t {
            out.push(t);
            i += 1;
            continue;
        }
        let start = i;
        while i < b.len() && !b[i].is_whitespace() && !"!=(),><".contains(b[i]) {
            i += 1;
        }
        let word: String = b[start..i].iter().collect();
        out.push(match word.as_str() {
            "in" => Tok::In,
            "notin" => Tok::NotIn,
            _ => Tok::Ident(word),
        });
    }
    out.push(Tok::End);
    out
}

struct Parser {
    toks: Vec<Tok>,
    pos: usize,
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.pos]
    }
    fn next(&mut self) -> Tok {
        let t = self.toks[self.pos].clone();
        if self.pos + 1 < self.toks.len() {
            self.pos += 1;
        }
        t
    }

    fn requirement(&mut self) -> Result<(String, LabelOp), String> {
        let negated = if *self.peek() == Tok::Not {
            self.next();
            true
        } else {
            false
        };
        let key = match self.next() {
            Tok::Ident(k) => k,
            t => {
                return Err(format!(
                    "found '{}', expected: !, identifier, or 'end of string'",
                    t.literal()
                ));
            }
        };
        validate_label_key(&key)?;
        if negated {
            return match self.peek() {
                Tok::Comma | Tok::End => Ok((key, LabelOp::NotExists)),
                t => Err(format!(
                    "found '{}', expected: ',' or 'end of string'",
                    t.literal()
                )),
            };
        }
        let op = match self.peek() {
            Tok::Comma | Tok::End => return Ok((key, LabelOp::Exists)),
            _ => self.next(),
        };
        match op {
            Tok::Eq | Tok::DoubleEq | Tok::NotEq => {
                let v = match self.peek().clone() {
                    Tok::Ident(v) => {
                        self.next();
                        v
                    }
                    Tok::Comma | Tok::End => String::new(),
                    t => return Err(format!("found '{}', expected: identifier", t.literal())),
                };
                validate_label_value(&v)?;
                Ok((
                    key,
                    if op == Tok::NotEq {
                        LabelOp::NotEq(v)
                    } else {
                        LabelOp::Eq(v)
                    },
                ))
            }
            Tok::Gt | Tok::Lt => {
                let v = match self.next() {
                    Tok::Ident(v) => v,
                    t => return Err(format!("found '{}', expected: identifier", t.literal())),
                };
                let n: i64 = v.parse().map_err(|_| {
                    "for 'Gt', 'Lt' operators, the value must be an integer".to_string()
                })?;
                Ok((
                    key,
                    if op == Tok::Gt {
                        LabelOp::Gt(n)
                    } else {
                        LabelOp::Lt(n)
                    },
                ))
            }
            Tok::In | Tok::NotIn => {
                match self.next() {
                    Tok::Open => {}
                    t => return Err(format!("found '{}', expected: '('", t.literal())),
                }
                let mut vals = Vec::new();
                loop {
                    match self.peek().clone() {
                        Tok::Ident(v) => {
                            self.next();
                            validate_label_value(&v)?;
                            vals.push(v);
                        }
                        Tok::Comma | Tok::Close => vals.push(String::new()),
                        t => {
                            return Err(format!(
                                "found '{}', expected: ',', ')' or identifier",
                                t.literal()
                            ));
                        }
                    }
                    match self.next() {
                        Tok::Comma => continue,
                        Tok::Close => break,
                        t => {
                            return Err(format!("found '{}', expected: ',' or ')'", t.literal()));
                        }
                    }
                }
                Ok((
                    key,
                    if op == Tok::In {
                        LabelOp::In(vals)
                    } else {
                        LabelOp::NotIn(vals)
                    },
                ))
            }
            t => Err(format!(
                "found '{}', expected: in, notin, =, ==, !=, gt, lt",
                t.literal()
            )),
        }
    }
}

/// Checks a label key as apimachinery does (an optional DNS prefix and `/`,
/// then a name of at most 63 characters).
pub fn validate_label_key(k: &str) -> Result<(), String> {
    let (prefix, name) = match k.rsplit_once('/') {
        Some((p, n)) => (Some(p), n),
        None => (None, k),
    };
    let name_ok = !name.is_empty()
        && name.len() <= 63
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        && name
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphanumeric())
        && name
            .chars()
            .last()
            .is_some_and(|c| c.is_ascii_alphanumeric());
    let prefix_ok = prefix.is_none_or(|p| {
        !p.is_empty()
            && p.len() <= 253
            && p.chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || "-.".contains(c))
    });
    if name_ok && prefix_ok {
        Ok(())
    } else {
        Err(format!(
            "invalid label key \"{k}\": name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

fn validate_label_value(v: &str) -> Result<(), String> {
    let ok = v.is_empty()
        || (v.len() <= 63
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
            && v.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
            && v.chars().last().is_some_and(|c| c.is_ascii_alphanumeric()));
    if ok {
        Ok(())
    } else {
        Err(format!(
            "invalid label value: \"{v}\": at key: a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
        ))
    }
}

impl LabelSelector {
    /// Parses a `labelSelector`; the error is the apiserver's message.
    pub fn parse(s: &str) -> Result<Self, String> {
        let mut p = Parser {
            toks: lex(s),
            pos: 0,
        };
        let mut reqs = Vec::new();
        if *p.peek() == Tok::End {
            return Ok(Self::default());
        }
        loop {
            let r = p
                .requirement()
                .map_err(|e| format!("unable to parse requirement: {e}"))?;
            reqs.push(r);
            match p.next() {
                Tok::End => break,
                Tok::Comma => {
                    if *p.peek() == Tok::End {
                        return Err("found '', expected: identifier after ','".into());
                    }
                }
                t => {
                    return Err(format!(
                        "found '{}', expected: ',' or 'end of string'",
                        t.literal()
                    ));
                }
            }
        }
        Ok(Self { reqs })
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The values of label `key` an object must have one of to match, where
    /// a requirement (`key=v`, `key==v`, `key in (v,w)`) names them (each once): the
    /// fewest such. What a label index reads, before the rest filters.
    pub fn values(&self, key: &str) -> Option<Vec<&str>> {
        self.reqs
            .iter()
            .filter(|(k, _)| k == key)
            .filter_map(|(_, op)| match op {
                LabelOp::Eq(v) => Some(vec![v.as_str()]),
                LabelOp::In(set) => {
                    let mut vs: Vec<&str> = set.iter().map(String::as_str).collect();
                    vs.sort_unstable();
                    vs.dedup();
                    Some(vs)
                }
                _ => None,
            })
            .min_by_key(Vec::len)
    }

    /// Whether an object with these labels matches.
    pub fn matches<'a>(&self, label: impl Fn(&str) -> Option<&'a str>) -> bool {
        self.reqs.iter().all(|(k, op)| {
            let v = label(k);
            match op {
                LabelOp::Exists => v.is_some(),
                LabelOp::NotExists => v.is_none(),
                LabelOp::Eq(want) => v == Some(want.as_str()),
                LabelOp::NotEq(want) => v != Some(want.as_str()),
                LabelOp::In(set) => v.is_some_and(|v| set.iter().any(|s| s == v)),
                LabelOp::NotIn(set) => v.is_none_or(|v| !set.iter().any(|s| s == v)),
                LabelOp::Gt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x > *n),
                LabelOp::Lt(n) => v
                    .and_then(|v| v.parse::<i64>().ok())
                    .is_some_and(|x| x < *n),
            }
        })
    }

    /// Matches against a JSON object's `metadata.labels`.
    pub fn matches_object(&self, obj: &Value) -> bool {
        let labels = obj.pointer("/metadata/labels");
        self.matches(|k| labels.and_then(|l| l.get(k)).and_then(Value::as_str))
    }
}

/// A requirement's operator as a SubjectAccessReview carries it
/// (`metav1.LabelSelectorOperator`, `metav1.FieldSelectorOperator`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ReviewOp {
    /// `=`, `==`, `in`.
    In,
    /// `!=`, `notin`.
    NotIn,
    /// A bare key (labels only).
    Exists,
    /// `!key` (labels only).
    DoesNotExist,
}

impl ReviewOp {
    /// Its name in `authorization.k8s.io/v1`.
    pub fn as_str(self) -> &'static str {
        match self {
            ReviewOp::In => "In",
            ReviewOp::NotIn => "NotIn",
            ReviewOp::Exists => "Exists",
            ReviewOp::DoesNotExist => "DoesNotExist",
        }
    }
}

/// One selector requirement as kube-apiserver's webhook authorizer sends it
/// in a SubjectAccessReview's `requirements` (`resourceAttributesFrom`).
#[derive(Debug, Clone, PartialEq, Eq, Hash)]
pub struct ReviewRequirement {
    /// The label key or field path.
    pub key: String,
    /// What it requires.
    pub op: ReviewOp,
    /// Its values (sorted, each once; none for `Exists`, `DoesNotExist`).
    pub values: Vec<String>,
}

impl LabelSelector {
    /// Its requirements as a SubjectAccessReview carries them: sorted by
    /// key (as `labels.Parse` sorts them), `>` and `<` left out (they only
    /// narrow, so the review is as broad or broader).
    pub fn review_requirements(&self) -> Vec<ReviewRequirement> {
        let mut out: Vec<ReviewRequirement> = self
            .reqs
            .iter()
            .filter_map(|(k, op)| {
                let (op, mut values) = match op {
                    LabelOp::Exists => (ReviewOp::Exists, Vec::new()),
                    LabelOp::NotExists => (ReviewOp::DoesNotExist, Vec::new()),
                    LabelOp::Eq(v) => (ReviewOp::In, vec![v.clone()]),
                    LabelOp::NotEq(v) => (ReviewOp::NotIn, vec![v.clone()]),
                    LabelOp::In(vs) => (ReviewOp::In, vs.clone()),
                    LabelOp::NotIn(vs) => (ReviewOp::NotIn, vs.clone()),
                    LabelOp::Gt(_) | LabelOp::Lt(_) => return None,
                };
                values.sort_unstable();
                values.dedup();
                Some(ReviewRequirement {
                    key: k.clone(),
                    op,
                    values,
                })
            })
            .collect();
        out.sort_by(|a, b| a.key.cmp(&b.key));
        out
    }
}

impl FieldSelector {
    /// Its requirements as a SubjectAccessReview carries them, in the
    /// order `fields.ParseSelector` keeps its terms (sorted).
    pub fn review_requirements(&self) -> Vec<ReviewRequirement> {
        self.reqs
            .iter()
            .map(|(k, eq, v)| ReviewRequirement {
                key: k.clone(),
                op: if *eq { ReviewOp::In } else { ReviewOp::NotIn },
                values: vec![v.clone()],
            })
            .collect()
    }

    /// The selector a named watch is served with when it has none
    /// (`metadata.name=name`, as the apiserver's list handler makes it).
    pub fn name_only(name: &str) -> Self {
        FieldSelector {
            reqs: vec![("metadata.name".into(), true, name.into())],
        }
    }
}

/// The label, field and shard selectors of a list or watch, parsed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Selectors {
    /// `labelSelector`.
    pub labels: LabelSelector,
    /// `fieldSelector`, its fields checked against the resource's.
    pub fields: FieldSelector,
    /// `shardSelector`, where one was given.
    pub shard: Option<ShardSelector>,
}

impl Selectors {
    /// Whether all are empty (everything matches).
    pub fn is_empty(&self) -> bool {
        self.labels.is_empty() && self.fields.is_empty() && self.shard.is_none()
    }
}

/// A parsed field selector: `key=value`, `key==value`, `key!=value`, comma-separated.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FieldSelector {
    reqs: Vec<(String, bool, String)>,
}

impl FieldSelector {
    /// Parses a `fieldSelector` as apimachinery's `fields.ParseSelector`
    /// does (terms split on unescaped commas and sorted; each split at its
    /// first operator; values unescaped, where an unescaped `,` or `=` or an
    /// unknown escape is an error), then checks every field is one
    /// `supported` lists, in that order: the apiserver's first error.
    pub fn parse(s: &str, supported: &[&str]) -> Result<Self, String> {
        let sel = Self::parse_syntax(s)?;
        for (k, _, _) in &sel.reqs {
            if !supported.contains(&k.as_str()) {
                return Err(format!("field label not supported: {k}"));
            }
        }
        Ok(sel)
    }

    /// Whether any requirement is on `field`.
    pub fn names(&self, field: &str) -> bool {
        self.reqs.iter().any(|(k, _, _)| k == field)
    }

    /// The field labels its requirements are on.
    pub fn labels(&self) -> impl Iterator<Item = &str> {
        self.reqs.iter().map(|(k, _, _)| k.as_str())
    }

    /// Parses a `fieldSelector` as `fields.ParseSelector` alone does, for
    /// any field: what RequestInfo reads a list's name from, before the
    /// handler checks the fields against the resource's.
    pub fn parse_syntax(s: &str) -> Result<Self, String> {
        let mut terms = split_terms(s);
        terms.sort_unstable();
        let mut reqs = Vec::new();
        for term in terms.into_iter().filter(|t| !t.is_empty()) {
            let Some((field, op, value)) = split_term(term) else {
                return Err(format!(
                    "invalid selector: '{s}'; can't understand '{term}'"
                ));
            };
            reqs.push((field.to_string(), op != "!=", unescape_value(value)?));
        }
        Ok(Self { reqs })
    }

    /// True when the selector has no requirements.
    pub fn is_empty(&self) -> bool {
        self.reqs.is_empty()
    }

    /// The value an exact-match requirement demands of `field`, if any (for indexes).
    pub fn exact(&self, field: &str) -> Option<&str> {
        self.reqs
            .iter()
            .find(|(k, eq, _)| *eq && k == field)
            .map(|(_, _, v)| v.as_str())
    }

    /// Whether `field=value` is one of the requirements: every object this
    /// selects has that value.
    pub fn requires(&self, field: &str, value: &str) -> bool {
        self.reqs
            .iter()
            .any(|(k, eq, v)| *eq && k == field && v == value)
    }

    /// Whether an object with these field values matches.
    pub fn matches(&self, field: impl Fn(&str) -> String) -> bool {
        self.reqs.iter().all(|(k, eq, v)| (field(k) == *v) == *eq)
    }

    /// [`FieldSelector::matches`] over borrowed values (the cache's hot path).
    pub fn matches_str<'a>(&self, field: impl Fn(&str) -> &'a str) -> bool {
        self.reqs.iter().all(|(k, eq, v)| (field(k) == v) == *eq)
    }
}

/// A field selector's terms: split on commas not escaped by a backslash,
/// escapes kept (apimachinery's `splitTerms`).
fn split_terms(s: &str) -> Vec<&str> {
    if s.is_empty() {
        return Vec::new();
    }
    let mut terms = Vec::new();
    let (mut start, mut escaped) = (0, false);
    for (i, c) in s.char_indices() {
        match c {
            _ if escaped => escaped = false,
            '\\' => escaped = true,
            ',' => {
                terms.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    terms.push(&s[start..]);
    terms
}

/// A term split at the first place an operator (`!=`, `==`, `=`, tried in
/// that order) starts: field, operator, raw value (`splitTerm`).
fn split_term(term: &str) -> Option<(&str, &'static str, &str)> {
    term.char_indices().find_map(|(i, _)| {
        ["!=", "==", "="]
            .into_iter()
            .find(|op| term[i..].starts_with(op))
            .map(|op| (&term[..i], op, &term[i + op.len()..]))
    })
}

/// A field selector value unescaped (`\\`, `\,`, `\=`), with apimachinery's
/// errors for an unescaped `,` or `=` (named by its code point, as Go's `%v`
/// prints a rune) and an unknown or trailing escape.
fn unescape_value(s: &str) -> Result<String, String> {
    let mut out = String::with_capacity(s.len());
    let mut escaped = false;
    for c in s.chars() {
        if escaped {
            if !matches!(c, '\\' | ',' | '=') {
                return Err(format!(
                    "invalid field selector: invalid escape sequence: \\{c}"
                ));
            }
            out.push(c);
            escaped = false;
            continue;
        }
        match c {
            '\\' => escaped = true,
            ',' | '=' => {
                return Err(format!(
                    "invalid field selector: unescaped character in value: {}",
                    c as u32
                ));
            }
            _ => out.push(c),
        }
    }
    if escaped {
        return Err("invalid field selector: invalid escape sequence: \\".into());
    }
    Ok(out)
}

/// The field labels each resource supports in field selectors (beyond metadata).
pub fn supported_fields(resource: &str) -> &'static [&'static str] {
    match resource {
        "pods" => &[
            "metadata.name",
            "metadata.namespace",
            "spec.nodeName",
            "spec.restartPolicy",
            "spec.schedulerName",
            "spec.serviceAccountName",
            "spec.hostNetwork",
            "status.phase",
            "status.podIP",
            "status.nominatedNodeName",
        ],
        "secrets" => &["metadata.name", "metadata.namespace", "type"],
        "nodes" => &["metadata.name", "metadata.namespace", "spec.unschedulable"],
        "namespaces" => &["metadata.name", "metadata.namespace", "status.phase"],
        "events" => &[
            "metadata.name",
            "metadata.namespace",
            "involvedObject.kind",
            "involvedObject.namespace",
            "involvedObject.name",
            "involvedObject.uid",
            "involvedObject.apiVersion",
            "involvedObject.resourceVersion",
            "involvedObject.fieldPath",
            "reason",
            "reportingComponent",
            "source",
            "type",
        ],
        _ => &["metadata.name", "metadata.namespace"],
    }
}

/// The value of a field label on a JSON object, as the apiserver's field set gives it.
pub fn field_value(obj: &Value, field: &str) -> String {
    let ptr = format!("/{}", field.replace('.', "/"));
    match obj.pointer(&ptr) {
        Some(Value::String(s)) => s.clone(),
        Some(Value::Bool(b)) => b.to_string(),
        Some(Value::Number(n)) => n.to_string(),
        Some(_) => String::new(),
        None if field == "spec.hostNetwork" || field == "spec.unschedulable" => "false".into(),
        None => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn labels(pairs: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<&'static str> {
        let v: Vec<(&'static str, &'static str)> = pairs.to_vec();
        move |k| v.iter().find(|(a, _)| *a == k).map(|(_, b)| *b)
    }

    #[test]
    fn should_match_set_based_requirements() {
        let s = LabelSelector::parse("app=app-3,tier in (batch,cache)").unwrap();
        assert!(s.matches(labels(&[("app", "app-3"), ("tier", "cache")])));
        assert!(!s.matches(labels(&[("app", "app-3"), ("tier", "web")])));
        let s = LabelSelector::parse("!shard,app").unwrap();
        assert!(s.matches(labels(&[("app", "x")])));
        assert!(!s.matches(labels(&[("app", "x"), ("shard", "1")])));
        let s = LabelSelector::parse("a notin (x), b!=y, c>3").unwrap();
        assert!(s.matches(labels(&[("a", "z"), ("c", "4")])));
        assert!(!s.matches(labels(&[("a", "x"), ("c", "4")])));
    }

    #[test]
    fn should_report_parse_errors_like_apimachinery() {
        assert_eq!(
            LabelSelector::parse("app in (a").unwrap_err(),
            "unable to parse requirement: found '', expected: ',' or ')'"
        );
        assert!(LabelSelector::parse("").unwrap().is_empty());
    }

    #[test]
    fn should_parse_and_match_field_selectors() {
        let f = supported_fields("pods");
        assert_eq!(
            FieldSelector::parse("spec.nodeName in (a)", f).unwrap_err(),
            "invalid selector: 'spec.nodeName in (a)'; can't understand 'spec.nodeName in (a)'"
        );
        assert_eq!(
            FieldSelector::parse("spec.containers.name=main", f).unwrap_err(),
            "field label not supported: spec.containers.name"
        );
        let s = FieldSelector::parse("metadata.namespace=ns-7,metadata.name!=pod-7", f).unwrap();
        let pod = json!({"metadata": {"name": "pod-8", "namespace": "ns-7"}});
        assert!(s.matches(|k| field_value(&pod, k)));
        assert_eq!(s.exact("metadata.namespace"), Some("ns-7"));
        let s = FieldSelector::parse("spec.nodeName=", f).unwrap();
        assert!(s.matches(|k| field_value(&pod, k)));
    }

    #[test]
    fn should_parse_field_selector_values_as_apimachinery() {
        let f = supported_fields("pods");
        let err = |s: &str| FieldSelector::parse(s, f).unwrap_err();
        // Recorded from kube-apiserver (issue 11): 400 with this message.
        assert_eq!(
            err("metadata.name=a=b"),
            "invalid field selector: unescaped character in value: 61"
        );
        assert_eq!(
            err(r"metadata.name=a\x"),
            r"invalid field selector: invalid escape sequence: \x"
        );
        assert_eq!(
            err(r"metadata.name=a\"),
            r"invalid field selector: invalid escape sequence: \"
        );
        // The first operator splits: `f=b!=c` is field `f`, value `b!=c`.
        assert_eq!(
            err("metadata.name=b!=c"),
            "invalid field selector: unescaped character in value: 61"
        );
        // Terms are sorted before they are checked: the first error in that order.
        assert_eq!(err("z.y=1,a.b=2"), "field label not supported: a.b");
        assert_eq!(err(" "), "invalid selector: ' '; can't understand ' '");
        // Escapes are honoured, empty terms skipped.
        let s = FieldSelector::parse(r"metadata.name=a\=b\,c\\d,,", f).unwrap();
        assert_eq!(s.exact("metadata.name"), Some(r"a=b,c\d"));
        let s = FieldSelector::parse("metadata.namespace==ns,metadata.name!=x", f).unwrap();
        assert_eq!(s.exact("metadata.namespace"), Some("ns"));
        assert_eq!(s.exact("metadata.name"), None);
    }
}
