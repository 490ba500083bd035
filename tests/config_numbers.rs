//! Every number in the configuration is checked before r8s binds a port: set
//! one at a time to a negative, NaN, infinite or absurdly large value, in the
//! file and in the environment, `r8s config check` and `r8s serve` both exit
//! 2 with one message naming the key and where the value came from, and
//! never panic.

use std::collections::BTreeMap;
use std::process::{Command, Output};

use r8s::config::Config;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// Every numeric key of the configuration (`cache.page_size`, ...), read
/// from the defaults, so a key added later is covered without editing this.
fn numeric_keys() -> Vec<String> {
    fn walk(prefix: &str, v: &serde_json::Value, out: &mut Vec<String>) {
        match v {
            serde_json::Value::Object(m) => {
                for (k, v) in m {
                    let key = if prefix.is_empty() {
                        k.clone()
                    } else {
                        format!("{prefix}.{k}")
                    };
                    walk(&key, v, out);
                }
            }
            serde_json::Value::Number(_) => out.push(prefix.to_string()),
            _ => {}
        }
    }
    let mut out = Vec::new();
    walk(
        "",
        &serde_json::to_value(Config::default()).unwrap(),
        &mut out,
    );
    out
}

fn r8s(args: &[&str], env: &BTreeMap<String, String>) -> Output {
    let mut cmd = Command::new(BIN);
    for (k, _) in std::env::vars() {
        if k.starts_with("R8S_") {
            cmd.env_remove(k);
        }
    }
    // From the repository's top, as a user runs it (config/r8s.toml).
    cmd.args(args)
        .envs(env)
        .current_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/.."))
        .output()
        .unwrap()
}

/// One bad value: in a config file or in the environment, and the texts
/// that name where it came from.
struct Case {
    toml: Option<String>,
    env: BTreeMap<String, String>,
    sources: [String; 2],
}

/// A port this test holds, so a `serve` that got as far as binding would say so.
fn held_port() -> (std::net::TcpListener, String) {
    let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = l.local_addr().unwrap().to_string();
    (l, addr)
}

#[test]
fn should_reject_every_bad_number_by_key_and_source_before_binding() {
    let keys = numeric_keys();
    assert!(keys.len() >= 19, "the numeric keys: {keys:?}");
    let dir = std::env::temp_dir().join(format!("r8s-config-numbers-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (_held, addr) = held_port();
    let mut checked = 0;
    for key in &keys {
        let (section, name) = key.split_once('.').expect("numeric keys are in sections");
        let var = format!("R8S_{}", key.replace('.', "__").to_ascii_uppercase());
        let file = dir.join(format!("{key}.toml"));
        let file_s = file.display().to_string();
        // figment names a file by its path, relative to the working
        // directory when that is shorter: the name is what is sure.
        let in_file = String::from("TOML file");
        let file_name = format!("{key}.toml");
        let mut cases: Vec<Case> = Vec::new();
        for v in ["-1", "nan", "inf", "-inf", "1e300", "9223372036854775807"] {
            cases.push(Case {
                toml: Some(format!("[{section}]\n{name} = {v}\n")),
                env: BTreeMap::new(),
                sources: [in_file.clone(), file_name.clone()],
            });
        }
        for v in ["-1", "NaN", "inf", "1e300", "18446744073709551615"] {
            cases.push(Case {
                toml: None,
                env: BTreeMap::from([(var.clone(), v.to_string())]),
                sources: ["environment variable".into(), var.clone()],
            });
        }
        for Case { toml, env, sources } in cases {
            let mut args = vec!["--upstream", "http://127.0.0.1:1"];
            if let Some(t) = &toml {
                std::fs::write(&file, t).unwrap();
                args.extend(["--config", &file_s]);
            }
            let what = format!("{key} = {:?} / {env:?}", toml.as_deref().unwrap_or(""));
            let check = r8s(&[&["config", "check"], &args[..]].concat(), &env);
            let err = String::from_utf8_lossy(&check.stderr).into_owned();
            assert_eq!(check.status.code(), Some(2), "{what}: {err}");
            assert!(
                err.contains(&format!("\"{key}\"")),
                "{what}: names the key: {err}"
            );
            for source in &sources {
                assert!(
                    err.contains(source.as_str()),
                    "{what}: names {source}: {err}"
                );
            }
            assert_eq!(err.trim().lines().count(), 1, "{what}: one problem: {err}");
            let serve_args = [
                &["serve", "--listen", &addr, "--admin-listen", &addr],
                &args[..],
            ]
            .concat();
            let serve = r8s(&serve_args, &env);
            let serve_err = String::from_utf8_lossy(&serve.stderr).into_owned();
            assert_eq!(serve.status.code(), Some(2), "{what}: serve: {serve_err}");
            assert!(!serve_err.contains("panicked"), "{what}: {serve_err}");
            assert_eq!(
                serve_err, err,
                "{what}: serve stops with the same message, before binding"
            );
            checked += 1;
        }
    }
    assert_eq!(checked, keys.len() * 11);
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn should_accept_the_documented_defaults_and_limits() {
    // The shipped file (every key at its default) passes, and so do the ends of the ranges.
    let out = r8s(
        &["config", "check", "--config", "config/r8s.toml"],
        &BTreeMap::new(),
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = BTreeMap::from([
        (
            "R8S_CACHE__WAIT_FOR_RESOURCE_VERSION_SECONDS".to_string(),
            "0".to_string(),
        ),
        ("R8S_CACHE__MAX_BYTES_TOTAL".to_string(), "0".to_string()),
        (
            "R8S_WATCH__MIN_TIMEOUT_SECONDS".to_string(),
            "1".to_string(),
        ),
        (
            "R8S_SHUTDOWN__WATCH_DRAIN_SECONDS".to_string(),
            "0.5".to_string(),
        ),
    ]);
    let out = r8s(&["config", "check"], &env);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let env = BTreeMap::from([(
        "R8S_WATCH__MIN_TIMEOUT_SECONDS".to_string(),
        "0".to_string(),
    )]);
    let out = r8s(&["config", "check"], &env);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(
            "bad value 0 for key \"watch.min_timeout_seconds\": expected seconds in [1, 604800]"
        ) && err.contains("R8S_WATCH__MIN_TIMEOUT_SECONDS"),
        "{err}"
    );
}
