//! `CreateThread`: a thread running a C `DWORD fn(LPVOID)`, waitable until it returns.

use std::sync::{Condvar, Mutex};
use std::time::Instant;

/// A thread's exit code, once it has returned.
#[derive(Debug, Default)]
pub struct Thread {
    exit: Mutex<Option<u32>>,
    done: Condvar,
}

impl Thread {
    /// Record the thread's return value and wake its waiters.
    pub fn finish(&self, code: u32) {
        *self.exit.lock().unwrap_or_else(|e| e.into_inner()) = Some(code);
        self.done.notify_all();
    }

    /// The exit code, if the thread has returned.
    pub fn exit_code(&self) -> Option<u32> {
        *self.exit.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Wait until the thread has returned (true) or `deadline` passes (false).
    pub fn wait(&self, deadline: Option<Instant>) -> bool {
        let mut g = self.exit.lock().unwrap_or_else(|e| e.into_inner());
        while g.is_none() {
            match deadline {
                None => g = self.done.wait(g).unwrap_or_else(|e| e.into_inner()),
                Some(d) => {
                    let Some(left) = d.checked_duration_since(Instant::now()) else {
                        return false;
                    };
                    g = self
                        .done
                        .wait_timeout(g, left)
                        .unwrap_or_else(|e| e.into_inner())
                        .0;
                }
            }
        }
        true
    }
}
