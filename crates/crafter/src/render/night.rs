//! Night frames' shading (crafter's `_noise` blended in with the vignette, then `_light` and
//! `_sleep`), pixel by pixel over planar channels in whole blocks the compiler vectorises.

/// Pixels a night frame shades at a time.
const B: usize = 64;

/// Per-frame constants of a night frame's shading (`_noise` blended in with the vignette,
/// then `_light`, then `_sleep`).
pub(super) struct NightShade {
    pub(super) amount: f64,
    pub(super) daylight: f64,
    pub(super) sleeping: bool,
    /// Height of the local view in pixels (the planes are [x][y] with this stride).
    pub(super) h: usize,
    /// Width of the local view in pixels.
    pub(super) w: usize,
    pub(super) border: [usize; 2],
    pub(super) out_w: usize,
}

impl NightShade {
    /// Shade the planar composed pixels into `out`, with AVX-512 or AVX2 where the CPU has it (the same
    /// IEEE operations in the same order, only more lanes at a time, so the same bytes).
    pub(super) fn apply(&self, planes: &[u8], vignette: &[f64], noise: &[f64], out: &mut [u8]) {
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512bw")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            // SAFETY: the CPU supports these (checked just above).
            return unsafe { self.apply_avx512(planes, vignette, noise, out) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2") {
            // SAFETY: the CPU supports AVX2 (checked just above).
            return unsafe { self.apply_avx2(planes, vignette, noise, out) };
        }
        self.apply_body(planes, vignette, noise, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2")]
    unsafe fn apply_avx2(&self, planes: &[u8], vignette: &[f64], noise: &[f64], out: &mut [u8]) {
        self.apply_body(planes, vignette, noise, out);
    }

    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx512f,avx512bw,avx512dq,avx512vl")]
    unsafe fn apply_avx512(&self, planes: &[u8], vignette: &[f64], noise: &[f64], out: &mut [u8]) {
        self.apply_body(planes, vignette, noise, out);
    }

    /// One block of `B` pixels, each packed as the little-endian bytes R, G, B, 0 of a u32; every
    /// loop has a constant trip count, so the compiler vectorises all of it. Every value is in
    /// 0..=255 before each truncation, so the unchecked conversions are exact.
    #[inline(always)]
    #[allow(clippy::needless_range_loop)] // index loops over fixed blocks vectorise well
    fn shade_block(
        &self,
        c: [[u8; B]; 3],
        vignette: &[f64; B],
        noise: &[f64; B],
        res: &mut [u32; B],
    ) {
        let (amount, dl) = (self.amount, self.daylight);
        let mut n = [[0i32; B]; 3];
        for ch in 0..3 {
            for j in 0..B {
                let mask = amount * vignette[j];
                let v = (1.0 - mask) * c[ch][j] as f64 + mask * noise[j];
                // SAFETY: v is a convex mix of values in [0, 127] and [0, 255].
                n[ch][j] = unsafe { v.to_int_unchecked::<i32>() };
            }
        }
        let mut l = [0i32; B];
        for j in 0..B {
            l[j] = (n[0][j] * 19595 + n[1][j] * 38470 + n[2][j] * 7471 + 0x8000) >> 16;
        }
        let mut px = [[0f64; B]; 3];
        for ch in 0..3 {
            let tint = [0.0, 16.0, 64.0][ch];
            for j in 0..B {
                let col = l[j] as f32 + 0.4f32 * (n[ch][j] - l[j]) as f32;
                // SAFETY: col lies between l and n, both in 0..=255.
                let col = unsafe { col.to_int_unchecked::<i32>() };
                let t = 0.5 * col as f64 + 0.5 * tint;
                px[ch][j] = dl * c[ch][j] as f64 + (1.0 - dl) * t;
            }
        }
        if self.sleeping {
            for j in 0..B {
                // SAFETY: px values are convex mixes of values in 0..=255.
                // (Indexing per channel: `px.map` would copy all three blocks per pixel.)
                let q = [0, 1, 2].map(|ch| unsafe { px[ch][j].to_int_unchecked::<i32>() });
                let g = ((q[0] * 19595 + q[1] * 38470 + q[2] * 7471 + 0x8000) >> 16) as f64;
                px[0][j] = 0.5 * g;
                px[1][j] = 0.5 * g;
                px[2][j] = 0.5 * g + 0.5 * 16.0;
            }
        }
        for j in 0..B {
            // SAFETY: as above, values are in 0..=255.
            let q = [0, 1, 2].map(|ch| unsafe { px[ch][j].to_int_unchecked::<i32>() } as u32);
            res[j] = q[0] | (q[1] << 8) | (q[2] << 16);
        }
    }

    /// Works on planar channels in the noise's [x][y] order, a block of `B` pixels at a time
    /// ([`NightShade::shade_block`]), then writes each block down the frame's columns.
    #[inline(always)]
    fn apply_body(&self, planes: &[u8], vignette: &[f64], noise: &[f64], out: &mut [u8]) {
        let n_px = planes.len() / 3;
        let h = self.h;
        let [bx, by] = self.border;
        let out_w = self.out_w;
        let (mut k0, mut x, mut y) = (0, 0, 0);
        let mut res = [0u32; B];
        while k0 < n_px {
            let len = B.min(n_px - k0);
            let block = |ch: usize| &planes[ch * n_px + k0..ch * n_px + k0 + len];
            if len == B {
                let full = |v: &[u8]| -> [u8; B] { v.try_into().expect("a whole block") };
                self.shade_block(
                    [full(block(0)), full(block(1)), full(block(2))],
                    vignette[k0..k0 + B].try_into().expect("a whole block"),
                    noise[k0..k0 + B].try_into().expect("a whole block"),
                    &mut res,
                );
            } else {
                // The last block, padded with zeros (whose results are not written).
                let mut c = [[0u8; B]; 3];
                let (mut vg, mut nz) = ([0f64; B], [0f64; B]);
                for (ch, c) in c.iter_mut().enumerate() {
                    c[..len].copy_from_slice(block(ch));
                }
                vg[..len].copy_from_slice(&vignette[k0..k0 + len]);
                nz[..len].copy_from_slice(&noise[k0..k0 + len]);
                self.shade_block(c, &vg, &nz, &mut res);
            }
            // Column runs: down one column of the frame, a row's stride apart. A pixel is stored
            // as 4 bytes, the 4th landing on the next pixel of its row, which is written later
            // (columns go left to right); the local view's last column, whose next byte is not
            // the view's, is stored as 3 bytes.
            let stride = out_w * 3;
            let mut j = 0;
            while j < len {
                let run = (h - y).min(len - j);
                let first = ((by + y) * out_w + bx + x) * 3;
                let pixels = &res[j..j + run];
                if x + 1 < self.w {
                    // Slice to the 4th byte of the last store: the next column's pixel.
                    let col = &mut out[first..first + (run - 1) * stride + 4];
                    let base = col.as_mut_ptr();
                    for (r, &p) in pixels.iter().enumerate() {
                        // SAFETY: r * stride + 4 <= (run - 1) * stride + 4 = col.len().
                        unsafe {
                            base.add(r * stride)
                                .cast::<[u8; 4]>()
                                .write_unaligned(p.to_le_bytes())
                        };
                    }
                } else {
                    let col = &mut out[first..first + (run - 1) * stride + 3];
                    for (r, &p) in pixels.iter().enumerate() {
                        col[r * stride..r * stride + 3].copy_from_slice(&p.to_le_bytes()[..3]);
                    }
                }
                j += run;
                y += run;
                if y == h {
                    y = 0;
                    x += 1;
                }
            }
            k0 += len;
        }
    }
}
