//! CEL's tokens, as cel-go's ANTLR lexer makes them (the subset a
//! selector can meet: every token kind, string escapes decoded).

/// One token, and where its text is in the input.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Tok {
    Ident(String),
    Int(i64),
    Uint(u64),
    Float(f64),
    Str(String),
    Bytes,
    True,
    False,
    Null,
    /// An operator or punctuation, as written (`||`, `(`, `in`, ...).
    Punct(&'static str),
    Eof,
}

/// A token and its text (for messages: ANTLR quotes a token's text).
#[derive(Debug, Clone)]
pub(super) struct Token {
    pub(super) tok: Tok,
    pub(super) text: String,
}

const PUNCTS: [&str; 25] = [
    "||", "&&", "==", "!=", "<=", ">=", "!", "<", ">", "+", "-", "*", "/", "%", "?", ":", ".", ",",
    "[", "]", "(", ")", "{", "}", "=",
];

/// The input's tokens, ending with `Eof`; or ANTLR's message for the first
/// character no token starts with ("token recognition error at: '…'").
pub(super) fn tokens(src: &str) -> Result<Vec<Token>, String> {
    let b = src.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    let fail = |start: usize, at: usize| {
        let end = (at + 1).min(src.len());
        let end = (end..=src.len())
            .find(|&e| src.is_char_boundary(e))
            .unwrap_or(src.len());
        Err(format!(
            "token recognition error at: '{}'",
            &src[start..end]
        ))
    };
    while i < b.len() {
        let c = b[i];
        if matches!(c, b' ' | b'\t' | b'\n' | b'\r' | 0x0c) {
            i += 1;
            continue;
        }
        if src[i..].starts_with("//") {
            i = src[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        }
        let start = i;
        let token = |tok, end: usize| Token {
            tok,
            text: src[start..end].to_string(),
        };
        // Strings and bytes, with their r/b prefixes.
        let mut j = i;
        let (mut raw, mut bytes) = (false, false);
        while j < b.len() && j < i + 2 {
            match b[j] {
                b'r' | b'R' if !raw => raw = true,
                b'b' | b'B' if !bytes => bytes = true,
                _ => break,
            }
            j += 1;
        }
        if j < b.len() && matches!(b[j], b'\'' | b'"') {
            let (value, end) = match string(src, j, raw) {
                Ok(v) => v,
                Err(at) => return fail(start, at),
            };
            out.push(token(if bytes { Tok::Bytes } else { Tok::Str(value) }, end));
            i = end;
            continue;
        }
        if c.is_ascii_alphabetic() || c == b'_' {
            let end = (i..b.len())
                .find(|&k| !(b[k].is_ascii_alphanumeric() || b[k] == b'_'))
                .unwrap_or(b.len());
            let word = &src[i..end];
            let tok = match word {
                "true" => Tok::True,
                "false" => Tok::False,
                "null" => Tok::Null,
                "in" => Tok::Punct("in"),
                w => Tok::Ident(w.to_string()),
            };
            out.push(token(tok, end));
            i = end;
            continue;
        }
        if c.is_ascii_digit() || (c == b'.' && b.get(i + 1).is_some_and(u8::is_ascii_digit)) {
            let (tok, end) = match number(src, i) {
                Ok(n) => n,
                Err(at) => return fail(start, at),
            };
            out.push(token(tok, end));
            i = end;
            continue;
        }
        match PUNCTS.iter().find(|p| src[i..].starts_with(**p)) {
            Some(&"=") | None => {
                return fail(start, i + usize::from(c == b'=' || c == b'|' || c == b'&'));
            }
            Some(p) => {
                out.push(token(Tok::Punct(p), i + p.len()));
                i += p.len();
            }
        }
    }
    out.push(Token {
        tok: Tok::Eof,
        text: "<EOF>".into(),
    });
    Ok(out)
}

/// A number from `i`: its token and end, or where it went wrong.
fn number(src: &str, i: usize) -> Result<(Tok, usize), usize> {
    let b = src.as_bytes();
    let digits = |mut k: usize, hex: bool| {
        while k < b.len() && (b[k].is_ascii_digit() || (hex && b[k].is_ascii_hexdigit())) {
            k += 1;
        }
        k
    };
    if src[i..].starts_with("0x") || src[i..].starts_with("0X") {
        let end = digits(i + 2, true);
        if end == i + 2 {
            return Err(i + 2);
        }
        let v = u64::from_str_radix(&src[i + 2..end], 16).map_err(|_| end)?;
        if b.get(end).is_some_and(|c| matches!(c, b'u' | b'U')) {
            return Ok((Tok::Uint(v), end + 1));
        }
        return Ok((Tok::Int(v as i64), end));
    }
    let int_end = digits(i, false);
    let mut end = int_end;
    let mut float = false;
    if b.get(end) == Some(&b'.') && b.get(end + 1).is_some_and(u8::is_ascii_digit) {
        end = digits(end + 1, false);
        float = true;
    }
    if b.get(end).is_some_and(|c| matches!(c, b'e' | b'E')) {
        let mut k = end + 1;
        if b.get(k).is_some_and(|c| matches!(c, b'+' | b'-')) {
            k += 1;
        }
        let e = digits(k, false);
        if e > k {
            end = e;
            float = true;
        }
    }
    let text = &src[i..end];
    if float {
        return Ok((Tok::Float(text.parse().unwrap_or(0.0)), end));
    }
    if b.get(end).is_some_and(|c| matches!(c, b'u' | b'U')) {
        return Ok((Tok::Uint(text.parse().unwrap_or(u64::MAX)), end + 1));
    }
    Ok((Tok::Int(text.parse().unwrap_or(i64::MAX)), end))
}

/// A quoted string from its opening quote at `q`: its value and end, or
/// where it went wrong (unterminated, a bad escape).
fn string(src: &str, q: usize, raw: bool) -> Result<(String, usize), usize> {
    let b = src.as_bytes();
    let quote = b[q];
    let triple = b.len() >= q + 3 && b[q + 1] == quote && b[q + 2] == quote;
    let open = if triple { 3 } else { 1 };
    let mut i = q + open;
    let mut out = String::new();
    loop {
        if i >= b.len() {
            return Err(b.len());
        }
        if triple && b[i..].starts_with(&[quote; 3]) {
            return Ok((out, i + 3));
        }
        let c = b[i];
        if !triple && c == quote {
            return Ok((out, i + 1));
        }
        if !triple && matches!(c, b'\n' | b'\r') {
            return Err(i);
        }
        if c == b'\\' && !raw {
            let (ch, next) = escape(src, i).ok_or(i + 1)?;
            out.push(ch);
            i = next;
            continue;
        }
        let ch = src[i..].chars().next().unwrap_or('\u{fffd}');
        out.push(ch);
        i += ch.len_utf8();
    }
}

/// The escape at `i` (a backslash): its character and where it ends.
fn escape(src: &str, i: usize) -> Option<(char, usize)> {
    let b = src.as_bytes();
    let c = *b.get(i + 1)?;
    let simple = match c {
        b'a' => Some('\x07'),
        b'b' => Some('\x08'),
        b'f' => Some('\x0c'),
        b'n' => Some('\n'),
        b'r' => Some('\r'),
        b't' => Some('\t'),
        b'v' => Some('\x0b'),
        b'\\' | b'\'' | b'"' | b'`' | b'?' => Some(char::from(c)),
        _ => None,
    };
    if let Some(ch) = simple {
        return Some((ch, i + 2));
    }
    let hex = |n: usize| {
        let s = src.get(i + 2..i + 2 + n)?;
        let v = u32::from_str_radix(s, 16).ok()?;
        Some((char::from_u32(v)?, i + 2 + n))
    };
    match c {
        b'x' | b'X' => hex(2),
        b'u' => hex(4),
        b'U' => hex(8),
        b'0'..=b'3' => {
            let s = src.get(i + 1..i + 4)?;
            let v = u32::from_str_radix(s, 8).ok()?;
            Some((char::from_u32(v)?, i + 4))
        }
        _ => None,
    }
}
