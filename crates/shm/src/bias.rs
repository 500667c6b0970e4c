//! A mutex biased to the first thread that takes it: that thread takes it and gives it back
//! with plain loads and stores (no locked instruction, no fence) for as long as no other
//! thread takes it.
//!
//! Why: a queue pair's lock is taken three times per message of a ping-pong (the poll that
//! finds the message, the Receive reposted for the next one, the Send of the reply), and in
//! the common case always by one thread (one thread per connection, as ND's examples and MPI
//! ranks run). A futex mutex costs a locked read-modify-write to take and another to give
//! back; six per message, most of them between seeing a message and publishing the reply.
//!
//! How: an asymmetric Dekker handshake (a compiler barrier on the fast path, `membarrier` on
//! the slow one, as in the example of `membarrier(2)`). The owner announces itself in `busy`
//! with a plain store and then reads `owner`, with only a compiler fence between the two, so
//! on its own the CPU may read `owner` before the store is visible. Any other thread takes
//! the fallback mutex, marks the bias revoked in `owner`, and calls
//! `membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED)`, which runs a full memory barrier on every
//! CPU running a thread of this process before it returns. After it, either the owner's
//! `busy` store is visible (the revoker waits until the owner clears it), or the owner's read
//! of `owner` comes after the barrier and sees the revocation (the owner backs off and takes
//! the fallback mutex). The bias is not restored: from then on every thread, the first one
//! included, takes the fallback mutex, as with a plain mutex.
//!
//! The revocation costs one `membarrier` call (185 ns here with no other thread running; an
//! interrupt to each CPU that runs one) and a wait bounded by the owner's critical section,
//! once per mutex. Where `membarrier` is not available (a kernel before 4.14, or a seccomp
//! filter that refuses it) the mutex starts revoked. Under `--cfg loom` the barrier is
//! modelled by sequentially consistent fences on both sides, which is what `membarrier`
//! guarantees for the two accesses it orders (see the model at the end of this file).

use std::marker::PhantomData;
use std::ops::{Deref, DerefMut};

#[cfg(loom)]
use loom::{
    cell::UnsafeCell,
    sync::{Mutex, MutexGuard},
    thread::yield_now,
};
#[cfg(not(loom))]
use std::{
    cell::UnsafeCell,
    sync::{Mutex, MutexGuard},
    thread::yield_now,
};

use crate::sync::{AtomicBool, AtomicU64, Ordering};

/// `owner` before any thread took the mutex.
const NONE: u64 = 0;
/// `owner` once the bias is gone (or was never possible).
const REVOKED: u64 = u64::MAX;

/// A mutual-exclusion lock around a `T`, biased to the first thread that takes it (module
/// docs). Not re-entrant: the owner taking it again while it holds it panics, rather than
/// hand out a second `&mut`; on the fallback path it deadlocks, as a plain mutex does.
pub(crate) struct BiasedMutex<T> {
    /// The owner's thread token (`token`), `NONE` or `REVOKED`.
    owner: AtomicU64,
    /// The owner is in, or entering, a critical section by the fast path. Written by the
    /// owner only.
    busy: AtomicBool,
    /// Taken by everyone once the bias is revoked, and by the revoker to revoke it.
    fallback: Mutex<()>,
    value: UnsafeCell<T>,
}

// SAFETY: the value is reached only through a guard, and a guard exists for one thread at a
// time (module docs); `T: Send` because the value moves between threads with the lock.
unsafe impl<T: Send> Sync for BiasedMutex<T> {}
// SAFETY: as for `Mutex<T>`.
unsafe impl<T: Send> Send for BiasedMutex<T> {}

impl<T> BiasedMutex<T> {
    /// A mutex holding `value`, not yet biased to any thread.
    pub(crate) fn new(value: T) -> Self {
        Self {
            owner: AtomicU64::new(if barrier::available() { NONE } else { REVOKED }),
            busy: AtomicBool::new(false),
            fallback: Mutex::new(()),
            value: UnsafeCell::new(value),
        }
    }

    /// Take the lock: by the fast path on the owner's thread while the bias holds, else by
    /// the fallback mutex (revoking the bias first if another thread holds it).
    #[inline]
    pub(crate) fn lock(&self) -> BiasedGuard<'_, T> {
        let me = token();
        let owner = self.owner.load(Ordering::Relaxed);
        if owner == me || (owner == NONE && self.claim(me)) {
            if self.busy.load(Ordering::Relaxed) {
                reentered();
            }
            self.busy.store(true, Ordering::Relaxed);
            barrier::light();
            // Relaxed suffices: only this thread ever stores our token, and a revocation we
            // do not see here waits for `busy` (module docs).
            if self.owner.load(Ordering::Relaxed) == me {
                return self.guard(None);
            }
            self.busy.store(false, Ordering::Release);
        }
        self.lock_slow()
    }

    /// Become the owner of a mutex nobody took yet.
    #[cold]
    fn claim(&self, me: u64) -> bool {
        self.owner
            .compare_exchange(NONE, me, Ordering::Relaxed, Ordering::Relaxed)
            .is_ok()
    }

    #[cold]
    #[inline(never)]
    fn lock_slow(&self) -> BiasedGuard<'_, T> {
        let held = self.fallback.lock();
        #[cfg(not(loom))]
        let held = held.unwrap_or_else(|e| e.into_inner());
        #[cfg(loom)]
        let held = held.unwrap();
        // Once revoked, a plain load: the fallback path then costs what a plain mutex does.
        let was = match self.owner.load(Ordering::Relaxed) {
            REVOKED => REVOKED,
            _ => self.owner.swap(REVOKED, Ordering::Relaxed),
        };
        if was != REVOKED && was != NONE {
            // Revoke: the first (and only) time, under the fallback mutex, so every later
            // taker of the fallback mutex finds this done. (`NONE`: nobody ever took the fast
            // path, and a claim now fails.)
            barrier::heavy();
            let mut spins = 0u32;
            // Acquire: the owner's last critical section happens before ours.
            while self.busy.load(Ordering::Acquire) {
                spins += 1;
                if spins < 64 {
                    std::hint::spin_loop();
                } else {
                    // The owner may be preempted inside its critical section on this CPU.
                    yield_now();
                }
            }
        }
        self.guard(Some(held))
    }

    fn guard<'a>(&'a self, held: Option<MutexGuard<'a, ()>>) -> BiasedGuard<'a, T> {
        BiasedGuard {
            mutex: self,
            #[cfg(loom)]
            ptr: self.value.get_mut(),
            held,
            not_send: PhantomData,
        }
    }

    /// The value, reached through exclusive access (no locking).
    #[cfg(not(loom))]
    pub(crate) fn get_mut(&mut self) -> &mut T {
        self.value.get_mut()
    }
}

/// The lock held; dropping it gives the lock back.
pub(crate) struct BiasedGuard<'a, T> {
    mutex: &'a BiasedMutex<T>,
    #[cfg(loom)]
    ptr: loom::cell::MutPtr<T>,
    /// The fallback mutex, when it was taken (`None`: the fast path).
    held: Option<MutexGuard<'a, ()>>,
    /// Released on the thread that took it, as a `MutexGuard` (the owner alone writes `busy`).
    not_send: PhantomData<*const ()>,
}

impl<T> Deref for BiasedGuard<'_, T> {
    type Target = T;

    #[inline]
    fn deref(&self) -> &T {
        // SAFETY: this guard is the only one (module docs); the reference lives no longer
        // than the guard.
        #[cfg(not(loom))]
        return unsafe { &*self.mutex.value.get() };
        // SAFETY: as above; loom tracks the access while the pointer lives.
        #[cfg(loom)]
        return unsafe { self.ptr.deref() };
    }
}

impl<T> DerefMut for BiasedGuard<'_, T> {
    #[inline]
    fn deref_mut(&mut self) -> &mut T {
        // SAFETY: as for `deref`, and `&mut self` makes the access unique.
        #[cfg(not(loom))]
        return unsafe { &mut *self.mutex.value.get() };
        // SAFETY: as above.
        #[cfg(loom)]
        return unsafe { self.ptr.deref() };
    }
}

impl<T> Drop for BiasedGuard<'_, T> {
    #[inline]
    fn drop(&mut self) {
        if self.held.is_none() {
            // Release: a revoker that sees `false` sees what the critical section wrote.
            self.mutex.busy.store(false, Ordering::Release);
        }
    }
}

#[cold]
#[inline(never)]
fn reentered() -> ! {
    panic!("BiasedMutex taken again by the thread that holds it");
}

/// This thread's token: nonzero, never `REVOKED`, distinct among live threads.
#[cfg(not(loom))]
#[inline]
fn token() -> u64 {
    thread_local! {
        static TOKEN: std::cell::Cell<u64> = const { std::cell::Cell::new(NONE) };
    }
    TOKEN.with(token_in)
}

// loom's `thread_local!` takes no `const` initialiser.
#[cfg(loom)]
fn token() -> u64 {
    loom::thread_local! {
        static TOKEN: std::cell::Cell<u64> = std::cell::Cell::new(NONE);
    }
    TOKEN.with(token_in)
}

/// The token kept in `t`, drawn from a process-wide counter on the thread's first lock.
#[inline]
fn token_in(t: &std::cell::Cell<u64>) -> u64 {
    // `std`'s atomic under loom too: a static counter, outside the model.
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    match t.get() {
        NONE => {
            let new = NEXT.fetch_add(1, Ordering::Relaxed);
            t.set(new);
            new
        }
        known => known,
    }
}

/// The two halves of the asymmetric barrier.
#[cfg(not(loom))]
mod barrier {
    use std::sync::atomic::{compiler_fence, Ordering};
    use std::sync::OnceLock;

    use rustix::thread::{membarrier, MembarrierCommand};

    /// Whether `heavy` works in this process (registered once per process, as the command
    /// requires before its first use).
    pub(super) fn available() -> bool {
        static REGISTERED: OnceLock<bool> = OnceLock::new();
        *REGISTERED.get_or_init(|| membarrier(MembarrierCommand::RegisterPrivateExpedited).is_ok())
    }

    /// The owner's half: keeps the compiler from moving the `owner` load above the `busy`
    /// store; the CPU may still, which `heavy` answers for.
    #[inline(always)]
    pub(super) fn light() {
        compiler_fence(Ordering::SeqCst);
    }

    /// The revoker's half: a full barrier on every CPU running one of our threads.
    pub(super) fn heavy() {
        // Registered (`available`), so it fails only in a child forked after registration
        // (the registration belongs to the address space, which a fork does not share):
        // register again. Without a barrier the revoker cannot know the owner is out, so a
        // second failure must not be ignored.
        if membarrier(MembarrierCommand::PrivateExpedited).is_err() {
            membarrier(MembarrierCommand::RegisterPrivateExpedited)
                .and_then(|()| membarrier(MembarrierCommand::PrivateExpedited))
                .expect("membarrier(MEMBARRIER_CMD_PRIVATE_EXPEDITED) failed");
        }
    }
}

#[cfg(loom)]
mod barrier {
    use crate::sync::{fence, Ordering};

    pub(super) fn available() -> bool {
        true
    }

    /// `membarrier` orders the owner's `busy` store before its `owner` load whenever the
    /// revoker's barrier runs: loom's nearest model is a SeqCst fence on both sides.
    pub(super) fn light() {
        fence(Ordering::SeqCst);
    }

    pub(super) fn heavy() {
        fence(Ordering::SeqCst);
    }
}

#[cfg(all(test, not(loom)))]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn the_owner_and_a_second_thread_exclude_each_other() {
        // Two threads each add one, non-atomically (a read then a write through the guard),
        // many times: a lost update shows the lock failed. The first thread owns the bias
        // and the second revokes it mid-way.
        let m = Arc::new(BiasedMutex::new(0u64));
        const N: u64 = 200_000;
        let started = Arc::new(std::sync::Barrier::new(2));
        {
            let mut g = m.lock();
            *g += 0;
        }
        let other = {
            let (m, started) = (m.clone(), started.clone());
            std::thread::spawn(move || {
                started.wait();
                for _ in 0..N {
                    let mut g = m.lock();
                    let v = *g;
                    *g = v + 1;
                }
            })
        };
        started.wait();
        for _ in 0..N {
            let mut g = m.lock();
            let v = *g;
            std::hint::black_box(&v);
            *g = v + 1;
        }
        other.join().unwrap();
        assert_eq!(*m.lock(), 2 * N);
        if barrier::available() {
            assert_eq!(m.owner.load(Ordering::Relaxed), REVOKED);
        }
    }

    #[test]
    fn one_thread_keeps_the_bias() {
        let m = BiasedMutex::new(5u32);
        for _ in 0..3 {
            *m.lock() += 1;
        }
        assert_eq!(*m.lock(), 8);
        if barrier::available() {
            assert_eq!(m.owner.load(Ordering::Relaxed), token());
            assert!(!m.busy.load(Ordering::Relaxed));
        }
    }

    #[test]
    fn taking_it_twice_on_one_thread_panics() {
        // Two guards on one thread would be two `&mut` to the value. (Without `membarrier`
        // the fallback mutex would deadlock instead: nothing to check then.)
        if !barrier::available() {
            return;
        }
        let m = BiasedMutex::new(());
        let _a = m.lock();
        let again = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(m.lock())));
        assert!(again.is_err());
    }
}

#[cfg(all(test, loom))]
mod loom_models {
    use super::BiasedMutex;
    use loom::sync::Arc;

    /// The owner (the first to lock) and a second thread each add one, non-atomically, while
    /// the second revokes the bias: loom checks every interleaving for a data race on the
    /// value and for a lost update.
    #[test]
    fn loom_biased_mutex_excludes() {
        loom::model(|| {
            let m = Arc::new(BiasedMutex::new(0u32));
            *m.lock() += 1;
            let other = {
                let m = m.clone();
                loom::thread::spawn(move || {
                    let mut g = m.lock();
                    *g += 1;
                })
            };
            {
                let mut g = m.lock();
                *g += 1;
            }
            other.join().unwrap();
            assert_eq!(*m.lock(), 3);
        });
    }
}
