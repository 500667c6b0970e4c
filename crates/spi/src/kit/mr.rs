//! Memory registrations and the token checks every access goes through
//! (`IND2MemoryRegion`, `IND2MemoryWindow`; RFC 5040 §8.1.1, docs/WIRE.md §5.5).
//!
//! A token is an iWARP STag: a 24-bit index in the upper bits and an 8-bit key in the low byte.
//! Both come from the kernel's CSPRNG, so a peer cannot guess a live token. Every lookup
//! compares the whole token, so an index reused under a fresh key does not revive the old
//! token; and a deregistered token is not issued again while it is among the last
//! [`RETIRED_TOKENS`] deregistered (after that, a given dead token comes back with
//! probability 2⁻³² per registration, as any guess would hit). Index 0 is never used.

use std::any::Any;
use std::collections::HashMap;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, RwLock, Weak};

use crate::kit::overlapped::{Driver, OvCompleter, Overlapped};
use crate::kit::shared_mem::SharedMemory;
use crate::{MrFlags, Status};

mod region;
pub use region::Region;

/// What a remote access needs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// The peer writes (inbound RDMA Write).
    RemoteWrite,
    /// The peer reads (the source of an inbound Read Request).
    RemoteRead,
    /// We read (the source of a Send or Write).
    LocalRead,
    /// We write (the sink of a Receive or of a Read Response).
    LocalWrite,
}

/// Why an access was refused; the caller maps it to an ND status or an RDMAP Terminate code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AccessError {
    /// No live registration has this token (never issued, deregistered or invalidated).
    InvalidToken,
    /// The range leaves the registration (including address + length overflow).
    OutOfBounds,
    /// The registration lacks the needed right.
    NoRights,
    /// address + length wraps around 2^64.
    Wrap,
}

/// Whether a registration is a memory region or a memory window bound over one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// A memory region.
    Region,
    /// A memory window; remote rights come from the Bind flags, not the region's.
    Window,
}

/// A process-wide unique queue pair id, never 0: a window remembers the queue pair it was bound
/// through by it. 64 bits, so ids are never reused (a 32-bit counter could wrap in a
/// long-lived server and let a new queue pair pass an old window's check).
pub fn new_qp_id() -> u64 {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    NEXT.fetch_add(1, Ordering::Relaxed)
}

/// One live registration: a byte range with rights, known by its token.
pub struct Registration {
    /// The token (STag) in host order.
    pub token: u32,
    /// First byte.
    pub base: usize,
    /// Length in bytes.
    pub len: usize,
    /// Rights: for a region its `ND_MR_FLAG_*`; for a window the rights granted by Bind, as
    /// `ALLOW_REMOTE_READ` / `ALLOW_REMOTE_WRITE`.
    pub flags: MrFlags,
    /// Region or window.
    pub kind: Kind,
    valid: AtomicBool,
    /// Windows currently bound over this region (Deregister gives `ND_DEVICE_BUSY` while > 0).
    pub bound_windows: AtomicU32,
    /// For a window: the queue pair it is bound through ([`new_qp_id`]; 0 for none).
    pub bound_qp: AtomicU64,
    /// For a window: the region it was bound over.
    pub parent: Option<Arc<Self>>,
    /// Keeps owned memory alive for as long as any in-flight request holds this registration.
    _keepalive: Option<Arc<dyn Any + Send + Sync>>,
    /// Completed when the last reference goes: an asynchronous Deregister that waits for every
    /// in-flight user (a queued Read Response, a segment being placed) to let go.
    on_release: Mutex<Option<OvCompleter>>,
}

impl Drop for Registration {
    fn drop(&mut self) {
        if let Some(c) = self
            .on_release
            .get_mut()
            .unwrap_or_else(|e| e.into_inner())
            .take()
        {
            c.complete(Status::SUCCESS);
        }
    }
}

impl fmt::Debug for Registration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Registration")
            .field("token", &format_args!("{:#010x}", self.token))
            .field("base", &format_args!("{:#x}", self.base))
            .field("len", &self.len)
            .field("flags", &self.flags)
            .field("kind", &self.kind)
            .field("valid", &self.is_valid())
            .finish()
    }
}

impl Registration {
    /// Still registered (not deregistered or invalidated).
    pub fn is_valid(&self) -> bool {
        self.valid.load(Ordering::Acquire)
    }

    /// Check an access of `len` bytes at absolute address `addr`. A zero-length access only
    /// needs a valid token and the right (no bounds).
    ///
    /// A window's token serves remote access only: an SGE names its memory by
    /// `IND2MemoryRegion::GetLocalToken` (ND2_SGE), so a local access through a window is
    /// [`AccessError::InvalidToken`], whatever rights its Bind gave.
    pub fn check(&self, addr: u64, len: u64, access: Access) -> Result<(), AccessError> {
        let local = matches!(access, Access::LocalRead | Access::LocalWrite);
        if !self.is_valid() || (local && self.kind == Kind::Window) {
            return Err(AccessError::InvalidToken);
        }
        check_range(
            self.base as u64,
            self.base as u64 + self.len as u64,
            self.flags,
            addr,
            len,
            access,
        )
    }

    /// The shared memory this registration lies in, when it was registered over memory
    /// backed by one (a larger `netdirect::Buffer`); a window answers for its region.
    #[must_use]
    pub fn shared_memory(&self) -> Option<&SharedMemory> {
        if let Some(p) = &self.parent {
            return p.shared_memory();
        }
        self._keepalive.as_deref()?.downcast_ref::<SharedMemory>()
    }

    /// A weak handle on [`Registration::shared_memory`]'s memory: dead once the memory is
    /// freed (its buffer dropped and every registration over it gone), so a provider that
    /// lent the memory to a peer can tell when to take it back.
    #[must_use]
    pub fn shared_memory_weak(&self) -> Option<Weak<dyn Any + Send + Sync>> {
        if let Some(p) = &self.parent {
            return p.shared_memory_weak();
        }
        let k = self._keepalive.as_ref()?;
        k.downcast_ref::<SharedMemory>()?;
        Some(Arc::downgrade(k))
    }

    /// Mark invalid: every later lookup or check fails.
    pub fn invalidate(&self) {
        self.valid.store(false, Ordering::Release);
    }

    /// Mark invalid; returns whether this call did it (it was valid before). Lets several
    /// paths race to unbind a window while only one of them releases the region.
    pub fn revoke(&self) -> bool {
        self.valid.swap(false, Ordering::AcqRel)
    }

    /// Complete `c` with `ND_SUCCESS` once the last reference to this registration is gone
    /// (`IND2MemoryRegion::Deregister` returning `ND_PENDING` until no request or remote
    /// access still uses the memory). Replaces an earlier completer, which then never fires.
    pub fn complete_on_release(&self, c: OvCompleter) {
        *self.on_release.lock().unwrap_or_else(|e| e.into_inner()) = Some(c);
    }
}

/// The rights and bounds part of [`Registration::check`], for a registration of
/// `base..limit` with `flags`.
fn check_range(
    base: u64,
    limit: u64,
    flags: MrFlags,
    addr: u64,
    len: u64,
    access: Access,
) -> Result<(), AccessError> {
    let needed = match access {
        Access::RemoteWrite => MrFlags::ALLOW_REMOTE_WRITE,
        Access::RemoteRead => MrFlags::ALLOW_REMOTE_READ,
        Access::LocalWrite => MrFlags::ALLOW_LOCAL_WRITE,
        Access::LocalRead => MrFlags::empty(),
    };
    if !flags.contains(needed) {
        return Err(AccessError::NoRights);
    }
    let end = addr.checked_add(len).ok_or(AccessError::Wrap)?;
    if len > 0 && (addr < base || end > limit) {
        return Err(AccessError::OutOfBounds);
    }
    Ok(())
}

/// The registration a queue pair's local SGEs (or, as a second cache, the peer's remote
/// tokens) resolved to last: most posts reuse one buffer, most of a peer's Writes one region.
///
/// It holds no reference (a Deregister completes when the last *user* of the memory lets go,
/// and a cache is no user), so [`LocalCache::resolve`] upgrades a weak pointer. For a use that
/// ends within the call, under the queue pair's lock (a small Send copied into the ring at
/// once, a peer's one-cell Write placed by `shm`), [`LocalCache::covers`] checks against a
/// copy of the registration's range and rights instead, with plain loads only: the copy is
/// trusted while no registration of the table has been removed since it was made
/// ([`Table::generation`]).
#[derive(Debug, Default)]
pub struct LocalCache {
    reg: Weak<Registration>,
    token: u32,
    base: u64,
    limit: u64,
    flags: MrFlags,
    /// A window: never [`LocalCache::covers`]ed (whether it serves a queue pair is not in the
    /// copy).
    window: bool,
    /// [`Table::generation`] before the lookup that filled the cache.
    generation: u64,
}

impl LocalCache {
    /// The live registration with `token`, from the cache or else from `table` (which then
    /// fills the cache); `None` if there is none.
    pub fn resolve(&mut self, table: &Table, token: u32) -> Option<Arc<Registration>> {
        // Read before the validity check or the lookup: a removal after either is seen as a
        // newer generation (a removal invalidates before it bumps the count).
        let generation = table.generation();
        if let Some(r) = self.reg.upgrade() {
            if r.token == token && r.is_valid() {
                self.generation = generation;
                return Some(r);
            }
        }
        let r = table.lookup(token)?;
        *self = Self {
            reg: Arc::downgrade(&r),
            token,
            base: r.base as u64,
            limit: r.base as u64 + r.len as u64,
            flags: r.flags,
            window: r.kind == Kind::Window,
            generation,
        };
        Some(r)
    }

    /// Whether `len` bytes at `addr` under `token` pass [`Registration::check`] for `access`
    /// against the cached registration, which no removal from `table` has touched since. No
    /// reference is taken, so the answer is for a use that ends before the call returns, and
    /// only if the provider set a [`Table::set_copy_barrier`] that waits for such uses: a
    /// Deregister on another thread could otherwise free the memory under the copy. A cached
    /// window is never covered (a window serves only the queue pair it is bound through, which
    /// the caller checks on the registration itself).
    pub fn covers(&self, table: &Table, token: u32, addr: u64, len: u64, access: Access) -> bool {
        self.token == token
            && token != 0
            && !self.window
            && self.generation == table.generation()
            && check_range(self.base, self.limit, self.flags, addr, len, access).is_ok()
    }
}

/// The registrations of one adapter.
#[derive(Default)]
pub struct Table {
    map: RwLock<HashMap<u32, Arc<Registration>>>,
    /// Taken after `map`'s write lock, never the other way round.
    issuer: Mutex<Issuer>,
    /// Bumped by every removal (Deregister, a window's unbind): what a [`LocalCache`] copied
    /// before it may be stale.
    generation: AtomicU64,
    /// The provider's [`Table::set_copy_barrier`].
    copy_barrier: std::sync::OnceLock<Box<dyn Fn() + Send + Sync>>,
}

impl fmt::Debug for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let n = self.map.read().map(|m| m.len()).unwrap_or(0);
        f.debug_struct("Table").field("registrations", &n).finish()
    }
}

/// Parameters of a new registration.
#[derive(Clone)]
pub struct NewRegistration {
    /// First byte.
    pub base: usize,
    /// Length.
    pub len: usize,
    /// Rights.
    pub flags: MrFlags,
    /// Region or window.
    pub kind: Kind,
    /// For a window, the region.
    pub parent: Option<Arc<Registration>>,
    /// Owned memory to keep alive.
    pub keepalive: Option<Arc<dyn Any + Send + Sync>>,
}

impl fmt::Debug for NewRegistration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewRegistration")
            .field("base", &self.base)
            .field("len", &self.len)
            .finish()
    }
}

impl Table {
    /// An empty table.
    pub fn new() -> Self {
        Self::default()
    }

    /// For a provider that copies out of memory checked with [`LocalCache::covers`], which
    /// holds no reference: `barrier` must return only once every copy that may have passed
    /// `covers` before the call is over (the `shm` provider takes and releases the lock of
    /// every connected queue pair, under which those copies run). A Deregister (or a region's
    /// release) calls it after the removal, which bumps [`Table::generation`] so that no
    /// later `covers` passes, and before its own reference goes: the memory, which that
    /// reference may keep alive, and the Deregister's completion, after which the application
    /// may free memory it registered, both wait for copies in progress. It runs on the
    /// application's thread, outside every lock of the provider. Set once.
    pub fn set_copy_barrier(&self, barrier: impl Fn() + Send + Sync + 'static) {
        let _ = self.copy_barrier.set(Box::new(barrier));
    }

    fn copy_barrier(&self) {
        if let Some(b) = self.copy_barrier.get() {
            b();
        }
    }

    /// Register a range under a fresh, unpredictable token.
    pub fn insert(&self, n: NewRegistration) -> Arc<Registration> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        let mut issuer = self.issuer.lock().unwrap_or_else(|e| e.into_inner());
        let token = loop {
            let t = issuer.rng.next_u32();
            if t >> 8 != 0 && !map.contains_key(&(t >> 8)) && !issuer.retired_set.contains(&t) {
                break t;
            }
        };
        let reg = Arc::new(Registration {
            token,
            base: n.base,
            len: n.len,
            flags: n.flags,
            kind: n.kind,
            valid: AtomicBool::new(true),
            bound_windows: AtomicU32::new(0),
            bound_qp: AtomicU64::new(0),
            parent: n.parent,
            _keepalive: n.keepalive,
            on_release: Mutex::new(None),
        });
        map.insert(token >> 8, reg.clone());
        reg
    }

    /// The live registration with exactly this token (index and key).
    pub fn lookup(&self, token: u32) -> Option<Arc<Registration>> {
        let map = self.map.read().unwrap_or_else(|e| e.into_inner());
        map.get(&(token >> 8))
            .filter(|r| r.token == token && r.is_valid())
            .cloned()
    }

    /// Remove and invalidate the registration with this token.
    pub fn remove(&self, token: u32) -> Option<Arc<Registration>> {
        let mut map = self.map.write().unwrap_or_else(|e| e.into_inner());
        match map.get(&(token >> 8)) {
            Some(r) if r.token == token => {
                r.invalidate();
                self.generation.fetch_add(1, Ordering::AcqRel);
                self.issuer
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .retire(token);
                map.remove(&(token >> 8))
            }
            _ => None,
        }
    }

    /// How many registrations have been removed: a [`LocalCache`] filled at an older value
    /// must look again.
    pub fn generation(&self) -> u64 {
        self.generation.load(Ordering::Acquire)
    }

    /// Number of live registrations.
    pub fn len(&self) -> usize {
        self.map.read().map(|m| m.len()).unwrap_or(0)
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// How many of the most recently deregistered tokens are never issued again (a peer or a
/// stale cache still holding one finds it dead rather than someone else's memory). Their
/// bookkeeping grows only with deregistrations, to under 1 MiB at this bound.
pub const RETIRED_TOKENS: usize = 1 << 16;

/// Where tokens come from: the random pool and the quarantine of recently dead tokens.
#[derive(Default)]
struct Issuer {
    rng: RandomPool,
    /// The last [`RETIRED_TOKENS`] deregistered tokens, oldest first, and the same as a set.
    retired: std::collections::VecDeque<u32>,
    retired_set: std::collections::HashSet<u32>,
}

impl Issuer {
    fn retire(&mut self, token: u32) {
        if self.retired.len() == RETIRED_TOKENS {
            if let Some(old) = self.retired.pop_front() {
                self.retired_set.remove(&old);
            }
        }
        self.retired.push_back(token);
        self.retired_set.insert(token);
    }
}

/// Random bytes from the kernel CSPRNG, fetched 4 KiB at a time.
struct RandomPool {
    buf: Box<[u8; 4096]>,
    pos: usize,
}

impl Default for RandomPool {
    fn default() -> Self {
        Self {
            buf: Box::new([0; 4096]),
            pos: 4096,
        }
    }
}

impl RandomPool {
    fn next_u32(&mut self) -> u32 {
        if self.pos + 4 > self.buf.len() {
            fill_random(&mut self.buf[..]);
            self.pos = 0;
        }
        let b = &self.buf[self.pos..self.pos + 4];
        self.pos += 4;
        u32::from_ne_bytes([b[0], b[1], b[2], b[3]])
    }
}

/// Fill `buf` from `getrandom(2)`.
pub fn fill_random(buf: &mut [u8]) {
    let mut done = 0;
    while done < buf.len() {
        match rustix::rand::getrandom(&mut buf[done..], rustix::rand::GetRandomFlags::empty()) {
            Ok(n) => done += n,
            Err(rustix::io::Errno::INTR) => {}
            // getrandom(2) cannot fail on Linux ≥ 3.17 once the pool is initialised; a
            // failure here means a broken system and tokens must not fall back to weak values.
            Err(e) => panic!("getrandom failed: {e}"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn new(base: usize, len: usize, flags: MrFlags) -> NewRegistration {
        NewRegistration {
            base,
            len,
            flags,
            kind: Kind::Region,
            parent: None,
            keepalive: None,
        }
    }

    #[test]
    fn local_cache_resolves_and_covers_until_any_removal() {
        let t = Table::new();
        let r = t.insert(new(0x1000, 0x100, MrFlags::ALLOW_LOCAL_WRITE));
        let other = t.insert(new(0x8000, 0x10, MrFlags::empty()));
        let mut c = LocalCache::default();
        // An empty cache covers nothing, not even token 0 with no bytes.
        assert!(!c.covers(&t, 0, 0, 0, Access::LocalRead));
        assert!(c.resolve(&t, r.token ^ 1).is_none(), "wrong key");
        let got = c.resolve(&t, r.token).expect("live");
        assert!(Arc::ptr_eq(&got, &r));
        drop(got);
        assert!(c.covers(&t, r.token, 0x1000, 0x100, Access::LocalWrite));
        assert!(
            !c.covers(&t, r.token, 0x1001, 0x100, Access::LocalRead),
            "bounds"
        );
        assert!(
            !c.covers(&t, r.token, u64::MAX, 2, Access::LocalRead),
            "wrap"
        );
        assert!(
            !c.covers(&t, r.token, 0x1000, 1, Access::RemoteRead),
            "rights"
        );
        assert!(
            !c.covers(&t, other.token, 0x8000, 1, Access::LocalRead),
            "other token"
        );
        // The cache is no user: it does not keep the registration alive.
        assert_eq!(Arc::strong_count(&r), 2, "table + this test only");
        // Removing any registration, not only the cached one, ends what the copy vouches for.
        t.remove(other.token);
        assert!(!c.covers(&t, r.token, 0x1000, 1, Access::LocalRead));
        assert!(c.resolve(&t, r.token).is_some());
        assert!(c.covers(&t, r.token, 0x1000, 1, Access::LocalRead));
        t.remove(r.token);
        assert!(!c.covers(&t, r.token, 0x1000, 1, Access::LocalRead));
        assert!(c.resolve(&t, r.token).is_none());
        // A window resolves, but its copy never vouches for an access.
        let w = t.insert(NewRegistration {
            kind: Kind::Window,
            ..new(0x8000, 0x10, MrFlags::ALLOW_REMOTE_WRITE)
        });
        assert!(c.resolve(&t, w.token).is_some());
        assert!(!c.covers(&t, w.token, 0x8000, 1, Access::RemoteWrite));
    }

    /// A window's token is for the peer: an SGE naming it is refused for local access, even
    /// where the Bind's rights would cover it; remote access goes by those rights.
    #[test]
    fn a_window_serves_remote_access_only() {
        let t = Table::new();
        let w = t.insert(NewRegistration {
            kind: Kind::Window,
            ..new(
                0x8000,
                0x10,
                MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_LOCAL_WRITE,
            )
        });
        assert_eq!(w.check(0x8000, 8, Access::RemoteWrite), Ok(()));
        for access in [Access::LocalRead, Access::LocalWrite] {
            assert_eq!(w.check(0x8000, 8, access), Err(AccessError::InvalidToken));
        }
    }

    #[test]
    fn tokens_are_unique_and_checked_fully() {
        let t = Table::new();
        let a = t.insert(new(0x1000, 100, MrFlags::ALLOW_REMOTE_WRITE));
        let b = t.insert(new(0x1000, 100, MrFlags::ALLOW_REMOTE_READ));
        assert_ne!(a.token >> 8, b.token >> 8);
        assert!(t.lookup(a.token).is_some());
        assert!(t.lookup(a.token ^ 1).is_none(), "wrong key");
        t.remove(a.token);
        assert!(t.lookup(a.token).is_none());
        assert_eq!(
            a.check(0x1000, 1, Access::RemoteWrite),
            Err(AccessError::InvalidToken)
        );
    }

    #[test]
    fn bounds_rights_and_wrap() {
        let t = Table::new();
        let r = t.insert(new(0x1000, 0x100, MrFlags::ALLOW_REMOTE_READ));
        assert_eq!(r.check(0x1000, 0x100, Access::RemoteRead), Ok(()));
        assert_eq!(
            r.check(0xFFF, 1, Access::RemoteRead),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            r.check(0x1000, 0x101, Access::RemoteRead),
            Err(AccessError::OutOfBounds)
        );
        assert_eq!(
            r.check(0x1000, 1, Access::RemoteWrite),
            Err(AccessError::NoRights)
        );
        assert_eq!(
            r.check(u64::MAX, 2, Access::RemoteRead),
            Err(AccessError::Wrap)
        );
        assert_eq!(
            r.check(0, 0, Access::RemoteRead),
            Ok(()),
            "zero length: no bounds check"
        );
    }

    /// R-MR-1: the same buffer registered 10,000 times gets 10,000 distinct tokens, none with
    /// index 0, spread over the whole index and key space (RFC 5040 §8.1.1 item 8: STags
    /// hard to predict).
    #[test]
    fn ten_thousand_registrations_of_one_buffer() {
        let t = Table::new();
        let regs: Vec<_> = (0..10_000)
            .map(|i| {
                let flags = if i % 2 == 0 {
                    MrFlags::ALLOW_REMOTE_READ
                } else {
                    MrFlags::ALLOW_REMOTE_WRITE
                };
                t.insert(new(0x10_0000, 4096, flags))
            })
            .collect();
        assert_eq!(t.len(), 10_000);
        let tokens: std::collections::HashSet<u32> = regs.iter().map(|r| r.token).collect();
        let indexes: std::collections::HashSet<u32> = regs.iter().map(|r| r.token >> 8).collect();
        assert_eq!((tokens.len(), indexes.len()), (10_000, 10_000));
        assert!(regs.iter().all(|r| r.token >> 8 != 0));
        // Every key value and both halves of the index space occur (a counter would not).
        let keys: std::collections::HashSet<u8> = regs.iter().map(|r| r.token as u8).collect();
        assert!(keys.len() > 250, "only {} distinct keys", keys.len());
        assert!(regs.iter().any(|r| r.token >> 31 == 1) && regs.iter().any(|r| r.token >> 31 == 0));
        // Each registration keeps its own rights.
        assert_eq!(regs[0].check(0x10_0000, 1, Access::RemoteRead), Ok(()));
        assert_eq!(
            regs[0].check(0x10_0000, 1, Access::RemoteWrite),
            Err(AccessError::NoRights)
        );
        assert_eq!(regs[1].check(0x10_0000, 1, Access::RemoteWrite), Ok(()));
        for r in &regs {
            assert!(t.remove(r.token).is_some());
        }
        assert!(t.is_empty());
    }

    /// A deregistered token never works again: not through the table (its index may be
    /// reused, but the key is compared too), not through a registration someone still holds,
    /// and no later registration is handed the same token.
    #[test]
    fn deregistered_tokens_stay_dead() {
        let t = Table::new();
        let mut dead = std::collections::HashSet::new();
        for _ in 0..5_000 {
            let r = t.insert(new(0x2000, 64, MrFlags::ALLOW_REMOTE_WRITE));
            assert!(
                !dead.contains(&r.token),
                "token {:#x} issued twice",
                r.token
            );
            assert!(t.lookup(r.token).is_some());
            assert!(t.remove(r.token).is_some());
            assert!(t.lookup(r.token).is_none());
            assert!(t.remove(r.token).is_none(), "removed twice");
            assert_eq!(
                r.check(0x2000, 1, Access::RemoteWrite),
                Err(AccessError::InvalidToken)
            );
            dead.insert(r.token);
        }
        // Same index, other key: not found.
        let live = t.insert(new(0x2000, 64, MrFlags::ALLOW_REMOTE_WRITE));
        for k in 1..=255u32 {
            assert!(t.lookup(live.token ^ k).is_none());
        }
    }

    /// The random source draws a token that was just deregistered: it is skipped, not
    /// issued again (5,000 random draws meet a repeat about once in 350 runs; this forces it).
    #[test]
    fn a_redrawn_dead_token_is_skipped() {
        let t = Table::new();
        let (dead, next) = (0x1234_5678u32, 0x0abc_de01u32);
        {
            let mut issuer = t.issuer.lock().unwrap();
            let mut words = [dead, dead, next]
                .into_iter()
                .chain(std::iter::repeat(next));
            for chunk in issuer.rng.buf.chunks_exact_mut(4) {
                chunk.copy_from_slice(&words.next().unwrap().to_ne_bytes());
            }
            issuer.rng.pos = 0;
        }
        let r = t.insert(new(0x2000, 64, MrFlags::ALLOW_REMOTE_WRITE));
        assert_eq!(r.token, dead);
        assert!(t.remove(dead).is_some());
        let again = t.insert(new(0x2000, 64, MrFlags::ALLOW_REMOTE_WRITE));
        assert_eq!(again.token, next, "the dead token was issued again");
        assert!(t.lookup(dead).is_none());
    }

    #[test]
    fn the_quarantine_forgets_the_oldest_first() {
        let mut i = Issuer::default();
        for tok in 0..RETIRED_TOKENS as u32 + 2 {
            i.retire(tok + 0x100);
        }
        assert_eq!(i.retired.len(), RETIRED_TOKENS);
        assert_eq!(i.retired_set.len(), RETIRED_TOKENS);
        assert!(!i.retired_set.contains(&0x100) && !i.retired_set.contains(&0x101));
        assert!(i.retired_set.contains(&0x102));
    }

    #[test]
    fn revoke_once_and_release_completes_deregister() {
        use crate::kit::overlapped::{Driver, Overlapped};
        #[derive(Debug)]
        struct NoDriver;
        impl Driver for NoDriver {
            fn progress(&self) {}
            fn wait(&self, _: Option<std::time::Duration>) {}
            fn notify(&self) {}
        }
        let t = Table::new();
        let r = t.insert(new(0x3000, 64, MrFlags::ALLOW_LOCAL_WRITE));
        assert!(r.revoke());
        assert!(!r.revoke(), "second revoke");
        assert!(t.lookup(r.token).is_none(), "revoked");
        t.remove(r.token);
        // A user still holds the registration: the Deregister stays pending until it lets go.
        let user = r.clone();
        let (ov, c) = Overlapped::pending(Arc::new(NoDriver));
        r.complete_on_release(c);
        drop(r);
        assert!(!ov.is_complete());
        drop(user);
        assert_eq!(ov.status(), Status::SUCCESS);
    }

    /// Deregister and release run the provider's copy barrier after the token died (no
    /// `covers` passes any more) and while the memory is still held: a copy that passed
    /// `covers` before is over before the memory can go.
    #[test]
    fn deregister_waits_at_the_copy_barrier_with_the_memory_held() {
        use crate::kit::overlapped::tests::NullDriver;
        use std::sync::atomic::AtomicUsize;
        for release in [false, true] {
            let t = Arc::new(Table::new());
            let memory: Arc<dyn Any + Send + Sync> = Arc::new([0u8; 64]);
            let held = Arc::downgrade(&memory);
            let calls = Arc::new(AtomicUsize::new(0));
            let token = Arc::new(AtomicU32::new(0));
            let (tw, c, tok) = (Arc::downgrade(&t), calls.clone(), token.clone());
            t.set_copy_barrier(move || {
                let t = tw.upgrade().expect("table");
                let mut cache = LocalCache::default();
                assert!(
                    cache.resolve(&t, tok.load(Ordering::Relaxed)).is_none(),
                    "the token is dead when the barrier runs"
                );
                assert!(
                    held.upgrade().is_some(),
                    "the memory is held across the barrier"
                );
                c.fetch_add(1, Ordering::Relaxed);
            });
            let mut slot = RegionSlot::new();
            slot.register(
                &t,
                Arc::new(NullDriver),
                1 << 20,
                0x4000 as *mut u8,
                64,
                MrFlags::ALLOW_LOCAL_WRITE,
                Some(memory),
            )
            .expect("register")
            .wait()
            .expect("registered");
            token.store(slot.local_token(), Ordering::Relaxed);
            let weak = {
                let r = slot.lock();
                Arc::downgrade(r.as_ref().expect("registered"))
            };
            if release {
                slot.release(&t);
            } else {
                let ov = slot
                    .deregister(&t, Arc::new(NullDriver))
                    .expect("deregister");
                assert_eq!(ov.status(), Status::SUCCESS);
            }
            assert_eq!(calls.load(Ordering::Relaxed), 1, "release {release}");
            assert!(
                weak.upgrade().is_none(),
                "the registration went after the barrier"
            );
        }
    }
}

/// The state of one memory-region object (`IND2MemoryRegion`) that software providers share:
/// at most one live registration, its token readable without a lock, and the ND rules of
/// Register and Deregister. Providers wrap it in their `MemoryRegion` implementation.
#[derive(Debug, Default)]
pub struct RegionSlot {
    /// The live registration. A provider's `QueuePair::bind` holds this lock while it binds a
    /// window over the region, so a concurrent Deregister sees the window or wins.
    reg: Mutex<Option<Arc<Registration>>>,
    /// The current token (0 when unregistered): applications ask for it on every post.
    token: AtomicU32,
}

impl RegionSlot {
    /// An empty slot.
    pub fn new() -> Self {
        Self::default()
    }

    /// The live registration, locked.
    pub fn lock(&self) -> std::sync::MutexGuard<'_, Option<Arc<Registration>>> {
        self.reg.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// `Register`: record `len` bytes at `buffer` in `table` under a fresh token. Checks, in
    /// the order ND applications rely on (`docs/ND-RULES.md` D7): null → `ND_INVALID_PARAMETER`,
    /// zero length → `ND_INVALID_BUFFER_SIZE`, more than `max_len` → `ND_INVALID_PARAMETER`,
    /// a range that wraps → `ND_ACCESS_VIOLATION`; unknown flags → `ND_INVALID_PARAMETER`;
    /// a slot already registered → `ND_INVALID_DEVICE_STATE` (one buffer per region object).
    /// Nothing is dereferenced here; the caller upholds `MemoryRegion::register`'s contract.
    #[allow(clippy::too_many_arguments)]
    pub fn register(
        &self,
        table: &Table,
        driver: Arc<dyn Driver>,
        max_len: usize,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
        keepalive: Option<Arc<dyn Any + Send + Sync>>,
    ) -> crate::Result<Overlapped> {
        use crate::{fail, Status};
        if buffer.is_null() {
            return fail(Status::INVALID_PARAMETER);
        }
        if len == 0 {
            return fail(Status::INVALID_BUFFER_SIZE);
        }
        if len > max_len {
            return fail(Status::INVALID_PARAMETER);
        }
        if (buffer as usize).checked_add(len).is_none() {
            return fail(Status::ACCESS_VIOLATION);
        }
        if !MrFlags::all().contains(flags) {
            return fail(Status::INVALID_PARAMETER);
        }
        let mut slot = self.lock();
        if slot.is_some() {
            return fail(Status::INVALID_DEVICE_STATE);
        }
        let reg = table.insert(NewRegistration {
            base: buffer as usize,
            len,
            flags,
            kind: Kind::Region,
            parent: None,
            keepalive,
        });
        self.token.store(reg.token, Ordering::Release);
        *slot = Some(reg);
        Ok(Overlapped::completed(driver, crate::Status::SUCCESS))
    }

    /// `Deregister`: `ND_DEVICE_BUSY` synchronously while a window is bound (R-MR-2). Otherwise
    /// the token dies at once and the request completes when the last in-flight user of the
    /// memory (a queued transfer, a segment being placed, a posted request) lets go of it —
    /// usually at once.
    pub fn deregister(&self, table: &Table, driver: Arc<dyn Driver>) -> crate::Result<Overlapped> {
        use crate::{fail, Status};
        let mut slot = self.lock();
        let Some(reg) = slot.as_ref() else {
            return fail(Status::INVALID_DEVICE_STATE);
        };
        if reg.bound_windows.load(Ordering::Acquire) > 0 {
            return fail(Status::DEVICE_BUSY);
        }
        let reg = slot.take().expect("checked above");
        self.token.store(0, Ordering::Release);
        table.remove(reg.token);
        drop(slot);
        table.copy_barrier();
        let (ov, c) = Overlapped::pending(driver);
        reg.complete_on_release(c);
        Ok(ov)
    }

    /// `GetLocalToken` (0 when unregistered).
    pub fn local_token(&self) -> u32 {
        self.token.load(Ordering::Acquire)
    }

    /// `GetRemoteToken`: the token in network byte order, so the wire STag bytes are the
    /// token's bytes in memory.
    pub fn remote_token(&self) -> u32 {
        self.local_token().to_be()
    }

    /// Deregister on release of the region object (the pages are not pinned on Linux).
    pub fn release(&mut self, table: &Table) {
        if let Some(reg) = self.reg.get_mut().unwrap_or_else(|e| e.into_inner()).take() {
            table.remove(reg.token);
            table.copy_barrier();
        }
    }
}
