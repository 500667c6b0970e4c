//! Overlapped requests between a C `OVERLAPPED` and a Rust [`nd::Overlapped`].
//!
//! A request the Rust object accepted returns `ND_PENDING` to C, even when it has finished
//! already (docs/ND-RULES.md G6: programs wait for the completion unconditionally after many
//! calls). Before that return, `Internal` is `STATUS_PENDING` and the event is reset. When the
//! Rust request completes, on whichever thread completes it, the completion is *delivered*:
//! 1. `InternalHigh` (bytes: 0, ND v2 defines none) then `Internal` (the status, zero-extended,
//!    release-ordered after the byte count) are written;
//! 2. the event (`hEvent` without its tag bits) is set;
//! 3. unless `hEvent`'s bit 0 is set, a packet goes to the completion port the object's
//!    overlapped file is associated with at that moment.
//!
//! Nothing else is kept in the `OVERLAPPED` (programs reuse one across objects, D27): the
//! request is found by `(object, OVERLAPPED*)` in the object's [`Requests`].
//!
//! Delivery happens exactly once. `GetOverlappedResult` does not return before it is done, so
//! a program that reuses the `OVERLAPPED` the moment its result is known never has a late
//! write land in its next request. When the application releases the object, requests still
//! pending are cancelled, and what is left is detached: it will never write the caller's
//! memory again.

use std::sync::atomic::{AtomicU8, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Wake, Waker};

use nd::{Overlapped, Status};

use crate::abi::{HANDLE, OVERLAPPED, STATUS_PENDING};
use crate::win32::event::Event;
use crate::win32::file::OvFile;
use crate::win32::handles;

const PENDING: u8 = 0;
const DELIVERING: u8 = 1;
const DELIVERED: u8 = 2;

/// One request in flight.
struct Request {
    /// The caller's `OVERLAPPED`, as an address (compared, and written at delivery).
    ov: usize,
    rust: Overlapped,
    event: Option<Arc<Event>>,
    /// `hEvent`'s bit 0: no completion packet.
    no_packet: bool,
    file: Option<Arc<OvFile>>,
    state: AtomicU8,
}

impl Request {
    /// Deliver the completion unless another thread has (or is doing it): then wait for that
    /// thread to finish, which takes a few stores.
    fn deliver(&self) {
        match self
            .state
            .compare_exchange(PENDING, DELIVERING, Ordering::AcqRel, Ordering::Acquire)
        {
            Ok(_) => {}
            Err(_) => {
                while self.state.load(Ordering::Acquire) == DELIVERING {
                    std::hint::spin_loop();
                    std::thread::yield_now();
                }
                return;
            }
        }
        let status = self.rust.status();
        let ov = self.ov as *mut OVERLAPPED;
        // SAFETY: the caller keeps the OVERLAPPED alive until the request completes (the Win32
        // contract); `OVERLAPPED` is 8-aligned, so its two first words are valid atomics.
        unsafe {
            AtomicUsize::from_ptr(&raw mut (*ov).internal_high).store(0, Ordering::Relaxed);
            AtomicUsize::from_ptr(&raw mut (*ov).internal)
                .store(status.0 as u32 as usize, Ordering::Release);
        }
        if let Some(e) = &self.event {
            e.set();
        }
        if !self.no_packet {
            if let Some(f) = &self.file {
                f.complete(ov, 0, status.0 as u32);
            }
        }
        self.state.store(DELIVERED, Ordering::Release);
    }

    /// Mark the request as never to be delivered (its object was released).
    fn detach(&self) {
        let _ =
            self.state
                .compare_exchange(PENDING, DELIVERED, Ordering::AcqRel, Ordering::Acquire);
        while self.state.load(Ordering::Acquire) == DELIVERING {
            std::thread::yield_now();
        }
    }
}

/// The completion hook: the Rust request wakes this when it completes.
struct Hook(Arc<Request>);

impl Wake for Hook {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        let r = &self.0;
        if r.rust.is_complete() {
            r.deliver();
        } else if r.rust.wake_on_completion(&Waker::from(self.clone())) {
            // Woken early (a crowd of futures awaiting the same request re-registers); it
            // completed while the hook registered again.
            r.deliver();
        }
    }
}

/// The overlapped requests of one object (a CQ, SRQ, MR, connector or listener).
#[derive(Default)]
pub struct Requests {
    list: Mutex<Vec<Arc<Request>>>,
    /// The overlapped file the object was created with (None: `NULL` was passed).
    file: Option<Arc<OvFile>>,
}

impl std::fmt::Debug for Requests {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let n = self.list.lock().map_or(0, |l| l.len());
        f.debug_struct("Requests").field("held", &n).finish()
    }
}

impl Requests {
    /// The requests of an object created with the overlapped file `file`.
    pub fn new(file: Option<Arc<OvFile>>) -> Self {
        Self {
            list: Mutex::new(Vec::new()),
            file,
        }
    }

    /// Turn the result of a Rust call into the C return: `Err` → its status, synchronously,
    /// with nothing written; `Ok(request)` → `ND_PENDING`, and the completion delivered as
    /// the module documentation says. The request's driver is linked to its event and to the
    /// file's port, whose waiters then drive it.
    ///
    /// # Safety
    /// `ov` is null (refused: `ND_INVALID_PARAMETER_{ov_param}`, and the request, if it was
    /// made, is cancelled) or the caller's `OVERLAPPED`, valid until the request completes.
    pub unsafe fn submit(
        &self,
        ov: *mut OVERLAPPED,
        ov_param: u32,
        made: nd::Result<Overlapped>,
    ) -> Status {
        let rust = match made {
            Ok(r) => r,
            Err(e) => return e.status(),
        };
        if ov.is_null() {
            rust.cancel();
            return Status::invalid_parameter(ov_param);
        }
        // SAFETY: `ov` is the caller's OVERLAPPED (checked non-null).
        let h_event: HANDLE = unsafe { (*ov).h_event };
        let event = handles::event(((h_event as usize) & !3) as HANDLE);
        // SAFETY: as above; nothing delivers before the hook is registered below.
        unsafe {
            AtomicUsize::from_ptr(&raw mut (*ov).internal).store(STATUS_PENDING, Ordering::Relaxed);
        }
        if let Some(e) = &event {
            e.reset();
            e.waitable.drivers.link(rust.driver());
        }
        if let Some(f) = &self.file {
            f.note_driver(rust.driver());
        }
        let req = Arc::new(Request {
            ov: ov as usize,
            rust,
            event,
            no_packet: (h_event as usize) & 1 != 0,
            file: self.file.clone(),
            state: AtomicU8::new(PENDING),
        });
        {
            let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            l.retain(|r| r.state.load(Ordering::Acquire) != DELIVERED);
            l.push(req.clone());
        }
        let hook = Arc::new(Hook(req.clone()));
        if req.rust.wake_on_completion(&Waker::from(hook)) {
            req.deliver();
        }
        Status::PENDING
    }

    /// `IND2Overlapped::GetOverlappedResult(ov, wait)`: the final status of the newest request
    /// this object started with `ov`, waiting (and driving I/O) if asked; `ND_PENDING` if it is
    /// still running and `wait` is false. A request whose completion was delivered and then
    /// forgotten is answered from `ov->Internal`, which the delivery wrote.
    ///
    /// # Safety
    /// `ov` is null (`ND_INVALID_PARAMETER_1`) or readable.
    pub unsafe fn result(&self, ov: *mut OVERLAPPED, wait: bool) -> Status {
        if ov.is_null() {
            return Status::invalid_parameter(1);
        }
        let found = {
            let l = self.list.lock().unwrap_or_else(|e| e.into_inner());
            l.iter().rev().find(|r| r.ov == ov as usize).cloned()
        };
        let Some(req) = found else {
            // SAFETY: readable (caller); an atomic load pairs with delivery's release store.
            let v =
                unsafe { AtomicUsize::from_ptr(&raw mut (*ov).internal).load(Ordering::Acquire) };
            return Status(v as u32 as i32);
        };
        let r = req.rust.get_overlapped_result(wait);
        if r.is_err_and(|e| e.is_pending()) {
            return Status::PENDING;
        }
        // The caller may reuse `ov` as soon as this returns: deliver first (or wait for the
        // thread delivering it).
        req.deliver();
        req.rust.status()
    }

    /// Detach every request still pending: called when the application releases the object
    /// (after cancelling what the object can cancel), so nothing writes its memory later.
    pub fn detach_all(&self) {
        let l = std::mem::take(&mut *self.list.lock().unwrap_or_else(|e| e.into_inner()));
        for r in l {
            if r.rust.is_complete() {
                r.deliver();
            } else {
                r.detach();
            }
        }
    }
}
