//! The two kits as the suite sees them: where the cached resource lives,
//! how a request is sent, and what each is given (objects, and on v1.21 the
//! namespaces and RBAC objects made from the grants).

use std::path::PathBuf;

use serde_json::{Value, json};

use super::cast::{NAMESPACES, SA, rules_json};
use super::{Kit, Server};
use crate::common::kube136::{Identity, Sent};
use crate::common::*;

impl Server {
    pub(super) fn kit(&self) -> Kit {
        match self {
            Server::V136(_) => Kit::V136,
            Server::V121(_) => Kit::V121,
        }
    }

    pub(super) fn port(&self) -> u16 {
        match self {
            Server::V136(k) => k.port,
            Server::V121(k) => k.port,
        }
    }

    /// The collection path of the cached resource in `ns` ("": all).
    pub(super) fn collection(&self, ns: &str) -> String {
        let (base, res) = match self {
            Server::V136(_) => ("/apis/example.com/v1", "widgets"),
            Server::V121(_) => ("/api/v1", "configmaps"),
        };
        match ns {
            "" => format!("{base}/{res}"),
            ns => format!("{base}/namespaces/{ns}/{res}"),
        }
    }

    pub(super) fn object(&self, ns: &str, name: &str) -> Value {
        match self {
            Server::V136(_) => json!({"apiVersion": "example.com/v1", "kind": "Widget",
                "metadata": {"name": name, "namespace": ns}, "spec": {"color": "red"}}),
            Server::V121(_) => json!({"apiVersion": "v1", "kind": "ConfigMap",
                "metadata": {"name": name, "namespace": ns}, "data": {"k": "v"}}),
        }
    }

    pub(super) fn serving_tls(&self) -> (PathBuf, PathBuf, PathBuf) {
        match self {
            Server::V136(k) => k.serving_tls(),
            Server::V121(k) => k.serving_tls(),
        }
    }

    pub(super) async fn send(
        &self,
        port: u16,
        id: Option<&Identity>,
        method: &str,
        path: &str,
        headers: &[(&str, &[u8])],
        body: Option<&str>,
    ) -> Resp {
        let (ca, _) = self.ca();
        let sent = Sent {
            ca: &ca,
            port,
            identity: id,
        };
        sent.send_bytes(method, path, headers, body, HANG).await
    }

    pub(super) fn ca(&self) -> (PathBuf, PathBuf) {
        match self {
            Server::V136(k) => {
                let (_, _, ca) = k.serving_tls();
                let key = ca.with_file_name("ca.key");
                (ca, key)
            }
            Server::V121(k) => k.ca(),
        }
    }
}

impl Server {
    /// The objects, and (1.21) namespaces and RBAC, made as the admin.
    pub(super) async fn populate(&self) {
        let objects: Vec<(String, Value)> = NAMESPACES
            .iter()
            .flat_map(|ns| ["o-1", "o-2"].map(|n| (self.collection(ns), self.object(ns, n))))
            .collect();
        match self {
            Server::V136(k) => {
                let crd: Value = serde_json::from_str(
                    &std::fs::read_to_string(k.kit().join("examples/widgets-crd.json")).unwrap(),
                )
                .unwrap();
                k.define_and_create_all(&crd, &objects).await;
            }
            Server::V121(k) => {
                for ns in NAMESPACES.iter().chain(&["ns-sa"]) {
                    let body =
                        json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": ns}});
                    k.create("/api/v1/namespaces", &body).await;
                }
                for (path, o) in &objects {
                    k.create(path, o).await;
                }
                let rbac = "/apis/rbac.authorization.k8s.io/v1";
                for (i, rule) in rules_json(Kit::V121).as_array().unwrap().iter().enumerate() {
                    let name = format!("attack-{i}");
                    let mut r = json!({"verbs": rule["verbs"], "apiGroups": rule["apiGroups"],
                        "resources": rule["resources"]});
                    if rule["resourceNames"]
                        .as_array()
                        .is_some_and(|a| !a.is_empty())
                    {
                        r["resourceNames"] = rule["resourceNames"].clone();
                    }
                    let role = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                        "kind": "ClusterRole", "metadata": {"name": name}, "rules": [r]});
                    k.create(&format!("{rbac}/clusterroles"), &role).await;
                    let mut subjects = Vec::new();
                    for u in rule["users"].as_array().unwrap() {
                        subjects.push(match u.as_str().unwrap() {
                            SA => json!({"kind": "ServiceAccount", "name": "sa-1", "namespace": "ns-sa"}),
                            u => json!({"kind": "User", "apiGroup": "rbac.authorization.k8s.io", "name": u}),
                        });
                    }
                    for g in rule["groups"].as_array().unwrap() {
                        subjects.push(json!({"kind": "Group", "apiGroup": "rbac.authorization.k8s.io", "name": g}));
                    }
                    let role_ref = json!({"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name});
                    let nss = rule["namespaces"].as_array().unwrap();
                    if nss.is_empty() {
                        let b = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                            "kind": "ClusterRoleBinding", "metadata": {"name": name},
                            "subjects": subjects, "roleRef": role_ref});
                        k.create(&format!("{rbac}/clusterrolebindings"), &b).await;
                    }
                    for ns in nss {
                        let ns = ns.as_str().unwrap();
                        let b = json!({"apiVersion": "rbac.authorization.k8s.io/v1",
                            "kind": "RoleBinding", "metadata": {"name": name, "namespace": ns},
                            "subjects": subjects, "roleRef": role_ref});
                        k.create(&format!("{rbac}/namespaces/{ns}/rolebindings"), &b)
                            .await;
                    }
                }
            }
        }
    }
}
