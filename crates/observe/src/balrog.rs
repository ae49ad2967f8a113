//! BALROG's two observation texts for a game state, reproduced byte for byte (our code, checked
//! against BALROG's own wrapper by `tests/it/balrog_parity.rs`).
//!
//! - `long_term_context` (the view): a status line when asleep (it takes precedence) or dead,
//!   followed by three blank lines; then `You see:` with the nearest thing of each kind as its
//!   total step count and one compass word, a blank line, and `You face … at your front.`
//! - `short_term_context` (the status): `Your status:` with the four vitals, a blank line, and
//!   the non-zero inventory or a line saying it is empty.
//!
//! The view is the semantic map sliced as numpy slices it: columns `x-4 ..= x+4` and rows
//! `y-3 ..= y+3` of the default 9×9 view, where a negative start wraps around and so gives an
//! empty slice (the player within 4 tiles of the west edge or 3 of the north edge sees
//! nothing), and an end past the map is cut. Cells are scanned column by column from west to
//! east, each column north to south; a kind is listed where it is first met and keeps the
//! first strictly nearer cell. Every plant is `plant`; facing a cell outside the slice is
//! `nothing`.

use serde::Serialize;

use vlm_eval_crafter::rules::{item, Material, ITEM_MAX, ITEM_NAMES};
use vlm_eval_crafter::world::Kind;
use vlm_eval_crafter::Env;

/// BALROG's observation of one state: the view and the status.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct BalrogObs {
    /// The view (`You see: …`, `You face … at your front.`), after any status line.
    pub long_term_context: String,
    /// Vitals and inventory.
    pub short_term_context: String,
}

impl BalrogObs {
    /// The one-text form used by `--obs-format balrog` outside the balrog layout: the status,
    /// a newline, then the view (the order of BALROG's current observation).
    pub fn joined(&self) -> String {
        format!("{}\n{}", self.short_term_context, self.long_term_context)
    }
}

/// The name of a semantic id as BALROG's wrapper names it (`None` for id 0).
fn item_name(id: u8) -> &'static str {
    match id {
        0 => "None",
        1..=12 => Material::from_id(id).name(),
        13 => Kind::Player.name(),
        14 => Kind::Cow.name(),
        15 => Kind::Zombie.name(),
        16 => Kind::Skeleton.name(),
        17 => Kind::Arrow.name(),
        18 => Kind::Plant.name(),
        _ => "None",
    }
}

/// The index range numpy's `a[start:stop]` selects from an axis of length `n`.
fn py_slice(start: i64, stop: i64, n: i64) -> std::ops::Range<i64> {
    let norm = |v: i64| {
        if v < 0 {
            (v + n).max(0)
        } else {
            v.min(n)
        }
    };
    let (lo, hi) = (norm(start), norm(stop));
    lo..hi.max(lo)
}

/// `7 steps to your north-west`: BALROG's distance (total steps) and compass word.
fn describe_loc(d: [i64; 2]) -> String {
    let mut words = Vec::new();
    if d[1] < 0 {
        words.push("north");
    } else if d[1] > 0 {
        words.push("south");
    }
    if d[0] < 0 {
        words.push("west");
    } else if d[0] > 0 {
        words.push("east");
    }
    let distance = d[0].abs() + d[1].abs();
    format!(
        "{distance} step{} to your {}",
        if distance > 1 { "s" } else { "" },
        words.join("-")
    )
}

fn describe_view(env: &Env) -> String {
    let world = env.world();
    let sem = world.semantic();
    let [w, h] = [world.area[0] as i64, world.area[1] as i64];
    let view = env.config().view;
    let (vx, vy) = (view[0] as i64, view[1] as i64);
    let me = world.player_pos();
    let (px, py) = (me[0] as i64, me[1] as i64);
    let xs = py_slice(px - vx / 2, px + vx / 2 + 1, w);
    let ys = py_slice(py - vy / 2 + 1, py + vy / 2, h);
    let (nx, ny) = (xs.end - xs.start, ys.end - ys.start);
    let at = |i: i64, j: i64| sem[((xs.start + i) * h + ys.start + j) as usize];
    let center = [vx / 2, vy / 2 - 1];
    let f = world.player.facing;
    let target = [center[0] + f[0] as i64, center[1] + f[1] as i64];
    let front = if (0..nx).contains(&target[0]) && (0..ny).contains(&target[1]) {
        item_name(at(target[0], target[1]))
    } else {
        "nothing"
    };
    // Nearest of each kind, in the order first met.
    let mut nearest: Vec<(&'static str, i64, [i64; 2])> = Vec::new();
    for i in 0..nx {
        for j in 0..ny {
            let id = at(i, j);
            if id == Kind::Player.semantic_id() {
                continue;
            }
            let name = item_name(id);
            let d = [i - center[0], j - center[1]];
            let dist = d[0].abs() + d[1].abs();
            match nearest.iter_mut().find(|(n, _, _)| *n == name) {
                Some(entry) if dist < entry.1 => (entry.1, entry.2) = (dist, d),
                Some(_) => {}
                None => nearest.push((name, dist, d)),
            }
        }
    }
    let seen = if nearest.is_empty() {
        "You see nothing away from you.".to_string()
    } else {
        let lines: Vec<String> = nearest
            .iter()
            .map(|(name, _, d)| format!("- {name} {}", describe_loc(*d)))
            .collect();
        format!("You see:\n{}", lines.join("\n"))
    };
    format!("{seen}\n\nYou face {front} at your front.")
}

fn describe_status(env: &Env) -> String {
    let inv = &env.world().player.inventory;
    let vitals: Vec<String> = ITEM_NAMES[..item::SAPLING]
        .iter()
        .zip(inv)
        .map(|(name, v)| format!("- {name}: {v}/{ITEM_MAX}"))
        .collect();
    let items: Vec<String> = ITEM_NAMES
        .iter()
        .zip(inv)
        .skip(item::SAPLING)
        .filter(|(_, &v)| v != 0)
        .map(|(name, v)| format!("- {name}: {v}"))
        .collect();
    let inventory = if items.is_empty() {
        "You have nothing in your inventory.".to_string()
    } else {
        format!("Your inventory:\n{}", items.join("\n"))
    };
    format!("Your status:\n{}\n\n{inventory}", vitals.join("\n"))
}

/// BALROG's observation of the env's current state (what its Crafter wrapper returns after
/// the step that led here).
pub fn balrog_observation(env: &Env) -> BalrogObs {
    let world = env.world();
    let status = if world.player.sleeping {
        "You are sleeping, and will not be able take actions until energy is full.\n\n\n\n"
    } else if world.player.inventory[item::HEALTH] <= 0 {
        "You died.\n\n\n\n"
    } else {
        ""
    };
    BalrogObs {
        long_term_context: format!("{status}{}", describe_view(env)),
        short_term_context: describe_status(env),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numpy_slices() {
        assert_eq!(py_slice(28, 37, 64), 28..37);
        assert_eq!(py_slice(-2, 7, 64), 62..62, "a negative start wraps: empty");
        assert_eq!(py_slice(60, 69, 64), 60..64, "the end is cut");
        assert_eq!(py_slice(0, 9, 64), 0..9);
    }

    #[test]
    fn compass_and_plural() {
        assert_eq!(describe_loc([-3, -4]), "7 steps to your north-west");
        assert_eq!(describe_loc([-1, 0]), "1 step to your west");
        assert_eq!(describe_loc([0, 2]), "2 steps to your south");
        assert_eq!(describe_loc([1, 1]), "2 steps to your south-east");
    }
}
