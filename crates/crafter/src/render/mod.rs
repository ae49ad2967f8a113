//! Frame rendering, byte-identical to crafter's `LocalView` + `ItemView` with Pillow's exact
//! arithmetic (accumulated NEAREST resize, float32 alpha blend, RGB→L, `Image.blend`).
//! Night frames draw their noise from the game RNG, exactly as crafter does.

use super::rules::{Material, ITEM_NAMES, N_ITEMS};
use super::textures::TextureSet;
use super::world::{Kind, World, PLAYER};

mod night;
mod sprite;
use night::NightShade;
pub use sprite::nearest_map;
use sprite::{resize, Canvas, Sprite};

/// Pillow's RGB→L.
#[inline]
fn luma(r: u8, g: u8, b: u8) -> u8 {
    ((r as u32 * 19595 + g as u32 * 38470 + b as u32 * 7471 + 0x8000) >> 16) as u8
}

/// Pillow's `Image.blend(gray, img, alpha)` for one channel, in float32 (`alpha` in 0..=1).
#[inline]
fn blend(gray: u8, v: u8, alpha: f32) -> u8 {
    let b = gray as f32 + alpha * (v as i32 - gray as i32) as f32;
    // SAFETY: a convex mix of two bytes lies in 0..=255, so the truncation is in range.
    unsafe { b.to_int_unchecked::<i32>() as u8 }
}

/// crafter's `_light` (+ `_sleep`) for one pixel: `c` is the composed colour, `n` the colour
/// after night noise (equal to `c` by day).
struct Light {
    daylight: f64,
    sleeping: bool,
}

impl Light {
    fn new(daylight: f64, sleeping: bool) -> Light {
        Light { daylight, sleeping }
    }

    #[inline]
    fn apply(&self, c: [u8; 3], n: [u8; 3]) -> [u8; 3] {
        const TINT: [f64; 3] = [0.0, 16.0, 64.0];
        let dl = self.daylight;
        let l = luma(n[0], n[1], n[2]);
        let mut px = [0f64; 3];
        for ch in 0..3 {
            let col = blend(l, n[ch], 0.4);
            let t = 0.5 * col as f64 + 0.5 * TINT[ch];
            px[ch] = dl * c[ch] as f64 + (1.0 - dl) * t;
        }
        // SAFETY (both truncations): `dl` is in 0..=1 and every term a convex mix of values in
        // 0..=255, so each value lies in 0..=255 and the plain truncation is `as u8`'s.
        let byte = |v: f64| unsafe { v.to_int_unchecked::<i32>() as u8 };
        if self.sleeping {
            let g = luma(byte(px[0]), byte(px[1]), byte(px[2])) as f64;
            px = [0.5 * g, 0.5 * g, 0.5 * g + 0.5 * 16.0];
        }
        px.map(byte)
    }
}

/// `dst.copy_from_slice(src)` for the few bytes of a cell's column or row: 4 to 32 bytes as
/// two overlapping word copies (the head and the tail), since a `memcpy` call per column or
/// row cost more than the copy itself.
#[inline(always)]
fn copy_short(dst: &mut [u8], src: &[u8]) {
    macro_rules! head_tail {
        ($t:ty, $w:literal) => {{
            let n = src.len();
            let word = |b: &[u8]| <$t>::from_ne_bytes(std::array::from_fn(|i| b[i]));
            let (head, tail) = (word(&src[..$w]), word(&src[n - $w..]));
            dst[..$w].copy_from_slice(&head.to_ne_bytes());
            dst[n - $w..].copy_from_slice(&tail.to_ne_bytes());
        }};
    }
    match src.len() {
        4..=8 => head_tail!(u32, 4),
        9..=16 => head_tail!(u64, 8),
        17..=32 => head_tail!(u128, 16),
        _ => dst.copy_from_slice(src),
    }
}

/// Frame geometry and resized textures for one (size, view) pair.
#[derive(Clone)]
pub struct Renderer {
    size: [usize; 2],
    unit: [usize; 2],
    grid: [usize; 2],
    view_x: usize,
    border: [usize; 2],
    materials: Vec<Sprite>,
    player: [Sprite; 5],
    arrows: [Sprite; 4],
    cow: Sprite,
    zombie: Sprite,
    skeleton: Sprite,
    plant: [Sprite; 2],
    items: Vec<Sprite>,
    digits: Vec<Sprite>,
    vignette: Vec<f64>,
    noise: Vec<f64>,
    local: Vec<u8>,
    lit: Vec<u8>,
    cell_buf: Vec<u8>,
}

/// Material slot used for cells outside the world (drawn grey).
const OUTSIDE: usize = 13;

impl Renderer {
    /// Prepare rendering at `size` (width, height) pixels for a `view` of (cols, rows) tiles.
    /// Callers validate that every unit is at least 1 pixel.
    pub fn new(textures: &TextureSet, size: [usize; 2], view: [usize; 2]) -> Renderer {
        let unit = [size[0] / view[0], size[1] / view[1]];
        let item_rows = N_ITEMS.div_ceil(view[0]);
        let grid = [view[0], view[1] - item_rows];
        let get = |name: &str, w: usize, h: usize| {
            let t = textures.get(name).unwrap_or_else(|| {
                textures
                    .get("unknown")
                    .expect("texture sets always include 'unknown'")
            });
            resize(t, w, h)
        };
        let cell = |name: &str| get(name, unit[0], unit[1]);
        let icon = [
            (0.8 * unit[0] as f64) as usize,
            (0.8 * unit[1] as f64) as usize,
        ];
        let digit = [
            (0.6 * unit[0] as f64) as usize,
            (0.6 * unit[1] as f64) as usize,
        ];
        let (w, h) = (grid[0] * unit[0], grid[1] * unit[1]);
        let lin = |n: usize| -> Vec<f64> {
            if n == 1 {
                return vec![-1.0];
            }
            let step = 2.0 / (n - 1) as f64;
            let mut v: Vec<f64> = (0..n).map(|i| i as f64 * step + -1.0).collect();
            v[n - 1] = 1.0;
            v
        };
        let (lx, ly) = (lin(w), lin(h));
        let mut vignette = Vec::with_capacity(w * h);
        for x in &lx {
            for y in &ly {
                vignette.push(1.0 - (-0.5 * (x * x + y * y) / 0.25).exp());
            }
        }
        Renderer {
            size,
            unit,
            grid,
            view_x: view[0],
            border: [
                (size[0] - unit[0] * view[0]) / 2,
                (size[1] - unit[1] * view[1]) / 2,
            ],
            materials: Material::ALL
                .iter()
                .map(|m| cell(m.name()).with_planar())
                .collect(),
            player: [
                "player-left",
                "player-right",
                "player-up",
                "player-down",
                "player-sleep",
            ]
            .map(cell),
            arrows: ["arrow-left", "arrow-right", "arrow-up", "arrow-down"].map(cell),
            cow: cell("cow"),
            zombie: cell("zombie"),
            skeleton: cell("skeleton"),
            plant: ["plant", "plant-ripe"].map(cell),
            items: ITEM_NAMES
                .iter()
                .map(|n| get(n, icon[0], icon[1]))
                .collect(),
            digits: (1..=9)
                .map(|d| get(&d.to_string(), digit[0], digit[1]))
                .collect(),
            vignette,
            noise: vec![0.0; w * h],
            local: vec![0; w * h * 3],
            lit: vec![0; (OUTSIDE + 1) * unit[0] * unit[1] * 3],
            cell_buf: vec![0; unit[0] * unit[1] * 3],
        }
    }

    /// Output size (width, height).
    pub fn size(&self) -> [usize; 2] {
        self.size
    }

    /// Pixels of the local (world) view: the number of noise doubles a night frame draws.
    pub fn local_pixels(&self) -> usize {
        self.grid[0] * self.unit[0] * self.grid[1] * self.unit[1]
    }

    fn dir_index(d: [i32; 2]) -> usize {
        match d {
            [-1, 0] => 0,
            [1, 0] => 1,
            [0, -1] => 2,
            _ => 3,
        }
    }

    /// Advance the RNG exactly as `render` would, without drawing pixels.
    pub fn skip(&self, world: &mut World) {
        if world.daylight < 0.5 {
            world.rng.skip_doubles(self.local_pixels());
        }
    }

    fn object_sprite(&self, world: &World, id: u32) -> &Sprite {
        let o = &world.objects[id as usize];
        match o.kind {
            Kind::Player if id == PLAYER && world.player.sleeping => &self.player[4],
            Kind::Player => &self.player[Self::dir_index(world.player.facing)],
            Kind::Cow => &self.cow,
            Kind::Zombie => &self.zombie,
            Kind::Skeleton => &self.skeleton,
            Kind::Arrow => &self.arrows[Self::dir_index(o.facing)],
            Kind::Plant => &self.plant[o.ripe() as usize],
        }
    }

    /// The world cell shown at grid cell (gx, gy): material slot (13 = outside, grey) and
    /// object id (0 = none; the object map holds at most one object per cell).
    fn cell(&self, world: &World, gx: usize, gy: usize) -> (usize, u32) {
        let center = world.player_pos();
        let off = [(self.grid[0] / 2) as i32, (self.grid[1] / 2) as i32];
        let p = [
            center[0] + gx as i32 - off[0],
            center[1] + gy as i32 - off[1],
        ];
        if world.inside(p) {
            (world.material(p) as usize, world.object_at(p))
        } else {
            (OUTSIDE, 0)
        }
    }

    /// Compose one cell (material, then the object alpha-blended) into `buf` (`[y][x][3]`).
    fn compose(&self, world: &World, slot: usize, obj: u32, buf: &mut [u8]) {
        let [ux, uy] = self.unit;
        let mut canvas = Canvas { w: ux, data: buf };
        if slot == OUTSIDE {
            canvas.data.fill(127);
        } else {
            canvas.draw(0, 0, &self.materials[slot]);
        }
        if obj != 0 {
            canvas.draw_alpha(0, 0, self.object_sprite(world, obj));
        }
        debug_assert_eq!(canvas.data.len(), ux * uy * 3);
    }

    /// Render the observation into `out` (height × width × 3, C order).
    pub fn render(&mut self, world: &mut World, out: &mut [u8]) {
        let dl = world.daylight;
        let light = Light::new(dl, world.player.sleeping);
        out.fill(0);
        if dl < 0.5 {
            self.render_night(world, out, &light);
        } else {
            self.render_day(world, out, &light);
        }
        self.draw_items(world, out);
    }

    /// Day frames: lighting depends only on a pixel's colour, so each material's lit cell is
    /// computed once per frame and copied; cells with an object are lit pixel by pixel.
    fn render_day(&mut self, world: &World, out: &mut [u8], light: &Light) {
        let [ux, uy] = self.unit;
        let cell_len = ux * uy * 3;
        let out_w = self.size[0];
        let mut lit = std::mem::take(&mut self.lit);
        let mut buf = std::mem::take(&mut self.cell_buf);
        let mut valid = [false; OUTSIDE + 1];
        // Lit colours of this frame, by colour (textures have few): one `Light::apply` per colour.
        let mut memo = [(u32::MAX, [0u8; 3]); 256];
        let mut light_cell = |cell: &mut [u8]| {
            for px in cell.chunks_exact_mut(3) {
                let c = [px[0], px[1], px[2]];
                let key = u32::from_le_bytes([c[0], c[1], c[2], 0]);
                let entry = &mut memo[(key.wrapping_mul(0x9E37_79B1) >> 24) as usize];
                if entry.0 != key {
                    *entry = (key, light.apply(c, c));
                }
                px.copy_from_slice(&entry.1);
            }
        };
        for gy in 0..self.grid[1] {
            for gx in 0..self.grid[0] {
                let (slot, obj) = self.cell(world, gx, gy);
                let src: &[u8] = if obj == 0 {
                    let cached = &mut lit[slot * cell_len..(slot + 1) * cell_len];
                    if !valid[slot] {
                        self.compose(world, slot, 0, cached);
                        light_cell(cached);
                        valid[slot] = true;
                    }
                    cached
                } else {
                    self.compose(world, slot, obj, &mut buf);
                    light_cell(&mut buf);
                    &buf
                };
                let (x0, y0) = (self.border[0] + gx * ux, self.border[1] + gy * uy);
                for (row, line) in src.chunks_exact(ux * 3).enumerate() {
                    let o = ((y0 + row) * out_w + x0) * 3;
                    copy_short(&mut out[o..o + ux * 3], line);
                }
            }
        }
        self.lit = lit;
        self.cell_buf = buf;
    }

    /// Night frames: noise from the game RNG blended in with the vignette, pixel by pixel
    /// (`NightShade`), over the composed cells laid out as planes in the noise's [x][y] order.
    fn render_night(&mut self, world: &mut World, out: &mut [u8], light: &Light) {
        let [ux, uy] = self.unit;
        let h = self.grid[1] * uy;
        let mut planes = std::mem::take(&mut self.local);
        let mut buf = std::mem::take(&mut self.cell_buf);
        let n_px = planes.len() / 3;
        {
            let (cr, rest) = planes.split_at_mut(n_px);
            let (cg, cb) = rest.split_at_mut(n_px);
            for gy in 0..self.grid[1] {
                for gx in 0..self.grid[0] {
                    let (slot, obj) = self.cell(world, gx, gy);
                    let k0 = gx * ux * h + gy * uy;
                    if obj == 0 && slot != OUTSIDE {
                        // A bare material cell is its sprite's RGB, already in column order.
                        let p = &self.materials[slot].planar;
                        for (plane, src) in [&mut *cr, &mut *cg, &mut *cb]
                            .into_iter()
                            .zip(p.chunks_exact(ux * uy))
                        {
                            for (xx, column) in src.chunks_exact(uy).enumerate() {
                                let k = k0 + xx * h;
                                copy_short(&mut plane[k..k + uy], column);
                            }
                        }
                        continue;
                    }
                    self.compose(world, slot, obj, &mut buf);
                    for xx in 0..ux {
                        let k = k0 + xx * h;
                        for yy in 0..uy {
                            let i = (yy * ux + xx) * 3;
                            cr[k + yy] = buf[i];
                            cg[k + yy] = buf[i + 1];
                            cb[k + yy] = buf[i + 2];
                        }
                    }
                }
            }
        }
        // Drawn in [x][y] order, as numpy fills uniform(32, 127, (W, H)).
        world.rng.fill_uniform(32.0, 127.0, &mut self.noise);
        let shade = NightShade {
            amount: 2.0 * (0.5 - world.daylight),
            daylight: light.daylight,
            sleeping: light.sleeping,
            h,
            w: self.grid[0] * ux,
            border: self.border,
            out_w: self.size[0],
        };
        shade.apply(&planes, &self.vignette, &self.noise, out);
        self.local = planes;
        self.cell_buf = buf;
    }

    /// The inventory rows, blended over black below the local view.
    fn draw_items(&self, world: &World, out: &mut [u8]) {
        let h = self.grid[1] * self.unit[1];
        let (bx, by) = (self.border[0], self.border[1]);
        let out_w = self.size[0];
        // Inventory rows, drawn straight onto the (black) output below the local view.
        let mut items = Canvas {
            w: out_w,
            data: out,
        };
        let inv = world.player.inventory;
        for (index, &amount) in inv.iter().enumerate() {
            if amount < 1 {
                continue;
            }
            let cell = [index % self.view_x, index / self.view_x];
            let at = |f: f64, axis: usize| {
                (cell[axis] as f64 * self.unit[axis] as f64 + f * self.unit[axis] as f64) as usize
            };
            let (ix, iy) = (bx + at(0.1, 0), by + h + at(0.1, 1));
            items.draw_alpha(ix, iy, &self.items[index]);
            if (1..=9).contains(&amount) {
                let (dx, dy) = (bx + at(0.4, 0), by + h + at(0.4, 1));
                items.draw_alpha(dx, dy, &self.digits[amount as usize - 1]);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn copy_short_copies_exactly_the_slice() {
        let src: Vec<u8> = (1..=40).collect();
        for n in 0..=40 {
            let mut dst = vec![0u8; 48];
            copy_short(&mut dst[3..3 + n], &src[..n]);
            let mut want = vec![0u8; 48];
            want[3..3 + n].copy_from_slice(&src[..n]);
            assert_eq!(dst, want, "length {n}");
        }
    }

    #[test]
    fn pillow_pixel_formulas() {
        assert_eq!(luma(255, 255, 255), 255);
        assert_eq!(luma(255, 0, 0), 76);
        assert_eq!(luma(0, 255, 0), 150);
        assert_eq!(luma(0, 0, 255), 29);
        // Image.blend in float32: 100 + 0.4f * (200 - 100) = 140.00000596 -> 140.
        assert_eq!(blend(100, 200, 0.4), 140);
        assert_eq!(blend(200, 100, 0.4), 160);
    }

    #[test]
    fn day_and_sleep_lighting_of_one_pixel() {
        let day = Light::new(1.0, false);
        assert_eq!(day.apply([10, 20, 30], [10, 20, 30]), [10, 20, 30]);
        let dusk = Light::new(0.5, false);
        // 0.5*c + 0.5*(0.5*blend + 0.5*tint) with blend(L=255,255)=255.
        assert_eq!(
            dusk.apply([255, 255, 255], [255, 255, 255]),
            [191, 195, 207]
        );
        let asleep = Light::new(1.0, true);
        let [r, g, b] = asleep.apply([200, 100, 50], [200, 100, 50]);
        assert_eq!((r, g), (r, r));
        assert_eq!(b, r + 8);
    }

    #[test]
    fn frame_layout_and_border() {
        let textures = TextureSet::builtin();
        let mut env = crate::Env::new(crate::EnvConfig::default(), &textures).unwrap();
        let frame = env.reset().to_vec();
        assert_eq!(frame.len(), 64 * 64 * 3);
        // 64 = 9 * 7 + 1: the last pixel row and column are always black.
        for i in 0..64 {
            assert_eq!(&frame[(63 * 64 + i) * 3..(63 * 64 + i) * 3 + 3], &[0, 0, 0]);
            assert_eq!(&frame[(i * 64 + 63) * 3..(i * 64 + 63) * 3 + 3], &[0, 0, 0]);
        }
    }
}
