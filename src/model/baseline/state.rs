//! Reading the `state` observation back into a small model of the view, and simulating the
//! player's own actions on it (moves, digging, placing, crafting) for planning.

use crate::crafter::rules::{
    ach, collect_rule, item, make_rule, place_rule, Action, Collect, Material, Placed,
    ACHIEVEMENT_NAMES, ITEM_MAX, ITEM_NAMES, N_ACHIEVEMENTS,
};

/// What a map cell shows, decoded through the legend.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Tile {
    /// Outside the map we were shown.
    Unknown,
    /// Outside the world.
    Edge,
    Grass,
    Sand,
    Path,
    Water,
    Tree,
    Stone,
    Coal,
    Iron,
    Diamond,
    Lava,
    Table,
    Furnace,
    Me,
    Cow,
    Zombie,
    Skeleton,
    Arrow,
    Sapling,
    RipePlant,
}

impl Tile {
    /// The tile a legend name stands for.
    pub(super) fn from_name(name: &str) -> Tile {
        match name {
            "you" => Tile::Me,
            "grass" => Tile::Grass,
            "sand" => Tile::Sand,
            "path" => Tile::Path,
            "water" => Tile::Water,
            "tree" => Tile::Tree,
            "stone" => Tile::Stone,
            "coal" => Tile::Coal,
            "iron" => Tile::Iron,
            "diamond" => Tile::Diamond,
            "lava" => Tile::Lava,
            "table" => Tile::Table,
            "furnace" => Tile::Furnace,
            "cow" => Tile::Cow,
            "zombie" => Tile::Zombie,
            "skeleton" => Tile::Skeleton,
            "arrow" => Tile::Arrow,
            "sapling" | "plant" => Tile::Sapling,
            "ripe plant" => Tile::RipePlant,
            "out of bounds" | "unknown" => Tile::Edge,
            _ => Tile::Unknown,
        }
    }

    /// The material of a terrain tile (`None` for creatures, the player and unseen cells).
    pub(super) fn material(self) -> Option<Material> {
        Material::ALL
            .into_iter()
            .find(|&m| m != Material::None && Tile::from_material(m) == self)
    }

    /// The tile showing a material.
    pub(super) fn from_material(m: Material) -> Tile {
        Tile::from_name(if m == Material::None {
            "out of bounds"
        } else {
            m.name()
        })
    }

    /// Ground the player may walk onto (lava excluded on purpose).
    pub(super) fn ground(self) -> bool {
        matches!(self, Tile::Grass | Tile::Sand | Tile::Path)
    }

    /// A cell that stops a move for sure (the move only turns the player).
    pub(super) fn solid(self) -> bool {
        matches!(
            self,
            Tile::Edge
                | Tile::Water
                | Tile::Tree
                | Tile::Stone
                | Tile::Coal
                | Tile::Iron
                | Tile::Diamond
                | Tile::Table
                | Tile::Furnace
        )
    }

    /// A creature or plant: it stops a move now but may be gone by then.
    pub(super) fn creature(self) -> bool {
        matches!(
            self,
            Tile::Cow | Tile::Zombie | Tile::Skeleton | Tile::Sapling | Tile::RipePlant
        )
    }

    /// Cells a zombie could walk through (objects count: they may move or die).
    pub(super) fn zombie_passable(self) -> bool {
        self.ground() || self.creature() || matches!(self, Tile::Me | Tile::Arrow)
    }
}

/// The parsed observation, also used as the simulated state while planning.
#[derive(Clone, Debug)]
pub(super) struct Obs {
    /// Env step number.
    pub(super) step: u32,
    /// The player is asleep.
    pub(super) asleep: bool,
    /// It is night.
    pub(super) night: bool,
    /// Facing direction.
    pub(super) facing: [i32; 2],
    /// Inventory in `ITEM_NAMES` order, vitals included.
    pub(super) inv: [i32; 16],
    /// Achievements unlocked this episode.
    pub(super) ach: [bool; N_ACHIEVEMENTS],
    /// Map size (columns, rows).
    pub(super) size: [i32; 2],
    /// Tiles, row-major from the north-west corner.
    pub(super) tiles: Vec<Tile>,
    /// The player's map cell.
    pub(super) me: [i32; 2],
    /// Sapling collection was already tried in this plan.
    pub(super) tried_sapling: bool,
}

/// West, east, north, south (crafter's move order; y grows south).
pub(super) const DIRS: [[i32; 2]; 4] = [[-1, 0], [1, 0], [0, -1], [0, 1]];

/// The move action for a direction.
pub(super) fn move_action(d: [i32; 2]) -> Action {
    match d {
        [-1, 0] => Action::MoveLeft,
        [1, 0] => Action::MoveRight,
        [0, -1] => Action::MoveUp,
        _ => Action::MoveDown,
    }
}

/// Vector sum.
pub(super) fn add(a: [i32; 2], b: [i32; 2]) -> [i32; 2] {
    [a[0] + b[0], a[1] + b[1]]
}

/// The text after `prefix` on the last line of `lines` that starts with it.
fn field<'a>(lines: &[&'a str], prefix: &str) -> Option<&'a str> {
    lines
        .iter()
        .rev()
        .find_map(|l| l.trim_start().strip_prefix(prefix))
        .map(|s| s.trim().trim_end_matches('.'))
}

impl Obs {
    /// Parse the last `state` observation in a text; `None` without a map and legend.
    pub(super) fn parse(text: &str) -> Option<Obs> {
        let all: Vec<&str> = text.lines().collect();
        let map_at = all.iter().rposition(|l| l.starts_with("Map ("))?;
        // The block runs from the last "Step" line before the map to the legend after it.
        let start = all[..map_at]
            .iter()
            .rposition(|l| l.starts_with("Step "))
            .unwrap_or(0);
        let legend_at = map_at
            + all[map_at..]
                .iter()
                .position(|l| l.starts_with("Legend:"))?;
        let lines = &all[start..=legend_at];
        let header = all[map_at];
        let dims = header.strip_prefix("Map (")?.split(',').next()?;
        let (w, h) = dims.split_once('x')?;
        let size = [w.trim().parse::<i32>().ok()?, h.trim().parse::<i32>().ok()?];
        if size[0] <= 0 || size[1] <= 0 || size[0] > 64 || size[1] > 64 {
            return None;
        }
        let rows = all.get(map_at + 1..map_at + 1 + size[1] as usize)?;
        let legend_line = all[legend_at].strip_prefix("Legend:")?;
        let mut legend: Vec<(char, Tile)> = Vec::new();
        for entry in legend_line.trim().trim_end_matches('.').split(", ") {
            let mut chars = entry.chars();
            if let (Some(ch), Some('=')) = (chars.next(), chars.next()) {
                legend.push((ch, Tile::from_name(chars.as_str().trim())));
            }
        }
        let mut tiles = Vec::with_capacity((size[0] * size[1]) as usize);
        let mut me = None;
        for (y, row) in rows.iter().enumerate() {
            let chars: Vec<char> = row.chars().collect();
            for x in 0..size[0] as usize {
                let tile = chars
                    .get(x)
                    .and_then(|c| legend.iter().find(|(l, _)| l == c))
                    .map_or(Tile::Unknown, |(_, t)| *t);
                if tile == Tile::Me {
                    me = Some([x as i32, y as i32]);
                }
                tiles.push(tile);
            }
        }
        let mut obs = Obs {
            step: 0,
            asleep: false,
            night: false,
            facing: [0, 1],
            inv: crate::crafter::rules::INITIAL_INVENTORY,
            ach: [false; N_ACHIEVEMENTS],
            size,
            tiles,
            me: me?,
            tried_sapling: false,
        };
        if let Some(s) = field(lines, "Step ") {
            obs.step = s.parse().unwrap_or(0);
        }
        // "name 3" or "name 3/9" items, comma-separated.
        let mut parse_items = |list: &str| {
            for part in list.split(", ") {
                if let Some((name, value)) = part.trim().split_once(' ') {
                    let value = value.split('/').next().unwrap_or("");
                    if let (Some(i), Ok(v)) = (
                        ITEM_NAMES.iter().position(|n| *n == name.trim()),
                        value.trim().parse(),
                    ) {
                        obs.inv[i] = v;
                    }
                }
            }
        };
        if let Some(v) = field(lines, "Vitals:") {
            parse_items(v);
        }
        if let Some(v) = field(lines, "Inventory:") {
            parse_items(v);
        }
        obs.asleep = field(lines, "Status:").is_some_and(|s| s.starts_with("asleep"));
        obs.night = field(lines, "Time:").is_some_and(|s| s.starts_with("night"));
        if let Some(f) = field(lines, "Facing:") {
            let word = f.split(';').next().unwrap_or("");
            if let Some(k) = ["west", "east", "north", "south"]
                .iter()
                .position(|w| *w == word)
            {
                obs.facing = DIRS[k];
            }
        }
        if let Some(a) = field(lines, "Achievements unlocked") {
            let list = a.split_once(':').map_or("", |(_, l)| l);
            for name in list.split(", ") {
                if let Some(i) = ACHIEVEMENT_NAMES.iter().position(|n| *n == name.trim()) {
                    obs.ach[i] = true;
                }
            }
        }
        Some(obs)
    }

    /// Whether a map cell exists.
    pub(super) fn inside(&self, p: [i32; 2]) -> bool {
        p[0] >= 0 && p[1] >= 0 && p[0] < self.size[0] && p[1] < self.size[1]
    }

    /// The tile at a map cell (`Unknown` off the map).
    pub(super) fn at(&self, p: [i32; 2]) -> Tile {
        if self.inside(p) {
            self.tiles[(p[1] * self.size[0] + p[0]) as usize]
        } else {
            Tile::Unknown
        }
    }

    /// Change a map cell.
    pub(super) fn set(&mut self, p: [i32; 2], t: Tile) {
        if self.inside(p) {
            let i = (p[1] * self.size[0] + p[0]) as usize;
            self.tiles[i] = t;
        }
    }

    /// The cell the player faces.
    pub(super) fn front(&self) -> [i32; 2] {
        add(self.me, self.facing)
    }

    /// Whether the inventory holds this item.
    pub(super) fn has(&self, slot: usize) -> bool {
        self.inv[slot] > 0
    }

    /// Whether this tile shows anywhere on the map.
    pub(super) fn visible(&self, t: Tile) -> bool {
        self.tiles.contains(&t)
    }

    /// Whether `do` breaks this solid tile with the tools at hand (trees always).
    pub(super) fn diggable(&self, t: Tile) -> bool {
        matches!(
            t,
            Tile::Tree | Tile::Stone | Tile::Coal | Tile::Iron | Tile::Diamond
        ) && t
            .material()
            .and_then(collect_rule)
            .is_some_and(|rule| self.diggable_rule(&rule))
    }

    /// Damage of the player's best sword.
    pub(super) fn damage(&self) -> i32 {
        if self.has(item::IRON_SWORD) {
            5
        } else if self.has(item::STONE_SWORD) {
            3
        } else if self.has(item::WOOD_SWORD) {
            2
        } else {
            1
        }
    }

    /// A table (or furnace) within the 3×3 area around a cell.
    pub(super) fn near(&self, p: [i32; 2], t: Tile) -> bool {
        (-1..=1).any(|dx| (-1..=1).any(|dy| self.at(add(p, [dx, dy])) == t))
    }

    /// Apply one action to the simulated state (crafter's rules; a sapling from grass is never
    /// assumed); `false` when a move would be unsafe or lead off the map.
    pub(super) fn apply(&mut self, a: Action) -> bool {
        let front = self.front();
        let t = self.at(front);
        match a {
            Action::MoveLeft | Action::MoveRight | Action::MoveUp | Action::MoveDown => {
                let d = DIRS[a as usize - 1];
                let next = add(self.me, d);
                let t = self.at(next);
                self.facing = d;
                if t.ground() {
                    self.set(self.me, Tile::Path);
                    self.set(next, Tile::Me);
                    self.me = next;
                } else if !(t.solid() || t.creature()) {
                    return false;
                }
            }
            Action::Do => {
                let (slot, gain, achievement, left) = match t {
                    Tile::Cow => (item::FOOD, 6, ach::EAT_COW, Tile::Grass),
                    Tile::RipePlant => (item::FOOD, 4, ach::EAT_PLANT, Tile::Sapling),
                    Tile::Zombie => (item::HEALTH, 0, ach::DEFEAT_ZOMBIE, Tile::Grass),
                    _ => match t.material().and_then(collect_rule) {
                        Some(rule) if rule.probability >= 1.0 && self.diggable_rule(&rule) => (
                            rule.receive,
                            1,
                            rule.achievement,
                            Tile::from_material(rule.leaves),
                        ),
                        _ => return true,
                    },
                };
                self.inv[slot] = (self.inv[slot] + gain).min(ITEM_MAX);
                self.ach[achievement] = true;
                self.set(front, left);
            }
            Action::Sleep => self.asleep = self.inv[item::ENERGY] < ITEM_MAX,
            Action::Noop => {}
            _ => {
                if let Some(rule) = place_rule(a) {
                    let (slot, n) = rule.uses;
                    let allowed = t.material().is_some_and(rule.allowed);
                    if allowed && self.inv[slot] >= n {
                        self.inv[slot] -= n;
                        self.ach[rule.achievement] = true;
                        let placed = match rule.placed {
                            Placed::Material(m) => Tile::from_material(m),
                            Placed::Plant => Tile::Sapling,
                        };
                        self.set(front, placed);
                    }
                } else if let Some(rule) = make_rule(a) {
                    let stations = self.near(self.me, Tile::Table)
                        && (!rule.needs_furnace || self.near(self.me, Tile::Furnace));
                    if stations && rule.uses.iter().all(|&(s, n)| self.inv[s] >= n) {
                        rule.uses.iter().for_each(|&(s, n)| self.inv[s] -= n);
                        self.inv[rule.gives] = (self.inv[rule.gives] + 1).min(ITEM_MAX);
                        self.ach[rule.achievement] = true;
                    }
                }
            }
        }
        true
    }

    /// Whether the tools a collect rule requires are at hand.
    fn diggable_rule(&self, rule: &Collect) -> bool {
        rule.require.is_none_or(|(slot, n)| self.inv[slot] >= n)
    }

    /// Extra path cost per cell: next to a zombie or an arrow, or in a skeleton's line of fire.
    pub(super) fn danger(&self) -> Vec<u32> {
        let mut danger = vec![0; self.tiles.len()];
        let mut bump = |p: [i32; 2], n: u32| {
            if self.inside(p) {
                danger[(p[1] * self.size[0] + p[0]) as usize] += n;
            }
        };
        for y in 0..self.size[1] {
            for x in 0..self.size[0] {
                match self.at([x, y]) {
                    Tile::Zombie => DIRS.iter().for_each(|d| bump(add([x, y], *d), 4)),
                    Tile::Arrow => DIRS.iter().for_each(|d| bump(add([x, y], *d), 3)),
                    Tile::Skeleton => {
                        for d in DIRS {
                            for k in 1..=5 {
                                bump([x + d[0] * k, y + d[1] * k], 3);
                            }
                        }
                    }
                    _ => {}
                }
            }
        }
        danger
    }

    /// No zombie can reach the player: the walkable region around it is sealed inside the map
    /// and holds no monster.
    pub(super) fn sealed(&self) -> bool {
        let mut seen = vec![false; self.tiles.len()];
        let mut stack = vec![self.me];
        seen[(self.me[1] * self.size[0] + self.me[0]) as usize] = true;
        while let Some(p) = stack.pop() {
            let t = self.at(p);
            if matches!(t, Tile::Zombie | Tile::Skeleton | Tile::Arrow) {
                return false;
            }
            for d in DIRS {
                let n = add(p, d);
                if !self.inside(n) {
                    return false;
                }
                let i = (n[1] * self.size[0] + n[0]) as usize;
                if !seen[i] && self.tiles[i].zombie_passable() {
                    seen[i] = true;
                    stack.push(n);
                }
            }
        }
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use crate::model::baseline::SAMPLE_OBS as OBS;

    #[test]
    fn parses_its_own_state_format() {
        let o = Obs::parse(OBS).unwrap();
        assert_eq!(o.step, 5);
        assert_eq!(o.me, [4, 3]);
        assert_eq!(o.at([3, 3]), Tile::Tree);
        assert_eq!(o.at([7, 6]), Tile::Cow);
        assert_eq!(o.inv[item::FOOD], 2);
        assert_eq!(o.inv[item::WOOD], 1);
        assert_eq!(o.inv[item::SAPLING], 2);
        assert_eq!(o.facing, [0, 1]);
        assert!(o.ach[ach::COLLECT_WOOD] && !o.ach[ach::EAT_COW]);
        assert!(Obs::parse("a picture of the game").is_none());
    }

    #[test]
    fn simulates_digging_placing_and_crafting() {
        let text = OBS.replace("wood 1, sapling 2", "wood 3, wood_pickaxe 1");
        let mut o = Obs::parse(&text).unwrap();
        assert!(o.apply(Action::MoveLeft), "turn at the tree");
        assert_eq!(o.me, [4, 3]);
        o.apply(Action::Do);
        assert_eq!((o.at([3, 3]), o.inv[item::WOOD]), (Tile::Grass, 4));
        o.apply(Action::PlaceTable);
        assert_eq!(o.at([3, 3]), Tile::Table);
        o.apply(Action::MakeWoodSword);
        assert_eq!((o.inv[item::WOOD_SWORD], o.inv[item::WOOD]), (1, 1));
        assert!(o.ach[ach::PLACE_TABLE] && o.ach[ach::MAKE_WOOD_SWORD]);
        assert!(o.apply(Action::MoveUp));
        assert_eq!(o.me, [4, 2]);
        o.set([4, 1], Tile::Lava);
        assert!(!o.apply(Action::MoveUp), "never simulated onto lava");
    }

    #[test]
    fn danger_marks_monster_surroundings() {
        let text = OBS
            .replace(".......C.", ".......Z.")
            .replace("C=cow", "Z=zombie");
        let o = Obs::parse(&text).unwrap();
        let d = o.danger();
        let at = |p: [i32; 2]| d[(p[1] * o.size[0] + p[0]) as usize];
        assert!(at([6, 6]) > 0 && at([7, 5]) > 0);
        assert_eq!(at([4, 3]), 0);
    }
}
