//! Turning a model's reply into Crafter actions, tolerantly and without ever panicking.
//!
//! Two protocols exist. Under [`Protocol::Tool`] the model is offered the `interact_many`
//! function (see [`crate::agent::tools`]) and may return up to `max_actions` actions per turn;
//! under [`Protocol::Text`] it answers in prose, BALROG style, and exactly one action is taken.
//!
//! Stages, first hit wins:
//!
//! | Tool protocol                       | Text protocol                       |
//! |-------------------------------------|-------------------------------------|
//! | 1. tool calls ([`ParseSource::ToolCall`]) | 1. explicit markers (`ACTION:`, `<action>`) |
//! | 2. tool-call JSON in the text ([`ParseSource::ToolJsonInText`]) | 2. tool calls, then JSON in the text |
//! | 3. explicit markers                 | 3. bullet / numbered lists          |
//! | 4. bullet / numbered lists          | 4. a bare action (whole reply, last or first line) |
//! | 5. a bare action                    | 5. the last mention of an action name in prose |
//! | 6. the last mention of an action name |                                   |
//!
//! Tool calls count when their name looks like ours (`interact_many`, anything containing
//! `interact`, `action` or `crafter`, or `act`/`step`/`play`/`execute`/`run`), when their
//! arguments carry an action key (`actions`, `action`, `commands`, `command`, `actions_list`,
//! `action_list`, `action_sequence`, `moves`), or when the function is named after an action
//! (`{"name": "move_left"}`). String arguments are parsed strictly first and then by a lenient
//! JSON reader that accepts code fences, single quotes, unquoted keys and words, trailing or
//! missing commas and truncated input (missing `"]}`). Action payloads may be an array of
//! strings, ids or `{"action": …}` objects, a single string, or a comma/`then`-separated string.
//! In text, tool-call-like JSON is found anywhere (`<tool_call>{…}</tool_call>`, fenced or
//! bare objects, `{"tool_calls": […]}`, payloads nested in other objects, or a JSON array of
//! action names); several blobs are concatenated like several tool calls.
//!
//! Explicit markers are `<action>…</action>`, `<actions>…</actions>`, `<|ACTION|>…<|END|>` and
//! a colon after one of the words action(s), answer, move, command, decision, choice ("ACTION:",
//! "**Final action:**", "Action 2:", "Answer:"), whose content is the rest of the line, or when
//! that is blank the next non-blank line plus any list lines right after it.
//! In text, the **last** explicit marker with a usable action wins (models reason first). Under
//! the tool protocol, markers directly adjacent to it (consecutive `ACTION:` lines, or
//! `<action>` tags) and comma/`then`/`and`-separated lists inside it form a sequence. Text
//! after the last `</think>` is preferred when present.
//!
//! # Aliases accepted by [`normalize_action`]
//!
//! Input is stripped of quotes, brackets, markdown and trailing punctuation, split into
//! lowercase words at spaces, hyphens, underscores, other punctuation and camelCase
//! boundaries (`MoveLeft`, `MOVE_LEFT`, `move-left`, `Move left` are all `move_left`). Then:
//!
//! | Action | Accepted besides the canonical name |
//! |---|---|
//! | any | id `"0"`..`"16"`; BALROG display name ("Move West", "Make Wood Pickaxe"); the name without separators (`moveleft`) |
//! | `noop` | no op, nop, none, nothing, do nothing, no action, null, idle, wait, stay, stay still, stand, stand still, pass, skip, remain |
//! | `move_left`/`right`/`up`/`down` | optional verb (move, go, walk, step, head, run, turn, face) + left/west, right/east, up/north, down/south (also `…ward(s)`); arrows ← → ↑ ↓ ⬅ ➡ ⬆ ⬇ |
//! | `do` | interact, collect, attack, use, hit, mine, chop, gather, harvest, eat, drink, fight, strike, punch, grab, pick up, act, dig, cut, kill, defeat, get, take, do action; any of these verbs (or `do`) + a target (wood, tree, stone, rock, coal, iron, diamond, water, drink, sapling, grass, cow, zombie, skeleton, plant, it, with) — so achievement names like `collect_wood`, `eat_cow` map to `do` |
//! | `sleep` | rest, nap, take nap, go to sleep, go sleep, sleep now |
//! | `place_*` | verb (place, put, set, drop, build) + stone/rock, table/crafting table/craft table/workbench/work bench/crafting bench, furnace, plant/sapling; make/craft/create/construct + table or furnace; plant, plant sapling, sow, sow sapling |
//! | `make_*` | optional verb (make, craft, build, create, forge) + wood/wooden, stone, iron + pickaxe/pickax/pick/pick axe, sword |
//!
//! Filler words (the, a, an, to, toward(s), one, 1, single, step(s), tile(s), square, once,
//! please, action(s), by, space, cell) are dropped in a second attempt, so "move one step to
//! the left", "make a wooden pickaxe" and "action 3" work. Single letters (w/a/s/d) and bare
//! material names ("table", "stone") are deliberately *not* accepted: they are ambiguous.

use serde::{Serialize, Serializer};
use serde_json::{Map, Number, Value};

use super::tools::display_name;
use crate::crafter::rules::Action;
use crate::model::{ChatReply, ToolCall};

/// How the model is asked to act.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize, clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Protocol {
    /// The `interact_many` function tool; several actions per turn.
    Tool,
    /// Free text, BALROG style; one action per turn.
    Text,
}

/// Where the parsed actions came from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ParseSource {
    /// A proper tool call.
    ToolCall,
    /// A tool-call-like JSON blob inside the reply text.
    ToolJsonInText,
    /// Prose: markers, lists, a bare name or a mention.
    Text,
    /// Nothing usable.
    None,
}

/// The outcome of parsing one reply.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Parsed {
    /// Actions to run, at most `max_actions` (one under the text protocol); empty means nothing
    /// usable (the caller substitutes one noop).
    #[serde(serialize_with = "ser_actions")]
    pub actions: Vec<Action>,
    /// The model's reasoning: tool `reasoning` argument, else the server's reasoning field,
    /// else a `<think>` block, else the text preceding the action.
    pub reasoning: Option<String>,
    /// Which stage produced the actions.
    pub source: ParseSource,
    /// Action strings from tool arguments, JSON payloads or explicit markers that could not be
    /// normalised (dropped); at most 32, each clipped to 120 characters.
    pub unknown: Vec<String>,
    /// How many valid actions were cut by the per-turn limit.
    pub truncated: usize,
}

fn ser_actions<S: Serializer>(actions: &[Action], s: S) -> Result<S::Ok, S::Error> {
    let names: Vec<&str> = actions.iter().map(|a| a.name()).collect();
    names.serialize(s)
}

const MAX_UNKNOWN: usize = 32;
const MAX_UNKNOWN_CHARS: usize = 120;
const MAX_NORMALIZE_LEN: usize = 100;
const MAX_DEPTH: usize = 48;
const MAX_JSON_STARTS: usize = 64;
const MAX_MARKERS: usize = 256;
/// Pieces of one action list looked at (far beyond any real per-turn limit).
const MAX_PIECES: usize = 4096;

const ACTION_KEYS: [&str; 8] = [
    "actions",
    "action",
    "commands",
    "command",
    "actions_list",
    "action_list",
    "action_sequence",
    "moves",
];
const REASONING_KEYS: [&str; 8] = [
    "reasoning",
    "reason",
    "thought",
    "thoughts",
    "thinking",
    "rationale",
    "explanation",
    "think",
];
const ARG_KEYS: [&str; 5] = ["arguments", "parameters", "args", "input", "params"];
const ITEM_KEYS: [&str; 7] = [
    "action", "name", "type", "value", "command", "id", "actions",
];

/// Parse a reply into actions: tool calls first (any call whose name is interact_many or
/// similar, or any call with an `actions`/`action` argument), then a tolerant text fallback.
pub fn parse_reply(reply: &ChatReply, protocol: Protocol, max_actions: usize) -> Parsed {
    let cap = match protocol {
        Protocol::Tool => max_actions.max(1),
        Protocol::Text => 1,
    };
    let multi = protocol == Protocol::Tool;
    let text = reply.text.as_deref().unwrap_or("");
    let (think, body) = split_think(text);
    let mut unk = Unknowns::default();

    let hit = match protocol {
        Protocol::Tool => stage_tool_calls(reply, body, &mut unk)
            .or_else(|| stage_json_in_text(body, &mut unk))
            .or_else(|| stage_markers(body, multi, &mut unk))
            .or_else(|| stage_lists(body))
            .or_else(|| stage_bare(body))
            .or_else(|| stage_mention(body)),
        Protocol::Text => stage_markers(body, multi, &mut unk)
            .or_else(|| stage_tool_calls(reply, body, &mut unk))
            .or_else(|| stage_json_in_text(body, &mut unk))
            .or_else(|| stage_lists(body))
            .or_else(|| stage_bare(body))
            .or_else(|| stage_mention(body)),
    };

    let server_reasoning = non_empty(reply.reasoning.as_deref());
    let think = non_empty(think);
    match hit {
        Some(h) => {
            let mut actions = h.actions;
            let truncated = actions.len().saturating_sub(cap);
            actions.truncate(cap);
            let reasoning = h
                .reasoning
                .or(server_reasoning)
                .or(think)
                .or_else(|| non_empty(Some(&h.preceding)));
            Parsed {
                actions,
                reasoning,
                source: h.source,
                unknown: unk.0,
                truncated,
            }
        }
        None => Parsed {
            actions: Vec::new(),
            reasoning: server_reasoning.or(think),
            source: ParseSource::None,
            unknown: unk.0,
            truncated: 0,
        },
    }
}

/// Normalise one action string: canonical names, case/space/hyphen/camelCase variants, BALROG
/// display names, unambiguous aliases (see the module table) and numeric ids "0".."16".
pub fn normalize_action(s: &str) -> Option<Action> {
    let t = strip_wrappers(s);
    if t.is_empty() || t.len() > MAX_NORMALIZE_LEN {
        return None;
    }
    if t.bytes().all(|b| b.is_ascii_digit()) {
        return t.parse::<i64>().ok().and_then(Action::from_id);
    }
    match t {
        "←" | "⬅" => return Some(Action::MoveLeft),
        "→" | "➡" => return Some(Action::MoveRight),
        "↑" | "⬆" => return Some(Action::MoveUp),
        "↓" | "⬇" => return Some(Action::MoveDown),
        _ => {}
    }
    let words = words_of(t);
    if words.is_empty() {
        return None;
    }
    let refs: Vec<&str> = words.iter().map(String::as_str).collect();
    if let Some(a) = lookup_words(&refs) {
        return Some(a);
    }
    let kept: Vec<&str> = refs
        .iter()
        .copied()
        .filter(|w| !FILLER.contains(w))
        .collect();
    if kept.is_empty() || kept.len() == refs.len() {
        return None;
    }
    if kept.len() == 1 && kept[0].bytes().all(|b| b.is_ascii_digit()) {
        return kept[0].parse::<i64>().ok().and_then(Action::from_id);
    }
    lookup_words(&kept)
}

// ---------------------------------------------------------------------------------------------
// Normalisation
// ---------------------------------------------------------------------------------------------

const FILLER: [&str; 21] = [
    "the", "a", "an", "to", "towards", "toward", "one", "1", "single", "step", "steps", "tile",
    "tiles", "square", "once", "please", "action", "actions", "by", "space", "cell",
];

fn is_wrapper(c: char) -> bool {
    c.is_whitespace()
        || matches!(
            c,
            '"' | '\''
                | '`'
                | '*'
                | '_'
                | '#'
                | '('
                | ')'
                | '['
                | ']'
                | '{'
                | '}'
                | '<'
                | '>'
                | '.'
                | ','
                | ';'
                | ':'
                | '!'
                | '?'
                | '\u{201c}'
                | '\u{201d}'
                | '\u{2018}'
                | '\u{2019}'
                | '\u{fe0f}'
        )
}

fn strip_wrappers(s: &str) -> &str {
    s.trim_matches(is_wrapper)
}

/// Lowercase ASCII words, split at non-alphanumerics and lower→upper camelCase boundaries.
fn words_of(t: &str) -> Vec<String> {
    let mut words = Vec::new();
    let mut cur = String::new();
    let mut prev_lower = false;
    for c in t.chars() {
        if c.is_ascii_alphanumeric() {
            if c.is_ascii_uppercase() && prev_lower && !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            cur.push(c.to_ascii_lowercase());
            prev_lower = c.is_ascii_lowercase();
        } else {
            if !cur.is_empty() {
                words.push(std::mem::take(&mut cur));
            }
            prev_lower = false;
        }
    }
    if !cur.is_empty() {
        words.push(cur);
    }
    words
}

/// Whether `key` (lowercase words joined by `_`) is the display name of `a`.
fn is_display_key(a: Action, key: &str) -> bool {
    let d = display_name(a);
    d.len() == key.len()
        && d.bytes().zip(key.bytes()).all(|(x, k)| match x {
            b' ' => k == b'_',
            _ => x.to_ascii_lowercase() == k,
        })
}

/// Whether `flat` (lowercase words concatenated) equals `name` without separators.
fn is_flat(name: &str, flat: &str) -> bool {
    let mut it = name
        .bytes()
        .filter(|&b| b != b'_' && b != b' ')
        .map(|b| b.to_ascii_lowercase());
    flat.bytes().all(|f| it.next() == Some(f)) && it.next().is_none()
}

fn lookup_words(words: &[&str]) -> Option<Action> {
    let key = words.join("_");
    if let Some(a) = Action::from_name(&key) {
        return Some(a);
    }
    let flat = words.concat();
    for a in Action::ALL {
        if is_display_key(a, &key) || is_flat(a.name(), &flat) || is_flat(display_name(a), &flat) {
            return Some(a);
        }
    }
    let a = match key.as_str() {
        "no_op" | "nop" | "none" | "nothing" | "do_nothing" | "no_action" | "null" | "idle"
        | "wait" | "stay" | "stay_still" | "stand" | "stand_still" | "pass" | "skip" | "remain" => {
            Action::Noop
        }
        "rest" | "nap" | "take_nap" | "go_to_sleep" | "go_sleep" | "sleep_now" => Action::Sleep,
        "do_action" | "pick_up" => Action::Do,
        "plant" | "plant_sapling" | "sow" | "sow_sapling" => Action::PlacePlant,
        _ => {
            return move_combo(words)
                .or_else(|| make_combo(words))
                .or_else(|| place_combo(words))
                .or_else(|| do_combo(words))
        }
    };
    Some(a)
}

fn direction(w: &str) -> Option<Action> {
    let w = w
        .strip_suffix("wards")
        .or_else(|| w.strip_suffix("ward"))
        .unwrap_or(w);
    match w {
        "left" | "west" => Some(Action::MoveLeft),
        "right" | "east" => Some(Action::MoveRight),
        "up" | "north" => Some(Action::MoveUp),
        "down" | "south" => Some(Action::MoveDown),
        _ => None,
    }
}

fn move_combo(words: &[&str]) -> Option<Action> {
    const VERBS: [&str; 8] = ["move", "go", "walk", "step", "head", "run", "turn", "face"];
    match words {
        [d] => direction(d),
        [v, d] if VERBS.contains(v) => direction(d),
        _ => None,
    }
}

fn make_combo(words: &[&str]) -> Option<Action> {
    const VERBS: [&str; 5] = ["make", "craft", "build", "create", "forge"];
    let rest = match words.first() {
        Some(v) if VERBS.contains(v) => &words[1..],
        _ => words,
    };
    let (material, tool) = rest.split_first()?;
    let m = match *material {
        "wood" | "wooden" => 0,
        "stone" => 1,
        "iron" => 2,
        _ => return None,
    };
    let sword = match tool {
        ["pickaxe"] | ["pickax"] | ["pick"] | ["pick", "axe"] => false,
        ["sword"] => true,
        _ => return None,
    };
    Some(match (m, sword) {
        (0, false) => Action::MakeWoodPickaxe,
        (1, false) => Action::MakeStonePickaxe,
        (2, false) => Action::MakeIronPickaxe,
        (0, true) => Action::MakeWoodSword,
        (1, true) => Action::MakeStoneSword,
        _ => Action::MakeIronSword,
    })
}

fn place_combo(words: &[&str]) -> Option<Action> {
    let (verb, obj) = words.split_first()?;
    let target = match obj {
        ["stone"] | ["rock"] => Action::PlaceStone,
        ["table"]
        | ["crafting", "table"]
        | ["craft", "table"]
        | ["workbench"]
        | ["work", "bench"]
        | ["crafting", "bench"] => Action::PlaceTable,
        ["furnace"] => Action::PlaceFurnace,
        ["plant"] | ["sapling"] => Action::PlacePlant,
        _ => return None,
    };
    match *verb {
        "place" | "put" | "set" | "drop" | "build" => Some(target),
        "make" | "craft" | "create" | "construct"
            if matches!(target, Action::PlaceTable | Action::PlaceFurnace) =>
        {
            Some(target)
        }
        _ => None,
    }
}

fn do_combo(words: &[&str]) -> Option<Action> {
    const VERBS: [&str; 23] = [
        "do", "interact", "collect", "attack", "use", "hit", "mine", "chop", "gather", "harvest",
        "eat", "drink", "fight", "strike", "punch", "grab", "act", "dig", "cut", "kill", "defeat",
        "get", "take",
    ];
    const TARGETS: [&str; 19] = [
        "wood", "tree", "trees", "stone", "rock", "coal", "iron", "diamond", "water", "drink",
        "sapling", "grass", "cow", "zombie", "skeleton", "plant", "it", "with", "log",
    ];
    let (verb, rest) = words.split_first()?;
    if !VERBS.contains(verb) {
        return None;
    }
    if rest.iter().all(|w| TARGETS.contains(w)) {
        Some(Action::Do)
    } else {
        None
    }
}

// ---------------------------------------------------------------------------------------------
// Shared helpers
// ---------------------------------------------------------------------------------------------

#[derive(Default)]
struct Unknowns(Vec<String>);

impl Unknowns {
    fn push(&mut self, s: &str) {
        let t = s.trim();
        if t.is_empty() || self.0.len() >= MAX_UNKNOWN {
            return;
        }
        self.0.push(clip(t, MAX_UNKNOWN_CHARS));
    }

    fn extend(&mut self, other: Unknowns) {
        for s in other.0 {
            self.push(&s);
        }
    }
}

fn clip(s: &str, max_chars: usize) -> String {
    match s.char_indices().nth(max_chars) {
        Some((k, _)) => format!("{}…", &s[..k]),
        None => s.to_string(),
    }
}

fn non_empty(s: Option<&str>) -> Option<String> {
    s.map(str::trim)
        .filter(|t| !t.is_empty())
        .map(str::to_string)
}

/// A stage's result.
struct Hit {
    actions: Vec<Action>,
    source: ParseSource,
    /// Reasoning given explicitly (tool argument).
    reasoning: Option<String>,
    /// Text preceding the action, as a reasoning fallback.
    preceding: String,
}

impl Hit {
    fn text(actions: Vec<Action>, preceding: &str) -> Hit {
        let preceding = preceding
            .trim_end_matches(|c: char| c.is_whitespace() || matches!(c, '*' | '#' | '>'))
            .trim_start();
        Hit {
            actions,
            source: ParseSource::Text,
            reasoning: None,
            preceding: preceding.to_string(),
        }
    }
}

/// Split off a `<think>…</think>` block: (think content, text to parse).
fn split_think(text: &str) -> (Option<&str>, &str) {
    let lower = text.to_ascii_lowercase();
    let Some(k) = lower.rfind("</think>") else {
        return (None, text);
    };
    let open = lower[..k]
        .find("<think>")
        .map_or(0, |o| o + "<think>".len());
    let think = Some(text[open..k].trim());
    let after = &text[k + "</think>".len()..];
    if after.trim().is_empty() {
        (think, text)
    } else {
        (think, after)
    }
}

fn get_ci<'v>(m: &'v Map<String, Value>, key: &str) -> Option<&'v Value> {
    m.iter()
        .find(|(k, _)| k.trim().eq_ignore_ascii_case(key))
        .map(|(_, v)| v)
}

fn first_key<'v>(m: &'v Map<String, Value>, keys: &[&str]) -> Option<&'v Value> {
    keys.iter().find_map(|k| get_ci(m, k))
}

fn reasoning_of(m: &Map<String, Value>) -> Option<String> {
    REASONING_KEYS
        .iter()
        .filter_map(|k| get_ci(m, k))
        .find_map(|v| non_empty(v.as_str()))
}

fn tool_name_matches(name: &str) -> bool {
    let k: String = name
        .chars()
        .filter(char::is_ascii_alphanumeric)
        .map(|c| c.to_ascii_lowercase())
        .collect();
    k.contains("interact")
        || k.contains("action")
        || k.contains("crafter")
        || matches!(k.as_str(), "act" | "step" | "play" | "execute" | "run")
}

// ---------------------------------------------------------------------------------------------
// Structured payloads (tool calls and JSON)
// ---------------------------------------------------------------------------------------------

/// Actions found in a tool-call-like payload.
struct Found {
    actions: Vec<Action>,
    reasoning: Option<String>,
}

/// Parse a tool-argument string: strict JSON, then lenient; a non-JSON string stays a string.
fn parse_args_string(s: &str, depth: usize) -> Value {
    let t = strip_fence(s);
    if t.is_empty() {
        return Value::Null;
    }
    if let Ok(v) = serde_json::from_str::<Value>(t) {
        if let Value::String(inner) = &v {
            let i = inner.trim_start();
            if depth < 2 && (i.starts_with('{') || i.starts_with('[')) {
                return parse_args_string(inner, depth + 1);
            }
        }
        return v;
    }
    match t.find(['{', '[']) {
        Some(p) => Lenient::new(t, p).value(0).unwrap_or(Value::Null),
        None => Value::String(t.to_string()),
    }
}

/// Remove a surrounding Markdown code fence (```json … ```).
fn strip_fence(s: &str) -> &str {
    let t = s.trim();
    let Some(rest) = t.strip_prefix("```") else {
        return t;
    };
    let rest = match rest.find('\n') {
        Some(k) => &rest[k + 1..],
        None => rest.trim_start_matches(|c: char| c.is_ascii_alphabetic()),
    };
    let rest = match rest.rfind("```") {
        Some(k) => &rest[..k],
        None => rest,
    };
    rest.trim()
}

/// Collect actions from a JSON payload value (array, string, id, or `{"action": …}` items).
fn collect(v: &Value, out: &mut Vec<Action>, unk: &mut Unknowns, depth: usize) {
    if depth > MAX_DEPTH {
        return;
    }
    match v {
        Value::String(s) => collect_str(s, out, unk, depth),
        Value::Number(n) => match n.as_i64().and_then(Action::from_id) {
            Some(a) => out.push(a),
            None => unk.push(&n.to_string()),
        },
        Value::Array(xs) => {
            for x in xs {
                collect(x, out, unk, depth + 1);
            }
        }
        Value::Object(m) => match first_key(m, &ITEM_KEYS) {
            Some(inner) => collect(inner, out, unk, depth + 1),
            None => unk.push(&clip(
                &Value::Object(m.clone()).to_string(),
                MAX_UNKNOWN_CHARS,
            )),
        },
        Value::Bool(_) | Value::Null => {}
    }
}

fn collect_str(s: &str, out: &mut Vec<Action>, unk: &mut Unknowns, depth: usize) {
    if let Some(a) = normalize_action(s) {
        out.push(a);
        return;
    }
    let t = strip_fence(s);
    if t.starts_with('[') || t.starts_with('{') {
        let v = parse_args_string(t, 0);
        if !matches!(v, Value::String(_)) {
            collect(&v, out, unk, depth + 1);
            return;
        }
    }
    let (acts, bad) = parse_action_list(t, false, false);
    out.extend(acts);
    for b in bad {
        unk.push(&b);
    }
}

/// Extract actions from a tool-call-like value; `None` when it carries no action payload.
fn extract(v: &Value, name_ok: bool, depth: usize, unk: &mut Unknowns) -> Option<Found> {
    if depth > MAX_DEPTH {
        return None;
    }
    match v {
        Value::Object(m) => extract_object(m, name_ok, depth, unk),
        Value::Array(_) | Value::Number(_) if name_ok => {
            let mut actions = Vec::new();
            collect(v, &mut actions, unk, depth + 1);
            Some(Found {
                actions,
                reasoning: None,
            })
        }
        Value::String(s) if name_ok => {
            let parsed = parse_args_string(s, 0);
            if !matches!(parsed, Value::String(_) | Value::Null) {
                return extract(&parsed, name_ok, depth + 1, unk);
            }
            let mut actions = Vec::new();
            collect_str(s, &mut actions, unk, depth + 1);
            Some(Found {
                actions,
                reasoning: None,
            })
        }
        _ => None,
    }
}

fn extract_object(
    m: &Map<String, Value>,
    name_ok: bool,
    depth: usize,
    unk: &mut Unknowns,
) -> Option<Found> {
    // {"tool_calls": [...]}
    if let Some(Value::Array(calls)) = get_ci(m, "tool_calls") {
        let mut all: Option<Found> = None;
        for c in calls {
            if let Some(f) = extract(c, false, depth + 1, unk) {
                merge(&mut all, f);
            }
        }
        return all;
    }
    // {"type": "function", "function": {...}}
    if let Some(f @ Value::Object(_)) = get_ci(m, "function") {
        return extract(f, name_ok, depth + 1, unk);
    }
    let own_reasoning = reasoning_of(m);
    let name = get_ci(m, "name")
        .or_else(|| get_ci(m, "tool_name"))
        .or_else(|| get_ci(m, "function"))
        .and_then(Value::as_str);
    let args = first_key(m, &ARG_KEYS);
    let mut name_ok = name_ok;
    if name.is_some() || args.is_some() {
        if let Some(n) = name {
            name_ok = tool_name_matches(n);
        }
        if let Some(a) = args {
            let parsed;
            let a = match a {
                Value::String(s) => {
                    parsed = parse_args_string(s, 0);
                    &parsed
                }
                other => other,
            };
            if let Some(mut f) = extract(a, name_ok, depth + 1, unk) {
                f.reasoning = f.reasoning.or(own_reasoning);
                return Some(f);
            }
        }
        if let Some(a) = name.and_then(normalize_action) {
            let reasoning = args
                .and_then(Value::as_object)
                .and_then(reasoning_of)
                .or(own_reasoning);
            return Some(Found {
                actions: vec![a],
                reasoning,
            });
        }
    }
    let payload = first_key(m, &ACTION_KEYS).or_else(|| {
        if !name_ok {
            return None;
        }
        m.iter()
            .find(|(k, _)| {
                let k = k.to_ascii_lowercase();
                k.contains("action") || k.contains("command") || k.contains("move")
            })
            .map(|(_, v)| v)
            .or_else(|| {
                let mut rest = m
                    .iter()
                    .filter(|(k, _)| !REASONING_KEYS.contains(&k.to_ascii_lowercase().as_str()));
                match (rest.next(), rest.next()) {
                    (Some((_, v)), None) => Some(v),
                    _ => None,
                }
            })
    })?;
    let mut actions = Vec::new();
    collect(payload, &mut actions, unk, depth + 1);
    Some(Found {
        actions,
        reasoning: own_reasoning,
    })
}

fn merge(acc: &mut Option<Found>, f: Found) {
    match acc {
        Some(a) => {
            a.actions.extend(f.actions);
            if a.reasoning.is_none() {
                a.reasoning = f.reasoning;
            }
        }
        None => *acc = Some(f),
    }
}

fn stage_tool_calls(reply: &ChatReply, body: &str, unk: &mut Unknowns) -> Option<Hit> {
    let mut all: Option<Found> = None;
    for call in &reply.tool_calls {
        if let Some(f) = from_tool_call(call, unk) {
            merge(&mut all, f);
        }
    }
    let f = all.filter(|f| !f.actions.is_empty())?;
    Some(Hit {
        actions: f.actions,
        source: ParseSource::ToolCall,
        reasoning: f.reasoning,
        preceding: body.trim().to_string(),
    })
}

fn from_tool_call(call: &ToolCall, unk: &mut Unknowns) -> Option<Found> {
    let args = match &call.arguments {
        Value::String(s) => parse_args_string(s, 0),
        other => other.clone(),
    };
    let name_ok = tool_name_matches(&call.name);
    let found = extract(&args, name_ok, 0, unk);
    match found {
        Some(f) if !f.actions.is_empty() => Some(f),
        other => match normalize_action(&call.name) {
            Some(a) => Some(Found {
                actions: vec![a],
                reasoning: args.as_object().and_then(reasoning_of),
            }),
            None => other,
        },
    }
}

fn stage_json_in_text(body: &str, unk: &mut Unknowns) -> Option<Hit> {
    let bytes = body.as_bytes();
    let mut i = 0;
    let mut starts = 0;
    // Candidates that run unclosed to the end are retried from the next bracket, within a
    // work budget so that brace-heavy garbage stays linear.
    let mut budget = 4 * bytes.len() + (1 << 16);
    let mut all: Option<Found> = None;
    let mut first_start: Option<usize> = None;
    while i < bytes.len() && starts < MAX_JSON_STARTS {
        let Some(off) = bytes[i..].iter().position(|&b| b == b'{' || b == b'[') else {
            break;
        };
        let p = i + off;
        starts += 1;
        let mut lex = Lenient::new(body, p);
        let v = lex.value(0);
        let end = lex.i.max(p + 1);
        let mut local = Unknowns::default();
        let found = v.as_ref().and_then(|v| find_payload(v, 0, &mut local));
        if let Some(f) = found {
            unk.extend(local);
            if !f.actions.is_empty() {
                first_start.get_or_insert(p);
                merge(&mut all, f);
            }
            i = end;
        } else if end < bytes.len() {
            // A closed value without a payload (nested ones were searched): skip it.
            i = end;
        } else {
            budget = budget.saturating_sub(end - p);
            if budget == 0 {
                break;
            }
            i = p + 1;
        }
    }
    let f = all?;
    let start = first_start.unwrap_or(0);
    let preceding = body[..start]
        .trim_end()
        .trim_end_matches("<tool_call>")
        .trim_end_matches("```json")
        .trim_end_matches("```");
    Some(Hit {
        actions: f.actions,
        source: ParseSource::ToolJsonInText,
        reasoning: f.reasoning,
        preceding: preceding.to_string(),
    })
}

/// A tool-call-like payload in a JSON value from prose: the value itself, an array of action
/// strings, or the first such payload nested inside it.
fn find_payload(v: &Value, depth: usize, unk: &mut Unknowns) -> Option<Found> {
    if depth > MAX_DEPTH {
        return None;
    }
    match v {
        Value::Object(m) => extract(v, false, depth, unk).or_else(|| {
            m.values()
                .filter(|x| x.is_object() || x.is_array())
                .find_map(|x| find_payload(x, depth + 1, unk))
        }),
        Value::Array(xs) => string_array_actions(xs)
            .map(|actions| Found {
                actions,
                reasoning: None,
            })
            .or_else(|| {
                xs.iter()
                    .filter(|x| x.is_object() || x.is_array())
                    .find_map(|x| find_payload(x, depth + 1, unk))
            }),
        _ => None,
    }
}

/// A JSON array in prose counts only if every element is a string naming an action.
fn string_array_actions(xs: &[Value]) -> Option<Vec<Action>> {
    if xs.is_empty() {
        return None;
    }
    xs.iter()
        .map(|x| x.as_str().and_then(normalize_action))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Lenient JSON reader
// ---------------------------------------------------------------------------------------------

/// A forgiving JSON reader: single quotes, bare words, missing/trailing commas, truncation.
struct Lenient<'a> {
    s: &'a str,
    b: &'a [u8],
    /// Current byte offset; always on a char boundary.
    i: usize,
}

impl<'a> Lenient<'a> {
    fn new(s: &'a str, start: usize) -> Lenient<'a> {
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

    fn value(&mut self, depth: usize) -> Option<Value> {
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
fn unicode_escape(b: &[u8], j: usize) -> (char, usize) {
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

/// Split a list of actions ("a, b then c") and normalise each piece; returns (actions, bad).
/// With `stop_on_bad`, returns as soon as one piece fails.
fn parse_action_list(
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
    let c = c
        .replace("->", ",")
        .replace("=>", ",")
        .replace(['→', '⇒'], ",");
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
fn is_explanation(p: &str) -> bool {
    const STARTS: [&str; 9] = [
        "because", "since", "so", "to", "as", "which", "in", "this", "that",
    ];
    let first = p.split_whitespace().next().unwrap_or("");
    let first = first.trim_matches(|c: char| !c.is_ascii_alphanumeric());
    STARTS.iter().any(|s| first.eq_ignore_ascii_case(s)) && normalize_action(p).is_none()
}

/// Replace short `<tag>`s by commas (`<action>move_left</action>` inside a line).
fn strip_tags(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(k) = rest.find('<') {
        out.push_str(&rest[..k]);
        let after = &rest[k..];
        match after.find('>') {
            Some(e) if e <= 24 && !after[1..e].contains('<') => {
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
    out
}

fn split_words_on_conjunctions(chunk: &str) -> Vec<String> {
    let mut pieces = Vec::new();
    let mut cur: Vec<&str> = Vec::new();
    let mut prev_followed = false;
    for w in chunk.split_whitespace() {
        let lw = w
            .trim_matches(|c: char| !c.is_alphanumeric())
            .to_ascii_lowercase();
        if prev_followed && lw == "by" {
            prev_followed = false;
            continue;
        }
        prev_followed = false;
        if matches!(lw.as_str(), "then" | "and" | "followed" | "afterwards") || w == "&" {
            prev_followed = lw == "followed";
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
fn strip_list_prefix(s: &str) -> &str {
    list_item(s).unwrap_or(s)
}

/// The content after a list marker (`- `, `* `, `• `, `+ `, `1. `, `2) `, `Step 3: `).
fn list_item(line: &str) -> Option<&str> {
    let t = line.trim_start();
    for b in ["- ", "* ", "• ", "+ ", "· ", "– "] {
        if let Some(r) = t.strip_prefix(b) {
            return Some(r);
        }
    }
    let lower = t.to_ascii_lowercase();
    let mut k = 0;
    if lower.starts_with("step ") {
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
fn cut_explanation(p: &str) -> Option<&str> {
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
    let lower = p.to_ascii_lowercase();
    let k = SEPS.iter().filter_map(|s| lower.find(s)).min()?;
    Some(&p[..k])
}

/// The longest normalisable prefix of the first five words.
fn word_prefix(p: &str) -> Option<Action> {
    let words: Vec<&str> = p.split_whitespace().take(5).collect();
    (1..=words.len())
        .rev()
        .find_map(|n| normalize_action(&words[..n].join(" ")))
}

struct Marker {
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
fn find_markers(body: &str) -> Vec<Marker> {
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
            if let Some(m) = label_marker(body, &lower, start, from) {
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
const LABELS: [&str; 6] = ["action", "answer", "move", "command", "decision", "choice"];

/// A label marker at `start` whose keyword ends at `from`, if a colon follows.
fn label_marker(body: &str, lower: &str, start: usize, from: usize) -> Option<Marker> {
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
        next_lines(body, lower, line_end)
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
fn next_lines(body: &str, lower: &str, from: usize) -> (usize, usize) {
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

fn stage_markers(body: &str, multi: bool, unk: &mut Unknowns) -> Option<Hit> {
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

fn stage_lists(body: &str) -> Option<Hit> {
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

fn stage_bare(body: &str) -> Option<Hit> {
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
fn offset_in(body: &str, sub: &str) -> usize {
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
fn stage_mention(body: &str) -> Option<Hit> {
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
    use super::*;
    use serde_json::json;
    use Action::*;

    fn call(name: &str, arguments: Value) -> ToolCall {
        ToolCall {
            id: "call_1".into(),
            name: name.into(),
            arguments,
        }
    }

    fn tool_reply(calls: Vec<ToolCall>) -> ChatReply {
        ChatReply {
            tool_calls: calls,
            ..Default::default()
        }
    }

    fn text_reply(text: &str) -> ChatReply {
        ChatReply {
            text: Some(text.into()),
            ..Default::default()
        }
    }

    fn tool(text: &str) -> Parsed {
        parse_reply(&text_reply(text), Protocol::Tool, 8)
    }

    fn textp(text: &str) -> Parsed {
        parse_reply(&text_reply(text), Protocol::Text, 8)
    }

    fn args(s: &str) -> Parsed {
        parse_reply(
            &tool_reply(vec![call("interact_many", Value::String(s.into()))]),
            Protocol::Tool,
            8,
        )
    }

    // ---- normalize_action ----

    #[test]
    fn normalize_canonical_names() {
        for a in Action::ALL {
            assert_eq!(normalize_action(a.name()), Some(a), "{}", a.name());
        }
    }

    #[test]
    fn normalize_display_names() {
        for a in Action::ALL {
            let d = display_name(a);
            assert_eq!(normalize_action(d), Some(a), "{d}");
            assert_eq!(normalize_action(&d.to_uppercase()), Some(a), "{d}");
            assert_eq!(normalize_action(&d.to_lowercase()), Some(a), "{d}");
        }
    }

    #[test]
    fn normalize_numeric_ids() {
        for a in Action::ALL {
            assert_eq!(normalize_action(&a.id().to_string()), Some(a));
        }
        assert_eq!(normalize_action(" 5 "), Some(Do));
        assert_eq!(normalize_action("\"3\""), Some(MoveUp));
        assert_eq!(normalize_action("[7]"), Some(PlaceStone));
        assert_eq!(normalize_action("action 3"), Some(MoveUp));
        assert_eq!(normalize_action("17"), None);
        assert_eq!(normalize_action("-1"), None);
        assert_eq!(normalize_action("99999999999999999999999"), None);
    }

    #[test]
    fn normalize_case_and_separator_variants() {
        for s in [
            "Move-Left",
            "move left",
            "MOVE_LEFT",
            "MoveLeft",
            "moveLeft",
            "moveleft",
            "  move_left  ",
            "`move_left`",
            "'move_left'",
            "\"move_left\"",
            "**move_left**",
            "move_left.",
            "(move_left)",
            "<move_left>",
            "“move_left”",
            "move__left",
            "move.left",
        ] {
            assert_eq!(normalize_action(s), Some(MoveLeft), "{s}");
        }
        assert_eq!(normalize_action("Make-Wood-Pickaxe"), Some(MakeWoodPickaxe));
        assert_eq!(normalize_action("PlaceTable"), Some(PlaceTable));
        assert_eq!(normalize_action("NOOP"), Some(Noop));
        assert_eq!(normalize_action("noOp"), Some(Noop));
    }

    #[test]
    fn normalize_direction_aliases() {
        let cases = [
            ("left", MoveLeft),
            ("West", MoveLeft),
            ("go west", MoveLeft),
            ("walk left", MoveLeft),
            ("westward", MoveLeft),
            ("right", MoveRight),
            ("east", MoveRight),
            ("Move East", MoveRight),
            ("turn right", MoveRight),
            ("up", MoveUp),
            ("north", MoveUp),
            ("go up", MoveUp),
            ("northwards", MoveUp),
            ("down", MoveDown),
            ("SOUTH", MoveDown),
            ("head south", MoveDown),
            ("face down", MoveDown),
            ("←", MoveLeft),
            ("→", MoveRight),
            ("↑", MoveUp),
            ("↓", MoveDown),
            ("⬅️", MoveLeft),
            ("move one step to the left", MoveLeft),
            ("move to the west", MoveLeft),
            ("step left", MoveLeft),
        ];
        for (s, a) in cases {
            assert_eq!(normalize_action(s), Some(a), "{s}");
        }
    }

    #[test]
    fn normalize_do_sleep_noop_aliases() {
        for s in [
            "interact",
            "collect",
            "attack",
            "use",
            "hit",
            "mine",
            "chop",
            "Interact",
            "do it",
            "collect_wood",
            "collect wood",
            "eat_cow",
            "defeat_zombie",
            "drink water",
            "collect_drink",
            "chop tree",
            "interact with tree",
            "pick up",
            "attack the zombie",
        ] {
            assert_eq!(normalize_action(s), Some(Do), "{s}");
        }
        for s in [
            "wait",
            "nothing",
            "none",
            "no-op",
            "NOP",
            "do nothing",
            "idle",
            "stay",
        ] {
            assert_eq!(normalize_action(s), Some(Noop), "{s}");
        }
        for s in ["rest", "Sleep", "go to sleep", "nap"] {
            assert_eq!(normalize_action(s), Some(Sleep), "{s}");
        }
    }

    #[test]
    fn normalize_place_and_make_aliases() {
        let cases = [
            ("place crafting table", PlaceTable),
            ("build table", PlaceTable),
            ("craft table", PlaceTable),
            ("make a table", PlaceTable),
            ("place workbench", PlaceTable),
            ("put stone", PlaceStone),
            ("place rock", PlaceStone),
            ("build furnace", PlaceFurnace),
            ("make furnace", PlaceFurnace),
            ("plant", PlacePlant),
            ("plant sapling", PlacePlant),
            ("plant a sapling", PlacePlant),
            ("place sapling", PlacePlant),
            ("craft wood pickaxe", MakeWoodPickaxe),
            ("wood pickaxe", MakeWoodPickaxe),
            ("make wooden pickaxe", MakeWoodPickaxe),
            ("craft a wooden pick-axe", MakeWoodPickaxe),
            ("craft_wood_pickaxe", MakeWoodPickaxe),
            ("stone pickaxe", MakeStonePickaxe),
            ("make iron pick", MakeIronPickaxe),
            ("forge iron sword", MakeIronSword),
            ("wooden sword", MakeWoodSword),
            ("Craft Stone Sword", MakeStoneSword),
            ("makeIronSword", MakeIronSword),
        ];
        for (s, a) in cases {
            assert_eq!(normalize_action(s), Some(a), "{s}");
        }
    }

    #[test]
    fn normalize_rejects_ambiguous_and_garbage() {
        for s in [
            "",
            "   ",
            "a",
            "w",
            "s",
            "d",
            "table",
            "stone",
            "wood",
            "pickaxe",
            "move",
            "place",
            "make",
            "go",
            "jump",
            "fly north-east",
            "use table",
            "make stone",
            "craft diamond",
            "left right",
            "wake_up",
            "I will move left",
            "🙂",
            "ⅰⅱ",
            "->",
            "gold pickaxe",
        ] {
            assert_eq!(normalize_action(s), None, "{s:?}");
        }
        let long = "move_left ".repeat(50);
        assert_eq!(normalize_action(&long), None);
    }

    // ---- tool calls ----

    #[test]
    fn tool_call_string_arguments() {
        let r = tool_reply(vec![call(
            "interact_many",
            json!(r#"{"actions": ["move_left", "do"], "reasoning": "tree west"}"#),
        )]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        assert_eq!(p.source, ParseSource::ToolCall);
        assert_eq!(p.reasoning.as_deref(), Some("tree west"));
        assert!(p.unknown.is_empty());
        assert_eq!(p.truncated, 0);
    }

    #[test]
    fn tool_call_object_arguments() {
        let r = tool_reply(vec![call("interact_many", json!({"actions": ["noop"]}))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![Noop]);
        assert_eq!(p.source, ParseSource::ToolCall);
    }

    #[test]
    fn tool_call_fenced_arguments() {
        let p = args("```json\n{\"actions\": [\"move_up\", \"move_up\"]}\n```");
        assert_eq!(p.actions, vec![MoveUp, MoveUp]);
        let p = args("```{\"actions\": [\"sleep\"]}```");
        assert_eq!(p.actions, vec![Sleep]);
    }

    #[test]
    fn tool_call_trailing_commas() {
        let p = args(r#"{"actions": ["move_left", "do",],}"#);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
    }

    #[test]
    fn tool_call_single_quotes() {
        let p = args(r#"{'actions': ['move_right', 'do'], 'reasoning': 'cow east'}"#);
        assert_eq!(p.actions, vec![MoveRight, Do]);
        assert_eq!(p.reasoning.as_deref(), Some("cow east"));
    }

    #[test]
    fn tool_call_truncated_arguments() {
        for s in [
            r#"{"actions": ["move_left", "do"]"#,
            r#"{"actions": ["move_left", "do""#,
            r#"{"actions": ["move_left", "do"#,
            r#"{"actions": ["move_left", "do", "#,
            r#"{"reasoning": "go", "actions": ["move_left", "do"],"#,
        ] {
            let p = args(s);
            assert_eq!(p.actions, vec![MoveLeft, Do], "{s}");
        }
    }

    #[test]
    fn tool_call_unquoted_and_missing_commas() {
        // "move_left do" is one bare word, and not an action.
        let p = args(r#"{actions: [move_left do]}"#);
        assert!(p.actions.is_empty());
        assert_eq!(p.unknown, vec!["move_left do"]);
        let p = args(r#"{actions: [move_left, do]}"#);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        let p = args(r#"{"actions" ["move_left" "do"]}"#);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
    }

    #[test]
    fn tool_call_action_shapes() {
        let cases: Vec<(Value, Vec<Action>)> = vec![
            (json!({"actions": "move_left"}), vec![MoveLeft]),
            (
                json!({"actions": "move_left, move_left, do"}),
                vec![MoveLeft, MoveLeft, Do],
            ),
            (json!({"actions": "move_left then do"}), vec![MoveLeft, Do]),
            (
                json!({"actions": [{"action": "move_left"}, {"action": "do"}]}),
                vec![MoveLeft, Do],
            ),
            (json!({"actions": [{"name": "sleep"}]}), vec![Sleep]),
            (json!({"actions": [1, 5]}), vec![MoveLeft, Do]),
            (
                json!({"actions": ["1", "Move West", "DO"]}),
                vec![MoveLeft, MoveLeft, Do],
            ),
            (json!({"action": "place_table"}), vec![PlaceTable]),
            (json!({"commands": ["move_down"]}), vec![MoveDown]),
            (
                json!({"actions_list": ["make_wood_pickaxe"]}),
                vec![MakeWoodPickaxe],
            ),
            (json!({"Actions": ["noop"]}), vec![Noop]),
            (
                json!({"actions": "[\"move_up\", \"do\"]"}),
                vec![MoveUp, Do],
            ),
            (json!({"actions": [["move_up"], ["do"]]}), vec![MoveUp, Do]),
        ];
        for (v, want) in cases {
            let r = tool_reply(vec![call("interact_many", v.clone())]);
            assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, want, "{v}");
        }
    }

    #[test]
    fn tool_call_unknown_actions_reported() {
        let r = tool_reply(vec![call(
            "interact_many",
            json!({"actions": ["move_left", "jump", "fly", "do", 42]}),
        )]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        assert_eq!(p.unknown, vec!["jump", "fly", "42"]);
    }

    #[test]
    fn tool_call_max_actions_truncates() {
        let r = tool_reply(vec![call(
            "interact_many",
            json!({"actions": vec!["move_left"; 20]}),
        )]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![MoveLeft; 8]);
        assert_eq!(p.truncated, 12);
        let p = parse_reply(&r, Protocol::Tool, 0);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.truncated, 19);
    }

    #[test]
    fn tool_call_multiple_calls_concatenate() {
        let r = tool_reply(vec![
            call(
                "interact_many",
                json!({"actions": ["move_left"], "reasoning": "first"}),
            ),
            call(
                "interact_many",
                json!({"actions": ["do"], "reasoning": "second"}),
            ),
        ]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        assert_eq!(p.reasoning.as_deref(), Some("first"));
        let p = parse_reply(&r, Protocol::Tool, 1);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.truncated, 1);
    }

    #[test]
    fn tool_call_similar_names_and_foreign_calls() {
        for name in [
            "interact",
            "crafter_interact",
            "take_action",
            "functions.interact_many",
        ] {
            let r = tool_reply(vec![call(name, json!({"actions_list": ["do"]}))]);
            assert_eq!(
                parse_reply(&r, Protocol::Tool, 8).actions,
                vec![Do],
                "{name}"
            );
        }
        // Foreign name but an actions argument: accepted.
        let r = tool_reply(vec![call("whatever", json!({"actions": ["sleep"]}))]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Sleep]);
        // Foreign name without actions: ignored.
        let r = tool_reply(vec![call("get_weather", json!({"city": "left"}))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert!(p.actions.is_empty());
        assert_eq!(p.source, ParseSource::None);
        // Our name with an odd key: the single argument is taken.
        let r = tool_reply(vec![call("interact_many", json!({"action_names": ["do"]}))]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Do]);
        let r = tool_reply(vec![call(
            "interact_many",
            json!({"seq": ["do"], "reason": "x"}),
        )]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![Do]);
        assert_eq!(p.reasoning.as_deref(), Some("x"));
    }

    #[test]
    fn tool_call_named_after_action() {
        let r = tool_reply(vec![call("move_left", json!("{}"))]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![MoveLeft]);
        let r = tool_reply(vec![call("Do", json!({"reasoning": "tree"}))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![Do]);
        assert_eq!(p.reasoning.as_deref(), Some("tree"));
    }

    #[test]
    fn tool_call_bare_string_and_array_arguments() {
        let r = tool_reply(vec![call("interact_many", json!("move_left, do"))]);
        assert_eq!(
            parse_reply(&r, Protocol::Tool, 8).actions,
            vec![MoveLeft, Do]
        );
        let r = tool_reply(vec![call("interact_many", json!(["move_up", "do"]))]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![MoveUp, Do]);
        let r = tool_reply(vec![call("interact_many", json!("[\"sleep\"]"))]);
        assert_eq!(parse_reply(&r, Protocol::Tool, 8).actions, vec![Sleep]);
    }

    #[test]
    fn tool_call_double_encoded_and_wrapped() {
        let inner = r#"{"actions": ["do"]}"#;
        let double = serde_json::to_string(inner).unwrap();
        let p = args(&double);
        assert_eq!(p.actions, vec![Do]);
        let p = args(r#"{"name": "interact_many", "arguments": {"actions": ["place_stone"]}}"#);
        assert_eq!(p.actions, vec![PlaceStone]);
    }

    #[test]
    fn tool_call_malformed_falls_back_to_text() {
        let mut r = tool_reply(vec![call("interact_many", json!("{}"))]);
        r.text = Some("I will go west.\nACTION: move_left".into());
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.source, ParseSource::Text);
        assert_eq!(p.reasoning.as_deref(), Some("I will go west."));
    }

    #[test]
    fn tool_call_reasoning_priority() {
        let mut r = tool_reply(vec![call("interact_many", json!({"actions": ["do"]}))]);
        r.text = Some("Collecting wood.".into());
        assert_eq!(
            parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
            Some("Collecting wood.")
        );
        r.reasoning = Some("server thoughts".into());
        assert_eq!(
            parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
            Some("server thoughts")
        );
        r.tool_calls = vec![call(
            "interact_many",
            json!({"actions": ["do"], "reasoning": "arg"}),
        )];
        assert_eq!(
            parse_reply(&r, Protocol::Tool, 8).reasoning.as_deref(),
            Some("arg")
        );
    }

    // ---- JSON in text ----

    #[test]
    fn json_in_text_shapes() {
        let cases = [
            r#"{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}"#,
            r#"{"name": "interact_many", "arguments": "{\"actions\": [\"move_left\", \"do\"]}"}"#,
            r#"{"actions": ["move_left", "do"]}"#,
            "<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"move_left\", \"do\"]}}\n</tool_call>",
            "Let me act.\n```json\n{\"actions\": [\"move_left\", \"do\"]}\n```",
            r#"{"type": "function", "function": {"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}}"#,
            r#"{"tool_calls": [{"function": {"name": "interact_many", "arguments": "{\"actions\": [\"move_left\"]}"}}, {"name": "interact_many", "arguments": {"actions": ["do"]}}]}"#,
            r#"<tool_call>{"name": "interact_many", "arguments": {"actions": ["move_left", "do"#,
            r#"{"name": "interact_many", "parameters": {"actions": ["move_left", "do"]}}"#,
            r#"{"response": {"plan": {"actions": ["move_left", "do"]}}}"#,
            r#"[{"name": "interact_many", "arguments": {"actions": ["move_left", "do"]}}]"#,
            "(see [note) then {'actions': ['move_left', 'do']}",
        ];
        for t in cases {
            let p = tool(t);
            assert_eq!(p.actions, vec![MoveLeft, Do], "{t}");
            assert_eq!(p.source, ParseSource::ToolJsonInText, "{t}");
        }
    }

    #[test]
    fn json_in_text_multiple_qwen_calls_and_reasoning() {
        let t = "There is a tree to the west.\n<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"move_left\"]}}\n</tool_call>\n<tool_call>\n{\"name\": \"interact_many\", \"arguments\": {\"actions\": [\"do\"]}}\n</tool_call>";
        let p = tool(t);
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        assert_eq!(p.reasoning.as_deref(), Some("There is a tree to the west."));
    }

    #[test]
    fn json_in_text_ignores_unrelated_braces() {
        let p = tool("Position: [32, 32], facing {0, 1}. ACTION: move_up");
        assert_eq!(p.actions, vec![MoveUp]);
        assert_eq!(p.source, ParseSource::Text);
        let p = tool("I see [tree, water].\n{\"health\": 9}\nAction: do");
        assert_eq!(p.actions, vec![Do]);
        assert_eq!(p.source, ParseSource::Text);
    }

    #[test]
    fn json_in_text_string_array() {
        let p = tool("Plan: [\"move_left\", \"move_left\", \"do\"]");
        assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
        assert_eq!(p.source, ParseSource::ToolJsonInText);
    }

    #[test]
    fn json_in_text_unknown_reported() {
        let p = tool(r#"{"actions": ["jump"]} ACTION: do"#);
        assert_eq!(p.actions, vec![Do]);
        assert_eq!(p.unknown, vec!["jump"]);
    }

    #[test]
    fn json_in_text_under_text_protocol_one_action() {
        let p = textp(r#"{"actions": ["move_left", "do"]}"#);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.truncated, 1);
        assert_eq!(p.source, ParseSource::ToolJsonInText);
    }

    // ---- text ----

    #[test]
    fn text_action_line_last_wins() {
        let t = "Thinking: ACTION: move_right would hit water.\nSo instead:\nACTION: Move West";
        let p = textp(t);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.source, ParseSource::Text);
        let r = p.reasoning.unwrap();
        assert!(r.ends_with("So instead:"), "{r}");
    }

    #[test]
    fn text_action_line_variants() {
        let cases = [
            ("ACTION: Move West", MoveLeft),
            ("Action: do", Do),
            ("action:noop", Noop),
            ("**Action:** Move North", MoveUp),
            ("**Action**: place_table", PlaceTable),
            ("Final action: sleep", Sleep),
            ("Next Action: Make Wood Pickaxe", MakeWoodPickaxe),
            ("Action:\n\nmove_down", MoveDown),
            ("ACTION: Move West (towards the tree)", MoveLeft),
            ("ACTION: `do` - collect the wood", Do),
            ("Action: Do.", Do),
            ("Answer: Do", Do),
            ("Final answer: Move South", MoveDown),
            ("Next move: east", MoveRight),
            ("Action 2: sleep", Sleep),
            (
                "I think we should go.\n\nAction: move up to reach the tree",
                MoveUp,
            ),
        ];
        for (t, a) in cases {
            assert_eq!(textp(t).actions, vec![a], "{t}");
            assert_eq!(tool(t).actions, vec![a], "{t}");
        }
    }

    #[test]
    fn text_tags() {
        assert_eq!(
            textp("Reasoning.\n<action>move_left</action>").actions,
            vec![MoveLeft]
        );
        assert_eq!(textp("<|ACTION|>Move East<|END|>").actions, vec![MoveRight]);
        assert_eq!(textp("<action>Do</action> because tree").actions, vec![Do]);
        assert_eq!(textp("<ACTION>sleep").actions, vec![Sleep]);
        assert_eq!(
            textp("ACTION: <action>place_stone</action>").actions,
            vec![PlaceStone]
        );
        let p = tool("<action>move_left</action>\n<action>move_left</action>\n<action>do</action>");
        assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
        let p = tool("<actions>move_left, do</actions>");
        assert_eq!(p.actions, vec![MoveLeft, Do]);
    }

    #[test]
    fn text_protocol_single_action_tool_protocol_sequence() {
        let t = "ACTION: move_left, move_left, do";
        let p = textp(t);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.truncated, 2);
        let p = tool(t);
        assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
        assert_eq!(p.truncated, 0);
        let t = "ACTION: move_left\nACTION: move_left\nACTION: do";
        assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
        assert_eq!(textp(t).actions, vec![Do]);
        let t = "Actions: move_left then move_up and do";
        assert_eq!(tool(t).actions, vec![MoveLeft, MoveUp, Do]);
        let t = "ACTIONS: Move West -> Move West -> Do";
        assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
    }

    #[test]
    fn text_markers_on_one_line_split() {
        let t = "Previous action: move_left was blocked. Action: move_up";
        assert_eq!(textp(t).actions, vec![MoveUp]);
        assert_eq!(tool(t).actions, vec![MoveUp]);
        assert_eq!(
            textp("<action>Action: move_left</action>").actions,
            vec![MoveLeft]
        );
        assert_eq!(textp("ACTION: <action>do</action> now").actions, vec![Do]);
    }

    #[test]
    fn text_marker_explanations_not_unknown() {
        let p = tool("ACTION: Move West, because the tree is there");
        assert_eq!(p.actions, vec![MoveLeft]);
        assert!(p.unknown.is_empty(), "{:?}", p.unknown);
        let p = tool("ACTION: move_left. Then do.");
        assert_eq!(p.actions, vec![MoveLeft, Do]);
        let p = textp("Sleep, since it is night");
        assert_eq!(p.actions, vec![Sleep]);
    }

    #[test]
    fn text_action_label_then_list() {
        let t = "Actions:\n1. move_left\n2. move_left\n3. do\n\nThat should reach the tree.";
        let p = tool(t);
        assert_eq!(p.actions, vec![MoveLeft, MoveLeft, Do]);
        assert!(p.unknown.is_empty());
        assert_eq!(textp(t).actions, vec![MoveLeft]);
    }

    #[test]
    fn text_non_adjacent_markers_not_merged() {
        let t = "ACTION: move_right was my first idea.\nBut water is there, so\nACTION: move_left";
        assert_eq!(tool(t).actions, vec![MoveLeft]);
    }

    #[test]
    fn text_marker_without_action_reports_unknown() {
        let p = textp("ACTION: jump over the river");
        assert!(p.actions.is_empty());
        assert_eq!(p.source, ParseSource::None);
        assert_eq!(p.unknown, vec!["jump over the river"]);
        // An earlier valid marker is used when the last is unusable.
        let p = textp("ACTION: do\nACTION: fly");
        assert_eq!(p.actions, vec![Do]);
    }

    #[test]
    fn text_lists() {
        let t = "Plan:\n1. Move West\n2. Move West\n3. Do";
        assert_eq!(tool(t).actions, vec![MoveLeft, MoveLeft, Do]);
        assert_eq!(textp(t).actions, vec![MoveLeft]);
        let t = "My plan:\n- move_up (to the tree)\n- do - collect wood\n\nGood luck!";
        assert_eq!(tool(t).actions, vec![MoveUp, Do]);
        let t = "- Health is fine\n- Trees nearby\nSteps:\n* move_right\n* do";
        let p = tool(t);
        assert_eq!(p.actions, vec![MoveRight, Do]);
        assert_eq!(
            p.reasoning.as_deref(),
            Some("- Health is fine\n- Trees nearby\nSteps:")
        );
        let t = "Step 1: move_down\nStep 2: place_table";
        assert_eq!(tool(t).actions, vec![MoveDown, PlaceTable]);
    }

    #[test]
    fn text_bare() {
        assert_eq!(textp("Move West").actions, vec![MoveLeft]);
        assert_eq!(textp("  do\n").actions, vec![Do]);
        assert_eq!(textp("3").actions, vec![MoveUp]);
        assert_eq!(
            tool("move_left, move_left, do").actions,
            vec![MoveLeft, MoveLeft, Do]
        );
        let p = textp("The tree is west of me, so I go there.\nMove West");
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(
            p.reasoning.as_deref(),
            Some("The tree is west of me, so I go there.")
        );
        assert_eq!(
            textp("Sleep.\nI am tired and it is night.").actions,
            vec![Sleep]
        );
    }

    #[test]
    fn text_mentions_last_resort() {
        let p = textp("I considered move_right but I will choose move_left now.");
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(p.source, ParseSource::Text);
        let p = tool("The best idea is to Place Table here, I think.");
        assert_eq!(p.actions, vec![PlaceTable]);
        let p = tool("I should make wood pickaxe soon");
        assert_eq!(p.actions, vec![MakeWoodPickaxe]);
    }

    #[test]
    fn text_nothing_usable() {
        for t in [
            "",
            "   ",
            "I don't know what to do here.",
            "Hello!",
            "left or right?",
        ] {
            let p = textp(t);
            assert!(p.actions.is_empty(), "{t}");
            assert_eq!(p.source, ParseSource::None, "{t}");
            assert_eq!(p.truncated, 0);
        }
        let p = parse_reply(&ChatReply::default(), Protocol::Tool, 8);
        assert!(p.actions.is_empty());
        assert_eq!(p.source, ParseSource::None);
        assert_eq!(p.reasoning, None);
    }

    #[test]
    fn text_think_block_preferred() {
        let t = "<think>Maybe ACTION: move_right? No, water.</think>\nACTION: move_left";
        let p = textp(t);
        assert_eq!(p.actions, vec![MoveLeft]);
        assert_eq!(
            p.reasoning.as_deref(),
            Some("Maybe ACTION: move_right? No, water.")
        );
        // Only a think block: parse inside it.
        let p = textp("<think>I will go.\nACTION: move_down</think>");
        assert_eq!(p.actions, vec![MoveDown]);
    }

    #[test]
    fn text_protocol_prefers_marker_over_tool_calls() {
        let mut r = text_reply("ACTION: do");
        r.tool_calls = vec![call("interact_many", json!({"actions": ["sleep"]}))];
        let p = parse_reply(&r, Protocol::Text, 8);
        assert_eq!(p.actions, vec![Do]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions, vec![Sleep]);
        assert_eq!(p.source, ParseSource::ToolCall);
        // Under Text a tool call is still a fallback.
        r.text = None;
        let p = parse_reply(&r, Protocol::Text, 8);
        assert_eq!(p.actions, vec![Sleep]);
        assert_eq!(p.source, ParseSource::ToolCall);
    }

    #[test]
    fn server_reasoning_used_for_text() {
        let mut r = text_reply("ACTION: do");
        r.reasoning = Some("  deep thoughts ".into());
        assert_eq!(
            parse_reply(&r, Protocol::Text, 1).reasoning.as_deref(),
            Some("deep thoughts")
        );
        r.text = Some("nothing useful".into());
        let p = parse_reply(&r, Protocol::Text, 1);
        assert_eq!(p.source, ParseSource::None);
        assert_eq!(p.reasoning.as_deref(), Some("deep thoughts"));
    }

    // ---- serialisation and enums ----

    #[test]
    fn parsed_serialises() {
        let p = Parsed {
            actions: vec![MoveLeft, Do],
            reasoning: None,
            source: ParseSource::ToolJsonInText,
            unknown: vec!["jump".into()],
            truncated: 1,
        };
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(
            v,
            json!({"actions": ["move_left", "do"], "reasoning": null,
                   "source": "tool_json_in_text", "unknown": ["jump"], "truncated": 1})
        );
        assert_eq!(
            serde_json::to_value(ParseSource::ToolCall).unwrap(),
            json!("tool_call")
        );
        assert_eq!(
            serde_json::to_value(ParseSource::None).unwrap(),
            json!("none")
        );
    }

    #[test]
    fn protocol_serde_and_clap() {
        use clap::ValueEnum;
        assert_eq!(serde_json::to_value(Protocol::Tool).unwrap(), json!("tool"));
        assert_eq!(
            serde_json::from_value::<Protocol>(json!("text")).unwrap(),
            Protocol::Text
        );
        assert_eq!(Protocol::from_str("tool", true).unwrap(), Protocol::Tool);
        assert_eq!(Protocol::from_str("TEXT", true).unwrap(), Protocol::Text);
        assert_eq!(Protocol::value_variants().len(), 2);
    }

    // ---- lenient reader ----

    #[test]
    fn lenient_reader_basics() {
        let v = |s: &str| Lenient::new(s, 0).value(0).unwrap();
        assert_eq!(
            v(r#"{"a": [1, 2.5, true, null]}"#),
            json!({"a": [1, 2.5, true, null]})
        );
        assert_eq!(v("{'a': 'b'}"), json!({"a": "b"}));
        assert_eq!(v("{a: b c, d: False}"), json!({"a": "b c", "d": false}));
        assert_eq!(
            v(r#"{"a": "x\"y\u00e9\ud83d\ude00\n"}"#),
            json!({"a": "x\"yé😀\n"})
        );
        assert_eq!(v(r#"{"a": ["b""#), json!({"a": ["b"]}));
        assert_eq!(v(r#"{"a": "\ud800"}"#), json!({"a": "\u{FFFD}"}));
        assert_eq!(v(r#"{"a": "\uZZ"}"#), json!({"a": "uZZ"}));
        assert_eq!(v("[1,,2,]"), json!([1, 2]));
        assert_eq!(v("{\"k\": }"), json!({"k": null}));
        assert_eq!(v("[:]"), json!([]));
        assert_eq!(v("{\"a\": \"é\\"), json!({"a": "é"}));
    }

    #[test]
    fn strip_fence_variants() {
        assert_eq!(strip_fence("```json\n{}\n```"), "{}");
        assert_eq!(strip_fence("```\n[1]\n```"), "[1]");
        assert_eq!(strip_fence("```json{\"a\":1}```"), "{\"a\":1}");
        assert_eq!(strip_fence("```json\n{\"a\":1}"), "{\"a\":1}");
        assert_eq!(strip_fence("plain"), "plain");
    }

    // ---- robustness ----

    /// A tiny deterministic generator (xorshift) for property-style tests.
    struct Rng(u64);

    impl Rng {
        fn next(&mut self) -> u64 {
            self.0 ^= self.0 << 13;
            self.0 ^= self.0 >> 7;
            self.0 ^= self.0 << 17;
            self.0
        }

        fn below(&mut self, n: usize) -> usize {
            (self.next() % n as u64) as usize
        }
    }

    const PIECES: [&str; 40] = [
        "{",
        "}",
        "[",
        "]",
        "\"",
        "'",
        ":",
        ",",
        "\\",
        "\\u",
        "\\ud83d",
        "```",
        "```json",
        "\n",
        " ",
        "<action>",
        "</action>",
        "<|ACTION|>",
        "<|END|>",
        "<tool_call>",
        "</tool_call>",
        "<think>",
        "</think>",
        "ACTION:",
        "action",
        "actions",
        "interact_many",
        "move_left",
        "Move West",
        "do",
        "1.",
        "- ",
        "é",
        "😀",
        "\u{0}",
        "\u{feff}",
        "İ",
        "→",
        "then",
        "17",
    ];

    fn random_text(rng: &mut Rng, max_len: usize) -> String {
        let n = rng.below(max_len + 1);
        let mut s = String::new();
        for _ in 0..n {
            match rng.below(3) {
                0 => s.push_str(PIECES[rng.below(PIECES.len())]),
                1 => s.push(char::from_u32(rng.below(0x11_0000) as u32).unwrap_or('x')),
                _ => s.push((b' ' + rng.below(95) as u8) as char),
            }
        }
        s
    }

    fn check_invariants(p: &Parsed, protocol: Protocol, max: usize) {
        let cap = if protocol == Protocol::Text {
            1
        } else {
            max.max(1)
        };
        assert!(p.actions.len() <= cap);
        assert!(p.unknown.len() <= MAX_UNKNOWN);
        assert_eq!(p.actions.is_empty(), p.source == ParseSource::None);
        if p.actions.is_empty() {
            assert_eq!(p.truncated, 0);
        }
    }

    #[test]
    fn never_panics_on_random_text() {
        let mut rng = Rng(0x9E37_79B9_7F4A_7C15);
        for i in 0..3000 {
            let text = random_text(&mut rng, 40);
            for protocol in [Protocol::Tool, Protocol::Text] {
                let max = i % 10;
                let p = parse_reply(&text_reply(&text), protocol, max);
                check_invariants(&p, protocol, max);
            }
            let _ = normalize_action(&text);
        }
    }

    #[test]
    fn never_panics_on_random_tool_arguments() {
        let mut rng = Rng(0xDEAD_BEEF_1234_5678);
        for i in 0..3000 {
            let s = random_text(&mut rng, 30);
            let name = if i % 3 == 0 {
                "interact_many"
            } else {
                PIECES[i % PIECES.len()]
            };
            let mut r = tool_reply(vec![call(name, Value::String(s.clone()))]);
            if i % 2 == 0 {
                r.text = Some(s);
            }
            for protocol in [Protocol::Tool, Protocol::Text] {
                let p = parse_reply(&r, protocol, 8);
                check_invariants(&p, protocol, 8);
            }
        }
    }

    #[test]
    fn never_panics_on_pathological_inputs() {
        let deep_open = "[".repeat(100_000);
        let deep_obj = "{\"actions\":".repeat(10_000);
        let deep_json = format!("{}1{}", "[".repeat(200), "]".repeat(200));
        let many_braces = "{'".repeat(50_000);
        let huge_words = "move_left ".repeat(20_000);
        let huge_unicode = "é😀İ→".repeat(20_000);
        let many_markers = "ACTION: jump\n".repeat(5_000);
        let many_tags = "<action>".repeat(5_000);
        let many_lists = "- move_left\n".repeat(5_000);
        let megabyte = "lorem, ipsum; dolor\n".repeat(50_000);
        let inputs = [
            megabyte,
            deep_open,
            deep_obj,
            deep_json,
            many_braces,
            huge_words,
            huge_unicode,
            many_markers,
            many_tags,
            many_lists,
        ];
        for s in &inputs {
            for protocol in [Protocol::Tool, Protocol::Text] {
                let p = parse_reply(&text_reply(s), protocol, 8);
                check_invariants(&p, protocol, 8);
                let r = tool_reply(vec![call("interact_many", Value::String(s.clone()))]);
                let p = parse_reply(&r, protocol, 8);
                check_invariants(&p, protocol, 8);
            }
            let _ = normalize_action(s);
        }
        // Deep serde_json values as object arguments.
        let mut v = json!(["do"]);
        for _ in 0..120 {
            v = json!({ "actions": v });
        }
        let r = tool_reply(vec![call("interact_many", v)]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        check_invariants(&p, Protocol::Tool, 8);
    }

    #[test]
    fn huge_list_reports_bounded_unknowns() {
        let list: Vec<String> = (0..1000).map(|i| format!("bad{i}")).collect();
        let r = tool_reply(vec![call("interact_many", json!({ "actions": list }))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert!(p.actions.is_empty());
        assert_eq!(p.unknown.len(), MAX_UNKNOWN);
        let long = "x".repeat(10_000);
        let r = tool_reply(vec![call("interact_many", json!({ "actions": [long] }))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert!(p.unknown[0].chars().count() <= MAX_UNKNOWN_CHARS + 1);
        let many = vec!["do"; 100_000];
        let r = tool_reply(vec![call("interact_many", json!({ "actions": many }))]);
        let p = parse_reply(&r, Protocol::Tool, 8);
        assert_eq!(p.actions.len(), 8);
        assert_eq!(p.truncated, 100_000 - 8);
    }
}
