//! Turning a model's reply into Crafter actions, tolerantly and without ever panicking.
//!
//! The crate reads a [`Reply`] (text, tool calls, separate reasoning) and knows nothing of
//! models, HTTP or prompts: the harness (`vlm_eval::agent::parse` re-exports this crate) and
//! the Python module (`vlmcrafter._native.judge_reply`) both parse through it.
//!
//! Two protocols exist. Under [`Protocol::Tool`] the model is offered the `interact_many`
//! function ([`TOOL_NAME`]; the harness's `agent::tools` builds its schema) and may return up
//! to `max_actions` actions per turn;
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
//! Qwen3.5's XML tool calls in text (`<tool_call><function=NAME><parameter=K>V</parameter>…`,
//! from a server that returns them unparsed) are read first, like tool calls
//! ([`toolxml`]), and count as [`ParseSource::ToolJsonInText`] (`repaired`).
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

mod balrog;
mod bound;
mod lenient;
mod names;
pub mod outcome;
mod reply;
mod text;
mod toolcall;
pub mod toolxml;

use serde::{Serialize, Serializer};
use serde_json::{Map, Value};

pub use balrog::{balrog_action, balrog_completion, py_strip};
pub use bound::{Cut, MAX_ARGS, MAX_CALLS, MAX_TEXT};
pub use names::normalize_action;
pub use outcome::{judge_reply, Judged, Outcome, ParserMode};
pub use reply::{Reply, ReplyBuf, ToolCall};
use text::{stage_bare, stage_lists, stage_markers, stage_mention};
use toolcall::{stage_json_in_text, stage_tool_calls, stage_xml_in_text};
use vlm_eval_crafter::rules::Action;

/// Name of the one function tool offered under [`Protocol::Tool`].
pub const TOOL_NAME: &str = "interact_many";

/// The note vlm-eval prepends to the next observation after a reply with no usable action
/// (for which one `noop` is played).
pub const INVALID_NOTE: &str =
    "Note: your last reply contained no valid action, so `noop` was played.";

/// BALROG display name of an action ("Noop", "Move West", …, "Make Iron Sword").
pub fn display_name(a: Action) -> &'static str {
    a.display_name()
}

/// How the model is asked to act.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
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
    /// What the reply bound cut (text, tool calls, arguments, search work); absent when the
    /// whole reply was read. See [`bound`](self::bound) ([`MAX_TEXT`], [`MAX_CALLS`], [`MAX_ARGS`]).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub cut: Option<Cut>,
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
pub fn parse_reply<'a>(
    reply: impl Into<Reply<'a>>,
    protocol: Protocol,
    max_actions: usize,
) -> Parsed {
    let reply = reply.into();
    let (bounded, cut) = bound::bound_reply(reply);
    let read = bounded.as_ref().map_or(reply, ReplyBuf::as_reply);
    parse_read(read, protocol, max_actions, cut)
}

/// [`parse_reply`] without the reply bound: the whole text and every tool call are read (the
/// search budget still applies). For benchmarks of the stages themselves.
pub fn parse_reply_unbounded<'a>(
    reply: impl Into<Reply<'a>>,
    protocol: Protocol,
    max_actions: usize,
) -> Parsed {
    parse_read(reply.into(), protocol, max_actions, None)
}

/// The parse of a reply as read (after the bound, if any).
fn parse_read(
    reply: Reply<'_>,
    protocol: Protocol,
    max_actions: usize,
    mut cut: Option<Cut>,
) -> Parsed {
    let cap = match protocol {
        Protocol::Tool => max_actions.max(1),
        Protocol::Text => 1,
    };
    let multi = protocol == Protocol::Tool;
    let text = reply.text.unwrap_or("");
    let (think, body) = split_think(text);
    let mut unk = Unknowns::with_fuel(bound::fuel_for(&reply));

    let hit = match protocol {
        Protocol::Tool => stage_tool_calls(&reply, body, &mut unk)
            .or_else(|| stage_xml_in_text(body, &mut unk))
            .or_else(|| stage_json_in_text(body, &mut unk))
            .or_else(|| stage_markers(body, multi, &mut unk))
            .or_else(|| stage_lists(body))
            .or_else(|| stage_bare(body))
            .or_else(|| stage_mention(body)),
        Protocol::Text => stage_markers(body, multi, &mut unk)
            .or_else(|| stage_tool_calls(&reply, body, &mut unk))
            .or_else(|| stage_xml_in_text(body, &mut unk))
            .or_else(|| stage_json_in_text(body, &mut unk))
            .or_else(|| stage_lists(body))
            .or_else(|| stage_bare(body))
            .or_else(|| stage_mention(body)),
    };

    let server_reasoning = non_empty(reply.reasoning);
    let think = non_empty(think);
    if unk.out_of_fuel {
        cut.get_or_insert_with(|| Cut {
            text_bytes: text.len(),
            text_read: text.len(),
            tool_calls: reply.tool_calls.len(),
            tool_calls_read: reply.tool_calls.len(),
            ..Cut::default()
        })
        .search_stopped = true;
    }
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
                unknown: unk.list,
                truncated,
                cut,
            }
        }
        None => Parsed {
            actions: Vec::new(),
            reasoning: server_reasoning.or(think),
            source: ParseSource::None,
            unknown: unk.list,
            truncated: 0,
            cut,
        },
    }
}

/// What one parse carries through its stages: the unknown action strings found, and the
/// work budget of the structured search (see [`bound::fuel_for`]).
#[derive(Default)]
struct Unknowns {
    list: Vec<String>,
    fuel: usize,
    out_of_fuel: bool,
}

impl Unknowns {
    fn with_fuel(fuel: usize) -> Unknowns {
        Unknowns {
            fuel,
            ..Unknowns::default()
        }
    }

    fn push(&mut self, s: &str) {
        if self.full() {
            return;
        }
        let t = s.trim();
        if t.is_empty() {
            return;
        }
        self.list.push(clip(t, MAX_UNKNOWN_CHARS));
    }

    fn full(&self) -> bool {
        self.list.len() >= MAX_UNKNOWN
    }

    /// Spend `work` units of the budget; false (and remembered) once it is gone.
    fn charge(&mut self, work: usize) -> bool {
        match self.fuel.checked_sub(work) {
            Some(left) if !self.out_of_fuel => {
                self.fuel = left;
                true
            }
            _ => {
                self.fuel = 0;
                self.out_of_fuel = true;
                false
            }
        }
    }

    /// A scratch set for a tentative search, with this one's budget.
    fn child(&mut self) -> Unknowns {
        Unknowns {
            list: Vec::new(),
            fuel: std::mem::take(&mut self.fuel),
            out_of_fuel: self.out_of_fuel,
        }
    }

    /// Take back a child's budget, and its unknowns when `keep`.
    fn absorb(&mut self, child: Unknowns, keep: bool) {
        self.fuel = child.fuel;
        self.out_of_fuel |= child.out_of_fuel;
        if keep {
            for s in child.list {
                self.push(&s);
            }
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

#[cfg(test)]
mod tests;
