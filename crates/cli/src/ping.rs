//! `nd ping`: one-way Send/Receive throughput with credit flow control, as Microsoft's ndping
//! measures it (docs/ND-RULES.md §5.1). The server keeps [`DEPTH`] Receives posted (all over
//! one buffer: the payload is not looked at) and returns credits with a 1-byte Send every
//! `DEPTH / 2` messages; the client keeps up to `-q` Sends outstanding while it has credits.
//! Each batch ends with a 0-byte SYNC Send that the server acknowledges with a 0-byte Send,
//! so the clock stops when every message has been received.
//!
//! JSON: the [`Row`] throughput keys, `op` = `send`, and `pipeline`.

use std::time::Instant;

use netdirect::{OpFlags, Provider, RequestType, Sge};

use crate::common::{
    self, Defaults, Endpoint, EndpointConfig, PeerArgs, Plan, Report, Role, Row, SizeArgs, BW_COLS,
};

/// Arguments of `nd ping`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    /// Most Sends outstanding at once (ndping -q; capped at the credit window).
    #[arg(short = 'q', long, default_value_t = 128)]
    pipeline: u32,
}

/// 4 KiB messages, 500,000 of them (ndping's x_MaxIterations); 2 GiB per size at most.
const DEFAULTS: Defaults = Defaults {
    min_size: 1,
    ..Defaults::new(4096, 500_000, 2 << 30)
};
/// Receives the server keeps posted: the credit window.
const DEPTH: u32 = 128;
/// Receives the client keeps posted for credit updates and SYNC acknowledgements: at most
/// two credit updates (of DEPTH / 2 each) can be unprocessed, plus one acknowledgement.
const CLIENT_RECVS: u32 = 4;
const DATA_CTX: u64 = 1;
const SYNC_CTX: u64 = 2;
const CREDIT_CTX: u64 = 3;
const RECV_CTX: u64 = 4;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    // Checked before `--loopback` starts the two processes, so a refusal is said once.
    if args.pipeline == 0 {
        return Err("-q must be at least 1".into());
    }
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
    let max = plan.max_size();
    // [64 bytes: credits and SYNCs | message area]: the server sends credits from the first
    // part and receives messages into the second; the client the other way round, so no
    // Receive ever lands in bytes a Send is reading.
    let cfg = EndpointConfig {
        buf_len: 64 + max,
        max_message: max,
        depth: DEPTH + 4,
        inline: 256,
        blocking: args.peer.blocking,
        settings: common::settings("ping", &args.peer, plan, &[]),
        ..EndpointConfig::default()
    };
    match role {
        Role::Server(addr) => {
            let post_all = |ep: &Endpoint| (0..DEPTH).try_for_each(|_| post_recv(ep, 64, max));
            let ep = Endpoint::serve(provider, addr, args.peer.announce, &cfg, post_all)?;
            // A warm-up batch and a timed batch per size, each ending with a SYNC.
            serve(&ep, max, 2 * plan.rounds.len())?;
            ep.shutdown();
        }
        Role::Client(dest) => {
            let post_all = |ep: &Endpoint| (0..CLIENT_RECVS).try_for_each(|_| post_recv(ep, 0, 64));
            let ep = Endpoint::connect(provider, dest, &cfg, post_all)?;
            let mut c = Client {
                ep: &ep,
                credits: DEPTH,
                pipeline: args.pipeline.min(DEPTH),
            };
            let mut report = Report::new(args.peer.json, plan.sweep, BW_COLS)
                .with_header(ep.header(args.peer.mode()));
            for &(size, n) in &plan.rounds {
                let flags = ep.inline_flags(size);
                c.batch(size, flags, plan.warmup_for(n))?;
                let t0 = Instant::now();
                c.batch(size, flags, n)?;
                let secs = t0.elapsed().as_secs_f64();
                let row = Row::new("ping", provider.name(), "send", args.peer.mode(), size, n)
                    .throughput(n, secs)
                    .with("pipeline", c.pipeline);
                report.push(&row);
            }
            ep.shutdown();
            report.finish();
        }
    }
    Ok(())
}

/// Post a Receive over `len` bytes at `off`.
fn post_recv(ep: &Endpoint, off: usize, len: usize) -> Result<(), String> {
    let sge = ep.sge(off..off + len);
    // SAFETY: the payload of these Receives is never read (only their lengths are), so many
    // Receives may share the same bytes.
    unsafe { ep.receive(RECV_CTX, &[sge]) }.map_err(common::err("receive"))
}

/// A Send of `len` bytes at `off` (`len` 0: no SGE).
fn send(ep: &Endpoint, ctx: u64, off: usize, len: usize, flags: OpFlags) -> Result<(), String> {
    let sge = [ep.sge(off..off + len)];
    let sge: &[Sge] = if len == 0 { &[] } else { &sge };
    // SAFETY: the bytes sent are never written while Sends are outstanding.
    unsafe { ep.send(ctx, sge, flags) }.map_err(common::err("send"))
}

/// The server: repost every Receive at once, return DEPTH / 2 credits every DEPTH / 2
/// messages, acknowledge each SYNC (after any credit it triggers, so the client has every
/// credit of a batch once it sees the acknowledgement), until `syncs` SYNCs have come and
/// every Send has completed.
fn serve(ep: &Endpoint, max: usize, syncs: usize) -> Result<(), String> {
    let (mut seen, mut received, mut sending) = (0, 0u32, 0u32);
    while seen < syncs || sending > 0 {
        let r = ep.next()?;
        match r.request_type {
            RequestType::Send => sending -= 1,
            RequestType::Receive => {
                post_recv(ep, 64, max)?;
                received += 1;
                if received == DEPTH / 2 {
                    received = 0;
                    send(ep, CREDIT_CTX, 0, 1, OpFlags::INLINE)?;
                    sending += 1;
                }
                if r.bytes_transferred == 0 {
                    seen += 1;
                    send(ep, SYNC_CTX, 0, 0, OpFlags::empty())?;
                    sending += 1;
                }
            }
            other => return Err(format!("unexpected {other:?} completion")),
        }
    }
    Ok(())
}

/// The client's side of the credit protocol; credits carry over between batches.
struct Client<'a> {
    ep: &'a Endpoint,
    credits: u32,
    pipeline: u32,
}

impl Client<'_> {
    /// Send `n` messages of `size` bytes, then a SYNC, and wait for its acknowledgement.
    fn batch(&mut self, size: usize, flags: OpFlags, n: u64) -> Result<(), String> {
        let ep = self.ep;
        let (mut sent, mut outstanding) = (0u64, 0u32);
        let (mut synced, mut acked) = (false, false);
        loop {
            while sent < n && self.credits > 0 && outstanding < self.pipeline {
                send(ep, DATA_CTX, 64, size, flags)?;
                sent += 1;
                self.credits -= 1;
                outstanding += 1;
            }
            if sent == n && !synced && self.credits > 0 {
                send(ep, SYNC_CTX, 0, 0, OpFlags::empty())?;
                synced = true;
                self.credits -= 1;
                outstanding += 1;
            }
            if acked && outstanding == 0 {
                return Ok(());
            }
            // One completion (spinning or asleep), then whatever else is already there.
            let mut r = Some(ep.next()?);
            while let Some(c) = r {
                let c = common::check(c)?;
                match c.request_type {
                    RequestType::Send => outstanding -= 1,
                    RequestType::Receive => {
                        post_recv(ep, 0, 64)?;
                        if c.bytes_transferred == 0 {
                            acked = true;
                        } else {
                            self.credits += DEPTH / 2;
                        }
                    }
                    other => return Err(format!("unexpected {other:?} completion")),
                }
                r = ep.try_next();
            }
        }
    }
}
