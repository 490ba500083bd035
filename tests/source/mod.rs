//! A reader of this crate's `src/`: which file uses which, from the source
//! text alone (for `tests/structure.rs`).
//!
//! A dependency is any path that reaches another file: `use` declarations
//! (re-exports included) and paths in code (`crate::a::b`, `super::x`,
//! `child::y`, or a name brought in by `use` followed by `::`). Comments and
//! string literals are skipped. Test modules inside a file count as that file.
#![allow(dead_code)]

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};

#[derive(Debug, Clone, PartialEq)]
enum Tok {
    Ident(String),
    Path, // `::`
    Punct(char),
}

/// Tokens of Rust source without comments, strings, chars or numbers.
fn tokenize(src: &str) -> Vec<Tok> {
    let b: Vec<char> = src.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    let ident_start = |c: char| c.is_ascii_alphabetic() || c == '_';
    let ident_char = |c: char| c.is_ascii_alphanumeric() || c == '_';
    while i < b.len() {
        let c = b[i];
        let next = b.get(i + 1).copied().unwrap_or('\0');
        if c.is_whitespace() {
            i += 1;
        } else if c == '/' && next == '/' {
            while i < b.len() && b[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == '*' {
            let mut depth = 0;
            while i < b.len() {
                if b[i] == '/' && b.get(i + 1) == Some(&'*') {
                    depth += 1;
                    i += 2;
                } else if b[i] == '*' && b.get(i + 1) == Some(&'/') {
                    depth -= 1;
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    i += 1;
                }
            }
        } else if (c == 'r' || (c == 'b' && next == 'r')) && {
            let mut j = i + if c == 'b' { 2 } else { 1 };
            while b.get(j) == Some(&'#') {
                j += 1;
            }
            b.get(j) == Some(&'"')
        } {
            // Raw string: r"..", r#".."#, br"..".
            i += if c == 'b' { 2 } else { 1 };
            let mut hashes = 0;
            while b[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            loop {
                if b[i] == '"' && (0..hashes).all(|k| b.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
        } else if c == '"' || (c == 'b' && next == '"') {
            i += if c == 'b' { 2 } else { 1 };
            while i < b.len() && b[i] != '"' {
                i += if b[i] == '\\' { 2 } else { 1 };
            }
            i += 1;
        } else if c == '\'' || (c == 'b' && next == '\'') {
            let at = if c == 'b' { i + 1 } else { i };
            if b.get(at + 1) == Some(&'\\') {
                i = at + 2;
                while i < b.len() && b[i] != '\'' {
                    i += 1;
                }
                i += 1;
            } else if b.get(at + 2) == Some(&'\'') {
                i = at + 3;
            } else {
                // A lifetime: skip the quote, the name follows as an identifier.
                i = at + 1;
                while i < b.len() && ident_char(b[i]) {
                    i += 1;
                }
            }
        } else if ident_start(c) {
            let s = i;
            while i < b.len() && ident_char(b[i]) {
                i += 1;
            }
            out.push(Tok::Ident(b[s..i].iter().collect()));
        } else if c.is_ascii_digit() {
            while i < b.len() && (ident_char(b[i]) || b[i] == '.') {
                if b[i] == '.' && !b.get(i + 1).is_some_and(|d| d.is_ascii_digit()) {
                    break;
                }
                i += 1;
            }
        } else if c == ':' && next == ':' {
            out.push(Tok::Path);
            i += 2;
        } else {
            out.push(Tok::Punct(c));
            i += 1;
        }
    }
    out
}

/// A module path from the crate root (`[]` is `lib.rs`).
pub type ModPath = Vec<String>;

/// One path as written, in the module it was written in.
struct Written {
    scope: ModPath,
    segs: Vec<String>,
    text: String,
}

/// What one file says.
#[derive(Default)]
struct Parsed {
    /// Inline modules (`mod tests { .. }`), as full module paths.
    inline: Vec<ModPath>,
    /// `use` imports: (scope, name in scope or `*`, the path as written).
    imports: Vec<(ModPath, String, Vec<String>)>,
    /// Paths of two or more segments in code and in `use` declarations.
    paths: Vec<Written>,
}

/// Expands one `use` tree starting at `toks[*i]` with `prefix` already read.
fn use_tree(
    toks: &[Tok],
    i: &mut usize,
    prefix: Vec<String>,
    out: &mut Vec<(String, Vec<String>)>,
) {
    let mut path = prefix;
    loop {
        match toks.get(*i) {
            Some(Tok::Ident(s)) if s == "self" && !path.is_empty() => {
                *i += 1;
                let name = path.last().cloned().unwrap();
                let alias = alias(toks, i).unwrap_or(name);
                out.push((alias, path));
                return;
            }
            Some(Tok::Ident(s)) => {
                path.push(s.clone());
                *i += 1;
                if toks.get(*i) == Some(&Tok::Path) {
                    *i += 1;
                    continue;
                }
                let name = path.last().cloned().unwrap();
                let alias = alias(toks, i).unwrap_or(name);
                out.push((alias, path));
                return;
            }
            Some(Tok::Punct('*')) => {
                *i += 1;
                out.push(("*".into(), path));
                return;
            }
            Some(Tok::Punct('{')) => {
                *i += 1;
                loop {
                    match toks.get(*i) {
                        Some(Tok::Punct('}')) => {
                            *i += 1;
                            return;
                        }
                        Some(Tok::Punct(',')) => *i += 1,
                        None => return,
                        _ => use_tree(toks, i, path.clone(), out),
                    }
                }
            }
            _ => return,
        }
    }
}

fn alias(toks: &[Tok], i: &mut usize) -> Option<String> {
    if toks.get(*i) == Some(&Tok::Ident("as".into()))
        && let Some(Tok::Ident(a)) = toks.get(*i + 1)
    {
        *i += 2;
        return Some(a.clone());
    }
    None
}

fn parse(module: &ModPath, src: &str) -> Parsed {
    let toks = tokenize(src);
    let mut p = Parsed::default();
    // Inline modules open at a brace depth and close when it returns there.
    let mut scopes: Vec<(ModPath, usize)> = vec![(module.clone(), 0)];
    let mut depth = 0usize;
    let mut i = 0;
    while i < toks.len() {
        let scope = scopes.last().unwrap().0.clone();
        match &toks[i] {
            Tok::Punct('{') => depth += 1,
            Tok::Punct('}') => {
                depth -= 1;
                if scopes.len() > 1 && scopes.last().unwrap().1 == depth {
                    scopes.pop();
                }
            }
            Tok::Ident(k) if k == "mod" => {
                if let (Some(Tok::Ident(name)), Some(Tok::Punct('{'))) =
                    (toks.get(i + 1), toks.get(i + 2))
                {
                    let mut m = scope.clone();
                    m.push(name.clone());
                    p.inline.push(m.clone());
                    scopes.push((m, depth));
                    depth += 1;
                    i += 3;
                    continue;
                }
            }
            Tok::Ident(k) if k == "use" => {
                let mut j = i + 1;
                if toks.get(j) == Some(&Tok::Path) {
                    j += 1;
                }
                let mut trees = Vec::new();
                use_tree(&toks, &mut j, Vec::new(), &mut trees);
                for (name, segs) in trees {
                    if segs.len() >= 2 {
                        p.paths.push(Written {
                            scope: scope.clone(),
                            text: segs.join("::"),
                            segs: segs.clone(),
                        });
                    }
                    p.imports.push((scope.clone(), name, segs));
                }
                i = j;
                continue;
            }
            Tok::Ident(first) if i == 0 || toks[i - 1] != Tok::Path => {
                let mut segs = vec![first.clone()];
                let mut j = i + 1;
                while toks.get(j) == Some(&Tok::Path) {
                    match toks.get(j + 1) {
                        Some(Tok::Ident(s)) => {
                            segs.push(s.clone());
                            j += 2;
                        }
                        _ => break,
                    }
                }
                if segs.len() >= 2 {
                    p.paths.push(Written {
                        scope: scope.clone(),
                        text: segs.join("::"),
                        segs,
                    });
                    i = j;
                    continue;
                }
            }
            _ => {}
        }
        i += 1;
    }
    p
}

/// The crate, read from `src/`.
pub struct Crate {
    /// Every module (file or inline) → its file.
    pub modules: BTreeMap<ModPath, PathBuf>,
    files: BTreeMap<PathBuf, Parsed>,
}

pub fn module_of(rel: &Path) -> Option<ModPath> {
    let s = rel.to_str()?.strip_suffix(".rs")?;
    if s == "lib" {
        return Some(Vec::new());
    }
    let mut segs: Vec<String> = s.split('/').map(str::to_string).collect();
    if segs.last().map(String::as_str) == Some("mod") {
        segs.pop();
    }
    Some(segs)
}

/// Every `.rs` file under `dir`, at any depth.
pub fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(dir).unwrap() {
        let p = e.unwrap().path();
        if p.is_dir() {
            walk(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

impl Crate {
    /// Reads every file of `src/`.
    pub fn read() -> Self {
        Self::read_from(&Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/..")).join("src"))
    }

    /// Reads the crate whose `lib.rs` is in `src`.
    pub fn read_from(src: &Path) -> Self {
        let mut paths = Vec::new();
        walk(src, &mut paths);
        let mut c = Crate {
            modules: BTreeMap::new(),
            files: BTreeMap::new(),
        };
        for path in paths {
            let rel = path.strip_prefix(src).unwrap().to_path_buf();
            let Some(m) = module_of(&rel) else { continue };
            let parsed = parse(&m, &std::fs::read_to_string(&path).unwrap());
            c.modules.insert(m, rel.clone());
            for inline in &parsed.inline {
                c.modules.insert(inline.clone(), rel.clone());
            }
            c.files.insert(rel, parsed);
        }
        c
    }

    /// The files read, relative to `src/`.
    pub fn files(&self) -> impl Iterator<Item = &PathBuf> {
        self.files.keys()
    }

    fn is_module(&self, m: &[String]) -> bool {
        self.modules.contains_key(m)
    }

    /// The absolute form of `segs` written in `scope`, if it names something in this crate.
    fn absolute(
        &self,
        file: &Parsed,
        scope: &ModPath,
        segs: &[String],
        depth: usize,
    ) -> Option<ModPath> {
        if depth > 8 {
            return None;
        }
        let (head, rest) = segs.split_first()?;
        let mut base: ModPath = match head.as_str() {
            "crate" => Vec::new(),
            "self" => scope.clone(),
            "super" => {
                let mut s = scope.clone();
                s.pop()?;
                let mut rest = rest;
                while rest.first().map(String::as_str) == Some("super") {
                    s.pop()?;
                    rest = &rest[1..];
                }
                s.extend(rest.iter().cloned());
                return Some(s);
            }
            name => {
                let mut child = scope.clone();
                child.push(name.to_string());
                if self.is_module(&child) {
                    child
                } else {
                    // None: another crate, std, or a local item.
                    self.imported(file, scope, name, depth)?
                }
            }
        };
        base.extend(rest.iter().cloned());
        Some(base)
    }

    /// What `name` stands for in `scope` by its `use` declarations (globs too).
    fn imported(
        &self,
        file: &Parsed,
        scope: &ModPath,
        name: &str,
        depth: usize,
    ) -> Option<ModPath> {
        for (s, n, segs) in &file.imports {
            if s == scope && n == name {
                return self.absolute(file, scope, segs, depth + 1);
            }
        }
        for (s, n, segs) in &file.imports {
            if s == scope && n == "*" {
                let glob = self.absolute(file, scope, segs, depth + 1)?;
                let mut child = glob.clone();
                child.push(name.to_string());
                if self.is_module(&child) {
                    return Some(child);
                }
                let f = self.files.get(self.modules.get(&glob)?)?;
                if let Some(t) = self.imported(f, &glob, name, depth + 1) {
                    return Some(t);
                }
            }
        }
        None
    }

    /// The file a module path lands in: its deepest prefix that is a module.
    fn file_of(&self, abs: &ModPath) -> PathBuf {
        (0..=abs.len())
            .rev()
            .find_map(|n| self.modules.get(&abs[..n]))
            .cloned()
            .expect("the root module exists")
    }

    /// file → file → how (the paths that make the edge).
    pub fn edges(&self) -> BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> {
        let mut g: BTreeMap<PathBuf, BTreeMap<PathBuf, BTreeSet<String>>> = BTreeMap::new();
        for (file, parsed) in &self.files {
            g.entry(file.clone()).or_default();
            for w in &parsed.paths {
                let Some(abs) = self.absolute(parsed, &w.scope, &w.segs, 0) else {
                    continue;
                };
                let to = self.file_of(&abs);
                if &to != file {
                    g.get_mut(file)
                        .unwrap()
                        .entry(to)
                        .or_default()
                        .insert(w.text.clone());
                }
            }
        }
        g
    }
}

/// Strongly connected components with more than one member (Tarjan).
pub fn cycles<N: Ord + Clone + std::hash::Hash>(g: &BTreeMap<N, BTreeSet<N>>) -> Vec<Vec<N>> {
    struct T<'a, N: Ord + Clone + std::hash::Hash> {
        g: &'a BTreeMap<N, BTreeSet<N>>,
        index: HashMap<&'a N, usize>,
        low: HashMap<&'a N, usize>,
        stack: Vec<&'a N>,
        on: BTreeSet<&'a N>,
        out: Vec<Vec<N>>,
    }
    fn visit<'a, N: Ord + Clone + std::hash::Hash>(t: &mut T<'a, N>, v: &'a N) {
        let n = t.index.len();
        t.index.insert(v, n);
        t.low.insert(v, n);
        t.stack.push(v);
        t.on.insert(v);
        for w in t.g.get(v).into_iter().flatten() {
            let w = t.g.get_key_value(w).map(|(k, _)| k).unwrap_or(w);
            if !t.index.contains_key(w) {
                visit(t, w);
                let lw = t.low[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(lw);
            } else if t.on.contains(w) {
                let iw = t.index[w];
                let lv = t.low.get_mut(v).unwrap();
                *lv = (*lv).min(iw);
            }
        }
        if t.low[v] == t.index[v] {
            let mut comp = Vec::new();
            loop {
                let w = t.stack.pop().unwrap();
                t.on.remove(w);
                comp.push(w.clone());
                if w == v {
                    break;
                }
            }
            if comp.len() > 1 {
                comp.sort();
                t.out.push(comp);
            }
        }
    }
    let mut t = T {
        g,
        index: HashMap::new(),
        low: HashMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !t.index.contains_key(v) {
            visit(&mut t, v);
        }
    }
    t.out
}
