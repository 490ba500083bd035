//! Tables (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), what
//! `kubectl get` asks for: kube-apiserver's printers
//! (`pkg/printers/internalversion`), as rows r8s makes from its cached
//! objects, and the Table envelope around them.
//!
//! A row is made once per object version and kept with it
//! ([`crate::cache::object::CachedObject::row`]); what depends on the
//! clock (ages, "(5m ago)") is kept as the instant and written when the
//! answer is made, as the apiserver writes it when it prints.

pub mod cell;
pub mod core;
mod duration;
pub mod json;
pub mod pod;

use crate::api::Gvr;

pub use cell::{Cell, Column, Row, RowCondition, Text};
pub use json::{RowObject, put_head, put_row};

/// What prints a resource's rows.
#[derive(Debug, Clone, Copy)]
pub struct Printer {
    /// The columns, in order.
    pub columns: &'static [Column],
    /// An object's row from its JSON; `None` when it does not parse as the
    /// kind's JSON.
    pub row: fn(&[u8]) -> Option<Row>,
}

/// The printer kube-apiserver uses for `gvr`, if r8s has it; resources
/// without one are the upstream's to print.
pub fn printer_for(gvr: &Gvr) -> Option<Printer> {
    match (gvr.group(), gvr.resource()) {
        ("", "pods") => Some(Printer {
            columns: pod::COLUMNS,
            row: pod::row,
        }),
        ("", "namespaces") => Some(Printer {
            columns: core::NAMESPACE_COLUMNS,
            row: core::namespace_row,
        }),
        ("", "nodes") => Some(Printer {
            columns: core::NODE_COLUMNS,
            row: core::node_row,
        }),
        ("", "configmaps") => Some(Printer {
            columns: core::CONFIG_MAP_COLUMNS,
            row: core::config_map_row,
        }),
        ("", "secrets") => Some(Printer {
            columns: core::SECRET_COLUMNS,
            row: core::secret_row,
        }),
        ("", "serviceaccounts") => Some(Printer {
            columns: core::SERVICE_ACCOUNT_COLUMNS,
            row: core::service_account_row,
        }),
        _ => None,
    }
}
