// Kernels of the CUDA backend, compiled once at start-up by NVRTC (no CUDA headers needed).
// Activations are f32; weights are f32 or bf16 (bf16 stored as unsigned short, converted with
// bit operations). Every kernel checks its bounds, so any grid that covers the work is valid.

typedef unsigned short bf16_t;

// No headers under NVRTC, so no INFINITY macro.
#define NEG_INF __int_as_float(0xff800000)

__device__ __forceinline__ float bf16_to_f32(bf16_t u) {
    return __uint_as_float(((unsigned int)u) << 16);
}

// Round to nearest, ties to even (what torch and half::bf16::from_f32 do); NaN stays NaN.
__device__ __forceinline__ bf16_t f32_to_bf16(float f) {
    unsigned int u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
        return (bf16_t)((u >> 16) | 0x40u);
    }
    u += 0x7fffu + ((u >> 16) & 1u);
    return (bf16_t)(u >> 16);
}

__device__ __forceinline__ float warp_sum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

__device__ __forceinline__ float warp_max(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// Block-wide sum (blockDim.x a multiple of 32, at most 1024); every thread gets the result.
// `red` holds 32 floats of shared memory; the leading barrier makes back-to-back calls safe.
__device__ float block_sum(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_sum(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = lane < warps ? red[lane] : 0.f;
    return warp_sum(r);
}

__device__ float block_max(float v, float* red) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = blockDim.x >> 5;
    v = warp_max(v);
    __syncthreads();
    if (lane == 0) red[warp] = v;
    __syncthreads();
    float r = lane < warps ? red[lane] : NEG_INF;
    return warp_max(r);
}

// One block per row: y = x * rsqrt(mean(x^2) + eps) * w.
extern "C" __global__ void rms_norm(float* y, const float* x, const float* w, int dim, float eps) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * dim;
    float* yr = y + (size_t)blockIdx.x * dim;
    float s = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i] * xr[i];
    float r = rsqrtf(block_sum(s, red) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * r * w[i];
}

// One block per row: two passes (mean, then variance about the mean), as the CPU reference.
extern "C" __global__ void layer_norm(float* y, const float* x, const float* w, const float* b,
                                      int dim, float eps) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * dim;
    float* yr = y + (size_t)blockIdx.x * dim;
    float s = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i];
    float mean = block_sum(s, red) / (float)dim;
    float v = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float d = xr[i] - mean;
        v += d * d;
    }
    float r = rsqrtf(block_sum(v, red) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = (xr[i] - mean) * r * w[i] + b[i];
}

// Rotary embedding in place on x[rows, heads*hd] with tables cos/sin[rows, hd]
// (rotate_half convention). One thread per (row, head, i < hd/2) pair.
extern "C" __global__ void rope(float* x, const float* cos_t, const float* sin_t, int rows,
                                int heads, int hd) {
    int half = hd / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    size_t total = (size_t)rows * heads * half;
    if (idx >= total) return;
    int i = (int)(idx % half);
    size_t rh = idx / half;
    size_t row = rh / heads;
    float* v = x + rh * hd;
    const float* c = cos_t + row * hd;
    const float* s = sin_t + row * hd;
    float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i + half] + a * s[i + half];
}

// out[r, j] = silu(gu[r, j]) * gu[r, m + j] for gu[rows, 2m].
extern "C" __global__ void silu_mul(float* out, const float* gu, int rows, int m) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)rows * m) return;
    size_t r = idx / m, j = idx % m;
    float g = gu[r * 2 * m + j], u = gu[r * 2 * m + m + j];
    out[idx] = g / (1.f + expf(-g)) * u;
}

extern "C" __global__ void quick_gelu(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = x[i] / (1.f + expf(-1.702f * x[i]));
}

extern "C" __global__ void gelu_erf(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] = 0.5f * x[i] * (1.f + erff(x[i] * 0.70710678118654752f));
}

extern "C" __global__ void add_assign(float* x, const float* y, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] += y[i];
}

// y[rows, n] += b[n].
extern "C" __global__ void add_bias(float* y, const float* b, int rows, int n) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx < (size_t)rows * n) y[idx] += b[idx % n];
}

// out[i, :] = table[ids[i], :] (rows of the embedding table).
extern "C" __global__ void gather_f32(float* out, const float* table, const unsigned int* ids,
                                      int n_ids, int dim) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n_ids * dim) return;
    size_t i = idx / dim, d = idx % dim;
    out[idx] = table[(size_t)ids[i] * dim + d];
}

extern "C" __global__ void gather_bf16(float* out, const bf16_t* table, const unsigned int* ids,
                                       int n_ids, int dim) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)n_ids * dim) return;
    size_t i = idx / dim, d = idx % dim;
    out[idx] = bf16_to_f32(table[(size_t)ids[i] * dim + d]);
}

// out[r, j] = x[r, col0 + j] for j < n, x with `stride` columns.
extern "C" __global__ void slice_cols(float* out, const float* x, int rows, int stride, int col0,
                                      int n) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)rows * n) return;
    size_t r = idx / n, j = idx % n;
    out[idx] = x[r * stride + col0 + j];
}

extern "C" __global__ void to_bf16(bf16_t* out, const float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = f32_to_bf16(x[i]);
}

// Scaled dot-product attention with an online softmax over key tiles of ATT_T.
// Grid (n_q, heads), block ATT_T threads, hd <= 2 * ATT_T. Query i (row q_row + i of q) and
// head h attend to keys 0 .. visible-1 of k/v (kv head h / (heads / kv_heads)); with `causal`
// visible = n_kv - n_q + i + 1, else n_kv. Thread t owns output dims t and t + ATT_T.
#define ATT_T 128
extern "C" __global__ void attention(float* out, const float* q, const float* k, const float* v,
                                     int q_row, int n_q, int n_kv, int heads, int kv_heads,
                                     int hd, int causal, float scale) {
    __shared__ float qs[2 * ATT_T];
    __shared__ float ps[ATT_T];
    __shared__ float red[32];
    int i = blockIdx.x, h = blockIdx.y, t = threadIdx.x;
    int kh = h / (heads / kv_heads);
    size_t qd = (size_t)heads * hd, kd = (size_t)kv_heads * hd;
    const float* qv = q + (size_t)(q_row + i) * qd + (size_t)h * hd;
    for (int d = t; d < hd; d += ATT_T) qs[d] = qv[d];
    __syncthreads();
    int visible = causal ? (n_kv - n_q + i + 1) : n_kv;
    float m = NEG_INF, l = 0.f, acc0 = 0.f, acc1 = 0.f;
    for (int c = 0; c < visible; c += ATT_T) {
        int j = c + t;
        float s = NEG_INF;
        if (j < visible) {
            const float* kr = k + (size_t)j * kd + (size_t)kh * hd;
            float dot = 0.f;
            for (int d = 0; d < hd; ++d) dot += qs[d] * kr[d];
            s = dot * scale;
        }
        float nm = fmaxf(m, block_max(s, red));
        float p = j < visible ? expf(s - nm) : 0.f;
        ps[t] = p;
        float psum = block_sum(p, red);  // its barriers also publish ps
        float corr = expf(m - nm);
        l = l * corr + psum;
        int cnt = min(ATT_T, visible - c);
        float a0 = 0.f, a1 = 0.f;
        for (int jj = 0; jj < cnt; ++jj) {
            const float* vr = v + (size_t)(c + jj) * kd + (size_t)kh * hd;
            float pj = ps[jj];
            if (t < hd) a0 += pj * vr[t];
            if (t + ATT_T < hd) a1 += pj * vr[t + ATT_T];
        }
        acc0 = acc0 * corr + a0;
        acc1 = acc1 * corr + a1;
        m = nm;
        __syncthreads();  // ps is rewritten by the next tile
    }
    float* o = out + (size_t)(q_row + i) * qd + (size_t)h * hd;
    if (t < hd) o[t] = acc0 / l;
    if (t + ATT_T < hd) o[t + ATT_T] = acc1 / l;
}

// Matrix-vector products for small batches (decode): y[r, j] = bf16(x[r, :]) . w[j, :]
// (+ b[j]) (+ y[r, j] when accumulate), f32 accumulation, for rows <= GEMV_ROWS. One warp per
// output column j reads w's row once for all rows with 16-byte loads; k % 8 == 0.
#define GEMV_ROWS 8
extern "C" __global__ void gemv_bf16(float* y, const bf16_t* w, const float* x, const float* b,
                                     int rows, int k, int n, int has_bias, int accumulate) {
    int warp = (blockIdx.x * blockDim.x + threadIdx.x) >> 5, lane = threadIdx.x & 31;
    if (warp >= n) return;
    const uint4* wr = (const uint4*)(w + (size_t)warp * k);
    float acc[GEMV_ROWS];
    for (int r = 0; r < GEMV_ROWS; ++r) acc[r] = 0.f;
    for (int c = lane; c < k / 8; c += 32) {
        uint4 p = wr[c];
        unsigned int words[4] = {p.x, p.y, p.z, p.w};
        float wf[8];
        for (int e = 0; e < 4; ++e) {
            wf[2 * e] = __uint_as_float(words[e] << 16);
            wf[2 * e + 1] = __uint_as_float(words[e] & 0xffff0000u);
        }
        for (int r = 0; r < GEMV_ROWS; ++r) {
            if (r < rows) {
                const float4* xr = (const float4*)(x + (size_t)r * k) + 2 * c;
                float4 a = xr[0], bb = xr[1];
                float xv[8] = {a.x, a.y, a.z, a.w, bb.x, bb.y, bb.z, bb.w};
                for (int e = 0; e < 8; ++e) acc[r] += bf16_to_f32(f32_to_bf16(xv[e])) * wf[e];
            }
        }
    }
    for (int r = 0; r < GEMV_ROWS; ++r) {
        if (r < rows) {
            float s = warp_sum(acc[r]);
            if (lane == 0) {
                size_t o = (size_t)r * n + warp;
                if (has_bias) s += b[warp];
                y[o] = accumulate ? y[o] + s : s;
            }
        }
    }
}

// Split qkv[rows, (heads + 2 kv_heads) hd] into q[rows, heads hd], k and v[rows, kv_heads hd],
// rotating q and k (rotate_half convention, tables [rows, hd]). One thread per (row, column
// pair) of the q|k|v layout: column c < half of each head pairs with c + half.
extern "C" __global__ void split_qkv_rope(float* q, float* k, float* v, const float* qkv,
                                          const float* cos_t, const float* sin_t, int rows,
                                          int heads, int kv_heads, int hd) {
    int half = hd / 2, all_heads = heads + 2 * kv_heads;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)rows * all_heads * half) return;
    int i = (int)(idx % half);
    size_t rest = idx / half;
    int h = (int)(rest % all_heads);
    size_t row = rest / all_heads;
    const float* src = qkv + row * (size_t)all_heads * hd + (size_t)h * hd;
    float a = src[i], b = src[i + half];
    if (h >= heads + kv_heads) {  // v: copied as is
        float* dst = v + row * (size_t)kv_heads * hd + (size_t)(h - heads - kv_heads) * hd;
        dst[i] = a;
        dst[i + half] = b;
        return;
    }
    const float* c = cos_t + row * hd;
    const float* s = sin_t + row * hd;
    float* dst = h < heads ? q + row * (size_t)heads * hd + (size_t)h * hd
                           : k + row * (size_t)kv_heads * hd + (size_t)(h - heads) * hd;
    dst[i] = a * c[i] - b * s[i];
    dst[i + half] = b * c[i + half] + a * s[i + half];
}

// ---- Qwen3.5 ops (the host reference of each is in backend/hybrid.rs) ----------------------

__device__ __forceinline__ float sigmoidf_(float x) { return 1.f / (1.f + expf(-x)); }

// Rotary on the first `rot` dims of each head of x[rows, heads*hd] (rotate_half within those
// dims), tables cos/sin[rows, rot]; dims rot..hd are left alone. One thread per rotated pair.
extern "C" __global__ void rope_partial(float* x, const float* cos_t, const float* sin_t, int rows,
                                        int heads, int hd, int rot) {
    int half = rot / 2;
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (half <= 0 || idx >= (size_t)rows * heads * half) return;
    int i = (int)(idx % half);
    size_t rh = idx / half;
    size_t row = rh / heads;
    float* v = x + rh * hd;
    const float* c = cos_t + row * rot;
    const float* s = sin_t + row * rot;
    float a = v[i], b = v[i + half];
    v[i] = a * c[i] - b * s[i];
    v[i + half] = b * c[i + half] + a * s[i + half];
}

// x[i] *= sigmoid(g[i]).
extern "C" __global__ void mul_sigmoid(float* x, const float* g, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) x[i] *= sigmoidf_(g[i]);
}

// gelu(x, approximate="tanh"), computed in double and rounded once (as the host reference).
extern "C" __global__ void gelu_tanh(float* x, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    double f = (double)x[i];
    double c = 0.7978845608028654;  // sqrt(2/pi)
    x[i] = (float)(0.5 * f * (1.0 + tanh(c * (f + 0.044715 * f * f * f))));
}

// One block per row of width dim: y = x / sqrt(sum(x^2) + eps).
extern "C" __global__ void l2_norm(float* y, const float* x, int dim, float eps) {
    __shared__ float red[32];
    const float* xr = x + (size_t)blockIdx.x * dim;
    float* yr = y + (size_t)blockIdx.x * dim;
    float s = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i] * xr[i];
    float r = 1.f / sqrtf(block_sum(s, red) + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) yr[i] = xr[i] * r;
}

// One block per row: y = w * (x * rsqrt(mean(x^2) + eps)) * silu(z) (RMSNormGated).
extern "C" __global__ void rms_norm_gated(float* y, const float* x, const float* z, const float* w,
                                          int dim, float eps) {
    __shared__ float red[32];
    size_t off = (size_t)blockIdx.x * dim;
    const float* xr = x + off;
    const float* zr = z + off;
    float s = 0.f;
    for (int i = threadIdx.x; i < dim; i += blockDim.x) s += xr[i] * xr[i];
    float r = 1.f / sqrtf(block_sum(s, red) / (float)dim + eps);
    for (int i = threadIdx.x; i < dim; i += blockDim.x) {
        float zv = zr[i];
        y[off + i] = w[i] * (xr[i] * r) * (zv / (1.f + expf(-zv)));
    }
}

// Depthwise causal conv (weights w[ch, k], no bias) + SiLU over one sequence's rows x[n, ch],
// continuing from state[k-1, ch] (the previous inputs, oldest first), which is replaced by the
// last k-1 rows of [state; x]. One thread per channel walks the n rows with its window in
// registers, so it reads its state column before it writes it and no thread touches another's.
#define CONV_MAX_K 8
extern "C" __global__ void conv1d_silu(float* y, float* state, const float* x, const float* w,
                                       int n, int ch, int k) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= ch || k < 1 || k > CONV_MAX_K) return;
    int past = k - 1;
    // Loops over CONV_MAX_K with guards: constant indices keep both windows in registers.
    float win[CONV_MAX_K], wc[CONV_MAX_K];
#pragma unroll
    for (int j = 0; j < CONV_MAX_K; ++j) {
        win[j] = j < past ? state[(size_t)j * ch + c] : 0.f;
        wc[j] = j < k ? w[(size_t)c * k + j] : 0.f;
    }
    for (int t = 0; t < n; ++t) {
        float xt = x[(size_t)t * ch + c];
        float acc = 0.f;
#pragma unroll
        for (int j = 0; j < CONV_MAX_K; ++j) {
            if (j < past) acc += win[j] * wc[j];
            if (j == past) acc += xt * wc[j];
        }
        y[(size_t)t * ch + c] = acc / (1.f + expf(-acc));
#pragma unroll
        for (int j = 0; j + 1 < CONV_MAX_K; ++j) {
            if (j + 1 < past) win[j] = win[j + 1];
            if (j + 1 == past) win[j] = xt;
        }
    }
#pragma unroll
    for (int j = 0; j < CONV_MAX_K; ++j) {
        if (j < past) state[(size_t)j * ch + c] = win[j];
    }
}

// beta = sigmoid(b), g = -exp(a_log[h]) * softplus(a + dt_bias[h]) (torch softplus: threshold
// 20) for b, a[rows, heads].
extern "C" __global__ void delta_gates(float* beta, float* g, const float* b, const float* a,
                                       const float* a_log, const float* dt_bias, int rows,
                                       int heads) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)rows * heads) return;
    int h = (int)(idx % heads);
    float x = a[idx] + dt_bias[h];
    float sp = x > 20.f ? x : log1pf(expf(x));
    beta[idx] = sigmoidf_(b[idx]);
    g[idx] = -expf(a_log[h]) * sp;
}

// The gated delta rule, recurrent form, over n rows of one sequence. Per value head h and
// token t: S <- S * exp(g); d = beta (v - S^T k); S <- S + k d^T; o = S^T (q / sqrt(Dk)), with
// state S[Hv, Dk, Dv] read once and written once per call. Grid (ceil(Dv / DR_COLS), Hv),
// block DR_COLS * DR_SPLIT threads: DR_SPLIT neighbouring lanes share state column j (lane p
// holds rows p, p + DR_SPLIT, ... in registers) and sum their parts with shuffles. q and k
// heads repeat-interleave over the value heads (head h reads q/k head h / (Hv / Hk)).
#define DR_SPLIT 4
#define DR_COLS 32
#define DR_KMAX 64
__device__ __forceinline__ float dr_group_sum(float v) {
    for (int o = 1; o < DR_SPLIT; o <<= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

extern "C" __global__ void delta_rule(float* out, float* state, const float* q, const float* k,
                                      const float* v, const float* beta, const float* g, int n,
                                      int hk, int hv, int dk, int dv, float scale) {
    int p = threadIdx.x % DR_SPLIT;
    int j = blockIdx.x * DR_COLS + threadIdx.x / DR_SPLIT;
    int h = blockIdx.y;
    bool on = j < dv;  // lanes past Dv still take part in the shuffles
    int kh = h / (hv / hk);
    float* st = state + (size_t)h * dk * dv;
    float s[DR_KMAX];
#pragma unroll
    for (int ii = 0; ii < DR_KMAX; ++ii) {
        int i = ii * DR_SPLIT + p;
        s[ii] = (on && i < dk) ? st[(size_t)i * dv + j] : 0.f;
    }
    for (int t = 0; t < n; ++t) {
        const float* kt = k + ((size_t)t * hk + kh) * dk;
        const float* qt = q + ((size_t)t * hk + kh) * dk;
        size_t th = (size_t)t * hv + h;
        float decay = expf(g[th]), bt = beta[th];
        float kv = 0.f;
#pragma unroll
        for (int ii = 0; ii < DR_KMAX; ++ii) {
            int i = ii * DR_SPLIT + p;
            if (i < dk) {
                s[ii] *= decay;
                kv += s[ii] * kt[i];
            }
        }
        kv = dr_group_sum(kv);
        float vj = on ? v[th * dv + j] : 0.f;
        float d = (vj - kv) * bt;
        float o = 0.f;
#pragma unroll
        for (int ii = 0; ii < DR_KMAX; ++ii) {
            int i = ii * DR_SPLIT + p;
            if (i < dk) {
                s[ii] += kt[i] * d;
                o += s[ii] * (qt[i] * scale);
            }
        }
        o = dr_group_sum(o);
        if (on && p == 0) out[th * dv + j] = o;
    }
#pragma unroll
    for (int ii = 0; ii < DR_KMAX; ++ii) {
        int i = ii * DR_SPLIT + p;
        if (on && i < dk) st[(size_t)i * dv + j] = s[ii];
    }
}

// out[r, :] = sum_t w[r * taps + t] * table[idx[r * taps + t], :] for r < rows (the vision
// position table resampled to an image's grid). One thread per output value.
extern "C" __global__ void gather_weighted(float* out, const float* table, const unsigned int* idx,
                                           const float* w, int rows, int dim, int taps) {
    size_t e = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (e >= (size_t)rows * dim) return;
    size_t r = e / dim, d = e % dim;
    float acc = 0.f;
    for (int t = 0; t < taps; ++t) {
        size_t at = r * taps + t;
        acc += table[(size_t)idx[at] * dim + d] * w[at];
    }
    out[e] = acc;
}
