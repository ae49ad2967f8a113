//! CPython (>= 3.8, 64-bit build) `hash()` of ints and 2-tuples of ints, and
//! crafter's per-episode world seed `hash((seed, episode)) % (2**31 - 1)`.
//!
//! The tuple hash is the xxHash-based `tuplehash` from `Objects/tupleobject.c`;
//! all accumulator arithmetic is modulo 2^64.

/// Mersenne prime 2^61 - 1 used as the modulus of CPython's numeric hash.
const PY_HASH_MODULUS: u64 = (1 << 61) - 1;
/// xxHash prime 1 (`_PyHASH_XXPRIME_1`).
const XXPRIME_1: u64 = 11_400_714_785_074_694_791;
/// xxHash prime 2 (`_PyHASH_XXPRIME_2`).
const XXPRIME_2: u64 = 14_029_467_366_897_019_727;
/// xxHash prime 5 (`_PyHASH_XXPRIME_5`).
const XXPRIME_5: u64 = 2_870_177_450_012_600_261;

/// CPython `hash(n)` for an int: `|n| mod (2^61 - 1)` with the sign of `n`, and `-1` mapped to `-2`.
pub fn py_hash_int(n: i64) -> i64 {
    let h = (n.unsigned_abs() % PY_HASH_MODULUS) as i64;
    let h = if n < 0 { -h } else { h };
    if h == -1 {
        -2
    } else {
        h
    }
}

/// CPython `hash((a, b))` for a 2-tuple of ints (xxHash-based `tuplehash`).
pub fn py_hash_tuple2(a: i64, b: i64) -> i64 {
    let mut acc = XXPRIME_5;
    for item in [a, b] {
        let lane = py_hash_int(item) as u64;
        acc = acc.wrapping_add(lane.wrapping_mul(XXPRIME_2));
        acc = acc.rotate_left(31);
        acc = acc.wrapping_mul(XXPRIME_1);
    }
    acc = acc.wrapping_add(2 ^ (XXPRIME_5 ^ 3_527_539));
    if acc == u64::MAX {
        return 1_546_275_796;
    }
    acc as i64
}

/// crafter's world seed: `hash((seed, episode)) % (2**31 - 1)` with Python floor modulo.
pub fn world_seed(seed: i64, episode: i64) -> u32 {
    py_hash_tuple2(seed, episode).rem_euclid((1 << 31) - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (seed, episode, hash(seed), hash((seed, episode)), world seed) from CPython 3.11.
    const CASES: [(i64, i64, i64, i64, u32); 20] = [
        (0, 1, 0, -1950498447580522560, 1256191933),
        (1, 1, 1, 8389048192121911274, 535231920),
        (2, 1, 2, 6794810172467074373, 850681082),
        (3, 1, 3, 8756109708711196808, 1427922768),
        (0, 2, 0, 7204814214171964562, 744553801),
        (42, 7, 42, -5455199611616817219, 324110706),
        (-1, 1, -2, 9083154820904886697, 1476744201),
        (-2, 1, -2, 9083154820904886697, 1476744201),
        (-1, -1, -2, 960947337673586213, 1083189035),
        (1, -1, 1, -6779188579744246035, 1254919866),
        (-123456789, 3, -123456789, 2081072740332384961, 1493539844),
        (2305843009213693951, 1, 0, -1950498447580522560, 1256191933),
        (2305843009213693952, 1, 1, 8389048192121911274, 535231920),
        (4611686018427387909, 9, 7, 8527674585806224592, 466354823),
        (i64::MIN, 1, -4, -4060511182127078364, 1981593938),
        (i64::MAX, 1, 3, 8756109708711196808, 1427922768),
        (i64::MAX, i64::MAX, 3, 5972319052856130739, 1418550726),
        (i64::MIN, i64::MIN, -4, 9047816064206238837, 1597410818),
        (
            1234567890123,
            100000,
            1234567890123,
            5823199731759806124,
            1297205576,
        ),
        (
            -987654321987,
            12,
            -987654321987,
            -2208575457587391944,
            1770959580,
        ),
    ];

    #[test]
    fn spec_world_seeds() {
        assert_eq!(world_seed(0, 1), 1256191933);
        assert_eq!(world_seed(1, 1), 535231920);
        assert_eq!(world_seed(2, 1), 850681082);
        assert_eq!(world_seed(3, 1), 1427922768);
    }

    #[test]
    fn cpython_vectors() {
        for (s, e, hs, ht, ws) in CASES {
            assert_eq!(py_hash_int(s), hs, "hash({s})");
            assert_eq!(py_hash_tuple2(s, e), ht, "hash(({s}, {e}))");
            assert_eq!(world_seed(s, e), ws, "world_seed({s}, {e})");
        }
    }

    #[test]
    fn int_hash_edges() {
        assert_eq!(py_hash_int(-1), -2);
        assert_eq!(py_hash_int(-2), -2);
        assert_eq!(py_hash_int((1 << 61) - 1), 0);
        assert_eq!(py_hash_int(-((1 << 61) - 1)), 0);
        assert_eq!(py_hash_int(-(1 << 61)), -2);
    }
}
