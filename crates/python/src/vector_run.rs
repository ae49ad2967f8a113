//! Advancing the vector env's slots on the worker threads while the calling thread waits with
//! the GIL released and answers signals: Ctrl-C (or any Python signal handler that raises)
//! stops the workers within one poll plus one env's advance, at any number of envs.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use pyo3::prelude::*;
use rayon::prelude::*;
use vlm_eval_crafter::rules::Action;

use crate::vector_slot::{Extras, Slot};

/// How often the waiting thread runs Python's signal handlers.
const POLL: Duration = Duration::from_millis(20);

/// A raw pointer to the frame buffer, sent to the worker threads while the GIL is released.
struct FramePtr(*mut u8, usize);
// SAFETY: the buffer is owned by a numpy array the env keeps alive, and each sub-env writes
// only its own disjoint frame of it while the env's lock is held by this call.
unsafe impl Send for FramePtr {}

/// Python's pending signals, run on this (detached) thread: Err when a handler raised
/// (KeyboardInterrupt for Ctrl-C). Only the main thread runs handlers; elsewhere this is Ok.
fn signals() -> PyResult<()> {
    Python::attach(|py| py.check_signals())
}

/// Advance the slots that have work (reset if pending, else step), each writing its frame of
/// `buf`, with the GIL released. Returns Err with the signal handler's exception when a signal
/// came during the call (then `cancel` is set, and the slots not reached yet were left as they
/// were; a signal after the last poll raises once all are done); the caller also reads
/// `cancel` set by `close()` from another thread, which skips the remaining slots too.
#[allow(clippy::too_many_arguments)]
pub fn run(
    py: Python<'_>,
    buf: &mut [u8],
    slots: &mut [Slot],
    frame_len: usize,
    work: &[Option<Action>],
    extras: Extras,
    pool: Option<&rayon::ThreadPool>,
    cancel: &AtomicBool,
) -> PyResult<()> {
    let ptr = FramePtr(buf.as_mut_ptr(), buf.len());
    py.detach(move || {
        let ptr = ptr;
        // SAFETY: see `FramePtr`; nobody else writes the buffer during this call.
        let buf = unsafe { std::slice::from_raw_parts_mut(ptr.0, ptr.1) };
        let advance = |((s, out), a): ((&mut Slot, &mut [u8]), Option<Action>)| {
            if !cancel.load(Ordering::Relaxed) {
                s.advance(a, extras, out)
            }
        };
        let Some(pool) = pool else {
            let mut polled = Instant::now();
            for job in slots
                .iter_mut()
                .zip(buf.chunks_mut(frame_len))
                .zip(work.iter().copied())
            {
                advance(job);
                if polled.elapsed() >= POLL {
                    polled = Instant::now();
                    if let Err(e) = signals() {
                        cancel.store(true, Ordering::SeqCst);
                        return Err(e);
                    }
                }
            }
            // A signal since the last poll interrupts this call too.
            return signals();
        };
        let (done_tx, done_rx) = mpsc::channel::<()>();
        pool.in_place_scope(|scope| {
            scope.spawn(move |_| {
                slots
                    .par_iter_mut()
                    .zip(buf.par_chunks_mut(frame_len))
                    .zip(work.par_iter().copied())
                    .with_max_len(1)
                    .for_each(advance);
                let _ = done_tx.send(());
            });
            let mut raised = None;
            loop {
                match done_rx.recv_timeout(POLL) {
                    // Finished, or the job panicked (the scope re-raises the panic). A signal
                    // since the last poll interrupts this call too.
                    Ok(()) | Err(mpsc::RecvTimeoutError::Disconnected) => {
                        if raised.is_none() {
                            raised = signals().err();
                        }
                        break;
                    }
                    Err(mpsc::RecvTimeoutError::Timeout) => {
                        if raised.is_none() {
                            if let Err(e) = signals() {
                                cancel.store(true, Ordering::SeqCst);
                                raised = Some(e);
                            }
                        }
                    }
                }
            }
            raised.map_or(Ok(()), Err)
        })
    })
}
