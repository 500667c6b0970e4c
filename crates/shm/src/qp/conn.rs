//! The connection's life: the drive under the lock, held acknowledgements, establishment,
//! Disconnect and NotifyDisconnect, the flush and the end of the connection.

use std::sync::atomic::Ordering;
use std::sync::Arc;

use netdirect_spi::kit::overlapped::{OvCompleter, Overlapped};
use netdirect_spi::{fail, Result, Status};

use super::tx::Halt;
use super::{Answer, Conn, Inner, MapOut, ShmQp};
use crate::link::Link;
use crate::mem::Owned;
use crate::ring::{kind, Consumer, Producer, Violation};

impl ShmQp {
    /// Wake the peer if we published records since the last check (the changer's half of
    /// the wake-up handshake, `ring::wake`).
    pub(super) fn flush_wake(&self, g: &mut Inner) {
        if g.wake_owed {
            g.wake_owed = false;
            if let Some(link) = self.link.get() {
                link.wake_peer();
            }
        }
    }

    /// The peer's one-sided request broke our protection rules: tell it with a TERM record
    /// (its request completes `ND_ACCESS_VIOLATION`), then end the connection; our own
    /// outstanding requests are flushed with `ND_CANCELED` (R-QP-6). Not one byte was placed
    /// or read.
    pub(super) fn refuse(&self, g: &mut Inner, link: &Link) {
        self.last_word(g, link, kind::TERM, 0);
    }

    /// End the connection with the record `kind` (TERM, RNR, OVERRUN): the answers still owed
    /// for the peer's earlier requests go first (they were served), then the record, then the
    /// close. The connection ends for the application at once (its requests are flushed). If
    /// our ring has no room for all of it, the link lingers until it has ([`ShmQp::linger`]):
    /// dropped, the record would leave the peer's request to complete `ND_CANCELED` instead
    /// of with the status it names.
    pub(super) fn last_word(&self, g: &mut Inner, link: &Link, kind: u8, total: u32) {
        if g.conn == Conn::Closed {
            return;
        }
        g.last_word = Some((kind, total));
        self.end_for_application(g, Status::CONNECTION_REFUSED);
        self.linger(g, link);
    }

    /// Drive a link whose connection ended with a last word still owed: drop what the peer
    /// publishes meanwhile (a peer that waits for room in its own ring, to tell us its end,
    /// must not wait for ours), push what is owed as room allows, and close the link once all
    /// of it is in the ring or never can be (the peer closed or broke the ring protocol, or
    /// an answer cannot go in because our own message was cut off mid-way). Until then the
    /// link stays blocked for room, so the peer's consumption wakes or drives us
    /// (`Link::has_work`).
    pub(super) fn linger(&self, g: &mut Inner, link: &Link) {
        let Some((kind, total)) = g.last_word else {
            return;
        };
        let tx = link.tx();
        let done = link.peer_closed()
            || link.peer_eof.load(Ordering::Acquire)
            || self.discard_rx(g, link).is_err()
            || match self.push_answers(g, &tx) {
                // A revoked Read response was dropped with the answers after it: the last
                // word follows what went before it.
                Ok(true) | Err(Halt::Revoked) => match g.prod.has_room(&tx, 0) {
                    Ok(true) => {
                        g.prod.push_header(&tx, kind, 0, total, &Owned(&[]), 0, 0);
                        true
                    }
                    Ok(false) => false,
                    Err(Violation) => true,
                },
                // Short of room, unless a response waits behind our own message, whose rest
                // will never come (its Send was flushed): then it never goes.
                Ok(false) => {
                    (g.tx_sent > 0 || g.tx_hdr)
                        && g.answers.front().is_some_and(|a| !a.goes_mid_message())
                }
                Err(Halt::Violation) => true,
            };
        link.wake_peer();
        if done {
            self.close_link(g, link);
        } else {
            link.block_for_room(g.prod.seen_tails());
        }
    }

    /// The queue pair is going away: a lingering last word goes now if it fits, and the link
    /// closes either way.
    pub(super) fn stop_lingering(&self, g: &mut Inner) {
        if g.last_word.is_none() {
            return;
        }
        if let Some(link) = g.link.clone() {
            self.linger(g, &link);
            self.close_link(g, &link);
        }
    }

    /// Drive this queue pair with the lock held.
    #[inline]
    pub(super) fn progress_locked(&self, g: &mut Inner) {
        if g.acks_held {
            // What an earlier pass held goes now (module docs: held acknowledgements), with
            // whatever this pass owes (`progress_tx` releases it).
            self.progress_rx(g);
            self.progress_tx(g);
        } else {
            let took = g.rx_msgs;
            self.progress_rx(g);
            if (!g.sq.is_empty() || !g.answers.is_empty()) && !self.may_hold_acks(g, took) {
                self.progress_tx(g);
            }
        }
        self.flush_wake(g);
    }

    /// Whether the ACKs this pass owes may wait for the application's next call (module docs:
    /// held acknowledgements); if so they are marked held. `took`: the count of the peer's
    /// messages taken before the pass. (Out of line: the Send path only tests its condition.)
    #[inline(never)]
    fn may_hold_acks(&self, g: &mut Inner, took: u32) -> bool {
        let Some(link) = self.link.get() else {
            return false;
        };
        if g.conn != Conn::Established
            || g.rx_msgs != took
            || g.sq.len() != g.in_ring
            || g.answers.is_empty()
            || !g.answers.iter().all(|a| matches!(a, Answer::Ack))
            || link.tx_blocked.load(Ordering::Relaxed)
        {
            return false;
        }
        // The flag first, then the look for waiters (both SeqCst): a thread that enters a wait
        // after the look arms the link and finds the flag (`Link::has_work`).
        link.acks_held.store(true, Ordering::SeqCst);
        if self.shared.engine.anyone_waiting() {
            link.acks_held.store(false, Ordering::Relaxed);
            return false;
        }
        g.acks_held = true;
        true
    }

    /// The held ACKs are no longer held (they are about to be pushed, or one rides on a
    /// Write).
    pub(super) fn release_acks(&self, g: &mut Inner) {
        if !g.acks_held {
            return;
        }
        g.acks_held = false;
        if let Some(link) = self.link.get() {
            // A poller that still sees `true` drives the queue pair once for nothing.
            link.acks_held.store(false, Ordering::Relaxed);
        }
    }

    /// A post that cannot carry a held ACK pushes the held ones first, so that it may still go
    /// straight into the ring (an inline Send need not capture its bytes).
    #[inline]
    pub(super) fn push_held_acks(&self, g: &mut Inner) {
        if g.acks_held {
            self.push_held_acks_now(g);
        }
    }

    #[inline(never)]
    fn push_held_acks_now(&self, g: &mut Inner) {
        self.release_acks(g);
        let Some(link) = self.link.get() else { return };
        match self.push_answers(g, &link.tx()) {
            Ok(_) => link.wake_peer(),
            Err(Halt::Violation) => self.close(g, Status::CONNECTION_REFUSED),
            Err(Halt::Revoked) => self.refuse(g, link),
        }
    }

    /// A poll: cheap when there is nothing to do (no lock, no syscall).
    pub(crate) fn poll(&self) {
        if let Some(link) = self.link.get() {
            link.poll_fast();
        }
    }

    /// Drive the queue pair now.
    pub(crate) fn progress_now(&self) {
        let mut g = self.lock();
        self.progress_locked(&mut g);
    }

    /// Flush every outstanding request with `ND_CANCELED`, and forget what the connection
    /// owed or held for the peer.
    pub(super) fn flush_all(&self, g: &mut Inner) {
        self.flush_requests(g);
        self.forget_peer(g);
    }

    /// Flush every outstanding request of ours with `ND_CANCELED` (the answers owed to the
    /// peer stay: [`ShmQp::forget_peer`]).
    fn flush_requests(&self, g: &mut Inner) {
        self.release_acks(g);
        g.in_ring = 0;
        g.reads_out = 0;
        while let Some(wr) = g.sq.pop() {
            self.complete_wr(&wr, Status::CANCELED);
        }
        while let Some(wr) = g.rq.pop() {
            self.complete_recv(wr.context, Status::CANCELED, 0, false);
        }
        g.rx_msg = None;
        g.rx_reg = None;
        g.map_out = MapOut::Idle;
        // The peer's memory is ours to write no more.
        g.leases.clear();
        g.lease_asking = false;
        // A window is usable through its queue pair only: with the connection gone it is
        // unbound, which also lets its region be deregistered (as tcp).
        g.windows.unbind_all(&self.shared.mrs);
    }

    /// Drop what the connection owed the peer (answers, a last word) and the registration the
    /// peer's granted copy used, and where our own message being pushed stood.
    fn forget_peer(&self, g: &mut Inner) {
        g.tx_sent = 0;
        g.tx_hdr = false;
        g.answers.clear();
        g.answers_reads = 0;
        g.last_word = None;
        g.map_hold = None;
    }

    /// Close the connection: tell the peer, flush, finish waiters. `accept_status` is what a
    /// pending Accept gets (D9: the active side went away).
    pub(super) fn close(&self, g: &mut Inner, accept_status: Status) {
        if g.conn == Conn::Closed {
            return;
        }
        self.end_for_application(g, accept_status);
        if let Some(link) = g.link.clone() {
            self.close_link(g, &link);
        } else {
            self.forget_peer(g);
        }
    }

    /// The connection ends for the application: our requests are flushed, a pending Accept
    /// and every NotifyDisconnect complete. The link may still carry a last word
    /// ([`ShmQp::linger`]).
    fn end_for_application(&self, g: &mut Inner, accept_status: Status) {
        g.conn = Conn::Closed;
        // No Write of the peer's lands in our memory after this (a Terminate, a Disconnect):
        // its leases die before its records are dropped (`mapped`).
        self.revoke_leases(g);
        if let Some(link) = &g.link {
            // Nothing is taken from the ring any more: no Receive to wait for.
            link.rx_stalled.store(false, Ordering::Release);
            link.rnr_deadline.store(0, Ordering::Relaxed);
        }
        self.flush_requests(g);
        if let Some(a) = g.accept.take() {
            a.complete(accept_status);
        }
        g.disconnect_waiters.complete_all((), Status::SUCCESS);
    }

    /// Tell the peer the connection ended (after everything we pushed) and let go of what it
    /// held of the peer's.
    fn close_link(&self, g: &mut Inner, link: &Link) {
        link.close_local();
        if g.map_hold.is_some() {
            // The peer may be copying through the mapping we granted: the registration
            // stays held until it is done (a Deregister waits for that).
            link.wait_peer_copy();
        }
        self.forget_peer(g);
    }

    pub(super) fn attach(&self, g: &mut Inner, link: Arc<Link>) -> Result<()> {
        if g.conn != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        let _ = self.link.set(link.clone());
        g.link = Some(link);
        g.prod = Producer::default();
        g.cons = Consumer::default();
        Ok(())
    }

    /// Let the completion queues poll `link` (before taking our lock: see `ShmCq::poll_links`).
    fn register_link(&self, link: &Arc<Link>) {
        self.rcq.add_link(link);
        if !Arc::ptr_eq(&self.rcq, &self.icq) {
            self.icq.add_link(link);
        }
    }

    /// Active side, at `CompleteConnect`: the first record is the RTR. `ird`/`ord` are the
    /// connection's negotiated read limits from this side's point of view.
    pub(crate) fn establish_active(&self, link: Arc<Link>, ird: u32, ord: u32) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link.clone())?;
        (g.ird, g.ord) = (ird, ord);
        g.conn = Conn::Established;
        let tx = link.tx();
        if g.prod.has_room(&tx, 0) != Ok(true) {
            self.close(&mut g, Status::CONNECTION_REFUSED);
            return Ok(());
        }
        g.prod.push_inline(&tx, kind::RTR, 0, &Owned(&[]), 0, 0);
        g.prod.mark();
        link.wake_peer();
        self.progress_locked(&mut g);
        Ok(())
    }

    /// Passive side, at `Accept`: wait for the RTR.
    pub(crate) fn establish_passive(
        &self,
        link: Arc<Link>,
        accept: OvCompleter,
        ird: u32,
        ord: u32,
    ) -> Result<()> {
        if self.conn() != Conn::Idle {
            return fail(Status::CONNECTION_ACTIVE);
        }
        self.register_link(&link);
        let mut g = self.lock();
        self.attach(&mut g, link)?;
        (g.ird, g.ord) = (ird, ord);
        g.conn = Conn::AwaitRtr;
        g.accept = Some(accept);
        self.progress_locked(&mut g);
        Ok(())
    }

    pub(super) fn rtr_received(&self, g: &mut Inner) {
        g.conn = Conn::Established;
        if let Some(a) = g.accept.take() {
            a.complete(Status::SUCCESS);
        }
        self.progress_tx(g);
    }

    pub(crate) fn conn(&self) -> Conn {
        self.lock().conn
    }

    /// `IND2Connector::Disconnect`: flush, tell the peer; completes at once.
    pub(crate) fn disconnect(&self) {
        let mut g = self.lock();
        // The peer's Writes we placed complete successfully: their held ACKs go first.
        self.push_held_acks(&mut g);
        self.close(&mut g, Status::CONNECTION_REFUSED);
    }

    /// `IND2Connector::NotifyDisconnect`.
    pub(crate) fn notify_disconnect(&self) -> Overlapped {
        let mut g = self.lock();
        let ended = g.conn == Conn::Closed;
        g.disconnect_waiters
            .wait_for_event((), ended, self.shared.engine.clone())
    }

    pub(crate) fn cancel_notify_disconnect(&self) {
        self.lock().disconnect_waiters.cancel_all();
    }

    /// Cancel a pending Accept: abandons the connection.
    pub(crate) fn cancel_accept(&self) {
        let mut g = self.lock();
        if let Some(a) = g.accept.take() {
            a.complete(Status::CANCELED);
            // The same CancelOverlappedRequests cancels a NotifyDisconnect posted meanwhile
            // (R-CANCEL-1), after the Accept (FIFO), not with the success the close gives it.
            g.disconnect_waiters.cancel_all();
            self.close(&mut g, Status::CANCELED);
        }
    }
}
