//! RDMA Write and Read of the `shm` provider through both data paths (one cell, the data area,
//! and the target's pull with `process_vm_readv`), and Deregister after use; both ends in one
//! process and one thread, which drives both completion queues (the target places a Write
//! when it drives its queue pair). The shared conformance suite checks the ND rules
//! (statuses, protection, windows, fences) across processes for both providers.

#![cfg(not(loom))]

mod common;

use std::time::{Duration, Instant};

use common::{drive, message, pair, pair_of_depth, sweep, End, DEADLINE};
use netdirect::{NdResult, OpFlags, RequestType, Status};

/// Heap memory registered raw (not shared-mappable), owned with its region: the region is
/// dropped first (field order), so the memory outlives it.
struct HeapRegion {
    mr: netdirect::MemoryRegion,
    mem: Box<[u8]>,
}

impl HeapRegion {
    fn new(e: &End, bytes: Vec<u8>, flags: netdirect::MrFlags) -> Self {
        let mut mem = bytes.into_boxed_slice();
        let mr = e.adapter.create_memory_region().expect("mr");
        // SAFETY: `mem` is owned by the value the region goes into and dropped after it; the
        // tests read it (`bytes`) only when no request uses it.
        unsafe { mr.register(mem.as_mut_ptr(), mem.len(), flags) }
            .expect("register")
            .wait()
            .expect("register");
        Self { mr, mem }
    }

    fn token(&self) -> u32 {
        self.mr.get_remote_token()
    }

    fn addr(&self) -> u64 {
        self.mem.as_ptr() as u64
    }

    /// The bytes, once no request writes them.
    fn bytes(&self) -> &[u8] {
        &self.mem
    }
}

/// With the default configuration: Writes and Reads below 64 KiB go through the ring (inline
/// or the data area), larger ones into this `Buffer` through the mapping the target grants
/// (`write_paths.rs` forces the data area and the pull for every size).
#[test]
fn writes_and_reads_of_every_size_by_default() {
    let (c, s) = pair(2 << 20);
    sweep(&c, &s, "default");
}

/// A region a queue pair used is not kept registered by the queue pair: its Deregister
/// completes while the queue pair lives on, idle.
#[test]
fn deregister_completes_after_the_region_was_used() {
    let (c, s) = pair(64 << 10);
    s.recv(1, 0, 64);
    c.send(1, 0, 64).expect("send");
    assert_eq!(c.poll().status, Status::SUCCESS, "Send");
    assert_eq!(s.poll().status, Status::SUCCESS, "Receive");
    let ov = c.mr.deregister().expect("deregister");
    ov.wait_timeout(Some(Duration::from_secs(10)))
        .expect("Deregister completes (nothing holds the region)")
        .expect("Deregister");
}

/// Writes and Reads posted back to back (pipelined) complete in order with the right bytes:
/// each Read sees every Write posted before it.
#[test]
fn pipelined_writes_and_reads_complete_in_order() {
    let (c, s) = pair(4 << 20);
    let token = s.mr.get_remote_token();
    let base = s.buf.as_ptr() as u64;
    let sizes = [8usize, 40 << 10, 1 << 20, 33];
    let mut want = Vec::new();
    for (k, &len) in sizes.iter().enumerate() {
        let data = message(k as u64 + 1, len);
        let src = k * (1 << 20) / 2;
        c.fill(src, &data);
        let sge = c.buf.sge(src..src + len, c.token());
        let at = 8192 * (k + 1);
        // SAFETY: the source is left alone until the Write completes.
        unsafe {
            c.qp.write(k as u64, &[sge], base + at as u64, token, OpFlags::empty())
        }
        .expect("Write");
        let back = (3 << 20) + k * 4096;
        let n = len.min(4096);
        let sge = c.buf.sge(back..back + n, c.token());
        // SAFETY: the sink is read only after the Read completes.
        unsafe {
            c.qp.read(
                100 + k as u64,
                &[sge],
                base + at as u64,
                token,
                OpFlags::empty(),
            )
        }
        .expect("Read");
        want.push((k as u64, RequestType::Write, len));
        want.push((100 + k as u64, RequestType::Read, n));
    }
    for (ctx, ty, len) in want {
        let r = drive(&c, &s);
        assert_eq!(
            (
                r.status,
                r.request_type,
                r.request_context,
                r.bytes_transferred
            ),
            (Status::SUCCESS, ty, ctx, len as u32)
        );
        if ty == RequestType::Read {
            let k = (ctx - 100) as usize;
            let back = (3 << 20) + k * 4096;
            assert_eq!(c.read(back, len), message(k as u64 + 1, sizes[k])[..len]);
        }
    }
}

/// Both ends asleep in their waits (CQ Notify) between records: the target's wait drives the
/// Writes it places and the Read responses it sends, the initiator's wait wakes for each
/// answer, including a response that fills the ring and continues as it drains.
#[test]
fn sleeping_ends_drive_writes_and_reads() {
    let (c, s) = pair(4 << 20);
    let token = s.mr.get_remote_token();
    let base = s.buf.as_ptr() as u64;
    s.recv(9, 3 << 20, 64);
    std::thread::scope(|t| {
        t.spawn(|| {
            let r = s.wait();
            assert_eq!((r.status, r.request_context), (Status::SUCCESS, 9));
        });
        for (k, len) in [0usize, 1, 4096, 1 << 20, 1 << 20, 1 << 20]
            .into_iter()
            .enumerate()
        {
            let k = k as u64;
            let w = [c.buf.sge(0..len, c.token())];
            // SAFETY: the source is left alone until the Write completes.
            unsafe { c.qp.write(10 + k, &w, base, token, OpFlags::empty()) }.expect("Write");
            let rb = [c.buf.sge((2 << 20)..(2 << 20) + len, c.token())];
            // SAFETY: the sink is read only after the Read completes.
            unsafe { c.qp.read(20 + k, &rb, base, token, OpFlags::empty()) }.expect("Read");
            let r = c.wait();
            assert_eq!(
                (r.status, r.request_context),
                (Status::SUCCESS, 10 + k),
                "{len}"
            );
            let r = c.wait();
            assert_eq!(
                (r.status, r.request_context),
                (Status::SUCCESS, 20 + k),
                "{len}"
            );
        }
        c.send(1, 0, 8).unwrap();
    });
}

/// Writes gathered from two SGEs and Reads scattered into two, back to back.
#[test]
fn multi_sge_writes_and_reads() {
    let (c, s) = pair(4 << 20);
    let token = s.mr.get_remote_token();
    let base = s.buf.as_ptr() as u64;
    for len in [4096usize, 1 << 20] {
        let data = message(7, len);
        c.fill(0, &data[..len / 2]);
        c.fill(len / 2 + 100, &data[len / 2..]);
        let w = [
            c.buf.sge(0..len / 2, c.token()),
            c.buf.sge(len / 2 + 100..len + 100, c.token()),
        ];
        // SAFETY: the sources are left alone until the Write completes.
        unsafe { c.qp.write(1, &w, base, token, OpFlags::empty()) }.expect("Write");
        let rb = [
            c.buf.sge((2 << 20)..(2 << 20) + 3, c.token()),
            c.buf.sge((2 << 20) + 10..(2 << 20) + 7 + len, c.token()),
        ];
        // SAFETY: the sinks are read only after the Read completes.
        unsafe { c.qp.read(2, &rb, base, token, OpFlags::empty()) }.expect("Read");
        let r = drive(&c, &s);
        assert_eq!((r.status, r.request_context), (Status::SUCCESS, 1), "{len}");
        let r = drive(&c, &s);
        assert_eq!((r.status, r.request_context), (Status::SUCCESS, 2), "{len}");
        assert_eq!(s.read(0, len), data, "{len}: gathered Write");
        let mut got = c.read(2 << 20, 3);
        got.extend(c.read((2 << 20) + 10, len - 3));
        assert_eq!(got, data, "{len}: scattered Read");
    }
}

/// How many times this process maps the memory behind `addr` (by the file's inode in
/// `/proc/self/maps`; 0 for memory that is not a mapped file, such as the heap's).
fn mappings_of(addr: *const u8) -> usize {
    inode_at(addr).map_or(0, |ino| mappings_of_inode(&ino))
}

/// The inode of the file mapped at `addr`, if a file is.
fn inode_at(addr: *const u8) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    let a = addr as u64;
    let mine = maps.lines().find(|l| {
        let (lo, hi) = l
            .split_once(' ')
            .expect("range")
            .0
            .split_once('-')
            .expect("range");
        let (lo, hi) = (u64::from_str_radix(lo, 16), u64::from_str_radix(hi, 16));
        lo.is_ok_and(|lo| lo <= a) && hi.is_ok_and(|hi| a < hi)
    })?;
    Some(inode(mine)).filter(|i| i != "0")
}

fn inode(maps_line: &str) -> String {
    maps_line
        .split_whitespace()
        .nth(4)
        .unwrap_or("0")
        .to_owned()
}

/// How many mappings of the file with inode `ino` this process has.
fn mappings_of_inode(ino: &str) -> usize {
    let maps = std::fs::read_to_string("/proc/self/maps").expect("maps");
    maps.lines().filter(|l| inode(l) == ino).count()
}

/// A large Write into shared memory (a `Buffer`) is copied once, by the initiator, through a
/// mapping of the target's memory: the initiator maps the target's memfd (one more mapping of
/// a buffer memfd in this process, and only one however many Writes follow), and every byte
/// lands. A Write out of bounds is refused as any other. Into heap memory, which cannot be
/// shared, the same Write is placed the ordinary way.
#[test]
fn large_writes_into_shared_memory_go_through_one_mapping() {
    let (c, s) = pair(4 << 20);
    let token = s.mr.get_remote_token();
    assert_eq!(
        mappings_of(s.buf.as_ptr()),
        1,
        "the target's buffer, mapped by itself"
    );
    for (k, len) in [(1u64, 64usize << 10), (2, 1 << 20), (3, (3 << 20) + 5)] {
        let data = message(k, len);
        c.fill(0, &data);
        let at = 7 * k as usize; // unaligned
        let sge = c.buf.sge(0..len, c.token());
        let addr = s.buf.as_ptr() as u64 + at as u64;
        // SAFETY: the source is left alone until the Write completes.
        unsafe { c.qp.write(k, &[sge], addr, token, OpFlags::empty()) }.expect("post Write");
        let r = drive(&c, &s);
        assert_eq!(
            (r.status, r.request_context),
            (Status::SUCCESS, k),
            "Write {len}"
        );
        assert_eq!(s.read(at, len), data, "Write of {len} placed");
        assert_eq!(
            mappings_of(s.buf.as_ptr()),
            2,
            "mapped once more, by the initiator"
        );
    }
    // A Write past the end of the region is refused before anything is mapped or copied.
    let sge = c.buf.sge(0..(64 << 10), c.token());
    let addr = s.buf.as_ptr() as u64 + (4 << 20) - 100;
    // SAFETY: as above.
    unsafe { c.qp.write(9, &[sge], addr, token, OpFlags::empty()) }.expect("post Write");
    let r = drive(&c, &s);
    assert_eq!(r.status, Status::ACCESS_VIOLATION, "Write past the region");

    // Heap memory registered raw: the target cannot grant a mapping; the Write still lands.
    let (c, s) = pair(1 << 20);
    let heap = HeapRegion::new(&s, vec![0; 1 << 20], netdirect::MrFlags::ALLOW_REMOTE_WRITE);
    // The second Write to the same region does not ask again (the refusal is remembered).
    for k in [5u64, 6] {
        let data = message(k, 256 << 10);
        c.fill(0, &data);
        let sge = c.buf.sge(0..data.len(), c.token());
        let at = k as usize;
        let addr = heap.addr() + k;
        // SAFETY: as above.
        unsafe { c.qp.write(k, &[sge], addr, heap.token(), OpFlags::empty()) }.expect("post Write");
        let r = drive(&c, &s);
        assert_eq!(r.status, Status::SUCCESS, "Write {k} into heap memory");
        assert_eq!(
            &heap.bytes()[at..at + data.len()],
            &data[..],
            "Write {k} placed"
        );
    }
}

/// A large Read from shared memory is copied once, by the initiator, out of a mapping of the
/// target's memory (one more mapping of the target's memfd in this process, however many
/// Reads follow), and returns every byte. It sees a mapped Write posted just before it (the
/// Read's MAPR waits for the Write's DONE). A Read past the end is refused as any other; from
/// heap memory the same Read is served the ordinary way.
#[test]
fn large_reads_from_shared_memory_go_through_one_mapping() {
    let (c, s) = pair(8 << 20);
    let token = s.mr.get_remote_token();
    let base = s.buf.as_ptr() as u64;
    assert_eq!(mappings_of(s.buf.as_ptr()), 1, "the target's buffer");
    for (k, len) in [(1u64, 64usize << 10), (2, 1 << 20), (3, (3 << 20) + 5)] {
        let data = message(k, len);
        let at = 5 * k as usize; // unaligned
        s.fill(at, &data);
        let sge = c.buf.sge(3..3 + len, c.token());
        // SAFETY: the sink is read only after the Read completes.
        unsafe {
            c.qp.read(k, &[sge], base + at as u64, token, OpFlags::empty())
        }
        .expect("post Read");
        let r = drive(&c, &s);
        assert_eq!(
            (
                r.status,
                r.request_context,
                r.request_type,
                r.bytes_transferred
            ),
            (Status::SUCCESS, k, RequestType::Read, len as u32),
            "Read {len}"
        );
        assert_eq!(c.read(3, len), data, "Read of {len}");
        assert_eq!(
            mappings_of(s.buf.as_ptr()),
            2,
            "mapped once, by the initiator"
        );
    }
    // A mapped Write and a mapped Read of the same bytes, posted back to back.
    let len = 1 << 20;
    let data = message(4, len);
    c.fill(0, &data);
    let w = c.buf.sge(0..len, c.token());
    let rd = c.buf.sge((4 << 20)..(4 << 20) + len, c.token());
    // SAFETY: the source is left alone, and the sink read, only after both completed.
    unsafe {
        c.qp.write(4, &[w], base + 11, token, OpFlags::empty())
            .expect("post Write");
        c.qp.read(5, &[rd], base + 11, token, OpFlags::empty())
            .expect("post Read");
    }
    for k in [4u64, 5] {
        let r = drive(&c, &s);
        assert_eq!((r.status, r.request_context), (Status::SUCCESS, k));
    }
    assert_eq!(
        c.read(4 << 20, len),
        data,
        "the Read sees the Write before it"
    );
    // A Read past the end of the region is refused before anything is copied.
    let sge = c.buf.sge(0..(64 << 10), c.token());
    // SAFETY: as above.
    unsafe {
        c.qp.read(9, &[sge], base + (8 << 20) - 100, token, OpFlags::empty())
    }
    .expect("post Read");
    let r = drive(&c, &s);
    assert_eq!(r.status, Status::ACCESS_VIOLATION, "Read past the region");

    // Heap memory registered raw: no mapping can be granted; the Reads are still served, and
    // the second one does not ask again.
    let (c, s) = pair(1 << 20);
    let heap = HeapRegion::new(
        &s,
        message(6, 512 << 10),
        netdirect::MrFlags::ALLOW_REMOTE_READ,
    );
    for k in [6u64, 7] {
        let len = 256 << 10;
        let sge = c.buf.sge(0..len, c.token());
        let addr = heap.addr() + k;
        // SAFETY: as above.
        unsafe { c.qp.read(k, &[sge], addr, heap.token(), OpFlags::empty()) }.expect("post Read");
        let r = drive(&c, &s);
        assert_eq!(r.status, Status::SUCCESS, "Read {k} from heap memory");
        assert_eq!(
            c.read(0, len),
            &heap.bytes()[k as usize..k as usize + len],
            "Read {k}"
        );
    }
}

/// Answers owed to the peer's requests (here two Read responses, one inline, one in chunks)
/// while our own message is half in the ring (a 3 MiB Send, more than the 512 KiB data area)
/// go in between its chunks without breaking it: every request completes, byte-exact.
#[test]
fn answers_interleave_with_a_message_half_in_the_ring() {
    let (c, s) = pair(8 << 20);
    let len = 3 << 20;
    c.recv(1, 0, len);
    let data = message(1, len);
    s.fill(0, &data);
    let small = message(3, 4096);
    s.fill(4 << 20, &small);
    s.send(2, 0, len).expect("Send");
    let (token, at) = (s.mr.get_remote_token(), s.buf.as_ptr() as u64 + (4 << 20));
    for (ctx, n) in [(3u64, 8usize), (4, 4096)] {
        let sge = c.buf.sge(
            (4 << 20) + ctx as usize * 8192..(4 << 20) + ctx as usize * 8192 + n,
            c.token(),
        );
        // SAFETY: the sink is read only after the Read completes.
        unsafe { c.qp.read(ctx, &[sge], at, token, OpFlags::empty()) }.expect("Read");
    }
    let mut got = Vec::new();
    let end = Instant::now() + DEADLINE;
    let mut r = [NdResult::EMPTY];
    while got.len() < 4 {
        for e in [&c, &s] {
            if e.cq.get_results(&mut r) == 1 {
                got.push((r[0].request_context, r[0].status, r[0].bytes_transferred));
            }
        }
        assert!(Instant::now() < end, "completions so far: {got:?}");
    }
    got.sort_unstable();
    assert_eq!(
        got,
        [
            (1, Status::SUCCESS, len as u32),
            (2, Status::SUCCESS, len as u32),
            (3, Status::SUCCESS, 8),
            (4, Status::SUCCESS, 4096)
        ]
    );
    assert_eq!(c.read(0, len), data, "the message");
    for (ctx, n) in [(3usize, 8usize), (4, 4096)] {
        assert_eq!(c.read((4 << 20) + ctx * 8192, n), &small[..n], "Read {ctx}");
    }
}

/// A target that closes after granting a mapped Write, before the initiator got to the grant:
/// the initiator copies nothing (the grant ended with the connection, and the target may be
/// reusing its memory), and the Write is flushed.
#[test]
fn a_grant_ends_with_the_connection() {
    let (c, s) = pair(2 << 20);
    let len = 1 << 20;
    c.fill(0, &message(8, len));
    let sge = c.buf.sge(0..len, c.token());
    let addr = s.buf.as_ptr() as u64;
    // SAFETY: the source is left alone until the Write completes.
    unsafe {
        c.qp.write(1, &[sge], addr, s.mr.get_remote_token(), OpFlags::empty())
    }
    .expect("post Write");
    // The target serves the MAPW (grants) when it drives its queue pair, then disconnects.
    let mut r = [NdResult::EMPTY];
    assert_eq!(s.cq.get_results(&mut r), 0);
    s.disconnect();
    let r = c.poll();
    assert_eq!((r.request_context, r.status), (1, Status::CANCELED));
    assert!(
        s.read(0, len).iter().all(|&b| b == 0),
        "nothing copied after the close"
    );
}

/// A large Write through a memory window is never granted as a mapping (an Invalidate must be
/// able to fail it midway, IND2QueuePair::Invalidate); it lands the ordinary way.
#[test]
fn large_writes_through_a_window_are_not_mapped() {
    let (c, s) = pair(2 << 20);
    let mw = s.adapter.create_memory_window().expect("window");
    let len = 256 << 10;
    s.qp.bind(7, &s.mr, &mw, s.buf.as_ptr(), 1 << 20, OpFlags::ALLOW_WRITE)
        .expect("bind");
    let r = s.poll();
    assert_eq!((r.request_context, r.status), (7, Status::SUCCESS), "bind");
    let data = message(9, len);
    c.fill(0, &data);
    let sge = c.buf.sge(0..len, c.token());
    let addr = s.buf.as_ptr() as u64 + 3;
    // SAFETY: the source is left alone until the Write completes.
    unsafe {
        c.qp.write(1, &[sge], addr, mw.get_remote_token(), OpFlags::empty())
    }
    .expect("post Write");
    let r = drive(&c, &s);
    assert_eq!((r.request_context, r.status), (1, Status::SUCCESS));
    assert_eq!(s.read(3, len), data, "placed");
    assert_eq!(
        mappings_of(s.buf.as_ptr()),
        1,
        "not mapped by the initiator"
    );
}

/// A small Send, or an INLINE Write, posted while a Read response is half in the ring (1 MiB
/// from heap memory, more than the data area holds) waits for it: put in at once, it would
/// split the response's chunks and end the connection.
#[test]
fn a_small_send_or_write_waits_for_a_read_response_half_in_the_ring() {
    for write in [false, true] {
        small_request_behind_a_read_response(write);
    }
}

fn small_request_behind_a_read_response(write: bool) {
    let (c, s) = pair(2 << 20);
    let len = 1 << 20;
    let heap = HeapRegion::new(&s, message(5, len), netdirect::MrFlags::ALLOW_REMOTE_READ);
    c.recv(2, len + 4096, 64);
    let sge = c.buf.sge(0..len, c.token());
    // SAFETY: the sink is read only after the Read completes.
    unsafe {
        c.qp.read(1, &[sge], heap.addr(), heap.token(), OpFlags::empty())
    }
    .expect("post Read");
    // The Read asks for a mapping (MAPR), is refused (heap memory), goes as READ, and the
    // target pushes as much of the response as the ring takes.
    let mut r = [NdResult::EMPTY];
    for e in [&s, &c, &s] {
        assert_eq!(e.cq.get_results(&mut r), 0, "{r:?}");
    }
    s.fill(0, &message(6, 8));
    let sge = s.buf.sge(0..8, s.token());
    // INLINE: straight into the ring within the post when nothing waits.
    let dst = c.buf.as_ptr() as u64 + len as u64 + 4096;
    // SAFETY: INLINE: the bytes are taken within the call.
    unsafe {
        if write {
            s.qp.write(3, &[sge], dst, c.mr.get_remote_token(), OpFlags::INLINE)
        } else {
            s.qp.send(3, &[sge], OpFlags::INLINE)
        }
    }
    .expect("post");
    let want = if write { 2 } else { 3 };
    let mut got = Vec::new();
    let end = Instant::now() + DEADLINE;
    while got.len() < want {
        for e in [&c, &s] {
            if e.cq.get_results(&mut r) == 1 {
                got.push((r[0].request_context, r[0].status));
            }
        }
        assert!(
            Instant::now() < end,
            "write {write}: completions so far: {got:?}"
        );
    }
    got.sort_unstable();
    let mut expect = vec![(1, Status::SUCCESS), (3, Status::SUCCESS)];
    if !write {
        expect.insert(1, (2, Status::SUCCESS));
    }
    assert_eq!(got, expect, "write {write}");
    assert_eq!(c.read(0, len), heap.bytes(), "the Read");
    assert_eq!(
        c.read(len + 4096, 8),
        message(6, 8),
        "write {write}: placed"
    );
}

/// Posting the Receive a held message waited for also sends what the records behind it owe
/// (here the ACK of a Write): no poll of the receiver would find it.
#[test]
fn a_late_receive_sends_the_answers_it_frees() {
    let (c, s) = pair(1 << 20);
    c.fill(0, &message(7, 64));
    c.send(1, 0, 8).expect("post Send");
    let sge = c.buf.sge(0..16, c.token());
    let addr = s.buf.as_ptr() as u64 + 4096;
    // SAFETY: the source is left alone until the Write completes.
    unsafe {
        c.qp.write(2, &[sge], addr, s.mr.get_remote_token(), OpFlags::empty())
    }
    .expect("post Write");
    let mut r = [NdResult::EMPTY];
    // The receiver finds the Send with no Receive: it holds it (and the Write behind it).
    assert_eq!(s.cq.get_results(&mut r), 0, "{r:?}");
    s.recv(9, 0, 64);
    let mut got = Vec::new();
    let end = Instant::now() + DEADLINE;
    while got.len() < 3 {
        for e in [&c, &s] {
            if e.cq.get_results(&mut r) == 1 {
                got.push((r[0].request_context, r[0].status));
            }
        }
        assert!(Instant::now() < end, "completions so far: {got:?}");
    }
    got.sort_unstable();
    assert_eq!(
        got,
        [
            (1, Status::SUCCESS),
            (2, Status::SUCCESS),
            (9, Status::SUCCESS)
        ]
    );
    assert_eq!(s.read(4096, 16), message(7, 16), "the Write");
}

/// A Write refused while its chunks are still going into the ring (it goes the ordinary way:
/// heap memory, whose mapping was refused before) completes ND_ACCESS_VIOLATION, as any
/// refused request (R-QP-6), not ND_CANCELED.
#[test]
fn a_write_refused_while_it_is_pushed_is_an_access_violation() {
    let (c, s) = pair(2 << 20);
    let heap = HeapRegion::new(&s, vec![0; 1 << 20], netdirect::MrFlags::ALLOW_REMOTE_WRITE);
    let (token, base) = (heap.token(), heap.addr());
    c.fill(0, &message(3, 1 << 20));
    // First a Write that fits: its mapping is refused (heap), which the initiator remembers.
    let sge = c.buf.sge(0..(256 << 10), c.token());
    // SAFETY: the source is left alone until the Write completes.
    unsafe { c.qp.write(1, &[sge], base, token, OpFlags::empty()) }.expect("post Write");
    let r = drive(&c, &s);
    assert_eq!((r.request_context, r.status), (1, Status::SUCCESS));
    // Then one that overruns the region: more than the data area, so it is still being
    // pushed when the target refuses its header.
    let sge = c.buf.sge(0..(1 << 20), c.token());
    // SAFETY: as above.
    unsafe { c.qp.write(2, &[sge], base + 4096, token, OpFlags::empty()) }.expect("post Write");
    let r = drive(&c, &s);
    assert_eq!((r.request_context, r.status), (2, Status::ACCESS_VIOLATION));
}

/// A buffer the target frees is taken back from the initiator: the initiator's mapping, made
/// for a mapped Write into it, would otherwise keep its pages alive until the connection ends.
/// The target's next look at its socket (a poller's periodic liveness check) tells the peer
/// (UNMAP), whose next look drops the mapping.
#[test]
fn a_freed_buffer_is_unmapped_by_the_peer() {
    let (c, s) = pair(1 << 20);
    let buf = netdirect::Buffer::new(1 << 20).expect("buffer");
    let mr = s.adapter.create_memory_region().expect("mr");
    mr.register_buffer(&buf, netdirect::MrFlags::ALLOW_REMOTE_WRITE)
        .expect("register")
        .wait()
        .expect("register");
    let data = message(11, 256 << 10);
    c.fill(0, &data);
    let sge = c.buf.sge(0..data.len(), c.token());
    // SAFETY: the source is left alone until the Write completes.
    unsafe {
        c.qp.write(
            1,
            &[sge],
            buf.as_ptr() as u64,
            mr.get_remote_token(),
            OpFlags::empty(),
        )
    }
    .expect("post Write");
    assert_eq!(drive(&c, &s).status, Status::SUCCESS, "mapped Write");
    let ino = inode_at(buf.as_ptr()).expect("a buffer is a mapped memfd");
    assert_eq!(
        mappings_of_inode(&ino),
        2,
        "mapped by the target and the initiator"
    );
    mr.deregister()
        .expect("deregister")
        .wait()
        .expect("deregister");
    drop(mr);
    drop(buf);
    assert_eq!(
        mappings_of_inode(&ino),
        1,
        "the initiator's mapping is left"
    );
    let end = Instant::now() + DEADLINE;
    let mut r = [NdResult::EMPTY];
    while mappings_of_inode(&ino) > 0 {
        for _ in 0..1000 {
            assert_eq!(s.cq.get_results(&mut r), 0, "target completion {r:?}");
            assert_eq!(c.cq.get_results(&mut r), 0, "initiator completion {r:?}");
        }
        assert!(
            Instant::now() < end,
            "the initiator still maps the freed buffer"
        );
    }
    // The connection still works, and maps the next buffer as before.
    let buf2 = netdirect::Buffer::new(1 << 20).expect("buffer");
    let mr2 = s.adapter.create_memory_region().expect("mr");
    mr2.register_buffer(&buf2, netdirect::MrFlags::ALLOW_REMOTE_WRITE)
        .expect("register")
        .wait()
        .expect("register");
    // SAFETY: as above.
    unsafe {
        c.qp.write(
            2,
            &[sge],
            buf2.as_ptr() as u64,
            mr2.get_remote_token(),
            OpFlags::empty(),
        )
    }
    .expect("post Write");
    assert_eq!(drive(&c, &s).status, Status::SUCCESS, "second mapped Write");
    assert_eq!(
        mappings_of(buf2.as_ptr()),
        2,
        "the next buffer is mapped too"
    );
}

/// A refused Write whose target has no room left in its ring to the initiator (filled with the
/// target's Sends, which the initiator has not taken yet) still completes ND_ACCESS_VIOLATION:
/// the target's last word waits for room, it is not dropped (the initiator would see only the
/// end, ND_CANCELED). The target's Sends that were in the ring are delivered first; those that
/// were not are flushed at the target.
#[test]
fn a_refusal_waits_for_room_in_a_full_ring() {
    // More Sends than the ring has cells (ND_SHM_CELLS, 256 by default).
    const SENDS: u64 = 300;
    let (c, s) = pair_of_depth(1 << 20, SENDS as u32 + 8);
    for i in 0..SENDS {
        c.recv(1000 + i, 0, 8);
    }
    for i in 0..SENDS {
        s.send(2000 + i, 0, 8).expect("post Send");
    }
    // A Write past the end of the target's region, posted before the initiator takes any of
    // the target's Sends.
    let sge = c.buf.sge(0..64, c.token());
    let addr = s.buf.as_ptr() as u64 + (1 << 20) - 8;
    // SAFETY: the source is left alone until the Write completes.
    unsafe {
        c.qp.write(1, &[sge], addr, s.mr.get_remote_token(), OpFlags::empty())
    }
    .expect("post Write");
    let (mut at_c, mut at_s) = (Vec::new(), Vec::new());
    let end = Instant::now() + DEADLINE;
    let mut r = [NdResult::EMPTY; 16];
    // The target drives first: it finds the Write and refuses it with its ring full, which
    // ends the connection at its end (the Sends not in the ring are flushed).
    while !at_s.iter().any(|&(_, st)| st == Status::CANCELED) {
        let n = s.cq.get_results(&mut r);
        at_s.extend(r[..n].iter().map(|r| (r.request_context, r.status)));
        assert!(Instant::now() < end, "no flushed Send: {at_s:?}");
    }
    while !at_c.iter().any(|&(ctx, _)| ctx == 1) {
        for (e, got) in [(&s, &mut at_s), (&c, &mut at_c)] {
            let n = e.cq.get_results(&mut r);
            got.extend(r[..n].iter().map(|r| (r.request_context, r.status)));
        }
        assert!(Instant::now() < end, "no Write completion: {at_c:?}");
    }
    let write = at_c.iter().find(|&&(ctx, _)| ctx == 1).copied();
    assert_eq!(write, Some((1, Status::ACCESS_VIOLATION)), "the Write");
    // Everything else completes too: the initiator's Receives took the Sends that were in
    // the target's ring (they completed successfully there) and were flushed after; the
    // target's other Sends were flushed.
    while at_c.len() < SENDS as usize + 1 || at_s.len() < SENDS as usize {
        for (e, got) in [(&s, &mut at_s), (&c, &mut at_c)] {
            let n = e.cq.get_results(&mut r);
            got.extend(r[..n].iter().map(|r| (r.request_context, r.status)));
        }
        assert!(Instant::now() < end, "completions: {at_c:?} {at_s:?}");
    }
    let count = |v: &[(u64, Status)], status| v.iter().filter(|&&(_, st)| st == status).count();
    let sent = count(&at_s, Status::SUCCESS);
    assert!(sent > 0 && sent < SENDS as usize, "{at_s:?}");
    assert_eq!(
        count(&at_s, Status::CANCELED),
        SENDS as usize - sent,
        "{at_s:?}"
    );
    assert_eq!(count(&at_c, Status::SUCCESS), sent, "{at_c:?}");
    assert_eq!(
        count(&at_c, Status::CANCELED),
        SENDS as usize - sent,
        "{at_c:?}"
    );
    // In order: the Receives that completed successfully are the first ones.
    let ok: Vec<u64> = at_c
        .iter()
        .filter(|&&(ctx, st)| ctx >= 1000 && st == Status::SUCCESS)
        .map(|&(ctx, _)| ctx)
        .collect();
    assert_eq!(ok, (1000..1000 + sent as u64).collect::<Vec<_>>());
}
