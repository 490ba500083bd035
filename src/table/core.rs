//! Printers of the core kinds people list besides pods: namespaces, nodes,
//! config maps, secrets and service accounts, as kube-apiserver's
//! `printNamespace`, `printNode`, `printConfigMap`, `printSecret` and
//! `printServiceAccount` print them (`pkg/printers/internalversion/
//! printers.go`).

use std::borrow::Cow;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use serde::Deserialize;
use serde::de::{self, IgnoredAny, MapAccess, SeqAccess, Visitor};

use super::cell::{Cell, Column, Meta, Row, Text};

/// How many entries a JSON object or array has, counted without keeping
/// them (`len(obj.Data)`, `len(obj.Secrets)`).
#[derive(Debug, Default, Clone, Copy)]
struct Count(i64);

impl<'de> Deserialize<'de> for Count {
    fn deserialize<D: de::Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Count;
            fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
                f.write_str("an object, an array or null")
            }
            fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while m.next_entry::<IgnoredAny, IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, mut s: A) -> Result<Count, A::Error> {
                let mut n = 0;
                while s.next_element::<IgnoredAny>()?.is_some() {
                    n += 1;
                }
                Ok(Count(n))
            }
            fn visit_unit<E>(self) -> Result<Count, E> {
                Ok(Count(0))
            }
        }
        d.deserialize_any(V)
    }
}

fn row(cells: Vec<Cell>) -> Row {
    Row {
        cells,
        condition: None,
    }
}

/// `namespaceColumnDefinitions`.
pub static NAMESPACE_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text("Status", "The status of the namespace"),
    Column::age(),
];

/// A namespace's row: its phase.
pub fn namespace_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Ns<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(borrow)]
        status: NsStatus<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct NsStatus<'a> {
        #[serde(borrow)]
        phase: Cow<'a, str>,
    }
    let o: Ns = serde_json::from_slice(body).ok()?;
    Some(row(vec![
        o.metadata.name(),
        Cell::Text(Text::from(&*o.status.phase)),
        o.metadata.age(),
    ]))
}

/// `configMapColumnDefinitions`.
pub static CONFIG_MAP_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Data",
        "Data contains the configuration data. Each key must consist of alphanumeric characters, '-', '_' or '.'. Values with non-UTF-8 byte sequences must use the BinaryData field. The keys stored in Data must not overlap with the keys in the BinaryData field, this is enforced during validation process.",
    ),
    Column::age(),
];

/// A config map's row: how many keys, `data` and `binaryData` together.
pub fn config_map_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Cm<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        data: Count,
        binary_data: Count,
    }
    let o: Cm = serde_json::from_slice(body).ok()?;
    Some(row(vec![
        o.metadata.name(),
        Cell::Int(o.data.0 + o.binary_data.0),
        o.metadata.age(),
    ]))
}

/// `secretColumnDefinitions`.
pub static SECRET_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Type",
        "Used to facilitate programmatic handling of secret data. More info: https://kubernetes.io/docs/concepts/configuration/secret/#secret-types",
    ),
    Column::text(
        "Data",
        "Data contains the secret data. Each key must consist of alphanumeric characters, '-', '_' or '.'. The serialized form of the secret data is a base64 encoded string, representing the arbitrary (possibly non-string) data value here. Described in https://tools.ietf.org/html/rfc4648#section-4",
    ),
    Column::age(),
];

/// A secret's row: its type and how many keys it has (never a value).
pub fn secret_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Secret<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        data: Count,
    }
    let o: Secret = serde_json::from_slice(body).ok()?;
    Some(row(vec![
        o.metadata.name(),
        Cell::Text(Text::from(&*o.kind)),
        Cell::Int(o.data.0),
        o.metadata.age(),
    ]))
}

/// `serviceAccountColumnDefinitions`.
pub static SERVICE_ACCOUNT_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text(
        "Secrets",
        "Secrets is a list of the secrets in the same namespace that pods running using this ServiceAccount are allowed to use. Pods are only limited to this list if this service account has a \"kubernetes.io/enforce-mountable-secrets\" annotation set to \"true\". The \"kubernetes.io/enforce-mountable-secrets\" annotation is deprecated since v1.32. Prefer separate namespaces to isolate access to mounted secrets. This field should not be used to find auto-generated service account token secrets for use outside of pods. Instead, tokens can be requested directly using the TokenRequest API, or service account token secrets can be manually created. More info: https://kubernetes.io/docs/concepts/configuration/secret",
    ),
    Column::age(),
];

/// A service account's row: how many secrets it lists.
pub fn service_account_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Sa<'a> {
        #[serde(borrow)]
        metadata: Meta<'a>,
        secrets: Count,
    }
    let o: Sa = serde_json::from_slice(body).ok()?;
    Some(row(vec![
        o.metadata.name(),
        Cell::Int(o.secrets.0),
        o.metadata.age(),
    ]))
}

const ADDRESSES_DOC: &str = "List of addresses reachable to the node. Queried from cloud provider, if available. More info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is declared as mergeable, but the merge key is not sufficiently unique, which can cause data corruption when it is merged. Callers should instead use a full-replacement patch. See https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change during the lifetime of a Node. However, there are some exceptions where this may not be possible, such as Pods that inherit a Node's address in its own status or consumers of the downward API (status.hostIP).";

/// `nodeColumnDefinitions`.
pub static NODE_COLUMNS: &[Column] = &[
    Column::name(),
    Column::text("Status", "The status of the node"),
    Column::text("Roles", "The roles of the node"),
    Column::age(),
    Column::text("Version", "Kubelet Version reported by the node."),
    Column::wide("Internal-IP", ADDRESSES_DOC),
    Column::wide("External-IP", ADDRESSES_DOC),
    Column::wide(
        "OS-Image",
        "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).",
    ),
    Column::wide(
        "Kernel-Version",
        "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).",
    ),
    Column::wide(
        "Container-Runtime",
        "ContainerRuntime Version reported by the node through runtime remote API (e.g. containerd://1.4.2).",
    ),
];

/// A node's row: `Ready`/`NotReady`/`Unknown` (and `SchedulingDisabled`),
/// its roles from its labels, the kubelet's version; wide: addresses and
/// what the node runs.
pub fn node_row(body: &[u8]) -> Option<Row> {
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Node<'a> {
        #[serde(borrow)]
        metadata: NodeMeta<'a>,
        spec: NodeSpec,
        #[serde(borrow)]
        status: NodeStatus<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct NodeMeta<'a> {
        #[serde(borrow)]
        name: Cow<'a, str>,
        #[serde(borrow)]
        creation_timestamp: Option<Cow<'a, str>>,
        #[serde(borrow)]
        labels: BTreeMap<Cow<'a, str>, Cow<'a, str>>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct NodeSpec {
        unschedulable: bool,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct NodeStatus<'a> {
        #[serde(borrow)]
        conditions: Vec<Condition<'a>>,
        #[serde(borrow)]
        addresses: Vec<Address<'a>>,
        #[serde(borrow)]
        node_info: Info<'a>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Condition<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        status: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default)]
    struct Address<'a> {
        #[serde(rename = "type", borrow)]
        kind: Cow<'a, str>,
        #[serde(borrow)]
        address: Cow<'a, str>,
    }
    #[derive(Deserialize, Default)]
    #[serde(default, rename_all = "camelCase")]
    struct Info<'a> {
        #[serde(borrow)]
        kubelet_version: Cow<'a, str>,
        #[serde(borrow)]
        os_image: Cow<'a, str>,
        #[serde(borrow)]
        kernel_version: Cow<'a, str>,
        #[serde(borrow)]
        container_runtime_version: Cow<'a, str>,
    }
    let o: Node = serde_json::from_slice(body).ok()?;
    let st = &o.status;
    // The last condition of a type wins, as the printer's map keeps it.
    let ready = st.conditions.iter().rev().find(|c| c.kind == "Ready");
    let mut status = match ready {
        Some(c) if c.status == "True" => "Ready".to_string(),
        Some(_) => "NotReady".to_string(),
        None => "Unknown".to_string(),
    };
    if o.spec.unschedulable {
        status.push_str(",SchedulingDisabled");
    }
    // `findNodeRoles`: `node-role.kubernetes.io/<role>` and
    // `kubernetes.io/role=<role>`, sorted, each once.
    let roles: BTreeSet<&str> = o
        .metadata
        .labels
        .iter()
        .filter_map(|(k, v)| match k.strip_prefix("node-role.kubernetes.io/") {
            Some(role) if !role.is_empty() => Some(role),
            Some(_) => None,
            None if k == "kubernetes.io/role" && !v.is_empty() => Some(&**v),
            None => None,
        })
        .collect();
    let roles = if roles.is_empty() {
        "<none>".to_string()
    } else {
        roles.into_iter().collect::<Vec<_>>().join(",")
    };
    let address = |kind: &str| {
        st.addresses
            .iter()
            .find(|a| a.kind == kind)
            .map_or("<none>", |a| &a.address)
    };
    let or_unknown = |s: &str| Text::from(if s.is_empty() { "<unknown>" } else { s });
    let m = Meta {
        name: o.metadata.name.clone(),
        creation_timestamp: o.metadata.creation_timestamp.clone(),
        deletion_timestamp: None,
    };
    Some(row(vec![
        m.name(),
        Cell::Text(status.into()),
        Cell::Text(roles.into()),
        m.age(),
        Cell::Text(Text::from(&*st.node_info.kubelet_version)),
        Cell::Text(Text::from(address("InternalIP"))),
        Cell::Text(Text::from(address("ExternalIP"))),
        Cell::Text(or_unknown(&st.node_info.os_image)),
        Cell::Text(or_unknown(&st.node_info.kernel_version)),
        Cell::Text(or_unknown(&st.node_info.container_runtime_version)),
    ]))
}

#[cfg(test)]
mod tests;
