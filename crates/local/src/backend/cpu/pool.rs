//! The CPU backend's worker threads: one fewer than the CPU's threads, started on first use
//! and kept, so a parallel kernel costs a wake-up (microseconds) rather than a thread spawn
//! and join per call (about 50 µs each on a VM, hundreds of calls per forward pass).
//!
//! A call splits its work into numbered parts. The caller runs parts itself and hands the
//! same claim loop to whichever workers are idle; a worker that is busy (another caller's, or
//! a nested call's) is simply not used, so no call ever waits for a worker to become free and
//! concurrent callers (tests, several engines) cannot deadlock. Who runs a part never changes
//! what it computes: kernels split their work by part index, so results are the same bits
//! whatever the number of workers.
//!
//! Idle workers spin for a few microseconds before they sleep, so the next product of a
//! forward pass finds them awake; they do not spin longer, because on two cores a spinning
//! worker takes the core that the caller's serial steps need.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::ptr;
use std::sync::atomic::{AtomicBool, AtomicPtr, AtomicUsize, Ordering};
use std::sync::{Arc, OnceLock};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

/// How long an idle worker (or a caller waiting for its helpers) spins before it sleeps.
const SPIN: Duration = Duration::from_micros(50);

/// One call's shared state: the parts still to claim and the helpers still running.
struct Call<'a> {
    next: AtomicUsize,
    parts: usize,
    run: &'a (dyn Fn(usize) + Sync),
    helpers: AtomicUsize,
    panicked: AtomicBool,
    caller: Thread,
}

impl Call<'_> {
    /// Claim and run parts until none is left (a part that panics is noted, and the rest
    /// still run).
    fn work(&self) {
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= self.parts {
                return;
            }
            if catch_unwind(AssertUnwindSafe(|| (self.run)(i))).is_err() {
                self.panicked.store(true, Ordering::Relaxed);
            }
        }
    }
}

/// A worker's mailbox.
struct Slot {
    /// Claimed by a caller (set by the caller, cleared by the worker when done).
    busy: AtomicBool,
    /// The call to help with (a `*const Call`), null when none.
    job: AtomicPtr<()>,
}

struct Pool {
    workers: Vec<(Arc<Slot>, Thread)>,
}

/// The pool (started on first use): one worker per CPU thread beyond the caller's.
fn pool() -> &'static Pool {
    static POOL: OnceLock<Pool> = OnceLock::new();
    POOL.get_or_init(|| {
        let n = cpu_threads().saturating_sub(1);
        let workers = (0..n)
            .filter_map(|i| {
                let slot = Arc::new(Slot {
                    busy: AtomicBool::new(false),
                    job: AtomicPtr::new(ptr::null_mut()),
                });
                let s = Arc::clone(&slot);
                // A worker that cannot start is left out; its parts run on the caller.
                let h = thread::Builder::new()
                    .name(format!("vlm-cpu-{i}"))
                    .spawn(move || worker(&s))
                    .ok()?;
                Some((slot, h.thread().clone()))
            })
            .collect();
        Pool { workers }
    })
}

/// A worker's loop: wait for a call, help with it, report back.
fn worker(slot: &Slot) {
    loop {
        let job = wait(|| {
            let p = slot.job.swap(ptr::null_mut(), Ordering::Acquire);
            (!p.is_null()).then_some(p)
        });
        // SAFETY: a caller stored a pointer to its live `Call` and does not return before
        // `helpers` drops to zero, which this worker does last, below.
        let call = unsafe { &*(job as *const Call<'static>) };
        call.work();
        let caller = call.caller.clone();
        // After this the call may be gone: touch only the clone.
        if call.helpers.fetch_sub(1, Ordering::AcqRel) == 1 {
            caller.unpark();
        }
        slot.busy.store(false, Ordering::Release);
    }
}

/// Spin for [`SPIN`], then sleep, until `ready` gives a value (woken by `unpark`).
fn wait<T>(mut ready: impl FnMut() -> Option<T>) -> T {
    let start = Instant::now();
    loop {
        if let Some(v) = ready() {
            return v;
        }
        if start.elapsed() < SPIN {
            std::hint::spin_loop();
        } else {
            thread::park();
        }
    }
}

/// Run `f(0)`, …, `f(parts − 1)`, each once, on the caller and idle workers; returns when all
/// have run. If any part panics, the others still run and then this call panics.
pub fn run(parts: usize, f: &(dyn Fn(usize) + Sync)) {
    if parts <= 1 {
        (0..parts).for_each(f);
        return;
    }
    let call = Call {
        next: AtomicUsize::new(0),
        parts,
        run: f,
        helpers: AtomicUsize::new(0),
        panicked: AtomicBool::new(false),
        caller: thread::current(),
    };
    let mut wanted = parts - 1;
    for (slot, t) in &pool().workers {
        if wanted == 0 {
            break;
        }
        if slot
            .busy
            .compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed)
            .is_ok()
        {
            call.helpers.fetch_add(1, Ordering::AcqRel);
            let p = &call as *const Call<'_> as *mut ();
            slot.job.store(p, Ordering::Release);
            t.unpark();
            wanted -= 1;
        }
    }
    call.work();
    wait(|| (call.helpers.load(Ordering::Acquire) == 0).then_some(()));
    if call.panicked.load(Ordering::Relaxed) {
        panic!("a part of a parallel CPU kernel panicked (see the message above)");
    }
}

/// Fewest values for which [`par_chunks`] splits its work (below that, a wake-up costs more
/// than the work it shares).
const PAR_MIN: usize = 1 << 15;

/// `f(first, chunk)` over `out` cut into one chunk per CPU thread, each a whole number of
/// `unit`-value rows (`first` is the chunk's first row), in parallel; one call on all of
/// `out` when it holds fewer than [`PAR_MIN`] values. For row-wise and element-wise kernels,
/// whose rows do not depend on how they are grouped.
pub fn par_chunks(out: &mut [f32], unit: usize, f: impl Fn(usize, &mut [f32]) + Sync) {
    let units = out.len() / unit.max(1);
    let threads = cpu_threads();
    if out.len() < PAR_MIN || threads < 2 || units < 2 {
        f(0, out);
        return;
    }
    let per = units.div_ceil(threads);
    let mut chunks: Vec<&mut [f32]> = out.chunks_mut(per * unit).collect();
    run_each(&mut chunks, |i, c| f(i * per, c));
}

/// An output's pointer, shared by parts that write disjoint values of it (the product
/// kernels split their output's columns between threads).
#[derive(Clone, Copy)]
pub struct Out(pub *mut f32);
impl Out {
    /// The pointer `i` values on (a method, so closures capture the whole `Out`).
    pub fn at(self, i: usize) -> *mut f32 {
        self.0.wrapping_add(i)
    }
}
// SAFETY: its users' parts write disjoint values through it, each part's own.
unsafe impl Send for Out {}
// SAFETY: as above.
unsafe impl Sync for Out {}

/// `items` as a pointer that parts share; each part takes only its own index.
struct Items<I>(*mut I);
// SAFETY: parts reach disjoint elements (see `run_each`), and `I: Send` moves each to the
// thread that runs its part.
unsafe impl<I: Send> Sync for Items<I> {}

/// Run `f(i, &mut items[i])` for every item, in parallel as [`run`] does.
pub fn run_each<I: Send>(items: &mut [I], f: impl Fn(usize, &mut I) + Sync) {
    let base = Items(items.as_mut_ptr());
    let base = &base;
    run(items.len(), &|i| {
        // SAFETY: `run` calls each index below items.len() exactly once, so no two parts
        // reach the same element, and items outlives the call.
        f(i, unsafe { &mut *base.0.add(i) })
    });
}

/// Threads to use for `work` multiply-adds (one for small jobs, where handing work to the
/// pool's workers costs more). The parts run on this pool's workers, not rayon's pool:
/// rayon's idle workers spin beside the caller, and on two cores that halved batch-8 decode.
pub fn threads_for(work: usize) -> usize {
    if work < 1 << 18 {
        return 1;
    }
    cpu_threads()
}

/// This process's CPU threads (asked once: the answer reads cgroup files, ~10 µs a call).
pub fn cpu_threads() -> usize {
    static N: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
    *N.get_or_init(|| std::thread::available_parallelism().map_or(1, |t| t.get()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_part_runs_once_across_concurrent_and_nested_calls() {
        let outer: Vec<usize> = (0..4).collect();
        thread::scope(|s| {
            for _ in 0..4 {
                s.spawn(|| {
                    for _ in 0..200 {
                        let mut hits = vec![0usize; 7];
                        run_each(&mut hits, |i, h| {
                            // A nested call from inside a part.
                            let mut inner = vec![0usize; 3];
                            run_each(&mut inner, |j, v| *v = j + outer[i % 4]);
                            *h += 1 + inner.iter().sum::<usize>() - 3 - 3 * outer[i % 4];
                        });
                        assert_eq!(hits, vec![1; 7]);
                    }
                });
            }
        });
    }

    #[test]
    fn par_chunks_hands_out_whole_rows_with_their_index() {
        for len in [10, 3 * 7001, PAR_MIN * 3 + 5 * 11] {
            let mut v = vec![0f32; len - len % 5];
            par_chunks(&mut v, 5, |r0, c| {
                assert_eq!(c.len() % 5, 0);
                for (i, x) in c.iter_mut().enumerate() {
                    *x = (r0 * 5 + i) as f32;
                }
            });
            assert!(v.iter().enumerate().all(|(i, &x)| x == i as f32));
        }
    }

    #[test]
    fn a_panicking_part_is_raised_in_the_caller_after_the_others_finish() {
        let done = AtomicUsize::new(0);
        let r = catch_unwind(AssertUnwindSafe(|| {
            run(6, &|i| {
                if i == 3 {
                    panic!("part 3 fails");
                }
                done.fetch_add(1, Ordering::Relaxed);
            })
        }));
        assert!(r.is_err());
        assert_eq!(done.load(Ordering::Relaxed), 5);
        // The pool still works afterwards.
        let mut v = vec![0u8; 5];
        run_each(&mut v, |i, x| *x = i as u8);
        assert_eq!(v, vec![0, 1, 2, 3, 4]);
    }
}
