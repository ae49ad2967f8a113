//! Where a product over column panels starts, shared by the FMA panel kernels (`panels.rs`)
//! and AMX (`amx.rs`); a leaf beside the pool.

use super::pool::Out;

/// Where a product starts: y's own values, or a new buffer that starts from zeros or the bias
/// in every row (the FMA chains fill it first, AMX's accumulators start from it).
#[derive(Clone, Copy)]
pub enum Start<'a> {
    /// y's values: the product is added to them.
    Existing,
    /// A new buffer: zeros, or the bias (at least n values).
    Fresh(Option<&'a [f32]>),
}

impl Start<'_> {
    /// Write the start values of columns `cols` of every row of a fresh y (nothing for
    /// `Existing`).
    ///
    /// # Safety
    /// `y` must be valid for writes to those columns of `rows` rows `n` apart; a bias holds
    /// at least `cols.end` values.
    pub unsafe fn fill(self, y: Out, rows: usize, n: usize, cols: std::ops::Range<usize>) {
        let Start::Fresh(bias) = self else { return };
        for r in 0..rows {
            let dst = y.at(r * n + cols.start);
            // SAFETY: per the caller.
            unsafe {
                match bias {
                    Some(b) => {
                        std::ptr::copy_nonoverlapping(b[cols.clone()].as_ptr(), dst, cols.len())
                    }
                    None => std::ptr::write_bytes(dst, 0, cols.len()),
                }
            }
        }
    }
}
