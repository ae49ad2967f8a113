//! The noise kernels against the library vectors, the reference and each other.
use super::*;

/// Bit-exact comparison helper with a readable failure message.
fn assert_bits(got: f64, want: f64, what: &str) {
    assert_eq!(
        got.to_bits(),
        want.to_bits(),
        "{what}: got {got:?}, want {want:?}"
    );
}

/// The case table read by the scalar model below (`cases::TABLE`), in the reference's
/// order: the model must give the reference's bits.
fn noise3_cases(n: &OpenSimplex, x: f64, y: f64, z: f64) -> f64 {
    let stretch_offset = (x + y + z) * STRETCH;
    let (xs, ys, zs) = (x + stretch_offset, y + stretch_offset, z + stretch_offset);
    let b = [floor_i64(xs), floor_i64(ys), floor_i64(zs)];
    let squish_offset = (b[0] + b[1] + b[2]) as f64 * SQUISH;
    let d0 = [
        x - (b[0] as f64 + squish_offset),
        y - (b[1] as f64 + squish_offset),
        z - (b[2] as f64 + squish_offset),
    ];
    let (xi, yi, zi) = (xs - b[0] as f64, ys - b[1] as f64, zs - b[2] as f64);
    let case = cases::case_index(xi, yi, zi, (xi + yi) + zi);
    let mut value = 0.0;
    for s in &cases::TABLE[case] {
        let d: [f64; 3] = std::array::from_fn(|ax| {
            ((d0[ax] - f64::from(s.a[ax])) - cases::K[s.k as usize]) - f64::from(s.c[ax])
        });
        let attn = ((2.0 - d[0] * d[0]) - d[1] * d[1]) - d[2] * d[2];
        if attn > 0.0 {
            let v = |ax: usize| b[ax].wrapping_add(i64::from(s.o[ax]));
            let a2 = attn * attn;
            value += a2 * a2 * n.extrapolate(v(0), v(1), v(2), d[0], d[1], d[2]);
        }
    }
    value / NORM
}

/// Points the reference meets: random ones over a wide box, and the world's fields.
fn points() -> Vec<[f64; 3]> {
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    let mut rnd = move || {
        s ^= s << 13;
        s ^= s >> 7;
        s ^= s << 17;
        (s >> 11) as f64 / (1u64 << 53) as f64
    };
    let mut pts: Vec<[f64; 3]> = (0..40_000)
        .map(|_| {
            [
                rnd() * 80.0 - 40.0,
                rnd() * 80.0 - 40.0,
                (rnd() * 20.0 - 10.0).round(),
            ]
        })
        .collect();
    // Beyond the eight-lane kernel's i32 lattice: the scalar fallback.
    pts.extend([
        [3.0e9, 1.5, 2.0],
        [-7.5e12, 2.0e10, 1.0],
        [0.25, -4.0e9, 0.0],
    ]);
    for (z, size) in [(8.0, 3.0), (3.0, 15.0), (0.0, 5.0), (7.0, 3.0), (4.0, 9.0)] {
        for x in 0..64 {
            for y in 0..64 {
                pts.push([f64::from(x) / size, f64::from(y) / size, z]);
            }
        }
    }
    pts
}

#[test]
fn case_table_model_matches_the_reference() {
    let n = OpenSimplex::new(487388145);
    let mut seen = [false; cases::CASES];
    for [x, y, z] in points() {
        assert_bits(
            noise3_cases(&n, x, y, z),
            n.noise3(x, y, z),
            &format!("({x},{y},{z})"),
        );
        let stretch_offset = (x + y + z) * STRETCH;
        let (xs, ys, zs) = (x + stretch_offset, y + stretch_offset, z + stretch_offset);
        let (xi, yi, zi) = (
            xs - floor_i64(xs) as f64,
            ys - floor_i64(ys) as f64,
            zs - floor_i64(zs) as f64,
        );
        seen[cases::case_index(xi, yi, zi, (xi + yi) + zi)] = true;
    }
    let reached = seen.iter().filter(|&&s| s).count();
    assert_eq!(
        reached,
        cases::COMPACT.1,
        "every reachable case is exercised"
    );
    assert_eq!(cases::COMPACT.1, 24);
}

#[test]
fn base_slots_offset_is_their_expression() {
    // What lets the eight-lane kernel read only `o` and `k` in slots 0..6.
    for case in &cases::TABLE {
        for s in &case[..6] {
            assert_eq!((s.a, s.c), (s.o, [0; 3]));
        }
    }
}

#[test]
fn many_matches_one_by_one() {
    let n = OpenSimplex::new(-7);
    if !n.has_x8() {
        println!("no AVX-512 VBMI here: noise3_many runs the scalar kernel, compared anyway");
    }
    let pts = points();
    for z in [0.0, 3.0, 8.0, -5.0] {
        let xs: Vec<f64> = pts.iter().map(|p| p[0]).collect();
        let ys: Vec<f64> = pts.iter().map(|p| p[1]).collect();
        // An odd length, so the last block is partial.
        let len = xs.len() - 3;
        let mut out = vec![0.0; len];
        n.noise3_many(&xs[..len], &ys[..len], z, &mut out);
        for i in 0..len {
            assert_bits(
                out[i],
                n.noise3(xs[i], ys[i], z),
                &format!("({}, {}, {z})", xs[i], ys[i]),
            );
        }
    }
    let data = include_str!("noise_vectors.txt");
    for line in data
        .lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
    {
        let f: Vec<&str> = line.split_whitespace().collect();
        let seed: i64 = f[0].parse().unwrap();
        let [x, y, z, want] = [f[1], f[2], f[3], f[4]].map(|s| s.parse::<f64>().unwrap());
        let mut out = [0.0];
        OpenSimplex::new(seed).noise3_many(&[x], &[y], z, &mut out);
        assert_bits(out[0], want, line);
    }
}

#[test]
fn floor_matches_f64_floor() {
    for v in [
        0.0,
        -0.0,
        0.5,
        -0.5,
        1.0,
        -1.0,
        2.999,
        -2.999,
        -3.0,
        1e15 + 0.5,
        -1e15 - 0.5,
        9.0e18,
    ] {
        assert_eq!(floor_i64(v), v.floor() as i64, "{v}");
    }
}

#[test]
fn perm_spec_vectors() {
    let n = OpenSimplex::new(487388145);
    assert_eq!(
        n.perm[..16],
        [25, 129, 27, 206, 198, 85, 153, 138, 107, 15, 145, 19, 175, 250, 86, 62]
    );
    assert_eq!(
        n.pgi3[..16],
        [3, 27, 9, 42, 18, 39, 27, 54, 33, 45, 3, 57, 21, 30, 42, 42]
    );
}

#[test]
fn perm_other_seeds() {
    // (seed, perm[..8], perm[252..], pgi3[..8]) from opensimplex 0.4.5.1.
    type Case = (i64, [u8; 8], [u8; 4], [u8; 8]);
    let cases: [Case; 5] = [
        (
            0,
            [254, 50, 92, 24, 36, 10, 190, 16],
            [158, 167, 44, 211],
            [42, 6, 60, 0, 36, 30, 66, 48],
        ),
        (
            -1,
            [112, 72, 97, 7, 156, 36, 163, 13],
            [88, 98, 202, 194],
            [48, 0, 3, 21, 36, 36, 57, 39],
        ),
        (
            -7,
            [246, 94, 170, 114, 222, 39, 3, 69],
            [123, 192, 132, 92],
            [18, 66, 6, 54, 18, 45, 9, 63],
        ),
        (
            i64::MAX,
            [59, 157, 41, 102, 129, 11, 191, 187],
            [206, 226, 75, 194],
            [33, 39, 51, 18, 27, 33, 69, 57],
        ),
        (
            i64::MIN,
            [104, 5, 68, 8, 124, 6, 50, 108],
            [40, 41, 171, 211],
            [24, 15, 60, 24, 12, 18, 6, 36],
        ),
    ];
    for (seed, p, tail, g) in cases {
        let n = OpenSimplex::new(seed);
        assert_eq!(n.perm[..8], p, "seed {seed}");
        assert_eq!(n.perm[252..], tail, "seed {seed}");
        assert_eq!(n.pgi3[..8], g, "seed {seed}");
        let mut seen = [false; 256];
        for &v in &n.perm {
            seen[v as usize] = true;
        }
        assert!(seen.iter().all(|&s| s), "seed {seed}: not a permutation");
    }
}

#[test]
fn noise3_spec_vectors() {
    let n = OpenSimplex::new(487388145);
    assert_bits(n.noise3(0.0, 0.0, 0.0), 2.068128509027943e-65, "(0,0,0)");
    assert_bits(n.noise3(0.5, 0.5, 0.5), 0.2054257686084147, "(.5,.5,.5)");
    assert_bits(
        n.noise3(12.34, -5.67, 7.0),
        0.19094298307123564,
        "(12.34,-5.67,7)",
    );
    assert_bits(
        n.noise3(-3.25, 0.2, 0.0),
        -0.10620178726159113,
        "(-3.25,0.2,0)",
    );
    assert_bits(
        n.noise3(1.0 / 3.0, 32.0 / 3.0, 8.0),
        -0.16885153962144747,
        "(1/3,32/3,8)",
    );
    let n3 = OpenSimplex::new(3);
    assert_bits(n3.noise3(0.5, 0.5, 0.5), 0.39504955501618155, "seed 3");
}

/// ~2000 `(seed, x, y, z) -> noise3` vectors from the real library (`gen/noise_vectors.py`).
#[test]
fn noise3_library_vectors() {
    let data = include_str!("noise_vectors.txt");
    let mut cache: Vec<(i64, OpenSimplex)> = Vec::new();
    let mut count = 0;
    for line in data.lines() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let f: Vec<&str> = line.split_whitespace().collect();
        assert_eq!(f.len(), 5, "bad line {line:?}");
        let seed: i64 = f[0].parse().unwrap();
        let [x, y, z, want] = [f[1], f[2], f[3], f[4]].map(|s| s.parse::<f64>().unwrap());
        let idx = match cache.iter().position(|(s, _)| *s == seed) {
            Some(i) => i,
            None => {
                cache.push((seed, OpenSimplex::new(seed)));
                cache.len() - 1
            }
        };
        assert_bits(cache[idx].1.noise3(x, y, z), want, line);
        count += 1;
    }
    assert!(count >= 1900, "only {count} vectors");
}
