//! Textures resized to a cell (Pillow's accumulated NEAREST) and drawn onto a canvas
//! (crafter's `_draw` and `_draw_alpha`, with its float32 alpha blend).

use crate::textures::Texture;

/// A texture resized to one cell size, row-major `[y][x][c]`.
#[derive(Clone, Debug)]
pub(super) struct Sprite {
    w: usize,
    h: usize,
    channels: usize,
    data: Vec<u8>,
    /// For an RGBA sprite, per pixel what `_draw_alpha` does with it (empty for RGB).
    blend: Vec<Blend>,
    /// The first three channels as planes in column order, `[c][x][y]`: a night frame copies a
    /// bare material cell from here a column at a time. Made for material sprites only
    /// ([`Sprite::with_planar`]); empty for the others, which nothing reads that way.
    pub(super) planar: Vec<u8>,
}

/// How one RGBA pixel blends over the canvas, worked out once per sprite: with alpha 255 the
/// float32 blend `a*t + (1-a)*cur` is exactly `t` whatever lies below, with alpha 0 it is
/// exactly `cur`; only the other alphas need the arithmetic per frame.
#[derive(Clone, Copy, Debug)]
enum Blend {
    /// Alpha 255: these bytes, whatever the canvas holds.
    Opaque([u8; 3]),
    /// Alpha 0: the canvas stays as it is (`255 * (v / 255)` in float32 gives `v` back for
    /// every byte, which a test checks).
    Clear,
    /// Any other alpha: the blend per frame.
    Mixed,
}

/// `u8 as f32 / 255.0` for every byte, as `_draw_alpha` divides (the same float32 quotient).
fn unit(v: u8) -> f32 {
    v as f32 / 255.0
}

/// `_draw_alpha` of one channel: float32 blend of texture byte `t` (alpha `a`) over `cur`.
#[inline]
fn blend_channel(a: f32, t: u8, cur: u8) -> u8 {
    let blended = a * unit(t) + (1.0 - a) * unit(cur);
    (255.0f32 * blended) as u8
}

impl Sprite {
    fn new(w: usize, h: usize, channels: usize, data: Vec<u8>) -> Sprite {
        let blend = if channels == 4 {
            data.chunks_exact(4)
                .map(|px| match px[3] {
                    255 => Blend::Opaque([0, 1, 2].map(|c| blend_channel(1.0, px[c], 0))),
                    0 => Blend::Clear,
                    _ => Blend::Mixed,
                })
                .collect()
        } else {
            Vec::new()
        };
        Sprite {
            w,
            h,
            channels,
            data,
            blend,
            planar: Vec::new(),
        }
    }

    /// This sprite with its column-order planes made (material sprites, for night frames).
    pub(super) fn with_planar(mut self) -> Sprite {
        let (w, h, channels) = (self.w, self.h, self.channels);
        let mut planar = vec![0; 3 * w * h];
        for c in 0..3 {
            for x in 0..w {
                for y in 0..h {
                    planar[(c * w + x) * h + y] = self.data[(y * w + x) * channels + c];
                }
            }
        }
        self.planar = planar;
        self
    }
}

/// Pillow's NEAREST source index map for `src → dst` (accumulated float coordinate).
pub fn nearest_map(src: usize, dst: usize) -> Vec<usize> {
    let scale = src as f64 / dst as f64;
    let mut xo = scale * 0.5;
    let mut out = Vec::with_capacity(dst);
    for _ in 0..dst {
        out.push((xo as usize).min(src.saturating_sub(1)));
        xo += scale;
    }
    out
}

pub(super) fn resize(t: &Texture, w: usize, h: usize) -> Sprite {
    let (mx, my) = (nearest_map(t.width, w), nearest_map(t.height, h));
    let c = t.channels;
    let mut data = Vec::with_capacity(w * h * c);
    for &sy in &my {
        for &sx in &mx {
            let i = (sy * t.width + sx) * c;
            data.extend_from_slice(&t.data[i..i + c]);
        }
    }
    Sprite::new(w, h, c, data)
}

/// An RGB canvas, row-major `[y][x][3]`.
pub(super) struct Canvas<'a> {
    pub(super) w: usize,
    pub(super) data: &'a mut [u8],
}

impl Canvas<'_> {
    /// crafter's `_draw`: copy RGB, dropping alpha.
    pub(super) fn draw(&mut self, x0: usize, y0: usize, s: &Sprite) {
        for y in 0..s.h {
            let row = ((y0 + y) * self.w + x0) * 3;
            for x in 0..s.w {
                let src = (y * s.w + x) * s.channels;
                let dst = row + x * 3;
                self.data[dst..dst + 3].copy_from_slice(&s.data[src..src + 3]);
            }
        }
    }

    /// crafter's `_draw_alpha`: float32 alpha blend, truncated.
    pub(super) fn draw_alpha(&mut self, x0: usize, y0: usize, s: &Sprite) {
        if s.channels != 4 {
            return self.draw(x0, y0, s);
        }
        for y in 0..s.h {
            let row = ((y0 + y) * self.w + x0) * 3;
            for x in 0..s.w {
                let src = (y * s.w + x) * 4;
                let dst = &mut self.data[row + x * 3..row + x * 3 + 3];
                match s.blend[y * s.w + x] {
                    Blend::Opaque(rgb) => dst.copy_from_slice(&rgb),
                    Blend::Clear => {}
                    Blend::Mixed => {
                        let a = unit(s.data[src + 3]);
                        for (c, v) in dst.iter_mut().enumerate() {
                            *v = blend_channel(a, s.data[src + c], *v);
                        }
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_map_accumulates_like_pillow() {
        // Pillow accumulates the source coordinate; floor((i + 0.5) * 16 / 7) would give 8 at i=3.
        assert_eq!(nearest_map(16, 7), vec![1, 3, 5, 7, 10, 12, 14]);
        assert_eq!(nearest_map(16, 5), vec![1, 4, 8, 11, 14]);
        assert_eq!(nearest_map(16, 4), vec![2, 6, 10, 14]);
        assert_eq!(nearest_map(16, 16), (0..16).collect::<Vec<_>>());
    }

    #[test]
    fn opaque_and_clear_pixels_blend_like_the_float_formula() {
        // Every texture byte over every canvas byte, at alpha 255 and 0.
        for t in 0..=255u8 {
            let opaque = Sprite::new(1, 1, 4, vec![t, t, t, 255]);
            let clear = Sprite::new(1, 1, 4, vec![t, t, t, 0]);
            for cur in 0..=255u8 {
                for (sprite, a) in [(&opaque, 1.0), (&clear, 0.0)] {
                    let mut data = [cur; 3];
                    Canvas {
                        w: 1,
                        data: &mut data,
                    }
                    .draw_alpha(0, 0, sprite);
                    assert_eq!(data[0], blend_channel(a, t, cur), "t {t} cur {cur} a {a}");
                }
            }
        }
        // What lets `Blend::Clear` leave the canvas alone.
        assert!((0..=255u8).all(|v| blend_channel(0.0, 0, v) == v));
    }
}
