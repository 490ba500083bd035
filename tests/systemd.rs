//! r8s under systemd (`Type=notify`): the notifications as a socket the
//! test owns receives them, and the unit as `systemd-analyze verify` reads
//! it.

use std::io::{BufRead, BufReader};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::common::*;

const BIN: &str = env!("CARGO_BIN_EXE_r8s");

/// A child process killed if the test fails before it ends.
struct Reaped(std::process::Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The notifications received so far, in order.
type Heard = Arc<Mutex<Vec<String>>>;

fn listen(path: &std::path::Path) -> Heard {
    let sock = tokio::net::UnixDatagram::bind(path).unwrap();
    let heard: Heard = Arc::default();
    let mine = heard.clone();
    tokio::spawn(async move {
        let mut buf = vec![0u8; 4096];
        while let Ok(n) = sock.recv(&mut buf).await {
            mine.lock()
                .unwrap()
                .push(String::from_utf8_lossy(&buf[..n]).into_owned());
        }
    });
    heard
}

/// Whether `state` is heard within `within`.
async fn heard_within(heard: &Heard, state: &str, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        if heard
            .lock()
            .unwrap()
            .iter()
            .any(|m| m.lines().any(|l| l == state))
        {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn should_tell_systemd_ready_once_synced_pet_the_watchdog_and_say_stopping() {
    let dir = std::env::temp_dir().join(format!("r8s-notify-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let socket = dir.join("notify.sock");
    let _ = std::fs::remove_file(&socket);
    let heard = listen(&socket);
    let sim = start_sim(sim_config()).await;
    // The upstream refuses watches at first (503): r8s answers discovery
    // but cannot sync its cache (its streaming list is a watch).
    sim.sim.interrupt_watches(true);
    // systemd sets WATCHDOG_PID to the service's pid: the shell's, which
    // exec hands to r8s.
    let mut child = Command::new("sh")
        .args([
            "-c",
            &format!(
                "WATCHDOG_PID=$$ exec {BIN} serve --upstream {} --cache pods --listen 127.0.0.1:0 --admin-listen 127.0.0.1:0",
                sim.url()
            ),
        ])
        .env("NOTIFY_SOCKET", &socket)
        .env("WATCHDOG_USEC", "200000")
        .env("RUST_LOG", "info")
        .env_remove("R8S_CONFIG")
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    let mut child = Reaped(child);
    // r8s's log, kept to tell what it was doing should a step not come.
    let log: Arc<Mutex<Vec<String>>> = Arc::default();
    let kept = log.clone();
    let admin = tokio::task::spawn_blocking(move || {
        let mut r = BufReader::new(stderr);
        let mut line = String::new();
        loop {
            line.clear();
            assert!(r.read_line(&mut line).unwrap() > 0, "r8s ended early");
            kept.lock().unwrap().push(line.clone());
            if line.contains("r8s serving") {
                let admin = line.split("admin=").nth(1).unwrap();
                let admin = admin.split_whitespace().next().unwrap().to_string();
                // Keep draining stderr so r8s never blocks on it.
                std::thread::spawn(move || {
                    loop {
                        line.clear();
                        if !r.read_line(&mut line).is_ok_and(|n| n > 0) {
                            break;
                        }
                        kept.lock().unwrap().push(line.clone());
                    }
                });
                return admin;
            }
        }
    });
    let admin = tokio::time::timeout(HANG, admin)
        .await
        .expect("r8s printed its serving line")
        .unwrap();
    let readyz = format!("http://{admin}/readyz");

    // Not ready while the caches cannot sync, and systemd is not told so;
    // the watchdog is petted all the same (the process is alive).
    tokio::time::sleep(Duration::from_millis(1500)).await;
    assert_ne!(get(&readyz).await.status, 200);
    {
        let h = heard.lock().unwrap();
        assert!(!h.iter().any(|m| m.contains("READY=1")), "{h:?}");
        assert!(
            h.iter().filter(|m| m.contains("WATCHDOG=1")).count() >= 3,
            "{h:?}"
        );
    }

    // The upstream takes watches again: READY=1 comes once /readyz says ready.
    sim.sim.accept_watches();
    assert!(
        heard_within(&heard, "READY=1", Duration::from_secs(20)).await,
        "no READY=1 within 20 s: {:?}\nr8s's log:\n{}",
        heard.lock().unwrap(),
        log.lock().unwrap().concat()
    );
    assert_eq!(
        get(&readyz).await.status,
        200,
        "READY=1 means /readyz is 200"
    );

    // SIGTERM: STOPPING=1 as the drain starts; exit 0.
    assert!(
        Command::new("kill")
            .args(["-TERM", &child.0.id().to_string()])
            .status()
            .unwrap()
            .success()
    );
    let stopping = heard_within(&heard, "STOPPING=1", Duration::from_secs(5)).await;
    assert!(
        stopping,
        "no STOPPING=1 within 5 s of SIGTERM (r8s {}): {:?}\nr8s's log:\n{}",
        match child.0.try_wait() {
            Ok(Some(s)) => format!("ended: {s}"),
            Ok(None) => "still running".to_string(),
            Err(e) => format!("unknown: {e}"),
        },
        heard.lock().unwrap(),
        log.lock().unwrap().concat()
    );
    let status = tokio::task::spawn_blocking(move || child.0.wait().unwrap())
        .await
        .unwrap();
    assert_eq!(status.code(), Some(0));
    let h = heard.lock().unwrap().clone();
    let ready = h.iter().position(|m| m.contains("READY=1")).unwrap();
    let stopping = h.iter().position(|m| m.contains("STOPPING=1")).unwrap();
    assert!(ready < stopping, "{h:?}");
    sim.stop().await;
}

/// A shipped unit, with `ExecStart` pointing at this build's binary (the
/// unit's own path, /usr/local/bin/r8s, is where an install puts it).
fn unit_here(dir: &std::path::Path, name: &str) -> std::path::PathBuf {
    let shipped =
        std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd")).join(name);
    let unit = std::fs::read_to_string(&shipped).unwrap();
    assert!(unit.contains("ExecStart=/usr/local/bin/r8s serve"));
    let path = dir.join(name);
    std::fs::write(&path, unit.replace("/usr/local/bin/r8s", BIN)).unwrap();
    path
}

/// Every unit deploy/systemd ships: the control-plane node's own r8s, the
/// node-client tier and the node-local r8s (issue 75).
const UNITS: [&str; 3] = [
    "r8s.service",
    "r8s-node-tier.service",
    "r8s-node-local.service",
];

#[test]
fn should_ship_notify_units_that_systemd_analyze_verifies_with_low_exposure() {
    let dir = std::env::temp_dir().join(format!("r8s-unit-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let mut shipped: Vec<String> =
        std::fs::read_dir(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd"))
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .filter(|n| n.ends_with(".service"))
            .collect();
    shipped.sort();
    let mut listed = UNITS.map(String::from).to_vec();
    listed.sort();
    assert_eq!(shipped, listed, "every shipped unit is checked here");
    for name in UNITS {
        let unit = unit_here(&dir, name);
        let text = std::fs::read_to_string(&unit).unwrap();
        for line in [
            "Type=notify",
            "WatchdogSec=",
            "SystemCallFilter=@system-service",
            "CapabilityBoundingSet=\n",
            "ProtectSystem=strict",
        ] {
            assert!(text.contains(line), "{name} has {line:?}");
        }
        let verify = Command::new("systemd-analyze")
            .args(["verify", "--man=no"])
            .arg(&unit)
            .output()
            .expect("systemd-analyze (Debian's systemd package; .ci/run installs it)");
        assert!(
            verify.status.success() && verify.stderr.is_empty(),
            "{name}: {}",
            String::from_utf8_lossy(&verify.stderr)
        );
        let security = Command::new("systemd-analyze")
            .args(["security", "--offline=yes", "--no-pager"])
            .arg(&unit)
            .output()
            .unwrap();
        let out = String::from_utf8_lossy(&security.stdout);
        let exposure: f64 = out
            .lines()
            .find_map(|l| {
                l.split(&format!("Overall exposure level for {name}: "))
                    .nth(1)
            })
            .and_then(|rest| rest.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .unwrap_or_else(|| panic!("no exposure level for {name} in {out}"));
        assert!(
            exposure <= 1.5,
            "{name}: exposure {exposure} (docs/operating.md says 1.1, 1.4 for node-local)"
        );
    }
}

/// What the node-client and node-local units must hold to: credentials the
/// way each needs them (the tier's copied in; node-local's read live, as the
/// kubelet rotates them), the configuration each ships with, and the
/// node-local r8s before the kubelet without requiring it.
#[test]
fn should_ship_node_units_that_read_credentials_as_their_shapes_need() {
    let read = |n: &str| {
        std::fs::read_to_string(
            std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/systemd")).join(n),
        )
        .unwrap()
    };
    let tier = read("r8s-node-tier.service");
    for line in [
        "LoadCredential=tls.key:/etc/kubernetes/pki/apiserver.key",
        "Environment=R8S_TLS__KEY_FILE=%d/tls.key",
        "--config /etc/r8s/node-tier.toml",
        "DynamicUser=yes",
    ] {
        assert!(tier.contains(line), "the tier's unit has {line:?}");
    }
    let local = read("r8s-node-local.service");
    for line in [
        "Environment=R8S_NODE__NAME=%H",
        "--config /etc/r8s/node-local.toml",
        "Before=kubelet.service",
        "BindReadOnlyPaths=/etc/kubernetes/kubelet.conf /etc/kubernetes/pki/ca.crt /var/lib/kubelet/pki",
        "StateDirectory=r8s\n",
    ] {
        assert!(local.contains(line), "the node-local unit has {line:?}");
    }
    assert!(
        !local
            .lines()
            .any(|l| l.starts_with("Requires=") || l.starts_with("LoadCredential=")),
        "node-local requires nothing and reads its credentials live"
    );
    // The paths it may read are the ones its configuration names.
    let toml = std::fs::read_to_string(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../deploy/node-local/r8s.toml"
    ))
    .unwrap();
    for path in [
        "/etc/kubernetes/kubelet.conf",
        "/etc/kubernetes/pki/ca.crt",
        "/var/lib/r8s/cache",
        "/var/lib/r8s/tls/tls.crt",
    ] {
        assert!(toml.contains(path), "node-local r8s.toml names {path}");
    }
}
