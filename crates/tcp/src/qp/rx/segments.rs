//! What each inbound segment does once its header is read: a Send into the next Receive, a
//! Write or a Read Response into registered memory, a Read Request answered, the end of a
//! message, and a Terminate attributed to the request of ours it names.

use super::*;

impl TcpQp {
    /// A segment header arrived: check it and choose the destination.
    pub(super) fn on_header(&self, g: &mut Inner, h: SegmentHeader) -> Next {
        g.rx.bulk = h.payload_len as usize >= DIRECT_MIN;
        if let Err(e) = g.rx.seq.check(&h.ddp, h.payload_len) {
            self.terminate(g, h.terminate_for(e));
            return Next::Stop;
        }
        // The responder's first inbound FPDU is the RTR (or, without P2P, the first message).
        // A Terminate instead (an initiator that could not use our Reply, RFC 6581 §9.2)
        // never brought the connection up: the Accept completes ND_CONNECTION_REFUSED, as
        // for an active side that tears down after our Accept (docs/ND-RULES.md D9).
        let terminated = matches!(h.ddp, DdpHeader::Untagged(u) if u.opcode == Opcode::Terminate);
        if g.conn == Conn::AwaitRtr && !terminated {
            self.rtr_received(g);
            if is_rtr(&h) {
                if let Some(rr) = &h.read_request {
                    g.tx.encode_rtr_read_response(rr.sink_stag, rr.sink_to, g.crc);
                }
                g.rx.dest = Dest::Discard;
                return Next::Continue;
            }
        }
        match h.ddp {
            DdpHeader::Untagged(u) if u.opcode.is_send() => self.on_send(g, &h, &u),
            DdpHeader::Untagged(u) if u.opcode == Opcode::ReadRequest => {
                self.on_read_request(g, &h)
            }
            DdpHeader::Untagged(u) if u.opcode == Opcode::Terminate => {
                if let Some(t) = &h.terminate {
                    tracing::debug!(terminate = ?t, "peer terminated the stream");
                    self.attribute(g, t);
                }
                self.close(g, Status::CONNECTION_REFUSED, Ending::Abort);
                Next::Stop
            }
            DdpHeader::Tagged(t) if t.opcode == Opcode::Write => self.on_write(g, &h, &t),
            DdpHeader::Tagged(t) if t.opcode == Opcode::ReadResponse => {
                self.on_read_response(g, &h, &t)
            }
            _ => {
                // The deframer only lets the eight RDMAP opcodes through, with the T bit that
                // goes with each; anything else is unexpected here (RFC 5040 §4.8: 0x0/0x2/0x06).
                self.terminate(g, h.terminate_for(TermError::RdmapUnexpectedOpcode));
                Next::Stop
            }
        }
    }

    /// A Send-family segment: into the Receive at the head of the queue.
    pub(super) fn on_send(&self, g: &mut Inner, h: &SegmentHeader, u: &UntaggedHeader) -> Next {
        if g.rq.front().is_none() && !self.take_from_srq(g) {
            // No Receive posted (on the queue pair or its SRQ): hold the segment and the rest
            // of the stream until one is; TCP flow control pushes back on the sender meanwhile,
            // and the connection survives unless the wait exceeds ND_TCP_RNR_TIMEOUT_MS
            // (R-QP-7, `on_timer`).
            self.stall(g, *h);
            return Next::Stop;
        }
        let Some((wr, _)) = g.rq.front() else {
            unreachable!("a Receive was just found");
        };
        let end = u64::from(u.mo) + u64::from(h.payload_len);
        if end > wr.total {
            // RFC 5041 §7.2: DDP message too long for the available buffer. The Receive
            // completes with ND_DATA_OVERRUN (docs/ND-RULES.md D5).
            let ctx = wr.context;
            g.rq.pop();
            self.complete_recv(ctx, Status::DATA_OVERRUN, 0, false);
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedMessageTooLong));
            return Next::Stop;
        }
        if u.mo == 0 && u.opcode.carries_invalidate_stag() {
            // Send with Invalidate (RFC 5040 §5.3, §6.3; Linux peers send it): only a window
            // bound through this queue pair may be invalidated remotely (RFC 5040 §8.1.1
            // item 7); anything else is "STag cannot be invalidated" (docs/WIRE.md §5.5).
            match self.shared.mrs.lookup(u.inval_stag) {
                Some(r)
                    if r.kind == Kind::Window
                        && r.bound_qp.load(std::sync::atomic::Ordering::Acquire) == self.id =>
                {
                    netdirect_spi::kit::mw::invalidated_by_peer(
                        &self.shared.mrs,
                        &mut g.windows,
                        &r,
                    );
                }
                _ => {
                    self.terminate(
                        g,
                        h.terminate_for(TermError::RdmapOperationCannotInvalidate),
                    );
                    return Next::Stop;
                }
            }
        }
        g.rx.dest = Dest::Recv {
            pos: u64::from(u.mo),
            solicited: u.opcode.is_solicited(),
            last: u.last,
        };
        Next::Continue
    }

    /// An RDMA Write segment: checked, then placed where it says (RFC 5040 §4.3).
    fn on_write(&self, g: &mut Inner, h: &SegmentHeader, t: &TaggedHeader) -> Next {
        if h.payload_len == 0 {
            // A zero-length tagged segment's STag and TO are not checked (RFC 5041 §5.2).
            g.rx.dest = Dest::Discard;
            return Next::Continue;
        }
        match protect::check_write(&self.shared.mrs, self.id, t.stag, t.to, h.payload_len) {
            Ok(reg) => {
                g.rx.dest = Dest::Tagged {
                    addr: t.to,
                    end: t.to + u64::from(h.payload_len),
                };
                g.rx.dest_reg = Some(reg);
                Next::Continue
            }
            Err(e) => {
                self.terminate(g, h.terminate_for(e));
                Next::Stop
            }
        }
    }

    /// An RDMA Read Request: within our IRD, its source checked, its Response queued from
    /// the registered memory (RFC 5040 §4.4, §5.2.1, §5.4).
    fn on_read_request(&self, g: &mut Inner, h: &SegmentHeader) -> Next {
        let Some(rr) = h.read_request else {
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedMessageTooLong));
            return Next::Stop;
        };
        // With the probe negotiated, one zero-length Read beyond the IRD is allowed (module
        // docs of `qp`, `Rdma::admits`).
        if !g.rdma.admits(rr.size) {
            // More Read Requests than our IRD: QN 1 has no buffer for it (RFC 5040 §5.4,
            // RFC 5041 §7.2: 0x1/0x2/0x02; docs/WIRE.md §4.4).
            self.terminate(g, h.terminate_for(TermError::DdpUntaggedNoBuffer));
            return Next::Stop;
        }
        let src = match protect::check_read_source(&self.shared.mrs, self.id, &rr) {
            Ok(src) => src,
            Err(e) => {
                self.terminate(g, h.terminate_for(e));
                return Next::Stop;
            }
        };
        if rr.size > 0 {
            g.lazy = false;
        } else if !g.tx.has_output() {
            g.lazy = true;
        }
        let zero = rr.size == 0;
        let term = h.terminate_for(TermError::RdmapInvalidStag);
        g.rdma.irq.push_back(InRead { src, term, zero });
        g.rdma.irq_zero += usize::from(zero);
        g.tx.encode_read_response(rr.sink_stag, rr.sink_to, rr.src_to, rr.size, g.crc);
        g.rx.dest = Dest::Discard;
        Next::Continue
    }

    /// A Read Response segment: it must continue the oldest outstanding Read exactly, into
    /// that Read's sink, which must still be registered (RFC 5040 §4.5, §5.5 rule 20).
    fn on_read_response(&self, g: &mut Inner, h: &SegmentHeader, t: &TaggedHeader) -> Next {
        let len = h.payload_len;
        let Some(front) = g.rdma.orq.front() else {
            // No Read outstanding: "Read Response not matching an outstanding Read".
            self.terminate(g, h.terminate_for(TermError::DdpTaggedInvalidStag));
            return Next::Stop;
        };
        let (kind, expect) = (front.kind, front.expect);
        let sink = match kind {
            ReadKind::App { wr_seq, seg } => {
                let i = (wr_seq - g.front_seq) as usize;
                g.sq.get(i)
                    .and_then(|(_, segs)| segs.get(seg))
                    .and_then(|s| s.reg().cloned())
            }
            ReadKind::Probe | ReadKind::Rtr => None,
        };
        match protect::check_read_response(&expect, t.stag, t.to, len, t.last, sink.as_deref()) {
            Ok(()) => {
                if let Some(f) = g.rdma.orq.front_mut() {
                    f.expect.got += len;
                }
                g.rx.response_ends = t.last;
                if len > 0 {
                    g.rx.dest = Dest::Tagged {
                        addr: t.to,
                        end: t.to + u64::from(len),
                    };
                    g.rx.dest_reg = sink;
                } else {
                    g.rx.dest = Dest::Discard;
                }
                Next::Continue
            }
            Err(e) => {
                if let ReadKind::App { wr_seq, .. } = kind {
                    // Our sink was deregistered meanwhile: a local protection error; anything
                    // else is the peer's fault.
                    let st = if sink.as_ref().is_some_and(|r| !r.is_valid()) {
                        Status::ACCESS_VIOLATION
                    } else {
                        Status::REMOTE_ERROR
                    };
                    g.failed = Some((wr_seq, st));
                }
                self.terminate(g, h.terminate_for(e));
                Next::Stop
            }
        }
    }

    /// The oldest outstanding Read Request has its whole Response.
    fn read_answered(&self, g: &mut Inner) {
        let Some(r) = g.rdma.orq.pop_front() else {
            return;
        };
        g.rdma.answered += 1;
        match r.kind {
            ReadKind::App { wr_seq, .. } => {
                g.rdma.app_reads -= 1;
                let i = (wr_seq - g.front_seq) as usize;
                if let Some((wr, _)) = g.sq.get_mut(i) {
                    wr.answered += 1;
                }
            }
            ReadKind::Probe => g.rdma.probe_out = false,
            ReadKind::Rtr => {}
        }
    }

    /// A segment ended (its CRC checked): deliver a finished message.
    pub(super) fn on_end(&self, g: &mut Inner) -> Next {
        match g.rx.dest {
            Dest::Recv {
                pos,
                solicited,
                last: true,
            } => {
                if let Some(wr) = g.rq.pop() {
                    self.complete_recv(wr.context, Status::SUCCESS, pos as u32, solicited);
                    g.rx.delivered = true;
                }
            }
            Dest::Tagged { .. } => g.rx.dest_reg = None,
            _ => {}
        }
        if std::mem::take(&mut g.rx.response_ends) {
            self.read_answered(g);
        }
        g.rx.dest = Dest::None;
        Next::Continue
    }

    /// A Terminate arrived: find the request it names, by the DDP header it carries (D bit):
    /// STag/TO for a Write, QN 1 + MSN for a Read, QN 0 + MSN for a Send (docs/WIRE.md §4.4).
    /// That request completes with `ND_ACCESS_VIOLATION` for a protection error (D6), else
    /// `ND_REMOTE_ERROR` (a Send: `STATUS_DATA_ERROR`, D5); the ones before it were processed
    /// by the target and complete as they are; the rest are flushed `ND_CANCELED`.
    ///
    /// Tagged segments carry no message number, so Writes to overlapping target ranges can
    /// all contain the refused TO. Among them the one whose own segmentation produced that
    /// segment is named ([`write_fit`]); the earliest wins a tie, as the target refuses the
    /// first bad segment it meets.
    ///
    /// A Terminate that names no segment (LLP errors such as a CRC error, and the other
    /// errors RFC 5040 §4.8 Figure 10 sends without the DDP header) still reports an error
    /// the peer found in what we sent: the oldest request on the wire completes
    /// `ND_REMOTE_ERROR` (docs/WIRE.md §4.4 proposes ND_REMOTE_ERROR for the requester of a
    /// CRC mismatch), as the first outstanding work request fails on a verbs queue pair
    /// whose peer reported an error, and the rest are flushed. A peer that failed by itself
    /// (a local catastrophic error, its connection lost) names nothing of ours: everything is
    /// flushed `ND_CANCELED`, as when it disconnects.
    fn attribute(&self, g: &mut Inner, t: &Terminate) {
        let Some(ddp) = t.ddp_header.and_then(|d| d.decode().ok()) else {
            let peer_failed = matches!(
                t.error,
                TermError::RdmapLocalCatastrophic(_)
                    | TermError::DdpLocalCatastrophic
                    | TermError::LlpConnectionLost
            );
            let on_wire = g.encoded > 0
                && g.sq.get(0).is_some_and(|(wr, _)| {
                    matches!(
                        wr.kind,
                        TxKind::Send | TxKind::Write { .. } | TxKind::Read { .. }
                    )
                });
            if !peer_failed && on_wire {
                g.failed = Some((g.front_seq, Status::REMOTE_ERROR));
            }
            return;
        };
        let status = if protect::is_protection_error(&t.error) {
            Status::ACCESS_VIOLATION
        } else {
            Status::REMOTE_ERROR
        };
        let seg_payload = g.tx.write_segment_payload();
        // The best-fitting Write so far: (queue index, fit).
        let mut write: Option<(usize, Fit)> = None;
        // Every request on the wire: the encoded ones, and a Read partly issued (ORD).
        for i in 0..g.sq.len() {
            let Some((wr, _)) = g.sq.get(i) else { break };
            let on_wire = i < g.encoded;
            let hit = match (ddp, wr.kind) {
                (DdpHeader::Tagged(th), TxKind::Write { stag, to }) => {
                    // A Write a Read Response already proved is not the culprit.
                    let proven = g.rdma.probe && g.rdma.answered >= wr.proof;
                    if on_wire && !proven && th.opcode == Opcode::Write && th.stag == stag {
                        let fit = write_fit(&th, t.ddp_seg_len, to, wr.total, seg_payload);
                        if fit > write.map_or(Fit::None, |(_, f)| f) {
                            write = Some((i, fit));
                        }
                    }
                    false
                }
                (DdpHeader::Untagged(u), TxKind::Read { .. }) => {
                    u.qn == QN_READ_REQUEST
                        && wr.issued > 0
                        && u.msn.wrapping_sub(wr.msn) < u32::from(wr.issued)
                }
                (DdpHeader::Untagged(u), TxKind::Send) => {
                    on_wire && u.qn == QN_SEND && u.msn == wr.msn
                }
                _ => false,
            };
            if hit {
                let st = match wr.kind {
                    // The receiver held it for want of a Receive until its RNR clock ran out
                    // (R-QP-7: ND_IO_TIMEOUT, as an RNR retry count exceeded on IB).
                    TxKind::Send if t.error == TermError::DdpUntaggedNoBuffer => Status::IO_TIMEOUT,
                    TxKind::Send => Status::DATA_ERROR,
                    _ => status,
                };
                g.failed = Some((g.front_seq + i as u64, st));
                return;
            }
        }
        if let Some((i, _)) = write {
            g.failed = Some((g.front_seq + i as u64, status));
        }
    }
}

/// How well a refused tagged segment fits one of our Writes (to `to`, `total` bytes, cut
/// into segments of `seg_payload` bytes by `Tx::encode_message`). Ordered: a better fit
/// names the Write.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Fit {
    /// The TO is not inside the Write.
    None,
    /// The TO is inside the Write, but the Write has no segment there with that L bit: the
    /// peer reported a header of its own making (accepted when nothing fits better).
    Inside,
    /// One of the Write's segments starts at the TO, with the same L bit.
    Segment,
    /// That, and its length matches the Terminate's DDP Segment Length, read either way
    /// peers fill it: the whole ULPDU (RFC 5040 §4.8) or only the payload (siw,
    /// docs/WIRE.md §4.2).
    Exact,
}

fn write_fit(
    th: &TaggedHeader,
    seg_len: Option<u16>,
    to: u64,
    total: u64,
    seg_payload: u64,
) -> Fit {
    let off = th.to.wrapping_sub(to);
    if off >= total.max(1) {
        return Fit::None;
    }
    let payload = (total - off).min(seg_payload);
    let last = off + payload >= total;
    if seg_payload == 0 || !off.is_multiple_of(seg_payload) || th.last != last {
        return Fit::Inside;
    }
    let tagged_hdr = netdirect_wire::ddp::TAGGED_LEN as u64;
    match seg_len.map(u64::from) {
        Some(l) if l == payload || l == payload + tagged_hdr => Fit::Exact,
        _ => Fit::Segment,
    }
}

/// A zero-length Write or Read Request: the MPA v2 ready-to-receive message.
fn is_rtr(h: &SegmentHeader) -> bool {
    match h.ddp {
        DdpHeader::Tagged(t) => t.opcode == Opcode::Write && h.payload_len == 0,
        DdpHeader::Untagged(u) => {
            u.opcode == Opcode::ReadRequest && h.read_request.is_some_and(|r| r.size == 0)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tagged(to: u64, last: bool) -> TaggedHeader {
        TaggedHeader {
            last,
            opcode: Opcode::Write,
            stag: 7,
            to,
        }
    }

    /// Two Writes to the same address: 8 bytes, then 100 KiB (segments of 1000 bytes here).
    /// The refused first segment of the large one (L clear) is not the small one's (L set).
    #[test]
    fn a_refused_segment_names_the_write_that_sent_it() {
        let small = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 8, 1000);
        let large = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 100 * 1024, 1000);
        let first_of_large = tagged(0x1000, false);
        assert_eq!(small(&first_of_large, None), Fit::Inside);
        assert_eq!(large(&first_of_large, None), Fit::Segment);
        // The small one's only segment.
        let only = tagged(0x1000, true);
        assert_eq!(small(&only, None), Fit::Segment);
        assert_eq!(large(&only, None), Fit::Inside);
        // A later segment of the large one is outside the small one.
        assert_eq!(small(&tagged(0x1000 + 3000, false), None), Fit::None);
        assert_eq!(large(&tagged(0x1000 + 3000, false), None), Fit::Segment);
        // Not on a segment boundary.
        assert_eq!(large(&tagged(0x1000 + 3001, false), None), Fit::Inside);
        // The large one's last segment: 102400 = 102 * 1000 + 400.
        let tail = tagged(0x1000 + 102_000, true);
        assert_eq!(large(&tail, None), Fit::Segment);
        assert_eq!(large(&tail, Some(400)), Fit::Exact);
        assert_eq!(large(&tail, Some(400 + 14)), Fit::Exact);
        assert_eq!(large(&tail, Some(1000)), Fit::Segment);
        // Same TO and L, told apart only by the length: 8 bytes against 16.
        let w16 = |th: &TaggedHeader, len| write_fit(th, len, 0x1000, 16, 1000);
        assert_eq!(small(&only, Some(16)), Fit::Segment);
        assert_eq!(w16(&only, Some(16)), Fit::Exact);
        // A zero-length Write's one segment.
        assert_eq!(write_fit(&only, Some(0), 0x1000, 0, 1000), Fit::Exact);
        // TOs below the Write, and wrapping, fit nothing.
        assert_eq!(small(&tagged(0xFFF, true), None), Fit::None);
        assert_eq!(
            write_fit(&tagged(3, true), None, u64::MAX - 4, 16, 1000),
            Fit::Inside
        );
    }
}
