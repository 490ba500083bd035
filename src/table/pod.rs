//! The pod printer: kube-apiserver's `printPod`
//! (`pkg/printers/internalversion/printers.go`): ready containers, the
//! status as kubectl shows it (the phase, a reason, an init step, a
//! container's waiting or terminated reason, `Terminating`), restarts with
//! when the last one was, then the wide columns.

use std::borrow::Cow;
use std::time::SystemTime;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, RowCondition, Text, parse_time};

/// `podColumnDefinitions`; descriptions as Kubernetes 1.36 documents the
/// fields (`ObjectMeta`, `PodStatus`, `PodSpec`).
pub static COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Ready",
        "The aggregate readiness state of this pod for accepting traffic.",
    ),
    Column::text(
        "Status",
        "The aggregate status of the containers in this pod.",
    ),
    Column::text(
        "Restarts",
        "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
    ),
    Column::age(),
    Column::wide(
        "IP",
        "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
    ),
    Column::wide(
        "Node",
        "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
    ),
    Column::wide(
        "Nominated Node",
        "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
    ),
    Column::wide(
        "Readiness Gates",
        "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
    ),
];

/// `podSuccessConditions` and `podFailedConditions`.
static SUCCEEDED: RowCondition = RowCondition {
    reason: "Succeeded",
    message: "The pod has completed successfully.",
};
static FAILED: RowCondition = RowCondition {
    reason: "Failed",
    message: "The pod failed.",
};

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Pod<'a> {
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
    containers: Vec<serde::de::IgnoredAny>,
    #[serde(borrow)]
    init_containers: Vec<InitContainer<'a>>,
    #[serde(borrow)]
    node_name: Cow<'a, str>,
    #[serde(borrow)]
    readiness_gates: Vec<Gate<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct InitContainer<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    #[serde(borrow)]
    restart_policy: Option<Cow<'a, str>>,
}

impl InitContainer<'_> {
    /// `podutil.IsRestartableInitContainer`: a sidecar.
    fn restartable(&self) -> bool {
        self.restart_policy.as_deref() == Some("Always")
    }
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Gate<'a> {
    #[serde(borrow)]
    condition_type: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Status<'a> {
    #[serde(borrow)]
    phase: Cow<'a, str>,
    #[serde(borrow)]
    reason: Cow<'a, str>,
    #[serde(borrow)]
    nominated_node_name: Cow<'a, str>,
    #[serde(borrow)]
    #[serde(rename = "podIPs")]
    pod_ips: Vec<PodIp<'a>>,
    #[serde(borrow)]
    conditions: Vec<Condition<'a>>,
    #[serde(borrow)]
    init_container_statuses: Vec<ContainerStatus<'a>>,
    #[serde(borrow)]
    container_statuses: Vec<ContainerStatus<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct PodIp<'a> {
    #[serde(borrow)]
    ip: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Condition<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(borrow)]
    status: Cow<'a, str>,
    #[serde(borrow)]
    reason: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ContainerStatus<'a> {
    #[serde(borrow)]
    name: Cow<'a, str>,
    ready: bool,
    started: Option<bool>,
    restart_count: i64,
    #[serde(borrow)]
    state: State<'a>,
    #[serde(borrow)]
    last_state: State<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct State<'a> {
    running: Option<serde::de::IgnoredAny>,
    #[serde(borrow)]
    waiting: Option<Waiting<'a>>,
    #[serde(borrow)]
    terminated: Option<Terminated<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Waiting<'a> {
    #[serde(borrow)]
    reason: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Terminated<'a> {
    #[serde(borrow)]
    reason: Cow<'a, str>,
    exit_code: i64,
    signal: i64,
    #[serde(borrow)]
    finished_at: Option<Cow<'a, str>>,
}

impl Terminated<'_> {
    fn finished(&self) -> Option<SystemTime> {
        self.finished_at.as_deref().and_then(parse_time)
    }
}

/// The latest of two instants, `None` being the zero time.
fn later(a: Option<SystemTime>, b: Option<SystemTime>) -> Option<SystemTime> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.max(b)),
        (a, b) => a.or(b),
    }
}

/// A pod's row, from its JSON; `None` when it is not a pod's JSON.
pub fn row(body: &[u8]) -> Option<Row> {
    let pod: Pod = serde_json::from_slice(body).ok()?;
    Some(print(&pod))
}

fn print(pod: &Pod) -> Row {
    let st = &pod.status;
    let mut total = pod.spec.containers.len();
    let mut ready = 0;
    let mut reason: String = if st.reason.is_empty() {
        st.phase.to_string()
    } else {
        st.reason.to_string()
    };
    if st
        .conditions
        .iter()
        .any(|c| c.kind == "PodScheduled" && c.reason == "SchedulingGated")
    {
        reason = "SchedulingGated".into();
    }
    let condition = match &*st.phase {
        "Succeeded" => Some(&SUCCEEDED),
        "Failed" => Some(&FAILED),
        _ => None,
    };
    let init = &pod.spec.init_containers;
    total += init.iter().filter(|c| c.restartable()).count();
    let restartable = |name: &str| init.iter().any(|c| c.name == name && c.restartable());

    let (mut restarts, mut last) = (0i64, None);
    let (mut sidecar_restarts, mut sidecar_last) = (0i64, None);
    let mut initializing = false;
    for (i, c) in st.init_container_statuses.iter().enumerate() {
        restarts += c.restart_count;
        let finished = c
            .last_state
            .terminated
            .as_ref()
            .and_then(Terminated::finished);
        last = later(last, finished);
        let sidecar = restartable(&c.name);
        if sidecar {
            sidecar_restarts += c.restart_count;
            sidecar_last = later(sidecar_last, finished);
        }
        match (&c.state.terminated, &c.state.waiting) {
            (Some(t), _) if t.exit_code == 0 => continue,
            _ if sidecar && c.started == Some(true) => {
                if c.ready {
                    ready += 1;
                }
                continue;
            }
            (Some(t), _) => {
                reason = match (t.reason.is_empty(), t.signal) {
                    (false, _) => format!("Init:{}", t.reason),
                    (true, 0) => format!("Init:ExitCode:{}", t.exit_code),
                    (true, s) => format!("Init:Signal:{s}"),
                };
            }
            (None, Some(w)) if !w.reason.is_empty() && w.reason != "PodInitializing" => {
                reason = format!("Init:{}", w.reason);
            }
            _ => reason = format!("Init:{i}/{}", init.len()),
        }
        initializing = true;
        break;
    }
    let initialized = st
        .conditions
        .iter()
        .any(|c| c.kind == "Initialized" && c.status == "True");
    if !initializing || initialized {
        restarts = sidecar_restarts;
        last = sidecar_last;
        let mut running = false;
        for c in st.container_statuses.iter().rev() {
            restarts += c.restart_count;
            last = later(
                last,
                c.last_state
                    .terminated
                    .as_ref()
                    .and_then(Terminated::finished),
            );
            match (&c.state.waiting, &c.state.terminated) {
                (Some(w), _) if !w.reason.is_empty() => reason = w.reason.to_string(),
                (_, Some(t)) if !t.reason.is_empty() => reason = t.reason.to_string(),
                (_, Some(t)) if t.signal != 0 => reason = format!("Signal:{}", t.signal),
                (_, Some(t)) => reason = format!("ExitCode:{}", t.exit_code),
                _ if c.ready && c.state.running.is_some() => {
                    running = true;
                    ready += 1;
                }
                _ => {}
            }
        }
        if reason == "Completed" && running {
            let pod_ready = st
                .conditions
                .iter()
                .any(|c| c.kind == "Ready" && c.status == "True");
            reason = if pod_ready { "Running" } else { "NotReady" }.into();
        }
    }
    if pod.metadata.deletion_timestamp.is_some() {
        if st.reason == "NodeLost" {
            reason = "Unknown".into();
        } else if !matches!(&*st.phase, "Succeeded" | "Failed") {
            reason = "Terminating".into();
        }
    }

    let or_none = |s: &str| Text::from(if s.is_empty() { "<none>" } else { s });
    let ip = st.pod_ips.first().map_or("", |p| &p.ip);
    let gates = match pod.spec.readiness_gates.len() {
        0 => "<none>".to_string(),
        n => {
            let passed = pod
                .spec
                .readiness_gates
                .iter()
                .filter(|g| {
                    st.conditions
                        .iter()
                        .find(|c| c.kind == g.condition_type)
                        .is_some_and(|c| c.status == "True")
                })
                .count();
            format!("{passed}/{n}")
        }
    };
    Row {
        cells: vec![
            pod.metadata.name(),
            Cell::Text(format!("{ready}/{total}").into()),
            Cell::Text(reason.into()),
            Cell::Restarts {
                count: restarts,
                last: last.filter(|_| restarts != 0),
            },
            Cell::Since(
                pod.metadata
                    .creation_timestamp
                    .as_deref()
                    .and_then(parse_time),
            ),
            Cell::Text(or_none(ip)),
            Cell::Text(or_none(&pod.spec.node_name)),
            Cell::Text(or_none(&st.nominated_node_name)),
            Cell::Text(gates.into()),
        ],
        condition,
    }
}

#[cfg(test)]
mod tests;
