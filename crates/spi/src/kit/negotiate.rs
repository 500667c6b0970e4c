//! The connection-time rules of `IND2Connector` that do not depend on the transport
//! (`docs/ND-RULES.md` §2.10, "Read-limit negotiation" and "Private-data limits"), in one place
//! for every provider.

use crate::{fail, AdapterInfo, ReadLimits, Result, Status};

/// Private data longer than `max` (MaxCallerData for Connect, MaxCalleeData for Accept and
/// Reject) is `ND_INVALID_BUFFER_SIZE`, checked before any state changes so the connector stays
/// usable (D8).
pub fn check_private_data(len: usize, max: u32) -> Result<()> {
    if len > max as usize {
        return fail(Status::INVALID_BUFFER_SIZE);
    }
    Ok(())
}

/// What Connect offers: the application's inbound (IRD) and outbound (ORD) limits, silently
/// clamped to the adapter.
pub fn offer(info: &AdapterInfo, asked: ReadLimits) -> ReadLimits {
    ReadLimits {
        inbound: asked.inbound.min(info.max_inbound_read_limit),
        outbound: asked.outbound.min(info.max_outbound_read_limit),
    }
}

/// The passive side's `GetReadLimits` after a request offering `peer` (the peer's IRD as
/// `inbound`, its ORD as `outbound`): seen from here, inbound is the peer's ORD and outbound the
/// peer's IRD, each clamped to our adapter (D25).
pub fn passive_view(info: &AdapterInfo, peer: ReadLimits) -> ReadLimits {
    ReadLimits {
        inbound: peer.outbound.min(info.max_inbound_read_limit),
        outbound: peer.inbound.min(info.max_outbound_read_limit),
    }
}

/// The active side's `GetReadLimits` once the peer accepted with `peer` (its IRD as `inbound`,
/// its ORD as `outbound`): seen from here, inbound is the peer's ORD and outbound its IRD
/// (D25), each never beyond what our Connect `offered` (docs/ND-RULES.md §2.10: "each already
/// clamped by both ends' hardware"): an acceptor cannot widen how many Reads it may have
/// outstanding against us, and what it grants beyond our ORD we could not use.
pub fn active_view(offered: ReadLimits, peer: ReadLimits) -> ReadLimits {
    ReadLimits {
        inbound: peer.outbound.min(offered.inbound),
        outbound: peer.inbound.min(offered.outbound),
    }
}

/// What Accept grants: the application's limits clamped to the adapter and to what the
/// connecting peer offered — our IRD covers at most the peer's ORD, our ORD at most its IRD.
pub fn accept(info: &AdapterInfo, asked: ReadLimits, peer: ReadLimits) -> ReadLimits {
    let ours = offer(info, asked);
    ReadLimits {
        inbound: ours.inbound.min(peer.outbound),
        outbound: ours.outbound.min(peer.inbound),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info() -> AdapterInfo {
        AdapterInfo {
            max_inbound_read_limit: 16,
            max_outbound_read_limit: 8,
            ..AdapterInfo::default()
        }
    }

    #[test]
    fn the_section_2_10_example() {
        // Connect(4, 8) → the passive side sees {8, 4}; Accept(2, 16) grants IRD 2, ORD 4.
        let peer = offer(
            &info(),
            ReadLimits {
                inbound: 4,
                outbound: 8,
            },
        );
        assert_eq!(
            peer,
            ReadLimits {
                inbound: 4,
                outbound: 8
            }
        );
        assert_eq!(
            passive_view(&info(), peer),
            ReadLimits {
                inbound: 8,
                outbound: 4
            }
        );
        assert_eq!(
            accept(
                &info(),
                ReadLimits {
                    inbound: 2,
                    outbound: 16
                },
                peer
            ),
            ReadLimits {
                inbound: 2,
                outbound: 4
            }
        );
    }

    #[test]
    fn the_active_view_is_swapped_and_never_beyond_the_offer() {
        let offered = ReadLimits {
            inbound: 4,
            outbound: 0,
        };
        // An acceptor that grants more than it was offered (16383: MPA's largest value).
        let peer = ReadLimits {
            inbound: 64,
            outbound: 16383,
        };
        assert_eq!(active_view(offered, peer), offered);
        let peer = ReadLimits {
            inbound: 0,
            outbound: 2,
        };
        let want = ReadLimits {
            inbound: 2,
            outbound: 0,
        };
        assert_eq!(active_view(offered, peer), want);
    }

    #[test]
    fn clamps_to_the_adapter_and_checks_private_data() {
        assert_eq!(
            offer(
                &info(),
                ReadLimits {
                    inbound: 100,
                    outbound: 100
                }
            ),
            ReadLimits {
                inbound: 16,
                outbound: 8
            }
        );
        assert!(check_private_data(252, 252).is_ok());
        assert_eq!(
            check_private_data(253, 252).unwrap_err().status(),
            Status::INVALID_BUFFER_SIZE
        );
    }
}
