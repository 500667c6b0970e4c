//! The initiator queue's stages (see the module docs of `qp`, "The initiator queue"):
//! requests encoded into FPDUs in post order, the completion probe after a batch of Writes,
//! the FPDUs handed to TCP, and the requests completed in order once they may.

use netdirect_spi::{OpFlags, Status};
use netdirect_wire::rdmap::{split_control_byte, Opcode, ReadRequest};

use super::{local_catastrophic, read_part, revoked_response, Conn, Inner, OutRead, ReadKind};
use super::{TcpQp, TxKind};
use crate::protect::ExpectedResponse;

/// A write that hands TCP this many bytes or more may have lasted while the peer read (and
/// refused) what it sent: `flush_tx` looks for a waiting Terminate (`terminate_waits`, one
/// `MSG_PEEK`) before completing what it finished. One peek per this many bytes costs nothing
/// measurable; below it, TCP took the bytes into buffers the peer had not yet read.
const RX_CHECK_MIN: usize = 128 << 10;

impl TcpQp {
    /// Encode every queued request that may go on the wire now, in order; stop at one that
    /// must wait (an ORD slot, a fence, an error before it), since everything after it waits
    /// too (RFC 5040 §5.4 and §5.5 rule 13).
    pub(super) fn encode_pending(&self, g: &mut Inner) {
        if g.conn != Conn::Established {
            return;
        }
        let crc = g.crc;
        let front_seq = g.front_seq;
        while g.encoded < g.sq.len() {
            let i = g.encoded;
            let Inner { sq, tx, rdma, .. } = g;
            let (wr, segs) = sq.get_mut(i).expect("index below len");
            if wr.error.is_some() {
                break;
            }
            // ND_OP_FLAG_READ_FENCE: every earlier Read completes before this one starts
            // (RFC 5040 §5.5 rule 12, "fence"; a purely local rule, docs/WIRE.md §5.2).
            if wr.flags.contains(OpFlags::READ_FENCE) && wr.issued == 0 && rdma.app_reads > 0 {
                break;
            }
            let inline = wr.flags.contains(OpFlags::INLINE);
            match wr.kind {
                TxKind::Send if inline => {
                    wr.msn = tx.encode_stashed_inline(wr.flags, None, wr.inval, crc);
                }
                TxKind::Send => wr.msn = tx.encode_send(segs, wr.total, wr.flags, wr.inval, crc),
                TxKind::Write { stag, to } => {
                    if inline {
                        tx.encode_stashed_inline(wr.flags, Some((stag, to)), None, crc);
                    } else {
                        tx.encode_write(segs, wr.total, stag, to, crc);
                    }
                    // The next Read Request issued proves this Write placed.
                    wr.proof = rdma.issued + 1;
                    rdma.write_proof = wr.proof;
                }
                TxKind::Read { stag, to } => {
                    let wr_seq = front_seq + i as u64;
                    // One Read Request per non-empty SGE (a request names one sink STag,
                    // RFC 5040 §4.4), each in an ORD slot of its own (§5.4).
                    while wr.issued < wr.parts && rdma.app_reads < rdma.ord {
                        let (seg, off) = read_part(segs, wr.issued);
                        let (sink_stag, sink_to, size) = match seg {
                            Some(k) => (
                                // Queued by push_with: each segment holds its registration.
                                segs[k].reg().map_or(0, |r| r.token),
                                segs[k].addr,
                                segs[k].len,
                            ),
                            None => (0, 0, 0),
                        };
                        let rr = ReadRequest {
                            sink_stag,
                            sink_to,
                            size,
                            src_stag: stag,
                            src_to: to.wrapping_add(off),
                        };
                        let msn = tx.encode_read_request(&rr, crc);
                        if wr.issued == 0 {
                            wr.msn = msn;
                        }
                        wr.issued += 1;
                        rdma.app_reads += 1;
                        rdma.issued += 1;
                        rdma.orq.push_back(OutRead {
                            kind: ReadKind::App {
                                wr_seq,
                                seg: seg.unwrap_or(usize::MAX),
                            },
                            expect: ExpectedResponse {
                                sink_stag,
                                sink_to,
                                size,
                                got: 0,
                            },
                        });
                    }
                    if wr.issued < wr.parts {
                        // Out of ORD slots: this Read and everything after it wait.
                        break;
                    }
                    tx.mark_done();
                }
                TxKind::Bind | TxKind::Invalidate => tx.mark_done(),
            }
            g.encoded += 1;
            g.lazy = false;
        }
        self.maybe_probe(g);
    }

    /// Send a Write completion probe if Writes wait for one and none is in flight: a
    /// zero-length Read Request outside the ORD (module documentation).
    fn maybe_probe(&self, g: &mut Inner) {
        let r = &mut g.rdma;
        if !r.probe || r.probe_out || r.write_proof <= r.issued || g.conn != Conn::Established {
            return;
        }
        // RFC 5040 §5.2.1: a zero-size Read names no memory; the target answers it with a
        // zero-length Read Response after everything sent before it.
        let rr = ReadRequest::default();
        g.tx.encode_read_request(&rr, g.crc);
        r.probe_out = true;
        r.issued += 1;
        r.orq.push_back(OutRead {
            kind: ReadKind::Probe,
            expect: ExpectedResponse {
                sink_stag: 0,
                sink_to: 0,
                size: 0,
                got: 0,
            },
        });
        g.lazy = false;
    }

    /// Complete, in order, every request at the front of the queue that is done.
    pub(super) fn complete_ready(&self, g: &mut Inner) {
        loop {
            let Some((wr, _)) = g.sq.front() else { return };
            let ready = match wr.error {
                Some(_) => true,
                None => {
                    g.encoded > 0
                        && g.sent > 0
                        && match wr.kind {
                            TxKind::Write { .. } => !g.rdma.probe || g.rdma.answered >= wr.proof,
                            TxKind::Read { .. } => wr.answered == wr.parts,
                            _ => true,
                        }
                }
            };
            if !ready {
                return;
            }
            let wr = g.sq.pop().expect("front exists");
            g.front_seq += 1;
            match wr.error {
                None => {
                    g.encoded -= 1;
                    g.sent -= 1;
                    self.complete_send(&wr, Status::SUCCESS);
                }
                Some(status) => {
                    // R-QP-6: an error completion ends the connection; what follows is
                    // flushed with ND_CANCELED.
                    self.complete_send(&wr, status);
                    self.end(g, local_catastrophic(), Status::CONNECTION_REFUSED);
                    return;
                }
            }
        }
    }

    /// Write as much queued output as the socket takes; account the requests and Read
    /// Responses TCP fully took, and complete what is done.
    pub(super) fn flush_tx(&self, g: &mut Inner) {
        let Some(sock) = g.sock.as_ref().map(|s| s.get()) else {
            return;
        };
        if !g.rdma.irq.is_empty() && g.conn != Conn::Closed {
            if let Some(term) = revoked_response(&g.rdma) {
                // Only the rest of the frame on the wire goes, then the Terminate (`close`):
                // the peer's Read completes ND_ACCESS_VIOLATION.
                self.terminate(g, term);
                return;
            }
        }
        let resumed = g.tx_blocked;
        let result = g.tx.write_to(sock);
        g.lazy = false;
        g.tx_blocked = g.tx.has_output();
        if let Some(s) = &g.sock {
            s.set_wants_write(g.tx_blocked);
        }
        let finished;
        match result {
            Ok(w) => {
                finished = w.done > 0 && (resumed || w.bytes >= RX_CHECK_MIN);
                g.sent += w.done;
                for _ in 0..w.responses {
                    if let Some(r) = g.rdma.irq.pop_front() {
                        g.rdma.irq_zero -= usize::from(r.zero);
                    }
                }
            }
            Err(e) => {
                if let Some(e) = rustix::io::Errno::from_io_error(&e) {
                    g.rx.note_failure(e);
                }
                // The socket is broken (reset, EPIPE): nothing queued can go any more, and a
                // socket that reports itself writable for ever must leave the leader's poll
                // set, or every blocking wait of the adapter would spin on it.
                g.tx.clear();
                g.shutdown_pending = false;
                if let Some(s) = &g.sock {
                    s.set_wants_write(false);
                }
                self.lost_connection(g);
                return;
            }
        }
        if g.conn == Conn::Closed {
            if g.shutdown_pending && !g.tx.has_output() {
                g.shutdown_pending = false;
                if let Some(s) = &g.sock {
                    let _ = s.get().shutdown(std::net::Shutdown::Write);
                }
            }
            return;
        }
        if finished && self.terminate_waits(g) {
            // TCP took (the rest of) a request only once the peer read what filled its
            // window, or while the peer read. A receiver that refuses a message (no Receive
            // for it within its bound, R-QP-7; one too long for its Receive, D5) sends its
            // Terminate first and then reads the stream empty, so the Terminate is in our
            // socket before the window opens: take it before completing, or the refused
            // Send would complete `ND_SUCCESS`. Anything else that waits there (the peer's
            // answer to what it received) is taken after the completions, in their order.
            self.progress_rx(g);
            if g.conn == Conn::Closed {
                return;
            }
        }
        self.complete_ready(g);
    }

    /// Whether the next FPDU waiting in the socket is a Terminate. Looked at only at a frame
    /// boundary with nothing buffered (`MSG_PEEK` of the MPA length, the DDP and the RDMAP
    /// control bytes; markers are never used); otherwise, or with the reader lent to a
    /// thread reading outside the lock, `false`.
    fn terminate_waits(&self, g: &Inner) -> bool {
        let rx = &g.rx;
        let at_boundary = rx.deframer.as_ref().is_some_and(|d| d.at_boundary());
        if rx.lent || rx.start != rx.end || !at_boundary {
            return false;
        }
        let Some(sock) = g.sock.as_ref() else {
            return false;
        };
        let mut head = [0u8; 4];
        let flags = rustix::net::RecvFlags::PEEK | rustix::net::RecvFlags::DONTWAIT;
        match rustix::net::recv(sock.get(), &mut head, flags) {
            // RFC 5044 §4.1 (ULPDU length), RFC 5041 §4 (DDP control), RFC 5040 §4.1 (RDMAP
            // control: its low four bits are the opcode).
            Ok((4, _)) => split_control_byte(head[3]).1 == Opcode::Terminate as u8,
            _ => false,
        }
    }
}
