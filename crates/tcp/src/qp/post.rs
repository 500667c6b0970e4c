//! The posts: `Send`, `Receive`, `Read`, `Write`, `Bind` and `Invalidate` (this queue pair's
//! side of the kit's [`Posts`], which makes it an `IND2QueuePair`), their checks and statuses,
//! and the direct path that writes a small Send to the socket within its post.

use std::sync::Arc;

use netdirect_spi::kit::mr::{Access, AccessError, LocalCache};
use netdirect_spi::kit::mw;
use netdirect_spi::kit::qp::{self, Posts, Request};
use netdirect_spi::kit::wrq::{total_len, RecvWr, Seg};
// The posts' safety contracts cite the SPI's.
#[cfg(doc)]
use netdirect_spi::traits;
use netdirect_spi::traits::{MemoryRegion, MemoryWindow};
use netdirect_spi::{fail, Error, OpFlags, Result, Sge, Status};

use super::{local_catastrophic, tx, Conn, Ending, Inner, SendWr, TcpQp, TxKind};
use super::{DIRECT_SGE, MAX_INLINE_SGE};

impl TcpQp {
    /// Resolve and check one local SGE; the registration is kept with the request.
    fn check_local(
        &self,
        cache: &mut LocalCache,
        s: &Sge,
        access: Access,
    ) -> std::result::Result<Seg, AccessError> {
        let addr = s.buffer as usize as u64;
        let len = u64::from(s.buffer_length);
        let reg = cache
            .resolve(&self.shared.mrs, s.memory_region_token)
            .ok_or(AccessError::InvalidToken)?;
        reg.check(addr, len, access)?;
        Ok(Seg::new(addr, s.buffer_length, Some(reg)))
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
            self.end(g, local_catastrophic(), Status::CONNECTION_REFUSED);
        }
        self.complete_recv(context, Status::ACCESS_VIOLATION, 0, false);
    }

    /// `Send`, `Write` and `Read`: validation, local SGE checks, then the initiator queue.
    ///
    /// # Safety
    /// See [`traits::QueuePair::send`], `write` and `read`.
    unsafe fn post_request(
        &self,
        context: u64,
        sge: &[Sge],
        flags: OpFlags,
        kind: TxKind,
        inval: Option<u32>,
    ) -> Result<()> {
        // The flags parameter is the 4th of Send and the 6th of Read and Write.
        let (allowed, param) = match kind {
            TxKind::Send => (
                OpFlags::SILENT_SUCCESS
                    | OpFlags::READ_FENCE
                    | OpFlags::SEND_AND_SOLICIT_EVENT
                    | OpFlags::INLINE,
                4,
            ),
            TxKind::Write { .. } => (
                OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE | OpFlags::INLINE,
                6,
            ),
            _ => (OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE, 6),
        };
        if !allowed.contains(flags) {
            return Err(Error::invalid_parameter(param));
        }
        let is_read = matches!(kind, TxKind::Read { .. });
        let mut g = self.lock();
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
        if total > self.max_transfer
            || (inline && total > u64::from(self.inline_size.max(tx::INLINE_COPY as u32)))
        {
            return fail(Status::BUFFER_OVERFLOW);
        }
        let mut wr = SendWr::new(context, kind, flags, total);
        wr.inval = inval;
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        if is_read && g.rdma.ord == 0 {
            // The connection grants no outbound Reads (Connect/Accept outboundReadLimit 0, or
            // a peer with IRD 0): the Read can never be issued. Not a status Read returns
            // (IND2QueuePair::Read): it completes ND_INVALID_DEVICE_REQUEST in its turn, a
            // malformed request (docs/ND-RULES.md §2.5, the ND2_RESULT status table).
            wr.error = Some(Status::INVALID_DEVICE_REQUEST);
            g.sq.push_bare(wr);
            self.encode_pending(&mut g);
            self.flush_tx(&mut g);
            return Ok(());
        }
        let batch = self.batches(&g, kind, total);
        // The common small Send, with nothing queued before it: framed on the stack and
        // written at once, past the stash and the staging queue (`send_direct`).
        let wr = if matches!(kind, TxKind::Send)
            && !batch
            && inval.is_none()
            && g.conn == Conn::Established
            && g.sq.is_empty()
            && !g.tx.has_output()
            && total <= tx::DIRECT_MAX as u64
            && sge.len() <= DIRECT_SGE
        {
            // SAFETY: forwarded contract of this function.
            match unsafe { self.send_direct(&mut g, wr, sge, inline) } {
                Ok(()) => return Ok(()),
                Err(wr) => wr,
            }
        } else {
            wr
        };
        if inline {
            // Inline data is captured now: the application may reuse its buffer at once.
            g.tx.stash_inline(sge);
            g.sq.push_bare(wr);
        } else {
            // A Read's sink must be locally writable; a Send's or Write's source readable.
            let access = if is_read {
                Access::LocalWrite
            } else {
                Access::LocalRead
            };
            let Inner { sq, cache, .. } = &mut *g;
            let mut wr = Some(wr);
            let checked = sq.push_with(
                sge.len(),
                |i| self.check_local(cache, &sge[i], access),
                |segs| {
                    let mut wr = wr.take().expect("built once");
                    if is_read {
                        let nonempty = segs.iter().filter(|s| s.len > 0).count();
                        wr.parts = nonempty.max(1) as u16;
                    }
                    wr
                },
            );
            if checked.is_err() {
                // Queued without segments, to fail in its turn (R-QP-6).
                let mut wr = wr.take().expect("not queued");
                wr.error = Some(Status::ACCESS_VIOLATION);
                g.sq.push_bare(wr);
            }
        }
        self.encode_pending(&mut g);
        if batch {
            // Left for the next drive, with the requests posted meanwhile (`batches`); a
            // thread asleep on the adapter wakes to write it.
            if let Some(s) = &g.sock {
                s.set_wants_write(true);
            }
            return Ok(());
        }
        self.flush_tx(&mut g);
        Ok(())
    }

    /// Whether a small Send or Write may stay queued until the next drive (a poll that finds
    /// its queue empty, a wait, the progress engine) or until [`BATCH`] requests wait, to
    /// leave with the others in one `sendmsg`: only while the application is posting ahead
    /// of its polls, which the send CQ shows by holding completions it has not taken yet.
    /// A lone request (its CQ empty: the ping-pong pattern) is written within its post. Not
    /// with the descriptor exported, where a writable socket raises no new edge for the
    /// application's loop.
    fn batches(&self, g: &Inner, kind: TxKind, total: u64) -> bool {
        matches!(kind, TxKind::Send | TxKind::Write { .. })
            && total <= tx::DIRECT_MAX as u64
            && g.conn == Conn::Established
            && g.encoded - g.sent < BATCH
            && self.icq.core.queued_hint() > 0
            && !self.shared.engine.fd_exported()
    }

    /// A Send of at most [`tx::DIRECT_MAX`] bytes with nothing queued before it (no request,
    /// no output): framed on the stack and written with one `send(2)` within the post, and
    /// complete once TCP took all of it, as any Send (`complete_ready`). What the socket does
    /// not take is queued as ordinary output, from where `flush_tx` writes and completes it
    /// (or reports the broken socket). This skips the inline stash, the staging buffer and the
    /// chunk queue: `bench/callgrind`'s tcp post+poll of 8 bytes went from 3,780 to 2,984
    /// instructions (docs/ARCHITECTURE.md, "The path of one Send"). Gives the request back when
    /// it does not qualify: memory the registration check refuses takes the ordinary path,
    /// which fails it in its turn.
    ///
    /// # Safety
    /// As [`traits::QueuePair::send`]: INLINE memory is readable during the call; other
    /// memory is readable and unchanged until the Send completes (it is copied here).
    unsafe fn send_direct(
        &self,
        g: &mut Inner,
        mut wr: SendWr,
        sge: &[Sge],
        inline: bool,
    ) -> std::result::Result<(), SendWr> {
        let Some(sock) = g.sock.as_ref().map(|s| s.get()) else {
            return Err(wr);
        };
        let mut pieces: [&[u8]; DIRECT_SGE] = [&[]; DIRECT_SGE];
        for (piece, s) in pieces.iter_mut().zip(sge) {
            if !inline
                && self
                    .check_local(&mut g.cache, s, Access::LocalRead)
                    .is_err()
            {
                return Err(wr);
            }
            // SAFETY: INLINE memory is readable during this call (the poster's contract);
            // otherwise the range lies in a live registration with local read access (checked
            // just above) and the poster leaves it alone until completion. It is copied into
            // the frame before this call returns.
            *piece =
                unsafe { crate::mem::slice(s.buffer as usize as u64, s.buffer_length as usize) };
        }
        let Some((n, msn)) =
            g.tx.encode_send_direct(&pieces[..sge.len()], wr.flags, g.crc)
        else {
            return Err(wr);
        };
        wr.msn = msn;
        let flags = rustix::net::SendFlags::NOSIGNAL | rustix::net::SendFlags::DONTWAIT;
        // Full socket, a signal, or a broken connection: the queued frame's `flush_tx` below
        // tries again and reports what it finds.
        let written = rustix::net::send(sock, g.tx.direct_frame(n), flags).unwrap_or(0);
        g.lazy = false;
        if written == n {
            // The queue was empty: this Send is the oldest, and complete (under the lock, so
            // completions keep posting order).
            self.complete_send(&wr, Status::SUCCESS);
            return Ok(());
        }
        g.tx.queue_direct(n, written);
        g.sq.push_bare(wr);
        g.encoded += 1;
        self.flush_tx(g);
        Ok(())
    }
}

/// Most requests a run of posts leaves queued for one `sendmsg` (`TcpQp::batches`).
const BATCH: usize = 32;

impl Posts for TcpQp {
    fn flush(&self) -> Result<()> {
        let mut g = self.lock();
        if g.conn == Conn::Idle {
            self.flush_all(&mut g);
        } else {
            self.close(&mut g, Status::CANCELED, Ending::Graceful);
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
        // The remote token is the STag in network byte order (GetRemoteToken), so its bytes
        // are the wire bytes: its host value is `from_be` of it.
        let kind = match request {
            Request::Send => TxKind::Send,
            Request::Read {
                remote_address,
                remote_token,
            } => TxKind::Read {
                stag: u32::from_be(remote_token),
                to: remote_address,
            },
            Request::Write {
                remote_address,
                remote_token,
            } => TxKind::Write {
                stag: u32::from_be(remote_token),
                to: remote_address,
            },
        };
        // SAFETY: forwarded contract.
        unsafe { self.post_request(context, sge, flags, kind, None) }
    }

    /// ND v1's `SendAndInvalidate`: a Send with Invalidate (RFC 5040 §5.3) naming the
    /// peer's window by its token (network byte order, so its host value is `from_be`).
    unsafe fn post_send_and_invalidate(
        &self,
        context: u64,
        sge: &[Sge],
        remote_token: u32,
        flags: OpFlags,
    ) -> Result<()> {
        let stag = Some(u32::from_be(remote_token));
        // SAFETY: forwarded contract.
        unsafe { self.post_request(context, sge, flags, TxKind::Send, stag) }
    }

    /// `Receive`.
    ///
    /// # Safety
    /// See [`traits::QueuePair::receive`].
    unsafe fn post_receive(&self, context: u64, sge: &[Sge]) -> Result<()> {
        if self.srq.is_some() {
            // Its Receives are posted to the shared receive queue; this queue pair has none
            // of its own to hold them.
            return fail(Status::INVALID_DEVICE_REQUEST);
        }
        let mut g = self.lock();
        let total = g.rq.check_receive(sge, self.max_transfer)?;
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_recv(context, Status::CANCELED, 0, false);
            return Ok(());
        }
        let Inner { rq, cache, .. } = &mut *g;
        let wr = RecvWr { context, total };
        let checked = rq.push_checked(wr, sge, Access::LocalWrite, cache, &self.shared.mrs);
        if checked.is_err() {
            self.refuse_receive(&mut g, context);
            return Ok(());
        }
        // A Send may be waiting for this buffer.
        if g.rx.is_stalled() {
            self.progress_locked(&mut g);
        }
        Ok(())
    }

    /// `Bind`: the window is bound (and its token valid) when this returns; the completion
    /// follows in order on the initiator CQ.
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
        let wr = SendWr::new(context, TxKind::Bind, flags, 0);
        if !window.bind_through(region, buffer, len, flags, self.id, ended, &mut g.windows)? {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        g.sq.push_bare(wr);
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }

    /// `Invalidate`: the window stops working when this returns; the completion follows in
    /// order (`ND_INVALID_DEVICE_REQUEST` for a window not bound through this queue pair).
    fn post_invalidate(
        &self,
        context: u64,
        window: &Arc<dyn MemoryWindow>,
        flags: OpFlags,
    ) -> Result<()> {
        let window = mw::invalidate_object(&self.shared, window, flags)?;
        let mut g = self.lock();
        qp::check_window_post(g.conn == Conn::Idle, g.sq.is_full())?;
        let mut wr = SendWr::new(context, TxKind::Invalidate, flags, 0);
        if g.conn == Conn::Closed {
            drop(g);
            self.complete_send(&wr, Status::CANCELED);
            return Ok(());
        }
        wr.error = window.invalidate_through(self.id, &mut g.windows);
        g.sq.push_bare(wr);
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        Ok(())
    }
}
