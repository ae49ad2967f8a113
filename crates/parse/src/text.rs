//! The text protocol's stages: explicit markers, bullet and numbered lists, a bare action,
//! and the last mention of an action name; and the action-list splitter they share.

use super::names::{is_display_key, normalize_action, strip_wrappers};
use super::{Hit, Unknowns, MAX_MARKERS, MAX_PIECES};
use vlm_eval_crafter::rules::Action;

/// Split a list of actions ("a, b then c") and normalise each piece; returns (actions, bad).
/// With `stop_on_bad`, returns as soon as one piece fails.
pub(super) fn parse_action_list(
    content: &str,
    lenient: bool,
    stop_on_bad: bool,
) -> (Vec<Action>, Vec<String>) {
    let c = strip_tags(content);
    let c = c.trim();
    if c.is_empty() {
        return (Vec::new(), Vec::new());
    }
    if let Some(a) = normalize_action(c) {
        return (vec![a], Vec::new());
    }
    let c = if c.contains("->") || c.contains("=>") || c.contains(['→', '⇒']) {
        std::borrow::Cow::Owned(
            c.replace("->", ",")
                .replace("=>", ",")
                .replace(['→', '⇒'], ","),
        )
    } else {
        std::borrow::Cow::Borrowed(c)
    };
    let mut acts = Vec::new();
    let mut bad = Vec::new();
    let pieces = c
        .split([',', ';', '|', '\n'])
        .flat_map(split_words_on_conjunctions)
        .take(MAX_PIECES);
    for piece in pieces {
        let p = strip_list_prefix(&piece).trim();
        if strip_wrappers(p).is_empty() || is_explanation(p) {
            continue;
        }
        let a = normalize_action(p)
            .or_else(|| cut_explanation(p).and_then(normalize_action))
            .or_else(|| if lenient { word_prefix(p) } else { None });
        match a {
            Some(a) => acts.push(a),
            None if stop_on_bad => return (acts, vec![p.to_string()]),
            None => bad.push(p.to_string()),
        }
    }
    (acts, bad)
}

/// A piece that is clearly an explanation ("because …", "so that …"), not an action.
pub(super) fn is_explanation(p: &str) -> bool {
    const STARTS: [&str; 9] = [
        "because", "since", "so", "to", "as", "which", "in", "this", "that",
    ];
    let first = p.split_whitespace().next().unwrap_or("");
    let first = first.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    STARTS.iter().any(|s| first.eq_ignore_ascii_case(s)) && normalize_action(p).is_none()
}

/// Replace short `<tag>`s by commas (`<action>move_left</action>` inside a line).
pub(super) fn strip_tags(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.contains('<') {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(k) = rest.find('<') {
        out.push_str(&rest[..k]);
        let after = &rest[k..];
        // Only short tags count, so look no further than 24 bytes for the '>'.
        let window = &after.as_bytes()[..after.len().min(25)];
        match window.iter().position(|&b| b == b'>') {
            Some(e) if !after[1..e].contains('<') => {
                out.push(',');
                rest = &after[e + 1..];
            }
            _ => {
                out.push('<');
                rest = &after[1..];
            }
        }
    }
    out.push_str(rest);
    std::borrow::Cow::Owned(out)
}

pub(super) fn split_words_on_conjunctions(chunk: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut prev_followed = false;
    for w in chunk.split_whitespace() {
        let lw = w.trim_matches(|c: char| !c.is_alphanumeric());
        let is = |word: &str| lw.eq_ignore_ascii_case(word);
        if prev_followed && is("by") {
            prev_followed = false;
            continue;
        }
        prev_followed = false;
        if is("then") || is("and") || is("followed") || is("afterwards") || w == "&" {
            prev_followed = is("followed");
            if !cur.is_empty() {
                pieces.push(cur.join(" "));
                cur.clear();
            }
            continue;
        }
        cur.push(w);
    }
    if !cur.is_empty() {
        pieces.push(cur.join(" "));
    }
    pieces
}

/// Content of a bullet or numbered list line, or the line itself.
pub(super) fn strip_list_prefix(s: &str) -> &str {
    list_item(s).unwrap_or(s)
}

/// The content after a list marker (`- `, `* `, `• `, `+ `, `1. `, `2) `, `Step 3: `).
pub(super) fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for b in ["- ", "* ", "• ", "+ ", "· ", "– "] {
        if let Some(r) = t.strip_prefix(b) {
            return Some(r);
        }
    }
    let mut k = 0;
    if t.get(..5).is_some_and(|p| p.eq_ignore_ascii_case("step ")) {
        k = 5;
    }
    let digits_start = k;
    let b = t.as_bytes();
    while k < b.len() && b[k].is_ascii_digit() && k - digits_start < 3 {
        k += 1;
    }
    if k == digits_start {
        return None;
    }
    if matches!(b.get(k), Some(b'.') | Some(b')') | Some(b':')) {
        k += 1;
        if b.get(k).is_none_or(|c| c.is_ascii_whitespace()) {
            return Some(&t[k..]);
        }
    }
    None
}

/// The head of "move_left (to reach the tree)", "Do - collect wood", "Move West to the tree".
pub(super) fn cut_explanation(p: &str) -> Option<&str> {
    const SEPS: [&str; 13] = [
        " - ",
        " – ",
        " — ",
        " (",
        " because",
        " since",
        " to ",
        " so ",
        " in order",
        " which",
        " until",
        " towards",
        " toward",
    ];
    // Every separator starts with a space: try each one at each space, first space first
    // (one pass, no lowercase copy).
    let b = p.as_bytes();
    b.iter()
        .enumerate()
        .filter(|&(_, &c)| c == b' ')
        .find(|&(k, _)| {
            SEPS.iter().any(|s| {
                b[k..].len() >= s.len() && b[k..k + s.len()].eq_ignore_ascii_case(s.as_bytes())
            })
        })
        .map(|(k, _)| &p[..k])
}

/// The longest normalisable prefix of the first five words.
pub(super) fn word_prefix(p: &str) -> Option<Action> {
    let words: Vec<&str> = p.split_whitespace().take(5).collect();
    (1..=words.len())
        .rev()
        .find_map(|n| normalize_action(&words[..n].join(" ")))
}

pub(super) struct Marker {
    /// Where the marker begins.
    start: usize,
    /// Where it ends (after a closing tag, or the end of its content).
    end: usize,
    /// Content byte range.
    cs: usize,
    ce: usize,
}

/// `<action>…</action>`, `<|ACTION|>…<|END|>` and `Action:` / `Final action:` / `ACTIONS:`
/// markers, by position. A marker overlapping the next one is cut where the next begins
/// ("Previous action: x. Action: y" gives two markers).
pub(super) fn find_markers(body: &str) -> Vec<Marker> {
    let lower = body.to_ascii_lowercase();
    let lb = lower.as_bytes();
    let len = lb.len();
    let mut markers = Vec::new();

    let tags: [(&str, &[&str]); 3] = [
        ("<action>", &["</action>"]),
        ("<actions>", &["</actions>"]),
        ("<|action|>", &["<|end|>", "<|/action|>", "</action>"]),
    ];
    // Searches for closing tags and line ends only move forward, so each remembers its last
    // answer: many unclosed tags or markers on one long line cost one pass, not one each.
    for (open, closes) in tags {
        let mut from = 0;
        let mut close_at: Vec<NextMatch> =
            closes.iter().map(|c| NextMatch::new(&lower, c)).collect();
        let mut newline = NextMatch::new(&lower, "\n");
        while let Some(k) = lower[from..].find(open) {
            let start = from + k;
            let cs = start + open.len();
            let close = close_at
                .iter_mut()
                .filter_map(|c| c.next(cs).map(|x| (x, x + c.pat.len())))
                .min();
            let (ce, end) = close.unwrap_or_else(|| {
                let e = newline.next(cs).unwrap_or(len);
                (e, e)
            });
            markers.push(Marker { start, end, cs, ce });
            from = end.max(cs);
        }
    }

    for label in LABELS {
        let mut from = 0;
        let mut newline = NextMatch::new(&lower, "\n");
        let mut list_run = None;
        while let Some(k) = lower[from..].find(label) {
            let start = from + k;
            from = start + label.len();
            if let Some(m) = label_marker(body, &lower, start, from, &mut newline, &mut list_run) {
                markers.push(m);
            }
        }
    }

    markers.sort_by_key(|m| m.start);
    let mut kept: Vec<Marker> = Vec::with_capacity(markers.len());
    for m in markers {
        if let Some(prev) = kept.last_mut() {
            if m.start < prev.end {
                prev.end = m.start;
                prev.ce = prev.ce.min(m.start);
                prev.cs = prev.cs.min(prev.ce);
            }
        }
        kept.push(m);
    }
    kept
}

/// Words that introduce an action when followed by a colon ("Action:", "Final answer:").
pub(super) const LABELS: [&str; 6] = ["action", "answer", "move", "command", "decision", "choice"];

/// The next occurrence of a pattern at or after a position, for positions that only grow:
/// the last answer is reused while it is still ahead, so all searches together are one pass.
pub(super) struct NextMatch<'a> {
    hay: &'a str,
    pat: &'a str,
    /// (position the last search started at, its answer).
    last: Option<(usize, Option<usize>)>,
}

impl<'a> NextMatch<'a> {
    pub(super) fn new(hay: &'a str, pat: &'a str) -> NextMatch<'a> {
        NextMatch {
            hay,
            pat,
            last: None,
        }
    }

    /// The first occurrence at or after `p`.
    pub(super) fn next(&mut self, p: usize) -> Option<usize> {
        if let Some((from, found)) = self.last {
            if p >= from && found.is_none_or(|f| p <= f) {
                return found;
            }
        }
        let found = self.hay.get(p..)?.find(self.pat).map(|k| p + k);
        self.last = Some((p, found));
        found
    }
}

/// A label marker at `start` whose keyword ends at `from`, if a colon follows.
pub(super) fn label_marker(
    body: &str,
    lower: &str,
    start: usize,
    from: usize,
    newline: &mut NextMatch,
    list_run: &mut Option<(usize, usize)>,
) -> Option<Marker> {
    let lb = lower.as_bytes();
    let len = lb.len();
    if start > 0 && (lb[start - 1].is_ascii_alphanumeric() || lb[start - 1] == b'_') {
        return None;
    }
    let mut j = from;
    if lower[j..].starts_with("(s)") {
        j += 3;
    } else if lb.get(j) == Some(&b's') {
        j += 1;
    }
    let mut q = j;
    while lb.get(q) == Some(&b' ') {
        q += 1;
    }
    let d0 = q;
    while q < len && lb[q].is_ascii_digit() && q - d0 < 3 {
        q += 1;
    }
    if q > d0 {
        j = q;
    }
    while j < len && matches!(lb[j], b' ' | b'\t' | b'*') {
        j += 1;
    }
    if lb.get(j) != Some(&b':') {
        return None;
    }
    let cs = j + 1;
    let line_end = newline.next(cs).unwrap_or(len);
    // Forward only: trimming from the line's end would rescan a long tail for every marker.
    let blank = body[cs..line_end]
        .trim_start_matches(|c: char| c.is_whitespace() || c == '*')
        .is_empty();
    let (cs, ce) = if blank {
        next_lines(body, lower, line_end, list_run)
    } else {
        (cs, line_end)
    };
    Some(Marker {
        start,
        end: ce,
        cs,
        ce,
    })
}

/// For "Action:" with nothing after the colon: the next non-blank line, plus any list lines
/// directly following it. Returns the content byte range.
///
/// `list_run` remembers the last run of list lines scanned, as (the line end it started after,
/// the end of its last line): a later marker whose first line ends inside that run shares its
/// end instead of rescanning it (a list of `- Action:` lines is one pass, not one per line).
pub(super) fn next_lines(
    body: &str,
    lower: &str,
    from: usize,
    list_run: &mut Option<(usize, usize)>,
) -> (usize, usize) {
    let len = body.len();
    let line_end = |ls: usize| lower[ls..].find('\n').map_or(len, |x| ls + x);
    let mut first = None;
    let mut p = from;
    while p < len {
        let ls = p + 1;
        let le = line_end(ls);
        if !body[ls..le].trim().is_empty() {
            first = Some((ls, le));
            break;
        }
        p = le;
    }
    let Some((start, first_end)) = first else {
        return (from, from);
    };
    if let Some((run_from, run_end)) = *list_run {
        if (run_from..run_end).contains(&first_end) {
            return (start, run_end);
        }
    }
    let mut end = first_end;
    while end < len {
        let le = line_end(end + 1);
        if list_item(&body[end + 1..le]).is_none() {
            break;
        }
        end = le;
    }
    *list_run = Some((first_end, end));
    (start, end)
}

pub(super) fn stage_markers(body: &str, multi: bool, unk: &mut Unknowns) -> Option<Hit> {
    let markers = find_markers(body);
    let n = markers.len();
    if n == 0 {
        return None;
    }
    let parse = |k: usize| parse_action_list(&body[markers[k].cs..markers[k].ce], true, false);
    // The last marker with a usable action (looking at no more than MAX_MARKERS from the end).
    let mut chosen = None;
    let mut last_bad = Vec::new();
    for k in (n.saturating_sub(MAX_MARKERS)..n).rev() {
        let (acts, bad) = parse(k);
        if !acts.is_empty() {
            chosen = Some((k, acts, bad));
            break;
        }
        if k == n - 1 {
            last_bad = bad;
        }
    }
    let Some((k, acts, bad)) = chosen else {
        // Markers but nothing usable: report the last one's content.
        for b in &last_bad {
            unk.push(b);
        }
        return None;
    };
    let mut block = vec![(acts, bad)];
    let mut first = k;
    if multi {
        while first > 0 && k - first < MAX_MARKERS {
            let prev = &markers[first - 1];
            let gap = &body[prev.end..markers[first].start];
            // Separate lines, or a closed tag before; never a label cut short by this one.
            let separate = gap.contains('\n') || prev.end > prev.ce;
            let adjacent = separate
                && gap
                    .chars()
                    .all(|c| c.is_whitespace() || c.is_ascii_digit() || ",;.-*>#|)".contains(c));
            if !adjacent {
                break;
            }
            let earlier = parse(first - 1);
            if earlier.0.is_empty() {
                break;
            }
            block.push(earlier);
            first -= 1;
        }
    }
    let mut actions = Vec::new();
    for (acts, bad) in block.into_iter().rev() {
        actions.extend(acts);
        for b in &bad {
            unk.push(b);
        }
    }
    Some(Hit::text(actions, &body[..markers[first].start]))
}

pub(super) fn stage_lists(body: &str) -> Option<Hit> {
    // (start offset, actions) per run of consecutive list lines.
    let mut runs: Vec<(usize, Vec<Action>)> = Vec::new();
    let mut cur: Option<(usize, Vec<Action>)> = None;
    let mut offset = 0;
    for line in body.split('\n') {
        let line_start = offset;
        offset += line.len() + 1;
        if let Some(item) = list_item(line) {
            let (acts, _) = parse_action_list(item, false, false);
            if acts.is_empty() {
                continue;
            }
            match &mut cur {
                Some((_, v)) => v.extend(acts),
                None => cur = Some((line_start, acts)),
            }
        } else if !line.trim().is_empty() {
            if let Some(r) = cur.take() {
                runs.push(r);
            }
        }
    }
    if let Some(r) = cur.take() {
        runs.push(r);
    }
    let (start, actions) = runs.pop()?;
    Some(Hit::text(actions, &body[..start]))
}

pub(super) fn stage_bare(body: &str) -> Option<Hit> {
    let trimmed = body.trim();
    if trimmed.is_empty() {
        return None;
    }
    let lines: Vec<&str> = trimmed.lines().filter(|l| !l.trim().is_empty()).collect();
    let mut candidates = vec![trimmed];
    if lines.len() > 1 {
        candidates.push(lines[lines.len() - 1]);
        candidates.push(lines[0]);
    }
    for cand in candidates {
        let (acts, bad) = parse_action_list(cand, false, true);
        if !acts.is_empty() && bad.is_empty() {
            let start = offset_in(body, cand);
            return Some(Hit::text(acts, &body[..start]));
        }
    }
    None
}

/// Byte offset of a subslice within `body` (0 if it is not one).
pub(super) fn offset_in(body: &str, sub: &str) -> usize {
    let b = body.as_ptr() as usize;
    let s = sub.as_ptr() as usize;
    if s >= b && s + sub.len() <= b + body.len() {
        s - b
    } else {
        0
    }
}

/// The last mention of a canonical name (`move_left`) or a multi-word name ("Move West",
/// "place table") in prose.
pub(super) fn stage_mention(body: &str) -> Option<Hit> {
    let mut words: Vec<(usize, &str)> = Vec::new();
    let mut start: Option<usize> = None;
    for (k, c) in body
        .char_indices()
        .chain(std::iter::once((body.len(), ' ')))
    {
        let w = c.is_ascii_alphanumeric() || c == '_';
        match (w, start) {
            (true, None) => start = Some(k),
            (false, Some(s)) => {
                words.push((s, &body[s..k]));
                start = None;
            }
            _ => {}
        }
    }
    let mut last: Option<(usize, Action)> = None;
    for (i, &(pos, w)) in words.iter().enumerate() {
        if w.contains('_') || w.eq_ignore_ascii_case("noop") {
            if let Some(a) = Action::from_name(&w.to_ascii_lowercase()) {
                last = Some((pos, a));
                continue;
            }
        }
        // Multi-word names all start with one of these.
        if !["move", "place", "make"]
            .iter()
            .any(|s| w.eq_ignore_ascii_case(s))
        {
            continue;
        }
        for n in [3usize, 2] {
            let Some(group) = words.get(i..i + n) else {
                continue;
            };
            let key = group
                .iter()
                .map(|(_, w)| w.to_ascii_lowercase())
                .collect::<Vec<_>>()
                .join("_");
            let a = Action::from_name(&key)
                .or_else(|| Action::ALL.into_iter().find(|&a| is_display_key(a, &key)));
            if let Some(a) = a {
                last = Some((pos, a));
                break;
            }
        }
    }
    // Prose around a mention is all reasoning.
    let (_, a) = last?;
    Some(Hit::text(vec![a], body))
}

#[cfg(test)]
mod tests {
    //! The marker search against the straightforward version it replaced (each search from
    //! scratch), on many generated replies: the same markers, found in one pass.
    use super::*;

    // The earlier implementation, kept as the reference.
    fn old_find_markers(body: &str) -> Vec<Marker> {
        let lower = body.to_ascii_lowercase();
        let lb = lower.as_bytes();
        let len = lb.len();
        let mut markers = Vec::new();

        let tags: [(&str, &[&str]); 3] = [
            ("<action>", &["</action>"]),
            ("<actions>", &["</actions>"]),
            ("<|action|>", &["<|end|>", "<|/action|>", "</action>"]),
        ];
        for (open, closes) in tags {
            let mut from = 0;
            while let Some(k) = lower[from..].find(open) {
                let start = from + k;
                let cs = start + open.len();
                let close = closes
                    .iter()
                    .filter_map(|c| lower[cs..].find(c).map(|x| (cs + x, cs + x + c.len())))
                    .min();
                let (ce, end) = close.unwrap_or_else(|| {
                    let e = lower[cs..].find('\n').map_or(len, |x| cs + x);
                    (e, e)
                });
                markers.push(Marker { start, end, cs, ce });
                from = end.max(cs);
            }
        }

        for label in LABELS {
            let mut from = 0;
            while let Some(k) = lower[from..].find(label) {
                let start = from + k;
                from = start + label.len();
                if let Some(m) = old_label_marker(body, &lower, start, from) {
                    markers.push(m);
                }
            }
        }

        markers.sort_by_key(|m| m.start);
        let mut kept: Vec<Marker> = Vec::with_capacity(markers.len());
        for m in markers {
            if let Some(prev) = kept.last_mut() {
                if m.start < prev.end {
                    prev.end = m.start;
                    prev.ce = prev.ce.min(m.start);
                    prev.cs = prev.cs.min(prev.ce);
                }
            }
            kept.push(m);
        }
        kept
    }

    /// A label marker at `start` whose keyword ends at `from`, if a colon follows.
    fn old_label_marker(body: &str, lower: &str, start: usize, from: usize) -> Option<Marker> {
        let lb = lower.as_bytes();
        let len = lb.len();
        if start > 0 && (lb[start - 1].is_ascii_alphanumeric() || lb[start - 1] == b'_') {
            return None;
        }
        let mut j = from;
        if lower[j..].starts_with("(s)") {
            j += 3;
        } else if lb.get(j) == Some(&b's') {
            j += 1;
        }
        let mut q = j;
        while lb.get(q) == Some(&b' ') {
            q += 1;
        }
        let d0 = q;
        while q < len && lb[q].is_ascii_digit() && q - d0 < 3 {
            q += 1;
        }
        if q > d0 {
            j = q;
        }
        while j < len && matches!(lb[j], b' ' | b'\t' | b'*') {
            j += 1;
        }
        if lb.get(j) != Some(&b':') {
            return None;
        }
        let cs = j + 1;
        let line_end = lower[cs..].find('\n').map_or(len, |x| cs + x);
        let blank = body[cs..line_end]
            .trim_matches(|c: char| c.is_whitespace() || c == '*')
            .is_empty();
        let (cs, ce) = if blank {
            old_next_lines(body, lower, line_end)
        } else {
            (cs, line_end)
        };
        Some(Marker {
            start,
            end: ce,
            cs,
            ce,
        })
    }

    /// For "Action:" with nothing after the colon: the next non-blank line, plus any list lines
    /// directly following it. Returns the content byte range.
    fn old_next_lines(body: &str, lower: &str, from: usize) -> (usize, usize) {
        let len = body.len();
        let mut range: Option<(usize, usize)> = None;
        let mut p = from;
        while p < len {
            let ls = p + 1;
            let le = lower[ls..].find('\n').map_or(len, |x| ls + x);
            let line = &body[ls..le];
            match &mut range {
                None if !line.trim().is_empty() => range = Some((ls, le)),
                None => {}
                Some((_, end)) if list_item(line).is_some() => *end = le,
                Some(_) => break,
            }
            p = le;
        }
        range.unwrap_or((from, from))
    }

    /// A small deterministic generator (xorshift).
    fn pieces(seed: u64, n: usize) -> String {
        const TOKENS: [&str; 16] = [
            "Action:",
            "action: ",
            "\n",
            "\n\n",
            "- ",
            "1. ",
            "<action>",
            "</action>",
            "<|action|>",
            "<|end|>",
            "move_left",
            " ",
            "**Final answer:**",
            "x",
            "Answer 2: ",
            "*",
        ];
        let mut s = seed | 1;
        let mut out = String::new();
        for _ in 0..n {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            out.push_str(TOKENS[(s % TOKENS.len() as u64) as usize]);
        }
        out
    }

    fn ranges(markers: &[Marker]) -> Vec<(usize, usize, usize, usize)> {
        markers
            .iter()
            .map(|m| (m.start, m.end, m.cs, m.ce))
            .collect()
    }

    #[test]
    fn markers_match_the_reference_search() {
        for seed in 0..3000u64 {
            let body = pieces(seed, 4 + (seed % 60) as usize);
            assert_eq!(
                ranges(&find_markers(&body)),
                ranges(&old_find_markers(&body)),
                "seed {seed}: {body:?}"
            );
        }
    }

    #[test]
    fn strip_tags_is_unchanged_for_short_and_long_tags() {
        assert_eq!(strip_tags("a<action>b</action>c"), "a,b,c");
        assert_eq!(strip_tags("a < b"), "a < b");
        let long = format!("<{}>", "x".repeat(30));
        assert_eq!(strip_tags(&long), long, "tags longer than 24 bytes stay");
        assert_eq!(strip_tags("<<b>"), "<,");
        assert_eq!(strip_tags("no tags"), "no tags");
    }
}
