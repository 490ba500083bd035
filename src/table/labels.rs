//! What printers make of labels, selectors and pod templates, as
//! apimachinery writes them: `labels.FormatLabels`,
//! `metav1.LabelSelectorAsSelector(..).String()` and the printers'
//! `layoutContainerCells`.

use std::borrow::Cow;
use std::collections::BTreeMap;

use serde::Deserialize;

/// A label map (`map[string]string`), keys in order.
pub type Labels<'a> = BTreeMap<Cow<'a, str>, Cow<'a, str>>;

/// `labels.FormatLabels`: `k=v` by key, comma-joined; `<none>` for none.
pub fn format_labels(labels: &Labels) -> String {
    if labels.is_empty() {
        return "<none>".into();
    }
    let pairs: Vec<String> = labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    pairs.join(",")
}

/// A `metav1.LabelSelector`.
#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct Selector<'a> {
    /// `matchLabels`.
    #[serde(borrow)]
    pub match_labels: Labels<'a>,
    /// `matchExpressions`.
    #[serde(borrow)]
    pub match_expressions: Vec<Expression<'a>>,
}

/// One of a selector's `matchExpressions`.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct Expression<'a> {
    /// `key`.
    #[serde(borrow)]
    pub key: Cow<'a, str>,
    /// `operator`: `In`, `NotIn`, `Exists` or `DoesNotExist`.
    #[serde(borrow)]
    pub operator: Cow<'a, str>,
    /// `values`.
    #[serde(borrow)]
    pub values: Vec<Cow<'a, str>>,
}

/// `metav1.LabelSelectorAsSelector(s).String()`: every requirement by key
/// (`k=v`, `k in (a,b)`, `k notin (a,b)`, `k`, `!k`, values in order),
/// comma-joined; `""` for no selector or an empty one; `<invalid>` for an
/// operator it does not know, as `printDeployment` writes it.
pub fn selector_string(s: Option<&Selector>) -> String {
    let Some(s) = s else {
        return String::new();
    };
    let mut reqs: Vec<(&str, String)> = s
        .match_labels
        .iter()
        .map(|(k, v)| (&**k, format!("{k}={v}")))
        .collect();
    for e in &s.match_expressions {
        let mut values: Vec<&str> = e.values.iter().map(|v| &**v).collect();
        values.sort_unstable();
        let k = &*e.key;
        let r = match &*e.operator {
            "In" => format!("{k} in ({})", values.join(",")),
            "NotIn" => format!("{k} notin ({})", values.join(",")),
            "Exists" => k.to_string(),
            "DoesNotExist" => format!("!{k}"),
            _ => return "<invalid>".into(),
        };
        reqs.push((k, r));
    }
    reqs.sort_by(|a, b| a.0.cmp(b.0));
    let reqs: Vec<String> = reqs.into_iter().map(|(_, r)| r).collect();
    reqs.join(",")
}

/// `metav1.FormatLabelSelector`, what most printers write: as
/// [`selector_string`], but `<none>` for no selector or an empty one and
/// `<error>` for one that does not convert.
pub fn format_label_selector(s: Option<&Selector>) -> String {
    match selector_string(s) {
        t if t.is_empty() => "<none>".into(),
        t if t == "<invalid>" => "<error>".into(),
        t => t,
    }
}

/// A container of a pod template: its name and image.
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct Container<'a> {
    /// `name`.
    #[serde(borrow)]
    pub name: Cow<'a, str>,
    /// `image`.
    #[serde(borrow)]
    pub image: Cow<'a, str>,
}

/// The containers of a pod template (`spec.template.spec.containers`).
#[derive(Deserialize, Default, Debug)]
#[serde(default)]
pub struct Template<'a> {
    /// `spec`.
    #[serde(borrow)]
    pub spec: TemplateSpec<'a>,
}

/// A pod template's `spec`, what printers read of it.
#[derive(Deserialize, Default, Debug)]
#[serde(default, rename_all = "camelCase")]
pub struct TemplateSpec<'a> {
    /// `containers`.
    #[serde(borrow)]
    pub containers: Vec<Container<'a>>,
    /// `nodeSelector`.
    #[serde(borrow)]
    pub node_selector: Labels<'a>,
}

/// `layoutContainerCells`: the containers' names, and their images, each
/// comma-joined.
pub fn containers(cs: &[Container]) -> (String, String) {
    let names: Vec<&str> = cs.iter().map(|c| &*c.name).collect();
    let images: Vec<&str> = cs.iter().map(|c| &*c.image).collect();
    (names.join(","), images.join(","))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn selector(json: &str) -> String {
        let s: Option<Selector> = serde_json::from_str(json).unwrap();
        selector_string(s.as_ref())
    }

    /// As `labels.Selector.String()` writes them (apimachinery's
    /// `TestSelectorString`-like cases, and `printDeployment`'s `<invalid>`).
    #[test]
    fn should_write_selectors_as_apimachinery_does() {
        assert_eq!(selector("null"), "");
        assert_eq!(selector("{}"), "");
        assert_eq!(selector(r#"{"matchLabels":{"foo":"bar"}}"#), "foo=bar");
        assert_eq!(
            selector(
                r#"{"matchLabels":{"z":"1","a":"2"},"matchExpressions":[
                {"key":"m","operator":"In","values":["y","x"]},
                {"key":"n","operator":"NotIn","values":["b"]},
                {"key":"b","operator":"Exists"},
                {"key":"c","operator":"DoesNotExist"}]}"#
            ),
            "a=2,b,!c,m in (x,y),n notin (b),z=1"
        );
        assert_eq!(
            selector(r#"{"matchExpressions":[{"key":"k","operator":"Near"}]}"#),
            "<invalid>"
        );
    }

    /// `FormatLabelSelector` (apimachinery's helpers.go).
    #[test]
    fn should_format_selectors_as_format_label_selector_does() {
        let format = |json: &str| {
            let s: Option<Selector> = serde_json::from_str(json).unwrap();
            format_label_selector(s.as_ref())
        };
        assert_eq!(format("null"), "<none>");
        assert_eq!(format("{}"), "<none>");
        assert_eq!(format(r#"{"matchLabels":{"app":"db"}}"#), "app=db");
        assert_eq!(
            format(r#"{"matchExpressions":[{"key":"k","operator":"Near"}]}"#),
            "<error>"
        );
    }

    #[test]
    fn should_format_labels_in_key_order() {
        let mut l = Labels::new();
        assert_eq!(format_labels(&l), "<none>");
        l.insert("b".into(), "2".into());
        l.insert("a".into(), "1".into());
        assert_eq!(format_labels(&l), "a=1,b=2");
    }
}
