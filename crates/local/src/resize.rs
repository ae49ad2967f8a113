//! Pillow's bicubic resample for 8-bit RGB, reproduced operation for operation (separable
//! two-pass convolution, support scaled when downsampling, 22-bit fixed-point coefficients,
//! clipping to u8 after each pass), so resized frames equal what the HF PIL processor sees.

/// Fixed-point precision of Pillow's 8-bit resampler (32 - 8 - 2).
const PRECISION_BITS: u32 = 22;

fn bicubic(x: f64) -> f64 {
    const A: f64 = -0.5;
    let x = x.abs();
    if x < 1.0 {
        ((A + 2.0) * x - (A + 3.0)) * x * x + 1.0
    } else if x < 2.0 {
        (((x - 5.0) * x + 8.0) * x - 4.0) * A
    } else {
        0.0
    }
}

/// Per output index: first input index, tap count, fixed-point taps (length `ksize`).
struct Coeffs {
    ksize: usize,
    bounds: Vec<(usize, usize)>,
    taps: Vec<i32>,
}

fn precompute(in_size: usize, out_size: usize) -> Coeffs {
    let scale = in_size as f64 / out_size as f64;
    let filterscale = scale.max(1.0);
    let support = 2.0 * filterscale;
    let ksize = support.ceil() as usize * 2 + 1;
    let mut bounds = Vec::with_capacity(out_size);
    let mut taps = vec![0i32; out_size * ksize];
    let mut k = vec![0f64; ksize];
    for xx in 0..out_size {
        let center = (xx as f64 + 0.5) * scale;
        let ss = 1.0 / filterscale;
        // C casts truncate toward zero.
        let xmin = ((center - support + 0.5) as i64).max(0) as usize;
        let xmax = ((center + support + 0.5) as i64).min(in_size as i64) as usize - xmin;
        let mut ww = 0.0;
        for (x, kx) in k.iter_mut().enumerate().take(xmax) {
            let w = bicubic((x as f64 + xmin as f64 - center + 0.5) * ss);
            *kx = w;
            ww += w;
        }
        for (x, kx) in k.iter().enumerate().take(xmax) {
            let w = if ww != 0.0 { kx / ww } else { *kx };
            let f = w * (1u32 << PRECISION_BITS) as f64;
            taps[xx * ksize + x] = if f < 0.0 {
                (f - 0.5) as i32
            } else {
                (f + 0.5) as i32
            };
        }
        bounds.push((xmin, xmax));
    }
    Coeffs {
        ksize,
        bounds,
        taps,
    }
}

fn clip8(v: i32) -> u8 {
    if v >= (1 << PRECISION_BITS) << 8 {
        255
    } else if v <= 0 {
        0
    } else {
        (v >> PRECISION_BITS) as u8
    }
}

/// Resize interleaved RGB u8 `(w, h)` to `(new_w, new_h)` like `PIL.Image.resize(…, BICUBIC)`.
pub fn resize_bicubic_rgb(src: &[u8], w: usize, h: usize, new_w: usize, new_h: usize) -> Vec<u8> {
    if (w, h) == (new_w, new_h) {
        return src.to_vec();
    }
    let horiz = precompute(w, new_w);
    let vert = precompute(h, new_h);
    // Horizontal pass over the rows the vertical pass will read.
    let (mut cur, mut cur_w, mut cur_h) = (src.to_vec(), w, h);
    let mut vbounds = vert.bounds.clone();
    if new_w != w {
        let first = vbounds[0].0;
        let last = vbounds[new_h - 1].0 + vbounds[new_h - 1].1;
        for b in vbounds.iter_mut() {
            b.0 -= first;
        }
        let rows = last - first;
        let mut out = vec![0u8; rows * new_w * 3];
        for y in 0..rows {
            let row = &src[(y + first) * w * 3..(y + first + 1) * w * 3];
            for (xx, &(xmin, n)) in horiz.bounds.iter().enumerate() {
                let k = &horiz.taps[xx * horiz.ksize..xx * horiz.ksize + n];
                for c in 0..3 {
                    let mut ss: i32 = 1 << (PRECISION_BITS - 1);
                    for (x, &kx) in k.iter().enumerate() {
                        ss = ss.wrapping_add(row[(x + xmin) * 3 + c] as i32 * kx);
                    }
                    out[(y * new_w + xx) * 3 + c] = clip8(ss);
                }
            }
        }
        cur = out;
        cur_w = new_w;
        cur_h = rows;
    }
    if new_h == h {
        return cur;
    }
    let _ = cur_h;
    let mut out = vec![0u8; new_h * cur_w * 3];
    for (yy, &(ymin, n)) in vbounds.iter().enumerate() {
        let k = &vert.taps[yy * vert.ksize..yy * vert.ksize + n];
        for xx in 0..cur_w {
            for c in 0..3 {
                let mut ss: i32 = 1 << (PRECISION_BITS - 1);
                for (y, &ky) in k.iter().enumerate() {
                    ss = ss.wrapping_add(cur[((y + ymin) * cur_w + xx) * 3 + c] as i32 * ky);
                }
                out[(yy * cur_w + xx) * 3 + c] = clip8(ss);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn constant_image_stays_constant() {
        // Normalised taps sum to one, so a flat image is unchanged by any resize.
        let src = vec![77u8; 64 * 64 * 3];
        let out = resize_bicubic_rgb(&src, 64, 64, 56, 56);
        assert_eq!(out.len(), 56 * 56 * 3);
        assert!(out.iter().all(|&v| v == 77));
        let up = resize_bicubic_rgb(&src, 64, 64, 84, 112);
        assert!(up.iter().all(|&v| v == 77));
    }

    #[test]
    fn taps_match_hand_computed_bicubic() {
        // 2x upsampling of 4 px: output pixel 0 is centred at input x = 0.25, so it reads input
        // pixels 0 and 1 at distances 0.25 and 1.25; with a = -0.5 the kernel gives
        // k(0.25) = 0.8671875 and k(1.25) = -0.0703125 (worked by hand), normalised by their sum.
        let c = precompute(4, 8);
        assert_eq!(c.bounds[0], (0, 2));
        let sum = 0.8671875 - 0.0703125;
        let scale = (1u32 << 22) as f64;
        assert_eq!(c.taps[0], (0.8671875 / sum * scale + 0.5) as i32);
        assert_eq!(c.taps[1], (-0.0703125 / sum * scale - 0.5) as i32);
        // Downsampling 64 -> 56 widens the support to 2 * 64/56 input pixels.
        assert_eq!(precompute(64, 56).ksize, 7);
    }
}
