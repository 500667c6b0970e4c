//! Fixed-capacity work-request queues (a queue pair's Receives, its initiator requests) with
//! their scatter/gather lists in one preallocated slab, so posting and completing never
//! allocate.
//!
//! A queued segment keeps its registration alive: a Deregister completes only when no request
//! uses the memory any more (`IND2MemoryRegion::Deregister` pending, [`Registration`]'s
//! release). Most requests use the registration the request before used, so a queue *pins*
//! one: it holds a single reference for all of its segments in that registration and counts
//! them, instead of a reference per segment. That saves two atomic read-modify-writes per
//! request (the reference taken at post, dropped at completion) as long as requests stay
//! queued, as applications keep Receives posted. The pin goes with its last user, so a queue
//! with nothing queued holds no registration.

use std::collections::VecDeque;
use std::sync::Arc;

use crate::kit::mr::{Access, AccessError, LocalCache, Registration, Table};
use crate::{fail, Result, Sge, Status};

/// Total bytes of an ND scatter/gather list (the sum of its lengths; no overflow: each is a
/// `u32`, and a list has at most a few hundred entries).
#[must_use]
pub fn total_len(sge: &[Sge]) -> u64 {
    match sge {
        // The common list, without the set-up of the vectorised sum below (about 15
        // instructions of every post).
        [s] => u64::from(s.buffer_length),
        _ => sge.iter().map(|s| u64::from(s.buffer_length)).sum(),
    }
}

/// One scatter/gather element after validation: an absolute address range, and what keeps its
/// registration alive while the request is in flight (its own reference, or the queue's pin).
#[derive(Debug, Clone, Default)]
pub struct Seg {
    /// First byte.
    pub addr: u64,
    /// Length in bytes.
    pub len: u32,
    /// Counted by the queue that holds this segment instead of holding `reg`.
    pinned: bool,
    reg: Option<Arc<Registration>>,
}

impl Seg {
    /// An unused slot (for arrays built without allocating).
    pub const EMPTY: Self = Self {
        addr: 0,
        len: 0,
        pinned: false,
        reg: None,
    };

    /// A segment of `len` bytes at `addr`, kept alive by `reg` (`None`: memory the caller
    /// keeps alive otherwise, such as the target range of a peer's Write).
    #[must_use]
    pub fn new(addr: u64, len: u32, reg: Option<Arc<Registration>>) -> Self {
        Self {
            addr,
            len,
            pinned: false,
            reg,
        }
    }

    /// The registration this segment holds a reference to: `None` for memory kept alive
    /// otherwise, and for a segment queued by [`WrQueue::push_checked`] under the queue's pin.
    #[must_use]
    pub fn reg(&self) -> Option<&Arc<Registration>> {
        self.reg.as_ref()
    }
}

/// A posted Receive as a queue pair holds it: its request context and the bytes its segments
/// can take (a longer message completes it `ND_DATA_OVERRUN`).
#[derive(Debug, Clone, Copy)]
pub struct RecvWr {
    /// The context given to `Receive`, returned in its completion.
    pub context: u64,
    /// The sum of its segments' lengths.
    pub total: u64,
}

/// A FIFO of work requests `T`, each with up to `per` segments.
#[derive(Debug)]
pub struct WrQueue<T> {
    wrs: VecDeque<(T, u16)>,
    segs: Vec<Seg>,
    per: usize,
    cap: usize,
    head_slot: usize,
    pin: Option<Arc<Registration>>,
    /// Queued segments that rely on `pin`.
    pin_users: u32,
}

impl<T> WrQueue<T> {
    /// Room for `cap` requests of up to `per` segments each.
    #[must_use]
    pub fn new(cap: usize, per: usize) -> Self {
        let cap = cap.max(1);
        Self {
            wrs: VecDeque::with_capacity(cap),
            segs: vec![Seg::default(); cap * per],
            per,
            cap,
            head_slot: 0,
            pin: None,
            pin_users: 0,
        }
    }

    /// Queued requests.
    #[must_use]
    pub fn len(&self) -> usize {
        self.wrs.len()
    }

    /// Whether nothing is queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.wrs.is_empty()
    }

    /// Whether another request would exceed the capacity.
    #[must_use]
    pub fn is_full(&self) -> bool {
        self.wrs.len() >= self.cap
    }

    /// Most segments one request may carry.
    #[must_use]
    pub fn max_segs(&self) -> usize {
        self.per
    }

    /// The synchronous checks of `IND2QueuePair::Receive` on a queue pair's own receive queue,
    /// in the order both providers report them: more SGEs than the queue pair was created
    /// with (`ND_DATA_OVERRUN`), a full queue (`ND_NO_MORE_ENTRIES`), more bytes than the
    /// adapter's `MaxTransferLength` (`ND_BUFFER_OVERFLOW`: "the request referenced more data
    /// than is supported"). Returns the Receive's length. The SGEs' memory is checked when
    /// they are queued ([`WrQueue::push_checked`]): a failure there is an error completion,
    /// not an error of the call.
    // Always inlined: it is on the path of every repost (issue 5's ping-pong).
    #[inline(always)]
    pub fn check_receive(&self, sge: &[Sge], max_transfer: u64) -> Result<u64> {
        if sge.len() > self.per {
            return fail(Status::DATA_OVERRUN);
        }
        if self.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if total > max_transfer {
            return fail(Status::BUFFER_OVERFLOW);
        }
        Ok(total)
    }

    /// The slab index of the first segment of the `i`-th request from the front.
    fn base(&self, i: usize) -> usize {
        let mut slot = self.head_slot + i;
        if slot >= self.cap {
            slot -= self.cap; // no division on the hot path
        }
        slot * self.per
    }

    /// Check `sge` for `access` into the next request's segments and queue `wr` with them. A
    /// token that is the pinned registration's is checked against it; others are resolved in
    /// `table` through `cache`. On failure nothing is queued or held, and the request comes
    /// back with the reason.
    ///
    /// # Panics
    /// If the queue is full or `sge` does not fit ([`WrQueue::max_segs`]): the caller reports
    /// those (`ND_NO_MORE_ENTRIES`, `ND_DATA_OVERRUN`) first. Checked in release builds too:
    /// a request spilling into the next one's segments would corrupt what keeps memory alive.
    pub fn push_checked(
        &mut self,
        wr: T,
        sge: &[Sge],
        access: Access,
        cache: &mut LocalCache,
        table: &Table,
    ) -> Result<(), (T, AccessError)> {
        assert!(
            !self.is_full() && sge.len() <= self.per,
            "WrQueue::push_checked beyond the queue's depth or SGE limit"
        );
        let base = self.base(self.wrs.len());
        if let [s] = sge {
            // One segment (most requests), without the loop's set-up.
            if let Err(e) = self.check_into(base, s, access, cache, table) {
                return Err((wr, e));
            }
        } else {
            for (i, s) in sge.iter().enumerate() {
                if let Err(e) = self.check_into(base + i, s, access, cache, table) {
                    for j in base..base + i {
                        self.release(j);
                    }
                    return Err((wr, e));
                }
            }
        }
        self.wrs.push_back((wr, sge.len() as u16));
        Ok(())
    }

    /// Check `s` for `access` into slab segment `i`, which then holds what keeps its memory
    /// alive (the pin, or its own reference); on failure it holds nothing.
    #[inline(always)]
    fn check_into(
        &mut self,
        i: usize,
        s: &Sge,
        access: Access,
        cache: &mut LocalCache,
        table: &Table,
    ) -> Result<(), AccessError> {
        let addr = s.buffer as usize as u64;
        let len = u64::from(s.buffer_length);
        let checked = match &self.pin {
            Some(p) if p.token == s.memory_region_token && p.is_valid() => {
                p.check(addr, len, access).map(|()| None)
            }
            _ => match cache.resolve(table, s.memory_region_token) {
                Some(r) => r.check(addr, len, access).map(|()| Some(r)),
                None => Err(AccessError::InvalidToken),
            },
        };
        let d = &mut self.segs[i];
        d.addr = addr;
        d.len = s.buffer_length;
        match checked? {
            None => {
                d.pinned = true;
                self.pin_users += 1;
            }
            Some(r) if self.pin_users == 0 => {
                // Nothing relies on the old pin: this registration becomes the pin.
                d.pinned = true;
                self.pin = Some(r);
                self.pin_users = 1;
            }
            Some(r) => d.reg = Some(r),
        }
        Ok(())
    }

    /// Queue a request whose `n` segments `make` builds in place, one per index (for segments
    /// checked elsewhere, such as those a shared receive queue hands over). If `make` fails,
    /// the segments made so far are released and nothing is queued.
    ///
    /// # Panics
    /// As [`WrQueue::push_checked`], if the queue is full or `n` does not fit.
    pub fn push_with<E>(
        &mut self,
        n: usize,
        mut make: impl FnMut(usize) -> Result<Seg, E>,
        wr: impl FnOnce(&[Seg]) -> T,
    ) -> Result<(), E> {
        assert!(
            !self.is_full() && n <= self.per,
            "WrQueue::push_with beyond the queue's depth or SGE limit"
        );
        let base = self.base(self.wrs.len());
        for i in 0..n {
            match make(i) {
                Ok(seg) => {
                    // A made segment holds its own reference, never the pin.
                    let d = &mut self.segs[base + i];
                    d.addr = seg.addr;
                    d.len = seg.len;
                    d.reg = seg.reg;
                }
                Err(e) => {
                    for j in base..base + i {
                        self.release(j);
                    }
                    return Err(e);
                }
            }
        }
        let wr = wr(&self.segs[base..base + n]);
        self.wrs.push_back((wr, n as u16));
        Ok(())
    }

    /// Queue a request with no segments; the queue must not be full.
    pub fn push_bare(&mut self, wr: T) {
        debug_assert!(!self.is_full());
        self.wrs.push_back((wr, 0));
    }

    /// The `i`-th request from the front and its segments.
    #[must_use]
    pub fn get(&self, i: usize) -> Option<(&T, &[Seg])> {
        let (wr, n) = self.wrs.get(i)?;
        let base = self.base(i);
        Some((wr, &self.segs[base..base + usize::from(*n)]))
    }

    /// The `i`-th request from the front, mutable, and its segments.
    pub fn get_mut(&mut self, i: usize) -> Option<(&mut T, &[Seg])> {
        let base = self.base(i);
        let (wr, n) = self.wrs.get_mut(i)?;
        Some((wr, &self.segs[base..base + usize::from(*n)]))
    }

    /// The front request and its segments.
    #[must_use]
    pub fn front(&self) -> Option<(&T, &[Seg])> {
        self.get(0)
    }

    /// The front request, mutable.
    pub fn front_mut(&mut self) -> Option<&mut T> {
        self.wrs.front_mut().map(|(wr, _)| wr)
    }

    /// Remove the front request, releasing its segments' registrations.
    // Inlined: a Receive leaves its queue on shm's poll lane, the critical path of a message
    // (`take_inline_msg` in the shm provider).
    #[inline(always)]
    pub fn pop(&mut self) -> Option<T> {
        let (wr, n) = self.wrs.pop_front()?;
        let base = self.base(0);
        if n == 1 {
            // One segment (most requests), without the loop's set-up.
            self.release(base);
        } else {
            for i in base..base + usize::from(n) {
                self.release(i);
            }
        }
        self.head_slot += 1;
        if self.head_slot == self.cap {
            self.head_slot = 0;
        }
        Some(wr)
    }

    /// Let go of slab segment `i`'s registration.
    fn release(&mut self, i: usize) {
        let s = &mut self.segs[i];
        if s.pinned {
            s.pinned = false;
            self.pin_users -= 1;
            if self.pin_users == 0 {
                self.pin = None;
            }
        } else {
            s.reg = None;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::mr::{Kind, NewRegistration};
    use crate::MrFlags;

    fn region(t: &Table, base: usize) -> Arc<Registration> {
        t.insert(NewRegistration {
            base,
            len: 0x1000,
            flags: MrFlags::ALLOW_LOCAL_WRITE,
            kind: Kind::Region,
            parent: None,
            keepalive: None,
        })
    }

    fn sge(r: &Registration, off: usize, len: u32) -> Sge {
        Sge {
            buffer: (r.base + off) as *mut u8,
            buffer_length: len,
            memory_region_token: r.token,
        }
    }

    /// References held for `r` besides the table's and the test's own.
    fn held(r: &Arc<Registration>) -> usize {
        Arc::strong_count(r) - 2
    }

    #[test]
    fn receive_checks_report_sge_count_then_room_then_length() {
        let t = Table::new();
        let a = region(&t, 0x10_000);
        let mut q = WrQueue::<RecvWr>::new(1, 2);
        let status = |q: &WrQueue<RecvWr>, sges: &[Sge], max| {
            q.check_receive(sges, max).map_err(|e| e.status())
        };
        let one = [sge(&a, 0, 8)];
        let three = [sge(&a, 0, 8), sge(&a, 8, 8), sge(&a, 16, 8)];
        assert_eq!(status(&q, &one, 8), Ok(8));
        assert_eq!(status(&q, &one, 7), Err(Status::BUFFER_OVERFLOW));
        assert_eq!(status(&q, &three, 7), Err(Status::DATA_OVERRUN));
        let wr = RecvWr {
            context: 1,
            total: 8,
        };
        let mut c = LocalCache::default();
        q.push_checked(wr, &one, Access::LocalWrite, &mut c, &t)
            .expect("queued");
        // Full: the SGE count is still reported first, then the room, before the length.
        assert_eq!(status(&q, &three, 7), Err(Status::DATA_OVERRUN));
        assert_eq!(status(&q, &one, 7), Err(Status::NO_MORE_ENTRIES));
    }

    #[test]
    fn one_pin_serves_every_queued_segment_of_its_registration_and_goes_with_the_last() {
        let t = Table::new();
        let (a, b) = (region(&t, 0x10_000), region(&t, 0x20_000));
        let mut q = WrQueue::<u32>::new(8, 2);
        let mut c = LocalCache::default();
        q.push_checked(1, &[sge(&a, 0, 8)], Access::LocalWrite, &mut c, &t)
            .expect("first");
        let two = [sge(&a, 8, 8), sge(&a, 16, 8)];
        q.push_checked(2, &two, Access::LocalWrite, &mut c, &t)
            .expect("second");
        assert_eq!(held(&a), 1, "three segments, one reference (the pin)");
        // Another registration while the pin is in use: the segment holds its own reference.
        q.push_checked(3, &[sge(&b, 0, 8)], Access::LocalWrite, &mut c, &t)
            .expect("third");
        assert_eq!(held(&b), 1);
        // A failure in the middle of a list releases what the list took and queues nothing.
        let bad = [sge(&a, 0, 8), sge(&a, 0x1000, 1)];
        let bad = q.push_checked(4, &bad, Access::LocalWrite, &mut c, &t);
        assert_eq!(bad, Err((4, AccessError::OutOfBounds)));
        assert_eq!((q.len(), held(&a)), (3, 1));
        assert_eq!(q.pop(), Some(1));
        assert_eq!(held(&a), 1, "the second request still uses the pin");
        assert_eq!(q.pop(), Some(2));
        assert_eq!(held(&a), 0, "the pin went with its last user");
        assert_eq!(q.pop(), Some(3));
        assert_eq!((held(&b), q.len()), (0, 0));
        // With nothing queued the next registration becomes the pin.
        q.push_checked(5, &[sge(&b, 0, 8)], Access::LocalWrite, &mut c, &t)
            .expect("fifth");
        assert_eq!(held(&b), 1);
        drop(q);
        assert_eq!(held(&b), 0, "dropping the queue releases the pin");
    }

    #[test]
    fn a_deregistered_pin_is_not_trusted_for_new_posts() {
        let t = Table::new();
        let a = region(&t, 0x10_000);
        let mut q = WrQueue::<u32>::new(4, 1);
        let mut c = LocalCache::default();
        q.push_checked(1, &[sge(&a, 0, 8)], Access::LocalWrite, &mut c, &t)
            .expect("first");
        t.remove(a.token);
        let late = q.push_checked(2, &[sge(&a, 0, 8)], Access::LocalWrite, &mut c, &t);
        assert_eq!(late, Err((2, AccessError::InvalidToken)));
        assert_eq!(q.len(), 1, "the request queued before the removal stays");
    }

    #[test]
    fn segments_wrap_around_the_slab() {
        let t = Table::new();
        let a = region(&t, 0x10_000);
        let mut q = WrQueue::<usize>::new(3, 1);
        let mut c = LocalCache::default();
        for i in 0..10usize {
            q.push_checked(i, &[sge(&a, i, 1)], Access::LocalWrite, &mut c, &t)
                .expect("post");
            let (&front, segs) = q.front().expect("queued");
            assert_eq!((front, segs[0].addr), (i, (a.base + i) as u64));
            assert_eq!(q.pop(), Some(i));
        }
        assert_eq!(held(&a), 0);
    }
}
