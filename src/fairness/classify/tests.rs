use super::*;
use crate::fairness::schema::Queuing;

fn groups(g: &[&str]) -> Vec<String> {
    g.iter().map(|s| s.to_string()).collect()
}

fn path<'a>(verb: &'a str, path: &'a str) -> Asked<'a> {
    Asked::NonResource { verb, path }
}

/// kube-apiserver's own configuration, request by request: who, what, and
/// the schema and level the apiserver's filter gives it.
#[test]
fn should_classify_as_the_apiservers_own_configuration_does() {
    let c = Classifier::builtin();
    let authd = "system:authenticated";
    let masters = groups(&["system:masters", authd]);
    let node = groups(&["system:nodes", authd]);
    let anonymous = groups(&["system:unauthenticated"]);
    let user = groups(&[authd]);
    let ks_sa = groups(&[
        "system:serviceaccounts",
        "system:serviceaccounts:kube-system",
        authd,
    ]);
    let sa = groups(&[
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        authd,
    ]);
    let kcm = "system:kube-controller-manager";
    let cases: Vec<(&str, &[String], Asked<'_>, &str, &str)> = vec![
        (
            "admin",
            &masters,
            Asked::resource("list", "", "pods", "", ""),
            "exempt",
            "exempt",
        ),
        (
            "admin",
            &masters,
            path("get", "/version"),
            "exempt",
            "exempt",
        ),
        (
            "system:anonymous",
            &anonymous,
            path("get", "/healthz"),
            "probes",
            "exempt",
        ),
        (
            "system:anonymous",
            &anonymous,
            path("get", "/readyz"),
            "probes",
            "exempt",
        ),
        (
            "system:anonymous",
            &anonymous,
            path("post", "/healthz"),
            "global-default",
            "global-default",
        ),
        // A URL without `*` matches its subpaths too (`matchPolicyRuleNonResourceURL`).
        (
            "system:anonymous",
            &anonymous,
            path("get", "/healthz/etcd"),
            "probes",
            "exempt",
        ),
        (
            "system:anonymous",
            &anonymous,
            path("get", "/healthzx"),
            "global-default",
            "global-default",
        ),
        (
            "system:anonymous",
            &anonymous,
            path("get", "/version"),
            "global-default",
            "global-default",
        ),
        (
            "system:node:n1",
            &node,
            Asked::resource("list", "", "pods", "", ""),
            "system-nodes",
            "system",
        ),
        (
            "system:node:n1",
            &node,
            Asked::resource("get", "", "nodes", "", ""),
            "system-node-high",
            "node-high",
        ),
        (
            "system:node:n1",
            &node,
            Asked::resource("patch", "", "nodes", "status", ""),
            "system-node-high",
            "node-high",
        ),
        (
            "system:node:n1",
            &node,
            Asked::resource(
                "update",
                "coordination.k8s.io",
                "leases",
                "",
                "kube-node-lease",
            ),
            "system-node-high",
            "node-high",
        ),
        // leases are namespaced: cluster scope does not match the node-high rule.
        (
            "system:node:n1",
            &node,
            Asked::resource("list", "coordination.k8s.io", "leases", "", ""),
            "system-nodes",
            "system",
        ),
        (
            "system:node:n1",
            &node,
            Asked::resource("get", "", "nodes", "proxy", ""),
            "system-nodes",
            "system",
        ),
        (
            "system:node:n1",
            &node,
            path("get", "/api"),
            "system-nodes",
            "system",
        ),
        (
            kcm,
            &user,
            Asked::resource("get", "coordination.k8s.io", "leases", "", "kube-system"),
            "system-leader-election",
            "leader-election",
        ),
        (
            kcm,
            &user,
            Asked::resource("watch", "coordination.k8s.io", "leases", "", "kube-system"),
            "kube-controller-manager",
            "workload-high",
        ),
        (
            kcm,
            &user,
            Asked::resource("update", "", "endpoints", "", "ns-1"),
            "endpoint-controller",
            "workload-high",
        ),
        (
            kcm,
            &user,
            Asked::resource("list", "", "pods", "", ""),
            "kube-controller-manager",
            "workload-high",
        ),
        (
            "system:kube-scheduler",
            &user,
            Asked::resource("create", "", "pods", "binding", "ns-1"),
            "kube-scheduler",
            "workload-high",
        ),
        (
            "system:serviceaccount:kube-system:endpoint-controller",
            &ks_sa,
            Asked::resource("get", "", "endpoints", "", "ns-1"),
            "endpoint-controller",
            "workload-high",
        ),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            &ks_sa,
            Asked::resource("update", "", "configmaps", "", "kube-system"),
            "workload-leader-election",
            "leader-election",
        ),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            &ks_sa,
            Asked::resource("list", "apps", "replicasets", "", ""),
            "kube-system-service-accounts",
            "workload-high",
        ),
        (
            "system:serviceaccount:kube-system:replicaset-controller",
            &ks_sa,
            path("get", "/apis"),
            "kube-system-service-accounts",
            "workload-high",
        ),
        // A namespace that only begins like kube-system is another.
        (
            "system:serviceaccount:kube-systemx:a",
            &sa,
            Asked::resource("list", "", "pods", "", ""),
            "service-accounts",
            "workload-low",
        ),
        (
            "system:serviceaccount:default:app",
            &sa,
            Asked::resource("list", "", "pods", "", "default"),
            "service-accounts",
            "workload-low",
        ),
        (
            "alice",
            &user,
            Asked::resource("list", "", "pods", "", ""),
            "global-default",
            "global-default",
        ),
        (
            "alice",
            &user,
            path("get", "/metrics"),
            "global-default",
            "global-default",
        ),
    ];
    for (name, groups, asked, schema, level) in cases {
        let got = c.classify(Who { name, groups }, asked);
        assert_eq!(
            (got.schema.name.as_str(), got.level.name.as_str()),
            (schema, level),
            "{name} {asked:?}"
        );
    }
}

/// A flow is the schema and its distinguisher: one user's requests one
/// flow whatever they ask (ByUser), one namespace's (ByNamespace).
#[test]
fn should_tell_flows_apart_by_the_schemas_distinguisher() {
    let c = Classifier::builtin();
    let user = groups(&["system:authenticated"]);
    let flow = |name: &str, asked: Asked<'_>| {
        c.classify(
            Who {
                name,
                groups: &user,
            },
            asked,
        )
        .flow
    };
    let pods = |ns| Asked::resource("list", "", "pods", "", ns);
    assert_eq!(flow("alice", pods("a")), flow("alice", pods("b")));
    assert_ne!(flow("alice", pods("a")), flow("bob", pods("a")));
    let kcm = "system:kube-controller-manager";
    assert_eq!(flow(kcm, pods("a")), flow(kcm, pods("a")));
    assert_ne!(flow(kcm, pods("a")), flow(kcm, pods("b")));
}

fn custom(name: &str, level: &str, precedence: i32, rules: PolicyRules) -> FlowSchema {
    FlowSchema {
        name: name.into(),
        uid: format!("uid-{name}"),
        precedence,
        priority_level: level.into(),
        distinguisher: None,
        rules: vec![rules],
    }
}

/// The cluster's own schemas: ties broken by name, a schema whose level is
/// missing left out, subresources and path prefixes as the filter reads
/// them, the mandatory ones there whatever the cluster holds.
#[test]
fn should_order_leave_out_and_match_a_clusters_schemas_as_the_filter() {
    let everyone = vec![Subject::Group("*".into())];
    let logs = PolicyRules {
        subjects: everyone.clone(),
        resource_rules: vec![ResourceRule {
            verbs: vec!["get".into()],
            api_groups: vec!["".into()],
            resources: vec!["pods/log".into()],
            namespaces: vec!["*".into()],
            cluster_scope: false,
        }],
        non_resource_rules: vec![NonResourceRule {
            verbs: vec!["*".into()],
            urls: vec!["/metrics".into(), "/debug/*".into()],
        }],
    };
    let level = PriorityLevel {
        name: "mine".into(),
        uid: "uid-mine".into(),
        exempt: false,
        shares: 7,
        queuing: Some(Queuing {
            queues: 4,
            hand_size: 2,
            queue_length_limit: 5,
        }),
    };
    let c = Classifier::new(
        vec![
            custom("b-logs", "mine", 50, logs.clone()),
            custom("a-logs", "mine", 50, logs.clone()),
            custom("dangling", "nowhere", 10, logs.clone()),
        ],
        vec![level],
    );
    let who = Who {
        name: "alice",
        groups: &[],
    };
    let name = |asked| c.classify(who, asked).schema.name.clone();
    assert_eq!(
        name(Asked::resource("get", "", "pods", "log", "ns-1")),
        "a-logs"
    );
    assert_eq!(
        name(Asked::resource("get", "", "pods", "", "ns-1")),
        "catch-all"
    );
    assert_eq!(
        name(Asked::resource("get", "", "pods", "exec", "ns-1")),
        "catch-all"
    );
    assert_eq!(
        name(Asked::resource("get", "", "pods", "log", "")),
        "catch-all",
        "not cluster scope"
    );
    assert_eq!(name(path("get", "/metrics")), "a-logs");
    assert_eq!(
        name(path("get", "/metrics/x")),
        "a-logs",
        "a path prefix, as the filter's"
    );
    assert_eq!(name(path("get", "/metricsx")), "catch-all");
    assert_eq!(name(path("get", "/debug/pprof")), "a-logs");
    assert_eq!(name(path("get", "/debug")), "catch-all");
    let got = c.classify(who, Asked::resource("get", "", "pods", "log", "ns-1"));
    assert_eq!(
        (got.schema.uid.as_str(), got.level.uid.as_str()),
        ("uid-a-logs", "uid-mine")
    );
    assert!(c.levels().contains_key("exempt") && c.levels().contains_key("catch-all"));
}

/// The objects as served, in every version the apiserver has served them.
#[test]
fn should_read_flow_schemas_and_priority_levels_of_every_served_version() {
    let fs = serde_json::json!({
        "apiVersion": "flowcontrol.apiserver.k8s.io/v1beta1", "kind": "FlowSchema",
        "metadata": {"name": "system-nodes", "uid": "u-1"},
        "spec": {"priorityLevelConfiguration": {"name": "system"}, "matchingPrecedence": 500,
            "distinguisherMethod": {"type": "ByUser"},
            "rules": [{"subjects": [{"kind": "Group", "group": {"name": "system:nodes"}},
                                    {"kind": "ServiceAccount", "serviceAccount": {"namespace": "kube-system", "name": "*"}},
                                    {"kind": "User"}],
                       "resourceRules": [{"verbs": ["*"], "apiGroups": ["*"], "resources": ["*"], "clusterScope": true, "namespaces": ["*"]}],
                       "nonResourceRules": [{"verbs": ["*"], "nonResourceURLs": ["*"]}]}]}});
    let fs = FlowSchema::from_json(&fs).unwrap();
    assert_eq!(
        (fs.name.as_str(), fs.uid.as_str(), fs.precedence),
        ("system-nodes", "u-1", 500)
    );
    assert_eq!(
        fs.rules[0].subjects.len(),
        2,
        "a subject without its member matches nobody"
    );
    assert!(fs.rules[0].resource_rules[0].cluster_scope);
    let old = serde_json::json!({"metadata": {"name": "workload-low", "uid": "u-2"},
        "spec": {"type": "Limited", "limited": {"assuredConcurrencyShares": 100,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
    let new = serde_json::json!({"metadata": {"name": "workload-low", "uid": "u-2"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 100, "lendablePercent": 90,
            "limitResponse": {"type": "Queue", "queuing": {"queues": 128, "handSize": 6, "queueLengthLimit": 50}}}}});
    let (old, new) = (
        PriorityLevel::from_json(&old).unwrap(),
        PriorityLevel::from_json(&new).unwrap(),
    );
    assert_eq!(old, new);
    assert_eq!(new.shares, 100);
    let exempt = serde_json::json!({"metadata": {"name": "exempt"}, "spec": {"type": "Exempt"}});
    assert!(PriorityLevel::from_json(&exempt).unwrap().exempt);
    let reject = serde_json::json!({"metadata": {"name": "catch-all"},
        "spec": {"type": "Limited", "limited": {"nominalConcurrencyShares": 5, "limitResponse": {"type": "Reject"}}}});
    assert_eq!(PriorityLevel::from_json(&reject).unwrap().queuing, None);
    let bad = serde_json::json!({"metadata": {"name": "x"}, "spec": {"type": "Other"}});
    assert!(PriorityLevel::from_json(&bad).is_err());
    let bad = serde_json::json!({"metadata": {"name": "x"}, "spec": {"distinguisherMethod": {"type": "ByUser"}}});
    assert!(FlowSchema::from_json(&bad).is_err());
}
