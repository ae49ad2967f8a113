// Block execution of the CUDA stand-in: every thread of a block is a fiber (its own stack) on
// the launching OS thread; a fiber runs until it exits or waits at __syncthreads (all threads of
// the block) or at a warp shuffle (all 32 lanes of its warp), so barrier and shuffle semantics
// hold exactly. Blocks run one after the other in a shuffled order; runnable threads are picked
// in a seeded random order, so code that relies on an unspecified order tends to fail.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace standin {

struct Dim3 {
    unsigned x, y, z;
};

// What a kernel reads through threadIdx / blockIdx / blockDim / gridDim.
struct Coords {
    Dim3 threadIdx, blockIdx, blockDim, gridDim;
};

// Every kernel thread runs on its own stack of STACK_BYTES, aligned to STACK_BYTES, whose top
// holds a StackHeader: the running thread finds itself from its stack pointer, with no
// thread-local lookup (kernels read threadIdx and friends all the time).
constexpr uintptr_t STACK_BYTES = 128 * 1024;

struct StackHeader {
    const Coords* coords;
    void* fiber;
};

inline StackHeader* stack_header() {
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    return (StackHeader*)((sp & ~(STACK_BYTES - 1)) + STACK_BYTES - sizeof(StackHeader));
}

// The coordinates of the kernel thread running now (valid inside a kernel only).
inline const Coords* cur_coords() { return stack_header()->coords; }

// Kinds of kernel parameters, compared with the PTX's `.param` types at module load.
enum ParamKind : char {
    PK_PTR = 'p',  // any pointer: .u64 / .b64 / .s64
    PK_F32 = 'f',
    PK_F64 = 'd',
    PK_I32 = 'i',  // 32-bit integer: .u32 / .s32 / .b32
    PK_I64 = 'l',
    PK_OTHER = '?',
};

// A host-compiled kernel of kernels.cu.
struct KernelInfo {
    const char* name;
    void* fn;
    // Calls fn with its arguments read from CUDA's `void** kernelParams`.
    void (*invoke)(void* fn, void** params);
    int nparams;
    const size_t* sizes;
    const char* kinds;  // one ParamKind per parameter
};

// All host-compiled kernels (kernels.cpp).
const KernelInfo* kernel_table(size_t* n);

// Run every block of grid × block with fn. Returns CUDA_SUCCESS or an error code with a
// description in *err (barrier divergence, unsupported shuffle, fault).
int run_grid(const KernelInfo* k, void** params, Dim3 grid, Dim3 block, std::string* err);

// Device-side intrinsics (used by shim.h).
void syncthreads();
uint32_t shfl_xor32(uint32_t mask, uint32_t v, int lane_mask, int width);
[[noreturn]] void trap(const char* what);

}  // namespace standin
