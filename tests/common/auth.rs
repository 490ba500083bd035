//! An upstream with authentication, as the tests set it up: a token file
//! (r8s's own token and an admin's first), an ABAC policy, and r8s's token
//! in a file of its own, written in a fresh directory.

use std::path::PathBuf;

use r8s::config::{AuthMode, Config};
use r8s_sim::SimConfig;

/// The sim's users every auth fixture has: r8s itself and an admin, both
/// `system:masters`.
pub const R8S_AND_ADMIN: &str =
    "r8s-token,r8s,uid-r8s,\"system:masters\"\nadmin-token,admin,uid-admin,\"system:masters\"\n";

/// The files of one test's authenticating upstream.
pub struct AuthFiles {
    /// The directory they are in (the test may put more there).
    pub dir: PathBuf,
    /// `token,user,uid,"groups"` lines, as kube-apiserver's `--token-auth-file`.
    pub tokens: PathBuf,
    /// ABAC policy lines, as kube-apiserver's `--authorization-policy-file`
    /// (none: every authenticated user may do anything).
    pub policy: Option<PathBuf>,
    /// r8s's own token (`upstream.token_file`).
    pub own_token: PathBuf,
}

impl AuthFiles {
    /// Writes them under a fresh directory named for `name`: r8s and an
    /// admin, then `more_users` (CSV lines), and `policy` (JSON lines; an
    /// empty one allows only `system:masters`).
    pub fn write(name: &str, more_users: &str, policy: Option<&str>) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "r8s-auth-{name}-{}-{}",
            std::process::id(),
            fastrand::u64(..)
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let files = AuthFiles {
            tokens: dir.join("tokens.csv"),
            policy: policy.map(|_| dir.join("policy.jsonl")),
            own_token: dir.join("r8s-token"),
            dir,
        };
        std::fs::write(&files.tokens, format!("{R8S_AND_ADMIN}{more_users}")).unwrap();
        if let (Some(path), Some(lines)) = (&files.policy, policy) {
            std::fs::write(path, lines).unwrap();
        }
        std::fs::write(&files.own_token, "r8s-token").unwrap();
        files
    }

    /// `base` authenticating and authorizing with these files.
    pub fn sim(&self, base: SimConfig) -> SimConfig {
        SimConfig {
            tokens: Some(self.tokens.clone()),
            policy: self.policy.clone(),
            ..base
        }
    }

    /// r8s in delegated mode, with its own token.
    pub fn delegate(&self, c: &mut Config) {
        c.upstream.token_file = Some(self.own_token.clone());
        c.auth.mode = Some(AuthMode::Delegated);
    }
}
