//! The events printer, as kube-apiserver's `printEvent` prints them
//! (`pkg/printers/internalversion/printers.go`; column texts from
//! Kubernetes 1.36's `Event` documentation): when it was last and first
//! seen (a series' last observation, or the new API's `eventTime`), what it
//! is about, who reported it, how many times.

use std::borrow::Cow;
use std::time::SystemTime;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text, parse_time};

/// `eventColumnDefinitions` (the apiserver prints them all; kubectl shows
/// the priority-1 ones with `-o wide`).
pub static EVENT_COLUMNS: &[Column] = &[
    Column::text(
        "Last Seen",
        "The time at which the most recent occurrence of this event was recorded.",
    ),
    Column::text(
        "Type",
        "Type of this event (Normal, Warning), new types could be added in the future",
    ),
    Column::text(
        "Reason",
        "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
    ),
    Column::text("Object", "The object that this event is about."),
    Column::wide(
        "Subobject",
        "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
    ),
    Column::wide(
        "Source",
        "The component reporting this event. Should be a short machine understandable string.",
    ),
    Column::text(
        "Message",
        "A human-readable description of the status of this operation.",
    ),
    Column::wide(
        "First Seen",
        "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
    ),
    Column::wide("Count", "The number of times this event has occurred."),
    Column::wide_name(),
];

/// A `metav1.MicroTime` (`eventTime`, a series' `lastObservedTime`): RFC
/// 3339 with microseconds.
fn micro(s: Option<&str>) -> Option<SystemTime> {
    humantime::parse_rfc3339_weak(s?).ok()
}

/// An event's row.
pub fn event_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Event<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        involved_object: Involved<'a>,
        #[serde(borrow)]
        reason: Cow<'a, str>,
        #[serde(borrow)]
        message: Cow<'a, str>,
        #[serde(borrow)]
        source: Source<'a>,
        #[serde(borrow)]
        first_timestamp: Option<Cow<'a, str>>,
        #[serde(borrow)]
        last_timestamp: Option<Cow<'a, str>>,
        count: i64,
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        event_time: Option<Cow<'a, str>>,
        #[serde(borrow)]
        series: Option<Series<'a>>,
        #[serde(borrow)]
        reporting_component: Cow<'a, str>,
        #[serde(borrow)]
        reporting_instance: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Involved<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow)]
        field_path: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Source<'a> {
        #[serde(borrow)]
        component: Cow<'a, str>,
        #[serde(borrow)]
        host: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Series<'a> {
        count: i64,
        #[serde(borrow)]
        last_observed_time: Option<Cow<'a, str>>,
    }
    let o: Event = serde_json::from_slice(body).ok()?;
    let first = match o.first_timestamp.as_deref().and_then(parse_time) {
        Some(t) => Some(t),
        None => micro(o.event_time.as_deref()),
    };
    let mut last = match o.last_timestamp.as_deref().and_then(parse_time) {
        Some(t) => Some(t),
        None => first,
    };
    let mut count = o.count;
    if let Some(s) = &o.series {
        last = micro(s.last_observed_time.as_deref());
        count = s.count;
    } else if count == 0 {
        // Singleton events of the new API have no count.
        count = 1;
    }
    let kind = o.involved_object.kind.to_lowercase();
    let target = match &*o.involved_object.name {
        "" => kind,
        name => format!("{kind}/{name}"),
    };
    let first_of = |a: &'_ str, b: &'_ str| {
        if a.is_empty() {
            b.to_string()
        } else {
            a.to_string()
        }
    };
    let component = first_of(&o.source.component, &o.reporting_component);
    let instance = first_of(&o.source.host, &o.reporting_instance);
    let source = match instance.as_str() {
        "" => component,
        i => format!("{component}, {i}"),
    };
    let text = |s: &str| Cell::Text(Text::from(s));
    Some(Row {
        cells: vec![
            Cell::Since(last),
            text(&o.kind),
            text(&o.reason),
            text(&target),
            text(&o.involved_object.field_path),
            text(&source),
            text(o.message.trim()),
            Cell::Since(first),
            Cell::Int(count),
            o.metadata.name(),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
