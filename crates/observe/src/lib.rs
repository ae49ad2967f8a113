//! Text observations of a Crafter state, in two formats: what the harness sends models and
//! what the Python env offers in `info`. Reads the game; knows nothing of models.
//!
//! Coordinates follow crafter and the frame: x grows east (right in the frame), y grows south
//! (down in the frame). The local view is the frame's world area: columns `px - 4 ..= px + 4`
//! left to right and rows `py - 3 ..= py + 3` top to bottom for the default 9×9 view.
//!
//! - `state`: compact and self-explanatory; vitals, time of day, position, facing, inventory,
//!   achievements and a north-up character map of the view with a legend of the characters used.
//! - `balrog`: BALROG's language wrapper byte for byte ([`balrog`]): its status
//!   text, a newline, then its view text (the order of BALROG's current observation).

pub mod balrog;

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use vlm_eval_crafter::rules::{item, Material, ACHIEVEMENT_NAMES, ITEM_MAX, ITEM_NAMES};
use vlm_eval_crafter::world::{Kind, Pos, World};
use vlm_eval_crafter::Env;

/// Which text observation to produce.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "clap", derive(clap::ValueEnum))]
#[serde(rename_all = "lowercase")]
pub enum ObsFormat {
    /// Compact state with a north-up character map.
    State,
    /// BALROG's wrapper: status, then nearest things with step counts and compass words.
    Balrog,
}

/// The text observation of the env's current state.
pub fn observe(env: &Env, format: ObsFormat) -> String {
    match format {
        ObsFormat::State => state_text(env),
        ObsFormat::Balrog => balrog::balrog_observation(env).joined(),
    }
}

/// Compass word for a direction vector: `[-1,0]`=>"west", `[1,0]`=>"east", `[0,-1]`=>"north", `[0,1]`=>"south".
pub fn direction_word(d: [i32; 2]) -> &'static str {
    match (d[0].signum(), d[1].signum()) {
        (-1, 0) => "west",
        (1, 0) => "east",
        (0, -1) => "north",
        (0, 1) => "south",
        (-1, -1) => "north-west",
        (1, -1) => "north-east",
        (-1, 1) => "south-west",
        (1, 1) => "south-east",
        _ => "nowhere",
    }
}

/// What one cell of the view shows: the creature if any, else the material.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cell {
    Mat(Material),
    Player,
    Creature(Kind),
    RipePlant,
}

impl Cell {
    /// The map character (see `SYMBOLS`).
    fn symbol(self) -> char {
        SYMBOLS
            .iter()
            .find(|(_, c)| *c == self)
            .map(|(ch, _)| *ch)
            .unwrap_or('?')
    }

    /// The name used in text (`unknown` reads as outside the world).
    fn name(self) -> &'static str {
        match self {
            Cell::Mat(Material::None) => "out of bounds",
            Cell::Mat(m) => m.name(),
            Cell::Player => "you",
            Cell::Creature(Kind::Plant) => "sapling",
            Cell::Creature(k) => k.name(),
            Cell::RipePlant => "ripe plant",
        }
    }
}

/// Map characters in legend order.
const SYMBOLS: [(char, Cell); 20] = [
    ('@', Cell::Player),
    ('.', Cell::Mat(Material::Grass)),
    (':', Cell::Mat(Material::Sand)),
    ('_', Cell::Mat(Material::Path)),
    ('~', Cell::Mat(Material::Water)),
    ('T', Cell::Mat(Material::Tree)),
    ('#', Cell::Mat(Material::Stone)),
    ('c', Cell::Mat(Material::Coal)),
    ('i', Cell::Mat(Material::Iron)),
    ('D', Cell::Mat(Material::Diamond)),
    ('L', Cell::Mat(Material::Lava)),
    ('+', Cell::Mat(Material::Table)),
    ('F', Cell::Mat(Material::Furnace)),
    ('X', Cell::Mat(Material::None)),
    ('C', Cell::Creature(Kind::Cow)),
    ('Z', Cell::Creature(Kind::Zombie)),
    ('S', Cell::Creature(Kind::Skeleton)),
    ('*', Cell::Creature(Kind::Arrow)),
    ('p', Cell::Creature(Kind::Plant)),
    ('P', Cell::RipePlant),
];

/// The cell at a world position.
fn cell_at(world: &World, p: Pos) -> Cell {
    let id = world.object_at(p);
    if id == 0 {
        return Cell::Mat(world.material(p));
    }
    let obj = &world.objects[id as usize];
    match obj.kind {
        Kind::Player => Cell::Player,
        Kind::Plant if obj.ripe() => Cell::RipePlant,
        k => Cell::Creature(k),
    }
}

/// The local view's size (columns, rows) and the player's offset in it.
fn view_geometry(env: &Env) -> ([i32; 2], [i32; 2]) {
    let view = env.config().view;
    let rows = view[1] - ITEM_NAMES.len().div_ceil(view[0]);
    let size = [view[0] as i32, rows as i32];
    (size, [size[0] / 2, size[1] / 2])
}

/// Every view cell as (offset from the player, cell), rows north to south, west to east.
fn view_cells(env: &Env) -> Vec<(Pos, Cell)> {
    let (size, half) = view_geometry(env);
    let world = env.world();
    let me = world.player_pos();
    let mut cells = Vec::with_capacity((size[0] * size[1]) as usize);
    for gy in 0..size[1] {
        for gx in 0..size[0] {
            let d = [gx - half[0], gy - half[1]];
            cells.push((d, cell_at(world, [me[0] + d[0], me[1] + d[1]])));
        }
    }
    cells
}

/// Day, dusk or night from daylight and the point of the 300-step cycle.
fn time_word(env: &Env) -> &'static str {
    let light = env.world().daylight;
    let phase = env.step_count() % 300;
    if light < 0.5 {
        "night"
    } else if (60..210).contains(&phase) && light < 0.8 {
        "dusk"
    } else {
        "day"
    }
}

/// What the player faces, as text.
fn facing_text(world: &World) -> (&'static str, &'static str) {
    let me = world.player_pos();
    let f = world.player.facing;
    let front = cell_at(world, [me[0] + f[0], me[1] + f[1]]);
    (direction_word(f), front.name())
}

/// Non-vital inventory items as `name count` pairs.
fn items(world: &World) -> Vec<(&'static str, i32)> {
    let inv = &world.player.inventory;
    (item::SAPLING..ITEM_NAMES.len())
        .filter(|&i| inv[i] > 0)
        .map(|i| (ITEM_NAMES[i], inv[i]))
        .collect()
}

fn state_text(env: &Env) -> String {
    let world = env.world();
    let p = &world.player;
    let inv = &p.inventory;
    let mut s = String::new();
    let _ = writeln!(s, "Step {}.", env.step_count());
    let _ = writeln!(
        s,
        "Vitals: health {}/{m}, food {}/{m}, drink {}/{m}, energy {}/{m}.",
        inv[item::HEALTH],
        inv[item::FOOD],
        inv[item::DRINK],
        inv[item::ENERGY],
        m = ITEM_MAX
    );
    if inv[item::HEALTH] <= 0 {
        s.push_str("Status: dead.\n");
    } else if p.sleeping {
        s.push_str("Status: asleep (actions are ignored until energy is full or you are hurt).\n");
    }
    let _ = writeln!(
        s,
        "Time: {} (daylight {:.0}%).",
        time_word(env),
        world.daylight * 100.0
    );
    let me = world.player_pos();
    let _ = writeln!(
        s,
        "Position: ({}, {}) (x grows east, y grows south).",
        me[0], me[1]
    );
    let (dir, front) = facing_text(world);
    let _ = writeln!(s, "Facing: {dir}; in front of you: {front}.");
    let list = items(world);
    if list.is_empty() {
        s.push_str("Inventory: empty.\n");
    } else {
        let parts: Vec<String> = list.iter().map(|(n, c)| format!("{n} {c}")).collect();
        let _ = writeln!(s, "Inventory: {}.", parts.join(", "));
    }
    let unlocked: Vec<&str> = env
        .unlocked()
        .iter()
        .enumerate()
        .filter(|(_, &u)| u)
        .map(|(i, _)| ACHIEVEMENT_NAMES[i])
        .collect();
    let _ = writeln!(
        s,
        "Achievements unlocked ({}/{}): {}.",
        unlocked.len(),
        ACHIEVEMENT_NAMES.len(),
        if unlocked.is_empty() {
            "none".to_string()
        } else {
            unlocked.join(", ")
        }
    );
    let (size, _) = view_geometry(env);
    let _ = writeln!(
        s,
        "Map ({}x{}, north at top, west at left; you are @ at the centre):",
        size[0], size[1]
    );
    let cells = view_cells(env);
    let mut used = [false; SYMBOLS.len()];
    for row in cells.chunks(size[0] as usize) {
        for (_, cell) in row {
            let ch = cell.symbol();
            if let Some(k) = SYMBOLS.iter().position(|(c, _)| *c == ch) {
                used[k] = true;
            }
            s.push(ch);
        }
        s.push('\n');
    }
    let legend: Vec<String> = SYMBOLS
        .iter()
        .zip(used)
        .filter(|(_, u)| *u)
        .map(|((ch, cell), _)| format!("{ch}={}", cell.name()))
        .collect();
    let _ = write!(s, "Legend: {}.", legend.join(", "));
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use vlm_eval_crafter::world::{Object, DIRS};
    use vlm_eval_crafter::{EnvConfig, TextureSet};

    fn env(seed: i64) -> Env {
        let cfg = EnvConfig {
            seed,
            ..EnvConfig::default()
        };
        let mut env = Env::new(cfg, &TextureSet::builtin()).unwrap();
        env.reset();
        env
    }

    /// The map rows of a `state` observation.
    fn map_rows(text: &str) -> Vec<Vec<char>> {
        let lines: Vec<&str> = text.lines().collect();
        let start = lines.iter().position(|l| l.starts_with("Map (")).unwrap() + 1;
        lines[start..start + 7]
            .iter()
            .map(|l| l.chars().collect())
            .collect()
    }

    /// Clear the player's neighbourhood to grass, put a tree west and a cow north.
    fn tree_west_cow_north(env: &mut Env) -> Pos {
        let world = env.world_mut();
        let me = world.player_pos();
        for dx in -2..=2 {
            for dy in -2..=2 {
                let p = [me[0] + dx, me[1] + dy];
                let id = world.object_at(p);
                if id > 1 {
                    world.remove(id);
                }
                world.set_material(p, Material::Grass);
            }
        }
        world.set_material([me[0] - 1, me[1]], Material::Tree);
        world.add(Object::new(Kind::Cow, [me[0], me[1] - 2]));
        world.player.facing = [-1, 0];
        me
    }

    #[test]
    fn direction_words_follow_the_frame() {
        assert_eq!(direction_word([-1, 0]), "west");
        assert_eq!(direction_word([1, 0]), "east");
        assert_eq!(direction_word([0, -1]), "north");
        assert_eq!(direction_word([0, 1]), "south");
        assert_eq!(direction_word([0, 0]), "nowhere");
        assert_eq!(direction_word([-2, 3]), "south-west");
    }

    #[test]
    fn state_map_is_north_up_with_west_at_left() {
        let mut env = env(3);
        tree_west_cow_north(&mut env);
        let text = observe(&env, ObsFormat::State);
        let rows = map_rows(&text);
        assert_eq!(rows[3][4], '@');
        assert_eq!(rows[3][3], 'T', "tree directly west of @:\n{text}");
        assert_eq!(rows[1][4], 'C', "cow two cells north of @:\n{text}");
        assert!(text.contains("Facing: west; in front of you: tree."));
        assert!(text.contains("Map (9x7, north at top, west at left; you are @ at the centre):"));
        assert!(text.contains("T=tree") && text.contains("C=cow") && text.contains("@=you"));
    }

    #[test]
    fn state_map_matches_world_cell_by_cell() {
        for seed in [0, 1, 7] {
            let mut env = env(seed);
            for a in [1, 1, 3, 3, 3, 2, 4, 5] {
                env.step_id(a).unwrap();
            }
            let text = observe(&env, ObsFormat::State);
            let rows = map_rows(&text);
            let world = env.world();
            let me = world.player_pos();
            let mut checked = 0;
            for (gy, row) in rows.iter().enumerate() {
                assert_eq!(row.len(), 9);
                for (gx, &ch) in row.iter().enumerate() {
                    let p = [me[0] + gx as i32 - 4, me[1] + gy as i32 - 3];
                    let expect = cell_at(world, p);
                    let (_, cell) = SYMBOLS.iter().find(|(c, _)| *c == ch).unwrap();
                    assert_eq!(*cell, expect, "seed {seed} cell {p:?}");
                    if world.object_at(p) == 0 {
                        assert_eq!(*cell, Cell::Mat(world.material(p)));
                    }
                    checked += 1;
                }
            }
            assert_eq!(checked, 63);
            // The legend lists exactly the characters that appear.
            let legend = text.lines().last().unwrap();
            for (ch, _) in SYMBOLS {
                let shown = rows.iter().flatten().any(|&c| c == ch);
                assert_eq!(
                    legend.contains(&format!(" {ch}=")),
                    shown,
                    "{ch} in {legend}"
                );
            }
        }
    }

    #[test]
    fn out_of_world_cells_are_marked() {
        let mut env = env(0);
        let world = env.world_mut();
        let id = 1;
        let p = world.player_pos();
        let corner = [0, 1];
        let other = world.object_at(corner);
        if other > 1 {
            world.remove(other);
        }
        world.set_material(corner, Material::Grass);
        world.relocate(id, corner);
        assert_ne!(p, corner);
        let text = observe(&env, ObsFormat::State);
        let rows = map_rows(&text);
        assert_eq!(rows[0][0], 'X');
        assert_eq!(rows[3][3], 'X');
        assert_eq!(rows[1][4], 'X', "y = -1 is outside");
        assert_ne!(rows[2][4], 'X', "y = 0 is inside");
        assert_eq!(rows[3][4], '@');
        assert!(text.contains("X=out of bounds"));
        assert!(text.contains("Position: (0, 1)"));
    }

    #[test]
    fn balrog_reports_steps_and_compass_words() {
        let mut env = env(3);
        tree_west_cow_north(&mut env);
        let text = observe(&env, ObsFormat::Balrog);
        assert!(text.starts_with("Your status:\n- health: 9/9\n"), "{text}");
        assert!(
            text.contains("\nYou have nothing in your inventory.\nYou see:\n"),
            "{text}"
        );
        assert!(text.contains("- tree 1 step to your west\n"), "{text}");
        assert!(text.contains("- cow 2 steps to your north\n"), "{text}");
        assert!(text.ends_with("\n\nYou face tree at your front."), "{text}");
    }

    #[test]
    fn inventory_sleep_and_achievements_are_reported() {
        let mut env = env(0);
        {
            let world = env.world_mut();
            world.player.inventory[item::WOOD] = 3;
            world.player.inventory[item::ENERGY] = 4;
            world.player.inventory[item::WOOD_PICKAXE] = 1;
        }
        env.step(vlm_eval_crafter::Action::Sleep);
        let state = observe(&env, ObsFormat::State);
        assert!(
            state.contains("Inventory: wood 3, wood_pickaxe 1."),
            "{state}"
        );
        assert!(state.contains("Status: asleep"));
        assert!(state.contains("energy 4/9"));
        assert!(state.contains("Achievements unlocked (0/22): none."));
        let balrog = observe(&env, ObsFormat::Balrog);
        assert!(balrog.contains("\nYou are sleeping, and will not be able take actions until energy is full.\n\n\n\nYou see:"), "{balrog}");
        assert!(
            balrog.contains("Your inventory:\n- wood: 3\n- wood_pickaxe: 1\n"),
            "{balrog}"
        );
        // Unlock one achievement and see it listed.
        let mut env = self::env(0);
        let me = tree_west_cow_north(&mut env);
        assert_eq!(env.world().material([me[0] - 1, me[1]]), Material::Tree);
        env.step(vlm_eval_crafter::Action::Do);
        let state = observe(&env, ObsFormat::State);
        assert!(
            state.contains("Achievements unlocked (1/22): collect_wood."),
            "{state}"
        );
        assert!(DIRS.contains(&env.world().player.facing));
    }

    #[test]
    fn time_of_day_words() {
        let mut env = env(0);
        assert!(observe(&env, ObsFormat::State).contains("Time: day"));
        for _ in 0..130 {
            env.step(vlm_eval_crafter::Action::Noop);
        }
        assert!(observe(&env, ObsFormat::State).contains("Time: dusk"));
        for _ in 0..50 {
            env.step(vlm_eval_crafter::Action::Noop);
        }
        assert!(observe(&env, ObsFormat::State).contains("Time: night"));
    }
}
