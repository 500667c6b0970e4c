//! One connection with both ends in this process and this thread, for benchmarking the cost of
//! a Send/Receive on the data path without cross-core effects (no second core, no wake-up).
//!
//! Shared by `crates/netdirect/benches/post_poll.rs` and `crates/shm/benches/ring.rs`
//! (included there with `#[path]`), and so by `bench/callgrind`.
//!
//! The connection is set up as in the ND connection flow (docs/ND-RULES.md §2.10: IND2Listener
//! GetConnectionRequest, IND2Connector Connect/Accept/CompleteConnect), with every overlapped
//! operation started before the one it depends on is waited for, so one thread can drive both
//! ends.

use std::net::SocketAddr;

use netdirect::{
    Adapter, Buffer, CompletionQueue, Connector, Listener, MemoryRegion, MrFlags, NdResult,
    OpFlags, Provider, QueuePair, Status,
};

/// Largest message a [`Pair`] carries; the buffer holds a send area and a receive area.
pub(crate) const MAX_MSG: usize = 1 << 20;

/// Both ends of one connection: `a` sends, `b` receives.
pub(crate) struct Pair {
    // Field order is drop order: queue pairs and connectors before their CQs and adapter.
    qa: QueuePair,
    qb: QueuePair,
    _ca: Connector,
    _cb: Connector,
    _listener: Listener,
    cq_a: CompletionQueue,
    cq_b: CompletionQueue,
    mr: MemoryRegion,
    buf: Buffer,
    _adapter: Adapter,
    /// [`Pair::write_round`]: rounds so far, and whether `b`'s last Write has not completed.
    writes: std::cell::Cell<(u64, bool)>,
}

impl Pair {
    /// Connect two queue pairs of provider `name` over 127.0.0.1, inline data up to what the
    /// adapter allows (so small Sends take each provider's inline path).
    ///
    /// # Panics
    /// If any step fails: a benchmark cannot run without its connection.
    pub(crate) fn new(name: &str) -> Self {
        let p = Provider::open(name).expect("provider");
        let any: SocketAddr = "127.0.0.1:0".parse().expect("literal");
        let adapter = p.open_adapter_for(any).expect("adapter");
        let inline = adapter.query().max_inline_data_size;
        let cq_a = adapter.create_completion_queue(64, 0, 0).expect("CQ");
        let cq_b = adapter.create_completion_queue(64, 0, 0).expect("CQ");
        let qa = adapter
            .create_queue_pair(&cq_a, &cq_a, 1, 16, 16, 1, 1, inline)
            .expect("QP");
        let qb = adapter
            .create_queue_pair(&cq_b, &cq_b, 2, 16, 16, 1, 1, inline)
            .expect("QP");
        let buf = Buffer::new(2 * MAX_MSG).expect("buffer");
        let mr = adapter.create_memory_region().expect("MR");
        mr.register_buffer(
            &buf,
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE,
        )
        .expect("register")
        .wait()
        .expect("register");
        let listener = adapter.create_listener().expect("listener");
        listener.bind(any).expect("bind");
        listener.listen(1).expect("listen");
        let addr = listener.get_local_address().expect("address");
        let ca = adapter.create_connector().expect("connector");
        let cb = adapter.create_connector().expect("connector");
        ca.bind(any).expect("bind connector");
        let req = listener.get_connection_request(&cb).expect("request");
        let conn = ca.connect(&qa, addr, 0, 0, &[]).expect("connect");
        req.wait().expect("request");
        let acc = cb.accept(&qb, 0, 0, &[]).expect("accept");
        conn.wait().expect("connect");
        ca.complete_connect()
            .expect("complete")
            .wait()
            .expect("complete");
        acc.wait().expect("accept");
        // One Receive stays posted ahead of each round's, as applications keep Receives
        // pre-posted: each message lands in the oldest, so the steady state the benchmark
        // measures has one spare Receive queued (it covers the whole receive area).
        let spare = buf.sge(MAX_MSG..2 * MAX_MSG, mr.get_local_token());
        // SAFETY: the receive area is only written by the provider and never read here; the
        // buffer is dropped after the queue pairs (field order).
        unsafe { qb.receive(0, &[spare]) }.expect("post spare receive");
        Self {
            qa,
            qb,
            _ca: ca,
            _cb: cb,
            _listener: listener,
            cq_a,
            cq_b,
            mr,
            buf,
            _adapter: adapter,
            writes: std::cell::Cell::new((0, false)),
        }
    }

    /// One round of an RDMA Write ping-pong as `nd rpingpong` runs it, `len` bytes (1 to the
    /// inline size) each way: `a` Writes INLINE into the receive area, `b` polls until the last
    /// byte shows it (and its own previous Write has completed), Writes back into the second
    /// half of the receive area, and `a` polls until that shows and its Write has completed.
    /// Returns the round's mark.
    ///
    /// # Panics
    /// If a post fails or a completion is not `ND_SUCCESS`.
    pub(crate) fn write_round(&self, len: usize) -> u8 {
        let (k, mut b_writing) = self.writes.get();
        let (ping, pong) = ((2 * (k % 127) + 1) as u8, (2 * (k % 127) + 2) as u8);
        let (to_b, to_a) = (MAX_MSG, MAX_MSG + MAX_MSG / 2);
        self.post_write(&self.qa, 0, to_b, len, ping);
        let mut r = [NdResult::EMPTY];
        while self.byte(to_b + len - 1) != ping || b_writing {
            if self.cq_b.get_results(&mut r) == 1 {
                check(&r[0]);
                b_writing = false;
            }
        }
        self.post_write(&self.qb, len, to_a, len, pong);
        let mut a_writing = true;
        while self.byte(to_a + len - 1) != pong || a_writing {
            if self.cq_a.get_results(&mut r) == 1 {
                check(&r[0]);
                a_writing = false;
            }
        }
        self.writes.set((k + 1, true));
        pong
    }

    /// Post an INLINE Write of `len` bytes from `src`, whose last byte is set to `mark` first,
    /// to `dst` (both offsets in the one buffer).
    fn post_write(&self, qp: &QueuePair, src: usize, dst: usize, len: usize, mark: u8) {
        // SAFETY: in bounds; INLINE requests read their bytes during the post, so no request
        // reads this byte now.
        unsafe { self.buf.as_ptr().add(src + len - 1).write_volatile(mark) };
        let sge = self.buf.sge(src..src + len, self.mr.get_local_token());
        let addr = self.buf.as_ptr() as u64 + dst as u64;
        // SAFETY: INLINE: the bytes are read during the call.
        unsafe { qp.write(0, &[sge], addr, self.mr.get_remote_token(), OpFlags::INLINE) }
            .expect("post write");
    }

    /// The byte at `i` of the buffer as it is now (the provider places Writes inside the
    /// `get_results` calls of this thread).
    fn byte(&self, i: usize) -> u8 {
        assert!(i < self.buf.len());
        // SAFETY: in bounds (checked above); nothing writes the buffer concurrently.
        unsafe { self.buf.as_ptr().add(i).read_volatile() }
    }

    /// One message of `len` bytes (at most [`MAX_MSG`]): post a Receive on `b`, post a Send on
    /// `a`, poll both CQs until each has its completion (the message lands in the Receive
    /// posted before). Returns the bytes received.
    ///
    /// # Panics
    /// If a post fails or a completion is not `ND_SUCCESS`.
    pub(crate) fn round(&self, len: usize) -> u32 {
        let tok = self.mr.get_local_token();
        let rs = self.buf.sge(MAX_MSG..MAX_MSG + len, tok);
        let ss = self.buf.sge(0..len, tok);
        // SAFETY: the receive area (second half) is only written by the provider and never
        // read here; the send area (first half) is never written while a Send is posted; the
        // buffer outlives both requests, which complete before this function returns.
        unsafe {
            self.qb.receive(0, &[rs]).expect("post receive");
            self.qa.send(0, &[ss], OpFlags::empty()).expect("post send");
        }
        // Poll both ends in turn: a provider may need the receiver's progress before the
        // sender's request completes (shm's large messages are pulled by the receiver).
        let mut r = [NdResult::EMPTY];
        let (mut sent, mut got) = (false, None);
        while !sent || got.is_none() {
            if !sent && self.cq_a.get_results(&mut r) == 1 {
                check(&r[0]);
                sent = true;
            }
            if got.is_none() && self.cq_b.get_results(&mut r) == 1 {
                check(&r[0]);
                got = Some(r[0].bytes_transferred);
            }
            std::hint::spin_loop();
        }
        got.unwrap_or(0)
    }
}

/// A completion must be a success: anything else is a provider bug the benchmark reports.
fn check(r: &NdResult) {
    assert_eq!(r.status, Status::SUCCESS, "{:?}", r.request_type);
}
