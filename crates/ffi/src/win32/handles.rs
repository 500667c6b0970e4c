//! The handle table. A `HANDLE` is `(index + 1) * 4`: non-null, 4-aligned (Windows ignores a
//! handle's two low "tag" bits, and programs pass an event with bit 0 set to mean "no
//! completion packet"), never `INVALID_HANDLE_VALUE`. A table rather than raw pointers turns a
//! double close or a stale handle into `ERROR_INVALID_HANDLE` instead of a use after free.

use std::sync::{Arc, OnceLock, RwLock};

use super::event::Event;
use super::file::OvFile;
use super::port::Port;
use super::thread::Thread;
use crate::abi::HANDLE;

/// What a handle names.
#[derive(Clone, Debug)]
pub enum Object {
    /// `CreateEvent`.
    Event(Arc<Event>),
    /// `CreateIoCompletionPort`.
    Port(Arc<Port>),
    /// `CreateThread`.
    Thread(Arc<Thread>),
    /// `IND2Adapter::CreateOverlappedFile`.
    File(Arc<OvFile>),
}

#[derive(Default)]
struct Table {
    slots: Vec<Option<Object>>,
    free: Vec<usize>,
}

fn table() -> &'static RwLock<Table> {
    static T: OnceLock<RwLock<Table>> = OnceLock::new();
    T.get_or_init(RwLock::default)
}

/// Enter `obj` and return its new handle.
pub fn insert(obj: Object) -> HANDLE {
    let mut t = table().write().unwrap_or_else(|e| e.into_inner());
    let index = match t.free.pop() {
        Some(i) => {
            t.slots[i] = Some(obj);
            i
        }
        None => {
            t.slots.push(Some(obj));
            t.slots.len() - 1
        }
    };
    ((index + 1) * 4) as HANDLE
}

fn index(h: HANDLE) -> Option<usize> {
    // The tag bits are ignored, as on Windows.
    let v = (h as usize) & !3;
    (v != 0 && v != usize::MAX & !3).then(|| v / 4 - 1)
}

/// What `h` names, if it is open.
pub fn get(h: HANDLE) -> Option<Object> {
    let i = index(h)?;
    let t = table().read().unwrap_or_else(|e| e.into_inner());
    t.slots.get(i).and_then(Clone::clone)
}

/// Close `h`: the table lets go of its object (which lives on while something else holds
/// it, e.g. a pending request its event). `None` if `h` was not open.
pub fn remove(h: HANDLE) -> Option<Object> {
    let i = index(h)?;
    let mut t = table().write().unwrap_or_else(|e| e.into_inner());
    let obj = t.slots.get_mut(i)?.take()?;
    t.free.push(i);
    Some(obj)
}

/// Close `h` if it still names the overlapped file `f` (an object that entered a handle for
/// itself lets go of it; the application may have closed it already, and the number been
/// given to another object since).
pub fn remove_file(h: HANDLE, f: &Arc<OvFile>) {
    let Some(i) = index(h) else {
        return;
    };
    let mut t = table().write().unwrap_or_else(|e| e.into_inner());
    if matches!(t.slots.get(i), Some(Some(Object::File(g))) if Arc::ptr_eq(g, f)) {
        t.slots[i] = None;
        t.free.push(i);
    }
}

/// The event `h` names, if any.
pub fn event(h: HANDLE) -> Option<Arc<Event>> {
    match get(h)? {
        Object::Event(e) => Some(e),
        _ => None,
    }
}

/// The port `h` names, if any.
pub fn port(h: HANDLE) -> Option<Arc<Port>> {
    match get(h)? {
        Object::Port(p) => Some(p),
        _ => None,
    }
}

/// The overlapped file `h` names, if any.
pub fn file(h: HANDLE) -> Option<Arc<OvFile>> {
    match get(h)? {
        Object::File(f) => Some(f),
        _ => None,
    }
}
