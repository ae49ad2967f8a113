//! What `tests/it/docs_blocks.rs` reads from the docs: the fenced shell and Python blocks of a
//! Markdown file, the `<!-- docs-test: … -->` markers written right above them, and whether an
//! unmarked block can run offline (a command the test can provide, no placeholder, no remote
//! URL). Kept apart from the runner so the parsing rules are tested on their own.
//!
//! Marker lines (one directive per comment, any number of them directly above the fence;
//! blank lines between them and the fence are allowed):
//!
//! - `<!-- docs-test: skip (REASON) -->`: the block is not run; the test lists it with REASON.
//! - `<!-- docs-test: skip-line "TEXT" (REASON) -->`: the commands whose text contains TEXT
//!   (a command spans `\`-continued lines) are left out; TEXT must match at least one.
//! - `<!-- docs-test: with serve-env -->`: the test starts `vlm-eval serve-env` on a free port
//!   for this block and points the block's `localhost:8000` / `127.0.0.1:8000` at it.
//! - `<!-- docs-test: file NAME -->` (before any fenced block): the block's text is written to
//!   NAME in the doc's scratch folder, for the blocks after it.
#![allow(dead_code)]

/// What kind of block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lang {
    Shell,
    Python,
    /// Any other info string (json, toml, yaml, text, none): never run, unless a `file` marker
    /// writes it to a file.
    Other,
}

/// One directive from a `<!-- docs-test: … -->` line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Marker {
    Skip(String),
    SkipLine { text: String, reason: String },
    WithServeEnv,
    File(String),
}

/// A fenced block of a doc.
#[derive(Clone, Debug)]
pub struct Block {
    /// 1-based line number of the opening fence.
    pub fence_line: usize,
    pub lang: Lang,
    pub info: String,
    /// The block's lines (between the fences).
    pub lines: Vec<String>,
    pub markers: Vec<Marker>,
}

impl Block {
    /// 1-based doc line of the block's line `i` (0-based).
    pub fn doc_line(&self, i: usize) -> usize {
        self.fence_line + 1 + i
    }

    /// The whole-block skip reason, if any.
    pub fn skip_reason(&self) -> Option<&str> {
        self.markers.iter().find_map(|m| match m {
            Marker::Skip(r) => Some(r.as_str()),
            _ => None,
        })
    }

    pub fn file_name(&self) -> Option<&str> {
        self.markers.iter().find_map(|m| match m {
            Marker::File(f) => Some(f.as_str()),
            _ => None,
        })
    }

    pub fn with_serve_env(&self) -> bool {
        self.markers.contains(&Marker::WithServeEnv)
    }
}

fn lang_of(info: &str) -> Lang {
    match info.split_whitespace().next().unwrap_or("") {
        "sh" | "bash" | "shell" | "console" | "zsh" => Lang::Shell,
        "python" | "py" | "python3" | "pycon" => Lang::Python,
        _ => Lang::Other,
    }
}

/// Parse one marker line; `Ok(None)` when the line is not a marker.
pub fn parse_marker(line: &str) -> Result<Option<Marker>, String> {
    let t = line.trim();
    let Some(body) = t
        .strip_prefix("<!--")
        .and_then(|r| r.strip_suffix("-->"))
        .map(str::trim)
    else {
        return Ok(None);
    };
    let Some(d) = body.strip_prefix("docs-test:").map(str::trim) else {
        return Ok(None);
    };
    let reason = |rest: &str| -> Result<String, String> {
        let r = rest.trim();
        match r.strip_prefix('(').and_then(|r| r.strip_suffix(')')) {
            Some(r) if !r.trim().is_empty() => Ok(r.trim().to_string()),
            _ => Err(format!(
                "`{t}`: give the reason in parentheses, e.g. (needs a GPU)"
            )),
        }
    };
    if let Some(rest) = d.strip_prefix("skip-line") {
        let rest = rest.trim();
        let Some(after) = rest.strip_prefix('"') else {
            return Err(format!("`{t}`: write skip-line \"TEXT\" (REASON)"));
        };
        let Some(end) = after.find('"') else {
            return Err(format!(
                "`{t}`: the TEXT of skip-line needs a closing quote"
            ));
        };
        return Ok(Some(Marker::SkipLine {
            text: after[..end].to_string(),
            reason: reason(&after[end + 1..])?,
        }));
    }
    if let Some(rest) = d.strip_prefix("skip") {
        return Ok(Some(Marker::Skip(reason(rest)?)));
    }
    if d == "with serve-env" {
        return Ok(Some(Marker::WithServeEnv));
    }
    if let Some(name) = d.strip_prefix("file ") {
        let name = name.trim();
        if name.is_empty() || name.contains('/') || name.starts_with('.') {
            return Err(format!("`{t}`: file takes a plain file name"));
        }
        return Ok(Some(Marker::File(name.to_string())));
    }
    Err(format!(
        "`{t}`: unknown directive; use skip (REASON), skip-line \"TEXT\" (REASON), with serve-env or file NAME"
    ))
}

/// Every fenced block of `text`, with the markers above it. Errors name the line.
pub fn blocks(text: &str) -> Result<Vec<Block>, Vec<String>> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out = Vec::new();
    let mut errors = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let l = lines[i].trim_start();
        let fence: String = l.chars().take_while(|&c| c == '`' || c == '~').collect();
        if fence.len() < 3 || !(fence.chars().all(|c| c == '`') || fence.chars().all(|c| c == '~'))
        {
            if let Err(e) = parse_marker(lines[i]) {
                errors.push(format!("line {}: {e}", i + 1));
            }
            i += 1;
            continue;
        }
        let info = l[fence.len()..].trim().to_string();
        let mut markers = Vec::new();
        let mut j = i;
        while j > 0 {
            j -= 1;
            let above = lines[j].trim();
            if above.is_empty() {
                continue;
            }
            match parse_marker(above) {
                Ok(Some(m)) => markers.insert(0, m),
                _ => break,
            }
        }
        let mut body = Vec::new();
        let mut k = i + 1;
        while k < lines.len() && !lines[k].trim_start().starts_with(fence.as_str()) {
            body.push(lines[k].to_string());
            k += 1;
        }
        out.push(Block {
            fence_line: i + 1,
            lang: lang_of(&info),
            info,
            lines: body,
            markers,
        });
        i = k + 1;
    }
    if errors.is_empty() {
        Ok(out)
    } else {
        Err(errors)
    }
}

/// A command of a shell block: its lines joined across `\` continuations.
#[derive(Clone, Debug)]
pub struct Command {
    /// 0-based index of its first line in the block.
    pub first: usize,
    /// How many block lines it spans.
    pub span: usize,
    pub text: String,
}

/// The commands of a shell block (`console` blocks: only the `$ ` lines, prompt removed).
pub fn commands(block: &Block) -> Vec<Command> {
    let console = block.info.starts_with("console");
    let mut out: Vec<Command> = Vec::new();
    let mut open = false;
    for (i, raw) in block.lines.iter().enumerate() {
        let line = if console && !open {
            match raw.strip_prefix("$ ") {
                Some(l) => l.to_string(),
                None => continue,
            }
        } else {
            raw.clone()
        };
        if open {
            let c = out.last_mut().unwrap();
            c.text.push('\n');
            c.text.push_str(&line);
            c.span = i + 1 - c.first;
        } else {
            out.push(Command {
                first: i,
                span: 1,
                text: line.clone(),
            });
        }
        open = line.trim_end().ends_with('\\');
    }
    out
}

/// The command without its trailing `# comment` (a `#` after whitespace, outside quotes).
pub fn strip_comment(text: &str) -> String {
    let mut out = String::new();
    for line in text.lines() {
        let (mut single, mut double) = (false, false);
        let mut prev = ' ';
        let mut cut = line.len();
        for (idx, ch) in line.char_indices() {
            match ch {
                '\'' if !double => single = !single,
                '"' if !single => double = !double,
                '#' if !single && !double && prev.is_whitespace() => {
                    cut = idx;
                    break;
                }
                _ => {}
            }
            prev = ch;
        }
        out.push_str(&line[..cut]);
        out.push('\n');
    }
    out.trim_end().to_string()
}

/// The programs a command runs: the first word of each pipeline part, after `VAR=value`
/// assignments (and `$(…)` substitutions' first words).
pub fn programs(cmd: &str) -> Vec<String> {
    let code = strip_comment(cmd).replace("\\\n", " ");
    let mut out = Vec::new();
    let mut parts: Vec<String> = Vec::new();
    for piece in code.split(['|', ';', '&', '\n']) {
        parts.push(piece.to_string());
    }
    for sub in code.split("$(").skip(1) {
        parts.push(sub.split(')').next().unwrap_or("").to_string());
    }
    for p in parts {
        for w in p
            .split_whitespace()
            .map(|w| w.trim_start_matches(['(', '{']))
        {
            if w.is_empty() {
                continue;
            }
            if w.contains('=') && !w.starts_with('-') {
                if w.contains("$(") {
                    break; // `X=$(cmd …)`: cmd is taken from the substitution
                }
                continue; // `VAR=value` before the program
            }
            if w.chars()
                .all(|c| c.is_alphanumeric() || "._/-:".contains(c))
            {
                out.push(w.to_string());
            }
            break;
        }
    }
    out
}

/// Why the test cannot run this command as written, or None when it can.
/// (`localhost:8000` is fine: the runner points it at its fake server or a serve-env.)
pub fn unrunnable(cmd: &str) -> Option<String> {
    let code = strip_comment(cmd);
    if code.trim().is_empty() {
        return None;
    }
    for p in ["<run>", "<id>", "<the ", "...", "…", "[--", "[-"] {
        if code.contains(p) {
            return Some(format!("it holds the placeholder `{p}`"));
        }
    }
    if let Some(u) = code
        .split_whitespace()
        .find(|w| w.contains("https://") || (w.contains("http://") && !is_local_url(w)))
    {
        return Some(format!("it reaches {u}"));
    }
    for prog in programs(cmd) {
        let ok = matches!(
            prog.as_str(),
            "vlm-eval"
                | "target/release/vlm-eval"
                | "cargo"
                | "curl"
                | "jq"
                | "cd"
                | "ls"
                | "cat"
                | "echo"
                | "mkdir"
                | "cp"
                | "rm"
                | "head"
                | "tail"
                | "wc"
                | "grep"
                | "test"
                | "export"
                | "kill"
                | "sleep"
                | "true"
                | "for"
                | "do"
                | "done"
        );
        if !ok {
            return Some(format!("it runs `{prog}`, which the test does not provide"));
        }
    }
    if code.contains("cargo") && !code.contains("cargo run --release") {
        return Some(
            "the test runs `cargo run --release -- …` only (on the binary it built)".into(),
        );
    }
    None
}

fn is_local_url(w: &str) -> bool {
    let w = w.trim_matches(|c| c == '"' || c == '\'');
    w.starts_with("http://127.0.0.1") || w.starts_with("http://localhost")
}

#[test]
fn markers_blocks_and_commands_parse() {
    let doc = "text\n<!-- docs-test: skip (needs a GPU) -->\n```sh\nvlm-eval a\n```\n\n<!-- docs-test: skip-line \"x y\" (why) -->\n\n```bash\nvlm-eval b \\\n  --c\nvlm-eval x y\n```\n```json\n{}\n```\n";
    let b = blocks(doc).unwrap();
    assert_eq!(b.len(), 3);
    assert_eq!(b[0].fence_line, 3);
    assert_eq!(b[0].skip_reason(), Some("needs a GPU"));
    assert_eq!(b[1].lang, Lang::Shell);
    assert_eq!(
        b[1].markers,
        vec![Marker::SkipLine {
            text: "x y".into(),
            reason: "why".into()
        }]
    );
    let c = commands(&b[1]);
    assert_eq!(c.len(), 2);
    assert_eq!((c[0].first, c[0].span), (0, 2));
    assert_eq!(b[1].doc_line(c[1].first), 12);
    assert_eq!(b[2].lang, Lang::Other);
    assert!(b[2].markers.is_empty());
}

#[test]
fn bad_markers_are_errors_naming_the_line() {
    let e = blocks("<!-- docs-test: skipp (x) -->\n```sh\nls\n```\n").unwrap_err();
    assert!(e[0].starts_with("line 1:"), "{e:?}");
    assert!(parse_marker("<!-- docs-test: skip -->").is_err());
    assert!(parse_marker("<!-- docs-test: skip-line \"a\" -->").is_err());
    assert_eq!(parse_marker("<!-- other -->"), Ok(None));
}

#[test]
fn unrunnable_commands_are_named() {
    assert!(unrunnable("vlm-eval --model mock --seeds 2   # a comment").is_none());
    assert!(unrunnable("pip install x").unwrap().contains("`pip`"));
    assert!(unrunnable("vlm-eval report results/<run>")
        .unwrap()
        .contains("<run>"));
    assert!(unrunnable("vlm-eval x --base-url https://api.example/v1")
        .unwrap()
        .contains("https://"));
    assert!(unrunnable("id=$(curl -s localhost:8000/x | jq -r .id)").is_none());
    assert!(unrunnable("cargo build --release").is_some());
    assert!(unrunnable("cargo run --release -- --model mock").is_none());
    assert_eq!(strip_comment("a 'b # c' # d"), "a 'b # c'");
    assert_eq!(strip_comment("# only a comment"), "");
}
