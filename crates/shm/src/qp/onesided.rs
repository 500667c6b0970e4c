//! One-sided requests on the ring: the peer's Writes and Reads served against our
//! registrations (target side), and our own mapped Write or Read copied through the grant the
//! target answered with (initiator side).

use std::sync::atomic::Ordering;
use std::sync::Arc;

use netdirect_spi::kit::mr::{Access, AccessError, Kind, Registration};

use super::{Answer, Inner, MapOut, Op, Resp, RxMsg, Served, ShmQp, Sink};
use crate::link::Link;
use crate::mem::{self, Owned, OwnedMut, Segs};
use crate::ring::{kind, Desc, INLINE_MAX, RTS_MAX_SGES};

impl ShmQp {
    /// Check a peer's one-sided access of `len` bytes at `d` against our registrations
    /// (target side; RFC 5040 §8.1.1 as `tcp`'s `protect`): a live token (index and key), a
    /// window bound through this queue pair, the right, and the whole range inside, with
    /// `addr + len` overflow caught. A zero-length access names no memory and is not checked
    /// (RFC 5041 §5.2): `Ok(None)`.
    fn check_remote(
        &self,
        g: &mut Inner,
        d: Desc,
        len: u64,
        access: Access,
    ) -> Result<Option<Arc<Registration>>, AccessError> {
        if len == 0 {
            return Ok(None);
        }
        let reg = g
            .rcache
            .resolve(&self.shared.mrs, d.token)
            .ok_or(AccessError::InvalidToken)?;
        // A window serves only the queue pair it was bound through (IND2MemoryWindow).
        if reg.kind == Kind::Window && reg.bound_qp.load(Ordering::Acquire) != self.id {
            return Err(AccessError::InvalidToken);
        }
        reg.check(d.addr, len, access)?;
        Ok(Some(reg))
    }

    /// The descriptor of the peer's MAPW or READ record at the head of the ring (its 16 inline
    /// bytes), checked for `len` bytes of `access` ([`ShmQp::check_remote`]).
    fn request(
        &self,
        g: &mut Inner,
        rx: &crate::segment::Chan<'_>,
        len: u64,
        access: Access,
    ) -> Result<(Desc, Option<Arc<Registration>>), AccessError> {
        let mut cell = [0u8; Desc::LEN];
        g.cons
            .read_inline(rx, Desc::LEN, &mut OwnedMut(&mut cell), 0);
        let d = Desc::decode(&cell);
        Ok((d, self.check_remote(g, d, len, access)?))
    }

    /// A WRITE, WPULL, MAPW or READ record from the peer (we are the target).
    pub(super) fn serve(&self, g: &mut Inner, link: &Link, r: crate::ring::Record) -> Served {
        let rx = link.rx();
        let total = u64::from(r.total);
        match r.kind {
            kind::MAPW | kind::MAPR => {
                // One granted request at a time: the peer pushes nothing else until its DONE.
                if g.map_hold.is_some() {
                    return Served::Broken;
                }
                let read = r.kind == kind::MAPR;
                // A Read asked for by MAPR counts against the IRD as any other (RFC 5040 §5.4).
                if read && g.answers_reads >= g.ird {
                    return Served::Broken;
                }
                let access = if read {
                    Access::RemoteRead
                } else {
                    Access::RemoteWrite
                };
                let Ok((d, reg)) = self.request(g, &rx, total, access) else {
                    return Served::Refused;
                };
                g.cons.advance();
                // Granted only for shared memory, to a peer that showed it may read and write
                // our memory anyway, once it has the memory's descriptor (`mapped`).
                // Never through a memory window: an Invalidate must fail the transfers in
                // progress through it (IND2QueuePair::Invalidate), and a granted copy cannot be
                // stopped; a window's chunks are checked one by one instead.
                let grant = reg
                    .as_deref()
                    .filter(|r| r.kind != Kind::Window)
                    .and_then(|r| {
                        let m = r.shared_memory()?;
                        let off = m.offset_of(d.addr, total)?;
                        (total > 0 && link.peer_proved() && link.offer_memory(r, m))
                            .then(|| (m.id(), off))
                    });
                match grant {
                    Some((id, off)) => {
                        g.map_hold = reg;
                        g.answers.push_back(Answer::Grant {
                            id,
                            off,
                            len: r.total,
                        });
                    }
                    None => g.answers.push_back(Answer::Deny),
                }
                Served::Done
            }
            kind::WRITE => {
                let mut cell = [0u8; INLINE_MAX];
                let n = r.len as usize; // 16..=48, checked by `peek`
                g.cons.read_inline(&rx, n, &mut OwnedMut(&mut cell[..n]), 0);
                let d = Desc::decode(&cell[..Desc::LEN]);
                let inline = (n - Desc::LEN) as u64;
                if inline > 0 && inline != total {
                    return Served::Broken;
                }
                // The common case (ndrpingpong), a one-cell Write into the region the last
                // one went to with no registration removed since, is checked against the
                // cache's copy of its range and rights and takes no reference: the copy ends
                // under this queue pair's lock, which a Deregister waits for
                // (`LocalCache::covers`, the adapter's copy barrier).
                // A Write may ask for a lease on its region (`place`): checked the long way,
                // for the registration.
                let ask = r.flags & crate::ring::flag::LEASE != 0;
                let cached = inline == total
                    && !ask
                    && g.rcache.covers(
                        &self.shared.mrs,
                        d.token,
                        d.addr,
                        total,
                        Access::RemoteWrite,
                    );
                let reg = match cached {
                    true => None,
                    false => match self.check_remote(g, d, total, Access::RemoteWrite) {
                        Ok(reg) => reg,
                        Err(_) => return Served::Refused,
                    },
                };
                g.cons.advance();
                if inline == total {
                    let seg = mem::target(d.addr, total);
                    let src = Owned(&cell[Desc::LEN..n]);
                    // SAFETY: `seg` passed the remote-write check against a registration that
                    // stays live across the copy: held in `reg`, or (cached) kept by the lock.
                    unsafe { mem::copy(&src, &seg, total as usize) };
                    let lease = match ask {
                        true => self.grant_lease(g, link, reg.as_deref()),
                        false => None,
                    };
                    drop(reg);
                    g.answers
                        .push_back(lease.map_or(Answer::Ack, Answer::Lease));
                } else {
                    // The bytes follow as CHUNK records.
                    g.rx_reg = reg;
                    g.rx_msg = Some(RxMsg {
                        pos: 0,
                        total,
                        solicited: false,
                        sink: Sink::Write(d.addr, ask),
                    });
                }
                Served::Done
            }
            kind::WPULL => {
                let mut list = [0u8; (RTS_MAX_SGES + 1) * 16];
                let n = r.len as usize; // checked by `peek`: 32..=528, a multiple of 16
                g.cons.read_chunk(&rx, n, &mut OwnedMut(&mut list[..n]), 0);
                let d = Desc::decode(&list[..Desc::LEN]);
                let mut remote = [(0u64, 0u64); RTS_MAX_SGES];
                let k = n / 16 - 1;
                let mut sum = 0u64;
                for (j, e) in remote.iter_mut().enumerate().take(k) {
                    let b = &list[16 + j * 16..32 + j * 16];
                    let addr = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                    let len = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                    *e = (addr, len);
                    sum = sum.saturating_add(len);
                }
                if sum != total {
                    return Served::Broken;
                }
                let Ok(reg) = self.check_remote(g, d, total, Access::RemoteWrite) else {
                    return Served::Refused;
                };
                let seg = mem::target(d.addr, total);
                // The kernel checks the peer's ranges; ours passed the check against `reg`,
                // held across the copy.
                if mem::pull(
                    link.peer_pid,
                    std::slice::from_ref(&seg),
                    &remote[..k],
                    total,
                )
                .is_err()
                {
                    return Served::Broken;
                }
                drop(reg);
                g.cons.advance();
                g.answers.push_back(Answer::Ack);
                Served::Done
            }
            _ => {
                // READ: at most IRD of the peer's Reads in flight (RFC 5040 §5.4); one more
                // breaks the protocol.
                if g.answers_reads >= g.ird {
                    return Served::Broken;
                }
                let Ok((d, reg)) = self.request(g, &rx, total, Access::RemoteRead) else {
                    return Served::Refused;
                };
                g.cons.advance();
                g.answers.push_back(Answer::Read(Resp {
                    addr: d.addr,
                    total,
                    sent: 0,
                    hdr: false,
                    reg,
                }));
                g.answers_reads += 1;
                Served::Done
            }
        }
    }

    /// The target granted our mapped Write or Read `cell` (memory id, offset) for `total`
    /// bytes: copy the Write into its memory (the Read out of it), answer DONE, and count the
    /// request as in the ring (complete in its turn: the bytes are placed). When its memory
    /// cannot be mapped, answer DONE with `flag::NO` and send the request the ordinary way.
    /// `false`: the grant does not fit the request being pushed (a protocol violation).
    pub(super) fn mapped_copy(
        &self,
        g: &mut Inner,
        link: &Link,
        cell: &[u8; 16],
        total: u32,
    ) -> bool {
        let id = u64::from_le_bytes(cell[..8].try_into().expect("8 bytes"));
        let off = u64::from_le_bytes(cell[8..].try_into().expect("8 bytes"));
        let i = g.in_ring;
        let n = total as usize;
        let copied = match g.sq.get(i) {
            // The local segments passed the local-read (Write) or local-write (Read) check at
            // post and are held by the request; `copy_into` and `copy_out` bound the peer's
            // side by the mapping.
            Some((wr, segs)) if wr.inline.is_none() && wr.total == u64::from(total) => {
                let m = link.peer_memory(id);
                // The target may have closed since it granted (its hold then ends): no copy.
                let ok = m.is_some() && link.start_copy();
                let copied = match (wr.op, m) {
                    (Op::Write(_), Some(m)) if ok => mem::copy_into(&m, off, &Segs(segs), n),
                    (Op::Read(_), Some(m)) if ok => mem::copy_out(&m, off, &mut Segs(segs), n),
                    (Op::Write(_) | Op::Read(_), _) => false,
                    _ => return false,
                };
                link.copied();
                copied
            }
            _ => return false,
        };
        g.answers.push_back(Answer::Done { copied });
        if copied {
            if let Some((wr, _)) = g.sq.get_mut(i) {
                wr.awaiting = false;
            }
            g.in_ring += 1;
            g.map_out = MapOut::Idle;
        } else {
            // Not mappable here: as refused by the target.
            g.mapping_refused();
        }
        true
    }
}
