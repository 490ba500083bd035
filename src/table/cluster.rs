//! Printers of the kinds that run a cluster rather than its workloads: role
//! bindings and cluster role bindings, leases and storage classes, as
//! kube-apiserver's `printRoleBinding`, `printClusterRoleBinding`,
//! `printLease` and `printStorageClass` print them (`pkg/printers/
//! internalversion/printers.go`; column texts from Kubernetes 1.36's
//! `rbac/v1beta1`, `coordination/v1` and `storage/v1` documentation, which
//! its definitions cite). Roles and cluster roles have no printer there:
//! [`super::plain`] prints them.

use std::borrow::Cow;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text, parse_time};
use super::labels::Labels;

/// A role binding's columns, with its `roleRef` text.
macro_rules! binding_columns {
    ($role_ref:expr, $of:literal) => {
        &[
            Column::name(),
            Column::text("Role", $role_ref),
            Column::age(),
            Column::wide("Users", concat!("Users in the ", $of)),
            Column::wide("Groups", concat!("Groups in the ", $of)),
            Column::wide("ServiceAccounts", concat!("ServiceAccounts in the ", $of)),
        ]
    };
}

/// `roleBindingsColumnDefinitions`.
pub static ROLE_BINDING_COLUMNS: &[Column] = binding_columns!(
    "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
    "roleBinding"
);

/// `clusterRoleBindingsColumnDefinitions`.
pub static CLUSTER_ROLE_BINDING_COLUMNS: &[Column] = binding_columns!(
    "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
    "clusterRoleBinding"
);

/// A role binding's or cluster role binding's row: `Kind/name` of its role;
/// wide: its users, groups and service accounts (`rbac.SubjectsStrings`,
/// `namespace/name`), each `, `-joined.
pub fn binding_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Binding<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        role_ref: Ref<'a>,
        #[serde(borrow)]
        subjects: Vec<Ref<'a>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Ref<'a> {
        #[serde(borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow)]
        namespace: Cow<'a, str>,
    }
    let o: Binding = serde_json::from_slice(body).ok()?;
    let (mut users, mut groups, mut sas) = (Vec::new(), Vec::new(), Vec::new());
    for s in &o.subjects {
        match &*s.kind {
            "ServiceAccount" => sas.push(format!("{}/{}", s.namespace, s.name)),
            "User" => users.push(s.name.to_string()),
            "Group" => groups.push(s.name.to_string()),
            _ => {}
        }
    }
    let text = |s: String| Cell::Text(Text::from(s));
    Some(Row {
        cells: vec![
            o.metadata.name(),
            text(format!("{}/{}", o.role_ref.kind, o.role_ref.name)),
            o.metadata.age(),
            text(users.join(", ")),
            text(groups.join(", ")),
            text(sas.join(", ")),
        ],
        condition: None,
    })
}

/// `leaseColumnDefinitions`.
pub static LEASE_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Holder",
        "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
    ),
    Column::age(),
];

/// A lease's row: who holds it (empty when no one does).
pub fn lease_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Lease<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Spec<'a> {
        #[serde(borrow)]
        holder_identity: Option<Cow<'a, str>>,
    }
    let o: Lease = serde_json::from_slice(body).ok()?;
    let holder = o.spec.holder_identity.as_deref().unwrap_or("");
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(holder)),
            o.metadata.age(),
        ],
        condition: None,
    })
}

/// `storageClassColumnDefinitions`.
pub static STORAGE_CLASS_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Provisioner",
        "provisioner indicates the type of the provisioner.",
    ),
    Column::text(
        "ReclaimPolicy",
        "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
    ),
    Column::text(
        "VolumeBindingMode",
        "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
    ),
    Column::text(
        "AllowVolumeExpansion",
        "allowVolumeExpansion shows whether the storage class allow volume expand.",
    ),
    Column::age(),
];

/// A storage class's row: its name (` (default)` for the default class),
/// provisioner, reclaim policy (`Delete` unset), binding mode (`Immediate`
/// unset), whether volumes may grow (a boolean cell).
pub fn storage_class_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct StorageClass<'a> {
        #[serde(borrow)]
        metadata: ClassMeta<'a>,
        #[serde(borrow)]
        provisioner: Cow<'a, str>,
        #[serde(borrow)]
        reclaim_policy: Option<Cow<'a, str>>,
        #[serde(borrow)]
        volume_binding_mode: Option<Cow<'a, str>>,
        allow_volume_expansion: Option<bool>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct ClassMeta<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow)]
        creation_timestamp: Option<Cow<'a, str>>,
        #[serde(borrow)]
        annotations: Labels<'a>,
    }
    let o: StorageClass = serde_json::from_slice(body).ok()?;
    let m = &o.metadata;
    // `storageutil.IsDefaultAnnotation`: the annotation or its beta form.
    let default = [
        "storageclass.kubernetes.io/is-default-class",
        "storageclass.beta.kubernetes.io/is-default-class",
    ]
    .iter()
    .any(|k| m.annotations.get(*k).is_some_and(|v| v == "true"));
    let name = match default {
        true => format!("{} (default)", m.name),
        false => m.name.to_string(),
    };
    let age = Cell::Since(m.creation_timestamp.as_deref().and_then(parse_time));
    let text = |s: &str| Cell::Text(Text::from(s));
    Some(Row {
        cells: vec![
            text(&name),
            text(&o.provisioner),
            text(o.reclaim_policy.as_deref().unwrap_or("Delete")),
            text(o.volume_binding_mode.as_deref().unwrap_or("Immediate")),
            Cell::Bool(o.allow_volume_expansion.unwrap_or(false)),
            age,
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
