//! `IND2MemoryRegion`, `IND2MemoryWindow`, and [`Buffer`], memory the provider may own.
//!
//! # Why registration is where safety is decided
//! Registered memory is memory another agent writes: a Receive, or a peer's RDMA Write,
//! stores into it while your program runs. Rust's references cannot describe that, so the
//! raw path ([`MemoryRegion::register`]) is `unsafe` and says what you promise. The owned path
//! ([`MemoryRegion::register_buffer`]) is safe: the region keeps the [`Buffer`] alive for as long
//! as the provider can touch it, even past `deregister`, while requests that use it are in
//! flight.

use std::alloc::{alloc_zeroed, dealloc, Layout};
use std::fmt;
use std::ops::Range;
use std::sync::Arc;

use netdirect_spi::kit::shared_mem::SharedMemory;
use netdirect_spi::traits;

use crate::{Error, MrFlags, Overlapped, Result, Sge, Status};

/// A memory region (`IND2MemoryRegion`): one registration of memory, which requests name by
/// its local token and a peer by its remote token.
///
/// ```
/// use netdirect::{Buffer, MrFlags, Provider};
///
/// # fn main() -> netdirect::Result<()> {
/// let adapter = Provider::open("tcp")?.open_adapter_for("127.0.0.1:0".parse().unwrap())?;
/// let buf = Buffer::new(4096)?;
/// let mr = adapter.create_memory_region()?;
/// // Local Receives and Reads may write it; a peer may Write it.
/// mr.register_buffer(&buf, MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE)?
///     .wait()?;
/// let sge = buf.sge(0..1024, mr.get_local_token()); // for a post on this side
/// let (address, token) = (buf.as_ptr() as u64, mr.get_remote_token()); // for the peer
/// # let _ = (sge, address, token);
/// mr.deregister()?.wait()?;
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct MemoryRegion {
    inner: Arc<dyn traits::MemoryRegion>,
}

impl fmt::Debug for MemoryRegion {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl MemoryRegion {
    pub(crate) fn from_spi(inner: Arc<dyn traits::MemoryRegion>) -> Self {
        Self { inner }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::MemoryRegion> {
        &self.inner
    }

    /// `Register` `len` bytes at `buffer` with `flags`.
    ///
    /// Errors (`docs/ND-RULES.md` D7): a null `buffer` gives `ND_INVALID_PARAMETER`, `len == 0`
    /// gives `ND_INVALID_BUFFER_SIZE`, more than `MaxRegistrationSize` gives
    /// `ND_INVALID_PARAMETER`.
    ///
    /// Flags: `ALLOW_LOCAL_WRITE`, `ALLOW_REMOTE_READ`, `ALLOW_REMOTE_WRITE` (which includes
    /// local write), `RDMA_READ_SINK`, `DO_NOT_SECURE_VM` (accepted; Linux does not pin).
    ///
    /// # Safety
    /// The memory must stay allocated, and must not be accessed through Rust references while a
    /// request or a remote access may write it, until the region's `deregister` has
    /// *completed* (or the region was dropped and every queue pair that could reach it is
    /// gone) and every request that used it has completed. With `ALLOW_REMOTE_WRITE` the peer
    /// may write it at any time while registered; with `ALLOW_REMOTE_READ` it may read it,
    /// and bytes changed meanwhile may reach it torn. Any code holding the region may also
    /// bind a memory window over it (safe [`crate::QueuePair::bind`]), which exposes those bytes
    /// to a peer for reading and, with `ALLOW_LOCAL_WRITE`, for writing, whatever the
    /// region's remote flags (R-MW-1): unless you control every bind, treat registered memory
    /// as remotely readable and writable for the registration's life.
    pub unsafe fn register(
        &self,
        buffer: *mut u8,
        len: usize,
        flags: MrFlags,
    ) -> Result<Overlapped> {
        // SAFETY: forwarded contract.
        unsafe { self.inner.register(buffer, len, flags, None) }
    }

    /// Register all of `buf`. Safe: the region holds the buffer until it is deregistered and
    /// every request that used it has finished.
    pub fn register_buffer(&self, buf: &Buffer, flags: MrFlags) -> Result<Overlapped> {
        let keep = buf.keep.clone();
        // SAFETY: `keep` owns the allocation and the provider holds it for as long as it can
        // touch the memory; `Buffer` gives no safe access to the bytes while that may happen.
        unsafe {
            self.inner
                .register(buf.as_ptr(), buf.len(), flags, Some(keep))
        }
    }

    /// `Deregister`: `ND_DEVICE_BUSY` while a memory window is bound to the region. Otherwise
    /// the tokens stop working at once (for good: a token is never handed out again), and the
    /// returned request completes when nothing in flight uses the memory any more — a queued
    /// Read Response for a peer, a segment being placed, a posted request — usually at once.
    /// Once it has completed, memory registered with [`MemoryRegion::register`] may be freed.
    pub fn deregister(&self) -> Result<Overlapped> {
        self.inner.deregister()
    }

    /// `GetLocalToken`: the token for [`Sge::memory_region_token`].
    pub fn get_local_token(&self) -> u32 {
        self.inner.get_local_token()
    }

    /// `GetRemoteToken`: the token a peer passes to Read/Write (network byte order).
    pub fn get_remote_token(&self) -> u32 {
        self.inner.get_remote_token()
    }

    /// `CancelOverlappedRequests`.
    pub fn cancel_overlapped_requests(&self) -> Result<()> {
        self.inner.cancel_overlapped_requests()
    }

    /// `GetOverlappedResult`.
    pub fn get_overlapped_result(&self, ov: &Overlapped, wait: bool) -> Result<()> {
        ov.get_overlapped_result(wait)
    }
}

/// A memory window (`IND2MemoryWindow`).
#[derive(Clone)]
pub struct MemoryWindow {
    inner: Arc<dyn traits::MemoryWindow>,
}

impl fmt::Debug for MemoryWindow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Debug::fmt(&self.inner, f)
    }
}

impl MemoryWindow {
    pub(crate) fn from_spi(inner: Arc<dyn traits::MemoryWindow>) -> Self {
        Self { inner }
    }

    /// The SPI object.
    pub fn as_spi(&self) -> &Arc<dyn traits::MemoryWindow> {
        &self.inner
    }

    /// `GetRemoteToken`: valid as soon as `QueuePair::bind` returns.
    pub fn get_remote_token(&self) -> u32 {
        self.inner.get_remote_token()
    }
}

struct Alloc {
    ptr: *mut u8,
    layout: Layout,
}

// SAFETY: the allocation is plain memory owned by this value; access to its bytes goes
// through `Buffer`'s methods, whose contracts govern concurrent use.
unsafe impl Send for Alloc {}
// SAFETY: as above.
unsafe impl Sync for Alloc {}

impl Drop for Alloc {
    fn drop(&mut self) {
        // SAFETY: allocated in `Buffer::new` with this layout.
        unsafe { dealloc(self.ptr, self.layout) }
    }
}

/// Page-aligned, zeroed memory for registration, owned by reference count.
///
/// The provider keeps a reference while it may touch the memory, so dropping your `Buffer`
/// never frees memory a request still uses. Reading and writing the bytes is `unsafe` because
/// a Receive or a peer's Write may be storing into them; do it when no request that writes the
/// buffer is in flight.
///
/// Buffers of [`Buffer::SHARED_MIN`] bytes or more are a shared mapping of a sealed memfd
/// (`kit::shared_mem`), so that a same-host peer allowed to write them can do so with one copy
/// (the `shm` provider's mapped RDMA Writes and Reads); smaller ones come from the heap, and so
/// do large ones beyond the memfd budget (a quarter of the descriptor limit, 16 to 4096 alive
/// at once, `SharedMemory::budget`), so buffers never take the descriptors the process's
/// sockets need.
///
/// ```
/// use netdirect::Buffer;
///
/// # fn main() -> netdirect::Result<()> {
/// let buf = Buffer::new(256)?;
/// assert_eq!(buf.len(), 256);
/// // SAFETY: the buffer is not registered yet, so no request or peer can touch it.
/// unsafe { buf.as_mut_slice()[..5].copy_from_slice(b"hello") };
/// // SAFETY: as above.
/// assert_eq!(unsafe { &buf.as_slice()[..5] }, b"hello");
/// // An SGE needs a region's token; out of range is `None`, not a panic.
/// assert!(buf.try_sge(0..257, 0).is_none());
/// # Ok(())
/// # }
/// ```
#[derive(Clone)]
pub struct Buffer {
    ptr: *mut u8,
    len: usize,
    /// What owns the memory: an `Alloc` or a `SharedMemory`, given to the provider as the
    /// registration's keep-alive (which is how a provider recognises shared memory).
    keep: Arc<dyn std::any::Any + Send + Sync>,
}

// SAFETY: `ptr` points into memory `keep` owns; access to the bytes goes through `Buffer`'s
// methods, whose contracts govern concurrent use.
unsafe impl Send for Buffer {}
// SAFETY: as above.
unsafe impl Sync for Buffer {}

impl fmt::Debug for Buffer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Buffer")
            .field("ptr", &self.ptr)
            .field("len", &self.len)
            .field("shared", &self.keep.is::<SharedMemory>())
            .finish()
    }
}

impl Buffer {
    /// From this size on a buffer is shared-mappable memory (one memfd descriptor each).
    pub const SHARED_MIN: usize = 64 << 10;

    /// `len` zeroed bytes (at least one), aligned to 4096.
    pub fn new(len: usize) -> Result<Self> {
        if len >= Self::SHARED_MIN {
            if let Ok(m) = SharedMemory::new(len) {
                return Ok(Self {
                    ptr: m.as_ptr(),
                    len,
                    keep: Arc::new(m),
                });
            }
            // No memfd (descriptor limit, sandbox): heap memory works for everything but
            // the one-copy path.
        }
        let layout = Layout::from_size_align(len.max(1), 4096)
            .map_err(|_| Error::new(Status::INVALID_PARAMETER))?;
        // SAFETY: the layout has a non-zero size.
        let ptr = unsafe { alloc_zeroed(layout) };
        if ptr.is_null() {
            return Err(Error::new(Status::NO_MEMORY));
        }
        Ok(Self {
            ptr,
            len,
            keep: Arc::new(Alloc { ptr, layout }),
        })
    }

    /// Length in bytes.
    pub fn len(&self) -> usize {
        self.len
    }

    /// Whether the length is zero.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The first byte.
    pub fn as_ptr(&self) -> *mut u8 {
        self.ptr
    }

    /// An SGE for `range` of this buffer under the local `token` of the region it is registered
    /// with.
    ///
    /// # Panics
    /// If `range` is out of bounds or longer than `u32::MAX` bytes, as slice indexing does;
    /// [`Buffer::try_sge`] says `None` instead.
    #[must_use]
    pub fn sge(&self, range: Range<usize>, token: u32) -> Sge {
        self.try_sge(range, token)
            .expect("SGE range inside the buffer and at most 4 GiB")
    }

    /// An SGE for `range` of this buffer under `token`; `None` if `range` is out of bounds or
    /// longer than `u32::MAX` bytes.
    #[must_use]
    pub fn try_sge(&self, range: Range<usize>, token: u32) -> Option<Sge> {
        if range.start > range.end || range.end > self.len {
            return None;
        }
        let len = u32::try_from(range.end - range.start).ok()?;
        // SAFETY: in bounds of the allocation (checked above).
        Some(Sge::new(unsafe { self.ptr.add(range.start) }, len, token))
    }

    /// The bytes, shared.
    ///
    /// # Safety
    /// No request or remote access may be writing the buffer while the slice lives.
    pub unsafe fn as_slice(&self) -> &[u8] {
        // SAFETY: valid for `len` bytes; the caller rules out concurrent writers.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// The bytes, exclusive.
    ///
    /// # Safety
    /// No request or remote access may be reading or writing the buffer while the slice lives,
    /// and no other slice of it may exist.
    #[allow(clippy::mut_from_ref)]
    pub unsafe fn as_mut_slice(&self) -> &mut [u8] {
        // SAFETY: valid for `len` bytes; the caller rules out every other access.
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Sizes no allocator gives are an error, not a panic; ranges outside a buffer are `None`.
    #[test]
    fn impossible_sizes_and_ranges_are_refused() {
        // No layout describes these.
        for len in [usize::MAX, usize::MAX - 10, isize::MAX as usize + 1] {
            let e = Buffer::new(len).err().map(|e| e.status());
            assert_eq!(e, Some(Status::INVALID_PARAMETER), "Buffer::new({len})");
        }
        // A valid layout that no memory backs (8 EiB): neither memfd nor the heap has it.
        let len = isize::MAX as usize - 4095;
        let e = Buffer::new(len).err().map(|e| e.status());
        assert_eq!(e, Some(Status::NO_MEMORY), "Buffer::new({len})");
        let b = Buffer::new(100).expect("buffer");
        assert!(b.try_sge(0..100, 7).is_some());
        assert!(b.try_sge(0..101, 7).is_none());
        #[allow(clippy::reversed_empty_ranges)]
        let backwards = 50..10;
        assert!(b.try_sge(backwards, 7).is_none());
        assert!(b.try_sge(usize::MAX..usize::MAX, 7).is_none());
        assert_eq!(Error::new(Status::SUCCESS).status(), Status::SUCCESS);
    }
}
