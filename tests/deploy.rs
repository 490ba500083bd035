//! deploy/kubernetes: the shared tier renders with `kubectl kustomize`, every
//! object the built-in upstream serves applies with a server-side dry run,
//! the rest is decoded by kubectl on the client, and every image, port, path
//! and configuration key the manifests name exists.

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;
use std::time::Duration;

use crate::common::*;
use http::StatusCode;
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_r8s");
const DIR: &str = concat!(
    concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
    "/deploy/kubernetes"
);

/// A file of its own holding `text`: the tests run in parallel in one
/// process, and a shared name let one test read another's half-written file.
pub(crate) fn scratch(name: &str, text: &str) -> std::path::PathBuf {
    static NEXT: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let dir = std::env::temp_dir().join(format!("r8s-deploy-{}-{n}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(name);
    std::fs::write(&file, text).unwrap();
    file
}

fn kustomize() -> Vec<Value> {
    let out = Command::new("kubectl")
        .args(["kustomize", DIR])
        .output()
        .expect("kubectl is on the PATH");
    assert!(
        out.status.success(),
        "kubectl kustomize deploy/kubernetes failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    decode_yaml(&String::from_utf8(out.stdout).unwrap())
}

pub(crate) fn find<'a>(objs: &'a [Value], kind: &str, name: &str) -> &'a Value {
    objs.iter()
        .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
        .unwrap_or_else(|| panic!("no {kind} {name} in the manifests"))
}

fn find_prefix<'a>(objs: &'a [Value], kind: &str, prefix: &str) -> &'a Value {
    objs.iter()
        .find(|o| {
            o["kind"] == kind
                && o["metadata"]["name"]
                    .as_str()
                    .is_some_and(|n| n.starts_with(prefix))
        })
        .unwrap_or_else(|| panic!("no {kind} {prefix}* in the manifests"))
}

/// Whether the built-in upstream serves this kind (and so can dry-run it).
fn served(o: &Value) -> bool {
    let api_version = o["apiVersion"].as_str().unwrap_or_default();
    let (group, version) = api_version.split_once('/').unwrap_or(("", api_version));
    r8s_sim::resources::builtins().iter().any(|r| {
        o["kind"] == r.kind.as_str() && r.gvr.group() == group && r.gvr.version() == version
    })
}

/// `kubectl apply --dry-run=server` of `objs` against the sim; returns what
/// kubectl printed (the objects as the server would store them).
async fn dry_run_apply(server: &str, objs: &[&Value]) -> Vec<Value> {
    // A JSON stream: the documents one after another, as kubectl's JSON
    // decoder reads them. (JSON documents between YAML `---` separators are
    // read as one JSON stream once kubectl sees `{` first; kubectl 1.32 then
    // fails on the first `---` against a 1.36 server, whose documents it
    // reads one at a time.)
    let stream: Vec<String> = objs.iter().map(|o| o.to_string()).collect();
    let out = kubectl(
        server,
        &["apply", "--dry-run=server", "-o", "json", "-f", "-"],
        Some(&stream.join("\n")),
        Duration::from_secs(60),
    )
    .await;
    assert!(
        out.status.success(),
        "server-side dry run refused: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed: Value = serde_json::from_slice(&out.stdout).unwrap();
    match printed["kind"].as_str() {
        Some("List") => printed["items"].as_array().unwrap().clone(),
        _ => vec![printed],
    }
}

pub(crate) fn pod_spec(deploy: &Value) -> &Value {
    &deploy["spec"]["template"]["spec"]
}

pub(crate) fn container<'a>(deploy: &'a Value, name: &str) -> &'a Value {
    let spec = pod_spec(deploy);
    spec["containers"]
        .as_array()
        .into_iter()
        .chain(spec["initContainers"].as_array())
        .flatten()
        .find(|c| c["name"] == name)
        .unwrap_or_else(|| panic!("no container {name}"))
}

fn port_named(c: &Value, name: &str) -> u64 {
    c["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["name"] == name)
        .and_then(|p| p["containerPort"].as_u64())
        .unwrap_or_else(|| panic!("container {} has no port {name}", c["name"]))
}

pub(crate) fn port_of(addr: &str) -> u64 {
    addr.rsplit_once(':').unwrap().1.parse().unwrap()
}

/// The configuration r8s would run with these flags, as `r8s config check`
/// prints it (which refuses unknown keys, unknown flags and values out of range).
pub(crate) fn config_check_args<S: AsRef<std::ffi::OsStr>>(args: &[S]) -> toml::Value {
    let out = Command::new(BIN)
        .args(["config", "check"])
        .args(args)
        .env_clear()
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "r8s refuses the manifests' configuration: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    toml::from_str(&String::from_utf8(out.stdout).unwrap()).unwrap()
}

/// The configuration of an `r8s.toml` the manifests carry.
pub(crate) fn config_check(toml_text: &str) -> toml::Value {
    let file = scratch("r8s.toml", toml_text);
    config_check_args(&[std::ffi::OsStr::new("--config"), file.as_os_str()])
}

fn quantity_bytes(q: &str) -> f64 {
    let units = [
        ("Ki", 1u64 << 10),
        ("Mi", 1 << 20),
        ("Gi", 1 << 30),
        ("Ti", 1 << 40),
    ];
    for (suffix, mult) in units {
        if let Some(n) = q.strip_suffix(suffix) {
            return n.parse::<f64>().unwrap() * mult as f64;
        }
    }
    q.parse().unwrap()
}

fn selector_matches(selector: &Value, labels: &Value) -> bool {
    let want = selector["matchLabels"].as_object().unwrap();
    !want.is_empty() && want.iter().all(|(k, v)| labels[k] == *v)
}

/// The image every r8s container names: the tag `docs/operating.md`'s build gives
/// it, the crate's version (never a moving tag), pulled only if the node
/// lacks it (the default policy for such a tag, Always, would look for
/// `docker.io/library/r8s` and fail).
fn assert_image_is_the_readme_build(c: &Value) {
    let readme = std::fs::read_to_string(concat!(
        concat!(env!("CARGO_MANIFEST_DIR"), "/.."),
        "/docs/operating.md"
    ))
    .unwrap();
    let image = c["image"].as_str().unwrap();
    assert_eq!(
        image,
        concat!("r8s:", env!("CARGO_PKG_VERSION")),
        "container {} names an image nobody builds",
        c["name"]
    );
    assert_eq!(
        c["imagePullPolicy"], "IfNotPresent",
        "container {}",
        c["name"]
    );
    assert!(
        readme.contains(&format!("docker build -t {image} ")),
        "docs/operating.md does not build {image}"
    );
}

/// Every probe's port is one the container declares, and its path is one
/// r8s's admin listener answers (not 404).
async fn assert_probes_exist(c: &Value, admin_url: &str) -> usize {
    let mut n = 0;
    for probe in ["readinessProbe", "livenessProbe", "startupProbe"] {
        let get = &c[probe]["httpGet"];
        if get.is_null() {
            continue;
        }
        port_named(c, get["port"].as_str().unwrap());
        let path = get["path"].as_str().unwrap();
        let resp = crate::common::get(&format!("{admin_url}{path}")).await;
        assert_eq!(
            resp.status,
            StatusCode::OK,
            "{probe} {path}: {}",
            resp.text()
        );
        n += 1;
    }
    n
}

#[tokio::test]
async fn should_apply_the_shared_tier_and_name_only_what_exists() {
    let objs = kustomize();
    let kinds: BTreeSet<&str> = objs.iter().filter_map(|o| o["kind"].as_str()).collect();
    for k in [
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "ConfigMap",
        "Service",
        "Deployment",
        "PodDisruptionBudget",
        "Certificate",
        "Issuer",
    ] {
        assert!(kinds.contains(k), "the shared tier has no {k}: {kinds:?}");
    }

    // Server-side dry run of every kind the sim serves; nothing is stored.
    let sim = start_sim(sim_config()).await;
    let (on_server, local): (Vec<&Value>, Vec<&Value>) = objs.iter().partition(|o| served(o));
    assert!(on_server.len() >= 5, "{on_server:?}");
    assert!(
        local
            .iter()
            .all(|o| o["apiVersion"].is_string() && o["metadata"]["name"].is_string())
    );
    // The namespace must exist for objects in it to dry-run, as on an apiserver.
    let ns = send(
        "POST",
        &format!("{}/api/v1/namespaces", sim.url()),
        &[("content-type", "application/json")],
        Some(
            &json!({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "r8s"}})
                .to_string(),
        ),
    )
    .await;
    assert_eq!(ns.status, StatusCode::CREATED, "{}", ns.text());
    let rv_before = sim.sim.store.current_rv();
    let applied = dry_run_apply(&sim.url(), &on_server).await;
    assert_eq!(applied.len(), on_server.len());
    for (want, got) in on_server.iter().zip(&applied) {
        assert_eq!(got["kind"], want["kind"]);
        assert_eq!(got["metadata"]["name"], want["metadata"]["name"]);
        assert!(got["metadata"]["uid"].is_string(), "{got}");
    }
    assert_eq!(
        sim.sim.store.current_rv(),
        rv_before,
        "a dry run stored something"
    );
    for o in on_server.iter().filter(|o| o["kind"] != "Namespace") {
        let def = r8s_sim::resources::builtins()
            .into_iter()
            .find(|r| {
                o["kind"] == r.kind.as_str() && o["apiVersion"] == r.gvr.api_version().as_str()
            })
            .expect("a served kind");
        let (g, v, resource) = (def.gvr.group(), def.gvr.version(), def.gvr.resource());
        let prefix = match g {
            "" => format!("api/{v}"),
            g => format!("apis/{g}/{v}"),
        };
        let path = match def.namespaced {
            true => format!("{prefix}/namespaces/r8s/{resource}"),
            false => format!("{prefix}/{resource}"),
        };
        let name = o["metadata"]["name"].as_str().unwrap();
        let resp = crate::common::get(&format!("{}/{path}/{name}", sim.url())).await;
        assert_eq!(
            resp.status,
            StatusCode::NOT_FOUND,
            "the dry run created {path}/{name}"
        );
    }

    // What the manifests name exists: the configuration, ports, paths, image.
    let config_map = find_prefix(&objs, "ConfigMap", "r8s-config-");
    let config = config_check(config_map["data"]["r8s.toml"].as_str().unwrap());
    let deploy = find(&objs, "Deployment", "r8s");
    let r8s = container(deploy, "r8s");
    assert_image_is_the_readme_build(r8s);
    assert_eq!(
        port_named(r8s, "api"),
        port_of(config["listen"].as_str().unwrap())
    );
    assert_eq!(
        port_named(r8s, "metrics"),
        port_of(config["admin_listen"].as_str().unwrap())
    );
    let args: Vec<&str> = r8s["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args, ["serve", "--config", "/etc/r8s/r8s.toml"]);
    let mounts = r8s["volumeMounts"].as_array().unwrap();
    let volumes = pod_spec(deploy)["volumes"].as_array().unwrap();
    let volume_of = |path: &str| -> &Value {
        let m = mounts
            .iter()
            .filter(|m| path.starts_with(m["mountPath"].as_str().unwrap()))
            .max_by_key(|m| m["mountPath"].as_str().unwrap().len())
            .unwrap_or_else(|| panic!("nothing is mounted at {path}"));
        volumes.iter().find(|v| v["name"] == m["name"]).unwrap()
    };
    assert_eq!(
        volume_of("/etc/r8s/r8s.toml")["configMap"]["name"],
        config_map["metadata"]["name"]
    );
    let tls_secret =
        volume_of(config["tls"]["cert_file"].as_str().unwrap())["secret"]["secretName"].clone();
    assert_eq!(
        volume_of(config["tls"]["key_file"].as_str().unwrap())["secret"]["secretName"],
        tls_secret
    );
    let serving = find(&objs, "Certificate", "r8s-serving");
    assert_eq!(serving["spec"]["secretName"], tls_secret);
    assert!(config["tls"].get("client_ca_file").is_none());
    assert!(
        !objs
            .iter()
            .any(|o| o["metadata"]["name"] == "r8s-impersonator"),
        "r8s takes no client certificates here, so it must not be allowed to impersonate"
    );

    // Shape: replicas spread, a budget, drain inside the grace period.
    let pod_labels = &deploy["spec"]["template"]["metadata"]["labels"];
    assert!(deploy["spec"]["replicas"].as_u64().unwrap() >= 2);
    let anti = &pod_spec(deploy)["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
        [0];
    assert!(selector_matches(
        &anti["podAffinityTerm"]["labelSelector"],
        pod_labels
    ));
    assert!(selector_matches(
        &find(&objs, "PodDisruptionBudget", "r8s")["spec"]["selector"],
        pod_labels
    ));
    let grace = config["shutdown"]["grace_seconds"].as_integer().unwrap() as f64;
    let drain = config["shutdown"]["watch_drain_seconds"]
        .as_float()
        .unwrap();
    let pre_stop = r8s["lifecycle"]["preStop"]["sleep"]["seconds"]
        .as_f64()
        .unwrap();
    let termination = pod_spec(deploy)["terminationGracePeriodSeconds"]
        .as_f64()
        .unwrap();
    assert!(
        drain < grace,
        "the watch drain must fit in shutdown.grace_seconds"
    );
    assert!(
        termination >= pre_stop + grace,
        "terminationGracePeriodSeconds {termination} < preStop {pre_stop} + grace_seconds {grace}"
    );
    // Memory sized from BENCHMARKS.md: 1.42 bytes of RSS per cached byte
    // (both encodings), plus watchers and lists: at least 1.5× the budget.
    let limit = quantity_bytes(r8s["resources"]["limits"]["memory"].as_str().unwrap());
    let budget = config["cache"]["max_bytes_total"].as_integer().unwrap() as f64;
    assert!(
        budget > 0.0 && limit >= 1.5 * budget,
        "limit {limit} for a budget of {budget}"
    );

    // The Service reaches the pods' named ports; clients' kubeconfig reaches the Service.
    let svc = find(&objs, "Service", "r8s");
    assert!(
        svc["spec"]["selector"]
            .as_object()
            .unwrap()
            .iter()
            .all(|(k, v)| pod_labels[k] == *v)
    );
    for p in svc["spec"]["ports"].as_array().unwrap() {
        port_named(r8s, p["targetPort"].as_str().unwrap());
    }
    let https_port = svc["spec"]["ports"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["targetPort"] == "api")
        .unwrap()["port"]
        .as_u64()
        .unwrap();
    let kubeconfig =
        find_prefix(&objs, "ConfigMap", "r8s-client-kubeconfig-")["data"]["kubeconfig"]
            .as_str()
            .unwrap()
            .to_string();
    let client = decode_yaml(&kubeconfig);
    let server = client[0]["clusters"][0]["cluster"]["server"]
        .as_str()
        .unwrap();
    let host = format!(
        "{}.{}.svc",
        svc["metadata"]["name"].as_str().unwrap(),
        svc["metadata"]["namespace"].as_str().unwrap()
    );
    assert_eq!(server, format!("https://{host}:{https_port}"));
    assert!(
        serving["spec"]["dnsNames"]
            .as_array()
            .unwrap()
            .iter()
            .any(|n| *n == host.as_str())
    );

    // r8s's identity may list and watch everything it caches.
    assert_eq!(pod_spec(deploy)["serviceAccountName"], "r8s");
    find(&objs, "ServiceAccount", "r8s");
    let binding = find(&objs, "ClusterRoleBinding", "r8s");
    assert_eq!(binding["subjects"][0]["name"], "r8s");
    assert_eq!(binding["subjects"][0]["namespace"], "r8s");
    let role = find(
        &objs,
        "ClusterRole",
        binding["roleRef"]["name"].as_str().unwrap(),
    );
    for res in config["cache"]["resources"].as_array().unwrap() {
        let res = res.as_str().unwrap();
        let (group, plural) = match res.split('/').collect::<Vec<_>>()[..] {
            [plural] | ["v1", plural] => ("", plural),
            [group, _, plural] => (group, plural),
            _ => panic!("cache resource {res}"),
        };
        let granted = role["rules"].as_array().unwrap().iter().any(|r| {
            let has =
                |field: &str, want: &str| r[field].as_array().unwrap().iter().any(|x| *x == want);
            has("apiGroups", group)
                && has("resources", plural)
                && has("verbs", "list")
                && has("verbs", "watch")
        });
        assert!(
            granted,
            "r8s caches {res} but its ClusterRole may not list and watch it"
        );
    }

    // The probes' paths are answered by r8s itself.
    let running = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    assert_eq!(assert_probes_exist(r8s, &running.admin_url()).await, 2);
    running.stop().await;
    sim.stop().await;
}

#[tokio::test]
async fn should_apply_the_sidecar_example() {
    let text = std::fs::read_to_string(Path::new(DIR).join("sidecar.yaml")).unwrap();
    let objs = decode_yaml(&text);
    let sim = start_sim(sim_config()).await;
    let refs: Vec<&Value> = objs.iter().collect();
    assert!(
        refs.iter().all(|o| served(o)),
        "the sidecar example is served kinds only"
    );
    let rv_before = sim.sim.store.current_rv();
    let applied = dry_run_apply(&sim.url(), &refs).await;
    assert_eq!(applied.len(), 2);
    assert_eq!(
        sim.sim.store.current_rv(),
        rv_before,
        "a dry run stored something"
    );

    let deploy = find(&objs, "Deployment", "my-controller");
    let r8s = container(deploy, "r8s");
    assert_eq!(
        r8s["restartPolicy"], "Always",
        "r8s runs as a native sidecar"
    );
    assert_image_is_the_readme_build(r8s);
    // Its flags are r8s's own: `config check` takes the same ones as `serve`.
    let args: Vec<&str> = r8s["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(args[0], "serve");
    let config = config_check_args(&args[1..]);
    assert_eq!(
        port_named(r8s, "metrics"),
        port_of(config["admin_listen"].as_str().unwrap())
    );
    assert!(!config["cache"]["resources"].as_array().unwrap().is_empty());

    // The app's kubeconfig points at r8s's API listener, on loopback.
    let cm = find(&objs, "ConfigMap", "my-controller-r8s-kubeconfig");
    let kubeconfig = decode_yaml(cm["data"]["kubeconfig"].as_str().unwrap());
    assert_eq!(
        kubeconfig[0]["clusters"][0]["cluster"]["server"]
            .as_str()
            .unwrap(),
        format!("http://{}", config["listen"].as_str().unwrap())
    );
    let app = container(deploy, "app");
    assert_eq!(app["env"][0]["name"], "KUBECONFIG");

    let running = start_r8s_caching(vec![sim.url()], &["pods"]).await;
    assert_eq!(assert_probes_exist(r8s, &running.admin_url()).await, 3);
    running.stop().await;
    sim.stop().await;
}

/// A write to the sim, answered within 5 s.
async fn write(method: &str, url: &str, headers: &[(&str, &str)], body: Option<&str>) -> Resp {
    send(method, url, headers, body).await
}

#[tokio::test]
async fn should_answer_dry_run_writes_as_the_apiserver_does() {
    let sim = start_sim(sim_config()).await;
    let url = format!("{}/api/v1/namespaces/default/configmaps", sim.url());
    let body = json!({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "dry"}, "data": {"a": "1"}});
    let ct = [("content-type", "application/json")];
    let rv = sim.sim.store.current_rv();
    let created = write(
        "POST",
        &format!("{url}?dryRun=All"),
        &ct,
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let v = created.json();
    assert!(v["metadata"]["uid"].is_string());
    assert!(v["metadata"].get("resourceVersion").is_none(), "{v}");
    assert_eq!(sim.sim.store.current_rv(), rv);
    assert_eq!(
        crate::common::get(&format!("{url}/dry")).await.status,
        StatusCode::NOT_FOUND
    );

    let bad = write(
        "POST",
        &format!("{url}?dryRun=Bogus"),
        &ct,
        Some(&body.to_string()),
    )
    .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);
    assert_eq!(bad.json()["details"]["kind"], "CreateOptions");

    // Real create, then a dry-run patch and delete leave it as it was.
    let real = write("POST", &url, &ct, Some(&body.to_string())).await;
    assert_eq!(real.status, StatusCode::CREATED);
    let rv = sim.sim.store.current_rv();
    let patched = write(
        "PATCH",
        &format!("{url}/dry?dryRun=All"),
        &[("content-type", "application/merge-patch+json")],
        Some(r#"{"data":{"a":"2"}}"#),
    )
    .await;
    assert_eq!(patched.status, StatusCode::OK);
    assert_eq!(patched.json()["data"]["a"], "2");
    let deleted = write("DELETE", &format!("{url}/dry?dryRun=All"), &[], None).await;
    assert_eq!(deleted.status, StatusCode::OK);
    assert_eq!(sim.sim.store.current_rv(), rv);
    let now = crate::common::get(&format!("{url}/dry")).await;
    assert_eq!(now.json()["data"]["a"], "1");
    sim.stop().await;
}

/// The Dockerfile, checked without a Docker engine (none runs here or in CI):
/// what it copies is in the repository, a directory holding only that is a
/// complete Cargo project (cargo finds every target it declares, and the
/// lockfile in step), it builds the release without the sim, its user is
/// numeric and not root (so Kubernetes can check `runAsNonRoot`), and its
/// command's flags are r8s's own.
#[test]
fn should_give_the_dockerfile_a_complete_build_context() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let dockerfile = std::fs::read_to_string(root.join("Dockerfile")).unwrap();
    let ctx = std::env::temp_dir().join(format!("r8s-docker-ctx-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&ctx);
    std::fs::create_dir_all(&ctx).unwrap();
    let mut copied = Vec::new();
    for line in dockerfile.lines().map(str::trim) {
        let Some(rest) = line.strip_prefix("COPY ") else {
            continue;
        };
        if rest.starts_with("--from=") {
            continue;
        }
        let parts: Vec<&str> = rest.split_whitespace().collect();
        for src in &parts[..parts.len() - 1] {
            let from = root.join(src);
            assert!(
                from.exists(),
                "the Dockerfile copies {src}, which is not in the repository"
            );
            std::fs::create_dir_all(ctx.join(src).parent().unwrap()).unwrap();
            let out = Command::new("cp")
                .arg("-r")
                .arg(&from)
                .arg(ctx.join(src))
                .output()
                .unwrap();
            assert!(out.status.success());
            copied.push(src.to_string());
        }
    }
    assert!(copied.iter().any(|c| c == "src"), "{copied:?}");
    // The product without the built-in upstream: the default `sim` feature
    // off (`.ci/run` lints that build; src/lib.rs compiles the sim only with it).
    let build = dockerfile
        .lines()
        .find(|l| l.contains("cargo build"))
        .expect("a cargo build");
    assert!(
        build.contains("--release") && build.contains("--no-default-features"),
        "{build}"
    );
    // Cargo reads the manifest, finds every target it declares and checks the
    // lockfile before it picks what to build; asking for a binary that does
    // not exist stops it right there, having compiled nothing.
    let out = Command::new(env!("CARGO"))
        .args(["check", "--locked", "--offline", "--bin", "no-such-binary"])
        .env("CARGO_TARGET_DIR", ctx.join("target"))
        .current_dir(&ctx)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("no bin target named `no-such-binary`"),
        "the Dockerfile's build stage lacks a file cargo needs: {stderr}"
    );
    let _ = std::fs::remove_dir_all(&ctx);

    // The runtime has glibc, which the binary is built for: the allocator
    // BENCHMARKS.md measured (musl's is several times slower under threads).
    let froms: Vec<&str> = dockerfile
        .lines()
        .filter_map(|l| l.strip_prefix("FROM "))
        .collect();
    assert_eq!(froms.len(), 2, "{froms:?}");
    assert!(froms[0].starts_with("rust:1-bookworm "), "{froms:?}");
    assert_eq!(froms[1], "gcr.io/distroless/cc-debian12:nonroot");
    assert!(
        !dockerfile.contains("linux-musl"),
        "the image's binary is the measured (glibc) one"
    );
    let user = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("USER "))
        .unwrap();
    let uid: u32 = user
        .split(':')
        .next()
        .unwrap()
        .parse()
        .expect("a numeric USER");
    assert_ne!(uid, 0);

    // The default command, with its configuration file taken from the repository.
    let cmd = dockerfile
        .lines()
        .rev()
        .find_map(|l| l.strip_prefix("CMD "))
        .unwrap();
    let args: Vec<String> = serde_json::from_str(cmd).unwrap();
    assert_eq!(args[0], "serve");
    let args: Vec<String> = args[1..]
        .iter()
        .map(|a| {
            a.replace(
                "/etc/r8s/r8s.toml",
                &root.join("config/r8s.toml").to_string_lossy(),
            )
        })
        .collect();
    let config = config_check_args(&args);
    let exposed: Vec<u64> = dockerfile
        .lines()
        .find_map(|l| l.strip_prefix("EXPOSE "))
        .unwrap()
        .split_whitespace()
        .map(|p| p.parse().unwrap())
        .collect();
    assert_eq!(
        exposed,
        [
            port_of(config["listen"].as_str().unwrap()),
            port_of(config["admin_listen"].as_str().unwrap())
        ]
    );

    // docs/operating.md's `docker run`: as the invoking user (a kubeconfig is
    // usually 0600), and what follows the image is a command r8s accepts.
    let readme = std::fs::read_to_string(root.join("docs/operating.md")).unwrap();
    let example = readme
        .split("## The container image")
        .nth(1)
        .and_then(|s| s.split("```sh").nth(1))
        .and_then(|s| s.split("```").next())
        .unwrap()
        .replace("\\\n", " ");
    let run = example
        .lines()
        .find(|l| l.starts_with("docker run "))
        .expect("a docker run example");
    assert!(run.contains("--user \"$(id -u):$(id -g)\""), "{run}");
    let image = concat!("r8s:", env!("CARGO_PKG_VERSION"));
    let after: Vec<String> = run
        .split_once(&format!(" {image} "))
        .expect("docker run names the built image")
        .1
        .split_whitespace()
        .map(|a| {
            a.replace(
                "/etc/r8s/r8s.toml",
                &root.join("config/r8s.toml").to_string_lossy(),
            )
        })
        .collect();
    assert_eq!(after[0], "serve");
    let kubeconfig = scratch("kubeconfig", "apiVersion: v1\nkind: Config\n");
    let args: Vec<String> = after[1..]
        .iter()
        .map(|a| a.replace("/etc/r8s/kubeconfig", &kubeconfig.to_string_lossy()))
        .collect();
    config_check_args(&args);
}
