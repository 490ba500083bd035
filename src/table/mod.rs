//! Tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), what
//! `kubectl get` asks for: kube-apiserver's printers
//! (`pkg/printers/internalversion`), as rows r8s makes from its cached
//! objects, and the Table envelope around them.
//!
//! A row is made once per object version and kept with it
//! ([`crate::cache::object::CachedObject::row`]); what depends on the
//! clock (ages, "(5m ago)") is kept as the instant and written when the
//! answer is made, as the apiserver writes it when it prints.

pub mod autoscaling;
pub mod batch;
pub mod cell;
pub mod cluster;
pub mod core;
pub mod custom;
mod duration;
pub mod event;
pub mod json;
mod jsonpath;
pub mod labels;
pub mod network;
pub mod plain;
pub mod pod;
pub mod storage;
pub mod workload;

use std::sync::Arc;

use crate::api::Gvr;

pub use cell::{Cell, Column, Row, RowCondition, Text};
pub use custom::Custom;
pub use json::{RowObject, put_head, put_row};

/// What prints a resource's rows: a built-in kind's printer, or a custom
/// resource's, made from its definition.
#[derive(Debug, Clone)]
pub enum Printer {
    /// kube-apiserver's printer of a built-in kind.
    Builtin {
        /// The columns, in order.
        columns: &'static [Column],
        /// An object's row from its JSON; `None` when it does not parse as
        /// the kind's JSON.
        row: fn(&[u8]) -> Option<Row>,
    },
    /// A custom resource's columns (`additionalPrinterColumns`).
    Custom(Arc<Custom>),
}

impl Printer {
    /// The columns, in order.
    pub fn columns(&self) -> &[Column] {
        match self {
            Printer::Builtin { columns, .. } => columns,
            Printer::Custom(c) => c.columns(),
        }
    }

    /// An object's row from its JSON; `None` when the printer cannot read
    /// it (the Table is then the upstream's to print).
    pub fn row(&self, body: &[u8]) -> Option<Row> {
        match self {
            Printer::Builtin { row, .. } => row(body),
            Printer::Custom(c) => c.row(body),
        }
    }
}

/// A printer, and the group and resource it prints.
struct Entry {
    group: &'static str,
    resource: &'static str,
    printer: Printer,
}

const fn entry(
    group: &'static str,
    resource: &'static str,
    columns: &'static [Column],
    row: fn(&[u8]) -> Option<Row>,
) -> Entry {
    Entry {
        group,
        resource,
        printer: Printer::Builtin { columns, row },
    }
}

/// Every printer r8s has.
static PRINTERS: &[Entry] = &[
    entry("", "pods", pod::COLUMNS, pod::row),
    entry(
        "",
        "namespaces",
        core::NAMESPACE_COLUMNS,
        core::namespace_row,
    ),
    entry("", "nodes", core::NODE_COLUMNS, core::node_row),
    entry(
        "",
        "configmaps",
        core::CONFIG_MAP_COLUMNS,
        core::config_map_row,
    ),
    entry("", "secrets", core::SECRET_COLUMNS, core::secret_row),
    entry(
        "",
        "serviceaccounts",
        core::SERVICE_ACCOUNT_COLUMNS,
        core::service_account_row,
    ),
    entry(
        "",
        "services",
        network::SERVICE_COLUMNS,
        network::service_row,
    ),
    entry(
        "",
        "endpoints",
        network::ENDPOINTS_COLUMNS,
        network::endpoints_row,
    ),
    entry("", "events", event::EVENT_COLUMNS, event::event_row),
    entry(
        "",
        "persistentvolumes",
        storage::PERSISTENT_VOLUME_COLUMNS,
        storage::persistent_volume_row,
    ),
    entry(
        "",
        "persistentvolumeclaims",
        storage::PERSISTENT_VOLUME_CLAIM_COLUMNS,
        storage::persistent_volume_claim_row,
    ),
    entry(
        "apps",
        "deployments",
        workload::DEPLOYMENT_COLUMNS,
        workload::deployment_row,
    ),
    entry(
        "apps",
        "replicasets",
        workload::REPLICA_SET_COLUMNS,
        workload::replica_set_row,
    ),
    entry(
        "apps",
        "statefulsets",
        workload::STATEFUL_SET_COLUMNS,
        workload::stateful_set_row,
    ),
    entry(
        "apps",
        "daemonsets",
        workload::DAEMON_SET_COLUMNS,
        workload::daemon_set_row,
    ),
    entry("batch", "jobs", batch::JOB_COLUMNS, batch::job_row),
    entry(
        "autoscaling",
        "horizontalpodautoscalers",
        autoscaling::HPA_COLUMNS,
        autoscaling::hpa_row,
    ),
    entry(
        "policy",
        "poddisruptionbudgets",
        workload::POD_DISRUPTION_BUDGET_COLUMNS,
        workload::pod_disruption_budget_row,
    ),
    entry(
        "networking.k8s.io",
        "ingresses",
        network::INGRESS_COLUMNS,
        network::ingress_row,
    ),
    entry(
        "discovery.k8s.io",
        "endpointslices",
        network::ENDPOINT_SLICE_COLUMNS,
        network::endpoint_slice_row,
    ),
    entry(
        "networking.k8s.io",
        "networkpolicies",
        network::NETWORK_POLICY_COLUMNS,
        network::network_policy_row,
    ),
    entry(
        "rbac.authorization.k8s.io",
        "roles",
        plain::COLUMNS,
        plain::row,
    ),
    entry(
        "rbac.authorization.k8s.io",
        "clusterroles",
        plain::COLUMNS,
        plain::row,
    ),
    entry(
        "rbac.authorization.k8s.io",
        "rolebindings",
        cluster::ROLE_BINDING_COLUMNS,
        cluster::binding_row,
    ),
    entry(
        "rbac.authorization.k8s.io",
        "clusterrolebindings",
        cluster::CLUSTER_ROLE_BINDING_COLUMNS,
        cluster::binding_row,
    ),
    entry(
        "coordination.k8s.io",
        "leases",
        cluster::LEASE_COLUMNS,
        cluster::lease_row,
    ),
    entry(
        "storage.k8s.io",
        "storageclasses",
        cluster::STORAGE_CLASS_COLUMNS,
        cluster::storage_class_row,
    ),
    entry(
        "apiextensions.k8s.io",
        "customresourcedefinitions",
        plain::COLUMNS,
        plain::row,
    ),
    entry(
        "batch",
        "cronjobs",
        batch::CRON_JOB_COLUMNS,
        batch::cron_job_row,
    ),
];

/// The printer kube-apiserver uses for `gvr`, if r8s has it; resources
/// without one are the upstream's to print.
pub fn printer_for(gvr: &Gvr) -> Option<Printer> {
    PRINTERS
        .iter()
        .find(|e| e.group == gvr.group() && e.resource == gvr.resource())
        .map(|e| e.printer.clone())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A Table watch's BOOKMARK is the printer's row of the empty object the
    /// apiserver sends (only its version): every printer prints one.
    #[test]
    fn should_print_an_empty_object_with_every_printer() {
        for e in PRINTERS {
            let (r, p) = (e.resource, &e.printer);
            assert!(printer_for(&Gvr::new(e.group, "v1", r)).is_some(), "{r}");
            let row = p.row(br#"{"metadata":{"resourceVersion":"7"}}"#).expect(r);
            assert_eq!(row.cells.len(), p.columns().len(), "{r}");
        }
    }
}
