//! Win32 events (`CreateEvent`, `SetEvent`, `ResetEvent`, waits), the way ND programs learn
//! that an overlapped request completed.

use std::sync::Mutex;
use std::time::Instant;

use super::wait::Waitable;

/// An event object: manual-reset (stays signalled until reset) or auto-reset (a satisfied
/// wait consumes the signal).
#[derive(Debug)]
pub struct Event {
    manual: bool,
    signaled: Mutex<bool>,
    /// Its waiters, and the drivers of the requests that will set it.
    pub(crate) waitable: Waitable,
}

impl Event {
    /// A new event.
    pub fn new(manual: bool, initial: bool) -> Self {
        Self {
            manual,
            signaled: Mutex::new(initial),
            waitable: Waitable::default(),
        }
    }

    /// `SetEvent`.
    pub fn set(&self) {
        *self.signaled.lock().unwrap_or_else(|e| e.into_inner()) = true;
        self.waitable.signal();
    }

    /// `ResetEvent`.
    pub fn reset(&self) {
        *self.signaled.lock().unwrap_or_else(|e| e.into_inner()) = false;
    }

    fn is_set(&self) -> bool {
        *self.signaled.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A satisfied wait: true if signalled, consuming the signal of an auto-reset event.
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
        self.waitable
            .wait(&|| self.is_set(), &mut || self.take(), deadline)
    }
}
