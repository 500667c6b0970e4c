//! The two lines `nd shm-pingpong` bounces messages through: a file under `/dev/shm`, mapped
//! shared by both processes. The tool's only `unsafe` is here: the mapping, and the atomics
//! placed in it.
//!
//! Each line is written by one process and read by the other, through atomics only: payload
//! words with relaxed stores, then the sequence word with a release store; the reader's
//! acquire load of the sequence word makes the payload visible.

use std::fs::{File, OpenOptions};
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU64, Ordering};

use rustix::mm::{MapFlags, ProtFlags};

/// Words per line (64 bytes); the last is the sequence word.
pub(crate) const WORDS: usize = 8;
/// The two lines lie 128 bytes apart: the adjacent-line prefetcher fetches 64-byte lines in
/// pairs, and each line must travel alone (one process writes it, the other reads it).
const STRIDE: usize = 128;
/// The mapping: one page.
const LEN: usize = 4096;

/// The mapped line pair.
#[derive(Debug)]
pub(crate) struct Lines {
    base: NonNull<u8>,
}

impl Lines {
    /// Create the file (it must not exist; only this user may open it) and map it.
    pub(crate) fn create(path: &Path) -> Result<Self, String> {
        let io = |e: std::io::Error| format!("create {}: {e}", path.display());
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(path)
            .map_err(io)?;
        f.set_len(LEN as u64).map_err(io)?;
        Self::map(&f).map_err(|e| format!("map {}: {e}", path.display()))
    }

    /// Map the file the server created.
    pub(crate) fn open(path: &Path) -> Result<Self, String> {
        let io = |e: std::io::Error| format!("open {}: {e}", path.display());
        let f = OpenOptions::new()
            .read(true)
            .write(true)
            .open(path)
            .map_err(io)?;
        // A shorter file would turn accesses past its end into SIGBUS.
        if f.metadata().map_err(io)?.len() < LEN as u64 {
            return Err(format!("{} is shorter than {LEN} bytes", path.display()));
        }
        Self::map(&f).map_err(|e| format!("map {}: {e}", path.display()))
    }

    fn map(f: &File) -> Result<Self, rustix::io::Errno> {
        // SAFETY: a new shared mapping chosen by the kernel (no existing memory is replaced) of
        // LEN bytes of a file at least that long; it is unmapped only by `Drop`.
        let p = unsafe {
            rustix::mm::mmap(
                std::ptr::null_mut(),
                LEN,
                ProtFlags::READ | ProtFlags::WRITE,
                MapFlags::SHARED,
                f,
                0,
            )
        }?;
        let base = NonNull::new(p.cast::<u8>()).ok_or(rustix::io::Errno::NOMEM)?;
        Ok(Self { base })
    }

    /// Word `w` of line `line`.
    fn word(&self, line: usize, w: usize) -> &AtomicU64 {
        assert!(line < 2 && w < WORDS, "line {line}, word {w}");
        // SAFETY: the offset is inside the mapping (at most STRIDE + 56 < LEN) and 8-byte
        // aligned (the mapping is page-aligned); both processes access this memory through
        // atomics only, as `AtomicU64::from_ptr` requires, and the mapping outlives `&self`.
        unsafe { AtomicU64::from_ptr(self.base.as_ptr().add(line * STRIDE + w * 8).cast()) }
    }

    /// The sequence word of line `line` (acquire: the payload written before it is visible).
    pub(crate) fn seq(&self, line: usize) -> u64 {
        self.word(line, WORDS - 1).load(Ordering::Acquire)
    }

    /// Read the first `out.len()` payload words of line `line`.
    pub(crate) fn read(&self, line: usize, out: &mut [u64]) {
        for (w, o) in out.iter_mut().enumerate() {
            *o = self.word(line, w).load(Ordering::Relaxed);
        }
    }

    /// Write `payload` into line `line`, then its sequence number (release).
    pub(crate) fn publish(&self, line: usize, seq: u64, payload: &[u64]) {
        for (w, &v) in payload.iter().enumerate() {
            self.word(line, w).store(v, Ordering::Relaxed);
        }
        self.word(line, WORDS - 1).store(seq, Ordering::Release);
    }
}

impl Drop for Lines {
    fn drop(&mut self) {
        // SAFETY: the mapping made in `map`, unmapped once; no reference into it outlives
        // `self` (`word` borrows it).
        let _ = unsafe { rustix::mm::munmap(self.base.as_ptr().cast(), LEN) };
    }
}
