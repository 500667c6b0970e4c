//! Heap-backed ring memory for the loom models: loom atomics for the control words, one
//! loom `UnsafeCell` per inline area and per 64-byte data block, so loom flags any data race
//! between the producer's writes and the consumer's reads.

use super::{RingMem, CELL, INLINE_MAX};
use crate::sync::{AtomicU32, AtomicU64};
use loom::cell::UnsafeCell;

pub(crate) struct Mem {
    seq: Vec<AtomicU32>,
    meta: Vec<[AtomicU32; 3]>,
    inline: Vec<UnsafeCell<[u8; INLINE_MAX]>>,
    data: Vec<UnsafeCell<[u8; CELL]>>,
    tail: AtomicU64,
    data_tail: AtomicU64,
}

impl Mem {
    pub(crate) fn new(cells: u32, data: u64) -> Self {
        Self {
            seq: (0..cells).map(|_| AtomicU32::new(0)).collect(),
            meta: (0..cells)
                .map(|_| [AtomicU32::new(0), AtomicU32::new(0), AtomicU32::new(0)])
                .collect(),
            inline: (0..cells)
                .map(|_| UnsafeCell::new([0; INLINE_MAX]))
                .collect(),
            data: (0..data / CELL as u64)
                .map(|_| UnsafeCell::new([0; CELL]))
                .collect(),
            tail: AtomicU64::new(0),
            data_tail: AtomicU64::new(0),
        }
    }
}

impl RingMem for Mem {
    fn cells(&self) -> u32 {
        self.seq.len() as u32
    }
    fn data_len(&self) -> u64 {
        (self.data.len() * CELL) as u64
    }
    fn seq(&self, i: u32) -> &AtomicU32 {
        &self.seq[i as usize]
    }
    fn meta(&self, i: u32) -> [&AtomicU32; 3] {
        let m = &self.meta[i as usize];
        [&m[0], &m[1], &m[2]]
    }
    fn tail(&self) -> &AtomicU64 {
        &self.tail
    }
    fn data_tail(&self) -> &AtomicU64 {
        &self.data_tail
    }
    unsafe fn write_inline(&self, i: u32, off: usize, src: *const u8, len: usize) {
        self.inline[i as usize].with_mut(|p| {
            // SAFETY: caller contract (bounds, ownership of the cell).
            unsafe { std::ptr::copy_nonoverlapping(src, (p as *mut u8).add(off), len) }
        });
    }
    unsafe fn read_inline(&self, i: u32, off: usize, dst: *mut u8, len: usize) {
        self.inline[i as usize].with(|p| {
            // SAFETY: caller contract.
            unsafe { std::ptr::copy_nonoverlapping((p as *const u8).add(off), dst, len) }
        });
    }
    unsafe fn write_data(&self, at: u64, src: *const u8, len: usize) {
        let mut done = 0;
        while done < len {
            let pos = at as usize + done;
            let (b, o) = (pos / CELL, pos % CELL);
            let n = (CELL - o).min(len - done);
            self.data[b].with_mut(|p| {
                // SAFETY: caller contract.
                unsafe { std::ptr::copy_nonoverlapping(src.add(done), (p as *mut u8).add(o), n) }
            });
            done += n;
        }
    }
    unsafe fn read_data(&self, at: u64, dst: *mut u8, len: usize) {
        let mut done = 0;
        while done < len {
            let pos = at as usize + done;
            let (b, o) = (pos / CELL, pos % CELL);
            let n = (CELL - o).min(len - done);
            self.data[b].with(|p| {
                // SAFETY: caller contract.
                unsafe { std::ptr::copy_nonoverlapping((p as *const u8).add(o), dst.add(done), n) }
            });
            done += n;
        }
    }
}
