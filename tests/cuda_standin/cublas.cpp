// libcublas of the CUDA stand-in, written from the cuBLAS documentation (not from the backend):
//
//   C = alpha * op(A) * op(B) + beta * C, column-major; op(A) is m x k, op(B) k x n, C m x n;
//   op(X) = X for CUBLAS_OP_N, X^T for CUBLAS_OP_T and CUBLAS_OP_C (real types);
//   A is lda x (N ? k : m) with lda >= max(1, N ? m : k); B is ldb x (N ? n : k) with
//   ldb >= max(1, N ? k : n); ldc >= max(1, m); element (i, j) of X is X[i + j * ldX];
//   when beta == 0, C need not be valid input (it is not read).
//
// cublasSgemm and cublasGemmEx (A, B in CUDA_R_16BF or CUDA_R_32F, C in CUDA_R_32F or
// CUDA_R_16BF, compute CUBLAS_COMPUTE_32F[_PEDANTIC|_FAST_TF32|_FAST_16BF]) accumulate in f32 in
// the order of k. The math mode's TF32 setting rounds f32 inputs to TF32 as tensor cores do.
// Anything else is NOT_SUPPORTED (here or from stubs.cpp), never a silent success.

#include <cmath>
#include <cstdio>
#include <cstring>
#include <mutex>
#include <set>
#include <vector>

#include "common.h"

using standin::log;

namespace {

enum { OP_N = 0, OP_T = 1, OP_C = 2 };
enum { R_32F = 0, R_16F = 2, R_16BF = 14 };
enum {
    COMPUTE_32F = 68,
    COMPUTE_32F_PEDANTIC = 69,
    COMPUTE_32F_FAST_16F = 74,
    COMPUTE_32F_FAST_16BF = 75,
    COMPUTE_32F_FAST_TF32 = 77,
};
enum { POINTER_MODE_HOST = 0, POINTER_MODE_DEVICE = 1 };
enum { DEFAULT_MATH = 0, TENSOR_OP_MATH = 1, PEDANTIC_MATH = 2, TF32_TENSOR_OP_MATH = 3,
       FP32_EMULATED_BF16X9_MATH = 4, DISALLOW_REDUCED_PRECISION_REDUCTION = 16 };

struct Handle {
    CUstream stream = nullptr;
    int pointer_mode = POINTER_MODE_HOST;
    int math_mode = DEFAULT_MATH;
};

std::mutex mu;
std::set<Handle*> handles;

int fail(int rc, const char* call, const char* why) {
    log("%s -> %d: %s", call, rc, why);
    return rc;
}

bool live(Handle* h) {
    std::lock_guard<std::mutex> g(mu);
    return handles.count(h) > 0;
}

float bf16_to_f32(uint16_t b) {
    uint32_t u = (uint32_t)b << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

uint16_t f32_to_bf16(float f) {  // round to nearest even; NaN stays NaN
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return (uint16_t)(u >> 16);
}

// Keep `bits` mantissa bits, round to nearest (ties away, as cvt.rna.tf32.f32).
float round_mantissa(float f, int bits) {
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7f800000u) == 0x7f800000u) return f;
    int drop = 23 - bits;
    u += 1u << (drop - 1);
    u &= ~((1u << drop) - 1);
    memcpy(&f, &u, 4);
    return f;
}

enum Rounding { EXACT, TF32, BF16 };

float round_input(float v, Rounding r) {
    switch (r) {
        case TF32: return round_mantissa(v, 10);
        case BF16: return bf16_to_f32(f32_to_bf16(v));
        default: return v;
    }
}

struct Operand {
    const void* p;
    int type;  // R_32F or R_16BF
    int ld;
    int op;
};

// Element (r, c) of the stored (not transposed) matrix.
float stored(const Operand& x, long r, long c) {
    size_t i = (size_t)r + (size_t)c * (size_t)x.ld;
    if (x.type == R_16BF) return bf16_to_f32(((const uint16_t*)x.p)[i]);
    return ((const float*)x.p)[i];
}

// op(X)(r, c).
float op_elem(const Operand& x, long r, long c) {
    return x.op == OP_N ? stored(x, r, c) : stored(x, c, r);
}

size_t type_bytes(int t) { return t == R_16BF || t == R_16F ? 2 : 4; }

struct Gemm {
    int m, n, k;
    float alpha, beta;
    Operand a, b;
    void* c;
    int ctype, ldc;
    Rounding rounding;
};

void run_gemm(void* arg) {
    const Gemm& g = *(const Gemm*)arg;
    // op(A) row by row and op(B) column by column, so each C(i, j) is a contiguous dot product.
    std::vector<float> ar((size_t)g.m * g.k), bc((size_t)g.n * g.k);
    for (long i = 0; i < g.m; ++i)
        for (long l = 0; l < g.k; ++l)
            ar[(size_t)i * g.k + l] = round_input(op_elem(g.a, i, l), g.rounding);
    for (long j = 0; j < g.n; ++j)
        for (long l = 0; l < g.k; ++l)
            bc[(size_t)j * g.k + l] = round_input(op_elem(g.b, l, j), g.rounding);
    for (long j = 0; j < g.n; ++j) {
        for (long i = 0; i < g.m; ++i) {
            const float* x = &ar[(size_t)i * g.k];
            const float* y = &bc[(size_t)j * g.k];
            float acc = 0.f;
            for (long l = 0; l < g.k; ++l) acc = fmaf(x[l], y[l], acc);
            size_t ci = (size_t)i + (size_t)j * (size_t)g.ldc;
            if (g.ctype == R_32F) {
                float* c = (float*)g.c + ci;
                *c = g.beta == 0.f ? g.alpha * acc : g.alpha * acc + g.beta * *c;
            } else {
                uint16_t* c = (uint16_t*)g.c + ci;
                float v = g.beta == 0.f ? g.alpha * acc : g.alpha * acc + g.beta * bf16_to_f32(*c);
                *c = f32_to_bf16(v);
            }
        }
    }
}

// Bytes spanned by a rows x cols column-major matrix with leading dimension ld.
size_t extent(long rows, long cols, int ld, size_t elem) {
    if (rows == 0 || cols == 0) return 0;
    return ((size_t)(cols - 1) * (size_t)ld + (size_t)rows) * elem;
}

int gemm(const char* call, Handle* h, int transa, int transb, int m, int n, int k,
         const void* alpha, const void* A, int atype, int lda, const void* B, int btype, int ldb,
         const void* beta, void* C, int ctype, int ldc, Rounding rounding) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, call, "not a live handle");
    char why[300];
    for (int t : {transa, transb})
        if (t != OP_N && t != OP_T && t != OP_C)
            return fail(CUBLAS_STATUS_INVALID_VALUE, call, "operation is not N, T or C");
    if (m < 0 || n < 0 || k < 0) return fail(CUBLAS_STATUS_INVALID_VALUE, call, "negative size");
    int lda_min = transa == OP_N ? m : k, ldb_min = transb == OP_N ? k : n;
    if (lda < (lda_min > 1 ? lda_min : 1) || ldb < (ldb_min > 1 ? ldb_min : 1) ||
        ldc < (m > 1 ? m : 1)) {
        snprintf(why, sizeof why,
                 "leading dimension too small: m=%d n=%d k=%d trans=%d,%d lda=%d (min %d) "
                 "ldb=%d (min %d) ldc=%d (min %d)",
                 m, n, k, transa, transb, lda, lda_min, ldb, ldb_min, ldc, m);
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, why);
    }
    if (alpha == nullptr || beta == nullptr)
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "alpha or beta is null");
    if (!cuda_standin_stream_ok(h->stream))
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, call,
                    "the handle's stream is not a live stream, or no context is current");
    if (m == 0 || n == 0) return CUBLAS_STATUS_SUCCESS;
    if (h->pointer_mode == POINTER_MODE_DEVICE &&
        (!cuda_standin_device_range((uintptr_t)alpha, 4) ||
         !cuda_standin_device_range((uintptr_t)beta, 4)))
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, call,
                    "pointer mode DEVICE but alpha or beta is not device memory");
    Gemm g;
    g.m = m;
    g.n = n;
    g.k = k;
    memcpy(&g.alpha, alpha, 4);
    memcpy(&g.beta, beta, 4);
    g.a = {A, atype, lda, transa};
    g.b = {B, btype, ldb, transb};
    g.c = C;
    g.ctype = ctype;
    g.ldc = ldc;
    g.rounding = rounding;
    // What each operand spans must be device memory (reading past it is a fault on a GPU).
    struct {
        const char* name;
        const void* p;
        size_t bytes;
        bool used;
    } spans[] = {
        {"A", A, extent(transa == OP_N ? m : k, transa == OP_N ? k : m, lda, type_bytes(atype)), k > 0},
        {"B", B, extent(transb == OP_N ? k : n, transb == OP_N ? n : k, ldb, type_bytes(btype)), k > 0},
        {"C", C, extent(m, n, ldc, type_bytes(ctype)), true},
    };
    for (auto& s : spans) {
        if (s.used && !cuda_standin_device_range((uintptr_t)s.p, s.bytes)) {
            snprintf(why, sizeof why,
                     "%s (%p, %zu bytes as given by the sizes, transposes and leading "
                     "dimension) is not inside one device allocation",
                     s.name, s.p, s.bytes);
            return fail(CUBLAS_STATUS_EXECUTION_FAILED, call, why);
        }
    }
    if (k == 0) g.alpha = 0.f;  // C = beta * C
    char fault[512];
    if (cuda_standin_guarded(run_gemm, &g, fault, sizeof fault) != 0)
        return fail(CUBLAS_STATUS_EXECUTION_FAILED, call, fault);
    return CUBLAS_STATUS_SUCCESS;
}

Rounding math_rounding(Handle* h) {
    int base = h->math_mode & 0xf;
    return base == TF32_TENSOR_OP_MATH ? TF32 : EXACT;
}

}  // namespace

STANDIN_API int cublasCreate_v2(Handle** h) {
    if (h == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate", "null");
    if (!cuda_standin_stream_ok(nullptr))
        return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasCreate", "no current CUDA context");
    auto* x = new Handle;
    std::lock_guard<std::mutex> g(mu);
    handles.insert(x);
    *h = x;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasDestroy_v2(Handle* h) {
    std::lock_guard<std::mutex> g(mu);
    if (!handles.erase(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasDestroy", "not a live handle");
    delete h;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasSetStream_v2(Handle* h, CUstream s) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetStream", "not a live handle");
    if (!cuda_standin_stream_ok(s)) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetStream", "not a live stream");
    h->stream = s;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasGetStream_v2(Handle* h, CUstream* s) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetStream", "not a live handle");
    if (s == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream", "null");
    *s = h->stream;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasSetPointerMode_v2(Handle* h, int mode) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetPointerMode", "not a live handle");
    if (mode != POINTER_MODE_HOST && mode != POINTER_MODE_DEVICE)
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetPointerMode", "unknown mode");
    h->pointer_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasGetPointerMode_v2(Handle* h, int* mode) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetPointerMode", "not a live handle");
    if (mode == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetPointerMode", "null");
    *mode = h->pointer_mode;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasSetMathMode(Handle* h, int mode) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetMathMode", "not a live handle");
    int base = mode & ~DISALLOW_REDUCED_PRECISION_REDUCTION;
    if (base == TENSOR_OP_MATH)  // deprecated; means FAST_16F for single precision
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, "cublasSetMathMode", "CUBLAS_TENSOR_OP_MATH is not implemented by the stand-in");
    if (base != DEFAULT_MATH && base != PEDANTIC_MATH && base != TF32_TENSOR_OP_MATH &&
        base != FP32_EMULATED_BF16X9_MATH)
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetMathMode", "unknown mode");
    h->math_mode = mode;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasGetMathMode(Handle* h, int* mode) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetMathMode", "not a live handle");
    if (mode == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode", "null");
    *mode = h->math_mode;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API int cublasSetWorkspace_v2(Handle* h, void* ws, size_t bytes) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSetWorkspace", "not a live handle");
    if (bytes > 0 && !cuda_standin_device_range((uintptr_t)ws, bytes))
        return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasSetWorkspace", "workspace is not device memory");
    return CUBLAS_STATUS_SUCCESS;  // the stand-in needs no workspace
}

STANDIN_API int cublasGetVersion_v2(Handle* h, int* v) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasGetVersion", "not a live handle");
    if (v == nullptr) return fail(CUBLAS_STATUS_INVALID_VALUE, "cublasGetVersion", "null");
    *v = 130000;
    return CUBLAS_STATUS_SUCCESS;
}

STANDIN_API const char* cublasGetStatusName(int s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
        case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
        case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
        case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
        case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    }
    return "CUBLAS_STATUS_UNKNOWN";
}

STANDIN_API const char* cublasGetStatusString(int s) { return cublasGetStatusName(s); }

STANDIN_API int cublasSgemm_v2(Handle* h, int transa, int transb, int m, int n, int k,
                               const float* alpha, const float* A, int lda, const float* B,
                               int ldb, const float* beta, float* C, int ldc) {
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, "cublasSgemm", "not a live handle");
    return gemm("cublasSgemm", h, transa, transb, m, n, k, alpha, A, R_32F, lda, B, R_32F, ldb,
                beta, C, R_32F, ldc, math_rounding(h));
}

STANDIN_API int cublasGemmEx(Handle* h, int transa, int transb, int m, int n, int k,
                             const void* alpha, const void* A, int atype, int lda, const void* B,
                             int btype, int ldb, const void* beta, void* C, int ctype, int ldc,
                             int compute, int algo) {
    const char* call = "cublasGemmEx";
    if (!live(h)) return fail(CUBLAS_STATUS_NOT_INITIALIZED, call, "not a live handle");
    if (!(algo == -1 || (algo >= 0 && algo <= 23) || (algo >= 99 && algo <= 115)))
        return fail(CUBLAS_STATUS_INVALID_VALUE, call, "unknown algorithm");
    Rounding r;
    switch (compute) {
        case COMPUTE_32F: r = math_rounding(h); break;
        case COMPUTE_32F_PEDANTIC: r = EXACT; break;
        case COMPUTE_32F_FAST_TF32: r = TF32; break;
        case COMPUTE_32F_FAST_16BF: r = BF16; break;
        default: {
            char why[120];
            snprintf(why, sizeof why, "compute type %d is not implemented by the stand-in", compute);
            return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, why);
        }
    }
    bool ab_bf16 = atype == R_16BF && btype == R_16BF;
    bool ab_f32 = atype == R_32F && btype == R_32F;
    bool ok = (ab_bf16 && (ctype == R_32F || ctype == R_16BF)) || (ab_f32 && ctype == R_32F);
    if (!ok) {
        char why[160];
        snprintf(why, sizeof why, "types A=%d B=%d C=%d with compute %d are not implemented by the stand-in",
                 atype, btype, ctype, compute);
        return fail(CUBLAS_STATUS_NOT_SUPPORTED, call, why);
    }
    if ((ab_bf16 || ctype == R_16BF) && cuda_standin_cc() < 80)
        return fail(CUBLAS_STATUS_ARCH_MISMATCH, call, "bf16 needs compute capability 8.0");
    return gemm(call, h, transa, transb, m, n, k, alpha, A, atype, lda, B, btype, ldb, beta, C,
                ctype, ldc, r);
}
