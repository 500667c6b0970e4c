//! Deadlines of a provider engine: "call back this object once this instant has passed"
//! (a connection attempt's time limit, a listener's wait for a request, a held message's
//! receiver-not-ready bound). The engine fires the due ones whenever it is driven. A timerfd,
//! which the engine puts in its epoll set, is kept armed to the earliest deadline: so a thread
//! asleep in the engine's wait, and an event loop watching the adapter's descriptor, wake when
//! one passes, without anyone computing a timeout. An object that goes away takes its
//! deadlines with it (they hold it weakly).

use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::{Duration, Instant};

use rustix::time::{
    timerfd_create, timerfd_settime, Itimerspec, TimerfdClockId, TimerfdFlags, TimerfdTimerFlags,
    Timespec,
};

/// The pending deadlines of one engine, for objects of type `S` (a provider's event source).
pub struct Timers<S: ?Sized> {
    list: Mutex<Vec<(Instant, Weak<S>)>>,
    /// Whether `list` may be non-empty: keeps the polling path free of the lock.
    any: AtomicBool,
    /// Readable once the earliest deadline has passed (`CLOCK_MONOTONIC`, as `Instant`).
    fd: OwnedFd,
}

impl<S: ?Sized> std::fmt::Debug for Timers<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timers")
            .field("any", &self.any.load(Ordering::Relaxed))
            .finish()
    }
}

fn timespec(d: Duration) -> Timespec {
    Timespec {
        tv_sec: d.as_secs().min(i64::MAX as u64) as _,
        tv_nsec: d.subsec_nanos() as _,
    }
}

impl<S: ?Sized> Timers<S> {
    /// No deadlines.
    ///
    /// # Errors
    /// What `timerfd_create` reports (out of descriptors).
    pub fn new() -> std::io::Result<Self> {
        let fd = timerfd_create(
            TimerfdClockId::Monotonic,
            TimerfdFlags::NONBLOCK | TimerfdFlags::CLOEXEC,
        )?;
        Ok(Self {
            list: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
            fd,
        })
    }

    /// No deadlines, with the timerfd in the engine's epoll set `epfd` under `token`: a passed
    /// deadline makes the set readable, so the thread asleep in the engine's wait wakes, and
    /// so does an event loop watching the exported descriptor, which then drives the engine.
    ///
    /// # Errors
    /// What `timerfd_create` or `epoll_ctl` report.
    pub fn in_epoll(epfd: &impl AsFd, token: u64) -> std::io::Result<Self> {
        use rustix::event::epoll;
        let t = Self::new()?;
        epoll::add(
            epfd,
            &t.fd,
            epoll::EventData::new_u64(token),
            epoll::EventFlags::IN,
        )?;
        Ok(t)
    }

    /// The timerfd, for the engine's epoll set: readable once a deadline has passed, until
    /// [`Timers::run_due`] runs.
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn lock(&self) -> MutexGuard<'_, Vec<(Instant, Weak<S>)>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Arm the timerfd for the earliest deadline of `list` (disarm it if there is none). A
    /// deadline already passed arms it for a nanosecond (zero would disarm it).
    fn rearm(&self, list: &[(Instant, Weak<S>)], now: Instant) {
        let next = list
            .iter()
            .map(|(at, _)| at.saturating_duration_since(now))
            .min();
        let value = match next {
            Some(d) => timespec(d.max(Duration::from_nanos(1))),
            None => timespec(Duration::ZERO),
        };
        let spec = Itimerspec {
            it_interval: timespec(Duration::ZERO),
            it_value: value,
        };
        let _ = timerfd_settime(&self.fd, TimerfdTimerFlags::empty(), &spec);
    }

    /// Have `source` called back (by [`Timers::run_due`]) once `at` has passed.
    pub fn add(&self, at: Instant, source: Weak<S>) {
        let mut t = self.lock();
        let earliest = t.iter().all(|(other, _)| at < *other);
        t.push((at, source));
        self.any.store(true, Ordering::Release);
        if earliest {
            self.rearm(&t, Instant::now());
        }
    }

    /// Forget every deadline of `source` (and of objects gone).
    pub fn cancel(&self, source: &Weak<S>) {
        let mut t = self.lock();
        t.retain(|(_, s)| !Weak::ptr_eq(s, source) && s.strong_count() > 0);
        if t.is_empty() {
            self.any.store(false, Ordering::Release);
        }
    }

    /// Call `fire` (with no lock held) for each object whose deadline has passed, their
    /// deadlines removed; returns how long until the next deadline, if any. While there are
    /// no deadlines this is one load, inlined into the caller: a blocking wait runs it twice
    /// per message (issue 4), where building and dropping an empty list of due objects cost
    /// about 100 instructions.
    #[inline]
    pub fn run_due(&self, mut fire: impl FnMut(Arc<S>)) -> Option<Duration> {
        if !self.any.load(Ordering::Acquire) {
            return None;
        }
        let (due, next) = self.take_due();
        for s in due {
            fire(s);
        }
        next
    }

    /// The objects whose deadline has passed (their deadlines removed), for [`Timers::run_due`]
    /// to call back once the lock is released, and how long until the next deadline, if any.
    fn take_due(&self) -> (Vec<Arc<S>>, Option<Duration>) {
        let now = Instant::now();
        let mut due = Vec::new();
        let mut t = self.lock();
        let before = t.len();
        t.retain(|(at, s)| {
            if *at <= now {
                due.extend(s.upgrade());
                false
            } else {
                s.strong_count() > 0
            }
        });
        if t.is_empty() {
            self.any.store(false, Ordering::Release);
        }
        if t.len() != before {
            // Consume the expiry (the descriptor stays readable until read) and aim at the
            // next deadline.
            let mut buf = [0u8; 8];
            let _ = rustix::io::read(&self.fd, &mut buf);
            self.rearm(&t, now);
        }
        let next = t.iter().map(|(at, _)| *at - now).min();
        (due, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_deadlines_come_out_once_and_gone_objects_never() {
        let t: Timers<u32> = Timers::new().expect("timerfd");
        assert_eq!(t.take_due().0.len(), 0);
        let (a, b, gone) = (Arc::new(1), Arc::new(2), Arc::new(3));
        let past = Instant::now();
        t.add(past, Arc::downgrade(&a));
        t.add(past + Duration::from_secs(3600), Arc::downgrade(&b));
        t.add(past, Arc::downgrade(&gone));
        drop(gone);
        let (due, next) = t.take_due();
        assert_eq!(due.iter().map(|x| **x).collect::<Vec<_>>(), vec![1]);
        assert!(next.is_some_and(|d| d > Duration::from_secs(3500)));
        assert!(t.take_due().0.is_empty(), "fired once");
        t.cancel(&Arc::downgrade(&b));
        assert_eq!(t.take_due(), (Vec::new(), None));
    }

    #[test]
    fn run_due_fires_each_due_object_once() {
        let t: Timers<u32> = Timers::new().expect("timerfd");
        let mut fired = Vec::new();
        assert_eq!(t.run_due(|x| fired.push(*x)), None);
        let (a, b) = (Arc::new(1), Arc::new(2));
        let now = Instant::now();
        t.add(now, Arc::downgrade(&a));
        t.add(now + Duration::from_secs(3600), Arc::downgrade(&b));
        let next = t.run_due(|x| fired.push(*x));
        assert!(next.is_some_and(|d| d > Duration::from_secs(3500)));
        assert!(
            t.run_due(|x| fired.push(*x)).is_some(),
            "b is still waiting"
        );
        assert_eq!(fired, vec![1], "a fired once, b not yet");
    }

    /// The descriptor becomes readable when the earliest deadline passes, and is quiet again
    /// once the due deadlines were taken.
    #[test]
    fn the_descriptor_is_readable_when_a_deadline_passes() {
        use rustix::event::{poll, PollFd, PollFlags};
        let t: Timers<u32> = Timers::new().expect("timerfd");
        let a = Arc::new(1);
        let readable = |ms: i64| {
            let mut fds = [PollFd::new(&t.fd, PollFlags::IN)];
            let ts = Timespec {
                tv_sec: ms / 1000,
                tv_nsec: (ms % 1000) * 1_000_000,
            };
            poll(&mut fds, Some(&ts)).expect("poll") == 1
        };
        assert!(!readable(0), "no deadline");
        t.add(
            Instant::now() + Duration::from_millis(20),
            Arc::downgrade(&a),
        );
        assert!(readable(10_000), "the deadline passed");
        let (due, next) = t.take_due();
        assert_eq!((due.len(), next), (1, None));
        assert!(!readable(0), "taken: quiet again");
    }
}
