//! `nd pingpong`: Send/Receive ping-pong latency, as Microsoft's ndpingpong measures it
//! (docs/ND-RULES.md §5.2): the client Sends, the server answers each Receive with a Send of
//! the same size; latency is half a round trip. Polling (default) or `--blocking` (each side
//! sleeps on CQ notifications, one wake-up per message).
//!
//! Each message consumes one posted Receive and each side posts one back per message, as in
//! ndpingpong. Where the repost goes is the one difference: ndpingpong reposts a Receive
//! before it answers, which puts the repost on the path from a message to its answer; `nd
//! pingpong` answers first and reposts while the answer travels, with a second Receive
//! posted so that the next message always finds one (the order a latency-bound application
//! uses). `--repost-first` restores ndpingpong's order (docs/ARCHITECTURE.md, "What an 8-byte
//! shm message costs", sixteenth session, has both measured).
//!
//! JSON: the [`Row`] latency keys, `op` = `send`, `repost` = `after` or `first`.

use netdirect::{NdResult, OpFlags, Provider, RequestType, Sge};

use crate::common::{
    self, Defaults, Endpoint, EndpointConfig, Laps, PeerArgs, Plan, Report, Role, Row, SizeArgs,
    LAT_COLS,
};

/// Arguments of `nd pingpong`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    #[command(flatten)]
    api: common::ApiArg,
    /// Repost each Receive before answering it, as ndpingpong does, instead of after the
    /// answer is out. Both ends must agree.
    #[arg(long)]
    repost_first: bool,
}

/// 8 bytes, 100,000 round trips (ndpingpong's x_MaxIterations); a sweep moves at most
/// 256 MiB per size.
const DEFAULTS: Defaults = Defaults::new(8, 100_000, 256 << 20);
/// Receive slots on each side: the next message lands in one while the other waits to be
/// reposted after the answer (a strict ping-pong with the repost first needs only one).
const SLOTS: usize = 2;
const SEND_CTX: u64 = u64::MAX;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    // Checked before `--loopback` starts the two processes, so a refusal is said once.
    let plan = args.sizes.plan(DEFAULTS)?;
    let provider = args.peer.provider()?;
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    args.peer.serve(role, |role| {
        if args.api.api == common::Api::Ndk {
            return crate::ndk_pingpong::run_as(
                &args.peer,
                args.repost_first,
                role,
                &plan,
                &provider,
            );
        }
        run_as(args, role, &plan, &provider)
    })
}

/// One run as `role`.
fn run_as(args: &Args, role: Role, plan: &Plan, provider: &Provider) -> Result<(), String> {
    let repost = if args.repost_first { "first" } else { "after" };
    let slot = plan.max_size().max(1);
    // [send | receive slot 0 | receive slot 1]
    let cfg = EndpointConfig {
        buf_len: slot * (SLOTS + 1),
        max_message: plan.max_size(),
        depth: SLOTS as u32 + 2,
        inline: 256,
        blocking: args.peer.blocking,
        settings: common::settings("pingpong", &args.peer, plan, &[("repost", repost.into())]),
        api: args.api.api,
        ..EndpointConfig::default()
    };
    let post_all = |ep: &Endpoint| {
        let slots = Slots::new(ep, slot);
        (0..SLOTS).try_for_each(|i| slots.repost(ep, i))
    };
    let ep = match role {
        Role::Server(addr) => Endpoint::serve(provider, addr, args.peer.announce, &cfg, post_all)?,
        Role::Client(dest) => Endpoint::connect(provider, dest, &cfg, post_all)?,
    };
    let mut report =
        Report::new(args.peer.json, plan.sweep, LAT_COLS).with_header(ep.header(args.peer.mode()));
    // The SGEs are made once, not per message.
    let slots = Slots::new(&ep, slot);
    // The client's slot still to repost, after its next Send (across sizes too).
    let mut owed = None;
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let flags = ep.inline_flags(size);
        let sge = ep.sge(0..size);
        let sge: &[Sge] = if size == 0 {
            &[]
        } else {
            std::slice::from_ref(&sge)
        };
        let ping = || send(&ep, sge, flags);
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    let i = complete(&ep, size, false, true)?;
                    if args.repost_first {
                        slots.repost(&ep, i)?;
                    }
                    ping()?;
                    if !args.repost_first {
                        slots.repost(&ep, i)?;
                    }
                    complete(&ep, size, true, false)?;
                }
            }
            Role::Client(_) => {
                let mut laps = Laps::time(warmup, n, || {
                    ping()?;
                    if let Some(i) = owed.take() {
                        slots.repost(&ep, i)?;
                    }
                    let i = complete(&ep, size, true, true)?;
                    if args.repost_first {
                        slots.repost(&ep, i)
                    } else {
                        owed = Some(i);
                        Ok(())
                    }
                })?;
                let row = Row::new(
                    "pingpong",
                    provider.name(),
                    "send",
                    args.peer.mode(),
                    size,
                    n,
                )
                .with("repost", repost);
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    ep.shutdown();
    report.finish();
    Ok(())
}

/// Reap completions until the awaited Send and/or Receive have come; returns the Receive's
/// slot (0 if none was awaited), for the caller to repost.
#[inline]
fn complete(ep: &Endpoint, size: usize, mut send: bool, mut recv: bool) -> Result<usize, String> {
    let mut slot = 0;
    while send || recv {
        let r = ep.next()?;
        match r.request_type {
            RequestType::Send if send => send = false,
            RequestType::Receive
                if recv
                    && r.bytes_transferred as usize == size
                    && (r.request_context as usize) < SLOTS =>
            {
                slot = r.request_context as usize;
                recv = false;
            }
            _ => return Err(unexpected(&r, size)),
        }
    }
    Ok(slot)
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

/// The Receive slots' SGEs, `slot` bytes each after the send area; a Receive's context is its
/// slot's index.
struct Slots([Sge; SLOTS]);

impl Slots {
    fn new(ep: &Endpoint, slot: usize) -> Self {
        Self(std::array::from_fn(|i| {
            let off = slot * (i + 1);
            ep.sge(off..off + slot)
        }))
    }

    /// Post the Receive of slot `i` (`i < SLOTS`, as [`complete`] returns it).
    #[inline]
    fn repost(&self, ep: &Endpoint, i: usize) -> Result<(), String> {
        // SAFETY: each receive slot is used by exactly one posted Receive at a time (a slot
        // is reposted only after its Receive completed); its bytes are never read (the
        // payload is not checked, only its length).
        unsafe { ep.receive(i as u64, std::slice::from_ref(&self.0[i])) }
            .map_err(common::err("receive"))
    }
}

#[inline]
fn send(ep: &Endpoint, sge: &[Sge], flags: OpFlags) -> Result<(), String> {
    // SAFETY: the send area is never written, and each Send completes before the next.
    unsafe { ep.send(SEND_CTX, sge, flags) }.map_err(common::err("send"))
}
