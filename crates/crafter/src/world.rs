//! The world state: material map, object map, objects with stable ids, chunk bookkeeping
//! and the game RNG (crafter's `engine.World`).

use super::rng::RandomState;
use super::rules::{item, Action, Material, INITIAL_INVENTORY, N_ACHIEVEMENTS, N_ITEMS};

/// The player's object id.
pub const PLAYER: u32 = 1;

/// The player's state beyond its object (crafter's `Player` attributes).
#[derive(Clone, Debug)]
pub struct PlayerState {
    /// Facing direction.
    pub facing: Pos,
    /// Asleep.
    pub sleeping: bool,
    /// Inventory in `ITEM_NAMES` order (slot 0 is health).
    pub inventory: [i32; N_ITEMS],
    /// Achievement counts in `ACHIEVEMENT_NAMES` order.
    pub achievements: [u32; N_ACHIEVEMENTS],
    /// Hunger counter.
    pub hunger: f64,
    /// Thirst counter.
    pub thirst: f64,
    /// Fatigue counter.
    pub fatigue: f64,
    /// Recovery counter.
    pub recover: f64,
    /// Health at the end of the previous update (for waking when hurt).
    pub last_health: i32,
    /// The action for the current step.
    pub action: Action,
}

impl Default for PlayerState {
    fn default() -> Self {
        PlayerState {
            facing: [0, 1],
            sleeping: false,
            inventory: INITIAL_INVENTORY,
            achievements: [0; N_ACHIEVEMENTS],
            hunger: 0.0,
            thirst: 0.0,
            fatigue: 0.0,
            recover: 0.0,
            last_health: 9,
            action: Action::Noop,
        }
    }
}

/// Side of a balancing chunk in tiles.
pub const CHUNK: i32 = 12;

/// What kind of object an id holds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    Player,
    Cow,
    Zombie,
    Skeleton,
    Arrow,
    Plant,
}

impl Kind {
    /// Lower-case class name as in crafter traces (`type(obj).__name__.lower()`).
    pub fn name(self) -> &'static str {
        match self {
            Kind::Player => "player",
            Kind::Cow => "cow",
            Kind::Zombie => "zombie",
            Kind::Skeleton => "skeleton",
            Kind::Arrow => "arrow",
            Kind::Plant => "plant",
        }
    }

    /// Id in the semantic view (materials use 1..=12).
    pub fn semantic_id(self) -> u8 {
        match self {
            Kind::Player => 13,
            Kind::Cow => 14,
            Kind::Zombie => 15,
            Kind::Skeleton => 16,
            Kind::Arrow => 17,
            Kind::Plant => 18,
        }
    }
}

/// A position or direction in tiles.
pub type Pos = [i32; 2];

/// One object. Kind-specific counters live in `counter` (zombie cooldown, skeleton reload,
/// plant grown) and `facing` (arrows; the player's facing lives in its state).
#[derive(Clone, Debug)]
pub struct Object {
    /// Class.
    pub kind: Kind,
    /// Tile position.
    pub pos: Pos,
    /// Health (clamped at 0 on every write; the player's health is its inventory slot).
    pub health: i32,
    /// Zombie cooldown, skeleton reload or plant growth.
    pub counter: i32,
    /// Arrow direction.
    pub facing: Pos,
    /// Removed from the world (its update may still finish, as in crafter).
    pub removed: bool,
}

impl Object {
    /// A fresh object with crafter's initial health for its kind.
    pub fn new(kind: Kind, pos: Pos) -> Object {
        let health = match kind {
            Kind::Player => 9,
            Kind::Cow | Kind::Skeleton => 3,
            Kind::Zombie => 5,
            Kind::Arrow => 0,
            Kind::Plant => 1,
        };
        Object {
            kind,
            pos,
            health,
            counter: 0,
            facing: [0, 0],
            removed: false,
        }
    }

    /// A plant is ripe after more than 300 updates.
    pub fn ripe(&self) -> bool {
        self.kind == Kind::Plant && self.counter > 300
    }
}

/// The world grid, objects and RNG.
#[derive(Clone)]
pub struct World {
    /// Area (width, height) in tiles.
    pub area: [i32; 2],
    /// Material ids, [x][y] order (`x * height + y`).
    pub mat: Vec<u8>,
    /// Object ids per cell (0 = empty), [x][y] order.
    pub obj_map: Vec<u32>,
    /// Objects by id; index 0 is a placeholder; removed objects stay with `removed = true`.
    pub objects: Vec<Object>,
    /// Ids of live objects, ascending.
    pub live: Vec<u32>,
    /// Chunk indices in the order their keys were created.
    pub chunk_order: Vec<u32>,
    chunk_seen: Vec<bool>,
    chunks_y: i32,
    /// The player's state (its object is id 1).
    pub player: PlayerState,
    /// The single game RNG.
    pub rng: RandomState,
    /// Current daylight in [0, 1].
    pub daylight: f64,
}

impl World {
    /// An empty world of the given area seeded with `seed`.
    pub fn new(area: [i32; 2], seed: u32) -> World {
        let cells = (area[0] * area[1]) as usize;
        let chunks_x = (area[0] + CHUNK - 1) / CHUNK;
        let chunks_y = (area[1] + CHUNK - 1) / CHUNK;
        World {
            area,
            mat: vec![0; cells],
            obj_map: vec![0; cells],
            objects: vec![Object::new(Kind::Arrow, [0, 0])],
            live: Vec::new(),
            chunk_order: Vec::new(),
            chunk_seen: vec![false; (chunks_x * chunks_y) as usize],
            chunks_y,
            player: PlayerState::default(),
            rng: RandomState::new(seed),
            daylight: 0.0,
        }
    }

    /// Whether a position lies inside the area.
    #[inline]
    pub fn inside(&self, p: Pos) -> bool {
        p[0] >= 0 && p[1] >= 0 && p[0] < self.area[0] && p[1] < self.area[1]
    }

    #[inline]
    fn idx(&self, p: Pos) -> usize {
        (p[0] * self.area[1] + p[1]) as usize
    }

    /// Material at a position (`None` outside).
    #[inline]
    pub fn material(&self, p: Pos) -> Material {
        if self.inside(p) {
            Material::from_id(self.mat[self.idx(p)])
        } else {
            Material::None
        }
    }

    /// Object id at a position (0 when empty or outside).
    #[inline]
    pub fn object_at(&self, p: Pos) -> u32 {
        if self.inside(p) {
            self.obj_map[self.idx(p)]
        } else {
            0
        }
    }

    /// Set the material of an in-area cell.
    #[inline]
    pub fn set_material(&mut self, p: Pos, m: Material) {
        let i = self.idx(p);
        self.mat[i] = m as u8;
    }

    /// `is_free`: no object and a material accepted by `walkable`.
    #[inline]
    pub fn is_free(&self, p: Pos, walkable: fn(Material) -> bool) -> bool {
        self.object_at(p) == 0 && self.inside(p) && walkable(self.material(p))
    }

    fn chunk_index(&self, p: Pos) -> usize {
        ((p[0] / CHUNK) * self.chunks_y + p[1] / CHUNK) as usize
    }

    fn touch_chunk(&mut self, p: Pos) {
        let c = self.chunk_index(p);
        if !self.chunk_seen[c] {
            self.chunk_seen[c] = true;
            self.chunk_order.push(c as u32);
        }
    }

    /// The chunk bounds (xmin, xmax, ymin, ymax) of a chunk index.
    pub fn chunk_bounds(&self, c: u32) -> [i32; 4] {
        let cx = c as i32 / self.chunks_y;
        let cy = c as i32 % self.chunks_y;
        let (xmin, ymin) = (cx * CHUNK, cy * CHUNK);
        [
            xmin,
            (xmin + CHUNK).min(self.area[0]),
            ymin,
            (ymin + CHUNK).min(self.area[1]),
        ]
    }

    /// Number of chunk slots (for per-chunk buffers).
    pub fn chunk_slots(&self) -> usize {
        self.chunk_seen.len()
    }

    /// Chunk index of a position.
    pub fn chunk_of(&self, p: Pos) -> u32 {
        self.chunk_index(p) as u32
    }

    /// Add an object (its cell must be empty); returns its id.
    pub fn add(&mut self, obj: Object) -> u32 {
        let id = self.objects.len() as u32;
        let i = self.idx(obj.pos);
        debug_assert_eq!(self.obj_map[i], 0);
        self.obj_map[i] = id;
        self.touch_chunk(obj.pos);
        self.objects.push(obj);
        self.live.push(id);
        id
    }

    /// Remove an object (no-op when already removed).
    pub fn remove(&mut self, id: u32) {
        if self.objects[id as usize].removed {
            return;
        }
        self.objects[id as usize].removed = true;
        let i = self.idx(self.objects[id as usize].pos);
        self.obj_map[i] = 0;
        if let Ok(k) = self.live.binary_search(&id) {
            self.live.remove(k);
        }
    }

    /// Relocate an object to a free cell (no-op for removed objects).
    pub fn relocate(&mut self, id: u32, to: Pos) {
        let from = self.objects[id as usize].pos;
        if self.objects[id as usize].removed {
            return;
        }
        let (a, b) = (self.idx(from), self.idx(to));
        self.obj_map[b] = id;
        self.obj_map[a] = 0;
        self.touch_chunk(to);
        self.objects[id as usize].pos = to;
    }

    /// crafter's `Object.move`: relocate if the target is free; returns whether it was free
    /// (true even for a removed object, which does not move).
    pub fn try_move(&mut self, id: u32, dir: Pos, walkable: fn(Material) -> bool) -> bool {
        let p = self.objects[id as usize].pos;
        let target = [p[0] + dir[0], p[1] + dir[1]];
        if self.is_free(target, walkable) {
            self.relocate(id, target);
            true
        } else {
            false
        }
    }

    /// Health of an object (the player's is its inventory slot).
    #[inline]
    pub fn health(&self, id: u32) -> i32 {
        if id == PLAYER {
            self.player.inventory[item::HEALTH]
        } else {
            self.objects[id as usize].health
        }
    }

    /// Set health, clamped at 0 like crafter's setter.
    #[inline]
    pub fn set_health(&mut self, id: u32, value: i32) {
        if id == PLAYER {
            self.player.inventory[item::HEALTH] = value.max(0);
        } else {
            self.objects[id as usize].health = value.max(0);
        }
    }

    /// The player's position.
    #[inline]
    pub fn player_pos(&self) -> Pos {
        self.objects[PLAYER as usize].pos
    }

    /// Number of cells of a material inside bounds (xmin, xmax, ymin, ymax).
    pub fn count_in(&self, b: [i32; 4], m: Material) -> usize {
        let mut n = 0;
        for x in b[0]..b[1] {
            let row = (x * self.area[1]) as usize;
            n += self.mat[row + b[2] as usize..row + b[3] as usize]
                .iter()
                .filter(|&&v| v == m as u8)
                .count();
        }
        n
    }

    /// The `n`-th (x-major) cell of a material inside bounds.
    pub fn nth_cell(&self, b: [i32; 4], m: Material, mut n: usize) -> Option<Pos> {
        for x in b[0]..b[1] {
            for y in b[2]..b[3] {
                if self.mat[self.idx([x, y])] == m as u8 {
                    if n == 0 {
                        return Some([x, y]);
                    }
                    n -= 1;
                }
            }
        }
        None
    }

    /// Semantic map: materials with object cells overwritten by class ids, [x][y] order.
    pub fn semantic(&self) -> Vec<u8> {
        let mut sem = self.mat.clone();
        for &id in &self.live {
            let o = &self.objects[id as usize];
            let i = self.idx(o.pos);
            sem[i] = o.kind.semantic_id();
        }
        sem
    }
}

/// Manhattan distance.
#[inline]
pub fn l1(a: Pos, b: Pos) -> i32 {
    (a[0] - b[0]).abs() + (a[1] - b[1]).abs()
}

/// crafter's `Object.toward`: a unit step along the long (or short) axis of `to - from`.
#[inline]
pub fn toward(from: Pos, to: Pos, long_axis: bool) -> Pos {
    let o = [to[0] - from[0], to[1] - from[1]];
    let pick_x = if long_axis {
        o[0].abs() > o[1].abs()
    } else {
        o[0].abs() <= o[1].abs()
    };
    if pick_x {
        [o[0].signum(), 0]
    } else {
        [0, o[1].signum()]
    }
}

/// The four directions in crafter's `all_dirs` / `random_dir` order.
pub const DIRS: [Pos; 4] = [[-1, 0], [1, 0], [0, -1], [0, 1]];
