//! The loopback guard of `auth.mode = "none"`, with `kubectl proxy`'s
//! filters and defaults.
//!
//! Without authentication every request acts as r8s (its credentials, its
//! permissions). Any local process can do that by design, but a web page in a
//! browser on the same host can too, through DNS rebinding: its requests
//! reach 127.0.0.1 with a foreign `Host`. `kubectl proxy` refuses those
//! (`--accept-hosts`) and, unless told otherwise, exec and attach
//! (`--reject-paths`); r8s does the same with `server.accept_hosts` and
//! `server.reject_paths`.

use http::{HeaderMap, Uri, header};
use percent_encoding::percent_decode_str;
use regex::Regex;

use crate::api::status::Status;
use crate::config::ServerConfig;

/// Which requests an unauthenticated listener takes: a `Host` that matches
/// one of `accept_hosts`, a path that matches none of `reject_paths`.
#[derive(Debug, Clone)]
pub struct LocalGuard {
    accept_hosts: Vec<Regex>,
    reject_paths: Vec<Regex>,
}

impl LocalGuard {
    /// The guard of `server` (`accept_hosts`, `reject_paths`); a pattern
    /// matches anywhere unless anchored, as `kubectl proxy`'s `MatchString`.
    pub fn new(server: &ServerConfig) -> Result<Self, String> {
        let (accept_hosts, reject_paths) = server.local_filters()?;
        Ok(LocalGuard {
            accept_hosts,
            reject_paths,
        })
    }

    /// Refuses a request whose path is rejected or whose host is not
    /// accepted, with the 403 `Status` kube-apiserver would send.
    ///
    /// The host is the `Host` header's (HTTP/2: `:authority`) without its
    /// port, brackets of an IPv6 address kept (`kubectl proxy` strips them,
    /// so its own `^\[::1\]$` never matches). The path is matched
    /// percent-decoded, as the apiserver routes it: `/pods/x/%65xec` is exec.
    pub fn check(&self, uri: &Uri, headers: &HeaderMap) -> Result<(), Status> {
        let path = percent_decode_str(uri.path()).decode_utf8_lossy();
        if let Some(re) = self.reject_paths.iter().find(|re| re.is_match(&path)) {
            return Err(refused(format!(
                "r8s refuses {path} without authentication: it matches server.reject_paths ({}); \
                 send it to the apiserver, or remove the pattern",
                re.as_str()
            )));
        }
        let host = request_host(uri, headers);
        if !self.accept_hosts.iter().any(|re| re.is_match(host)) {
            return Err(refused(format!(
                "r8s refuses the host \"{host}\" without authentication (server.accept_hosts): \
                 connect as localhost, 127.0.0.1 or [::1], or add the name to server.accept_hosts"
            )));
        }
        Ok(())
    }
}

fn refused(message: String) -> Status {
    Status::new(403, "Forbidden", message)
}

/// The host a request names, without its port: `:authority` (HTTP/2, or an
/// absolute URI) else `Host`; empty when there is neither.
fn request_host<'a>(uri: &'a Uri, headers: &'a HeaderMap) -> &'a str {
    let authority = uri.authority().map(|a| a.as_str()).or_else(|| {
        headers
            .get(header::HOST)
            .and_then(|v| v.to_str().ok())
            .map(str::trim)
    });
    let Some(authority) = authority else {
        return "";
    };
    // userinfo@ never reaches a server in a Host header, but an absolute URI may carry it.
    let authority = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if authority.starts_with('[') {
        // [v6]:port or [v6]
        return authority
            .find(']')
            .map_or(authority, |end| &authority[..=end]);
    }
    match authority.rsplit_once(':') {
        Some((host, port)) if port.bytes().all(|b| b.is_ascii_digit()) => host,
        _ => authority,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn defaults() -> LocalGuard {
        LocalGuard::new(&ServerConfig::default()).unwrap()
    }

    fn check(path: &str, host: Option<&str>) -> Result<(), u16> {
        let mut headers = HeaderMap::new();
        if let Some(h) = host {
            headers.insert(header::HOST, h.parse().unwrap());
        }
        defaults()
            .check(&path.parse().unwrap(), &headers)
            .map_err(|s| s.code)
    }

    #[test]
    fn should_accept_loopback_names_with_or_without_a_port() {
        for host in [
            "localhost",
            "localhost:8001",
            "127.0.0.1:6443",
            "[::1]:6443",
            "[::1]",
        ] {
            assert_eq!(check("/api/v1/pods", Some(host)), Ok(()), "{host}");
        }
    }

    #[test]
    fn should_refuse_a_foreign_host_as_dns_rebinding_would_send_it() {
        for host in [
            "evil.example:8001",
            "localhost.evil.example",
            "127.0.0.2",
            "",
            "10.0.0.1:6443",
        ] {
            assert_eq!(check("/api/v1/pods", Some(host)), Err(403), "{host}");
        }
        assert_eq!(check("/api/v1/pods", None), Err(403));
    }

    #[test]
    fn should_refuse_exec_and_attach_even_when_percent_encoded() {
        for path in [
            "/api/v1/namespaces/default/pods/web/exec",
            "/api/v1/namespaces/default/pods/web/attach",
            "/api/v1/namespaces/default/pods/web/%65xec",
            "/api/v1/namespaces/default/pods/web/exec?command=sh",
        ] {
            assert_eq!(check(path, Some("127.0.0.1:1")), Err(403), "{path}");
        }
        assert_eq!(
            check(
                "/api/v1/namespaces/default/pods/web/portforward",
                Some("127.0.0.1:1")
            ),
            Ok(())
        );
        assert_eq!(
            check("/api/v1/namespaces/default/pods/web/log", Some("localhost")),
            Ok(())
        );
    }

    #[test]
    fn should_name_the_key_of_a_pattern_that_does_not_compile() {
        let mut server = ServerConfig {
            accept_hosts: vec!["(".into()],
            ..ServerConfig::default()
        };
        let e = LocalGuard::new(&server).unwrap_err();
        assert!(e.contains("\"server.accept_hosts\""), "{e}");
        server.accept_hosts.clear();
        server.reject_paths = vec!["[".into()];
        let e = LocalGuard::new(&server).unwrap_err();
        assert!(e.contains("\"server.reject_paths\""), "{e}");
    }

    #[test]
    fn should_take_the_authority_of_an_http2_request_over_host() {
        let uri: Uri = "http://evil.example:80/api/v1/pods".parse().unwrap();
        let mut headers = HeaderMap::new();
        headers.insert(header::HOST, "localhost".parse().unwrap());
        assert!(defaults().check(&uri, &headers).is_err());
    }
}
