//! The snapshot step: the cache version a read is answered from, as the
//! watch cache picks it (`cacher.GetList`): the current one ("Any",
//! `resourceVersion=0`), one not older than a version after waiting for it
//! (a consistent read's proven floor, or `resourceVersion=N`), the exact one
//! (`resourceVersionMatch=Exact`, or a paged list at N), or the one a
//! continue token pinned.

use std::sync::Arc;

use super::steps::{Built, Decided, Early, Proven, Read, Reader, Snapshot};
use crate::api::continue_token::{ContinueToken, Format};
use crate::api::params::RvMatch;
use crate::api::status::Status;
use crate::cache::store::Version;
use crate::config::OnTooNew;
use crate::serve::outcome::PassReason;
use crate::serve::servable::too_new_upstream;

impl Reader<'_> {
    /// The snapshot `proven` is read from, or the read's early end (built
    /// with how its error is written).
    pub(super) async fn snapshot<'c>(&self, proven: Proven<'c>) -> Result<Snapshot<'c>, Built> {
        let Proven { decided, floor } = proven;
        let picked = match decided.read {
            Read::Get => self
                .version_of_get(&decided, floor)
                .await
                .map(|v| (v, None)),
            Read::List => self.version_of_list(&decided, floor).await,
        };
        match picked {
            Ok((version, resume)) => Ok(Snapshot {
                decided,
                version,
                resume,
            }),
            Err(early) => Err(Built {
                payload: Err(early),
                reply: decided.reply,
            }),
        }
    }

    async fn version_of_get(
        &self,
        d: &Decided<'_>,
        floor: Option<u64>,
    ) -> Result<Arc<Version>, Early> {
        match d.opts.resource_version.as_str() {
            "" => {
                let x = floor.ok_or(Early::Pass(PassReason::MostRecent))?;
                self.not_older_than(d, x).await
            }
            "0" => Ok(d.store.current()),
            rv => {
                let n = rv
                    .parse::<u64>()
                    .map_err(|_| Early::Pass(PassReason::Invalid))?;
                self.not_older_than(d, n).await
            }
        }
    }

    /// A list's version, and the page it resumes after.
    async fn version_of_list(
        &self,
        d: &Decided<'_>,
        floor: Option<u64>,
    ) -> Result<(Arc<Version>, Option<ContinueToken>), Early> {
        let opts = d.opts;
        let rv = opts.resource_version.as_str();
        if !opts.continue_token.is_empty() {
            // The token is read first, as the apiserver's storage does
            // (`storage.ValidateListOptions`): a foreign one is the upstream's
            // to judge, one of r8s's with a version gets the apiserver's 400.
            let tok = match ContinueToken::decode(&opts.continue_token, Format::R8S) {
                Ok(t) => t,
                Err(e) if e.is_foreign() => return Err(Early::Pass(PassReason::ForeignContinue)),
                Err(e) => return Err(Early::Status(e.into_status(Format::R8S))),
            };
            if !rv.is_empty() && rv != "0" {
                return Err(Early::Status(Status::bad_request(
                    "specifying resource version is not allowed when using continue",
                )));
            }
            let version = if tok.rv < 0 {
                d.store.current()
            } else {
                let expired = || Early::Status(tok.expired(Format::R8S));
                d.store.at(tok.rv as u64).ok_or_else(expired)?
            };
            return Ok((version, Some(tok)));
        }
        let version = if rv.is_empty() {
            let x = floor.ok_or(Early::Pass(PassReason::MostRecent))?;
            self.not_older_than(d, x).await?
        } else if rv == "0" {
            d.store.current()
        } else {
            let n = rv
                .parse::<u64>()
                .map_err(|_| Early::Pass(PassReason::Invalid))?;
            let exact = opts.rv_match() == Some(RvMatch::Exact)
                || (opts.rv_match().is_none() && opts.limit > 0);
            if exact {
                d.store.at(n).ok_or(Early::Pass(PassReason::NotRetained))?
            } else {
                self.not_older_than(d, n).await?
            }
        };
        Ok((version, None))
    }

    /// The version a "not older than N" read may use, after waiting for it.
    async fn not_older_than(&self, d: &Decided<'_>, n: u64) -> Result<Arc<Version>, Early> {
        let store = d.store;
        let cur = store.current();
        if cur.rv >= n {
            return Ok(cur);
        }
        if store.wait_for(n, self.policy.wait).await {
            return Ok(store.current());
        }
        let too_large = || Status::too_large_resource_version(n, store.current().rv);
        match self.policy.on_too_new {
            OnTooNew::Pass if too_new_upstream(d.cache, n, self.proofs).await => {
                Err(Early::Status(too_large()))
            }
            OnTooNew::Pass => Err(Early::Pass(PassReason::TooNew)),
            OnTooNew::Timeout => Err(Early::Status(too_large())),
        }
    }
}
