//! The JSONPath a custom resource's printer column names its value with
//! (`additionalPrinterColumns[].jsonPath`), as client-go's `jsonpath`
//! evaluates it for kube-apiserver (`{` + path + `}`, missing keys allowed):
//! fields (`.a`, `['a.b']`), indexes (`[0]`, `[-1]`), slices (`[1:3]`),
//! wildcards (`.*`, `[*]`) and filters
//! (`[?(@.type=="Ready")]`, `[?(@.a)]`, comparisons with `!=`, `<`, `<=`,
//! `>`, `>=`). A path outside that is refused when the printer is made, so
//! the Table passes to the upstream rather than being printed wrong.

use serde_json::Value;

/// One step of a path.
#[derive(Debug, Clone, PartialEq)]
enum Step {
    /// A field (`.a`, `['a']`).
    Field(String),
    /// Every element or value (`.*`, `[*]`).
    All,
    /// An element from the start, or from the end when negative.
    Index(i64),
    /// Elements `[from:to)`, either end open.
    Slice(Option<i64>, Option<i64>),
    /// The elements a filter keeps.
    Filter(Filter),
}

/// `[?(@.path OP literal)]`, or `[?(@.path)]` (exists).
#[derive(Debug, Clone, PartialEq)]
struct Filter {
    path: Vec<Step>,
    test: Option<(Op, Value)>,
}

#[derive(Debug, Clone, Copy, PartialEq)]
enum Op {
    Eq,
    Ne,
    Lt,
    Le,
    Gt,
    Ge,
}

/// Why a path has no one first result: Go's map order would decide it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Undetermined;

/// The marker a wildcard over a map leaves among the results.
static UNDETERMINED: Value = Value::Null;

/// A parsed path.
#[derive(Debug, Clone, PartialEq)]
pub struct JsonPath(Vec<Step>);

impl JsonPath {
    /// Parses a column's path; `None` for one this evaluator does not know.
    pub fn parse(path: &str) -> Option<JsonPath> {
        let path = path.trim();
        // `{.a}` is accepted as `.a` (the apiserver wraps it itself).
        let path = path
            .strip_prefix('{')
            .and_then(|p| p.strip_suffix('}'))
            .unwrap_or(path);
        let mut p = Parser { s: path, i: 0 };
        let steps = p.steps(false)?;
        (p.i == path.len()).then_some(JsonPath(steps))
    }

    /// The first value the path finds in `v`, as `results[0][0]` is taken;
    /// `Err` where the apiserver's first is not determined (a wildcard over
    /// a map of more than one key).
    pub fn first<'v>(&self, v: &'v Value) -> Result<Option<&'v Value>, Undetermined> {
        let mut out = Vec::new();
        eval(&self.0, v, &mut out);
        if out.iter().any(|x| std::ptr::eq(*x, &UNDETERMINED)) {
            return Err(Undetermined);
        }
        Ok(out.into_iter().next())
    }
}

struct Parser<'a> {
    s: &'a str,
    i: usize,
}

impl Parser<'_> {
    fn rest(&self) -> &str {
        &self.s[self.i..]
    }

    fn eat(&mut self, t: &str) -> bool {
        if self.rest().starts_with(t) {
            self.i += t.len();
            true
        } else {
            false
        }
    }

    /// Steps until the end, or (in a filter) a `)` or an operator.
    fn steps(&mut self, in_filter: bool) -> Option<Vec<Step>> {
        let mut steps = Vec::new();
        loop {
            let r = self.rest();
            if r.is_empty()
                || (in_filter
                    && (r.starts_with(')') || r.starts_with(' ') || "=!<>".contains(&r[..1])))
            {
                return Some(steps);
            }
            if self.rest().starts_with("..") {
                // Recursive descent: client-go walks a map's keys in Go's
                // random order, so the apiserver's first result is not
                // determined; r8s passes such a Table rather than guess.
                return None;
            } else if self.eat(".") {
                if self.eat("*") {
                    steps.push(Step::All);
                } else if self.rest().is_empty() {
                    // `.` alone: the object itself.
                } else {
                    steps.push(Step::Field(self.ident()?));
                }
            } else if self.eat("[") {
                steps.push(self.bracket()?);
            } else if steps.is_empty() && !in_filter {
                // A path without its leading dot.
                steps.push(Step::Field(self.ident()?));
            } else {
                return None;
            }
        }
    }

    fn ident(&mut self) -> Option<String> {
        let n = self
            .rest()
            .find(|c: char| c == '.' || c == '[' || c == ')' || c == ' ' || "=!<>".contains(c))
            .unwrap_or(self.rest().len());
        if n == 0 {
            return None;
        }
        let f = self.rest()[..n].to_string();
        self.i += n;
        Some(f)
    }

    /// A string in single or double quotes at the cursor, and past it:
    /// `Some(None)` where there is none, `None` for one never closed.
    fn quoted(&mut self) -> Option<Option<String>> {
        let Some(q) = self
            .rest()
            .chars()
            .next()
            .filter(|c| *c == '\'' || *c == '"')
        else {
            return Some(None);
        };
        self.i += 1;
        let end = self.rest().find(q)?;
        let text = self.rest()[..end].to_string();
        self.i += end + 1;
        Some(Some(text))
    }

    /// After `[`: through its `]`.
    fn bracket(&mut self) -> Option<Step> {
        let step = if self.eat("*") {
            Step::All
        } else if self.eat("?(") {
            let f = self.filter()?;
            if !self.eat(")") {
                return None;
            }
            Step::Filter(f)
        } else if let Some(f) = self.quoted()? {
            Step::Field(f)
        } else {
            let end = self.rest().find(']')?;
            let inner = &self.rest()[..end];
            let step = match inner.split_once(':') {
                Some((a, b)) => {
                    let n = |s: &str| -> Option<Option<i64>> {
                        let s = s.trim();
                        if s.is_empty() {
                            Some(None)
                        } else {
                            s.parse().ok().map(Some)
                        }
                    };
                    Step::Slice(n(a)?, n(b)?)
                }
                None => Step::Index(inner.trim().parse().ok()?),
            };
            self.i += end;
            step
        };
        self.eat("]").then_some(step)
    }

    /// `@.path`, then an operator and a literal, or nothing (exists).
    fn filter(&mut self) -> Option<Filter> {
        if !self.eat("@") {
            return None;
        }
        let path = self.steps(true)?;
        while self.eat(" ") {}
        let op = [
            ("==", Op::Eq),
            ("!=", Op::Ne),
            ("<=", Op::Le),
            (">=", Op::Ge),
            ("<", Op::Lt),
            (">", Op::Gt),
        ]
        .into_iter()
        .find(|(t, _)| self.eat(t))
        .map(|(_, op)| op);
        let Some(op) = op else {
            return Some(Filter { path, test: None });
        };
        while self.eat(" ") {}
        let literal = if let Some(text) = self.quoted()? {
            Value::String(text)
        } else {
            let end = self.rest().find(')')?;
            let lit = self.rest()[..end].trim().to_string();
            self.i += end;
            match lit.as_str() {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                n => Value::from(n.parse::<f64>().ok()?),
            }
        };
        while self.eat(" ") {}
        Some(Filter {
            path,
            test: Some((op, literal)),
        })
    }
}

fn eval<'v>(steps: &[Step], v: &'v Value, out: &mut Vec<&'v Value>) {
    let Some((step, rest)) = steps.split_first() else {
        out.push(v);
        return;
    };
    match step {
        Step::Field(f) => {
            if let Some(x) = v.get(f.as_str()) {
                eval(rest, x, out);
            }
        }
        Step::All => match v {
            Value::Array(a) => a.iter().for_each(|x| eval(rest, x, out)),
            // client-go walks a map's keys in Go's random order: with more
            // than one, which comes first is not determined.
            Value::Object(m) if m.len() > 1 => out.push(&UNDETERMINED),
            Value::Object(m) => m.values().for_each(|x| eval(rest, x, out)),
            _ => {}
        },
        Step::Index(i) => {
            if let Value::Array(a) = v {
                let i = if *i < 0 { a.len() as i64 + i } else { *i };
                if let Some(x) = usize::try_from(i).ok().and_then(|i| a.get(i)) {
                    eval(rest, x, out);
                }
            }
        }
        Step::Slice(from, to) => {
            if let Value::Array(a) = v {
                let len = a.len() as i64;
                let at = |n: i64| (if n < 0 { len + n } else { n }).clamp(0, len) as usize;
                let (from, to) = (at(from.unwrap_or(0)), at(to.unwrap_or(len)));
                a.iter()
                    .take(to)
                    .skip(from)
                    .for_each(|x| eval(rest, x, out));
            }
        }
        Step::Filter(f) => {
            let items: Vec<&Value> = match v {
                Value::Array(a) => a.iter().collect(),
                other => vec![other],
            };
            for x in items {
                if f.keeps(x) {
                    eval(rest, x, out);
                }
            }
        }
    }
}

impl Filter {
    fn keeps(&self, x: &Value) -> bool {
        let mut found = Vec::new();
        eval(&self.path, x, &mut found);
        let Some((op, lit)) = &self.test else {
            return !found.is_empty();
        };
        found.iter().any(|v| compare(v, *op, lit))
    }
}

fn compare(v: &Value, op: Op, lit: &Value) -> bool {
    use std::cmp::Ordering;
    let ord = match (v, lit) {
        (Value::String(a), Value::String(b)) => Some(a.cmp(b)),
        (Value::Number(a), Value::Number(b)) => a
            .as_f64()
            .zip(b.as_f64())
            .and_then(|(a, b)| a.partial_cmp(&b)),
        (Value::Bool(a), Value::Bool(b)) => (a == b).then_some(Ordering::Equal),
        _ => None,
    };
    match (op, ord) {
        (Op::Eq, Some(o)) => o == Ordering::Equal,
        (Op::Ne, o) => o != Some(Ordering::Equal),
        (Op::Lt, Some(o)) => o == Ordering::Less,
        (Op::Le, Some(o)) => o != Ordering::Greater,
        (Op::Gt, Some(o)) => o == Ordering::Greater,
        (Op::Ge, Some(o)) => o != Ordering::Less,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn first(path: &str, v: &Value) -> Option<Value> {
        JsonPath::parse(path)
            .expect(path)
            .first(v)
            .unwrap()
            .cloned()
    }

    #[test]
    fn should_find_what_client_go_finds() {
        let v = json!({
            "metadata": {"name": "w", "labels": {"app.kubernetes.io/name": "x", "app": "a"}},
            "spec": {"items": ["x", "y", "z"], "n": 3},
            "status": {"conditions": [
                {"type": "Other", "status": "False", "n": 1},
                {"type": "Ready", "status": "True", "n": 2}]}
        });
        assert_eq!(first(".metadata.name", &v), Some(json!("w")));
        assert_eq!(first(".metadata.labels.app", &v), Some(json!("a")));
        assert_eq!(
            first(".metadata.labels['app.kubernetes.io/name']", &v),
            Some(json!("x"))
        );
        assert_eq!(first(".spec.items[0]", &v), Some(json!("x")));
        assert_eq!(first(".spec.items[-1]", &v), Some(json!("z")));
        assert_eq!(first(".spec.items[1:]", &v), Some(json!("y")));
        assert_eq!(first(".spec.items[*]", &v), Some(json!("x")));
        assert_eq!(first(".spec.items[5]", &v), None);
        assert_eq!(first(".spec.nothing", &v), None);
        assert_eq!(
            first(r#".status.conditions[?(@.type=="Ready")].status"#, &v),
            Some(json!("True"))
        );
        assert_eq!(
            first(".status.conditions[?(@.type == 'Ready')].status", &v),
            Some(json!("True"))
        );
        assert_eq!(
            first(".status.conditions[?(@.n>1)].type", &v),
            Some(json!("Ready"))
        );
        assert_eq!(first(".status.conditions[?(@.missing)].type", &v), None);
        assert_eq!(first("{.spec.n}", &v), Some(json!(3)));
        let labels = JsonPath::parse(".metadata.labels.*").unwrap();
        assert_eq!(
            labels.first(&v),
            Err(Undetermined),
            "two keys: Go's order decides"
        );
    }

    #[test]
    fn should_refuse_what_it_does_not_know() {
        // `..a`: Go's map order decides the apiserver's first result.
        for p in [
            ".a[",
            ".a[x]",
            ".a[?(@.b ~ 1)]",
            ".a[?(b==1)]",
            ".a[0",
            "..status",
        ] {
            assert_eq!(JsonPath::parse(p), None, "{p}");
        }
    }
}
