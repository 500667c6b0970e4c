//! The NetworkDirect C ABI: `libnetdirect.so` / `libnetdirect.a`.
//!
//! C and C++ programs written for Windows ND include our `include/ndspi.h`, `ndsupport.h` and
//! the Win32 layer of `include/win32/`, and link this library. It exports:
//! * the ND v2 interfaces as COM objects ([`com`], [`objects`]): a vtable pointer first, the
//!   slots in `ndspi.h`'s declaration order, `QueryInterface`/`AddRef`/`Release` as COM has
//!   them, over the `netdirect` crate's objects (no second engine);
//! * the `ndsupport.h` helpers under their own names ([`helpers`]), and the interface IDs as
//!   data ([`iid`]);
//! * the Win32 functions ND programs use around ND (events, completion ports, threads, the last
//!   error) under an `ndw_` prefix ([`win32`]); the headers wrap each in an inline function of
//!   the Windows name, so no Win32 symbol is exported.
//!
//! Every exported function is a panic boundary ([`boundary`]): a panic becomes
//! `ND_INTERNAL_ERROR` (or the call's documented failure value), never an unwind into C.
//!
//! Overlapped requests follow Windows ND (docs/ND-RULES.md G3, G6; [`request`]): an accepted
//! request returns `ND_PENDING`, and its completion writes the caller's `OVERLAPPED`, signals
//! its event, and queues a packet to the completion port its object's overlapped file is
//! associated with.

#![warn(missing_docs)]
// Every function here is called from C: raw pointers are the interface.
#![allow(clippy::missing_safety_doc)]
// The vtables and objects are C data (function pointers, raw pointers): nothing to print.
#![allow(missing_debug_implementations)]

pub mod abi;
pub mod boundary;
pub mod com;
pub mod helpers;
pub mod iid;
pub mod ndk;
pub mod objects;
pub mod request;
pub mod sockaddr;
pub mod win32;
