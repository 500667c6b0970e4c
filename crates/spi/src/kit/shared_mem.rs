//! Memory another process may map: a sealed memfd, mapped shared.
//!
//! `netdirect::Buffer` allocates its larger buffers here. A registration over such memory can
//! then be written by a same-host peer with one copy, straight into a mapping of the memfd
//! (the `shm` provider's mapped RDMA Writes and Reads), instead of two copies through a ring.
//! The memfd is sealed against shrinking and growing before anyone sees it, so no mapping of
//! it can ever fault for want of pages behind it.
//!
//! This module and `netdirect::memory` are the SPI side's only raw memory code.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::io::Errno;
use rustix::mm::{MapFlags, ProtFlags};

/// A shared mapping of a sealed memfd, zero-filled, page-aligned. Unmapped on drop (mappings
/// others made of the same memfd stay valid: the pages live as long as any mapping or
/// descriptor).
pub struct SharedMemory {
    ptr: NonNull<u8>,
    len: usize,
    fd: OwnedFd,
    id: u64,
    /// Made by [`SharedMemory::new`]: counted against [`SharedMemory::budget`].
    counted: bool,
}

/// Memfds of ours alive now ([`SharedMemory::new`]).
static LIVE: AtomicUsize = AtomicUsize::new(0);

// SAFETY: the mapping is plain memory owned by this value; the type hands out only raw
// pointers, whose users synchronise as the ND contract requires.
unsafe impl Send for SharedMemory {}
// SAFETY: as above.
unsafe impl Sync for SharedMemory {}

impl std::fmt::Debug for SharedMemory {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SharedMemory")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("id", &self.id)
            .finish()
    }
}

impl SharedMemory {
    /// `len` zeroed bytes (rounded up to whole pages; at least one).
    ///
    /// Each one holds a descriptor for its life, so at most [`SharedMemory::budget`] are alive
    /// at once: the process's other descriptors (its sockets, files) must not run out because
    /// of memory buffers.
    ///
    /// # Errors
    /// `EMFILE` when the budget is spent; else what `memfd_create`, `ftruncate`, sealing or
    /// `mmap` report (`EMFILE`, `ENOMEM`, ...).
    pub fn new(len: usize) -> io::Result<Self> {
        let budget = Self::budget();
        LIVE.fetch_update(Ordering::AcqRel, Ordering::Acquire, |n| {
            (n < budget).then_some(n + 1)
        })
        .map_err(|_| io::Error::from_raw_os_error(Errno::MFILE.raw_os_error()))?;
        let made = Self::make(len);
        if made.is_err() {
            LIVE.fetch_sub(1, Ordering::AcqRel);
        }
        made
    }

    /// How many [`SharedMemory::new`] memories may be alive at once: a quarter of the
    /// descriptor limit (`RLIMIT_NOFILE`'s soft value), at least 16 and at most 4096.
    #[must_use]
    pub fn budget() -> usize {
        static BUDGET: std::sync::OnceLock<usize> = std::sync::OnceLock::new();
        *BUDGET.get_or_init(|| {
            let limit = rustix::process::getrlimit(rustix::process::Resource::Nofile).current;
            let quarter = limit.map_or(4096, |l| usize::try_from(l / 4).unwrap_or(usize::MAX));
            quarter.clamp(16, 4096)
        })
    }

    fn make(len: usize) -> io::Result<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1);
        let page = rustix::param::page_size();
        let len = len
            .max(1)
            .checked_next_multiple_of(page)
            .ok_or_else(|| io::Error::from_raw_os_error(Errno::NOMEM.raw_os_error()))?;
        let fd = rustix::fs::memfd_create(
            "netdirect-buffer",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, len as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        let ptr = map(&fd, len)?;
        Ok(Self {
            ptr,
            len,
            fd,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            counted: true,
        })
    }

    /// Map a memfd another process made with [`SharedMemory::new`] (received over a socket)
    /// after checking that it is one: a regular file sealed against shrinking, growing and
    /// further sealing, without write seals, of at most `max_len` bytes, so that no access to
    /// the mapping can fault. `None` if anything is off. The id is a new one of this process.
    #[must_use]
    pub fn open(fd: OwnedFd, max_len: u64) -> Option<Self> {
        static NEXT_ID: AtomicU64 = AtomicU64::new(1 << 63);
        let len = sealed_len(&fd).filter(|&l| l > 0 && l <= max_len)?;
        let len = usize::try_from(len).ok()?;
        let ptr = map(&fd, len).ok()?;
        Some(Self {
            ptr,
            len,
            fd,
            id: NEXT_ID.fetch_add(1, Ordering::Relaxed),
            counted: false,
        })
    }

    /// The first byte.
    #[must_use]
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr.as_ptr()
    }

    /// Length of the mapping in bytes (whole pages).
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// Never: a mapping has at least one page.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        false
    }

    /// The memfd, to pass to a peer that may map it.
    #[must_use]
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// A process-unique number naming this memory (a peer caches its mapping under it).
    #[must_use]
    pub fn id(&self) -> u64 {
        self.id
    }

    /// The offset in the memfd of `[addr, addr + len)`, if the range lies inside.
    #[must_use]
    pub fn offset_of(&self, addr: u64, len: u64) -> Option<u64> {
        let base = self.ptr.as_ptr() as u64;
        let off = addr.checked_sub(base)?;
        (off.checked_add(len)? <= self.len as u64).then_some(off)
    }
}

/// Map the first `len` bytes of `fd` shared, readable and writable.
fn map(fd: &OwnedFd, len: usize) -> io::Result<NonNull<u8>> {
    // SAFETY: a fresh shared mapping of the memfd; the kernel picks the address, so it
    // overlaps nothing of ours.
    let p = unsafe {
        rustix::mm::mmap(
            std::ptr::null_mut(),
            len,
            ProtFlags::READ | ProtFlags::WRITE,
            MapFlags::SHARED,
            fd,
            0,
        )?
    };
    NonNull::new(p.cast::<u8>()).ok_or_else(|| io::ErrorKind::Other.into())
}

/// The size of `fd` if it is memory no access to a mapping of can fault: a memfd of ordinary
/// shared memory (tmpfs, which gives a fresh page to any hole punched in it, where hugetlbfs
/// could run out of pages), sealed against shrinking, growing and further sealing, without
/// write seals (the mapping is written). `None` otherwise.
///
/// The seals are read first: once `SEAL` is there, the size read after it is final. (Read the
/// other way round, a peer could shrink the file between the two calls and seal it then.)
#[must_use]
pub fn sealed_len(fd: &impl AsFd) -> Option<u64> {
    /// `TMPFS_MAGIC` of `statfs(2)`: memfds without `MFD_HUGETLB` live there.
    const TMPFS_MAGIC: u64 = 0x0102_1994;
    let seals = rustix::fs::fcntl_get_seals(fd).ok()?;
    if !seals.contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)
        || seals.intersects(SealFlags::WRITE | SealFlags::FUTURE_WRITE)
    {
        return None;
    }
    let fs = rustix::fs::fstatfs(fd).ok()?;
    if u64::try_from(fs.f_type).ok()? != TMPFS_MAGIC {
        return None;
    }
    let st = rustix::fs::fstat(fd).ok()?;
    if rustix::fs::FileType::from_raw_mode(st.st_mode) != rustix::fs::FileType::RegularFile {
        return None;
    }
    u64::try_from(st.st_size).ok()
}

impl Drop for SharedMemory {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `new`, unmapped once; no reference into it outlives the
        // value (users hold the value, through an `Arc`, while they use the memory).
        let _ = unsafe { rustix::mm::munmap(self.ptr.as_ptr().cast(), self.len) };
        if self.counted {
            LIVE.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zeroed_sealed_and_ranges_checked() {
        let m = SharedMemory::new(5000).expect("memfd");
        assert_eq!(m.len(), 8192, "whole pages");
        // SAFETY: inside the fresh mapping, which nothing else uses.
        let first = unsafe { *m.as_ptr() };
        assert_eq!(first, 0);
        let seals = rustix::fs::fcntl_get_seals(m.fd()).expect("seals");
        assert!(seals.contains(SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL));
        let base = m.as_ptr() as u64;
        assert_eq!(m.offset_of(base + 100, 8092), Some(100));
        assert_eq!(m.offset_of(base + 100, 8093), None, "past the end");
        assert_eq!(m.offset_of(base - 1, 1), None, "before the start");
        assert_eq!(m.offset_of(base + 1, u64::MAX), None, "overflow");
        assert_ne!(SharedMemory::new(1).expect("memfd").id(), m.id());
        // Another mapping of the same memory sees the same bytes.
        let fd = m.fd().try_clone_to_owned().expect("dup");
        let other = SharedMemory::open(fd, 1 << 20).expect("a sealed memfd");
        // SAFETY: both mappings are of 8 KiB; nothing else uses them.
        unsafe { *m.as_ptr().add(8191) = 7 };
        // SAFETY: as above.
        assert_eq!(unsafe { *other.as_ptr().add(8191) }, 7);
        let fd = m.fd().try_clone_to_owned().expect("dup");
        assert!(
            SharedMemory::open(fd, 4096).is_none(),
            "larger than allowed"
        );
        // An unsealed memfd could shrink under a mapping: refused.
        let raw = rustix::fs::memfd_create("x", MemfdFlags::CLOEXEC).expect("memfd");
        rustix::fs::ftruncate(&raw, 4096).expect("size");
        assert!(SharedMemory::open(raw, 1 << 20).is_none(), "unsealed");
    }
}
