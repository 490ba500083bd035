//! Client certificates with any subject, for the attacker's suites: what
//! rcgen and openssl cannot make (two CommonNames, multi-valued RDNs, a
//! BMPString or T61String, bytes any string type takes), signed by a kit's
//! CA (its RSA key, PKCS#8) or by a CA of its own, valid or expired, for
//! client or server authentication. The DER is written here, by hand, so
//! that nothing between the test and the bytes normalizes a subject.

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

use ring::rand::SystemRandom;
use ring::signature::{self, EcdsaKeyPair, KeyPair, RsaKeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use super::kube136::Identity;

/// `2.5.4.3`, commonName.
pub const CN: &[u8] = &[0x55, 0x04, 0x03];
/// `2.5.4.10`, organizationName.
pub const O: &[u8] = &[0x55, 0x04, 0x0a];
/// `1.3.6.1.4.1.57683.2`, the user's UID (kube-apiserver 1.33+).
pub const UID: &[u8] = &[0x2b, 0x06, 0x01, 0x04, 0x01, 0x83, 0xc2, 0x53, 0x02];

/// ASN.1 string tags.
pub const UTF8: u8 = 12;
pub const PRINTABLE: u8 = 19;
pub const T61: u8 = 20;
pub const BMP: u8 = 30;
pub const UNIVERSAL: u8 = 28;

/// One attribute: type (OID contents), value tag, value bytes.
pub type Attr = (&'static [u8], u8, Vec<u8>);

/// A UTF8String attribute.
pub fn utf8(oid: &'static [u8], v: &str) -> Attr {
    (oid, UTF8, v.as_bytes().to_vec())
}

/// A BMPString (UCS-2, big-endian) attribute.
pub fn bmp(oid: &'static [u8], v: &str) -> Attr {
    (
        oid,
        BMP,
        v.encode_utf16().flat_map(u16::to_be_bytes).collect(),
    )
}

/// A DER element.
pub fn tlv(tag: u8, contents: &[u8]) -> Vec<u8> {
    let mut out = vec![tag];
    let n = contents.len();
    if n < 128 {
        out.push(n as u8);
    } else {
        let len = (n as u32).to_be_bytes();
        let skip = len.iter().take_while(|b| **b == 0).count();
        out.push(0x80 | (4 - skip) as u8);
        out.extend_from_slice(&len[skip..]);
    }
    out.extend_from_slice(contents);
    out
}

fn seq(parts: &[&[u8]]) -> Vec<u8> {
    tlv(0x30, &parts.concat())
}

/// A `Name` of RDNs, each a SET of its attributes (in the order given: a
/// multi-valued RDN keeps it, as a forged one would).
pub fn name(rdns: &[Vec<Attr>]) -> Vec<u8> {
    let rdns: Vec<u8> = rdns
        .iter()
        .flat_map(|rdn| {
            let set: Vec<u8> = rdn
                .iter()
                .flat_map(|(oid, tag, v)| seq(&[&tlv(0x06, oid), &tlv(*tag, v)]))
                .collect();
            tlv(0x31, &set)
        })
        .collect();
    tlv(0x30, &rdns)
}

/// The contents of each element of a DER SEQUENCE's body.
fn elements(mut der: &[u8]) -> Vec<&[u8]> {
    let mut out = Vec::new();
    while der.len() >= 2 {
        let (len, header) = match der[1] {
            l if l < 0x80 => (usize::from(l), 2),
            l => {
                let n = usize::from(l & 0x7f);
                let len = der[2..2 + n]
                    .iter()
                    .fold(0usize, |a, b| (a << 8) | usize::from(*b));
                (len, 2 + n)
            }
        };
        out.push(&der[..header + len]);
        der = &der[header + len..];
    }
    out
}

/// The body of a DER element (past its tag and length).
fn body(der: &[u8]) -> &[u8] {
    match der[1] {
        l if l < 0x80 => &der[2..],
        l => &der[2 + usize::from(l & 0x7f)..],
    }
}

/// `YYMMDDHHMMSSZ` (UTCTime) of `t`.
fn utc_time(t: SystemTime) -> Vec<u8> {
    let s = humantime::format_rfc3339_seconds(t).to_string(); // 2026-12-07T02:14:50Z
    let digits: String = s[2..].chars().filter(char::is_ascii_digit).collect();
    tlv(0x17, format!("{digits}Z").as_bytes())
}

/// What a certificate is for, and when.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Use {
    /// Client authentication, valid now.
    Client,
    /// Client authentication, expired (2020).
    Expired,
    /// Server authentication only.
    ServerOnly,
    /// Client authentication, valid now, with a serial number Go's parser
    /// refuses (a needless leading zero) and webpki takes.
    MalformedSerial,
}

/// Who signs: a kit's CA (RSA) or one made here (ECDSA P-256).
enum Key {
    Rsa(RsaKeyPair),
    Ecdsa(EcdsaKeyPair),
}

/// A CA that issues certificates with any subject.
pub struct Forge {
    /// The CA certificate's subject (each leaf's issuer).
    issuer: Vec<u8>,
    key: Key,
    dir: PathBuf,
    /// The CA certificate (PEM), for a forge that made its own.
    pub ca_pem: Option<String>,
}

const RSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0x86, 0xf7, 0x0d, 0x01, 0x01, 0x0b];
const ECDSA_SHA256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x04, 0x03, 0x02];
const EC_PUBLIC_KEY: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x02, 0x01];
const P256: &[u8] = &[0x2a, 0x86, 0x48, 0xce, 0x3d, 0x03, 0x01, 0x07];

/// A new P-256 key: its PKCS#8 document and the key.
fn p256() -> (Vec<u8>, EcdsaKeyPair) {
    let rng = SystemRandom::new();
    let alg = &signature::ECDSA_P256_SHA256_ASN1_SIGNING;
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(alg, &rng).unwrap();
    let key = EcdsaKeyPair::from_pkcs8(alg, pkcs8.as_ref(), &rng).unwrap();
    (pkcs8.as_ref().to_vec(), key)
}

fn spki(key: &EcdsaKeyPair) -> Vec<u8> {
    let mut bits = vec![0u8];
    bits.extend_from_slice(key.public_key().as_ref());
    seq(&[
        &seq(&[&tlv(0x06, EC_PUBLIC_KEY), &tlv(0x06, P256)]),
        &tlv(0x03, &bits),
    ])
}

fn extension(oid: &[u8], critical: bool, value: &[u8]) -> Vec<u8> {
    let crit = if critical {
        tlv(0x01, &[0xff])
    } else {
        Vec::new()
    };
    seq(&[&tlv(0x06, oid), &crit, &tlv(0x04, value)])
}

impl Forge {
    /// A forge signing with the kit's CA: its certificate and PKCS#8 key
    /// files; leaves are written under `dir`.
    pub fn of_kit(ca_crt: &Path, ca_key: &Path, dir: &Path) -> Forge {
        let ca = CertificateDer::from_pem_file(ca_crt).unwrap();
        let key = PrivateKeyDer::from_pem_file(ca_key).unwrap();
        let PrivateKeyDer::Pkcs8(pkcs8) = key else {
            panic!("{}: a PKCS#8 key", ca_key.display());
        };
        let tbs = elements(body(&ca))[0];
        // version [0], serial, signature, issuer, validity, subject
        let subject = elements(body(tbs))[5].to_vec();
        Forge {
            issuer: subject,
            key: Key::Rsa(RsaKeyPair::from_pkcs8(pkcs8.secret_pkcs8_der()).unwrap()),
            dir: dir.to_path_buf(),
            ca_pem: None,
        }
    }

    /// A CA of its own (no kit trusts it).
    pub fn stranger(dir: &Path) -> Forge {
        let (_, key) = p256();
        let subject = name(&[vec![utf8(CN, "stranger-ca")]]);
        let mut f = Forge {
            issuer: subject.clone(),
            key: Key::Ecdsa(key),
            dir: dir.to_path_buf(),
            ca_pem: None,
        };
        let Key::Ecdsa(k) = &f.key else {
            unreachable!()
        };
        let basic = seq(&[&tlv(0x01, &[0xff])]);
        let exts = [
            extension(&[0x55, 0x1d, 0x13], true, &basic),
            extension(&[0x55, 0x1d, 0x0f], true, &tlv(0x03, &[0x02, 0x04])),
        ];
        let der = f.sign(&subject, &spki(k), &exts, Use::Client);
        f.ca_pem = Some(pem("CERTIFICATE", &der));
        f
    }

    /// Signs a TBS certificate for `subject` and `spki`.
    fn sign(&self, subject: &[u8], spki: &[u8], exts: &[Vec<u8>], usage: Use) -> Vec<u8> {
        let now = SystemTime::now();
        let (from, to) = match usage {
            Use::Expired => {
                let t = SystemTime::UNIX_EPOCH + Duration::from_secs(1_577_836_800); // 2020-01-01
                (t, t + Duration::from_secs(86_400))
            }
            _ => (
                now - Duration::from_secs(3600),
                now + Duration::from_secs(86_400),
            ),
        };
        let alg = match self.key {
            Key::Rsa(_) => seq(&[&tlv(0x06, RSA_SHA256), &tlv(0x05, &[])]),
            Key::Ecdsa(_) => seq(&[&tlv(0x06, ECDSA_SHA256)]),
        };
        // A positive INTEGER, minimally encoded (Go's parser refuses any
        // other), but where the malformed one is asked for.
        let mut serial = fastrand::u64(..).to_be_bytes().to_vec();
        serial[0] = 1 + serial[0] % 127;
        if usage == Use::MalformedSerial {
            serial = vec![0x00, 0x12, 0x34];
        }
        let tbs = seq(&[
            &tlv(0xa0, &tlv(0x02, &[2])),
            &tlv(0x02, &serial),
            &alg,
            &self.issuer,
            &seq(&[&utc_time(from), &utc_time(to)]),
            subject,
            spki,
            &tlv(0xa3, &seq(&[&exts.concat()])),
        ]);
        let rng = SystemRandom::new();
        let sig = match &self.key {
            Key::Rsa(k) => {
                let mut sig = vec![0; k.public().modulus_len()];
                k.sign(&signature::RSA_PKCS1_SHA256, &rng, &tbs, &mut sig)
                    .unwrap();
                sig
            }
            Key::Ecdsa(k) => k.sign(&rng, &tbs).unwrap().as_ref().to_vec(),
        };
        let mut bits = vec![0u8];
        bits.extend(sig);
        seq(&[&tbs, &alg, &tlv(0x03, &bits)])
    }

    /// A leaf for `subject` (its RDNs), written as `<file>.crt` and
    /// `<file>.key` under the forge's folder.
    pub fn issue(&self, file: &str, subject: &[Vec<Attr>], usage: Use) -> Identity {
        let (pkcs8, key) = p256();
        let eku = match usage {
            Use::ServerOnly => [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x01],
            _ => [0x2b, 0x06, 0x01, 0x05, 0x05, 0x07, 0x03, 0x02],
        };
        let exts = [extension(
            &[0x55, 0x1d, 0x25],
            false,
            &seq(&[&tlv(0x06, &eku)]),
        )];
        let der = self.sign(&name(subject), &spki(&key), &exts, usage);
        let (cert, key_file) = (
            self.dir.join(format!("{file}.crt")),
            self.dir.join(format!("{file}.key")),
        );
        std::fs::write(&cert, pem("CERTIFICATE", &der)).unwrap();
        std::fs::write(&key_file, pem("PRIVATE KEY", &pkcs8)).unwrap();
        Identity {
            cert,
            key: key_file,
        }
    }
}

/// PEM of `der` under `label`.
fn pem(label: &str, der: &[u8]) -> String {
    use base64::Engine;
    let b64 = base64::engine::general_purpose::STANDARD.encode(der);
    let lines: Vec<&str> = b64
        .as_bytes()
        .chunks(64)
        .map(|c| std::str::from_utf8(c).unwrap())
        .collect();
    format!(
        "-----BEGIN {label}-----\n{}\n-----END {label}-----\n",
        lines.join("\n")
    )
}
