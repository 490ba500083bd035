//! The sim's printers of services, endpoints, service accounts, events and
//! deployments, its own reading of kube-apiserver's `printService`,
//! `printEndpoints`, `printServiceAccount`, `printEvent` and
//! `printDeployment`.

use serde_json::{Value, json};

use super::cells::*;

pub(super) fn deployment_printer() -> Printer {
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

pub(super) fn event_printer() -> Printer {
    let s = |name: &str, doc: &str| col(name, "string", "", 0, doc);
    let wide = |name: &str, doc: &str| col(name, "string", "", 1, doc);
    (
        vec![
            s(
                "Last Seen",
                "The time at which the most recent occurrence of this event was recorded.",
            ),
            s(
                "Type",
                "Type of this event (Normal, Warning), new types could be added in the future",
            ),
            s(
                "Reason",
                "This should be a short, machine understandable string that gives the reason for the transition into the object's current status.",
            ),
            s("Object", "The object that this event is about."),
            wide(
                "Subobject",
                "If referring to a piece of an object instead of an entire object, this string should contain a valid JSON/Go field access statement, such as desiredState.manifest.containers[2]. For example, if the object reference is to a container within a pod, this would take on a value like: \"spec.containers{name}\" (where \"name\" refers to the name of the container that triggered the event) or if no container name is specified \"spec.containers[2]\" (container with index 2 in this pod). This syntax is chosen only to have some well-defined way of referencing a part of an object.",
            ),
            wide(
                "Source",
                "The component reporting this event. Should be a short machine understandable string.",
            ),
            s(
                "Message",
                "A human-readable description of the status of this operation.",
            ),
            wide(
                "First Seen",
                "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)",
            ),
            wide("Count", "The number of times this event has occurred."),
            col("Name", "string", "name", 1, NAME_DOC),
        ],
        |o| {
            let first = since(&o["firstTimestamp"]).or_else(|| since(&o["eventTime"]));
            let (last, count) = match &o["series"] {
                Value::Null => (
                    since(&o["lastTimestamp"]).or_else(|| first.clone()),
                    o["count"].as_i64().filter(|c| *c != 0).unwrap_or(1),
                ),
                series => (
                    since(&series["lastObservedTime"]),
                    series["count"].as_i64().unwrap_or(0),
                ),
            };
            let unknown = || "<unknown>".to_string();
            let involved = &o["involvedObject"];
            let kind = text(&involved["kind"]).to_lowercase();
            let object = match text(&involved["name"]) {
                "" => kind,
                n => format!("{kind}/{n}"),
            };
            let pick = |a: &Value, b: &Value| or(text(a), text(b));
            let component = pick(&o["source"]["component"], &o["reportingComponent"]);
            let instance = pick(&o["source"]["host"], &o["reportingInstance"]);
            let source = if instance.is_empty() {
                component
            } else {
                format!("{component}, {instance}")
            };
            vec![
                json!(last.unwrap_or_else(unknown)),
                json!(text(&o["type"])),
                json!(text(&o["reason"])),
                json!(object),
                json!(text(&involved["fieldPath"])),
                json!(source),
                json!(text(&o["message"]).trim()),
                json!(first.unwrap_or_else(unknown)),
                json!(count),
                json!(text(&o["metadata"]["name"])),
            ]
        },
    )
}

pub(super) fn service_printer() -> Printer {
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

pub(super) fn endpoints_printer() -> Printer {
    (
        vec![
            name_col(),
            col(
                "Endpoints",
                "string",
                "",
                0,
                "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
            ),
            age_col(),
        ],
        |o| {
            let subsets = o["subsets"].as_array().cloned().unwrap_or_default();
            let mut all: Vec<String> = Vec::new();
            for ss in &subsets {
                let ips: Vec<&str> = ss["addresses"]
                    .as_array()
                    .into_iter()
                    .flatten()
                    .map(|a| text(&a["ip"]))
                    .collect();
                match ss["ports"].as_array().filter(|p| !p.is_empty()) {
                    None => all.extend(ips.iter().map(|ip| ip.to_string())),
                    Some(ports) => {
                        for p in ports {
                            let port = p["port"].as_i64().unwrap_or(0);
                            all.extend(ips.iter().map(|ip| {
                                if ip.contains(':') {
                                    format!("[{ip}]:{port}")
                                } else {
                                    format!("{ip}:{port}")
                                }
                            }));
                        }
                    }
                }
            }
            let shown = if subsets.is_empty() {
                "<none>".to_string()
            } else if all.len() > 3 {
                format!("{} + {} more...", all[..3].join(","), all.len() - 3)
            } else {
                all.join(",")
            };
            vec![
                json!(text(&o["metadata"]["name"])),
                json!(shown),
                json!(age(o)),
            ]
        },
    )
}

pub(super) fn service_account_printer() -> Printer {
    (
        vec![
            name_col(),
            col(
                "Secrets",
                "string",
                "",
                0,
                "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
            ),
            age_col(),
        ],
        |o| {
            let secrets = o["secrets"].as_array().map_or(0, |s| s.len());
            vec![
                json!(text(&o["metadata"]["name"])),
                json!(secrets),
                json!(age(o)),
            ]
        },
    )
}
