//! `nd pingpong --api ndk`: the same Send/Receive ping-pong as `nd pingpong`, through
//! `netdirect::ndk` ([`NdkEndpoint`]: NDK's objects, NTSTATUS returns, completion callbacks,
//! a connect event on the server, `NdkGetCqResultsEx` polling or `NdkArmCq` with
//! `--blocking`). The loop is `pingpong`'s, answer first and repost after (or
//! `--repost-first`), so the two APIs' rows compare directly. Both ends use NDK.

use netdirect::ndk::{NdkOpFlags, NdkOperationType, NdkSge, NtStatus};
use netdirect::{MrFlags, Provider};

use crate::common::{Laps, PeerArgs, Plan, Report, Role, Row, LAT_COLS};
use crate::ndk_endpoint::{fail, NdkConfig, NdkEndpoint};

const SLOTS: usize = 2;
const SEND_CTX: u64 = u64::MAX;
const INLINE: u32 = 256;

fn repost(ep: &NdkEndpoint, slots: &[NdkSge; SLOTS], i: usize) -> Result<(), String> {
    // SAFETY: each slot is used by one posted Receive at a time; its bytes are never read.
    let s = unsafe { ep.qp.receive(i as u64, std::slice::from_ref(&slots[i])) };
    if s == NtStatus::SUCCESS {
        Ok(())
    } else {
        Err(fail("receive", s))
    }
}

/// Reap completions until the awaited Send and/or Receive have come; the Receive's slot.
#[inline]
fn complete(
    ep: &NdkEndpoint,
    size: usize,
    mut send: bool,
    mut recv: bool,
) -> Result<usize, String> {
    let mut slot = 0;
    while send || recv {
        let r = ep.next()?;
        match r.ty {
            NdkOperationType::Send if send => send = false,
            NdkOperationType::Receive
                if recv
                    && r.bytes_transferred as usize == size
                    && (r.request_context as usize) < SLOTS =>
            {
                slot = r.request_context as usize;
                recv = false;
            }
            other => {
                return Err(format!(
                    "unexpected {other:?} completion ({} bytes)",
                    r.bytes_transferred
                ))
            }
        }
    }
    Ok(slot)
}

/// One run as `role`: `pingpong::run_as` through NDK.
pub(crate) fn run_as(
    peer: &PeerArgs,
    repost_first: bool,
    role: Role,
    plan: &Plan,
    provider: &Provider,
) -> Result<(), String> {
    let repost_name = if repost_first { "first" } else { "after" };
    let slot = plan.max_size().max(1);
    let cfg = NdkConfig {
        buf_len: slot * (SLOTS + 1),
        depth: SLOTS as u32 + 2,
        inline: INLINE,
        read_limits: (0, 0),
        mr_flags: MrFlags::ALLOW_LOCAL_WRITE,
        blocking: peer.blocking,
    };
    let slots_of = |ep: &NdkEndpoint| -> [NdkSge; SLOTS] {
        std::array::from_fn(|i| ep.sge(slot * (i + 1)..slot * (i + 2)))
    };
    let post_all = |ep: &NdkEndpoint| {
        let slots = slots_of(ep);
        (0..SLOTS).try_for_each(|i| repost(ep, &slots, i))
    };
    let ep = match role {
        Role::Server(addr) => NdkEndpoint::serve(provider, addr, peer.announce, &cfg, post_all)?,
        Role::Client(dest) => NdkEndpoint::connect(provider, dest, &cfg, post_all)?,
    };
    let v = ep.adapter.version();
    let header = vec![format!(
        " NDK {}.{} over {} ({})",
        v.major,
        v.minor,
        provider.name(),
        peer.mode()
    )];
    let mut report = Report::new(peer.json, plan.sweep, LAT_COLS).with_header(header);
    let slots = slots_of(&ep);
    let mut owed = None;
    for &(size, n) in &plan.rounds {
        let warmup = plan.warmup_for(n);
        let flags = if size as u32 <= INLINE {
            NdkOpFlags::INLINE
        } else {
            NdkOpFlags::NONE
        };
        let sge = ep.sge(0..size);
        let sge: &[NdkSge] = if size == 0 {
            &[]
        } else {
            std::slice::from_ref(&sge)
        };
        let ping = |ep: &NdkEndpoint| -> Result<(), String> {
            // SAFETY: the send area is never written, and each Send completes before the next.
            let s = unsafe { ep.qp.send(SEND_CTX, sge, flags) };
            if s == NtStatus::SUCCESS {
                Ok(())
            } else {
                Err(fail("send", s))
            }
        };
        match role {
            Role::Server(_) => {
                for _ in 0..warmup + n {
                    let i = complete(&ep, size, false, true)?;
                    if repost_first {
                        repost(&ep, &slots, i)?;
                    }
                    ping(&ep)?;
                    if !repost_first {
                        repost(&ep, &slots, i)?;
                    }
                    complete(&ep, size, true, false)?;
                }
            }
            Role::Client(_) => {
                let e = &ep;
                let mut laps = Laps::time(warmup, n, || {
                    ping(e)?;
                    if let Some(i) = owed.take() {
                        repost(e, &slots, i)?;
                    }
                    let i = complete(e, size, true, true)?;
                    if repost_first {
                        repost(e, &slots, i)
                    } else {
                        owed = Some(i);
                        Ok(())
                    }
                })?;
                let row = Row::new("pingpong", provider.name(), "send", peer.mode(), size, n)
                    .with("repost", repost_name)
                    .with("api", "ndk");
                report.push(&row.latency(laps.samples()));
            }
        }
    }
    ep.close();
    report.finish();
    Ok(())
}
