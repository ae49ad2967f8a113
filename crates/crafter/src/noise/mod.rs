//! Bit-exact twin of `opensimplex` 0.4.5.1 `OpenSimplex(seed).noise3(x, y, z)`.
//!
//! This is the 2014 KdotJPG "OpenSimplex" 3D kernel (`internals._noise3` and
//! `_extrapolate3`) with the permutation setup of `internals._init`. The
//! kernel is ported line by line in `f64`, keeping Python's left-to-right
//! evaluation order (`dx0 - 1 - SQUISH` is `(dx0 - 1) - SQUISH`, and
//! `2 - dx*dx - dy*dy - dz*dz` is `((2 - dx*dx) - dy*dy) - dz*dz`). Python
//! ints (lattice coordinates from `math.floor`) are `i64` here and are
//! converted to `f64` exactly where Python mixes them with floats. Rust does
//! not contract `a * b + c` into FMA, so the results are bit-identical.

mod cases;
#[cfg(target_arch = "x86_64")]
mod x8;

/// `STRETCH_CONSTANT3 = -1.0 / 6`.
const STRETCH: f64 = -1.0 / 6.0;
/// `SQUISH_CONSTANT3 = 1.0 / 3`.
const SQUISH: f64 = 1.0 / 3.0;
/// `2 * SQUISH_CONSTANT3` (Python evaluates the product first).
const SQUISH2: f64 = 2.0 * SQUISH;
/// `3 * SQUISH_CONSTANT3` (Python evaluates the product first).
const SQUISH3: f64 = 3.0 * SQUISH;
/// `NORM_CONSTANT3 = 103`.
const NORM: f64 = 103.0;
/// LCG multiplier used by `_init`.
const LCG_MUL: i64 = 6_364_136_223_846_793_005;
/// LCG increment used by `_init`.
const LCG_ADD: i64 = 1_442_695_040_888_963_407;

/// `GRADIENTS3` (24 gradient triples), stored as exact `f64` conversions of the int64 table.
const GRADIENTS3: [f64; 72] = [
    -11.0, 4.0, 4.0, -4.0, 11.0, 4.0, -4.0, 4.0, 11.0, //
    11.0, 4.0, 4.0, 4.0, 11.0, 4.0, 4.0, 4.0, 11.0, //
    -11.0, -4.0, 4.0, -4.0, -11.0, 4.0, -4.0, -4.0, 11.0, //
    11.0, -4.0, 4.0, 4.0, -11.0, 4.0, 4.0, -4.0, 11.0, //
    -11.0, 4.0, -4.0, -4.0, 11.0, -4.0, -4.0, 4.0, -11.0, //
    11.0, 4.0, -4.0, 4.0, 11.0, -4.0, 4.0, 4.0, -11.0, //
    -11.0, -4.0, -4.0, -4.0, -11.0, -4.0, -4.0, -4.0, -11.0, //
    11.0, -4.0, -4.0, 4.0, -11.0, -4.0, 4.0, -4.0, -11.0, //
];

/// Python `math.floor(v)` for a finite float in `i64` range (avoids a libm call).
#[inline(always)]
fn floor_i64(v: f64) -> i64 {
    let t = v as i64; // truncates toward zero
    if (t as f64) > v {
        t - 1
    } else {
        t
    }
}

/// Seeded 3D OpenSimplex noise generator (`opensimplex.OpenSimplex`).
#[derive(Clone, Debug)]
pub struct OpenSimplex {
    /// `perm`: a permutation of 0..=255.
    perm: [u8; 256],
    /// `perm_grad_index3`: `(perm[i] % 24) * 3`, an offset into `GRADIENTS3`.
    pgi3: [u8; 256],
    /// `perm % 24`, the gradient's number by final hash, for the eight-lane kernel.
    grad24: [u8; 256],
    /// Whether [`OpenSimplex::noise3_many`] may use the eight-lane AVX-512 kernel here.
    x8: bool,
}

impl OpenSimplex {
    /// `OpenSimplex(seed)`: builds `perm` and `perm_grad_index3` exactly like `internals._init`.
    pub fn new(seed: i64) -> Self {
        let mut perm = [0u8; 256];
        let mut pgi3 = [0u8; 256];
        let mut source = [0u8; 256];
        for (i, s) in source.iter_mut().enumerate() {
            *s = i as u8;
        }
        let step = |s: i64| s.wrapping_mul(LCG_MUL).wrapping_add(LCG_ADD);
        let mut s = step(step(step(seed)));
        for i in (0..256usize).rev() {
            s = step(s);
            // Python: int((seed + 31) % (i + 1)) on the non-wrapped sum, floor modulo.
            let r = (i128::from(s) + 31).rem_euclid(i as i128 + 1) as usize;
            perm[i] = source[r];
            pgi3[i] = (perm[i] % 24) * 3;
            source[r] = source[i];
        }
        OpenSimplex {
            perm,
            pgi3,
            grad24: perm.map(|p| p % 24),
            #[cfg(target_arch = "x86_64")]
            x8: x8::available(),
            #[cfg(not(target_arch = "x86_64"))]
            x8: false,
        }
    }

    /// `_extrapolate3`: gradient dot product at lattice point `(xsb, ysb, zsb)`.
    #[inline(always)]
    fn extrapolate(&self, xsb: i64, ysb: i64, zsb: i64, dx: f64, dy: f64, dz: f64) -> f64 {
        // `(a + b) & 0xFF` on two's-complement ints == u8 wrapping add of the low bytes.
        let p0 = self.perm[(xsb as u8) as usize];
        let p1 = self.perm[p0.wrapping_add(ysb as u8) as usize];
        let index = self.pgi3[p1.wrapping_add(zsb as u8) as usize] as usize;
        let g = &GRADIENTS3[index..index + 3];
        g[0] * dx + g[1] * dy + g[2] * dz
    }

    /// One vertex contribution: `attn = 2 - dx*dx - dy*dy - dz*dz; if attn > 0: value += attn^4 * ext`.
    #[allow(clippy::too_many_arguments)]
    #[inline(always)]
    fn contribute(&self, value: &mut f64, xsv: i64, ysv: i64, zsv: i64, dx: f64, dy: f64, dz: f64) {
        let mut attn = 2.0 - dx * dx - dy * dy - dz * dz;
        if attn > 0.0 {
            attn *= attn;
            *value += attn * attn * self.extrapolate(xsv, ysv, zsv, dx, dy, dz);
        }
    }

    /// `noise3(x, y, z)`: 3D OpenSimplex noise, bit-identical to opensimplex 0.4.5.1.
    pub fn noise3(&self, x: f64, y: f64, z: f64) -> f64 {
        // Place input coordinates on simplectic honeycomb.
        let stretch_offset = (x + y + z) * STRETCH;
        let xs = x + stretch_offset;
        let ys = y + stretch_offset;
        let zs = z + stretch_offset;

        // Floor to get super-cell origin (Python ints).
        let xsb = floor_i64(xs);
        let ysb = floor_i64(ys);
        let zsb = floor_i64(zs);

        // Skew out to get actual coordinates of rhombohedron origin.
        let squish_offset = (xsb + ysb + zsb) as f64 * SQUISH;
        let xb = xsb as f64 + squish_offset;
        let yb = ysb as f64 + squish_offset;
        let zb = zsb as f64 + squish_offset;

        // Honeycomb coordinates relative to rhombohedral origin.
        let xins = xs - xsb as f64;
        let yins = ys - ysb as f64;
        let zins = zs - zsb as f64;

        let in_sum = xins + yins + zins;

        // Positions relative to origin point.
        let dx0 = x - xb;
        let dy0 = y - yb;
        let dz0 = z - zb;

        let mut value = 0.0f64;

        let (dx_ext0, dy_ext0, dz_ext0, dx_ext1, dy_ext1, dz_ext1);
        let (xsv_ext0, ysv_ext0, zsv_ext0, xsv_ext1, ysv_ext1, zsv_ext1);

        if in_sum <= 1.0 {
            // Inside the tetrahedron (3-Simplex) at (0,0,0).
            let mut a_point = 0x01u8;
            let mut a_score = xins;
            let mut b_point = 0x02u8;
            let mut b_score = yins;
            if a_score >= b_score && zins > b_score {
                b_score = zins;
                b_point = 0x04;
            } else if a_score < b_score && zins > a_score {
                a_score = zins;
                a_point = 0x04;
            }

            let wins = 1.0 - in_sum;
            if wins > a_score || wins > b_score {
                // (0,0,0) is one of the closest two tetrahedral vertices.
                let c = if b_score > a_score { b_point } else { a_point };

                if (c & 0x01) == 0 {
                    xsv_ext0 = xsb - 1;
                    xsv_ext1 = xsb;
                    dx_ext0 = dx0 + 1.0;
                    dx_ext1 = dx0;
                } else {
                    xsv_ext0 = xsb + 1;
                    xsv_ext1 = xsv_ext0;
                    dx_ext0 = dx0 - 1.0;
                    dx_ext1 = dx_ext0;
                }

                if (c & 0x02) == 0 {
                    if (c & 0x01) == 0 {
                        ysv_ext0 = ysb;
                        dy_ext0 = dy0;
                        ysv_ext1 = ysb - 1;
                        dy_ext1 = dy0 + 1.0;
                    } else {
                        ysv_ext0 = ysb - 1;
                        dy_ext0 = dy0 + 1.0;
                        ysv_ext1 = ysb;
                        dy_ext1 = dy0;
                    }
                } else {
                    ysv_ext0 = ysb + 1;
                    ysv_ext1 = ysv_ext0;
                    dy_ext0 = dy0 - 1.0;
                    dy_ext1 = dy_ext0;
                }

                if (c & 0x04) == 0 {
                    zsv_ext0 = zsb;
                    zsv_ext1 = zsb - 1;
                    dz_ext0 = dz0;
                    dz_ext1 = dz0 + 1.0;
                } else {
                    zsv_ext0 = zsb + 1;
                    zsv_ext1 = zsv_ext0;
                    dz_ext0 = dz0 - 1.0;
                    dz_ext1 = dz_ext0;
                }
            } else {
                // (0,0,0) is not one of the closest two tetrahedral vertices.
                let c = a_point | b_point;

                if (c & 0x01) == 0 {
                    xsv_ext0 = xsb;
                    xsv_ext1 = xsb - 1;
                    dx_ext0 = dx0 - SQUISH2;
                    dx_ext1 = dx0 + 1.0 - SQUISH;
                } else {
                    xsv_ext0 = xsb + 1;
                    xsv_ext1 = xsv_ext0;
                    dx_ext0 = dx0 - 1.0 - SQUISH2;
                    dx_ext1 = dx0 - 1.0 - SQUISH;
                }

                if (c & 0x02) == 0 {
                    ysv_ext0 = ysb;
                    ysv_ext1 = ysb - 1;
                    dy_ext0 = dy0 - SQUISH2;
                    dy_ext1 = dy0 + 1.0 - SQUISH;
                } else {
                    ysv_ext0 = ysb + 1;
                    ysv_ext1 = ysv_ext0;
                    dy_ext0 = dy0 - 1.0 - SQUISH2;
                    dy_ext1 = dy0 - 1.0 - SQUISH;
                }

                if (c & 0x04) == 0 {
                    zsv_ext0 = zsb;
                    zsv_ext1 = zsb - 1;
                    dz_ext0 = dz0 - SQUISH2;
                    dz_ext1 = dz0 + 1.0 - SQUISH;
                } else {
                    zsv_ext0 = zsb + 1;
                    zsv_ext1 = zsv_ext0;
                    dz_ext0 = dz0 - 1.0 - SQUISH2;
                    dz_ext1 = dz0 - 1.0 - SQUISH;
                }
            }

            // Contribution (0,0,0)
            self.contribute(&mut value, xsb, ysb, zsb, dx0, dy0, dz0);

            // Contribution (1,0,0)
            let dx1 = dx0 - 1.0 - SQUISH;
            let dy1 = dy0 - 0.0 - SQUISH;
            let dz1 = dz0 - 0.0 - SQUISH;
            self.contribute(&mut value, xsb + 1, ysb, zsb, dx1, dy1, dz1);

            // Contribution (0,1,0)
            let dx2 = dx0 - 0.0 - SQUISH;
            let dy2 = dy0 - 1.0 - SQUISH;
            let dz2 = dz1;
            self.contribute(&mut value, xsb, ysb + 1, zsb, dx2, dy2, dz2);

            // Contribution (0,0,1)
            let dx3 = dx2;
            let dy3 = dy1;
            let dz3 = dz0 - 1.0 - SQUISH;
            self.contribute(&mut value, xsb, ysb, zsb + 1, dx3, dy3, dz3);
        } else if in_sum >= 2.0 {
            // Inside the tetrahedron (3-Simplex) at (1,1,1).
            let mut a_point = 0x06u8;
            let mut a_score = xins;
            let mut b_point = 0x05u8;
            let mut b_score = yins;
            if a_score <= b_score && zins < b_score {
                b_score = zins;
                b_point = 0x03;
            } else if a_score > b_score && zins < a_score {
                a_score = zins;
                a_point = 0x03;
            }

            let wins = 3.0 - in_sum;
            if wins < a_score || wins < b_score {
                // (1,1,1) is one of the closest two tetrahedral vertices.
                let c = if b_score < a_score { b_point } else { a_point };

                if (c & 0x01) != 0 {
                    xsv_ext0 = xsb + 2;
                    xsv_ext1 = xsb + 1;
                    dx_ext0 = dx0 - 2.0 - SQUISH3;
                    dx_ext1 = dx0 - 1.0 - SQUISH3;
                } else {
                    xsv_ext0 = xsb;
                    xsv_ext1 = xsb;
                    dx_ext0 = dx0 - SQUISH3;
                    dx_ext1 = dx_ext0;
                }

                if (c & 0x02) != 0 {
                    let ysv = ysb + 1;
                    let dy = dy0 - 1.0 - SQUISH3;
                    if (c & 0x01) != 0 {
                        ysv_ext0 = ysv;
                        dy_ext0 = dy;
                        ysv_ext1 = ysv + 1;
                        dy_ext1 = dy - 1.0;
                    } else {
                        ysv_ext0 = ysv + 1;
                        dy_ext0 = dy - 1.0;
                        ysv_ext1 = ysv;
                        dy_ext1 = dy;
                    }
                } else {
                    ysv_ext0 = ysb;
                    ysv_ext1 = ysb;
                    dy_ext0 = dy0 - SQUISH3;
                    dy_ext1 = dy_ext0;
                }

                if (c & 0x04) != 0 {
                    zsv_ext0 = zsb + 1;
                    zsv_ext1 = zsb + 2;
                    dz_ext0 = dz0 - 1.0 - SQUISH3;
                    dz_ext1 = dz0 - 2.0 - SQUISH3;
                } else {
                    zsv_ext0 = zsb;
                    zsv_ext1 = zsb;
                    dz_ext0 = dz0 - SQUISH3;
                    dz_ext1 = dz_ext0;
                }
            } else {
                // (1,1,1) is not one of the closest two tetrahedral vertices.
                let c = a_point & b_point;

                if (c & 0x01) != 0 {
                    xsv_ext0 = xsb + 1;
                    xsv_ext1 = xsb + 2;
                    dx_ext0 = dx0 - 1.0 - SQUISH;
                    dx_ext1 = dx0 - 2.0 - SQUISH2;
                } else {
                    xsv_ext0 = xsb;
                    xsv_ext1 = xsb;
                    dx_ext0 = dx0 - SQUISH;
                    dx_ext1 = dx0 - SQUISH2;
                }

                if (c & 0x02) != 0 {
                    ysv_ext0 = ysb + 1;
                    ysv_ext1 = ysb + 2;
                    dy_ext0 = dy0 - 1.0 - SQUISH;
                    dy_ext1 = dy0 - 2.0 - SQUISH2;
                } else {
                    ysv_ext0 = ysb;
                    ysv_ext1 = ysb;
                    dy_ext0 = dy0 - SQUISH;
                    dy_ext1 = dy0 - SQUISH2;
                }

                if (c & 0x04) != 0 {
                    zsv_ext0 = zsb + 1;
                    zsv_ext1 = zsb + 2;
                    dz_ext0 = dz0 - 1.0 - SQUISH;
                    dz_ext1 = dz0 - 2.0 - SQUISH2;
                } else {
                    zsv_ext0 = zsb;
                    zsv_ext1 = zsb;
                    dz_ext0 = dz0 - SQUISH;
                    dz_ext1 = dz0 - SQUISH2;
                }
            }

            // Contribution (1,1,0)
            let dx3 = dx0 - 1.0 - SQUISH2;
            let dy3 = dy0 - 1.0 - SQUISH2;
            let dz3 = dz0 - 0.0 - SQUISH2;
            self.contribute(&mut value, xsb + 1, ysb + 1, zsb, dx3, dy3, dz3);

            // Contribution (1,0,1)
            let dx2 = dx3;
            let dy2 = dy0 - 0.0 - SQUISH2;
            let dz2 = dz0 - 1.0 - SQUISH2;
            self.contribute(&mut value, xsb + 1, ysb, zsb + 1, dx2, dy2, dz2);

            // Contribution (0,1,1)
            let dx1 = dx0 - 0.0 - SQUISH2;
            let dy1 = dy3;
            let dz1 = dz2;
            self.contribute(&mut value, xsb, ysb + 1, zsb + 1, dx1, dy1, dz1);

            // Contribution (1,1,1)
            let dx = dx0 - 1.0 - SQUISH3;
            let dy = dy0 - 1.0 - SQUISH3;
            let dz = dz0 - 1.0 - SQUISH3;
            self.contribute(&mut value, xsb + 1, ysb + 1, zsb + 1, dx, dy, dz);
        } else {
            // Inside the octahedron (Rectified 3-Simplex) in between.
            let a_score;
            let mut a_point;
            let mut a_is_further_side;
            let b_score;
            let mut b_point;
            let mut b_is_further_side;

            // Decide between point (0,0,1) and (1,1,0) as closest.
            let p1 = xins + yins;
            if p1 > 1.0 {
                a_score = p1 - 1.0;
                a_point = 0x03u8;
                a_is_further_side = true;
            } else {
                a_score = 1.0 - p1;
                a_point = 0x04u8;
                a_is_further_side = false;
            }

            // Decide between point (0,1,0) and (1,0,1) as closest.
            let p2 = xins + zins;
            if p2 > 1.0 {
                b_score = p2 - 1.0;
                b_point = 0x05u8;
                b_is_further_side = true;
            } else {
                b_score = 1.0 - p2;
                b_point = 0x02u8;
                b_is_further_side = false;
            }

            // The closest of (1,0,0) and (0,1,1) replaces the furthest of the two above, if closer.
            let p3 = yins + zins;
            if p3 > 1.0 {
                let score = p3 - 1.0;
                if a_score <= b_score && a_score < score {
                    a_point = 0x06;
                    a_is_further_side = true;
                } else if a_score > b_score && b_score < score {
                    b_point = 0x06;
                    b_is_further_side = true;
                }
            } else {
                let score = 1.0 - p3;
                if a_score <= b_score && a_score < score {
                    a_point = 0x01;
                    a_is_further_side = false;
                } else if a_score > b_score && b_score < score {
                    b_point = 0x01;
                    b_is_further_side = false;
                }
            }

            if a_is_further_side == b_is_further_side {
                if a_is_further_side {
                    // Both closest points on (1,1,1) side; one extra point is (1,1,1).
                    dx_ext0 = dx0 - 1.0 - SQUISH3;
                    dy_ext0 = dy0 - 1.0 - SQUISH3;
                    dz_ext0 = dz0 - 1.0 - SQUISH3;
                    xsv_ext0 = xsb + 1;
                    ysv_ext0 = ysb + 1;
                    zsv_ext0 = zsb + 1;

                    // Other extra point is based on the shared axis.
                    let c = a_point & b_point;
                    if (c & 0x01) != 0 {
                        dx_ext1 = dx0 - 2.0 - SQUISH2;
                        dy_ext1 = dy0 - SQUISH2;
                        dz_ext1 = dz0 - SQUISH2;
                        xsv_ext1 = xsb + 2;
                        ysv_ext1 = ysb;
                        zsv_ext1 = zsb;
                    } else if (c & 0x02) != 0 {
                        dx_ext1 = dx0 - SQUISH2;
                        dy_ext1 = dy0 - 2.0 - SQUISH2;
                        dz_ext1 = dz0 - SQUISH2;
                        xsv_ext1 = xsb;
                        ysv_ext1 = ysb + 2;
                        zsv_ext1 = zsb;
                    } else {
                        dx_ext1 = dx0 - SQUISH2;
                        dy_ext1 = dy0 - SQUISH2;
                        dz_ext1 = dz0 - 2.0 - SQUISH2;
                        xsv_ext1 = xsb;
                        ysv_ext1 = ysb;
                        zsv_ext1 = zsb + 2;
                    }
                } else {
                    // Both closest points on (0,0,0) side; one extra point is (0,0,0).
                    dx_ext0 = dx0;
                    dy_ext0 = dy0;
                    dz_ext0 = dz0;
                    xsv_ext0 = xsb;
                    ysv_ext0 = ysb;
                    zsv_ext0 = zsb;

                    // Other extra point is based on the omitted axis.
                    let c = a_point | b_point;
                    if (c & 0x01) == 0 {
                        dx_ext1 = dx0 + 1.0 - SQUISH;
                        dy_ext1 = dy0 - 1.0 - SQUISH;
                        dz_ext1 = dz0 - 1.0 - SQUISH;
                        xsv_ext1 = xsb - 1;
                        ysv_ext1 = ysb + 1;
                        zsv_ext1 = zsb + 1;
                    } else if (c & 0x02) == 0 {
                        dx_ext1 = dx0 - 1.0 - SQUISH;
                        dy_ext1 = dy0 + 1.0 - SQUISH;
                        dz_ext1 = dz0 - 1.0 - SQUISH;
                        xsv_ext1 = xsb + 1;
                        ysv_ext1 = ysb - 1;
                        zsv_ext1 = zsb + 1;
                    } else {
                        dx_ext1 = dx0 - 1.0 - SQUISH;
                        dy_ext1 = dy0 - 1.0 - SQUISH;
                        dz_ext1 = dz0 + 1.0 - SQUISH;
                        xsv_ext1 = xsb + 1;
                        ysv_ext1 = ysb + 1;
                        zsv_ext1 = zsb - 1;
                    }
                }
            } else {
                // One point on (0,0,0) side, one point on (1,1,1) side.
                let (c1, c2) = if a_is_further_side {
                    (a_point, b_point)
                } else {
                    (b_point, a_point)
                };

                // One contribution is a permutation of (1,1,-1).
                if (c1 & 0x01) == 0 {
                    dx_ext0 = dx0 + 1.0 - SQUISH;
                    dy_ext0 = dy0 - 1.0 - SQUISH;
                    dz_ext0 = dz0 - 1.0 - SQUISH;
                    xsv_ext0 = xsb - 1;
                    ysv_ext0 = ysb + 1;
                    zsv_ext0 = zsb + 1;
                } else if (c1 & 0x02) == 0 {
                    dx_ext0 = dx0 - 1.0 - SQUISH;
                    dy_ext0 = dy0 + 1.0 - SQUISH;
                    dz_ext0 = dz0 - 1.0 - SQUISH;
                    xsv_ext0 = xsb + 1;
                    ysv_ext0 = ysb - 1;
                    zsv_ext0 = zsb + 1;
                } else {
                    dx_ext0 = dx0 - 1.0 - SQUISH;
                    dy_ext0 = dy0 - 1.0 - SQUISH;
                    dz_ext0 = dz0 + 1.0 - SQUISH;
                    xsv_ext0 = xsb + 1;
                    ysv_ext0 = ysb + 1;
                    zsv_ext0 = zsb - 1;
                }

                // One contribution is a permutation of (0,0,2).
                let mut dx = dx0 - SQUISH2;
                let mut dy = dy0 - SQUISH2;
                let mut dz = dz0 - SQUISH2;
                let mut xsv = xsb;
                let mut ysv = ysb;
                let mut zsv = zsb;
                if (c2 & 0x01) != 0 {
                    dx -= 2.0;
                    xsv += 2;
                } else if (c2 & 0x02) != 0 {
                    dy -= 2.0;
                    ysv += 2;
                } else {
                    dz -= 2.0;
                    zsv += 2;
                }
                dx_ext1 = dx;
                dy_ext1 = dy;
                dz_ext1 = dz;
                xsv_ext1 = xsv;
                ysv_ext1 = ysv;
                zsv_ext1 = zsv;
            }

            // Contribution (1,0,0)
            let dx1 = dx0 - 1.0 - SQUISH;
            let dy1 = dy0 - 0.0 - SQUISH;
            let dz1 = dz0 - 0.0 - SQUISH;
            self.contribute(&mut value, xsb + 1, ysb, zsb, dx1, dy1, dz1);

            // Contribution (0,1,0)
            let dx2 = dx0 - 0.0 - SQUISH;
            let dy2 = dy0 - 1.0 - SQUISH;
            let dz2 = dz1;
            self.contribute(&mut value, xsb, ysb + 1, zsb, dx2, dy2, dz2);

            // Contribution (0,0,1)
            let dx3 = dx2;
            let dy3 = dy1;
            let dz3 = dz0 - 1.0 - SQUISH;
            self.contribute(&mut value, xsb, ysb, zsb + 1, dx3, dy3, dz3);

            // Contribution (1,1,0)
            let dx4 = dx0 - 1.0 - SQUISH2;
            let dy4 = dy0 - 1.0 - SQUISH2;
            let dz4 = dz0 - 0.0 - SQUISH2;
            self.contribute(&mut value, xsb + 1, ysb + 1, zsb, dx4, dy4, dz4);

            // Contribution (1,0,1)
            let dx5 = dx4;
            let dy5 = dy0 - 0.0 - SQUISH2;
            let dz5 = dz0 - 1.0 - SQUISH2;
            self.contribute(&mut value, xsb + 1, ysb, zsb + 1, dx5, dy5, dz5);

            // Contribution (0,1,1)
            let dx6 = dx0 - 0.0 - SQUISH2;
            let dy6 = dy4;
            let dz6 = dz5;
            self.contribute(&mut value, xsb, ysb + 1, zsb + 1, dx6, dy6, dz6);
        }

        // First extra vertex
        self.contribute(
            &mut value, xsv_ext0, ysv_ext0, zsv_ext0, dx_ext0, dy_ext0, dz_ext0,
        );

        // Second extra vertex
        self.contribute(
            &mut value, xsv_ext1, ysv_ext1, zsv_ext1, dx_ext1, dy_ext1, dz_ext1,
        );

        value / NORM
    }
}

impl OpenSimplex {
    /// `out[i] = noise3(x[i], y[i], z)`: the same bits as one [`OpenSimplex::noise3`] call per
    /// point, eight points per call of the AVX-512 kernel where the CPU has it.
    ///
    /// # Panics
    /// If the three slices differ in length.
    pub fn noise3_many(&self, x: &[f64], y: &[f64], z: f64, out: &mut [f64]) {
        assert!(
            x.len() == y.len() && y.len() == out.len(),
            "noise3_many: lengths differ"
        );
        let mut done = 0;
        #[cfg(target_arch = "x86_64")]
        if self.x8 {
            // The kernel's lattice coordinates are `i32`: points beyond ±1e9 (or not finite)
            // take the scalar kernel, whose `i64` floor the reference has. One pass over all
            // the points first (loops the compiler vectorises); blocks of 32 are checked only
            // if some point is out of range.
            let fits = |v: &f64| v.abs() <= 1e9;
            let mut all_fit = fits(&z);
            for v in x {
                all_fit &= fits(v);
            }
            for v in y {
                all_fit &= fits(v);
            }
            if all_fit {
                // SAFETY: `x8` is set only when the CPU has what the kernel needs, and every
                // coordinate fits its lattice (checked just above).
                unsafe { x8::noise3_many_x8(self, x, y, z, out) };
                return;
            }
            for ((x, y), out) in x.chunks(32).zip(y.chunks(32)).zip(out.chunks_mut(32)) {
                if fits(&z) && x.iter().all(fits) && y.iter().all(fits) {
                    // SAFETY: as above, for this block's coordinates.
                    unsafe { x8::noise3_many_x8(self, x, y, z, out) };
                } else {
                    for ((o, &x), &y) in out.iter_mut().zip(x).zip(y) {
                        *o = self.noise3(x, y, z);
                    }
                }
            }
            done = out.len();
        }
        for i in done..out.len() {
            out[i] = self.noise3(x[i], y[i], z);
        }
    }

    /// Whether [`OpenSimplex::noise3_many`] runs the eight-lane kernel on this CPU.
    pub fn has_x8(&self) -> bool {
        self.x8
    }
}

#[cfg(test)]
mod tests;
