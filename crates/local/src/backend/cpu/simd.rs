//! Wider vectors for the CPU backend's element-wise and reduction loops, chosen at run time.
//!
//! The release binary targets baseline x86-64 (SSE2), so a plain loop is vectorised 4 lanes
//! wide. [`multiversion!`] compiles a function's body a second and third time with AVX-512 or
//! AVX2 enabled and calls the widest one the CPU has. Only the vector width changes: Rust
//! never fuses a multiply and an add on its own, and reductions keep their written order, so
//! every variant gives the same bits. Also a branch-free `exp` (and the sigmoid and silu
//! built on it) that such loops can vectorise.

/// Whether the CPU has AVX-512F (checked once).
#[cfg(target_arch = "x86_64")]
pub fn avx512() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx512f"))
}

/// Whether the CPU has AVX2 (checked once).
#[cfg(target_arch = "x86_64")]
pub fn avx2() -> bool {
    use std::sync::OnceLock;
    static HAS: OnceLock<bool> = OnceLock::new();
    *HAS.get_or_init(|| std::arch::is_x86_feature_detected!("avx2"))
}

/// `fn name(args) -> ret { body }` whose body is also compiled for AVX-512 and for AVX2; a
/// call runs the widest variant the CPU supports. Arguments must be plain `name: Type` pairs
/// (no patterns, no generics).
macro_rules! multiversion {
    ($(#[$m:meta])* $vis:vis fn $name:ident($($arg:ident: $ty:ty),* $(,)?) $(-> $ret:ty)? $body:block) => {
        $(#[$m])*
        $vis fn $name($($arg: $ty),*) $(-> $ret)? {
            #[inline(always)]
            #[allow(clippy::too_many_arguments)]
            fn body($($arg: $ty),*) $(-> $ret)? $body
            #[cfg(target_arch = "x86_64")]
            {
                #[target_feature(enable = "avx512f")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn wide512($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                #[target_feature(enable = "avx2")]
                #[allow(clippy::too_many_arguments)]
                unsafe fn wide256($($arg: $ty),*) $(-> $ret)? { body($($arg),*) }
                if $crate::backend::cpu::simd::avx512() {
                    // SAFETY: the CPU has AVX-512F.
                    return unsafe { wide512($($arg),*) };
                }
                if $crate::backend::cpu::simd::avx2() {
                    // SAFETY: the CPU has AVX2.
                    return unsafe { wide256($($arg),*) };
                }
            }
            body($($arg),*)
        }
    };
}
pub(crate) use multiversion;

/// `eˣ` to about one unit in the last place (Cody–Waite reduction by ln 2 and a degree-6
/// polynomial, Cephes' `expf`), written without calls or branches so that a loop over it
/// vectorises (the C library's `expf` is one call per value). Saturates below −87.3 to
/// 2⁻¹²⁶ (about 1.2e-38) and above 88.7 to infinity; NaN stays NaN.
#[inline(always)]
pub fn exp(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // 1.5·2²³: adding and subtracting it rounds to the nearest integer (ties to even).
    const ROUND: f32 = 12_582_912.0;
    let x = x.clamp(-87.336_54, 88.722_83);
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = x - n * LN2_HI - n * LN2_LO;
    let mut p = 1.987_569_1e-4f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * r * r + r + 1.0;
    y * f32::from_bits(((n as i32 + 127) as u32) << 23)
}

/// `1 / (1 + e⁻ˣ)` through [`exp`].
#[inline(always)]
pub fn sigmoid(x: f32) -> f32 {
    1.0 / (1.0 + exp(-x))
}

/// `x · σ(x)` through [`exp`].
#[inline(always)]
pub fn silu(x: f32) -> f32 {
    x / (1.0 + exp(-x))
}

#[cfg(test)]
mod tests {
    #[test]
    fn exp_is_within_two_ulp_of_the_c_library() {
        let mut worst = 0u32;
        let mut x = -87.0f32;
        while x < 88.0 {
            let (got, want) = (super::exp(x), x.exp());
            worst = worst.max(got.to_bits().abs_diff(want.to_bits()));
            x += 0.000_731;
        }
        assert!(worst <= 2, "worst difference {worst} ulp");
        assert_eq!(super::exp(0.0), 1.0);
        assert!((0.0..1.2e-38).contains(&super::exp(-1000.0)));
        assert_eq!(super::exp(1000.0), f32::INFINITY);
        assert!(super::exp(f32::NAN).is_nan());
    }
}
