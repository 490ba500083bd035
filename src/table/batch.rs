//! Printers of the batch kinds: jobs and cron jobs, as kube-apiserver's
//! `printJob` and `printCronJob` print them (`pkg/printers/internalversion/
//! printers.go`; column texts from Kubernetes 1.36's `batch/v1` and
//! `batch/v1beta1` documentation, which its definitions cite).

use std::borrow::Cow;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text, parse_time};
use super::duration;
use super::labels::{Selector, Template, containers, format_label_selector};
use super::workload::{CONTAINERS, IMAGES};

/// `JobSpec.selector`'s documentation, the `Selector` column of both kinds.
const JOB_SELECTOR_DOC: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

/// `jobColumnDefinitions`.
pub static JOB_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text("Status", "Status of the job."),
    Column::text(
        "Completions",
        "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
    ),
    Column::text("Duration", "Time required to complete the job."),
    Column::age(),
    CONTAINERS,
    IMAGES,
    Column::wide("Selector", JOB_SELECTOR_DOC),
];

/// A job's `spec` (or a cron job's `jobTemplate.spec`), what rows read.
#[derive(Deserialize, Default)]
#[serde(default)]
struct JobSpec<'a> {
    completions: Option<i64>,
    parallelism: Option<i64>,
    #[serde(borrow)]
    selector: Option<Selector<'a>>,
    #[serde(borrow)]
    template: Template<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct JobStatus<'a> {
    succeeded: i64,
    #[serde(borrow)]
    start_time: Option<Cow<'a, str>>,
    #[serde(borrow)]
    completion_time: Option<Cow<'a, str>>,
    #[serde(borrow)]
    conditions: Vec<Condition<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
}

/// `hasJobCondition`: the first condition of `kind` is `True`.
fn has_condition(conditions: &[Condition], kind: &str) -> bool {
    conditions
        .iter()
        .find(|c| c.kind == kind)
        .is_some_and(|c| c.status == "True")
}

/// A job's row: status, completions, duration; wide: its template's
/// containers and images, its selector. A running job's duration grows
/// with the clock, so it is kept as its start and written at answer time.
pub fn job_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Job<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: JobSpec<'a>,
        #[serde(borrow)]
        status: JobStatus<'a>,
    }
    let o: Job = serde_json::from_slice(body).ok()?;
    let (spec, st) = (&o.spec, &o.status);
    let completions = match (spec.completions, spec.parallelism.unwrap_or(0)) {
        (Some(c), _) => format!("{}/{c}", st.succeeded),
        (None, p) if p > 1 => format!("{}/1 of {p}", st.succeeded),
        (None, _) => format!("{}/1", st.succeeded),
    };
    // The apiserver stores only times that parse.
    let at = |t: &Option<Cow<str>>| t.as_deref().and_then(parse_time);
    let duration = match (at(&st.start_time), at(&st.completion_time)) {
        (None, _) => Cell::Text(Text::from("")),
        (Some(start), None) => Cell::Since(Some(start)),
        (Some(start), Some(end)) => {
            let mut s = String::new();
            duration::human(duration::seconds_between(start, end), &mut s);
            Cell::Text(Text::from(s))
        }
    };
    let status = if has_condition(&st.conditions, "Complete") {
        "Complete"
    } else if has_condition(&st.conditions, "Failed") {
        "Failed"
    } else if o.metadata.deletion_timestamp.is_some() {
        "Terminating"
    } else if has_condition(&st.conditions, "Suspended") {
        "Suspended"
    } else if has_condition(&st.conditions, "FailureTarget") {
        "FailureTarget"
    } else {
        "Running"
    };
    let (names, images) = containers(&spec.template.spec.containers);
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(status)),
            Cell::Text(Text::from(completions)),
            duration,
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
            Cell::Text(Text::from(format_label_selector(spec.selector.as_ref()))),
        ],
        condition: None,
    })
}

/// `cronJobColumnDefinitions`.
pub static CRON_JOB_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Schedule",
        "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
    ),
    Column::text(
        "Timezone",
        "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
    ),
    Column::typed(
        "Suspend",
        "boolean",
        "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
    ),
    Column::int("Active", "A list of pointers to currently running jobs."),
    Column::text(
        "Last Schedule",
        "Information when was the last time the job was successfully scheduled.",
    ),
    Column::age(),
    CONTAINERS,
    IMAGES,
    Column::wide("Selector", JOB_SELECTOR_DOC),
];

/// A cron job's row: schedule, time zone, suspended, active jobs, when it
/// last ran; wide: its job template's containers, images and selector.
pub fn cron_job_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct CronJob<'a> {
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
        schedule: Cow<'a, str>,
        #[serde(borrow)]
        time_zone: Option<Cow<'a, str>>,
        suspend: Option<bool>,
        #[serde(borrow)]
        job_template: JobTemplate<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct JobTemplate<'a> {
        #[serde(borrow)]
        spec: JobSpec<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status<'a> {
        active: Vec<serde::de::IgnoredAny>,
        #[serde(borrow)]
        last_schedule_time: Option<Cow<'a, str>>,
    }
    let o: CronJob = serde_json::from_slice(body).ok()?;
    let last = match o.status.last_schedule_time.as_deref() {
        None => Cell::Text(Text::from("<none>")),
        Some(t) => Cell::Since(parse_time(t)),
    };
    let suspend = match o.spec.suspend {
        None => "<unset>",
        Some(true) => "True",
        Some(false) => "False",
    };
    let job = &o.spec.job_template.spec;
    let (names, images) = containers(&job.template.spec.containers);
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(&*o.spec.schedule)),
            Cell::Text(Text::from(o.spec.time_zone.as_deref().unwrap_or("<none>"))),
            Cell::Text(Text::from(suspend)),
            Cell::Int(o.status.active.len() as i64),
            last,
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
            Cell::Text(Text::from(format_label_selector(job.selector.as_ref()))),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
