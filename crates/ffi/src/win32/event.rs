//! Win32 events (`CreateEvent`, `SetEvent`, `ResetEvent`, waits), the way ND programs signal
//! the completion of an overlapped request to a waiting thread.

use std::sync::Mutex;
use std::time::Instant;

use super::wait::{wait_until, Drivers, Wake};

/// An event object: manual-reset (stays signalled until reset) or auto-reset (a satisfied
/// wait consumes the signal).
#[derive(Debug)]
pub struct Event {
    manual: bool,
    signaled: Mutex<bool>,
    wake: Wake,
    /// The adapters of requests that will signal this event: a waiter drives them.
    pub(crate) drivers: Drivers,
}

impl Event {
    /// A new event.
    pub fn new(manual: bool, initial: bool) -> Self {
        Self {
            manual,
            signaled: Mutex::new(initial),
            wake: Wake::new(),
            drivers: Drivers::default(),
        }
    }

    /// `SetEvent`.
    pub fn set(&self) {
        *self.signaled.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.wake.notify();
    }

    /// `ResetEvent`.
    pub fn reset(&self) {
        *self.signaled.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    /// A wait's check: true if signalled, consuming the signal of an auto-reset event.
    fn take(&self) -> bool {
        let mut s = self.signaled.lock().unwrap_or_else(|e| e.into_inner());
        let was = *s;
        if was && !self.manual {
            *s = false;
        }
        was
    }

    /// `WaitForSingleObject`: true when signalled, false at the deadline.
    pub fn wait(&self, deadline: Option<Instant>) -> bool {
        wait_until(&self.drivers, &self.wake, &|| self.take(), deadline)
    }
}
