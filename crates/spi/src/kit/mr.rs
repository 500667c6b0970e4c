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
use std::sync::{Arc, Mutex, OnceLock, RwLock, Weak};

use crate::kit::mw::HookSlot;
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
    /// For a window: its owner's hook for the peer's invalidation, set by
    /// [`Window::bind`](crate::kit::mw::Window::bind), run by
    /// [`invalidated_by_peer`](crate::kit::mw::invalidated_by_peer).
    pub(crate) peer_hook: OnceLock<Arc<HookSlot>>,
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
    copy_barrier: OnceLock<Box<dyn Fn() + Send + Sync>>,
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
            peer_hook: OnceLock::new(),
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
mod tests;

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
