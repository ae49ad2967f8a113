//! Action-name resolution: canonical names, case and separator variants, BALROG display
//! names and the aliases listed in the parent module's documentation.

use super::{display_name, MAX_NORMALIZE_LEN};
use vlm_eval_crafter::rules::Action;

/// Normalise one action string: canonical names, case/space/hyphen/camelCase variants, BALROG
/// display names, unambiguous aliases (see the module table) and numeric ids "0".."16".
pub fn normalize_action(s: &str) -> Option<Action> {
    let t = strip_wrappers(s);
    if t.is_empty() || t.len() > MAX_NORMALIZE_LEN {
        return None;
    }
    // Replies stuck in a loop repeat the same few pieces thousands of times: remember the
    // answers (per thread, a bounded table; the function is pure, so this changes no result).
    thread_local! {
        static SEEN: std::cell::RefCell<std::collections::HashMap<String, Option<Action>>> =
            std::cell::RefCell::new(std::collections::HashMap::new());
    }
    const SEEN_MAX: usize = 4096;
    if let Some(hit) = SEEN.with(|m| m.borrow().get(t).copied()) {
        return hit;
    }
    let a = normalize_stripped(t);
    SEEN.with(|m| {
        let mut m = m.borrow_mut();
        if m.len() >= SEEN_MAX {
            m.clear();
        }
        m.insert(t.to_string(), a);
    });
    a
}

/// [`normalize_action`] of a string already stripped of wrappers (and at most
/// `MAX_NORMALIZE_LEN` bytes).
fn normalize_stripped(t: &str) -> Option<Action> {
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

pub(super) const FILLER: [&str; 21] = [
    "the", "a", "an", "to", "towards", "toward", "one", "1", "single", "step", "steps", "tile",
    "tiles", "square", "once", "please", "action", "actions", "by", "space", "cell",
];

pub(super) fn is_wrapper(c: char) -> bool {
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

pub(super) fn strip_wrappers(s: &str) -> &str {
    s.trim_matches(is_wrapper)
}

/// Lowercase ASCII words, split at non-alphanumerics and lower→upper camelCase boundaries.
pub(super) fn words_of(t: &str) -> Vec<String> {
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
pub(super) fn is_display_key(a: Action, key: &str) -> bool {
    let d = display_name(a);
    d.len() == key.len()
        && d.bytes().zip(key.bytes()).all(|(x, k)| match x {
            b' ' => k == b'_',
            _ => x.to_ascii_lowercase() == k,
        })
}

/// Whether `flat` (lowercase words concatenated) equals `name` without separators.
pub(super) fn is_flat(name: &str, flat: &str) -> bool {
    let mut it = name
        .bytes()
        .filter(|&b| b != b'_' && b != b' ')
        .map(|b| b.to_ascii_lowercase());
    flat.bytes().all(|f| it.next() == Some(f)) && it.next().is_none()
}

pub(super) fn lookup_words(words: &[&str]) -> Option<Action> {
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

pub(super) fn direction(w: &str) -> Option<Action> {
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

pub(super) fn move_combo(words: &[&str]) -> Option<Action> {
    const VERBS: [&str; 8] = ["move", "go", "walk", "step", "head", "run", "turn", "face"];
    match words {
        [d] => direction(d),
        [v, d] if VERBS.contains(v) => direction(d),
        _ => None,
    }
}

pub(super) fn make_combo(words: &[&str]) -> Option<Action> {
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

pub(super) fn place_combo(words: &[&str]) -> Option<Action> {
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

pub(super) fn do_combo(words: &[&str]) -> Option<Action> {
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
