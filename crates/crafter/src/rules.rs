//! Crafter's static game data (crafter 1.8.3 `data.yaml`): materials, actions, items,
//! achievements and the collect / place / make recipes.

use std::fmt;

/// A terrain material, with crafter's numeric ids (`World._mat_ids`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Material {
    /// Outside the world (id 0, rendered as `unknown`).
    None = 0,
    Water = 1,
    Grass = 2,
    Stone = 3,
    Path = 4,
    Sand = 5,
    Tree = 6,
    Lava = 7,
    Coal = 8,
    Iron = 9,
    Diamond = 10,
    Table = 11,
    Furnace = 12,
}

impl Material {
    /// All materials in id order.
    pub const ALL: [Material; 13] = [
        Material::None,
        Material::Water,
        Material::Grass,
        Material::Stone,
        Material::Path,
        Material::Sand,
        Material::Tree,
        Material::Lava,
        Material::Coal,
        Material::Iron,
        Material::Diamond,
        Material::Table,
        Material::Furnace,
    ];

    /// The material with this id (unknown ids map to `None`).
    pub fn from_id(id: u8) -> Material {
        Material::ALL
            .get(id as usize)
            .copied()
            .unwrap_or(Material::None)
    }

    /// crafter's name (`unknown` for `None`, which is also its texture name).
    pub fn name(self) -> &'static str {
        match self {
            Material::None => "unknown",
            Material::Water => "water",
            Material::Grass => "grass",
            Material::Stone => "stone",
            Material::Path => "path",
            Material::Sand => "sand",
            Material::Tree => "tree",
            Material::Lava => "lava",
            Material::Coal => "coal",
            Material::Iron => "iron",
            Material::Diamond => "diamond",
            Material::Table => "table",
            Material::Furnace => "furnace",
        }
    }

    /// Walkable for cows, zombies and skeletons (`constants.walkable`).
    pub fn walkable(self) -> bool {
        matches!(self, Material::Grass | Material::Sand | Material::Path)
    }

    /// Walkable for the player (adds lava).
    pub fn player_walkable(self) -> bool {
        self.walkable() || self == Material::Lava
    }

    /// Walkable for arrows (adds water and lava).
    pub fn arrow_walkable(self) -> bool {
        self.walkable() || matches!(self, Material::Water | Material::Lava)
    }
}

/// The 17 actions, with crafter's ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[repr(u8)]
pub enum Action {
    Noop = 0,
    MoveLeft = 1,
    MoveRight = 2,
    MoveUp = 3,
    MoveDown = 4,
    Do = 5,
    Sleep = 6,
    PlaceStone = 7,
    PlaceTable = 8,
    PlaceFurnace = 9,
    PlacePlant = 10,
    MakeWoodPickaxe = 11,
    MakeStonePickaxe = 12,
    MakeIronPickaxe = 13,
    MakeWoodSword = 14,
    MakeStoneSword = 15,
    MakeIronSword = 16,
}

/// Canonical action names, indexed by action id.
pub const ACTION_NAMES: [&str; 17] = [
    "noop",
    "move_left",
    "move_right",
    "move_up",
    "move_down",
    "do",
    "sleep",
    "place_stone",
    "place_table",
    "place_furnace",
    "place_plant",
    "make_wood_pickaxe",
    "make_stone_pickaxe",
    "make_iron_pickaxe",
    "make_wood_sword",
    "make_stone_sword",
    "make_iron_sword",
];

impl Action {
    /// All actions in id order.
    pub const ALL: [Action; 17] = [
        Action::Noop,
        Action::MoveLeft,
        Action::MoveRight,
        Action::MoveUp,
        Action::MoveDown,
        Action::Do,
        Action::Sleep,
        Action::PlaceStone,
        Action::PlaceTable,
        Action::PlaceFurnace,
        Action::PlacePlant,
        Action::MakeWoodPickaxe,
        Action::MakeStonePickaxe,
        Action::MakeIronPickaxe,
        Action::MakeWoodSword,
        Action::MakeStoneSword,
        Action::MakeIronSword,
    ];

    /// The action with this id, if it is one of 0..=16.
    pub fn from_id(id: i64) -> Option<Action> {
        usize::try_from(id)
            .ok()
            .and_then(|i| Action::ALL.get(i).copied())
    }

    /// The action with this canonical name.
    pub fn from_name(name: &str) -> Option<Action> {
        ACTION_NAMES
            .iter()
            .position(|n| *n == name)
            .map(|i| Action::ALL[i])
    }

    /// crafter's canonical name.
    pub fn name(self) -> &'static str {
        ACTION_NAMES[self as usize]
    }

    /// The numeric id (0..=16).
    pub fn id(self) -> u8 {
        self as u8
    }

    /// The display name BALROG and SmartPlay use ("Noop", "Move West", …, "Make Iron Sword").
    pub fn display_name(self) -> &'static str {
        DISPLAY_NAMES[self as usize]
    }
}

/// Display names, indexed by action id: title case, with compass words for moves
/// (`move_left` is "Move West", `move_up` "Move North").
const DISPLAY_NAMES: [&str; 17] = [
    "Noop",
    "Move West",
    "Move East",
    "Move North",
    "Move South",
    "Do",
    "Sleep",
    "Place Stone",
    "Place Table",
    "Place Furnace",
    "Place Plant",
    "Make Wood Pickaxe",
    "Make Stone Pickaxe",
    "Make Iron Pickaxe",
    "Make Wood Sword",
    "Make Stone Sword",
    "Make Iron Sword",
];

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Number of inventory items.
pub const N_ITEMS: usize = 16;

/// Inventory item names in crafter's dict order (also the inventory-view order).
pub const ITEM_NAMES: [&str; N_ITEMS] = [
    "health",
    "food",
    "drink",
    "energy",
    "sapling",
    "wood",
    "stone",
    "coal",
    "iron",
    "diamond",
    "wood_pickaxe",
    "stone_pickaxe",
    "iron_pickaxe",
    "wood_sword",
    "stone_sword",
    "iron_sword",
];

/// Inventory slot indices (into `ITEM_NAMES`).
pub mod item {
    pub const HEALTH: usize = 0;
    pub const FOOD: usize = 1;
    pub const DRINK: usize = 2;
    pub const ENERGY: usize = 3;
    pub const SAPLING: usize = 4;
    pub const WOOD: usize = 5;
    pub const STONE: usize = 6;
    pub const COAL: usize = 7;
    pub const IRON: usize = 8;
    pub const DIAMOND: usize = 9;
    pub const WOOD_PICKAXE: usize = 10;
    pub const STONE_PICKAXE: usize = 11;
    pub const IRON_PICKAXE: usize = 12;
    pub const WOOD_SWORD: usize = 13;
    pub const STONE_SWORD: usize = 14;
    pub const IRON_SWORD: usize = 15;
}

/// Every item's maximum.
pub const ITEM_MAX: i32 = 9;

/// Initial inventory (health, food, drink and energy start at 9).
pub const INITIAL_INVENTORY: [i32; N_ITEMS] = [9, 9, 9, 9, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0];

/// Number of achievements.
pub const N_ACHIEVEMENTS: usize = 22;

/// Achievement names in crafter's order.
pub const ACHIEVEMENT_NAMES: [&str; N_ACHIEVEMENTS] = [
    "collect_coal",
    "collect_diamond",
    "collect_drink",
    "collect_iron",
    "collect_sapling",
    "collect_stone",
    "collect_wood",
    "defeat_skeleton",
    "defeat_zombie",
    "eat_cow",
    "eat_plant",
    "make_iron_pickaxe",
    "make_iron_sword",
    "make_stone_pickaxe",
    "make_stone_sword",
    "make_wood_pickaxe",
    "make_wood_sword",
    "place_furnace",
    "place_plant",
    "place_stone",
    "place_table",
    "wake_up",
];

/// Achievement indices (into `ACHIEVEMENT_NAMES`).
pub mod ach {
    pub const COLLECT_COAL: usize = 0;
    pub const COLLECT_DIAMOND: usize = 1;
    pub const COLLECT_DRINK: usize = 2;
    pub const COLLECT_IRON: usize = 3;
    pub const COLLECT_SAPLING: usize = 4;
    pub const COLLECT_STONE: usize = 5;
    pub const COLLECT_WOOD: usize = 6;
    pub const DEFEAT_SKELETON: usize = 7;
    pub const DEFEAT_ZOMBIE: usize = 8;
    pub const EAT_COW: usize = 9;
    pub const EAT_PLANT: usize = 10;
    pub const MAKE_IRON_PICKAXE: usize = 11;
    pub const MAKE_IRON_SWORD: usize = 12;
    pub const MAKE_STONE_PICKAXE: usize = 13;
    pub const MAKE_STONE_SWORD: usize = 14;
    pub const MAKE_WOOD_PICKAXE: usize = 15;
    pub const MAKE_WOOD_SWORD: usize = 16;
    pub const PLACE_FURNACE: usize = 17;
    pub const PLACE_PLANT: usize = 18;
    pub const PLACE_STONE: usize = 19;
    pub const PLACE_TABLE: usize = 20;
    pub const WAKE_UP: usize = 21;
}

/// What `do` on a material needs and gives.
pub struct Collect {
    /// Required tool (inventory slot, amount).
    pub require: Option<(usize, i32)>,
    /// Item received.
    pub receive: usize,
    /// Achievement credited.
    pub achievement: usize,
    /// Material left behind.
    pub leaves: Material,
    /// Probability of receiving the item.
    pub probability: f64,
}

/// The collect rule for a material, if any.
pub fn collect_rule(m: Material) -> Option<Collect> {
    use item::*;
    let c = |require, receive, achievement, leaves, probability| {
        Some(Collect {
            require,
            receive,
            achievement,
            leaves,
            probability,
        })
    };
    match m {
        Material::Tree => c(None, WOOD, ach::COLLECT_WOOD, Material::Grass, 1.0),
        Material::Stone => c(
            Some((WOOD_PICKAXE, 1)),
            STONE,
            ach::COLLECT_STONE,
            Material::Path,
            1.0,
        ),
        Material::Coal => c(
            Some((WOOD_PICKAXE, 1)),
            COAL,
            ach::COLLECT_COAL,
            Material::Path,
            1.0,
        ),
        Material::Iron => c(
            Some((STONE_PICKAXE, 1)),
            IRON,
            ach::COLLECT_IRON,
            Material::Path,
            1.0,
        ),
        Material::Diamond => c(
            Some((IRON_PICKAXE, 1)),
            DIAMOND,
            ach::COLLECT_DIAMOND,
            Material::Path,
            1.0,
        ),
        Material::Water => c(None, DRINK, ach::COLLECT_DRINK, Material::Water, 1.0),
        Material::Grass => c(None, SAPLING, ach::COLLECT_SAPLING, Material::Grass, 0.1),
        _ => None,
    }
}

/// A `make_*` recipe: uses, whether a furnace is needed (a table always is), result.
pub struct Make {
    /// Items consumed (slot, amount).
    pub uses: &'static [(usize, i32)],
    /// A furnace must be nearby as well as a table.
    pub needs_furnace: bool,
    /// The tool made.
    pub gives: usize,
    /// Achievement credited.
    pub achievement: usize,
}

/// The recipe for a make action.
pub fn make_rule(a: Action) -> Option<Make> {
    use item::*;
    const WOOD1: &[(usize, i32)] = &[(WOOD, 1)];
    const STONE_TOOL: &[(usize, i32)] = &[(WOOD, 1), (STONE, 1)];
    const IRON_TOOL: &[(usize, i32)] = &[(WOOD, 1), (COAL, 1), (IRON, 1)];
    let m = |uses, needs_furnace, gives, achievement| {
        Some(Make {
            uses,
            needs_furnace,
            gives,
            achievement,
        })
    };
    match a {
        Action::MakeWoodPickaxe => m(WOOD1, false, WOOD_PICKAXE, ach::MAKE_WOOD_PICKAXE),
        Action::MakeStonePickaxe => m(STONE_TOOL, false, STONE_PICKAXE, ach::MAKE_STONE_PICKAXE),
        Action::MakeIronPickaxe => m(IRON_TOOL, true, IRON_PICKAXE, ach::MAKE_IRON_PICKAXE),
        Action::MakeWoodSword => m(WOOD1, false, WOOD_SWORD, ach::MAKE_WOOD_SWORD),
        Action::MakeStoneSword => m(STONE_TOOL, false, STONE_SWORD, ach::MAKE_STONE_SWORD),
        Action::MakeIronSword => m(IRON_TOOL, true, IRON_SWORD, ach::MAKE_IRON_SWORD),
        _ => None,
    }
}

/// What a `place_*` action puts down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placed {
    /// A material cell.
    Material(Material),
    /// A new plant object.
    Plant,
}

/// A `place_*` rule: item used, where it may go, what it creates.
pub struct Place {
    /// Item consumed (slot, amount).
    pub uses: (usize, i32),
    /// Allowed target materials.
    pub allowed: fn(Material) -> bool,
    /// What appears.
    pub placed: Placed,
    /// Achievement credited.
    pub achievement: usize,
}

/// The rule for a place action.
pub fn place_rule(a: Action) -> Option<Place> {
    use Material as M;
    fn stone_where(m: Material) -> bool {
        matches!(m, M::Grass | M::Sand | M::Path | M::Water | M::Lava)
    }
    fn ground(m: Material) -> bool {
        matches!(m, M::Grass | M::Sand | M::Path)
    }
    fn grass(m: Material) -> bool {
        m == M::Grass
    }
    let p = |uses, allowed, placed, achievement| {
        Some(Place {
            uses,
            allowed,
            placed,
            achievement,
        })
    };
    match a {
        Action::PlaceStone => p(
            (item::STONE, 1),
            stone_where,
            Placed::Material(M::Stone),
            ach::PLACE_STONE,
        ),
        Action::PlaceTable => p(
            (item::WOOD, 2),
            ground,
            Placed::Material(M::Table),
            ach::PLACE_TABLE,
        ),
        Action::PlaceFurnace => p(
            (item::STONE, 4),
            ground,
            Placed::Material(M::Furnace),
            ach::PLACE_FURNACE,
        ),
        Action::PlacePlant => p((item::SAPLING, 1), grass, Placed::Plant, ach::PLACE_PLANT),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_names_round_trip() {
        for (i, a) in Action::ALL.iter().enumerate() {
            assert_eq!(a.id() as usize, i);
            assert_eq!(Action::from_name(a.name()), Some(*a));
            assert_eq!(Action::from_id(i as i64), Some(*a));
        }
        assert_eq!(Action::from_id(17), None);
        assert_eq!(Action::from_id(-1), None);
        for (i, m) in Material::ALL.iter().enumerate() {
            assert_eq!(*m as usize, i);
            assert_eq!(Material::from_id(i as u8), *m);
        }
    }

    #[test]
    fn recipes_match_data_yaml() {
        assert_eq!(
            place_rule(Action::PlaceTable).unwrap().uses,
            (item::WOOD, 2)
        );
        assert_eq!(
            place_rule(Action::PlaceFurnace).unwrap().uses,
            (item::STONE, 4)
        );
        assert!(make_rule(Action::MakeIronSword).unwrap().needs_furnace);
        assert!(!make_rule(Action::MakeStonePickaxe).unwrap().needs_furnace);
        let grass = collect_rule(Material::Grass).unwrap();
        assert_eq!(grass.probability, 0.1);
        assert_eq!(
            collect_rule(Material::Tree).unwrap().leaves,
            Material::Grass
        );
        assert!(collect_rule(Material::Sand).is_none());
    }
}
