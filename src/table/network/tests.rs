//! Goldens: kube-apiserver's `TestPrintService` and `TestPrintServiceList`
//! (`pkg/printers/internalversion/printers_test.go`), every case, in JSON.

use std::time::{Duration, SystemTime};

use serde_json::{Value, json};

use super::*;

fn service(o: Value) -> Vec<String> {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    service_row(&serde_json::to_vec(&o).unwrap())
        .expect("a row")
        .texts(now)
}

fn svc(name: &str, kind: &str, spec: Value, status: Value) -> Value {
    let mut spec = spec;
    spec["type"] = json!(kind);
    json!({"metadata": {"name": name}, "spec": spec, "status": status})
}

#[test]
fn should_print_services_as_the_apiservers_tests_do() {
    let tcp = |port: i64| json!([{"protocol": "tcp", "port": port}]);
    let cases = [
        (
            svc(
                "test1",
                "ClusterIP",
                json!({"ports": tcp(2233), "clusterIPs": ["10.9.8.7"], "selector": {"foo": "bar"}}),
                json!({}),
            ),
            [
                "test1",
                "ClusterIP",
                "10.9.8.7",
                "<none>",
                "2233/tcp",
                "<unknown>",
                "foo=bar",
            ],
        ),
        (
            svc(
                "test2",
                "NodePort",
                json!({"ports": [{"protocol": "tcp", "port": 8888, "nodePort": 9999}], "clusterIPs": ["10.9.8.7"]}),
                json!({}),
            ),
            [
                "test2",
                "NodePort",
                "10.9.8.7",
                "<none>",
                "8888:9999/tcp",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "test3",
                "LoadBalancer",
                json!({"ports": tcp(8888), "clusterIPs": ["10.9.8.7"]}),
                json!({}),
            ),
            [
                "test3",
                "LoadBalancer",
                "10.9.8.7",
                "<pending>",
                "8888/tcp",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "test4",
                "LoadBalancer",
                json!({"ports": tcp(8888), "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10"]}),
                json!({}),
            ),
            [
                "test4",
                "LoadBalancer",
                "10.9.8.7",
                "80.11.12.10",
                "8888/tcp",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "test5",
                "LoadBalancer",
                json!({"ports": tcp(8888), "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10"]}),
                json!({"loadBalancer": {"ingress": [{"ip": "3.4.5.6", "hostname": "test.cluster.com"}]}}),
            ),
            [
                "test5",
                "LoadBalancer",
                "10.9.8.7",
                "3.4.5.6,80.11.12.10",
                "8888/tcp",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "test6",
                "LoadBalancer",
                json!({"ports": tcp(8888), "clusterIPs": ["10.9.8.7"], "externalIPs": ["80.11.12.10", "80.11.12.11"]}),
                json!({"loadBalancer": {"ingress": [
                    {"ip": "2.3.4.5", "hostname": "test.cluster.local"},
                    {"ip": "3.4.5.6", "hostname": "test.cluster.com"}]}}),
            ),
            [
                "test6",
                "LoadBalancer",
                "10.9.8.7",
                "2.3.4.5,3.4.5.6,80.11.12.10,80.11.12.11",
                "8888/tcp",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "test7",
                "ExternalName",
                json!({"externalName": "my.database.example.com"}),
                json!({}),
            ),
            [
                "test7",
                "ExternalName",
                "<none>",
                "my.database.example.com",
                "<none>",
                "<unknown>",
                "<none>",
            ],
        ),
        (
            svc(
                "service2",
                "NodePort",
                json!({"ports": [{"protocol": "udp", "port": 5566}], "clusterIPs": ["1.2.3.4"]}),
                json!({}),
            ),
            [
                "service2",
                "NodePort",
                "1.2.3.4",
                "<none>",
                "5566/udp",
                "<unknown>",
                "<none>",
            ],
        ),
    ];
    for (o, want) in cases {
        assert_eq!(service(o), want);
    }
}

/// A load balancer's hostnames stand in for its IPs, each once, in order.
#[test]
fn should_list_load_balancer_addresses_once_in_order() {
    let o = svc(
        "lb",
        "LoadBalancer",
        json!({"clusterIPs": ["10.0.0.1"]}),
        json!({"loadBalancer": {"ingress": [{"hostname": "b.example.com"}, {"ip": "9.9.9.9"}, {"hostname": "b.example.com"}, {}]}}),
    );
    assert_eq!(service(o)[3], "9.9.9.9,b.example.com");
}

fn endpoints(subsets: Value) -> String {
    let mut o = json!({"metadata": {"name": "ep"}});
    if !subsets.is_null() {
        o["subsets"] = subsets;
    }
    let row = endpoints_row(&serde_json::to_vec(&o).unwrap()).unwrap();
    row.texts(SystemTime::UNIX_EPOCH)[1].clone()
}

/// `formatEndpoints` (printers.go; printers_test.go has no test of it):
/// none, a headless subset, ports by addresses, the first three then how
/// many more, IPv6 as `net.JoinHostPort` writes it.
#[test]
fn should_print_endpoints_as_format_endpoints_does() {
    assert_eq!(endpoints(json!(null)), "<none>");
    assert_eq!(endpoints(json!([])), "<none>");
    assert_eq!(
        endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}]}])),
        "10.0.0.1,10.0.0.2"
    );
    assert_eq!(
        endpoints(json!([{"addresses": [{"ip": "10.0.0.1"}],
                          "ports": [{"port": 80}, {"port": 443}]}])),
        "10.0.0.1:80,10.0.0.1:443"
    );
    assert_eq!(
        endpoints(json!([
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "10.0.1.1"}], "ports": [{"port": 8080}]}])),
        "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
    );
    assert_eq!(
        endpoints(json!([{"addresses": [{"ip": "fd00::1"}], "ports": [{"port": 6443}]}])),
        "[fd00::1]:6443"
    );
    assert_eq!(
        endpoints(json!([{"notReadyAddresses": [{"ip": "10.0.0.9"}], "ports": [{"port": 80}]}])),
        "",
        "not-ready addresses are not printed"
    );
}

/// `printNetworkPolicy` (printers.go): `FormatLabelSelector` of the pod
/// selector, `<none>` for the empty one that selects every pod.
#[test]
fn should_print_network_policies_pod_selector() {
    let row = |o: Value| {
        network_policy_row(&serde_json::to_vec(&o).unwrap())
            .unwrap()
            .texts(SystemTime::UNIX_EPOCH)
    };
    let deny = json!({"metadata": {"name": "default-deny"}, "spec": {"podSelector": {}, "policyTypes": ["Ingress"]}});
    assert_eq!(row(deny)[..2], ["default-deny", "<none>"]);
    let web = json!({"metadata": {"name": "web"}, "spec": {"podSelector": {"matchLabels": {"app": "web"},
        "matchExpressions": [{"key": "tier", "operator": "In", "values": ["b", "a"]}]}}});
    assert_eq!(row(web)[1], "app=web,tier in (a,b)");
}

fn ingress(o: Value) -> Vec<String> {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    ingress_row(&serde_json::to_vec(&o).unwrap())
        .unwrap()
        .texts(now)
}

/// `TestPrintIngress` (printers_test.go), and `formatHosts` and
/// `formatPorts` (printers.go) for the rest.
#[test]
fn should_print_ingresses_as_the_apiservers_tests_do() {
    let now = SystemTime::UNIX_EPOCH + Duration::from_secs(1_795_824_000);
    let ten_years =
        humantime::format_rfc3339(now - Duration::from_secs(10 * 365 * 86_400)).to_string();
    let test1 = json!({"metadata": {"name": "test1", "creationTimestamp": ten_years},
        "spec": {"ingressClassName": "foo",
                 "defaultBackend": {"service": {"name": "default-backend", "port": {"name": "default-backend", "number": 80}}}},
        "status": {"loadBalancer": {"ingress": [{"ip": "2.3.4.5", "hostname": "localhost.localdomain"}]}}});
    assert_eq!(
        ingress(test1),
        ["test1", "foo", "*", "2.3.4.5", "80", "10y"]
    );
    let rules = |hosts: &[&str]| -> Value { hosts.iter().map(|h| json!({"host": h})).collect() };
    let many = json!({"metadata": {"name": "many"},
        "spec": {"rules": rules(&["a.example", "", "b.example", "c.example", "d.example"]), "tls": [{"hosts": ["a.example"]}]},
        "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}, {"ip": "10.0.0.9"}, {"ip": "10.0.0.9"}]}}});
    assert_eq!(
        ingress(many),
        [
            "many",
            "<none>",
            "a.example,b.example,c.example + 2 more...",
            "10.0.0.9,lb.example",
            "80, 443",
            "<unknown>"
        ]
    );
    let three = json!({"metadata": {"name": "three"}, "spec": {"rules": rules(&["a", "b", "c"])}});
    assert_eq!(ingress(three)[2], "a,b,c");
}

/// `formatDiscoveryPorts`, `formatDiscoveryEndpoints` and
/// `listWithMoreString` (printers.go; printers_test.go has no test).
#[test]
fn should_print_endpoint_slices_as_print_endpoint_slice_does() {
    let row = |o: Value| {
        endpoint_slice_row(&serde_json::to_vec(&o).unwrap())
            .unwrap()
            .texts(SystemTime::UNIX_EPOCH)
    };
    let o = json!({"metadata": {"name": "kubernetes"}, "addressType": "IPv4",
        "ports": [{"name": "https", "port": 6443, "protocol": "TCP"}, {"name": "metrics"}, {}, {"port": 1}],
        "endpoints": [{"addresses": ["10.0.0.1", "10.0.0.2"]}, {"addresses": ["10.0.0.3"]}]});
    assert_eq!(
        row(o),
        [
            "kubernetes",
            "IPv4",
            "6443,metrics,* + 1 more...",
            "10.0.0.1,10.0.0.2,10.0.0.3",
            "<unknown>"
        ]
    );
    let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6"});
    assert_eq!(row(empty), ["e", "IPv6", "<unset>", "<unset>", "<unknown>"]);
}
