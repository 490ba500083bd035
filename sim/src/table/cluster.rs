//! The sim's printers of role bindings, leases, storage classes and network
//! policies: its own reading of kube-apiserver's `printRoleBinding`,
//! `printClusterRoleBinding`, `printLease`, `printStorageClass` and
//! `printNetworkPolicy`. (Roles and cluster roles have none: the default
//! `Name` and `Created At`.)

use serde_json::{Value, json};

use super::cells::*;

fn s(name: &str, doc: &str) -> Value {
    col(name, "string", "", 0, doc)
}

fn name(o: &Value) -> Value {
    json!(text(&o["metadata"]["name"]))
}

fn bindings(role_ref: &str, of: &str) -> Vec<Value> {
    let wide = |n: &str| col(n, "string", "", 1, &format!("{n} in the {of}"));
    vec![
        name_col(),
        s("Role", role_ref),
        age_col(),
        wide("Users"),
        wide("Groups"),
        wide("ServiceAccounts"),
    ]
}

fn binding_cells(o: &Value) -> Vec<Value> {
    let subjects = o["subjects"].as_array().cloned().unwrap_or_default();
    let of = |kind: &str| {
        let names: Vec<String> = subjects
            .iter()
            .filter(|s| s["kind"] == kind)
            .map(|s| match kind {
                "ServiceAccount" => format!("{}/{}", text(&s["namespace"]), text(&s["name"])),
                _ => text(&s["name"]).to_string(),
            })
            .collect();
        json!(names.join(", "))
    };
    let r = &o["roleRef"];
    vec![
        name(o),
        json!(format!("{}/{}", text(&r["kind"]), text(&r["name"]))),
        json!(age(o)),
        of("User"),
        of("Group"),
        of("ServiceAccount"),
    ]
}

pub(super) fn role_binding_printer() -> Printer {
    (
        bindings(
            "RoleRef can reference a Role in the current namespace or a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "roleBinding",
        ),
        binding_cells,
    )
}

pub(super) fn cluster_role_binding_printer() -> Printer {
    (
        bindings(
            "RoleRef can only reference a ClusterRole in the global namespace. If the RoleRef cannot be resolved, the Authorizer must return an error.",
            "clusterRoleBinding",
        ),
        binding_cells,
    )
}

pub(super) fn lease_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Holder",
                "holderIdentity contains the identity of the holder of a current lease. If Coordinated Leader Election is used, the holder identity must be equal to the elected LeaseCandidate.metadata.name field.",
            ),
            age_col(),
        ],
        |o| {
            vec![
                name(o),
                json!(text(&o["spec"]["holderIdentity"])),
                json!(age(o)),
            ]
        },
    )
}

pub(super) fn storage_class_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Provisioner",
                "provisioner indicates the type of the provisioner.",
            ),
            s(
                "ReclaimPolicy",
                "reclaimPolicy controls the reclaimPolicy for dynamically provisioned PersistentVolumes of this storage class. Defaults to Delete.",
            ),
            s(
                "VolumeBindingMode",
                "volumeBindingMode indicates how PersistentVolumeClaims should be provisioned and bound.  When unset, VolumeBindingImmediate is used. This field is only honored by servers that enable the VolumeScheduling feature.",
            ),
            s(
                "AllowVolumeExpansion",
                "allowVolumeExpansion shows whether the storage class allow volume expand.",
            ),
            age_col(),
        ],
        |o| {
            let a = &o["metadata"]["annotations"];
            let default = a["storageclass.kubernetes.io/is-default-class"] == "true"
                || a["storageclass.beta.kubernetes.io/is-default-class"] == "true";
            let mut n = text(&o["metadata"]["name"]).to_string();
            if default {
                n.push_str(" (default)");
            }
            vec![
                json!(n),
                json!(text(&o["provisioner"])),
                json!(or(text(&o["reclaimPolicy"]), "Delete")),
                json!(or(text(&o["volumeBindingMode"]), "Immediate")),
                json!(o["allowVolumeExpansion"].as_bool().unwrap_or(false)),
                json!(age(o)),
            ]
        },
    )
}

pub(super) fn network_policy_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Pod-Selector",
                "Selects the pods to which this NetworkPolicy object applies.  The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods.  In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.",
            ),
            age_col(),
        ],
        |o| {
            let sel = selector_text(&o["spec"]["podSelector"]);
            let sel = match sel.as_str() {
                "" => "<none>".to_string(),
                "<invalid>" => "<error>".to_string(),
                _ => sel,
            };
            vec![name(o), json!(sel), json!(age(o))]
        },
    )
}
