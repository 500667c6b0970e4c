//! `nd pingpong`: Send/Receive ping-pong latency, as Microsoft's ndpingpong measures it
//! (nd-reference.md §5.2): the client Sends, the server answers each Receive with a Send of
//! the same size; latency is half a round trip. Polling (default) or `--blocking` (each side
//! sleeps on CQ notifications, one wake-up per message).
//!
//! JSON: the [`Row`] latency keys, `op` = `send`.

use netdirect::{OpFlags, RequestType, Sge};

use crate::common::{
    self, Defaults, Endpoint, EndpointConfig, Laps, PeerArgs, Report, Role, Row, SizeArgs, LAT_COLS,
};

/// Arguments of `nd pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
}

/// 8 bytes, 100,000 round trips (ndpingpong's x_MaxIterations); a sweep moves at most
/// 256 MiB per size.
const DEFAULTS: Defaults = Defaults::new(8, 100_000, 256 << 20);
/// Receive slots on each side; a strict ping-pong needs one, the second is slack.
const SLOTS: usize = 2;
const SEND_CTX: u64 = u64::MAX;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    let plan = args.sizes.plan(DEFAULTS)?;
    let provider = args.peer.provider()?;
    let slot = plan.max_size().max(1);
    // [send | receive slot 0 | receive slot 1]
    let cfg = EndpointConfig {
        buf_len: slot * (SLOTS + 1),
        depth: SLOTS as u32 + 2,
        inline: 256,
        blocking: args.peer.blocking,
        settings: common::settings("pingpong", &args.peer, &plan, &[]),
        ..EndpointConfig::default()
    };
    let post_all = |ep: &Endpoint| (0..SLOTS).try_for_each(|i| post_recv(ep, slot, i));
    let mut report = Report::new(args.peer.json, plan.sweep, LAT_COLS);
    let ep = match role {
        Role::Server(addr) => Endpoint::serve(&provider, addr, args.peer.announce, &cfg, post_all)?,
        Role::Client(dest) => Endpoint::connect(&provider, dest, &cfg, post_all)?,
    };
    let inline_below = ep.adapter.query().inline_request_threshold as usize;
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let ping = || send(&ep, size, size < inline_below);
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    complete(&ep, slot, size, false, true)?;
                    ping()?;
                    complete(&ep, slot, size, true, false)?;
                }
            }
            Role::Client(_) => {
                let mut laps = Laps::time(warmup, n, || {
                    ping()?;
                    complete(&ep, slot, size, true, true)
                })?;
                let row = Row::new(
                    "pingpong",
                    provider.name(),
                    "send",
                    args.peer.mode(),
                    size,
                    n,
                );
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    ep.shutdown();
    report.finish();
    Ok(())
}

/// Reap completions until the awaited Send and/or Receive have come; a Receive is reposted
/// into its slot at once (ndpingpong reposts before answering).
fn complete(
    ep: &Endpoint,
    slot: usize,
    size: usize,
    mut send: bool,
    mut recv: bool,
) -> Result<(), String> {
    while send || recv {
        let r = ep.next()?;
        match r.request_type {
            RequestType::Send if send => send = false,
            RequestType::Receive if recv => {
                if r.bytes_transferred as usize != size {
                    return Err(format!(
                        "received {} bytes, expected {size}",
                        r.bytes_transferred
                    ));
                }
                post_recv(ep, slot, r.request_context as usize)?;
                recv = false;
            }
            other => return Err(format!("unexpected {other:?} completion")),
        }
    }
    Ok(())
}

fn post_recv(ep: &Endpoint, slot: usize, i: usize) -> Result<(), String> {
    let off = slot * (i + 1);
    let sge = ep.buf.sge(off..off + slot, ep.mr.get_local_token());
    // SAFETY: each receive slot is used by exactly one posted Receive; its bytes are never
    // read (the payload is not checked, only its length).
    unsafe { ep.qp.receive(i as u64, &[sge]) }.map_err(|e| format!("receive: {e}"))
}

fn send(ep: &Endpoint, size: usize, inline: bool) -> Result<(), String> {
    let sge = [ep.buf.sge(0..size, ep.mr.get_local_token())];
    let sge: &[Sge] = if size == 0 { &[] } else { &sge };
    // nd-reference §5.0: below InlineRequestThreshold the examples send inline.
    let flags = if inline {
        OpFlags::INLINE
    } else {
        OpFlags::empty()
    };
    // SAFETY: the send area is never written, and each Send completes before the next.
    unsafe { ep.qp.send(SEND_CTX, sge, flags) }.map_err(|e| format!("send: {e}"))
}
