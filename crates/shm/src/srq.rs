//! `IND2SharedReceiveQueue` for the `shm` provider (`nd2/IND2SharedReceiveQueue.md`,
//! `nd-reference.md` §2.6).
//!
//! The Receives live in the SPI kit's [`SrqCore`] (preallocated, FIFO, threshold Notify). A
//! queue pair created with the queue (`CreateQueuePairWithSrq`) takes the oldest Receive when
//! the first record of a message reaches the front of its ring, and fills it exactly as one of
//! its own; the completion goes to that queue pair's receive CQ with its context.
//!
//! # A message that finds the queue empty
//!
//! It does not break the connection (`nd-reference.md` §2.4): the record simply stays in the
//! ring (the sender's later records queue behind it, and the ring's back-pressure reaches the
//! sender once it is full), and the queue pair joins this queue's list of stalled queue pairs.
//! The next `Receive` posted here takes the oldest stalled queue pair off the list and drives
//! it on the poster's thread: the wake-up comes from the post itself, with no polling and no
//! timer.

use std::any::Any;
use std::collections::VecDeque;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use netdirect_spi::kit::mr::Access;
use netdirect_spi::kit::overlapped::Overlapped;
use netdirect_spi::kit::srq::{Seg, SrqCore, TakenReceive};
use netdirect_spi::traits::SharedReceiveQueue;
use netdirect_spi::{fail, Result, Sge, Status};

use crate::adapter::Shared;
use crate::qp::ShmQp;

/// Most SGEs a Receive may carry here (`MaxReceiveSge`).
const MAX_SGE: usize = 64;

/// A shared receive queue.
pub(crate) struct ShmSrq {
    me: Weak<Self>,
    pub(crate) shared: Arc<Shared>,
    core: SrqCore,
    /// Queue pairs holding a message for want of a Receive, oldest first. Its lock orders a
    /// queue pair's "empty, so I wait" against a poster's "posted, so I wake one"
    /// ([`ShmSrq::take_or_wait`]).
    stalled: Mutex<VecDeque<Weak<ShmQp>>>,
}

impl fmt::Debug for ShmSrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ShmSrq").field("core", &self.core).finish()
    }
}

impl ShmSrq {
    /// A queue of `depth` Receives of at most `max_sge` SGEs each, notifying below
    /// `notify_threshold` (0: never).
    pub(crate) fn new(
        shared: Arc<Shared>,
        depth: u32,
        max_sge: u32,
        notify_threshold: u32,
    ) -> Arc<Self> {
        let driver = shared.engine.clone();
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            shared,
            core: SrqCore::new(depth, max_sge, notify_threshold, driver),
            stalled: Mutex::new(VecDeque::new()),
        })
    }

    /// Recognise one of ours among the SPI objects.
    pub(crate) fn downcast(srq: &Arc<dyn SharedReceiveQueue>) -> Option<Arc<Self>> {
        srq.as_any()
            .downcast_ref::<Self>()
            .and_then(|s| s.me.upgrade())
    }

    /// Most SGEs one Receive may carry.
    pub(crate) fn max_segs(&self) -> usize {
        self.core.max_segs()
    }

    fn lock_stalled(&self) -> MutexGuard<'_, VecDeque<Weak<ShmQp>>> {
        self.stalled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the oldest Receive into `dst` for `qp`; when there is none, put `qp` on the
    /// stalled list (once: `listed` says whether it already is) and return `None`.
    ///
    /// The fast path takes only the core's lock. The empty case retries under the stalled
    /// list's lock, which a poster takes after its post: either the retry sees the new
    /// Receive or the poster sees `qp` on the list.
    pub(crate) fn take_or_wait(
        &self,
        dst: &mut [Seg],
        qp: &Weak<ShmQp>,
        listed: &mut bool,
    ) -> Option<TakenReceive> {
        if let Some(t) = self.core.take_into(dst) {
            return Some(t);
        }
        let mut stalled = self.lock_stalled();
        if let Some(t) = self.core.take_into(dst) {
            return Some(t);
        }
        if !*listed {
            stalled.push_back(qp.clone());
            *listed = true;
        }
        None
    }

    /// A Receive was posted: drive the oldest stalled queue pairs on this thread while
    /// Receives remain (one that closed meanwhile takes none, so the next gets its chance).
    fn wake_stalled(&self) {
        while self.core.posted() > 0 {
            let Some(w) = self.lock_stalled().pop_front() else {
                return;
            };
            if let Some(qp) = w.upgrade() {
                qp.srq_posted();
            }
        }
    }
}

impl SharedReceiveQueue for ShmSrq {
    fn as_any(&self) -> &dyn Any {
        self
    }

    /// `Receive`: `ND_DATA_OVERRUN` for more SGEs than `maxRequestSge`, `ND_NO_MORE_ENTRIES`
    /// when the queue is full, `ND_ACCESS_VIOLATION` (synchronously: the Receive belongs to
    /// no queue pair yet, so no CQ could report it) for an SGE outside a live registration
    /// allowing local writes — the same statuses as `tcp`.
    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if sge.len() > self.core.max_segs() || sge.len() > MAX_SGE {
            return fail(Status::DATA_OVERRUN);
        }
        let mut segs = [const { Seg::EMPTY }; MAX_SGE];
        let mut total = 0u64;
        for (dst, s) in segs.iter_mut().zip(sge) {
            let (addr, len) = (s.buffer as usize as u64, u64::from(s.buffer_length));
            let Some(reg) = self
                .shared
                .mrs
                .lookup(s.memory_region_token)
                .filter(|r| r.check(addr, len, Access::LocalWrite).is_ok())
            else {
                return fail(Status::ACCESS_VIOLATION);
            };
            *dst = Seg {
                addr,
                len: s.buffer_length,
                reg: Some(reg),
            };
            total += len;
        }
        let segs = &mut segs[..sge.len()];
        self.core
            .post(context, total, segs.iter_mut().map(std::mem::take))?;
        self.wake_stalled();
        Ok(())
    }

    fn modify(&self, depth: u32, notify_threshold: u32) -> Result<()> {
        self.core.modify(depth, notify_threshold)
    }

    fn notify(&self) -> Result<Overlapped> {
        Ok(self.core.notify())
    }

    fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        Ok(crate::cq::notify_affinity())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.core.cancel_overlapped_requests();
        Ok(())
    }
}
