//! A serving certificate for loopback, made by r8s itself
//! (`tls.self_signed`): a node-local r8s listens on 127.0.0.1, where no
//! cluster CA issues certificates, and its node's kubelet must still verify
//! it. Made once where `tls.cert_file` and `tls.key_file` do not exist, and
//! kept: the kubelet's kubeconfig names the certificate as its CA, so it
//! must outlive restarts (it lives beside the snapshots, on the node).

use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;

/// How many years the certificate is valid: the node's life, in practice
/// (a node is replaced long before; an expired one is made again once its
/// files are removed).
const VALID_YEARS: i32 = 10;

/// Makes a self-signed certificate for `localhost`, 127.0.0.1 and ::1 at
/// `cert` (0644) and its key at `key` (0600), unless both exist. Whether
/// it made them; else what failed.
pub fn ensure(cert: &Path, key: &Path) -> Result<bool, String> {
    if cert.exists() && key.exists() {
        return Ok(false);
    }
    let err = |what: &str, e: &dyn std::fmt::Display| format!("making a self-signed {what}: {e}");
    let mut params = rcgen::CertificateParams::new(vec!["localhost".to_string()])
        .map_err(|e| err("certificate's parameters", &e))?;
    params.subject_alt_names.extend([
        rcgen::SanType::IpAddress(std::net::Ipv4Addr::LOCALHOST.into()),
        rcgen::SanType::IpAddress(std::net::Ipv6Addr::LOCALHOST.into()),
    ]);
    let mut name = rcgen::DistinguishedName::new();
    name.push(rcgen::DnType::CommonName, "r8s on this node's loopback");
    params.distinguished_name = name;
    // Valid from rcgen's default (1975), until January of ten years on.
    let secs = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_secs());
    let year = 1970 + (secs / 31_556_952) as i32;
    params.not_after = rcgen::date_time_ymd(year + VALID_YEARS, 1, 1);
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let pair = rcgen::KeyPair::generate().map_err(|e| err("key", &e))?;
    let made = params
        .self_signed(&pair)
        .map_err(|e| err("certificate", &e))?;
    for dir in [cert.parent(), key.parent()].into_iter().flatten() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write(key, pair.serialize_pem().as_bytes(), 0o600)?;
    write(cert, made.pem().as_bytes(), 0o644)?;
    Ok(true)
}

/// `bytes` written to `path` whole (aside, then renamed), with `mode`.
fn write(path: &Path, bytes: &[u8], mode: u32) -> Result<(), String> {
    let fail = |e: std::io::Error| format!("{}: {e}", path.display());
    let aside = path.with_extension("new");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(mode)
        .open(&aside)
        .map_err(fail)?;
    f.write_all(bytes).map_err(fail)?;
    f.sync_all().map_err(fail)?;
    std::fs::rename(&aside, path).map_err(fail)
}
