//! Blocking in a Win32 wait while driving ND I/O.
//!
//! netdirect advances I/O in the threads that wait (docs/ARCHITECTURE.md, "Who drives the
//! I/O"), so a thread blocked in `WaitForSingleObject` on an event that pending requests will
//! signal, or in `GetQueuedCompletionStatus` on a port that requests complete to, waits in the
//! provider's own [`Driver::wait_for`] (the driver of those requests): it makes progress and
//! sleeps the way `Overlapped::wait` does, as the leader on the adapter's transport or as a
//! follower, with no thread in between. Whoever changes what the wait watches (sets the event,
//! queues a packet) then calls [`Driver::notify`] on the linked drivers, which wakes it.
//!
//! The adapter's descriptor is deliberately not polled here: exporting it to an outside
//! event loop makes the provider keep every connection armed for that loop, which costs the
//! `shm` provider a wake-up message per message.

use std::sync::{Arc, Condvar, Mutex, Weak};
use std::time::{Duration, Instant};

use nd::spi::kit::overlapped::Driver;

/// The drivers whose requests signal an object: held weakly, so a wait never keeps an adapter
/// alive.
#[derive(Debug, Default)]
pub struct Drivers {
    list: Mutex<Vec<Weak<dyn Driver>>>,
}

impl Drivers {
    /// Add `driver` unless it is there already; forget drivers that are gone.
    pub fn link(&self, driver: &Arc<dyn Driver>) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        if l.iter()
            .any(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(driver)))
        {
            return;
        }
        l.retain(|w| w.strong_count() > 0);
        l.push(Arc::downgrade(driver));
    }

    fn live(&self) -> Vec<Arc<dyn Driver>> {
        let l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.iter().filter_map(Weak::upgrade).collect()
    }
}

/// What an event or a port waits with: its drivers, and a condition variable for a wait with
/// no driver (nothing pending on it: only `SetEvent` or `PostQueuedCompletionStatus` can end
/// it).
#[derive(Debug, Default)]
pub struct Waitable {
    /// The drivers of the requests that signal this object.
    pub drivers: Drivers,
    generation: Mutex<u64>,
    cond: Condvar,
}

/// With several drivers, each is waited on in turn for this long.
const SLICE: Duration = Duration::from_millis(1);

impl Waitable {
    /// What the object's waiters watch has changed (call after changing it): wake them.
    pub fn signal(&self) {
        *self.generation.lock().unwrap_or_else(|e| e.into_inner()) += 1;
        self.cond.notify_all();
        for d in self.drivers.live() {
            d.notify();
        }
    }

    /// Block until `take()` succeeds (true) or `deadline` passes (false), driving the linked
    /// drivers. `peek` says, without changing anything, whether `take` would succeed (a
    /// driver may call it with its locks held).
    pub fn wait(
        &self,
        peek: &dyn Fn() -> bool,
        take: &mut dyn FnMut() -> bool,
        deadline: Option<Instant>,
    ) -> bool {
        loop {
            if take() {
                return true;
            }
            let drivers = self.drivers.live();
            let left = match deadline {
                None => None,
                Some(d) => match d.checked_duration_since(Instant::now()) {
                    Some(left) if !left.is_zero() => Some(left),
                    _ => {
                        // Out of time (a zero timeout included): one pass of progress first,
                        // as hardware would have made it meanwhile. A program that polls a
                        // port with a zero timeout between posts must see its connections
                        // and requests advance.
                        for d in &drivers {
                            d.progress();
                        }
                        return take();
                    }
                },
            };
            match drivers.as_slice() {
                [] => {
                    let g = self.generation.lock().unwrap_or_else(|e| e.into_inner());
                    // Checked under the lock `signal` bumps the generation under: a change
                    // made before the signal is seen here, or the signal wakes the wait.
                    if !peek() {
                        let long = Duration::from_secs(3600);
                        let _ = self
                            .cond
                            .wait_timeout(g, left.unwrap_or(long))
                            .unwrap_or_else(|e| e.into_inner());
                    }
                }
                [one] => one.wait_for(peek, left),
                many => {
                    for d in many {
                        d.wait_for(peek, Some(left.map_or(SLICE, |l| l.min(SLICE))));
                        if peek() {
                            break;
                        }
                    }
                }
            }
        }
    }
}
