//! World generation (crafter's `worldgen.generate_world`): OpenSimplex terrain, then creatures,
//! drawing from the game RNG in crafter's exact order.

use super::noise::OpenSimplex;
use super::rules::Material;
use super::world::{Kind, Object, World};

/// `(z, size)` of the noise fields every cell reads: the spawn area's, water's two octaves,
/// then mountain's two.
const FIELDS: [(f64, f64); 5] = [(8.0, 3.0), (3.0, 15.0), (3.0, 5.0), (0.0, 15.0), (0.0, 5.0)];

/// Fill an empty world around the player (already added as id 1 at the centre); returns the
/// OpenSimplex seed drawn.
pub fn generate(world: &mut World) -> i64 {
    let simplex_seed = world.rng.randint(0, (1 << 31) - 1);
    let noise = OpenSimplex::new(simplex_seed);
    let [w, h] = world.area;
    let [px, py] = world.player_pos();
    let mut tunnels = vec![false; (w * h) as usize];
    // `_simplex(x, y, z, size)` with one size (normalised by its weight 1).
    let s1 = |x: f64, y: f64, z: f64, size: f64| noise.noise3(x / size, y / size, z);
    // The five fields every cell reads, one whole field at a time: the noise kernel's
    // branches follow each other from one point to the next within a field, and mispredict
    // far less than when the five fields alternate cell by cell.
    let cells = (w * h) as usize;
    let mut fields = vec![0.0f64; 5 * cells];
    for (f, (z, size)) in FIELDS.into_iter().enumerate() {
        let out = &mut fields[f * cells..(f + 1) * cells];
        let mut i = 0;
        for x in 0..w {
            for y in 0..h {
                out[i] = s1(x as f64, y as f64, z, size);
                i += 1;
            }
        }
    }
    let field = |f: usize, i: usize| fields[f * cells + i];
    for x in 0..w {
        for y in 0..h {
            let (fx, fy) = (x as f64, y as f64);
            let i = (x * h + y) as usize;
            let d2 = ((x - px) * (x - px) + (y - py) * (y - py)) as f64;
            let mut start = 4.0 - d2.sqrt();
            start += 2.0 * field(0, i);
            start = 1.0 / (1.0 + (-start).exp());
            // {15: 1, 5: 0.15}, not normalised: 0 + 1*n15 + 0.15*n5
            let mut water = (0.0 + 1.0 * field(1, i)) + 0.15 * field(2, i);
            water += 0.1;
            water -= 2.0 * start;
            // {15: 1, 5: 0.3}, normalised by 1.3
            let mut mountain = ((0.0 + 1.0 * field(3, i)) + 0.3 * field(4, i)) / 1.3;
            mountain -= 4.0 * start + 0.3 * water;
            let m = if start > 0.5 {
                Material::Grass
            } else if mountain > 0.15 {
                if s1(fx, fy, 6.0, 7.0) > 0.15 && mountain > 0.3 {
                    Material::Path
                } else if s1(2.0 * fx, fy / 5.0, 7.0, 3.0) > 0.4
                    || s1(fx / 5.0, 2.0 * fy, 7.0, 3.0) > 0.4
                {
                    tunnels[(x * h + y) as usize] = true;
                    Material::Path
                } else if s1(fx, fy, 1.0, 8.0) > 0.0 && world.rng.next_double() > 0.85 {
                    Material::Coal
                } else if s1(fx, fy, 2.0, 6.0) > 0.4 && world.rng.next_double() > 0.75 {
                    Material::Iron
                } else if mountain > 0.18 && world.rng.next_double() > 0.994 {
                    Material::Diamond
                } else if mountain > 0.3 && s1(fx, fy, 6.0, 5.0) > 0.35 {
                    Material::Lava
                } else {
                    Material::Stone
                }
            } else if 0.25 < water && water <= 0.35 && s1(fx, fy, 4.0, 9.0) > -0.2 {
                Material::Sand
            } else if 0.3 < water {
                Material::Water
            } else if s1(fx, fy, 5.0, 7.0) > 0.0 && world.rng.next_double() > 0.8 {
                Material::Tree
            } else {
                Material::Grass
            };
            world.set_material([x, y], m);
        }
    }
    for x in 0..w {
        for y in 0..h {
            let d2 = (x - px) * (x - px) + (y - py) * (y - py);
            let m = world.material([x, y]);
            if !m.walkable() {
                continue;
            }
            let kind = if d2 > 9 && m == Material::Grass && world.rng.next_double() > 0.985 {
                Kind::Cow
            } else if d2 > 100 && world.rng.next_double() > 0.993 {
                Kind::Zombie
            } else if m == Material::Path
                && tunnels[(x * h + y) as usize]
                && world.rng.next_double() > 0.95
            {
                Kind::Skeleton
            } else {
                continue;
            };
            world.add(Object::new(kind, [x, y]));
        }
    }
    simplex_seed
}
