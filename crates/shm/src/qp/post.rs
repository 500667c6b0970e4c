//! The posts: `Send`, `Receive`, `Read`, `Write`, `Bind` and `Invalidate`, their checks and
//! statuses, and the direct path that puts a small request in the ring within its post.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use netdirect_spi::kit::mr::Access;
use netdirect_spi::kit::mw;
use netdirect_spi::kit::qp::{self, Posts, Request};
use netdirect_spi::kit::wrq::total_len;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{fail, Error, OpFlags, Result, Sge, Status};

use super::{
    remote_desc, Answer, Conn, Inner, Op, RecvWr, SendWr, ShmQp, MAX_INLINE_SGE, WRITE_INLINE_MAX,
};
use crate::bias::BiasedGuard;
use crate::mem::{self, InlineSges, Owned, Prefixed};
use crate::ring::{flag, kind, Desc, Violation, INLINE_MAX};

impl ShmQp {
    /// Whether every SGE lies in the cached registration with local read access (the common
    /// case of a small Send from the buffer used last), checked without taking a reference
    /// (`LocalCache::covers`): the bytes are copied out before the post returns, under the
    /// lock, and a Deregister waits for that (the adapter's copy barrier, `adapter::open`).
    pub(super) fn cached_readable(&self, g: &Inner, sge: &[Sge]) -> bool {
        sge.iter().all(|s| {
            g.cache.covers(
                &self.shared.mrs,
                s.memory_region_token,
                s.buffer as usize as u64,
                u64::from(s.buffer_length),
                Access::LocalRead,
            )
        })
    }

    /// A Receive whose memory failed its check completes ND_ACCESS_VIOLATION, after the
    /// Receives posted before it are flushed (completions keep posting order). Out of line:
    /// the repost of every message passes the call.
    #[cold]
    #[inline(never)]
    fn refuse_receive(&self, g: &mut Inner, context: u64) {
        if g.conn == Conn::Idle {
            // Never connected: there is no connection for the error to end, and Connect says
            // ND_CONNECTION_ACTIVE only of a queue pair that has one. Flushed as Flush of an
            // unconnected queue pair does; the queue pair stays ready to connect.
            self.flush_all(g);
        } else {
            // An error completion moves the queue pair to the error state (R-QP-6).
            self.close(g, Status::CONNECTION_REFUSED);
        }
        self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
    }

    /// The checks of every initiator post after its flags, in the order and with the statuses
    /// of `tcp` (IND2QueuePair::Send, Read, Write): a connection, live or ended
    /// (`ND_CONNECTION_INVALID` before one), the SGE count (`ND_DATA_OVERRUN`; an INLINE request
    /// may carry up to [`MAX_INLINE_SGE`]), room in the initiator queue (`ND_NO_MORE_ENTRIES`)
    /// and the length (`ND_BUFFER_OVERFLOW` beyond the adapter's transfer limit, or for INLINE
    /// the queue pair's inline size). The request's length.
    // Always inlined: the Send's direct path is the hot path (issue 5). Shared this way the
    // checks cost 3 more instructions of a Send round and 18 of a Write round than the copy
    // each post had of them (post_poll shm/8 1,260 -> 1,263, shm_write/8 2,631 -> 2,649).
    #[inline(always)]
    fn check_initiator_post(&self, g: &Inner, sge: &[Sge], flags: OpFlags) -> Result<u64> {
        if g.conn == Conn::Idle {
            return fail(Status::CONNECTION_INVALID);
        }
        let inline = flags.contains(OpFlags::INLINE);
        let max_sge = if inline {
            MAX_INLINE_SGE
        } else {
            g.sq.max_segs()
        };
        if sge.len() > max_sge {
            return fail(Status::DATA_OVERRUN);
        }
        if g.sq.is_full() {
            return fail(Status::NO_MORE_ENTRIES);
        }
        let total = total_len(sge);
        if total > self.max_transfer || (inline && total > self.inline_size) {
            return fail(Status::BUFFER_OVERFLOW);
        }
        Ok(total)
    }

    /// `Send`; with `inval`, ND v1's `SendAndInvalidate`: an INVAL record naming the peer's
    /// window (its token, host order) goes into the ring just before the Send's first
    /// record, in the Send's turn, so after every request posted before it (RFC 5040 §5.3,
    /// §5.5). It queues as any Send: `ND_NO_MORE_ENTRIES` only for a full initiator queue.
    ///
    /// # Safety
    /// See [`traits::QueuePair::send`](netdirect_spi::traits::QueuePair::send).
    pub(super) unsafe fn post_send(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        mut inval: Option<u32>,
    ) -> Result<()> {
        let allowed = OpFlags::SILENT_SUCCESS
            | OpFlags::READ_FENCE
            | OpFlags::SEND_AND_SOLICIT_EVENT
            | OpFlags::INLINE;
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(4));
        }
        let mut g = self.lock();
        let total = self.check_initiator_post(&g, sge, flags)?;
        let inline = flags.contains(OpFlags::INLINE);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(context, flags, Status::CANCELED, 0);
            return Ok(());
        }
        self.push_held_acks(&mut g);
        // Into the ring within the post when nothing queued waits to go in before it (requests
        // already in the ring and waiting for answers do not stop it) and no fence holds it.
        let fenced = flags.contains(OpFlags::READ_FENCE) && g.reads_out > 0;
        // Nor when answers are owed: they go first, and one may be a Read response half in
        // the ring, whose chunks nothing may split (`push_answers`).
        let clear = g.sq.len() == g.in_ring
            && g.answers.is_empty()
            && g.conn == Conn::Established
            && !fenced;
        if let (Some(token), true) = (inval, clear) {
            // The Send's turn is now: its INVAL record goes in at once if it fits.
            match self.try_push_inval(&mut g, token) {
                Some(true) => inval = None,
                Some(false) => {}
                None => {
                    drop(g);
                    self.complete_send(context, flags, Status::CANCELED, 0);
                    return Ok(());
                }
            }
        }
        let direct = clear && inval.is_none() && total <= INLINE_MAX as u64;
        // Into the cell within this call: INLINE memory, or memory inside the cached
        // registration with local read access (checked without taking a reference).
        if direct && (inline || self.cached_readable(&g, sge)) {
            // SAFETY: INLINE memory is readable during this call (the poster's contract);
            // otherwise every SGE lies in the cached live registration with local read access
            // (checked just above), and the poster promised not to write the memory until the
            // Send completes. It is copied into the ring within this call.
            let src = unsafe { InlineSges::new(sge) };
            if self.try_push_small(&mut g, &src, total as usize, flags) {
                self.pushed_send(g, context, flags, total);
                return Ok(());
            }
            if g.conn == Conn::Closed {
                // The ring broke the protocol and the connection ended (`try_push_small`):
                // everything queued was flushed, and so is this Send.
                drop(g);
                self.complete_send(context, flags, Status::CANCELED, 0);
                return Ok(());
            }
        }
        if inline {
            // Queued behind others (or no room): capture the bytes now so the buffer may be
            // reused at once.
            let mut data = Vec::with_capacity(total as usize);
            // SAFETY: INLINE memory is readable during this call.
            unsafe { mem::capture(sge, &mut data) };
            let mut wr = SendWr::new(context, flags, total, Op::Send);
            wr.inline = Some(data);
            wr.inval = inval;
            g.sq.push_bare(wr);
        } else {
            let Inner { sq, cache, .. } = &mut *g;
            let mut wr = SendWr::new(context, flags, total, Op::Send);
            wr.inval = inval;
            if let Err((mut wr, _)) =
                sq.push_checked(wr, sge, Access::LocalRead, cache, &self.shared.mrs)
            {
                // Completes ND_ACCESS_VIOLATION in its turn, then the connection ends.
                wr.error = Some(Status::ACCESS_VIOLATION);
                sq.push_bare(wr);
            }
        }
        self.progress_tx(&mut g);
        Ok(())
    }

    /// A Send just put in the ring by its post: complete at once when nothing is ahead of it,
    /// else queue it, already in the ring, to complete in its turn. The completion is queued
    /// before the lock goes: a Send another thread pushes next must not complete first.
    fn pushed_send(&self, mut g: BiasedGuard<'_, Inner>, context: u64, flags: OpFlags, total: u64) {
        if g.sq.is_empty() {
            self.complete_send(context, flags, Status::SUCCESS, total);
            return;
        }
        g.sq.push_bare(SendWr::new(context, flags, total, Op::Send));
        g.in_ring += 1;
    }

    /// Put a SendAndInvalidate's INVAL record in the ring, if there is room: `Some(true)`
    /// pushed, `Some(false)` no room, `None` the ring broke its protocol and the connection
    /// ended (everything queued was flushed).
    fn try_push_inval(&self, g: &mut Inner, token: u32) -> Option<bool> {
        let link = self.link.get()?;
        match push_inval(&mut g.prod, &link.tx(), token) {
            Ok(pushed) => Some(pushed),
            Err(Violation) => {
                self.close(g, Status::CONNECTION_REFUSED);
                None
            }
        }
    }

    /// Put a message of at most `INLINE_MAX` bytes in one cell, if there is room.
    fn try_push_small<G: crate::ring::Gather>(
        &self,
        g: &mut Inner,
        src: &G,
        len: usize,
        flags: OpFlags,
    ) -> bool {
        let Some(link) = self.link.get() else {
            return false;
        };
        let tx = link.tx();
        match g.prod.has_room(&tx, 0) {
            Ok(true) => {}
            Ok(false) => return false,
            Err(Violation) => {
                self.close(g, Status::CONNECTION_REFUSED);
                return false;
            }
        }
        let f = if flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
            flag::SOLICITED
        } else {
            0
        };
        g.prod.push_inline(&tx, kind::MSG, f, src, 0, len);
        g.prod.mark();
        g.tx_msgs = g.tx_msgs.wrapping_add(1);
        link.wake_peer();
        true
    }

    /// `Write` and `Read`: validation and local SGE checks, then the initiator queue.
    ///
    /// # Safety
    /// See [`traits::QueuePair::write`](netdirect_spi::traits::QueuePair::write) and `read`.
    pub(super) unsafe fn post_rdma(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        op: Op,
    ) -> Result<()> {
        let is_read = matches!(op, Op::Read(_));
        let allowed = if is_read {
            OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE
        } else {
            OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE | OpFlags::INLINE
        };
        // The flags parameter is the 6th of Read and Write.
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(6));
        }
        let mut g = self.lock();
        let total = self.check_initiator_post(&g, sge, flags)?;
        let inline = flags.contains(OpFlags::INLINE);
        let mut wr = SendWr::new(context, flags, total, op);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        if let Op::Write(d) = op {
            // Placed into the peer's memory within the post, under a lease (`mapped`), it
            // completes now, or in its turn behind requests awaiting their answers.
            // SAFETY: the poster's contract for INLINE memory; `try_place` checks the rest.
            if unsafe { self.try_place(&mut g, d, sge, total, inline) } {
                self.push_held_acks(&mut g);
                if g.sq.is_empty() {
                    self.complete_wr(&wr, Status::SUCCESS);
                } else {
                    g.sq.push_bare(wr);
                    g.in_ring += 1;
                }
                return Ok(());
            }
        }
        if is_read && g.ord == 0 {
            // The connection grants no outbound Reads (Connect/Accept outboundReadLimit 0, or
            // a peer with IRD 0): the Read can never be issued. It completes
            // ND_INVALID_DEVICE_REQUEST in its turn, then the connection ends (as tcp).
            wr.error = Some(Status::INVALID_DEVICE_REQUEST);
            g.sq.push_bare(wr);
            self.progress_tx(&mut g);
            return Ok(());
        }
        if inline {
            if let Op::Write(d) = op {
                let fenced = flags.contains(OpFlags::READ_FENCE) && g.reads_out > 0;
                // As for a direct Send (`post_send`): nothing queued, and no answer owed but
                // perhaps one ACK, which rides on the Write (`flag::ACK`).
                let ack = match g.answers.len() {
                    0 => Some(false),
                    1 if matches!(g.answers.front(), Some(Answer::Ack)) => Some(true),
                    _ => None,
                };
                if let (Some(ack), true) = (
                    ack,
                    g.sq.len() == g.in_ring && g.conn == Conn::Established && !fenced,
                ) {
                    // SAFETY: INLINE memory is readable during this call (the poster's
                    // contract); it is copied into the ring within this call.
                    let src = unsafe { InlineSges::new(sge) };
                    let mut asked = false;
                    let n = total as usize;
                    match self.try_push_write_inline(&mut g, d, &src, n, ack, &mut asked) {
                        Some(true) => {
                            wr.lease_ask = asked;
                            if ack {
                                g.answers.pop_front();
                                self.release_acks(&mut g);
                            }
                            wr.awaiting = true;
                            g.sq.push_bare(wr);
                            g.in_ring += 1;
                            return Ok(());
                        }
                        Some(false) => {}
                        None => {
                            // The connection ended under us: everything was flushed.
                            drop(g);
                            self.complete_wr(&wr, Status::CANCELED);
                            return Ok(());
                        }
                    }
                }
            }
            // It waits: capture the bytes now so the buffer may be reused at once.
            let mut data = Vec::with_capacity(total as usize);
            // SAFETY: INLINE memory is readable during this call.
            unsafe { mem::capture(sge, &mut data) };
            wr.inline = Some(data);
        } else {
            // A Read's sink must be locally writable; a Write's source readable.
            let access = if is_read {
                Access::LocalWrite
            } else {
                Access::LocalRead
            };
            let Inner { sq, cache, .. } = &mut *g;
            if let Err((mut wr, _)) = sq.push_checked(wr, sge, access, cache, &self.shared.mrs) {
                // Completes ND_ACCESS_VIOLATION in its turn, then the connection ends.
                wr.error = Some(Status::ACCESS_VIOLATION);
                sq.push_bare(wr);
            }
            self.progress_tx(&mut g);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }

    /// Put an `INLINE` Write (at most the inline size, which is below a chunk) in the ring
    /// within the post, if there is room for all of it: one cell with its descriptor when at
    /// most [`WRITE_INLINE_MAX`] bytes, else the descriptor and one CHUNK record. Nothing is
    /// captured, so nothing is allocated. With `ack`, the WRITE record carries the ACK owed
    /// to the peer ([`flag::ACK`]; the caller takes it off `answers`). It may ask for a lease
    /// (`asked`, `flag::LEASE`). `Some(true)` pushed, `Some(false)` no room,
    /// `None` the connection ended.
    fn try_push_write_inline<G: crate::ring::Gather>(
        &self,
        g: &mut Inner,
        d: Desc,
        src: &G,
        len: usize,
        ack: bool,
        asked: &mut bool,
    ) -> Option<bool> {
        let link = self.link.get()?;
        let tx = link.tx();
        let small = len <= WRITE_INLINE_MAX;
        let room = if small {
            g.prod.has_room(&tx, 0)
        } else if len <= self.shared.config.chunk {
            g.prod.has_room_for(&tx, 2, len as u64)
        } else {
            Ok(false)
        };
        match room {
            Ok(true) => {}
            Ok(false) => return Some(false),
            Err(Violation) => {
                self.close(g, Status::CONNECTION_REFUSED);
                return None;
            }
        }
        let head = d.encode();
        let mut f = if ack { flag::ACK } else { 0 };
        let Inner {
            leases,
            lease_denied,
            map_denied,
            lease_asking,
            ..
        } = &mut *g;
        *asked = super::place::wants_lease(
            link,
            self.shared.config.map_min,
            d.token,
            len as u64,
            leases,
            [&lease_denied[..], &map_denied[..]],
            lease_asking,
        );
        if *asked {
            f |= flag::LEASE;
        }
        if small {
            let src = Prefixed {
                head: &head,
                rest: src,
            };
            g.prod
                .push_header(&tx, kind::WRITE, f, len as u32, &src, 0, Desc::LEN + len);
        } else {
            let h = &Owned(&head);
            g.prod
                .push_header(&tx, kind::WRITE, f, len as u32, h, 0, Desc::LEN);
            g.prod.push_chunk(&tx, flag::LAST, len as u32, src, 0, len);
        }
        g.prod.mark();
        link.wake_peer();
        Some(true)
    }
}

/// Put an INVAL record naming the peer's window `token` in the ring if there is room
/// (`Ok(false)`: none yet).
pub(super) fn push_inval<M: crate::ring::RingMem>(
    prod: &mut crate::ring::Producer,
    tx: &M,
    token: u32,
) -> std::result::Result<bool, Violation> {
    if !prod.has_room(tx, 0)? {
        return Ok(false);
    }
    prod.push_header(tx, kind::INVAL, 0, token, &Owned(&[]), 0, 0);
    Ok(true)
}

impl Posts for ShmQp {
    fn flush(&self) -> Result<()> {
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            self.flush_all(&mut g);
        } else {
            // As Disconnect (and tcp's Flush, which sends what it owes before its FIN): the
            // peer's Writes we placed complete successfully, so their held ACKs go first.
            self.push_held_acks(&mut g);
            self.close(&mut g, Status::CANCELED);
        }
        Ok(())
    }

    #[inline]
    unsafe fn post(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        request: Request,
    ) -> Result<()> {
        match request {
            // SAFETY: forwarded contract.
            Request::Send => unsafe { self.post_send(context, sge, flags, None) },
            Request::Read {
                remote_address,
                remote_token,
            } => {
                let d = remote_desc(remote_address, remote_token);
                // SAFETY: forwarded contract.
                unsafe { self.post_rdma(context, sge, flags, Op::Read(d)) }
            }
            Request::Write {
                remote_address,
                remote_token,
            } => {
                let d = remote_desc(remote_address, remote_token);
                // SAFETY: forwarded contract.
                unsafe { self.post_rdma(context, sge, flags, Op::Write(d)) }
            }
        }
    }

    unsafe fn post_send_and_invalidate(
        &self,
        context: u64,
        sge: &[Sge],
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        // SAFETY: forwarded contract. The token travels in host order, as a Desc's does.
        unsafe { self.post_send(context, sge, flags, Some(u32::from_be(remote_token))) }
    }

    /// `Receive`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::receive`](netdirect_spi::traits::QueuePair::receive).
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if self.srq.is_some() {
            // Its Receives are posted to the shared receive queue (as tcp).
            return fail(Status::INVALID_DEVICE_REQUEST);
        }
        let mut g = self.lock();
        let total = g.rq.check_receive(sge, self.max_transfer)?;
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        // Checked straight into the queue's slots (no copy through scratch).
        let Inner { rq, cache, .. } = &mut *g;
        let wr = RecvWr { context, total };
        let queued = rq.push_checked(wr, sge, Access::LocalWrite, cache, &self.shared.mrs);
        if queued.is_err() {
            self.refuse_receive(&mut g, context);
            return Ok(());
        }
        // A message may be waiting for this buffer.
        if let Some(link) = &g.link {
            if link.rx_stalled.load(Ordering::Acquire) {
                link.rx_stalled.store(false, Ordering::Release);
                // The whole drive: what the held records owe (an ACK, a Read response, a
                // GRANT) goes out now too; no poll would find it (`Link::has_work` sees the
                // ring, not owed answers).
                self.progress_locked(&mut g);
            }
        }
        Ok(())
    }

    /// `Bind`: the window is bound (and its token valid) when this returns; the completion
    /// follows in order on the initiator CQ. The checks and statuses are tcp's (R-MW-1,
    /// IND2QueuePair::Bind).
    fn post_bind(
        &self,
        context: u64,
        region: &Arc<dyn MemoryRegion>,
        window: &Arc<dyn MemoryWindow>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
    ) -> Result<()> {
        // The order of the checks is the kit's (`kit::mw` module docs).
        let (region, window) = mw::bind_objects(&self.shared, region, window, flags)?;
        let mut g = self.lock();
        qp::check_window_post(g.conn == Conn::Idle, g.sq.is_full())?;
        let ended = g.conn == Conn::Closed;
        let wr = SendWr::new(context, flags, 0, Op::Bind);
        if !window.bind_through(region, buffer, len, flags, self.id, ended, &mut g.windows)? {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }

    /// `Invalidate`: the window stops working when this returns; the completion follows in
    /// order (`ND_INVALID_DEVICE_REQUEST`, ending the connection, for a window not bound
    /// through this queue pair, docs/ND-RULES.md §2.9).
    fn post_invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        let window = mw::invalidate_object(&self.shared, window, flags)?;
        let mut g = self.lock();
        qp::check_window_post(g.conn == Conn::Idle, g.sq.is_full())?;
        let mut wr = SendWr::new(context, flags, 0, Op::Invalidate);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_wr(&wr, Status::CANCELED);
            return Ok(());
        }
        wr.error = window.invalidate_through(self.id, &mut g.windows);
        g.sq.push_bare(wr);
        self.progress_tx(&mut g);
        Ok(())
    }
}
