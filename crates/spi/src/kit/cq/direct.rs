//! Completions handed straight to the `GetResults` call whose I/O drive made them.
//!
//! A polling `GetResults` that finds its queue empty drives the queue pairs' I/O on its own
//! thread, and what that drive completes would be pushed into the queue (lock, append, trigger
//! bookkeeping) only for the same call to take it out again (lock, drain). While the drive
//! runs, this thread-local *collector* names the queue being polled and has room for as many
//! entries as the caller asked for: a completion for that queue made on this thread goes into
//! the collector instead, and the call copies it out. That saves two lock round trips per
//! message on the busy-polling path (issue 5).
//!
//! It is equivalent to push-then-take because the collector only takes an entry when nothing
//! could tell the difference: the queue is empty (so FIFO order with entries queued earlier is
//! kept; a queue pair's completions are made under its own lock, so its earlier entries are
//! visible here) and no Notify is armed and no overrun happened (so no notification can be
//! owed to it). Entries beyond the caller's room take the ordinary path, after the collected
//! ones, as they were made.

use std::cell::RefCell;

use crate::NdResult;

/// At most this many completions are collected per call; more go through the queue.
const ROOM: usize = 16;

struct Collector {
    /// The address of the `CqCore` being polled; 0 when no collection runs.
    cq: usize,
    room: usize,
    len: usize,
    got: [NdResult; ROOM],
}

thread_local! {
    static COLLECTOR: RefCell<Collector> = const {
        RefCell::new(Collector { cq: 0, room: 0, len: 0, got: [NdResult::EMPTY; ROOM] })
    };
}

/// Run `drive` with completions for the queue at `cq` collected (up to `out.len()`), then
/// move them into `out`; returns how many. Not re-entrant: a collection started inside a
/// drive (a waker the drive ran polls again, say) just runs its own drive, and what that
/// completes for the outer call's queue is the outer call's — delivered once either way.
pub(super) fn collect(cq: usize, out: &mut [NdResult], drive: impl FnOnce()) -> usize {
    let started = COLLECTOR.with(|c| match c.try_borrow_mut() {
        Ok(mut c) if c.cq == 0 => {
            c.cq = cq;
            c.room = out.len().min(ROOM);
            c.len = 0;
            true
        }
        _ => false,
    });
    if !started {
        drive();
        return 0;
    }
    // Stop collecting even if the drive unwinds: a later push must not land here.
    struct Stop;
    impl Drop for Stop {
        fn drop(&mut self) {
            COLLECTOR.with(|c| {
                if let Ok(mut c) = c.try_borrow_mut() {
                    c.cq = 0;
                }
            });
        }
    }
    let stop = Stop;
    drive();
    let n = COLLECTOR.with(|c| {
        let c = c.borrow();
        out[..c.len].copy_from_slice(&c.got[..c.len]);
        c.len
    });
    drop(stop);
    n
}

/// Offer a completion for the queue at `cq` to the collection running on this thread, if it
/// is for that queue and has room. `eligible` is asked only then (it reads the queue's state).
pub(super) fn offer(cq: usize, r: &NdResult, eligible: impl FnOnce() -> bool) -> bool {
    COLLECTOR.with(|c| {
        let Ok(mut c) = c.try_borrow_mut() else {
            return false;
        };
        if c.cq != cq || c.len >= c.room || !eligible() {
            return false;
        }
        let i = c.len;
        c.got[i] = *r;
        c.len += 1;
        true
    })
}
