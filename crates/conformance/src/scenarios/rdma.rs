//! One-sided RDMA: Read and Write of every size and SGE count, read fence, read limits,
//! memory windows (IND2QueuePair Read/Write/Bind/Invalidate, IND2MemoryWindow; §2.7–§2.9,
//! R-MW-1, R-MR-2, R-SIZE-1, D6, D11).
//!
//! The target tells the initiator where to go with a Send carrying an [`Area`] (remote token,
//! address, length), as ndrping's PeerInfo does.

use std::ops::Range;

use netdirect::{MrFlags, OpFlags, RequestType, Status};

use super::{any_port, await_request, client_bye, client_side, server_bye, server_side};
// The request contexts every scenario shares, for the scenarios below.
use super::{BYE, CLIENT_QP, SERVER_QP};
use crate::check::{
    expect_bytes, expect_empty, expect_results, expect_status, fast_pattern, next_results, wait_ok,
    Check, Context, Expect,
};
use crate::side::{listen, Ctx, Side, SideConfig};
use crate::{ensure, ensure_eq};

mod protection;
mod reads;
mod windows;
mod write_read;

pub(crate) use protection::{
    protection_client, protection_server, window_other_qp_client, window_other_qp_server,
};
pub(crate) use reads::{
    read_fence_client, read_fence_server, read_limits_client, read_limits_server,
};
pub(crate) use windows::{windows_client, windows_server};
use write_read::INFO;
pub(crate) use write_read::{write_read_client, write_read_server};

const MIB: usize = 1 << 20;
/// The largest transfer checked (R-SIZE-1: MaxRegistrationSize ≥ 64 MiB; ndmw reads 32 MiB).
const BIG: usize = 64 * MIB;

/// Where a peer may Read or Write: its remote token, the address, the length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub(crate) struct Area {
    pub(crate) token: u32,
    pub(crate) addr: u64,
    pub(crate) len: u64,
}

/// Bytes of an encoded [`Area`].
pub(crate) const AREA_LEN: usize = 20;

impl Area {
    pub(crate) fn encode(&self) -> [u8; AREA_LEN] {
        let mut b = [0u8; AREA_LEN];
        b[..4].copy_from_slice(&self.token.to_ne_bytes());
        b[4..12].copy_from_slice(&self.addr.to_le_bytes());
        b[12..20].copy_from_slice(&self.len.to_le_bytes());
        b
    }

    pub(crate) fn decode(b: &[u8]) -> Self {
        let u64_at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().expect("8 bytes"));
        Self {
            token: u32::from_ne_bytes(b[..4].try_into().expect("4 bytes")),
            addr: u64_at(4),
            len: u64_at(12),
        }
    }
}

/// An expectation for an initiator completion of any type.
pub(crate) fn done(ty: RequestType, status: Status, ctx: u64, qp: u64) -> Expect {
    Expect {
        status,
        request_type: ty,
        request_context: ctx,
        qp_context: qp,
        bytes: None,
    }
}

/// The message area: the last 64 KiB of a side's buffer, one 4 KiB slot per message.
pub(crate) fn msg_slot(side: &Side, slot: usize) -> Range<usize> {
    let base = side.buf.len() - 64 * 1024 + slot * 4096;
    base..base + 4096
}

/// Send `bytes` from message slot `slot`; waits for the Send completion.
pub(crate) fn send_msg(side: &Side, slot: usize, ctx: u64, bytes: &[u8]) -> Check {
    let r = msg_slot(side, slot);
    let r = r.start..r.start + bytes.len();
    // SAFETY: no request uses this slot now.
    unsafe { side.write(std::slice::from_ref(&r), bytes) };
    side.send(ctx, &[r], OpFlags::empty()).ctx("Send")?;
    let c = next_results(&side.scq, 1, "Send")?;
    Expect::send(Status::SUCCESS, ctx, side.qp_context).check(&c[0], "Send")
}

/// Post a Receive into message slot `slot`.
pub(crate) fn post_msg(side: &Side, slot: usize, ctx: u64) -> Check {
    side.recv(ctx, &[msg_slot(side, slot)]).ctx("post Receive")
}

/// Wait for the next Receive (context `ctx`) and return its bytes.
pub(crate) fn recv_msg(side: &Side, slot: usize, ctx: u64, what: &str) -> Check<Vec<u8>> {
    let r = next_results(&side.rcq, 1, what)?;
    Expect::recv(Status::SUCCESS, ctx, side.qp_context, None).check(&r[0], what)?;
    // SAFETY: the Receive into this slot has completed.
    Ok(unsafe { side.read(&[msg_slot(side, slot)], r[0].bytes_transferred as usize) })
}

/// `size` bytes as `n` SGE ranges starting at `base`, of uneven lengths, separated by gaps
/// of `gap` bytes (so every SGE boundary is somewhere new). Zero bytes: `n` empty SGEs.
pub(crate) fn split(
    base: usize,
    size: usize,
    n: usize,
    gap: usize,
    skew: usize,
) -> Vec<Range<usize>> {
    let mut out = Vec::with_capacity(n);
    let mut at = base;
    let mut left = size;
    for i in 0..n {
        let share = if i + 1 == n {
            left
        } else {
            // Uneven: every other SGE gets a little more or less.
            let even = size / n;
            let wobble = if i % 2 == 0 { skew } else { 0 };
            (even + wobble).min(left)
        };
        out.push(at..at + share);
        at += share + gap;
        left -= share;
    }
    out
}

fn config(buf_len: usize, sge: u32) -> SideConfig {
    SideConfig {
        buf_len,
        depth: 16,
        sge,
        ..SideConfig::default()
    }
}
