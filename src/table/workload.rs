//! Printers of the workload controllers: deployments, replica sets,
//! stateful sets, daemon sets and pod disruption budgets, as
//! kube-apiserver's `printDeployment`, `printReplicaSet`,
//! `printStatefulSet`, `printDaemonSet` and `printPodDisruptionBudget` print them
//! (`pkg/printers/internalversion/printers.go`; column texts from
//! Kubernetes 1.36's `extensions/v1beta1` and `core/v1` documentation,
//! which its definitions cite).

use std::borrow::Cow;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text};
use super::labels::{
    Selector, Template, containers, format_label_selector, format_labels, selector_string,
};

/// The template columns every controller's wide output ends with.
pub(super) const CONTAINERS: Column =
    Column::wide("Containers", "Names of each container in the template.");
pub(super) const IMAGES: Column = Column::wide(
    "Images",
    "Images referenced by each container in the template.",
);

/// `deploymentColumnDefinitions`.
pub static DEPLOYMENT_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text("Ready", "Number of the pod with ready state"),
    Column::text(
        "Up-to-date",
        "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
    ),
    Column::text(
        "Available",
        "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
    ),
    Column::age(),
    CONTAINERS,
    IMAGES,
    Column::wide(
        "Selector",
        "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
    ),
];

/// A deployment's row: ready of desired, updated, available; wide: its
/// template's containers and images, its selector.
pub fn deployment_row(body: &[u8]) -> Option<Row> {
    let o: Controller = serde_json::from_slice(body).ok()?;
    let (names, images) = containers(&o.spec.template.spec.containers);
    let ready = format!("{}/{}", o.status.ready_replicas, o.spec.replicas);
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(ready)),
            Cell::Int(o.status.updated_replicas),
            Cell::Int(o.status.available_replicas),
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
            Cell::Text(Text::from(selector_string(o.spec.selector.as_ref()))),
        ],
        condition: None,
    })
}

/// `replicaSetColumnDefinitions`.
pub static REPLICA_SET_COLUMNS: &[Column] = &[
    Column::name(),
    Column::int(
        "Desired",
        "Replicas is the number of desired pods. This is a pointer to distinguish between explicit zero and unspecified. Defaults to 1. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    Column::int(
        "Current",
        "Replicas is the most recently observed number of non-terminating pods. More info: https://kubernetes.io/docs/concepts/workloads/controllers/replicaset",
    ),
    Column::int(
        "Ready",
        "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.",
    ),
    Column::age(),
    CONTAINERS,
    IMAGES,
    Column::wide(
        "Selector",
        "Selector is a label query over pods that should match the replica count. If the selector is empty, it is defaulted to the labels present on the pod template. Label keys and values that must match in order to be controlled by this replica set. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// What a deployment's, replica set's, stateful set's or daemon set's row
/// reads.
#[derive(Deserialize, Default)]
#[serde(default)]
struct Controller<'a> {
    #[serde(borrow)]
    metadata: Meta<'a>,
    #[serde(borrow)]
    spec: ControllerSpec<'a>,
    status: ControllerStatus,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct ControllerSpec<'a> {
    replicas: i64,
    #[serde(borrow)]
    selector: Option<Selector<'a>>,
    #[serde(borrow)]
    template: Template<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct ControllerStatus {
    replicas: i64,
    ready_replicas: i64,
    updated_replicas: i64,
    available_replicas: i64,
    desired_number_scheduled: i64,
    current_number_scheduled: i64,
    number_ready: i64,
    updated_number_scheduled: i64,
    number_available: i64,
}

/// A replica set's row: desired, current and ready replicas; wide: its
/// template's containers and images, its selector.
pub fn replica_set_row(body: &[u8]) -> Option<Row> {
    let o: Controller = serde_json::from_slice(body).ok()?;
    let (names, images) = containers(&o.spec.template.spec.containers);
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Int(o.spec.replicas),
            Cell::Int(o.status.replicas),
            Cell::Int(o.status.ready_replicas),
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
            Cell::Text(Text::from(format_label_selector(o.spec.selector.as_ref()))),
        ],
        condition: None,
    })
}

/// `statefulSetColumnDefinitions`.
pub static STATEFUL_SET_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text("Ready", "Number of the pod with ready state"),
    Column::age(),
    CONTAINERS,
    IMAGES,
];

/// A stateful set's row: ready of desired; wide: its template's containers
/// and images.
pub fn stateful_set_row(body: &[u8]) -> Option<Row> {
    let o: Controller = serde_json::from_slice(body).ok()?;
    let (names, images) = containers(&o.spec.template.spec.containers);
    let ready = format!("{}/{}", o.status.ready_replicas, o.spec.replicas);
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(ready)),
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
        ],
        condition: None,
    })
}

/// `daemonSetColumnDefinitions`.
pub static DAEMON_SET_COLUMNS: &[Column] = &[
    Column::name(),
    Column::int(
        "Desired",
        "The total number of nodes that should be running the daemon pod (including nodes correctly running the daemon pod). More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    Column::int(
        "Current",
        "The number of nodes that are running at least 1 daemon pod and are supposed to run the daemon pod. More info: https://kubernetes.io/docs/concepts/workloads/controllers/daemonset/",
    ),
    Column::int(
        "Ready",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and ready.",
    ),
    Column::int(
        "Up-to-date",
        "The total number of nodes that are running updated daemon pod",
    ),
    Column::int(
        "Available",
        "The number of nodes that should be running the daemon pod and have one or more of the daemon pod running and available (ready for at least spec.minReadySeconds)",
    ),
    Column::text(
        "Node Selector",
        "NodeSelector is a selector which must be true for the pod to fit on a node. Selector which must match a node's labels for the pod to be scheduled on that node. More info: https://kubernetes.io/docs/concepts/configuration/assign-pod-node/",
    ),
    Column::age(),
    CONTAINERS,
    IMAGES,
    Column::wide(
        "Selector",
        "A label query over pods that are managed by the daemon set. Must match in order to be controlled. If empty, defaulted to labels on Pod template. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/labels/#label-selectors",
    ),
];

/// A daemon set's row: desired, current, ready, updated and available
/// counts, its template's node selector; wide: containers, images and its
/// selector.
pub fn daemon_set_row(body: &[u8]) -> Option<Row> {
    let o: Controller = serde_json::from_slice(body).ok()?;
    let spec = &o.spec.template.spec;
    let (names, images) = containers(&spec.containers);
    let s = &o.status;
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Int(s.desired_number_scheduled),
            Cell::Int(s.current_number_scheduled),
            Cell::Int(s.number_ready),
            Cell::Int(s.updated_number_scheduled),
            Cell::Int(s.number_available),
            Cell::Text(Text::from(format_labels(&spec.node_selector))),
            o.metadata.age(),
            Cell::Text(Text::from(names)),
            Cell::Text(Text::from(images)),
            Cell::Text(Text::from(format_label_selector(o.spec.selector.as_ref()))),
        ],
        condition: None,
    })
}

/// `podDisruptionBudgetColumnDefinitions`.
pub static POD_DISRUPTION_BUDGET_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Min Available",
        "The minimum number of pods that must be available.",
    ),
    Column::text(
        "Max Unavailable",
        "The maximum number of pods that may be unavailable.",
    ),
    Column::int(
        "Allowed Disruptions",
        "Calculated number of pods that may be disrupted at this time.",
    ),
    Column::age(),
];

/// An `IntOrString` as its `String()`: the number, or the text.
#[derive(Deserialize)]
#[serde(untagged)]
enum IntOrString<'a> {
    Int(i64),
    Str(#[serde(borrow)] Cow<'a, str>),
}

/// A budget's row: its minimum available and maximum unavailable (`N/A`
/// where unset), the disruptions it allows now.
pub fn pod_disruption_budget_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Budget<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: BudgetSpec<'a>,
        status: BudgetStatus,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct BudgetSpec<'a> {
        #[serde(borrow)]
        min_available: Option<IntOrString<'a>>,
        #[serde(borrow)]
        max_unavailable: Option<IntOrString<'a>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct BudgetStatus {
        disruptions_allowed: i64,
    }
    let o: Budget = serde_json::from_slice(body).ok()?;
    let text = |v: &Option<IntOrString>| {
        Cell::Text(Text::from(match v {
            None => "N/A".to_string(),
            Some(IntOrString::Int(n)) => n.to_string(),
            Some(IntOrString::Str(s)) => s.to_string(),
        }))
    };
    Some(Row {
        cells: vec![
            o.metadata.name(),
            text(&o.spec.min_available),
            text(&o.spec.max_unavailable),
            Cell::Int(o.status.disruptions_allowed),
            o.metadata.age(),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
