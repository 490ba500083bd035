//! Tables from the cache: what `kubectl get` asks for
//! (`Accept: application/json;as=Table;v=v1;g=meta.k8s.io`), for gets,
//! lists (every page) and watches (`serve::watch::table`), printed by [`crate::table`]'s printers from the
//! JSON cache. The apiserver's `asTable` transform (`pkg/endpoints/
//! handlers/response.go`): rows with `includeObject` (`Metadata` by
//! default: a `PartialObjectMetadata` of the Table's version; `Object`;
//! `None`: `null`), the list's `resourceVersion`, `continue` and
//! `remainingItemCount`, columns with every row (wide ones too).

use std::sync::Arc;
use std::time::SystemTime;

use bytes::{Bytes, BytesMut};

use super::outcome::PassReason;
use crate::api::Gvr;
use crate::api::media::Choice;
use crate::api::request::{ApiRequest, Verb};
use crate::cache::ResourceCache;
use crate::cache::object::CachedObject;
use crate::cache::registry::Registry;
use crate::codec::json::ListItem;
use crate::table::{self, Printer, RowObject};

/// A Table asked for: how to print it and what each row carries.
#[derive(Debug, Clone)]
pub struct TableAsk {
    /// The resource's printer.
    pub printer: Printer,
    /// `meta.k8s.io/v1` or `meta.k8s.io/v1beta1`.
    pub api_version: &'static str,
    /// `includeObject`.
    pub include: Include,
    /// The instant ages are written at: when the answer is made.
    pub now: SystemTime,
}

/// `includeObject`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Include {
    /// `None`.
    None,
    /// `Metadata`, the default.
    Metadata,
    /// `Object`.
    Object,
}

/// The Table `ar` asks for of `cache`, if it asks for one: `Ok(None)` for
/// any other answer; the reason it passes when r8s cannot print it (a kind
/// without a printer, a custom resource whose definition r8s has not read,
/// an `includeObject` the apiserver refuses).
pub fn ask(ar: &ApiRequest, cache: &ResourceCache) -> Result<Option<TableAsk>, PassReason> {
    let Choice::Table(api_version) = ar.media else {
        return Ok(None);
    };
    if !matches!(ar.verb, Verb::Get | Verb::List | Verb::Watch) {
        return Err(PassReason::MediaType);
    }
    let include = match ar.query.get("includeObject") {
        None | Some("") | Some("Metadata") => Include::Metadata,
        Some("None") => Include::None,
        Some("Object") => Include::Object,
        Some(_) => return Err(PassReason::Invalid),
    };
    let printer = table::printer_for(&ar.path.gvr)
        .or_else(|| cache.custom_printer.get().cloned().map(Printer::Custom))
        .ok_or(PassReason::NoPrinter)?;
    Ok(Some(TableAsk {
        printer,
        api_version,
        include,
        now: SystemTime::now(),
    }))
}

/// Where r8s reads custom resources' definitions: its cache of them.
const DEFINITIONS: Gvr =
    Gvr::from_static("apiextensions.k8s.io", "v1", "customresourcedefinitions");

/// Makes a custom resource's printer from its definition, the first time a
/// Table of it is asked for and r8s has the definition (it caches
/// `customresourcedefinitions`); until then its Tables pass (`no_printer`).
pub fn learn_custom_printer(caches: &Registry, cache: &ResourceCache, ar: &ApiRequest) {
    let gvr = &cache.resource.gvr;
    if !matches!(ar.media, Choice::Table(_))
        || cache.custom_printer.get().is_some()
        || table::printer_for(gvr).is_some()
    {
        return;
    }
    let Some(definitions) = caches.get(&DEFINITIONS) else {
        return;
    };
    let name = format!("{}.{}", gvr.resource(), gvr.group());
    let version = definitions.store.current();
    let Some(crd) = version.objects.get(name.as_str()) else {
        return;
    };
    if let Some(p) = table::Custom::from_definition(&crd.body, gvr.version()) {
        let _ = cache.custom_printer.set(Arc::new(p));
    }
}

impl TableAsk {
    /// What a row of `o` carries as its `object`.
    pub(super) fn object<'o>(&self, o: &'o CachedObject) -> RowObject<'o> {
        match self.include {
            Include::None => RowObject::None,
            Include::Metadata => RowObject::Metadata(o.metadata()),
            Include::Object => RowObject::Object(&o.body),
        }
    }

    /// Whether every object in `objects` prints (rows are made here, once
    /// per object version, and kept).
    pub fn prints(&self, objects: &[Arc<CachedObject>]) -> bool {
        objects.iter().all(|o| o.row(&self.printer).is_some())
    }

    /// The Table's head through `"rows":[`.
    pub fn head(&self, rv: u64, cont: Option<&str>, remaining: Option<u64>) -> Bytes {
        let mut out = BytesMut::with_capacity(4096);
        table::put_head(
            &mut out,
            self.api_version,
            rv,
            cont,
            remaining,
            Some(self.printer.columns()),
        );
        out.freeze()
    }

    /// A get's Table: one row, the object's version as the Table's; `None`
    /// when the printer cannot read it.
    pub fn one(&self, o: &CachedObject) -> Option<Bytes> {
        let row = o.row(&self.printer)?;
        let mut out = BytesMut::from(&self.head(o.rv, None, None)[..]);
        table::put_row(&mut out, row, self.object(o), self.api_version, self.now);
        out.extend_from_slice(b"]}");
        Some(out.freeze())
    }
}

/// One row of a listed Table, written as the list streams.
pub struct TableItem {
    /// The object.
    pub object: Arc<CachedObject>,
    /// How it is printed.
    pub ask: TableAsk,
}

impl ListItem for TableItem {
    fn item_len(&self) -> usize {
        // The cells are a few dozen bytes; the object what it carries.
        96 + match self.ask.include {
            Include::None => 0,
            Include::Metadata => self.object.metadata().len() + 64,
            Include::Object => self.object.body.len(),
        }
    }

    fn write_item(&self, out: &mut BytesMut) {
        // `prints` checked every row before the list began.
        if let Some(row) = self.object.row(&self.ask.printer) {
            let object = self.ask.object(&self.object);
            table::put_row(out, row, object, self.ask.api_version, self.ask.now);
        }
    }
}
