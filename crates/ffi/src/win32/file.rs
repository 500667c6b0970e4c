//! ND overlapped files (`IND2Adapter::CreateOverlappedFile`): the handle a program associates
//! with a completion port. Every object created with the file completes its requests through
//! it; the association is looked up when a request completes, so a program may associate the
//! file after creating objects.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};

use nd::spi::Adapter;

use super::port::{Packet, Port};

/// An overlapped file of one adapter.
#[derive(Debug)]
pub struct OvFile {
    /// The adapter (kept alive by the file, as an open file keeps its device).
    pub adapter: Arc<dyn Adapter>,
    port: Mutex<Option<(Arc<Port>, usize)>>,
    closed: AtomicBool,
}

impl OvFile {
    /// A new file of `adapter`.
    pub fn new(adapter: Arc<dyn Adapter>) -> Self {
        Self {
            adapter,
            port: Mutex::new(None),
            closed: AtomicBool::new(false),
        }
    }

    /// Associate with `port` under `key`; the port's waiters then drive this adapter.
    pub fn associate(&self, port: &Arc<Port>, key: usize) {
        port.drivers.link(&self.adapter);
        *self.port.lock().unwrap_or_else(|e| e.into_inner()) = Some((port.clone(), key));
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
