//! The connection: the drive under the lock, Flush, the end of a connection (Terminate and
//! close), its establishment (active and passive, the RTR that completes Accept), and
//! Disconnect.

use std::sync::Weak;

use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped};
use netdirect_spi::{fail, Result, Status};
use netdirect_wire::handshake::{Negotiated, Rtr};
use netdirect_wire::rdmap::Terminate;
use socket2::Socket;

use super::{revoked_response, Conn, Ending, Inner, OutRead, ReadKind, TcpQp, TxKind};
use crate::claim::PortClaim;
use crate::engine::Source;
use crate::protect::ExpectedResponse;
use crate::sockets;

impl TcpQp {
    /// Drive this queue pair's I/O with the lock held.
    pub(crate) fn progress_locked(&self, g: &mut Inner) {
        if g.sock.is_none() {
            return;
        }
        if g.tx.has_output() {
            self.flush_tx(g);
        }
        g.rx.delivered = false;
        self.progress_rx(g);
        if g.conn == Conn::Closed {
            if g.tx.has_output() {
                self.flush_tx(g);
            }
            return;
        }
        // Read Responses may have freed ORD slots, lifted a fence, or proved Writes.
        self.encode_pending(g);
        self.complete_ready(g);
        if g.tx.has_output() {
            // Zero-length Read Responses (the peer's Write completion probes) may wait for
            // the next progress call, to leave with the application's next message: the
            // application, spinning on memory a peer writes, reacts before they are sent
            // (ndrpingpong's pattern). Not when a Receive was delivered (the application may
            // stop driving this connection), nor with the descriptor exported (only an edge
            // would bring us back). The next progress call, a post, or a blocking wait
            // (which polls for writability, `wants_write`) sends them.
            if g.lazy && !g.rx.delivered && !self.shared.engine.fd_exported() {
                if let Some(s) = &g.sock {
                    s.set_wants_write(true);
                }
            } else {
                self.flush_tx(g);
            }
        }
    }

    /// Flush every outstanding request with `ND_CANCELED` (the one a Terminate named, and the
    /// ones before it that were done, get their own status), Receives and initiator requests.
    pub(super) fn flush_all(&self, g: &mut Inner) {
        let failed = g.failed.take();
        let sent = g.sent;
        let mut i = 0;
        while let Some(wr) = g.sq.pop() {
            let seq = g.front_seq;
            g.front_seq += 1;
            let status = match failed {
                Some((f, st)) if f == seq => st,
                // Before the culprit: the target processed these in order, so they were placed.
                Some((f, _))
                    if seq < f
                        && wr.error.is_none()
                        && i < sent
                        && match wr.kind {
                            TxKind::Read { .. } => wr.answered == wr.parts,
                            _ => true,
                        } =>
                {
                    Status::SUCCESS
                }
                _ => Status::CANCELED,
            };
            self.complete_send(&wr, status);
            i += 1;
        }
        g.encoded = 0;
        g.sent = 0;
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx.reset_message();
        if let Some(s) = &g.sock {
            // No longer held for a Receive; what follows is read (and dropped) up to the end.
            s.set_wants_read(!g.rx.at_end());
        }
        let r = &mut g.rdma;
        r.orq.clear();
        r.irq.clear();
        r.irq_zero = 0;
        r.app_reads = 0;
        r.probe_out = false;
        // A window is usable through its queue pair only: with the connection gone it is
        // unbound, which also lets its region be deregistered.
        g.windows.unbind_all(&self.shared.mrs);
    }

    /// The connection is gone, found by a write (a reset, `EPIPE`, a dead path). What the
    /// peer sent before its end may still wait in the socket, and is read first: above all a
    /// Terminate naming the request it refused, sent just before its process exited or
    /// released the connection — the unread rest of our data then makes its kernel reset the
    /// connection, which our next write meets before any read (RFC 5040 §5.4: the Terminate
    /// says why). Then as [`TcpQp::stream_ended`].
    pub(crate) fn lost_connection(&self, g: &mut Inner) {
        if g.conn != Conn::Closed {
            // Read to the end whatever the last read said (`Rx::hung_up`); reading it ends
            // the connection (`stream_ended`), or a Terminate in it does.
            g.rx.hung_up();
            self.progress_rx(g);
        }
        self.stream_ended(g);
    }

    /// The connection is gone (peer closed, reset, or a local I/O error), found by a read:
    /// everything the peer sent before was read. A peer that only closed its sending side
    /// still reads: what is queued for it (Read Responses it asked for before its FIN) goes
    /// out if TCP takes it (RFC 5040 §6.2 graceful close).
    ///
    /// A dead peer or path (the socket's error was `ETIMEDOUT` or an unreachable network or
    /// host: `ND_TCP_TIMEOUT_MS` ran out, `sockets::watch_path`) fails the oldest outstanding
    /// request with `ND_IO_TIMEOUT` — the initiator queue's front, or with none there the
    /// oldest Receive — as an RNIC fails the request whose retries ran out; the rest are
    /// flushed `ND_CANCELED`. A peer that closed or reset the connection ends it as its
    /// Disconnect does: every request `ND_CANCELED` (a killed process's socket closes with a
    /// FIN or, with data unread, an RST: TCP cannot tell it from a Disconnect). Either way
    /// `NotifyDisconnect` completes (docs/WIRE.md §4.5).
    pub(crate) fn stream_ended(&self, g: &mut Inner) {
        if g.conn == Conn::Closed {
            return;
        }
        if let Some(status) = g.rx.failure.and_then(sockets::failure_status) {
            self.fail_oldest(g, status);
        }
        self.close(g, Status::CONNECTION_REFUSED, Ending::Graceful);
    }

    /// Mark the oldest outstanding request to complete with `status` when the connection is
    /// flushed (`flush_all`), or complete the oldest Receive with it now if no initiator
    /// request is outstanding.
    fn fail_oldest(&self, g: &mut Inner, status: Status) {
        if !g.sq.is_empty() {
            g.failed.get_or_insert((g.front_seq, status));
        } else if let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, status, 0, false);
        }
    }

    /// Tear down because of a protocol error: one Terminate after the frame on the wire (never
    /// spliced into it, as siw does), then flush and close (RFC 5040 §5.4, §6.2.1).
    pub(crate) fn terminate(&self, g: &mut Inner, term: Terminate) {
        self.close(g, Status::CONNECTION_REFUSED, Ending::Terminate(term));
    }

    /// Tear down after a local error; `status` is what a pending Accept gets.
    pub(super) fn end(&self, g: &mut Inner, term: Terminate, status: Status) {
        self.close(g, status, Ending::Terminate(term));
    }

    /// Close the connection: settle the output, flush every request, FIN, finish waiters.
    /// `accept_status` is what a pending Accept gets (D9: the active side went away).
    pub(super) fn close(&self, g: &mut Inner, accept_status: Status, how: Ending) {
        if g.conn == Conn::Closed && g.sock.is_none() {
            return;
        }
        let was_open = g.conn != Conn::Closed;
        g.conn = Conn::Closed;
        if let Some(sock) = g.sock.as_ref().map(|s| s.get()) {
            // Whichever end closes first, a TIME_WAIT it leaves does not keep a later
            // connector from the port (`sockets::bind_nd`).
            sockets::reusable_when_closed(sock);
            // Nor does the connector port space: another connector may Bind the port now.
            g.port_claim = None;
            if was_open {
                match how {
                    Ending::Graceful | Ending::Terminate(_) => {
                        // What was queued before the end (among it Read Responses the peer
                        // waits for) goes if TCP takes it now, unless a Response in it may no
                        // longer be read (`revoked_response`); the rest is dropped, keeping the
                        // stream framed (the frame on the wire was taken before).
                        let readable = revoked_response(&g.rdma).is_none();
                        if readable && g.tx.write_to(sock).is_err() {
                            // A broken socket (reset): nothing queued can go.
                            g.tx.clear();
                        }
                        g.tx.cut_to_current_frame();
                        if let Ending::Terminate(t) = how {
                            // Exactly one Terminate per stream (RFC 5040 §5.4).
                            g.tx.encode_terminate(&t, g.crc);
                        }
                    }
                    Ending::Abort => g.tx.clear(),
                }
                if g.tx.write_to(sock).is_err() {
                    g.tx.clear();
                }
            }
            g.lazy = false;
            // Exactly while output is left: a stream that wants writing stays in the sleeping
            // thread's poll set, and a socket shut down for writing reports itself writable
            // for ever, so a wish left over (deferred probe answers, written just above)
            // would make every blocking wait of the adapter spin.
            if let Some(s) = &g.sock {
                s.set_wants_write(g.tx.has_output());
            }
            if g.tx.has_output() {
                // The rest (and the FIN) go as the socket drains; closing never turns into
                // an RST that would destroy a Terminate still in flight.
                g.shutdown_pending = true;
            } else {
                let _ = sock.shutdown(std::net::Shutdown::Write);
            }
        }
        self.flush_all(g);
        if let Some(a) = g.accept.take() {
            a.complete(accept_status);
        }
        g.disconnect_waiters.complete_all((), Status::SUCCESS);
        // Keep the socket (and its registration) until the queue pair goes away.
    }

    /// Attach an established connection (active side, at `CompleteConnect`).
    pub(crate) fn establish_active(
        &self,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
    ) -> Result<()> {
        let mut g = self.lock();
        // Our IRD is what we announced; our ORD what the acceptor's IRD allows of ours
        // (RFC 6581 §9.1; without the v2 word, what we asked for).
        let ord = if neg.enhanced {
            neg.local_ord.min(neg.peer_ird)
        } else {
            neg.local_ord
        };
        let (ird, ord) = (u32::from(neg.local_ird), u32::from(ord));
        self.attach_socket(&mut g, sock, neg, leftover, ird, ord)?;
        g.conn = Conn::Established;
        match neg.rtr {
            Some(Rtr::Write) => {
                let crc = g.crc;
                g.tx.encode_rtr_write(crc);
            }
            Some(Rtr::Read) => {
                let crc = g.crc;
                g.tx.encode_rtr_read(crc);
                g.rdma.issued += 1;
                g.rdma.orq.push_back(OutRead {
                    kind: ReadKind::Rtr,
                    expect: ExpectedResponse {
                        sink_stag: 0,
                        sink_to: 0,
                        size: 0,
                        got: 0,
                    },
                });
            }
            None => {}
        }
        self.encode_pending(&mut g);
        self.flush_tx(&mut g);
        self.progress_rx(&mut g);
        Ok(())
    }

    /// Keep the claim on the connector's explicit port, if any, while the connection lasts
    /// (R-CONN-2, `crate::claim`); dropped when it closes.
    pub(crate) fn hold_port_claim(&self, claim: Option<PortClaim>) {
        self.lock().port_claim = claim;
    }

    /// Attach an accepted connection (passive side, at `Accept`): wait for the RTR.
    pub(crate) fn establish_passive(
        &self,
        sock: Socket,
        neg: &Negotiated,
        accept: OvCompleter,
    ) -> Result<()> {
        let mut g = self.lock();
        let (ird, ord) = (u32::from(neg.local_ird), u32::from(neg.local_ord));
        self.attach_socket(&mut g, sock, neg, &[], ird, ord)?;
        g.conn = Conn::AwaitRtr;
        g.accept = Some(accept);
        // The whole drive: the RTR, and a Read Request behind it, may be in the socket
        // already; what they make us send (a Read Response) goes out now, not at a later poll
        // that a blocking application may never make.
        self.progress_locked(&mut g);
        Ok(())
    }

    fn attach_socket(
        &self,
        g: &mut Inner,
        sock: Socket,
        neg: &Negotiated,
        leftover: &[u8],
        ird: u32,
        ord: u32,
    ) -> Result<()> {
        if g.conn != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let src: Weak<dyn Source> = self.me.clone();
        g.sock = Some(self.shared.engine.add_stream(sock, src));
        g.crc = neg.crc;
        g.was_connected = true;
        g.rdma.ird = ird;
        g.rdma.ord = ord;
        g.rdma.probe = neg.probe;
        g.rx.start(neg.crc, leftover);
        g.tx.start(self.shared.config.mulpdu);
        Ok(())
    }

    /// The first FPDU arrived on the passive side: the connection is fully established.
    pub(super) fn rtr_received(&self, g: &mut Inner) {
        if g.conn == Conn::AwaitRtr {
            g.conn = Conn::Established;
            if let Some(a) = g.accept.take() {
                a.complete(Status::SUCCESS);
            }
            self.encode_pending(g);
        }
    }

    /// Whether the queue pair is attached to a connection (or was).
    pub(crate) fn conn(&self) -> Conn {
        self.lock().conn
    }

    /// `IND2Connector::Disconnect`: flush, send FIN; completes at once.
    pub(crate) fn disconnect(&self) {
        let mut g = self.lock();
        self.close(&mut g, Status::CONNECTION_REFUSED, Ending::Graceful);
    }

    /// `IND2Connector::NotifyDisconnect`.
    pub(crate) fn notify_disconnect(&self) -> Overlapped {
        let mut g = self.lock();
        let ended = g.conn == Conn::Closed;
        g.disconnect_waiters
            .wait_for_event((), ended, self.shared.engine.clone())
    }

    /// Cancel a pending NotifyDisconnect (connector's `CancelOverlappedRequests`).
    pub(crate) fn cancel_notify_disconnect(&self) {
        self.lock().disconnect_waiters.cancel_all();
    }

    /// Cancel a pending Accept (connector's `CancelOverlappedRequests`): abandons the connection.
    pub(crate) fn cancel_accept(&self) {
        let mut g = self.lock();
        if let Some(a) = g.accept.take() {
            a.complete(Status::CANCELED);
            // The same CancelOverlappedRequests cancels a NotifyDisconnect posted meanwhile
            // (R-CANCEL-1), after the Accept (FIFO), not with the success the close gives it.
            g.disconnect_waiters.cancel_all();
            self.close(&mut g, Status::CANCELED, Ending::Abort);
        }
    }
}
