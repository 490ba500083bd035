//! The policy reader against kube-apiserver 1.36's own words (each message
//! below was printed by the 1.36 kit's apiserver for the same file; the
//! kit test `kube136_audit` asks it again), and the rules' matching as
//! `policy/checker.go` matches.

use super::*;

fn read(yaml: &str) -> Result<Policy, String> {
    Policy::from_bytes(yaml.as_bytes()).map(|(p, _)| p)
}

const HEAD: &str = "apiVersion: audit.k8s.io/v1\nkind: Policy\n";

#[test]
fn should_accept_the_examples_of_the_auditing_documentation() {
    for (name, yaml) in [
        (
            "audit-policy.yaml",
            include_str!("../../../config/audit/kubernetes-docs-example.yaml"),
        ),
        ("r8s's", include_str!("../../../config/audit/policy.yaml")),
    ] {
        if let Err(e) = read(yaml) {
            panic!("{name}: {e}");
        }
    }
}

/// `tests/audit_policies/`: each policy, and what the 1.36 apiserver said
/// of it (`None`: it accepted it).
fn recorded() -> Vec<(String, String, Option<String>)> {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/audit_policies");
    let mut cases = Vec::new();
    for e in std::fs::read_dir(&dir).unwrap() {
        let path = e.unwrap().path();
        if path.extension().is_some_and(|x| x == "yaml") {
            let yaml = std::fs::read_to_string(&path).unwrap();
            let err = std::fs::read_to_string(path.with_extension("err")).ok();
            let name = path.file_stem().unwrap().to_string_lossy().into_owned();
            cases.push((name, yaml, err));
        }
    }
    cases.sort();
    cases
}

#[test]
fn should_refuse_malformed_policies_in_the_apiservers_words() {
    let cases = recorded();
    assert!(cases.len() >= 15, "{} cases", cases.len());
    for (name, yaml, want) in cases {
        match (read(&yaml), want) {
            (Ok(_), None) => {}
            (Err(got), Some(want)) => assert_eq!(got, want, "{name}"),
            (got, want) => panic!(
                "{name}: r8s: {:?}; kube-apiserver 1.36: {want:?}",
                got.err()
            ),
        }
    }
    let e = read("{ not: [yaml").unwrap_err();
    assert!(e.starts_with("failed decoding: yaml: "), "{e}");
}

#[test]
fn should_name_the_file_and_let_unknown_fields_pass_with_a_warning() {
    let dir = std::env::temp_dir().join(format!("r8s-policy-{}", fastrand::u64(..)));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("p.yaml");
    std::fs::write(&path, format!("{HEAD}rules: []\n")).unwrap();
    let e = Policy::load(&path).unwrap_err().to_string();
    assert_eq!(
        e,
        format!(
            "loading audit policy file: loaded illegal policy with 0 rules: from file {}",
            path.display()
        )
    );
    std::fs::write(
        &path,
        format!("{HEAD}rules:\n- level: Metadata\n  verb: [get]\n  omitManagedFields: yes\n"),
    )
    .unwrap();
    let (p, warning) = Policy::load(&path).unwrap();
    assert_eq!(
        warning.as_deref(),
        Some("strict decoding error: unknown field \"rules[0].verb\"")
    );
    // YAML 1.1's `yes`, as the apiserver's reader takes it.
    assert!(p.rules[0].omit_managed_fields == Some(true));
    let missing = dir.join("missing.yaml");
    let e = Policy::load(&missing).unwrap_err().to_string();
    assert!(
        e.starts_with(&format!(
            "loading audit policy file: failed to read file path \"{}\"",
            missing.display()
        )),
        "{e}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

fn user(name: &str, groups: &[&str]) -> UserInfo {
    UserInfo {
        name: name.into(),
        groups: groups.iter().map(|g| g.to_string()).collect(),
        ..Default::default()
    }
}

fn resource<'a>(
    group: &'a str,
    resource: &'a str,
    subresource: &'a str,
    namespace: &'a str,
    name: &'a str,
) -> Target<'a> {
    Target::Resource {
        group,
        resource,
        subresource,
        namespace,
        name,
    }
}

#[test]
fn should_match_the_first_rule_as_the_apiserver_does() {
    let p = read(include_str!(
        "../../../config/audit/kubernetes-docs-example.yaml"
    ))
    .unwrap();
    let alice = user("alice", &["system:authenticated"]);
    let proxy = user("system:kube-proxy", &["system:authenticated"]);
    let level = |u: &UserInfo, verb: &str, target: Target<'_>| {
        p.evaluate(&Attributes {
            user: Some(u),
            verb,
            target,
        })
        .level
    };
    use Level::*;
    assert_eq!(
        level(&alice, "get", resource("", "pods", "", "a", "p")),
        RequestResponse
    );
    // "pods" is not "pods/log"; "pods/log" is listed for Metadata.
    assert_eq!(
        level(&alice, "get", resource("", "pods", "log", "a", "p")),
        Metadata
    );
    assert_eq!(
        level(&alice, "get", resource("", "pods", "exec", "a", "p")),
        Request
    );
    let leader = resource("", "configmaps", "", "kube-system", "controller-leader");
    assert_eq!(level(&alice, "update", leader), None);
    let other = resource("", "configmaps", "", "kube-system", "other");
    assert_eq!(level(&alice, "update", other), Request);
    let other_ns = resource("", "configmaps", "", "default", "other");
    assert_eq!(level(&alice, "update", other_ns), Metadata);
    assert_eq!(
        level(&proxy, "watch", resource("", "services", "", "", "")),
        None
    );
    assert_eq!(
        level(&alice, "watch", resource("", "services", "", "", "")),
        Request
    );
    assert_eq!(level(&alice, "get", Target::Path("/apis/apps")), None);
    assert_eq!(level(&alice, "get", Target::Path("/version")), None);
    assert_eq!(level(&alice, "get", Target::Path("/healthz")), Metadata);
    let deploy = resource("apps", "deployments", "", "a", "d");
    assert_eq!(level(&alice, "list", deploy), Metadata);
    let d = p.evaluate(&Attributes {
        user: Some(&alice),
        verb: "list",
        target: deploy,
    });
    // The policy's omitStages, added to every rule's.
    assert!(d.omit_stages.has(Stage::RequestReceived));
    assert!(!d.omit_stages.has(Stage::ResponseComplete));
    // No user (a 401): rules naming users or groups do not match.
    let anon = p.evaluate(&Attributes {
        user: Option::None,
        verb: "get",
        target: Target::Path("/version"),
    });
    assert_eq!(anon.level, Metadata);
}

#[test]
fn should_match_wildcards_of_resources_groups_and_paths() {
    let p = read(&format!(
        "{HEAD}rules:\n\
         - level: None\n  resources:\n  - group: \"*\"\n    resources: [\"*/status\"]\n\
         - level: Request\n  resources:\n  - group: apps\n    resources: [\"deployments/*\"]\n\
         - level: RequestResponse\n  resources:\n  - group: \"\"\n    resources: [secrets]\n    resourceNames: [s1]\n\
         - level: Metadata\n  nonResourceURLs: [\"/metrics\", \"/debug/*\"]\n\
         - level: Request\n  namespaces: [\"\"]\n"
    ))
    .unwrap();
    let u = user("u", &[]);
    let level = |verb: &str, target: Target<'_>| {
        p.evaluate(&Attributes {
            user: Some(&u),
            verb,
            target,
        })
        .level
    };
    use Level::*;
    assert_eq!(
        level("get", resource("x.io", "things", "status", "a", "t")),
        None
    );
    assert_eq!(
        level("get", resource("apps", "deployments", "scale", "a", "d")),
        Request
    );
    assert_eq!(
        level("get", resource("apps", "deployments", "", "a", "d")),
        Request
    );
    assert_eq!(
        level("get", resource("", "secrets", "", "a", "s1")),
        RequestResponse
    );
    // Another name: no rule but the cluster-scoped one, which needs namespace "".
    assert_eq!(level("get", resource("", "secrets", "", "a", "s2")), None);
    assert_eq!(level("get", resource("", "nodes", "", "", "n")), Request);
    assert_eq!(level("get", Target::Path("/metrics")), Metadata);
    assert_eq!(level("get", Target::Path("/debug/pprof")), Metadata);
    assert_eq!(level("get", Target::Path("/metricsx")), None);
}
