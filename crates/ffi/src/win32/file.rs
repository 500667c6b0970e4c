//! ND overlapped files (`IND2Adapter::CreateOverlappedFile`): the handle a program associates
//! with a completion port. Every object created with the file completes its requests through
//! it; the association is looked up when a request completes, so a program may associate the
//! file after creating objects.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};

use nd::spi::kit::overlapped::Driver;
use nd::spi::Adapter;

use super::port::{Packet, Port};

/// An overlapped file of one adapter.
#[derive(Debug)]
pub struct OvFile {
    /// The adapter (kept alive by the file, as an open file keeps its device).
    pub adapter: Arc<dyn Adapter>,
    port: Mutex<Option<(Arc<Port>, usize)>>,
    /// The driver of the requests completing through this file (one per adapter), learned
    /// from the first: a port's waiters drive it.
    driver: Mutex<Option<Weak<dyn Driver>>>,
    closed: AtomicBool,
}

impl OvFile {
    /// A new file of `adapter`.
    pub fn new(adapter: Arc<dyn Adapter>) -> Self {
        Self {
            adapter,
            port: Mutex::new(None),
            driver: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// Associate with `port` under `key`; the port's waiters then drive this file's requests.
    pub fn associate(&self, port: &Arc<Port>, key: usize) {
        *self.port.lock().unwrap_or_else(|e| e.into_inner()) = Some((port.clone(), key));
        let known = self
            .driver
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let Some(d) = known.and_then(|w| w.upgrade()) {
            port.waitable.drivers.link(&d);
        }
    }

    /// A request will complete through this file, driven by `driver`: link it to the port.
    pub fn note_driver(&self, driver: &Arc<dyn Driver>) {
        {
            let mut d = self.driver.lock().unwrap_or_else(|e| e.into_inner());
            if d.as_ref()
                .is_some_and(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(driver)))
            {
                return;
            }
            *d = Some(Arc::downgrade(driver));
        }
        let port = self.port.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((port, _)) = port {
            port.waitable.drivers.link(driver);
        }
    }

    /// `CloseHandle`: requests still pending complete their `OVERLAPPED` and event, but queue
    /// no packet.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        *self.port.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }

    /// Queue the completion packet of a request, if the file is associated with a port.
    pub fn complete(&self, ov: *mut crate::abi::OVERLAPPED, bytes: u32, status: u32) {
        if self.closed.load(Ordering::Acquire) {
            return;
        }
        let port = self.port.lock().unwrap_or_else(|e| e.into_inner()).clone();
        if let Some((port, key)) = port {
            port.post(Packet {
                bytes,
                key,
                ov,
                status,
            });
        }
    }
}
