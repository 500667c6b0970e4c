//! The leader/follower bookkeeping of a provider's blocking waiters, without the sleep itself.
//!
//! A provider with no progress thread lets its blocking callers drive the I/O
//! ([`Driver::wait_for`]). Of the threads inside `wait_for` on one engine:
//!
//! * at most one, the *leader*, sleeps on the transport (the provider's own sleep: `poll(2)`,
//!   `epoll_wait`...), which the provider can interrupt by some wake of its own (an eventfd);
//! * every other one is a *follower*, asleep on a condition variable here until
//!   [`Roles::generation`](Waiters) moves or its timeout passes.
//!
//! Who wakes whom:
//!
//! * a completion made on a thread that is not the leader ([`Waiters::notify`]) wakes the leader
//!   (through the provider's wake, if the provider says its leader needs one) and every
//!   follower; made by the leader itself, during its own dispatch, it wakes nobody: the leader
//!   returns to its caller right after, which re-checks its condition;
//! * the leader, when it gives the role up ([`Leadership`] dropped), wakes the followers so that
//!   one of them takes the sleep over;
//! * nobody is woken, and no lock taken, while no thread other than the notifying one is inside
//!   `wait_for` (the `sleepers` count).
//!
//! The race rule of [`Driver::wait_for`] (a completion either precedes the waiter's `done()`
//! check or wakes it) rests on two orderings: the waiter counts itself in `sleepers` (`SeqCst`,
//! [`Waiters::enter`]) before it reads `done()`, and the completing thread stores the request's
//! status (`SeqCst`) before it reads `sleepers` (`SeqCst`, [`Waiters::notify`]); and the waiter
//! takes its role and checks `done()` under the same lock `notify` reads the roles under.
//!
//! [`Driver::wait_for`]: crate::kit::overlapped::Driver::wait_for

use std::cell::Cell;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};

use crate::kit::progress::Activity;
use std::time::Duration;

/// The blocked threads: at most one leader asleep on the transport, and followers asleep on
/// the condition variable (woken by a new `generation`).
#[derive(Debug, Default)]
struct Roles {
    leader: bool,
    followers: usize,
    generation: u64,
}

thread_local! {
    /// The [`Waiters`] whose `wait_for` this thread is inside (its address, 0 if none) and
    /// whether it is the leader there: its own completions need not wake it.
    static WAITING: Cell<(usize, bool)> = const { Cell::new((0, false)) };
}

/// One per engine (adapter): the roles of the threads blocked in its `wait_for`.
#[derive(Debug, Default)]
pub struct Waiters {
    /// Who sleeps how; followers wait on `cond` for `Roles::generation` to move.
    roles: Mutex<Roles>,
    cond: Condvar,
    /// Threads inside `wait_for`: while there are none (besides the notifying thread itself),
    /// `notify` costs no lock and no system call.
    sleepers: AtomicUsize,
    /// Moved by every application thread that waits or polls: a progress engine stays away
    /// while it moves (`kit::progress`).
    activity: Arc<Activity>,
}

impl Waiters {
    /// No thread waiting.
    pub fn new() -> Self {
        Self::default()
    }

    /// The mark application threads move when they drive this engine (`kit::progress`).
    pub fn activity(&self) -> &Arc<Activity> {
        &self.activity
    }

    /// How many threads are inside `wait_for` (a snapshot, for `Debug`).
    pub fn sleepers(&self) -> usize {
        self.sleepers.load(Ordering::Relaxed)
    }

    /// Whether any thread, this one included, is inside `wait_for`. Read `SeqCst`: a flag a
    /// provider stored `SeqCst` before asking is seen by every waiter that enters afterwards
    /// (and re-checks its work), so a provider may leave work for "the next call" only when
    /// this says nobody is in a wait that would sleep through it.
    pub fn anyone_waiting(&self) -> bool {
        self.sleepers.load(Ordering::SeqCst) > 0
    }

    /// Call first thing in `wait_for`, before anything that reads the caller's condition:
    /// counts this thread in `sleepers` and marks it as waiting here, until the returned
    /// presence drops (also when the leader's dispatch panics).
    pub fn enter(&self) -> Presence<'_> {
        self.activity.touch_unless_engine();
        // SeqCst: announced before `done()` is read (see the module docs).
        self.sleepers.fetch_add(1, Ordering::SeqCst);
        let outer = WAITING.with(|w| w.replace((self.addr(), false)));
        Presence {
            waiters: self,
            outer,
        }
    }

    /// A request completed (its status stored, `SeqCst`): wake the threads that sleep in
    /// `wait_for`, other than this one. `wake_leader` is called (outside the lock) when there is
    /// a leader, unless `leader_woken` says the provider already woke it (e.g. its descriptor
    /// was exported and the wake is written unconditionally). Costs nothing when this thread is
    /// the leader or nobody else waits.
    pub fn notify(&self, leader_woken: bool, wake_leader: impl FnOnce()) {
        let (here, leading) = WAITING.with(Cell::get);
        let in_wait = here == self.addr();
        if in_wait && leading {
            // The leader's own dispatch: it returns to its caller right after, which re-checks
            // its condition, and hands over to the followers then (`Leadership`), which wakes
            // them to re-check theirs.
            return;
        }
        // SeqCst: pairs with `enter`; the request's status was stored (SeqCst) before this call.
        if self.sleepers.load(Ordering::SeqCst) <= usize::from(in_wait) {
            // Nobody else sleeps: the caller itself re-checks its condition.
            return;
        }
        let mut roles = self.lock_roles();
        let wake = roles.leader && !leader_woken;
        // Followers would also wake through the leader's hand-over; waking them directly
        // saves them that detour.
        let wake_followers = roles.followers > 0;
        if wake_followers {
            roles.generation += 1;
        }
        drop(roles);
        if wake {
            wake_leader();
        }
        if wake_followers {
            self.cond.notify_all();
        }
    }

    /// Whether a leader other than this thread sleeps (or is about to): a provider whose
    /// leader's sleep set must grow wakes it then. `false` at once, without the lock, when
    /// this thread is the leader or nobody waits (`sleepers` read `SeqCst`).
    pub fn other_leader(&self) -> bool {
        let (here, leading) = WAITING.with(Cell::get);
        if here == self.addr() && leading {
            return false;
        }
        if self.sleepers.load(Ordering::SeqCst) == 0 {
            return false;
        }
        self.lock_roles().leader
    }

    fn lock_roles(&self) -> MutexGuard<'_, Roles> {
        self.roles.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// This set's identity for `WAITING`.
    fn addr(&self) -> usize {
        self as *const Self as usize
    }
}

/// This thread's presence in `wait_for` ([`Waiters::enter`]): counted in `sleepers`, marked in
/// `WAITING`; both undone on drop.
#[derive(Debug)]
pub struct Presence<'a> {
    waiters: &'a Waiters,
    outer: (usize, bool),
}

impl<'a> Presence<'a> {
    /// Take a role, under the lock `notify` reads the roles under, so that a completion on
    /// another thread either precedes the `done()` check or finds this thread asleep:
    ///
    /// * `done()` already: returns `None` at once;
    /// * another thread leads: sleeps here as a follower until notified, handed over to, or
    ///   `timeout` (`None`: an hour, after which the caller re-checks anyway), then `None`;
    /// * otherwise this thread becomes the leader: `Some`, and the caller sleeps on its
    ///   transport and dispatches while it holds the returned role.
    pub fn take_role(
        &self,
        done: &dyn Fn() -> bool,
        timeout: Option<Duration>,
    ) -> Option<Leadership<'a>> {
        let w = self.waiters;
        let mut roles = w.lock_roles();
        if done() {
            return None;
        }
        if roles.leader {
            roles.followers += 1;
            let seen = roles.generation;
            let t = timeout.unwrap_or(Duration::from_secs(3600));
            let (mut roles, _) = w
                .cond
                .wait_timeout_while(roles, t, |r| r.generation == seen)
                .unwrap_or_else(|e| e.into_inner());
            roles.followers -= 1;
            return None;
        }
        roles.leader = true;
        drop(roles);
        let lead = Leadership { waiters: w };
        WAITING.with(|c| c.set((w.addr(), true)));
        Some(lead)
    }
}

impl Drop for Presence<'_> {
    fn drop(&mut self) {
        WAITING.with(|w| w.set(self.outer));
        self.waiters.sleepers.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The leader role ([`Presence::take_role`]). Drop it before the [`Presence`] it came from:
/// this thread stops counting as the leader (its completions wake others again), and the
/// followers, if any, are woken so that one takes over the sleep while this thread returns to
/// its caller.
#[derive(Debug)]
pub struct Leadership<'a> {
    waiters: &'a Waiters,
}

impl Drop for Leadership<'_> {
    fn drop(&mut self) {
        let w = self.waiters;
        WAITING.with(|c| c.set((w.addr(), false)));
        let mut roles = w.lock_roles();
        roles.leader = false;
        if roles.followers > 0 {
            roles.generation += 1;
            drop(roles);
            w.cond.notify_all();
        }
    }
}

/// The eventfd that wakes a provider's leader out of `poll(2)`/`epoll_wait` (and makes an
/// exported adapter descriptor readable): written by [`WakeFd::wake`], reset by
/// [`WakeFd::drain`] when a dispatch finds it readable.
#[derive(Debug)]
pub struct WakeFd(OwnedFd);

impl WakeFd {
    /// A new eventfd, non-blocking and close-on-exec, not readable.
    pub fn new() -> std::io::Result<Self> {
        use rustix::event::{eventfd, EventfdFlags};
        Ok(Self(eventfd(
            0,
            EventfdFlags::CLOEXEC | EventfdFlags::NONBLOCK,
        )?))
    }

    /// Make it readable: a leader asleep on it (directly or through an epoll set) returns.
    pub fn wake(&self) {
        let _ = rustix::io::write(&self.0, &1u64.to_ne_bytes());
    }

    /// Reset it after a dispatch on this thread found it readable.
    ///
    /// Any thread that drives the engine may be the one that finds it readable, not only the
    /// leader it was written for: an application's `Adapter::progress` on another thread, or
    /// its event loop on the exported descriptor, runs the same dispatch. Had that thread's
    /// read consumed a wake-up meant for a leader asleep in `poll`/`epoll_wait`, the leader,
    /// roused by the write, would find the eventfd empty again and go back to sleep with its
    /// request complete: a lost wake-up (it showed as a ping-pong stuck with both requests
    /// done, one thread driving the adapter while the other slept). So a thread that is not
    /// the leader passes the wake-up on if a leader sleeps. Reading first and asking after
    /// leaves no gap: a wake-up written after the read is still there, and a leader that took
    /// its role after the question checked its condition after the write it did not see.
    pub fn drain(&self, waiters: &Waiters) {
        let mut buf = [0u8; 8];
        if rustix::io::read(&self.0, &mut buf).is_ok() && waiters.other_leader() {
            self.wake();
        }
    }

    /// Whether it is readable (for tests and diagnostics; does not reset it).
    pub fn is_readable(&self) -> bool {
        use rustix::event::{poll, PollFd, PollFlags};
        let mut fds = [PollFd::new(&self.0, PollFlags::IN)];
        let zero = rustix::time::Timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        poll(&mut fds, Some(&zero)).is_ok_and(|n| n > 0)
    }
}

impl AsFd for WakeFd {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.0.as_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicBool;
    use std::sync::{Arc, Barrier};

    /// A thread that is not the leader and drains the wake eventfd (its own progress pass
    /// dispatched it) passes the wake-up on while another thread leads: the leader's sleep
    /// must still end. Without a leader, or on the leader itself, the drain resets it.
    #[test]
    fn a_drain_off_the_leader_passes_the_wake_up_on() {
        let w = Arc::new(Waiters::new());
        let fd = Arc::new(WakeFd::new().expect("eventfd"));
        fd.wake();
        fd.drain(&w);
        assert!(!fd.is_readable(), "nobody leads: reset");

        let (led, release) = (Arc::new(Barrier::new(2)), Arc::new(Barrier::new(2)));
        let leader = {
            let (w, fd, led, release) = (w.clone(), fd.clone(), led.clone(), release.clone());
            std::thread::spawn(move || {
                let me = w.enter();
                let lead = me.take_role(&|| false, None).expect("leads");
                led.wait();
                release.wait();
                // The leader's own drain resets it.
                fd.drain(&w);
                let readable = fd.is_readable();
                drop(lead);
                readable
            })
        };
        led.wait();
        fd.wake();
        fd.drain(&w);
        assert!(
            fd.is_readable(),
            "the leader's wake-up survives another thread's drain"
        );
        release.wait();
        assert!(!leader.join().unwrap(), "the leader's drain resets it");
    }

    #[test]
    fn notify_without_waiters_wakes_nobody() {
        let w = Waiters::new();
        let mut woken = false;
        w.notify(false, || woken = true);
        assert!(!woken);
        assert!(!w.other_leader());
    }

    #[test]
    fn leader_own_completion_wakes_nobody_and_presence_restores() {
        let w = Waiters::new();
        {
            let me = w.enter();
            assert_eq!(w.sleepers(), 1);
            let lead = me.take_role(&|| false, None).expect("first thread leads");
            let mut woken = false;
            w.notify(false, || woken = true);
            assert!(!woken, "the leader's own dispatch");
            assert!(!w.other_leader(), "this thread is the leader");
            drop(lead);
            // No longer leading, and nobody else waits.
            w.notify(false, || woken = true);
            assert!(!woken);
        }
        assert_eq!(w.sleepers(), 0);
        assert_eq!(WAITING.with(Cell::get), (0, false));
    }

    #[test]
    fn done_before_sleep_returns_without_role() {
        let w = Waiters::new();
        let me = w.enter();
        assert!(me.take_role(&|| true, None).is_none());
        assert!(!w.lock_roles().leader);
    }

    #[test]
    fn completion_elsewhere_wakes_leader_then_follower() {
        let w = Arc::new(Waiters::new());
        // This thread leads.
        let me = w.enter();
        let lead = me.take_role(&|| false, None).expect("leads");
        let done = Arc::new(AtomicBool::new(false));
        let follower = {
            let (w, done) = (w.clone(), done.clone());
            std::thread::spawn(move || {
                let me = w.enter();
                // Never leads while the main thread holds the role; returns once notified.
                let role = me.take_role(&|| done.load(Ordering::SeqCst), None);
                assert!(role.is_none());
            })
        };
        // Another thread completes a request: the leader is asked to wake (it is not this
        // thread), and the follower either saw `done` or is woken.
        let notifier = {
            let w = w.clone();
            std::thread::spawn(move || {
                done.store(true, Ordering::SeqCst);
                let mut woken = false;
                w.notify(false, || woken = true);
                (woken, w.other_leader())
            })
        };
        let (woken, other) = notifier.join().unwrap();
        assert!(woken, "a leader on another thread is woken");
        assert!(other);
        follower.join().unwrap();
        drop(lead);
        drop(me);
        assert_eq!(w.sleepers(), 0);
    }
}
