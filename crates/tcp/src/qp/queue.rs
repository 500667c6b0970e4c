//! Fixed-capacity work-request queues with their scatter/gather lists in one preallocated slab,
//! so posting and completing never allocate.

use std::collections::VecDeque;
use std::sync::Arc;

use netdirect_spi::kit::mr::Registration;
use netdirect_spi::Sge;

/// One scatter/gather element after validation: an absolute address range, and the
/// registration that keeps its memory alive while the request is in flight.
#[derive(Debug, Clone, Default)]
pub(crate) struct Seg {
    pub(crate) addr: u64,
    pub(crate) len: u32,
    pub(crate) reg: Option<Arc<Registration>>,
}

/// A FIFO of work requests `T`, each with up to `per` segments.
#[derive(Debug)]
pub(crate) struct WrQueue<T> {
    wrs: VecDeque<(T, u16)>,
    segs: Vec<Seg>,
    per: usize,
    cap: usize,
    head_slot: usize,
}

impl<T> WrQueue<T> {
    pub(crate) fn new(cap: usize, per: usize) -> Self {
        let cap = cap.max(1);
        Self {
            wrs: VecDeque::with_capacity(cap),
            segs: vec![Seg::default(); cap * per],
            per,
            cap,
            head_slot: 0,
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.wrs.len()
    }

    pub(crate) fn is_full(&self) -> bool {
        self.wrs.len() >= self.cap
    }

    /// Most segments one request may carry.
    pub(crate) fn max_segs(&self) -> usize {
        self.per
    }

    fn slot(&self, i: usize) -> usize {
        (self.head_slot + i) % self.cap
    }

    /// Append a request whose segments are made in place, one per source element, by
    /// `make`: `n` must fit (`max_segs`) and the queue must not be full. If `make` fails, the
    /// segments made so far are released and nothing is queued. (Made in place because a
    /// request's segments are up to 64 × 24 bytes: building them on the stack and moving them
    /// in cost a copy and a drop loop of that size per post.)
    pub(crate) fn push_with<E>(
        &mut self,
        n: usize,
        mut make: impl FnMut(usize) -> Result<Seg, E>,
        wr: impl FnOnce(&[Seg]) -> T,
    ) -> Result<(), E> {
        debug_assert!(!self.is_full() && n <= self.per);
        let base = self.slot(self.wrs.len()) * self.per;
        let slots = &mut self.segs[base..base + n];
        for i in 0..n {
            match make(i) {
                Ok(seg) => slots[i] = seg,
                Err(e) => {
                    for s in &mut slots[..i] {
                        s.reg = None;
                    }
                    return Err(e);
                }
            }
        }
        let wr = wr(slots);
        self.wrs.push_back((wr, n as u16));
        Ok(())
    }

    /// Append a request with no segments; the queue must not be full.
    pub(crate) fn push_bare(&mut self, wr: T) {
        debug_assert!(!self.is_full());
        self.wrs.push_back((wr, 0));
    }

    /// The `i`-th request from the front and its segments.
    pub(crate) fn get(&self, i: usize) -> Option<(&T, &[Seg])> {
        let (wr, n) = self.wrs.get(i)?;
        let base = self.slot(i) * self.per;
        Some((wr, &self.segs[base..base + *n as usize]))
    }

    /// The `i`-th request from the front, mutable, and its segments.
    pub(crate) fn get_mut(&mut self, i: usize) -> Option<(&mut T, &[Seg])> {
        let base = self.slot(i) * self.per;
        let (wr, n) = self.wrs.get_mut(i)?;
        Some((wr, &self.segs[base..base + *n as usize]))
    }

    /// The front request and its segments.
    pub(crate) fn front(&self) -> Option<(&T, &[Seg])> {
        self.get(0)
    }

    /// Remove the front request, releasing its segments' registrations.
    pub(crate) fn pop(&mut self) -> Option<T> {
        let (wr, n) = self.wrs.pop_front()?;
        let base = self.head_slot * self.per;
        for s in &mut self.segs[base..base + n as usize] {
            s.reg = None;
        }
        self.head_slot = (self.head_slot + 1) % self.cap;
        Some(wr)
    }
}

/// Total bytes of an ND scatter/gather list.
pub(crate) fn total_len(sge: &[Sge]) -> u64 {
    sge.iter().map(|s| u64::from(s.buffer_length)).sum()
}
