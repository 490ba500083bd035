//! The sim's printers of persistent volumes and claims, disruption budgets,
//! autoscalers, ingresses and endpoint slices: its own reading of
//! kube-apiserver's `printPersistentVolume`, `printPersistentVolumeClaim`,
//! `printPodDisruptionBudget`, `printHorizontalPodAutoscaler`,
//! `printIngress` and `printEndpointSlice`.

use serde_json::{Value, json};

use super::cells::*;

fn s(name: &str, doc: &str) -> Value {
    col(name, "string", "", 0, doc)
}

fn name(o: &Value) -> Value {
    json!(text(&o["metadata"]["name"]))
}

/// Access modes as kubectl abbreviates them, in kube's order.
fn modes(v: &Value) -> String {
    let have: Vec<&str> = v.as_array().into_iter().flatten().map(text).collect();
    [
        ("ReadWriteOnce", "RWO"),
        ("ReadOnlyMany", "ROX"),
        ("ReadWriteMany", "RWX"),
        ("ReadWriteOncePod", "RWOP"),
    ]
    .iter()
    .filter(|(m, _)| have.contains(m))
    .map(|(_, a)| *a)
    .collect::<Vec<_>>()
    .join(",")
}

/// The class: the beta annotation, else the spec's.
fn class(o: &Value) -> String {
    let beta = &o["metadata"]["annotations"]["volume.beta.kubernetes.io/storage-class"];
    match beta.as_str() {
        Some(c) => c.to_string(),
        None => text(&o["spec"]["storageClassName"]).to_string(),
    }
}

fn phase(o: &Value) -> String {
    if o["metadata"]["deletionTimestamp"].is_null() {
        text(&o["status"]["phase"]).to_string()
    } else {
        "Terminating".into()
    }
}

fn unset(v: &Value) -> String {
    v.as_str().unwrap_or("<unset>").to_string()
}

fn storage(v: &Value) -> String {
    v["storage"].as_str().unwrap_or("0").to_string()
}

const VAC: &str = "VolumeAttributesClass";

pub(super) fn persistent_volume_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Capacity",
                "capacity is the description of the persistent volume's resources and capacity. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#capacity",
            ),
            s(
                "Access Modes",
                "accessModes contains all ways the volume can be mounted. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes",
            ),
            s(
                "Reclaim Policy",
                "persistentVolumeReclaimPolicy defines what happens to a persistent volume when released from its claim. Valid options are Retain (default for manually created PersistentVolumes), Delete (default for dynamically provisioned PersistentVolumes), and Recycle (deprecated). Recycle must be supported by the volume plugin underlying this PersistentVolume. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#reclaiming",
            ),
            s(
                "Status",
                "phase indicates if a volume is available, bound to a claim, or released by a claim. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#phase",
            ),
            s(
                "Claim",
                "claimRef is part of a bi-directional binding between PersistentVolume and PersistentVolumeClaim. Expected to be non-nil when bound. claim.VolumeName is the authoritative bind between PV and PVC. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#binding",
            ),
            s("StorageClass", "StorageClass of the pv"),
            s(VAC, "VolumeAttributesClass of the pv"),
            s(
                "Reason",
                "reason is a brief CamelCase string that describes any failure and is meant for machine parsing and tidy display in the CLI.",
            ),
            age_col(),
            col(
                "VolumeMode",
                "string",
                "",
                1,
                "volumeMode defines if a volume is intended to be used with a formatted filesystem or to remain in raw block state. Value of Filesystem is implied when not included in spec.",
            ),
        ],
        |o| {
            let spec = &o["spec"];
            let claim = match &spec["claimRef"] {
                Value::Null => String::new(),
                c => format!("{}/{}", text(&c["namespace"]), text(&c["name"])),
            };
            vec![
                name(o),
                json!(storage(&spec["capacity"])),
                json!(modes(&spec["accessModes"])),
                json!(text(&spec["persistentVolumeReclaimPolicy"])),
                json!(phase(o)),
                json!(claim),
                json!(class(o)),
                json!(unset(&spec["volumeAttributesClassName"])),
                json!(text(&o["status"]["reason"])),
                json!(age(o)),
                json!(unset(&spec["volumeMode"])),
            ]
        },
    )
}

pub(super) fn persistent_volume_claim_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Status",
                "phase represents the current phase of PersistentVolumeClaim.",
            ),
            s(
                "Volume",
                "volumeName is the binding reference to the PersistentVolume backing this claim.",
            ),
            s(
                "Capacity",
                "capacity represents the actual resources of the underlying volume.",
            ),
            s(
                "Access Modes",
                "accessModes contains the actual access modes the volume backing the PVC has. More info: https://kubernetes.io/docs/concepts/storage/persistent-volumes#access-modes-1",
            ),
            s("StorageClass", "StorageClass of the pvc"),
            s(VAC, "VolumeAttributesClass of the pvc"),
            age_col(),
            col(
                "VolumeMode",
                "string",
                "",
                1,
                "volumeMode defines what type of volume is required by the claim. Value of Filesystem is implied when not included in claim spec.",
            ),
        ],
        |o| {
            let (spec, st) = (&o["spec"], &o["status"]);
            let volume = text(&spec["volumeName"]);
            let (size, access) = match volume {
                "" => (String::new(), String::new()),
                _ => (storage(&st["capacity"]), modes(&st["accessModes"])),
            };
            vec![
                name(o),
                json!(phase(o)),
                json!(volume),
                json!(size),
                json!(access),
                json!(class(o)),
                json!(unset(&spec["volumeAttributesClassName"])),
                json!(age(o)),
                json!(unset(&spec["volumeMode"])),
            ]
        },
    )
}

pub(super) fn pod_disruption_budget_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Min Available",
                "The minimum number of pods that must be available.",
            ),
            s(
                "Max Unavailable",
                "The maximum number of pods that may be unavailable.",
            ),
            col(
                "Allowed Disruptions",
                "integer",
                "",
                0,
                "Calculated number of pods that may be disrupted at this time.",
            ),
            age_col(),
        ],
        |o| {
            let bound = |v: &Value| match v {
                Value::Null => "N/A".to_string(),
                Value::String(s) => s.clone(),
                n => n.to_string(),
            };
            vec![
                name(o),
                json!(bound(&o["spec"]["minAvailable"])),
                json!(bound(&o["spec"]["maxUnavailable"])),
                json!(o["status"]["disruptionsAllowed"].as_i64().unwrap_or(0)),
                json!(age(o)),
            ]
        },
    )
}

pub(super) fn ingress_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Class",
                "The name of the IngressClass resource that should be used for additional configuration",
            ),
            s(
                "Hosts",
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            s(
                "Address",
                "Address is a list containing ingress points for the load-balancer",
            ),
            s("Ports", "Ports of TLS configurations that open"),
            age_col(),
        ],
        |o| {
            let spec = &o["spec"];
            let rules = spec["rules"].as_array().cloned().unwrap_or_default();
            // Hosts until three are found; a rule after that means more.
            let mut hosts: Vec<&str> = Vec::new();
            let mut more = false;
            for r in &rules {
                more |= hosts.len() == 3;
                if !more && !text(&r["host"]).is_empty() {
                    hosts.push(text(&r["host"]));
                }
            }
            let hosts = match (hosts.is_empty(), more) {
                (true, _) => "*".to_string(),
                (false, true) => format!("{} + {} more...", hosts.join(","), rules.len() - 3),
                (false, false) => hosts.join(","),
            };
            let mut addrs: Vec<&str> = o["status"]["loadBalancer"]["ingress"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|i| match text(&i["ip"]) {
                    "" => text(&i["hostname"]),
                    ip => ip,
                })
                .filter(|a| !a.is_empty())
                .collect();
            addrs.sort();
            addrs.dedup();
            let tls = spec["tls"].as_array().is_some_and(|t| !t.is_empty());
            vec![
                name(o),
                json!(or(text(&spec["ingressClassName"]), "<none>")),
                json!(hosts),
                json!(addrs.join(",")),
                json!(if tls { "80, 443" } else { "80" }),
                json!(age(o)),
            ]
        },
    )
}

pub(super) fn endpoint_slice_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "AddressType",
                "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
            ),
            s(
                "Ports",
                "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
            ),
            s(
                "Endpoints",
                "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
            ),
            age_col(),
        ],
        |o| {
            let more = |all: Vec<String>| match all.len() {
                0 => "<unset>".to_string(),
                n if n > 3 => format!("{} + {} more...", all[..3].join(","), n - 3),
                _ => all.join(","),
            };
            let ports = o["ports"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|p| match (&p["port"], &p["name"]) {
                    (Value::Number(n), _) => n.to_string(),
                    (_, Value::String(s)) => s.clone(),
                    _ => "*".to_string(),
                })
                .collect();
            let addrs = o["endpoints"]
                .as_array()
                .into_iter()
                .flatten()
                .flat_map(|e| e["addresses"].as_array().cloned().unwrap_or_default())
                .map(|a| text(&a).to_string())
                .collect();
            vec![
                name(o),
                json!(text(&o["addressType"])),
                json!(more(ports)),
                json!(more(addrs)),
                json!(age(o)),
            ]
        },
    )
}

/// One metric as `formatHPAMetrics` writes it.
fn hpa_metric(spec: &Value, status: &Value) -> String {
    let field = match text(&spec["type"]) {
        "Resource" => "resource",
        "ContainerResource" => "containerResource",
        "Pods" => "pods",
        "Object" => "object",
        "External" => "external",
        _ => return "<unknown type>".into(),
    };
    let (src, cur) = (&spec[field], &status[field]["current"]);
    let have = !status[field].is_null();
    let target = &src["target"];
    let q = |v: &Value| v.as_str().unwrap_or("<nil>").to_string();
    let unknown = || "<unknown>".to_string();
    match field {
        "resource" | "containerResource" => {
            let name = text(&src["name"]);
            if !target["averageValue"].is_null() {
                let now = if have {
                    q(&cur["averageValue"])
                } else {
                    unknown()
                };
                format!("{name}: {now}/{}", q(&target["averageValue"]))
            } else {
                let pct = |v: &Value| v.as_i64().map(|u| format!("{u}%"));
                let now = pct(&cur["averageUtilization"])
                    .filter(|_| have)
                    .unwrap_or_else(unknown);
                let want = pct(&target["averageUtilization"]).unwrap_or_else(|| "<auto>".into());
                format!("{name}: {now}/{want}")
            }
        }
        "pods" => {
            let now = if have {
                q(&cur["averageValue"])
            } else {
                unknown()
            };
            format!("{now}/{}", q(&target["averageValue"]))
        }
        _ if !target["averageValue"].is_null() => {
            let now = cur["averageValue"]
                .as_str()
                .filter(|_| have)
                .map_or_else(unknown, str::to_string);
            format!("{now}/{} (avg)", q(&target["averageValue"]))
        }
        _ => {
            let now = if have { q(&cur["value"]) } else { unknown() };
            format!("{now}/{}", q(&target["value"]))
        }
    }
}

pub(super) fn hpa_printer() -> Printer {
    (
        vec![
            name_col(),
            s(
                "Reference",
                "scaleTargetRef points to the target resource to scale, and is used to the pods for which metrics should be collected, as well as to actually change the replica count.",
            ),
            s(
                "Targets",
                "metrics contains the specifications for which to use to calculate the desired replica count (the maximum replica count across all metrics will be used).  The desired replica count is calculated multiplying the ratio between the target value and the current value by the current number of pods.  Ergo, metrics used must decrease as the pod count is increased, and vice-versa.  See the individual metric source types for more information about how each type of metric must respond. If not set, the default metric will be set to 80% average CPU utilization.",
            ),
            s(
                "MinPods",
                "minReplicas is the lower limit for the number of replicas to which the autoscaler can scale down.  It defaults to 1 pod.  minReplicas is allowed to be 0 if the alpha feature gate HPAScaleToZero is enabled and at least one Object or External metric is configured.  Scaling is active as long as at least one metric value is available.",
            ),
            s(
                "MaxPods",
                "maxReplicas is the upper limit for the number of replicas to which the autoscaler can scale up. It cannot be less that minReplicas.",
            ),
            s(
                "Replicas",
                "currentReplicas is current number of replicas of pods managed by this autoscaler, as last seen by the autoscaler.",
            ),
            age_col(),
        ],
        |o| {
            let (spec, st) = (&o["spec"], &o["status"]);
            let specs = spec["metrics"].as_array().cloned().unwrap_or_default();
            let statuses = st["currentMetrics"].as_array().cloned().unwrap_or_default();
            let shown: Vec<String> = specs
                .iter()
                .take(2)
                .enumerate()
                .map(|(i, m)| hpa_metric(m, statuses.get(i).unwrap_or(&Value::Null)))
                .collect();
            let targets = match specs.len() {
                0 => "<none>".to_string(),
                n if n > 2 => format!("{} + {} more...", shown.join(", "), n - 2),
                _ => shown.join(", "),
            };
            let r = &spec["scaleTargetRef"];
            let min = spec["minReplicas"]
                .as_i64()
                .map_or("<unset>".to_string(), |n| n.to_string());
            vec![
                name(o),
                json!(format!("{}/{}", text(&r["kind"]), text(&r["name"]))),
                json!(targets),
                json!(min),
                json!(spec["maxReplicas"].as_i64().unwrap_or(0)),
                json!(st["currentReplicas"].as_i64().unwrap_or(0)),
                json!(age(o)),
            ]
        },
    )
}
