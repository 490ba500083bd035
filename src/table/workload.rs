//! Printers of the workload controllers: deployments, as kube-apiserver's
//! `printDeployment` prints them (`pkg/printers/internalversion/
//! printers.go`; column texts from Kubernetes 1.36's `extensions/v1beta1`
//! documentation, which its definitions cite).

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text};
use super::labels::{Selector, Template, containers, selector_string};

/// The template columns every controller's wide output ends with.
const CONTAINERS: Column = Column::wide("Containers", "Names of each container in the template.");
const IMAGES: Column = Column::wide(
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
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Deployment<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
        status: Status,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Spec<'a> {
        replicas: i64,
        #[serde(borrow)]
        selector: Option<Selector<'a>>,
        #[serde(borrow)]
        template: Template<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Status {
        updated_replicas: i64,
        ready_replicas: i64,
        available_replicas: i64,
    }
    let o: Deployment = serde_json::from_slice(body).ok()?;
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

#[cfg(test)]
#[path = "workload_tests.rs"]
mod tests;
