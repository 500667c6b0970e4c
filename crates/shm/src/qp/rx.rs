//! The receiving side of the ring: messages into posted Receives (the busy poller's lane for
//! whole inline messages, the general pass for the rest), pulled messages, shared receive
//! queues, and what happens when no Receive is there.

use std::sync::atomic::Ordering;

use netdirect_spi::kit::mr::Kind;
use netdirect_spi::kit::mw;

use netdirect_spi::{NdResult, Status};

use super::{
    Answer, Conn, Inner, MapOut, Op, Pulled, RxMsg, Served, ShmQp, Sink, MAX_ANSWERS_OWED,
};
use crate::cq::ShmCq;
use crate::link::Link;
use crate::mem::{self, OwnedMut, Seg, Segs};
use crate::ring::{flag, kind, Violation, LEASE_LEN, RTS_MAX_SGES};

/// The common record, alone: `r` (just peeked, a MSG record: callers test the kind first, so
/// other records skip it) is a whole message in its cell, and the front Receive, posted on
/// this queue pair, can hold it. If so it is copied there, the consumer moves past it (not yet
/// released: [`release_rx`]), the Receive leaves the queue and its context is returned for its
/// completion; else nothing happens (no Receive, an SRQ, too long, a message in progress: the
/// general path of `progress_rx` deals with it).
// Always inlined into the poll lane (`take_messages`), with `WrQueue::pop` and `release_rx`:
// as calls they cost 62 instructions of a message's round (callgrind, post_poll shm/8 1,354 ->
// 1,292) and 1.6 % of the shm ping-pong's interquartile mean (faster in 10 of 12 reps).
#[inline(always)]
fn take_inline_msg(
    g: &mut Inner,
    link: &Link,
    rx: &crate::segment::Chan<'_>,
    r: crate::ring::Record,
) -> Option<u64> {
    debug_assert_eq!(r.kind, kind::MSG);
    if g.rx_msg.is_some() || g.conn != Conn::Established {
        return None;
    }
    let Inner { rq, cons, .. } = g;
    let (wr, segs) = rq.front()?;
    if u64::from(r.len) > wr.total {
        return None;
    }
    cons.read_inline(rx, r.len as usize, &mut Segs(segs), 0);
    cons.advance();
    let wr = rq.pop().expect("present");
    if link.rnr_deadline.load(Ordering::Relaxed) != 0 {
        link.rnr_deadline.store(0, Ordering::Relaxed);
    }
    g.rx_msgs = g.rx_msgs.wrapping_add(1);
    Some(wr.context)
}

/// Give the ring space of the records consumed so far back to the peer, mirror the position for
/// lock-free pollers, and wake the peer if it sleeps waiting for that space (only such a peer,
/// not one asleep waiting for our reply: `ring::wake`).
// Inlined into the poll lane: see `take_inline_msg`.
#[inline(always)]
fn release_rx(g: &Inner, link: &Link, rx: &crate::segment::Chan<'_>) {
    g.cons.release(rx);
    link.rx_pos.store(g.cons.pos(), Ordering::Relaxed);
    link.wake_peer_for_space();
}

impl ShmQp {
    /// Consume published records: messages into posted Receives, the peer's one-sided
    /// requests into (or out of) our memory, answers to ours.
    pub(super) fn progress_rx(&self, g: &mut Inner) {
        if g.conn == Conn::Closed {
            if g.last_word.is_some() {
                self.linger_now(g);
            }
            return;
        }
        let Some(link) = self.link.get() else { return };
        // Read before draining: every record the peer published before it closed is delivered.
        let peer_closed = link.peer_closed() || link.peer_eof.load(Ordering::Acquire);
        let rx = link.rx();
        let mut consumed = false;
        loop {
            let r = match g.cons.peek(&rx) {
                Ok(Some(r)) => r,
                Ok(None) => break,
                Err(Violation) => return self.violation(g),
            };
            if r.kind == kind::MSG {
                // The common case first (anything else about a MSG is the general path's).
                if let Some(context) = take_inline_msg(g, link, &rx, r) {
                    consumed = true;
                    let solicited = r.flags & flag::SOLICITED != 0;
                    self.complete_recv(context, Status::SUCCESS, r.len, solicited);
                    continue;
                }
            }
            match r.kind {
                kind::RTR => {
                    g.cons.advance();
                    consumed = true;
                    if g.conn == Conn::AwaitRtr {
                        self.rtr_received(g);
                    }
                    continue;
                }
                _ if g.conn != Conn::Established => return self.violation(g),
                kind::GRANT => {
                    // The answer to our MAPW or MAPR (`mapped`), between records of nothing else.
                    if g.map_out != MapOut::Asked || g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    let mut cell = [0u8; 16];
                    if r.len == 16 {
                        g.cons.read_inline(&rx, 16, &mut OwnedMut(&mut cell), 0);
                    }
                    g.cons.advance();
                    consumed = true;
                    if r.flags & flag::NO != 0 {
                        g.mapping_refused();
                    } else if !self.mapped_copy(g, link, &cell, r.total) {
                        return self.violation(g);
                    }
                    // The memory's MAP message, if any, was taken by `mapped_copy` (a lease
                    // asked for still takes its own).
                    if !g.lease_asking {
                        link.maps.asking(false);
                    }
                    continue;
                }
                kind::DONE => {
                    // The peer copied the Write or Read we granted (or could not): let go.
                    if g.map_hold.take().is_none() {
                        return self.violation(g);
                    }
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                kind::ACK => {
                    // The peer pulled our RTS message or placed our Write: it is complete.
                    if !matches!(self.awaited(g), Some(Op::Send | Op::Write(_)))
                        || (r.len != 0 && r.len != LEASE_LEN)
                    {
                        return self.violation(g);
                    }
                    // It may answer the Write's request for a lease (`place`).
                    let mut lease = [0u8; LEASE_LEN as usize];
                    let granted = r.len == LEASE_LEN;
                    if granted {
                        g.cons
                            .read_inline(&rx, lease.len(), &mut OwnedMut(&mut lease), 0);
                    }
                    if !self.lease_answered(g, link, granted.then_some(&lease)) {
                        return self.violation(g);
                    }
                    self.answered(g);
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                kind::RNR | kind::OVERRUN => {
                    // The peer held our oldest unreceived message past its bound (R-QP-7), or
                    // it did not fit the Receive it reached (D5): a Send still in progress
                    // fails ND_IO_TIMEOUT or STATUS_DATA_ERROR (as tcp's Send a Terminate
                    // names); the rest is flushed.
                    g.cons.advance();
                    g.cons.release(&rx);
                    // The record names the message held (`total`: its number among ours). Only
                    // if that is still ours to complete (an RTS Send at the front, or the Send
                    // being pushed when nothing waits before it) does it fail; a message whose
                    // bytes were all in the ring completed already, and what follows it is
                    // flushed.
                    let held =
                        g.sq.front()
                            .is_some_and(|(wr, _)| wr.op == Op::Send && wr.msn == Some(r.total));
                    let rts = matches!(self.awaited(g), Some(Op::Send));
                    let pushing = g.in_ring == 0 && g.tx_sent > 0;
                    if held && (rts || pushing) {
                        let wr = g.sq.pop().expect("present");
                        g.in_ring = g.in_ring.saturating_sub(1);
                        let status = if r.kind == kind::RNR {
                            Status::IO_TIMEOUT
                        } else {
                            Status::DATA_ERROR
                        };
                        self.complete_wr(&wr, status);
                    }
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
                kind::TERM => {
                    // The peer refused our oldest one-sided request (docs/ND-RULES.md D6): it
                    // completes ND_ACCESS_VIOLATION, everything else is flushed.
                    g.cons.advance();
                    g.cons.release(&rx);
                    if matches!(self.awaited(g), Some(Op::Write(_) | Op::Read(_))) {
                        let wr = g.sq.pop().expect("present");
                        g.in_ring -= 1;
                        self.complete_wr(&wr, Status::ACCESS_VIOLATION);
                    } else if g.in_ring == 0 && (g.map_out == MapOut::Asked || g.tx_hdr) {
                        // Our mapped Write's MAPW (or Read's MAPR) was refused, or the Write
                        // whose chunks we are still pushing: it is the oldest.
                        let wr = g.sq.pop().expect("present");
                        self.complete_wr(&wr, Status::ACCESS_VIOLATION);
                    }
                    self.close(g, Status::CONNECTION_REFUSED);
                    return;
                }
                kind::RTS => {
                    if g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    match self.pull(g, link, r) {
                        Pulled::Done => {
                            consumed = true;
                            continue;
                        }
                        Pulled::Stalled => {
                            if self.stall(link) {
                                return self.give_up(g, link);
                            }
                            break;
                        }
                        Pulled::Closed => return,
                    }
                }
                kind::WRITE | kind::WPULL | kind::READ | kind::MAPW | kind::MAPR => {
                    // Each request is owed an answer. A peer has at most its initiator queue
                    // of them awaiting ours (its Reads within that): one that asks for more
                    // does not take our answers, and would grow this queue without bound.
                    if g.rx_msg.is_some() || g.answers.len() >= MAX_ANSWERS_OWED {
                        return self.violation(g);
                    }
                    if r.flags & flag::ACK != 0 {
                        // The ACK riding on this Write answers our oldest waiting request,
                        // before the Write itself is looked at (it may still be refused).
                        if !matches!(self.awaited(g), Some(Op::Send | Op::Write(_))) {
                            return self.violation(g);
                        }
                        // A plain ACK: a lease asked for is refused.
                        self.lease_answered(g, link, None);
                        self.answered(g);
                    }
                    match self.serve(g, link, r) {
                        Served::Done => {
                            consumed = true;
                            continue;
                        }
                        Served::Refused => return self.refuse(g, link),
                        Served::Broken => return self.violation(g),
                    }
                }
                kind::RRESP => {
                    // The response to our front Read.
                    if g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    let size_ok =
                        g.sq.front()
                            .is_some_and(|(wr, _)| wr.total == u64::from(r.total));
                    if !matches!(self.awaited(g), Some(Op::Read(_))) || !size_ok {
                        return self.violation(g);
                    }
                    if r.len == r.total {
                        let Inner { sq, cons, .. } = &mut *g;
                        let (_, segs) = sq.front().expect("checked above");
                        cons.read_inline(&rx, r.len as usize, &mut Segs(segs), 0);
                        self.answered(g);
                    } else if r.len == 0 {
                        g.rx_msg = Some(RxMsg {
                            pos: 0,
                            total: u64::from(r.total),
                            solicited: false,
                            sink: Sink::Read,
                        });
                    } else {
                        return self.violation(g);
                    }
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                kind::INVAL => {
                    // ND v1's SendAndInvalidate (RFC 5040 §5.3): only a window bound through
                    // this queue pair may be invalidated by the peer (§8.1.1 item 7, as tcp).
                    if g.rx_msg.is_some() {
                        return self.violation(g);
                    }
                    match self.shared.mrs.lookup(r.total) {
                        Some(w)
                            if w.kind == Kind::Window
                                && w.bound_qp.load(Ordering::Acquire) == self.id =>
                        {
                            mw::invalidated_by_peer(&self.shared.mrs, &mut g.windows, &w);
                        }
                        _ => return self.refuse(g, link),
                    }
                    g.cons.advance();
                    consumed = true;
                    continue;
                }
                _ => {}
            }
            let first = r.kind == kind::MSG || r.flags & flag::FIRST != 0;
            if first {
                if g.rx_msg.is_some() {
                    return self.violation(g);
                }
                if g.rq.front().is_none() && !self.take_from_srq(g) {
                    // No Receive posted (here or in the SRQ): leave the record in the ring
                    // until one is; the connection survives (docs/ND-RULES.md §2.4) unless
                    // the wait exceeds the bound (R-QP-7).
                    if self.stall(link) {
                        return self.give_up(g, link);
                    }
                    break;
                }
                if link.rnr_deadline.load(Ordering::Relaxed) != 0 {
                    link.rnr_deadline.store(0, Ordering::Relaxed);
                }
                let Some((wr, _)) = g.rq.front() else {
                    return self.violation(g);
                };
                let total = if r.kind == kind::MSG {
                    u64::from(r.len)
                } else {
                    u64::from(r.total)
                };
                if total > wr.total {
                    // The message does not fit the Receive: ND_DATA_OVERRUN, and the
                    // connection terminates (docs/ND-RULES.md D5, as tcp).
                    g.cons.advance();
                    g.cons.release(&rx);
                    return self.overrun(g, link);
                }
                g.rx_msg = Some(RxMsg {
                    pos: 0,
                    total,
                    solicited: r.flags & flag::SOLICITED != 0,
                    sink: Sink::Recv,
                });
                g.rx_msgs = g.rx_msgs.wrapping_add(1);
            }
            let Some(mut m) = g.rx_msg else {
                return self.violation(g);
            };
            let len = u64::from(r.len);
            let last = m.pos + len == m.total;
            if len > m.total - m.pos
                || (r.kind == kind::CHUNK && (r.flags & flag::LAST != 0) != last)
                || (r.kind == kind::MSG && m.sink != Sink::Recv)
            {
                return self.violation(g);
            }
            // The registration is re-checked for every chunk of a Write: a Deregister or
            // Invalidate meanwhile refuses the rest, as tcp checks each segment.
            if matches!(m.sink, Sink::Write(..)) && !g.rx_reg.as_ref().is_some_and(|r| r.is_valid())
            {
                return self.refuse(g, link);
            }
            {
                let Inner { rq, sq, cons, .. } = &mut *g;
                let target;
                let segs: &[Seg] = match m.sink {
                    Sink::Recv => rq.front().expect("checked when the message began").1,
                    Sink::Read => sq.front().expect("checked by the RRESP record").1,
                    Sink::Write(addr, _) => {
                        target = mem::target(addr, m.total);
                        std::slice::from_ref(&target)
                    }
                };
                let mut dst = Segs(segs);
                if r.kind == kind::MSG {
                    cons.read_inline(&rx, r.len as usize, &mut dst, m.pos);
                } else {
                    cons.read_chunk(&rx, r.len as usize, &mut dst, m.pos);
                }
            }
            m.pos += len;
            g.cons.advance();
            consumed = true;
            if last {
                g.rx_msg = None;
                match m.sink {
                    Sink::Recv => {
                        let wr = g.rq.pop().expect("present");
                        self.complete_recv(
                            wr.context,
                            Status::SUCCESS,
                            m.total as u32,
                            m.solicited,
                        );
                    }
                    Sink::Read => self.answered(g),
                    Sink::Write(_, ask) => {
                        let reg = g.rx_reg.take();
                        let lease = match ask {
                            true => self.grant_lease(g, link, reg.as_deref()),
                            false => None,
                        };
                        g.answers
                            .push_back(lease.map_or(Answer::Ack, Answer::Lease));
                    }
                }
            } else {
                g.rx_msg = Some(m);
            }
        }
        if consumed {
            release_rx(g, link, &rx);
        }
        if peer_closed {
            self.close(g, Status::CONNECTION_REFUSED);
        }
    }

    /// The busy poller's lane (issue 5): a `GetResults` on `cq` that finds our link with work
    /// drives us here, under one lock round trip, and gets back how many completions it found
    /// for `cq` in `out`. Whole inline messages for posted Receives go first and alone
    /// ([`ShmQp::take_messages`]); only when that leaves other work does the general drive
    /// (`progress_locked`) run, with what it completes for `cq` collected straight into the
    /// rest of `out` (`CqCore::drive_collecting`, the rule `kit::cq`'s direct module keeps).
    pub(crate) fn poll_lane(&self, link: &Link, cq: &ShmCq, out: &mut [NdResult]) -> usize {
        let mut g = self.lock();
        let (taken, drained) = self.take_messages(&mut g, link, cq, out);
        if taken > 0 && (taken == out.len() || drained) {
            return taken;
        }
        let rest = &mut out[taken..];
        taken
            + cq.core
                .drive_collecting(rest, || self.progress_locked(&mut g))
    }

    /// The records at the head of the ring that are whole inline messages for posted
    /// Receives, taken into them with their completions put in `out`; how many. Nothing is
    /// taken unless the connection is plainly established with no other work on the ring
    /// side (held ACKs, a blocked Send, a stalled message) and `cq` is our receive queue and
    /// may be bypassed (`CqCore::may_bypass`, under our lock, under which all our completions
    /// are made: our own earlier ones keep their order). Nor is it tried while requests of ours
    /// wait in the ring for the peer's answers: the next record is then likely an answer (or a
    /// Write riding one, in an RDMA Write ping-pong), which the general drive would only look
    /// at a second time.
    ///
    /// Also whether the lane stopped at an empty ring: as nothing else was pending when it
    /// started (the conditions above, which only change under our lock), the general drive has
    /// nothing to do now, and a peer's close is found by the next poll (`Link::wants_drive`).
    fn take_messages(
        &self,
        g: &mut Inner,
        link: &Link,
        cq: &ShmCq,
        out: &mut [NdResult],
    ) -> (usize, bool) {
        if !std::ptr::eq(&*self.rcq, cq)
            || g.conn != Conn::Established
            || g.in_ring != 0
            || g.acks_held
            || link.tx_blocked.load(Ordering::Relaxed)
            || link.rx_stalled.load(Ordering::Relaxed)
            || !cq.core.may_bypass()
        {
            return (0, false);
        }
        let rx = link.rx();
        let mut n = 0;
        let mut drained = false;
        while let Some(slot) = out.get_mut(n) {
            let r = match g.cons.peek(&rx) {
                Ok(Some(r)) => r,
                Ok(None) => {
                    drained = true;
                    break;
                }
                Err(Violation) => break,
            };
            if r.kind != kind::MSG {
                break;
            }
            let Some(context) = take_inline_msg(g, link, &rx, r) else {
                break;
            };
            *slot = NdResult::receive(self.context, context, Status::SUCCESS, r.len);
            n += 1;
        }
        if n > 0 {
            release_rx(g, link, &rx);
        }
        (n, drained)
    }

    /// An RTS record: pull the message from the peer's memory into the front Receive.
    pub(super) fn pull(&self, g: &mut Inner, link: &Link, r: crate::ring::Record) -> Pulled {
        let rx = link.rx();
        if g.rq.front().is_none() && !self.take_from_srq(g) {
            return Pulled::Stalled;
        }
        let Some((wr, _)) = g.rq.front() else {
            return Pulled::Stalled;
        };
        let total = u64::from(r.total);
        if total > wr.total {
            g.cons.advance();
            g.cons.release(&rx);
            self.overrun(g, link);
            return Pulled::Closed;
        }
        let mut list = [0u8; RTS_MAX_SGES * 16];
        let n = r.len as usize; // checked by `peek`: a multiple of 16, at most the array
        g.cons.read_chunk(&rx, n, &mut OwnedMut(&mut list[..n]), 0);
        let mut remote = [(0u64, 0u64); RTS_MAX_SGES];
        let mut sum = 0u64;
        for (k, e) in remote.iter_mut().enumerate().take(n / 16) {
            let b = &list[k * 16..k * 16 + 16];
            let addr = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
            let len = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
            *e = (addr, len);
            sum = sum.saturating_add(len);
        }
        let (_, segs) = g.rq.front().expect("checked above");
        if sum != total || mem::pull(link.peer_pid, segs, &remote[..n / 16], total).is_err() {
            // A scatter list that does not add up, or memory the peer does not own.
            g.cons.advance();
            self.violation(g);
            return Pulled::Closed;
        }
        let wr = g.rq.pop().expect("present");
        g.cons.advance();
        // A Receive came: the receiver-not-ready clock of the held message stops (R-QP-7).
        link.rnr_deadline.store(0, Ordering::Relaxed);
        g.rx_msgs = g.rx_msgs.wrapping_add(1);
        g.answers.push_back(Answer::Ack);
        self.complete_recv(
            wr.context,
            Status::SUCCESS,
            total as u32,
            r.flags & flag::SOLICITED != 0,
        );
        Pulled::Done
    }

    /// Take the SRQ's oldest Receive into `rq` for the message arriving now. `false` when this
    /// queue pair has no SRQ, or the SRQ is empty (the queue pair is then on its stalled list
    /// and the next post there drives it: [`ShmQp::srq_posted`]).
    fn take_from_srq(&self, g: &mut Inner) -> bool {
        let Some(srq) = &self.srq else {
            return false;
        };
        let Inner {
            srq_scratch,
            srq_listed,
            rq,
            ..
        } = g;
        srq.take_into(rq, srq_scratch, &self.me, srq_listed)
    }

    /// A Receive was posted to this queue pair's SRQ while it was on the stalled list (which
    /// the poster took it off): resume the held message on the poster's thread.
    pub(crate) fn srq_posted(&self) {
        let mut g = self.lock();
        g.srq_listed = false;
        if let Some(link) = self.link.get() {
            link.rx_stalled.store(false, Ordering::Release);
        }
        self.progress_locked(&mut g);
    }

    /// The record at the front of the ring waits for a Receive: stop polling it until one is
    /// posted, and start the receiver-not-ready clock (once per stall). Whether the bound
    /// has already run out.
    fn stall(&self, link: &Link) -> bool {
        link.rx_stalled.store(true, Ordering::Release);
        if link.rnr_deadline.load(Ordering::Relaxed) == 0 {
            let bound = self.shared.config.rnr_timeout;
            let at = crate::link::now_ns().saturating_add((bound.as_nanos() as u64).max(1));
            link.rnr_deadline.store(at, Ordering::Relaxed);
            // Driven when the bound runs out even if nothing else happens: a sleeping leader
            // and an event loop on the adapter's descriptor wake for it.
            if let Some(l) = self.link.get() {
                l.wake_at(std::time::Instant::now() + bound);
            }
            return false;
        }
        link.rnr_expired()
    }

    /// The held message's bound ran out (R-QP-7): tell the sender (its Send fails
    /// `ND_IO_TIMEOUT`) and end the connection. No completion is reported here for it, and an
    /// SRQ keeps its Receives.
    fn give_up(&self, g: &mut Inner, link: &Link) {
        // The record names the message held: the one after those we took.
        let held = g.rx_msgs;
        self.last_word(g, link, kind::RNR, held);
    }

    /// The sender's next message is longer than the front Receive: that Receive completes
    /// `ND_DATA_OVERRUN` (docs/ND-RULES.md D5), the sender is told which message failed (its
    /// Send, if still in progress, fails `STATUS_DATA_ERROR`), and the connection ends. The
    /// message's record is already consumed.
    fn overrun(&self, g: &mut Inner, link: &Link) {
        if let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::DATA_OVERRUN, 0, false);
        }
        // The record names the message: the one after those we took (as `give_up`).
        let failed = g.rx_msgs;
        self.last_word(g, link, kind::OVERRUN, failed);
    }

    /// A lingering link's drive ([`ShmQp::linger`]), out of the way of the data path.
    #[cold]
    #[inline(never)]
    fn linger_now(&self, g: &mut Inner) {
        if let Some(link) = g.link.clone() {
            self.linger(g, &link);
        }
    }

    /// Take and drop every record the peer published (a lingering link's: the connection
    /// ended, nothing is delivered), giving their space back.
    pub(super) fn discard_rx(&self, g: &mut Inner, link: &Link) -> Result<(), Violation> {
        let rx = link.rx();
        let from = g.cons.pos();
        while let Some(r) = g.cons.peek(&rx)? {
            g.cons.skip(&r);
        }
        if g.cons.pos() != from {
            release_rx(g, link, &rx);
        }
        Ok(())
    }

    /// Garbage in the ring: terminate the connection.
    fn violation(&self, g: &mut Inner) {
        self.close(g, Status::CONNECTION_REFUSED);
    }
}
