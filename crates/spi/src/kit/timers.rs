//! Deadlines of a provider engine: "call back this object once this instant has passed"
//! (a connection attempt's time limit, a listener's wait for a request). The engine fires the
//! due ones whenever it is driven and sleeps no longer than the next one. An object that goes
//! away takes its deadlines with it (they hold it weakly).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant};

/// The pending deadlines of one engine, for objects of type `S` (a provider's event source).
pub struct Timers<S: ?Sized> {
    list: Mutex<Vec<(Instant, Weak<S>)>>,
    /// Whether `list` may be non-empty: keeps the polling path free of the lock.
    any: AtomicBool,
}

impl<S: ?Sized> Default for Timers<S> {
    fn default() -> Self {
        Self {
            list: Mutex::new(Vec::new()),
            any: AtomicBool::new(false),
        }
    }
}

impl<S: ?Sized> std::fmt::Debug for Timers<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Timers")
            .field("any", &self.any.load(Ordering::Relaxed))
            .finish()
    }
}

impl<S: ?Sized> Timers<S> {
    /// No deadlines.
    #[must_use]
    pub fn new() -> Self {
        Self::default()
    }

    /// Have `source` called back (by [`Timers::take_due`]'s caller) once `at` has passed.
    pub fn add(&self, at: Instant, source: Weak<S>) {
        self.list
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push((at, source));
        self.any.store(true, Ordering::Release);
    }

    /// Forget every deadline of `source` (and of objects gone).
    pub fn cancel(&self, source: &Weak<S>) {
        let mut t = self.list.lock().unwrap_or_else(|e| e.into_inner());
        t.retain(|(_, s)| !Weak::ptr_eq(s, source) && s.strong_count() > 0);
        if t.is_empty() {
            self.any.store(false, Ordering::Release);
        }
    }

    /// The objects whose deadline has passed (their deadlines removed), for the caller to
    /// call back without any lock held, and how long until the next deadline, if any.
    pub fn take_due(&self) -> (Vec<Arc<S>>, Option<Duration>) {
        if !self.any.load(Ordering::Acquire) {
            return (Vec::new(), None);
        }
        let now = Instant::now();
        let mut due = Vec::new();
        let mut t = self.list.lock().unwrap_or_else(|e| e.into_inner());
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
        let next = t.iter().map(|(at, _)| *at - now).min();
        (due, next)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn due_deadlines_come_out_once_and_gone_objects_never() {
        let t: Timers<u32> = Timers::new();
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
}
