//! The progress engine: a thread per adapter that drives its I/O while the application does
//! not, so that peers' RDMA Writes and Reads land, connection requests are answered and
//! completions reach waiters while the application computes or sleeps, as on RDMA hardware.
//!
//! It never competes with the application. The application's threads drive the I/O as they do
//! without the engine (a poller reads its sockets and rings, a waiter sleeps on the transport);
//! every time one polls or waits it marks the adapter's [`Activity`]. The engine looks at that
//! mark: while it moves, the engine stays out of the way, asleep for [`BACKOFF`] at a time;
//! once it stops moving, the engine waits in the provider's own [`Driver::wait_for`], as the
//! leader asleep on the transport, until the application shows up again or [`SLICE`] passes.
//! An application thread that starts waiting while the engine leads is woken by the engine's
//! dispatch, once; the engine then steps back. After a wait that work ended, the engine polls
//! for [`LINGER`] before it sleeps again, so a stream of requests from a peer is served without
//! a wake-up each. So a message pays no thread hand-off while the application drives, the
//! first one after the application was idle pays at most one, and an idle adapter costs a
//! wake-up every [`SLICE`], nothing more.
//!
//! Modes (`ND_PROGRESS`): `thread` (the engine runs; the default) and `manual` (no engine:
//! only the application's polls and waits drive). No latency row costs 2 % more with the
//! engine (docs/BENCHMARKS.md), which is what made `thread` the default. Releasing the adapter stops its engine (at once if it sleeps in
//! a back-off, within [`SLICE`] otherwise); the thread is never joined, so a process that
//! exits or forks with it running neither waits for it nor finds it in the child.

use std::cell::Cell;
use std::fmt;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Weak};
use std::thread::{self, Thread};
use std::time::{Duration, Instant};

use crate::kit::overlapped::Driver;

/// The environment variable that chooses the mode of adapters opened without an explicit one.
pub const VAR: &str = "ND_PROGRESS";

/// Who advances an adapter's I/O.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum ProgressMode {
    /// The application's threads, when they poll or wait, and nothing else.
    Manual,
    /// Those, and a progress engine when they do not (the default).
    #[default]
    Thread,
}

impl ProgressMode {
    /// `manual` or `thread`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "manual" => Some(Self::Manual),
            "thread" => Some(Self::Thread),
            _ => None,
        }
    }

    /// The mode `ND_PROGRESS` names, or `default` when it is unset or says something else.
    pub fn from_env_or(default: Self) -> Self {
        std::env::var(VAR)
            .ok()
            .and_then(|v| Self::parse(&v))
            .unwrap_or(default)
    }

    /// Its name, as `ND_PROGRESS` spells it.
    pub fn name(self) -> &'static str {
        match self {
            Self::Manual => "manual",
            Self::Thread => "thread",
        }
    }
}

/// How long the engine stays away once it has seen the application drive.
pub const BACKOFF: Duration = Duration::from_millis(10);
/// The longest the engine waits in one go before it looks at the application again.
pub const SLICE: Duration = Duration::from_millis(100);
/// How long the engine keeps polling after a wait that work ended, before it sleeps again: a
/// peer's next request usually follows within microseconds, and a sleeping engine costs each
/// one a wake-up message and a cross-core wake-up (35–40 µs on a 2-vCPU VM), longer than a
/// 1 MiB `shm` transfer takes. Spent only after work came, so an idle adapter never spins.
pub const LINGER: Duration = Duration::from_micros(50);

/// A mark the application's threads move whenever they poll or wait on the adapter.
///
/// Moved with a plain load and store (not a read-modify-write): only "it moved" matters, a
/// lost increment between two application threads still moves it, and a poller that keeps the
/// line in its cache pays about a nanosecond; the engine reads it once per [`BACKOFF`].
#[derive(Debug, Default)]
pub struct Activity {
    count: AtomicU64,
}

impl Activity {
    /// An application thread is driving. A no-op on the engine's own thread.
    #[inline]
    pub fn touch(&self) {
        let c = self.count.load(Ordering::Relaxed);
        self.count.store(c.wrapping_add(1), Ordering::Relaxed);
    }

    /// [`Activity::touch`], unless this is the engine's thread (for paths both take).
    #[inline]
    pub fn touch_unless_engine(&self) {
        if !on_engine_thread() {
            self.touch();
        }
    }

    fn get(&self) -> u64 {
        self.count.load(Ordering::Relaxed)
    }
}

thread_local! {
    static ENGINE: Cell<bool> = const { Cell::new(false) };
}

/// Whether the calling thread is a progress engine.
pub fn on_engine_thread() -> bool {
    ENGINE.with(Cell::get)
}

/// A running engine; dropping it stops the engine.
pub struct ProgressThread {
    stop: Arc<AtomicBool>,
    thread: Thread,
    driver: Weak<dyn Driver>,
}

impl fmt::Debug for ProgressThread {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProgressThread")
            .field("thread", &self.thread.id())
            .finish()
    }
}

impl ProgressThread {
    /// Start an engine driving `driver`, watching `activity`. `None` if no thread could be
    /// made (the adapter then stays in manual mode).
    pub fn start(driver: &Arc<dyn Driver>, activity: Arc<Activity>) -> Option<Self> {
        presize_descriptor_table();
        let stop = Arc::new(AtomicBool::new(false));
        let weak = Arc::downgrade(driver);
        let (s, w) = (stop.clone(), weak.clone());
        let handle = thread::Builder::new()
            .name("nd-progress".into())
            .spawn(move || run(&w, &activity, &s))
            .ok()?;
        Some(Self {
            stop,
            thread: handle.thread().clone(),
            driver: weak,
        })
    }
}

impl Drop for ProgressThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        // Out of a back-off at once; out of a wait as the leader through the driver's own
        // wake-up (the engine's `done` sees the flag).
        self.thread.unpark();
        if let Some(d) = self.driver.upgrade() {
            d.notify();
        }
    }
}

/// Grow this process's descriptor table to the descriptor limit (at most [`FD_TABLE_MAX`])
/// once, before the first engine thread starts.
///
/// Linux grows the table by doubling as descriptors are opened, and in a process of more
/// than one thread each growth waits for an RCU grace period (`expand_fdtable`), milliseconds
/// on a VM: an application opening thousands of connections with an engine running stalled
/// at 256, 512, 1,024 ... descriptors (3,500–7,000 conn/s over those stretches against 21,000
/// without, `nd connrate`). Done while this thread may still be the only one, it costs one
/// allocation of 8 bytes per descriptor; tables never shrink. Best effort.
fn presize_descriptor_table() {
    static DONE: std::sync::Once = std::sync::Once::new();
    DONE.call_once(|| {
        let Ok(limit) = usize::try_from(
            rustix::process::getrlimit(rustix::process::Resource::Nofile)
                .current
                .unwrap_or(FD_TABLE_MAX as u64),
        ) else {
            return;
        };
        let Ok(top) = i32::try_from(limit.min(FD_TABLE_MAX).saturating_sub(1)) else {
            return;
        };
        let Ok(probe) = rustix::event::eventfd(0, rustix::event::EventfdFlags::CLOEXEC) else {
            return;
        };
        // The lowest free descriptor at or above `top`: the table grows to hold it; both
        // close at once.
        let _ = rustix::io::fcntl_dupfd_cloexec(&probe, top);
    });
}

/// The largest descriptor table [`presize_descriptor_table`] makes (512 KiB of pointers).
const FD_TABLE_MAX: usize = 65_536;

/// The engine's loop (module docs).
fn run(driver: &Weak<dyn Driver>, activity: &Activity, stop: &AtomicBool) {
    ENGINE.with(|e| e.set(true));
    let mut seen = activity.get();
    while !stop.load(Ordering::Acquire) {
        let now = activity.get();
        if now != seen {
            seen = now;
            thread::park_timeout(BACKOFF);
            continue;
        }
        let Some(d) = driver.upgrade() else {
            return;
        };
        let quiet = || !stop.load(Ordering::Acquire) && activity.get() == seen;
        let slept = Instant::now();
        d.wait_for(&|| !quiet(), Some(SLICE));
        if slept.elapsed() < SLICE && quiet() {
            // Woken by work: linger (`LINGER`), as long as the application stays away.
            let until = Instant::now() + LINGER;
            while quiet() && Instant::now() < until {
                d.progress();
                std::hint::spin_loop();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Mutex;

    /// A driver that counts the engine's waits and what woke it.
    #[derive(Debug, Default)]
    struct Counting {
        waits: Mutex<u32>,
    }
    impl Driver for Counting {
        fn progress(&self) {}
        fn wait(&self, _timeout: Option<Duration>) {}
        fn wait_for(&self, done: &dyn Fn() -> bool, _timeout: Option<Duration>) {
            *self.waits.lock().unwrap() += 1;
            // Stands for a sleep on the transport: returns when told to (or spuriously).
            while !done() {
                thread::yield_now();
            }
        }
        fn notify(&self) {}
    }

    #[test]
    fn modes_parse_from_their_names() {
        assert_eq!(ProgressMode::parse("thread"), Some(ProgressMode::Thread));
        assert_eq!(ProgressMode::parse(" manual "), Some(ProgressMode::Manual));
        assert_eq!(ProgressMode::parse("auto"), None);
        assert_eq!(ProgressMode::Thread.name(), "thread");
    }

    /// The engine waits while the application is idle, leaves its wait when the application
    /// shows up (and comes back after its back-off), and lets go of the driver when dropped.
    #[test]
    fn the_engine_leads_only_while_the_application_is_idle() {
        let d = Arc::new(Counting::default());
        let dyn_d: Arc<dyn Driver> = d.clone();
        let activity = Arc::new(Activity::default());
        let engine = ProgressThread::start(&dyn_d, activity.clone()).expect("thread");
        let waits = || *d.waits.lock().unwrap();
        // Idle: the engine enters a wait, and stays in it.
        while waits() == 0 {
            thread::yield_now();
        }
        // The application polls: the engine's wait ends (its `done` sees the mark move), and
        // a new one starts once the application has been quiet for the back-off.
        activity.touch();
        while waits() < 2 {
            thread::yield_now();
        }
        drop(engine);
        // Stopped: it leaves its wait and lets go of the driver (two references remain: `d`
        // and `dyn_d`).
        while Arc::strong_count(&d) > 2 {
            thread::yield_now();
        }
        assert!(!on_engine_thread());
    }
}
