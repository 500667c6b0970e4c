//! Remote access protection: the checks every inbound RDMA Write segment, RDMA Read Request
//! and RDMA Read Response passes **before** a single byte is placed or sent
//! (RFC 5040 §8.1.1, RFC 5041 §7.1, docs/WIRE.md §4.4 and §5.5).
//!
//! Each check looks at the whole byte range of the segment or request: the token (STag) must
//! name a live registration of this adapter (index *and* key, `kit::mr::Table::lookup`), a
//! memory window must be bound through the queue pair the access arrives on, the registration
//! must grant the access (a region's `ND_MR_FLAG_*`, a window's Bind flags), and
//! `[TO, TO + length)` must lie inside it, with `TO + length` overflow caught. The first
//! failed check gives the Terminate code the RFCs assign to it.
//!
//! These are pure functions over the registration table (no I/O, no memory access), so the
//! `placement` fuzz target drives them with whatever the FPDU deframer makes of random bytes
//! and checks that an accepted range always lies inside a registration that allows it.

use std::sync::Arc;

use netdirect_spi::kit::mr::{Access, AccessError, Kind, Registration, Table};
use netdirect_wire::rdmap::{ReadRequest, TermError};

/// The registration an inbound RDMA Write segment of `len > 0` bytes at `to` under `stag`
/// may be placed into, or the DDP tagged-buffer error to terminate with (RFC 5041 §7.2;
/// docs/WIRE.md §4.4):
///
/// | condition | Terminate |
/// |---|---|
/// | no live registration has this STag (never issued, deregistered, invalidated, wrong key) | 0x1/0x1/0x00 invalid STag |
/// | a window bound through another queue pair | 0x1/0x1/0x02 STag not associated with DDP stream |
/// | no remote-write right | 0x1/0x1/0x00 (DDP has no rights code; siw's "closest match") |
/// | `to + len` wraps 2^64 | 0x1/0x1/0x03 TO wrap |
/// | the range leaves the registration | 0x1/0x1/0x01 base or bounds violation |
///
/// A zero-length segment's STag and TO are not checked at all (RFC 5041 §5.2); callers do
/// not call this for one.
pub fn check_write(
    table: &Table,
    qp: u64,
    stag: u32,
    to: u64,
    len: u32,
) -> Result<Arc<Registration>, TermError> {
    let reg = table.lookup(stag).ok_or(TermError::DdpTaggedInvalidStag)?;
    if !associated(&reg, qp) {
        return Err(TermError::DdpTaggedStagNotAssociated);
    }
    match reg.check(to, u64::from(len), Access::RemoteWrite) {
        Ok(()) => Ok(reg),
        Err(AccessError::InvalidToken | AccessError::NoRights) => {
            Err(TermError::DdpTaggedInvalidStag)
        }
        Err(AccessError::Wrap) => Err(TermError::DdpTaggedToWrap),
        Err(AccessError::OutOfBounds) => Err(TermError::DdpTaggedBaseBounds),
    }
}

/// The registration an inbound RDMA Read Request may read its `size` bytes from, or the
/// RDMAP remote protection error to terminate with (RFC 5040 §4.8; docs/WIRE.md §4.4):
/// 0x0/0x1/0x00 invalid STag, 0x0/0x1/0x03 STag not associated with the stream (a window
/// bound through another queue pair), 0x0/0x1/0x02 access rights (no remote-read right),
/// 0x0/0x1/0x04 TO wrap, 0x0/0x1/0x01 base or bounds. A zero-size request is answered
/// without validating its source (RFC 5040 §5.2.1): `Ok(None)`.
pub fn check_read_source(
    table: &Table,
    qp: u64,
    rr: &ReadRequest,
) -> Result<Option<Arc<Registration>>, TermError> {
    if rr.size == 0 {
        return Ok(None);
    }
    let reg = table
        .lookup(rr.src_stag)
        .ok_or(TermError::RdmapInvalidStag)?;
    if !associated(&reg, qp) {
        return Err(TermError::RdmapStagNotAssociated);
    }
    match reg.check(rr.src_to, u64::from(rr.size), Access::RemoteRead) {
        Ok(()) => Ok(Some(reg)),
        Err(AccessError::InvalidToken) => Err(TermError::RdmapInvalidStag),
        Err(AccessError::NoRights) => Err(TermError::RdmapAccessRights),
        Err(AccessError::Wrap) => Err(TermError::RdmapToWrap),
        Err(AccessError::OutOfBounds) => Err(TermError::RdmapBaseBounds),
    }
}

/// What the oldest outstanding RDMA Read expects of the Read Response now arriving.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ExpectedResponse {
    /// The Data Sink STag the request carried.
    pub sink_stag: u32,
    /// The Data Sink TO the request carried.
    pub sink_to: u64,
    /// RDMARDSZ.
    pub size: u32,
    /// Bytes of the response received so far.
    pub got: u32,
}

/// Check one Read Response segment (`len` bytes at `to` under `stag`, L bit `last`) against
/// the oldest outstanding Read (RFC 5040 §5.5 rule 20: responses come in request order) and
/// against the sink's registration, which must still allow local writes of the range. A
/// mismatch is 0x1/0x1/0x00 (STag) or 0x1/0x1/0x01 (TO or length), as siw reports it
/// (`siw_rresp_check_ntoh`, docs/WIRE.md §4.4). A zero-size Read's response must be one
/// empty segment with L set; its STag and TO are not checked (RFC 5041 §5.2).
pub fn check_read_response(
    expected: &ExpectedResponse,
    stag: u32,
    to: u64,
    len: u32,
    last: bool,
    sink: Option<&Registration>,
) -> Result<(), TermError> {
    if expected.size == 0 {
        return if len == 0 && last {
            Ok(())
        } else {
            Err(TermError::DdpTaggedBaseBounds)
        };
    }
    if stag != expected.sink_stag {
        return Err(TermError::DdpTaggedInvalidStag);
    }
    let at = u64::from(expected.got);
    if to.checked_sub(expected.sink_to) != Some(at) {
        return Err(TermError::DdpTaggedBaseBounds);
    }
    let end = at + u64::from(len);
    if end > u64::from(expected.size) || (last && end != u64::from(expected.size)) {
        return Err(TermError::DdpTaggedBaseBounds);
    }
    if len == 0 {
        return Ok(());
    }
    let sink = sink.ok_or(TermError::DdpTaggedInvalidStag)?;
    match sink.check(to, u64::from(len), Access::LocalWrite) {
        Ok(()) => Ok(()),
        Err(AccessError::InvalidToken | AccessError::NoRights) => {
            Err(TermError::DdpTaggedInvalidStag)
        }
        Err(AccessError::Wrap) => Err(TermError::DdpTaggedToWrap),
        Err(AccessError::OutOfBounds) => Err(TermError::DdpTaggedBaseBounds),
    }
}

/// A region serves every queue pair of its adapter (IND2MemoryRegion::Register remarks); a
/// window only the queue pair it was bound through (IND2MemoryWindow remarks).
fn associated(reg: &Registration, qp: u64) -> bool {
    match reg.kind {
        Kind::Region => true,
        Kind::Window => reg.bound_qp.load(std::sync::atomic::Ordering::Acquire) == qp,
    }
}

/// Whether a received Terminate's error means "your access was refused" (the initiator's
/// request completes `ND_ACCESS_VIOLATION`, docs/ND-RULES.md D6) rather than another remote
/// failure (`ND_REMOTE_ERROR`): RDMAP remote protection errors and DDP tagged-buffer errors.
pub fn is_protection_error(e: &TermError) -> bool {
    let (layer, etype, _) = e.parts();
    (layer == netdirect_wire::rdmap::LAYER_RDMAP || layer == netdirect_wire::rdmap::LAYER_DDP)
        && etype == 1
}

#[cfg(test)]
mod tests {
    use super::*;
    use netdirect_spi::kit::mr::NewRegistration;
    use netdirect_spi::MrFlags;
    use std::sync::atomic::Ordering;

    fn reg(t: &Table, base: usize, len: usize, flags: MrFlags, kind: Kind) -> Arc<Registration> {
        t.insert(NewRegistration {
            base,
            len,
            flags,
            kind,
            parent: None,
            keepalive: None,
        })
    }

    #[test]
    fn write_checks_in_order() {
        let t = Table::new();
        let w = reg(&t, 0x1000, 0x100, MrFlags::ALLOW_REMOTE_WRITE, Kind::Region);
        let r = reg(&t, 0x1000, 0x100, MrFlags::ALLOW_REMOTE_READ, Kind::Region);
        assert!(check_write(&t, 7, w.token, 0x1000, 0x100).is_ok());
        assert_eq!(
            check_write(&t, 7, w.token ^ 0x80, 0x1000, 1).err(),
            Some(TermError::DdpTaggedInvalidStag)
        );
        assert_eq!(
            check_write(&t, 7, r.token, 0x1000, 1).err(),
            Some(TermError::DdpTaggedInvalidStag)
        );
        assert_eq!(
            check_write(&t, 7, w.token, 0xFFF, 1).err(),
            Some(TermError::DdpTaggedBaseBounds)
        );
        assert_eq!(
            check_write(&t, 7, w.token, 0x1001, 0x100).err(),
            Some(TermError::DdpTaggedBaseBounds)
        );
        assert_eq!(
            check_write(&t, 7, w.token, u64::MAX, 2).err(),
            Some(TermError::DdpTaggedToWrap)
        );
        let win = reg(&t, 0x1010, 0x10, MrFlags::ALLOW_REMOTE_WRITE, Kind::Window);
        win.bound_qp.store(7, Ordering::Release);
        assert!(check_write(&t, 7, win.token, 0x1010, 0x10).is_ok());
        assert_eq!(
            check_write(&t, 8, win.token, 0x1010, 1).err(),
            Some(TermError::DdpTaggedStagNotAssociated)
        );
        t.remove(w.token);
        assert_eq!(
            check_write(&t, 7, w.token, 0x1000, 1).err(),
            Some(TermError::DdpTaggedInvalidStag)
        );
    }

    #[test]
    fn read_source_checks() {
        let t = Table::new();
        let r = reg(&t, 0x1000, 0x100, MrFlags::ALLOW_REMOTE_READ, Kind::Region);
        let w = reg(&t, 0x1000, 0x100, MrFlags::ALLOW_REMOTE_WRITE, Kind::Region);
        let rr = |stag, to, size| ReadRequest {
            sink_stag: 1,
            sink_to: 0,
            size,
            src_stag: stag,
            src_to: to,
        };
        assert!(check_read_source(&t, 1, &rr(r.token, 0x1000, 0x100))
            .unwrap()
            .is_some());
        assert!(check_read_source(&t, 1, &rr(0xdead, 0, 0))
            .unwrap()
            .is_none());
        let err = |q| check_read_source(&t, 1, &q).err();
        assert_eq!(
            err(rr(r.token ^ 1, 0x1000, 1)),
            Some(TermError::RdmapInvalidStag)
        );
        assert_eq!(
            err(rr(w.token, 0x1000, 1)),
            Some(TermError::RdmapAccessRights)
        );
        assert_eq!(
            err(rr(r.token, 0x10FF, 2)),
            Some(TermError::RdmapBaseBounds)
        );
        assert_eq!(err(rr(r.token, u64::MAX, 1)), Some(TermError::RdmapToWrap));
    }

    #[test]
    fn response_matching() {
        let t = Table::new();
        let sink = reg(&t, 0x4000, 0x100, MrFlags::ALLOW_LOCAL_WRITE, Kind::Region);
        let e = ExpectedResponse {
            sink_stag: sink.token,
            sink_to: 0x4000,
            size: 0x100,
            got: 0x80,
        };
        let ok = |stag, to, len, last| check_read_response(&e, stag, to, len, last, Some(&sink));
        assert_eq!(ok(sink.token, 0x4080, 0x80, true), Ok(()));
        assert_eq!(ok(sink.token, 0x4080, 0x40, false), Ok(()));
        assert_eq!(
            ok(sink.token, 0x4080, 0x40, true),
            Err(TermError::DdpTaggedBaseBounds)
        );
        assert_eq!(
            ok(sink.token, 0x4081, 0x7F, true),
            Err(TermError::DdpTaggedBaseBounds)
        );
        assert_eq!(
            ok(sink.token ^ 1, 0x4080, 0x80, true),
            Err(TermError::DdpTaggedInvalidStag)
        );
        assert_eq!(
            ok(sink.token, 0x4080, 0x81, true),
            Err(TermError::DdpTaggedBaseBounds)
        );
        let empty = ExpectedResponse {
            size: 0,
            got: 0,
            ..e
        };
        assert_eq!(check_read_response(&empty, 99, 7, 0, true, None), Ok(()));
        assert!(check_read_response(&empty, 99, 7, 1, true, None).is_err());
        t.remove(sink.token);
        assert_eq!(
            ok(sink.token, 0x4080, 0x80, true),
            Err(TermError::DdpTaggedInvalidStag)
        );
    }
}
