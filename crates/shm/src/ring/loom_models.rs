//! `RUSTFLAGS="--cfg loom" cargo test -p netdirect-shm --release loom`

use super::loom_mem::Mem;
use super::*;
use loom::sync::{Arc, Condvar, Mutex};

struct Bytes(Vec<u8>);
// SAFETY: pieces of an owned vector.
unsafe impl Gather for Bytes {
    fn pieces(&self, off: u64, len: usize, mut f: impl FnMut(*const u8, usize)) {
        let off = off as usize;
        // Two pieces, to exercise gathering.
        let mid = off + len / 2;
        f(self.0[off..mid].as_ptr(), mid - off);
        f(self.0[mid..off + len].as_ptr(), off + len - mid);
    }
}
struct Sink(Vec<u8>);
// SAFETY: pieces of an owned vector.
unsafe impl Scatter for Sink {
    fn pieces(&mut self, off: u64, len: usize, mut f: impl FnMut(*mut u8, usize)) {
        let off = off as usize;
        f(self.0[off..off + len].as_mut_ptr(), len);
    }
}

fn msg(k: u8, len: usize) -> Vec<u8> {
    (0..len)
        .map(|i| k.wrapping_mul(31).wrapping_add(i as u8))
        .collect()
}

/// Pop one whole message (inline or chunked); None if nothing is published yet.
fn pop(c: &mut Consumer, m: &Mem, cur: &mut Option<(Sink, u64, u32)>) -> Option<Vec<u8>> {
    loop {
        let r = c.peek(m).expect("well-formed")?;
        match r.kind {
            kind::MSG => {
                let mut s = Sink(vec![0; r.len as usize]);
                c.read_inline(m, r.len as usize, &mut s, 0);
                c.advance();
                c.release(m);
                return Some(s.0);
            }
            kind::CHUNK => {
                if r.flags & flag::FIRST != 0 {
                    *cur = Some((Sink(vec![0; r.total as usize]), 0, r.total));
                }
                let (sink, pos, total) = cur.as_mut().expect("FIRST came first");
                c.read_chunk(m, r.len as usize, sink, *pos);
                *pos += u64::from(r.len);
                c.advance();
                c.release(m);
                if r.flags & flag::LAST != 0 {
                    assert_eq!(*pos, u64::from(*total));
                    return Some(cur.take().expect("present").0 .0);
                }
            }
            _ => panic!("unexpected kind"),
        }
    }
}

/// Pop one whole message, spinning (yielding) until it is there.
fn pop_wait(c: &mut Consumer, m: &Mem, cur: &mut Option<(Sink, u64, u32)>) -> Vec<u8> {
    loop {
        if let Some(v) = pop(c, m, cur) {
            return v;
        }
        loom::thread::yield_now();
    }
}

/// Push a message, inline or as chunks of `chunk` bytes, spinning (yielding) for room.
fn push(p: &mut Producer, m: &Mem, data: &[u8], chunk: usize) {
    let src = Bytes(data.to_vec());
    if data.len() <= INLINE_MAX {
        while !p.has_room(m, 0).expect("sane tails") {
            loom::thread::yield_now();
        }
        p.push_inline(m, kind::MSG, 0, &src, 0, data.len());
        return;
    }
    let mut off = 0;
    while off < data.len() {
        let n = chunk.min(data.len() - off);
        while !p.has_room(m, n as u64).expect("sane tails") {
            loom::thread::yield_now();
        }
        let mut f = 0;
        if off == 0 {
            f |= flag::FIRST;
        }
        if off + n == data.len() {
            f |= flag::LAST;
        }
        p.push_chunk(m, f, data.len() as u32, &src, off as u64, n);
        off += n;
    }
}

/// Explore every interleaving with at most `PREEMPTIONS` forced preemptions (the usual
/// bound: it keeps the spin-and-yield loops finite while covering the races that matter).
const PREEMPTIONS: usize = 5;

fn model(f: impl Fn() + Sync + Send + 'static) {
    let mut b = loom::model::Builder::new();
    b.preemption_bound = Some(PREEMPTIONS);
    b.check(f);
}

/// Inline messages through a 2-cell ring: order, content, and no data race on the cells.
#[test]
fn loom_ring_inline() {
    model(|| {
        let m = Arc::new(Mem::new(2, 128));
        let m2 = m.clone();
        let t = loom::thread::spawn(move || {
            let mut p = Producer::default();
            for k in 0..3u8 {
                push(&mut p, &m2, &msg(k, 8), 64);
            }
        });
        let mut c = Consumer::default();
        let mut cur = None;
        for k in 0..3u8 {
            let got = pop_wait(&mut c, &m, &mut cur);
            assert_eq!(got, msg(k, 8));
        }
        t.join().unwrap();
    });
}

/// Records skipped unread (a lingering link's, `ShmQp::linger`) give back their data-area
/// bytes too: a producer that filled the data area with CHUNK and RTS records can fill it
/// again, and a message after them arrives intact (consumer and producer agree on where
/// its bytes are).
#[test]
fn loom_ring_skip_frees_data() {
    model(|| {
        let m = Arc::new(Mem::new(2, 128));
        let m2 = m.clone();
        let t = loom::thread::spawn(move || {
            let mut p = Producer::default();
            push(&mut p, &m2, &msg(1, 96), 64);
            while !p.has_room(&*m2, 32).expect("sane tails") {
                loom::thread::yield_now();
            }
            p.push_data(&*m2, kind::RTS, 0, 32, &Bytes(msg(2, 32)), 0, 32);
            push(&mut p, &m2, &msg(3, 120), 128);
        });
        let mut c = Consumer::default();
        // The two CHUNK records and the RTS record, skipped.
        let mut skipped = 0;
        while skipped < 3 {
            match c.peek(&*m).expect("well-formed") {
                Some(r) => {
                    c.skip(&r);
                    c.release(&*m);
                    skipped += 1;
                }
                None => loom::thread::yield_now(),
            }
        }
        let mut cur = None;
        let got = pop_wait(&mut c, &m, &mut cur);
        assert_eq!(got, msg(3, 120));
        t.join().unwrap();
    });
}

/// Chunked messages through a 128-byte data area: the second message's last chunk wraps
/// around its end, so it can only be written once the first message was consumed.
#[test]
fn loom_ring_chunks_wrap() {
    model(|| {
        let m = Arc::new(Mem::new(2, 128));
        let m2 = m.clone();
        let t = loom::thread::spawn(move || {
            let mut p = Producer::default();
            push(&mut p, &m2, &msg(1, 60), 64);
            push(&mut p, &m2, &msg(2, 100), 64);
        });
        let mut c = Consumer::default();
        let mut cur = None;
        for (k, len) in [(1u8, 60usize), (2, 100)] {
            let got = pop_wait(&mut c, &m, &mut cur);
            assert_eq!(got, msg(k, len));
        }
        t.join().unwrap();
    });
}

/// A doorbell: the stand-in for the socket message that wakes a sleeping process.
struct Bell {
    rung: Mutex<u32>,
    cv: Condvar,
}
impl Bell {
    fn new() -> Self {
        Self {
            rung: Mutex::new(0),
            cv: Condvar::new(),
        }
    }
    fn ring(&self) {
        *self.rung.lock().unwrap() += 1;
        self.cv.notify_one();
    }
    /// Sleep until rung (consumes one ring).
    fn sleep(&self) {
        let mut g = self.rung.lock().unwrap();
        while *g == 0 {
            g = self.cv.wait(g).unwrap();
        }
        *g -= 1;
    }
}

struct Side {
    waiting: AtomicU32,
    bell: Bell,
}

/// Both sides block instead of spinning: the consumer sleeps on an empty ring, the producer
/// on a full one (1 cell, 2 messages). A lost wake-up leaves a thread asleep forever, which
/// loom reports as a deadlock.
#[test]
fn loom_wake_handshake() {
    model(|| {
        let m = Arc::new(Mem::new(1, 64));
        let prod = Arc::new(Side {
            waiting: AtomicU32::new(0),
            bell: Bell::new(),
        });
        let cons = Arc::new(Side {
            waiting: AtomicU32::new(0),
            bell: Bell::new(),
        });
        let (m2, prod2, cons2) = (m.clone(), prod.clone(), cons.clone());
        let t = loom::thread::spawn(move || {
            let mut p = Producer::default();
            for k in 0..2u8 {
                let src = Bytes(msg(k, 4));
                loop {
                    if p.has_room(&*m2, 0).unwrap() {
                        break;
                    }
                    wake::want_space(&prod2.waiting, true);
                    wake::arm(&prod2.waiting);
                    if p.has_room(&*m2, 0).unwrap() {
                        wake::disarm(&prod2.waiting);
                        break;
                    }
                    prod2.bell.sleep();
                    wake::disarm(&prod2.waiting);
                }
                wake::want_space(&prod2.waiting, false);
                p.push_inline(&*m2, kind::MSG, 0, &src, 0, 4);
                if wake::peer_sleeps(&cons2.waiting) {
                    cons2.bell.ring();
                }
            }
        });
        let mut c = Consumer::default();
        let mut cur = None;
        for k in 0..2u8 {
            let got = loop {
                if let Some(v) = pop(&mut c, &m, &mut cur) {
                    // Space was freed: the producer may be asleep on a full ring.
                    if wake::peer_wants_space(&prod.waiting) {
                        prod.bell.ring();
                    }
                    break v;
                }
                wake::arm(&cons.waiting);
                if Consumer::ready_at(&*m, c.pos()) {
                    wake::disarm(&cons.waiting);
                    continue;
                }
                cons.bell.sleep();
                wake::disarm(&cons.waiting);
            };
            assert_eq!(got, msg(k, 4));
        }
        t.join().unwrap();
    });
}

/// The space flag when two threads of one side share the word: a poster finds the ring
/// full and raises WANTS_SPACE while the side's sleeper is (or is about to be) asleep
/// with ASLEEP only; the consumer frees the space concurrently. The poster, after raising
/// the flag, re-checks for room and, if there is some, wakes its own sleeper (as
/// `Link::set_tx_blocked` does through the engine); the sleeper's `arm` re-check counts
/// blocked output with room as work. Whoever sees the room pushes the blocked message
/// (under the side's lock, as the queue pair's). A lost wake-up leaves the sleeper asleep
/// forever: a deadlock for loom.
#[test]
fn loom_wake_space_two_threads() {
    struct Prod {
        p: Mutex<(Producer, bool)>,
        blocked: AtomicU32,
        side: Side,
    }
    model(|| {
        let m = Arc::new(Mem::new(1, 64));
        let prod = Arc::new(Prod {
            p: Mutex::new((Producer::default(), false)),
            blocked: AtomicU32::new(0),
            side: Side {
                waiting: AtomicU32::new(0),
                bell: Bell::new(),
            },
        });
        // Message 0 fills the ring.
        {
            let mut g = prod.p.lock().unwrap();
            assert!(g.0.has_room(&*m, 0).unwrap());
            g.0.push_inline(&*m, kind::MSG, 0, &Bytes(msg(0, 4)), 0, 4);
        }
        // Push the blocked message 1 if there is room (the queue pair's progress).
        let try_push = |m: &Mem, pr: &Prod| -> bool {
            let mut g = pr.p.lock().unwrap();
            if g.1 {
                return true;
            }
            if !g.0.has_room(m, 0).unwrap() {
                return false;
            }
            g.0.push_inline(m, kind::MSG, 0, &Bytes(msg(1, 4)), 0, 4);
            g.1 = true;
            pr.blocked.store(0, Ordering::Release);
            wake::want_space(&pr.side.waiting, false);
            true
        };
        // The poster: message 1 finds no room, unless the consumer was quick.
        let (m2, prod2) = (m.clone(), prod.clone());
        let poster = loom::thread::spawn(move || {
            if try_push(&m2, &prod2) {
                prod2.side.bell.ring(); // a completion on another thread wakes the sleeper
                return;
            }
            prod2.blocked.store(1, Ordering::Release);
            wake::want_space(&prod2.side.waiting, true);
            if prod2.p.lock().unwrap().0.has_room(&*m2, 0).unwrap() {
                prod2.side.bell.ring();
            }
        });
        // The sleeper: waits until message 1 is in the ring.
        let (m3, prod3) = (m.clone(), prod.clone());
        let sleeper = loom::thread::spawn(move || loop {
            if prod3.p.lock().unwrap().1 {
                return;
            }
            wake::arm(&prod3.side.waiting);
            let work = prod3.blocked.load(Ordering::Acquire) != 0
                && prod3.p.lock().unwrap().0.has_room(&*m3, 0).unwrap();
            if work {
                wake::disarm(&prod3.side.waiting);
                try_push(&m3, &prod3);
                continue;
            }
            prod3.side.bell.sleep();
            wake::disarm(&prod3.side.waiting);
        });
        // The consumer takes message 0, which frees the one cell.
        let mut c = Consumer::default();
        let mut cur = None;
        let got = pop_wait(&mut c, &m, &mut cur);
        assert_eq!(got, msg(0, 4));
        if wake::peer_wants_space(&prod.side.waiting) {
            prod.side.bell.ring();
        }
        poster.join().unwrap();
        sleeper.join().unwrap();
    });
}

/// A granted copy against the target's close (`grant`): the initiator's copy into the
/// target's memory and the target's reuse of that memory after its close never overlap
/// (loom flags any concurrent access to the cell), and the target never waits forever.
#[test]
fn loom_grant_close() {
    struct Shared {
        copying: AtomicU32,
        closed: AtomicU32,
        memory: loom::cell::UnsafeCell<u32>,
    }
    // SAFETY: `memory` is accessed only as the handshake allows, which loom checks.
    unsafe impl Sync for Shared {}
    model(|| {
        let s = Arc::new(Shared {
            copying: AtomicU32::new(0),
            closed: AtomicU32::new(0),
            memory: loom::cell::UnsafeCell::new(0),
        });
        let s2 = s.clone();
        let initiator = loom::thread::spawn(move || {
            if grant::start_copy(&s2.copying, &s2.closed) {
                // SAFETY: the handshake under test.
                s2.memory.with_mut(|p| unsafe { *p = 7 });
            }
            grant::copied(&s2.copying);
        });
        s.closed.store(1, Ordering::Release);
        while grant::peer_copying(&s.copying) {
            loom::thread::yield_now();
        }
        // The target reuses its memory.
        // SAFETY: the handshake under test.
        s.memory.with_mut(|p| unsafe { *p = 1 });
        initiator.join().unwrap();
    });
}

/// A Write placed under a lease against the target's revocation (`grant::revoke`, as a
/// Deregister's copy barrier or the end of the connection does): once the target's wait is
/// over, no placement can touch its memory (loom flags any concurrent access to the cell).
#[test]
fn loom_lease_revoke() {
    struct Shared {
        copying: AtomicU32,
        closed: AtomicU32,
        epoch: AtomicU64,
        memory: loom::cell::UnsafeCell<u32>,
    }
    // SAFETY: `memory` is accessed only as the handshake allows, which loom checks.
    unsafe impl Sync for Shared {}
    model(|| {
        let s = Arc::new(Shared {
            copying: AtomicU32::new(0),
            closed: AtomicU32::new(0),
            epoch: AtomicU64::new(0),
            memory: loom::cell::UnsafeCell::new(0),
        });
        let s2 = s.clone();
        let initiator = loom::thread::spawn(move || {
            // Two placements under the lease of epoch 0.
            for v in [7, 8] {
                if grant::start_place(&s2.copying, &s2.closed, &s2.epoch, 0) {
                    // SAFETY: the handshake under test.
                    s2.memory.with_mut(|p| unsafe { *p = v });
                }
                grant::copied(&s2.copying);
            }
        });
        grant::revoke(&s.epoch);
        while grant::peer_copying(&s.copying) {
            loom::thread::yield_now();
        }
        // The target reuses its memory (a Deregister returned).
        // SAFETY: the handshake under test.
        s.memory.with_mut(|p| unsafe { *p = 1 });
        initiator.join().unwrap();
    });
}
