//! The printer of horizontal pod autoscalers, as kube-apiserver's
//! `printHorizontalPodAutoscaler` and `formatHPAMetrics` print them
//! (`pkg/printers/internalversion/printers.go`). Column texts from
//! Kubernetes 1.36's `autoscaling/v2` documentation: the definitions cited
//! `autoscaling/v2beta1`, which k8s.io/api 0.36 no longer has.

use std::borrow::Cow;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text};

/// `horizontalPodAutoscalerColumnDefinitions`.
pub static HPA_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Reference",
        "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
    ),
    Column::text(
        "Targets",
        "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
    ),
    Column::text(
        "MinPods",
        "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
    ),
    Column::text(
        "MaxPods",
        "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
    ),
    Column::text(
        "Replicas",
        "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
    ),
    Column::age(),
];

/// A metric's spec or status: one source by its type (`resource`, `pods`,
/// ...), each holding a `target` (spec) or `current` (status).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Metric<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    resource: Option<Source<'a>>,
    #[serde(borrow)]
    container_resource: Option<Source<'a>>,
    #[serde(borrow)]
    pods: Option<Source<'a>>,
    #[serde(borrow)]
    object: Option<Source<'a>>,
    #[serde(borrow)]
    external: Option<Source<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Source<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    target: Value<'a>,
    #[serde(borrow)]
    current: Value<'a>,
}

/// A `MetricTarget` or `MetricValueStatus`: quantities as the apiserver
/// stores them (canonical, so their `String()`).
#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Value<'a> {
    #[serde(borrow)]
    value: Option<Cow<'a, str>>,
    #[serde(borrow)]
    average_value: Option<Cow<'a, str>>,
    average_utilization: Option<i64>,
}

/// A `*resource.Quantity`'s `String()`: `<nil>` for none.
fn quantity(q: &Option<Cow<str>>) -> String {
    q.as_deref().unwrap_or("<nil>").to_string()
}

/// One metric as `formatHPAMetrics` writes it, from its spec and its
/// status at the same position, if any.
fn metric(spec: &Metric, status: Option<&Metric>) -> String {
    const UNKNOWN: &str = "<unknown>";
    // The status's source of the same type, if it has one.
    let cur = |pick: for<'m> fn(&'m Metric<'m>) -> &'m Option<Source<'m>>| {
        status.and_then(|s| pick(s).as_ref())
    };
    let valued = |target: &Value, current: Option<&Source>| match &target.average_value {
        Some(avg) => {
            let now = current
                .and_then(|c| c.current.average_value.as_deref())
                .unwrap_or(UNKNOWN);
            format!("{now}/{avg} (avg)")
        }
        None => {
            let now = current.map_or(UNKNOWN.to_string(), |c| quantity(&c.current.value));
            format!("{now}/{}", quantity(&target.value))
        }
    };
    let resource = |s: &Source, current: Option<&Source>| match &s.target.average_value {
        Some(avg) => {
            let now = current.map_or(UNKNOWN.to_string(), |c| quantity(&c.current.average_value));
            format!("{}: {now}/{avg}", s.name)
        }
        None => {
            let now = current
                .and_then(|c| c.current.average_utilization)
                .map_or(UNKNOWN.to_string(), |u| format!("{u}%"));
            let target = s
                .target
                .average_utilization
                .map_or("<auto>".to_string(), |u| format!("{u}%"));
            format!("{}: {now}/{target}", s.name)
        }
    };
    let empty = Source::default();
    match &*spec.kind {
        "External" => valued(
            &spec.external.as_ref().unwrap_or(&empty).target,
            cur(|m| &m.external),
        ),
        "Object" => valued(
            &spec.object.as_ref().unwrap_or(&empty).target,
            cur(|m| &m.object),
        ),
        "Pods" => {
            let now = cur(|m| &m.pods)
                .map_or(UNKNOWN.to_string(), |c| quantity(&c.current.average_value));
            let target = spec.pods.as_ref().unwrap_or(&empty);
            format!("{now}/{}", quantity(&target.target.average_value))
        }
        "Resource" => resource(
            spec.resource.as_ref().unwrap_or(&empty),
            cur(|m| &m.resource),
        ),
        "ContainerResource" => resource(
            spec.container_resource.as_ref().unwrap_or(&empty),
            cur(|m| &m.container_resource),
        ),
        _ => "<unknown type>".into(),
    }
}

/// `formatHPAMetrics`: the first two metrics, then how many more;
/// `<none>` for none.
fn metrics(specs: &[Metric], statuses: &[Metric]) -> String {
    const MAX: usize = 2;
    if specs.is_empty() {
        return "<none>".into();
    }
    let shown: Vec<String> = specs
        .iter()
        .take(MAX)
        .enumerate()
        .map(|(i, s)| metric(s, statuses.get(i)))
        .collect();
    match specs.len() > MAX {
        true => format!("{} + {} more...", shown.join(", "), specs.len() - MAX),
        false => shown.join(", "),
    }
}

/// An autoscaler's row: `Kind/name` of its target, its metrics, the
/// replica bounds (`<unset>` minimum) and how many it runs now.
pub fn hpa_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Hpa<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
        #[serde(borrow)]
        status: Status<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Spec<'a> {
        #[serde(borrow)]
        scale_target_ref: Target<'a>,
        min_replicas: Option<i64>,
        max_replicas: i64,
        #[serde(borrow)]
        metrics: Vec<Metric<'a>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Target<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status<'a> {
        current_replicas: i64,
        #[serde(borrow)]
        current_metrics: Vec<Metric<'a>>,
    }
    let o: Hpa = serde_json::from_slice(body).ok()?;
    let spec = &o.spec;
    let reference = format!(
        "{}/{}",
        spec.scale_target_ref.kind, spec.scale_target_ref.name
    );
    let min = spec
        .min_replicas
        .map_or("<unset>".to_string(), |n| n.to_string());
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(reference)),
            Cell::Text(Text::from(metrics(
                &spec.metrics,
                &o.status.current_metrics,
            ))),
            Cell::Text(Text::from(min)),
            Cell::Int(spec.max_replicas),
            Cell::Int(o.status.current_replicas),
            o.metadata.age(),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
