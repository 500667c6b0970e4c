//! A hostile peer, for the tests and the fuzz target `shm_records` (`fuzz/`): a victim queue
//! pair connected, inside this process, to an attacker whose ring toward the victim is written
//! raw — any record kind, flags, lengths, descriptors and data-area bytes — as a same-host peer
//! that does not run this library could write it (the trust model, docs/ARCHITECTURE.md).
//!
//! [`run`] checks what the trust model promises: whatever the records, the victim neither
//! panics nor hangs (a completion always comes: the Receive it had posted, delivered or
//! flushed), and no byte of its memory changes outside what it exposed (a 1 KiB region with
//! remote read and write) and its posted Receive.
//!
//! Not part of the provider's API (hidden from the documentation).

use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use netdirect_spi::traits::{
    self, Adapter, CompletionQueue, Connector, MemoryRegion, Provider, QueuePairConfig,
};
use netdirect_spi::{MrFlags, NdResult, ReadLimits, Sge, Status};

use crate::qp::ShmQp;
use crate::ring::{kind, Desc, RingMem, INLINE_MAX};

/// One end of a test connection: its adapter, one CQ for everything, a queue pair, and a
/// registered 4 KiB buffer.
#[allow(missing_debug_implementations)]
pub struct Side {
    pub adapter: Arc<dyn Adapter>,
    pub cq: Arc<dyn CompletionQueue>,
    pub qp: Arc<dyn traits::QueuePair>,
    pub conn: Arc<dyn Connector>,
    pub mr: Arc<dyn MemoryRegion>,
    pub buf: Box<[u8]>,
    pub token: u32,
}

/// A fresh, unconnected [`Side`].
pub fn side() -> Side {
    let a = crate::ShmProvider::new()
        .open_adapter(crate::ADAPTER_ID)
        .expect("adapter");
    // No progress engine: both sides are driven by this thread, step by step (a second
    // driver would race the states the tests set up), and no thread may outlive a fuzz run.
    a.set_progress_mode(netdirect_spi::kit::progress::ProgressMode::Manual)
        .expect("manual progress");
    let cq = a.create_completion_queue(64, 0, 0).expect("cq");
    let qp = a
        .create_queue_pair(QueuePairConfig::single_cq(cq.clone(), 8))
        .expect("queue pair");
    let mut buf = vec![0u8; 4096].into_boxed_slice();
    let mr = a.create_memory_region().expect("mr");
    // SAFETY: the buffer lives in the `Side`, whose fields drop the registration first (the
    // queue pair and region are declared before it).
    unsafe {
        mr.register(
            buf.as_mut_ptr(),
            buf.len(),
            MrFlags::ALLOW_LOCAL_WRITE,
            None,
        )
    }
    .expect("register")
    .wait()
    .expect("registered");
    let token = mr.get_local_token();
    let conn = a.create_connector().expect("connector");
    Side {
        adapter: a,
        cq,
        qp,
        conn,
        mr,
        buf,
        token,
    }
}

/// A connected `(victim, attacker)` pair; the victim has a 64-byte Receive posted at the start
/// of its buffer (context 1).
pub fn connect() -> (Side, Side) {
    connect_with(ReadLimits::default())
}

/// As [`connect`], with `limits` on both sides (a victim that serves the attacker's Reads).
pub fn connect_with(limits: ReadLimits) -> (Side, Side) {
    let (mut victim, attacker) = (side(), side());
    let l = victim.adapter.create_listener().expect("listener");
    l.bind("127.0.0.1:0".parse().expect("address"))
        .expect("bind");
    l.listen(0).expect("listen");
    let addr = l.get_local_address().expect("address");
    let sge = Sge::new(victim.buf.as_mut_ptr(), 64, victim.token);
    // SAFETY: the buffer is only read after the Receive completes (or not at all).
    unsafe { victim.qp.receive(1, &[sge]) }.expect("receive");
    // Both sides on this thread (no helper thread may outlive a fuzz run: libFuzzer's leak
    // check runs right after it): each step only waits for what the other side already did.
    let limit = Some(Duration::from_secs(10));
    let request = l.get_connection_request(&victim.conn).expect("request");
    let connecting = attacker
        .conn
        .connect(&attacker.qp, addr, limits, &[])
        .expect("connect");
    request
        .wait_timeout(limit)
        .expect("in time")
        .expect("request");
    let accepting = victim.conn.accept(&victim.qp, limits, &[]).expect("accept");
    connecting
        .wait_timeout(limit)
        .expect("in time")
        .expect("connected");
    attacker
        .conn
        .complete_connect()
        .expect("complete")
        .wait_timeout(limit)
        .expect("in time")
        .expect("completed");
    accepting
        .wait_timeout(limit)
        .expect("in time")
        .expect("accepted");
    (victim, attacker)
}

/// The next completion on `cq`; panics if none comes within 10 s (the victim hangs).
pub fn next(cq: &Arc<dyn CompletionQueue>) -> NdResult {
    let end = Instant::now() + Duration::from_secs(10);
    let mut r = [NdResult::EMPTY];
    while cq.get_results(&mut r) == 0 {
        assert!(Instant::now() < end, "no completion: the victim hangs");
    }
    r[0]
}

/// The attacker's channel toward the victim, and the next position to forge (position 0 held
/// the attacker's RTR).
pub struct Forger {
    link: Arc<crate::link::Link>,
    pos: u32,
}

impl std::fmt::Debug for Forger {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Forger").field("pos", &self.pos).finish()
    }
}

impl Forger {
    /// Forge on `attacker`'s connection.
    pub fn new(attacker: &Side) -> Self {
        let qp = ShmQp::downcast(&attacker.qp).expect("an shm queue pair");
        let link = qp.link().expect("connected").clone();
        Self { link, pos: 1 }
    }

    /// Ring positions left before the forger would overwrite a record the victim may not have
    /// consumed, counted from the start (the fuzz target writes one lap at most).
    pub fn room(&self) -> u32 {
        self.link.tx().cells() - self.pos
    }

    /// Records forged that the victim has not consumed yet (for forging past one lap).
    pub fn in_flight(&self) -> u32 {
        let taken = self.link.tx().tail().load(Ordering::Acquire) as u32;
        self.pos.wrapping_sub(taken)
    }

    /// Publish one record: `word` is kind | flags << 8, `inline` its cell bytes (at most 48).
    pub fn record(&mut self, word: u32, len: u32, total: u32, inline: &[u8]) {
        let tx = self.link.tx();
        let i = self.pos & (tx.cells() - 1);
        let n = inline.len().min(INLINE_MAX);
        // SAFETY: the attacker's own cell, not yet published; `n` ≤ INLINE_MAX.
        unsafe { tx.write_inline(i, 0, inline.as_ptr(), n) };
        let [w, l, t] = tx.meta(i);
        w.store(word, Ordering::Relaxed);
        l.store(len, Ordering::Relaxed);
        t.store(total, Ordering::Relaxed);
        tx.seq(i).store(self.pos + 1, Ordering::Release);
        self.pos += 1;
    }

    /// Write `bytes` into the data area from offset 0 (as much as fits).
    pub fn data(&mut self, bytes: &[u8]) {
        let tx = self.link.tx();
        let n = bytes.len().min(tx.data_len() as usize);
        // SAFETY: the attacker's own data area; `n` ≤ its length.
        unsafe { tx.write_data(0, bytes.as_ptr(), n) };
    }

    /// Wake the victim if it sleeps.
    pub fn wake(&self) {
        self.link.wake_peer();
    }
}

/// Start and end of the victim's exposed range within its buffer.
pub(crate) const EXPOSED: std::ops::Range<usize> = 1024..2048;

/// Register the victim's [`EXPOSED`] range for local and remote reads and writes. Drop the
/// region before the victim (its buffer backs it).
pub(crate) fn expose(victim: &mut Side) -> Arc<dyn MemoryRegion> {
    let base = victim.buf.as_mut_ptr();
    let exposed = victim.adapter.create_memory_region().expect("mr");
    // SAFETY: the range lies in the victim's buffer, which outlives the registration (the
    // caller drops the region first).
    unsafe {
        exposed.register(
            base.wrapping_add(EXPOSED.start),
            EXPOSED.len(),
            MrFlags::ALLOW_LOCAL_WRITE | MrFlags::ALLOW_REMOTE_WRITE | MrFlags::ALLOW_REMOTE_READ,
            None,
        )
    }
    .expect("register")
    .wait()
    .expect("registered");
    exposed
}

/// Input bytes per forged record: kind, flags, len (2), total (4), the count of inline bytes
/// that follow (modulo 49; its top bit picks a wrong token when steering), an address offset
/// (2, when steering).
const HEADER: usize = 11;

/// Records from fuzzer bytes, against a fresh victim; panics when a promise breaks.
///
/// Input: byte 0 steers (bit 0: lengths taken modulo 64, so most records are plausible;
/// bit 1: descriptors name the exposed region's token and addresses near it — a fuzzer cannot
/// guess a 32-bit random token); then records of `HEADER` (11) bytes plus up to 48 inline bytes
/// (as many as a byte of the header says), at most 8 of them; what follows fills the data
/// area. A final 8-byte message follows the forged records, so a completion always comes.
pub fn run(input: &[u8]) {
    let Some((&steer, mut rest)) = input.split_first() else {
        return;
    };
    let (mut victim, attacker) = connect();
    let base = victim.buf.as_mut_ptr();
    let exposed = expose(&mut victim);
    let token = exposed.get_local_token();
    victim.buf[64..].fill(0xAA);
    let lo = base as u64 + EXPOSED.start as u64;

    let mut f = Forger::new(&attacker);
    let mut records = 0;
    while rest.len() >= HEADER && records < 8 && f.room() > 2 {
        let (h, tail) = rest.split_at(HEADER);
        let word = u32::from(h[0]) | (u32::from(h[1]) << 8);
        let mut len = u32::from(u16::from_le_bytes([h[2], h[3]]));
        let total = u32::from_le_bytes([h[4], h[5], h[6], h[7]]);
        if steer & 1 != 0 {
            len %= 64;
        }
        let take = usize::from(h[8] % 49).min(tail.len());
        let mut inline = [0u8; INLINE_MAX];
        let (bytes, tail) = tail.split_at(take);
        inline[..take].copy_from_slice(bytes);
        let described = matches!(h[0], kind::WRITE | kind::WPULL | kind::READ);
        if steer & 2 != 0 && described {
            // A descriptor near the exposed range: the real token (or one bit off), an address
            // up to 32 KiB either side of its start.
            let tok = if h[8] & 0x80 != 0 { token ^ 1 } else { token };
            let off = i64::from(i16::from_le_bytes([h[9], h[10]]));
            let d = Desc {
                token: tok,
                addr: lo.wrapping_add_signed(off),
            };
            inline[..Desc::LEN].copy_from_slice(&d.encode());
        }
        f.record(word, len, total, &inline);
        records += 1;
        rest = tail;
    }
    f.data(rest);
    // A plain 8-byte message: delivered into the Receive, or flushed with it once the
    // victim has refused something above.
    f.record(u32::from(kind::MSG), 8, 0, &[0x55; 8]);
    f.wake();

    let r = next(&victim.cq);
    assert!(
        matches!(
            r.status,
            Status::SUCCESS | Status::CANCELED | Status::DATA_OVERRUN
        ),
        "unexpected completion {r:?}"
    );
    if r.status == Status::SUCCESS {
        assert!(r.bytes_transferred <= 64, "{r:?}");
    }
    let outside = victim.buf[64..EXPOSED.start]
        .iter()
        .chain(&victim.buf[EXPOSED.end..])
        .all(|&b| b == 0xAA);
    assert!(outside, "a byte outside the exposed range changed");
    drop(attacker);
    drop(exposed);
}

#[cfg(test)]
mod tests {
    use super::run;
    use crate::ring::kind;

    /// The fuzz target's entry on a few inputs of each shape: plausible and raw lengths,
    /// steered and raw descriptors, every record kind, with and without data-area bytes.
    #[test]
    fn run_survives_each_record_kind() {
        for steer in 0..4u8 {
            for k in 0..=kind::MAPR {
                let mut input = vec![steer];
                // The record: kind, flags (FIRST | LAST), len 40, total 24, 20 inline bytes,
                // an address 8 bytes into the exposed range.
                input.extend_from_slice(&[k, 6, 40, 0, 24, 0, 0, 0, 20, 8, 0]);
                input.extend((0..20).map(|i| i as u8));
                // Data-area bytes for CHUNK, RTS and WPULL records.
                input.extend((0..64).map(|i| (i * 7) as u8));
                run(&input);
            }
        }
        // A message split into chunks, a Write followed by its chunk, and nothing at all.
        run(&[
            1,
            kind::CHUNK,
            2,
            16,
            0,
            40,
            0,
            0,
            0,
            0,
            0,
            0,
            kind::CHUNK,
            4,
            24,
            0,
            0,
            0,
            0,
            0,
        ]);
        run(&[3, kind::WRITE, 0, 16, 0, 64, 0, 0, 0, 16, 0, 0]);
        // A 16-byte Write that starts 16 bytes before the exposed range (and one that ends 8
        // bytes past it), with the right token: refused.
        for off in [-16i16, 1024 - 8] {
            let [a, b] = off.to_le_bytes();
            let mut input = vec![3, kind::WRITE, 0, 32, 0, 16, 0, 0, 0, 32, a, b];
            input.extend([0x5A; 32]);
            run(&input);
        }
        run(&[0]);
    }
}
