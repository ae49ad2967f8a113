//! A forgiving JSON reader for broken model output: single quotes, bare words, missing or
//! trailing commas, truncation.

use serde_json::{Map, Number, Value};

use super::MAX_DEPTH;

/// A forgiving JSON reader: single quotes, bare words, missing/trailing commas, truncation.
pub(super) struct Lenient<'a> {
    s: &'a str,
    b: &'a [u8],
    /// Current byte offset; always on a char boundary.
    pub(super) i: usize,
}

impl<'a> Lenient<'a> {
    pub(super) fn new(s: &'a str, start: usize) -> Lenient<'a> {
        Lenient {
            s,
            b: s.as_bytes(),
            i: start.min(s.len()),
        }
    }

    fn peek(&self) -> Option<u8> {
        self.b.get(self.i).copied()
    }

    /// Advance past one whole character.
    fn bump(&mut self) {
        let n = self.s[self.i..].chars().next().map_or(1, char::len_utf8);
        self.i = (self.i + n).min(self.b.len());
    }

    fn skip_ws(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_ascii_whitespace() {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    fn skip_ws_commas(&mut self) {
        while let Some(c) = self.peek() {
            if c.is_ascii_whitespace() || c == b',' {
                self.i += 1;
            } else {
                break;
            }
        }
    }

    pub(super) fn value(&mut self, depth: usize) -> Option<Value> {
        self.skip_ws();
        let c = self.peek()?;
        if depth > MAX_DEPTH {
            self.bump();
            return None;
        }
        match c {
            b'{' => Some(self.object(depth)),
            b'[' => Some(self.array(depth)),
            b'"' | b'\'' => Some(Value::String(self.string(c))),
            b'-' | b'0'..=b'9' => Some(self.number()),
            _ => self.bare(false).map(|w| match w.as_str() {
                "true" | "True" => Value::Bool(true),
                "false" | "False" => Value::Bool(false),
                "null" | "None" | "undefined" => Value::Null,
                _ => Value::String(w),
            }),
        }
    }

    fn object(&mut self, depth: usize) -> Value {
        self.i += 1;
        let mut m = Map::new();
        loop {
            self.skip_ws_commas();
            let Some(c) = self.peek() else { break };
            if c == b'}' || c == b']' {
                self.i += 1;
                break;
            }
            let before = self.i;
            let key = if c == b'"' || c == b'\'' {
                Some(self.string(c))
            } else {
                self.bare(true)
            };
            if let Some(key) = key.filter(|k| !k.is_empty()) {
                self.skip_ws();
                if matches!(self.peek(), Some(b':') | Some(b'=')) {
                    self.i += 1;
                    self.skip_ws();
                }
                let v = match self.peek() {
                    None | Some(b',') | Some(b'}') => Value::Null,
                    Some(_) => self.value(depth + 1).unwrap_or(Value::Null),
                };
                m.insert(key, v);
            }
            if self.i == before {
                self.bump();
            }
        }
        Value::Object(m)
    }

    fn array(&mut self, depth: usize) -> Value {
        self.i += 1;
        let mut xs = Vec::new();
        loop {
            self.skip_ws_commas();
            let Some(c) = self.peek() else { break };
            if c == b']' || c == b'}' {
                self.i += 1;
                break;
            }
            let before = self.i;
            if let Some(v) = self.value(depth + 1) {
                xs.push(v);
            }
            if self.i == before {
                self.bump();
            }
        }
        Value::Array(xs)
    }

    fn string(&mut self, quote: u8) -> String {
        let (s, b) = (self.s, self.b);
        let mut out = String::new();
        let mut j = self.i + 1;
        loop {
            let Some(&c) = b.get(j) else {
                self.i = b.len();
                break;
            };
            if c == quote {
                self.i = j + 1;
                break;
            }
            if c == b'\\' {
                j += 1;
                let Some(&e) = b.get(j) else {
                    self.i = b.len();
                    break;
                };
                let simple = match e {
                    b'n' => Some('\n'),
                    b't' => Some('\t'),
                    b'r' => Some('\r'),
                    b'b' => Some('\u{8}'),
                    b'f' => Some('\u{c}'),
                    b'u' => None,
                    _ if e.is_ascii() => Some(e as char),
                    _ => None,
                };
                if let Some(ch) = simple {
                    out.push(ch);
                    j += 1;
                } else if e == b'u' {
                    let (ch, used) = unicode_escape(b, j + 1);
                    out.push(ch);
                    j += 1 + used;
                }
                // A non-ASCII char after a backslash is copied by the next iteration.
                continue;
            }
            let Some(ch) = s[j..].chars().next() else {
                self.i = b.len();
                break;
            };
            out.push(ch);
            j += ch.len_utf8();
        }
        out
    }

    fn number(&mut self) -> Value {
        let start = self.i;
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() || matches!(c, b'+' | b'-' | b'.' | b'e' | b'E') {
                self.i += 1;
            } else {
                break;
            }
        }
        let t = &self.s[start..self.i];
        if let Ok(n) = t.parse::<i64>() {
            return Value::Number(n.into());
        }
        match t.parse::<f64>().ok().and_then(Number::from_f64) {
            Some(n) => Value::Number(n),
            None => Value::String(t.to_string()),
        }
    }

    /// An unquoted word (value: up to `, ] } :` or newline; key: also stops at whitespace).
    fn bare(&mut self, key: bool) -> Option<String> {
        let start = self.i;
        while let Some(c) = self.peek() {
            let stop = matches!(
                c,
                b',' | b']' | b'}' | b':' | b'\n' | b'\r' | b'{' | b'[' | b'"'
            ) || (key && (c == b'=' || c.is_ascii_whitespace()));
            if stop {
                break;
            }
            self.bump();
        }
        if self.i == start {
            return None;
        }
        Some(self.s[start..self.i].trim().to_string())
    }
}

/// Decode `XXXX` (after `\u`) at `j`, with a following low surrogate if needed.
pub(super) fn unicode_escape(b: &[u8], j: usize) -> (char, usize) {
    let hex4 = |k: usize| -> Option<u32> {
        let h = b.get(k..k + 4)?;
        let t = std::str::from_utf8(h).ok()?;
        u32::from_str_radix(t, 16).ok()
    };
    let Some(cp) = hex4(j) else {
        return ('u', 0);
    };
    if (0xD800..0xDC00).contains(&cp) {
        if b.get(j + 4) == Some(&b'\\') && b.get(j + 5) == Some(&b'u') {
            if let Some(lo) = hex4(j + 6).filter(|lo| (0xDC00..0xE000).contains(lo)) {
                let c = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                return (char::from_u32(c).unwrap_or('\u{FFFD}'), 10);
            }
        }
        return ('\u{FFFD}', 4);
    }
    (char::from_u32(cp).unwrap_or('\u{FFFD}'), 4)
}

// ---------------------------------------------------------------------------------------------
// Prose
// ---------------------------------------------------------------------------------------------
