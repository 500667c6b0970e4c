//! The panic boundary every exported function runs its body in.
//!
//! Since Rust 1.81 a panic that reaches an `extern "C"` function aborts the process. A C
//! program must get a status instead, so each export runs its body through [`guard`] and
//! returns the failure value its C signature documents when the body panicked.

use std::panic::{catch_unwind, AssertUnwindSafe};

use nd::Status;

/// `ND_INTERNAL_ERROR` as an HRESULT: what a method returns when its body panicked.
pub const PANICKED: i32 = Status::INTERNAL_ERROR.0;

/// Run `body`; if it panics, return `fallback` (the panic message has gone to stderr).
///
/// The objects the body touched stay usable: their state is behind locks that recover from
/// poisoning, and each method re-validates what it reads.
pub fn guard<R>(fallback: R, body: impl FnOnce() -> R) -> R {
    catch_unwind(AssertUnwindSafe(body)).unwrap_or(fallback)
}

/// [`guard`] for a body that returns an HRESULT.
pub fn hresult(body: impl FnOnce() -> i32) -> i32 {
    guard(PANICKED, body)
}

/// The HRESULT of a `netdirect` result.
pub fn status_of<T>(r: &nd::Result<T>) -> i32 {
    match r {
        Ok(_) => Status::SUCCESS.0,
        Err(e) => e.status().0,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_panic_becomes_the_fallback() {
        assert_eq!(hresult(|| panic!("boom")), PANICKED);
        assert_eq!(hresult(|| 7), 7);
        assert_eq!(guard(0u32, || panic!("boom")), 0);
    }
}
