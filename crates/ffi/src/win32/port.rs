//! I/O completion ports (`CreateIoCompletionPort`, `GetQueuedCompletionStatus(Ex)`,
//! `PostQueuedCompletionStatus`): a FIFO of completion packets.
//!
//! Not emulated (README, "C and C++"): the concurrency limit, the LIFO wake-up order of
//! waiting threads, and association of anything but ND overlapped files.

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;
use std::time::Instant;

use super::wait::Waitable;
use crate::abi::OVERLAPPED;

/// One completion packet.
#[derive(Debug, Clone, Copy)]
pub struct Packet {
    /// `lpNumberOfBytesTransferred`.
    pub bytes: u32,
    /// The completion key the file was associated with (or the one posted).
    pub key: usize,
    /// The request's `OVERLAPPED`, the same pointer the request was started with.
    pub ov: *mut OVERLAPPED,
    /// The request's NTSTATUS (0 for a posted packet).
    pub status: u32,
}

// SAFETY: the packet carries the caller's OVERLAPPED pointer as a value; this library never
// dereferences it after queueing.
unsafe impl Send for Packet {}

/// A completion port.
#[derive(Debug, Default)]
pub struct Port {
    queue: Mutex<VecDeque<Packet>>,
    /// Its waiters, and the drivers of the requests that complete to it.
    pub(crate) waitable: Waitable,
    /// `CloseHandle` was called: waiters return, later waits fail at once.
    closed: AtomicBool,
}

impl Port {
    /// Queue `p` and wake a waiter.
    pub fn post(&self, p: Packet) {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push_back(p);
        self.waitable.signal();
    }

    fn is_empty(&self) -> bool {
        self.queue
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .is_empty()
    }

    fn pop_into(&self, out: &mut Vec<Packet>, max: usize) -> bool {
        let mut q = self.queue.lock().unwrap_or_else(|e| e.into_inner());
        while out.len() < max {
            match q.pop_front() {
                Some(p) => out.push(p),
                None => break,
            }
        }
        !out.is_empty()
    }

    /// `CloseHandle`: the threads waiting on the port return empty-handed.
    pub fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.waitable.signal();
    }

    /// Whether the port was closed.
    pub fn is_closed(&self) -> bool {
        self.closed.load(Ordering::Acquire)
    }

    /// Take up to `max` packets, waiting (and driving the associated adapters) until at least
    /// one is there, the port is closed, or `deadline` passes.
    pub fn dequeue(&self, max: usize, deadline: Option<Instant>) -> Vec<Packet> {
        let mut out = Vec::new();
        self.waitable.wait(
            &|| !self.is_empty() || self.is_closed(),
            &mut || self.pop_into(&mut out, max) || self.is_closed(),
            deadline,
        );
        out
    }
}
