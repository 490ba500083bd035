//! deploy/control-plane, the node-client tier (r8s on the control-plane
//! nodes' own network, reached through the control-plane endpoint), and
//! deploy/node-local (r8s on every node's loopback, reading as the node).
//! Their manifests render, their configuration is what r8s accepts, and
//! nothing a node client needs (its kubeconfig, r8s's path to the
//! apiserver, the docs that tell how) names a cluster DNS name or a
//! ClusterIP.

use std::path::Path;
use std::process::Command;

use crate::common::*;
use crate::deploy::{container, find, pod_spec, port_of, scratch};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn read(rel: &str) -> String {
    std::fs::read_to_string(Path::new(ROOT).join(rel)).unwrap_or_else(|e| panic!("{rel}: {e}"))
}

fn kustomize(rel: &str) -> Vec<Value> {
    let out = Command::new("kubectl")
        .arg("kustomize")
        .arg(Path::new(ROOT).join(rel))
        .output()
        .expect("kubectl is on the PATH");
    assert!(
        out.status.success(),
        "kubectl kustomize {rel}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    decode_yaml(&String::from_utf8(out.stdout).unwrap())
}

/// The configuration r8s runs with from `toml_text` and the container's
/// `env` (its `$(VAR)` references expanded as the kubelet does, from
/// `values`), as `r8s config check` prints it.
fn config_with_env(toml_text: &str, env: &[(String, String)]) -> toml::Value {
    let file = scratch("r8s.toml", toml_text);
    let out = Command::new(BIN)
        .args(["config", "check", "--config"])
        .arg(&file)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "r8s refuses the node-client tier's configuration: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// What in `text` would make a node client depend on the cluster's own
/// network: a Service's DNS name, the apiserver's Service, a ClusterIP in
/// the default range, the in-cluster variables. Each as (line, what).
fn cluster_network_names(text: &str) -> Vec<(usize, &'static str)> {
    const NAMES: [&str; 6] = [
        ".svc",
        "cluster.local",
        "kubernetes.default",
        "KUBERNETES_SERVICE_HOST",
        "10.96.",
        "clusterIP",
    ];
    text.lines()
        .enumerate()
        .flat_map(|(i, l)| {
            NAMES
                .iter()
                .filter(move |n| l.contains(**n))
                .map(move |n| (i + 1, *n))
        })
        .collect()
}

/// docs/operating.md's section on node clients.
fn node_clients_section() -> String {
    let doc = read("docs/operating.md");
    let start = doc
        .find("## Node clients")
        .expect("docs/operating.md has a section on node clients");
    let rest = &doc[start..];
    let end = rest[3..].find("\n## ").map_or(rest.len(), |e| e + 3);
    rest[..end].to_string()
}

#[test]
fn should_name_no_cluster_dns_name_or_cluster_ip_for_node_clients() {
    // The detector finds what it looks for: the shared tier's client
    // kubeconfig names its Service.
    assert!(!cluster_network_names(&read("deploy/kubernetes/client-kubeconfig.yaml")).is_empty());
    let mut found = Vec::new();
    let mut files = vec![(
        "docs/operating.md, Node clients".to_string(),
        node_clients_section(),
    )];
    for e in std::fs::read_dir(Path::new(ROOT).join("deploy/control-plane")).unwrap() {
        let path = e.unwrap().path();
        let rel = format!(
            "deploy/control-plane/{}",
            path.file_name().unwrap().to_string_lossy()
        );
        files.push((rel.clone(), read(&rel)));
    }
    assert!(
        files.len() >= 6,
        "{:?}",
        files.iter().map(|f| &f.0).collect::<Vec<_>>()
    );
    for (name, text) in &files {
        for (line, what) in cluster_network_names(text) {
            found.push(format!("{name}:{line}: {what}"));
        }
    }
    assert!(
        found.is_empty(),
        "node clients' paths name the cluster's network: {found:#?}"
    );
}

#[test]
fn should_render_the_node_client_tier_on_the_control_planes_own_network() {
    let objs = kustomize("deploy/control-plane");
    let ds = find(&objs, "DaemonSet", "r8s-node-tier");
    let spec = pod_spec(ds);
    assert_eq!(spec["hostNetwork"], true);
    assert!(
        spec["nodeSelector"]
            .as_object()
            .unwrap()
            .contains_key("node-role.kubernetes.io/control-plane")
    );
    assert!(
        spec["tolerations"]
            .as_array()
            .unwrap()
            .iter()
            .any(|t| t["key"] == "node-role.kubernetes.io/control-plane")
    );
    let r8s = container(ds, "r8s");

    // Its environment as the kubelet expands it, on a node at 192.0.2.10.
    let host_ip = "192.0.2.10";
    let mut env: Vec<(String, String)> = Vec::new();
    for e in r8s["env"].as_array().unwrap() {
        let name = e["name"].as_str().unwrap().to_string();
        let value = match e["valueFrom"]["fieldRef"]["fieldPath"].as_str() {
            Some("status.hostIP") => host_ip.to_string(),
            Some(other) => panic!("{name} from {other}"),
            None => e["value"].as_str().unwrap().replace("$(HOST_IP)", host_ip),
        };
        env.push((name, value));
    }
    let cm = objs
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("r8s-node-tier-config")
        })
        .expect("the configuration's ConfigMap");
    let config = config_with_env(cm["data"]["r8s.toml"].as_str().unwrap(), &env);
    // The apiserver on this node, by its address; credentials as files.
    assert_eq!(
        config["upstream"]["servers"].as_array().unwrap(),
        &[toml::Value::String(format!("https://{host_ip}:6443"))]
    );
    for key in ["token_file", "ca_file"] {
        let file = config["upstream"][key].as_str().unwrap();
        assert!(
            file.starts_with("/var/run/secrets/kubernetes.io/serviceaccount/"),
            "{file}"
        );
    }
    // Served on its port, probed on loopback.
    let listen = port_of(config["listen"].as_str().unwrap());
    assert_eq!(listen, 6444);
    assert_eq!(r8s["ports"][0]["containerPort"].as_u64(), Some(listen));
    let admin = config["admin_listen"].as_str().unwrap();
    assert!(admin.starts_with("127.0.0.1:"), "{admin}");
    for probe in ["readinessProbe", "livenessProbe"] {
        let get = &r8s[probe]["httpGet"];
        assert_eq!(get["host"], "127.0.0.1");
        assert_eq!(get["port"].as_u64(), Some(port_of(admin)));
    }
    // Every file it names is mounted from the node.
    let mounted = |file: &str| {
        r8s["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .any(|m| file.starts_with(m["mountPath"].as_str().unwrap()))
    };
    for file in [
        config["tls"]["cert_file"].as_str().unwrap(),
        config["tls"]["key_file"].as_str().unwrap(),
        config["tls"]["client_ca_file"].as_str().unwrap(),
        config["persist"]["dir"].as_str().unwrap(),
    ] {
        assert!(mounted(file), "{file} is not mounted");
    }
    // Its identity lists and watches what it caches, and may impersonate.
    let role = find(&objs, "ClusterRole", "r8s-node-tier");
    let allows = |group: &str, resource: &str, verb: &str| {
        role["rules"].as_array().unwrap().iter().any(|r| {
            let has = |k: &str, v: &str| r[k].as_array().is_some_and(|a| a.iter().any(|x| x == v));
            has("apiGroups", group) && has("resources", resource) && has("verbs", verb)
        })
    };
    for entry in config["cache"]["resources"].as_array().unwrap() {
        let entry: r8s::config::ResourceEntry = entry.as_str().unwrap().parse().unwrap();
        let group = entry.group().unwrap_or("");
        let resource = entry.resource().unwrap();
        for verb in ["list", "watch"] {
            assert!(allows(group, resource, verb), "{verb} {entry}");
        }
    }
    for resource in ["users", "groups", "serviceaccounts"] {
        assert!(
            allows("", resource, "impersonate"),
            "impersonate {resource}"
        );
    }
    let binding = find(&objs, "ClusterRoleBinding", "r8s-node-tier");
    assert_eq!(binding["roleRef"]["name"], "r8s-node-tier");
    assert!(
        binding["subjects"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| { s["kind"] == "ServiceAccount" && s["name"] == spec["serviceAccountName"] })
    );

    // The static pod: the same configuration file, on the host's network.
    let pod = &decode_yaml(&read("deploy/control-plane/static-pod.yaml"))[0];
    assert_eq!(pod["spec"]["hostNetwork"], true);
    let c = &pod["spec"]["containers"][0];
    let args: Vec<&str> = c["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert!(
        args.windows(2)
            .any(|w| w == ["--config", "/etc/r8s/r8s.toml"]),
        "{args:?}"
    );
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"].as_u64(), Some(port_of(admin)));
    }

    // A node's kubeconfig: the control-plane endpoint, the tier's port.
    let kc = &decode_yaml(&read("deploy/control-plane/node-kubeconfig.yaml"))[0];
    let server = kc["clusters"][0]["cluster"]["server"].as_str().unwrap();
    assert!(server.ends_with(&format!(":{listen}")), "{server}");
}

#[test]
fn should_render_node_local_r8s_on_loopback_reading_as_the_node() {
    let objs = kustomize("deploy/node-local");
    let ds = find(&objs, "DaemonSet", "r8s-node-local");
    let spec = pod_spec(ds);
    assert_eq!(spec["hostNetwork"], true);
    assert_eq!(
        spec["automountServiceAccountToken"], false,
        "it reads as the node"
    );
    let r8s = container(ds, "r8s");
    let env = &r8s["env"][0];
    assert_eq!(env["name"], "R8S_NODE__NAME");
    assert_eq!(env["valueFrom"]["fieldRef"]["fieldPath"], "spec.nodeName");
    let cm = objs
        .iter()
        .find(|o| {
            o["kind"] == "ConfigMap"
                && o["metadata"]["name"]
                    .as_str()
                    .unwrap()
                    .starts_with("r8s-node-local-config")
        })
        .expect("the configuration's ConfigMap");
    let toml_text = cm["data"]["r8s.toml"].as_str().unwrap();
    assert_eq!(
        toml_text,
        read("deploy/node-local/r8s.toml"),
        "the static pod's is the same file"
    );
    let node = [("R8S_NODE__NAME".to_string(), "worker-1".to_string())];
    let config = config_with_env(toml_text, &node);
    assert_eq!(config["node"]["name"].as_str(), Some("worker-1"));
    // Loopback only, probed there; a certificate of its own, kept on the node.
    let listen = config["listen"].as_str().unwrap();
    let admin = config["admin_listen"].as_str().unwrap();
    assert!(listen.starts_with("127.0.0.1:") && admin.starts_with("127.0.0.1:"));
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(r8s[probe]["httpGet"]["port"].as_u64(), Some(port_of(admin)));
    }
    assert_eq!(config["tls"]["self_signed"].as_bool(), Some(true));
    assert_eq!(
        config["auth"]["impersonate_certificate_clients"].as_bool(),
        Some(false)
    );
    let host_path = |file: &str| {
        let m = r8s["volumeMounts"]
            .as_array()
            .unwrap()
            .iter()
            .find(|m| file.starts_with(m["mountPath"].as_str().unwrap()))
            .unwrap_or_else(|| panic!("{file} is not mounted"));
        spec["volumes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["name"] == m["name"])
            .and_then(|v| v["hostPath"]["path"].as_str())
            .unwrap_or_else(|| panic!("{file} is not on the node's disk"))
            .to_string()
    };
    for file in [
        config["tls"]["cert_file"].as_str().unwrap(),
        config["tls"]["key_file"].as_str().unwrap(),
        config["tls"]["client_ca_file"].as_str().unwrap(),
        config["upstream"]["kubeconfig"].as_str().unwrap(),
        config["upstream"]["ca_file"].as_str().unwrap(),
        config["persist"]["dir"].as_str().unwrap(),
        "/var/lib/kubelet/pki/kubelet-client-current.pem",
    ] {
        host_path(file);
    }
    // Upstream: the tier, then the apiserver, by the control-plane endpoint.
    let servers: Vec<&str> = config["upstream"]["servers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap())
        .collect();
    assert_eq!(servers.len(), 2);
    assert!(
        servers[0].ends_with(":6444") && servers[1].ends_with(":6443"),
        "{servers:?}"
    );

    // The static pod: the same file, the kubelet's shape.
    let pod = &decode_yaml(&read("deploy/node-local/static-pod.yaml"))[0];
    assert_eq!(pod["spec"]["hostNetwork"], true);
    let c = &pod["spec"]["containers"][0];
    assert_eq!(c["env"][0]["name"], "R8S_NODE__NAME");
    for probe in ["readinessProbe", "livenessProbe"] {
        assert_eq!(c[probe]["httpGet"]["port"].as_u64(), Some(port_of(admin)));
    }

    // A node client's kubeconfig: loopback, r8s's own certificate as its CA.
    let kc = &decode_yaml(&read("deploy/node-local/node-kubeconfig.yaml"))[0];
    let cluster = &kc["clusters"][0]["cluster"];
    assert_eq!(
        cluster["server"].as_str(),
        Some(format!("https://{listen}").as_str())
    );
    assert_eq!(
        cluster["certificate-authority"].as_str(),
        config["tls"]["cert_file"].as_str()
    );
}
