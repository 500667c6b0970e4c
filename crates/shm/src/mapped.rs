//! Mapped RDMA Writes and Reads: one copy, by the initiator, straight into (or out of) a
//! mapping of the target's registered memory, for memory that is shared-mappable to begin with
//! (`kit::shared_mem`, which `netdirect::Buffer` uses from 64 KiB on).
//!
//! The exchange (records in `ring::kind`): the initiator asks with MAPW for a Write, MAPR for
//! a Read (token, address, length); the target checks them as for any Write or Read (token,
//! rights, bounds; a MAPR also takes an IRD credit, as a Read does; never through a memory
//! window, whose Invalidate must be able to fail a transfer midway), holds the registration (a
//! Deregister waits) and answers GRANT with the memory's id and the request's offset in it,
//! having sent the memfd over the connection's socket first (MAP message, once per memory and
//! connection); the initiator copies into (or out of) its mapping, answers DONE, which
//! releases the hold, and only then pushes anything else. A target that cannot grant answers
//! GRANT with `flag::NO`, an initiator that cannot map answers DONE with `flag::NO`: the
//! request then goes the ordinary way, so ND semantics never depend on the mapping (and the
//! initiator does not ask again for the last few refused tokens). Ordering holds as for the
//! ordinary records: the target serves MAPR after every request before it (a Write posted
//! before a Read is placed before the Read copies), and the request completes in its turn.
//!
//! A mapping lets the peer read and write that memory whenever it likes, not only when
//! granted, and after a Deregister. So the target grants only to a peer that has shown it may
//! read and write our memory anyway: the peer reads 16 random bytes (the connection's nonce,
//! `Link::nonce`) from our address space with `process_vm_readv` and puts them in its side
//! line, and the kernel allows that read only with the ptrace access that `process_vm_writev`
//! into us needs as well (both check `PTRACE_MODE_ATTACH_REALCREDS`). The mapping gives such a peer nothing it did not have.
//! Only the bytes are compared; a peer that cannot read us cannot produce them.
//!
//! **Placed Writes.** Below `ND_SHM_MAP_MIN_KIB` a round trip per Write would cost more than
//! the copy, so the permission is given once per region instead, as a *lease*: a WRITE
//! of an initiator that proved itself carries [`flag::LEASE`](crate::ring::flag::LEASE);
//! the target, having placed it as any Write, answers with an ACK that carries the lease
//! (memory id, the region's address, length and offset in the memory, the target's lease
//! epoch) when the region is shared memory (never a window), or a plain ACK that refuses.
//! From then on the initiator places a Write of fewer than `ND_SHM_MAP_MIN_KIB` into that
//! region itself, within its post, and completes it at once (in its turn), checking what the
//! target would check (token, bounds, the region's remote-write right came with the lease) —
//! but only when nothing of its own precedes the Write on the connection: no request waiting
//! to go into the ring, every record it pushed taken by the target (`Producer::taken`, whose
//! Acquire orders the target's handling of them before the copy), no Read outstanding and no
//! mapped transfer under way. Otherwise the Write goes into the ring, as does every Write
//! after a failed check. A record published after the copy (a Send) is seen after its bytes.
//!
//! Revocation: the target raises its `lease_epoch` under its queue pair's lock whenever a
//! registration goes (the Deregister's copy barrier, `ShmQp::fence`) and when the connection
//! ends for its application (a Terminate, a Disconnect), then waits while the initiator's
//! `copying` word is odd; the initiator makes the word odd before it compares the epoch and
//! `closed` with its lease's (`ring::grant`). So a Write placed after the Deregister or the
//! Terminate is impossible: it finds the lease dead and goes the ordinary way, where the
//! target refuses it (`ND_ACCESS_VIOLATION`) or drops it with the connection. A target about
//! to sleep looks whether the peer's `copying` word moved since it last looked
//! ([`Link::peer_placed`]); the initiator wakes a sleeping target after each placement.

use std::any::Any;
use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, OnceLock, Weak};

use netdirect_spi::kit::mr::Registration;
use netdirect_spi::kit::shared_mem::SharedMemory;

use crate::link::Link;
use crate::proto::{self, Msg};
use crate::ring::LEASE_LEN;

/// Peer memories mapped, and memories sent, per connection at most.
const MAX_MAPS: usize = 16;
/// The largest peer memory mapped (address space, not memory: 64 GiB).
const MAX_MAP_LEN: u64 = 64 << 30;

/// A fresh nonce for one connection: 16 random bytes, never zero. Each connection has its own
/// (kept in its `Link`, whose heap address does not change), made when the connection is:
/// a process forked from ours earlier, which shares our memory's past but perhaps not our
/// rights, cannot know it.
pub(crate) fn fresh_nonce() -> [u64; 2] {
    loop {
        let mut b = [0u8; 16];
        netdirect_spi::kit::mr::fill_random(&mut b);
        let w = [
            u64::from_le_bytes(b[..8].try_into().expect("8 bytes")),
            u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
        ];
        if w != [0, 0] {
            return w;
        }
    }
}

/// One connection's mapped-Write state.
#[derive(Debug, Default)]
pub(crate) struct Maps {
    /// The peer's memories we mapped, by id.
    peer: Mutex<Vec<(u64, Arc<SharedMemory>)>>,
    /// Our memories whose memfd we sent, by id, each with a weak handle that dies with the
    /// memory: then the peer is told to drop its mapping (`Msg::Unmap`).
    sent: Mutex<Vec<(u64, Weak<dyn Any + Send + Sync>)>>,
    /// Whether we could read the peer's nonce (asked once).
    proved: OnceLock<bool>,
    /// A MAPW or MAPR of ours awaits its GRANT: only then is a MAP message taken (the
    /// target sends its memory's descriptor just before granting); any other is dropped, so
    /// a peer cannot make us map memory we never asked for.
    asking: AtomicBool,
    /// The peer's `copying` word when we last looked before sleeping ([`Link::peer_placed`]).
    placed_seen: std::sync::atomic::AtomicU32,
    /// An UNMAP came: a lease on that memory holds its mapping until our next Write that
    /// may be placed drops it (`ShmQp::drop_unmapped_leases`), or the connection ends.
    pub(crate) unmapped: AtomicBool,
}

/// A lease on a region of the peer's shared memory (initiator side): Writes of fewer than
/// `ND_SHM_MAP_MIN_KIB` into it are placed by us while the peer's lease epoch is `epoch`.
#[derive(Debug, Clone)]
pub(crate) struct Lease {
    /// The region's token (host order).
    pub(crate) token: u32,
    /// The peer's id of the memory (`Msg::Map`).
    pub(crate) id: u64,
    /// The region in the peer's address space.
    base: u64,
    len: u64,
    /// Where the region starts in `mem`.
    off: u64,
    pub(crate) epoch: u64,
    pub(crate) mem: Arc<SharedMemory>,
}

impl Lease {
    /// The offset in the mapping of `len` bytes at the peer's address `addr`, if they lie in
    /// the region (the bounds check the target makes, overflow caught).
    pub(crate) fn offset(&self, addr: u64, len: u64) -> Option<u64> {
        let rel = addr.checked_sub(self.base)?;
        (rel.checked_add(len)? <= self.len).then(|| self.off + rel)
    }

    /// The inline bytes of the ACK that grants it (`ring::LEASE_LEN`).
    pub(crate) fn encode(id: u64, base: u64, len: u64, off: u64, epoch: u64) -> [u8; 40] {
        let mut b = [0u8; LEASE_LEN as usize];
        for (k, v) in [id, base, len, off, epoch].into_iter().enumerate() {
            b[k * 8..k * 8 + 8].copy_from_slice(&v.to_le_bytes());
        }
        b
    }
}

impl Maps {
    /// The connection ended: drop the peer's memories we mapped (a copy in progress keeps
    /// its own reference until it is done).
    pub(crate) fn forget_peer_memories(&self) {
        self.peer.lock().unwrap_or_else(|e| e.into_inner()).clear();
    }

    /// Our MAPW or MAPR is in the ring (`true`), or its GRANT came (`false`).
    pub(crate) fn asking(&self, yes: bool) {
        self.asking.store(yes, Ordering::Release);
    }
}

impl Link {
    /// Initiator: show the peer we may write its memory (once per connection): read its
    /// nonce from its address space into our side line. Whether that worked.
    pub(crate) fn prove(&self) -> bool {
        if let Some(&p) = self.maps.proved.get() {
            return p;
        }
        // The peer publishes where its nonce is as it sets up its side of the connection,
        // which may not be done when our first request goes: not known yet is no answer.
        let addr = self.peer().nonce_addr.load(Ordering::Acquire);
        if addr == 0 {
            return false;
        }
        *self.maps.proved.get_or_init(|| {
            let mut b = [0u8; 16];
            if self.peer_pid <= 0 || !crate::mem::read_remote(self.peer_pid, addr, &mut b) {
                return false;
            }
            let me = self.me();
            for (k, w) in me.proof.iter().enumerate() {
                let v = u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
                w.store(v, Ordering::Release);
            }
            true
        })
    }

    /// Initiator: about to copy through a mapping the peer granted. Announce it, then look
    /// whether the peer closed (with a fence between: either it sees our flag when it closes,
    /// or we see its close). `false`: it closed, so its grant is void (it may be reusing the
    /// memory): copy nothing, and call [`Link::copied`] all the same.
    pub(crate) fn start_copy(&self) -> bool {
        crate::ring::grant::start_copy(&self.me().copying, &self.peer().closed)
    }

    /// Initiator: the copy that [`Link::start_copy`] announced is over.
    pub(crate) fn copied(&self) {
        crate::ring::grant::copied(&self.me().copying);
    }

    /// Initiator: about to place a Write under a lease of `epoch`. `false`: the peer closed
    /// or revoked its leases since (`ring::grant`): place nothing, and call
    /// [`Link::placed`] all the same.
    pub(crate) fn start_place(&self, epoch: u64) -> bool {
        let p = self.peer();
        crate::ring::grant::start_place(&self.me().copying, &p.closed, &p.lease_epoch, epoch)
    }

    /// Initiator: the placement [`Link::start_place`] announced is over; a peer asleep is
    /// woken (it may wait for the bytes: `nd rpingpong --blocking`), one about to sleep sees
    /// the `copying` word moved ([`Link::peer_placed`]).
    pub(crate) fn placed(&self) {
        self.copied();
        self.wake_peer();
    }

    /// Initiator: the peer's lease epoch now (a lease of another is dead).
    pub(crate) fn peer_lease_epoch(&self) -> u64 {
        self.peer().lease_epoch.load(Ordering::Acquire)
    }

    /// Initiator: a lease from the ACK bytes `b` (`Lease::encode`) for `token`, if the
    /// memory it names was sent to us and holds the region. `None`: taken as a refusal.
    pub(crate) fn lease(&self, token: u32, b: &[u8; LEASE_LEN as usize]) -> Option<Lease> {
        let w = |k: usize| u64::from_le_bytes(b[k * 8..k * 8 + 8].try_into().expect("8 bytes"));
        let (id, base, len, off, epoch) = (w(0), w(1), w(2), w(3), w(4));
        let mem = self.peer_memory(id)?;
        let end = off.checked_add(len)?;
        base.checked_add(len)?;
        (len > 0 && end <= mem.len() as u64).then_some(Lease {
            token,
            id,
            base,
            len,
            off,
            epoch,
            mem,
        })
    }

    /// Target: our lease epoch now (stamped on the leases we grant).
    pub(crate) fn lease_epoch(&self) -> u64 {
        self.me().lease_epoch.load(Ordering::Relaxed)
    }

    /// Target: revoke every lease the peer holds, and wait until no placement under one is
    /// in progress (as [`Link::wait_peer_copy`]). Called under the queue pair's lock.
    pub(crate) fn revoke_leases(&self) {
        crate::ring::grant::revoke(&self.me().lease_epoch);
        self.wait_peer_copy();
    }

    /// About to sleep: whether the peer's `copying` word moved since the last look, i.e. it
    /// may have placed a Write in our memory that our application has not seen (the sleeper's
    /// half of the wake-up handshake with [`Link::placed`]; the caller armed first).
    pub(crate) fn peer_placed(&self) -> bool {
        let v = self.peer().copying.load(Ordering::Acquire);
        // A load and a store, not a swap: two threads arming at once cost at most a
        // spurious wake-up.
        let seen = self.maps.placed_seen.load(Ordering::Relaxed);
        self.maps.placed_seen.store(v, Ordering::Relaxed);
        seen != v
    }

    /// Target, closing with a grant outstanding (or revoking leases): wait until the peer is
    /// not copying through it (our `closed` word or lease epoch is stored; the fence pairs
    /// with [`Link::start_copy`]'s and [`Link::start_place`]'s), or is
    /// gone, or a second has passed (a peer that never clears its flag could write our
    /// memory anyway: the grant needed that). A peer that copies finishes in the copy's time.
    pub(crate) fn wait_peer_copy(&self) {
        let end = std::time::Instant::now() + std::time::Duration::from_secs(1);
        while crate::ring::grant::peer_copying(&self.peer().copying)
            && !self.peer_eof.load(Ordering::Acquire)
            && std::time::Instant::now() < end
        {
            std::thread::yield_now();
        }
    }

    /// Target: the peer showed it may write our memory (its side line holds our nonce).
    pub(crate) fn peer_proved(&self) -> bool {
        let p = &self.peer().proof;
        let n = &self.nonce;
        p[0].load(Ordering::Acquire) == n[0] && p[1].load(Ordering::Acquire) == n[1]
    }

    /// Target: make sure the peer has the descriptor of `reg`'s shared memory `m` (sent
    /// once, before the first GRANT naming it). `false` if it cannot be sent (socket full, too
    /// many memories).
    pub(crate) fn offer_memory(&self, reg: &Registration, m: &SharedMemory) -> bool {
        let mut sent = self.maps.sent.lock().unwrap_or_else(|e| e.into_inner());
        if sent.iter().any(|(id, _)| *id == m.id()) {
            return true;
        }
        self.take_back(&mut sent);
        let Some(owner) = reg.shared_memory_weak() else {
            return false;
        };
        if sent.len() >= MAX_MAPS {
            return false;
        }
        if self
            .send_msg(&Msg::Map { id: m.id() }, Some(m.fd()))
            .is_err()
        {
            return false;
        }
        sent.push((m.id(), owner));
        true
    }

    /// Target: tell the peer to drop its mappings of our memories that are gone (freed here:
    /// only the peer's mapping still holds their pages). Called on every look at the socket
    /// (a poller's periodic liveness check, a sleeper's wake-up) and before sending a memory.
    pub(crate) fn take_back_memories(&self) {
        let mut sent = self.maps.sent.lock().unwrap_or_else(|e| e.into_inner());
        self.take_back(&mut sent);
    }

    fn take_back(&self, sent: &mut Vec<(u64, Weak<dyn Any + Send + Sync>)>) {
        // A memory is gone only after its last registration, and so its last grant, is:
        // no GRANT naming it is in the ring or will be.
        sent.retain(|(id, owner)| {
            // Kept while the message cannot be sent (socket full): tried again next time.
            owner.strong_count() > 0 || self.send_msg(&Msg::Unmap { id: *id }, None).is_err()
        });
    }

    /// Initiator: the peer's memory `id`, mapped (reading the MAP messages waiting on the
    /// socket if it is not yet). `None` if the peer never sent it, or it is not a sealed memfd.
    pub(crate) fn peer_memory(&self, id: u64) -> Option<Arc<SharedMemory>> {
        if let Some(m) = self.find_peer_memory(id) {
            return Some(m);
        }
        // The MAP message was sent before the GRANT was published: it is in the socket,
        // possibly behind WAKE messages.
        for _ in 0..64 {
            match self.recv_msg() {
                proto::Recv::Msg(msg, fd) => self.on_message(msg, fd),
                proto::Recv::Empty => break,
                proto::Recv::Eof => {
                    self.note_eof();
                    break;
                }
            }
            if let Some(m) = self.find_peer_memory(id) {
                return Some(m);
            }
        }
        None
    }

    pub(crate) fn find_peer_memory(&self, id: u64) -> Option<Arc<SharedMemory>> {
        let peer = self.maps.peer.lock().unwrap_or_else(|e| e.into_inner());
        peer.iter().find(|(i, _)| *i == id).map(|(_, m)| m.clone())
    }

    /// A control message from the peer: keep a MAP's memory (mapped) while we ask for a
    /// mapping, drop an UNMAP's; ignore the rest (WAKE only wakes).
    pub(crate) fn on_message(&self, msg: Option<Msg>, fd: Option<OwnedFd>) {
        if let Some(Msg::Unmap { id }) = msg {
            // A copy in progress holds its own reference: the mapping goes when it is done.
            let mut peer = self.maps.peer.lock().unwrap_or_else(|e| e.into_inner());
            peer.retain(|(i, _)| *i != id);
            self.maps.unmapped.store(true, Ordering::Release);
            return;
        }
        let (Some(Msg::Map { id }), Some(fd)) = (msg, fd) else {
            return;
        };
        if !self.maps.asking.load(Ordering::Acquire) {
            return;
        }
        let mut peer = self.maps.peer.lock().unwrap_or_else(|e| e.into_inner());
        if peer.len() >= MAX_MAPS || peer.iter().any(|(i, _)| *i == id) {
            return;
        }
        if let Some(m) = SharedMemory::open(fd, MAX_MAP_LEN) {
            peer.push((id, Arc::new(m)));
        }
    }
}
