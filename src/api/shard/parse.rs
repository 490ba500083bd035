//! CEL's grammar (cel-go's `CEL.g4`), by recursive descent, to the syntax
//! tree 1.36's sharding parser walks: calls by their function names
//! (`_||_`, `_&&_`, `!_`, `_[_]`, ...), identifiers, selections, literals,
//! and lists, maps and messages, whose contents no selector may use.

use super::lex::{Tok, Token, tokens};

/// A node of the tree (only what the walk reads is kept).
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Expr {
    /// A call; a member call's target is dropped (1.36 reads only the
    /// function's name and arguments).
    Call {
        function: String,
        args: Vec<Expr>,
    },
    Ident(String),
    Select {
        operand: Box<Expr>,
        field: String,
    },
    Literal(Lit),
    List,
    Map,
    Struct,
}

/// cel-go's `ast.ExprKind`, numbered as its messages print it.
#[derive(Debug, Clone, Copy)]
pub(crate) enum Kind {
    Call = 1,
    Ident = 3,
    List = 4,
    Literal = 5,
    Map = 6,
    Select = 7,
    Struct = 8,
}

/// A literal.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Lit {
    String(String),
    Int,
    Uint,
    Double,
    Bool,
    Bytes,
    Null,
}

impl Lit {
    /// Its value's Go type, as `%T` prints it.
    pub(crate) fn go_type(&self) -> &'static str {
        match self {
            Lit::String(_) => "string",
            Lit::Int => "int64",
            Lit::Uint => "uint64",
            Lit::Double => "float64",
            Lit::Bool => "bool",
            Lit::Bytes => "[]uint8",
            Lit::Null => "structpb.NullValue",
        }
    }
}

/// What may start an expression, as ANTLR lists it.
const PRIMARY: &str = "{'[', '{', '(', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";
/// The same, where an argument list may also end.
const ARGUMENT: &str = "{'[', '{', '(', ')', '.', '-', '!', 'true', 'false', 'null', NUM_FLOAT, NUM_INT, NUM_UINT, STRING, BYTES, IDENTIFIER}";

/// Parses `src`; the error is the message after "CEL parse error: ".
pub(crate) fn parse(src: &str) -> Result<Expr, String> {
    let toks = tokens(src).map_err(syntax)?;
    let mut p = Parser { toks, at: 0 };
    let e = p.expr(PRIMARY).map_err(syntax)?;
    if p.peek() != &Tok::Eof {
        return Err(syntax(format!(
            "mismatched input '{}' expecting <EOF>",
            p.text()
        )));
    }
    Ok(e)
}

fn syntax(m: String) -> String {
    format!("Syntax error: {m}")
}

struct Parser {
    toks: Vec<Token>,
    at: usize,
}

type R = Result<Expr, String>;

fn call(function: &str, args: Vec<Expr>) -> Expr {
    Expr::Call {
        function: function.to_string(),
        args,
    }
}

impl Parser {
    fn peek(&self) -> &Tok {
        &self.toks[self.at].tok
    }

    fn text(&self) -> &str {
        &self.toks[self.at].text
    }

    fn eat(&mut self, p: &str) -> bool {
        if matches!(self.peek(), Tok::Punct(q) if *q == p) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, p: &str) -> Result<(), String> {
        if self.eat(p) {
            return Ok(());
        }
        if self.peek() == &Tok::Eof {
            return Err(format!("missing '{p}' at '<EOF>'"));
        }
        Err(format!(
            "mismatched input '{}' expecting '{p}'",
            self.text()
        ))
    }

    /// `expr`: a conditional; `expecting` names what may start it here.
    fn expr(&mut self, expecting: &str) -> R {
        let cond = self.binary(0, expecting)?;
        if !self.eat("?") {
            return Ok(cond);
        }
        let then = self.binary(0, PRIMARY)?;
        self.expect(":")?;
        let otherwise = self.expr(PRIMARY)?;
        Ok(call("_?_:_", vec![cond, then, otherwise]))
    }

    /// Binary operators by precedence: `||`, `&&`, relations, `+ -`, `* / %`.
    fn binary(&mut self, level: usize, expecting: &str) -> R {
        const LEVELS: [&[(&str, &str)]; 5] = [
            &[("||", "_||_")],
            &[("&&", "_&&_")],
            &[
                ("<=", "_<=_"),
                (">=", "_>=_"),
                ("<", "_<_"),
                (">", "_>_"),
                ("==", "_==_"),
                ("!=", "_!=_"),
                ("in", "@in"),
            ],
            &[("+", "_+_"), ("-", "_-_")],
            &[("*", "_*_"), ("/", "_/_"), ("%", "_%_")],
        ];
        if level == LEVELS.len() {
            return self.unary(expecting);
        }
        let mut left = self.binary(level + 1, expecting)?;
        'more: loop {
            for (op, function) in LEVELS[level] {
                if self.eat(op) {
                    let right = self.binary(level + 1, PRIMARY)?;
                    left = call(function, vec![left, right]);
                    continue 'more;
                }
            }
            return Ok(left);
        }
    }

    fn unary(&mut self, expecting: &str) -> R {
        if self.eat("!") {
            return Ok(call("!_", vec![self.unary(PRIMARY)?]));
        }
        if matches!(self.peek(), Tok::Punct("-")) {
            // `-` before a number is the literal's sign.
            if let Some(Tok::Int(_) | Tok::Float(_)) = self.toks.get(self.at + 1).map(|t| &t.tok) {
                self.at += 1;
                let lit = self.literal();
                return self.member(lit);
            }
            self.at += 1;
            return Ok(call("-_", vec![self.unary(PRIMARY)?]));
        }
        let primary = self.primary(expecting)?;
        self.member(primary)
    }

    /// Selections, member calls and indexes after `e`.
    fn member(&mut self, mut e: Expr) -> R {
        loop {
            if self.eat(".") {
                self.eat("?");
                let Tok::Ident(field) = self.peek().clone() else {
                    return Err(self.mismatched("IDENTIFIER"));
                };
                self.at += 1;
                if self.eat("(") {
                    e = call(&field, self.arguments()?);
                } else {
                    e = Expr::Select {
                        operand: Box::new(e),
                        field,
                    };
                }
            } else if self.eat("[") {
                self.eat("?");
                let index = self.expr(PRIMARY)?;
                self.expect("]")?;
                e = call("_[_]", vec![e, index]);
            } else {
                return Ok(e);
            }
        }
    }

    /// A call's arguments, after its `(`, through its `)`.
    fn arguments(&mut self) -> Result<Vec<Expr>, String> {
        let mut args = Vec::new();
        if self.eat(")") {
            return Ok(args);
        }
        args.push(self.expr(ARGUMENT)?);
        while self.eat(",") {
            args.push(self.expr(PRIMARY)?);
        }
        self.expect(")")?;
        Ok(args)
    }

    fn mismatched(&self, expecting: &str) -> String {
        format!("mismatched input '{}' expecting {expecting}", self.text())
    }

    fn literal(&mut self) -> Expr {
        let lit = match self.peek() {
            Tok::Str(s) => Lit::String(s.clone()),
            Tok::Int(_) => Lit::Int,
            Tok::Uint(_) => Lit::Uint,
            Tok::Float(_) => Lit::Double,
            Tok::True | Tok::False => Lit::Bool,
            Tok::Bytes => Lit::Bytes,
            _ => Lit::Null,
        };
        self.at += 1;
        Expr::Literal(lit)
    }

    fn primary(&mut self, expecting: &str) -> R {
        match self.peek().clone() {
            Tok::Str(_)
            | Tok::Int(_)
            | Tok::Uint(_)
            | Tok::Float(_)
            | Tok::True
            | Tok::False
            | Tok::Null
            | Tok::Bytes => Ok(self.literal()),
            Tok::Punct("(") => {
                self.at += 1;
                let e = self.expr(PRIMARY)?;
                self.expect(")")?;
                Ok(e)
            }
            Tok::Punct("[") => {
                self.at += 1;
                self.items("]", false)?;
                Ok(Expr::List)
            }
            Tok::Punct("{") => {
                self.at += 1;
                self.items("}", true)?;
                Ok(Expr::Map)
            }
            Tok::Punct(".") => {
                self.at += 1;
                let Tok::Ident(name) = self.peek().clone() else {
                    return Err(self.mismatched("IDENTIFIER"));
                };
                self.at += 1;
                self.named(name)
            }
            Tok::Ident(name) => {
                self.at += 1;
                self.named(name)
            }
            _ => Err(self.mismatched(expecting)),
        }
    }

    /// After an identifier: a global call, a message, or the identifier.
    fn named(&mut self, name: String) -> R {
        if self.eat("(") {
            return Ok(call(&name, self.arguments()?));
        }
        if self.eat("{") {
            self.items("}", true)?;
            return Ok(Expr::Struct);
        }
        Ok(Expr::Ident(name))
    }

    /// A list's or map's entries, through `close` (a trailing comma allowed).
    fn items(&mut self, close: &str, pairs: bool) -> Result<(), String> {
        while !self.eat(close) {
            self.eat("?");
            self.expr(PRIMARY)?;
            if pairs {
                self.expect(":")?;
                self.expr(PRIMARY)?;
            }
            if !self.eat(",") {
                self.expect(close)?;
                return Ok(());
            }
        }
        Ok(())
    }
}
