//! `shardSelector` (KEP-5866, alpha in Kubernetes 1.36 behind
//! `ShardedListAndWatch`): a list or watch limited to the objects whose
//! `metadata.uid` (or `metadata.namespace`) hashes, by 64-bit FNV-1a, into
//! one of the given ranges.
//!
//! The selector is a CEL expression: `shardRange(object.metadata.uid,
//! '0x0000000000000000', '0x8000000000000000')`, several joined by `||`.
//! 1.36 parses it with cel-go and walks the syntax tree; this module parses
//! the same CEL (literals, strings with their escapes, operators, calls,
//! selections, lists and maps) and refuses what 1.36 refuses with its
//! messages (`k8s.io/apiserver/pkg/sharding`). Syntax errors carry ANTLR's
//! wording for the common cases (an expression missing, a `)` missing,
//! input left over, a character no token starts with).

mod lex;
mod parse;

use std::fmt::Write as _;

use self::parse::{Expr, Kind, Lit};

/// Which field an object's shard is computed from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShardKey {
    /// `object.metadata.uid`: objects spread evenly, and never move.
    Uid,
    /// `object.metadata.namespace`: a namespace's objects together.
    Namespace,
}

impl ShardKey {
    /// The field path as the selector names it.
    pub fn path(self) -> &'static str {
        match self {
            ShardKey::Uid => "object.metadata.uid",
            ShardKey::Namespace => "object.metadata.namespace",
        }
    }
}

/// A parsed `shardSelector`: the key and its hash ranges (an object is
/// selected if its hash is in any of them).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShardSelector {
    key: ShardKey,
    /// `[start, end)`, `end` up to 2^64.
    ranges: Vec<(u64, u128)>,
    /// The selector as 1.36 writes it back (`ListMeta.shardInfo.selector`).
    canonical: String,
}

/// 64-bit FNV-1a, the hash a shard range is over.
pub fn fnv1a(s: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in s.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
    }
    h
}

impl ShardSelector {
    /// Parses a `shardSelector` parameter (its value given: an absent one
    /// selects everything and is not parsed). The error is 1.36's message.
    pub fn parse(text: &str) -> Result<ShardSelector, String> {
        parse_selector(text).map_err(|e| format!("invalid shard selector: {e}"))
    }

    /// The field hashed.
    pub fn key(&self) -> ShardKey {
        self.key
    }

    /// Whether an object whose key field hashes to `hash` is selected.
    pub fn selects(&self, hash: u64) -> bool {
        self.ranges
            .iter()
            .any(|&(start, end)| hash >= start && u128::from(hash) < end)
    }

    /// The selector as the apiserver echoes it in `shardInfo.selector`.
    pub fn canonical(&self) -> &str {
        &self.canonical
    }

    /// The [`BUCKETS`] (the hash's top bits) its ranges reach into, fully
    /// or in part: an object in any other bucket is never selected, so a
    /// watcher of this shard need not wake for it.
    pub fn buckets(&self) -> Vec<u8> {
        let mut out: Vec<u8> = Vec::new();
        // (The parser refuses an empty range.)
        for &(start, end) in &self.ranges {
            let first = bucket(start);
            let last = bucket((end - 1) as u64);
            out.extend(first..=last);
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

/// How many buckets [`bucket`] splits the hash space into: enough that a
/// shard of an uneven split (thirds, fifths) wakes for few events beyond
/// its own, few enough that a watcher registers in a handful.
pub const BUCKETS: u32 = 64;

/// The bucket a hash falls in: its top six bits.
pub fn bucket(hash: u64) -> u8 {
    (hash >> (64 - BUCKETS.trailing_zeros())) as u8
}

fn parse_selector(text: &str) -> Result<ShardSelector, String> {
    let text = text.trim();
    if text.is_empty() {
        return Err(
            "empty shard selector is not allowed; omit the parameter for unfiltered lists".into(),
        );
    }
    let expr = parse::parse(text).map_err(|e| format!("CEL parse error: {e}"))?;
    let mut reqs = Vec::new();
    walk(&expr, &mut reqs)?;
    let first = reqs[0].0;
    if let Some(other) = reqs.iter().find(|r| r.0 != first) {
        return Err(format!(
            "all shard ranges must use the same field, got {} and {}",
            go_quote(first.path()),
            go_quote(other.0.path())
        ));
    }
    let mut canonical = String::new();
    let mut ranges = Vec::with_capacity(reqs.len());
    for (i, (key, start, end)) in reqs.iter().enumerate() {
        if i > 0 {
            canonical.push_str(" || ");
        }
        let _ = write!(canonical, "shardRange({}, '{start}', '{end}')", key.path());
        ranges.push((hex_value(start) as u64, hex_value(end)));
    }
    Ok(ShardSelector {
        key: first,
        ranges,
        canonical,
    })
}

/// One `shardRange(key, 'start', 'end')`, its bounds as written (`0x…`).
type Requirement = (ShardKey, String, String);

/// 1.36's `walkExpr`: `shardRange()` calls, joined by `||`, in order.
fn walk(e: &Expr, out: &mut Vec<Requirement>) -> Result<(), String> {
    let Expr::Call { function, args } = e else {
        return Err(format!(
            "unexpected expression kind {}; expected shardRange() call or || operator",
            e.kind() as u8
        ));
    };
    match function.as_str() {
        "_||_" => {
            walk(&args[0], out)?;
            walk(&args[1], out)
        }
        "shardRange" => {
            out.push(requirement(args)?);
            Ok(())
        }
        other => Err(format!(
            "unsupported function {}; only shardRange() and || are allowed",
            go_quote(other)
        )),
    }
}

fn requirement(args: &[Expr]) -> Result<Requirement, String> {
    if args.len() != 3 {
        return Err(format!(
            "shardRange() requires exactly 3 arguments, got {}",
            args.len()
        ));
    }
    let path = field_path(&args[0]).map_err(|e| format!("shardRange() first argument: {e}"))?;
    let key = match path.as_str() {
        "object.metadata.uid" => ShardKey::Uid,
        "object.metadata.namespace" => ShardKey::Namespace,
        _ => {
            return Err(format!(
                "unsupported field path {}; supported: object.metadata.uid, object.metadata.namespace",
                go_quote(&path)
            ));
        }
    };
    let start = hex_literal(&args[1], "hexStart")?;
    let end = hex_literal(&args[2], "hexEnd")?;
    if hex_value(&start) >= hex_value(&end) {
        return Err(format!(
            "shard range start {start} must be less than end {end}"
        ));
    }
    Ok((key, start, end))
}

fn field_path(e: &Expr) -> Result<String, String> {
    match e {
        Expr::Ident(name) => Ok(name.clone()),
        Expr::Select { operand, field } => Ok(format!("{}.{field}", field_path(operand)?)),
        other => Err(format!(
            "expected field path (e.g. object.metadata.uid), got expression kind {}",
            other.kind() as u8
        )),
    }
}

/// A bound: a string literal of `0x` and 16 lowercase hex digits, or 2^64.
fn hex_literal(e: &Expr, name: &str) -> Result<String, String> {
    let Expr::Literal(lit) = e else {
        return Err(format!(
            "{name} must be a string literal (e.g. '0xff'), got expression kind {}",
            e.kind() as u8
        ));
    };
    let s = match lit {
        Lit::String(s) => s,
        other => {
            return Err(format!(
                "{name} must be a string literal, got {}",
                other.go_type()
            ));
        }
    };
    let Some(hex) = s.strip_prefix("0x") else {
        return Err(format!("{name} must have '0x' prefix, got {}", go_quote(s)));
    };
    if hex.is_empty() {
        return Err(format!("{name}: hex value is required after '0x'"));
    }
    if hex.len() > 17 {
        return Err(format!(
            "{name}: hex value too long ({} chars, max 17): {}",
            hex.len(),
            go_quote(hex)
        ));
    }
    if let Some(c) = hex.chars().find(|c| !matches!(c, '0'..='9' | 'a'..='f')) {
        return Err(format!(
            "{name}: invalid hex character {} in {}",
            go_quote(c.encode_utf8(&mut [0; 4])),
            go_quote(s)
        ));
    }
    if hex.len() == 17 {
        if s != "0x10000000000000000" {
            return Err(format!(
                "{name}: 17-digit hex value must be '0x10000000000000000' (2^64), got {}",
                go_quote(s)
            ));
        }
    } else if hex.len() != 16 {
        let padded = format!("0x{}{hex}", "0".repeat(16 - hex.len()));
        return Err(format!(
            "{name} must be a 0x-prefixed 16-digit hex value, got {} (did you mean {}?)",
            go_quote(s),
            go_quote(&padded)
        ));
    }
    Ok(s.clone())
}

/// A checked bound's value (`0x` and 16 or 17 hex digits).
fn hex_value(s: &str) -> u128 {
    u128::from_str_radix(&s[2..], 16).unwrap_or(0)
}

/// `s` as Go's `%q` writes it (`strconv.Quote`).
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\x07' => out.push_str("\\a"),
            '\x08' => out.push_str("\\b"),
            '\x0c' => out.push_str("\\f"),
            '\n' => out.push_str("\\n"),
            '\r' => out.push_str("\\r"),
            '\t' => out.push_str("\\t"),
            '\x0b' => out.push_str("\\v"),
            c if (c as u32) < 0x20 || c as u32 == 0x7f => {
                let _ = write!(out, "\\x{:02x}", c as u32);
            }
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

impl Expr {
    /// cel-go's `ExprKind` number, which 1.36's messages print.
    fn kind(&self) -> Kind {
        match self {
            Expr::Call { .. } => Kind::Call,
            Expr::Ident(_) => Kind::Ident,
            Expr::List => Kind::List,
            Expr::Literal(_) => Kind::Literal,
            Expr::Map => Kind::Map,
            Expr::Select { .. } => Kind::Select,
            Expr::Struct => Kind::Struct,
        }
    }
}

#[cfg(test)]
mod tests;
