//! Pass-through: a request r8s does not serve from cache goes upstream
//! unchanged, streamed both ways; upgrades (exec, attach, port-forward over
//! SPDY or WebSocket) are relayed byte for byte until either side closes.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use bytes::Bytes;
use futures_util::FutureExt;
use futures_util::future::BoxFuture;
use http::{HeaderMap, HeaderName, HeaderValue, Request, Response, StatusCode, header};
use http_body::{Body as HttpBody, Frame, SizeHint};
use http_body_util::BodyExt;
use hyper::body::Incoming;
use hyper_util::rt::TokioIo;

use crate::api::media::ErrorEncoding;
use crate::api::status::Status;
use crate::auth::Caller;
use crate::auth::Forwarding;
use crate::body::{Body, BoxError};
use crate::shutdown::Signal;
use crate::upstream::{RequestError, Upstream};

const HOP_BY_HOP: [HeaderName; 7] = [
    header::CONNECTION,
    HeaderName::from_static("keep-alive"),
    HeaderName::from_static("proxy-connection"),
    header::PROXY_AUTHENTICATE,
    header::TE,
    header::TRAILER,
    header::TRANSFER_ENCODING,
];

fn is_upgrade(headers: &HeaderMap) -> bool {
    headers.contains_key(header::UPGRADE)
        && headers
            .get_all(header::CONNECTION)
            .iter()
            .filter_map(|v| v.to_str().ok())
            .flat_map(|v| v.split(','))
            .any(|t| t.trim().eq_ignore_ascii_case("upgrade"))
}

/// Removes hop-by-hop headers (and those `Connection` names); keeps the
/// upgrade handshake when relaying one.
fn strip_hop_by_hop(headers: &mut HeaderMap, upgrade: bool) {
    let named: Vec<HeaderName> = headers
        .get_all(header::CONNECTION)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .filter_map(|t| HeaderName::from_bytes(t.trim().as_bytes()).ok())
        .filter(|h| !(upgrade && *h == header::UPGRADE))
        .collect();
    for h in named.iter().chain(HOP_BY_HOP.iter()) {
        headers.remove(h);
    }
    if upgrade {
        headers.insert(header::CONNECTION, HeaderValue::from_static("Upgrade"));
    } else {
        headers.remove(header::UPGRADE);
    }
}

/// Forwards `req` upstream and relays the answer. `streaming` responses
/// (watches, followed logs) end cleanly when `shutdown` fires. A caller
/// whose identity cannot go upstream unchanged gets the 403 that says why,
/// in `errors` (`Err`: nothing was sent).
pub async fn forward(
    upstream: &Arc<Upstream>,
    mut req: Request<Incoming>,
    streaming: bool,
    shutdown: &Signal,
    caller: &Caller,
    errors: ErrorEncoding,
    how: &Forwarding,
) -> Result<Response<Body>, Response<Body>> {
    let upgrade = req.version() <= http::Version::HTTP_11 && is_upgrade(req.headers());
    let client_upgrade = upgrade.then(|| hyper::upgrade::on(&mut req));
    let (mut parts, body) = req.into_parts();
    strip_hop_by_hop(&mut parts.headers, upgrade);
    parts.headers.remove(header::HOST);
    let creds = match caller.forward_as(&mut parts.headers, how) {
        Ok(creds) => creds,
        Err(refused) => return Err(refused.into_response_as(errors)),
    };
    let mut resp = match upstream.send(parts, Some(body), creds).await {
        Ok(r) => r,
        Err(e) => return Ok(unavailable(&e)),
    };
    if resp.status() == StatusCode::SWITCHING_PROTOCOLS
        && let Some(client_upgrade) = client_upgrade
    {
        let upstream_upgrade = hyper::upgrade::on(&mut resp);
        tokio::spawn(async move {
            match tokio::try_join!(client_upgrade, upstream_upgrade) {
                Ok((c, u)) => {
                    let (mut c, mut u) = (TokioIo::new(c), TokioIo::new(u));
                    if let Err(e) = tokio::io::copy_bidirectional(&mut c, &mut u).await {
                        tracing::debug!(error = %e, "upgraded connection ended");
                    }
                }
                Err(e) => tracing::warn!(error = %e, "upgrade failed"),
            }
        });
        let (parts, _) = resp.into_parts();
        return Ok(Response::from_parts(parts, crate::body::empty()));
    }
    let (mut parts, body) = resp.into_parts();
    strip_hop_by_hop(&mut parts.headers, false);
    let body = body.map_err(BoxError::from);
    let body = if streaming {
        UntilShutdown {
            inner: body,
            stop: shutdown.clone().wait_owned().boxed(),
        }
        .boxed_unsync()
    } else {
        body.boxed_unsync()
    };
    Ok(Response::from_parts(parts, body))
}

/// The 503 for an upstream that cannot be reached (never a hang: connects
/// time out), naming it, with `Retry-After` so clients come back.
pub fn unavailable(e: &RequestError) -> Response<Body> {
    let mut s = Status::unavailable(e.to_string());
    s.retry_after = Some(1);
    s.into_response()
}

/// A relayed stream that ends cleanly (end of chunked body) at shutdown, so
/// watch clients re-watch elsewhere instead of hanging on a closing server.
struct UntilShutdown<B> {
    inner: B,
    stop: BoxFuture<'static, ()>,
}

impl<B> HttpBody for UntilShutdown<B>
where
    B: HttpBody<Data = Bytes, Error = BoxError> + Unpin,
{
    type Data = Bytes;
    type Error = BoxError;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, BoxError>>> {
        if self.stop.as_mut().poll(cx).is_ready() {
            return Poll::Ready(None);
        }
        Pin::new(&mut self.inner).poll_frame(cx)
    }

    fn size_hint(&self) -> SizeHint {
        self.inner.size_hint()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn should_strip_hop_by_hop_but_keep_upgrade_handshake() {
        let mut h = HeaderMap::new();
        h.insert(
            header::CONNECTION,
            HeaderValue::from_static("Upgrade, X-Foo"),
        );
        h.insert(header::UPGRADE, HeaderValue::from_static("websocket"));
        h.insert("x-foo", HeaderValue::from_static("1"));
        h.insert(
            header::TRANSFER_ENCODING,
            HeaderValue::from_static("chunked"),
        );
        h.insert("sec-websocket-key", HeaderValue::from_static("k"));
        assert!(is_upgrade(&h));
        let mut up = h.clone();
        strip_hop_by_hop(&mut up, true);
        assert_eq!(up.get(header::UPGRADE).unwrap(), "websocket");
        assert_eq!(up.get(header::CONNECTION).unwrap(), "Upgrade");
        assert!(up.get("x-foo").is_none() && up.get(header::TRANSFER_ENCODING).is_none());
        assert!(up.get("sec-websocket-key").is_some());
        strip_hop_by_hop(&mut h, false);
        assert!(h.get(header::UPGRADE).is_none() && h.get(header::CONNECTION).is_none());
    }
}
