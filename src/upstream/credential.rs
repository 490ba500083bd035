//! r8s's own client certificate upstream (a kubeconfig's `client-certificate`
//! and `client-key`, or their `-data`): the one it presents, re-read when
//! its files change (a kubelet rotating the certificate a node-local r8s
//! shares, kubeadm renewing one) so that new connections present the
//! current one; and its leaf, so that a caller presenting the same identity
//! passes as itself, without impersonation (`auth`).

use std::path::PathBuf;
use std::sync::{Arc, RwLock};

use base64::Engine;
use rustls::pki_types::CertificateDer;
use rustls::pki_types::pem::PemObject;

use crate::sync::RwLockExt;

/// Where the certificate comes from, and what was last read of it.
pub struct OwnCertificate {
    /// The files that hold it (certificate, key), empty when it is the
    /// kubeconfig's own data (which never changes) or there is none.
    files: Vec<PathBuf>,
    /// The certificate's PEM as kubeconfig data.
    data: Option<Vec<u8>>,
    last: RwLock<Read>,
}

/// One reading of the files.
#[derive(Default)]
struct Read {
    /// A digest of every file's bytes: what tells a change.
    digest: Vec<u8>,
    /// The leaf's DER.
    leaf: Option<Arc<[u8]>>,
}

impl OwnCertificate {
    /// The certificate `auth` (a kubeconfig's user) names, read now.
    pub fn of(auth: &kube::config::AuthInfo) -> OwnCertificate {
        let data = auth.client_certificate_data.as_ref().and_then(|d| {
            base64::engine::general_purpose::STANDARD
                .decode(d.trim())
                .ok()
        });
        let files = match (&auth.client_certificate, &data) {
            (Some(cert), None) => std::iter::once(PathBuf::from(cert))
                .chain(auth.client_key.as_ref().map(PathBuf::from))
                .collect(),
            _ => Vec::new(),
        };
        let own = OwnCertificate {
            files,
            data,
            last: RwLock::default(),
        };
        *own.last.writing() = own.read();
        own
    }

    /// The leaf certificate (DER) presented upstream, if r8s presents one.
    pub fn leaf(&self) -> Option<Arc<[u8]>> {
        self.last.reading().leaf.clone()
    }

    /// Reads the files again; whether they changed since the last read
    /// (then the new leaf is the one [`OwnCertificate::leaf`] gives).
    pub fn changed(&self) -> bool {
        if self.files.is_empty() {
            return false;
        }
        let now = self.read();
        let mut last = self.last.writing();
        if now.digest == last.digest {
            return false;
        }
        *last = now;
        true
    }

    /// Forgets the last reading, so the next [`OwnCertificate::changed`]
    /// tells a change (the files could not be used as read).
    pub fn forget(&self) {
        self.last.writing().digest.clear();
    }

    fn read(&self) -> Read {
        if let Some(pem) = &self.data {
            return Read {
                digest: Vec::new(),
                leaf: leaf(pem),
            };
        }
        let mut digest = ring::digest::Context::new(&ring::digest::SHA256);
        let mut cert = None;
        for (i, f) in self.files.iter().enumerate() {
            // A file missing or half-written (a rotation under way) reads
            // as empty: changed, and read again on the next look.
            let bytes = std::fs::read(f).unwrap_or_default();
            digest.update(&(bytes.len() as u64).to_be_bytes());
            digest.update(&bytes);
            if i == 0 {
                cert = Some(bytes);
            }
        }
        Read {
            digest: digest.finish().as_ref().to_vec(),
            leaf: cert.as_deref().and_then(leaf),
        }
    }
}

/// The first certificate of a PEM bundle, as DER.
fn leaf(pem: &[u8]) -> Option<Arc<[u8]>> {
    CertificateDer::pem_slice_iter(pem)
        .next()?
        .ok()
        .map(|c| Arc::from(c.as_ref()))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A PEM block of `der` (the reader only unwraps it).
    fn pem(der: &[u8]) -> String {
        let b64 = base64::engine::general_purpose::STANDARD.encode(der);
        format!("-----BEGIN CERTIFICATE-----\n{b64}\n-----END CERTIFICATE-----\n")
    }

    #[test]
    fn should_read_the_files_again_and_tell_a_change() {
        let dir = std::env::temp_dir().join(format!("r8s-own-cert-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
        std::fs::write(&cert, pem(b"one")).unwrap();
        std::fs::write(&key, "key one").unwrap();
        let auth = kube::config::AuthInfo {
            client_certificate: Some(cert.display().to_string()),
            client_key: Some(key.display().to_string()),
            ..Default::default()
        };
        let own = OwnCertificate::of(&auth);
        assert_eq!(own.leaf().as_deref(), Some(&b"one"[..]));
        assert!(!own.changed(), "nothing changed");
        std::fs::write(&key, "key two").unwrap();
        assert!(own.changed(), "the key alone changed");
        std::fs::write(&cert, pem(b"two")).unwrap();
        assert!(own.changed());
        assert_eq!(own.leaf().as_deref(), Some(&b"two"[..]));
        assert!(!own.changed());
        // Data in the kubeconfig never changes; no certificate, no leaf.
        let data = kube::config::AuthInfo {
            client_certificate_data: Some(
                base64::engine::general_purpose::STANDARD.encode(pem(b"three")),
            ),
            ..Default::default()
        };
        let own = OwnCertificate::of(&data);
        assert_eq!(own.leaf().as_deref(), Some(&b"three"[..]));
        assert!(!own.changed());
        assert!(OwnCertificate::of(&Default::default()).leaf().is_none());
        std::fs::remove_dir_all(dir).unwrap();
    }
}
