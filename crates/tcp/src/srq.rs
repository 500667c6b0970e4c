//! `IND2SharedReceiveQueue` for the `tcp` provider (IND2SharedReceiveQueue in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.6): the SPI kit's [`Srq`], which holds the Receives, their checks and
//! the list of stalled queue pairs, plugged into this provider's adapter and queue pair.
//!
//! # A Send that finds the queue empty
//!
//! The queue pair takes a Receive when the first segment of a Send arrives. When there is
//! none, it stops reading its stream (TCP back-pressure reaches the sender) and waits on the
//! queue's stalled list until the next `Receive` posted there drives it
//! ([`TcpQp::srq_posted`]). A queue pair still stalled after `ND_TCP_RNR_TIMEOUT_MS` ends its
//! connection (`qp::rx`, R-QP-7).

use netdirect_spi::kit::srq::{Srq, SrqProvider};

use crate::adapter::Shared;
use crate::qp::TcpQp;
use crate::Tcp;

/// A shared receive queue of this provider.
pub(crate) type TcpSrq = Srq<Tcp>;

impl SrqProvider for Tcp {
    type Adapter = Shared;
    type Qp = TcpQp;

    fn srq_posted(qp: &TcpQp) {
        qp.srq_posted();
    }
}
