//! Writes placed by the initiator under a lease (`mapped`: placed Writes): the post's check
//! and copy, the lease asked for on a WRITE, granted (target side) and taken
//! (initiator side) with the Write's ACK.

use netdirect_spi::kit::mr::{Access, Kind, Registration};
use netdirect_spi::{MrFlags, Sge};

use super::{Conn, Inner, MapOut, Op, ShmQp};
use crate::link::Link;
use crate::mapped::Lease;
use crate::mem::{self, InlineSges};
use crate::ring::{Desc, LEASE_LEN};

/// Whether a Write of `total` bytes to `token` asks for a lease: placement is on
/// (`map_min`, below which Writes are placed), none is held or being asked for, the token was
/// not refused lately (`denied`: lease and mapping refusals), and we showed the peer we may
/// write its memory anyway (`Link::prove`, one `process_vm_readv` per connection). When it
/// does, the MAP message the target sends before its ACK is taken (`Maps::asking`).
pub(super) fn wants_lease(
    link: &Link,
    map_min: u64,
    token: u32,
    total: u64,
    leases: &[Lease],
    denied: [&[u32]; 2],
    asking: &mut bool,
) -> bool {
    let ask = map_min > 0
        && total > 0
        && total < map_min
        && !*asking
        && !leases.iter().any(|l| l.token == token)
        && !denied.iter().any(|d| d.contains(&token))
        && link.prove();
    if ask {
        *asking = true;
        link.maps.asking(true);
    }
    ask
}

impl ShmQp {
    /// Place the Write of `total` bytes of `sge` at `d` into the peer's memory now, under a
    /// lease (`mapped`). Only when nothing of ours precedes it on the connection: no request
    /// waiting to go into the ring or half in it, no Read outstanding, no mapped transfer,
    /// and every record we pushed taken by the peer (whose handling of them then happens
    /// before our copy). Whether it was placed; if not, it goes the ordinary way.
    ///
    /// # Safety
    /// With `inline`, the SGEs are readable during this call (the poster's contract);
    /// otherwise they are checked here against our registrations.
    #[inline]
    pub(super) unsafe fn try_place(
        &self,
        g: &mut Inner,
        d: Desc,
        sge: &[Sge],
        total: u64,
        inline: bool,
    ) -> bool {
        // None held is the common case: one load.
        if g.leases.is_empty() || total == 0 || total >= self.shared.config.map_min {
            return false;
        }
        let Some(link) = self.link.get() else {
            return false;
        };
        if link
            .maps
            .unmapped
            .load(std::sync::atomic::Ordering::Relaxed)
        {
            self.drop_unmapped_leases(g, link);
        }
        let Some(k) = g
            .leases
            .iter()
            .position(|l| l.token == d.token && l.offset(d.addr, total).is_some())
        else {
            return false;
        };
        if g.conn != Conn::Established
            || g.sq.len() != g.in_ring
            || g.reads_out != 0
            || g.map_out != MapOut::Idle
            || g.tx_hdr
            || g.tx_sent != 0
            || !(inline || self.readable(g, sge))
        {
            return false;
        }
        // A peer known gone (end-of-file on its socket) gets nothing placed: the Write goes
        // the ordinary way and is flushed with the connection.
        if !g.prod.taken(&link.tx()) || link.peer_eof.load(std::sync::atomic::Ordering::Acquire) {
            return false;
        }
        let lease = &g.leases[k];
        let off = lease.offset(d.addr, total).expect("checked above");
        let live = link.start_place(lease.epoch);
        if live {
            // SAFETY: INLINE memory is readable during this call; otherwise every SGE lies
            // in a live registration with local read access (checked above), which a
            // Deregister cannot free before our lock is released (the copy barrier).
            let src = unsafe { InlineSges::new(sge) };
            mem::place_into(&lease.mem, off, &src, total as usize);
        }
        link.placed();
        if !live {
            // Revoked (a registration of the peer's went) or closed: every lease of the old
            // epoch is dead.
            let now = link.peer_lease_epoch();
            self.keep_leases(g, |l| l.epoch == now);
        }
        live
    }

    /// The peer freed memories we may hold leases on (UNMAP): let go of their mappings (such
    /// a lease is dead anyway: the memory's last registration went, which revoked it). Looked
    /// at by the next Write that may be placed; the connection's end drops every lease.
    #[cold]
    pub(super) fn drop_unmapped_leases(&self, g: &mut Inner, link: &Link) {
        link.maps
            .unmapped
            .store(false, std::sync::atomic::Ordering::Relaxed);
        self.keep_leases(g, |l| link.find_peer_memory(l.id).is_some());
    }

    /// Whether every SGE is readable local memory: against the cached registration, else
    /// looked up (which fills the cache for the next Write). No reference is kept: the copy
    /// ends under our lock, which a Deregister's copy barrier waits for.
    fn readable(&self, g: &mut Inner, sge: &[Sge]) -> bool {
        self.cached_readable(g, sge)
            || sge.iter().all(|s| {
                g.cache
                    .resolve(&self.shared.mrs, s.memory_region_token)
                    .is_some_and(|r| {
                        let (addr, len) = (s.buffer as usize as u64, u64::from(s.buffer_length));
                        r.check(addr, len, Access::LocalRead).is_ok()
                    })
            })
    }

    /// Keep the leases for which `keep` holds.
    fn keep_leases(&self, g: &mut Inner, keep: impl Fn(&Lease) -> bool) {
        g.leases.retain(keep);
    }

    /// The ACK that answers our front Write came: with `lease` bytes it grants the lease
    /// that Write asked for, plain it refuses (the token is not asked for again soon).
    /// `false`: a lease nobody asked for (a protocol violation).
    pub(super) fn lease_answered(
        &self,
        g: &mut Inner,
        link: &Link,
        lease: Option<&[u8; LEASE_LEN as usize]>,
    ) -> bool {
        let token = match g.sq.front() {
            Some((wr, _)) if wr.lease_ask => match wr.op {
                Op::Write(d) => d.token,
                _ => return false,
            },
            _ => return lease.is_none(),
        };
        g.lease_asking = false;
        match lease.and_then(|b| link.lease(token, b)) {
            Some(l) => {
                let epoch = l.epoch;
                self.keep_leases(g, |o| o.token != token && o.epoch == epoch);
                g.leases.truncate(super::MAX_LEASES - 1);
                g.leases.insert(0, l);
            }
            None => {
                g.lease_denied.rotate_right(1);
                g.lease_denied[0] = token;
            }
        }
        if g.map_out != MapOut::Asked {
            link.maps.asking(false);
        }
        true
    }

    /// Target: the lease to grant with the ACK of a Write that asked for one, into
    /// `reg`: only a memory region (never a window, whose Invalidate must stop what goes
    /// through it), with the remote-write right, lying whole in shared memory, to a peer that
    /// showed it may write our memory anyway and has the memory's descriptor (`mapped`).
    pub(super) fn grant_lease(
        &self,
        g: &mut Inner,
        link: &Link,
        reg: Option<&Registration>,
    ) -> Option<[u8; LEASE_LEN as usize]> {
        let r = reg?;
        if r.kind != Kind::Region || !r.flags.contains(MrFlags::ALLOW_REMOTE_WRITE) {
            return None;
        }
        let m = r.shared_memory()?;
        let (base, len) = (r.base as u64, r.len as u64);
        let off = m.offset_of(base, len)?;
        if !link.peer_proved() || !link.offer_memory(r, m) {
            return None;
        }
        // Under our lock, as the revocations: a Deregister's after this raises the epoch.
        g.leased = true;
        Some(Lease::encode(m.id(), base, len, off, link.lease_epoch()))
    }
}
