//! The Win32 layer's rules that ND programs rely on, called as C calls them (the exported
//! `ndw_*` functions): event reset modes, completion-port results, handle validation, threads.

use std::ffi::c_void;
use std::ptr::null_mut;

use super::*;
use crate::abi::{OVERLAPPED, TRUE};

fn ov() -> OVERLAPPED {
    OVERLAPPED {
        internal: 0,
        internal_high: 0,
        offset: 0,
        h_event: null_mut(),
    }
}

#[test]
fn auto_reset_events_are_consumed_by_a_wait_and_manual_ones_are_not() {
    let auto = ndw_CreateEventW(null_mut(), 0, 0, std::ptr::null());
    let manual = ndw_CreateEventW(null_mut(), 1, 1, std::ptr::null());
    assert!(!auto.is_null() && !manual.is_null());
    assert_eq!(ndw_WaitForSingleObject(auto, 0), WAIT_TIMEOUT);
    assert_eq!(ndw_SetEvent(auto), TRUE);
    assert_eq!(ndw_WaitForSingleObject(auto, 0), WAIT_OBJECT_0);
    assert_eq!(ndw_WaitForSingleObject(auto, 0), WAIT_TIMEOUT, "consumed");
    assert_eq!(ndw_WaitForSingleObject(manual, 0), WAIT_OBJECT_0);
    assert_eq!(
        ndw_WaitForSingleObject(manual, 0),
        WAIT_OBJECT_0,
        "stays set"
    );
    assert_eq!(ndw_ResetEvent(manual), TRUE);
    assert_eq!(ndw_WaitForSingleObject(manual, 0), WAIT_TIMEOUT);
    // The low two bits of a handle are ignored, as Windows does.
    let tagged = (auto as usize | 1) as *mut c_void;
    assert_eq!(ndw_SetEvent(tagged), TRUE);
    assert_eq!(ndw_WaitForSingleObject(auto, 0), WAIT_OBJECT_0);
    assert_eq!(ndw_CloseHandle(tagged), TRUE);
    assert_eq!(ndw_CloseHandle(manual), TRUE);
    assert_eq!(ndw_CloseHandle(manual), 0, "a double close fails");
    assert_eq!(ndw_GetLastError(), ERROR_INVALID_HANDLE);
    assert_eq!(ndw_SetEvent(manual), 0, "a closed handle is invalid");
}

#[test]
fn a_set_from_another_thread_wakes_a_waiter() {
    let e = ndw_CreateEventW(null_mut(), 0, 0, std::ptr::null());
    let h = e as usize;
    let t = std::thread::spawn(move || ndw_WaitForSingleObject(h as *mut c_void, 20_000));
    // The waiter may or may not be asleep yet: either way the signal is not lost.
    assert_eq!(ndw_SetEvent(e), TRUE);
    assert_eq!(t.join().expect("waiter"), WAIT_OBJECT_0);
    ndw_CloseHandle(e);
}

#[test]
fn completion_ports_dequeue_fifo_and_report_timeouts_as_windows_does() {
    let invalid = usize::MAX as *mut c_void;
    let port = ndw_CreateIoCompletionPort(invalid, null_mut(), 0, 0);
    assert!(!port.is_null());
    let mut a = ov();
    let mut b = ov();
    assert_eq!(ndw_PostQueuedCompletionStatus(port, 5, 7, &mut a), TRUE);
    assert_eq!(ndw_PostQueuedCompletionStatus(port, 6, 8, &mut b), TRUE);
    assert_eq!(ndw_PostQueuedCompletionStatus(port, 0, 9, null_mut()), TRUE);
    let (mut n, mut key, mut got) = (0u32, 0usize, null_mut::<OVERLAPPED>());
    // SAFETY: valid out-pointers.
    unsafe {
        assert_eq!(
            ndw_GetQueuedCompletionStatus(port, &mut n, &mut key, &mut got, 0),
            TRUE
        );
        assert_eq!((n, key, got), (5, 7, &raw mut a));
        assert_eq!(
            ndw_GetQueuedCompletionStatus(port, &mut n, &mut key, &mut got, 0),
            TRUE
        );
        assert_eq!((n, key, got), (6, 8, &raw mut b));
        // A posted packet may carry no OVERLAPPED (programs post one as an exit signal).
        assert_eq!(
            ndw_GetQueuedCompletionStatus(port, &mut n, &mut key, &mut got, 0),
            TRUE
        );
        assert_eq!((key, got), (9, null_mut()));
        // Empty: FALSE, NULL, WAIT_TIMEOUT (how ndconn tells a timeout from an exit packet).
        got = &raw mut a;
        assert_eq!(
            ndw_GetQueuedCompletionStatus(port, &mut n, &mut key, &mut got, 10),
            0
        );
        assert!(got.is_null());
        assert_eq!(ndw_GetLastError(), WAIT_TIMEOUT);
    }
    // Only ND overlapped files can be associated.
    let e = ndw_CreateEventW(null_mut(), 0, 0, std::ptr::null());
    assert!(ndw_CreateIoCompletionPort(e, port, 1, 0).is_null());
    assert_eq!(ndw_GetLastError(), ERROR_INVALID_PARAMETER);
    ndw_CloseHandle(e);
    assert_eq!(ndw_CloseHandle(port), TRUE);
}

unsafe extern "C" fn answer(p: *mut c_void) -> u32 {
    p as usize as u32 + 1
}

#[test]
fn a_thread_is_waitable_and_reports_its_exit_code() {
    let mut id = 0u32;
    // SAFETY: a valid thread function and parameter.
    let t = unsafe { ndw_CreateThread(null_mut(), 0, Some(answer), 41 as *mut c_void, 0, &mut id) };
    assert!(!t.is_null());
    assert_ne!(id, 0);
    assert_eq!(ndw_WaitForSingleObject(t, 20_000), WAIT_OBJECT_0);
    let mut code = 0u32;
    // SAFETY: a valid out-pointer.
    assert_eq!(unsafe { ndw_GetExitCodeThread(t, &mut code) }, TRUE);
    assert_eq!(code, 42);
    assert_eq!(ndw_CloseHandle(t), TRUE);
}

#[test]
fn the_last_error_is_per_thread() {
    ndw_SetLastError(1234);
    let other = std::thread::spawn(|| ndw_GetLastError())
        .join()
        .expect("thread");
    assert_eq!(other, 0);
    assert_eq!(ndw_GetLastError(), 1234);
}

#[test]
fn closing_a_port_ends_the_waits_on_it() {
    let port = Arc::new(port::Port::default());
    let p = port.clone();
    let waiter = std::thread::spawn(move || p.dequeue(1, None));
    // Whether the waiter is asleep yet or not, the close ends its wait: closing is sticky.
    port.close();
    assert!(waiter.join().expect("waiter").is_empty());
    assert!(port.is_closed());
}
