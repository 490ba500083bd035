//! Printers of the networking kinds: services, endpoints, endpoint slices,
//! ingresses and network policies, as kube-apiserver's `printService`,
//! `printEndpoints`, `printEndpointSlice`, `printIngress` and
//! `printNetworkPolicy` print them (`pkg/printers/internalversion/
//! printers.go`; column texts from Kubernetes 1.36's `ServiceSpec`,
//! `Endpoints`, `discovery/v1beta1` `EndpointSlice` and `extensions/v1beta1`
//! `NetworkPolicySpec` documentation, and the printers' own).

use std::borrow::Cow;
use std::collections::BTreeSet;

use serde::Deserialize;

use super::cell::{Cell, Column, Meta, Row, Text};
use super::labels::{Labels, Selector, format_label_selector, format_labels};

/// `serviceColumnDefinitions`.
pub static SERVICE_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Type",
        "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer. \"ClusterIP\" allocates a cluster-internal IP address for load-balancing to endpoints. Endpoints are determined by the selector or if that is not specified, by manual construction of an Endpoints object or EndpointSlice objects. If clusterIP is \"None\", no virtual IP is allocated and the endpoints are published as a set of endpoints rather than a virtual IP. \"NodePort\" builds on ClusterIP and allocates a port on every node which routes to the same endpoints as the clusterIP. \"LoadBalancer\" builds on NodePort and creates an external load-balancer (if supported in the current cloud) which routes to the same endpoints as the clusterIP. \"ExternalName\" aliases this service to the specified externalName. Several other fields do not apply to ExternalName services. More info: https://kubernetes.io/docs/concepts/services-networking/service/#publishing-services-service-types",
    ),
    Column::text(
        "Cluster-IP",
        "clusterIP is the IP address of the service and is usually assigned randomly. If an address is specified manually, is in-range (as per system configuration), and is not in use, it will be allocated to the service; otherwise creation of the service will fail. This field may not be changed through updates unless the type field is also being changed to ExternalName (which requires this field to be blank) or the type field is being changed from ExternalName (in which case this field may optionally be specified, as describe above).  Valid values are \"None\", empty string (\"\"), or a valid IP address. Setting this to \"None\" makes a \"headless service\" (no virtual IP), which is useful when direct endpoint connections are preferred and proxying is not required.  Only applies to types ClusterIP, NodePort, and LoadBalancer. If this field is specified when creating a Service of type ExternalName, creation will fail. This field will be wiped when updating a Service to type ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    Column::text(
        "External-IP",
        "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.  These IPs are not managed by Kubernetes.  The user is responsible for ensuring that traffic arrives at a node with this IP.  A common example is external load-balancers that are not part of the Kubernetes system.",
    ),
    Column::text(
        "Port(s)",
        "The list of ports that are exposed by this service. More info: https://kubernetes.io/docs/concepts/services-networking/service/#virtual-ips-and-service-proxies",
    ),
    Column::age(),
    Column::wide(
        "Selector",
        "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify. Only applies to types ClusterIP, NodePort, and LoadBalancer. Ignored if type is ExternalName. More info: https://kubernetes.io/docs/concepts/services-networking/service/",
    ),
];

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Spec<'a> {
    #[serde(rename = "type", borrow)]
    kind: Cow<'a, str>,
    #[serde(rename = "clusterIPs", borrow)]
    cluster_ips: Vec<Cow<'a, str>>,
    #[serde(rename = "externalIPs", borrow)]
    external_ips: Vec<Cow<'a, str>>,
    #[serde(borrow)]
    external_name: Cow<'a, str>,
    ports: Vec<Port<'a>>,
    #[serde(borrow)]
    selector: Labels<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Port<'a> {
    port: i64,
    node_port: i64,
    #[serde(borrow)]
    protocol: Cow<'a, str>,
}

#[derive(Deserialize, Default)]
#[serde(default, rename_all = "camelCase")]
struct Status<'a> {
    #[serde(borrow)]
    load_balancer: LoadBalancer<'a>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct LoadBalancer<'a> {
    #[serde(borrow)]
    ingress: Vec<Ingress<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Ingress<'a> {
    #[serde(borrow)]
    ip: Cow<'a, str>,
    #[serde(borrow)]
    hostname: Cow<'a, str>,
}

/// `loadBalancerStatusStringer`, wide (the apiserver prints every column):
/// each ingress's IP, else its hostname, once each, in order, comma-joined.
fn load_balancer(lb: &LoadBalancer) -> String {
    let set: BTreeSet<&str> = lb
        .ingress
        .iter()
        .filter_map(|i| match (&*i.ip, &*i.hostname) {
            ("", "") => None,
            ("", h) => Some(h),
            (ip, _) => Some(ip),
        })
        .collect();
    set.into_iter().collect::<Vec<_>>().join(",")
}

/// `getServiceExternalIP`.
fn external_ip(spec: &Spec, status: &Status) -> String {
    let external = spec.external_ips.join(",");
    match &*spec.kind {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".into(),
        "ClusterIP" | "NodePort" => external,
        "LoadBalancer" => {
            let lb = load_balancer(&status.load_balancer);
            match (lb.is_empty(), external.is_empty()) {
                (true, true) => "<pending>".into(),
                (false, true) => lb,
                (true, false) => external,
                (false, false) => format!("{lb},{external}"),
            }
        }
        "ExternalName" => spec.external_name.to_string(),
        _ => "<unknown>".into(),
    }
}

/// `makePortString`: `port/protocol`, or `port:nodePort/protocol`.
fn ports(ports: &[Port]) -> String {
    let pieces: Vec<String> = ports
        .iter()
        .map(|p| match p.node_port {
            n if n > 0 => format!("{}:{n}/{}", p.port, p.protocol),
            _ => format!("{}/{}", p.port, p.protocol),
        })
        .collect();
    pieces.join(",")
}

/// A service's row: type, first cluster IP, external IPs, ports; wide: its
/// selector.
pub fn service_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Service<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: Spec<'a>,
        #[serde(borrow)]
        status: Status<'a>,
    }
    let o: Service = serde_json::from_slice(body).ok()?;
    let cluster_ip = o.spec.cluster_ips.first().map_or("<none>", |ip| &**ip);
    let ports = match ports(&o.spec.ports) {
        p if p.is_empty() => "<none>".to_string(),
        p => p,
    };
    let text = |s: &str| Cell::Text(Text::from(s));
    Some(Row {
        cells: vec![
            o.metadata.name(),
            text(&o.spec.kind),
            text(cluster_ip),
            text(&external_ip(&o.spec, &o.status)),
            text(&ports),
            o.metadata.age(),
            text(&format_labels(&o.spec.selector)),
        ],
        condition: None,
    })
}

/// `endpointColumnDefinitions`.
pub static ENDPOINTS_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Endpoints",
        "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share. A single address with multiple ports, some of which are ready and some of which are not (because they come from different containers) will result in the address being displayed in different subsets for the different ports. No address will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses and ports that comprise a service.",
    ),
    Column::age(),
];

#[derive(Deserialize, Default)]
#[serde(default)]
struct Subset<'a> {
    #[serde(borrow)]
    addresses: Vec<Address<'a>>,
    ports: Vec<Port<'a>>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct Address<'a> {
    #[serde(borrow)]
    ip: Cow<'a, str>,
}

/// `formatEndpoints` with every port: the first three `ip:port` (an
/// address alone for a subset without ports; IPv6 in brackets, as
/// `net.JoinHostPort`), then `+ N more...`; `<none>` without subsets.
fn endpoints(subsets: &[Subset]) -> String {
    const MAX: usize = 3;
    if subsets.is_empty() {
        return "<none>".into();
    }
    let (mut list, mut count) = (Vec::with_capacity(MAX), 0);
    for ss in subsets {
        let ports: Vec<Option<i64>> = match ss.ports.len() {
            0 => vec![None],
            _ => ss.ports.iter().map(|p| Some(p.port)).collect(),
        };
        for port in ports {
            count += ss.addresses.len();
            for a in ss.addresses.iter().take(MAX - list.len()) {
                list.push(match (port, a.ip.contains(':')) {
                    (None, _) => a.ip.to_string(),
                    (Some(p), true) => format!("[{}]:{p}", a.ip),
                    (Some(p), false) => format!("{}:{p}", a.ip),
                });
            }
        }
    }
    let shown = list.join(",");
    match count > list.len() {
        true => format!("{shown} + {} more...", count - MAX),
        false => shown,
    }
}

/// An endpoints object's row: its first addresses and ports.
pub fn endpoints_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Endpoints<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        subsets: Vec<Subset<'a>>,
    }
    let o: Endpoints = serde_json::from_slice(body).ok()?;
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(endpoints(&o.subsets))),
            o.metadata.age(),
        ],
        condition: None,
    })
}

/// `networkPolicyColumnDefinitioins` (sic).
pub static NETWORK_POLICY_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Pod-Selector",
        "Selects the pods to which this NetworkPolicy object applies.  The array of ingress rules is applied to any pods selected by this field. Multiple network policies can select the same set of pods.  In this case, the ingress rules for each are combined additively. This field is NOT optional and follows standard label selector semantics. An empty podSelector matches all pods in this namespace.",
    ),
    Column::age(),
];

/// A network policy's row: the pods it selects (`<none>`: all of them).
pub fn network_policy_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Policy<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: PolicySpec<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct PolicySpec<'a> {
        #[serde(borrow)]
        pod_selector: Selector<'a>,
    }
    let o: Policy = serde_json::from_slice(body).ok()?;
    let selector = format_label_selector(Some(&o.spec.pod_selector));
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(selector)),
            o.metadata.age(),
        ],
        condition: None,
    })
}

/// `endpointSliceColumnDefinitions`.
pub static ENDPOINT_SLICE_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "AddressType",
        "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type. This field is immutable after creation. The following address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
    ),
    Column::text(
        "Ports",
        "ports specifies the list of network ports exposed by each endpoint in this slice. Each port must have a unique name. When ports is empty, it indicates that there are no defined ports. When a port is defined with a nil port value, it indicates \"all ports\". Each slice may include a maximum of 100 ports.",
    ),
    Column::text(
        "Endpoints",
        "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of 1000 endpoints.",
    ),
    Column::age(),
];

/// `listWithMoreString`: the first three, then `+ N more...`; `<unset>`
/// for none.
fn with_more(all: Vec<String>) -> String {
    const MAX: usize = 3;
    match all.len() {
        0 => "<unset>".into(),
        n if n > MAX => format!("{} + {} more...", all[..MAX].join(","), n - MAX),
        _ => all.join(","),
    }
}

/// An endpoint slice's row: its address type, ports (a number, else the
/// port's name, else `*`), its endpoints' addresses.
pub fn endpoint_slice_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Slice<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        address_type: Cow<'a, str>,
        #[serde(borrow)]
        ports: Vec<SlicePort<'a>>,
        #[serde(borrow)]
        endpoints: Vec<Endpoint<'a>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct SlicePort<'a> {
        port: Option<i64>,
        #[serde(borrow)]
        name: Option<Cow<'a, str>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Endpoint<'a> {
        #[serde(borrow)]
        addresses: Vec<Cow<'a, str>>,
    }
    let o: Slice = serde_json::from_slice(body).ok()?;
    let ports = o
        .ports
        .iter()
        .map(|p| match (p.port, &p.name) {
            (Some(n), _) => n.to_string(),
            (None, Some(name)) => name.to_string(),
            (None, None) => "*".into(),
        })
        .collect();
    let addresses = o
        .endpoints
        .iter()
        .flat_map(|e| e.addresses.iter().map(|a| a.to_string()))
        .collect();
    Some(Row {
        cells: vec![
            o.metadata.name(),
            Cell::Text(Text::from(&*o.address_type)),
            Cell::Text(Text::from(with_more(ports))),
            Cell::Text(Text::from(with_more(addresses))),
            o.metadata.age(),
        ],
        condition: None,
    })
}

/// `ingressColumnDefinitions`.
pub static INGRESS_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Class",
        "The name of the IngressClass resource that should be used for additional configuration",
    ),
    Column::text(
        "Hosts",
        "Hosts that incoming requests are matched against before the ingress rule",
    ),
    Column::text(
        "Address",
        "Address is a list containing ingress points for the load-balancer",
    ),
    Column::text("Ports", "Ports of TLS configurations that open"),
    Column::age(),
];

/// An ingress's row: its class, first three hosts (`*` for none), the
/// load balancer's addresses, `80` or `80, 443` with TLS.
pub fn ingress_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Ingress<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        spec: IngressSpec<'a>,
        #[serde(borrow)]
        status: Status<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct IngressSpec<'a> {
        #[serde(borrow)]
        ingress_class_name: Option<Cow<'a, str>>,
        #[serde(borrow)]
        rules: Vec<Rule<'a>>,
        tls: Vec<serde::de::IgnoredAny>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Rule<'a> {
        #[serde(borrow)]
        host: Cow<'a, str>,
    }
    let o: Ingress = serde_json::from_slice(body).ok()?;
    // `formatHosts`: hosts of the rules before the fourth, then how many
    // rules follow the third.
    const MAX: usize = 3;
    let mut hosts: Vec<&str> = Vec::with_capacity(MAX);
    let mut more = false;
    for r in &o.spec.rules {
        if hosts.len() == MAX {
            more = true;
        }
        if !more && !r.host.is_empty() {
            hosts.push(&r.host);
        }
    }
    let hosts = match (hosts.is_empty(), more) {
        (true, _) => "*".to_string(),
        (false, true) => format!("{} + {} more...", hosts.join(","), o.spec.rules.len() - MAX),
        (false, false) => hosts.join(","),
    };
    let ports = if o.spec.tls.is_empty() {
        "80"
    } else {
        "80, 443"
    };
    let text = |s: &str| Cell::Text(Text::from(s));
    Some(Row {
        cells: vec![
            o.metadata.name(),
            text(o.spec.ingress_class_name.as_deref().unwrap_or("<none>")),
            text(&hosts),
            text(&load_balancer(&o.status.load_balancer)),
            text(ports),
            o.metadata.age(),
        ],
        condition: None,
    })
}

#[cfg(test)]
mod tests;
