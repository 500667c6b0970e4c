//! Small RDMA Writes placed by the initiator under a lease (`mapped`: placed Writes), between
//! two processes: the target is a child (this test binary re-run with a role) that obeys
//! commands on its standard input and drives its queue pair only when told to, so that "the
//! Write completed while the target ran no provider code" shows it was placed by the
//! initiator, and "the bytes are not there yet" shows a Write did not overtake what came
//! before it.
//!
//! Every wait has a deadline (`common::DEADLINE`); nothing sleeps to synchronise.

#![cfg(not(loom))]

mod common;

use std::io::Write as _;
use std::net::SocketAddr;
use std::time::Instant;

use common::{message, role, say, End, Peer, DEADLINE};
use netdirect::{MrFlags, NdResult, OpFlags, RequestType, Status};

/// Shared-mappable buffers (`Buffer::SHARED_MIN`).
const BUF: usize = 64 << 10;
/// Where the target's Receives land (16 slots of 64 bytes).
const RECV_AT: usize = 32 << 10;
const RECVS: usize = 16;

/// The child process's entry point; a no-op in a normal test run.
#[test]
fn child_main() {
    let Some((role, _)) = role() else { return };
    match role.as_str() {
        "target" => target(),
        other => panic!("unknown role {other}"),
    }
}

/// The target: one connection, then commands from standard input, one per line, each answered
/// with `done` (or a panic, which fails the parent's wait):
/// - `zero OFF` / `has OFF K`: the 8 bytes at OFF are zero / message K, looked at without
///   driving anything;
/// - `has-tail OFF K LEN` / `drive-tail OFF K LEN`: as `has` and `drive`, for the last 8
///   bytes of message K of LEN bytes;
/// - `drive OFF K`: poll (driving the queue pair) until the 8 bytes at OFF are message K
///   (Receives may complete meanwhile);
/// - `order FROM TO`: poll until the Receives of messages FROM..TO came, each carrying its
///   number K in 8 bytes, and when each completes the Write K sent before it is visible at
///   `write_at(K)`; every Receive is posted again;
/// - `ended`: poll until the connection ends (a Receive flushed);
/// - `dereg-other`: register and deregister a second region (which revokes every lease);
/// - `dereg`: deregister the buffer's region (the buffer stays, to be looked at);
/// - `disconnect`.
fn target() {
    let e = End::new(BUF, RECVS as u32);
    let (l, a) = e.listen();
    say(&format!(
        "LISTENING {a} {} {}",
        e.mr.get_remote_token(),
        e.buf.as_ptr() as u64
    ));
    for i in 0..RECVS {
        e.recv(i as u64, RECV_AT + 64 * i, 64);
    }
    e.accept_one(&l);
    // Our side of the connection is set up (the initiator's first Write can ask for a lease:
    // it reads our nonce, published when our Accept completes).
    say("ACCEPTED");
    let mut line = String::new();
    loop {
        line.clear();
        if std::io::stdin().read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let w: Vec<&str> = line.split_whitespace().collect();
        let n = |i: usize| -> usize { w[i].parse().expect("number") };
        match w[0] {
            "zero" => assert_eq!(e.read(n(1), 8), [0; 8], "nothing placed at {}", w[1]),
            // The last 8 bytes of message K of LEN bytes at OFF.
            "has-tail" => {
                let want = &message(n(2) as u64, n(3))[n(3) - 8..];
                assert_eq!(e.read(n(1), 8), want, "placed at {}", w[1]);
            }
            "drive-tail" => {
                let want = message(n(2) as u64, n(3))[n(3) - 8..].to_vec();
                let end = Instant::now() + DEADLINE;
                let mut r = [NdResult::EMPTY];
                while e.read(n(1), 8) != want {
                    assert_eq!(e.cq.get_results(&mut r), 0, "target completion {r:?}");
                    assert!(Instant::now() < end, "the Write was never placed");
                }
                // One more call: a held ACK goes.
                assert_eq!(e.cq.get_results(&mut r), 0, "target completion {r:?}");
            }
            "has" => assert_eq!(
                e.read(n(1), 8),
                message(n(2) as u64, 8),
                "placed at {}",
                w[1]
            ),
            "drive" => {
                let end = Instant::now() + DEADLINE;
                let mut r = [NdResult::EMPTY];
                while e.read(n(1), 8) != message(n(2) as u64, 8) {
                    // A Receive may complete on the way (a Send before the Write).
                    if e.cq.get_results(&mut r) == 1 {
                        assert_eq!(r[0].request_type, RequestType::Receive, "{r:?}");
                        assert_eq!(r[0].status, Status::SUCCESS, "{r:?}");
                    }
                    assert!(Instant::now() < end, "the Write was never placed");
                }
                // One more call: an ACK the pass held for our next call goes (the Write's,
                // if it came through the ring; `qp`: held acknowledgements).
                if e.cq.get_results(&mut r) == 1 {
                    assert_eq!(r[0].request_type, RequestType::Receive, "{r:?}");
                }
            }
            "order" => {
                for k in n(1)..n(2) {
                    let r = e.poll();
                    assert_eq!(r.status, Status::SUCCESS, "{r:?}");
                    let slot = r.request_context as usize;
                    let got = e.read(RECV_AT + 64 * slot, 8);
                    assert_eq!(got, (k as u64).to_le_bytes(), "Receive {k} in order");
                    // The Write posted before the Send is visible once the Send arrived.
                    assert_eq!(e.read(write_at(k), 8), message(k as u64, 8), "Write {k}");
                    e.recv(slot as u64, RECV_AT + 64 * slot, 64);
                }
            }
            "ended" => loop {
                let r = e.poll();
                if r.status == Status::CANCELED {
                    break;
                }
                assert_eq!(r.status, Status::SUCCESS, "{r:?}");
            },
            "dereg-other" => {
                let b = netdirect::Buffer::new(BUF).expect("buffer");
                let mr = e.adapter.create_memory_region().expect("mr");
                mr.register_buffer(&b, MrFlags::ALLOW_REMOTE_WRITE)
                    .expect("register")
                    .wait()
                    .expect("register");
                mr.deregister()
                    .expect("deregister")
                    .wait()
                    .expect("deregister");
            }
            // The token dies within the call (the Receives posted into the buffer hold
            // the memory, so the request itself completes later).
            "dereg" => drop(e.mr.deregister().expect("deregister")),
            "disconnect" => e.disconnect(),
            other => panic!("unknown command {other}"),
        }
        say("done");
    }
}

/// Where the ordering test's Write `k` lands.
fn write_at(k: usize) -> usize {
    1024 + 8 * k
}

/// The initiator, in this process, connected to a target child.
struct Initiator {
    e: End,
    peer: Peer,
    token: u32,
    base: u64,
}

impl Initiator {
    fn new() -> Self {
        let mut peer = Peer::spawn("child_main", "target", "");
        let l = peer.expect("LISTENING ");
        let w: Vec<&str> = l.split_whitespace().collect();
        let addr: SocketAddr = w[0].parse().expect("address");
        let e = End::new(BUF, RECVS as u32);
        e.connect(addr);
        peer.expect("ACCEPTED");
        Self {
            e,
            peer,
            token: w[1].parse().expect("token"),
            base: w[2].parse().expect("address"),
        }
    }

    /// Tell the target `cmd` and wait for it to be done.
    fn cmd(&mut self, cmd: &str) {
        let stdin = self.peer.child.stdin.as_mut().expect("piped");
        writeln!(stdin, "{cmd}").expect("command");
        stdin.flush().expect("command");
        self.peer.expect("done");
    }

    /// Write message `k` (8 bytes, staged at `stage` in our buffer) to `at` in the target's.
    fn write(&self, ctx: u64, k: u64, stage: usize, at: usize, flags: OpFlags) {
        self.e.fill(stage, &message(k, 8));
        let sge = self.e.buf.sge(stage..stage + 8, self.e.token());
        let addr = self.base + at as u64;
        // SAFETY: the staged bytes are left alone until the Write completes (or, INLINE, are
        // read within the call).
        unsafe { self.e.qp.write(ctx, &[sge], addr, self.token, flags) }.expect("post Write");
    }

    /// Write message `k` of `len` bytes (staged at 0 in our buffer) to `at` in the target's.
    fn write_len(&self, ctx: u64, k: u64, len: usize, at: usize) {
        self.e.fill(0, &message(k, len));
        let sge = self.e.buf.sge(0..len, self.e.token());
        let addr = self.base + at as u64;
        // SAFETY: the staged bytes are left alone until the Write completes.
        unsafe {
            self.e
                .qp
                .write(ctx, &[sge], addr, self.token, OpFlags::empty())
        }
        .expect("post Write");
    }

    /// Send the number `k` in 8 bytes (INLINE).
    fn send(&self, ctx: u64, k: u64) {
        let b = k.to_le_bytes();
        let sge = netdirect::Sge::new(b.as_ptr() as *mut u8, 8, 0);
        // SAFETY: INLINE: read within the call.
        unsafe { self.e.qp.send(ctx, &[sge], OpFlags::INLINE) }.expect("post Send");
    }

    /// The next completion, which must be `ctx`'s with `status`.
    fn completes(&self, ctx: u64, ty: RequestType, status: Status, what: &str) {
        let r = self.e.poll();
        assert_eq!(
            (r.request_context, r.request_type, r.status),
            (ctx, ty, status),
            "{what}: {r:?}"
        );
    }

    /// `n` polls find no completion (the target runs no provider code meanwhile, so a Write
    /// that needs its answer cannot complete).
    fn nothing(&self, n: usize, what: &str) {
        let mut r = [NdResult::EMPTY];
        for _ in 0..n {
            assert_eq!(self.e.cq.get_results(&mut r), 0, "{what}: {r:?}");
        }
    }

    /// The first Write to the region goes through the ring and asks for the lease; the target
    /// places it (told to drive) and grants the lease with its ACK.
    fn lease(&mut self) {
        self.write(1, 1, 0, 0, OpFlags::INLINE);
        self.cmd("drive 0 1");
        self.completes(
            1,
            RequestType::Write,
            Status::SUCCESS,
            "the Write asking for the lease",
        );
    }
}

/// With the lease, a Write completes while the target runs no provider code, its bytes are in
/// the target's memory, INLINE or not; a Write then a Send: the Send's arrival shows the
/// Write's bytes (many times over, while the target keeps up or not, which sends some of the
/// Writes through the ring behind a Send not yet taken).
#[test]
fn placed_writes_land_before_the_sends_after_them() {
    let mut i = Initiator::new();
    i.lease();
    i.write(2, 2, 0, 64, OpFlags::INLINE);
    i.completes(
        2,
        RequestType::Write,
        Status::SUCCESS,
        "placed INLINE Write",
    );
    i.write(3, 3, 8, 72, OpFlags::empty());
    i.completes(3, RequestType::Write, Status::SUCCESS, "placed Write");
    i.cmd("has 64 2");
    i.cmd("has 72 3");
    let n = 200u64;
    let stdin = i.peer.child.stdin.as_mut().expect("piped");
    writeln!(stdin, "order 0 {n}").expect("command");
    for k in 0..n {
        // Staged apart: a Write that goes through the ring reads its source later.
        i.write(
            100 + k,
            k,
            64 + 8 * k as usize,
            write_at(k as usize),
            OpFlags::empty(),
        );
        i.send(10_000 + k, k);
        i.completes(100 + k, RequestType::Write, Status::SUCCESS, "Write");
        i.completes(10_000 + k, RequestType::Send, Status::SUCCESS, "Send");
    }
    i.peer.expect("done");
}

/// A Write of more than one cell asks for the lease too (its bytes go as chunks), and the
/// next one is placed; the last 8 bytes, which the target checks, land with the rest.
#[test]
fn a_chunked_write_asks_for_the_lease() {
    let mut i = Initiator::new();
    let len = 1000;
    i.write_len(1, 1, len, 0);
    i.cmd(&format!("drive-tail {} 1 {len}", len - 8));
    i.completes(
        1,
        RequestType::Write,
        Status::SUCCESS,
        "the Write asking for the lease",
    );
    i.write_len(2, 2, len, 4096);
    i.completes(
        2,
        RequestType::Write,
        Status::SUCCESS,
        "placed Write of 1000 bytes",
    );
    i.cmd(&format!("has-tail {} 2 {len}", 4096 + len - 8));
}

/// A Send not yet taken by the target holds back a Write posted after it: the Write goes into
/// the ring behind the Send instead of being placed, and is placed (and completes) only once
/// the target took the Send.
#[test]
fn a_write_does_not_overtake_a_send_in_the_ring() {
    let mut i = Initiator::new();
    i.lease();
    i.send(2, 42);
    i.completes(
        2,
        RequestType::Send,
        Status::SUCCESS,
        "the Send, in the ring",
    );
    i.write(3, 3, 0, 64, OpFlags::INLINE);
    i.nothing(10_000, "the Write waits for the target");
    i.cmd("zero 64");
    i.cmd("drive 64 3");
    i.completes(
        3,
        RequestType::Write,
        Status::SUCCESS,
        "the Write, through the ring",
    );
    // The Send taken, Writes are placed again.
    i.write(4, 4, 0, 72, OpFlags::INLINE);
    i.completes(4, RequestType::Write, Status::SUCCESS, "placed Write");
    i.cmd("has 72 4");
}

/// A registration the target removes revokes every lease (its copy barrier): the next Write
/// goes through the ring, asks again, and the one after it is placed again.
#[test]
fn a_revoked_lease_falls_back_to_the_ring() {
    let mut i = Initiator::new();
    i.lease();
    i.write(2, 2, 0, 64, OpFlags::INLINE);
    i.completes(2, RequestType::Write, Status::SUCCESS, "placed Write");
    i.cmd("dereg-other");
    i.write(3, 3, 0, 72, OpFlags::INLINE);
    i.nothing(10_000, "the Write waits for the target");
    i.cmd("zero 72");
    i.cmd("drive 72 3");
    i.completes(
        3,
        RequestType::Write,
        Status::SUCCESS,
        "the Write, through the ring",
    );
    i.write(4, 4, 0, 80, OpFlags::INLINE);
    i.completes(4, RequestType::Write, Status::SUCCESS, "placed again");
    i.cmd("has 80 4");
}

/// After the target deregisters the region, a Write into it is never placed: it goes through
/// the ring and is refused, ND_ACCESS_VIOLATION, as any Write to a dead token.
#[test]
fn no_write_is_placed_after_a_deregister() {
    let mut i = Initiator::new();
    i.lease();
    i.write(2, 2, 0, 64, OpFlags::INLINE);
    i.completes(2, RequestType::Write, Status::SUCCESS, "placed Write");
    i.cmd("dereg");
    i.write(3, 3, 0, 72, OpFlags::INLINE);
    i.nothing(10_000, "the Write waits for the target");
    i.cmd("zero 72");
    let stdin = i.peer.child.stdin.as_mut().expect("piped");
    writeln!(stdin, "ended").expect("command");
    i.completes(
        3,
        RequestType::Write,
        Status::ACCESS_VIOLATION,
        "Write to a dead token",
    );
    i.peer.expect("done");
    i.cmd("zero 72");
}

/// After the target disconnects (or terminates), no Write is placed: it finds the lease dead
/// and is flushed with the connection.
#[test]
fn no_write_is_placed_after_the_target_disconnects() {
    let mut i = Initiator::new();
    i.lease();
    i.write(2, 2, 0, 64, OpFlags::INLINE);
    i.completes(2, RequestType::Write, Status::SUCCESS, "placed Write");
    i.cmd("disconnect");
    i.write(3, 3, 0, 72, OpFlags::INLINE);
    let r = i.e.poll();
    assert_eq!(
        (r.request_context, r.status),
        (3, Status::CANCELED),
        "Write after the target's Disconnect: {r:?}"
    );
    i.cmd("zero 72");
}

/// After the target terminates the connection (it refused a Write to a dead token), no Write
/// is placed, though the initiator has not yet seen the Terminate when it posts: the refused
/// Write completes ND_ACCESS_VIOLATION, the next ND_CANCELED, and its bytes never land.
#[test]
fn no_write_is_placed_after_the_target_terminates() {
    let mut i = Initiator::new();
    i.lease();
    i.write(2, 2, 0, 64, OpFlags::INLINE);
    i.completes(2, RequestType::Write, Status::SUCCESS, "placed Write");
    // A token of no registration: through the ring, refused by the target.
    let bad = i.e.buf.sge(0..8, i.e.token());
    let addr = i.base + 128;
    // SAFETY: INLINE: read within the call.
    unsafe {
        i.e.qp
            .write(3, &[bad], addr, i.token ^ 0x0100_0000, OpFlags::INLINE)
    }
    .expect("post Write");
    i.cmd("ended");
    i.write(4, 4, 0, 72, OpFlags::INLINE);
    i.completes(
        3,
        RequestType::Write,
        Status::ACCESS_VIOLATION,
        "the refused Write",
    );
    i.completes(
        4,
        RequestType::Write,
        Status::CANCELED,
        "the Write after the Terminate",
    );
    i.cmd("zero 72");
    i.cmd("zero 128");
}

/// Into heap memory nothing is leased (both ends in this process, the target driven only
/// when polled): the Write that asks is refused its lease, and the next one is not placed
/// (it completes only once the target drives) and does not ask again.
#[test]
fn heap_memory_is_not_leased() {
    let (c, s) = common::pair(32 << 10);
    let token = s.mr.get_remote_token();
    for k in 1..=3u64 {
        c.fill(0, &message(k, 8));
        let sge = c.buf.sge(0..8, c.token());
        let at = 8 * k as usize;
        let addr = s.buf.as_ptr() as u64 + at as u64;
        // SAFETY: INLINE: read within the call.
        unsafe { c.qp.write(k, &[sge], addr, token, OpFlags::INLINE) }.expect("post Write");
        let mut r = [NdResult::EMPTY];
        for _ in 0..10_000 {
            assert_eq!(
                c.cq.get_results(&mut r),
                0,
                "Write {k} waits for the target"
            );
        }
        assert_eq!(s.read(at, 8), [0; 8], "Write {k} not placed");
        let r = common::drive(&c, &s);
        assert_eq!((r.request_context, r.status), (k, Status::SUCCESS), "{r:?}");
        assert_eq!(
            s.read(at, 8),
            message(k, 8),
            "Write {k} placed by the target"
        );
    }
}
