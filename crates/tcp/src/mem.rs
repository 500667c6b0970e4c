//! The only place the provider touches application memory by address.
//!
//! Every address that reaches these functions has passed the registration checks of
//! `netdirect_spi::kit::mr` (token, bounds, rights) against a live registration, and the
//! application promised, when it registered the memory (`MemoryRegion::register` is `unsafe`)
//! and when it posted the request (the posts are `unsafe`), that the memory stays valid and
//! untouched by Rust references until the request completes. Those two promises are what make
//! the slices built here sound.

#![allow(unsafe_code)]

/// The `len` bytes at `addr` as a shared slice, to send from.
///
/// # Safety
/// `addr..addr+len` lies in a live registration checked for this access, and no `&mut` to it
/// exists for the returned lifetime (the poster's contract).
pub(crate) unsafe fn slice<'a>(addr: u64, len: usize) -> &'a [u8] {
    if len == 0 {
        return &[];
    }
    // SAFETY: see the function contract.
    unsafe { std::slice::from_raw_parts(addr as usize as *const u8, len) }
}

/// The `len` bytes at `addr` as a mutable slice, to place received data into.
///
/// # Safety
/// `addr..addr+len` lies in a live registration checked for write access, and nothing else
/// reads or writes it for the returned lifetime (the poster's contract).
pub(crate) unsafe fn slice_mut<'a>(addr: u64, len: usize) -> &'a mut [u8] {
    if len == 0 {
        return &mut [];
    }
    // SAFETY: see the function contract.
    unsafe { std::slice::from_raw_parts_mut(addr as usize as *mut u8, len) }
}
