//! Per-stream DDP message sequencing (RFC 5041 §4.3, §5; siw behaviour in
//! docs/WIRE.md §3.5, §3.6 and §6.2 items 5–6).
//!
//! * [`TxMsn`] hands out outbound MSNs, one counter per untagged queue.
//! * [`RxSequencer`] checks inbound segments: QN, MSN, MO for untagged
//!   messages, STag/TO continuity for tagged ones, and that at most one
//!   tagged and one untagged message are partially received at any time.
//!
//! Buffer checks (is a Receive posted, is the STag valid, does the data fit)
//! are the caller's: they need state this crate does not have.

use crate::ddp::{DdpHeader, TaggedHeader, UntaggedHeader, QN_TERMINATE};
use crate::rdmap::{Opcode, TermError};

/// Number of untagged queues this crate knows (QN 0, 1, 2).
const QUEUES: usize = QN_TERMINATE as usize + 1;

/// Outbound MSN counters, one per QN (0 Sends, 1 Read Requests, 2 Terminate).
/// The first message on each queue gets MSN 1; MSNs wrap from 0xFFFF_FFFF to
/// 0 (RFC 5041 §4.3).
#[derive(Debug, Clone, Default)]
pub struct TxMsn {
    last: [u32; QUEUES],
}

impl TxMsn {
    /// All queues before their first message.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// The MSN for the next message on `qn` (advances the counter).
    ///
    /// # Panics
    ///
    /// If `qn > 2` (a local bug: use [`crate::ddp::QN_SEND`],
    /// [`crate::ddp::QN_READ_REQUEST`] or [`crate::ddp::QN_TERMINATE`]).
    pub fn next(&mut self, qn: u32) -> u32 {
        let c = &mut self.last[qn as usize];
        *c = c.wrapping_add(1);
        *c
    }

    /// The MSN the next message on `qn` will get, without advancing.
    ///
    /// # Panics
    ///
    /// If `qn > 2`.
    #[must_use]
    pub fn peek(&self, qn: u32) -> u32 {
        self.last[qn as usize].wrapping_add(1)
    }
}

/// Where a validated segment sits in its message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SegmentPosition {
    /// First segment of the message (MO 0 / first tagged segment).
    pub first: bool,
    /// Last segment (L bit): the message is complete after this segment.
    pub last: bool,
    /// Offset of this segment's payload within the message: the MO for
    /// untagged messages, bytes already received for tagged ones.
    pub offset: u64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartialUntagged {
    qn: u32,
    msn: u32,
    received: u32,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct PartialTagged {
    opcode: Opcode,
    stag: u32,
    next_to: u64,
    received: u64,
}

/// Inbound sequence checks for one DDP stream.
///
/// For untagged segments: QN ∈ {0, 1, 2} (else 0x1/0x2/0x01), MSN equal to
/// the next expected MSN of that QN (else 0x1/0x2/0x03), MO equal to the bytes
/// already received of the message (else 0x1/0x2/0x04). For tagged segments
/// after the first of a message: same opcode and STag (else 0x1/0x1/0x00) and
/// TO continuing exactly (else 0x1/0x1/0x01); a TO range that wraps 64 bits is
/// 0x1/0x1/0x03. Interleaving a second untagged message into a partial one is
/// an MSN error (0x1/0x2/0x03), as siw only accepts one partial tagged and
/// one partial untagged message (docs/WIRE.md §3.6).
///
/// A message is complete at its L = 1 segment, which advances the expected
/// MSN of its queue. On error nothing is changed (the stream is dead anyway).
#[derive(Debug, Clone)]
pub struct RxSequencer {
    expected: [u32; QUEUES],
    untagged: Option<PartialUntagged>,
    tagged: Option<PartialTagged>,
}

impl Default for RxSequencer {
    fn default() -> Self {
        Self::new()
    }
}

impl RxSequencer {
    /// A stream before its first segment: every queue expects MSN 1
    /// (RFC 5041 §4.3).
    #[must_use]
    pub fn new() -> Self {
        Self {
            expected: [1; QUEUES],
            untagged: None,
            tagged: None,
        }
    }

    /// The MSN expected next on `qn`, `None` for an unknown queue.
    #[must_use]
    pub fn expected_msn(&self, qn: u32) -> Option<u32> {
        self.expected.get(qn as usize).copied()
    }

    /// `true` while a message has been partly received (a TCP FIN now would
    /// cut it).
    #[must_use]
    pub fn in_message(&self) -> bool {
        self.untagged.is_some() || self.tagged.is_some()
    }

    /// Validates one segment (its header and payload length) and records it.
    ///
    /// # Errors
    ///
    /// The DDP error to report in a Terminate (see the type's documentation).
    pub fn check(
        &mut self,
        ddp: &DdpHeader,
        payload_len: u32,
    ) -> Result<SegmentPosition, TermError> {
        match ddp {
            DdpHeader::Untagged(h) => self.check_untagged(h, payload_len),
            DdpHeader::Tagged(h) => self.check_tagged(h, payload_len),
        }
    }

    fn check_untagged(
        &mut self,
        h: &UntaggedHeader,
        len: u32,
    ) -> Result<SegmentPosition, TermError> {
        // RFC 5041 §7.2: invalid QN.
        let q = usize::try_from(h.qn)
            .ok()
            .filter(|&q| q < QUEUES)
            .ok_or(TermError::DdpUntaggedInvalidQn)?;
        // A Terminate may cut into a partial message of another queue: the sender stops its
        // output at a segment boundary and sends it last (RFC 5040 §5.6.1).
        // It is checked on its own queue and leaves the partial message as it is.
        if h.qn == QN_TERMINATE && h.last && self.untagged.is_some_and(|p| p.qn != h.qn) {
            if h.msn != self.expected[q] {
                return Err(TermError::DdpUntaggedInvalidMsnRange);
            }
            if h.mo != 0 {
                return Err(TermError::DdpUntaggedInvalidMo);
            }
            self.expected[q] = self.expected[q].wrapping_add(1);
            return Ok(SegmentPosition {
                first: true,
                last: true,
                offset: 0,
            });
        }
        let first = match self.untagged {
            Some(p) if p.qn == h.qn && p.msn == h.msn => {
                // RFC 5041 §5.3: MO = bytes already received of this message.
                if h.mo != p.received {
                    return Err(TermError::DdpUntaggedInvalidMo);
                }
                false
            }
            // Another message while one is partial: siw's "packet
            // intersection"; the MSN is not the one in progress.
            Some(_) => return Err(TermError::DdpUntaggedInvalidMsnRange),
            None => {
                // RFC 5041 §4.3: next MSN of this queue, starting at MO 0.
                if h.msn != self.expected[q] {
                    return Err(TermError::DdpUntaggedInvalidMsnRange);
                }
                if h.mo != 0 {
                    return Err(TermError::DdpUntaggedInvalidMo);
                }
                true
            }
        };
        // RFC 5041 §5.1: a message is shorter than 2^32 bytes.
        let received =
            h.mo.checked_add(len)
                .ok_or(TermError::DdpUntaggedMessageTooLong)?;
        if h.last {
            self.expected[q] = self.expected[q].wrapping_add(1);
            self.untagged = None;
        } else {
            self.untagged = Some(PartialUntagged {
                qn: h.qn,
                msn: h.msn,
                received,
            });
        }
        Ok(SegmentPosition {
            first,
            last: h.last,
            offset: u64::from(h.mo),
        })
    }

    fn check_tagged(&mut self, h: &TaggedHeader, len: u32) -> Result<SegmentPosition, TermError> {
        let (first, offset) = match self.tagged {
            Some(p) => {
                // siw `siw_write_check_ntoh` / `siw_rresp_check_ntoh`: same
                // STag, contiguous TO.
                if p.opcode != h.opcode || p.stag != h.stag {
                    return Err(TermError::DdpTaggedInvalidStag);
                }
                if p.next_to != h.to {
                    return Err(TermError::DdpTaggedBaseBounds);
                }
                (false, p.received)
            }
            None => (true, 0),
        };
        // RFC 5041 §7.1: TO + length must not wrap (non-empty segments only;
        // a zero-length segment's STag/TO are not checked, RFC 5041 §5.2).
        if len > 0 && h.to.checked_add(u64::from(len) - 1).is_none() {
            return Err(TermError::DdpTaggedToWrap);
        }
        if h.last {
            self.tagged = None;
        } else {
            self.tagged = Some(PartialTagged {
                opcode: h.opcode,
                stag: h.stag,
                next_to: h.to.wrapping_add(u64::from(len)),
                received: offset + u64::from(len),
            });
        }
        Ok(SegmentPosition {
            first,
            last: h.last,
            offset,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ddp::{QN_READ_REQUEST, QN_SEND};

    fn send(msn: u32, mo: u32, last: bool) -> DdpHeader {
        DdpHeader::send(Opcode::Send, msn, mo, last, 0)
    }

    #[test]
    fn tx_msn_starts_at_one_per_queue() {
        let mut tx = TxMsn::new();
        assert_eq!(tx.peek(QN_SEND), 1);
        assert_eq!(tx.next(QN_SEND), 1);
        assert_eq!(tx.next(QN_SEND), 2);
        assert_eq!(tx.next(QN_READ_REQUEST), 1);
        assert_eq!(tx.next(QN_TERMINATE), 1);
    }

    #[test]
    fn multi_segment_send() {
        let mut rx = RxSequencer::new();
        let p = rx.check(&send(1, 0, false), 1482).unwrap();
        assert!(p.first && !p.last);
        assert!(rx.in_message());
        let p = rx.check(&send(1, 1482, true), 566).unwrap();
        assert!(!p.first && p.last && p.offset == 1482);
        assert_eq!(rx.expected_msn(QN_SEND), Some(2));
        assert!(!rx.in_message());
    }

    /// A Terminate cuts into a Send that is partly received (the sender stopped at a segment
    /// boundary): accepted on its own queue; a second one, or another Send, is not.
    #[test]
    fn a_terminate_may_cut_into_a_partial_send() {
        let mut rx = RxSequencer::new();
        rx.check(&send(1, 0, false), 1000).unwrap();
        let p = rx.check(&DdpHeader::terminate(), 28).unwrap();
        assert!(p.first && p.last);
        assert_eq!(rx.expected_msn(QN_TERMINATE), Some(2));
        assert!(rx.in_message(), "the Send stays partial");
        assert_eq!(
            rx.check(&DdpHeader::terminate(), 28),
            Err(TermError::DdpUntaggedInvalidMsnRange)
        );
        assert_eq!(
            rx.check(&send(2, 0, true), 1),
            Err(TermError::DdpUntaggedInvalidMsnRange)
        );
    }

    #[test]
    fn errors() {
        let mut rx = RxSequencer::new();
        assert_eq!(
            rx.check(&send(2, 0, true), 1),
            Err(TermError::DdpUntaggedInvalidMsnRange)
        );
        assert_eq!(
            rx.check(&send(1, 5, true), 1),
            Err(TermError::DdpUntaggedInvalidMo)
        );
        rx.check(&send(1, 0, false), 10).unwrap();
        assert_eq!(
            rx.check(&send(1, 11, true), 1),
            Err(TermError::DdpUntaggedInvalidMo)
        );
        assert_eq!(
            rx.check(&send(2, 0, true), 1),
            Err(TermError::DdpUntaggedInvalidMsnRange)
        );
        let bad_qn = DdpHeader::Untagged(UntaggedHeader {
            last: true,
            opcode: Opcode::Send,
            inval_stag: 0,
            qn: 3,
            msn: 1,
            mo: 0,
        });
        assert_eq!(rx.check(&bad_qn, 0), Err(TermError::DdpUntaggedInvalidQn));

        let mut rx = RxSequencer::new();
        rx.check(&DdpHeader::write(5, 100, false), 10).unwrap();
        assert_eq!(
            rx.check(&DdpHeader::write(6, 110, true), 1),
            Err(TermError::DdpTaggedInvalidStag)
        );
        assert_eq!(
            rx.check(&DdpHeader::read_response(5, 110, true), 1),
            Err(TermError::DdpTaggedInvalidStag)
        );
        assert_eq!(
            rx.check(&DdpHeader::write(5, 111, true), 1),
            Err(TermError::DdpTaggedBaseBounds)
        );
        let p = rx.check(&DdpHeader::write(5, 110, true), 1).unwrap();
        assert_eq!(p.offset, 10);
        assert_eq!(
            rx.check(&DdpHeader::write(5, u64::MAX, true), 2),
            Err(TermError::DdpTaggedToWrap)
        );
        assert!(rx.check(&DdpHeader::write(5, u64::MAX, true), 1).is_ok());
        // A tagged and an untagged message may be partial at the same time.
        rx.check(&DdpHeader::write(5, 0, false), 1).unwrap();
        rx.check(&send(1, 0, true), 1).unwrap();
        rx.check(&DdpHeader::write(5, 1, true), 1).unwrap();
    }
}
