//! The 2014 kernel's choices as data: which eight vertex slots a point adds, in which order,
//! with which expressions, so that a kernel without data-dependent branches (`super::x8`)
//! can add the same terms in the same order as [`OpenSimplex::noise3`], bit for bit.
//!
//! The reference walks a tree of comparisons to pick, for each point, the lattice vertices
//! whose contributions it adds (four or six around the point, then two "extra" ones) and the
//! expression each vertex's offsets are computed with. Here those comparisons are folded into
//! one small integer, the *case* ([`case_index`]: 24 of `0..72` are reachable), and a table
//! built at compile time from the reference's branches lists each case's eight slots:
//!
//! - every offset is `((d0 - a) - b) - c` per axis, which covers each expression the reference
//!   writes (`dx0 - 1 - SQUISH`, `dx0 + 1` = `dx0 - (-1)`, the `(dy0 - 1 - SQUISH3) - 1` of the
//!   (1,1,1) tetrahedron, the `(dx0 - SQUISH2) - 2` of the octahedron), with `x - 0.0 == x`;
//! - a case with four base vertices fills slots 4 and 5 with a vertex eight units away, whose
//!   `attn` is negative, so it adds `+0.0`: an exact no-op, since the running sum starts at
//!   `+0.0` and can never be `-0.0`.

use super::{SQUISH, SQUISH2, SQUISH3};

/// One vertex slot of a case: lattice offset and the constants of its offset expression.
#[derive(Clone, Copy)]
pub(super) struct Slot {
    /// Lattice offset from `(xsb, ysb, zsb)`.
    pub(super) o: [i8; 3],
    /// `a` per axis in `((d0 - a) - b) - c`.
    pub(super) a: [i8; 3],
    /// `b = K[k]`, shared by the three axes (`k` is the vertex's coordinate sum).
    pub(super) k: u8,
    /// `c` per axis (non-zero only for the two three-step expressions of the reference).
    pub(super) c: [i8; 3],
}

/// Cases are indexed `0..72` (see [`case_index`]); unreachable ones stay all-inactive.
pub(super) const CASES: usize = 72;

/// `k * SQUISH` as the reference writes it (`SQUISH2`, `SQUISH3` are Python's products).
pub(super) const K: [f64; 4] = [0.0, SQUISH, SQUISH2, SQUISH3];

/// A slot that adds nothing: eight units away on every axis, so `attn < 0` (its offset equals
/// its `a`, as every base slot's does, which the SIMD kernel relies on).
const INACTIVE: Slot = Slot {
    o: [8; 3],
    a: [8; 3],
    k: 0,
    c: [0; 3],
};

/// A vertex at `o` with the plain expression `(d0 - o) - k * SQUISH`, `k` the sum of `o`.
const fn vertex(o: [i8; 3]) -> Slot {
    Slot {
        o,
        a: o,
        k: (o[0] + o[1] + o[2]) as u8,
        c: [0; 3],
    }
}

/// A vertex whose `axis` uses the three-step expression `((d0 - a) - b) - c` with `a` and `c`
/// given (the other axes stay plain).
const fn vertex3(o: [i8; 3], axis: usize, a: i8, c: i8) -> Slot {
    let mut s = vertex(o);
    s.a[axis] = a;
    s.c[axis] = c;
    s
}

/// The base vertices of each region, in the reference's order of addition.
const R1_BASE: [[i8; 3]; 4] = [[0, 0, 0], [1, 0, 0], [0, 1, 0], [0, 0, 1]];
const R2_BASE: [[i8; 3]; 4] = [[1, 1, 0], [1, 0, 1], [0, 1, 1], [1, 1, 1]];
const R3_BASE: [[i8; 3]; 6] = [
    [1, 0, 0],
    [0, 1, 0],
    [0, 0, 1],
    [1, 1, 0],
    [1, 0, 1],
    [0, 1, 1],
];

/// Bit `i` of `c` as 0/1.
const fn bit(c: usize, i: usize) -> i8 {
    ((c >> i) & 1) as i8
}

/// A case: four base vertices, two inactive slots, then the two extra vertices.
const fn tetra(base: &[[i8; 3]; 4], e0: Slot, e1: Slot) -> [Slot; 8] {
    [
        vertex(base[0]),
        vertex(base[1]),
        vertex(base[2]),
        vertex(base[3]),
        INACTIVE,
        INACTIVE,
        e0,
        e1,
    ]
}

/// A case of the octahedron: six base vertices, then the two extra vertices.
const fn octa(e0: Slot, e1: Slot) -> [Slot; 8] {
    [
        vertex(R3_BASE[0]),
        vertex(R3_BASE[1]),
        vertex(R3_BASE[2]),
        vertex(R3_BASE[3]),
        vertex(R3_BASE[4]),
        vertex(R3_BASE[5]),
        e0,
        e1,
    ]
}

/// The unit vector on the lowest set bit of `c` (1, 2 or 4), scaled by `v`.
const fn on_axis(c: usize, v: i8) -> [i8; 3] {
    if c & 1 != 0 {
        [v, 0, 0]
    } else if c & 2 != 0 {
        [0, v, 0]
    } else {
        [0, 0, v]
    }
}

/// Axis index of the lowest set bit of `c`.
const fn axis_of(c: usize) -> usize {
    if c & 1 != 0 {
        0
    } else if c & 2 != 0 {
        1
    } else {
        2
    }
}

/// `(1, 1, 1)` with `-1` on the lowest axis whose bit is clear in `c`.
const fn minus_one_on_clear(c: usize) -> [i8; 3] {
    if c & 1 == 0 {
        [-1, 1, 1]
    } else if c & 2 == 0 {
        [1, -1, 1]
    } else {
        [1, 1, -1]
    }
}

/// The case table, built from the reference's branches.
pub(super) static TABLE: [[Slot; 8]; CASES] = build();

const fn build() -> [[Slot; 8]; CASES] {
    let mut t = [[INACTIVE; 8]; CASES];
    let mut c = 1;
    while c < 7 {
        let (x, y, z) = (bit(c, 0), bit(c, 1), bit(c, 2));
        let single = c == 1 || c == 2 || c == 4;
        // Region 1, the tetrahedron at (0,0,0): cases 1..=6.
        t[c] = if single {
            // (0,0,0) is one of the two closest vertices; `c` is the closer of a and b.
            // x: set -> (1, 1), clear -> (-1, 0); y: set -> (1, 1), clear -> (0, -1) when x is
            // clear too, else (-1, 0); z: set -> (1, 1), clear -> (0, -1).
            let (x0, x1) = if x == 1 { (1, 1) } else { (-1, 0) };
            let (y0, y1) = if y == 1 {
                (1, 1)
            } else if x == 0 {
                (0, -1)
            } else {
                (-1, 0)
            };
            let (z0, z1) = if z == 1 { (1, 1) } else { (0, -1) };
            tetra(&R1_BASE, vertex([x0, y0, z0]), vertex([x1, y1, z1]))
        } else {
            // Not one of them; `c = a | b`: set -> (1, 1), clear -> (0, -1).
            let e1 = [
                if x == 1 { 1 } else { -1 },
                if y == 1 { 1 } else { -1 },
                if z == 1 { 1 } else { -1 },
            ];
            tetra(&R1_BASE, vertex([x, y, z]), vertex(e1))
        };
        // Region 2, the tetrahedron at (1,1,1): cases 9..=14.
        t[8 + c] = if single {
            // (1,1,1) is not one of the two closest; `c = a & b`: set -> (1, 2), clear -> (0, 0).
            tetra(&R2_BASE, vertex([x, y, z]), vertex([2 * x, 2 * y, 2 * z]))
        } else {
            // (1,1,1) is one of them; `c` is the closer of a and b (two bits set).
            // x: set -> (2, 1); y: set -> (1, 2) when x is set, else (2, 1), the 2 written
            // `((dy0 - 1) - SQUISH3) - 1`; z: set -> (1, 2); clear axes -> (0, 0).
            let (x0, x1) = if x == 1 { (2, 1) } else { (0, 0) };
            let (z0, z1) = if z == 1 { (1, 2) } else { (0, 0) };
            if y == 1 && x == 1 {
                tetra(&R2_BASE, vertex([x0, 1, z0]), vertex3([x1, 2, z1], 1, 1, 1))
            } else if y == 1 {
                tetra(&R2_BASE, vertex3([x0, 2, z0], 1, 1, 1), vertex([x1, 1, z1]))
            } else {
                tetra(&R2_BASE, vertex([x0, 0, z0]), vertex([x1, 0, z1]))
            }
        };
        if single {
            // Region 3, both closest points on the (1,1,1) side: `c = a & b` (one bit).
            t[16 + c] = octa(vertex([1, 1, 1]), vertex(on_axis(c, 2)));
        } else {
            // Region 3, both on the (0,0,0) side: `c = a | b` (two bits).
            t[24 + c] = octa(vertex([0, 0, 0]), vertex(minus_one_on_clear(c)));
        }
        c += 1;
    }
    // Region 3, one closest point on each side: `m` the bit missing from the far side's point,
    // `c2` the near side's point; the (0,0,2)-like vertex is written `(d0 - SQUISH2) - 2`.
    let mut m = 1;
    while m <= 4 {
        let mut c2 = 1;
        while c2 <= 4 {
            // The near point never lies on the axis the far one lacks (m == c2): those three
            // combinations are left out, and the tests see every case that is built.
            if m != c2 {
                t[32 + m + 8 * c2] = octa(
                    vertex(minus_one_on_clear(7 ^ m)),
                    vertex3(on_axis(c2, 2), axis_of(c2), 0, 2),
                );
            }
            c2 *= 2;
        }
        m *= 2;
    }
    t
}

/// `a` if `t` else `b`, for floats, written so that it compiles to a select.
#[cfg(test)]
#[inline(always)]
fn pick(t: bool, a: f64, b: f64) -> f64 {
    if t {
        a
    } else {
        b
    }
}

/// `a` if `t` else `b`, for small integers.
#[cfg(test)]
#[inline(always)]
fn pick_u(t: bool, a: usize, b: usize) -> usize {
    let m = (t as usize).wrapping_neg();
    (a & m) | (b & !m)
}

/// The case of a point from its honeycomb coordinates: the reference's comparisons, all
/// evaluated, combined with selects (the scalar model of `super::x8`'s, for the tests).
#[cfg(test)]
#[inline(always)]
pub(super) fn case_index(xi: f64, yi: f64, zi: f64, in_sum: f64) -> usize {
    // Region 1 (`in_sum <= 1`): a = (xins, 1), b = (yins, 2), z may replace one of them.
    let t1 = (xi >= yi) & (zi > yi);
    let t2 = (xi < yi) & (zi > xi);
    let b_s = pick(t1, zi, yi);
    let b_p = pick_u(t1, 4, 2);
    let a_s = pick(t2, zi, xi);
    let a_p = pick_u(t2, 4, 1);
    let w = 1.0 - in_sum;
    let near = (w > a_s) | (w > b_s);
    let closer = pick_u(b_s > a_s, b_p, a_p);
    let r1 = pick_u(near, closer, a_p | b_p);

    // Region 2 (`in_sum >= 2`): a = (xins, 6), b = (yins, 5), z may replace one of them.
    let u1 = (xi <= yi) & (zi < yi);
    let u2 = (xi > yi) & (zi < xi);
    let b_s = pick(u1, zi, yi);
    let b_p = pick_u(u1, 3, 5);
    let a_s = pick(u2, zi, xi);
    let a_p = pick_u(u2, 3, 6);
    let w = 3.0 - in_sum;
    let near = (w < a_s) | (w < b_s);
    let closer = pick_u(b_s < a_s, b_p, a_p);
    let r2 = 8 + pick_u(near, closer, a_p & b_p);

    // Region 3, the octahedron: scores are not updated when a point is replaced.
    let p1 = xi + yi;
    let af0 = p1 > 1.0;
    let a_s = pick(af0, p1 - 1.0, 1.0 - p1);
    let a_p0 = pick_u(af0, 3, 4);
    let p2 = xi + zi;
    let bf0 = p2 > 1.0;
    let b_s = pick(bf0, p2 - 1.0, 1.0 - p2);
    let b_p0 = pick_u(bf0, 5, 2);
    let p3 = yi + zi;
    let far3 = p3 > 1.0;
    let score = pick(far3, p3 - 1.0, 1.0 - p3);
    let q = pick_u(far3, 6, 1);
    let ra = (a_s <= b_s) & (a_s < score);
    let rb = (a_s > b_s) & (b_s < score);
    let a_p = pick_u(ra, q, a_p0);
    let af = if ra { far3 } else { af0 };
    let b_p = pick_u(rb, q, b_p0);
    let bf = if rb { far3 } else { bf0 };
    let same = pick_u(af, 16 + (a_p & b_p), 24 + (a_p | b_p));
    let c1 = pick_u(af, a_p, b_p);
    let c2 = pick_u(af, b_p, a_p);
    let mixed = 32 + (c1 ^ 7) + 8 * c2;
    let r3 = pick_u(af == bf, same, mixed);

    pick_u(in_sum <= 1.0, r1, pick_u(in_sum >= 2.0, r2, r3))
}

/// The reachable cases, numbered `0..24` in the order of their index: `COMPACT[case]` (255
/// where unreachable) and the count.
pub(super) const COMPACT: ([u8; 128], usize) = compact();

const fn compact() -> ([u8; 128], usize) {
    let mut map = [255u8; 128];
    let mut n = 0;
    let mut i = 0;
    while i < CASES {
        // A reachable case has its first slot set (an unreachable one is all inactive).
        if TABLE[i][0].a[0] != 8 {
            map[i] = n as u8;
            n += 1;
        }
        i += 1;
    }
    (map, n)
}

/// Per slot, the slot's constants by compact case, as bytes the SIMD kernel looks up in a
/// register: `[ox, oy, oz, ax, ay, az, cx, cy, cz, k]`, each 64 bytes (24 used). In the six
/// base slots `a == o` and `c == 0` for every case (tested), so the kernel reads only `o`
/// and `k` there.
pub(super) static SLOT_BYTES: [[[u8; 64]; 10]; 8] = slot_bytes();

const fn slot_bytes() -> [[[u8; 64]; 10]; 8] {
    let mut out = [[[0u8; 64]; 10]; 8];
    let mut i = 0;
    while i < CASES {
        let id = COMPACT.0[i];
        if id != 255 {
            let mut s = 0;
            while s < 8 {
                let slot = &TABLE[i][s];
                let mut ax = 0;
                while ax < 3 {
                    out[s][ax][id as usize] = slot.o[ax] as u8;
                    out[s][3 + ax][id as usize] = slot.a[ax] as u8;
                    out[s][6 + ax][id as usize] = slot.c[ax] as u8;
                    ax += 1;
                }
                out[s][9][id as usize] = slot.k;
                s += 1;
            }
        }
        i += 1;
    }
    out
}

/// The gradients' components by `perm % 24` (`GRADIENTS3[3i + axis]` as `i8`), as 64-byte
/// tables for in-register lookups.
pub(super) static GRADIENT_BYTES: [[u8; 64]; 3] = gradient_bytes();

const fn gradient_bytes() -> [[u8; 64]; 3] {
    let mut out = [[0u8; 64]; 3];
    let mut i = 0;
    while i < 24 {
        let mut ax = 0;
        while ax < 3 {
            out[ax][i] = super::GRADIENTS3[3 * i + ax] as i8 as u8;
            ax += 1;
        }
        i += 1;
    }
    out
}
