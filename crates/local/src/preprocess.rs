//! Image preprocessing identical to HF's Qwen2-VL processor (PIL backend): smart_resize with
//! ties-to-even rounding, Pillow bicubic, CLIP normalisation, temporal duplication and the
//! merged-block patch order; M-RoPE position ids with `rope_delta`.

use super::config::PreprocessorConfig;
use super::resize::resize_bicubic_rgb;
use super::LocalError;

/// One image ready for the vision tower.
#[derive(Clone, Debug, PartialEq)]
pub struct ImageInput {
    /// Patches `[t·h·w, C·T·P·P]`, row-major, merged-block order.
    pub pixels: Vec<f32>,
    /// Grid `(t, h, w)` in patches.
    pub grid: [usize; 3],
}

impl ImageInput {
    /// Number of text tokens this image becomes after the merger.
    pub fn merged_tokens(&self, merge: usize) -> usize {
        self.grid[0] * self.grid[1] * self.grid[2] / (merge * merge)
    }
}

/// HF `smart_resize`: sides become multiples of `factor` with the pixel count in range.
pub fn smart_resize(
    h: usize,
    w: usize,
    factor: usize,
    min_pixels: usize,
    max_pixels: usize,
) -> Result<(usize, usize), LocalError> {
    let (hf, wf, ff) = (h as f64, w as f64, factor as f64);
    if h == 0 || w == 0 || (h.max(w) as f64 / h.min(w) as f64) > 200.0 {
        return Err(LocalError::Image(format!(
            "image {w}x{h} has an aspect ratio over 200 (or a zero side)"
        )));
    }
    let mut hb = (hf / ff).round_ties_even() * ff;
    let mut wb = (wf / ff).round_ties_even() * ff;
    if hb * wb > max_pixels as f64 {
        let beta = (hf * wf / max_pixels as f64).sqrt();
        hb = ff.max((hf / beta / ff).floor() * ff);
        wb = ff.max((wf / beta / ff).floor() * ff);
    } else if hb * wb < min_pixels as f64 {
        let beta = (min_pixels as f64 / (hf * wf)).sqrt();
        hb = (hf * beta / ff).ceil() * ff;
        wb = (wf * beta / ff).ceil() * ff;
    }
    Ok((hb as usize, wb as usize))
}

/// Decode PNG (or any format the `image` crate was built with) into RGB u8.
pub fn decode_rgb(bytes: &[u8]) -> Result<(Vec<u8>, usize, usize), LocalError> {
    let img = image::load_from_memory(bytes)
        .map_err(|e| LocalError::Image(format!("cannot decode image: {e}")))?;
    let rgb = img.to_rgb8();
    let (w, h) = (rgb.width() as usize, rgb.height() as usize);
    Ok((rgb.into_raw(), w, h))
}

/// Preprocess an RGB u8 image `(w, h)` into patches and grid.
pub fn preprocess_rgb(
    rgb: &[u8],
    w: usize,
    h: usize,
    cfg: &PreprocessorConfig,
) -> Result<ImageInput, LocalError> {
    let (p, m, tp) = (cfg.patch_size, cfg.merge_size, cfg.temporal_patch_size);
    let (nh, nw) = smart_resize(h, w, p * m, cfg.min_pixels, cfg.max_pixels)?;
    let px = resize_bicubic_rgb(rgb, w, h, nw, nh);
    // As transformers: f32(u8 · rescale_factor in f64), then (x − mean) / std in f32.
    let mut planes = vec![0f32; 3 * nh * nw];
    for (i, chunk) in px.chunks_exact(3).enumerate() {
        for c in 0..3 {
            let x = (chunk[c] as f64 * cfg.rescale_factor) as f32;
            planes[c * nh * nw + i] = (x - cfg.image_mean[c]) / cfg.image_std[c];
        }
    }
    let (gh, gw) = (nh / p, nw / p);
    let dim = 3 * tp * p * p;
    let mut pixels = vec![0f32; gh * gw * dim];
    let mut row = 0;
    for bh in 0..gh / m {
        for bw in 0..gw / m {
            for mh in 0..m {
                for mw in 0..m {
                    let (y0, x0) = ((bh * m + mh) * p, (bw * m + mw) * p);
                    let out = &mut pixels[row * dim..(row + 1) * dim];
                    let mut o = 0;
                    for c in 0..3 {
                        // The image is repeated `tp` times along time.
                        for _t in 0..tp {
                            for y in 0..p {
                                let src = c * nh * nw + (y0 + y) * nw + x0;
                                out[o..o + p].copy_from_slice(&planes[src..src + p]);
                                o += p;
                            }
                        }
                    }
                    row += 1;
                }
            }
        }
    }
    Ok(ImageInput {
        pixels,
        grid: [1, gh, gw],
    })
}

/// Decode and preprocess image bytes.
pub fn preprocess_image(bytes: &[u8], cfg: &PreprocessorConfig) -> Result<ImageInput, LocalError> {
    let (rgb, w, h) = decode_rgb(bytes)?;
    preprocess_rgb(&rgb, w, h, cfg)
}

/// M-RoPE position ids `[3][S]` and `rope_delta` (= max position + 1 − S).
///
/// Text tokens count up on all three axes; a run of image tokens for grid `(t, h, w)` gets
/// `(p+t_i, p+h_i, p+w_i)` over the merged grid, after which `p` advances by the largest
/// merged side.
pub fn mrope_positions(
    ids: &[u32],
    grids: &[[usize; 3]],
    image_token_id: u32,
    merge: usize,
) -> Result<([Vec<i64>; 3], i64), LocalError> {
    let mut pos: [Vec<i64>; 3] = [Vec::new(), Vec::new(), Vec::new()];
    let mut cur: i64 = 0;
    let mut i = 0;
    let mut g = grids.iter();
    while i < ids.len() {
        if ids[i] != image_token_id {
            for a in pos.iter_mut() {
                a.push(cur);
            }
            cur += 1;
            i += 1;
            continue;
        }
        let grid = g
            .next()
            .ok_or_else(|| LocalError::Image("more image-token runs than images".into()))?;
        let (t, h, w) = (grid[0], grid[1] / merge, grid[2] / merge);
        let n = t * h * w;
        if ids.len() < i + n || ids[i..i + n].iter().any(|&x| x != image_token_id) {
            return Err(LocalError::Image(format!(
                "an image of grid {grid:?} needs {n} consecutive image tokens"
            )));
        }
        for tt in 0..t {
            for hh in 0..h {
                for ww in 0..w {
                    pos[0].push(cur + tt as i64);
                    pos[1].push(cur + hh as i64);
                    pos[2].push(cur + ww as i64);
                }
            }
        }
        cur += t.max(h).max(w) as i64;
        i += n;
    }
    if g.next().is_some() {
        return Err(LocalError::Image(
            "fewer image-token runs than images".into(),
        ));
    }
    let max = pos
        .iter()
        .flat_map(|a| a.iter().copied())
        .max()
        .unwrap_or(-1);
    let delta = max + 1 - ids.len() as i64;
    Ok((pos, delta))
}

/// Vision rotary (row, column) of every patch, in the processor's merged-block order.
pub fn vision_positions(grid: [usize; 3], merge: usize) -> Vec<(usize, usize)> {
    let [t, h, w] = grid;
    let mut out = Vec::with_capacity(t * h * w);
    for _ in 0..t {
        for bh in 0..h / merge {
            for bw in 0..w / merge {
                for mh in 0..merge {
                    for mw in 0..merge {
                        out.push((bh * merge + mh, bw * merge + mw));
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn smart_resize_rounds_ties_to_even() {
        // 70/28 = 2.5 -> 2 (ties to even), 90/28 = 3.21 -> 3: 90x70 (h x w) becomes 84x56.
        assert_eq!(smart_resize(90, 70, 28, 3136, 1_003_520).unwrap(), (84, 56));
        // 64/28 = 2.29 -> 2: frames of 64 px become 56 px.
        assert_eq!(smart_resize(64, 64, 28, 3136, 1_003_520).unwrap(), (56, 56));
        // 98/28 = 3.5 -> 4 (even).
        assert_eq!(
            smart_resize(98, 56, 28, 3136, 1_003_520).unwrap(),
            (112, 56)
        );
        // Too small: scaled up to reach min_pixels: beta = sqrt(3136/(20*20)) = 2.8, ceil(56/28)=2.
        assert_eq!(smart_resize(20, 20, 28, 3136, 1_003_520).unwrap(), (56, 56));
        // Too large: 1000x1000 with max 200_000: beta = sqrt(5), floor(447.2/28) = 15 -> 420.
        assert_eq!(
            smart_resize(1000, 1000, 28, 3136, 200_000).unwrap(),
            (420, 420)
        );
        assert!(smart_resize(10, 2100, 28, 3136, 1_003_520).is_err());
    }

    #[test]
    fn positions_for_two_by_two_image() {
        // ids: t t [4 image tokens from grid (1,4,4)] t ; hand-derived positions.
        let ids = [1, 2, 9, 9, 9, 9, 3];
        let (pos, delta) = mrope_positions(&ids, &[[1, 4, 4]], 9, 2).unwrap();
        assert_eq!(pos[0], vec![0, 1, 2, 2, 2, 2, 4]);
        assert_eq!(pos[1], vec![0, 1, 2, 2, 3, 3, 4]);
        assert_eq!(pos[2], vec![0, 1, 2, 3, 2, 3, 4]);
        assert_eq!(delta, 5 - 7);
        assert!(mrope_positions(&ids[..5], &[[1, 4, 4]], 9, 2).is_err());
    }

    #[test]
    fn vision_positions_in_block_order() {
        let p = vision_positions([1, 2, 4], 2);
        assert_eq!(
            p,
            vec![
                (0, 0),
                (0, 1),
                (1, 0),
                (1, 1),
                (0, 2),
                (0, 3),
                (1, 2),
                (1, 3)
            ]
        );
    }
}
