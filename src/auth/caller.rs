//! Who a request comes from once authenticated ([`Caller`]), and how its
//! identity goes upstream when it passes through ([`Forwarding`]): a token
//! as sent; a certificate as r8s itself where it is r8s's own identity (a
//! kubelet behind its node's r8s), else as r8s impersonating it.

use std::sync::Arc;

use http::{HeaderMap, HeaderName, header};

use super::impersonation::{Filter, Forwarded};
use crate::api::UserInfo;
use crate::api::status::Status;
use crate::tls::x509::{CREDENTIAL_ID, Reading, Subject};
use crate::upstream::Creds;

/// Who a request comes from, once authenticated.
#[derive(Debug, Clone)]
pub enum Caller {
    /// `auth.mode = "none"`: no checks; passed through as it came.
    Trusted,
    /// A bearer token or no credentials: passed through with its own
    /// credentials. `upstream_only`: it sent what only the upstream can
    /// judge (`Impersonate-*` headers, a token in a WebSocket subprotocol),
    /// so it is never served from cache.
    Client {
        /// The user the token (or its absence) stands for.
        user: Arc<UserInfo>,
        /// Whether it sent credentials or identity headers r8s does not judge.
        upstream_only: bool,
    },
    /// A verified client certificate (after any impersonation it was allowed):
    /// passed through as r8s impersonating `user`.
    Certificate {
        /// Who it acts as.
        user: Arc<UserInfo>,
        /// The certificate's own user, where it impersonates `user`.
        by: Option<Arc<UserInfo>>,
    },
}

impl Caller {
    /// Whether a request from this caller may be answered from cache at all.
    pub fn cacheable(&self) -> bool {
        !matches!(
            self,
            Caller::Client {
                upstream_only: true,
                ..
            }
        )
    }

    /// The user it acts as (`None`: `Trusted`).
    pub fn user(&self) -> Option<&Arc<UserInfo>> {
        match self {
            Caller::Trusted => None,
            Caller::Client { user, .. } | Caller::Certificate { user, .. } => Some(user),
        }
    }

    /// Who an audit event names: the user who sent the request, and the one
    /// it acts as where that differs (`user`, `impersonatedUser`).
    pub fn audit_users(&self) -> (Option<Arc<UserInfo>>, Option<Arc<UserInfo>>) {
        match self {
            Caller::Trusted => (None, None),
            Caller::Client { user, .. } => (Some(user.clone()), None),
            Caller::Certificate { user, by: None } => (Some(user.clone()), None),
            Caller::Certificate { user, by: Some(by) } => (Some(by.clone()), Some(user.clone())),
        }
    }

    /// Rewrites a pass-through request's headers for this caller's identity;
    /// says whose credentials it goes with. A certificate caller who is r8s's
    /// own identity upstream (a kubelet behind its node's r8s, sharing its
    /// certificate) goes as r8s, with nothing added: the apiserver sees the
    /// very user it would without r8s. Another goes as r8s impersonating it,
    /// only where r8s may impersonate (`auth.impersonate_certificate_clients`;
    /// or r8s's own identity impersonating, as it asked) and the apiserver
    /// reads those headers back as the very user r8s checked
    /// (`impersonation::Forwarded`); otherwise the 403 that says why.
    pub fn forward_as(&self, headers: &mut HeaderMap, how: &Forwarding) -> Result<Creds, Status> {
        match self {
            Caller::Trusted if headers.contains_key(header::AUTHORIZATION) => Ok(Creds::Client),
            Caller::Trusted => Ok(Creds::Own),
            Caller::Client { .. } => Ok(Creds::Client),
            Caller::Certificate { user, by } => {
                let own = |u: &UserInfo| how.own.as_deref().is_some_and(|o| same_principal(o, u));
                if by.is_none() && own(user) {
                    strip_identity(headers);
                    return Ok(Creds::Own);
                }
                if !how.impersonate && !by.as_deref().is_some_and(own) {
                    tracing::info!(user = ?user.name, "a certificate caller other than r8s's own identity, and r8s may not impersonate; refused");
                    return Err(Status::new(
                        403,
                        "Forbidden",
                        format!(
                            "r8s passes requests on only as its own identity upstream ({}); user {:?} presented a client certificate, and r8s may not impersonate it (auth.impersonate_certificate_clients = false): send this request to the apiserver, or with a token",
                            how.own
                                .as_deref()
                                .map_or("none".to_string(), |o| format!("{:?}", o.name)),
                            user.name
                        ),
                    ));
                }
                let identity = Forwarded {
                    user,
                    filter: how.filter,
                }
                .headers()
                .map_err(|e| {
                    tracing::info!(user = ?user.name, error = %e, "a certificate caller's identity cannot be passed on unchanged; refused");
                    Status::new(
                        403,
                        "Forbidden",
                        format!("r8s cannot pass this request on as user {:?}: {e}", user.name),
                    )
                })?;
                // Whatever identity headers the client sent are replaced.
                strip_identity(headers);
                headers.extend(identity);
                Ok(Creds::Own)
            }
        }
    }
}

/// How a pass-through request's identity goes upstream.
#[derive(Debug, Clone)]
pub struct Forwarding {
    /// The impersonation filter of the upstream's version.
    pub filter: Filter,
    /// Who r8s is upstream, where it presents a client certificate.
    pub own: Option<Arc<UserInfo>>,
    /// Whether r8s may impersonate other certificate callers
    /// (`auth.impersonate_certificate_clients`).
    pub impersonate: bool,
}

/// The user the apiserver reading as `reading` authenticates r8s's own
/// client certificate (`der`) as, where it names one.
pub fn own_user(der: &[u8], reading: Reading) -> Option<UserInfo> {
    let subject = Subject::of_certificate(der).ok()?;
    let digest = ring::digest::digest(&ring::digest::SHA256, der);
    let hex: String = digest.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    match subject.user(&hex, reading) {
        crate::tls::x509::CertUser::User(u) => Some(u),
        _ => None,
    }
}

/// Whether `a` and `b` are one principal to the apiserver's authorizers:
/// the same name, UID, groups and extras, but for the credential ID (each
/// certificate's own digest: a kubelet's rotated certificate and the one its
/// r8s still presents name the same node).
pub fn same_principal(a: &UserInfo, b: &UserInfo) -> bool {
    let extra = |u: &UserInfo| {
        u.extra
            .iter()
            .filter(|(k, _)| k.as_str() != CREDENTIAL_ID)
            .map(|(k, v)| (k.clone(), v.clone()))
            .collect::<Vec<_>>()
    };
    a.name == b.name && a.uid == b.uid && a.groups == b.groups && extra(a) == extra(b)
}

fn is_identity_header(name: &HeaderName) -> bool {
    let n = name.as_str();
    n.starts_with("impersonate-") || n.starts_with("x-remote-")
}

/// Removes every identity header and the `Authorization` a client sent.
fn strip_identity(headers: &mut HeaderMap) {
    let names: Vec<HeaderName> = headers
        .keys()
        .filter(|n| is_identity_header(n))
        .cloned()
        .collect();
    for n in names {
        headers.remove(n);
    }
    headers.remove(header::AUTHORIZATION);
}
