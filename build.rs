//! Stamps the build with its commit (`r8s_build_info`, `r8s --version`):
//! `BUILD_GIT_COMMIT` when set (a container build without `.git`), else
//! `git rev-parse`, else "unknown".

fn main() {
    println!("cargo:rerun-if-env-changed=BUILD_GIT_COMMIT");
    println!("cargo:rerun-if-changed=.git/HEAD");
    println!("cargo:rerun-if-changed=.git/refs/heads");
    let commit = std::env::var("BUILD_GIT_COMMIT")
        .ok()
        .filter(|c| !c.is_empty())
        .or_else(|| {
            std::process::Command::new("git")
                .args(["rev-parse", "--short=12", "HEAD"])
                .output()
                .ok()
                .filter(|o| o.status.success())
                .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        })
        .unwrap_or_else(|| "unknown".into());
    println!("cargo:rustc-env=BUILD_GIT_COMMIT={commit}");
}
