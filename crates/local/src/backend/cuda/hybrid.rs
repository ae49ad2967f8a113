//! The Qwen3.5 ops on the device (kernels in `kernels.cu`, host reference in
//! `backend/cpu/hybrid.rs`): partial rotary, sigmoid gating, tanh-GELU, per-row L2 norm, gated
//! RMSNorm, the causal depthwise conv with state, the Gated DeltaNet gates and the delta-rule
//! scan with a per-sequence `[Hv, Dk, Dv]` state, and weighted row gathers.

use cudarc::driver::{LaunchConfig, PushKernelArg};

use super::{check, dev, flat, int, per_row, Cuda, CudaBuf};
use crate::backend::{BResult, DeltaShape};
use crate::LocalError;

/// Most taps of the conv (`CONV_MAX_K` in kernels.cu).
const CONV_MAX_K: usize = 8;
/// Threads sharing one state column in `delta_rule` (`DR_SPLIT`).
const DR_SPLIT: usize = 4;
/// State columns per `delta_rule` block (`DR_COLS`).
const DR_COLS: usize = 32;
/// Most key rows a `delta_rule` thread holds (`DR_KMAX`): Dk ≤ `DR_SPLIT · DR_KMAX`.
const DR_KMAX: usize = 64;

impl Cuda {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn rope_partial_impl(
        &self,
        x: &mut CudaBuf,
        rows: usize,
        heads: usize,
        hd: usize,
        rot: usize,
        cos: &CudaBuf,
        sin: &CudaBuf,
    ) -> BResult<()> {
        let (cs, ss) = (self.f32(cos, "rope cos")?, self.f32(sin, "rope sin")?);
        let xs = self.f32_mut(x, "rope_partial")?;
        if rot > hd || rot % 2 == 1 {
            return Err(LocalError::Internal(format!(
                "rope_partial: rotary width {rot} must be even and at most the head width {hd}"
            )));
        }
        check("rope_partial", xs.len(), rows * heads * hd)?;
        check("rope_partial tables", cs.len().min(ss.len()), rows * rot)?;
        let pairs = rows * heads * (rot / 2);
        if pairs == 0 {
            return Ok(());
        }
        let w = "rope_partial";
        let ints = [int(rows, w)?, int(heads, w)?, int(hd, w)?, int(rot, w)?];
        let mut b = self.stream.launch_builder(&self.k.rope_partial);
        b.arg(xs).arg(cs).arg(ss);
        for v in &ints {
            b.arg(v);
        }
        // SAFETY: rope_partial(float* x, const float* cos, const float* sin, int rows,
        // int heads, int hd, int rot); one thread per rotated pair, sizes checked above.
        unsafe { b.launch(flat(pairs)) }.map_err(dev(w))?;
        Ok(())
    }

    pub(super) fn mul_sigmoid_impl(&self, x: &mut CudaBuf, g: &CudaBuf) -> BResult<()> {
        let gs = self.f32(g, "mul_sigmoid gate")?;
        let xs = self.f32_mut(x, "mul_sigmoid")?;
        check("mul_sigmoid gate", gs.len(), xs.len())?;
        let n = xs.len();
        let n_i = int(n, "mul_sigmoid")?;
        let mut b = self.stream.launch_builder(&self.k.mul_sigmoid);
        b.arg(xs).arg(gs).arg(&n_i);
        // SAFETY: mul_sigmoid(float* x, const float* g, int n); both hold n values.
        unsafe { b.launch(flat(n)) }.map_err(dev("mul_sigmoid"))?;
        Ok(())
    }

    pub(super) fn gelu_tanh_impl(&self, x: &mut CudaBuf) -> BResult<()> {
        self.inplace(&self.k.gelu_tanh, x, "gelu_tanh")
    }

    pub(super) fn l2_norm_impl(
        &self,
        x: &CudaBuf,
        rows: usize,
        dim: usize,
        eps: f32,
    ) -> BResult<CudaBuf> {
        let xs = self.f32(x, "l2_norm")?;
        check("l2_norm", xs.len(), rows * dim)?;
        let mut y = self.out(rows * dim)?;
        if rows * dim > 0 {
            let d = int(dim, "l2_norm")?;
            let mut b = self.stream.launch_builder(&self.k.l2_norm);
            b.arg(&mut y).arg(xs).arg(&d).arg(&eps);
            // SAFETY: l2_norm(float* y, const float* x, int dim, float eps), one block per
            // row; x and y hold rows·dim values.
            unsafe { b.launch(per_row(rows)) }.map_err(dev("l2_norm"))?;
        }
        Ok(CudaBuf::F32(y))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn rms_norm_gated_impl(
        &self,
        x: &CudaBuf,
        z: &CudaBuf,
        rows: usize,
        dim: usize,
        w: &CudaBuf,
        eps: f32,
    ) -> BResult<CudaBuf> {
        let (xs, zs) = (
            self.f32(x, "rms_norm_gated")?,
            self.f32(z, "rms_norm_gated")?,
        );
        let ws = self.f32(w, "rms_norm_gated weight")?;
        check("rms_norm_gated", xs.len().min(zs.len()), rows * dim)?;
        check("rms_norm_gated weight", ws.len(), dim)?;
        let mut y = self.out(rows * dim)?;
        if rows * dim > 0 {
            let d = int(dim, "rms_norm_gated")?;
            let mut b = self.stream.launch_builder(&self.k.rms_norm_gated);
            b.arg(&mut y).arg(xs).arg(zs).arg(ws).arg(&d).arg(&eps);
            // SAFETY: rms_norm_gated(float* y, const float* x, const float* z, const float* w,
            // int dim, float eps), one block per row; sizes checked above.
            unsafe { b.launch(per_row(rows)) }.map_err(dev("rms_norm_gated"))?;
        }
        Ok(CudaBuf::F32(y))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn conv1d_silu_impl(
        &self,
        x: &CudaBuf,
        n: usize,
        ch: usize,
        w: &CudaBuf,
        k: usize,
        state: &mut CudaBuf,
    ) -> BResult<CudaBuf> {
        if k == 0 || k > CONV_MAX_K {
            return Err(LocalError::Internal(format!(
                "conv1d: kernel size {k} not supported (1 to {CONV_MAX_K})"
            )));
        }
        let (xs, ws) = (self.f32(x, "conv1d input")?, self.f32(w, "conv1d weight")?);
        let ss = self.f32_mut(state, "conv1d state")?;
        check("conv1d input", xs.len(), n * ch)?;
        check("conv1d weight", ws.len(), ch * k)?;
        check("conv1d state", ss.len(), (k - 1) * ch)?;
        let mut y = self.out(n * ch)?;
        if n * ch > 0 {
            let w_ = "conv1d";
            let ints = [int(n, w_)?, int(ch, w_)?, int(k, w_)?];
            let mut b = self.stream.launch_builder(&self.k.conv1d_silu);
            b.arg(&mut y).arg(ss).arg(xs).arg(ws);
            for v in &ints {
                b.arg(v);
            }
            // SAFETY: conv1d_silu(float* y, float* state, const float* x, const float* w, int n,
            // int ch, int k); one thread per channel, sizes checked above, k ≤ CONV_MAX_K.
            unsafe { b.launch(flat(ch)) }.map_err(dev(w_))?;
        }
        Ok(CudaBuf::F32(y))
    }

    pub(super) fn delta_gates_impl(
        &self,
        b: &CudaBuf,
        a: &CudaBuf,
        rows: usize,
        heads: usize,
        a_log: &CudaBuf,
        dt_bias: &CudaBuf,
    ) -> BResult<(CudaBuf, CudaBuf)> {
        let (bs, as_) = (self.f32(b, "delta_gates")?, self.f32(a, "delta_gates")?);
        let (ls, ds) = (
            self.f32(a_log, "delta_gates A_log")?,
            self.f32(dt_bias, "delta_gates dt_bias")?,
        );
        check("delta_gates", bs.len().min(as_.len()), rows * heads)?;
        check("delta_gates parameters", ls.len().min(ds.len()), heads)?;
        let (mut beta, mut g) = (self.out(rows * heads)?, self.out(rows * heads)?);
        if rows * heads > 0 {
            let (r, h) = (int(rows, "delta_gates")?, int(heads, "delta_gates")?);
            let mut l = self.stream.launch_builder(&self.k.delta_gates);
            l.arg(&mut beta)
                .arg(&mut g)
                .arg(bs)
                .arg(as_)
                .arg(ls)
                .arg(ds)
                .arg(&r)
                .arg(&h);
            // SAFETY: delta_gates(float* beta, float* g, const float* b, const float* a,
            // const float* a_log, const float* dt_bias, int rows, int heads); sizes checked.
            unsafe { l.launch(flat(rows * heads)) }.map_err(dev("delta_gates"))?;
        }
        Ok((CudaBuf::F32(beta), CudaBuf::F32(g)))
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn delta_rule_impl(
        &self,
        q: &CudaBuf,
        k: &CudaBuf,
        v: &CudaBuf,
        beta: &CudaBuf,
        g: &CudaBuf,
        n: usize,
        s: DeltaShape,
        state: &mut CudaBuf,
    ) -> BResult<CudaBuf> {
        if s.k_heads == 0 || !s.v_heads.is_multiple_of(s.k_heads) || s.dk > DR_SPLIT * DR_KMAX {
            return Err(LocalError::Internal(format!(
                "delta_rule: {} value heads over {} key heads, or key width {} (max {}), not \
                 supported",
                s.v_heads,
                s.k_heads,
                s.dk,
                DR_SPLIT * DR_KMAX
            )));
        }
        let (qs, ks, vs) = (
            self.f32(q, "delta_rule q")?,
            self.f32(k, "delta_rule k")?,
            self.f32(v, "delta_rule v")?,
        );
        let (bs, gs) = (
            self.f32(beta, "delta_rule beta")?,
            self.f32(g, "delta_rule g")?,
        );
        let ss = self.f32_mut(state, "delta_rule state")?;
        check(
            "delta_rule q/k",
            qs.len().min(ks.len()),
            n * s.k_heads * s.dk,
        )?;
        check("delta_rule v", vs.len(), n * s.v_heads * s.dv)?;
        check("delta_rule gates", bs.len().min(gs.len()), n * s.v_heads)?;
        check("delta_rule state", ss.len(), s.state_len())?;
        let mut out = self.out(n * s.v_heads * s.dv)?;
        if n == 0 || s.v_heads * s.dv == 0 {
            return Ok(CudaBuf::F32(out));
        }
        let w = "delta_rule";
        let ints = [
            int(n, w)?,
            int(s.k_heads, w)?,
            int(s.v_heads, w)?,
            int(s.dk, w)?,
            int(s.dv, w)?,
        ];
        let scale = 1.0 / (s.dk as f32).sqrt();
        let mut b = self.stream.launch_builder(&self.k.delta_rule);
        b.arg(&mut out)
            .arg(ss)
            .arg(qs)
            .arg(ks)
            .arg(vs)
            .arg(bs)
            .arg(gs);
        for x in &ints {
            b.arg(x);
        }
        b.arg(&scale);
        let cfg = LaunchConfig {
            grid_dim: (
                s.dv.div_ceil(DR_COLS) as u32,
                u32::try_from(s.v_heads).map_err(|_| {
                    LocalError::Internal(format!("delta_rule: {} value heads", s.v_heads))
                })?,
                1,
            ),
            block_dim: ((DR_COLS * DR_SPLIT) as u32, 1, 1),
            shared_mem_bytes: 0,
        };
        // SAFETY: delta_rule(float* out, float* state, const float* q, const float* k,
        // const float* v, const float* beta, const float* g, int n, int hk, int hv, int dk,
        // int dv, float scale); sizes and head layout checked above, dk ≤ DR_SPLIT·DR_KMAX.
        unsafe { b.launch(cfg) }.map_err(dev(w))?;
        Ok(CudaBuf::F32(out))
    }

    pub(super) fn gather_weighted_impl(
        &self,
        table: &CudaBuf,
        dim: usize,
        idx: &[u32],
        w: &[f32],
        taps: usize,
    ) -> BResult<CudaBuf> {
        let ts = self.f32(table, "gather_weighted table")?;
        let rows_t = ts.len() / dim.max(1);
        if let Some(bad) = idx.iter().find(|&&i| i as usize >= rows_t) {
            return Err(LocalError::Internal(format!(
                "gather_weighted: row {bad} is outside the {rows_t}-row table"
            )));
        }
        let rows = idx.len() / taps.max(1);
        check("gather_weighted weights", w.len(), rows * taps)?;
        let mut out = self.out(rows * dim)?;
        if rows * dim == 0 {
            return Ok(CudaBuf::F32(out));
        }
        let idx_d = self
            .stream
            .clone_htod(&idx[..rows * taps])
            .map_err(dev("upload"))?;
        let w_d = self
            .stream
            .clone_htod(&w[..rows * taps])
            .map_err(dev("upload"))?;
        let n = "gather_weighted";
        let ints = [int(rows, n)?, int(dim, n)?, int(taps, n)?];
        let mut b = self.stream.launch_builder(&self.k.gather_weighted);
        b.arg(&mut out).arg(ts).arg(&idx_d).arg(&w_d);
        for v in &ints {
            b.arg(v);
        }
        // SAFETY: gather_weighted(float* out, const float* table, const unsigned* idx,
        // const float* w, int rows, int dim, int taps); every index is a row of the table
        // (checked above), idx and w hold rows·taps values.
        unsafe { b.launch(flat(rows * dim)) }.map_err(dev(n))?;
        Ok(CudaBuf::F32(out))
    }
}
