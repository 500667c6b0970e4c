//! Blocking in a Win32 wait while driving ND I/O.
//!
//! netdirect advances I/O in the threads that wait (docs/ARCHITECTURE.md, "Who drives the
//! I/O"), so a thread blocked in `WaitForSingleObject` on an event that pending requests will
//! signal, or in `GetQueuedCompletionStatus` on a port that adapters' overlapped files are
//! associated with, drives those adapters: it makes progress on each, then sleeps in `poll`
//! on their descriptors and on the waited object's own wake-up descriptor, until what it waits
//! for has happened or time runs out.

use std::os::fd::OwnedFd;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Weak};
use std::time::Instant;

use nd::spi::Adapter;
use rustix::event::{eventfd, poll, EventfdFlags, PollFd, PollFlags, Timespec};

/// The wake-up descriptor of an event or a port: written only while a thread sleeps on it,
/// so signalling an object nobody waits for costs no system call.
#[derive(Debug)]
pub struct Wake {
    fd: Option<OwnedFd>,
    sleepers: AtomicU32,
}

impl Wake {
    /// A new wake-up descriptor (`None` inside if the system is out of descriptors: waits then
    /// poll in short slices instead).
    pub fn new() -> Self {
        Self {
            fd: eventfd(0, EventfdFlags::NONBLOCK | EventfdFlags::CLOEXEC).ok(),
            sleepers: AtomicU32::new(0),
        }
    }

    /// Wake the threads sleeping on this object. Called after the state they wait for changed.
    pub fn notify(&self) {
        // SeqCst pairs with the sleeper's count-then-recheck in `wait_until`: either it sees
        // the new state, or this sees it counted.
        if self.sleepers.load(Ordering::SeqCst) > 0 {
            if let Some(fd) = &self.fd {
                let _ = rustix::io::write(fd, &1u64.to_ne_bytes());
            }
        }
    }

    fn drain(&self) {
        if let Some(fd) = &self.fd {
            let mut b = [0u8; 8];
            let _ = rustix::io::read(fd, &mut b);
        }
    }
}

impl Default for Wake {
    fn default() -> Self {
        Self::new()
    }
}

/// The adapters a waiter drives: held weakly, so a wait never keeps an adapter alive.
#[derive(Debug, Default)]
pub struct Drivers {
    list: std::sync::Mutex<Vec<Weak<dyn Adapter>>>,
}

impl Drivers {
    /// Add `adapter` unless it is there already; forget adapters that are gone.
    pub fn link(&self, adapter: &Arc<dyn Adapter>) {
        let mut l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.retain(|w| w.strong_count() > 0);
        if !l
            .iter()
            .any(|w| std::ptr::addr_eq(w.as_ptr(), Arc::as_ptr(adapter)))
        {
            l.push(Arc::downgrade(adapter));
        }
    }

    fn live(&self) -> Vec<Arc<dyn Adapter>> {
        let l = self.list.lock().unwrap_or_else(|e| e.into_inner());
        l.iter().filter_map(Weak::upgrade).collect()
    }
}

/// Block until `ready()` holds (true) or `deadline` passes (false), driving `drivers` and
/// sleeping on their descriptors and on `wake`.
pub fn wait_until(
    drivers: &Drivers,
    wake: &Wake,
    ready: &dyn Fn() -> bool,
    deadline: Option<Instant>,
) -> bool {
    loop {
        if ready() {
            return true;
        }
        let adapters = drivers.live();
        for a in &adapters {
            a.progress();
        }
        if ready() {
            return true;
        }
        let left = match deadline {
            None => None,
            Some(d) => match d.checked_duration_since(Instant::now()) {
                Some(left) if !left.is_zero() => Some(left),
                _ => return false,
            },
        };
        wake.sleepers.fetch_add(1, Ordering::SeqCst);
        if ready() {
            wake.sleepers.fetch_sub(1, Ordering::SeqCst);
            return true;
        }
        let mut fds: Vec<PollFd<'_>> = adapters
            .iter()
            .map(|a| PollFd::from_borrowed_fd(a.fd(), PollFlags::IN))
            .collect();
        // Without a wake-up descriptor, sleep in slices so a signal is seen within 10 ms.
        let slice = match &wake.fd {
            Some(fd) => {
                fds.push(PollFd::new(fd, PollFlags::IN));
                left
            }
            None => Some(left.map_or(std::time::Duration::from_millis(10), |l| {
                l.min(std::time::Duration::from_millis(10))
            })),
        };
        let ts = slice.map(|d| {
            Timespec::try_from(d).unwrap_or(Timespec {
                tv_sec: i64::MAX,
                tv_nsec: 0,
            })
        });
        let _ = poll(&mut fds, ts.as_ref());
        let woken = wake.fd.is_some() && fds.last().is_some_and(|f| !f.revents().is_empty());
        drop(fds);
        wake.sleepers.fetch_sub(1, Ordering::SeqCst);
        if woken {
            wake.drain();
        }
    }
}
