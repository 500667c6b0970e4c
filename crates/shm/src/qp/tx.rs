//! The initiator's side of the ring: queued requests and owed answers pushed as records, and
//! the requests completed in order as their answers come back.

use netdirect_spi::{OpFlags, Result, Status};

use super::{Answer, Conn, Inner, MapOut, Op, ShmQp, WRITE_INLINE_MAX};
use crate::mem::{self, Owned, Prefixed, Segs, Src};
use crate::ring::{flag, kind, Desc, Violation, INLINE_MAX, RTS_MAX_SGES};

/// Why [`ShmQp::push_answers`] stopped before the last answer.
#[derive(Debug)]
pub(super) enum Halt {
    /// Our ring broke its protocol (`Violation`): the connection ends without a last word.
    Violation,
    /// The Read response at the front reads memory whose registration went since the peer's
    /// request was checked (a window invalidated or released, a region deregistered): the
    /// transfer fails (IND2QueuePair::Invalidate, "any in-progress data transfers that
    /// reference the memory window will fail"), as a Write's next chunk into such memory does
    /// (`progress_rx`). It and every answer after it were dropped; the caller ends the
    /// connection with a TERM record, which completes the peer's Read `ND_ACCESS_VIOLATION`.
    Revoked,
}

impl From<Violation> for Halt {
    fn from(_: Violation) -> Self {
        Self::Violation
    }
}

impl ShmQp {
    /// Push the answers we owe, in order, as far as they fit. `Ok(true)`: all of them.
    ///
    /// While one of our own messages or Writes is partly in the ring (`tx_sent`, `tx_hdr`) its
    /// CHUNK records must follow each other: the peer tells them from a Read response's only
    /// by their order. Only answers the peer takes in the middle of a message go in then (ACK
    /// and DONE, one cell each); the rest wait until the message is in.
    pub(super) fn push_answers(
        &self,
        g: &mut Inner,
        tx: &crate::segment::Chan<'_>,
    ) -> Result<bool, Halt> {
        let mid_message = g.tx_sent > 0 || g.tx_hdr;
        while let Some(a) = g.answers.front() {
            if mid_message && !a.goes_mid_message() {
                return Ok(false);
            }
            if let Answer::Read(r) = a {
                // Checked each time more of it is to go, under our lock: an Invalidate through
                // this queue pair (which takes the lock) stops the rest at once.
                if r.reg.as_ref().is_some_and(|reg| !reg.is_valid()) {
                    g.answers.clear();
                    g.answers_reads = 0;
                    return Err(Halt::Revoked);
                }
            }
            let done = match a {
                Answer::Ack => g.prod.has_room(tx, 0)?.then(|| {
                    g.prod.push_inline(tx, kind::ACK, 0, &Owned(&[]), 0, 0);
                }),
                Answer::Lease(b) => g.prod.has_room(tx, 0)?.then(|| {
                    let n = b.len();
                    g.prod.push_inline(tx, kind::ACK, 0, &Owned(b), 0, n);
                }),
                Answer::Read(_) => self.push_resp(g, tx)?.then_some(()),
                &Answer::Grant { id, off, len } => g.prod.has_room(tx, 0)?.then(|| {
                    let mut b = [0u8; 16];
                    b[..8].copy_from_slice(&id.to_le_bytes());
                    b[8..].copy_from_slice(&off.to_le_bytes());
                    g.prod
                        .push_header(tx, kind::GRANT, 0, len, &Owned(&b), 0, 16);
                }),
                Answer::Deny => g.prod.has_room(tx, 0)?.then(|| {
                    g.prod
                        .push_inline(tx, kind::GRANT, flag::NO, &Owned(&[]), 0, 0);
                }),
                &Answer::Done { copied } => g.prod.has_room(tx, 0)?.then(|| {
                    let f = if copied { 0 } else { flag::NO };
                    g.prod.push_inline(tx, kind::DONE, f, &Owned(&[]), 0, 0);
                }),
            };
            if done.is_none() {
                return Ok(false);
            }
            if let Some(Answer::Read(_)) = g.answers.pop_front() {
                g.answers_reads -= 1;
            }
        }
        Ok(true)
    }

    /// Push as much of the response at the front of `answers` as fits. `Ok(true)`: all of it
    /// is in the ring (the caller pops it).
    fn push_resp(&self, g: &mut Inner, tx: &crate::segment::Chan<'_>) -> Result<bool, Halt> {
        let chunk = self.shared.config.chunk as u64;
        let Inner { prod, answers, .. } = g;
        let Some(Answer::Read(r)) = answers.front_mut() else {
            return Ok(true);
        };
        // SAFETY of the source: `[addr, addr + total)` passed the remote-read check against
        // a live registration, which `r` holds until the last byte is in the ring.
        let seg = mem::target(r.addr, r.total);
        let src = Segs(std::slice::from_ref(&seg));
        if !r.hdr {
            if !prod.has_room(tx, 0)? {
                return Ok(false);
            }
            if r.total as usize <= INLINE_MAX {
                let n = r.total as usize;
                prod.push_header(tx, kind::RRESP, 0, r.total as u32, &src, 0, n);
                return Ok(true);
            }
            prod.push_header(tx, kind::RRESP, 0, r.total as u32, &Owned(&[]), 0, 0);
            r.hdr = true;
        }
        while r.sent < r.total {
            let n = chunk.min(r.total - r.sent);
            if !prod.has_room(tx, n)? {
                return Ok(false);
            }
            let f = if r.sent + n == r.total { flag::LAST } else { 0 };
            prod.push_chunk(tx, f, r.total as u32, &src, r.sent, n as usize);
            r.sent += n;
        }
        Ok(true)
    }

    /// Move queued requests into the ring while there is room, in order; complete those done.
    pub(super) fn progress_tx(&self, g: &mut Inner) {
        // Whatever was held goes with the rest of the answers.
        self.release_acks(g);
        if g.conn != Conn::Established {
            return;
        }
        let Some(link) = self.link.get() else { return };
        let tx = link.tx();
        let chunk = self.shared.config.chunk as u64;
        let pull_min = self.shared.config.pull_min;
        let write_pull_min = self.shared.config.write_pull_min;
        let map_min = self.shared.config.map_min;
        let mut pushed = false;
        let mut blocked = false;
        loop {
            // Answers to the peer's requests come first, in order, before each of our requests
            // (its requests wait for them), but never inside one of ours (`push_answers`).
            if !g.answers.is_empty() {
                // Part of a response may go in even when the rest must wait: the peer may be
                // asleep waiting for it.
                pushed = true;
                match self.push_answers(g, &tx) {
                    Ok(all) => blocked = !all && g.tx_sent == 0 && !g.tx_hdr,
                    Err(Halt::Violation) => {
                        self.close(g, Status::CONNECTION_REFUSED);
                        return;
                    }
                    Err(Halt::Revoked) => {
                        self.refuse(g, link);
                        return;
                    }
                }
            }
            if blocked {
                break;
            }
            let Inner {
                prod,
                sq,
                tx_sent,
                tx_hdr,
                in_ring,
                reads_out,
                ord,
                map_out,
                map_denied,
                tx_msgs,
                leases,
                lease_denied,
                lease_asking,
                ..
            } = &mut *g;
            // Requests go into the ring in post order while earlier ones wait for answers
            // (pipelined); they complete in order (RFC 5040 §5.5 rules 13 and 15).
            let i = *in_ring;
            let Some((wr, segs)) = sq.get(i) else { break };
            if let Some(status) = wr.error {
                if i > 0 {
                    break; // completes in its turn, once the ones before it have
                }
                let wr = sq.pop().expect("present");
                self.complete_wr(&wr, status);
                // R-QP-6: an error completion ends the connection; the rest is flushed.
                self.close(g, Status::CONNECTION_REFUSED);
                return;
            }
            // ND_OP_FLAG_READ_FENCE: every earlier Read completes before this request starts
            // (RFC 5040 §5.5 rule 12); a Read beyond the ORD waits for a slot (§5.4).
            let is_read = matches!(wr.op, Op::Read(_));
            if (wr.flags.contains(OpFlags::READ_FENCE) && *reads_out > 0)
                || (is_read && *reads_out >= *ord)
            {
                break;
            }
            // A SendAndInvalidate: its INVAL record first, in its turn (after every earlier
            // request is in the ring, never inside one) and right before its first record.
            let mut inval_in = false;
            if let (Some(token), 0, false) = (wr.inval, *tx_sent, *tx_hdr) {
                match super::post::push_inval(prod, &tx, token) {
                    Ok(true) => {
                        inval_in = true;
                        pushed = true;
                    }
                    Ok(false) => {
                        blocked = true;
                        break;
                    }
                    Err(Violation) => {
                        self.close(g, Status::CONNECTION_REFUSED);
                        return;
                    }
                }
            }
            let total = wr.total;
            let src = match &wr.inline {
                Some(d) => Src::Owned(Owned(d)),
                None => Src::Segs(Segs(segs)),
            };
            let mut violation = false;
            // Sent as an RTS record: the peer pulls it and ACKs.
            let mut rts = false;
            // A Send of more than one record started: its message number (`SendWr::msn`).
            let mut started = None;
            // A Write that asks for a lease (`mapped`: placed Writes).
            let mut asked = false;
            // Whether the request is now fully in the ring (or, for Bind and Invalidate, done).
            let done = match wr.op {
                Op::Bind | Op::Invalidate => true,
                // A mapped Write or Read asked for: nothing goes in until the GRANT (`mapped`).
                Op::Write(_) | Op::Read(_) if *map_out == MapOut::Asked => false,
                // Large enough, and not refused lately: ask for a mapping.
                Op::Write(d) | Op::Read(d)
                    if !*tx_hdr
                        && *map_out == MapOut::Idle
                        && map_min > 0
                        && total >= map_min
                        && wr.inline.is_none()
                        && !map_denied.contains(&d.token)
                        && link.prove() =>
                {
                    match prod.has_room(&tx, 0) {
                        Ok(true) => {
                            let k = if is_read { kind::MAPR } else { kind::MAPW };
                            link.maps.asking(true);
                            let head = d.encode();
                            prod.push_header(&tx, k, 0, total as u32, &Owned(&head), 0, 16);
                            *map_out = MapOut::Asked;
                            pushed = true;
                        }
                        Ok(false) => blocked = true,
                        Err(Violation) => violation = true,
                    }
                    false
                }
                Op::Read(d) => match prod.has_room(&tx, 0) {
                    Ok(true) => {
                        let head = d.encode();
                        prod.push_header(&tx, kind::READ, 0, total as u32, &Owned(&head), 0, 16);
                        pushed = true;
                        true
                    }
                    Ok(false) => {
                        blocked = true;
                        false
                    }
                    Err(Violation) => {
                        violation = true;
                        false
                    }
                },
                Op::Write(d) if !*tx_hdr => {
                    let head = d.encode();
                    let pull = write_pull_min > 0
                        && total >= write_pull_min
                        && wr.inline.is_none()
                        && segs.len() <= RTS_MAX_SGES
                        && link.peer_can_pull();
                    let mut list = [0u8; (RTS_MAX_SGES + 1) * 16];
                    let need = if pull {
                        list[..16].copy_from_slice(&head);
                        for (k, sg) in segs.iter().enumerate() {
                            let e = &mut list[16 + k * 16..32 + k * 16];
                            e[..8].copy_from_slice(&sg.addr.to_le_bytes());
                            e[8..].copy_from_slice(&u64::from(sg.len).to_le_bytes());
                        }
                        16 + segs.len() * 16
                    } else {
                        0
                    };
                    match prod.has_room(&tx, need as u64) {
                        Ok(true) if pull => {
                            // The target pulls the bytes itself, straight into its memory.
                            let l = &Owned(&list[..need]);
                            prod.push_data(&tx, kind::WPULL, 0, total as u32, l, 0, need);
                            pushed = true;
                            true
                        }
                        Ok(true) if total as usize <= WRITE_INLINE_MAX => {
                            let p = Prefixed {
                                head: &head,
                                rest: &src,
                            };
                            let n = Desc::LEN + total as usize;
                            asked = super::place::wants_lease(
                                link,
                                map_min,
                                d.token,
                                total,
                                leases,
                                [&lease_denied[..], &map_denied[..]],
                                lease_asking,
                            );
                            let f = if asked { flag::LEASE } else { 0 };
                            prod.push_header(&tx, kind::WRITE, f, total as u32, &p, 0, n);
                            pushed = true;
                            true
                        }
                        Ok(true) => {
                            // The descriptor now, the bytes as CHUNK records below.
                            asked = super::place::wants_lease(
                                link,
                                map_min,
                                d.token,
                                total,
                                leases,
                                [&lease_denied[..], &map_denied[..]],
                                lease_asking,
                            );
                            let f = if asked { flag::LEASE } else { 0 };
                            prod.push_header(
                                &tx,
                                kind::WRITE,
                                f,
                                total as u32,
                                &Owned(&head),
                                0,
                                16,
                            );
                            *tx_hdr = true;
                            pushed = true;
                            false
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send
                    if pull_min > 0
                        && total >= pull_min
                        && *tx_sent == 0
                        && wr.inline.is_none()
                        && segs.len() <= RTS_MAX_SGES
                        && link.peer_can_pull() =>
                {
                    // Large: announce the scatter list; the peer pulls the bytes itself.
                    let sol = if wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                        flag::SOLICITED
                    } else {
                        0
                    };
                    let mut list = [0u8; RTS_MAX_SGES * 16];
                    for (k, sg) in segs.iter().enumerate() {
                        list[k * 16..k * 16 + 8].copy_from_slice(&sg.addr.to_le_bytes());
                        list[k * 16 + 8..k * 16 + 16]
                            .copy_from_slice(&u64::from(sg.len).to_le_bytes());
                    }
                    let n = segs.len() * 16;
                    match prod.has_room(&tx, n as u64) {
                        Ok(true) => {
                            let l = &Owned(&list[..n]);
                            prod.push_data(&tx, kind::RTS, sol, total as u32, l, 0, n);
                            started = Some(*tx_msgs);
                            *tx_msgs = tx_msgs.wrapping_add(1);
                            pushed = true;
                            rts = true;
                            true
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send if total <= INLINE_MAX as u64 => {
                    let sol = if wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                        flag::SOLICITED
                    } else {
                        0
                    };
                    match prod.has_room(&tx, 0) {
                        Ok(true) => {
                            prod.push_inline(&tx, kind::MSG, sol, &src, 0, total as usize);
                            *tx_msgs = tx_msgs.wrapping_add(1);
                            pushed = true;
                            true
                        }
                        Ok(false) => {
                            blocked = true;
                            false
                        }
                        Err(Violation) => {
                            violation = true;
                            false
                        }
                    }
                }
                Op::Send | Op::Write(_) => false,
            };
            // The chunked bytes of a large Send, or of a Write whose descriptor is in the ring.
            let chunked = !done
                && !blocked
                && !violation
                && (wr.op == Op::Send || (matches!(wr.op, Op::Write(_)) && *tx_hdr));
            let mut finished = done;
            if chunked {
                let is_send = wr.op == Op::Send;
                let sol = if is_send && wr.flags.contains(OpFlags::SEND_AND_SOLICIT_EVENT) {
                    flag::SOLICITED
                } else {
                    0
                };
                finished = loop {
                    if *tx_sent == total {
                        break true;
                    }
                    let n = chunk.min(total - *tx_sent);
                    match prod.has_room(&tx, n) {
                        Ok(true) => {}
                        Ok(false) => {
                            blocked = true;
                            break false;
                        }
                        Err(Violation) => {
                            violation = true;
                            break false;
                        }
                    }
                    let mut f = sol;
                    // A Send's first chunk starts a message; a Write's chunks continue its
                    // WRITE record.
                    if *tx_sent == 0 && is_send {
                        f |= flag::FIRST;
                        started = Some(*tx_msgs);
                        *tx_msgs = tx_msgs.wrapping_add(1);
                    }
                    if *tx_sent + n == total {
                        f |= flag::LAST;
                    }
                    prod.push_chunk(&tx, f, total as u32, &src, *tx_sent, n as usize);
                    *tx_sent += n;
                    pushed = true;
                };
            }
            if violation {
                self.close(g, Status::CONNECTION_REFUSED);
                return;
            }
            if !finished {
                if let Some((w, _)) = sq.get_mut(i) {
                    if inval_in {
                        w.inval = None;
                    }
                    if let Some(m) = started {
                        w.msn = Some(m);
                    }
                    // The header asked; its chunks follow later.
                    w.lease_ask |= asked;
                }
                break;
            }
            *tx_sent = 0;
            *tx_hdr = false;
            *map_out = MapOut::Idle;
            // A Send is complete once its bytes are in the ring (or when the peer ACKs an
            // RTS); Writes and Reads when the peer answers.
            let wait = match wr.op {
                Op::Send => rts,
                Op::Write(_) | Op::Read(_) => true,
                Op::Bind | Op::Invalidate => false,
            };
            if let Some((wr, _)) = sq.get_mut(i) {
                wr.awaiting = wait;
                wr.lease_ask |= asked;
                if started.is_some() {
                    wr.msn = started;
                }
            }
            if is_read {
                *reads_out += 1;
            }
            *in_ring += 1;
        }
        self.complete_front(g);
        if pushed {
            g.wake_owed = true;
            // Counting answers too: a placed Write waits for the peer to take them as well.
            g.prod.mark();
        }
        self.flush_wake(g);
        if blocked && g.conn == Conn::Established {
            link.block_for_room(g.prod.seen_tails());
        } else {
            link.set_tx_blocked(false);
        }
    }

    /// Complete, in order, the requests at the front that are in the ring and wait for no
    /// answer (a Send whose bytes are in the ring is complete: local completion, as `tcp`
    /// completes a Send once TCP took it).
    fn complete_front(&self, g: &mut Inner) {
        while g.in_ring > 0 {
            match g.sq.front() {
                Some((wr, _)) if !wr.awaiting => {}
                _ => return,
            }
            let wr = g.sq.pop().expect("present");
            g.in_ring -= 1;
            self.complete_wr(&wr, Status::SUCCESS);
        }
    }

    /// The peer answered the request at the front (ACK, the end of a Read response): it is
    /// complete, and so are the ones behind it that waited only for their turn.
    pub(super) fn answered(&self, g: &mut Inner) {
        if let Some(wr) = g.sq.front_mut() {
            wr.awaiting = false;
            if matches!(wr.op, Op::Read(_)) {
                g.reads_out -= 1;
            }
        }
        self.complete_front(g);
    }

    /// The request at the front, if it is in the ring and waits for the peer's answer.
    pub(super) fn awaited(&self, g: &Inner) -> Option<Op> {
        match g.sq.front() {
            Some((wr, _)) if g.in_ring > 0 && wr.awaiting => Some(wr.op),
            _ => None,
        }
    }
}
