//! Tables (`kubectl get`) as the sim prints them: its own reading of
//! kube-apiserver's printers (`pkg/printers/internalversion/printers.go`),
//! written apart from r8s's (`r8s::table`) so that each checks the other:
//! pods, namespaces, nodes, config maps, secrets, services, endpoints, events,
//! deployments, replica sets, stateful sets, daemon sets, jobs, cron jobs,
//! role bindings, leases, storage classes, network policies, ingresses,
//! endpoint slices, volumes, claims, disruption budgets and autoscalers
//! with the
//! columns the apiserver prints for them, custom resources with their
//! definitions' columns (`custom`), every other kind (roles and custom
//! resource definitions among them) with the default `Name` and `Created At`.

use std::sync::Arc;

use serde_json::{Value, json};

mod cells;
mod cluster;
mod custom;
mod kinds;
mod storage;
mod workloads;

use super::resources::ResourceDef;
use super::store::Obj;
use cells::*;
use kinds::{deployment_printer, event_printer, service_printer};

const ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// `includeObject` of a Table request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IncludeObject {
    /// No object in rows (`null`).
    None,
    /// `PartialObjectMetadata` (the default).
    Metadata,
    /// The whole object.
    Object,
}

/// A pod's cells as kube-apiserver prints them: name, ready containers,
/// status (the phase, or a waiting container's reason), restarts, age,
/// then the wide ones.
fn pod_cells(o: &Value) -> Vec<Value> {
    let statuses = o["status"]["containerStatuses"].as_array();
    let total = o["spec"]["containers"].as_array().map_or(0, Vec::len);
    let ready = statuses.map_or(0, |s| {
        s.iter()
            .filter(|c| c["ready"] == true && c["state"]["running"].is_object())
            .count()
    });
    let restarts: u64 = statuses.map_or(0, |s| {
        s.iter().filter_map(|c| c["restartCount"].as_u64()).sum()
    });
    let waiting = statuses.and_then(|s| {
        s.iter()
            .find_map(|c| c["state"]["waiting"]["reason"].as_str())
    });
    // An empty phase prints as it is (a watch's bookmark: the empty pod).
    let status = waiting
        .or_else(|| o["status"]["phase"].as_str())
        .unwrap_or("");
    let ip = o["status"]["podIPs"][0]["ip"].as_str().unwrap_or("");
    vec![
        json!(text(&o["metadata"]["name"])),
        json!(format!("{ready}/{total}")),
        json!(status),
        json!(restarts.to_string()),
        json!(age(o)),
        json!(or(ip, "<none>")),
        json!(or(text(&o["spec"]["nodeName"]), "<none>")),
        json!(or(text(&o["status"]["nominatedNodeName"]), "<none>")),
        json!("<none>"),
    ]
}

fn node_cells(o: &Value) -> Vec<Value> {
    let ready = o["status"]["conditions"]
        .as_array()
        .and_then(|cs| cs.iter().rev().find(|c| c["type"] == "Ready"));
    let mut status = match ready {
        Some(c) if c["status"] == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o["spec"]["unschedulable"] == true {
        status += ",SchedulingDisabled";
    }
    let mut roles: Vec<String> = o["metadata"]["labels"]
        .as_object()
        .map(|l| {
            l.iter()
                .filter_map(|(k, v)| {
                    if let Some(r) = k.strip_prefix("node-role.kubernetes.io/") {
                        (!r.is_empty()).then(|| r.to_string())
                    } else if k == "kubernetes.io/role" && !text(v).is_empty() {
                        Some(text(v).to_string())
                    } else {
                        None
                    }
                })
                .collect()
        })
        .unwrap_or_default();
    roles.sort();
    roles.dedup();
    let address = |kind: &str| {
        o["status"]["addresses"]
            .as_array()
            .and_then(|a| a.iter().find(|x| x["type"] == kind))
            .map_or("<none>".to_string(), |x| text(&x["address"]).to_string())
    };
    let info = &o["status"]["nodeInfo"];
    vec![
        json!(text(&o["metadata"]["name"])),
        json!(status),
        json!(if roles.is_empty() {
            "<none>".to_string()
        } else {
            roles.join(",")
        }),
        json!(age(o)),
        json!(text(&info["kubeletVersion"])),
        json!(address("InternalIP")),
        json!(address("ExternalIP")),
        json!(or(text(&info["osImage"]), "<unknown>")),
        json!(or(text(&info["kernelVersion"]), "<unknown>")),
        json!(or(text(&info["containerRuntimeVersion"]), "<unknown>")),
    ]
}

fn printer(def: &ResourceDef) -> Option<Printer> {
    let s = |name: &str, doc: &str| col(name, "string", "", 0, doc);
    let wide = |name: &str, doc: &str| col(name, "string", "", 1, doc);
    match (def.gvr.group(), def.gvr.resource()) {
        ("apps", "deployments") => return Some(deployment_printer()),
        ("apps", "replicasets") => return Some(workloads::replica_set_printer()),
        ("apps", "statefulsets") => return Some(workloads::stateful_set_printer()),
        ("apps", "daemonsets") => return Some(workloads::daemon_set_printer()),
        ("batch", "jobs") => return Some(workloads::job_printer()),
        ("batch", "cronjobs") => return Some(workloads::cron_job_printer()),
        ("rbac.authorization.k8s.io", "rolebindings") => {
            return Some(cluster::role_binding_printer());
        }
        ("rbac.authorization.k8s.io", "clusterrolebindings") => {
            return Some(cluster::cluster_role_binding_printer());
        }
        ("coordination.k8s.io", "leases") => return Some(cluster::lease_printer()),
        ("storage.k8s.io", "storageclasses") => return Some(cluster::storage_class_printer()),
        ("networking.k8s.io", "networkpolicies") => return Some(cluster::network_policy_printer()),
        ("networking.k8s.io", "ingresses") => return Some(storage::ingress_printer()),
        ("discovery.k8s.io", "endpointslices") => return Some(storage::endpoint_slice_printer()),
        ("policy", "poddisruptionbudgets") => return Some(storage::pod_disruption_budget_printer()),
        ("autoscaling", "horizontalpodautoscalers") => return Some(storage::hpa_printer()),
        ("", _) => {}
        _ => return None,
    }
    Some(match def.gvr.resource() {
        "services" => service_printer(),
        "endpoints" => kinds::endpoints_printer(),
        "serviceaccounts" => kinds::service_account_printer(),
        "persistentvolumes" => storage::persistent_volume_printer(),
        "persistentvolumeclaims" => storage::persistent_volume_claim_printer(),
        "events" => event_printer(),
        "pods" => (
            vec![
                name_col(),
                s(
                    "Ready",
                    "The aggregate readiness state of this pod for accepting traffic.",
                ),
                s(
                    "Status",
                    "The aggregate status of the containers in this pod.",
                ),
                s(
                    "Restarts",
                    "The number of times the containers in this pod have been restarted and when the last container in this pod has restarted.",
                ),
                age_col(),
                wide(
                    "IP",
                    "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet allocated.",
                ),
                wide(
                    "Node",
                    "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate for scheduling by the scheduler defined in schedulerName. Once this field is set, the kubelet for this node becomes responsible for the lifecycle of this pod. This field should not be used to express a desire for the pod to be scheduled on a specific node. https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
                ),
                wide(
                    "Nominated Node",
                    "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot be scheduled right away as preemption victims receive their graceful termination periods. This field does not guarantee that the pod will be scheduled on this node. Scheduler may decide to place the pod elsewhere if other nodes become available sooner. Scheduler may also decide to give the resources on this node to a higher priority pod that is created after preemption. As a result, this field may be different than PodSpec.nodeName when the pod is scheduled.",
                ),
                wide(
                    "Readiness Gates",
                    "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when all its containers are ready AND all conditions specified in the readiness gates have status equal to \"True\" More info: https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
                ),
            ],
            pod_cells,
        ),
        "namespaces" => (
            vec![
                name_col(),
                s("Status", "The status of the namespace"),
                age_col(),
            ],
            |o| {
                vec![
                    json!(text(&o["metadata"]["name"])),
                    json!(text(&o["status"]["phase"])),
                    json!(age(o)),
                ]
            },
        ),
        "configmaps" => (
            vec![
                name_col(),
                s(
                    "Data",
                    "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
                ),
                age_col(),
            ],
            |o| {
                vec![
                    json!(text(&o["metadata"]["name"])),
                    json!(keys(&o["data"]) + keys(&o["binaryData"])),
                    json!(age(o)),
                ]
            },
        ),
        "secrets" => (
            vec![
                name_col(),
                s(
                    "Type",
                    "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
                ),
                s(
                    "Data",
                    "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
                ),
                age_col(),
            ],
            |o| {
                vec![
                    json!(text(&o["metadata"]["name"])),
                    json!(text(&o["type"])),
                    json!(keys(&o["data"])),
                    json!(age(o)),
                ]
            },
        ),
        "nodes" => (
            vec![
                name_col(),
                s("Status", "The status of the node"),
                s("Roles", "The roles of the node"),
                age_col(),
                s("Version", "Kubelet Version reported by the node."),
                wide("Internal-IP", ADDRESSES_DOC),
                wide("External-IP", ADDRESSES_DOC),
                wide(
                    "OS-Image",
                    "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
                ),
                wide(
                    "Kernel-Version",
                    "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
                ),
                wide(
                    "Container-Runtime",
                    "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
                ),
            ],
            node_cells,
        ),
        _ => return None,
    })
}

/// A `Table` of `items`: the kinds above with the apiserver's columns,
/// other kinds with the default ones (`Name`, `Created At`).
pub fn table(
    def: &ResourceDef,
    api_version: &str,
    include: IncludeObject,
    rv: &str,
    cont: Option<&str>,
    items: &[Arc<Obj>],
) -> Value {
    let values = items.iter().map(|o| o.value()).collect();
    table_of(def, api_version, include, rv, cont, values)
}

/// [`table`] of objects given as JSON values (a watch's bookmark: the empty
/// object of the type, with only its version).
pub fn table_of(
    def: &ResourceDef,
    api_version: &str,
    include: IncludeObject,
    rv: &str,
    cont: Option<&str>,
    items: Vec<Value>,
) -> Value {
    let printer = printer(def);
    // A custom resource: its definition's columns.
    let custom = (!def.gvr.is_builtin()).then(|| custom::columns(def));
    let rows: Vec<Value> = items
        .into_iter()
        .map(|v| {
            let m = &v["metadata"];
            let name = m.get("name").cloned().unwrap_or(json!(""));
            let mut row = match (&custom, &printer) {
                (Some((_, paths)), _) => json!({"cells": custom::cells(&v, paths)}),
                (None, Some((_, cells))) => json!({"cells": cells(&v)}),
                // The apiserver's default convertor: the zero time without one.
                (None, None) => {
                    let created = m["creationTimestamp"]
                        .as_str()
                        .unwrap_or("0001-01-01T00:00:00Z");
                    json!({"cells": [name, created]})
                }
            };
            row["object"] = match include {
                IncludeObject::None => Value::Null,
                IncludeObject::Object => v.clone(),
                IncludeObject::Metadata => json!({"kind": "PartialObjectMetadata",
                    "apiVersion": api_version, "metadata": m}),
            };
            row
        })
        .collect();
    let mut meta = json!({"resourceVersion": rv});
    if let Some(c) = cont {
        meta["continue"] = json!(c);
    }
    let columns = match (custom, printer) {
        (Some((columns, _)), _) | (None, Some((columns, _))) => columns,
        (None, None) => vec![name_col(), col("Created At", "date", "", 0, CREATED_DOC)],
    };
    json!({
        "kind": "Table", "apiVersion": api_version, "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows
    })
}
