//! `IND2SharedReceiveQueue` for the `shm` provider (IND2SharedReceiveQueue in Microsoft's NetworkDirect SPI reference,
//! `docs/ND-RULES.md` §2.6): the SPI kit's [`Srq`], which holds the Receives, their checks and
//! the list of stalled queue pairs, plugged into this provider's adapter and queue pair.
//!
//! # A message that finds the queue empty
//!
//! The queue pair takes a Receive when the first record of a message reaches the front of its
//! ring. When there is none, the record simply stays in the ring (the sender's later records
//! queue behind it, and the ring's back-pressure reaches the sender once it is full), and the
//! queue pair waits on the queue's stalled list until the next `Receive` posted there drives
//! it ([`ShmQp::srq_posted`]). Everything behind the held message waits with it, the sender's
//! one-sided requests too: their answers (ACK, Read response, GRANT) go out once the message
//! is taken, or the connection ends at the receiver-not-ready bound. A Receive posted on the
//! queue pair itself drives it the same way.

use netdirect_spi::kit::srq::{Srq, SrqProvider};

use crate::adapter::Shared;
use crate::qp::ShmQp;
use crate::Shm;

/// A shared receive queue of this provider.
pub(crate) type ShmSrq = Srq<Shm>;

impl SrqProvider for Shm {
    type Adapter = Shared;
    type Qp = ShmQp;

    fn srq_posted(qp: &ShmQp) {
        qp.srq_posted();
    }
}
