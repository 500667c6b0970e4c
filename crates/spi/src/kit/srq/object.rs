//! The `IND2SharedReceiveQueue` object of a software provider (IND2SharedReceiveQueue in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.6), generic over the few things that depend on the transport.
//!
//! The Receives live in a [`SrqCore`] (preallocated, FIFO, threshold Notify). A queue pair
//! created with the queue (`CreateQueuePairWithSrq`) takes the oldest Receive when the first
//! part of a message arrives ([`Srq::take_into`]) and fills it exactly as one of its own;
//! the completion goes to that queue pair's receive CQ with its context.
//!
//! # A message that finds the queue empty
//!
//! It must not break the connection (`docs/ND-RULES.md` §2.4, CreateQueuePairWithSrq): the
//! queue pair holds the message (each provider says how its transport pushes back on the
//! sender) and joins this queue's list of stalled queue pairs. The next `Receive` posted here
//! takes the oldest stalled queue pair off the list and drives it on the poster's thread
//! ([`SrqProvider::srq_posted`]), so the wake-up comes from the post itself: no polling, no
//! timer, no helper thread. How long a queue pair may stay stalled (R-QP-7) is the provider's
//! business.

use std::any::Any;
use std::collections::VecDeque;
use std::convert::Infallible;
use std::fmt;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use super::{Seg, SrqCore, TakenReceive};
use crate::kit::adapter::AdapterState;
use crate::kit::mr::Access;
use crate::kit::overlapped::Overlapped;
use crate::kit::wrq::{RecvWr, Seg as WrSeg, WrQueue};
use crate::traits::SharedReceiveQueue;
use crate::{fail, Result, Sge, Status};

/// Most SGEs one SRQ Receive may carry, whatever the queue was created with: the bound of the
/// on-stack staging array in [`Srq::receive`](SharedReceiveQueue::receive), so that a post
/// never allocates. Providers advertise less (`MaxReceiveSge`).
pub const MAX_SRQ_SGE: usize = 64;

/// What a provider plugs into [`Srq`]: its adapter state, its queue pair, and the wake-up.
pub trait SrqProvider: Send + Sync + 'static {
    /// The adapter state every object of the provider shares: the SGEs of a Receive are
    /// checked against its registrations, and its driver completes Notify requests.
    type Adapter: AdapterState;
    /// The provider's queue pair.
    type Qp: Send + Sync + 'static;

    /// A Receive was posted while `qp` was on the stalled list (the poster took it off):
    /// resume the held message, on the calling (posting) thread. Called with no lock of the
    /// queue held.
    fn srq_posted(qp: &Self::Qp);
}

/// A shared receive queue of a software provider.
pub struct Srq<P: SrqProvider> {
    me: Weak<Self>,
    adapter: Arc<P::Adapter>,
    core: SrqCore,
    /// Queue pairs holding a message for want of a Receive, oldest first. Its lock also orders
    /// a queue pair's "empty, so I wait" against a poster's "posted, so I wake one" (see
    /// [`Srq::take_or_wait`]).
    stalled: Mutex<VecDeque<Weak<P::Qp>>>,
}

impl<P: SrqProvider> fmt::Debug for Srq<P> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Srq").field("core", &self.core).finish()
    }
}

impl<P: SrqProvider> Srq<P> {
    /// A queue of `depth` Receives of at most `max_sge` SGEs each (both validated by the
    /// caller against `ND2_ADAPTER_INFO`), notifying below `notify_threshold` (0: never).
    pub fn new(
        adapter: Arc<P::Adapter>,
        depth: u32,
        max_sge: u32,
        notify_threshold: u32,
    ) -> Arc<Self> {
        let driver = adapter.driver();
        Arc::new_cyclic(|me| Self {
            me: me.clone(),
            adapter,
            core: SrqCore::new(depth, max_sge, notify_threshold, driver),
            stalled: Mutex::new(VecDeque::new()),
        })
    }

    /// Recognise one of `adapter`'s queues among the SPI objects (`CreateQueuePairWithSrq`:
    /// `None` for another provider's queue or one of another adapter).
    pub fn downcast_on(
        srq: &Arc<dyn SharedReceiveQueue>,
        adapter: &Arc<P::Adapter>,
    ) -> Option<Arc<Self>> {
        srq.as_any()
            .downcast_ref::<Self>()
            .filter(|s| Arc::ptr_eq(&s.adapter, adapter))
            .and_then(|s| s.me.upgrade())
    }

    /// Most SGEs one Receive may carry (the size of a queue pair's scratch for
    /// [`Srq::take_into`]).
    pub fn max_segs(&self) -> usize {
        self.core.max_segs()
    }

    fn lock_stalled(&self) -> MutexGuard<'_, VecDeque<Weak<P::Qp>>> {
        self.stalled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Take the oldest Receive into `dst` for `qp`; when there is none, put `qp` on the
    /// stalled list (once: `listed` says whether it already is, and the provider clears it in
    /// [`SrqProvider::srq_posted`]) and return `None`.
    ///
    /// The fast path takes only the core's lock. The empty case retries under the stalled
    /// list's lock, which a poster takes after its post: either the retry sees the new Receive
    /// or the poster sees `qp` on the list.
    pub fn take_or_wait(
        &self,
        dst: &mut [Seg],
        qp: &Weak<P::Qp>,
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

    /// Resolve each SGE into `segs` (one per SGE, holding its registration):
    /// `ND_ACCESS_VIOLATION` for one outside a live registration allowing local writes.
    fn resolve(&self, sge: &[Sge], segs: &mut [Seg]) -> Result<()> {
        let mrs = self.adapter.registrations();
        for (dst, s) in segs.iter_mut().zip(sge) {
            let (addr, len) = (s.buffer as usize as u64, u64::from(s.buffer_length));
            let Some(reg) = mrs
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
        }
        Ok(())
    }

    /// Move the oldest Receive into `rq`, the one-deep receive queue of a queue pair created
    /// with this queue, through `scratch` (at least [`Srq::max_segs`] long) to receive a
    /// message into; when there is none, wait on the stalled list as
    /// [`Srq::take_or_wait`] does and return `false`. The segments keep the references they
    /// were checked with when posted here.
    ///
    /// # Panics
    /// If `rq` is full or holds fewer segments per request than [`Srq::max_segs`].
    pub fn take_into(
        &self,
        rq: &mut WrQueue<RecvWr>,
        scratch: &mut [Seg],
        qp: &Weak<P::Qp>,
        listed: &mut bool,
    ) -> bool {
        let Some(t) = self.take_or_wait(scratch, qp, listed) else {
            return false;
        };
        let queued = rq.push_with(
            t.segs,
            |i| {
                let s = &mut scratch[i];
                Ok::<_, Infallible>(WrSeg::new(s.addr, s.len, s.reg.take()))
            },
            |_| RecvWr {
                context: t.context,
                total: t.total,
            },
        );
        queued.is_ok()
    }

    /// A Receive was posted: drive the oldest stalled queue pairs, on this thread, while
    /// Receives remain (a queue pair that closed meanwhile takes none, so the next one gets
    /// its chance).
    fn wake_stalled(&self) {
        while self.core.posted() > 0 {
            let Some(w) = self.lock_stalled().pop_front() else {
                return;
            };
            if let Some(qp) = w.upgrade() {
                P::srq_posted(&qp);
            }
        }
    }
}

impl<P: SrqProvider> SharedReceiveQueue for Srq<P> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    /// `Receive`: `ND_DATA_OVERRUN` for more SGEs than `maxRequestSge`, `ND_NO_MORE_ENTRIES`
    /// when the queue is full, `ND_BUFFER_OVERFLOW` for more than `MaxTransferLength` bytes,
    /// in that order (a queue pair's Receive checks the same, in the same order:
    /// `WrQueue::check_receive`), then `ND_ACCESS_VIOLATION` (synchronously: the Receive
    /// belongs to no queue pair yet, so no CQ could report it) for an SGE outside a live
    /// registration allowing local writes. On success, drives stalled queue pairs (module
    /// docs).
    unsafe fn receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if sge.len() > MAX_SRQ_SGE {
            return fail(Status::DATA_OVERRUN);
        }
        let total: u64 = sge.iter().map(|s| u64::from(s.buffer_length)).sum();
        let mut segs = [const { Seg::EMPTY }; MAX_SRQ_SGE];
        // The length and the memory are judged here, without the queue's lock; `post`
        // reports the verdict after the SGE count and the room, in a queue pair's order.
        let checked = if total > self.adapter.max_transfer_length() {
            // "The request referenced more data than is supported" (IND2SharedReceiveQueue).
            fail(Status::BUFFER_OVERFLOW)
        } else {
            self.resolve(sge, &mut segs)
        };
        let segs = &mut segs[..sge.len()];
        self.core
            .post(context, total, segs.iter_mut().map(std::mem::take), checked)?;
        self.wake_stalled();
        Ok(())
    }

    /// `Modify`: `ND_INVALID_PARAMETER` beyond the adapter's `MaxSharedReceiveQueueDepth`
    /// (checked here too, for callers of the SPI object); otherwise see [`SrqCore::modify`].
    fn modify(&self, depth: u32, notify_threshold: u32) -> Result<()> {
        if depth > self.adapter.max_shared_receive_queue_depth() {
            return fail(Status::INVALID_PARAMETER);
        }
        self.core.modify(depth, notify_threshold)
    }

    /// `Notify`: see [`SrqCore::notify`].
    fn notify(&self) -> Result<Overlapped> {
        Ok(self.core.notify())
    }

    fn get_notify_affinity(&self) -> Result<(u16, usize)> {
        Ok(crate::kit::affinity::notify_affinity())
    }

    fn cancel_overlapped_requests(&self) -> Result<()> {
        self.core.cancel_overlapped_requests();
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicU32, Ordering};

    use super::*;
    use crate::kit::mr::{Kind, NewRegistration, Table};
    use crate::kit::overlapped::tests::NullDriver;
    use crate::kit::overlapped::Driver;
    use crate::MrFlags;

    struct Adapter {
        mrs: Table,
    }

    /// A queue pair that counts its wake-ups and takes one Receive on each.
    struct Qp {
        me: Weak<Self>,
        srq: Mutex<Option<Arc<Srq<Test>>>>,
        woken: AtomicU32,
        taken: Mutex<Vec<u64>>,
        listed: Mutex<bool>,
    }

    impl Qp {
        fn new(srq: &Arc<Srq<Test>>) -> Arc<Self> {
            Arc::new_cyclic(|me| Self {
                me: me.clone(),
                srq: Mutex::new(Some(srq.clone())),
                woken: AtomicU32::new(0),
                taken: Mutex::new(Vec::new()),
                listed: Mutex::new(false),
            })
        }

        fn arrive(&self) -> bool {
            let srq = self.srq.lock().unwrap().clone().unwrap();
            let mut dst = vec![Seg::default(); srq.max_segs()];
            let mut listed = self.listed.lock().unwrap();
            match srq.take_or_wait(&mut dst, &self.me, &mut listed) {
                Some(t) => {
                    self.taken.lock().unwrap().push(t.context);
                    true
                }
                None => false,
            }
        }
    }

    enum Test {}

    impl AdapterState for Adapter {
        fn registrations(&self) -> &Table {
            &self.mrs
        }
        fn driver(&self) -> Arc<dyn Driver> {
            Arc::new(NullDriver)
        }
        fn max_registration_size(&self) -> usize {
            usize::MAX
        }
        fn max_transfer_length(&self) -> u64 {
            1 << 20
        }
    }

    impl SrqProvider for Test {
        type Adapter = Adapter;
        type Qp = Qp;
        fn srq_posted(qp: &Qp) {
            qp.woken.fetch_add(1, Ordering::Relaxed);
            *qp.listed.lock().unwrap() = false;
            assert!(qp.arrive(), "woken only when a Receive is there");
        }
    }

    fn setup(flags: MrFlags) -> (Arc<Adapter>, Arc<Srq<Test>>, u32, Vec<u8>) {
        let buf = vec![0u8; 64];
        let adapter = Arc::new(Adapter { mrs: Table::new() });
        let reg = adapter.mrs.insert(NewRegistration {
            base: buf.as_ptr() as usize,
            len: buf.len(),
            flags,
            kind: Kind::Region,
            parent: None,
            keepalive: None,
        });
        let srq = Srq::new(adapter.clone(), 4, 2, 0);
        (adapter, srq, reg.token, buf)
    }

    fn sge(buf: &[u8], off: usize, len: u32, token: u32) -> Sge {
        Sge {
            buffer: buf[off..].as_ptr().cast_mut(),
            buffer_length: len,
            memory_region_token: token,
        }
    }

    #[test]
    fn receive_checks_sges_before_queueing() {
        let (_a, srq, token, buf) = setup(MrFlags::ALLOW_LOCAL_WRITE);
        // SAFETY: nothing reads or writes `buf` while the Receives are queued.
        unsafe {
            let three = [sge(&buf, 0, 8, token); 3];
            assert_eq!(
                srq.receive(1, &three).unwrap_err().status(),
                Status::DATA_OVERRUN
            );
            assert_eq!(
                srq.receive(1, &[sge(&buf, 60, 8, token)])
                    .unwrap_err()
                    .status(),
                Status::ACCESS_VIOLATION,
                "past the end of the region"
            );
            assert_eq!(
                srq.receive(1, &[sge(&buf, 0, 8, token ^ 1)])
                    .unwrap_err()
                    .status(),
                Status::ACCESS_VIOLATION,
                "no such token"
            );
            assert_eq!(
                srq.core.posted(),
                0,
                "a refused Receive leaves nothing queued"
            );
            srq.receive(1, &[sge(&buf, 0, 8, token), sge(&buf, 8, 8, token)])
                .expect("two SGEs in the region");
        }
        assert_eq!(srq.core.posted(), 1);
    }

    /// The order of a queue pair's Receive checks: the SGE count, then room, then the length,
    /// and only then the memory (which the queue pair reports as a completion).
    #[test]
    fn a_full_queue_is_reported_before_the_length_and_the_memory() {
        let (_a, srq, token, buf) = setup(MrFlags::ALLOW_LOCAL_WRITE);
        // SAFETY: nothing reads or writes `buf` while the Receives are queued.
        unsafe {
            for i in 0..4 {
                srq.receive(i, &[sge(&buf, 0, 8, token)]).expect("room");
            }
            let huge = Sge {
                buffer_length: u32::MAX,
                ..sge(&buf, 0, 8, token)
            };
            for (what, s) in [
                ("too long", [huge, huge]),
                ("bad token", [sge(&buf, 0, 8, 0); 2]),
            ] {
                let r = srq.receive(9, &s).unwrap_err().status();
                assert_eq!(r, Status::NO_MORE_ENTRIES, "{what}, queue full");
            }
            let three = [sge(&buf, 0, 8, token); 3];
            let r = srq.receive(9, &three).unwrap_err().status();
            assert_eq!(r, Status::DATA_OVERRUN, "too many SGEs comes first");
        }
    }

    #[test]
    fn receive_needs_local_write() {
        let (_a, srq, token, buf) = setup(MrFlags::empty());
        // SAFETY: as above.
        let r = unsafe { srq.receive(1, &[sge(&buf, 0, 8, token)]) };
        assert_eq!(r.unwrap_err().status(), Status::ACCESS_VIOLATION);
    }

    #[test]
    fn a_post_wakes_stalled_queue_pairs_oldest_first() {
        let (_a, srq, token, buf) = setup(MrFlags::ALLOW_LOCAL_WRITE);
        let (p, q) = (Qp::new(&srq), Qp::new(&srq));
        assert!(!p.arrive() && !q.arrive(), "empty: both stall");
        assert!(!p.arrive(), "stalls again without a second listing");
        // SAFETY: as above.
        unsafe { srq.receive(7, &[sge(&buf, 0, 8, token)]) }.expect("post");
        assert_eq!(*p.taken.lock().unwrap(), [7], "the oldest stalled one");
        assert_eq!(q.woken.load(Ordering::Relaxed), 0, "no Receive left for q");
        // SAFETY: as above.
        unsafe { srq.receive(8, &[sge(&buf, 0, 8, token)]) }.expect("post");
        assert_eq!(*q.taken.lock().unwrap(), [8]);
        assert_eq!(p.woken.load(Ordering::Relaxed), 1, "p was listed once");
        // SAFETY: as above.
        unsafe { srq.receive(9, &[sge(&buf, 0, 8, token)]) }.expect("post");
        assert_eq!(srq.core.posted(), 1, "nobody stalled: the Receive waits");
    }

    #[test]
    fn downcast_checks_the_adapter() {
        let (a, srq, _, _) = setup(MrFlags::ALLOW_LOCAL_WRITE);
        let other = Arc::new(Adapter { mrs: Table::new() });
        let dynq: Arc<dyn SharedReceiveQueue> = srq;
        assert!(Srq::<Test>::downcast_on(&dynq, &a).is_some());
        assert!(Srq::<Test>::downcast_on(&dynq, &other).is_none());
        assert_eq!(
            dynq.get_notify_affinity(),
            Ok(crate::kit::affinity::notify_affinity())
        );
    }
}
