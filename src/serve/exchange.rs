//! One request's passage through the API listener, from what is read of it
//! on arrival (the scope: its audit ID, its parsed `ApiRequest`, its
//! metrics labels) to the finish: `X-R8s-Cache`, `Audit-Id` and every
//! metric, stamped in one place.

use std::borrow::Cow;
use std::time::{Instant, SystemTime};

use http::{HeaderValue, Request, Response, Uri};
use hyper::body::Incoming;

use super::outcome::{CACHE_HEADER, CacheResult, Origin};
use crate::api::media::ErrorEncoding;
use crate::api::request::{ApiRequest, Verb};
use crate::audit;
use crate::auth::Caller;
use crate::body::Body;
use crate::cache::ResourceCache;
use crate::metrics;
use crate::server::Peer;

/// A request as it arrived, read once: what every later step and the
/// finish need of it.
pub struct Exchange {
    start: Instant,
    /// When it arrived (read only for an audit record).
    received: SystemTime,
    /// Its audit ID (the client's, or a new one).
    pub id: HeaderValue,
    /// The resource request, parsed (`None`: any other path).
    pub ar: Option<ApiRequest>,
    /// How r8s's own errors are encoded (as negotiated).
    pub errors: ErrorEncoding,
    verb: Verb,
    /// The metrics' resource of a non-resource path: its first segment
    /// (a resource request's is read from it at the finish).
    non_resource: Option<String>,
}

impl Exchange {
    /// The scope step: reads `req` once (`audited`: whether an audit
    /// record may be written, which needs the arrival time).
    pub fn begin(req: &Request<Incoming>, audited: bool) -> Exchange {
        let start = Instant::now();
        let received = match audited {
            true => SystemTime::now(),
            false => SystemTime::UNIX_EPOCH,
        };
        let id = audit::id_of(req.headers());
        let ar = ApiRequest::parse(req.method(), req.uri(), req.headers());
        let (verb, non_resource) = match &ar {
            Some(ar) => (ar.verb, None),
            None => (Verb::Other, Some(non_resource_label(req.uri()))),
        };
        Exchange {
            start,
            received,
            id,
            errors: ar.as_ref().map_or(ErrorEncoding::Json, |ar| ar.errors),
            ar,
            verb,
            non_resource,
        }
    }

    /// What an audit record is made of, for `caller` (`None`: not
    /// authenticated).
    pub fn facts<'a>(
        &'a self,
        req: &'a Request<Incoming>,
        peer: &Peer,
        caller: Option<&Caller>,
    ) -> audit::Facts<'a> {
        let (user, impersonated) = caller.map_or((None, None), Caller::audit_users);
        audit::Facts {
            id: &self.id,
            method: req.method(),
            uri: req.uri(),
            headers: req.headers(),
            peer: peer.addr.ip(),
            received: self.received,
            user,
            impersonated,
            request: self.ar.as_ref(),
        }
    }

    /// The finish step: stamps where the answer came from and its audit
    /// ID, and records the request: the one place that does either.
    /// `cached`: the resource's cache and what it made of the request.
    pub fn finish(
        self,
        mut resp: Response<Body>,
        origin: Origin,
        cached: Option<(&ResourceCache, CacheResult)>,
    ) -> Response<Body> {
        if let Some(v) = origin.header() {
            resp.headers_mut().insert(CACHE_HEADER, v);
        }
        resp.headers_mut().insert(audit::AUDIT_ID, self.id);
        if let Some((cache, result)) = cached {
            metrics::cache_request(&cache.label, self.verb.as_str(), result.as_str());
        }
        let resource = match &self.ar {
            Some(ar) => ar.resource_label(),
            None => Cow::Borrowed(self.non_resource.as_deref().unwrap_or_default()),
        };
        metrics::request(
            self.verb.as_str(),
            &resource,
            resp.status().as_u16(),
            origin.label(),
            self.start.elapsed(),
        );
        resp
    }
}

/// The metrics' resource for a non-resource path: its first segment (`/apis`, `/version`).
fn non_resource_label(uri: &Uri) -> String {
    let first = uri
        .path()
        .trim_start_matches('/')
        .split('/')
        .next()
        .unwrap_or("");
    format!("/{first}")
}
