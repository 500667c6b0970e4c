//! The Win32 functions ND programs use around ND, exported as `ndw_<Name>`; `include/win32/`
//! wraps each in an inline function of the Windows name, so this library exports no Win32
//! symbol that could clash with another Windows-compatibility layer in the same process.
//!
//! What is emulated and what is not is listed in README ("C and C++") and docs/PORTING.md.

pub mod event;
pub mod file;
pub mod handles;
pub mod port;
pub mod thread;
pub mod wait;

#[cfg(test)]
mod tests;

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::Arc;
use std::time::{Duration, Instant};

use nd::Status;

use crate::abi::{BOOL, FALSE, FILETIME, HANDLE, OVERLAPPED, OVERLAPPED_ENTRY, TRUE};
use crate::boundary::guard;
use handles::Object;

/// `INFINITE`.
pub const INFINITE: u32 = u32::MAX;
/// `WAIT_OBJECT_0`.
pub const WAIT_OBJECT_0: u32 = 0;
/// `WAIT_TIMEOUT`, also the last error of a timed-out `GetQueuedCompletionStatus`.
pub const WAIT_TIMEOUT: u32 = 258;
/// `WAIT_FAILED`.
pub const WAIT_FAILED: u32 = u32::MAX;
/// `ERROR_INVALID_HANDLE`.
pub const ERROR_INVALID_HANDLE: u32 = 6;
/// `ERROR_INVALID_PARAMETER`.
pub const ERROR_INVALID_PARAMETER: u32 = 87;
/// `ERROR_OPERATION_ABORTED`: what a cancelled request's packet reports.
pub const ERROR_OPERATION_ABORTED: u32 = 995;
/// `ERROR_INTERNAL_ERROR`: the last error of a Win32 call whose body panicked.
pub const ERROR_INTERNAL_ERROR: u32 = 1359;
/// `ERROR_ABANDONED_WAIT_0`: the port a thread waited on was closed.
pub const ERROR_ABANDONED_WAIT_0: u32 = 735;
/// `STILL_ACTIVE`: the exit code of a thread that has not returned.
pub const STILL_ACTIVE: u32 = 259;

thread_local! {
    static LAST_ERROR: Cell<u32> = const { Cell::new(0) };
}

fn set_last_error(code: u32) {
    LAST_ERROR.with(|c| c.set(code));
}

/// A `BOOL` call's failure: set the last error, return `FALSE`.
fn fail(code: u32) -> BOOL {
    set_last_error(code);
    FALSE
}

/// A Win32 body behind the panic boundary: a panic is `FALSE`/NULL with
/// `ERROR_INTERNAL_ERROR`.
fn win32<R: Copy>(failed: R, body: impl FnOnce() -> R) -> R {
    guard(None, || Some(body())).unwrap_or_else(|| {
        set_last_error(ERROR_INTERNAL_ERROR);
        failed
    })
}

/// `dwMilliseconds` as a deadline.
fn deadline(ms: u32) -> Option<Instant> {
    (ms != INFINITE).then(|| Instant::now() + Duration::from_millis(u64::from(ms)))
}

/// The Win32 error `GetQueuedCompletionStatus` reports for a failed request's NTSTATUS, as
/// Windows translates the common ND statuses (`ERROR_MR_MID_NOT_FOUND`, 317, for the rest).
pub fn win32_error(status: Status) -> u32 {
    match status {
        Status::CANCELED => ERROR_OPERATION_ABORTED,
        Status::INVALID_PARAMETER => ERROR_INVALID_PARAMETER,
        Status::INVALID_HANDLE => ERROR_INVALID_HANDLE,
        Status::NO_MEMORY => 8,
        Status::NOT_SUPPORTED => 50,
        Status::IO_TIMEOUT => 121,
        Status::BUFFER_OVERFLOW => 234,
        Status::INVALID_ADDRESS => 487,
        Status::ACCESS_VIOLATION => 998,
        Status::CONNECTION_REFUSED => 1225,
        Status::CONNECTION_INVALID => 1229,
        Status::CONNECTION_ACTIVE => 1230,
        Status::NETWORK_UNREACHABLE => 1231,
        Status::HOST_UNREACHABLE => 1232,
        Status::CONNECTION_ABORTED => 1236,
        Status::INSUFFICIENT_RESOURCES => 1450,
        Status::DEVICE_REMOVED => 1617,
        _ => 317,
    }
}

/// `GetLastError`: this thread's last error (not `errno`: programs compare it with
/// `WAIT_TIMEOUT` after a call that set it).
#[no_mangle]
pub extern "C" fn ndw_GetLastError() -> u32 {
    LAST_ERROR.with(Cell::get)
}

/// `SetLastError`.
#[no_mangle]
pub extern "C" fn ndw_SetLastError(code: u32) {
    set_last_error(code);
}

/// `CloseHandle`: an event, port, thread or ND overlapped file. The object lives on while
/// something else holds it (a pending request its event, a running thread its record).
#[no_mangle]
pub extern "C" fn ndw_CloseHandle(h: HANDLE) -> BOOL {
    win32(FALSE, || match handles::remove(h) {
        None => fail(ERROR_INVALID_HANDLE),
        Some(Object::File(f)) => {
            f.close();
            TRUE
        }
        Some(Object::Port(p)) => {
            p.close();
            TRUE
        }
        Some(_) => TRUE,
    })
}

fn create_event(manual: BOOL, initial: BOOL) -> HANDLE {
    handles::insert(Object::Event(Arc::new(event::Event::new(
        manual != 0,
        initial != 0,
    ))))
}

/// `CreateEventW`. Security attributes and names are not supported: a named event fails with
/// `ERROR_INVALID_PARAMETER`.
#[no_mangle]
pub extern "C" fn ndw_CreateEventW(
    attrs: *mut c_void,
    manual: BOOL,
    initial: BOOL,
    name: *const u32,
) -> HANDLE {
    win32(std::ptr::null_mut(), || {
        if !attrs.is_null() || !name.is_null() {
            fail(ERROR_INVALID_PARAMETER);
            return std::ptr::null_mut();
        }
        create_event(manual, initial)
    })
}

/// `CreateEventA`: as [`ndw_CreateEventW`].
#[no_mangle]
pub extern "C" fn ndw_CreateEventA(
    attrs: *mut c_void,
    manual: BOOL,
    initial: BOOL,
    name: *const u8,
) -> HANDLE {
    ndw_CreateEventW(attrs, manual, initial, name.cast())
}

/// `SetEvent`.
#[no_mangle]
pub extern "C" fn ndw_SetEvent(h: HANDLE) -> BOOL {
    win32(FALSE, || match handles::event(h) {
        Some(e) => {
            e.set();
            TRUE
        }
        None => fail(ERROR_INVALID_HANDLE),
    })
}

/// `ResetEvent`.
#[no_mangle]
pub extern "C" fn ndw_ResetEvent(h: HANDLE) -> BOOL {
    win32(FALSE, || match handles::event(h) {
        Some(e) => {
            e.reset();
            TRUE
        }
        None => fail(ERROR_INVALID_HANDLE),
    })
}

/// `WaitForSingleObject` on an event (driving the adapters of the requests that will signal
/// it) or a thread. `WAIT_FAILED` with `ERROR_INVALID_HANDLE` for anything else.
#[no_mangle]
pub extern "C" fn ndw_WaitForSingleObject(h: HANDLE, ms: u32) -> u32 {
    win32(WAIT_FAILED, || {
        let done = match handles::get(h) {
            Some(Object::Event(e)) => e.wait(deadline(ms)),
            Some(Object::Thread(t)) => t.wait(deadline(ms)),
            _ => {
                set_last_error(ERROR_INVALID_HANDLE);
                return WAIT_FAILED;
            }
        };
        if done {
            WAIT_OBJECT_0
        } else {
            WAIT_TIMEOUT
        }
    })
}

/// `WaitForMultipleObjects` over events and threads: a simple poll of each object in turn
/// (each wait drives its own adapters), in slices of 1 ms. Waiting for all is done one by one,
/// so an auto-reset event's signal is consumed before the others are known to be signalled.
#[no_mangle]
pub unsafe extern "C" fn ndw_WaitForMultipleObjects(
    n: u32,
    hs: *const HANDLE,
    all: BOOL,
    ms: u32,
) -> u32 {
    win32(WAIT_FAILED, || {
        if hs.is_null() || n == 0 || n > 64 {
            set_last_error(ERROR_INVALID_PARAMETER);
            return WAIT_FAILED;
        }
        // SAFETY: the caller passes `n` handles.
        let hs = unsafe { std::slice::from_raw_parts(hs, n as usize) };
        let objects: Option<Vec<Object>> = hs.iter().map(|h| handles::get(*h)).collect();
        let Some(objects) = objects else {
            set_last_error(ERROR_INVALID_HANDLE);
            return WAIT_FAILED;
        };
        let end = deadline(ms);
        let mut done = vec![false; objects.len()];
        loop {
            let slice = Some(Instant::now() + Duration::from_millis(1));
            let slice = match (end, slice) {
                (Some(e), Some(s)) => Some(e.min(s)),
                (_, s) => s,
            };
            for (i, o) in objects.iter().enumerate() {
                if done[i] {
                    continue;
                }
                let now = match o {
                    Object::Event(e) => e.wait(Some(Instant::now())),
                    Object::Thread(t) => t.wait(Some(Instant::now())),
                    _ => {
                        set_last_error(ERROR_INVALID_HANDLE);
                        return WAIT_FAILED;
                    }
                };
                if now {
                    if all == 0 {
                        return WAIT_OBJECT_0 + i as u32;
                    }
                    done[i] = true;
                }
            }
            if done.iter().all(|d| *d) {
                return WAIT_OBJECT_0;
            }
            if end.is_some_and(|e| Instant::now() >= e) {
                return WAIT_TIMEOUT;
            }
            // Sleep the slice on the first object not yet done.
            if let Some(i) = done.iter().position(|d| !*d) {
                let now = match &objects[i] {
                    Object::Event(e) => e.wait(slice),
                    Object::Thread(t) => t.wait(slice),
                    _ => false,
                };
                if now {
                    if all == 0 {
                        return WAIT_OBJECT_0 + i as u32;
                    }
                    done[i] = true;
                }
            }
        }
    })
}

/// `INVALID_HANDLE_VALUE`.
const INVALID_HANDLE_VALUE: HANDLE = usize::MAX as HANDLE;

/// `CreateIoCompletionPort`: `(INVALID_HANDLE_VALUE, NULL, ..)` makes a port; an ND overlapped
/// file is associated with `existing` (or with a new port). Anything else fails with
/// `ERROR_INVALID_PARAMETER`; `concurrent` is accepted and ignored.
#[no_mangle]
pub extern "C" fn ndw_CreateIoCompletionPort(
    file: HANDLE,
    existing: HANDLE,
    key: usize,
    concurrent: u32,
) -> HANDLE {
    let _ = concurrent;
    win32(std::ptr::null_mut(), || {
        let invalid = || {
            set_last_error(ERROR_INVALID_PARAMETER);
            std::ptr::null_mut()
        };
        let (port, handle) = if existing.is_null() {
            let p = Arc::new(port::Port::default());
            let h = handles::insert(Object::Port(p.clone()));
            (p, h)
        } else {
            match handles::port(existing) {
                Some(p) => (p, existing),
                None => return invalid(),
            }
        };
        if file != INVALID_HANDLE_VALUE {
            match handles::file(file) {
                Some(f) => f.associate(&port, key),
                None => {
                    if existing.is_null() {
                        handles::remove(handle);
                    }
                    return invalid();
                }
            }
        } else if !existing.is_null() {
            return invalid();
        }
        handle
    })
}

/// `GetQueuedCompletionStatus`, with the result rules programs dispatch on: a packet whose
/// status is a success (`ND_TIMEOUT` included) → TRUE; a failed request's packet → FALSE with
/// the `OVERLAPPED` set and the mapped Win32 error; a timeout → FALSE, `*ov` NULL,
/// `WAIT_TIMEOUT`.
#[no_mangle]
pub unsafe extern "C" fn ndw_GetQueuedCompletionStatus(
    port: HANDLE,
    bytes: *mut u32,
    key: *mut usize,
    ov: *mut *mut OVERLAPPED,
    ms: u32,
) -> BOOL {
    win32(FALSE, || {
        if bytes.is_null() || key.is_null() || ov.is_null() {
            return fail(ERROR_INVALID_PARAMETER);
        }
        let Some(p) = handles::port(port) else {
            return fail(ERROR_INVALID_HANDLE);
        };
        let got = p.dequeue(1, deadline(ms));
        // SAFETY: the three out-pointers were checked non-null; the caller makes them valid.
        unsafe {
            let Some(pk) = got.first() else {
                *ov = std::ptr::null_mut();
                return fail(if p.is_closed() {
                    ERROR_ABANDONED_WAIT_0
                } else {
                    WAIT_TIMEOUT
                });
            };
            *bytes = pk.bytes;
            *key = pk.key;
            *ov = pk.ov;
            let status = Status(pk.status as i32);
            if status.is_failure() {
                fail(win32_error(status))
            } else {
                TRUE
            }
        }
    })
}

/// `GetQueuedCompletionStatusEx`: up to `count` packets; each entry's `Internal` is the
/// request's status. `alertable` is ignored (no APCs).
#[no_mangle]
pub unsafe extern "C" fn ndw_GetQueuedCompletionStatusEx(
    port: HANDLE,
    entries: *mut OVERLAPPED_ENTRY,
    count: u32,
    removed: *mut u32,
    ms: u32,
    alertable: BOOL,
) -> BOOL {
    let _ = alertable;
    win32(FALSE, || {
        if entries.is_null() || removed.is_null() || count == 0 {
            return fail(ERROR_INVALID_PARAMETER);
        }
        let Some(p) = handles::port(port) else {
            return fail(ERROR_INVALID_HANDLE);
        };
        let got = p.dequeue(count as usize, deadline(ms));
        // SAFETY: `removed` checked; `entries` holds `count >= got.len()` entries (caller).
        unsafe {
            *removed = got.len() as u32;
            if got.is_empty() {
                return fail(if p.is_closed() {
                    ERROR_ABANDONED_WAIT_0
                } else {
                    WAIT_TIMEOUT
                });
            }
            for (i, pk) in got.iter().enumerate() {
                entries.add(i).write(OVERLAPPED_ENTRY {
                    completion_key: pk.key,
                    overlapped: pk.ov,
                    internal: pk.status as usize,
                    bytes: pk.bytes,
                });
            }
        }
        TRUE
    })
}

/// `PostQueuedCompletionStatus`: a packet that dequeues as a success (`ov` may be NULL).
#[no_mangle]
pub extern "C" fn ndw_PostQueuedCompletionStatus(
    port: HANDLE,
    bytes: u32,
    key: usize,
    ov: *mut OVERLAPPED,
) -> BOOL {
    win32(FALSE, || match handles::port(port) {
        Some(p) => {
            p.post(port::Packet {
                bytes,
                key,
                ov,
                status: 0,
            });
            TRUE
        }
        None => fail(ERROR_INVALID_HANDLE),
    })
}

/// `SetFileCompletionNotificationModes`: ND overlapped files already behave as with
/// `FILE_SKIP_COMPLETION_PORT_ON_SUCCESS | FILE_SKIP_SET_EVENT_ON_HANDLE` (docs/ND-RULES.md
/// G4), so this only checks the handle.
#[no_mangle]
pub extern "C" fn ndw_SetFileCompletionNotificationModes(file: HANDLE, flags: u8) -> BOOL {
    let _ = flags;
    win32(FALSE, || match handles::file(file) {
        Some(_) => TRUE,
        None => fail(ERROR_INVALID_HANDLE),
    })
}

/// A C thread function: `DWORD WINAPI fn(LPVOID)`.
pub type StartRoutine = unsafe extern "C" fn(*mut c_void) -> u32;

struct SendPtr(*mut c_void);
// SAFETY: the parameter is the caller's, handed to its own thread function as Windows does.
unsafe impl Send for SendPtr {}

/// `CreateThread`: runs `start(param)` on a new thread. `CREATE_SUSPENDED` and attributes are
/// not supported (`ERROR_INVALID_PARAMETER`). The thread function must not unwind (a C++
/// exception out of it aborts).
#[no_mangle]
pub unsafe extern "C" fn ndw_CreateThread(
    attrs: *mut c_void,
    stack: usize,
    start: Option<StartRoutine>,
    param: *mut c_void,
    flags: u32,
    id: *mut u32,
) -> HANDLE {
    win32(std::ptr::null_mut(), || {
        let Some(start) = start else {
            set_last_error(ERROR_INVALID_PARAMETER);
            return std::ptr::null_mut();
        };
        if !attrs.is_null() || flags != 0 {
            set_last_error(ERROR_INVALID_PARAMETER);
            return std::ptr::null_mut();
        }
        let record = Arc::new(thread::Thread::default());
        let mine = record.clone();
        let param = SendPtr(param);
        let mut b = std::thread::Builder::new();
        if stack > 0 {
            b = b.stack_size(stack.max(64 << 10));
        }
        let spawned = b.spawn(move || {
            let p = param;
            // SAFETY: the caller's thread function and parameter.
            let code = unsafe { start(p.0) };
            mine.finish(code);
        });
        match spawned {
            Ok(_) => {
                static NEXT: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(1);
                if !id.is_null() {
                    // SAFETY: a non-null `id` is the caller's DWORD.
                    unsafe { *id = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed) };
                }
                handles::insert(Object::Thread(record))
            }
            Err(_) => {
                set_last_error(8);
                std::ptr::null_mut()
            }
        }
    })
}

/// `GetExitCodeThread`: `STILL_ACTIVE` until the thread returns.
#[no_mangle]
pub unsafe extern "C" fn ndw_GetExitCodeThread(h: HANDLE, code: *mut u32) -> BOOL {
    win32(FALSE, || {
        if code.is_null() {
            return fail(ERROR_INVALID_PARAMETER);
        }
        match handles::get(h) {
            Some(Object::Thread(t)) => {
                // SAFETY: checked non-null; the caller's DWORD.
                unsafe { *code = t.exit_code().unwrap_or(STILL_ACTIVE) };
                TRUE
            }
            _ => fail(ERROR_INVALID_HANDLE),
        }
    })
}

/// `GetSystemTimes` from `/proc/stat`, in 100 ns units: idle, kernel *including* idle (as
/// Windows counts it; the examples' CPU formula relies on that), user.
#[no_mangle]
pub unsafe extern "C" fn ndw_GetSystemTimes(
    idle: *mut FILETIME,
    kernel: *mut FILETIME,
    user: *mut FILETIME,
) -> BOOL {
    win32(FALSE, || {
        let Some([i, k, u]) = system_times() else {
            return fail(ERROR_INVALID_PARAMETER);
        };
        for (out, v) in [(idle, i), (kernel, k), (user, u)] {
            if !out.is_null() {
                // SAFETY: a non-null out-pointer is the caller's FILETIME.
                unsafe { *out = FILETIME::from_units(v) };
            }
        }
        TRUE
    })
}

/// (idle, kernel + idle, user) in 100 ns units, from the first line of `/proc/stat`.
fn system_times() -> Option<[u64; 3]> {
    let stat = std::fs::read_to_string("/proc/stat").ok()?;
    let line = stat.lines().next()?;
    let v: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .filter_map(|t| t.parse().ok())
        .collect();
    let f = |i: usize| v.get(i).copied().unwrap_or(0);
    // user nice system idle iowait irq softirq
    let hz = rustix::param::clock_ticks_per_second().max(1);
    let units = |ticks: u64| ticks.saturating_mul(10_000_000 / hz);
    let idle = f(3) + f(4);
    let kernel = f(2) + idle + f(5) + f(6);
    let user = f(0) + f(1);
    Some([units(idle), units(kernel), units(user)])
}
