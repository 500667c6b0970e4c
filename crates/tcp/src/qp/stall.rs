//! A Send that finds no Receive: the Receive taken from the shared receive queue, and the
//! stall that holds the stream until one is posted or `ND_TCP_RNR_TIMEOUT_MS` ends the
//! connection (R-QP-7).

use std::sync::Weak;
use std::time::Instant;

use netdirect_wire::fpdu::SegmentHeader;
use netdirect_wire::rdmap::TermError;

use super::{Inner, TcpQp};
use crate::engine::Source;

impl TcpQp {
    /// Take the SRQ's oldest Receive into `rq` for the message arriving now. `false` when this
    /// queue pair has no SRQ, or the SRQ is empty (the queue pair is then on its stalled list
    /// and the next post there drives it: [`TcpQp::srq_posted`]).
    pub(super) fn take_from_srq(&self, g: &mut Inner) -> bool {
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
    /// the poster took it off): resume the held Send on the poster's thread.
    pub(crate) fn srq_posted(&self) {
        let mut g = self.lock();
        g.srq_listed = false;
        self.progress_locked(&mut g);
    }

    /// An inbound Send found no Receive: hold it (and the stream behind it) and start the
    /// `ND_TCP_RNR_TIMEOUT_MS` clock, once per stall, with at most one engine timer per queue
    /// pair (R-QP-7).
    pub(super) fn stall(&self, g: &mut Inner, h: SegmentHeader) {
        g.rx.stalled = Some(h);
        // The rest stays in the socket until a Receive comes: a blocked waiter must not
        // wake for it (the post or the RNR timer resumes the stream).
        if let Some(s) = &g.sock {
            s.set_wants_read(false);
        }
        let since = *g.rx.stall_since.get_or_insert_with(Instant::now);
        if !g.rx.timer_armed {
            g.rx.timer_armed = true;
            let src: Weak<dyn Source> = self.me.clone();
            self.shared
                .engine
                .add_timer(since + self.shared.config.rnr_timeout, src);
        }
    }

    /// End the connection if the current stall has lasted `ND_TCP_RNR_TIMEOUT_MS` (see
    /// `on_timer`); otherwise return its deadline, if there is a stall.
    pub(super) fn stall_expired(&self, g: &mut Inner) -> Option<Instant> {
        let (Some(h), Some(since)) = (g.rx.stalled, g.rx.stall_since) else {
            return None;
        };
        let deadline = since + self.shared.config.rnr_timeout;
        if Instant::now() < deadline {
            return Some(deadline);
        }
        tracing::debug!(qp = self.id, "no Receive for an inbound Send in time");
        self.terminate(g, h.terminate_for(TermError::DdpUntaggedNoBuffer));
        None
    }
}
