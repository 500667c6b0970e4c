//! Memory windows of a software provider (IND2MemoryWindow in Microsoft's NetworkDirect SPI reference) and the rules of
//! `IND2QueuePair::Bind` and `Invalidate` that do not depend on the transport
//! (IND2QueuePair in Microsoft's NetworkDirect SPI reference, `docs/ND-RULES.md` R-MW-1, §2.9, D11).
//!
//! A provider's `bind` runs, in this order (the statuses applications see depend on it):
//! 1. [`bind_objects`]: flags, then region, then window (`ND_INVALID_PARAMETER` naming the
//!    argument);
//! 2. its own queue-pair checks (not connected, initiator queue full), under its lock;
//! 3. [`Window::bind_through`], still under that lock: the region's slot is locked
//!    ([`RegionSlot::lock`](crate::kit::mr::RegionSlot::lock)) until the window is bound,
//!    [`bind_parent`] applies the region and range rules (`ND_ACCESS_VIOLATION`), a queue
//!    pair whose connection has ended completes the request `ND_CANCELED` instead, and
//!    [`Window::bind`] binds (`ND_INVALID_DEVICE_STATE` for a bound window);
//! 4. it queues the request, which completes in order.
//!
//! `invalidate` likewise runs [`invalidate_object`], its queue-pair checks, then
//! [`Window::invalidate_through`].

use std::any::Any;
use std::fmt;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use crate::kit::adapter::AdapterState;
use crate::kit::mr::{Access, Kind, NewRegistration, Region, Registration, Table};
use crate::traits::{MemoryRegion, MemoryWindow, PeerInvalidateHook};
use crate::{fail, Error, MrFlags, OpFlags, Result, Status};

/// The current (or last) binding of a window, and its token.
type Binding = Option<(u32, Weak<Registration>)>;

/// A memory window object: invalid until `QueuePair::bind` binds it over a region; the
/// binding lives in its registration (kind `Window`, the parent region, the queue pair).
pub struct Window<A: AdapterState> {
    adapter: Arc<A>,
    /// Weak: the table and the queue pair the window is bound through hold the registration;
    /// once it is unbound (Invalidate, or the end of that connection) nothing keeps it, or its
    /// region, alive, so the region's Deregister can complete. A dead or revoked registration
    /// means "not bound".
    binding: Mutex<Binding>,
    /// The owner's hook for the peer's invalidation; each binding's registration shares it.
    hook: Arc<HookSlot>,
}

/// A window's [`PeerInvalidateHook`], shared by the window and each registration it binds.
/// Its lock is held while the hook runs, so replacing the hook waits for a run in progress.
#[derive(Default)]
pub(crate) struct HookSlot(Mutex<Option<PeerInvalidateHook>>);

impl HookSlot {
    fn lock(&self) -> MutexGuard<'_, Option<PeerInvalidateHook>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn fire(&self) {
        if let Some(h) = self.lock().as_ref() {
            h();
        }
    }
}

impl<A: AdapterState> fmt::Debug for Window<A> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Window")
            .field("token", &self.lock().as_ref().map(|(t, _)| *t))
            .finish()
    }
}

/// `Bind`'s flags, region and window, checked in that order: a flag other than
/// `SILENT_SUCCESS`, `READ_FENCE`, `ALLOW_READ`, `ALLOW_WRITE` is `ND_INVALID_PARAMETER`
/// (argument 6); a region or window not of `adapter` is argument 2 or 3.
pub fn bind_objects<'a, A: AdapterState>(
    adapter: &Arc<A>,
    region: &'a Arc<dyn MemoryRegion>,
    window: &'a Arc<dyn MemoryWindow>,
    flags: OpFlags,
) -> Result<(&'a Region<A>, &'a Window<A>)> {
    let allowed =
        OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE | OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE;
    if !allowed.contains(flags) {
        return Err(Error::invalid_parameter(6));
    }
    let mr = Region::downcast_on(region, adapter).ok_or(Error::invalid_parameter(2))?;
    let mw = Window::downcast_on(window, adapter).ok_or(Error::invalid_parameter(3))?;
    Ok((mr, mw))
}

/// `Invalidate`'s flags and window: a flag other than `SILENT_SUCCESS` and `READ_FENCE` is
/// `ND_INVALID_PARAMETER` (argument 3), a window not of `adapter` argument 2.
pub fn invalidate_object<'a, A: AdapterState>(
    adapter: &Arc<A>,
    window: &'a Arc<dyn MemoryWindow>,
    flags: OpFlags,
) -> Result<&'a Window<A>> {
    if !(OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE).contains(flags) {
        return Err(Error::invalid_parameter(3));
    }
    Window::downcast_on(window, adapter).ok_or(Error::invalid_parameter(2))
}

/// The region a window of `len` bytes at `buffer` may be bound over, given the region's
/// locked slot ([`RegionSlot::lock`](crate::kit::mr::RegionSlot::lock)). `ND_ACCESS_VIOLATION` when the region is not
/// registered, when `ALLOW_WRITE` is asked of a region without `ALLOW_LOCAL_WRITE` (the
/// region's remote flags do not matter, R-MW-1), or when the window does not lie entirely
/// within the region (a zero-length window may sit at either end).
pub fn bind_parent(
    slot: &Option<Arc<Registration>>,
    buffer: *const u8,
    len: usize,
    flags: OpFlags,
) -> Result<&Arc<Registration>> {
    let Some(parent) = slot.as_ref().filter(|r| r.is_valid()) else {
        return fail(Status::ACCESS_VIOLATION);
    };
    if flags.contains(OpFlags::ALLOW_WRITE) && !parent.flags.contains(MrFlags::ALLOW_LOCAL_WRITE) {
        return fail(Status::ACCESS_VIOLATION);
    }
    let base = buffer as usize as u64;
    let (pb, pe) = (parent.base as u64, (parent.base + parent.len) as u64);
    if parent.check(base, len as u64, Access::LocalRead).is_err()
        || (len == 0 && (base < pb || base > pe))
    {
        return fail(Status::ACCESS_VIOLATION);
    }
    Ok(parent)
}

/// Unbind a window registration (idempotent): its token dies and its region may be
/// deregistered again. `true` for the call that unbound it.
pub fn unbind(table: &Table, w: &Registration) -> bool {
    let first = w.revoke();
    if first {
        table.remove(w.token);
        if let Some(p) = &w.parent {
            p.bound_windows.fetch_sub(1, Ordering::AcqRel);
        }
    }
    first
}

/// The peer's Send with Invalidate named window `w`, which the provider found bound through
/// this queue pair (RFC 5040 §5.3, §8.1.1 item 7): unbind it, forget it in the queue pair's
/// `windows`, and run the hook its owner set ([`MemoryWindow::set_peer_invalidate_hook`]) if
/// this call unbound it (a local Invalidate racing with it won). Providers call it while they
/// take the Send in, before its Receive completion is queued, so an application that reaped
/// that completion sees what the hook did.
pub fn invalidated_by_peer(table: &Table, windows: &mut BoundWindows, w: &Arc<Registration>) {
    let first = unbind(table, w);
    windows.forget(w);
    if first {
        if let Some(h) = w.peer_hook.get() {
            h.fire();
        }
    }
}

/// The windows bound through one queue pair, to unbind when its connection ends. Weak: the
/// registration table holds a window's registration while it is bound, and a window the
/// application released unbinds itself (`Window`'s drop), so its entry here is then dead; dead
/// entries are pruned as windows are added, so binding and releasing cannot grow the list.
#[derive(Debug, Default)]
pub struct BoundWindows(Vec<Weak<Registration>>);

impl BoundWindows {
    /// Remember a window just bound ([`Window::bind`]'s registration).
    pub fn add(&mut self, reg: &Arc<Registration>) {
        self.0.retain(|w| w.strong_count() > 0);
        self.0.push(Arc::downgrade(reg));
    }

    /// Forget a window unbound by Invalidate (local, or a peer's Send with Invalidate).
    pub fn forget(&mut self, reg: &Arc<Registration>) {
        self.0.retain(|w| w.as_ptr() != Arc::as_ptr(reg));
    }

    /// The connection ended: unbind every window still bound through it.
    pub fn unbind_all(&mut self, table: &Table) {
        for w in self.0.drain(..).filter_map(|w| w.upgrade()) {
            unbind(table, &w);
        }
    }
}

impl<A: AdapterState> Window<A> {
    /// An unbound window of `adapter`.
    pub fn new(adapter: Arc<A>) -> Self {
        Self {
            adapter,
            binding: Mutex::new(None),
            hook: Arc::default(),
        }
    }

    /// Recognise one of `adapter`'s windows among the SPI objects.
    pub fn downcast_on<'a>(mw: &'a Arc<dyn MemoryWindow>, adapter: &Arc<A>) -> Option<&'a Self> {
        mw.as_any()
            .downcast_ref::<Self>()
            .filter(|m| Arc::ptr_eq(&m.adapter, adapter))
    }

    fn lock(&self) -> MutexGuard<'_, Binding> {
        self.binding.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn bound(slot: &Binding) -> Option<Arc<Registration>> {
        slot.as_ref()
            .and_then(|(_, w)| w.upgrade())
            .filter(|r| r.is_valid())
    }

    /// Bind the window over `len` bytes at `buffer` in `parent` (from [`bind_parent`], whose
    /// region lock the caller still holds) through queue pair `qp_id`. The token is valid when
    /// this returns; the caller keeps the registration while the window is bound through it
    /// and unbinds it with [`unbind`] when its connection ends. `ND_INVALID_DEVICE_STATE` when
    /// the window is already bound: one queue pair at a time, Invalidate it first. With
    /// neither `ALLOW_READ` nor `ALLOW_WRITE` the peer can neither read nor write it (D11).
    pub fn bind(
        &self,
        parent: &Arc<Registration>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
        qp_id: u64,
    ) -> Result<Arc<Registration>> {
        let mut cur = self.lock();
        if Self::bound(&cur).is_some() {
            return fail(Status::INVALID_DEVICE_STATE);
        }
        let mut rights = MrFlags::empty();
        if flags.contains(OpFlags::ALLOW_READ) {
            rights |= MrFlags::ALLOW_REMOTE_READ;
        }
        if flags.contains(OpFlags::ALLOW_WRITE) {
            rights |= MrFlags::ALLOW_REMOTE_WRITE;
        }
        let reg = self.adapter.registrations().insert(NewRegistration {
            base: buffer as usize,
            len,
            flags: rights,
            kind: Kind::Window,
            parent: Some(parent.clone()),
            keepalive: None,
        });
        reg.bound_qp.store(qp_id, Ordering::Release);
        // Set before the token is handed out (Bind's descriptor), so before a peer can name it.
        let _ = reg.peer_hook.set(self.hook.clone());
        parent.bound_windows.fetch_add(1, Ordering::AcqRel);
        *cur = Some((reg.token, Arc::downgrade(&reg)));
        Ok(reg)
    }

    /// Step 3 of a queue pair's `bind` (module docs), under the queue pair's lock once its own
    /// checks passed: bind this window over `region` through queue pair `qp_id` and keep it in
    /// the queue pair's `windows`; `Ok(true)` means queue the request. `Ok(false)`: the
    /// connection has `ended`, nothing was bound and the request completes `ND_CANCELED` (the
    /// region and range errors still come first).
    pub fn bind_through(
        &self,
        region: &Region<A>,
        buffer: *const u8,
        len: usize,
        flags: OpFlags,
        qp_id: u64,
        ended: bool,
        windows: &mut BoundWindows,
    ) -> Result<bool> {
        // The region's lock is held until the window is bound: a concurrent Deregister then
        // either sees the window (ND_DEVICE_BUSY) or has already taken the registration.
        let slot = region.slot().lock();
        let parent = bind_parent(&slot, buffer, len, flags)?;
        if ended {
            return Ok(false);
        }
        let reg = self.bind(parent, buffer, len, flags, qp_id)?;
        windows.add(&reg);
        Ok(true)
    }

    /// Step 3 of a queue pair's `invalidate`, under its lock: unbind the window if it is bound
    /// through `qp_id` (and forget it in the queue pair's `windows`); otherwise the status the
    /// request completes with, `ND_INVALID_DEVICE_REQUEST` (`docs/ND-RULES.md` §2.9).
    pub fn invalidate_through(&self, qp_id: u64, windows: &mut BoundWindows) -> Option<Status> {
        match self.unbind_from(qp_id) {
            Some(r) => {
                windows.forget(&r);
                None
            }
            None => Some(Status::INVALID_DEVICE_REQUEST),
        }
    }

    /// `Invalidate` through queue pair `qp_id`: when the window is bound through it, unbind it
    /// (it stops working when this returns) and give back its registration, for the queue pair
    /// to forget. `None` for a window not bound, or bound through another queue pair: the
    /// request then completes with `ND_INVALID_DEVICE_REQUEST` (`docs/ND-RULES.md` §2.9).
    pub fn unbind_from(&self, qp_id: u64) -> Option<Arc<Registration>> {
        let cur = self.lock();
        let r = Self::bound(&cur).filter(|r| r.bound_qp.load(Ordering::Acquire) == qp_id)?;
        unbind(self.adapter.registrations(), &r);
        Some(r)
    }
}

/// Releasing a bound window unbinds it (`docs/ND-RULES.md` G10: applications release objects in
/// any order, windows while still bound): its token stops working for the peer at once, and
/// its region may be deregistered again. Without this the binding would outlive the object
/// until the connection ended.
impl<A: AdapterState> Drop for Window<A> {
    fn drop(&mut self) {
        let cur = self.lock();
        if let Some(r) = Self::bound(&cur) {
            unbind(self.adapter.registrations(), &r);
        }
    }
}

impl<A: AdapterState> MemoryWindow for Window<A> {
    fn as_any(&self) -> &dyn Any {
        self
    }

    /// `GetRemoteToken`: valid as soon as Bind returns (the binding is made inside the Bind
    /// call); the last binding's token once unbound, 0 before the first.
    fn get_remote_token(&self) -> u32 {
        self.lock().as_ref().map_or(0, |(token, _)| token.to_be())
    }

    fn set_peer_invalidate_hook(&self, hook: Option<PeerInvalidateHook>) -> bool {
        *self.hook.lock() = hook;
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kit::overlapped::tests::NullDriver;
    use crate::kit::overlapped::Driver;

    #[derive(Default)]
    struct Adapter {
        mrs: Table,
    }

    impl AdapterState for Adapter {
        fn registrations(&self) -> &Table {
            &self.mrs
        }
        fn driver(&self) -> Arc<dyn Driver> {
            Arc::new(NullDriver)
        }
        fn max_registration_size(&self) -> usize {
            1 << 20
        }
    }

    /// A region of `adapter` over `buf`, registered with `flags`.
    fn region(adapter: &Arc<Adapter>, buf: &mut [u8], flags: MrFlags) -> Arc<dyn MemoryRegion> {
        let r = Region::new(adapter.clone());
        // SAFETY: the tests never touch the memory through the registration.
        unsafe { r.register(buf.as_mut_ptr(), buf.len(), flags, None) }
            .expect("register")
            .wait()
            .expect("registered");
        Arc::new(r)
    }

    fn window(adapter: &Arc<Adapter>) -> Arc<dyn MemoryWindow> {
        Arc::new(Window::new(adapter.clone()))
    }

    fn status<T: fmt::Debug>(r: Result<T>) -> Status {
        r.unwrap_err().status()
    }

    #[test]
    fn bind_checks_flags_then_region_then_window() {
        let (a, b) = (Arc::<Adapter>::default(), Arc::<Adapter>::default());
        let mut buf = [0u8; 32];
        let (mr, mw) = (region(&a, &mut buf, MrFlags::ALLOW_LOCAL_WRITE), window(&a));
        let (other_mr, other_mw) = (Arc::new(Region::new(b.clone())) as _, window(&b));
        let bad = OpFlags::from_bits_retain(0x4);
        let e = bind_objects(&a, &other_mr, &other_mw, bad).unwrap_err();
        assert_eq!(e, Error::invalid_parameter(6));
        let e = bind_objects(&a, &other_mr, &other_mw, OpFlags::ALLOW_READ).unwrap_err();
        assert_eq!(e, Error::invalid_parameter(2));
        let e = bind_objects(&a, &mr, &other_mw, OpFlags::ALLOW_READ).unwrap_err();
        assert_eq!(e, Error::invalid_parameter(3));
        assert!(bind_objects(&a, &mr, &mw, OpFlags::ALLOW_WRITE).is_ok());
        let e = invalidate_object(&a, &other_mw, OpFlags::ALLOW_READ).unwrap_err();
        assert_eq!(e, Error::invalid_parameter(3), "Bind-only flag");
        let e = invalidate_object(&a, &other_mw, OpFlags::READ_FENCE).unwrap_err();
        assert_eq!(e, Error::invalid_parameter(2));
    }

    #[test]
    fn bind_parent_rules() {
        let a = Arc::<Adapter>::default();
        let mut buf = [0u8; 32];
        let p = buf.as_ptr();
        let ro = region(&a, &mut buf, MrFlags::empty());
        let ro = Region::downcast_on(&ro, &a).expect("ours");
        let slot = ro.slot().lock();
        let end = p.wrapping_add(32);
        assert!(bind_parent(&slot, p, 32, OpFlags::ALLOW_READ).is_ok());
        assert!(
            bind_parent(&slot, end, 0, OpFlags::empty()).is_ok(),
            "empty, at the end"
        );
        assert_eq!(
            status(bind_parent(&slot, p, 32, OpFlags::ALLOW_WRITE)),
            Status::ACCESS_VIOLATION,
            "R-MW-1: ALLOW_WRITE needs a locally writable region"
        );
        let past = p.wrapping_add(1);
        assert_eq!(
            status(bind_parent(&slot, past, 32, OpFlags::ALLOW_READ)),
            Status::ACCESS_VIOLATION
        );
        let beyond = p.wrapping_add(33);
        assert_eq!(
            status(bind_parent(&slot, beyond, 0, OpFlags::empty())),
            Status::ACCESS_VIOLATION
        );
        assert_eq!(
            status(bind_parent(&None, p, 1, OpFlags::empty())),
            Status::ACCESS_VIOLATION,
            "not registered"
        );
    }

    #[test]
    fn bind_once_and_invalidate_through_the_same_queue_pair() {
        let a = Arc::<Adapter>::default();
        let mut buf = [0u8; 32];
        let p = buf.as_ptr();
        let mr = region(&a, &mut buf, MrFlags::ALLOW_LOCAL_WRITE);
        let mw = window(&a);
        let (region, window) = bind_objects(&a, &mr, &mw, OpFlags::ALLOW_WRITE).expect("ours");
        assert_eq!(mw.get_remote_token(), 0, "never bound");
        let slot = region.slot().lock();
        let parent = bind_parent(&slot, p, 16, OpFlags::ALLOW_WRITE).expect("inside");
        let reg = window
            .bind(parent, p, 16, OpFlags::ALLOW_WRITE, 7)
            .expect("bind");
        assert_eq!(reg.flags, MrFlags::ALLOW_REMOTE_WRITE);
        assert_eq!(mw.get_remote_token(), reg.token.to_be());
        assert_eq!(
            status(window.bind(parent, p, 16, OpFlags::empty(), 7)),
            Status::INVALID_DEVICE_STATE
        );
        drop(slot);
        assert_eq!(
            status(mr.deregister()),
            Status::DEVICE_BUSY,
            "R-MR-2: a window is bound"
        );
        assert!(window.unbind_from(8).is_none(), "bound through another QP");
        let r = window.unbind_from(7).expect("bound through 7");
        assert!(Arc::ptr_eq(&r, &reg) && !r.is_valid());
        assert!(a.mrs.lookup(reg.token).is_none(), "its token is dead");
        assert!(window.unbind_from(7).is_none(), "already unbound");
        assert!(mr.deregister().is_ok(), "the region is free again");
    }
}
