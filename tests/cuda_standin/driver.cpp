// libcuda.so.1 of the CUDA stand-in: the driver API calls cudarc and the backend make, on the
// host. Device memory is host memory (one mapping per allocation, between inaccessible guard
// pages, filled with 0xff bytes - NaN as f32 - until written); a stream runs its work at once,
// in order; modules are PTX from the real NVRTC whose entry points are mapped to the
// host-compiled kernels.cu (kernels.cpp) after checking that names and parameter lists agree.
// Anything else is exported by stubs.cpp and returns CUDA_ERROR_NOT_SUPPORTED.
//
// Environment: CUDA_STANDIN_CC (compute capability, default 9.0), CUDA_STANDIN_DRIVER_VERSION
// (default 13050: accepts PTX ISA up to 9.5), CUDA_STANDIN_MEM_GIB (reported device memory,
// default 80), CUDA_STANDIN_SEED (thread order), CUDA_STANDIN_MARK (a file to which cuInit
// appends a line, so a script can tell the stand-in was loaded rather than a real driver).

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <iterator>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "common.h"
#include "exec.h"

using standin::log;

struct StandinCtx {
    int refcount = 0;
    int sticky = CUDA_SUCCESS;  // a fault makes the context unusable, as on a GPU
};
struct StandinStream {
    unsigned flags;
};
struct StandinEvent {
    unsigned flags;
    bool recorded = false;
    double t_ms = 0;
};

struct PtxParam {
    std::string type;  // .u64, .f32, ... or .b8 for byte arrays
    size_t bytes;
};
struct PtxEntry {
    std::vector<PtxParam> params;
    size_t static_shared = 0;
};
struct StandinModule {
    std::map<std::string, PtxEntry> entries;
    std::map<std::string, StandinFunction*> functions;
    int ptx_version = 0;  // major * 10 + minor
};
struct StandinFunction {
    StandinModule* module;
    const standin::KernelInfo* kernel;
    const PtxEntry* entry;
    int max_dynamic_shared;  // 48 KiB - static unless raised by cuFuncSetAttribute
};

namespace {

std::mutex mu;  // guards everything below
bool initialized = false;
StandinCtx primary;
std::set<StandinStream*> streams;
std::set<StandinEvent*> events;
std::set<StandinModule*> modules;
std::set<StandinFunction*> functions;
thread_local StandinCtx* current = nullptr;

struct Alloc {
    size_t bytes;
    char* region;
    size_t region_bytes;
};
std::map<uintptr_t, Alloc> allocs;  // by device pointer
std::deque<std::pair<uintptr_t, Alloc>> freed;  // kept inaccessible for a while
size_t freed_bytes = 0;
size_t used_bytes = 0;

std::string describe_locked(uintptr_t a);

const size_t page = (size_t)sysconf(_SC_PAGESIZE);

int env_int(const char* name, int dflt) {
    const char* v = getenv(name);
    return v && *v ? atoi(v) : dflt;
}

int cc() {
    static int v = [] {
        const char* s = getenv("CUDA_STANDIN_CC");
        if (s && *s) {
            int a = 0, b = 0;
            if (sscanf(s, "%d.%d", &a, &b) >= 1) return a * 10 + b;
        }
        return 90;
    }();
    return v;
}

int driver_version() { return env_int("CUDA_STANDIN_DRIVER_VERSION", 13050); }

// Newest PTX ISA (major * 10 + minor) a driver of this CUDA version can JIT.
int max_ptx_isa(int version) {
    int major = version / 1000, minor = (version % 1000) / 10;
    if (major >= 13) return 90 + minor;
    if (major == 12) {
        static const int isa[] = {80, 81, 82, 83, 84, 85, 85, 86, 87, 88};
        return isa[minor < 10 ? minor : 9];
    }
    if (major == 11) return 70 + minor;
    return 0;
}

size_t total_mem() { return (size_t)env_int("CUDA_STANDIN_MEM_GIB", 80) << 30; }

double now_ms() {
    return std::chrono::duration<double, std::milli>(
               std::chrono::steady_clock::now().time_since_epoch())
        .count();
}

// Errors: every error the stand-in returns is also logged with the call and the reason.
CUresult fail(CUresult rc, const char* call, const char* why) {
    log("%s -> %d: %s", call, rc, why);
    return rc;
}

// The current context, or the error a call needing one returns. Holds mu.
CUresult need_ctx_locked(const char* call) {
    if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED, call, "cuInit was not called");
    if (current == nullptr || current->refcount == 0)
        return fail(CUDA_ERROR_INVALID_CONTEXT, call, "no current context on this thread");
    if (current->sticky != CUDA_SUCCESS) return current->sticky;
    return CUDA_SUCCESS;
}

CUresult need_ctx(const char* call) {
    std::lock_guard<std::mutex> g(mu);
    return need_ctx_locked(call);
}

bool stream_ok_locked(CUstream s) {
    uintptr_t v = (uintptr_t)s;
    return v == 0 || v == 1 || v == 2 || streams.count(s) > 0;
}

// The live allocation holding [p, p + bytes), if any. Holds mu.
const std::pair<const uintptr_t, Alloc>* find_locked(uintptr_t p, size_t bytes) {
    auto it = allocs.upper_bound(p);
    if (it == allocs.begin()) return nullptr;
    --it;
    if (p < it->first || p - it->first > it->second.bytes) return nullptr;
    if (bytes > it->second.bytes - (p - it->first)) return nullptr;
    return &*it;
}

CUresult check_range(const char* call, uintptr_t p, size_t bytes) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked(call);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == 0) return CUDA_SUCCESS;
    if (find_locked(p, bytes) == nullptr) {
        char why[300];
        snprintf(why, sizeof why, "[%#lx, +%zu) is not inside one live device allocation (%s)",
                 (unsigned long)p, bytes, describe_locked(p).c_str());
        return fail(CUDA_ERROR_INVALID_VALUE, call, why);
    }
    return CUDA_SUCCESS;
}

CUresult mem_alloc(const char* call, CUdeviceptr* dptr, size_t bytes) {
    if (dptr == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, call, "null result pointer");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked(call);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == 0) return fail(CUDA_ERROR_INVALID_VALUE, call, "0 bytes requested");
    if (bytes > total_mem() - used_bytes) return fail(CUDA_ERROR_OUT_OF_MEMORY, call, "out of memory");
    // [guard page][padding][data, rounded up to 16 bytes][guard page]: an access past the end
    // faults at once when the size is a multiple of 16.
    size_t rounded = (bytes + 15) & ~(size_t)15;
    size_t data_pages = (rounded + page - 1) / page * page;
    size_t region_bytes = data_pages + 2 * page;
    void* region = mmap(nullptr, region_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (region == MAP_FAILED) return fail(CUDA_ERROR_OUT_OF_MEMORY, call, "mmap failed");
    char* r = (char*)region;
    if (mprotect(r + page, data_pages, PROT_READ | PROT_WRITE) != 0) {
        munmap(region, region_bytes);
        return fail(CUDA_ERROR_OUT_OF_MEMORY, call, "mprotect failed");
    }
    char* data = r + page + data_pages - rounded;
    memset(data, 0xff, rounded);  // uninitialised device memory reads as NaN
    allocs[(uintptr_t)data] = Alloc{bytes, r, region_bytes};
    used_bytes += bytes;
    *dptr = (CUdeviceptr)(uintptr_t)data;
    return CUDA_SUCCESS;
}

CUresult mem_free(const char* call, CUdeviceptr p) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked(call);
    if (rc != CUDA_SUCCESS) return rc;
    auto it = allocs.find((uintptr_t)p);
    if (it == allocs.end())
        return fail(CUDA_ERROR_INVALID_VALUE, call, "not the start of a live allocation");
    Alloc a = it->second;
    allocs.erase(it);
    used_bytes -= a.bytes;
    // Keep the range mapped but inaccessible for a while, so a use after free faults.
    mprotect(a.region, a.region_bytes, PROT_NONE);
    madvise(a.region, a.region_bytes, MADV_DONTNEED);
    freed.emplace_back((uintptr_t)p, a);
    freed_bytes += a.region_bytes;
    while (freed.size() > 4096 || freed_bytes > ((size_t)1 << 32)) {
        freed_bytes -= freed.front().second.region_bytes;
        munmap(freed.front().second.region, freed.front().second.region_bytes);
        freed.pop_front();
    }
    return CUDA_SUCCESS;
}

// --- PTX -------------------------------------------------------------------------------------

size_t type_bytes(const std::string& t) {
    if (t.size() < 3) return 0;
    int bits = atoi(t.c_str() + 2);
    return bits / 8;
}

bool parse_ptx(const char* text, StandinModule* m, std::string* why) {
    std::string s(text);
    size_t v = s.find(".version ");
    if (v == std::string::npos) {
        *why = "no .version directive";
        return false;
    }
    int maj = 0, min = 0;
    sscanf(s.c_str() + v + 9, "%d.%d", &maj, &min);
    m->ptx_version = maj * 10 + min;
    size_t t = s.find(".target ");
    if (t == std::string::npos) {
        *why = "no .target directive";
        return false;
    }
    std::string target = s.substr(t + 8, s.find_first_of(",\n", t) - t - 8);
    int sm = atoi(target.c_str() + 3);
    bool arch_specific = target.size() > 5 && (target.back() == 'a' || target.back() == 'f');
    if (target.compare(0, 3, "sm_") != 0 || sm > cc() || (arch_specific && sm != cc())) {
        *why = "PTX " + target + " cannot run on a compute capability " +
               std::to_string(cc() / 10) + "." + std::to_string(cc() % 10) + " device";
        return false;
    }
    if (s.find(".address_size 64") == std::string::npos) {
        *why = "not 64-bit PTX";
        return false;
    }
    size_t pos = 0;
    while ((pos = s.find(".entry ", pos)) != std::string::npos) {
        size_t name_start = pos + 7;
        size_t open = s.find('(', name_start);
        size_t close = s.find(')', open);
        if (open == std::string::npos || close == std::string::npos) {
            *why = "malformed .entry";
            return false;
        }
        std::string name = s.substr(name_start, open - name_start);
        while (!name.empty() && isspace((unsigned char)name.back())) name.pop_back();
        PtxEntry e;
        std::string plist = s.substr(open + 1, close - open - 1);
        size_t p = 0;
        while ((p = plist.find(".param", p)) != std::string::npos) {
            size_t end = plist.find(',', p);
            std::string decl = plist.substr(p, end == std::string::npos ? std::string::npos : end - p);
            p += 6;
            PtxParam pp{"", 0};
            // Tokens after .param: state space qualifiers, a type, then the name (maybe [N]).
            size_t q = 6;
            while (q < decl.size()) {
                while (q < decl.size() && isspace((unsigned char)decl[q])) q++;
                size_t qe = q;
                while (qe < decl.size() && !isspace((unsigned char)decl[qe])) qe++;
                std::string tok = decl.substr(q, qe - q);
                q = qe;
                if (tok.empty()) break;
                if (tok[0] == '.' && pp.type.empty() && tok.size() >= 3 &&
                    strchr("usbf", tok[1]) && isdigit((unsigned char)tok[2])) {
                    pp.type = tok;
                    pp.bytes = type_bytes(tok);
                } else if (tok[0] != '.') {
                    size_t br = tok.find('[');
                    if (br != std::string::npos) pp.bytes *= (size_t)atol(tok.c_str() + br + 1);
                }
            }
            if (pp.type.empty()) {
                *why = "unreadable parameter of " + name + ": " + decl;
                return false;
            }
            e.params.push_back(pp);
        }
        // Body: static __shared__ declarations demoted into the entry.
        size_t body = s.find('{', close);
        int depth = 0;
        size_t i = body;
        for (; i < s.size(); ++i) {
            if (s[i] == '{') depth++;
            if (s[i] == '}' && --depth == 0) break;
        }
        std::string b = s.substr(body, i - body);
        size_t sh = 0;
        while ((sh = b.find("\t.shared ", sh)) != std::string::npos ||
               (sh = b.find(" .shared ", sh)) != std::string::npos) {
            size_t line_end = b.find(';', sh);
            std::string decl = b.substr(sh, line_end - sh);
            size_t br = decl.find('[');
            size_t elem = 1;
            for (const char* ty : {".b8", ".u8", ".s8"}) {
                if (decl.find(ty) != std::string::npos) elem = 1;
            }
            for (const char* ty : {".b32", ".u32", ".s32", ".f32"}) {
                if (decl.find(ty) != std::string::npos) elem = 4;
            }
            for (const char* ty : {".b64", ".u64", ".s64", ".f64"}) {
                if (decl.find(ty) != std::string::npos) elem = 8;
            }
            e.static_shared += elem * (br == std::string::npos ? 1 : (size_t)atol(decl.c_str() + br + 1));
            sh = line_end;
        }
        if (m->entries.count(name)) {
            *why = "duplicate entry " + name;
            return false;
        }
        m->entries[name] = e;
        pos = i;
    }
    if (m->entries.empty()) {
        *why = "no .entry in the PTX";
        return false;
    }
    return true;
}

bool kind_matches(char kind, size_t host_bytes, const PtxParam& p) {
    char c = p.type.size() > 1 ? p.type[1] : '?';
    if (host_bytes != p.bytes) return false;
    switch (kind) {
        case standin::PK_PTR:
        case standin::PK_I64:
            return p.bytes == 8 && (c == 'u' || c == 's' || c == 'b');
        case standin::PK_I32:
            return p.bytes == 4 && (c == 'u' || c == 's' || c == 'b');
        case standin::PK_F32:
            return p.type == ".f32";
        case standin::PK_F64:
            return p.type == ".f64";
        default:
            return p.type == ".b8" || c == 'b';
    }
}

// Every PTX entry must be a host-compiled kernel with the same parameter list, and the other
// way round: the stand-in and the binary were built from the same kernels.cu.
bool match_kernels(StandinModule* m, std::string* why) {
    size_t n = 0;
    const standin::KernelInfo* table = standin::kernel_table(&n);
    std::set<std::string> host;
    for (size_t i = 0; i < n; ++i) {
        const standin::KernelInfo& k = table[i];
        host.insert(k.name);
        auto it = m->entries.find(k.name);
        if (it == m->entries.end()) {
            *why = std::string("kernel ") + k.name +
                   " of the stand-in's kernels.cu is not an entry of the PTX (the stand-in was "
                   "built from another kernels.cu than the binary's)";
            return false;
        }
        const PtxEntry& e = it->second;
        bool same = (int)e.params.size() == k.nparams;
        for (int p = 0; same && p < k.nparams; ++p) same = kind_matches(k.kinds[p], k.sizes[p], e.params[p]);
        if (!same) {
            std::string ptx, hostsig;
            for (auto& p : e.params) ptx += p.type + " ";
            for (int p = 0; p < k.nparams; ++p) hostsig += std::string(1, k.kinds[p]) + std::to_string(k.sizes[p]) + " ";
            *why = std::string("kernel ") + k.name + ": PTX parameters [" + ptx +
                   "] differ from the host-compiled kernel's [" + hostsig + "]";
            return false;
        }
    }
    for (auto& kv : m->entries) {
        if (!host.count(kv.first)) {
            *why = "PTX entry " + kv.first + " has no host-compiled kernel in the stand-in";
            return false;
        }
    }
    return true;
}

const char* error_name(CUresult e) {
    switch (e) {
#define N(x) \
    case x:  \
        return #x;
        N(CUDA_SUCCESS)
        N(CUDA_ERROR_INVALID_VALUE)
        N(CUDA_ERROR_OUT_OF_MEMORY)
        N(CUDA_ERROR_NOT_INITIALIZED)
        N(CUDA_ERROR_DEINITIALIZED)
        N(CUDA_ERROR_NO_DEVICE)
        N(CUDA_ERROR_INVALID_DEVICE)
        N(CUDA_ERROR_INVALID_IMAGE)
        N(CUDA_ERROR_INVALID_CONTEXT)
        N(CUDA_ERROR_NO_BINARY_FOR_GPU)
        N(CUDA_ERROR_INVALID_PTX)
        N(CUDA_ERROR_UNSUPPORTED_PTX_VERSION)
        N(CUDA_ERROR_INVALID_HANDLE)
        N(CUDA_ERROR_NOT_FOUND)
        N(CUDA_ERROR_NOT_READY)
        N(CUDA_ERROR_ILLEGAL_ADDRESS)
        N(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)
        N(CUDA_ERROR_ILLEGAL_INSTRUCTION)
        N(CUDA_ERROR_MISALIGNED_ADDRESS)
        N(CUDA_ERROR_LAUNCH_FAILED)
        N(CUDA_ERROR_NOT_SUPPORTED)
        N(CUDA_ERROR_UNKNOWN)
#undef N
    }
    return nullptr;
}

const char* error_string(CUresult e) {
    switch (e) {
        case CUDA_SUCCESS: return "no error";
        case CUDA_ERROR_INVALID_VALUE: return "invalid argument";
        case CUDA_ERROR_OUT_OF_MEMORY: return "out of memory";
        case CUDA_ERROR_NOT_INITIALIZED: return "initialization error";
        case CUDA_ERROR_DEINITIALIZED: return "driver shutting down";
        case CUDA_ERROR_NO_DEVICE: return "no CUDA-capable device is detected";
        case CUDA_ERROR_INVALID_DEVICE: return "invalid device ordinal";
        case CUDA_ERROR_INVALID_IMAGE: return "device kernel image is invalid";
        case CUDA_ERROR_INVALID_CONTEXT: return "invalid device context";
        case CUDA_ERROR_NO_BINARY_FOR_GPU: return "no kernel image is available for execution on the device";
        case CUDA_ERROR_INVALID_PTX: return "a PTX JIT compilation failed";
        case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: return "the provided PTX was compiled with an unsupported toolchain.";
        case CUDA_ERROR_INVALID_HANDLE: return "invalid resource handle";
        case CUDA_ERROR_NOT_FOUND: return "named symbol not found";
        case CUDA_ERROR_NOT_READY: return "device not ready";
        case CUDA_ERROR_ILLEGAL_ADDRESS: return "an illegal memory access was encountered";
        case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: return "too many resources requested for launch";
        case CUDA_ERROR_ILLEGAL_INSTRUCTION: return "an illegal instruction was encountered";
        case CUDA_ERROR_MISALIGNED_ADDRESS: return "misaligned address";
        case CUDA_ERROR_LAUNCH_FAILED: return "unspecified launch failure";
        case CUDA_ERROR_NOT_SUPPORTED: return "operation not supported";
        case CUDA_ERROR_UNKNOWN: return "unknown error";
    }
    return nullptr;
}

}  // namespace

namespace {

// Where `a` is relative to the device allocations. Holds mu.
std::string describe_locked(uintptr_t a) {
    char b[200];
    auto it = allocs.upper_bound(a);
    if (it != allocs.begin()) {
        auto prev = std::prev(it);
        uintptr_t end = prev->first + prev->second.bytes;
        if (a >= prev->first && a < end) {
            snprintf(b, sizeof b, "inside a live %zu-byte allocation", prev->second.bytes);
            return b;
        }
        if (a >= end && a < end + page) {
            snprintf(b, sizeof b, "%lu bytes past the end of a %zu-byte allocation",
                     (unsigned long)(a - end), prev->second.bytes);
            return b;
        }
    }
    if (it != allocs.end() && a < it->first && it->first - a <= 2 * page) {
        snprintf(b, sizeof b, "%lu bytes before a %zu-byte allocation",
                 (unsigned long)(it->first - a), it->second.bytes);
        return b;
    }
    for (auto& f : freed) {
        if (a >= (uintptr_t)f.second.region && a < (uintptr_t)f.second.region + f.second.region_bytes) {
            snprintf(b, sizeof b, "in a freed %zu-byte allocation (use after free)", f.second.bytes);
            return b;
        }
    }
    return "not in or near any device allocation";
}

}  // namespace

namespace standin {

std::string describe_address(uintptr_t a) {
    // Called from the fault handler, never with mu held by this thread.
    std::unique_lock<std::mutex> g(mu, std::try_to_lock);
    if (!g.owns_lock()) return "";
    return describe_locked(a);
}

}  // namespace standin

// --- stand-in internals used by libcublas's stand-in ----------------------------------------

STANDIN_API int cuda_standin_device_range(uint64_t p, size_t bytes) {
    std::lock_guard<std::mutex> g(mu);
    return bytes == 0 || find_locked((uintptr_t)p, bytes) != nullptr;
}

STANDIN_API int cuda_standin_stream_ok(CUstream s) {
    std::lock_guard<std::mutex> g(mu);
    return initialized && current != nullptr && current->refcount > 0 && stream_ok_locked(s);
}

STANDIN_API int cuda_standin_cc() { return cc(); }

// --- driver API ------------------------------------------------------------------------------

STANDIN_API CUresult cuGetErrorName(CUresult e, const char** s) {
    if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *s = error_name(e);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

STANDIN_API CUresult cuGetErrorString(CUresult e, const char** s) {
    if (s == nullptr) return CUDA_ERROR_INVALID_VALUE;
    *s = error_string(e);
    return *s ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
}

// NVRTC opens libcuda.so.1 and asks for the driver's private export tables; it works without
// them, so the stand-in has none (an error, without a log line on every compile).
STANDIN_API CUresult cuGetExportTable(const void** table, const void* id) {
    (void)id;
    if (table != nullptr) *table = nullptr;
    return CUDA_ERROR_NOT_SUPPORTED;
}

STANDIN_API CUresult cuInit(unsigned flags) {
    if (flags != 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuInit", "flags must be 0");
    std::lock_guard<std::mutex> g(mu);
    if (!initialized) {
        initialized = true;
        if (const char* mark = getenv("CUDA_STANDIN_MARK")) {
            int fd = open(mark, O_WRONLY | O_CREAT | O_APPEND, 0644);
            if (fd >= 0) {
                char line[64];
                int n = snprintf(line, sizeof line, "cuInit pid %d\n", (int)getpid());
                if (write(fd, line, n) < 0) log("could not write %s", mark);
                close(fd);
            }
        }
    }
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDriverGetVersion(int* v) {
    if (v == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDriverGetVersion", "null");
    *v = driver_version();
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGetCount(int* n) {
    if (n == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetCount", "null");
    std::lock_guard<std::mutex> g(mu);
    if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED, "cuDeviceGetCount", "cuInit was not called");
    *n = 1;
    return CUDA_SUCCESS;
}

static CUresult check_device(const char* call, CUdevice d) {
    std::lock_guard<std::mutex> g(mu);
    if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED, call, "cuInit was not called");
    if (d != 0) return fail(CUDA_ERROR_INVALID_DEVICE, call, "only device 0 exists");
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGet(CUdevice* d, int ordinal) {
    if (d == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGet", "null");
    CUresult rc = check_device("cuDeviceGet", ordinal);
    if (rc != CUDA_SUCCESS) return rc;
    *d = 0;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGetName(char* name, int len, CUdevice d) {
    CUresult rc = check_device("cuDeviceGetName", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (name == nullptr || len <= 0) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetName", "no buffer");
    snprintf(name, len, "CUDA stand-in (host CPU, compute capability %d.%d)", cc() / 10, cc() % 10);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGetUuid(unsigned char* uuid, CUdevice d) {
    CUresult rc = check_device("cuDeviceGetUuid", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (uuid == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetUuid", "null");
    memcpy(uuid, "cuda-standin-000", 16);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGetUuid_v2(unsigned char* uuid, CUdevice d) { return cuDeviceGetUuid(uuid, d); }

STANDIN_API CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice d) {
    CUresult rc = check_device("cuDeviceTotalMem", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (bytes == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceTotalMem", "null");
    *bytes = total_mem();
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDeviceGetAttribute(int* v, int attrib, CUdevice d) {
    CUresult rc = check_device("cuDeviceGetAttribute", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (v == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDeviceGetAttribute", "null");
    // An H100-like device (sm_90) unless CUDA_STANDIN_CC says otherwise.
    switch (attrib) {
        case 1: *v = 1024; break;           // MAX_THREADS_PER_BLOCK
        case 2: *v = 1024; break;           // MAX_BLOCK_DIM_X
        case 3: *v = 1024; break;           // MAX_BLOCK_DIM_Y
        case 4: *v = 64; break;             // MAX_BLOCK_DIM_Z
        case 5: *v = 2147483647; break;     // MAX_GRID_DIM_X
        case 6: *v = 65535; break;          // MAX_GRID_DIM_Y
        case 7: *v = 65535; break;          // MAX_GRID_DIM_Z
        case 8: *v = 48 * 1024; break;      // MAX_SHARED_MEMORY_PER_BLOCK
        case 9: *v = 64 * 1024; break;      // TOTAL_CONSTANT_MEMORY
        case 10: *v = 32; break;            // WARP_SIZE
        case 12: *v = 65536; break;         // MAX_REGISTERS_PER_BLOCK
        case 13: *v = 1980000; break;       // CLOCK_RATE (kHz)
        case 14: *v = 512; break;           // TEXTURE_ALIGNMENT
        case 16: *v = 132; break;           // MULTIPROCESSOR_COUNT
        case 17: *v = 0; break;             // KERNEL_EXEC_TIMEOUT
        case 18: *v = 0; break;             // INTEGRATED
        case 19: *v = 1; break;             // CAN_MAP_HOST_MEMORY
        case 20: *v = 0; break;             // COMPUTE_MODE (default)
        case 36: *v = 2619000; break;       // MEMORY_CLOCK_RATE (kHz)
        case 37: *v = 5120; break;          // GLOBAL_MEMORY_BUS_WIDTH
        case 38: *v = 50 * 1024 * 1024; break;  // L2_CACHE_SIZE
        case 39: *v = 2048; break;          // MAX_THREADS_PER_MULTIPROCESSOR
        case 41: *v = 1; break;             // UNIFIED_ADDRESSING
        case 75: *v = cc() / 10; break;     // COMPUTE_CAPABILITY_MAJOR
        case 76: *v = cc() % 10; break;     // COMPUTE_CAPABILITY_MINOR
        case 81: *v = 228 * 1024; break;    // MAX_SHARED_MEMORY_PER_MULTIPROCESSOR
        case 82: *v = 65536; break;         // MAX_REGISTERS_PER_MULTIPROCESSOR
        case 83: *v = 1; break;             // MANAGED_MEMORY
        case 97: *v = 227 * 1024; break;    // MAX_SHARED_MEMORY_PER_BLOCK_OPTIN
        case 115: *v = 1; break;            // MEMORY_POOLS_SUPPORTED
        default: {
            char why[80];
            snprintf(why, sizeof why, "attribute %d is not implemented by the stand-in", attrib);
            return fail(CUDA_ERROR_NOT_SUPPORTED, "cuDeviceGetAttribute", why);
        }
    }
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDevicePrimaryCtxRetain(CUcontext* ctx, CUdevice d) {
    CUresult rc = check_device("cuDevicePrimaryCtxRetain", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (ctx == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxRetain", "null");
    std::lock_guard<std::mutex> g(mu);
    primary.refcount++;
    *ctx = &primary;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDevicePrimaryCtxRelease_v2(CUdevice d) {
    CUresult rc = check_device("cuDevicePrimaryCtxRelease", d);
    if (rc != CUDA_SUCCESS) return rc;
    std::lock_guard<std::mutex> g(mu);
    if (primary.refcount == 0)
        return fail(CUDA_ERROR_INVALID_CONTEXT, "cuDevicePrimaryCtxRelease", "not retained");
    if (--primary.refcount == 0) primary.sticky = CUDA_SUCCESS;  // the context is reset
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuDevicePrimaryCtxGetState(CUdevice d, unsigned* flags, int* active) {
    CUresult rc = check_device("cuDevicePrimaryCtxGetState", d);
    if (rc != CUDA_SUCCESS) return rc;
    if (flags == nullptr || active == nullptr)
        return fail(CUDA_ERROR_INVALID_VALUE, "cuDevicePrimaryCtxGetState", "null");
    std::lock_guard<std::mutex> g(mu);
    *flags = 0;
    *active = primary.refcount > 0;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuCtxGetCurrent(CUcontext* ctx) {
    if (ctx == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuCtxGetCurrent", "null");
    std::lock_guard<std::mutex> g(mu);
    if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED, "cuCtxGetCurrent", "cuInit was not called");
    *ctx = current;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuCtxSetCurrent(CUcontext ctx) {
    std::lock_guard<std::mutex> g(mu);
    if (!initialized) return fail(CUDA_ERROR_NOT_INITIALIZED, "cuCtxSetCurrent", "cuInit was not called");
    if (ctx != nullptr && (ctx != &primary || primary.refcount == 0))
        return fail(CUDA_ERROR_INVALID_CONTEXT, "cuCtxSetCurrent", "not a live context");
    current = ctx;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuCtxGetDevice(CUdevice* d) {
    if (d == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuCtxGetDevice", "null");
    CUresult rc = need_ctx("cuCtxGetDevice");
    if (rc != CUDA_SUCCESS) return rc;
    *d = 0;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuCtxSynchronize() { return need_ctx("cuCtxSynchronize"); }

// Streams: work runs when it is enqueued, so a stream is always idle.
STANDIN_API CUresult cuStreamCreate(CUstream* s, unsigned flags) {
    if (s == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuStreamCreate");
    if (rc != CUDA_SUCCESS) return rc;
    if (flags > 1) return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamCreate", "unknown flags");
    *s = new StandinStream{flags};
    streams.insert(*s);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuStreamDestroy_v2(CUstream s) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuStreamDestroy");
    if (rc != CUDA_SUCCESS) return rc;
    if (!streams.erase(s)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamDestroy", "not a created stream");
    delete s;
    return CUDA_SUCCESS;
}

static CUresult stream_call(const char* call, CUstream s) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked(call);
    if (rc != CUDA_SUCCESS) return rc;
    if (!stream_ok_locked(s)) return fail(CUDA_ERROR_INVALID_HANDLE, call, "unknown stream");
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuStreamSynchronize(CUstream s) { return stream_call("cuStreamSynchronize", s); }
STANDIN_API CUresult cuStreamQuery(CUstream s) { return stream_call("cuStreamQuery", s); }

STANDIN_API CUresult cuStreamWaitEvent(CUstream s, CUevent e, unsigned flags) {
    CUresult rc = stream_call("cuStreamWaitEvent", s);
    if (rc != CUDA_SUCCESS) return rc;
    std::lock_guard<std::mutex> g(mu);
    if (!events.count(e)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuStreamWaitEvent", "unknown event");
    if (flags != 0 && flags != 1) return fail(CUDA_ERROR_INVALID_VALUE, "cuStreamWaitEvent", "flags");
    return CUDA_SUCCESS;
}

// Events: recorded at host time (timings through the stand-in mean nothing).
STANDIN_API CUresult cuEventCreate(CUevent* e, unsigned flags) {
    if (e == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuEventCreate", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuEventCreate");
    if (rc != CUDA_SUCCESS) return rc;
    *e = new StandinEvent{flags};
    events.insert(*e);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuEventRecord(CUevent e, CUstream s) {
    CUresult rc = stream_call("cuEventRecord", s);
    if (rc != CUDA_SUCCESS) return rc;
    std::lock_guard<std::mutex> g(mu);
    if (!events.count(e)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventRecord", "unknown event");
    e->recorded = true;
    e->t_ms = now_ms();
    return CUDA_SUCCESS;
}

static CUresult event_call(const char* call, CUevent e) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked(call);
    if (rc != CUDA_SUCCESS) return rc;
    if (!events.count(e)) return fail(CUDA_ERROR_INVALID_HANDLE, call, "unknown event");
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuEventSynchronize(CUevent e) { return event_call("cuEventSynchronize", e); }
STANDIN_API CUresult cuEventQuery(CUevent e) { return event_call("cuEventQuery", e); }

STANDIN_API CUresult cuEventDestroy_v2(CUevent e) {
    std::lock_guard<std::mutex> g(mu);
    if (!events.erase(e)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventDestroy", "unknown event");
    delete e;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuEventElapsedTime(float* ms, CUevent a, CUevent b) {
    if (ms == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuEventElapsedTime", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuEventElapsedTime");
    if (rc != CUDA_SUCCESS) return rc;
    if (!events.count(a) || !events.count(b))
        return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "unknown event");
    if ((a->flags | b->flags) & 2)  // CU_EVENT_DISABLE_TIMING
        return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "event created without timing");
    if (!a->recorded || !b->recorded)
        return fail(CUDA_ERROR_INVALID_HANDLE, "cuEventElapsedTime", "event not recorded");
    *ms = (float)(b->t_ms - a->t_ms);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuEventElapsedTime_v2(float* ms, CUevent a, CUevent b) {
    return cuEventElapsedTime(ms, a, b);
}

// Memory.
STANDIN_API CUresult cuMemAlloc_v2(CUdeviceptr* p, size_t bytes) { return mem_alloc("cuMemAlloc", p, bytes); }
STANDIN_API CUresult cuMemFree_v2(CUdeviceptr p) { return mem_free("cuMemFree", p); }

STANDIN_API CUresult cuMemAllocAsync(CUdeviceptr* p, size_t bytes, CUstream s) {
    CUresult rc = stream_call("cuMemAllocAsync", s);
    return rc != CUDA_SUCCESS ? rc : mem_alloc("cuMemAllocAsync", p, bytes);
}

STANDIN_API CUresult cuMemFreeAsync(CUdeviceptr p, CUstream s) {
    CUresult rc = stream_call("cuMemFreeAsync", s);
    return rc != CUDA_SUCCESS ? rc : mem_free("cuMemFreeAsync", p);
}

STANDIN_API CUresult cuMemGetInfo_v2(size_t* free_b, size_t* total_b) {
    if (free_b == nullptr || total_b == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemGetInfo", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuMemGetInfo");
    if (rc != CUDA_SUCCESS) return rc;
    *total_b = total_mem();
    *free_b = total_mem() - used_bytes;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void* src, size_t n) {
    CUresult rc = check_range("cuMemcpyHtoD", dst, n);
    if (rc != CUDA_SUCCESS) return rc;
    if (n > 0 && src == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyHtoD", "null source");
    if (n > 0) memcpy((void*)(uintptr_t)dst, src, n);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuMemcpyDtoH_v2(void* dst, CUdeviceptr src, size_t n) {
    CUresult rc = check_range("cuMemcpyDtoH", src, n);
    if (rc != CUDA_SUCCESS) return rc;
    if (n > 0 && dst == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuMemcpyDtoH", "null destination");
    if (n > 0) memcpy(dst, (const void*)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuMemcpyDtoD_v2(CUdeviceptr dst, CUdeviceptr src, size_t n) {
    CUresult rc = check_range("cuMemcpyDtoD (source)", src, n);
    if (rc == CUDA_SUCCESS) rc = check_range("cuMemcpyDtoD (destination)", dst, n);
    if (rc != CUDA_SUCCESS) return rc;
    if (n > 0) memmove((void*)(uintptr_t)dst, (const void*)(uintptr_t)src, n);
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void* src, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemcpyHtoDAsync", s);
    return rc != CUDA_SUCCESS ? rc : cuMemcpyHtoD_v2(dst, src, n);
}

STANDIN_API CUresult cuMemcpyDtoHAsync_v2(void* dst, CUdeviceptr src, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemcpyDtoHAsync", s);
    return rc != CUDA_SUCCESS ? rc : cuMemcpyDtoH_v2(dst, src, n);
}

STANDIN_API CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemcpyDtoDAsync", s);
    return rc != CUDA_SUCCESS ? rc : cuMemcpyDtoD_v2(dst, src, n);
}

template <class T>
static CUresult memset_n(const char* call, CUdeviceptr dst, T v, size_t n) {
    if (dst % sizeof(T) != 0) return fail(CUDA_ERROR_INVALID_VALUE, call, "misaligned destination");
    CUresult rc = check_range(call, dst, n * sizeof(T));
    if (rc != CUDA_SUCCESS) return rc;
    T* p = (T*)(uintptr_t)dst;
    for (size_t i = 0; i < n; ++i) p[i] = v;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuMemsetD8_v2(CUdeviceptr d, unsigned char v, size_t n) { return memset_n("cuMemsetD8", d, v, n); }
STANDIN_API CUresult cuMemsetD16_v2(CUdeviceptr d, unsigned short v, size_t n) { return memset_n("cuMemsetD16", d, v, n); }
STANDIN_API CUresult cuMemsetD32_v2(CUdeviceptr d, unsigned v, size_t n) { return memset_n("cuMemsetD32", d, v, n); }

STANDIN_API CUresult cuMemsetD8Async(CUdeviceptr d, unsigned char v, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemsetD8Async", s);
    return rc != CUDA_SUCCESS ? rc : memset_n("cuMemsetD8Async", d, v, n);
}
STANDIN_API CUresult cuMemsetD16Async(CUdeviceptr d, unsigned short v, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemsetD16Async", s);
    return rc != CUDA_SUCCESS ? rc : memset_n("cuMemsetD16Async", d, v, n);
}
STANDIN_API CUresult cuMemsetD32Async(CUdeviceptr d, unsigned v, size_t n, CUstream s) {
    CUresult rc = stream_call("cuMemsetD32Async", s);
    return rc != CUDA_SUCCESS ? rc : memset_n("cuMemsetD32Async", d, v, n);
}

// Modules.
STANDIN_API CUresult cuModuleLoadData(CUmodule* out, const void* image) {
    if (out == nullptr || image == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuModuleLoadData", "null");
    CUresult rc = need_ctx("cuModuleLoadData");
    if (rc != CUDA_SUCCESS) return rc;
    const unsigned char* b = (const unsigned char*)image;
    if (b[0] == 0x7f && b[1] == 'E' && b[2] == 'L' && b[3] == 'F')
        return fail(CUDA_ERROR_NOT_SUPPORTED, "cuModuleLoadData", "cubin images are not implemented by the stand-in (PTX only)");
    auto* m = new StandinModule;
    std::string why;
    if (!parse_ptx((const char*)image, m, &why)) {
        delete m;
        return fail(CUDA_ERROR_INVALID_PTX, "cuModuleLoadData", why.c_str());
    }
    if (m->ptx_version > max_ptx_isa(driver_version())) {
        char w[200];
        snprintf(w, sizeof w, "PTX ISA %d.%d is newer than this driver (CUDA %d.%d) can JIT",
                 m->ptx_version / 10, m->ptx_version % 10, driver_version() / 1000,
                 (driver_version() % 1000) / 10);
        delete m;
        return fail(CUDA_ERROR_UNSUPPORTED_PTX_VERSION, "cuModuleLoadData", w);
    }
    if (!match_kernels(m, &why)) {
        delete m;
        return fail(CUDA_ERROR_INVALID_PTX, "cuModuleLoadData", why.c_str());
    }
    std::lock_guard<std::mutex> g(mu);
    modules.insert(m);
    *out = m;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuModuleUnload(CUmodule m) {
    std::lock_guard<std::mutex> g(mu);
    if (!modules.erase(m)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleUnload", "unknown module");
    for (auto& kv : m->functions) {
        functions.erase(kv.second);
        delete kv.second;
    }
    delete m;
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuModuleGetFunction(CUfunction* f, CUmodule m, const char* name) {
    if (f == nullptr || name == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuModuleGetFunction", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuModuleGetFunction");
    if (rc != CUDA_SUCCESS) return rc;
    if (!modules.count(m)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuModuleGetFunction", "unknown module");
    auto e = m->entries.find(name);
    if (e == m->entries.end()) {
        std::string why = std::string("no entry `") + name + "` in the module's PTX";
        return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction", why.c_str());
    }
    auto have = m->functions.find(name);
    if (have != m->functions.end()) {
        *f = have->second;
        return CUDA_SUCCESS;
    }
    size_t n = 0;
    const standin::KernelInfo* table = standin::kernel_table(&n);
    for (size_t i = 0; i < n; ++i) {
        if (strcmp(table[i].name, name) == 0) {
            auto* fn = new StandinFunction{m, &table[i], &e->second,
                                           48 * 1024 - (int)e->second.static_shared};
            m->functions[name] = fn;
            functions.insert(fn);
            *f = fn;
            return CUDA_SUCCESS;
        }
    }
    return fail(CUDA_ERROR_NOT_FOUND, "cuModuleGetFunction", "no host-compiled kernel of that name");
}

STANDIN_API CUresult cuFuncGetAttribute(int* v, int attrib, CUfunction f) {
    if (v == nullptr) return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncGetAttribute", "null");
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuFuncGetAttribute");
    if (rc != CUDA_SUCCESS) return rc;
    if (!functions.count(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuFuncGetAttribute", "unknown function");
    switch (attrib) {
        case 0: *v = 1024; break;                                 // MAX_THREADS_PER_BLOCK
        case 1: *v = (int)f->entry->static_shared; break;         // SHARED_SIZE_BYTES
        case 2: *v = 0; break;                                    // CONST_SIZE_BYTES
        case 3: *v = 0; break;                                    // LOCAL_SIZE_BYTES
        case 5: *v = f->module->ptx_version; break;               // PTX_VERSION
        case 6: *v = cc(); break;                                 // BINARY_VERSION
        case 8: *v = f->max_dynamic_shared; break;                // MAX_DYNAMIC_SHARED_SIZE_BYTES
        default: {
            char why[80];
            snprintf(why, sizeof why, "attribute %d is not implemented by the stand-in", attrib);
            return fail(CUDA_ERROR_NOT_SUPPORTED, "cuFuncGetAttribute", why);
        }
    }
    return CUDA_SUCCESS;
}

STANDIN_API CUresult cuFuncSetAttribute(CUfunction f, int attrib, int value) {
    std::lock_guard<std::mutex> g(mu);
    CUresult rc = need_ctx_locked("cuFuncSetAttribute");
    if (rc != CUDA_SUCCESS) return rc;
    if (!functions.count(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuFuncSetAttribute", "unknown function");
    if (attrib == 8) {  // MAX_DYNAMIC_SHARED_SIZE_BYTES
        if (value < 0 || (size_t)value + f->entry->static_shared > 227 * 1024)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuFuncSetAttribute", "more shared memory than the device has");
        f->max_dynamic_shared = value;
        return CUDA_SUCCESS;
    }
    if (attrib == 9) return CUDA_SUCCESS;  // PREFERRED_SHARED_MEMORY_CARVEOUT: a hint
    return fail(CUDA_ERROR_NOT_SUPPORTED, "cuFuncSetAttribute", "attribute not implemented by the stand-in");
}

STANDIN_API CUresult cuLaunchKernel(CUfunction f, unsigned gx, unsigned gy, unsigned gz,
                                    unsigned bx, unsigned by, unsigned bz, unsigned shared,
                                    CUstream s, void** params, void** extra) {
    const standin::KernelInfo* k;
    {
        std::lock_guard<std::mutex> g(mu);
        CUresult rc = need_ctx_locked("cuLaunchKernel");
        if (rc != CUDA_SUCCESS) return rc;
        if (!functions.count(f)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel", "unknown function");
        if (!stream_ok_locked(s)) return fail(CUDA_ERROR_INVALID_HANDLE, "cuLaunchKernel", "unknown stream");
        k = f->kernel;
        char why[300];
        if (extra != nullptr)
            return fail(CUDA_ERROR_NOT_SUPPORTED, "cuLaunchKernel", "`extra` launch parameters are not implemented by the stand-in");
        if (k->nparams > 0 && params == nullptr)
            return fail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel", "kernelParams is null");
        uint64_t threads = (uint64_t)bx * by * bz;
        if (bx == 0 || by == 0 || bz == 0 || bx > 1024 || by > 1024 || bz > 64 || threads > 1024) {
            snprintf(why, sizeof why, "%s: block (%u,%u,%u) is not a valid block shape (at most 1024 threads)", k->name, bx, by, bz);
            return fail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel", why);
        }
        if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535 || gz > 65535) {
            snprintf(why, sizeof why, "%s: grid (%u,%u,%u) is not a valid grid", k->name, gx, gy, gz);
            return fail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel", why);
        }
        if (shared > (unsigned)f->max_dynamic_shared || shared + f->entry->static_shared > 227 * 1024) {
            snprintf(why, sizeof why,
                     "%s: %u bytes of dynamic shared memory (static %zu) exceed the limit of %d "
                     "(raise it with CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)",
                     k->name, shared, f->entry->static_shared, f->max_dynamic_shared);
            return fail(CUDA_ERROR_INVALID_VALUE, "cuLaunchKernel", why);
        }
        // kernels.cu declares no dynamic shared memory (`extern __shared__` would not compile
        // here), so a valid amount is simply unused.
        // Pointer arguments must point into live device memory (a host pointer would fault on a GPU).
        for (int p = 0; p < k->nparams; ++p) {
            if (k->kinds[p] != standin::PK_PTR) continue;
            uintptr_t v = *(const uintptr_t*)params[p];
            if (v != 0 && find_locked(v, 0) == nullptr) {
                snprintf(why, sizeof why, "%s: pointer argument %d (%#lx) is not device memory (%s)", k->name, p, (unsigned long)v,
                         describe_locked(v).c_str());
                current->sticky = CUDA_ERROR_ILLEGAL_ADDRESS;
                return fail(CUDA_ERROR_ILLEGAL_ADDRESS, "cuLaunchKernel", why);
            }
        }
    }
    std::string err;
    int rc = standin::run_grid(k, params, {gx, gy, gz}, {bx, by, bz}, &err);
    if (rc != CUDA_SUCCESS) {
        std::lock_guard<std::mutex> g(mu);
        if (current != nullptr) current->sticky = rc;
        return fail(rc, "cuLaunchKernel", err.c_str());
    }
    return CUDA_SUCCESS;
}
