//! The media type of an answer, negotiated from `Accept` as kube-apiserver
//! does it: goautoneg's parse and order of the clauses (by `q`, then by how
//! specific they are), then for each clause the first serializer it matches
//! whose parameters the endpoint accepts (`negotiation.NegotiateMediaTypeOptions`,
//! `acceptMediaTypeOptions`, `RequestScope.AllowsMediaTypeTransform`).
//!
//! The cache answers JSON and protobuf, whole or metadata-only
//! (`PartialObjectMetadata`, `PartialObjectMetadataList`); a protobuf-first
//! client of a custom resource gets JSON, as from the apiserver. Table, YAML,
//! CBOR, `meta.k8s.io/v1beta1` conversions, `pretty` and `export`
//! parameters, and anything unacceptable (406) are the upstream's.

use http::{HeaderMap, HeaderValue, header};

/// `Content-Type` of a protobuf answer.
pub const PROTOBUF: &str = "application/vnd.kubernetes.protobuf";
/// `Content-Type` of a protobuf watch stream.
pub const PROTOBUF_WATCH: &str = "application/vnd.kubernetes.protobuf;stream=watch";

/// How an answer is encoded.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Encoding {
    /// `application/json`.
    Json,
    /// `application/vnd.kubernetes.protobuf`.
    Protobuf,
}

impl Encoding {
    /// Its name in metric labels, logs and snapshot identities (`json`, `protobuf`).
    pub fn as_str(self) -> &'static str {
        match self {
            Encoding::Json => "json",
            Encoding::Protobuf => "protobuf",
        }
    }
}

/// What an answer holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// The objects themselves.
    Object,
    /// `meta.k8s.io/v1` `PartialObjectMetadata`: only an object's metadata.
    Metadata,
    /// `meta.k8s.io/v1` `PartialObjectMetadataList`: only the items' metadata.
    MetadataList,
}

/// An answer the cache can give: an encoding, a shape, and whether the
/// objects come without `metadata.managedFields`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct MediaType {
    /// JSON or protobuf.
    pub encoding: Encoding,
    /// Objects, or only their metadata.
    pub shape: Shape,
    /// `drop=metadata.managedFields` (KEP-5958): every object answered
    /// without its `metadata.managedFields`.
    pub drop_managed_fields: bool,
}

/// The one `drop` target r8s knows (KEP-5958); others are ignored, as the
/// KEP says, so that clients can ask for future ones of any server.
pub const DROP_MANAGED_FIELDS: &str = "metadata.managedFields";

/// Whether a `drop` parameter's value (targets joined by `+`) names
/// `metadata.managedFields`.
pub fn drops_managed_fields(drop: &str) -> bool {
    drop.split('+').any(|t| t == DROP_MANAGED_FIELDS)
}

impl MediaType {
    /// Plain JSON objects.
    pub const JSON: MediaType = MediaType {
        encoding: Encoding::Json,
        shape: Shape::Object,
        drop_managed_fields: false,
    };

    /// This encoding and shape, with managedFields.
    pub const fn of(encoding: Encoding, shape: Shape) -> MediaType {
        MediaType {
            encoding,
            shape,
            drop_managed_fields: false,
        }
    }

    /// The response's `Content-Type`, as the apiserver writes it: no `as`,
    /// `g` or `v` parameters; protobuf watches say `;stream=watch`.
    pub fn content_type(self, watch: bool) -> &'static str {
        match (self.encoding, watch) {
            (Encoding::Json, _) => "application/json",
            (Encoding::Protobuf, false) => PROTOBUF,
            (Encoding::Protobuf, true) => PROTOBUF_WATCH,
        }
    }
}

/// What kube-apiserver would answer a request's `Accept` with.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// JSON or protobuf, whole or metadata-only.
    Media(MediaType),
    /// A `meta.k8s.io` Table (`v1` or `v1beta1`), in JSON.
    Table(&'static str),
    /// YAML.
    Yaml,
    /// Something r8s leaves to the upstream: CBOR, a `v1beta1`
    /// metadata-only conversion, a `pretty=1` or `export=1` parameter.
    Other,
    /// Nothing acceptable: the apiserver's 406.
    NotAcceptable,
}

impl Choice {
    /// The media type, if the answer is one the cache gives in some encoding.
    pub fn media(self) -> Option<MediaType> {
        match self {
            Choice::Media(m) => Some(m),
            _ => None,
        }
    }
}

/// Which serializers a resource's endpoints offer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Offer {
    /// JSON, YAML and protobuf (Kubernetes' own types).
    Builtin,
    /// JSON and YAML; protobuf only for metadata-only answers (custom
    /// resources, whose handler has no protobuf encoding of the objects).
    Custom,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Serializer {
    Json,
    Yaml,
    Protobuf,
}

impl Serializer {
    fn matches(self, ty: &str, sub: &str) -> bool {
        let (t, s) = match self {
            Serializer::Json => ("application", "json"),
            Serializer::Yaml => ("application", "yaml"),
            Serializer::Protobuf => ("application", "vnd.kubernetes.protobuf"),
        };
        (ty == t && (sub == s || sub == "*")) || (ty == "*" && sub == "*")
    }

    fn streams(self) -> bool {
        self != Serializer::Yaml
    }
}

/// One clause of `Accept`, as goautoneg parses it.
struct Clause<'a> {
    ty: &'a str,
    sub: &'a str,
    q: f64,
    params: Vec<(&'a str, &'a str)>,
}

impl<'a> Clause<'a> {
    fn param(&self, k: &str) -> Option<&'a str> {
        self.params.iter().find(|(p, _)| *p == k).map(|(_, v)| *v)
    }
}

/// goautoneg's `ParseAccept`: clauses ordered by `q` (descending), then
/// specific types before `*`, then more parameters first; clauses it cannot
/// read are dropped. Go's sort is stable for these short lists.
fn parse_accept(header: &str) -> Vec<Clause<'_>> {
    let mut out = Vec::new();
    for part in header.split(',') {
        let part = part.trim_matches(' ');
        let mut mrp = part.split(';');
        let range = mrp.next().unwrap_or("");
        let sp: Vec<&str> = range.split('/').collect();
        let ty = sp[0].trim_matches(' ');
        let sub = match sp.as_slice() {
            [_] if ty == "*" => "*",
            [_, s] => s.trim_matches(' '),
            _ => continue,
        };
        let mut c = Clause {
            ty,
            sub,
            q: 1.0,
            params: Vec::new(),
        };
        for param in mrp {
            let Some((k, v)) = param.split_once('=') else {
                continue;
            };
            let k = k.trim_matches(' ');
            if k == "q" {
                // Go: `a.Q, _ = strconv.ParseFloat(..)`: unreadable is 0.
                c.q = v.parse::<f32>().map(f64::from).unwrap_or(0.0);
            } else {
                c.params.push((k, v.trim_matches(' ')));
            }
        }
        out.push(c);
    }
    out.sort_by(|a, b| {
        b.q.partial_cmp(&a.q)
            .unwrap_or(std::cmp::Ordering::Equal)
            .then((a.ty == "*").cmp(&(b.ty == "*")))
            .then((a.sub == "*").cmp(&(b.sub == "*")))
            .then(b.params.len().cmp(&a.params.len()))
    });
    out
}

/// What the apiserver answers `accept` (the first `Accept` header) with, on
/// an endpoint offering `offer`.
pub fn negotiate(accept: Option<&str>, offer: Offer) -> Choice {
    let serializers = [Serializer::Json, Serializer::Yaml, Serializer::Protobuf];
    let Some(accept) = accept.filter(|a| !a.is_empty()) else {
        return Choice::Media(MediaType::JSON);
    };
    for clause in parse_accept(accept) {
        if clause.ty == "application" && clause.sub.ends_with("cbor") {
            // Served only where the CBOR feature is on: the upstream knows.
            return Choice::Other;
        }
        for s in serializers {
            if !s.matches(clause.ty, clause.sub) {
                continue;
            }
            if let Some(choice) = accepts(&clause, s, offer) {
                return choice;
            }
        }
    }
    Choice::NotAcceptable
}

/// `acceptMediaTypeOptions` and `AllowsMediaTypeTransform` for one clause and
/// serializer: the answer, or `None` when the clause cannot use it.
fn accepts(clause: &Clause<'_>, s: Serializer, offer: Offer) -> Option<Choice> {
    if let Some(stream) = clause.param("stream")
        && !stream.is_empty()
        && (!s.streams() || stream != "watch")
    {
        return None;
    }
    if let Some(sv) = clause.param("sv")
        && !sv.is_empty()
        && sv != "v1"
    {
        return None;
    }
    let (kind, group, version) = (clause.param("as"), clause.param("g"), clause.param("v"));
    let encoding = match s {
        Serializer::Json => Encoding::Json,
        Serializer::Protobuf => Encoding::Protobuf,
        Serializer::Yaml => Encoding::Json, // unused: YAML is answered below
    };
    // Unknown targets are ignored; the parameter never refuses a clause.
    let drop_managed_fields = clause.param("drop").is_some_and(drops_managed_fields);
    let choice = if kind.is_none() && group.is_none() && version.is_none() {
        // No conversion: a custom resource has no protobuf encoding.
        match s {
            Serializer::Protobuf if offer == Offer::Custom => return None,
            Serializer::Yaml => Choice::Yaml,
            _ => Choice::Media(MediaType {
                encoding,
                shape: Shape::Object,
                drop_managed_fields,
            }),
        }
    } else {
        if group != Some("meta.k8s.io") || !matches!(version, Some("v1" | "v1beta1")) {
            return None;
        }
        match kind.unwrap_or("") {
            "Table" => match s {
                Serializer::Json if version == Some("v1") => Choice::Table("meta.k8s.io/v1"),
                Serializer::Json => Choice::Table("meta.k8s.io/v1beta1"),
                Serializer::Yaml => Choice::Other,
                Serializer::Protobuf => return None,
            },
            kind @ ("PartialObjectMetadata" | "PartialObjectMetadataList") => {
                let shape = if kind == "PartialObjectMetadata" {
                    Shape::Metadata
                } else {
                    Shape::MetadataList
                };
                match (s, version) {
                    (Serializer::Yaml, _) | (_, Some("v1beta1")) => Choice::Other,
                    _ => Choice::Media(MediaType {
                        encoding,
                        shape,
                        drop_managed_fields,
                    }),
                }
            }
            _ => return None,
        }
    };
    let exotic = clause.param("pretty") == Some("1") || clause.param("export") == Some("1");
    Some(if exotic { Choice::Other } else { choice })
}

/// How an error `Status` is written: kube-apiserver's `ErrorNegotiated`
/// negotiates with `DefaultEndpointRestrictions`, which take no `as`/`g`/`v`
/// transform and no `sv`, so a metadata-only or Table clause is skipped; with
/// no clause left it writes raw, indented JSON (`WriteRawJSON`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ErrorEncoding {
    /// Compact JSON and a newline, as for any JSON answer.
    Json,
    /// The protobuf `Status`.
    Protobuf,
    /// Nothing acceptable: `WriteRawJSON`'s indented JSON, no newline.
    Raw,
}

impl ErrorEncoding {
    /// The encoding of an error answered in the form a cache answer takes
    /// (`Raw` is JSON too).
    pub fn encoding(self) -> Encoding {
        match self {
            ErrorEncoding::Protobuf => Encoding::Protobuf,
            ErrorEncoding::Json | ErrorEncoding::Raw => Encoding::Json,
        }
    }
}

/// What the apiserver writes an error in for `accept` (the first `Accept`
/// header). YAML, which r8s does not write, is answered in JSON.
pub fn negotiate_error(accept: Option<&str>) -> ErrorEncoding {
    let serializers = [Serializer::Json, Serializer::Yaml, Serializer::Protobuf];
    let Some(accept) = accept.filter(|a| !a.is_empty()) else {
        return ErrorEncoding::Json;
    };
    for clause in parse_accept(accept) {
        for s in serializers {
            if !s.matches(clause.ty, clause.sub) {
                continue;
            }
            let refused = clause.params.iter().any(|&(k, v)| match k {
                // A transform, even an empty one, is a conversion target.
                "as" | "g" | "v" => true,
                "stream" => !v.is_empty() && (!s.streams() || v != "watch"),
                "sv" => !v.is_empty(),
                _ => false,
            });
            if !refused {
                return match s {
                    Serializer::Protobuf => ErrorEncoding::Protobuf,
                    Serializer::Json | Serializer::Yaml => ErrorEncoding::Json,
                };
            }
        }
    }
    ErrorEncoding::Raw
}

/// Marks a response's body as gzip, varying by `Accept-Encoding`, as the
/// apiserver's gzip writer does.
pub fn mark_gzipped(headers: &mut HeaderMap) {
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("gzip"));
    headers.insert(header::VARY, HeaderValue::from_static("Accept-Encoding"));
}

/// Whether the client takes a gzipped body (`Accept-Encoding: gzip`, not `q=0`).
pub fn accepts_gzip(headers: &HeaderMap) -> bool {
    headers
        .get_all(header::ACCEPT_ENCODING)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(','))
        .any(|e| {
            let mut p = e.split(';').map(str::trim);
            p.next() == Some("gzip") && p.all(|q| q != "q=0")
        })
}

#[cfg(test)]
mod tests;
