//! What the sim's printers share: the columns every Table has, cells' text
//! (ages as `duration.HumanDuration` writes them), labels and selectors as
//! apimachinery writes them.

use serde_json::{Value, json};

pub(super) const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
pub(super) const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
/// A duration as Kubernetes prints ages (`duration.HumanDuration`): `45s`,
/// `3m12s`, `17m`, `5h3m`, `30h`, `3d4h`, `90d`, `2y45d`.
pub(super) fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if m < 10 && secs % 60 != 0 => format!("{m}m{}s", secs % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 730 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

/// How old an object is, for a Table's `Age` cell.
pub(super) fn age(o: &Value) -> String {
    let created = o["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok());
    match created {
        Some(t) => {
            let now = std::time::SystemTime::now();
            let secs = match now.duration_since(t) {
                Ok(d) => d.as_secs() as i64,
                Err(e) => -(e.duration().as_secs() as i64),
            };
            human_duration(secs)
        }
        None => "<unknown>".into(),
    }
}

pub(super) fn text(o: &Value) -> &str {
    o.as_str().unwrap_or("")
}

pub(super) fn or(s: &str, empty: &str) -> String {
    if s.is_empty() { empty } else { s }.to_string()
}

/// How many keys a JSON object has (0 for none).
pub(super) fn keys(o: &Value) -> usize {
    o.as_object().map_or(0, |m| m.len())
}

/// `k=v` pairs by key, comma-joined (`labels.FormatLabels`), `<none>` for none.
pub(super) fn label_pairs(m: &Value) -> String {
    let mut pairs: Vec<String> = m
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// A label selector as apimachinery writes one (`LabelSelectorAsSelector`):
/// requirements by key; nothing for none.
pub(super) fn selector_text(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", text(v))));
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let k = text(&e["key"]).to_string();
        let mut vals: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        vals.sort();
        let r = match text(&e["operator"]) {
            "In" => format!("{k} in ({})", vals.join(",")),
            "NotIn" => format!("{k} notin ({})", vals.join(",")),
            "Exists" => k.clone(),
            "DoesNotExist" => format!("!{k}"),
            _ => return "<invalid>".into(),
        };
        reqs.push((k, r));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|r| r.1).collect::<Vec<_>>().join(",")
}

/// `translateTimestampSince` of an RFC 3339 instant (any precision), or
/// `None` where there is none.
pub(super) fn since(v: &Value) -> Option<String> {
    let t = humantime::parse_rfc3339_weak(v.as_str()?).ok()?;
    let secs = match std::time::SystemTime::now().duration_since(t) {
        Ok(d) => d.as_secs() as i64,
        Err(e) => -(e.duration().as_secs() as i64),
    };
    Some(human_duration(secs))
}

pub(super) fn col(name: &str, ty: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

pub(super) fn name_col() -> Value {
    col("Name", "string", "name", 0, NAME_DOC)
}

pub(super) fn age_col() -> Value {
    col("Age", "string", "", 0, CREATED_DOC)
}

/// A kind's columns and how it prints one object, where the sim prints
/// it as the apiserver does.
pub(super) type Printer = (Vec<Value>, fn(&Value) -> Vec<Value>);
