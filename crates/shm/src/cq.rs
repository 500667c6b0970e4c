//! `IND2CompletionQueue` for the `shm` provider: the shared software CQ of the SPI kit, with a
//! lock-free front for busy pollers.
//!
//! `CqCore` keeps the completions and every Notify rule, and a count of them readable without
//! its lock ([`CqCore::queued_hint`], kept with plain stores: no read-modify-write per
//! completion). That count and the links of the queue pairs that complete here let an empty poll
//! cost a few loads: no lock, no reference counting, no syscall. Only when a link has work (a record in the
//! ring, space for a blocked Send, a peer that closed) is its queue pair driven; what that
//! drive completes here comes straight back to the caller (`CqCore::drive_collecting`; for
//! the first [`FAST_LINKS`] links, whole inline messages first and without it,
//! `ShmQp::poll_lane`), and only when something is queued is `CqCore`'s lock taken.

use std::any::Any;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, OnceLock, Weak};

use netdirect_spi::kit::affinity::notify_affinity;
use netdirect_spi::kit::cq::{CqCore, PushKind};
use netdirect_spi::kit::overlapped::{Driver, Overlapped};
use netdirect_spi::traits::CompletionQueue;
use netdirect_spi::{NdResult, NotifyType, Result};

use crate::adapter::Shared;
use crate::link::Link;

/// The shortest overflow list `add_link` sweeps for closed links.
const SWEEP_MIN: usize = 64;

/// Links polled without a lock; further ones go to the overflow list. A slot is never
/// emptied (a poller may be reading it without a lock or a reference count), so a closed link
/// stays here until the CQ goes: it has let go of its socket (and so its port) and of the
/// peer memory it mapped when it closed (`Link::close_local`), and keeps its segment mapping.
const FAST_LINKS: usize = 4;
/// [`ShmCq::wanting`]'s bit for the overflow list.
const OVERFLOW: u32 = 1 << FAST_LINKS;

/// The links beyond [`FAST_LINKS`], polled under a lock.
#[derive(Debug)]
struct Overflow {
    links: Vec<Arc<Link>>,
    /// The length at which `add_link` next drops the closed links.
    sweep_at: usize,
}

/// A completion queue.
#[derive(Debug)]
pub(crate) struct ShmCq {
    me: Weak<Self>,
    pub(crate) core: CqCore,
    fast: [OnceLock<Arc<Link>>; FAST_LINKS],
    overflow: Mutex<Overflow>,
    has_overflow: std::sync::atomic::AtomicBool,
}

impl ShmCq {
    pub(crate) fn new(depth: u32, max_depth: u32, driver: Arc<dyn Driver>) -> Arc<Self> {
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            core: CqCore::new(depth, driver).with_max_depth(max_depth),
            fast: Default::default(),
            overflow: Mutex::new(Overflow {
                links: Vec::new(),
                sweep_at: SWEEP_MIN,
            }),
            has_overflow: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Queue a completion.
    pub(crate) fn push(&self, r: NdResult, kind: PushKind) {
        self.core.push(r, kind);
    }

    /// Poll `link` (the connection of a queue pair completing here) on every empty poll.
    pub(crate) fn add_link(&self, link: &Arc<Link>) {
        for slot in &self.fast {
            if slot.get().is_none() && slot.set(link.clone()).is_ok() {
                return;
            }
        }
        let mut o = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
        // Closed links are dropped once the list has doubled since the last sweep: a sweep
        // per link made 10,000 connections on one queue cost O(n²) (6 % of `nd connrate`).
        if o.links.len() >= o.sweep_at {
            o.links.retain(|l| !l.is_closed());
            o.sweep_at = (2 * o.links.len()).max(SWEEP_MIN);
        }
        o.links.push(link.clone());
        self.has_overflow.store(true, Ordering::Release);
    }

    /// Which links want driving ([`Link::wants_drive`]): bit `i` for fast slot `i`, and
    /// [`OVERFLOW`] when there are overflow links (checked under their lock when driven).
    fn wanting(&self) -> u32 {
        let mut m = 0;
        for (i, slot) in self.fast.iter().enumerate() {
            match slot.get() {
                Some(l) if l.wants_drive() => m |= 1 << i,
                Some(_) => {}
                None => break,
            }
        }
        if self.has_overflow.load(Ordering::Acquire) {
            m |= OVERFLOW;
        }
        m
    }

    /// Drive the fast links `m` names in their lanes ([`Link::poll_lane`]): how many
    /// completions that put in `out`, and the links left to drive (the overflow list, and any
    /// not reached because `out` filled up).
    fn poll_lanes(&self, m: u32, out: &mut [NdResult]) -> (usize, u32) {
        let (mut n, mut rest) = (0, m);
        for (i, slot) in self.fast.iter().enumerate() {
            if m & (1 << i) == 0 || n == out.len() {
                continue;
            }
            if let Some(l) = slot.get() {
                n += l.poll_lane(self, &mut out[n..]);
                rest &= !(1 << i);
            }
        }
        (n, rest)
    }

    /// Drive the links [`ShmCq::wanting`] named.
    fn drive_links(&self, m: u32) {
        for (i, slot) in self.fast.iter().enumerate() {
            if m & (1 << i) != 0 {
                if let Some(l) = slot.get() {
                    l.drive();
                }
            }
        }
        if m & OVERFLOW != 0 {
            // Only CQs that served more than `FAST_LINKS` connections get here. The lock is
            // never held by a thread that holds a queue pair's lock (links are added before
            // the queue pair's lock is taken), so driving queue pairs under it cannot deadlock.
            let mut o = self.overflow.lock().unwrap_or_else(|e| e.into_inner());
            o.links.retain(|l| !l.is_closed());
            if o.links.is_empty() {
                // Every overflow connection closed: polls go back to the lock-free slots only
                // (set again, under this lock, by the next `add_link` that overflows).
                self.has_overflow.store(false, Ordering::Release);
            }
            for l in o.links.iter() {
                l.poll_fast();
            }
        }
    }

    /// Recognise one of `adapter`'s completion queues among the SPI objects (`None` for
    /// another provider's or another adapter's).
    pub(crate) fn downcast_on(
        cq: &Arc<dyn CompletionQueue>,
        adapter: &Shared,
    ) -> Option<Arc<Self>> {
        cq.as_any()
            .downcast_ref::<Self>()
            .filter(|c| c.core.belongs_to(&adapter.engine))
            .and_then(|c| c.me.upgrade())
    }
}

impl CompletionQueue for ShmCq {
    fn as_any(&self) -> &dyn Any {
        self
    }

    fn get_results(&self, out: &mut [NdResult]) -> usize {
        if out.is_empty() {
            return 0;
        }
        // The count is kept by `CqCore` with plain stores under its lock: no read-modify-write
        // here or in `push` (issue 5: each costs about 2 ns on the data path).
        if self.core.queued_hint() == 0 {
            // A busy poller's empty poll ends here, after a few loads per link: the collection
            // below (thread-local set-up) runs only when a link has work.
            let m = self.wanting();
            if m == 0 {
                self.core.short_poll();
                self.core.note_empty_poll();
                return 0;
            }
            // The fast links with work are driven in their queue pairs' lanes, the overflow
            // links as a whole; what either completes here comes straight back
            // (`ShmQp::poll_lane`, `CqCore::drive_collecting`). Every link that wants driving
            // gets it in each call that has room: one busy link cannot starve another.
            let (mut n, rest) = self.poll_lanes(m, out);
            if rest != 0 && n < out.len() {
                n += self
                    .core
                    .drive_collecting(&mut out[n..], || self.drive_links(rest));
            }
            if n == out.len() {
                return n;
            }
            if self.core.queued_hint() == 0 {
                self.core.short_poll();
                return n;
            }
            // What it queued beyond that follows: a short return means nothing is left.
            return n + self.core.take_queued(&mut out[n..]);
        }
        self.core.get_results(out)
    }

    fn notify(&self, ty: NotifyType) -> Result<Overlapped> {
        Ok(self.core.notify(ty))
    }

    fn resize(&self, depth: u32) -> Result<()> {
        self.core.resize(depth)
    }

    fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        Ok(notify_affinity())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.core.cancel_overlapped_requests();
        Ok(())
    }
}
