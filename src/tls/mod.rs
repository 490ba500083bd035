//! TLS for the API listener: rustls with ALPN (`h2`, `http/1.1`), the serving
//! certificate, its key and the client CA re-read when their files change
//! (cert-manager rotations need no restart), and client certificates asked
//! for when `tls.client_ca_file` is set (optional: token and anonymous
//! clients connect too), verified per request as kube-apiserver verifies
//! them ([`client`]); on loopback, a certificate r8s makes itself
//! ([`self_signed`]).

pub mod client;
pub mod self_signed;
pub mod x509;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::time::{Duration, SystemTime};

use rustls::ServerConfig;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::WebPkiClientVerifier;
use rustls::server::danger::ClientCertVerifier;
use rustls::sign::CertifiedKey;
use tokio_rustls::TlsAcceptor;

use self::client::ClientCa;
use crate::config::TlsConfig;
use crate::shutdown::Signal;
use crate::sync::{MutexExt, RwLockExt};

/// How often the certificate files are checked for changes.
const RELOAD_CHECK: Duration = Duration::from_secs(1);

/// Why TLS could not be set up (each names the key and the file).
#[derive(Debug, thiserror::Error)]
pub enum TlsError {
    /// A file could not be read or holds no usable PEM.
    #[error("{key} {}: {reason}", path.display())]
    File {
        /// The config key.
        key: &'static str,
        /// The file.
        path: PathBuf,
        /// What is wrong with it.
        reason: String,
    },
    /// rustls refused the combination.
    #[error("TLS setup: {0}")]
    Rustls(#[from] rustls::Error),
}

/// The API listener's TLS: the acceptor built from the latest files.
pub struct Tls {
    current: RwLock<TlsAcceptor>,
    /// The client CA's verifier (with `tls.client_ca_file`), replaced on reload.
    client_ca: Option<Arc<ClientCa>>,
    config: TlsConfig,
    /// Certificate, key and (if set) client CA, watched for changes.
    files: Vec<PathBuf>,
    seen: Mutex<Vec<Option<SystemTime>>>,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn file_err(key: &'static str, path: &Path, reason: impl ToString) -> TlsError {
    TlsError::File {
        key,
        path: path.to_path_buf(),
        reason: reason.to_string(),
    }
}

fn read_certs(key: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| file_err(key, path, e))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| file_err(key, path, e))?;
    if certs.is_empty() {
        return Err(file_err(key, path, "no PEM certificate in the file"));
    }
    Ok(certs)
}

fn certified_key(cert: &Path, key: &Path) -> Result<CertifiedKey, TlsError> {
    let certs = read_certs("tls.cert_file", cert)?;
    let der = PrivateKeyDer::from_pem_file(key).map_err(|e| file_err("tls.key_file", key, e))?;
    let signer = rustls::crypto::ring::sign::any_supported_type(&der)
        .map_err(|e| file_err("tls.key_file", key, e))?;
    let ck = CertifiedKey::new(certs, signer);
    ck.keys_match().map_err(|e| {
        file_err(
            "tls.key_file",
            key,
            format!("does not match tls.cert_file {}: {e}", cert.display()),
        )
    })?;
    Ok(ck)
}

fn mtimes(paths: &[&Path]) -> Vec<Option<SystemTime>> {
    paths
        .iter()
        .map(|p| std::fs::metadata(p).and_then(|m| m.modified()).ok())
        .collect()
}

/// The client CA's verifier from its file: a chain to one of its
/// certificates, with client-auth usage, valid now.
fn client_verifier(ca: &Path) -> Result<Arc<dyn ClientCertVerifier>, TlsError> {
    let mut roots = rustls::RootCertStore::empty();
    for c in read_certs("tls.client_ca_file", ca)? {
        roots
            .add(c)
            .map_err(|e| file_err("tls.client_ca_file", ca, e))?;
    }
    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider())
        .allow_unauthenticated()
        .build()
        .map_err(|e| file_err("tls.client_ca_file", ca, e))
}

/// Builds the rustls configuration from the files: certificate, key, and
/// the client CA's handshake (`client_ca`).
fn server_config(
    cert: &Path,
    key: &Path,
    client_ca: Option<&Arc<ClientCa>>,
) -> Result<ServerConfig, TlsError> {
    let ck = Arc::new(certified_key(cert, key)?);
    let builder =
        ServerConfig::builder_with_provider(provider()).with_safe_default_protocol_versions()?;
    let builder = match client_ca {
        Some(ca) => builder.with_client_cert_verifier(ca.handshake()),
        None => builder.with_no_client_auth(),
    };
    let mut config = builder.with_cert_resolver(Arc::new(rustls::sign::SingleCertAndKey::from(ck)));
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(config)
}

impl Tls {
    /// Loads the certificate, key and client CA; `None` when TLS is not configured.
    pub fn load(cfg: &TlsConfig) -> Result<Option<Arc<Tls>>, TlsError> {
        let (Some(cert), Some(key)) = (&cfg.cert_file, &cfg.key_file) else {
            return Ok(None);
        };
        if cfg.self_signed {
            match self_signed::ensure(cert, key) {
                Ok(true) => {
                    tracing::info!(cert = %cert.display(), "made a self-signed serving certificate for loopback (tls.self_signed); clients trust it as their CA")
                }
                Ok(false) => {}
                Err(reason) => {
                    return Err(TlsError::File {
                        key: "tls.cert_file",
                        path: cert.clone(),
                        reason,
                    });
                }
            }
        }
        let files: Vec<PathBuf> = [Some(cert), Some(key), cfg.client_ca_file.as_ref()]
            .into_iter()
            .flatten()
            .cloned()
            .collect();
        let seen = Tls::mtimes_of(&files);
        let client_ca = match &cfg.client_ca_file {
            Some(ca) => Some(ClientCa::new(client_verifier(ca)?)),
            None => None,
        };
        let acceptor = TlsAcceptor::from(Arc::new(server_config(cert, key, client_ca.as_ref())?));
        Ok(Some(Arc::new(Tls {
            current: RwLock::new(acceptor),
            client_ca,
            config: cfg.clone(),
            files,
            seen: Mutex::new(seen),
        })))
    }

    fn mtimes_of(files: &[PathBuf]) -> Vec<Option<SystemTime>> {
        mtimes(&files.iter().map(PathBuf::as_path).collect::<Vec<_>>())
    }

    /// The acceptor for a new connection (the latest files'), and the
    /// client CA its certificates are verified against.
    pub fn acceptor(&self) -> (TlsAcceptor, Option<Arc<ClientCa>>) {
        (self.current.reading().clone(), self.client_ca.clone())
    }

    /// Rebuilds the configuration if any file changed; files that do not load
    /// (half-written during a rotation, most likely) keep the old one until
    /// the next check.
    fn check(&self) {
        let now = Tls::mtimes_of(&self.files);
        let mut seen = self.seen.locked();
        if *seen == now {
            return;
        }
        let (Some(cert), Some(key)) = (&self.config.cert_file, &self.config.key_file) else {
            return;
        };
        let verifier = match &self.config.client_ca_file {
            Some(ca) => client_verifier(ca).map(Some),
            None => Ok(None),
        };
        match verifier.and_then(|v| Ok((v, server_config(cert, key, self.client_ca.as_ref())?))) {
            Ok((verifier, c)) => {
                if let (Some(ca), Some(v)) = (&self.client_ca, verifier) {
                    ca.replace(v);
                }
                *self.current.writing() = TlsAcceptor::from(Arc::new(c));
                *seen = now;
                tracing::info!(cert = %cert.display(), "TLS certificate, key or client CA reloaded");
            }
            Err(e) => {
                tracing::warn!(error = %e, "TLS files changed but cannot be loaded; keeping the previous ones")
            }
        }
    }

    /// Checks the files every second until `shutdown`.
    pub async fn reload(self: Arc<Self>, shutdown: Signal) {
        let mut tick = tokio::time::interval(RELOAD_CHECK);
        loop {
            tokio::select! {
                _ = tick.tick() => self.check(),
                _ = shutdown.wait() => return,
            }
        }
    }
}
