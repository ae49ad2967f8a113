//! Just enough of Python's source syntax to read string literals out of BALROG's files: plain,
//! raw, f- and triple-quoted strings with their escapes, and list/dict literals of strings.

/// A string literal read from source.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Literal {
    /// The value; in an f-string each replacement field is kept as `{expr}`.
    pub value: String,
    /// Replacement fields of an f-string, in order.
    pub fields: Vec<String>,
    /// Byte offset just after the closing quote.
    pub end: usize,
}

/// Skip spaces, tabs, newlines, line continuations and comments from `i`.
pub fn skip_space(src: &str, mut i: usize) -> usize {
    let b = src.as_bytes();
    while i < b.len() {
        match b[i] {
            b' ' | b'\t' | b'\n' | b'\r' => i += 1,
            b'\\' if b.get(i + 1) == Some(&b'\n') => i += 2,
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            _ => break,
        }
    }
    i
}

/// The string literal starting at `i` (after optional prefix letters), or why not.
pub fn literal_at(src: &str, i: usize) -> Result<Literal, String> {
    let b = src.as_bytes();
    let mut j = i;
    let (mut raw, mut fmt) = (false, false);
    while j < b.len() && b[j].is_ascii_alphabetic() && j - i < 2 {
        match b[j].to_ascii_lowercase() {
            b'r' => raw = true,
            b'f' => fmt = true,
            b'u' => {}
            _ => return Err(format!("unsupported string prefix at byte {i}")),
        }
        j += 1;
    }
    let quote = *b.get(j).ok_or("end of file where a string was expected")?;
    if quote != b'"' && quote != b'\'' {
        return Err(format!("no string literal at byte {i}"));
    }
    let triple = b.get(j + 1) == Some(&quote) && b.get(j + 2) == Some(&quote);
    let close_len = if triple { 3 } else { 1 };
    let mut k = j + close_len;
    let mut value = String::new();
    let mut fields = Vec::new();
    loop {
        let c = src[k..]
            .chars()
            .next()
            .ok_or_else(|| format!("unterminated string starting at byte {i}"))?;
        if c as u32 == quote as u32
            && (!triple || (b.get(k + 1) == Some(&quote) && b.get(k + 2) == Some(&quote)))
        {
            return Ok(Literal {
                value,
                fields,
                end: k + close_len,
            });
        }
        if c == '\n' && !triple {
            return Err(format!("unterminated string starting at byte {i}"));
        }
        if c == '\\' && !raw {
            let (s, n) = escape(&src[k..])?;
            value.push_str(&s);
            k += n;
            continue;
        }
        if fmt && (c == '{' || c == '}') {
            if b.get(k + 1) == Some(&(c as u8)) {
                return Err(format!(
                    "doubled brace in an f-string at byte {k}: not supported here"
                ));
            }
            if c == '}' {
                return Err(format!("lone '}}' in an f-string at byte {k}"));
            }
            let close = src[k..]
                .find('}')
                .ok_or_else(|| format!("unclosed replacement field at byte {k}"))?;
            let expr = &src[k + 1..k + close];
            fields.push(expr.trim().to_string());
            value.push('{');
            value.push_str(expr.trim());
            value.push('}');
            k += close + 1;
            continue;
        }
        value.push(c);
        k += c.len_utf8();
    }
}

/// One backslash escape at the start of `s`: (its value, bytes consumed).
fn escape(s: &str) -> Result<(String, usize), String> {
    let mut it = s.chars();
    it.next();
    let Some(c) = it.next() else {
        return Err("backslash at end of file".into());
    };
    let simple = match c {
        '\n' => Some(""),
        '\\' => Some("\\"),
        '\'' => Some("'"),
        '"' => Some("\""),
        'a' => Some("\u{7}"),
        'b' => Some("\u{8}"),
        'f' => Some("\u{c}"),
        'n' => Some("\n"),
        'r' => Some("\r"),
        't' => Some("\t"),
        'v' => Some("\u{b}"),
        _ => None,
    };
    if let Some(v) = simple {
        return Ok((v.to_string(), 1 + c.len_utf8()));
    }
    let hex = |n: usize| -> Result<(String, usize), String> {
        let digits = s.get(2..2 + n).ok_or("short escape")?;
        let v = u32::from_str_radix(digits, 16).map_err(|_| format!("bad escape \\{c}{digits}"))?;
        let ch = char::from_u32(v).ok_or_else(|| format!("bad code point in \\{c}{digits}"))?;
        Ok((ch.to_string(), 2 + n))
    };
    match c {
        'x' => hex(2),
        'u' => hex(4),
        'U' => hex(8),
        '0'..='7' => {
            let n = s[1..]
                .bytes()
                .take(3)
                .take_while(|b| (b'0'..=b'7').contains(b))
                .count();
            let v = u32::from_str_radix(&s[1..1 + n], 8).map_err(|e| e.to_string())?;
            Ok((char::from_u32(v).unwrap_or('\u{fffd}').to_string(), 1 + n))
        }
        'N' => Err("\\N{…} escapes are not supported here".into()),
        other => Ok((format!("\\{other}"), 1 + other.len_utf8())),
    }
}

/// The byte offset just after `needle`'s first occurrence at or after `from`.
pub fn after(src: &str, from: usize, needle: &str) -> Option<usize> {
    src[from..].find(needle).map(|k| from + k + needle.len())
}

/// The offset after `name =` of the first line-initial assignment to `name`.
pub fn find_assignment(src: &str, name: &str) -> Result<usize, String> {
    let mut from = 0;
    while let Some(k) = src[from..].find(name) {
        let start = from + k;
        from = start + name.len();
        let line_start = src[..start].rfind('\n').map_or(0, |n| n + 1);
        if !src[line_start..start].trim().is_empty() {
            continue;
        }
        let rest = skip_space(src, from);
        if src[rest..].starts_with('=') && !src[rest..].starts_with("==") {
            return Ok(rest + 1);
        }
    }
    Err(format!("no assignment to {name}"))
}

/// A list literal of strings starting at `i` (`[` ... `]`).
pub fn string_list_at(src: &str, i: usize) -> Result<(Vec<String>, usize), String> {
    let mut k = skip_space(src, i);
    if !src[k..].starts_with('[') {
        return Err(format!("no list at byte {i}"));
    }
    k += 1;
    let mut out = Vec::new();
    loop {
        k = skip_space(src, k);
        if src[k..].starts_with(']') {
            return Ok((out, k + 1));
        }
        let lit = literal_at(src, k)?;
        out.push(lit.value);
        k = skip_space(src, lit.end);
        if src[k..].starts_with(',') {
            k += 1;
        }
    }
}

/// A dict literal of string keys and values starting at `i` (`{` ... `}`), in order.
pub fn string_dict_at(src: &str, i: usize) -> Result<(Vec<(String, String)>, usize), String> {
    let mut k = skip_space(src, i);
    if !src[k..].starts_with('{') {
        return Err(format!("no dict at byte {i}"));
    }
    k += 1;
    let mut out = Vec::new();
    loop {
        k = skip_space(src, k);
        if src[k..].starts_with('}') {
            return Ok((out, k + 1));
        }
        let key = literal_at(src, k)?;
        k = skip_space(src, key.end);
        if !src[k..].starts_with(':') {
            return Err(format!("no ':' after a dict key at byte {k}"));
        }
        let value = literal_at(src, skip_space(src, k + 1))?;
        out.push((key.value, value.value));
        k = skip_space(src, value.end);
        if src[k..].starts_with(',') {
            k += 1;
        }
    }
}

/// Source text with all whitespace removed (to compare expressions).
pub fn squeeze(s: &str) -> String {
    s.chars().filter(|c| !c.is_whitespace()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn literals() {
        let l = literal_at(r#"f"a\n{b} c" + x"#, 0).unwrap();
        assert_eq!(
            (l.value.as_str(), l.fields.as_slice()),
            ("a\n{b} c", &["b".to_string()][..])
        );
        assert_eq!(l.end, 11);
        let t = literal_at("\"\"\"\nx \"y\" \\\nz\n\"\"\".strip()", 0).unwrap();
        assert_eq!(t.value, "\nx \"y\" z\n");
        assert_eq!(literal_at(r"r'\n'", 0).unwrap().value, "\\n");
        assert_eq!(literal_at(r#""\x41\u00e9\101""#, 0).unwrap().value, "AéA");
        assert!(literal_at("'open\n'", 0).is_err());
        assert!(literal_at(r#"f"{{x}}""#, 0).is_err());
        let (list, _) = string_list_at("[\n 'a', # c\n \"b\",\n]", 0).unwrap();
        assert_eq!(list, ["a", "b"]);
        let (dict, _) = string_dict_at("{'k': \"v\", 'k2': 'w'}", 0).unwrap();
        assert_eq!(dict, [("k".into(), "v".into()), ("k2".into(), "w".into())]);
        let src = "x == 1\n    y = 2\nname = 'v'\n";
        let at = find_assignment(src, "name").unwrap();
        assert_eq!(literal_at(src, skip_space(src, at)).unwrap().value, "v");
        assert!(find_assignment(src, "nope").is_err());
    }
}
