//! The atomics the ring protocol, the wake-up handshake and the biased mutex use: `std`'s
//! normally, `loom`'s when the crate is built with `--cfg loom` for model checking (see the
//! crate docs).

#[cfg(loom)]
pub(crate) use loom::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
#[cfg(not(loom))]
pub(crate) use std::sync::atomic::{fence, AtomicBool, AtomicU32, AtomicU64, Ordering};
