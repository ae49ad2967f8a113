//! World generation (crafter's `worldgen.generate_world`): OpenSimplex terrain, then creatures,
//! drawing from the game RNG in crafter's exact order.

use super::noise::OpenSimplex;
use super::rules::Material;
use super::world::{Kind, Object, World};

/// `(z, size)` of the noise fields every cell reads: the spawn area's, water's two octaves,
/// then mountain's two.
const FIELDS: [(f64, f64); 5] = [(8.0, 3.0), (3.0, 15.0), (3.0, 5.0), (0.0, 15.0), (0.0, 5.0)];

/// One noise field over the cells that need it, in the cell loop's [x][y] order (`NaN` where
/// not needed). Fields are computed one at a time: the noise kernel's branches then follow
/// each other from one point to the next, and mispredict far less than when the fields
/// alternate cell by cell. `noise3` is pure, so computing a value ahead of the cell that reads
/// it changes nothing; only the game RNG's draws have an order, and they stay in the cell loop.
fn field(
    [w, h]: [i32; 2],
    need: impl Fn(usize) -> bool,
    value: impl Fn(f64, f64) -> f64,
) -> Vec<f64> {
    let mut out = vec![f64::NAN; (w * h) as usize];
    let mut i = 0;
    for x in 0..w {
        for y in 0..h {
            if need(i) {
                out[i] = value(x as f64, y as f64);
            }
            i += 1;
        }
    }
    out
}

/// Fill an empty world around the player (already added as id 1 at the centre); returns the
/// OpenSimplex seed drawn.
pub fn generate(world: &mut World) -> i64 {
    let simplex_seed = world.rng.randint(0, (1 << 31) - 1);
    let noise = OpenSimplex::new(simplex_seed);
    let [w, h] = world.area;
    let [px, py] = world.player_pos();
    let cells = (w * h) as usize;
    let mut tunnels = vec![false; cells];
    // `_simplex(x, y, z, size)` with one size (normalised by its weight 1).
    let s1 = |x: f64, y: f64, z: f64, size: f64| noise.noise3(x / size, y / size, z);
    let all = |_: usize| true;
    let [n_start, w15, w5, m15, m5] =
        FIELDS.map(|(z, size)| field([w, h], all, |x, y| s1(x, y, z, size)));

    // Spawn area, water and mountain per cell, exactly as crafter computes them.
    let mut start = vec![0.0; cells];
    let mut water = vec![0.0; cells];
    let mut mountain = vec![0.0; cells];
    let mut i = 0;
    for x in 0..w {
        for y in 0..h {
            let d2 = ((x - px) * (x - px) + (y - py) * (y - py)) as f64;
            let mut st = 4.0 - d2.sqrt();
            st += 2.0 * n_start[i];
            st = 1.0 / (1.0 + (-st).exp());
            // {15: 1, 5: 0.15}, not normalised: 0 + 1*n15 + 0.15*n5
            let mut wa = (0.0 + 1.0 * w15[i]) + 0.15 * w5[i];
            wa += 0.1;
            wa -= 2.0 * st;
            // {15: 1, 5: 0.3}, normalised by 1.3
            let mut mo = ((0.0 + 1.0 * m15[i]) + 0.3 * m5[i]) / 1.3;
            mo -= 4.0 * st + 0.3 * wa;
            (start[i], water[i], mountain[i]) = (st, wa, mo);
            i += 1;
        }
    }

    // The fields read before any RNG draw decides what comes next, each over exactly the
    // cells whose earlier comparisons reach it (crafter's `and`/`or` short-circuits).
    let hills = |i: usize| start[i] <= 0.5 && mountain[i] > 0.15;
    let cave = field([w, h], hills, |x, y| s1(x, y, 6.0, 7.0));
    let is_cave = |i: usize| cave[i] > 0.15 && mountain[i] > 0.3;
    let tunnel_a = field([w, h], |i| hills(i) && !is_cave(i), |x, y| {
        s1(2.0 * x, y / 5.0, 7.0, 3.0)
    });
    let tunnel_b = field([w, h], |i| hills(i) && !is_cave(i) && tunnel_a[i] <= 0.4, |x, y| {
        s1(x / 5.0, 2.0 * y, 7.0, 3.0)
    });
    let is_tunnel = |i: usize| tunnel_a[i] > 0.4 || tunnel_b[i] > 0.4;
    let coal = field([w, h], |i| hills(i) && !is_cave(i) && !is_tunnel(i), |x, y| {
        s1(x, y, 1.0, 8.0)
    });
    let band = |i: usize| 0.25 < water[i] && water[i] <= 0.35;
    let low = |i: usize| start[i] <= 0.5 && mountain[i] <= 0.15;
    let sand = field([w, h], |i| low(i) && band(i), |x, y| s1(x, y, 4.0, 9.0));
    let is_sand = |i: usize| band(i) && sand[i] > -0.2;
    let tree = field([w, h], |i| low(i) && !is_sand(i) && water[i] <= 0.3, |x, y| {
        s1(x, y, 5.0, 7.0)
    });

    // The cell loop: crafter's branches in crafter's order, with the game RNG drawn where
    // crafter draws it; iron and lava, read only after a draw, stay lazy.
    let mut i = 0;
    for x in 0..w {
        for y in 0..h {
            let (fx, fy) = (x as f64, y as f64);
            let m = if start[i] > 0.5 {
                Material::Grass
            } else if mountain[i] > 0.15 {
                if is_cave(i) {
                    Material::Path
                } else if is_tunnel(i) {
                    tunnels[i] = true;
                    Material::Path
                } else if coal[i] > 0.0 && world.rng.next_double() > 0.85 {
                    Material::Coal
                } else if s1(fx, fy, 2.0, 6.0) > 0.4 && world.rng.next_double() > 0.75 {
                    Material::Iron
                } else if mountain[i] > 0.18 && world.rng.next_double() > 0.994 {
                    Material::Diamond
                } else if mountain[i] > 0.3 && s1(fx, fy, 6.0, 5.0) > 0.35 {
                    Material::Lava
                } else {
                    Material::Stone
                }
            } else if is_sand(i) {
                Material::Sand
            } else if 0.3 < water[i] {
                Material::Water
            } else if tree[i] > 0.0 && world.rng.next_double() > 0.8 {
                Material::Tree
            } else {
                Material::Grass
            };
            world.set_material([x, y], m);
            i += 1;
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
