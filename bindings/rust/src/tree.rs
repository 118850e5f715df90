// SPDX-License-Identifier: Apache-2.0
//! `Tree`: nested training state read from Rust — the structure record `__ckpt_tree__` as a tree to walk.
//!
//! A program that saves nested state (Python's `ckpt.save` of `{"model": ..., "optimizer": ..., "epoch": 3}`)
//! writes each array as a member named by its path (`optimizer/state/0/exp_avg`) and the rest of the structure —
//! dicts with str or int keys, lists, tuples, and the scalars (int, float, bool, str, None) — as JSON in the
//! metadata key `__ckpt_tree__` (docs/format.md, "Nested state"). [`Tree::of`] gives that structure back: walk it,
//! find a place by its path, and read an array leaf through the [`Reader`] by its member name.
use crate::error::{Code, Error, Result};
use crate::reader::Reader;
use crate::vars::Vars;

/// The metadata key of the structure record.
pub const TREE_KEY: &str = "__ckpt_tree__";

/// One segment of a path: `~` written `~0` and `/` written `~1` (JSON Pointer's escapes).
pub fn tree_escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

/// A path segment back to its key: the inverse of [`tree_escape`].
pub fn tree_unescape(segment: &str) -> String {
    segment.replace("~1", "/").replace("~0", "~")
}

/// A dict's key: a str key or an int key (an optimizer's state has them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Key {
    Str(String),
    Int(i64),
    /// An int key beyond `i64` (a Python int may be of any size), in decimal.
    BigInt(String),
}

impl Key {
    /// The key as a path writes it before escaping: the str, or the int in decimal.
    pub fn text(&self) -> String {
        match self {
            Key::Str(s) | Key::BigInt(s) => s.clone(),
            Key::Int(i) => i.to_string(),
        }
    }
}

/// One node of the structure: a container (dict, list, tuple) or a leaf (an array, or a scalar).
#[derive(Clone, Debug, PartialEq)]
pub enum Node {
    /// A dict's entries, in order.
    Dict(Vec<(Key, Node)>),
    List(Vec<Node>),
    Tuple(Vec<Node>),
    /// An array leaf: the member (tensor) name the [`Reader`] reads it by.
    Array(String),
    /// A float, exact (NaN and infinities included).
    Float(f64),
    Int(i64),
    /// An int beyond `i64`, in decimal.
    BigInt(String),
    Bool(bool),
    Str(String),
    /// Python's None.
    None,
}

impl Node {
    /// The kind's name as the record and Python call it: `dict`, `float`, `None`, ...
    pub fn kind_name(&self) -> &'static str {
        match self {
            Node::Dict(_) => "dict",
            Node::List(_) => "list",
            Node::Tuple(_) => "tuple",
            Node::Array(_) => "array",
            Node::Float(_) => "float",
            Node::Int(_) | Node::BigInt(_) => "int",
            Node::Bool(_) => "bool",
            Node::Str(_) => "str",
            Node::None => "None",
        }
    }

    /// The child at one (unescaped) path segment: a dict's entry whose key has that text (the first, should a str
    /// and an int key both have it), a list's or tuple's item at that decimal position.
    pub fn child(&self, segment: &str) -> Option<&Node> {
        match self {
            Node::Dict(entries) => entries.iter().find(|(k, _)| k.text() == segment).map(|(_, v)| v),
            Node::List(items) | Node::Tuple(items) => {
                let canonical = !segment.is_empty()
                    && segment.bytes().all(|b| b.is_ascii_digit())
                    && (segment == "0" || !segment.starts_with('0'));
                if !canonical {
                    return None;
                }
                segment.parse::<usize>().ok().and_then(|i| items.get(i))
            }
            _ => None,
        }
    }

    /// An array leaf's member name.
    pub fn member(&self) -> Option<&str> {
        match self {
            Node::Array(name) => Some(name),
            _ => None,
        }
    }

    /// A float's value, or an int's as a float.
    pub fn as_f64(&self) -> Option<f64> {
        match self {
            Node::Float(f) => Some(*f),
            Node::Int(i) => Some(*i as f64),
            _ => None,
        }
    }

    pub fn as_i64(&self) -> Option<i64> {
        match self {
            Node::Int(i) => Some(*i),
            _ => None,
        }
    }

    pub fn as_bool(&self) -> Option<bool> {
        match self {
            Node::Bool(b) => Some(*b),
            _ => None,
        }
    }

    pub fn as_str(&self) -> Option<&str> {
        match self {
            Node::Str(s) => Some(s),
            _ => None,
        }
    }
}

/// A checkpoint's structure. Its root is a [`Node::Dict`].
///
/// ```no_run
/// # fn main() -> ckpt::Result<()> {
/// use ckpt::{Node, Reader, Tree};
/// let mut reader = Reader::open("state.npz")?;
/// let tree = Tree::of(&reader, "state.npz")?;
/// let epoch = tree.find("epoch").and_then(Node::as_i64);
/// let lr = tree.find("optimizer/param_groups/0/lr").and_then(Node::as_f64);
/// if let Some(Node::Array(member)) = tree.find("model/fc.weight") {
///     let w: Vec<f32> = reader.read(member)?;
///     println!("{epoch:?} {lr:?} {}", w.len());
/// }
/// tree.walk(|path, node| println!("{path}: {}", node.kind_name()));
/// # Ok(())
/// # }
/// ```
#[derive(Clone, Debug, PartialEq)]
pub struct Tree {
    root: Node,
}

impl Tree {
    /// The structure a record describes; a [`Code::Format`] error naming `origin` and what is wrong when it is not
    /// JSON of the documented shape.
    pub fn parse(record: &str, origin: &str) -> Result<Tree> {
        let mut parser = Parser { s: record.as_bytes(), at: 0, origin };
        let root = parser.node(0)?;
        parser.space();
        if parser.at != parser.s.len() {
            return Err(parser.fail("has text after its end"));
        }
        match root {
            Node::Dict(_) => Ok(Tree { root }),
            _ => Err(parser.fail("does not describe a dict")),
        }
    }

    /// The structure of an open checkpoint: its record, every array it names checked to be in the file (a
    /// [`Code::Format`] error otherwise); an array the record does not place is added to the root under its member
    /// name. A file saved flat has no record: its root is then a dict of its arrays. `origin` names the file in
    /// errors.
    pub fn of(reader: &Reader, origin: &str) -> Result<Tree> {
        Tree::checked(reader.metadata(TREE_KEY), reader.names(), |n| reader.index_of(n).is_ok(), origin)
    }

    /// [`Tree::of`] for a collection read from a checkpoint ([`Vars::read`]).
    pub fn of_vars(vars: &Vars, origin: &str) -> Result<Tree> {
        Tree::checked(vars.metadata(TREE_KEY), vars.names(), |n| vars.index_of(n).is_ok(), origin)
    }

    fn checked<'a>(
        record: Option<&str>,
        names: impl Iterator<Item = &'a str>,
        has: impl Fn(&str) -> bool,
        origin: &str,
    ) -> Result<Tree> {
        let mut tree = match record {
            Some(text) => Tree::parse(text, origin)?,
            None => Tree { root: Node::Dict(Vec::new()) },
        };
        let mut placed: Vec<String> = tree.members().into_iter().map(str::to_owned).collect();
        if let Some(missing) = placed.iter().find(|n| !has(n)) {
            return Err(Error::new(
                Code::Format,
                format!("{}: its {} names the array \"{}\", which the file does not have", origin, TREE_KEY, missing),
            ));
        }
        placed.sort_unstable();
        let extra: Vec<String> =
            names.filter(|n| placed.binary_search_by(|p| p.as_str().cmp(n)).is_err()).map(str::to_owned).collect();
        if let Node::Dict(entries) = &mut tree.root {
            entries.extend(extra.into_iter().map(|n| (Key::Str(n.clone()), Node::Array(n))));
        }
        Ok(tree)
    }

    pub fn root(&self) -> &Node {
        &self.root
    }

    /// The node at a path (`optimizer/state/0`, escaped as member names are; `""` is the root).
    pub fn find(&self, path: &str) -> Option<&Node> {
        if path.is_empty() {
            return Some(&self.root);
        }
        path.split('/').try_fold(&self.root, |node, segment| node.child(&tree_unescape(segment)))
    }

    /// Calls `visit(path, node)` for every node, parents before their children, in order; the path is escaped as
    /// member names are (`""` for the root), so an array leaf's path is its member name when Python saved it.
    pub fn walk<F: FnMut(&str, &Node)>(&self, mut visit: F) {
        fn walk_from<F: FnMut(&str, &Node)>(node: &Node, path: &mut String, visit: &mut F) {
            visit(path, node);
            let length = path.len();
            let mut descend = |segment: String, child: &Node, path: &mut String| {
                if length != 0 {
                    path.push('/');
                }
                path.push_str(&tree_escape(&segment));
                walk_from(child, path, visit);
                path.truncate(length);
            };
            match node {
                Node::Dict(entries) => entries.iter().for_each(|(k, v)| descend(k.text(), v, path)),
                Node::List(items) | Node::Tuple(items) => {
                    items.iter().enumerate().for_each(|(i, v)| descend(i.to_string(), v, path))
                }
                _ => {}
            }
        }
        walk_from(&self.root, &mut String::new(), &mut visit);
    }

    /// The member names of the array leaves, in order.
    pub fn members(&self) -> Vec<&str> {
        fn collect<'a>(node: &'a Node, out: &mut Vec<&'a str>) {
            match node {
                Node::Array(name) => out.push(name),
                Node::Dict(entries) => entries.iter().for_each(|(_, v)| collect(v, out)),
                Node::List(items) | Node::Tuple(items) => items.iter().for_each(|v| collect(v, out)),
                _ => {}
            }
        }
        let mut out = Vec::new();
        collect(&self.root, &mut out);
        out
    }
}

/// A JSON reader of just what the record holds, bounded in depth (records are untrusted input).
struct Parser<'a> {
    s: &'a [u8],
    at: usize,
    origin: &'a str,
}

const MAX_DEPTH: usize = 256;

impl<'a> Parser<'a> {
    fn fail(&self, what: &str) -> Error {
        Error::new(Code::Format, format!("{}: its {} {} (at byte {})", self.origin, TREE_KEY, what, self.at))
    }

    fn space(&mut self) {
        while self.at < self.s.len() && matches!(self.s[self.at], b' ' | b'\t' | b'\n' | b'\r') {
            self.at += 1;
        }
    }

    fn peek(&mut self) -> Option<u8> {
        self.space();
        self.s.get(self.at).copied()
    }

    fn eat(&mut self, c: u8) -> bool {
        if self.peek() == Some(c) {
            self.at += 1;
            return true;
        }
        false
    }

    fn expect(&mut self, c: u8) -> Result<()> {
        if self.eat(c) {
            return Ok(());
        }
        let how = if self.at >= self.s.len() { "is cut short" } else { "is not JSON of the documented shape" };
        Err(self.fail(&format!("{}: '{}' expected", how, c as char)))
    }

    fn word(&mut self, w: &str) -> bool {
        self.space();
        if self.s[self.at..].starts_with(w.as_bytes()) {
            self.at += w.len();
            return true;
        }
        false
    }

    fn hex4(&mut self) -> Result<u32> {
        if self.at + 4 > self.s.len() {
            return Err(self.fail("is not JSON: a \\u escape is cut short"));
        }
        let digits = std::str::from_utf8(&self.s[self.at..self.at + 4]).ok();
        match digits.and_then(|d| u32::from_str_radix(d, 16).ok().filter(|_| d.bytes().all(|b| b.is_ascii_hexdigit())))
        {
            Some(v) => {
                self.at += 4;
                Ok(v)
            }
            None => Err(self.fail("is not JSON: a \\u escape with a character that is not hex")),
        }
    }

    fn string(&mut self) -> Result<String> {
        self.expect(b'"')?;
        let mut out: Vec<u8> = Vec::new();
        loop {
            let c = match self.s.get(self.at) {
                Some(&c) => c,
                None => return Err(self.fail("is not JSON: a string is not closed")),
            };
            self.at += 1;
            match c {
                b'"' => break,
                0..=0x1f => return Err(self.fail("is not JSON: a control character in a string")),
                b'\\' => {
                    let e = match self.s.get(self.at) {
                        Some(&e) => e,
                        None => return Err(self.fail("is not JSON: a string is not closed")),
                    };
                    self.at += 1;
                    let simple = match e {
                        b'"' => Some(b'"'),
                        b'\\' => Some(b'\\'),
                        b'/' => Some(b'/'),
                        b'b' => Some(8),
                        b'f' => Some(12),
                        b'n' => Some(b'\n'),
                        b'r' => Some(b'\r'),
                        b't' => Some(b'\t'),
                        _ => None,
                    };
                    if let Some(byte) = simple {
                        out.push(byte);
                        continue;
                    }
                    if e != b'u' {
                        return Err(self.fail("is not JSON: an unknown escape in a string"));
                    }
                    let mut cp = self.hex4()?;
                    if (0xDC00..=0xDFFF).contains(&cp) {
                        return Err(self.fail("is not JSON text of Unicode: a lone low surrogate"));
                    }
                    if (0xD800..=0xDBFF).contains(&cp) {
                        if !self.s[self.at..].starts_with(b"\\u") {
                            return Err(self.fail("is not JSON text of Unicode: a lone high surrogate"));
                        }
                        self.at += 2;
                        let low = self.hex4()?;
                        if !(0xDC00..=0xDFFF).contains(&low) {
                            return Err(self.fail("is not JSON text of Unicode: a lone high surrogate"));
                        }
                        cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
                    }
                    let ch = char::from_u32(cp).expect("a scalar value: surrogates are handled above");
                    out.extend_from_slice(ch.encode_utf8(&mut [0; 4]).as_bytes());
                }
                _ => out.push(c),
            }
        }
        String::from_utf8(out).map_err(|_| self.fail("is not JSON: a string is not UTF-8"))
    }

    /// A JSON number's text, and whether it has no fraction or exponent.
    fn number(&mut self) -> Result<(String, bool)> {
        self.space();
        let begin = self.at;
        let digits = |p: &mut Parser| {
            let from = p.at;
            while p.at < p.s.len() && p.s[p.at].is_ascii_digit() {
                p.at += 1;
            }
            p.at > from
        };
        if self.s.get(self.at) == Some(&b'-') {
            self.at += 1;
        }
        let first = self.at;
        if !digits(self) || (self.s[first] == b'0' && self.at - first > 1) {
            return Err(self.fail("is not JSON: a malformed number"));
        }
        let mut integer = true;
        if self.s.get(self.at) == Some(&b'.') {
            self.at += 1;
            if !digits(self) {
                return Err(self.fail("is not JSON: a malformed number"));
            }
            integer = false;
        }
        if matches!(self.s.get(self.at), Some(b'e') | Some(b'E')) {
            self.at += 1;
            if matches!(self.s.get(self.at), Some(b'+') | Some(b'-')) {
                self.at += 1;
            }
            if !digits(self) {
                return Err(self.fail("is not JSON: a malformed number"));
            }
            integer = false;
        }
        let text = std::str::from_utf8(&self.s[begin..self.at]).expect("ASCII digits").to_owned();
        Ok((text, integer))
    }

    fn number_ahead(&mut self) -> bool {
        matches!(self.peek(), Some(b'-') | Some(b'0'..=b'9'))
    }

    fn node(&mut self, depth: usize) -> Result<Node> {
        if depth > MAX_DEPTH {
            return Err(self.fail(&format!("is nested more than {} levels deep", MAX_DEPTH)));
        }
        match self.peek() {
            None => Err(self.fail("is not JSON: it ends where a value is expected")),
            Some(b'"') => Ok(Node::Str(self.string()?)),
            Some(b'{') => self.tagged(depth),
            _ if self.word("true") => Ok(Node::Bool(true)),
            _ if self.word("false") => Ok(Node::Bool(false)),
            _ if self.word("null") => Ok(Node::None),
            _ if self.number_ahead() => {
                let (text, integer) = self.number()?;
                Ok(if integer {
                    text.parse::<i64>().map(Node::Int).unwrap_or(Node::BigInt(text))
                } else {
                    Node::Float(text.parse::<f64>().map_err(|_| self.fail("is not JSON: a malformed number"))?)
                })
            }
            _ => Err(self.fail("has a node that is none of the documented kinds")),
        }
    }

    /// `{"kind": body}`
    fn tagged(&mut self, depth: usize) -> Result<Node> {
        self.expect(b'{')?;
        let kind = self.string()?;
        self.expect(b':')?;
        let node = match kind.as_str() {
            "array" => Node::Array(self.string()?),
            "float" => {
                let where_ = self.at;
                let text = self.string()?;
                match parse_float(&text) {
                    Some(f) => Node::Float(f),
                    None => {
                        self.at = where_;
                        let shown: String = text.chars().take(80).collect();
                        return Err(self.fail(&format!("has a float that is not one: \"{}\"", shown)));
                    }
                }
            }
            "list" | "tuple" => {
                let mut items = Vec::new();
                self.expect(b'[')?;
                if !self.eat(b']') {
                    loop {
                        items.push(self.node(depth + 1)?);
                        if !self.eat(b',') {
                            break;
                        }
                    }
                    self.expect(b']')?;
                }
                if kind == "list" {
                    Node::List(items)
                } else {
                    Node::Tuple(items)
                }
            }
            "dict" => {
                let mut entries = Vec::new();
                self.expect(b'[')?;
                if !self.eat(b']') {
                    loop {
                        self.expect(b'[')?;
                        let key = if self.number_ahead() {
                            let (text, integer) = self.number()?;
                            if !integer {
                                return Err(self.fail("has a dict key that is a number but not an int"));
                            }
                            text.parse::<i64>().map(Key::Int).unwrap_or(Key::BigInt(text))
                        } else if self.peek() == Some(b'"') {
                            Key::Str(self.string()?)
                        } else {
                            return Err(self.fail("has a dict entry that is not a [str or int key, value] pair"));
                        };
                        self.expect(b',')?;
                        let value = self.node(depth + 1)?;
                        self.expect(b']')?;
                        entries.push((key, value));
                        if !self.eat(b',') {
                            break;
                        }
                    }
                    self.expect(b']')?;
                }
                Node::Dict(entries)
            }
            _ => {
                let shown: String = kind.chars().take(80).collect();
                return Err(self.fail(&format!("has a node of the unknown kind \"{}\"", shown)));
            }
        };
        if !self.eat(b'}') {
            return Err(self.fail("has a node with more than its kind in it"));
        }
        Ok(node)
    }
}

/// Python's float text: a decimal number, or nan, inf, -inf.
fn parse_float(text: &str) -> Option<f64> {
    let magnitude = text.strip_prefix(|c: char| c == '-' || c == '+').unwrap_or(text);
    let negative = text.starts_with('-');
    let value = match magnitude {
        "nan" => f64::NAN,
        "inf" | "infinity" => f64::INFINITY,
        _ if magnitude.starts_with(|c: char| c.is_ascii_digit() || c == '.') => {
            let v = magnitude.parse::<f64>().ok()?;
            if v.is_infinite() {
                return None; // out of range: no float's repr
            }
            v
        }
        _ => return None,
    };
    Some(if negative { -value } else { value })
}
