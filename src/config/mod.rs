//! Configuration: built-in defaults < TOML file < `R8S_` environment < CLI flags.
//!
//! - [`settings`]: the keys and their defaults (all in `config/r8s.toml`, with why).
//! - [`load`](mod@load): reading the sources; every problem at once, each
//!   naming the key, the value and where it came from.
//! - [`validate`]: every number in range and every entry well formed, so a
//!   bad value stops r8s before it binds a port, never later.

pub mod entry;
pub mod load;
pub mod settings;
pub mod validate;

pub use entry::ResourceEntry;
pub use load::{
    AuditOverrides, CacheOverrides, Check, ConfigError, LogOverrides, NodeOverrides, Overrides,
    UpstreamOverrides, load, load_checked,
};
pub use settings::*;

#[cfg(test)]
#[allow(clippy::result_large_err)] // figment::Jail's closures return figment::Error
mod tests {
    use super::*;
    use figment::Jail;
    use std::path::Path;

    #[test]
    fn should_layer_file_env_and_flags() {
        Jail::expect_with(|jail| {
            jail.create_file(
                "r8s.toml",
                "listen = \"127.0.0.1:9000\"\n[upstream]\nservers = [\"http://a:1\"]\n",
            )?;
            jail.set_env("R8S_ADMIN_LISTEN", "127.0.0.1:9001");
            jail.set_env("R8S_UPSTREAM__CONTEXT", "ctx");
            let o = Overrides {
                listen: Some("127.0.0.1:9002".into()),
                ..Default::default()
            };
            let c = load(Some(Path::new("r8s.toml")), &o).map_err(|e| e.to_string())?;
            assert_eq!(c.listen.port(), 9002);
            assert_eq!(c.admin_listen.port(), 9001);
            assert_eq!(c.upstream.servers, vec!["http://a:1".to_string()]);
            assert_eq!(c.upstream.context.as_deref(), Some("ctx"));
            Ok(())
        });
    }

    #[test]
    fn should_take_the_node_from_the_environment_or_the_flag_and_check_it() {
        Jail::expect_with(|jail| {
            jail.set_env("R8S_NODE__NAME", "worker-7.example");
            let c = load(None, &Overrides::default()).map_err(|e| e.to_string())?;
            assert_eq!(c.node.name, "worker-7.example");
            let o = Overrides {
                node: NodeOverrides {
                    name: Some("worker-8".into()),
                },
                ..Default::default()
            };
            let c = load(None, &o).map_err(|e| e.to_string())?;
            assert_eq!(c.node.name, "worker-8");
            let mut bad = c.clone();
            for name in ["Worker", "-a", "a_b", "a..b"] {
                bad.node.name = name.into();
                let errs = bad.validate().unwrap_err();
                assert!(
                    errs.iter()
                        .any(|(k, e)| *k == "node.name" && e.contains(name)),
                    "{name}: {errs:?}"
                );
            }
            Ok(())
        });
    }

    #[test]
    fn should_name_key_value_and_file() {
        Jail::expect_with(|jail| {
            jail.create_file("bad.toml", "upstrem = 1\n")?;
            let e = load(Some(Path::new("bad.toml")), &Overrides::default()).unwrap_err();
            let all = e.to_string();
            assert!(all.contains("unknown key \"upstrem\""), "{all}");
            assert!(all.contains("bad.toml"), "{all}");
            let e = load(Some(Path::new("missing.toml")), &Overrides::default()).unwrap_err();
            assert!(e.to_string().contains("missing.toml"));
            jail.create_file("bad2.toml", "listen = \"nope\"\n")?;
            let e = load(Some(Path::new("bad2.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("\"listen\"") && e.contains("nope") && e.contains("bad2.toml"),
                "{e}"
            );
            jail.create_file(
                "bad3.toml",
                "[cache]\nresources = [\"apps/x/deployments\"]\n",
            )?;
            let e = load(Some(Path::new("bad3.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("apps/x/deployments"), "{e}");
            jail.create_file("bad4.toml", "[cache]\nencodings = [\"yaml\"]\n")?;
            let e = load(Some(Path::new("bad4.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("\"cache.encodings\"") && e.contains("\"yaml\""),
                "{e}"
            );
            jail.create_file("bad5.toml", "[cache]\nencodings = [\"protobuf\"]\n")?;
            let e = load(Some(Path::new("bad5.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(e.contains("must list \"json\""), "{e}");
            jail.create_file("bad6.toml", "[upstream]\nversion = \"v1.21\"\n")?;
            let e = load(Some(Path::new("bad6.toml")), &Overrides::default())
                .unwrap_err()
                .to_string();
            assert!(
                e.contains("\"upstream.version\"") && e.contains("MAJOR.MINOR"),
                "{e}"
            );
            jail.create_file("good.toml", "[cache]\nencodings = [\"json\"]\n")?;
            let c = load(Some(Path::new("good.toml")), &Overrides::default())
                .map_err(|e| e.to_string())?;
            assert_eq!(c.cache.encodings, vec!["json".to_string()]);
            Ok(())
        });
    }
}
