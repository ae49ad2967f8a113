//! World generation (crafter's `worldgen.generate_world`): OpenSimplex terrain, then creatures,
//! drawing from the game RNG in crafter's exact order.

use super::noise::OpenSimplex;
use super::rules::Material;
use super::world::{Kind, Object, World};

/// `(z, size)` of the noise fields every cell reads: the spawn area's, water's two octaves,
/// then mountain's two.
const FIELDS: [(f64, f64); 5] = [(8.0, 3.0), (3.0, 15.0), (3.0, 5.0), (0.0, 15.0), (0.0, 5.0)];

/// Where a field reads the noise at cell `(x, y)`, before the division by its size: a function
/// of `x` and one of `y`.
type Input = (fn(f64) -> f64, fn(f64) -> f64);

/// One noise field over the cells that need it, in the cell loop's [x][y] order (`NaN` where
/// not needed), through [`OpenSimplex::noise3_many`] (eight points per instruction where the
/// CPU has AVX-512; one field at a time otherwise, whose branches are then mostly predicted).
/// `noise3` is pure, so computing a value ahead of the cell that reads it, or at a cell that
/// never reads it, changes nothing; only the game RNG's draws have an order, and they stay in
/// the cell loop.
fn field(
    noise: &OpenSimplex,
    [w, h]: [i32; 2],
    need: impl Fn(usize) -> bool,
    (z, size): (f64, f64),
    input: Input,
) -> Vec<f64> {
    let (cols, rows) = axes([w, h], size, input);
    let cells = (w * h) as usize;
    // Branch-free compaction: every cell's point is written at the next free slot, which
    // advances only where the cell needs the field (which cells do is hard to predict).
    let (mut xs, mut ys, mut at) = (vec![0.0; cells], vec![0.0; cells], vec![0usize; cells]);
    let (mut i, mut len) = (0, 0);
    for &cx in &cols {
        for &ry in &rows {
            xs[len] = cx;
            ys[len] = ry;
            at[len] = i;
            len += need(i) as usize;
            i += 1;
        }
    }
    xs.truncate(len);
    ys.truncate(len);
    at.truncate(len);
    let mut values = vec![0.0; at.len()];
    noise.noise3_many(&xs, &ys, z, &mut values);
    let mut out = vec![f64::NAN; cells];
    for (i, v) in at.into_iter().zip(values) {
        out[i] = v;
    }
    out
}

/// The point crafter's `_simplex(x, y, z, {size: 1})` reads at a cell, `(fx(x) / size,
/// fy(y) / size)`, worked out once per column and once per row: each coordinate depends on one
/// axis only, so these are the same operations on the same values as per cell.
fn axes([w, h]: [i32; 2], size: f64, (fx, fy): Input) -> (Vec<f64>, Vec<f64>) {
    (
        (0..w).map(|x| fx(x as f64) / size).collect(),
        (0..h).map(|y| fy(y as f64) / size).collect(),
    )
}

/// Field input at the cell itself.
const AT_CELL: Input = (|x| x, |y| y);

/// A noise field read at every cell, straight into the field.
fn full_field(noise: &OpenSimplex, [w, h]: [i32; 2], (z, size): (f64, f64)) -> Vec<f64> {
    let (cols, rows) = axes([w, h], size, AT_CELL);
    let cells = (w * h) as usize;
    let (mut xs, mut ys) = (Vec::with_capacity(cells), Vec::with_capacity(cells));
    for &cx in &cols {
        xs.extend(std::iter::repeat_n(cx, rows.len()));
        ys.extend_from_slice(&rows);
    }
    let mut out = vec![0.0; cells];
    noise.noise3_many(&xs, &ys, z, &mut out);
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
    let [n_start, w15, w5, m15, m5] = FIELDS.map(|zs| full_field(&noise, [w, h], zs));

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
    let cave = field(&noise, [w, h], hills, (6.0, 7.0), AT_CELL);
    let is_cave = |i: usize| cave[i] > 0.15 && mountain[i] > 0.3;
    let tunnel_a = field(
        &noise,
        [w, h],
        |i| hills(i) && !is_cave(i),
        (7.0, 3.0),
        (|x| 2.0 * x, |y| y / 5.0),
    );
    let tunnel_b = field(
        &noise,
        [w, h],
        |i| hills(i) && !is_cave(i) && tunnel_a[i] <= 0.4,
        (7.0, 3.0),
        (|x| x / 5.0, |y| 2.0 * y),
    );
    let is_tunnel = |i: usize| tunnel_a[i] > 0.4 || tunnel_b[i] > 0.4;
    let ore = |i: usize| hills(i) && !is_cave(i) && !is_tunnel(i);
    let coal = field(&noise, [w, h], ore, (1.0, 8.0), AT_CELL);
    // Iron's and lava's fields are read only after a draw has failed, so crafter reads them
    // at fewer cells; computing them at every cell that may reach them is still cheaper than
    // one call at a time, and reading a value changes nothing.
    let iron = field(&noise, [w, h], ore, (2.0, 6.0), AT_CELL);
    let lava = field(
        &noise,
        [w, h],
        |i| ore(i) && mountain[i] > 0.3,
        (6.0, 5.0),
        AT_CELL,
    );
    let band = |i: usize| 0.25 < water[i] && water[i] <= 0.35;
    let low = |i: usize| start[i] <= 0.5 && mountain[i] <= 0.15;
    let sand = field(&noise, [w, h], |i| low(i) && band(i), (4.0, 9.0), AT_CELL);
    let is_sand = |i: usize| band(i) && sand[i] > -0.2;
    let tree = field(
        &noise,
        [w, h],
        |i| low(i) && !is_sand(i) && water[i] <= 0.3,
        (5.0, 7.0),
        AT_CELL,
    );

    // The cell loop: crafter's branches in crafter's order, with the game RNG drawn exactly
    // where crafter draws it.
    let mut i = 0;
    for x in 0..w {
        for y in 0..h {
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
                } else if iron[i] > 0.4 && world.rng.next_double() > 0.75 {
                    Material::Iron
                } else if mountain[i] > 0.18 && world.rng.next_double() > 0.994 {
                    Material::Diamond
                } else if mountain[i] > 0.3 && lava[i] > 0.35 {
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
