//! `nd rpingpong`: RDMA Write ping-pong latency, as Microsoft's ndrpingpong measures it
//! (docs/ND-RULES.md §5.4): each side writes `size` bytes into the peer's buffer with an RDMA
//! Write, and detects the peer's Write by watching the last byte of its own buffer (the
//! provider places a Write in order, so the last byte lands last). Reported like
//! `nd pingpong`: half a round trip (ndrpingpong itself reports the full round trip).
//!
//! A peer's Write makes no completion on this side, so there is no CQ notification to sleep
//! on while waiting for it: `--blocking` sleeps on the adapter's descriptor (the Linux form
//! of CreateOverlappedFile, readable when the adapter's I/O needs driving) and waits for its
//! own Write completions on the CQ as `nd pingpong --blocking` does. That sleeper is the one
//! driving its adapter, so `--blocking` runs it in manual mode (no progress engine).
//!
//! JSON: the [`Row`] latency keys, `op` = `write`.

use netdirect::{OpFlags, Provider, RequestType, Sge};

use crate::common::{
    self, check, Defaults, Endpoint, EndpointConfig, Laps, PeerArgs, Plan, Report, Role, Row,
    SizeArgs, LAT_COLS,
};

/// Arguments of `nd rpingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    #[command(flatten)]
    api: common::ApiArg,
}

/// 8 bytes (at least 1: the last byte signals arrival), 100,000 round trips.
const DEFAULTS: Defaults = Defaults {
    min_size: 1,
    ..Defaults::new(8, 100_000, 256 << 20)
};

const INFO_RECV: u64 = 1;
const INFO_SEND: u64 = 2;
const WRITE_CTX: u64 = 3;
/// `PeerInfo` (docs/ND-RULES.md §1.10): remote token, then the buffer address.
const INFO_LEN: usize = 16;

/// The last-byte values of iteration `k`: odd from the client, the next even from the server.
/// Never 0 (the buffers start zeroed), and a stale value from an earlier iteration cannot
/// match, because each iteration's value differs from the previous one's.
fn marks(k: u64) -> (u8, u8) {
    let c = (2 * (k % 127) + 1) as u8;
    (c, c + 1)
}

pub(crate) fn run(args: &Args) -> Result<(), String> {
    // Checked before `--loopback` starts the two processes, so a refusal is said once.
    let plan = args.sizes.plan(DEFAULTS)?;
    let provider = args.peer.provider()?;
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    args.peer
        .serve(role, |role| run_as(args, role, &plan, &provider))
}

/// One run as `role`.
fn run_as(args: &Args, role: Role, plan: &Plan, provider: &Provider) -> Result<(), String> {
    // [data | info received], at least `Buffer::SHARED_MIN`: shared-mappable memory, which a
    // same-host peer allowed to write it may write itself (shm's placed Writes), as UCX's
    // put_lat writes into memory it allocated shared.
    let data = plan.max_size().next_multiple_of(64);
    let cfg = EndpointConfig {
        buf_len: (data + 64).max(netdirect::Buffer::SHARED_MIN),
        max_message: plan.max_size(),
        depth: 8,
        inline: 256,
        blocking: args.peer.blocking,
        sleeps_on_fd: args.peer.blocking,
        settings: common::settings("rpingpong", &args.peer, plan, &[]),
        api: args.api.api,
        ..EndpointConfig::default()
    };
    let post_info_recv = |ep: &Endpoint| -> Result<(), String> {
        let sge = ep.sge(data..data + INFO_LEN);
        // SAFETY: the info slot is read only after this Receive completes.
        unsafe { ep.receive(INFO_RECV, &[sge]) }.map_err(common::err("receive"))
    };
    let (ep, client) = match role {
        Role::Server(addr) => (
            Endpoint::serve(provider, addr, args.peer.announce, &cfg, post_info_recv)?,
            false,
        ),
        Role::Client(dest) => (
            Endpoint::connect(provider, dest, &cfg, post_info_recv)?,
            true,
        ),
    };
    let peer = exchange(&ep, data, client)?;
    let mut report =
        Report::new(args.peer.json, plan.sweep, LAT_COLS).with_header(ep.header(args.peer.mode()));
    let mut writing = false;
    let mut k = 0u64;
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        // Made once per size: the Write is on the path from the peer's mark to our answer.
        let mut w = Writer {
            ep: &ep,
            peer: &peer,
            size,
            sge: ep.sge(0..size),
            flags: ep.inline_flags(size),
            writing: &mut writing,
        };
        let mut laps = Laps::new(warmup, if client { n } else { 0 });
        for _ in 0..warmup + n {
            let (c, s) = marks(k);
            k += 1;
            if client {
                laps.lap();
                w.write(c)?;
                w.await_mark(s)?;
            } else {
                w.await_mark(c)?;
                w.write(s)?;
            }
        }
        if client {
            laps.lap();
            let row = Row::new(
                "rpingpong",
                provider.name(),
                "write",
                args.peer.mode(),
                size,
                n,
            );
            report.push(&row.latency(laps.samples()));
        }
    }
    if !client {
        // The last Write completes once the client's progress answers it, or is flushed
        // (ND_CANCELED) when the client disconnects first; either ends the run.
        while writing {
            match ep.try_next() {
                Some(r) if r.request_context == WRITE_CTX => writing = false,
                Some(r) => {
                    check(r)?;
                }
                // The client may have disconnected already: the Write is then flushed.
                None => ep.wait_io()?,
            }
        }
    }
    ep.shutdown();
    report.finish();
    Ok(())
}

/// The peer's buffer.
struct Peer {
    token: u32,
    addr: u64,
}

/// One side's Writes of one round.
struct Writer<'a> {
    ep: &'a Endpoint,
    peer: &'a Peer,
    size: usize,
    /// The data to Write (the first `size` bytes of our buffer), and its flags
    /// ([`Endpoint::inline_flags`]).
    sge: Sge,
    flags: OpFlags,
    /// Our previous Write has not completed yet.
    writing: &'a mut bool,
}

impl Writer<'_> {
    /// Mark the last byte with `val` and Write the first `size` bytes to the peer.
    fn write(&mut self, val: u8) -> Result<(), String> {
        let ep = self.ep;
        // SAFETY: in bounds; our previous Write from this buffer has completed
        // (`await_mark` waited), and the peer writes it only after receiving this one.
        unsafe { ep.buf.as_ptr().add(self.size - 1).write_volatile(val) };
        let sge = std::slice::from_ref(&self.sge);
        // SAFETY: the buffer is registered and left alone until the Write completes.
        unsafe { ep.write(WRITE_CTX, sge, self.peer.addr, self.peer.token, self.flags) }
            .map_err(common::err("write"))?;
        *self.writing = true;
        Ok(())
    }

    /// Wait until the last byte holds `want` and our previous Write has completed. Each
    /// `GetResults` drives the I/O that places the peer's Write. The condition is checked
    /// before every `GetResults` (as ndrpingpong does), not only once the queue is drained:
    /// the provider may hold the answer that completes the peer's Write until our next call
    /// into it, so that it leaves with our own next Write (`tcp`: the zero-length Read
    /// Response, in the same `send`; `shm`: the ACK, as a flag on our WRITE record); a
    /// further `GetResults` after the mark arrived would send it on its own.
    /// Blocking mode checks it again before sleeping, so a Write placed by the last call is
    /// not slept through.
    fn await_mark(&mut self, want: u8) -> Result<(), String> {
        loop {
            if byte(self.ep, self.size - 1) == want && !*self.writing {
                return Ok(());
            }
            match self.ep.try_next() {
                Some(r) => {
                    if check(r)?.request_context == WRITE_CTX {
                        *self.writing = false;
                    }
                }
                None => {
                    if byte(self.ep, self.size - 1) == want && !*self.writing {
                        return Ok(());
                    }
                    self.ep.idle()?;
                }
            }
        }
    }
}

/// The byte at `i` of the buffer, as it is in memory now.
fn byte(ep: &Endpoint, i: usize) -> u8 {
    assert!(i < ep.buf.len());
    // SAFETY: in bounds (checked above). The provider places the peer's Writes on this
    // thread, inside the `get_results`/`progress` calls of the same loop, so the read never
    // races a write; `read_volatile` keeps the compiler from caching it across those calls.
    unsafe { ep.buf.as_ptr().add(i).read_volatile() }
}

fn send_info(ep: &Endpoint) -> Result<(), String> {
    let mut info = [0u8; INFO_LEN];
    info[..4].copy_from_slice(&ep.remote_token()?.to_ne_bytes());
    info[8..].copy_from_slice(&(ep.buf.as_ptr() as u64).to_le_bytes());
    let sge = Sge::new(info.as_ptr() as *mut u8, INFO_LEN as u32, 0);
    // SAFETY: INLINE: `info` is read during the call only.
    unsafe { ep.send(INFO_SEND, &[sge], OpFlags::INLINE) }.map_err(common::err("send"))
}

/// Trade buffer info: the client sends first (iWARP: the active side speaks first), the server
/// answers once it has the client's.
fn exchange(ep: &Endpoint, data: usize, client: bool) -> Result<Peer, String> {
    if client {
        send_info(ep)?;
    }
    let (mut peer, mut sent) = (None, false);
    loop {
        let r = ep.next()?;
        match r.request_type {
            RequestType::Receive => {
                if r.bytes_transferred as usize != INFO_LEN {
                    return Err(format!("peer info of {} bytes", r.bytes_transferred));
                }
                let b: Vec<u8> = (0..INFO_LEN).map(|i| byte(ep, data + i)).collect();
                peer = Some(Peer {
                    token: u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
                    addr: u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
                });
                if !client {
                    send_info(ep)?;
                }
            }
            RequestType::Send => sent = true,
            other => return Err(format!("unexpected {other:?} completion")),
        }
        if sent {
            if let Some(p) = peer.take() {
                return Ok(p);
            }
        }
    }
}
