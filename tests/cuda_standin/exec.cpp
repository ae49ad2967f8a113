// Block execution of the CUDA stand-in (see exec.h), and hardware faults turned into CUDA errors.

#include "exec.h"

#include <setjmp.h>
#include <signal.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <vector>

#include "common.h"

namespace standin {

std::string describe_address(uintptr_t a);  // driver.cpp

// ---------------------------------------------------------------------------------------------
// Faults. A fault inside a guarded region (a kernel launch, a cuBLAS call) jumps back to the
// guard, which reports it as a CUDA error; any other fault goes to the previous handler.

static thread_local sigjmp_buf* fault_jmp = nullptr;
static thread_local char fault_desc[512];
static struct sigaction old_actions[NSIG];
static std::once_flag handlers_once;

static const char* signal_meaning(int sig, int code) {
    switch (sig) {
        case SIGSEGV:
            return "SIGSEGV: access outside any live device allocation (out of bounds, freed "
                   "memory or a host pointer)";
        case SIGBUS:
            return "SIGBUS: bad memory access";
        case SIGILL:
            return "SIGILL: trap (an index out of the bounds of a fixed-size array such as "
                   "__shared__ memory, or __trap())";
        case SIGFPE:
            return code == FPE_INTDIV ? "SIGFPE: integer division by zero (undefined on a GPU)"
                                      : "SIGFPE: arithmetic exception";
    }
    return "signal";
}

static void on_fault(int sig, siginfo_t* si, void* uc) {
    if (fault_jmp != nullptr) {
        sigjmp_buf* j = fault_jmp;
        fault_jmp = nullptr;
        std::string near = (sig == SIGSEGV || sig == SIGBUS)
                               ? describe_address((uintptr_t)si->si_addr)
                               : std::string();
        snprintf(fault_desc, sizeof fault_desc, "%s at address %p%s%s",
                 signal_meaning(sig, si->si_code), si->si_addr, near.empty() ? "" : "; ",
                 near.c_str());
        siglongjmp(*j, sig);
    }
    struct sigaction* old = &old_actions[sig];
    if ((old->sa_flags & SA_SIGINFO) && old->sa_sigaction != nullptr) {
        old->sa_sigaction(sig, si, uc);
        return;
    }
    if (!(old->sa_flags & SA_SIGINFO) && old->sa_handler != SIG_DFL &&
        old->sa_handler != SIG_IGN) {
        old->sa_handler(sig);
        return;
    }
    // Default action: returning re-executes the faulting instruction under it.
    signal(sig, SIG_DFL);
}

static void install_handlers() {
    std::call_once(handlers_once, [] {
        for (int sig : {SIGSEGV, SIGBUS, SIGILL, SIGFPE}) {
            struct sigaction sa;
            memset(&sa, 0, sizeof sa);
            sa.sa_sigaction = on_fault;
            sa.sa_flags = SA_SIGINFO | SA_ONSTACK;
            sigemptyset(&sa.sa_mask);
            sigaction(sig, &sa, &old_actions[sig]);
        }
    });
}

static int fault_code(int sig) {
    return (sig == SIGSEGV || sig == SIGBUS) ? CUDA_ERROR_ILLEGAL_ADDRESS
                                             : CUDA_ERROR_ILLEGAL_INSTRUCTION;
}

}  // namespace standin

STANDIN_API int cuda_standin_guarded(void (*fn)(void*), void* arg, char* why, size_t why_len) {
    using namespace standin;
    install_handlers();
    sigjmp_buf jb;
    if (sigsetjmp(jb, 1) != 0) {
        snprintf(why, why_len, "%s", fault_desc);
        return 1;
    }
    fault_jmp = &jb;
    fn(arg);
    fault_jmp = nullptr;
    return 0;
}

namespace standin {

// ---------------------------------------------------------------------------------------------
// Fibers.

#if defined(__x86_64__) && !defined(STANDIN_UCONTEXT)
// switch(save, to): push the callee-saved registers, save the stack pointer in *save, load
// `to`, pop, return into the other fiber. A new fiber starts in fiber_start with its Fiber* in
// r12 and the entry function in r13.
asm(R"(
    .text
    .globl standin_switch
    .hidden standin_switch
    .type standin_switch,@function
standin_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size standin_switch,.-standin_switch
    .globl standin_fiber_start
    .hidden standin_fiber_start
    .type standin_fiber_start,@function
standin_fiber_start:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size standin_fiber_start,.-standin_fiber_start
)");
extern "C" void standin_switch(void** save, void* to);
extern "C" void standin_fiber_start();
#define STANDIN_ASM_FIBERS 1
#else
#include <ucontext.h>
#endif

enum FiberState : unsigned char { RUNNABLE, AT_BARRIER, AT_SHUFFLE, EXITED };

struct Run;

struct Fiber {
#ifdef STANDIN_ASM_FIBERS
    void* sp;
#else
    ucontext_t uc;
#endif
    Run* run;
    Coords c;
    unsigned linear;
    FiberState state;
};

struct WarpState {
    unsigned lanes, arrived, gen;
    uint32_t buf[2][32];
};

// Per OS thread: fiber stacks (STACK_BYTES each, aligned to STACK_BYTES, a guard page at the
// bottom), reused across launches.
struct StackPool {
    std::vector<char*> stacks;
    ~StackPool() {
        for (char* s : stacks) munmap(s, STACK_BYTES);
    }
    bool ensure(size_t n) {
        long page = sysconf(_SC_PAGESIZE);
        while (stacks.size() < n) {
            size_t len = 2 * STACK_BYTES;
            char* p = (char*)mmap(nullptr, len, PROT_READ | PROT_WRITE,
                                  MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (p == MAP_FAILED) return false;
            char* a = (char*)(((uintptr_t)p + STACK_BYTES - 1) & ~(STACK_BYTES - 1));
            if (a > p) munmap(p, a - p);
            if (p + len > a + STACK_BYTES) munmap(a + STACK_BYTES, p + len - (a + STACK_BYTES));
            mprotect(a, page, PROT_NONE);  // a stack overflow faults
            stacks.push_back(a);
        }
        return true;
    }
};
static thread_local StackPool pool;

struct Run {
    const KernelInfo* k;
    void** params;
    std::vector<Fiber> fibers;
    std::vector<WarpState> warps;
    std::vector<unsigned> runq;
    unsigned n, arrived, exited;
    Fiber* current;
#ifdef STANDIN_ASM_FIBERS
    void* sched_sp;
#else
    ucontext_t sched_uc;
#endif
    uint64_t rng;
    bool aborted;
    std::string why;
};

// The launch running on this OS thread (for fault reports).
static thread_local Run* cur_run = nullptr;
#ifndef STANDIN_ASM_FIBERS
static thread_local Fiber* starting_fiber;
#endif

static inline Fiber* self() { return (Fiber*)stack_header()->fiber; }

static uint64_t next_rand(uint64_t* s) {
    uint64_t x = *s;
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    return *s = x;
}

static unsigned pick(Run* r) {
    // A random index below size without a division.
    size_t i = (size_t)(((next_rand(&r->rng) >> 32) * (uint64_t)r->runq.size()) >> 32);
    unsigned t = r->runq[i];
    r->runq[i] = r->runq.back();
    r->runq.pop_back();
    return t;
}

// Leave fiber f (its state already says why) for another runnable thread of the block, picked
// at random, or for the scheduler when none is left or the launch was aborted.
static void leave(Fiber* f) {
    Run* r = f->run;
    if (!r->aborted && !r->runq.empty()) {
        Fiber* g = &r->fibers[pick(r)];
        r->current = g;
#ifdef STANDIN_ASM_FIBERS
        standin_switch(&f->sp, g->sp);
#else
        starting_fiber = g;
        swapcontext(&f->uc, &g->uc);
#endif
        return;
    }
#ifdef STANDIN_ASM_FIBERS
    standin_switch(&f->sp, r->sched_sp);
#else
    swapcontext(&f->uc, &r->sched_uc);
#endif
}

static void fiber_main(Fiber* f) {
    Run* r = f->run;
    r->k->invoke(r->k->fn, r->params);
    f->state = EXITED;
    r->exited++;
    leave(f);
    abort();  // never resumed
}

#ifndef STANDIN_ASM_FIBERS
static void fiber_entry_uc() { fiber_main(starting_fiber); }
#endif

static void start_fiber(Run* r, Fiber* f, char* stack) {
    f->run = r;
    auto* h = (StackHeader*)(stack + STACK_BYTES - sizeof(StackHeader));
    h->coords = &f->c;
    h->fiber = f;
#ifdef STANDIN_ASM_FIBERS
    uintptr_t top = ((uintptr_t)h) & ~(uintptr_t)15;
    void** sp = (void**)(top - 72);
    sp[0] = nullptr;                      // r15
    sp[1] = nullptr;                      // r14
    sp[2] = (void*)&fiber_main;           // r13
    sp[3] = (void*)f;                     // r12
    sp[4] = nullptr;                      // rbx
    sp[5] = nullptr;                      // rbp
    sp[6] = (void*)&standin_fiber_start;  // return address
    f->sp = sp;
#else
    long page = sysconf(_SC_PAGESIZE);
    getcontext(&f->uc);
    f->uc.uc_stack.ss_sp = stack + page;
    f->uc.uc_stack.ss_size = (size_t)((char*)h - (stack + page)) & ~(size_t)15;
    f->uc.uc_link = nullptr;
    makecontext(&f->uc, fiber_entry_uc, 0);
#endif
}

static void switch_to(Run* r, Fiber* f) {
    r->current = f;
#ifdef STANDIN_ASM_FIBERS
    standin_switch(&r->sched_sp, f->sp);
#else
    starting_fiber = f;
    swapcontext(&r->sched_uc, &f->uc);
#endif
}

static std::string where(const Run* r) {
    char b[160];
    const Fiber* f = r->current;
    if (f == nullptr) return "";
    snprintf(b, sizeof b, " (kernel %s, block (%u,%u,%u), thread (%u,%u,%u))", r->k->name,
             f->c.blockIdx.x, f->c.blockIdx.y, f->c.blockIdx.z, f->c.threadIdx.x,
             f->c.threadIdx.y, f->c.threadIdx.z);
    return b;
}

[[noreturn]] void trap(const char* what) {
    Run* r = cur_run;
    if (r == nullptr) {
        log("device intrinsic called outside a kernel: %s", what);
        abort();
    }
    r->aborted = true;
    r->why = what + where(r);
    Fiber* f = r->current;
    f->state = EXITED;
    leave(f);
    abort();
}

void syncthreads() {
    Fiber* f = self();
    Run* r = f->run;
    if (++r->arrived == r->n) {
        r->arrived = 0;
        for (unsigned i = 0; i < r->n; ++i) {
            if (r->fibers[i].state == AT_BARRIER) {
                r->fibers[i].state = RUNNABLE;
                r->runq.push_back(i);
            }
        }
        return;
    }
    f->state = AT_BARRIER;
    leave(f);
}

uint32_t shfl_xor32(uint32_t mask, uint32_t v, int lane_mask, int width) {
    Fiber* f = self();
    Run* r = f->run;
    if (width != 32) trap("__shfl_xor_sync with width != 32 is not implemented by the stand-in");
    if (mask != 0xffffffffu)
        trap("__shfl_xor_sync with a partial mask is not implemented by the stand-in");
    unsigned w = f->linear / 32, lane = f->linear % 32;
    WarpState& ws = r->warps[w];
    if (ws.lanes != 32) trap("__shfl_xor_sync with a full mask in a warp of fewer than 32 threads");
    unsigned slot = ws.gen & 1;
    ws.buf[slot][lane] = v;
    if (++ws.arrived == 32) {
        ws.arrived = 0;
        ws.gen++;
        for (unsigned i = w * 32; i < w * 32 + 32; ++i) {
            if (r->fibers[i].state == AT_SHUFFLE) {
                r->fibers[i].state = RUNNABLE;
                r->runq.push_back(i);
            }
        }
    } else {
        f->state = AT_SHUFFLE;
        leave(f);
    }
    unsigned src = lane ^ (unsigned)lane_mask;
    return src < 32 ? r->warps[w].buf[slot][src] : v;
}

// Runs one block to completion; false with r->why set on divergence or a trap.
static bool run_block(Run* r, Dim3 b, Dim3 block, Dim3 grid) {
    r->arrived = 0;
    r->exited = 0;
    r->aborted = false;
    r->runq.clear();
    for (auto& w : r->warps) {
        w.arrived = 0;
        w.gen = 0;
    }
    for (unsigned t = 0; t < r->n; ++t) {
        Fiber* f = &r->fibers[t];
        f->c.threadIdx = {t % block.x, (t / block.x) % block.y, t / (block.x * block.y)};
        f->c.blockIdx = b;
        f->c.blockDim = block;
        f->c.gridDim = grid;
        f->linear = t;
        f->state = RUNNABLE;
        start_fiber(r, f, pool.stacks[t]);
        r->runq.push_back(t);
    }
    // Fibers hand over to each other (leave()); control comes back here when no thread of
    // the block can run.
    while (!r->runq.empty()) {
        switch_to(r, &r->fibers[pick(r)]);
        if (r->aborted) return false;
    }
    r->current = nullptr;
    if (r->exited != r->n) {
        unsigned at_bar = 0, at_shfl = 0;
        for (auto& f : r->fibers) {
            at_bar += f.state == AT_BARRIER;
            at_shfl += f.state == AT_SHUFFLE;
        }
        char b2[400];
        snprintf(b2, sizeof b2,
                 "kernel %s, block (%u,%u,%u): threads can never continue (%u waiting at "
                 "__syncthreads, %u at a warp shuffle, %u exited): a barrier or shuffle not "
                 "reached by every thread it waits for (undefined behaviour on a GPU)",
                 r->k->name, b.x, b.y, b.z, at_bar, at_shfl, r->exited);
        r->why = b2;
        return false;
    }
    return true;
}

static uint64_t seed_for(const KernelInfo* k, Dim3 g, Dim3 b) {
    static uint64_t base = [] {
        const char* s = getenv("CUDA_STANDIN_SEED");
        return s ? strtoull(s, nullptr, 0) : 0x5eed;
    }();
    uint64_t h = 1469598103934665603ull ^ base;
    for (const char* c = k->name; *c; ++c) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    for (unsigned v : {g.x, g.y, g.z, b.x, b.y, b.z}) h = (h ^ v) * 1099511628211ull;
    return h | 1;
}

int run_grid(const KernelInfo* k, void** params, Dim3 grid, Dim3 block, std::string* err) {
    install_handlers();
    unsigned n = block.x * block.y * block.z;
    if (!pool.ensure(n)) {
        *err = "could not allocate fiber stacks";
        return CUDA_ERROR_OUT_OF_MEMORY;
    }
    // Heap state: it must survive a siglongjmp out of a fiber.
    static thread_local Run run;
    Run* r = &run;
    r->k = k;
    r->params = params;
    r->n = n;
    r->fibers.assign(n, Fiber{});
    r->warps.assign((n + 31) / 32, WarpState{});
    for (unsigned w = 0; w < r->warps.size(); ++w) r->warps[w].lanes = std::min(32u, n - 32 * w);
    r->rng = seed_for(k, grid, block);
    r->current = nullptr;

    // Blocks in a shuffled order.
    size_t nblocks = (size_t)grid.x * grid.y * grid.z;
    std::vector<uint32_t> order(nblocks);
    for (size_t i = 0; i < nblocks; ++i) order[i] = (uint32_t)i;
    for (size_t i = nblocks; i > 1; --i) std::swap(order[i - 1], order[next_rand(&r->rng) % i]);

    sigjmp_buf jb;
    int sig = sigsetjmp(jb, 1);
    if (sig != 0) {
        *err = std::string(fault_desc) + where(r);
        cur_run = nullptr;
        return fault_code(sig);
    }
    cur_run = r;
    fault_jmp = &jb;
    int rc = CUDA_SUCCESS;
    for (size_t i = 0; i < nblocks; ++i) {
        uint32_t o = order[i];
        Dim3 b = {o % grid.x, (o / grid.x) % grid.y, (uint32_t)(o / ((size_t)grid.x * grid.y))};
        if (!run_block(r, b, block, grid)) {
            *err = r->why;
            rc = CUDA_ERROR_LAUNCH_FAILED;
            break;
        }
    }
    fault_jmp = nullptr;
    cur_run = nullptr;
    return rc;
}

}  // namespace standin
