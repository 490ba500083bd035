//! The decision step: whether the cache answers a get or list, from which
//! store, in what shape and view, with its options checked (`serve::servable`,
//! asked by watches too); or why the upstream must answer.

use super::steps::{Asked, Decided, Read, Reply};
use crate::api::media::Encoding;
use crate::api::request::Verb;
use crate::serve::outcome::PassReason;
use crate::serve::servable::{fields_held, in_scope, serving_store, shape_for, view_for};
use crate::serve::table;
use crate::upstream::proof::ConsistentKind;

/// The decision step: whether the cache answers `asked`, from which store,
/// in what shape and view, with its options checked; or why the upstream
/// must answer.
pub(super) fn decide(asked: Asked<'_>) -> Result<Decided<'_>, PassReason> {
    let Asked { cache, ar } = asked;
    let table = table::ask(ar, cache)?;
    let read = match ar.verb {
        Verb::Get if ar.path.subresource.is_none() => Read::Get,
        Verb::List if ar.path.subresource.is_none() => Read::List,
        _ => return Err(PassReason::Verb),
    };
    let (store, warning) = serving_store(cache, ar)?;
    let shape = shape_for(ar).ok_or(PassReason::MediaType)?;
    let opts = ar.options.as_ref().map_err(|_| PassReason::Invalid)?;
    // A request naming an object answered with that object alone (every
    // parsed request is; this is the check that it stays so).
    if opts.validate().is_err() || !ar.confined() {
        return Err(PassReason::Invalid);
    }
    fields_held(cache, store, opts)?;
    if read == Read::List {
        in_scope(store, ar.path.namespace.as_deref(), opts)?;
    }
    // A consistent read (no version; a list not continuing a page) is
    // answered once proven, at least at the version the proof found.
    let unversioned = opts.resource_version.is_empty();
    let consistent = match read {
        Read::Get => unversioned.then_some(ConsistentKind::Get),
        Read::List => {
            (unversioned && opts.continue_token.is_empty()).then_some(ConsistentKind::List)
        }
    };
    let encoding = store.encoding();
    Ok(Decided {
        cache,
        read,
        store,
        path: &ar.path,
        opts,
        view: view_for(ar, shape),
        table,
        consistent,
        reply: Reply {
            encoding,
            pretty: ar.pretty && encoding == Encoding::Json,
            gzip: ar.gzip,
            errors: ar.errors,
            warning,
        },
    })
}
