// Just enough of CUDA's device language for g++ to compile kernels.cu for the host, with the
// semantics kernels.cu relies on: __shared__ is shared by the threads of one block (all of which
// run on one OS thread, see exec.h) and nobody else; __syncthreads is a barrier of the block;
// __shfl_xor_sync exchanges values among the 32 lanes of a warp. Anything kernels.cu uses that
// is missing here fails to compile, loudly.
#pragma once

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "exec.h"

#define __global__
#define __device__
#define __host__
#define __forceinline__ inline __attribute__((always_inline))
#define __noinline__ __attribute__((noinline))
#define __restrict__ __restrict
// One block runs at a time on an OS thread, so a thread_local static is the block's memory.
#define __shared__ static thread_local

#define threadIdx (::standin::cur_coords()->threadIdx)
#define blockIdx (::standin::cur_coords()->blockIdx)
#define blockDim (::standin::cur_coords()->blockDim)
#define gridDim (::standin::cur_coords()->gridDim)
#define warpSize 32

static inline void __syncthreads() { ::standin::syncthreads(); }
static inline void __trap() { ::standin::trap("__trap()"); }

static inline unsigned __shfl_xor_sync(unsigned mask, unsigned v, int lane_mask, int width = 32) {
    return ::standin::shfl_xor32(mask, v, lane_mask, width);
}
static inline int __shfl_xor_sync(unsigned mask, int v, int lane_mask, int width = 32) {
    return (int)::standin::shfl_xor32(mask, (unsigned)v, lane_mask, width);
}
static inline float __shfl_xor_sync(unsigned mask, float v, int lane_mask, int width = 32) {
    uint32_t u;
    memcpy(&u, &v, 4);
    u = ::standin::shfl_xor32(mask, u, lane_mask, width);
    memcpy(&v, &u, 4);
    return v;
}

// Vector types with CUDA's sizes and alignments.
struct alignas(16) uint4 {
    unsigned int x, y, z, w;
};
struct alignas(16) int4 {
    int x, y, z, w;
};
struct alignas(16) float4 {
    float x, y, z, w;
};
struct alignas(8) float2 {
    float x, y;
};
struct alignas(8) uint2 {
    unsigned int x, y;
};

// Bit casts.
static inline float __uint_as_float(unsigned int u) {
    float f;
    memcpy(&f, &u, 4);
    return f;
}
static inline float __int_as_float(int i) {
    float f;
    memcpy(&f, &i, 4);
    return f;
}
static inline unsigned int __float_as_uint(float f) {
    unsigned int u;
    memcpy(&u, &f, 4);
    return u;
}
static inline int __float_as_int(float f) {
    int i;
    memcpy(&i, &f, 4);
    return i;
}

// Math: the host's correctly rounded (or nearly) functions; CUDA's differ by a few ulp.
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline int max(int a, int b) { return a > b ? a : b; }
static inline unsigned int min(unsigned int a, unsigned int b) { return a < b ? a : b; }
static inline unsigned int max(unsigned int a, unsigned int b) { return a > b ? a : b; }
