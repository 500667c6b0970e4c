//! A shared receive queue for software providers (`IND2SharedReceiveQueue`,
//! `docs/ND-RULES.md` §2.6).
//!
//! Receives are posted here instead of on a queue pair; a queue pair created with the SRQ
//! takes the oldest one when a Send arrives. Storage is preallocated at creation (and on
//! `modify`), so posting and taking never allocate.

use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::kit::mr::Registration;
use crate::kit::overlapped::{Driver, Overlapped, PendingRequests};
use crate::{Error, Result, Status};

mod object;
pub use object::{Srq, SrqProvider, MAX_SRQ_SGE};

/// One validated scatter/gather element: an absolute address range and the registration that
/// keeps its memory alive while the request is outstanding.
#[derive(Debug, Clone, Default)]
pub struct Seg {
    /// First byte.
    pub addr: u64,
    /// Length.
    pub len: u32,
    /// The registration the range was checked against.
    pub reg: Option<Arc<Registration>>,
}

impl Seg {
    /// An unused slot (for arrays built in `const` context, without allocating).
    pub const EMPTY: Self = Self {
        addr: 0,
        len: 0,
        reg: None,
    };
}

/// A Receive handed to a queue pair by [`SrqCore::take_into`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TakenReceive {
    /// The request context given to `Receive`.
    pub context: u64,
    /// Total bytes the Receive can hold.
    pub total: u64,
    /// How many segments were copied out.
    pub segs: usize,
}

struct Inner {
    wrs: VecDeque<(u64, u64, u16)>,
    segs: Vec<Seg>,
    per: usize,
    depth: usize,
    head_slot: usize,
    threshold: u32,
    waiters: PendingRequests<()>,
}

impl Inner {
    fn slot(&self, i: usize) -> usize {
        (self.head_slot + i) % self.depth
    }

    fn fire_if_low(&mut self) {
        if self.threshold > 0 && (self.wrs.len() as u64) < u64::from(self.threshold) {
            self.waiters.complete_all((), Status::SUCCESS);
        }
    }
}

/// A software shared receive queue.
pub struct SrqCore {
    inner: Mutex<Inner>,
    driver: Arc<dyn Driver>,
}

impl fmt::Debug for SrqCore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let i = self.lock();
        f.debug_struct("SrqCore")
            .field("depth", &i.depth)
            .field("posted", &i.wrs.len())
            .finish()
    }
}

impl SrqCore {
    /// A queue of `depth` Receives of up to `max_sge` segments each, notifying below
    /// `notify_threshold` (0: never). Arguments were validated by the caller.
    pub fn new(depth: u32, max_sge: u32, notify_threshold: u32, driver: Arc<dyn Driver>) -> Self {
        let depth = depth.max(1) as usize;
        let per = max_sge.max(1) as usize;
        Self {
            inner: Mutex::new(Inner {
                wrs: VecDeque::with_capacity(depth),
                segs: vec![Seg::default(); depth * per],
                per,
                depth,
                head_slot: 0,
                threshold: notify_threshold,
                waiters: PendingRequests::new(),
            }),
            driver,
        }
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        self.inner.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Most segments one Receive may carry.
    pub fn max_segs(&self) -> usize {
        self.lock().per
    }

    /// `Receive`: queue a Receive of `total` bytes in `segs`. `ND_DATA_OVERRUN` for too many
    /// segments, then `ND_NO_MORE_ENTRIES` when the queue is full, then `checked`, the
    /// caller's verdict on the length and the memory (made without this queue's lock): a
    /// queue pair's Receive reports its errors in that order (`WrQueue::check_receive`), and
    /// one lock serves all of them.
    pub fn post(
        &self,
        context: u64,
        total: u64,
        segs: impl ExactSizeIterator<Item = Seg>,
        checked: Result<()>,
    ) -> Result<()> {
        let mut i = self.lock();
        if segs.len() > i.per {
            return Err(Error::new(Status::DATA_OVERRUN));
        }
        if i.wrs.len() >= i.depth {
            return Err(Error::new(Status::NO_MORE_ENTRIES));
        }
        checked?;
        let base = i.slot(i.wrs.len()) * i.per;
        let n = segs.len();
        for (dst, s) in i.segs[base..base + n].iter_mut().zip(segs) {
            *dst = s;
        }
        i.wrs.push_back((context, total, n as u16));
        Ok(())
    }

    /// Take the oldest Receive, copying its segments into `dst` (which must hold `max_segs`).
    /// `None` when the queue is empty. May complete a pending Notify (the count fell below the
    /// threshold).
    pub fn take_into(&self, dst: &mut [Seg]) -> Option<TakenReceive> {
        let mut i = self.lock();
        let (context, total, n) = i.wrs.pop_front()?;
        let base = i.head_slot * i.per;
        let n = usize::from(n);
        for (d, s) in dst.iter_mut().zip(i.segs[base..base + n].iter_mut()) {
            *d = std::mem::take(s);
        }
        i.head_slot = (i.head_slot + 1) % i.depth;
        i.fire_if_low();
        Some(TakenReceive {
            context,
            total,
            segs: n.min(dst.len()),
        })
    }

    /// Receives currently posted.
    pub fn posted(&self) -> usize {
        self.lock().wrs.len()
    }

    /// `Modify`: a new depth and/or threshold (0 leaves a value unchanged). A depth below the
    /// number posted gives `ND_BUFFER_OVERFLOW` and changes nothing.
    pub fn modify(&self, depth: u32, notify_threshold: u32) -> Result<()> {
        let mut i = self.lock();
        if depth > 0 && (depth as usize) < i.wrs.len() {
            return Err(Error::new(Status::BUFFER_OVERFLOW));
        }
        if depth > 0 && depth as usize != i.depth {
            // Re-lay the posted Receives from slot 0 in a fresh slab of the new size.
            let per = i.per;
            let n = (depth as usize).saturating_mul(per);
            let extra = (depth as usize).saturating_sub(i.wrs.len());
            // The caller bounds `depth` (MaxSharedReceiveQueueDepth); should memory run out
            // all the same, nothing changes.
            let mut segs = Vec::new();
            if segs.try_reserve_exact(n).is_err() || i.wrs.try_reserve(extra).is_err() {
                return Err(Error::new(Status::INSUFFICIENT_RESOURCES));
            }
            segs.resize_with(n, Seg::default);
            for k in 0..i.wrs.len() {
                let from = i.slot(k) * per;
                let n = usize::from(i.wrs[k].2);
                for j in 0..n {
                    segs[k * per + j] = std::mem::take(&mut i.segs[from + j]);
                }
            }
            i.segs = segs;
            i.depth = depth as usize;
            i.head_slot = 0;
        }
        if notify_threshold > 0 {
            i.threshold = notify_threshold;
        }
        i.fire_if_low();
        Ok(())
    }

    /// `Notify`: completes when fewer Receives than the threshold remain posted (at once if that
    /// is already so). All pending Notify requests complete together.
    pub fn notify(&self) -> Overlapped {
        let (ov, c) = Overlapped::pending(self.driver.clone());
        c.allow_cancel();
        let mut i = self.lock();
        i.waiters.push((), c);
        i.fire_if_low();
        ov
    }

    /// `CancelOverlappedRequests`: pending Notify requests complete with `ND_CANCELED`, in order.
    pub fn cancel_overlapped_requests(&self) {
        self.lock().waiters.cancel_all();
    }
}

impl Drop for SrqCore {
    fn drop(&mut self) {
        self.cancel_overlapped_requests();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::overlapped::tests::NullDriver;

    fn seg(addr: u64) -> Seg {
        Seg {
            addr,
            len: 8,
            reg: None,
        }
    }

    #[test]
    fn fifo_depth_and_sge_limits() {
        let q = SrqCore::new(2, 2, 0, Arc::new(NullDriver));
        q.post(1, 8, [seg(10)].into_iter(), Ok(())).expect("post");
        assert_eq!(
            q.post(9, 24, [seg(1), seg(2), seg(3)].into_iter(), Ok(()))
                .unwrap_err()
                .status(),
            Status::DATA_OVERRUN
        );
        q.post(2, 16, [seg(20), seg(21)].into_iter(), Ok(()))
            .expect("post");
        assert_eq!(
            q.post(3, 8, [seg(30)].into_iter(), Ok(()))
                .unwrap_err()
                .status(),
            Status::NO_MORE_ENTRIES
        );
        let mut dst = vec![Seg::default(); 2];
        assert_eq!(
            q.take_into(&mut dst),
            Some(TakenReceive {
                context: 1,
                total: 8,
                segs: 1
            })
        );
        assert_eq!(dst[0].addr, 10);
        q.post(3, 8, [seg(30)].into_iter(), Ok(()))
            .expect("room again, slot reused");
        assert_eq!(
            q.take_into(&mut dst),
            Some(TakenReceive {
                context: 2,
                total: 16,
                segs: 2
            })
        );
        assert_eq!((dst[0].addr, dst[1].addr), (20, 21));
        assert_eq!(q.take_into(&mut dst).map(|t| t.context), Some(3));
        assert_eq!(q.take_into(&mut dst), None);
    }

    #[test]
    fn notify_fires_below_threshold() {
        let q = SrqCore::new(8, 1, 2, Arc::new(NullDriver));
        for c in 0..3 {
            q.post(c, 8, [seg(c)].into_iter(), Ok(())).expect("post");
        }
        let a = q.notify();
        let b = q.notify();
        let mut dst = vec![Seg::default(); 1];
        q.take_into(&mut dst);
        assert!(!a.is_complete(), "2 posted is not below 2");
        q.take_into(&mut dst);
        assert!(
            a.is_complete() && b.is_complete(),
            "every pending notify completes together"
        );
        assert!(q.notify().is_complete(), "already below the threshold");
    }

    #[test]
    fn modify_keeps_posted_receives() {
        let q = SrqCore::new(4, 1, 0, Arc::new(NullDriver));
        let mut dst = vec![Seg::default(); 1];
        for c in 0..4 {
            q.post(c, 8, [seg(100 + c)].into_iter(), Ok(()))
                .expect("post");
        }
        q.take_into(&mut dst);
        assert_eq!(
            q.modify(2, 0).unwrap_err().status(),
            Status::BUFFER_OVERFLOW
        );
        q.modify(8, 0).expect("grow");
        for c in 4..9 {
            q.post(c, 8, [seg(100 + c)].into_iter(), Ok(()))
                .expect("post after grow");
        }
        for c in 1..9 {
            assert_eq!(q.take_into(&mut dst).map(|t| t.context), Some(c));
            assert_eq!(dst[0].addr, 100 + c);
        }
        let n = q.notify();
        q.cancel_overlapped_requests();
        assert_eq!(n.try_result(), Some(Err(Error::CANCELED)));
    }
}
