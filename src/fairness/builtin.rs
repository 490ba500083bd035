//! kube-apiserver's own priority and fairness configuration (1.36): the
//! mandatory FlowSchemas and priority levels (`exempt`, `catch-all`) and the
//! suggested ones, what r8s classifies by where the upstream serves no
//! such objects or r8s may not read them. Transcribed from the apiserver's
//! `pkg/apis/flowcontrol/bootstrap` (`default.go`); their UIDs are empty.

use super::schema::{
    Distinguisher, FlowSchema, NonResourceRule, PolicyRules, PriorityLevel, Queuing, ResourceRule,
    Subject,
};

fn owned(s: &[&str]) -> Vec<String> {
    s.iter().map(|s| s.to_string()).collect()
}

fn groups(names: &[&str]) -> Vec<Subject> {
    names
        .iter()
        .map(|n| Subject::Group(n.to_string()))
        .collect()
}

fn users(names: &[&str]) -> Vec<Subject> {
    names.iter().map(|n| Subject::User(n.to_string())).collect()
}

fn kube_system(names: &[&str]) -> Vec<Subject> {
    names
        .iter()
        .map(|n| Subject::ServiceAccount {
            namespace: "kube-system".into(),
            name: n.to_string(),
        })
        .collect()
}

fn resources(verbs: &[&str], api_groups: &[&str], res: &[&str], cluster: bool) -> ResourceRule {
    ResourceRule {
        verbs: owned(verbs),
        api_groups: owned(api_groups),
        resources: owned(res),
        namespaces: owned(&["*"]),
        cluster_scope: cluster,
    }
}

/// Every request of `subjects`, resource and non-resource.
fn everything(subjects: Vec<Subject>) -> PolicyRules {
    PolicyRules {
        subjects,
        resource_rules: vec![resources(&["*"], &["*"], &["*"], true)],
        non_resource_rules: vec![NonResourceRule {
            verbs: owned(&["*"]),
            urls: owned(&["*"]),
        }],
    }
}

fn schema(
    name: &str,
    level: &str,
    precedence: i32,
    distinguisher: Option<Distinguisher>,
    rules: PolicyRules,
) -> FlowSchema {
    FlowSchema {
        name: name.into(),
        uid: String::new(),
        precedence,
        priority_level: level.into(),
        distinguisher,
        rules: vec![rules],
    }
}

fn limited(name: &str, shares: u32, queues: u32, hand_size: u32) -> PriorityLevel {
    PriorityLevel {
        name: name.into(),
        uid: String::new(),
        exempt: false,
        shares,
        queuing: Some(Queuing {
            queues,
            hand_size,
            queue_length_limit: 50,
        }),
    }
}

/// The mandatory and suggested priority levels.
pub fn priority_levels() -> Vec<PriorityLevel> {
    vec![
        PriorityLevel {
            name: "exempt".into(),
            uid: String::new(),
            exempt: true,
            shares: 0,
            queuing: None,
        },
        PriorityLevel {
            name: "catch-all".into(),
            uid: String::new(),
            exempt: false,
            shares: 5,
            queuing: None,
        },
        limited("system", 30, 64, 6),
        limited("node-high", 40, 64, 6),
        limited("leader-election", 10, 16, 4),
        limited("workload-high", 40, 128, 6),
        limited("workload-low", 100, 128, 6),
        limited("global-default", 20, 128, 6),
    ]
}

/// The mandatory and suggested FlowSchemas.
pub fn flow_schemas() -> Vec<FlowSchema> {
    use Distinguisher::{ByNamespace, ByUser};
    let all = ["system:unauthenticated", "system:authenticated"];
    let get_create_update = ["get", "create", "update"];
    vec![
        schema(
            "exempt",
            "exempt",
            1,
            None,
            everything(groups(&["system:masters"])),
        ),
        schema(
            "probes",
            "exempt",
            2,
            None,
            PolicyRules {
                subjects: groups(&all),
                resource_rules: vec![],
                non_resource_rules: vec![NonResourceRule {
                    verbs: owned(&["get"]),
                    urls: owned(&["/healthz", "/readyz", "/livez"]),
                }],
            },
        ),
        schema(
            "system-leader-election",
            "leader-election",
            100,
            Some(ByUser),
            PolicyRules {
                subjects: [
                    users(&["system:kube-controller-manager", "system:kube-scheduler"]),
                    kube_system(&["*"]),
                ]
                .concat(),
                resource_rules: vec![resources(
                    &get_create_update,
                    &["coordination.k8s.io"],
                    &["leases"],
                    false,
                )],
                non_resource_rules: vec![],
            },
        ),
        schema(
            "endpoint-controller",
            "workload-high",
            150,
            Some(ByUser),
            PolicyRules {
                subjects: [
                    users(&["system:kube-controller-manager"]),
                    kube_system(&["endpoint-controller", "endpointslicemirroring-controller"]),
                ]
                .concat(),
                resource_rules: vec![resources(&get_create_update, &[""], &["endpoints"], false)],
                non_resource_rules: vec![],
            },
        ),
        schema(
            "workload-leader-election",
            "leader-election",
            200,
            Some(ByUser),
            PolicyRules {
                subjects: kube_system(&["*"]),
                resource_rules: vec![
                    resources(
                        &get_create_update,
                        &[""],
                        &["endpoints", "configmaps"],
                        false,
                    ),
                    resources(
                        &get_create_update,
                        &["coordination.k8s.io"],
                        &["leases"],
                        false,
                    ),
                ],
                non_resource_rules: vec![],
            },
        ),
        schema(
            "system-node-high",
            "node-high",
            400,
            Some(ByUser),
            PolicyRules {
                subjects: groups(&["system:nodes"]),
                resource_rules: vec![
                    resources(&["*"], &[""], &["nodes", "nodes/status"], true),
                    resources(&["*"], &["coordination.k8s.io"], &["leases"], false),
                ],
                non_resource_rules: vec![],
            },
        ),
        schema(
            "system-nodes",
            "system",
            500,
            Some(ByUser),
            everything(groups(&["system:nodes"])),
        ),
        schema(
            "kube-controller-manager",
            "workload-high",
            800,
            Some(ByNamespace),
            everything(users(&["system:kube-controller-manager"])),
        ),
        schema(
            "kube-scheduler",
            "workload-high",
            800,
            Some(ByNamespace),
            everything(users(&["system:kube-scheduler"])),
        ),
        schema(
            "kube-system-service-accounts",
            "workload-high",
            900,
            Some(ByNamespace),
            everything(kube_system(&["*"])),
        ),
        schema(
            "service-accounts",
            "workload-low",
            9000,
            Some(ByUser),
            everything(groups(&["system:serviceaccounts"])),
        ),
        schema(
            "global-default",
            "global-default",
            9900,
            Some(ByUser),
            everything(groups(&all)),
        ),
        schema(
            "catch-all",
            "catch-all",
            10000,
            Some(ByUser),
            everything(groups(&all)),
        ),
    ]
}
