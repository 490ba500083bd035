//! The integration tests, one binary: each file of `tests/` is a module of
//! it, so the suite links once and `cargo test` spreads every file's tests
//! over the test threads together (`cargo test --test suite watch::` runs
//! one file's). Shared helpers are in `common/`; `source/` reads `src/` for
//! `structure`.

mod common;
mod source;

mod apis;
mod audit;
mod auth;
mod auth_tls;
mod cache;
mod cache_budget;
mod cache_kube_rs;
mod chaos;
mod cli;
mod config_numbers;
mod conformance;
mod consistency;
mod consistent;
mod consistent_faults;
mod deploy;
mod deploy_nodes;
mod failover;
mod fairness;
mod fairness_kit;
mod faults;
mod fuzz;
mod gzip;
mod identity_attack;
mod kube136;
mod kube136_attack;
mod kube136_audit;
mod kube136_conformance;
mod kube136_fields;
mod kube136_kubectl;
mod kube136_shard;
mod kubectl;
mod managed_fields;
mod metrics;
mod monitoring;
mod node_index;
mod node_kubelets;
mod node_local;
mod node_outage;
mod node_scope;
mod outage;
mod overload;
mod persist;
mod persist_crash;
mod persist_faults;
mod protobuf;
mod proxy;
mod reflector;
mod shard;
mod sim_crd;
mod structure;
mod systemd;
mod table;
mod table_kinds;
mod upstream_down;
mod watch;
mod watch_clients;
mod watch_drain;
mod watch_fanout;
mod watch_slow;
