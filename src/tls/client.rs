//! Client certificates as kube-apiserver takes them: asked for, not
//! required (Go's `tls.RequestClientCert`), so the handshake accepts any
//! certificate whose subject parses and whose key signed the handshake;
//! whether it verifies against `tls.client_ca_file` (expiry, client-auth
//! usage, the chain) is decided per request, as the apiserver's x509
//! authenticator decides it, and one that does not verify gets its 401.

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock};
use std::time::SystemTime;

use rustls::client::danger::HandshakeSignatureValid;
use rustls::pki_types::{CertificateDer, UnixTime};
use rustls::server::danger::{ClientCertVerified, ClientCertVerifier};
use rustls::{DigitallySignedStruct, DistinguishedName, SignatureScheme};

use super::x509::{CertUser, Reading, Subject};
use crate::api::UserInfo;
use crate::sync::{MutexExt, RwLockExt};

/// The client CA's verifier, shared by every connection it accepted and
/// replaced when `tls.client_ca_file` changes (its generation counts the
/// replacements, so a connection's verdict is taken again after one).
#[derive(Debug)]
pub struct ClientCa {
    verifier: RwLock<Arc<dyn ClientCertVerifier>>,
    generation: AtomicU64,
}

impl ClientCa {
    /// The CA's verifier, as built from `tls.client_ca_file`.
    pub fn new(verifier: Arc<dyn ClientCertVerifier>) -> Arc<ClientCa> {
        Arc::new(ClientCa {
            verifier: RwLock::new(verifier),
            generation: AtomicU64::new(0),
        })
    }

    /// The verifier of a CA file re-read.
    pub fn replace(&self, verifier: Arc<dyn ClientCertVerifier>) {
        *self.verifier.writing() = verifier;
        self.generation.fetch_add(1, Ordering::Release);
    }

    /// What the handshake asks of a client: a certificate, not required,
    /// accepted whatever its chain (see the module's doc).
    pub fn handshake(self: &Arc<Self>) -> Arc<dyn ClientCertVerifier> {
        Arc::new(RequestClientCert(self.clone()))
    }

    fn current(&self) -> Arc<dyn ClientCertVerifier> {
        self.verifier.reading().clone()
    }
}

/// The handshake's side: Go's `RequestClientCert`.
#[derive(Debug)]
struct RequestClientCert(Arc<ClientCa>);

impl ClientCertVerifier for RequestClientCert {
    fn offer_client_auth(&self) -> bool {
        true
    }

    fn client_auth_mandatory(&self) -> bool {
        false
    }

    fn root_hint_subjects(&self) -> &[DistinguishedName] {
        // The CA's subjects are hints only; a client picks its own.
        &[]
    }

    /// Go's TLS server parses every certificate a client sends and fails
    /// the handshake on one it cannot: here, on a subject Go's `parseName`
    /// refuses (the chain is verified per request).
    fn verify_client_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        _now: UnixTime,
    ) -> Result<ClientCertVerified, rustls::Error> {
        for der in std::iter::once(end_entity).chain(intermediates) {
            Subject::of_certificate(der).map_err(|e| {
                tracing::debug!(error = %e, "client certificate refused at the handshake");
                rustls::Error::InvalidCertificate(rustls::CertificateError::BadEncoding)
            })?;
        }
        Ok(ClientCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.current().verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.0.current().verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.current().supported_verify_schemes()
    }
}

/// What a request's client certificate is to the apiserver.
#[derive(Debug, Clone)]
pub enum Presented {
    /// A verified certificate naming this user.
    User(Arc<UserInfo>),
    /// A verified certificate naming nobody (an empty CommonName): the
    /// next authenticator is asked.
    Nobody,
    /// A certificate that does not authenticate (does not verify, or its
    /// UID is unusable): 401, unless a token authenticates.
    Refused(Arc<str>),
}

/// A connection's client certificate: its chain, the subject parsed at the
/// handshake, and the verdict and user last taken.
#[derive(Debug)]
pub struct ClientCertificate {
    chain: Vec<CertificateDer<'static>>,
    subject: Subject,
    sha256: String,
    /// The earliest `notAfter` of the chain presented: past it, the
    /// verdict is taken again (and the chain found expired).
    not_after: SystemTime,
    ca: Arc<ClientCa>,
    last: Mutex<Last>,
}

/// The last verdict (at the CA's generation, taken when) and user (for a
/// reading).
#[derive(Debug, Default)]
struct Last {
    verdict: Option<Verdict>,
    user: Option<(Reading, Presented)>,
}

#[derive(Debug)]
struct Verdict {
    generation: u64,
    at: SystemTime,
    outcome: Result<(), Arc<str>>,
}

/// How long a refusal stands before the chain is verified again (a
/// certificate not valid yet becomes valid; a connection that keeps
/// presenting a bad one costs one verification a second, not one a request).
const REFUSAL_STANDS: std::time::Duration = std::time::Duration::from_secs(1);

impl ClientCertificate {
    /// The certificate a handshake accepted (`None`: none presented).
    pub fn of(conn: &rustls::ServerConnection, ca: &Arc<ClientCa>) -> Option<ClientCertificate> {
        let chain: Vec<CertificateDer<'static>> = conn
            .peer_certificates()?
            .iter()
            .map(|c| c.clone().into_owned())
            .collect();
        let leaf = chain.first()?;
        // Parsed at the handshake already: a failure here is not expected.
        let subject = Subject::of_certificate(leaf).ok()?;
        let digest = ring::digest::digest(&ring::digest::SHA256, leaf);
        let sha256 = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
        let not_after = chain
            .iter()
            .filter_map(|c| x509_parser::parse_x509_certificate(c).ok())
            .map(|(_, c)| {
                let secs = c.validity().not_after.timestamp().max(0) as u64;
                SystemTime::UNIX_EPOCH + std::time::Duration::from_secs(secs)
            })
            .min()?;
        Some(ClientCertificate {
            chain,
            subject,
            sha256,
            not_after,
            ca: ca.clone(),
            last: Mutex::new(Last::default()),
        })
    }

    /// Who the certificate is to an apiserver reading it as `reading`, now:
    /// verified against the current client CA (again after the CA changed,
    /// the chain's `notAfter` passed, or a refusal stood a second), then
    /// its subject's user.
    pub fn presented(&self, reading: Reading) -> Presented {
        let now = SystemTime::now();
        let generation = self.ca.generation.load(Ordering::Acquire);
        let mut last = self.last.locked();
        let fresh = last.verdict.as_ref().is_some_and(|v| {
            v.generation == generation
                && match v.outcome {
                    Ok(()) => now <= self.not_after,
                    Err(_) => now < v.at + REFUSAL_STANDS,
                }
        });
        if !fresh {
            let outcome = self.verify(now);
            if let Err(e) = &outcome {
                tracing::debug!(error = %e, "client certificate does not verify");
            }
            last.verdict = Some(Verdict {
                generation,
                at: now,
                outcome,
            });
        }
        if let Some(Verdict {
            outcome: Err(why), ..
        }) = &last.verdict
        {
            return Presented::Refused(why.clone());
        }
        if let Some((r, p)) = &last.user
            && *r == reading
        {
            return p.clone();
        }
        let p = match self.subject.user(&self.sha256, reading) {
            CertUser::User(u) => Presented::User(Arc::new(u)),
            CertUser::Nobody => Presented::Nobody,
            CertUser::Error(e) => Presented::Refused(Arc::from(e)),
        };
        last.user = Some((reading, p.clone()));
        p
    }

    /// The chain verified as the apiserver's `Verify` with client-auth
    /// usage: against the current CA, at `now`.
    fn verify(&self, now: SystemTime) -> Result<(), Arc<str>> {
        let since = now
            .duration_since(SystemTime::UNIX_EPOCH)
            .unwrap_or_default();
        let (leaf, intermediates) = self.chain.split_first().ok_or("no certificate")?;
        self.ca
            .current()
            .verify_client_cert(leaf, intermediates, UnixTime::since_unix_epoch(since))
            .map(|_| ())
            .map_err(|e| Arc::from(format!("verifying the client certificate failed: {e}")))
    }
}
