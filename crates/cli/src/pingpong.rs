//! `nd pingpong`: Send/Receive ping-pong latency, as Microsoft's ndpingpong measures it
//! (nd-reference.md §5.2): the client Sends, the server answers each Receive with a Send of
//! the same size; latency is half a round trip. Polling (default) or `--blocking` (each side
//! sleeps on CQ notifications, one wake-up per message).
//!
//! JSON: the [`Row`] latency keys, `op` = `send`.

use netdirect::{NdResult, OpFlags, RequestType, Sge};

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
    let post_all = |ep: &Endpoint| {
        let token = ep.mr.get_local_token();
        (0..SLOTS).try_for_each(|i| post_recv(ep, &recv_sge(ep, slot, i, token), i))
    };
    let mut report = Report::new(args.peer.json, plan.sweep, LAT_COLS);
    let ep = match role {
        Role::Server(addr) => Endpoint::serve(&provider, addr, args.peer.announce, &cfg, post_all)?,
        Role::Client(dest) => Endpoint::connect(&provider, dest, &cfg, post_all)?,
    };
    // The Receive slots' SGEs, made once: the repost is on the path from a message to its
    // answer.
    let token = ep.mr.get_local_token();
    let slots: [Sge; SLOTS] = std::array::from_fn(|i| recv_sge(&ep, slot, i, token));
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let flags = ep.inline_flags(size);
        let sge = ep.buf.sge(0..size, token);
        let sge: &[Sge] = if size == 0 {
            &[]
        } else {
            std::slice::from_ref(&sge)
        };
        let ping = || send(&ep, sge, flags);
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    complete(&ep, &slots, size, false, true)?;
                    ping()?;
                    complete(&ep, &slots, size, true, false)?;
                }
            }
            Role::Client(_) => {
                let mut laps = Laps::time(warmup, n, || {
                    ping()?;
                    complete(&ep, &slots, size, true, true)
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
#[inline]
fn complete(
    ep: &Endpoint,
    slots: &[Sge; SLOTS],
    size: usize,
    mut send: bool,
    mut recv: bool,
) -> Result<(), String> {
    while send || recv {
        let r = ep.next()?;
        match r.request_type {
            RequestType::Send if send => send = false,
            RequestType::Receive if recv && r.bytes_transferred as usize == size => {
                let i = r.request_context as usize;
                let Some(sge) = slots.get(i) else {
                    return Err(unexpected(&r, size));
                };
                post_recv(ep, sge, i)?;
                recv = false;
            }
            _ => return Err(unexpected(&r, size)),
        }
    }
    Ok(())
}

/// What was wrong with a completion [`complete`] did not expect. Out of line: the error
/// formatting stays off the loop's path.
#[cold]
#[inline(never)]
fn unexpected(r: &NdResult, size: usize) -> String {
    match r.request_type {
        RequestType::Receive if r.bytes_transferred as usize != size => {
            format!("received {} bytes, expected {size}", r.bytes_transferred)
        }
        RequestType::Receive if r.request_context as usize >= SLOTS => format!(
            "a Receive completed with context {:#x}, which no posted Receive had",
            r.request_context
        ),
        other => format!("unexpected {other:?} completion"),
    }
}

/// Receive slot `i` of `slot` bytes (after the send area).
fn recv_sge(ep: &Endpoint, slot: usize, i: usize, token: u32) -> Sge {
    let off = slot * (i + 1);
    ep.buf.sge(off..off + slot, token)
}

#[inline]
fn post_recv(ep: &Endpoint, sge: &Sge, i: usize) -> Result<(), String> {
    // SAFETY: each receive slot is used by exactly one posted Receive; its bytes are never
    // read (the payload is not checked, only its length).
    unsafe { ep.qp.receive(i as u64, std::slice::from_ref(sge)) }.map_err(common::err("receive"))
}

#[inline]
fn send(ep: &Endpoint, sge: &[Sge], flags: OpFlags) -> Result<(), String> {
    // SAFETY: the send area is never written, and each Send completes before the next.
    unsafe { ep.qp.send(SEND_CTX, sge, flags) }.map_err(common::err("send"))
}
