//! `nd rping`: one-way RDMA Write or Read throughput, as Microsoft's ndrping measures it
//! (docs/ND-RULES.md §5.3): the server advertises a buffer once; the client keeps a pipeline of
//! requests outstanding against the same remote address and issues one more per completion.
//! The server only drives its I/O while it waits for the client's final message (a 0-byte
//! Send), polling or, with `--blocking`, asleep on a CQ notification; with `--passive` it
//! leaves that to its adapter's progress engine and makes no call but a look every 100 ms.
//!
//! JSON: the [`Row`] throughput keys, `op` = `write` or `read`, and
//! `pipeline` (requests kept outstanding).

use std::time::{Duration, Instant};

use netdirect::{NdResult, OpFlags, ProgressMode, Provider, Sge};

use crate::common::{
    self, check, Defaults, Endpoint, EndpointConfig, PeerArgs, Plan, Report, Role, Row, SizeArgs,
    BW_COLS,
};

/// Which one-sided operation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Op {
    Write,
    Read,
}

impl Op {
    fn name(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Read => "read",
        }
    }
}

/// Arguments of `nd rping`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    #[command(flatten)]
    peer: PeerArgs,
    #[command(flatten)]
    sizes: SizeArgs,
    #[command(flatten)]
    api: common::ApiArg,
    /// RDMA Write (default) or Read; both ends must agree (the server grants the rights).
    #[arg(long, value_enum, default_value_t = Op::Write)]
    op: Op,
    /// Requests kept outstanding (ndrping -q).
    #[arg(short = 'q', long, default_value_t = 16)]
    pipeline: u32,
    /// Server: a passive target, as on RDMA hardware. Its adapter's progress engine places the
    /// client's Writes and answers its Reads (`ND_PROGRESS=thread`) while the server makes no
    /// netdirect call but a look at its completion queue every 100 ms, for the client's
    /// final message.
    #[arg(long)]
    passive: bool,
}

/// 64 KiB requests; 4 GiB per size unless -n says otherwise (ndrping's volume). A sweep runs
/// perftest's count for bandwidth tests (5,000 iterations) per size, and at most
/// [`SWEEP_TIME`]: a million-iteration row of 1-byte Writes would take minutes.
const DEFAULTS: Defaults = Defaults {
    sweep_iterations: 5_000,
    ..Defaults::new(65536, 10_000_000, 4 << 30)
};
/// How long one size of a sweep without `-n` runs at most (its warm-up a fifth of it).
const SWEEP_TIME: Duration = Duration::from_millis(500);

const INFO_RECV: u64 = 1;
const INFO_SEND: u64 = 2;
const DONE: u64 = 3;
const OP_CTX: u64 = 4;
/// ndrping's PeerInfo: remote token, then the buffer address.
const INFO_LEN: usize = 16;
/// Reads the server lets the client have outstanding (Accept's inbound read limit).
const SERVER_IRD: u32 = 128;

pub(crate) fn run(args: &Args) -> Result<(), String> {
    // Checked before `--loopback` starts the two processes, so a refusal is said once.
    if args.pipeline == 0 || args.pipeline > SERVER_IRD {
        return Err(format!("-q must be 1..={SERVER_IRD}"));
    }
    let plan = args.sizes.plan(DEFAULTS)?;
    let provider = args.peer.provider()?;
    let Some(role) = args.peer.start()? else {
        return Ok(());
    };
    args.peer.serve(role, |role| {
        if args.api.api == common::Api::Ndk {
            let run = crate::ndk_rping::Run {
                read: args.op == Op::Read,
                op_name: args.op.name(),
                pipeline: args.pipeline,
                server_ird: SERVER_IRD,
                sweep_time: SWEEP_TIME,
            };
            return crate::ndk_rping::run_as(&args.peer, &run, role, &plan, &provider);
        }
        run_as(args, role, &plan, &provider)
    })
}

/// One run as `role`.
fn run_as(args: &Args, role: Role, plan: &Plan, provider: &Provider) -> Result<(), String> {
    let data = plan.max_size().max(1).next_multiple_of(64);
    let read = args.op == Op::Read;
    let mut cfg = EndpointConfig {
        buf_len: data + 64,
        max_message: plan.max_size(),
        blocking: args.peer.blocking,
        settings: common::settings("rping", &args.peer, plan, &[("op", args.op.name().into())]),
        api: args.api.api,
        ..EndpointConfig::default()
    };
    match role {
        Role::Server(addr) => {
            cfg.depth = 4;
            // ndrping: Accept(MaxInboundReadLimit, 0) in read mode.
            cfg.read_limits = (if read { SERVER_IRD } else { 0 }, 0);
            let ep = Endpoint::serve(provider, addr, args.peer.announce, &cfg, |ep| {
                post_info_recv(ep, data, DONE)
            })?;
            send_info(&ep)?;
            if args.passive {
                ep.adapter
                    .set_progress_mode(ProgressMode::Thread)
                    .map_err(common::err("set_progress_mode"))?;
                loop {
                    match ep.try_next() {
                        Some(r) if check(r)?.request_context == DONE => break,
                        Some(_) => {}
                        None => std::thread::sleep(Duration::from_millis(100)),
                    }
                }
            } else {
                // Every wait drives the I/O that places the client's Writes and answers its
                // Reads.
                while ep.next()?.request_context != DONE {}
            }
            ep.shutdown();
        }
        Role::Client(dest) => {
            cfg.depth = args.pipeline + 4;
            cfg.inline = 256;
            cfg.read_limits = (0, if read { args.pipeline } else { 0 });
            let ep = Endpoint::connect(provider, dest, &cfg, |ep| {
                post_info_recv(ep, data, INFO_RECV)
            })?;
            let (token, remote) = wait_info(&ep, data)?;
            let mut report = Report::new(args.peer.json, plan.sweep, BW_COLS)
                .with_header(ep.header(args.peer.mode()));
            for &(size, n) in &plan.rounds {
                let target = Target {
                    op: args.op,
                    size,
                    token,
                    remote,
                    // A Read has no INLINE form.
                    flags: if read {
                        OpFlags::empty()
                    } else {
                        ep.inline_flags(size)
                    },
                    depth: args.pipeline,
                };
                let budget = (plan.sweep && !plan.counted).then_some(SWEEP_TIME);
                pipeline(&ep, &target, plan.warmup_for(n), budget.map(|b| b / 5))?;
                let t0 = Instant::now();
                let n = pipeline(&ep, &target, n, budget)?;
                let secs = t0.elapsed().as_secs_f64();
                let row = Row::new(
                    "rping",
                    provider.name(),
                    args.op.name(),
                    args.peer.mode(),
                    size,
                    n,
                )
                .throughput(n, secs)
                .with("pipeline", args.pipeline);
                report.push(&row);
            }
            // Tell the server we are done (a zero-byte Send) and wait for it to leave.
            // SAFETY: a zero-byte Send names no memory.
            unsafe { ep.send(DONE, &[], OpFlags::empty()) }.map_err(common::err("send"))?;
            if ep.next()?.request_context != DONE {
                return Err("unexpected completion after the run".into());
            }
            ep.shutdown();
            report.finish();
        }
    }
    Ok(())
}

/// What the client issues.
struct Target {
    op: Op,
    size: usize,
    token: u32,
    remote: u64,
    flags: OpFlags,
    depth: u32,
}

/// Keep `t.depth` requests outstanding until `count` have completed, or until `budget` has
/// passed (then the outstanding ones complete and no more are posted); returns how many
/// completed.
fn pipeline(
    ep: &Endpoint,
    t: &Target,
    mut count: u64,
    budget: Option<Duration>,
) -> Result<u64, String> {
    let deadline = budget.map(|b| Instant::now() + b);
    let sge = [ep.sge(0..t.size)];
    let sge: &[Sge] = if t.size == 0 { &[] } else { &sge };
    let flags = t.flags;
    let (mut posted, mut done, mut outstanding) = (0u64, 0u64, 0u32);
    let mut more = [NdResult::EMPTY; 32];
    while done < count {
        while outstanding < t.depth && posted < count {
            // SAFETY: the buffer is registered; its bytes are neither checked nor changed while
            // requests use it (ndrping reads and writes the same buffer concurrently too).
            let res = unsafe {
                match t.op {
                    Op::Write => ep.write(OP_CTX, sge, t.remote, t.token, flags),
                    Op::Read => ep.read(OP_CTX, sge, t.remote, t.token, OpFlags::empty()),
                }
            };
            res.map_err(common::err("post"))?;
            posted += 1;
            outstanding += 1;
        }
        // One completion (spinning or asleep), then whatever else is already there.
        let first = ep.next()?;
        let k = ep.poll(&mut more);
        for &c in std::iter::once(&first).chain(&more[..k]) {
            let c = check(c)?;
            if c.request_context != OP_CTX {
                return Err(format!(
                    "unexpected completion (context {:#x})",
                    c.request_context
                ));
            }
        }
        done += 1 + k as u64;
        outstanding -= 1 + k as u32;
        if deadline.is_some_and(|d| posted < count && Instant::now() >= d) {
            count = posted;
        }
    }
    Ok(done)
}

fn post_info_recv(ep: &Endpoint, slot: usize, ctx: u64) -> Result<(), String> {
    let sge = ep.sge(slot..slot + INFO_LEN);
    // SAFETY: the slot is read only after this Receive completes.
    unsafe { ep.receive(ctx, &[sge]) }.map_err(common::err("receive"))
}

/// The server's buffer info, as ndrping's PeerInfo: remote token, then the address.
fn send_info(ep: &Endpoint) -> Result<(), String> {
    let mut info = [0u8; INFO_LEN];
    info[..4].copy_from_slice(&ep.remote_token()?.to_ne_bytes());
    info[8..].copy_from_slice(&(ep.buf.as_ptr() as u64).to_le_bytes());
    let sge = Sge::new(info.as_ptr() as *mut u8, INFO_LEN as u32, 0);
    // SAFETY: INLINE: `info` is read during the call only.
    unsafe { ep.send(INFO_SEND, &[sge], OpFlags::INLINE) }.map_err(common::err("send"))?;
    if ep.next()?.request_context != INFO_SEND {
        return Err("unexpected completion before the run".into());
    }
    Ok(())
}

fn wait_info(ep: &Endpoint, slot: usize) -> Result<(u32, u64), String> {
    let r = ep.next()?;
    if r.request_context != INFO_RECV || r.bytes_transferred as usize != INFO_LEN {
        return Err("no buffer info from the server".into());
    }
    // SAFETY: the Receive into the slot completed; nothing writes it any more.
    let b = unsafe { &ep.buf.as_slice()[slot..slot + INFO_LEN] };
    Ok((
        u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
        u64::from_le_bytes(b[8..].try_into().expect("8 bytes")),
    ))
}
