//! Tables (`kubectl get`) as the sim prints them: its own reading of
//! kube-apiserver's printers (`pkg/printers/internalversion/printers.go`),
//! written apart from r8s's (`r8s::table`) so that each checks the other:
//! pods, namespaces, nodes, config maps, secrets, services and deployments
//! with the columns the apiserver prints for them, every other kind with the
//! default `Name` and `Created At`.

use std::sync::Arc;

use serde_json::{Value, json};

use super::resources::ResourceDef;
use super::store::Obj;

const NAME_DOC: &str = "Name must be unique within a namespace. Is required when creating resources, although some resources may allow a client to request the generation of an appropriate name automatically. Name is primarily intended for creation idempotence and configuration definition. Cannot be updated. More info: https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";
const CREATED_DOC: &str = "CreationTimestamp is a timestamp representing the server time when this object was created. It is not guaranteed to be set in happens-before order across separate operations. Clients may not set this value. It is represented in RFC3339 form and is in UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: https://git.k8s.io/community/contributors/devel/sig-architecture/api-conventions.md#metadata";
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

/// A duration as Kubernetes prints ages (`duration.HumanDuration`): `45s`,
/// `3m12s`, `17m`, `5h3m`, `30h`, `3d4h`, `90d`, `2y45d`.
fn human_duration(secs: i64) -> String {
    if secs < -1 {
        return "<invalid>".into();
    }
    let secs = secs.max(0);
    let (m, h, d) = (secs / 60, secs / 3600, secs / 86_400);
    match secs {
        s if s < 120 => format!("{s}s"),
        _ if m < 10 && secs % 60 != 0 => format!("{m}m{}s", secs % 60),
        _ if m < 180 => format!("{m}m"),
        _ if h < 8 && m % 60 != 0 => format!("{h}h{}m", m % 60),
        _ if h < 48 => format!("{h}h"),
        _ if h < 192 && h % 24 != 0 => format!("{d}d{}h", h % 24),
        _ if d < 730 => format!("{d}d"),
        _ if d < 365 * 8 && d % 365 != 0 => format!("{}y{}d", d / 365, d % 365),
        _ => format!("{}y", d / 365),
    }
}

/// How old an object is, for a Table's `Age` cell.
fn age(o: &Value) -> String {
    let created = o["metadata"]["creationTimestamp"]
        .as_str()
        .and_then(|t| humantime::parse_rfc3339(t).ok());
    match created {
        Some(t) => {
            let now = std::time::SystemTime::now();
            let secs = match now.duration_since(t) {
                Ok(d) => d.as_secs() as i64,
                Err(e) => -(e.duration().as_secs() as i64),
            };
            human_duration(secs)
        }
        None => "<unknown>".into(),
    }
}

fn text(o: &Value) -> &str {
    o.as_str().unwrap_or("")
}

fn or(s: &str, empty: &str) -> String {
    if s.is_empty() { empty } else { s }.to_string()
}

/// How many keys a JSON object has (0 for none).
fn keys(o: &Value) -> usize {
    o.as_object().map_or(0, |m| m.len())
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

/// `k=v` pairs by key, comma-joined (`labels.FormatLabels`), `<none>` for none.
fn label_pairs(m: &Value) -> String {
    let mut pairs: Vec<String> = m
        .as_object()
        .map(|m| m.iter().map(|(k, v)| format!("{k}={}", text(v))).collect())
        .unwrap_or_default();
    pairs.sort();
    if pairs.is_empty() {
        "<none>".into()
    } else {
        pairs.join(",")
    }
}

/// A label selector as apimachinery writes one (`LabelSelectorAsSelector`):
/// requirements by key; nothing for none.
fn selector_text(sel: &Value) -> String {
    let mut reqs: Vec<(String, String)> = Vec::new();
    if let Some(m) = sel["matchLabels"].as_object() {
        for (k, v) in m {
            reqs.push((k.clone(), format!("{k}={}", text(v))));
        }
    }
    for e in sel["matchExpressions"].as_array().into_iter().flatten() {
        let k = text(&e["key"]).to_string();
        let mut vals: Vec<&str> = e["values"]
            .as_array()
            .into_iter()
            .flatten()
            .map(text)
            .collect();
        vals.sort();
        let r = match text(&e["operator"]) {
            "In" => format!("{k} in ({})", vals.join(",")),
            "NotIn" => format!("{k} notin ({})", vals.join(",")),
            "Exists" => k.clone(),
            "DoesNotExist" => format!("!{k}"),
            _ => return "<invalid>".into(),
        };
        reqs.push((k, r));
    }
    reqs.sort_by(|a, b| a.0.cmp(&b.0));
    reqs.into_iter().map(|r| r.1).collect::<Vec<_>>().join(",")
}

fn deployment_printer() -> Printer {
    let s = |name: &str, doc: &str| col(name, "string", "", 0, doc);
    let wide = |name: &str, doc: &str| col(name, "string", "", 1, doc);
    (
        vec![
            name_col(),
            s("Ready", "Number of the pod with ready state"),
            s(
                "Up-to-date",
                "Total number of non-terminating pods targeted by this deployment that have the desired template spec.",
            ),
            s(
                "Available",
                "Total number of available non-terminating pods (ready for at least minReadySeconds) targeted by this deployment.",
            ),
            age_col(),
            wide("Containers", "Names of each container in the template."),
            wide(
                "Images",
                "Images referenced by each container in the template.",
            ),
            wide(
                "Selector",
                "Label selector for pods. Existing ReplicaSets whose pods are selected by this will be the ones affected by this deployment.",
            ),
        ],
        |o| {
            let containers = o["spec"]["template"]["spec"]["containers"].as_array();
            let field = |f: &str| -> String {
                containers
                    .into_iter()
                    .flatten()
                    .map(|c| text(&c[f]))
                    .collect::<Vec<_>>()
                    .join(",")
            };
            let int = |v: &Value| v.as_i64().unwrap_or(0);
            let selector = match &o["spec"]["selector"] {
                Value::Null => String::new(),
                s => selector_text(s),
            };
            vec![
                json!(text(&o["metadata"]["name"])),
                json!(format!(
                    "{}/{}",
                    int(&o["status"]["readyReplicas"]),
                    int(&o["spec"]["replicas"])
                )),
                json!(int(&o["status"]["updatedReplicas"])),
                json!(int(&o["status"]["availableReplicas"])),
                json!(age(o)),
                json!(field("name")),
                json!(field("image")),
                json!(selector),
            ]
        },
    )
}

fn service_printer() -> Printer {
    let s = |name: &str, doc: &str| col(name, "string", "", 0, doc);
    (
        vec![
            name_col(),
            s(
                "Type",
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
            ),
            s(
                "Cluster-IP",
                "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
            ),
            s(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
            ),
            s(
                "Port(s)",
                "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
            ),
            age_col(),
            col(
                "Selector",
                "string",
                "",
                1,
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
            ),
        ],
        |o| {
            let spec = &o["spec"];
            let list = |v: &Value| -> Vec<String> {
                v.as_array()
                    .into_iter()
                    .flatten()
                    .map(|x| text(x).to_string())
                    .collect()
            };
            let external_ips = list(&spec["externalIPs"]);
            let kind = text(&spec["type"]);
            let external = match kind {
                "ClusterIP" | "NodePort" => or(&external_ips.join(","), "<none>"),
                "LoadBalancer" => {
                    let mut lb: Vec<String> = o["status"]["loadBalancer"]["ingress"]
                        .as_array()
                        .into_iter()
                        .flatten()
                        .filter_map(|i| {
                            [text(&i["ip"]), text(&i["hostname"])]
                                .into_iter()
                                .find(|s| !s.is_empty())
                                .map(str::to_string)
                        })
                        .collect();
                    lb.sort();
                    lb.dedup();
                    lb.extend(external_ips);
                    or(&lb.join(","), "<pending>")
                }
                "ExternalName" => text(&spec["externalName"]).to_string(),
                _ => "<unknown>".into(),
            };
            let ports: Vec<String> = spec["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| {
                    let node = p["nodePort"].as_i64().unwrap_or(0);
                    let node = if node > 0 {
                        format!(":{node}")
                    } else {
                        String::new()
                    };
                    format!(
                        "{}{node}/{}",
                        p["port"].as_i64().unwrap_or(0),
                        text(&p["protocol"])
                    )
                })
                .collect();
            vec![
                json!(text(&o["metadata"]["name"])),
                json!(kind),
                json!(spec["clusterIPs"][0].as_str().unwrap_or("<none>")),
                json!(external),
                json!(or(&ports.join(","), "<none>")),
                json!(age(o)),
                json!(label_pairs(&spec["selector"])),
            ]
        },
    )
}

fn col(name: &str, ty: &str, format: &str, priority: u8, description: &str) -> Value {
    json!({"name": name, "type": ty, "format": format, "description": description, "priority": priority})
}

fn name_col() -> Value {
    col("Name", "string", "name", 0, NAME_DOC)
}

fn age_col() -> Value {
    col("Age", "string", "", 0, CREATED_DOC)
}

/// A kind's columns and how it prints one object, where the sim prints
/// it as the apiserver does.
type Printer = (Vec<Value>, fn(&Value) -> Vec<Value>);

fn printer(def: &ResourceDef) -> Option<Printer> {
    let s = |name: &str, doc: &str| col(name, "string", "", 0, doc);
    let wide = |name: &str, doc: &str| col(name, "string", "", 1, doc);
    if def.gvr.group() == "apps" && def.gvr.resource() == "deployments" {
        return Some(deployment_printer());
    }
    if !def.gvr.group().is_empty() {
        return None;
    }
    Some(match def.gvr.resource() {
        "services" => service_printer(),
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
    let rows: Vec<Value> = items
        .into_iter()
        .map(|v| {
            let m = &v["metadata"];
            let name = m.get("name").cloned().unwrap_or(json!(""));
            let mut row = match &printer {
                Some((_, cells)) => json!({"cells": cells(&v)}),
                None => json!({"cells": [name, m["creationTimestamp"]]}),
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
    let columns = match printer {
        Some((columns, _)) => columns,
        None => vec![name_col(), col("Created At", "date", "", 0, CREATED_DOC)],
    };
    json!({
        "kind": "Table", "apiVersion": api_version, "metadata": meta,
        "columnDefinitions": columns,
        "rows": rows
    })
}
