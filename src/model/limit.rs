//! An adaptive limit on requests in flight to one endpoint (AIMD: additive increase,
//! multiplicative decrease).
//!
//! Every attempt holds a permit while it is in flight. A rate-limited answer (HTTP 429)
//! halves the limit (never below 1); `grow_after` consecutive successes raise it by one, up
//! to `max`. Only successes while the limit is in use count towards growth (every slot but
//! at most one taken), so a quiet spell, e.g. the last few episodes of a run, does not
//! inflate the limit back to `max` without any evidence that the server takes more. A burst of simultaneous 429s must not halve the limit once per request (32
//! refused requests would take it straight to 1), so each halving opens a *window*: only a
//! refusal of a request sent under the new limit (its permit acquired after the halving)
//! halves again; refusals of requests that were already in flight are ignored. Waiting
//! acquirers are served first come, first served, and a waiter that gives up (its future is
//! dropped, e.g. by a deadline) leaves the queue.

use std::collections::BTreeSet;
use std::fmt;
use std::sync::{Mutex, MutexGuard};

use tokio::sync::Notify;

/// An adaptive in-flight limit (see the module docs).
pub struct AdaptiveLimit {
    max: usize,
    grow_after: u32,
    state: Mutex<State>,
    /// Signalled whenever a slot may have become free or the queue head changed.
    changed: Notify,
}

#[derive(Debug)]
struct State {
    /// Current limit, 1..=max.
    limit: usize,
    /// Permits held.
    in_flight: usize,
    /// Consecutive successes since the last growth or rate limit.
    streak: u32,
    /// Sequence number of the next permit handed out.
    next_seq: u64,
    /// First sequence number handed out after the last halving (0 before any).
    halved_at: u64,
    /// A halving window is open: no permit acquired after the last halving has been released.
    window_open: bool,
    /// Tickets of acquirers waiting, in arrival order.
    waiting: BTreeSet<u64>,
    /// Next waiting ticket.
    next_ticket: u64,
    /// Halvings done so far.
    halvings: u64,
    /// Most permits held at once.
    peak_in_flight: usize,
}

impl fmt::Debug for AdaptiveLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.lock();
        f.debug_struct("AdaptiveLimit")
            .field("max", &self.max)
            .field("grow_after", &self.grow_after)
            .field("limit", &s.limit)
            .field("in_flight", &s.in_flight)
            .field("halvings", &s.halvings)
            .finish()
    }
}

impl AdaptiveLimit {
    /// A limit starting at `max` (at least 1) that grows by one per `grow_after` (at least 1)
    /// consecutive successes.
    pub fn new(max: usize, grow_after: u32) -> AdaptiveLimit {
        let max = max.max(1);
        AdaptiveLimit {
            max,
            grow_after: grow_after.max(1),
            state: Mutex::new(State {
                limit: max,
                in_flight: 0,
                streak: 0,
                next_seq: 0,
                halved_at: 0,
                window_open: false,
                waiting: BTreeSet::new(),
                next_ticket: 0,
                halvings: 0,
                peak_in_flight: 0,
            }),
            changed: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent under every operation, so a poisoned lock is still usable.
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait for a free slot (first come, first served) and take it; the slot is released when
    /// the permit is dropped.
    pub async fn acquire(&self) -> AdaptivePermit<'_> {
        let ticket = {
            let mut s = self.lock();
            if s.waiting.is_empty() && s.in_flight < s.limit {
                return self.grant(&mut s);
            }
            let t = s.next_ticket;
            s.next_ticket += 1;
            s.waiting.insert(t);
            t
        };
        let mut queued = Queued {
            limit: self,
            ticket: Some(ticket),
        };
        loop {
            let notified = self.changed.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            {
                let mut s = self.lock();
                if s.in_flight < s.limit && s.waiting.first() == Some(&ticket) {
                    s.waiting.remove(&ticket);
                    queued.ticket = None;
                    let permit = self.grant(&mut s);
                    drop(s);
                    // The next in line may fit too.
                    self.changed.notify_waiters();
                    return permit;
                }
            }
            notified.await;
        }
    }

    fn grant(&self, s: &mut State) -> AdaptivePermit<'_> {
        s.in_flight += 1;
        s.peak_in_flight = s.peak_in_flight.max(s.in_flight);
        let seq = s.next_seq;
        s.next_seq += 1;
        AdaptivePermit { limit: self, seq }
    }

    fn release(&self, seq: u64) {
        {
            let mut s = self.lock();
            s.in_flight = s.in_flight.saturating_sub(1);
            if seq >= s.halved_at {
                s.window_open = false;
            }
        }
        self.changed.notify_waiters();
    }

    /// A request was answered normally, reported after its permit was released: after
    /// `grow_after` in a row while the limit is in use the limit grows by one (up to `max`).
    pub fn on_success(&self) {
        self.success(1);
    }

    /// `released`: permits of this success already given back (counted as still in use).
    fn success(&self, released: usize) {
        let grew = {
            let mut s = self.lock();
            if s.in_flight + released + 1 < s.limit {
                // Not limited by us: no evidence the server takes more.
                return;
            }
            s.streak += 1;
            if s.streak >= self.grow_after {
                s.streak = 0;
                if s.limit < self.max {
                    s.limit += 1;
                    true
                } else {
                    false
                }
            } else {
                false
            }
        };
        if grew {
            self.changed.notify_waiters();
        }
    }

    /// A request was refused as rate-limited, reported without its permit: halve the limit
    /// (never below 1) unless a halving window is open, i.e. unless no permit acquired after
    /// the last halving has been released yet. Returns whether the limit was halved.
    ///
    /// Call it after the permit of the refused attempt has been released. When the permit is
    /// at hand, [`AdaptivePermit::rate_limited`] is more precise.
    pub fn on_rate_limited(&self) -> bool {
        let mut s = self.lock();
        if s.window_open {
            s.streak = 0;
            return false;
        }
        self.halve(&mut s)
    }

    fn halve(&self, s: &mut State) -> bool {
        s.streak = 0;
        s.limit = (s.limit / 2).max(1);
        s.halved_at = s.next_seq;
        s.window_open = true;
        s.halvings += 1;
        true
    }

    /// The current limit.
    pub fn current(&self) -> usize {
        self.lock().limit
    }

    /// The largest limit.
    pub fn max(&self) -> usize {
        self.max
    }

    /// Permits held now.
    pub fn in_flight(&self) -> usize {
        self.lock().in_flight
    }

    /// Most permits held at once so far.
    pub fn peak_in_flight(&self) -> usize {
        self.lock().peak_in_flight
    }

    /// Halvings done so far.
    pub fn halvings(&self) -> u64 {
        self.lock().halvings
    }
}

/// One slot of an [`AdaptiveLimit`], released on drop.
#[derive(Debug)]
#[must_use = "the slot is released as soon as the permit is dropped"]
pub struct AdaptivePermit<'a> {
    limit: &'a AdaptiveLimit,
    seq: u64,
}

impl AdaptivePermit<'_> {
    /// Release the slot and report a normal answer.
    pub fn succeeded(self) {
        let limit = self.limit;
        drop(self);
        limit.success(1);
    }

    /// Release the slot and report a rate-limited answer: the limit is halved (never below 1)
    /// unless this permit was acquired before the last halving, i.e. the request was sent
    /// under a limit that has already been cut. Returns whether the limit was halved.
    pub fn rate_limited(self) -> bool {
        let (limit, seq) = (self.limit, self.seq);
        drop(self);
        let mut s = limit.lock();
        if seq < s.halved_at {
            s.streak = 0;
            return false;
        }
        limit.halve(&mut s)
    }
}

impl Drop for AdaptivePermit<'_> {
    fn drop(&mut self) {
        self.limit.release(self.seq);
    }
}

/// A waiter's place in the queue; leaving it (cancellation) lets the next one go.
struct Queued<'a> {
    limit: &'a AdaptiveLimit,
    ticket: Option<u64>,
}

impl Drop for Queued<'_> {
    fn drop(&mut self) {
        if let Some(t) = self.ticket.take() {
            self.limit.lock().waiting.remove(&t);
            self.limit.changed.notify_waiters();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    #[tokio::test]
    async fn halves_grows_and_stays_in_bounds() {
        let l = AdaptiveLimit::new(8, 3);
        assert_eq!(l.current(), 8);
        let mut held = Vec::new();
        for _ in 0..8 {
            held.push(l.acquire().await);
        }
        assert!(l.on_rate_limited());
        assert_eq!(l.current(), 4);
        // Window open: no permit acquired since, so further reports are ignored.
        assert!(!l.on_rate_limited());
        assert_eq!(l.current(), 4);
        for _ in 0..2 {
            l.on_success();
        }
        assert_eq!(l.current(), 4, "two successes are not enough");
        l.on_success();
        assert_eq!(l.current(), 5);
        for _ in 0..100 {
            l.on_success();
        }
        assert_eq!(l.current(), 8, "capped at max");
        assert_eq!(AdaptiveLimit::new(0, 0).current(), 1);
    }

    #[tokio::test]
    async fn no_growth_while_the_limit_is_not_in_use() {
        let l = AdaptiveLimit::new(16, 1);
        let _first = l.acquire().await;
        assert!(l.on_rate_limited());
        assert_eq!(l.current(), 8);
        // Two requests at a time under a limit of 8: successes do not grow it.
        for _ in 0..20 {
            let (a, b) = (l.acquire().await, l.acquire().await);
            a.succeeded();
            b.succeeded();
        }
        assert_eq!(l.current(), 8);
        // Every slot taken: each success grows it (grow_after 1).
        let mut held = Vec::new();
        for _ in 0..6 {
            held.push(l.acquire().await);
        }
        assert_eq!(l.in_flight(), 7);
        l.acquire().await.succeeded();
        assert_eq!(l.current(), 9);
    }

    #[tokio::test]
    async fn only_requests_sent_after_a_halving_halve_again() {
        let l = AdaptiveLimit::new(16, 100);
        let old: Vec<_> = futures::future::join_all((0..4).map(|_| l.acquire())).await;
        let first = l.acquire().await;
        assert!(first.rate_limited());
        assert_eq!(l.current(), 8);
        // Old permits refused after the halving: ignored.
        for p in old {
            assert!(!p.rate_limited());
        }
        assert_eq!(l.current(), 8);
        // A permit acquired after the halving is refused too: that one counts.
        let new = l.acquire().await;
        assert!(new.rate_limited());
        assert_eq!(l.current(), 4);
        // Two permits taken under the same limit, both refused: one halving.
        let (a, b) = (l.acquire().await, l.acquire().await);
        assert!(a.rate_limited());
        assert!(!b.rate_limited());
        assert_eq!(l.current(), 2);
        // Down to 1 and never below.
        for _ in 0..5 {
            let _ = l.acquire().await.rate_limited();
        }
        assert_eq!(l.current(), 1);
        // Without a permit: ignored until a permit acquired after the halving is released.
        let l = AdaptiveLimit::new(16, 100);
        let held = l.acquire().await;
        assert!(l.on_rate_limited());
        assert!(!l.on_rate_limited());
        drop(held);
        assert!(
            !l.on_rate_limited(),
            "an older permit does not close the window"
        );
        drop(l.acquire().await);
        assert!(l.on_rate_limited());
        assert_eq!(l.current(), 4);
        // A rate limit resets the success streak.
        let l = AdaptiveLimit::new(4, 2);
        let _held: Vec<_> = futures::future::join_all((0..4).map(|_| l.acquire())).await;
        l.on_success();
        l.on_rate_limited();
        l.on_success();
        assert_eq!(l.current(), 2);
        l.on_success();
        assert_eq!(l.current(), 3);
    }

    #[tokio::test]
    async fn acquire_waits_for_a_slot_in_order_and_cancellation_leaves_the_queue() {
        let l = Arc::new(AdaptiveLimit::new(1, 1));
        let held = l.acquire().await;
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for i in 0..5 {
            let (l, order) = (l.clone(), order.clone());
            tasks.push(tokio::spawn(async move {
                let p = l.acquire().await;
                order.lock().unwrap().push(i);
                tokio::time::sleep(Duration::from_millis(2)).await;
                drop(p);
            }));
            // Let each one queue before the next.
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        // A waiter that gives up must not block the ones behind it.
        let gave_up = tokio::time::timeout(Duration::from_millis(10), l.acquire()).await;
        assert!(gave_up.is_err());
        assert_eq!(l.in_flight(), 1);
        drop(held);
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), vec![0, 1, 2, 3, 4]);
        assert_eq!(l.in_flight(), 0);
        assert_eq!(l.peak_in_flight(), 1);
        let _p = tokio::time::timeout(Duration::from_secs(1), l.acquire())
            .await
            .expect("free slot");
    }

    #[tokio::test]
    async fn growth_wakes_waiters() {
        let l = Arc::new(AdaptiveLimit::new(2, 1));
        l.on_rate_limited();
        assert_eq!(l.current(), 1);
        let _a = l.acquire().await;
        let l2 = l.clone();
        let waiter = tokio::spawn(async move {
            let _b = l2.acquire().await;
        });
        tokio::time::sleep(Duration::from_millis(10)).await;
        assert!(!waiter.is_finished());
        l.on_success();
        tokio::time::timeout(Duration::from_secs(1), waiter)
            .await
            .expect("woken by growth")
            .unwrap();
    }

    /// A simulated server that refuses (429) whatever exceeds its capacity; `clients` workers
    /// each send `requests` requests through the limiter, retrying refused ones. Returns
    /// (final limit, refusals, served).
    async fn simulate(
        capacity: usize,
        clients: usize,
        requests: usize,
        max: usize,
        grow_after: u32,
    ) -> (usize, usize, usize, Vec<usize>) {
        let l = Arc::new(AdaptiveLimit::new(max, grow_after));
        let busy = Arc::new(AtomicUsize::new(0));
        let refused = Arc::new(AtomicUsize::new(0));
        let served = Arc::new(AtomicUsize::new(0));
        let trace = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        for _ in 0..clients {
            let (l, busy, refused, served, trace) = (
                l.clone(),
                busy.clone(),
                refused.clone(),
                served.clone(),
                trace.clone(),
            );
            tasks.push(tokio::spawn(async move {
                let mut done = 0;
                while done < requests {
                    let permit = l.acquire().await;
                    if busy.fetch_add(1, Ordering::SeqCst) >= capacity {
                        busy.fetch_sub(1, Ordering::SeqCst);
                        tokio::time::sleep(Duration::from_micros(200)).await;
                        refused.fetch_add(1, Ordering::SeqCst);
                        let _ = permit.rate_limited();
                        continue;
                    }
                    tokio::time::sleep(Duration::from_millis(3)).await;
                    busy.fetch_sub(1, Ordering::SeqCst);
                    served.fetch_add(1, Ordering::SeqCst);
                    permit.succeeded();
                    trace.lock().unwrap().push(l.current());
                    done += 1;
                }
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        let trace = trace.lock().unwrap().clone();
        (
            l.current(),
            refused.load(Ordering::SeqCst),
            served.load(Ordering::SeqCst),
            trace,
        )
    }

    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn settles_near_the_server_capacity() {
        let (limit, refused, served, trace) = simulate(5, 32, 20, 32, 5).await;
        assert_eq!(served, 640);
        // Halving from 6 (the first value the server refuses) gives 3, never less; growth
        // stops around 6 (a slow refusal report may let one or two more successes count).
        assert!((3..=8).contains(&limit), "final limit {limit}");
        let late = &trace[trace.len() / 4..];
        assert!(
            late.iter().all(|c| (3..=8).contains(c)),
            "limit after warm-up: {late:?}"
        );
        // About one refusal per growth cycle once settled, far fewer than the requests.
        assert!(refused < served / 4, "{refused} refusals for {served}");
    }

    #[tokio::test]
    async fn a_burst_of_refusals_halves_once() {
        let l = AdaptiveLimit::new(32, 5);
        let permits: Vec<_> = futures::future::join_all((0..32).map(|_| l.acquire())).await;
        assert_eq!(l.in_flight(), 32);
        let halved = permits
            .into_iter()
            .map(|p| p.rate_limited())
            .filter(|h| *h)
            .count();
        assert_eq!(halved, 1);
        assert_eq!(l.current(), 16);
        assert_eq!(l.halvings(), 1);
    }
}
