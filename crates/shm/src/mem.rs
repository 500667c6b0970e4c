//! Application memory, by address: the pieces of a posted request as the ring copies them.
//!
//! Every segment here passed the registration checks of `netdirect_spi::kit::mr` (token, bounds,
//! rights) against a live registration when the request was posted, and the registration is
//! held with the request, so the memory outlives it. The application promised, when it
//! registered the memory (`MemoryRegion::register` is `unsafe`) and when it posted the request
//! (the posts are `unsafe`), that nothing else touches the memory until the request completes.
//! Those promises are what make the `Gather`/`Scatter` implementations below sound.

#![allow(unsafe_code)]

use crate::ring::{Gather, Scatter};

pub(crate) use netdirect_spi::kit::wrq::Seg;

/// The checked segments of one request, seen as one message.
#[derive(Debug)]
pub(crate) struct Segs<'a>(pub(crate) &'a [Seg]);

/// The pieces of message bytes `off..off + len` across a scatter/gather list whose elements
/// are `len_of` bytes long: `f(element, offset in it, bytes)` for each non-empty piece, in order.
fn split<S>(
    segs: &[S],
    len_of: impl Fn(&S) -> u64,
    off: u64,
    len: usize,
    mut f: impl FnMut(&S, u64, usize),
) {
    // One element (most requests): the piece, without the loop's bookkeeping.
    if let [s] = segs {
        let n = len_of(s).saturating_sub(off).min(len as u64);
        if n > 0 {
            f(s, off, n as usize);
        }
        return;
    }
    let mut base = 0u64;
    let mut left = len;
    let mut pos = off;
    for s in segs {
        if left == 0 {
            break;
        }
        let end = base + len_of(s);
        if pos < end {
            let n = ((end - pos) as usize).min(left);
            f(s, pos - base, n);
            left -= n;
            pos += n as u64;
        }
        base = end;
    }
}

/// [`split`] over checked segments: `f(address, bytes)`.
fn walk(segs: &[Seg], off: u64, len: usize, mut f: impl FnMut(u64, usize)) {
    split(
        segs,
        |s| u64::from(s.len),
        off,
        len,
        |s, at, n| f(s.addr + at, n),
    );
}

// SAFETY: each piece lies inside a segment checked for local read against a live registration
// at post time (the registration is held by the queued request), and the message offsets handed
// in never exceed the request's total length, which is the sum of the segment lengths.
unsafe impl Gather for Segs<'_> {
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(*const u8, usize)) {
        walk(self.0, off, len, |a, n| f(a as usize as *const u8, n));
    }
}

// SAFETY: as above, with segments checked for local write; the caller asks only for ranges
// inside the Receive's total length (checked against the incoming message first), and the
// poster promised not to touch the memory until the Receive completes.
unsafe impl Scatter for Segs<'_> {
    fn pieces(&mut self, off: u64, len: usize, mut f: impl FnMut(*mut u8, usize)) {
        walk(self.0, off, len, |a, n| f(a as usize as *mut u8, n));
    }
}

/// Bytes captured at post time (`INLINE` Sends that had to wait for ring space).
#[derive(Debug)]
pub(crate) struct Owned<'a>(pub(crate) &'a [u8]);

// SAFETY: pieces of a borrowed slice, within its bounds.
unsafe impl Gather for Owned<'_> {
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(*const u8, usize)) {
        let off = (off as usize).min(self.0.len());
        let len = len.min(self.0.len() - off);
        f(self.0[off..off + len].as_ptr(), len);
    }
}

/// Copy `len` bytes from application memory at `addr` into a vector (an `INLINE` request's
/// data, captured at post time).
///
/// # Safety
/// `addr..addr + len` is readable (the poster's contract for `INLINE` data).
pub(crate) unsafe fn capture(sge: &[netdirect_spi::Sge], out: &mut Vec<u8>) {
    out.clear();
    for s in sge {
        if s.buffer_length == 0 {
            continue;
        }
        // SAFETY: the caller's contract: each SGE names readable memory.
        let b = unsafe { std::slice::from_raw_parts(s.buffer, s.buffer_length as usize) };
        out.extend_from_slice(b);
    }
}

/// The SGEs of an `INLINE` request, read during the post call only (their tokens are not
/// checked: ND lets them be anything for inline data).
#[derive(Debug)]
pub(crate) struct InlineSges<'a>(&'a [netdirect_spi::Sge]);

impl<'a> InlineSges<'a> {
    /// # Safety
    /// Every SGE names memory readable for the lifetime of the value (the poster's contract
    /// for `INLINE` data, which holds during the post call).
    pub(crate) unsafe fn new(sge: &'a [netdirect_spi::Sge]) -> Self {
        Self(sge)
    }
}

// SAFETY: `InlineSges::new`'s contract makes every SGE readable; pieces stay inside them.
unsafe impl Gather for InlineSges<'_> {
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(*const u8, usize)) {
        let len_of = |s: &netdirect_spi::Sge| u64::from(s.buffer_length);
        split(self.0, len_of, off, len, |s, at, n| {
            f(s.buffer.wrapping_add(at as usize), n);
        });
    }
}

/// The source of a queued Send: captured bytes or checked segments.
#[derive(Debug)]
pub(crate) enum Src<'a> {
    Owned(Owned<'a>),
    Segs(Segs<'a>),
}

// SAFETY: delegates to the two sound implementations above.
unsafe impl Gather for Src<'_> {
    fn pieces(&self, off: u64, len: usize, f: impl FnMut(*const u8, usize)) {
        match self {
            Self::Owned(o) => o.pieces(off, len, f),
            Self::Segs(s) => s.pieces(off, len, f),
        }
    }
}

/// A local byte buffer to read a record's data-area bytes into (an RTS scatter list).
#[derive(Debug)]
pub(crate) struct OwnedMut<'a>(pub(crate) &'a mut [u8]);

// SAFETY: pieces of an exclusively borrowed slice, within its bounds.
unsafe impl Scatter for OwnedMut<'_> {
    fn pieces(&mut self, off: u64, len: usize, mut f: impl FnMut(*mut u8, usize)) {
        let off = (off as usize).min(self.0.len());
        let len = len.min(self.0.len() - off);
        f(self.0[off..off + len].as_mut_ptr(), len);
    }
}

/// Most iovecs per `process_vm_readv` call here (the Receive's segments and the sender's
/// scatter list are at most 64 and `RTS_MAX_SGES`).
const IOVS: usize = 64;

/// Copy `total` bytes of the peer process `pid`'s memory, at the `(address, length)` pairs it
/// announced in an RTS record, into the Receive whose checked segments are `local`
/// (`total` ≤ the Receive's length, checked by the caller), with `process_vm_readv`. The kernel
/// checks the remote ranges against the peer's address space; a range the peer does not own is
/// an error (the peer broke the protocol).
pub(crate) fn pull(pid: i32, local: &[Seg], remote: &[(u64, u64)], total: u64) -> Result<(), ()> {
    let mut done = 0u64;
    while done < total {
        let mut liov = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; IOVS];
        let mut riov = liov;
        let (mut nl, mut nr) = (0, 0);
        walk(local, done, (total - done) as usize, |a, n| {
            if nl < IOVS {
                liov[nl] = libc::iovec {
                    iov_base: a as usize as *mut libc::c_void,
                    iov_len: n,
                };
                nl += 1;
            }
        });
        let mut base = 0u64;
        for &(a, n) in remote {
            let end = base + n;
            if done < end && nr < IOVS {
                let skip = done.saturating_sub(base);
                riov[nr] = libc::iovec {
                    iov_base: a.wrapping_add(skip) as usize as *mut libc::c_void,
                    iov_len: (n - skip) as usize,
                };
                nr += 1;
            }
            base = end;
        }
        // SAFETY: the local iovecs lie inside the Receive's segments, checked for local write
        // against live registrations that the queued Receive holds, and cover at most the
        // bytes still missing; the remote iovecs name the peer's memory, which the kernel
        // checks (and we never dereference).
        let r = unsafe {
            libc::process_vm_readv(
                pid,
                liov.as_ptr(),
                nl as libc::c_ulong,
                riov.as_ptr(),
                nr as libc::c_ulong,
                0,
            )
        };
        if r <= 0 {
            return Err(());
        }
        done += r as u64;
    }
    Ok(())
}

/// Whether `process_vm_readv` can read process `pid`: the 8 bytes at `addr` there must be
/// `expect` (the magic word of the segment the peer mapped at `addr`).
pub(crate) fn probe(pid: i32, addr: u64, expect: u64) -> bool {
    let mut word = 0u64;
    let l = libc::iovec {
        iov_base: (&mut word as *mut u64).cast(),
        iov_len: 8,
    };
    let r = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: 8,
    };
    // SAFETY: the local iovec is our own 8-byte variable; the remote one is checked by the
    // kernel against the peer's address space.
    let n = unsafe { libc::process_vm_readv(pid, &l, 1, &r, 1, 0) };
    n == 8 && word == expect
}

/// Whether bytes `off..off + len` lie inside the mapping `m` (overflow caught).
fn inside(m: &netdirect_spi::kit::shared_mem::SharedMemory, off: u64, len: usize) -> bool {
    off.checked_add(len as u64)
        .is_some_and(|end| end <= m.len() as u64)
}

/// Copy `len` bytes of `src` (from message offset 0) to offset `off` of `dst`, a peer's
/// shared memory mapped here (a mapped RDMA Write); `false`, copying nothing, if that range
/// leaves the mapping.
pub(crate) fn copy_into<G: Gather>(
    dst: &netdirect_spi::kit::shared_mem::SharedMemory,
    off: u64,
    src: &G,
    len: usize,
) -> bool {
    if !inside(dst, off, len) {
        return false;
    }
    let mut at = off as usize;
    src.pieces(0, len, |p, n| {
        // SAFETY: `at + n <= off + len <= dst.len()` (the pieces add up to `len`, `Gather`'s
        // contract), so the destination lies inside the mapping, which a sealed memfd backs
        // whole (`SharedMemory::open`); `p` is readable for `n` bytes (`Gather`); the two
        // cannot overlap (one is a mapping of the peer's memfd, the other our registered
        // memory).
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_ptr().add(at), n) };
        at += n;
    });
    true
}

/// Place a Write of `len` bytes of `src` (from message offset 0) at offset `off` of `dst`, a
/// peer's shared memory mapped here, under a lease (`mapped`), with its last byte stored last:
/// the peer's application may be watching that byte while we copy (as ndrpingpong does), and
/// a Write is placed in order. `false`, copying nothing, if the range leaves the mapping or is
/// empty.
pub(crate) fn place_into<G: Gather>(
    dst: &netdirect_spi::kit::shared_mem::SharedMemory,
    off: u64,
    src: &G,
    len: usize,
) -> bool {
    if len == 0 || !inside(dst, off, len) {
        return false;
    }
    let mut at = off as usize;
    src.pieces(0, len - 1, |p, n| {
        // SAFETY: as in `copy_into`: `at + n <= off + len <= dst.len()`, `p` readable for
        // `n` bytes, no overlap.
        unsafe { std::ptr::copy_nonoverlapping(p, dst.as_ptr().add(at), n) };
        at += n;
    });
    // Keeps the compiler from sinking the stores above below the last byte's; x86 keeps
    // stores in order.
    std::sync::atomic::fence(std::sync::atomic::Ordering::Release);
    src.pieces(len as u64 - 1, 1, |p, n| {
        if n == 1 {
            // SAFETY: `at < off + len <= dst.len()`; `p` is readable for 1 byte.
            unsafe { dst.as_ptr().add(at).write_volatile(p.read()) };
        }
    });
    true
}

/// Copy `len` bytes at offset `off` of `src`, a peer's shared memory mapped here (a mapped
/// RDMA Read), into `dst` (from message offset 0); `false`, copying nothing, if that range
/// leaves the mapping.
pub(crate) fn copy_out<S: Scatter>(
    src: &netdirect_spi::kit::shared_mem::SharedMemory,
    off: u64,
    dst: &mut S,
    len: usize,
) -> bool {
    if !inside(src, off, len) {
        return false;
    }
    let mut at = off as usize;
    dst.pieces(0, len, |p, n| {
        // SAFETY: as in `copy_into`, with the roles swapped: the source lies inside the
        // mapping (`at + n <= off + len <= src.len()`), `p` is writable for `n` bytes
        // (`Scatter`), and the two cannot overlap.
        unsafe { std::ptr::copy_nonoverlapping(src.as_ptr().add(at), p, n) };
        at += n;
    });
    true
}

/// Read `buf.len()` bytes at `addr` in process `pid` (cross-memory attach); whether all came.
pub(crate) fn read_remote(pid: i32, addr: u64, buf: &mut [u8]) -> bool {
    let l = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let r = libc::iovec {
        iov_base: addr as usize as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: the local iovec is `buf`, writable for its length; the remote one is checked by
    // the kernel against the other process's address space (and its ptrace rules).
    let n = unsafe { libc::process_vm_readv(pid, &l, 1, &r, 1, 0) };
    n == buf.len() as isize
}

/// A record's inline bytes: a one-sided request's 16-byte descriptor, then message bytes
/// `off..` of `rest` (an RDMA Write whose data fits in the cell with its descriptor).
#[derive(Debug)]
pub(crate) struct Prefixed<'a, G> {
    pub(crate) head: &'a [u8],
    pub(crate) rest: &'a G,
}

// SAFETY: pieces of the borrowed `head` slice, within its bounds, then `rest`'s pieces, which
// its own (sound) implementation bounds.
unsafe impl<G: Gather> Gather for Prefixed<'_, G> {
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(*const u8, usize)) {
        let h = self.head.len() as u64;
        let mut left = len;
        let mut pos = off;
        if pos < h {
            let n = ((h - pos) as usize).min(left);
            f(self.head[pos as usize..pos as usize + n].as_ptr(), n);
            left -= n;
            pos += n as u64;
        }
        if left > 0 {
            self.rest.pieces(pos - h, left, f);
        }
    }
}

/// One checked range of our own registered memory, as the target of a peer's RDMA Write or
/// the source of its RDMA Read: the `[addr, addr + len)` the target-side check accepted
/// against a live registration (`qp::ShmQp::check_remote`), which the queue pair holds while
/// it copies.
pub(crate) fn target(addr: u64, len: u64) -> Seg {
    Seg::new(addr, u32::try_from(len).unwrap_or(u32::MAX), None)
}

/// Copy `len` bytes from `src` into the memory of `dst` (a peer's inline RDMA Write).
///
/// # Safety
/// `dst` names `len` writable bytes: a range that passed the remote-write check against a
/// registration the caller holds across the call.
pub(crate) unsafe fn copy<G: Gather>(src: &G, dst: &Seg, len: usize) {
    let mut at = dst.addr;
    src.pieces(0, len.min(dst.len as usize), |p, n| {
        // SAFETY: `p` is readable for `n` bytes (`Gather`); `at..at + n` lies inside `dst`
        // (the pieces add up to at most `dst.len`), writable by the caller's contract; the
        // ranges cannot overlap (ring or stack bytes against registered memory).
        unsafe { std::ptr::copy_nonoverlapping(p, at as usize as *mut u8, n) };
        at += n as u64;
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pieces `walk` hands out for message bytes `off..off + len` of `segs`.
    fn pieces(segs: &[Seg], off: u64, len: usize) -> Vec<(u64, usize)> {
        let mut v = Vec::new();
        walk(segs, off, len, |a, n| v.push((a, n)));
        v
    }

    /// The same, byte by byte from first principles: message byte `i` lies in the segment
    /// whose lengths before it add up to at most `i`.
    fn model(segs: &[Seg], off: u64, len: usize) -> Vec<u64> {
        let mut addrs = Vec::new();
        let mut base = 0;
        for s in segs {
            for k in 0..u64::from(s.len) {
                if (off..off + len as u64).contains(&(base + k)) {
                    addrs.push(s.addr + k);
                }
            }
            base += u64::from(s.len);
        }
        addrs
    }

    fn bytes(p: &[(u64, usize)]) -> Vec<u64> {
        p.iter().flat_map(|&(a, n)| a..a + n as u64).collect()
    }

    #[test]
    fn one_segment_walks_as_several() {
        // The one-segment shortcut and the general loop (two and three segments, one empty)
        // against the byte model, at every offset and length around the ends.
        let lists = [
            vec![Seg::new(0x1000, 40, None)],
            vec![Seg::new(0x1000, 40, None), Seg::new(0x9000, 8, None)],
            vec![
                Seg::new(0x1000, 5, None),
                Seg::new(0x5000, 0, None),
                Seg::new(0x9000, 20, None),
            ],
        ];
        for segs in &lists {
            for off in 0..52 {
                for len in 0..52 {
                    let p = pieces(segs, off, len);
                    assert!(p.iter().all(|&(_, n)| n > 0), "{segs:?} {off} {len}: {p:?}");
                    assert_eq!(bytes(&p), model(segs, off, len), "{segs:?} {off} {len}");
                }
            }
        }
    }

    #[test]
    fn one_inline_sge_gathers_as_a_segment() {
        let data = [7u8; 40];
        let sge = [netdirect_spi::Sge {
            buffer: data.as_ptr().cast_mut(),
            buffer_length: 40,
            memory_region_token: 0,
        }];
        // SAFETY: `data` outlives the value and is only read.
        let src = unsafe { InlineSges::new(&sge) };
        let seg = [Seg::new(data.as_ptr() as usize as u64, 40, None)];
        for off in 0..44 {
            for len in 0..44 {
                let mut got = Vec::new();
                src.pieces(off, len, |p, n| got.push((p as usize as u64, n)));
                assert_eq!(got, pieces(&seg, off, len), "{off} {len}");
            }
        }
    }
}
