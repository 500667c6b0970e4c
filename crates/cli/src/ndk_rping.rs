//! `nd rping --api ndk`: `nd rping`'s one-way RDMA Write or Read throughput through
//! `netdirect::ndk` ([`NdkEndpoint`]): the server advertises its buffer (remote token, then
//! address, as ndrping's PeerInfo) in a Send and waits for the client's final zero-byte Send;
//! the client keeps `-q` `NdkWrite`s or `NdkRead`s outstanding and reaps them with
//! `NdkGetCqResultsEx`. Both ends use NDK.

use std::time::{Duration, Instant};

use netdirect::ndk::{NdkOpFlags, NdkResultEx, NdkSge};
use netdirect::{MrFlags, Provider};

use crate::common::{PeerArgs, Plan, Report, Role, Row, BW_COLS};
use crate::ndk_endpoint::{ok, NdkConfig, NdkEndpoint};

const INFO_RECV: u64 = 1;
const INFO_SEND: u64 = 2;
const DONE: u64 = 3;
const OP_CTX: u64 = 4;
const INFO_LEN: usize = 16;

/// What `nd rping` asked for.
pub(crate) struct Run {
    pub(crate) read: bool,
    pub(crate) op_name: &'static str,
    pub(crate) pipeline: u32,
    pub(crate) server_ird: u32,
    pub(crate) sweep_time: Duration,
}

fn post_info_recv(ep: &NdkEndpoint, slot: usize, ctx: u64) -> Result<(), String> {
    let sge = ep.sge(slot..slot + INFO_LEN);
    // SAFETY: the slot is read only after this Receive completes.
    ok("receive", unsafe { ep.qp.receive(ctx, &[sge]) })
}

/// One run as `role`: `rping::run_as` through NDK.
pub(crate) fn run_as(
    peer: &PeerArgs,
    run: &Run,
    role: Role,
    plan: &Plan,
    provider: &Provider,
) -> Result<(), String> {
    let data = plan.max_size().max(1).next_multiple_of(64);
    let mut cfg = NdkConfig {
        buf_len: data + 64,
        depth: 4,
        inline: 256,
        read_limits: (0, 0),
        mr_flags: MrFlags::ALLOW_LOCAL_WRITE
            | MrFlags::ALLOW_REMOTE_READ
            | MrFlags::ALLOW_REMOTE_WRITE
            | MrFlags::RDMA_READ_SINK,
        blocking: peer.blocking,
    };
    match role {
        Role::Server(addr) => {
            cfg.read_limits = (if run.read { run.server_ird } else { 0 }, 0);
            let ep = NdkEndpoint::serve(provider, addr, peer.announce, &cfg, |ep| {
                post_info_recv(ep, data, DONE)
            })?;
            let mut info = [0u8; INFO_LEN];
            info[..4].copy_from_slice(&ep.mr.get_remote_token().to_ne_bytes());
            info[8..].copy_from_slice(&(ep.buf.as_ptr() as u64).to_le_bytes());
            let sge = NdkSge::new(info.as_ptr().cast_mut(), INFO_LEN as u32, 0);
            // SAFETY: INLINE: `info` is read during the call only.
            ok("send", unsafe {
                ep.qp.send(INFO_SEND, &[sge], NdkOpFlags::INLINE)
            })?;
            loop {
                if ep.next()?.request_context == DONE {
                    break;
                }
            }
            ep.close();
        }
        Role::Client(dest) => {
            cfg.depth = run.pipeline + 4;
            cfg.read_limits = (0, if run.read { run.pipeline } else { 0 });
            let ep = NdkEndpoint::connect(provider, dest, &cfg, |ep| {
                post_info_recv(ep, data, INFO_RECV)
            })?;
            let r = ep.next()?;
            if r.request_context != INFO_RECV || r.bytes_transferred as usize != INFO_LEN {
                return Err("no buffer info from the server".into());
            }
            // SAFETY: the Receive into the slot completed; nothing writes it any more.
            let b = unsafe { &ep.buf.as_slice()[data..data + INFO_LEN] };
            let token = u32::from_ne_bytes(b[..4].try_into().expect("4 bytes"));
            let remote = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
            let v = ep.adapter.version();
            let header = vec![format!(
                " NDK {}.{} over {} ({})",
                v.major,
                v.minor,
                provider.name(),
                peer.mode()
            )];
            let mut report = Report::new(peer.json, plan.sweep, BW_COLS).with_header(header);
            for &(size, n) in &plan.rounds {
                let flags = if !run.read && size <= 256 {
                    NdkOpFlags::INLINE
                } else {
                    NdkOpFlags::NONE
                };
                let budget = (plan.sweep && !plan.counted).then_some(run.sweep_time);
                let t = (run.read, size, token, remote, flags, run.pipeline);
                pipeline(&ep, t, plan.warmup_for(n), budget.map(|b| b / 5))?;
                let t0 = Instant::now();
                let n = pipeline(&ep, t, n, budget)?;
                let secs = t0.elapsed().as_secs_f64();
                let row = Row::new("rping", provider.name(), run.op_name, peer.mode(), size, n)
                    .throughput(n, secs)
                    .with("pipeline", run.pipeline)
                    .with("api", "ndk");
                report.push(&row);
            }
            // SAFETY: a zero-byte Send names no memory.
            ok("send", unsafe { ep.qp.send(DONE, &[], NdkOpFlags::NONE) })?;
            if ep.next()?.request_context != DONE {
                return Err("unexpected completion after the run".into());
            }
            ep.close();
            report.finish();
        }
    }
    Ok(())
}

/// Keep `depth` requests outstanding until `count` have completed (or `budget` passed);
/// how many completed.
fn pipeline(
    ep: &NdkEndpoint,
    (read, size, token, remote, flags, depth): (bool, usize, u32, u64, NdkOpFlags, u32),
    mut count: u64,
    budget: Option<Duration>,
) -> Result<u64, String> {
    let deadline = budget.map(|b| Instant::now() + b);
    let sge = [ep.sge(0..size)];
    let sge: &[NdkSge] = if size == 0 { &[] } else { &sge };
    let (mut posted, mut done, mut outstanding) = (0u64, 0u64, 0u32);
    let mut more = [NdkResultEx::EMPTY; 32];
    while done < count {
        while outstanding < depth && posted < count {
            // SAFETY: the buffer is registered; its bytes are neither checked nor changed
            // while requests use it (ndrping reads and writes one buffer concurrently too).
            let s = unsafe {
                if read {
                    ep.qp.read(OP_CTX, sge, remote, token, NdkOpFlags::NONE)
                } else {
                    ep.qp.write(OP_CTX, sge, remote, token, flags)
                }
            };
            ok("post", s)?;
            posted += 1;
            outstanding += 1;
        }
        let first = ep.next()?;
        let k = ep.poll(&mut more)?;
        for c in std::iter::once(&first).chain(&more[..k]) {
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
