//! The sim's printers of replica sets, stateful sets, daemon sets, jobs and
//! cron jobs: its own reading of kube-apiserver's `printReplicaSet`,
//! `printStatefulSet`, `printDaemonSet`, `printJob` and `printCronJob`.

use serde_json::{Value, json};

use super::cells::*;

fn int(v: &Value) -> i64 {
    v.as_i64().unwrap_or(0)
}

/// A template's containers' names and images, comma-joined.
fn template(t: &Value) -> (Value, Value) {
    let cs = t["spec"]["containers"].as_array();
    let join = |f: &str| {
        let v: Vec<&str> = cs.into_iter().flatten().map(|c| text(&c[f])).collect();
        json!(v.join(","))
    };
    (join("name"), join("image"))
}

/// `FormatLabelSelector`: `<none>` for none or an empty one, `<error>`
/// for one that does not convert.
fn selector(v: &Value) -> Value {
    let text = if v.is_null() {
        String::new()
    } else {
        selector_text(v)
    };
    json!(match text.as_str() {
        "" => "<none>",
        "<invalid>" => "<error>",
        t => t,
    })
}

fn s(name: &str, doc: &str) -> Value {
    col(name, "string", "", 0, doc)
}

fn n(name: &str, doc: &str) -> Value {
    col(name, "integer", "", 0, doc)
}

fn wide(name: &str, doc: &str) -> Value {
    col(name, "string", "", 1, doc)
}

fn template_cols() -> [Value; 2] {
    [
        wide("Containers", "Names of each container in the template."),
        wide(
            "Images",
            "Images referenced by each container in the template.",
        ),
    ]
}

pub(super) fn replica_set_printer() -> Printer {
    let mut cols = vec![
        name_col(),
        n(
            "Desired",
            "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        ),
        n(
            "Current",
            "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
        ),
        n(
            "Ready",
            "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
        ),
        age_col(),
    ];
    cols.extend(template_cols());
    cols.push(wide(
        "Selector",
        "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ));
    (cols, |o| {
        let (names, images) = template(&o["spec"]["template"]);
        vec![
            json!(text(&o["metadata"]["name"])),
            json!(int(&o["spec"]["replicas"])),
            json!(int(&o["status"]["replicas"])),
            json!(int(&o["status"]["readyReplicas"])),
            json!(age(o)),
            names,
            images,
            selector(&o["spec"]["selector"]),
        ]
    })
}

pub(super) fn stateful_set_printer() -> Printer {
    let mut cols = vec![
        name_col(),
        s("Ready", "Number of the pod with ready state"),
        age_col(),
    ];
    cols.extend(template_cols());
    (cols, |o| {
        let (names, images) = template(&o["spec"]["template"]);
        let ready = format!(
            "{}/{}",
            int(&o["status"]["readyReplicas"]),
            int(&o["spec"]["replicas"])
        );
        vec![
            json!(text(&o["metadata"]["name"])),
            json!(ready),
            json!(age(o)),
            names,
            images,
        ]
    })
}

pub(super) fn daemon_set_printer() -> Printer {
    let mut cols = vec![
        name_col(),
        n(
            "Desired",
            "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        n(
            "Current",
            "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
        ),
        n(
            "Ready",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
        ),
        n(
            "Up-to-date",
            "The total number of nodes that are running updated daemon pod",
        ),
        n(
            "Available",
            "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
        ),
        s(
            "Node Selector",
            "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
        ),
        age_col(),
    ];
    cols.extend(template_cols());
    cols.push(wide(
        "Selector",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ));
    (cols, |o| {
        let st = &o["status"];
        let (names, images) = template(&o["spec"]["template"]);
        vec![
            json!(text(&o["metadata"]["name"])),
            json!(int(&st["desiredNumberScheduled"])),
            json!(int(&st["currentNumberScheduled"])),
            json!(int(&st["numberReady"])),
            json!(int(&st["updatedNumberScheduled"])),
            json!(int(&st["numberAvailable"])),
            json!(label_pairs(&o["spec"]["template"]["spec"]["nodeSelector"])),
            json!(age(o)),
            names,
            images,
            selector(&o["spec"]["selector"]),
        ]
    })
}

const JOB_SELECTOR: &str = "A label query over pods that should match the pod count. Normally, the system sets this field for you. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors";

pub(super) fn job_printer() -> Printer {
    let mut cols = vec![
        name_col(),
        s("Status", "Status of the job."),
        s(
            "Completions",
            "The number of pods which reached phase Succeeded. The value increases monotonically for a given spec. However, it may decrease in reaction to scale down of elastic indexed jobs.",
        ),
        s("Duration", "Time required to complete the job."),
        age_col(),
    ];
    cols.extend(template_cols());
    cols.push(wide("Selector", JOB_SELECTOR));
    (cols, |o| {
        let (spec, st) = (&o["spec"], &o["status"]);
        let ok = int(&st["succeeded"]);
        let completions = match (spec["completions"].as_i64(), int(&spec["parallelism"])) {
            (Some(c), _) => format!("{ok}/{c}"),
            (None, p) if p > 1 => format!("{ok}/1 of {p}"),
            _ => format!("{ok}/1"),
        };
        let parse = |v: &Value| {
            v.as_str()
                .and_then(|t| humantime::parse_rfc3339_weak(t).ok())
        };
        let took = match (parse(&st["startTime"]), parse(&st["completionTime"])) {
            (None, _) => String::new(),
            (Some(_), None) => since(&st["startTime"]).unwrap_or_default(),
            (Some(a), Some(b)) => human_duration(match b.duration_since(a) {
                Ok(d) => d.as_secs() as i64,
                Err(e) => -(e.duration().as_secs() as i64),
            }),
        };
        let conds = st["conditions"].as_array().cloned().unwrap_or_default();
        let is = |t: &str| {
            conds
                .iter()
                .find(|c| c["type"] == t)
                .is_some_and(|c| c["status"] == "True")
        };
        let status = match () {
            _ if is("Complete") => "Complete",
            _ if is("Failed") => "Failed",
            _ if !o["metadata"]["deletionTimestamp"].is_null() => "Terminating",
            _ if is("Suspended") => "Suspended",
            _ if is("FailureTarget") => "FailureTarget",
            _ => "Running",
        };
        let (names, images) = template(&spec["template"]);
        vec![
            json!(text(&o["metadata"]["name"])),
            json!(status),
            json!(completions),
            json!(took),
            json!(age(o)),
            names,
            images,
            selector(&spec["selector"]),
        ]
    })
}

pub(super) fn cron_job_printer() -> Printer {
    let mut cols = vec![
        name_col(),
        s(
            "Schedule",
            "The schedule in Cron format, see https://en.wikipedia.org/wiki/Cron.",
        ),
        s(
            "Timezone",
            "The time zone name for the given schedule, see https://en.wikipedia.org/wiki/List_of_tz_database_time_zones. If not specified, this will default to the time zone of the kube-controller-manager process. The set of valid time zone names and the time zone offset is loaded from the system-wide time zone database by the API server during CronJob validation and the controller manager during execution. If no system-wide time zone database can be found a bundled version of the database is used instead. If the time zone name becomes invalid during the lifetime of a CronJob or due to a change in host configuration, the controller will stop creating new new Jobs and will create a system event with the reason UnknownTimeZone. More information can be found in https://kubernetes.io/docs/concepts/workloads/controllers/cron-jobs/#time-zones",
        ),
        col(
            "Suspend",
            "boolean",
            "",
            0,
            "This flag tells the controller to suspend subsequent executions, it does not apply to already started executions.  Defaults to false.",
        ),
        n("Active", "A list of pointers to currently running jobs."),
        s(
            "Last Schedule",
            "Information when was the last time the job was successfully scheduled.",
        ),
        age_col(),
    ];
    cols.extend(template_cols());
    cols.push(wide("Selector", JOB_SELECTOR));
    (cols, |o| {
        let (spec, st) = (&o["spec"], &o["status"]);
        let job = &spec["jobTemplate"]["spec"];
        let (names, images) = template(&job["template"]);
        let last = match &st["lastScheduleTime"] {
            Value::Null => "<none>".to_string(),
            t => since(t).unwrap_or_else(|| "<unknown>".into()),
        };
        let suspend = match spec["suspend"].as_bool() {
            None => "<unset>",
            Some(true) => "True",
            Some(false) => "False",
        };
        let active = st["active"].as_array().map_or(0, |a| a.len());
        vec![
            json!(text(&o["metadata"]["name"])),
            json!(text(&spec["schedule"])),
            json!(or(text(&spec["timeZone"]), "<none>")),
            json!(suspend),
            json!(active),
            json!(last),
            json!(age(o)),
            names,
            images,
            selector(&job["selector"]),
        ]
    })
}
