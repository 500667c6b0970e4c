//! The shared segment of one connection: a sealed memfd mapped by both processes.
//!
//! This module and `mem` are the only places that turn addresses into memory accesses.
//!
//! ```text
//! offset 0     header line  magic, version, cells, data size (checked by the opener, then ignored)
//! offset 64    side 0 line  waiting, closed, can_pull, nonce_addr, proof, lease_epoch
//!                           (written by the active side)
//! offset 128   side 0 copy  copying (the active side's mapped copies and placed Writes)
//! offset 192   side 1       the same two lines, written by the passive side
//! offset 320   channel 0    active → passive
//! ...          channel 1    passive → active
//! channel:     +0     consumer line: tail u64, data_tail u64 (written by the consumer)
//!              +64    cells: N × 64 bytes (written by the producer)
//!              +C     data area: D bytes, C = round_up(64 + 64·N, 4096) (written by the producer)
//! ```
//!
//! The segment is created by the active side with `memfd_create` (no name in any file system,
//! so nothing is left behind), sized, and sealed against shrinking and growing before its
//! descriptor is passed to the passive side; the passive side refuses a descriptor that is not
//! a sealed memfd of exactly the expected size. So neither side can make the other's mapping
//! shorter than it believes (which would turn its accesses into SIGBUS), and every other value
//! either side reads from the segment is checked or masked before use (`ring`).
//!
//! Data races with a hostile peer: the control words are atomics; payload bytes are copied with
//! `ptr::copy_nonoverlapping` through raw pointers only, never through Rust references, so a
//! peer scribbling over a record while we copy it can garble the copied bytes (its own data) but
//! cannot break an invariant of ours.

#![allow(unsafe_code)]

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::ptr::NonNull;

use rustix::fs::{MemfdFlags, SealFlags};
use rustix::mm::{MapFlags, ProtFlags};

use crate::ring::{RingMem, CELL, INLINE_MAX, INLINE_OFF};
use crate::sync::{AtomicU32, AtomicU64};

const MAGIC: u64 = u64::from_le_bytes(*b"NDSHMv01");
const VERSION: u32 = 2;
const SIDE_OFF: [usize; 2] = [64, 192];
const CHAN_OFF: usize = 320;
const PAGE: usize = 4096;

/// The sizes of a segment's rings (both directions use the same).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Params {
    /// Cells per direction (a power of two, 16..=65536).
    pub(crate) cells: u32,
    /// Data-area bytes per direction (a power of two, 4 KiB..=256 MiB).
    pub(crate) data_len: u64,
}

impl Params {
    /// Whether the sizes are in range (checked on every value received from a peer).
    pub(crate) fn is_valid(&self) -> bool {
        self.cells.is_power_of_two()
            && (16..=65536).contains(&self.cells)
            && self.data_len.is_power_of_two()
            && (4096..=(256 << 20)).contains(&self.data_len)
    }

    fn data_off(&self) -> usize {
        (CELL + CELL * self.cells as usize).next_multiple_of(PAGE)
    }

    fn chan_size(&self) -> usize {
        self.data_off() + self.data_len as usize
    }

    fn chan_off(&self, c: usize) -> usize {
        (CHAN_OFF + c * self.chan_size()).next_multiple_of(CELL)
    }

    /// The segment's size in bytes.
    pub(crate) fn size(&self) -> usize {
        (self.chan_off(1) + self.chan_size()).next_multiple_of(PAGE)
    }
}

/// One side's two lines: written by that side only. The first is read by the peer on its
/// data path (`waiting` after each record it publishes, `closed` and `lease_epoch` before each
/// Write it places), and changes rarely; the second holds the word the side stores around
/// each copy into the peer's memory, which the peer reads only when it revokes or sleeps, so
/// a side placing Writes never pulls the line the peer reads away from it.
#[repr(C, align(64))]
pub(crate) struct SideLine {
    /// The side is (about to be) asleep: wake it through the socket after a change.
    pub(crate) waiting: AtomicU32,
    /// The side disconnected (or terminated the connection).
    pub(crate) closed: AtomicU32,
    /// The side can read its peer's memory (`process_vm_readv` worked on a probe): the peer
    /// may send large messages as RTS records for it to pull.
    pub(crate) can_pull: AtomicU32,
    _pad0: u32,
    /// Where this side keeps the connection's nonce (`Link::nonce`): the peer proves it may
    /// read and write our memory by reading it from there.
    pub(crate) nonce_addr: AtomicU64,
    /// The peer's nonce as this side read it from the peer's memory (`process_vm_readv`):
    /// zero until this side wants to map the peer's shared memory (mapped Writes and Reads).
    pub(crate) proof: [AtomicU64; 2],
    /// The leases this side (as a target) gave its peer hold while this equals the epoch
    /// they carry; raised to revoke them all (`mapped`: placed Writes).
    pub(crate) lease_epoch: AtomicU64,
    _pad1: [u64; 2],
    /// Odd while the side copies into (or out of) a mapping of its peer's memory (a granted
    /// mapped transfer, a placed Write), even otherwise; raised by one at each start and end
    /// (`ring::grant`). The peer, revoking or closing, waits while it is odd; a peer about to
    /// sleep looks whether it moved (something may have been placed in its memory).
    pub(crate) copying: AtomicU32,
}

// The layout above: two lines, `copying` alone at the start of the second.
const _: () =
    assert!(size_of::<SideLine>() == 128 && std::mem::offset_of!(SideLine, copying) == 64);

/// A mapped segment. Unmapped on drop.
pub(crate) struct Segment {
    base: NonNull<u8>,
    params: Params,
    /// Offsets of channel 0's and 1's consumer lines, and of a channel's data area from its
    /// consumer line: computed once, as every ring access on the data path starts from them.
    chan_off: [usize; 2],
    data_off: usize,
}

// SAFETY: the mapping is plain shared memory; every access through `Segment` goes through
// atomics or raw-pointer copies whose callers coordinate through the ring protocol.
unsafe impl Send for Segment {}
// SAFETY: as above.
unsafe impl Sync for Segment {}

impl std::fmt::Debug for Segment {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Segment")
            .field("params", &self.params)
            .finish()
    }
}

impl Segment {
    /// Create, size, seal and map a new segment; returns it and the descriptor to pass on.
    pub(crate) fn create(params: Params) -> io::Result<(Self, OwnedFd)> {
        debug_assert!(params.is_valid());
        let fd = rustix::fs::memfd_create(
            "netdirect-shm",
            MemfdFlags::CLOEXEC | MemfdFlags::ALLOW_SEALING,
        )?;
        rustix::fs::ftruncate(&fd, params.size() as u64)?;
        rustix::fs::fcntl_add_seals(&fd, SealFlags::SHRINK | SealFlags::GROW | SealFlags::SEAL)?;
        // Not populated: an idle connection keeps only the pages its rings touched (a few
        // KiB), the data areas taking memory as messages use them, not the whole segment
        // (about 1 MiB by default) from the start.
        let seg = Self::map(&fd, params, MapFlags::empty())?;
        // SAFETY: the header line is inside the fresh mapping and nobody else sees it yet.
        unsafe {
            let h = seg.base.as_ptr();
            h.cast::<u64>().write(MAGIC);
            h.add(8).cast::<u32>().write(VERSION);
            h.add(12).cast::<u32>().write(params.cells);
            h.add(16).cast::<u64>().write(params.data_len);
        }
        Ok((seg, fd))
    }

    /// Map a segment a peer created, after checking that it is a sealed memfd of exactly the
    /// size `params` (themselves checked) call for. `None` if anything is off.
    pub(crate) fn open(fd: &OwnedFd, params: Params) -> Option<Self> {
        if !params.is_valid() {
            return None;
        }
        // Sealed ordinary shared memory of the final size (`sealed_len` reads the seals
        // before the size).
        if netdirect_spi::kit::shared_mem::sealed_len(fd)? != params.size() as u64 {
            return None;
        }
        // Not populated: the peer sized the file, and faulting in pages it never touched would
        // allocate them here, charged to us (a listener with requests queued would hold
        // hundreds of MiB per request). The pages come in as the rings use them.
        let seg = Self::map(fd, params, MapFlags::empty()).ok()?;
        // SAFETY: the header lies inside the mapping (its size was checked above); the values
        // are only compared.
        let ok = unsafe {
            let h = seg.base.as_ptr();
            std::ptr::read_volatile(h.cast::<u64>()) == MAGIC
                && std::ptr::read_volatile(h.add(8).cast::<u32>()) == VERSION
                && std::ptr::read_volatile(h.add(12).cast::<u32>()) == params.cells
                && std::ptr::read_volatile(h.add(16).cast::<u64>()) == params.data_len
        };
        ok.then_some(seg)
    }

    fn map(fd: &impl AsFd, params: Params, extra: MapFlags) -> io::Result<Self> {
        // SAFETY: a fresh shared mapping of the whole memfd; the kernel picks the address.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                params.size(),
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED | extra,
                fd,
                0,
            )?
        };
        let base = NonNull::new(p.cast::<u8>()).ok_or(io::ErrorKind::Other)?;
        Ok(Self {
            base,
            params,
            chan_off: [params.chan_off(0), params.chan_off(1)],
            data_off: params.data_off(),
        })
    }

    /// Where this process mapped the segment (the peer probes cross-memory attach with it).
    pub(crate) fn addr(&self) -> u64 {
        self.base.as_ptr() as u64
    }

    /// The magic word at the start of every segment.
    pub(crate) const MAGIC: u64 = MAGIC;

    /// Side `s`'s line (0: active, 1: passive).
    pub(crate) fn side(&self, s: usize) -> &SideLine {
        // SAFETY: the line is inside the mapping, 64-byte aligned, and lives as long as `self`;
        // it is only accessed through atomics.
        unsafe { &*self.base.as_ptr().add(SIDE_OFF[s & 1]).cast::<SideLine>() }
    }

    /// Channel `c` (0: active → passive, 1: passive → active).
    pub(crate) fn chan(&self, c: usize) -> Chan<'_> {
        let off = self.chan_off[c & 1];
        // SAFETY: `off` and the data offset are inside the mapping by construction of `Params`.
        let (ctl, data) = unsafe {
            let ctl = self.base.as_ptr().add(off);
            (ctl, ctl.add(self.data_off))
        };
        Chan {
            ctl,
            data,
            cells: self.params.cells,
            data_len: self.params.data_len,
            _seg: std::marker::PhantomData,
        }
    }
}

impl Drop for Segment {
    fn drop(&mut self) {
        // SAFETY: the mapping was created by `map` with this size and nothing borrows it any
        // more (`Chan` and `SideLine` borrow `self`).
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), self.params.size()) };
    }
}

/// One direction of a mapped segment.
#[derive(Clone, Copy)]
pub(crate) struct Chan<'a> {
    ctl: *mut u8,
    data: *mut u8,
    cells: u32,
    data_len: u64,
    _seg: std::marker::PhantomData<&'a Segment>,
}

impl Chan<'_> {
    fn cell(&self, i: u32) -> *mut u8 {
        let i = (i & (self.cells - 1)) as usize;
        // SAFETY: `i < cells`, so the cell lies inside the channel's cell array.
        unsafe { self.ctl.add(CELL + i * CELL) }
    }

    fn word<T>(&self, p: *mut u8) -> &T {
        // SAFETY: callers pass aligned addresses of control words inside the mapping, which
        // outlives `self`; the words are atomics (interior mutability, shared with the peer).
        unsafe { &*p.cast::<T>() }
    }
}

impl RingMem for Chan<'_> {
    fn cells(&self) -> u32 {
        self.cells
    }

    fn data_len(&self) -> u64 {
        self.data_len
    }

    fn seq(&self, i: u32) -> &AtomicU32 {
        self.word(self.cell(i))
    }

    fn meta(&self, i: u32) -> [&AtomicU32; 3] {
        let c = self.cell(i);
        // SAFETY: offsets 4, 8, 12 are inside the 64-byte cell.
        unsafe {
            [
                self.word(c.add(4)),
                self.word(c.add(8)),
                self.word(c.add(12)),
            ]
        }
    }

    fn tail(&self) -> &AtomicU64 {
        self.word(self.ctl)
    }

    fn data_tail(&self) -> &AtomicU64 {
        // SAFETY: offset 8 of the consumer line.
        self.word(unsafe { self.ctl.add(8) })
    }

    unsafe fn write_inline(&self, i: u32, off: usize, src: *const u8, len: usize) {
        debug_assert!(off + len <= INLINE_MAX);
        // SAFETY: the caller guarantees `off + len <= INLINE_MAX` and a readable `src`; the
        // destination is inside the cell's inline area.
        unsafe { std::ptr::copy_nonoverlapping(src, self.cell(i).add(INLINE_OFF + off), len) }
    }

    unsafe fn read_inline(&self, i: u32, off: usize, dst: *mut u8, len: usize) {
        debug_assert!(off + len <= INLINE_MAX);
        // SAFETY: as above, reversed.
        unsafe { std::ptr::copy_nonoverlapping(self.cell(i).add(INLINE_OFF + off), dst, len) }
    }

    unsafe fn write_data(&self, at: u64, src: *const u8, len: usize) {
        debug_assert!(at + len as u64 <= self.data_len);
        // SAFETY: the caller guarantees `at + len <= data_len` and a readable `src`.
        unsafe { std::ptr::copy_nonoverlapping(src, self.data.add(at as usize), len) }
    }

    unsafe fn read_data(&self, at: u64, dst: *mut u8, len: usize) {
        debug_assert!(at + len as u64 <= self.data_len);
        // SAFETY: as above, reversed.
        unsafe { std::ptr::copy_nonoverlapping(self.data.add(at as usize), dst, len) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn layout_fits_and_is_aligned() {
        let p = Params {
            cells: 256,
            data_len: 1 << 18,
        };
        assert!(p.is_valid());
        assert_eq!(p.chan_off(0) % CELL, 0);
        assert_eq!(p.chan_off(1) % CELL, 0);
        assert!(p.chan_off(1) >= p.chan_off(0) + p.chan_size());
        assert!(p.size() >= p.chan_off(1) + p.chan_size());
        assert!(!Params {
            cells: 3,
            data_len: 4096
        }
        .is_valid());
    }

    #[test]
    fn open_checks_seals_and_size() {
        let p = Params {
            cells: 16,
            data_len: 4096,
        };
        let (_seg, fd) = Segment::create(p).unwrap();
        assert!(Segment::open(&fd, p).is_some());
        let other = Params {
            cells: 32,
            data_len: 4096,
        };
        assert!(Segment::open(&fd, other).is_none(), "size mismatch");
        // An unsealed memfd is refused.
        let raw = rustix::fs::memfd_create("x", MemfdFlags::CLOEXEC).unwrap();
        rustix::fs::ftruncate(&raw, p.size() as u64).unwrap();
        assert!(Segment::open(&raw, p).is_none());
    }
}

#[cfg(test)]
mod hostile {
    //! What a peer can write into the segment, and what the ring makes of it.

    use super::*;
    use crate::ring::{kind, Consumer, Producer, Violation};
    use crate::sync::Ordering;

    fn seg() -> Segment {
        Segment::create(Params {
            cells: 16,
            data_len: 4096,
        })
        .unwrap()
        .0
    }

    /// Publish a record at position 0 with arbitrary header words, as a hostile peer would.
    fn forge(ch: &Chan<'_>, word: u32, len: u32) {
        let [w, l, _] = ch.meta(0);
        w.store(word, Ordering::Relaxed);
        l.store(len, Ordering::Relaxed);
        ch.seq(0).store(1, Ordering::Release);
    }

    #[test]
    fn malformed_records_are_violations() {
        let s = seg();
        let ch = s.chan(0);
        let c = Consumer::default();
        assert_eq!(c.peek(&ch), Ok(None), "nothing published");
        forge(&ch, 0x77, 0);
        assert_eq!(c.peek(&ch), Err(Violation), "unknown kind");
        forge(&ch, u32::from(kind::MSG), 49);
        assert_eq!(c.peek(&ch), Err(Violation), "inline length beyond the cell");
        forge(&ch, u32::from(kind::CHUNK), 4097);
        assert_eq!(c.peek(&ch), Err(Violation), "chunk beyond the data area");
        forge(&ch, u32::from(kind::CHUNK), u32::MAX);
        assert_eq!(c.peek(&ch), Err(Violation));
        forge(&ch, u32::from(kind::MSG), 48);
        assert!(c.peek(&ch).unwrap().is_some(), "a well-formed record");
        // A sequence number from another lap is not a record.
        ch.seq(0).store(17, Ordering::Release);
        assert_eq!(c.peek(&ch), Ok(None));
    }

    #[test]
    fn forged_tails_are_violations() {
        let s = seg();
        let ch = s.chan(0);
        let mut p = Producer::default();
        // Fill the ring (16 cells) so the producer must read the consumer's tail.
        struct Empty;
        // SAFETY: no pieces at all (zero-length messages).
        unsafe impl crate::ring::Gather for Empty {
            fn pieces(&self, _: u64, _: usize, _: impl FnMut(*const u8, usize)) {}
        }
        for _ in 0..16 {
            assert_eq!(p.has_room(&ch, 0), Ok(true));
            p.push_inline(&ch, kind::MSG, 0, &Empty, 0, 0);
        }
        assert_eq!(p.has_room(&ch, 0), Ok(false), "full");
        ch.tail().store(1000, Ordering::Release);
        assert_eq!(p.has_room(&ch, 0), Err(Violation), "tail ahead of head");
        ch.tail().store(16, Ordering::Release);
        ch.data_tail().store(u64::MAX, Ordering::Release);
        assert_eq!(p.has_room(&ch, 0), Err(Violation), "data tail ahead");
        ch.data_tail().store(0, Ordering::Release);
        assert_eq!(
            p.has_room(&ch, 0),
            Ok(true),
            "an honest tail frees the ring"
        );
    }
}
