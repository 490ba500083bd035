//! Who a client certificate names, read as kube-apiserver's x509
//! authenticator reads it (`x509.CommonNameUserConversion` over Go's
//! `crypto/x509`), byte for byte.
//!
//! The subject is parsed once, at the handshake, as Go's `parseName` parses
//! it ([`Subject::parse`]): a value of any type but the six string types, or
//! a string its type does not allow, fails the handshake as it fails Go's
//! TLS server. Then, per upstream, [`Subject::user`] fills in the user as
//! `pkix.Name.FillFromRDNSequence` and the authenticator do:
//!
//! - the user is the **last** CommonName, in RDN order, multi-valued RDNs
//!   included; an empty one authenticates nobody (the next authenticator
//!   is asked);
//! - the groups are every Organization, in order, nothing trimmed;
//! - from 1.32 the extra `authentication.kubernetes.io/credential-id` is
//!   `X509SHA256=<hex of the certificate's SHA-256>`; from 1.33 the subject's
//!   UID attribute (`1.3.6.1.4.1.57683.2`), exactly one and not empty,
//!   is the user's UID (`AllowParsingUserUIDFromCertAuth`, on by default);
//! - then the authenticated-group adder: `system:authenticated` unless the
//!   user is `system:anonymous` or already in it or in `system:unauthenticated`.
//!
//! Strings are decoded as the upstream's Go decodes them: Go 1.25 reads a
//! T61String as Latin-1 and refuses UCS-2 surrogates and noncharacters in a
//! BMPString; earlier Go takes a T61String's bytes as they are. r8s fails
//! the handshake on what any Go refuses, and authenticates nobody by a
//! name it cannot hold as the upstream would (a T61String beyond ASCII read
//! raw into bytes that are not UTF-8, or for an upstream whose Go is not
//! known yet): less than the apiserver gives, never more (docs/security.md).

use std::collections::BTreeMap;

use crate::api::UserInfo;

/// `2.5.4.3`, commonName.
const CN: &[u8] = &[0x55, 0x04, 0x03];
/// `2.5.4.10`, organizationName.
const O: &[u8] = &[0x55, 0x04, 0x0a];
/// `1.3.6.1.4.1.57683.2`, the user's UID under the CNCF's enterprise number
/// (apimachinery's `asn1.X509UID`).
const UID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x02];

/// The extra key kube-apiserver 1.32+ gives a certificate's user.
pub const CREDENTIAL_ID: &str = "authentication.kubernetes.io/credential-id";

/// The ASN.1 string types Go's `parseASN1String` reads (universal tags).
const T61: u8 = 20;
const PRINTABLE: u8 = 19;
const UTF8: u8 = 12;
const BMP: u8 = 30;
const IA5: u8 = 22;
const NUMERIC: u8 = 18;

/// Why a certificate's subject does not parse as Go parses it (the
/// handshake fails, as Go's TLS server fails it).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum NameError {
    /// Not the DER Go's `cryptobyte` reads (a length, a tag, nesting).
    #[error("x509: invalid RDNSequence")]
    Malformed,
    /// A serial number Go's parser refuses: not a minimally encoded
    /// INTEGER, or negative (Go 1.23+ without `x509negativeserial`).
    #[error("x509: malformed serial number")]
    Serial,
    /// A value whose type is not one of Go's six string types.
    #[error("x509: invalid RDNSequence: invalid attribute value: unsupported string type: {0}")]
    Unsupported(u8),
    /// A string its type does not allow (the type's name).
    #[error("x509: invalid RDNSequence: invalid attribute value: invalid {0}")]
    Invalid(&'static str),
}

/// An attribute's value: its string type and content bytes, checked as Go
/// checks them (what is left is how to decode a T61String).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Value {
    tag: u8,
    bytes: Vec<u8>,
}

/// A certificate subject's attributes that name a user: the CommonNames,
/// Organizations and UIDs in RDN order (the rest only had to parse).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Subject {
    common_names: Vec<Value>,
    organizations: Vec<Value>,
    uids: Vec<Value>,
}

/// How the upstream's Go decodes the string types that changed (Go 1.25).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum GoStrings {
    /// Go 1.25 or later: a T61String is Latin-1.
    Latin1,
    /// Before Go 1.25: a T61String's bytes are the string.
    Raw,
    /// Not known yet: only ASCII T61Strings read the same either way.
    Unknown,
}

/// What the upstream's apiserver makes of a certificate: which of its
/// authenticator's steps it has, and how its Go reads strings.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Reading {
    /// The extra `authentication.kubernetes.io/credential-id` (1.32+).
    pub credential_id: bool,
    /// The subject's UID attribute as the user's UID (1.33+).
    pub uid: bool,
    /// T61String's reading.
    pub strings: GoStrings,
}

impl Reading {
    /// The current apiserver's (what r8s assumes before it has read the
    /// upstream's `/version`), strings aside.
    pub const CURRENT: Reading = Reading {
        credential_id: true,
        uid: true,
        strings: GoStrings::Unknown,
    };
}

/// Who a verified certificate is to the apiserver.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CertUser {
    /// This user.
    User(UserInfo),
    /// Nobody: an empty CommonName (the apiserver asks its next authenticator).
    Nobody,
    /// An authentication error (the apiserver's 401, unless a token
    /// authenticates): the UID attribute's, or a name r8s cannot hold.
    Error(String),
}

impl Subject {
    /// The subject of a DER certificate as Go's `parseName` reads it.
    pub fn of_certificate(der: &[u8]) -> Result<Subject, NameError> {
        let (_, cert) =
            x509_parser::parse_x509_certificate(der).map_err(|_| NameError::Malformed)?;
        if !go_serial(cert.raw_serial()) {
            return Err(NameError::Serial);
        }
        Subject::parse(cert.subject().as_raw())
    }

    /// Go's `parseName` over a DER `Name`: a SEQUENCE of SETs of
    /// SEQUENCEs of an OID and a value of one of six string types.
    pub fn parse(raw: &[u8]) -> Result<Subject, NameError> {
        let mut outer = Der(raw);
        let (SEQUENCE, mut rdns) = outer.read().ok_or(NameError::Malformed)? else {
            return Err(NameError::Malformed);
        };
        let mut subject = Subject::default();
        while !rdns.0.is_empty() {
            let (SET, mut set) = rdns.read().ok_or(NameError::Malformed)? else {
                return Err(NameError::Malformed);
            };
            while !set.0.is_empty() {
                let (SEQUENCE, mut atav) = set.read().ok_or(NameError::Malformed)? else {
                    return Err(NameError::Malformed);
                };
                let (OID, oid) = atav.read().ok_or(NameError::Malformed)? else {
                    return Err(NameError::Malformed);
                };
                if !valid_oid(oid.0) {
                    return Err(NameError::Malformed);
                }
                // Go reads one value and ignores anything after it.
                let (tag, value) = atav.read().ok_or(NameError::Malformed)?;
                let value = Value::checked(tag, value.0)?;
                match oid.0 {
                    CN => subject.common_names.push(value),
                    O => subject.organizations.push(value),
                    UID => subject.uids.push(value),
                    _ => {}
                }
            }
        }
        Ok(subject)
    }

    /// The user the apiserver that reads as `reading` authenticates by
    /// this subject; `sha256` is the certificate's digest (hex).
    pub fn user(&self, sha256: &str, reading: Reading) -> CertUser {
        let read = |v: &Value| v.decode(reading.strings);
        // The last CommonName, as FillFromRDNSequence overwrites it.
        let name = match self.common_names.last().map(read) {
            None => return CertUser::Nobody,
            Some(Err(why)) => return CertUser::Error(why),
            Some(Ok(name)) if name.is_empty() => return CertUser::Nobody,
            Some(Ok(name)) => name,
        };
        let mut groups = Vec::with_capacity(self.organizations.len() + 1);
        for o in &self.organizations {
            match read(o) {
                Ok(g) => groups.push(g),
                Err(why) => return CertUser::Error(why),
            }
        }
        let uid = if reading.uid {
            match self.uids.as_slice() {
                [] => String::new(),
                [one] => match read(one) {
                    Ok(u) if u.is_empty() => {
                        return CertUser::Error("UID cannot be an empty string".into());
                    }
                    Ok(u) => u,
                    Err(why) => return CertUser::Error(why),
                },
                many => {
                    return CertUser::Error(format!(
                        "expected 1 UID, but found multiple: {}",
                        many.len()
                    ));
                }
            }
        } else {
            String::new()
        };
        let mut extra = BTreeMap::new();
        if reading.credential_id {
            extra.insert(
                CREDENTIAL_ID.to_string(),
                vec![format!("X509SHA256={sha256}")],
            );
        }
        let mut user = UserInfo {
            name,
            uid,
            groups,
            extra,
        };
        user.add_authenticated_group();
        CertUser::User(user)
    }
}

impl Value {
    /// A value of `tag` whose bytes are checked as Go's `parseASN1String`
    /// checks them (Go 1.25's stricter BMPString: surrogates and
    /// noncharacters are refused).
    fn checked(tag: u8, bytes: &[u8]) -> Result<Value, NameError> {
        let ok = match tag {
            T61 => true,
            PRINTABLE => bytes.iter().copied().all(printable),
            UTF8 => std::str::from_utf8(bytes).is_ok(),
            BMP => bmp(bytes).is_some(),
            IA5 => bytes.is_ascii(),
            NUMERIC => bytes.iter().all(|b| b.is_ascii_digit() || *b == b' '),
            other => return Err(NameError::Unsupported(other)),
        };
        if !ok {
            return Err(NameError::Invalid(match tag {
                PRINTABLE => "PrintableString",
                UTF8 => "UTF-8 string",
                BMP => "BMPString",
                IA5 => "IA5String",
                _ => "NumericString",
            }));
        }
        Ok(Value {
            tag,
            bytes: bytes.to_vec(),
        })
    }

    /// The string Go makes of it; `Err`: a name r8s cannot hold as the
    /// upstream reads it.
    fn decode(&self, strings: GoStrings) -> Result<String, String> {
        match self.tag {
            BMP => Ok(bmp(&self.bytes).unwrap_or_default()),
            T61 if self.bytes.is_ascii() => Ok(ascii(&self.bytes)),
            T61 => match strings {
                GoStrings::Latin1 => Ok(self.bytes.iter().map(|b| char::from(*b)).collect()),
                GoStrings::Raw => String::from_utf8(self.bytes.clone()).map_err(|_| {
                    "a T61String the upstream's Go reads as bytes that are not UTF-8: \
                     r8s cannot hold that name"
                        .to_string()
                }),
                GoStrings::Unknown => Err(
                    "a T61String beyond ASCII, before r8s knows the upstream's Go (which \
                     reads it as Latin-1 from Go 1.25, as bytes before)"
                        .to_string(),
                ),
            },
            // Checked: ASCII (PrintableString, IA5String, NumericString)
            // or UTF-8.
            _ => Ok(String::from_utf8_lossy(&self.bytes).into_owned()),
        }
    }
}

fn ascii(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Whether Go's parser takes a serial number's INTEGER contents:
/// cryptobyte's `ReadASN1Integer` (not empty, minimally encoded) and
/// positive (a negative one is refused from Go 1.23).
fn go_serial(b: &[u8]) -> bool {
    match b {
        [] => false,
        [first, ..] if first & 0x80 != 0 => false,
        [0, second, ..] if second & 0x80 == 0 => false,
        _ => true,
    }
}

/// Go's `isPrintable` (PrintableString, with `*` and `&` as Go allows them).
fn printable(b: u8) -> bool {
    b.is_ascii_alphanumeric()
        || (b'\''..=b')').contains(&b)
        || (b'+'..=b'/').contains(&b)
        || matches!(b, b' ' | b':' | b'=' | b'?' | b'*' | b'&')
}

/// A BMPString (UCS-2, big-endian) as Go 1.25 decodes it: even length, a
/// trailing NUL pair dropped, no surrogate or noncharacter.
fn bmp(bytes: &[u8]) -> Option<String> {
    if !bytes.len().is_multiple_of(2) {
        return None;
    }
    let bytes = bytes.strip_suffix(&[0, 0]).unwrap_or(bytes);
    bytes
        .chunks_exact(2)
        .map(|p| {
            let point = u16::from_be_bytes([p[0], p[1]]);
            let refused = point == 0xfffe
                || point == 0xffff
                || (0xfdd0..=0xfdef).contains(&point)
                || (0xd800..=0xdfff).contains(&point);
            (!refused).then(|| char::from_u32(u32::from(point)))?
        })
        .collect()
}

/// Go's `ReadASN1ObjectIdentifier` checks: base-128 components of at most
/// five bytes, none with a leading 0x80, each within 31 bits, the last one
/// ended.
fn valid_oid(b: &[u8]) -> bool {
    if b.is_empty() {
        return false;
    }
    let mut rest = b;
    while !rest.is_empty() {
        let mut value: u32 = 0;
        let mut i = 0;
        loop {
            let Some((&byte, r)) = rest.split_first() else {
                return false;
            };
            if i == 5 || value >= 1 << (31 - 7) || (i == 0 && byte == 0x80) {
                return false;
            }
            value = (value << 7) | u32::from(byte & 0x7f);
            rest = r;
            i += 1;
            if byte & 0x80 == 0 {
                break;
            }
        }
    }
    true
}

const SEQUENCE: u8 = 0x30;
const SET: u8 = 0x31;
const OID: u8 = 0x06;

/// A DER reader as Go's `cryptobyte` reads: one-byte tags, definite
/// lengths in their shortest form.
struct Der<'a>(&'a [u8]);

impl<'a> Der<'a> {
    /// The next element's tag and contents.
    fn read(&mut self) -> Option<(u8, Der<'a>)> {
        let s = self.0;
        let (&tag, rest) = s.split_first()?;
        if tag & 0x1f == 0x1f {
            return None;
        }
        let (&len_byte, rest) = rest.split_first()?;
        let (len, rest) = if len_byte & 0x80 == 0 {
            (usize::from(len_byte), rest)
        } else {
            let n = usize::from(len_byte & 0x7f);
            if n == 0 || n > 4 || rest.len() < n {
                return None;
            }
            let (len_bytes, rest) = rest.split_at(n);
            if len_bytes[0] == 0 {
                return None;
            }
            let len = len_bytes
                .iter()
                .fold(0usize, |acc, b| (acc << 8) | usize::from(*b));
            if len < 128 {
                return None;
            }
            (len, rest)
        };
        if rest.len() < len {
            return None;
        }
        let (contents, rest) = rest.split_at(len);
        self.0 = rest;
        Some((tag, Der(contents)))
    }
}

#[cfg(test)]
mod tests;
