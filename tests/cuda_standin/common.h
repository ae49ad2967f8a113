// The CUDA stand-in (test-only; see README.md): what the driver, the kernels and the cuBLAS
// stand-in share. Values of the CUDA enums are the documented ones (cuda.h, cublas_api.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

typedef int CUresult;
typedef int CUdevice;
typedef uint64_t CUdeviceptr;
typedef struct StandinCtx* CUcontext;
typedef struct StandinStream* CUstream;
typedef struct StandinEvent* CUevent;
typedef struct StandinModule* CUmodule;
typedef struct StandinFunction* CUfunction;

enum : int {
    CUDA_SUCCESS = 0,
    CUDA_ERROR_INVALID_VALUE = 1,
    CUDA_ERROR_OUT_OF_MEMORY = 2,
    CUDA_ERROR_NOT_INITIALIZED = 3,
    CUDA_ERROR_DEINITIALIZED = 4,
    CUDA_ERROR_NO_DEVICE = 100,
    CUDA_ERROR_INVALID_DEVICE = 101,
    CUDA_ERROR_INVALID_IMAGE = 200,
    CUDA_ERROR_INVALID_CONTEXT = 201,
    CUDA_ERROR_NO_BINARY_FOR_GPU = 209,
    CUDA_ERROR_INVALID_PTX = 218,
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION = 222,
    CUDA_ERROR_INVALID_HANDLE = 400,
    CUDA_ERROR_NOT_FOUND = 500,
    CUDA_ERROR_NOT_READY = 600,
    CUDA_ERROR_ILLEGAL_ADDRESS = 700,
    CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES = 701,
    CUDA_ERROR_ILLEGAL_INSTRUCTION = 715,
    CUDA_ERROR_MISALIGNED_ADDRESS = 716,
    CUDA_ERROR_LAUNCH_FAILED = 719,
    CUDA_ERROR_NOT_SUPPORTED = 801,
    CUDA_ERROR_UNKNOWN = 999,
};

enum : int {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
};

#define STANDIN_API extern "C" __attribute__((visibility("default")))

// Entry points of libcuda's stand-in that libcublas's stand-in uses (not CUDA API).
// Whether [p, p + bytes) lies inside one live device allocation.
STANDIN_API int cuda_standin_device_range(uint64_t p, size_t bytes);
// Whether `s` is a stream the driver knows (including the null/legacy/per-thread streams) and
// a context is current on this thread.
STANDIN_API int cuda_standin_stream_ok(CUstream s);
// The device's compute capability (major * 10 + minor).
STANDIN_API int cuda_standin_cc();
// Run fn(arg) with hardware faults (SIGSEGV, SIGBUS, SIGILL, SIGFPE) turned into a return value
// of 1 with a description in *why; 0 when fn returned normally.
STANDIN_API int cuda_standin_guarded(void (*fn)(void*), void* arg, char* why, size_t why_len);

namespace standin {
// One line on stderr, prefixed "cuda-standin: ".
void log(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
}  // namespace standin
