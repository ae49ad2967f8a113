//! The environment (crafter's `Env`): episodes with per-episode world seeds, the step loop,
//! chunk balancing, daylight, rewards and termination.

use super::hash::world_seed;
use super::render::Renderer;
use super::rules::{Action, Material, N_ACHIEVEMENTS};
use super::textures::TextureSet;
use super::world::{l1, Kind, Object, World, PLAYER};
use super::worldgen;

/// Environment options, matching crafter's `Env(area, view, size, length, seed)`.
#[derive(Clone, Debug, PartialEq)]
pub struct EnvConfig {
    /// World size in tiles (width, height).
    pub area: [i32; 2],
    /// View in tiles (columns, rows), including the inventory rows.
    pub view: [usize; 2],
    /// Frame size in pixels (width, height).
    pub size: [usize; 2],
    /// Episode length in steps (`None` or 0: unlimited).
    pub length: Option<u32>,
    /// Env seed (Python int); episode `e` uses world seed `hash((seed, e)) % (2**31 - 1)`.
    pub seed: i64,
    /// Render frames; when false, steps still advance the RNG exactly as rendering would.
    pub render: bool,
}

impl Default for EnvConfig {
    fn default() -> Self {
        EnvConfig {
            area: [64, 64],
            view: [9, 9],
            size: [64, 64],
            length: Some(10_000),
            seed: 0,
            render: true,
        }
    }
}

/// Invalid environment options.
#[derive(Debug, thiserror::Error, PartialEq)]
pub enum EnvError {
    /// A size, view or area that crafter cannot render.
    #[error("invalid {what} {value}: {why}")]
    Invalid {
        what: &'static str,
        value: String,
        why: String,
    },
}

impl EnvConfig {
    /// Check the options, naming the bad one.
    pub fn validate(&self) -> Result<(), EnvError> {
        let bad = |what, value: String, why: &str| {
            Err(EnvError::Invalid {
                what,
                value,
                why: why.to_string(),
            })
        };
        if self.area.iter().any(|&a| !(1..=1024).contains(&a)) {
            return bad(
                "--area",
                format!("{}x{}", self.area[0], self.area[1]),
                "each side must be 1..=1024 tiles",
            );
        }
        if self.view.iter().any(|&v| !(1..=64).contains(&v)) {
            return bad(
                "--view",
                format!("{}x{}", self.view[0], self.view[1]),
                "each side must be 1..=64 tiles",
            );
        }
        let item_rows = 16usize.div_ceil(self.view[0]);
        if self.view[1] <= item_rows {
            return bad(
                "--view",
                format!("{}x{}", self.view[0], self.view[1]),
                &format!("needs more than {item_rows} rows (the inventory takes {item_rows})"),
            );
        }
        for axis in 0..2 {
            let s = self.size[axis];
            if s < self.view[axis] || s > 4096 {
                return bad(
                    "--size",
                    format!("{}x{}", self.size[0], self.size[1]),
                    &format!(
                        "each side must be between the view ({}x{} tiles, one pixel per tile) and 4096 pixels",
                        self.view[0], self.view[1]
                    ),
                );
            }
        }
        Ok(())
    }
}

/// What one step returned.
#[derive(Clone, Debug, PartialEq)]
pub struct StepOutcome {
    /// crafter's reward: health change / 10, plus 1 when any achievement is new this episode.
    pub reward: f64,
    /// Episode over (death or length).
    pub done: bool,
    /// The player died (`discount == 0`).
    pub dead: bool,
    /// Achievements (indices into `ACHIEVEMENT_NAMES`) unlocked for the first time this step.
    pub unlocked: Vec<usize>,
}

/// Daylight at a step: `1 - |cos(pi * ((step / 300) % 1 + 0.3))| ** 3`.
pub fn daylight(step: u32) -> f64 {
    let progress = (step as f64 / 300.0) % 1.0 + 0.3;
    1.0 - (std::f64::consts::PI * progress).cos().abs().powf(3.0)
}

/// One Crafter environment.
#[derive(Clone)]
pub struct Env {
    cfg: EnvConfig,
    world: World,
    renderer: Renderer,
    frame: Vec<u8>,
    episode: i64,
    step: u32,
    world_seed: u32,
    simplex_seed: i64,
    unlocked: [bool; N_ACHIEVEMENTS],
    last_health: i32,
    buckets: Vec<Vec<u32>>,
}

impl Env {
    /// A new environment (call `reset` before stepping).
    pub fn new(cfg: EnvConfig, textures: &TextureSet) -> Result<Env, EnvError> {
        cfg.validate()?;
        let renderer = Renderer::new(textures, cfg.size, cfg.view);
        let frame = vec![0; cfg.size[0] * cfg.size[1] * 3];
        let mut world = World::new(cfg.area, 0);
        world.add(Object::new(
            Kind::Player,
            [cfg.area[0] / 2, cfg.area[1] / 2],
        ));
        Ok(Env {
            world,
            cfg,
            renderer,
            frame,
            episode: 0,
            step: 0,
            world_seed: 0,
            simplex_seed: 0,
            unlocked: [false; N_ACHIEVEMENTS],
            last_health: 9,
            buckets: Vec::new(),
        })
    }

    /// Start the next episode (world seed from `(seed, episode)`); returns the first frame.
    pub fn reset(&mut self) -> &[u8] {
        self.start_episode();
        self.observe();
        &self.frame
    }

    /// [`Env::reset`], rendering the first frame into `out` (height × width × 3 of the env's
    /// size) instead of the env's own buffer, which then goes stale: a vector of envs renders
    /// each straight into its slot of one shared array.
    pub fn reset_into(&mut self, out: &mut [u8]) {
        self.start_episode();
        self.observe_into(out);
    }

    fn start_episode(&mut self) {
        self.episode += 1;
        self.step = 0;
        self.world_seed = world_seed(self.cfg.seed, self.episode);
        let mut world = World::new(self.cfg.area, self.world_seed);
        world.daylight = daylight(0);
        let center = [self.cfg.area[0] / 2, self.cfg.area[1] / 2];
        world.add(Object::new(Kind::Player, center));
        self.simplex_seed = worldgen::generate(&mut world);
        self.world = world;
        self.last_health = 9;
        self.unlocked = [false; N_ACHIEVEMENTS];
    }

    fn observe(&mut self) {
        if self.cfg.render {
            self.renderer.render(&mut self.world, &mut self.frame);
        } else {
            self.renderer.skip(&mut self.world);
        }
    }

    fn observe_into(&mut self, out: &mut [u8]) {
        if self.cfg.render {
            self.renderer.render(&mut self.world, out);
        } else {
            self.renderer.skip(&mut self.world);
        }
    }

    /// Apply one action (stepping after `done` continues the game, as crafter does).
    pub fn step(&mut self, action: Action) -> StepOutcome {
        let outcome = self.advance(action);
        self.observe();
        outcome
    }

    /// [`Env::step`], rendering the frame into `out` (height × width × 3 of the env's size)
    /// instead of the env's own buffer, which then goes stale. The same states, RNG draws and
    /// pixels as `step`: rendering draws its night noise after the step's updates either way.
    pub fn step_into(&mut self, action: Action, out: &mut [u8]) -> StepOutcome {
        let outcome = self.advance(action);
        self.observe_into(out);
        outcome
    }

    /// One step's updates and its outcome, before the frame is rendered (rendering only draws
    /// night noise from the RNG, which nothing after it in a step reads).
    fn advance(&mut self, action: Action) -> StepOutcome {
        self.step += 1;
        self.world.daylight = daylight(self.step);
        self.world.player.action = action;
        let reach = 2 * self.cfg.view[0].max(self.cfg.view[1]) as i32;
        // Iterate the ids live at the start of the step (new objects wait a step; an object
        // removed during its own update still finishes it).
        let snapshot = self.world.live.clone();
        for id in snapshot {
            let pos = self.world.objects[id as usize].pos;
            if l1(self.world.player_pos(), pos) < reach {
                self.world.update_object(id);
            }
        }
        if self.step.is_multiple_of(10) {
            self.balance();
        }
        let health = self.world.health(PLAYER);
        let mut reward = (health - self.last_health) as f64 / 10.0;
        self.last_health = health;
        let mut unlocked = Vec::new();
        for (i, &count) in self.world.player.achievements.iter().enumerate() {
            if count > 0 && !self.unlocked[i] {
                self.unlocked[i] = true;
                unlocked.push(i);
            }
        }
        if !unlocked.is_empty() {
            reward += 1.0;
        }
        let dead = health <= 0;
        let over = matches!(self.cfg.length, Some(l) if l > 0 && self.step >= l);
        StepOutcome {
            reward,
            done: dead || over,
            dead,
            unlocked,
        }
    }

    fn balance(&mut self) {
        let light = self.world.daylight;
        let order = self.world.chunk_order.clone();
        let mut buckets = std::mem::take(&mut self.buckets);
        buckets.resize_with(self.world.chunk_slots(), Vec::new);
        for b in buckets.iter_mut() {
            b.clear();
        }
        for &id in &self.world.live {
            let o = &self.world.objects[id as usize];
            if matches!(o.kind, Kind::Zombie | Kind::Skeleton | Kind::Cow) {
                buckets[self.world.chunk_of(o.pos) as usize].push(id);
            }
        }
        for c in order {
            let bounds = self.world.chunk_bounds(c);
            let ids = &buckets[c as usize];
            let grass = self.world.count_in(bounds, Material::Grass);
            let path = self.world.count_in(bounds, Material::Path);
            let zmax = 3.5 - 3.0 * light;
            let zmin = if grass < 50 { 0.0 } else { zmax };
            self.balance_kind(
                bounds,
                ids,
                Kind::Zombie,
                Material::Grass,
                grass,
                [6, 0],
                [0.3, 0.4],
                [zmin, zmax],
            );
            let smin = if path < 6 { 0.0 } else { 1.0 };
            self.balance_kind(
                bounds,
                ids,
                Kind::Skeleton,
                Material::Path,
                path,
                [7, 7],
                [0.1, 0.1],
                [smin, 2.0],
            );
            let cmin = if grass < 30 { 0.0 } else { 1.0 };
            self.balance_kind(
                bounds,
                ids,
                Kind::Cow,
                Material::Grass,
                grass,
                [5, 5],
                [0.01, 0.1],
                [cmin, 1.5 + light],
            );
        }
        self.buckets = buckets;
    }

    /// crafter's `_balance_object` with creatures in creation order.
    #[allow(clippy::too_many_arguments)]
    fn balance_kind(
        &mut self,
        bounds: [i32; 4],
        ids: &[u32],
        kind: Kind,
        material: Material,
        space: usize,
        dist: [i32; 2],
        prob: [f64; 2],
        target: [f64; 2],
    ) {
        let world = &mut self.world;
        let creatures: Vec<u32> = ids
            .iter()
            .copied()
            .filter(|&id| world.objects[id as usize].kind == kind)
            .collect();
        let n = creatures.len() as i64;
        if n < target[0] as i64 && world.rng.next_double() < prob[0] {
            let i = world.rng.randint(0, space as i64) as usize;
            if let Some(pos) = world.nth_cell(bounds, material, i) {
                if world.object_at(pos) == 0 && l1(world.player_pos(), pos) >= dist[0] {
                    world.add(Object::new(kind, pos));
                }
            }
        } else if n > target[1] as i64 && world.rng.next_double() < prob[1] {
            let victim = creatures[world.rng.randint(0, n) as usize];
            if l1(world.player_pos(), world.objects[victim as usize].pos) >= dist[1] {
                world.remove(victim);
            }
        }
    }

    /// The last rendered frame (height × width × 3); stale when rendering is off.
    pub fn frame(&self) -> &[u8] {
        &self.frame
    }

    /// Re-render the current state at the env's size (draws night noise from the game RNG,
    /// exactly like an extra `env.render()` in crafter).
    pub fn render(&mut self) -> &[u8] {
        self.renderer.render(&mut self.world, &mut self.frame);
        &self.frame
    }

    /// Render the current state with another renderer (e.g. another frame size) into `out`
    /// (height × width × 3 of that renderer's size); draws night noise from the game RNG exactly
    /// like `render`, as crafter's `env.render(size)` does.
    pub fn render_with(&mut self, renderer: &mut Renderer, out: &mut [u8]) {
        renderer.render(&mut self.world, out);
    }

    /// Set the number of episodes already started, so the next `reset` starts episode
    /// `episode + 1` (restoring a pickled Python env); the current world is left as it is.
    pub fn set_episode(&mut self, episode: i64) {
        self.episode = episode;
    }

    /// The world (read-only).
    pub fn world(&self) -> &World {
        &self.world
    }

    /// The world, mutable (test scenarios only).
    #[doc(hidden)]
    pub fn world_mut(&mut self) -> &mut World {
        &mut self.world
    }

    /// Options.
    pub fn config(&self) -> &EnvConfig {
        &self.cfg
    }

    /// Current episode number (1 after the first reset).
    pub fn episode(&self) -> i64 {
        self.episode
    }

    /// Steps taken in this episode.
    pub fn step_count(&self) -> u32 {
        self.step
    }

    /// This episode's world seed.
    pub fn world_seed(&self) -> u32 {
        self.world_seed
    }

    /// This episode's OpenSimplex seed (the first draw of the world RNG).
    pub fn simplex_seed(&self) -> i64 {
        self.simplex_seed
    }

    /// Set the player's health (clamped at 0), as `env._player.health = v` does in crafter;
    /// for test scenarios such as `env trace --immortal`.
    pub fn set_player_health(&mut self, value: i32) {
        self.world.set_health(PLAYER, value);
    }

    /// Apply an action given by its numeric id, rejecting ids outside 0..=16.
    pub fn step_id(&mut self, id: i64) -> Result<StepOutcome, EnvError> {
        let action = Action::from_id(id).ok_or_else(|| EnvError::Invalid {
            what: "action id",
            value: id.to_string(),
            why: "valid ids are 0..=16".into(),
        })?;
        Ok(self.step(action))
    }

    /// Achievements unlocked so far this episode.
    pub fn unlocked(&self) -> &[bool; N_ACHIEVEMENTS] {
        &self.unlocked
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::trace::sha256_hex;

    #[test]
    fn daylight_matches_crafter() {
        assert_eq!(daylight(0), 0.7969251898544335);
        assert_eq!(daylight(60), 1.0);
        assert!(daylight(210) < 1e-12);
        // Night (noise-drawing) frames are steps 148..=272 of each 300-step cycle.
        let night: Vec<u32> = (0..300).filter(|&s| daylight(s) < 0.5).collect();
        assert_eq!(
            (night[0], *night.last().unwrap(), night.len()),
            (148, 272, 125)
        );
    }

    #[test]
    fn rendering_into_a_caller_buffer_gives_the_same_episode() {
        // Two envs on one seed, one rendering into its own buffer and one into ours, through
        // a night (noise drawn from the RNG) and a reset: the same frames and outcomes.
        let cfg = EnvConfig {
            seed: 5,
            length: Some(400),
            ..EnvConfig::default()
        };
        let textures = TextureSet::builtin();
        let mut a = Env::new(cfg.clone(), &textures).unwrap();
        let mut b = Env::new(cfg, &textures).unwrap();
        let mut out = vec![7u8; 64 * 64 * 3];
        b.reset_into(&mut out);
        assert_eq!(a.reset(), &out[..]);
        let mut actions = crate::rng::RandomState::new(3);
        for i in 0..900 {
            a.set_player_health(9);
            b.set_player_health(9);
            let action = Action::from_id(actions.randint(0, 17)).unwrap();
            let (oa, ob) = (a.step(action), b.step_into(action, &mut out));
            assert_eq!(a.frame(), &out[..], "step {i}");
            assert_eq!(
                (oa.reward, oa.done, oa.dead),
                (ob.reward, ob.done, ob.dead),
                "step {i}"
            );
            if oa.done {
                b.reset_into(&mut out);
                assert_eq!(a.reset(), &out[..], "reset after step {i}");
            }
        }
    }

    #[test]
    fn reset_builds_crafters_reference_world() {
        let mut env = Env::new(EnvConfig::default(), &TextureSet::builtin()).unwrap();
        env.reset();
        assert_eq!(env.world_seed(), 1256191933);
        assert_eq!(env.simplex_seed(), 487388145);
        let w = env.world();
        assert_eq!(
            sha256_hex(&w.mat),
            "e6448727016242eab40bd728494d57799fcdb2bd9a014cd50961490421b3a873"
        );
        let count = |k: Kind| {
            w.live
                .iter()
                .filter(|&&id| w.objects[id as usize].kind == k)
                .count()
        };
        assert_eq!(
            (count(Kind::Cow), count(Kind::Zombie), count(Kind::Skeleton)),
            (44, 18, 7)
        );
    }

    #[test]
    fn invalid_options_and_actions_are_errors() {
        let bad = |cfg: EnvConfig| {
            Env::new(cfg, &TextureSet::builtin())
                .err()
                .unwrap()
                .to_string()
        };
        assert!(bad(EnvConfig {
            size: [0, 64],
            ..EnvConfig::default()
        })
        .contains("--size"));
        assert!(bad(EnvConfig {
            size: [8, 64],
            ..EnvConfig::default()
        })
        .contains("--size"));
        assert!(bad(EnvConfig {
            view: [9, 2],
            ..EnvConfig::default()
        })
        .contains("--view"));
        assert!(bad(EnvConfig {
            area: [0, 64],
            ..EnvConfig::default()
        })
        .contains("--area"));
        let mut env = Env::new(EnvConfig::default(), &TextureSet::builtin()).unwrap();
        env.reset();
        assert!(env.step_id(17).unwrap_err().to_string().contains("0..=16"));
        assert!(env.step_id(-1).is_err());
        assert!(env.step_id(16).is_ok());
    }

    #[test]
    fn no_render_mode_keeps_dynamics_identical() {
        let textures = TextureSet::builtin();
        let mut a = Env::new(
            EnvConfig {
                seed: 4,
                ..EnvConfig::default()
            },
            &textures,
        )
        .unwrap();
        let mut b = Env::new(
            EnvConfig {
                seed: 4,
                render: false,
                ..EnvConfig::default()
            },
            &textures,
        )
        .unwrap();
        a.reset();
        b.reset();
        let mut actions = crate::rng::RandomState::new(1);
        for _ in 0..600 {
            let act = Action::ALL[actions.randint(0, 17) as usize];
            let (x, y) = (a.step(act), b.step(act));
            assert_eq!(x, y);
            assert_eq!(a.world().rng.state_bytes(), b.world().rng.state_bytes());
            if x.done {
                a.reset();
                b.reset();
            }
        }
    }
}
