//! `r8s demo`: the built-in upstream with sample objects and r8s in front of
//! it, in one process, printing commands that work as printed.

use std::net::SocketAddr;

use r8s::config::Config;
use r8s::{Listeners, prepare, shutdown};

use crate::cli::DemoArgs;
use crate::{self as sim, SimConfig};

/// What to print once the demo is up.
pub fn instructions(api: SocketAddr, admin: SocketAddr, sim: SocketAddr, pods: usize) -> String {
    format!(
        "r8s demo is up: r8s on http://{api} in front of the built-in upstream on http://{sim} ({pods} pods).

Try (each command works as printed; r8s proves kubectl's consistent lists against
the upstream, a current one, read.consistent_lists = \"auto\", so they are answered
from its cache):
  kubectl --server http://{api} get pods -A        # a hit: the Table printed by r8s
  kubectl --server http://{api} get pods -n ns-0 -o wide
  kubectl --server http://{api} get pods -n ns-0 -w   # the list and the watch of Tables: hits
  kubectl --server http://{api} get deploy -A -o wide
  curl -s 'http://{api}/api/v1/pods?resourceVersion=0' | head -c 400; echo
  curl -sN 'http://{api}/api/v1/namespaces/ns-0/pods?watch=1&timeoutSeconds=5' | cut -c1-150
  curl -si 'http://{api}/api/v1/namespaces/ns-0/pods?resourceVersion=0&limit=1' | grep -i x-r8s-cache
  curl -si 'http://{api}/api/v1/namespaces/ns-0/pods?limit=1' | grep -i x-r8s-cache
  curl -si 'http://{api}/api/v1/namespaces/ns-0/pods?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan&allowWatchBookmarks=true&timeoutSeconds=2' | grep -i x-r8s-cache
  curl -s http://{admin}/metrics | grep ^r8s_

Straight to the upstream, for comparison: kubectl --server http://{sim} get pods -A
Stop with Ctrl-C.
"
    )
}

/// Runs the demo until SIGTERM/SIGINT.
pub async fn run(args: DemoArgs) -> Result<(), String> {
    let sim_listener = tokio::net::TcpListener::bind(args.sim_listen)
        .await
        .map_err(|e| format!("cannot listen on {} (--sim-listen): {e}", args.sim_listen))?;
    let sim = sim::start(
        SimConfig {
            pods: args.pods,
            churn: args.churn,
            ..SimConfig::default()
        },
        sim_listener,
    )
    .await
    .map_err(|e| format!("cannot start the built-in upstream: {e}"))?;
    let mut config = Config {
        listen: args.listen,
        admin_listen: args.admin_listen,
        ..Config::default()
    };
    config.upstream.servers = vec![sim.url()];
    config.cache.resources = [
        "pods",
        "v1/configmaps",
        "apps/v1/deployments",
        "example.r8s.dev/v1/widgets",
    ]
    .map(String::from)
    .to_vec();
    let prepared = prepare(config).await.map_err(|e| e.to_string())?;
    let api = tokio::net::TcpListener::bind(args.listen)
        .await
        .map_err(|e| format!("cannot listen on {} (--listen): {e}", args.listen))?;
    let admin = tokio::net::TcpListener::bind(args.admin_listen)
        .await
        .map_err(|e| {
            format!(
                "cannot listen on {} (--admin-listen): {e}",
                args.admin_listen
            )
        })?;
    let (api_addr, admin_addr) = (
        api.local_addr().map_err(|e| e.to_string())?,
        admin.local_addr().map_err(|e| e.to_string())?,
    );
    println!(
        "{}",
        instructions(api_addr, admin_addr, sim.addr, args.pods)
    );
    let (trigger, signal) = shutdown::channel();
    tokio::spawn(async move {
        shutdown::os_signal().await;
        trigger.fire();
    });
    prepared.run(Listeners { api, admin }, signal).await;
    sim.stop().await;
    Ok(())
}
