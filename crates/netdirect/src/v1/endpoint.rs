//! `INDEndpoint`: v1's queue pair, its posts translated to v2 posts on the same queue pair.
//!
//! The translation per post: the request context is the address of the caller's
//! [`NdResult1`]; each [`Sge1`]'s `hMr` gives the v2 local token ([`MrHandle`]), and an SGE
//! without one makes the request `INLINE` (v1's rule; v2 spells it with a flag); a remote
//! [`MwDescriptor`] plus `offset` gives the v2 remote address (`ntoh64(Base) + Offset`) and
//! token (`Token`, as it travels).

use std::fmt;

use super::{MemoryWindow, MrHandle, MwDescriptor, NdResult1, Sge1};
use crate::{Error, OpFlags, Result, Sge, Status};

/// A v1 endpoint (`INDEndpoint`), made by [`super::Connector::create_endpoint`]. Clones
/// share it.
///
/// # Safety of the posts
/// As for [`crate::QueuePair`]: the memory a request names is the provider's until the
/// request completes; and so is its [`NdResult1`], which must stay valid, and not be read or
/// written by the caller, until [`super::CompletionQueue::get_results`] returns its pointer
/// (with `SILENT_SUCCESS`, until a later request of the same queue completes, or for good
/// when it succeeds silently: v1 writes no result then).
#[derive(Clone)]
pub struct Endpoint {
    // By value, not behind another `Arc`: a post reaches the provider's queue pair through
    // one pointer, as a v2 post does.
    inner: Inner,
}

#[derive(Clone)]
struct Inner {
    qp: crate::QueuePair,
    owner: usize,
    inbound_read_limit: u32,
    outbound_read_limit: u32,
    max_inline: usize,
}

impl fmt::Debug for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("v1::Endpoint").field(&self.inner.qp).finish()
    }
}

/// SGEs translated on the stack up to this count.
const STACK_SGES: usize = 4;

/// The flags v1 takes on its posts (v1 has no INLINE flag: a NULL `hMr` says it).
const POST_FLAGS: OpFlags = OpFlags::SILENT_SUCCESS
    .union(OpFlags::READ_FENCE)
    .union(OpFlags::SEND_AND_SOLICIT_EVENT);

/// Run `f` with the v2 form of `sgl` and whether any SGE is inline.
#[inline]
fn with_sges<R>(sgl: &[Sge1], f: impl FnOnce(&[Sge], bool) -> Result<R>) -> Result<R> {
    let mut inline = false;
    let conv = |s: &Sge1, inline: &mut bool| -> Result<Sge> {
        let len = u32::try_from(s.length).map_err(|_| Error::new(Status::BUFFER_OVERFLOW))?;
        let token = match s.mr {
            Some(h) => h.local_token(),
            None => {
                *inline = true;
                0
            }
        };
        Ok(Sge::new(s.addr, len, token))
    };
    // The common shapes without a buffer to fill: no SGE, one SGE.
    match sgl {
        [] => return f(&[], false),
        [s] => {
            let one = [conv(s, &mut inline)?];
            return f(&one, inline);
        }
        _ => {}
    }
    if sgl.len() <= STACK_SGES {
        let mut v = [Sge::new(std::ptr::null_mut(), 0, 0); STACK_SGES];
        for (d, s) in v.iter_mut().zip(sgl) {
            *d = conv(s, &mut inline)?;
        }
        f(&v[..sgl.len()], inline)
    } else {
        let v = sgl
            .iter()
            .map(|s| conv(s, &mut inline))
            .collect::<Result<Vec<_>>>()?;
        f(&v, inline)
    }
}

/// The request context for `result`; `ND_INVALID_PARAMETER_1` for NULL.
#[inline]
fn context(result: *mut NdResult1) -> Result<u64> {
    if result.is_null() {
        return Err(Error::invalid_parameter(1));
    }
    Ok(result as usize as u64)
}

/// v1's post flags, else `ND_INVALID_PARAMETER_<param>`.
#[inline]
fn flags(flags: OpFlags, allowed: OpFlags, param: u32) -> Result<OpFlags> {
    if allowed.contains(flags) {
        Ok(flags)
    } else {
        Err(Error::invalid_parameter(param))
    }
}

impl Endpoint {
    pub(crate) fn new(
        qp: crate::QueuePair,
        owner: usize,
        inbound_read_limit: u32,
        outbound_read_limit: u32,
        max_inline: usize,
    ) -> Self {
        Self {
            inner: Inner {
                qp,
                owner,
                inbound_read_limit,
                outbound_read_limit,
                max_inline,
            },
        }
    }

    pub(crate) fn owner(&self) -> usize {
        self.inner.owner
    }

    pub(crate) fn qp(&self) -> &crate::QueuePair {
        &self.inner.qp
    }

    pub(crate) fn read_limits(&self) -> (u32, u32) {
        (
            self.inner.inbound_read_limit,
            self.inner.outbound_read_limit,
        )
    }

    /// The v2 queue pair underneath.
    ///
    /// # Safety
    /// Nothing may be posted through it: its completions reach a v1 completion queue, whose
    /// `get_results` takes every request context for an `ND_RESULT` pointer and writes
    /// through it.
    pub unsafe fn as_v2(&self) -> &crate::QueuePair {
        &self.inner.qp
    }

    /// The bytes an inline request may carry (`CreateEndpoint`'s `pMaxInlineData`).
    pub fn max_inline_data(&self) -> usize {
        self.inner.max_inline
    }

    /// `Flush`: every outstanding request completes `ND_CANCELED`; a connected endpoint is
    /// disconnected.
    pub fn flush(&self) -> Result<()> {
        self.inner.qp.flush()
    }

    /// `StartRequestBatch`: a hint that posts follow. Requests are handed to the provider as
    /// they are posted (which v1 allows), so it has nothing to do.
    pub fn start_request_batch(&self) {}

    /// `SubmitRequestBatch`: ends a batch; everything posted since `start_request_batch` is
    /// already under way.
    pub fn submit_request_batch(&self) {}

    /// `Send` the bytes of `sgl` (an SGE without registration is sent inline). Flags:
    /// `SILENT_SUCCESS`, `READ_FENCE`, `SEND_AND_SOLICIT_EVENT`, else
    /// `ND_INVALID_PARAMETER_4`. Synchronous errors as v2's Send (`ND_CONNECTION_INVALID`,
    /// `ND_NO_MORE_ENTRIES`, `ND_DATA_OVERRUN`, `ND_BUFFER_OVERFLOW`); no result is written for
    /// a post that fails.
    ///
    /// # Safety
    /// See the type's docs; an inline SGE must be readable during the call.
    #[inline]
    pub unsafe fn send(&self, result: *mut NdResult1, sgl: &[Sge1], flags_: OpFlags) -> Result<()> {
        let ctx = context(result)?;
        let flags_ = flags(flags_, POST_FLAGS, 4)?;
        with_sges(sgl, |s, inline| {
            let f = if inline {
                flags_ | OpFlags::INLINE
            } else {
                flags_
            };
            // SAFETY: forwarded contract.
            unsafe { self.inner.qp.send(ctx, s, f) }
        })
    }

    /// `SendAndInvalidate`: [`Endpoint::send`], and the peer's window `remote` names is
    /// invalidated when the message lands there (RFC 5040 §5.3); a window the peer did not
    /// bind through this connection is not invalidated and ends the connection. Flags as
    /// for Send, else `ND_INVALID_PARAMETER_5`.
    ///
    /// # Safety
    /// As [`Endpoint::send`].
    pub unsafe fn send_and_invalidate(
        &self,
        result: *mut NdResult1,
        sgl: &[Sge1],
        remote: &MwDescriptor,
        flags_: OpFlags,
    ) -> Result<()> {
        let ctx = context(result)?;
        let flags_ = flags(flags_, POST_FLAGS, 5)?;
        with_sges(sgl, |s, inline| {
            let f = if inline {
                flags_ | OpFlags::INLINE
            } else {
                flags_
            };
            // SAFETY: forwarded contract.
            unsafe {
                self.inner
                    .qp
                    .as_spi()
                    .send_and_invalidate(ctx, s, remote.token(), f)
            }
        })
    }

    /// `Receive` into `sgl`; may be posted before connecting. Every SGE needs its
    /// registration (one without completes `ND_ACCESS_VIOLATION`).
    ///
    /// # Safety
    /// See the type's docs.
    #[inline]
    pub unsafe fn receive(&self, result: *mut NdResult1, sgl: &[Sge1]) -> Result<()> {
        let ctx = context(result)?;
        // SAFETY: forwarded contract.
        with_sges(sgl, |s, _| unsafe { self.inner.qp.receive(ctx, s) })
    }

    /// `Bind` `window` over `len` bytes at `buffer` inside registration `mr`, for the peer
    /// of this endpoint; returns the descriptor to send it. `flags` must hold `ALLOW_READ`
    /// and/or `ALLOW_WRITE` (plus `SILENT_SUCCESS`, `READ_FENCE`), else
    /// `ND_INVALID_PARAMETER_6`; `ND_INVALID_PARAMETER_2` for a handle this adapter did not
    /// make. The result comes on the outbound queue. Other errors as v2's Bind.
    ///
    /// # Safety
    /// `result` as in the type's docs (the memory itself was promised at registration).
    pub unsafe fn bind(
        &self,
        result: *mut NdResult1,
        mr: MrHandle,
        window: &MemoryWindow,
        buffer: *const u8,
        len: usize,
        flags_: OpFlags,
    ) -> Result<MwDescriptor> {
        let ctx = context(result)?;
        let rights = OpFlags::ALLOW_READ | OpFlags::ALLOW_WRITE;
        let allowed = rights | OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE;
        if !allowed.contains(flags_) || !flags_.intersects(rights) {
            return Err(Error::invalid_parameter(6));
        }
        let region = window
            .adapter
            .region(mr)
            .ok_or(Error::invalid_parameter(2))?;
        self.inner
            .qp
            .bind(ctx, &region, &window.v2, buffer, len, flags_)?;
        Ok(MwDescriptor::new(
            buffer as usize as u64,
            len as u64,
            window.v2.get_remote_token(),
        ))
    }

    /// `Invalidate` a window bound through this endpoint; its descriptor stops working at
    /// once. Flags: `SILENT_SUCCESS`, `READ_FENCE`, else `ND_INVALID_PARAMETER_3`.
    ///
    /// # Safety
    /// `result` as in the type's docs.
    pub unsafe fn invalidate(
        &self,
        result: *mut NdResult1,
        window: &MemoryWindow,
        flags_: OpFlags,
    ) -> Result<()> {
        let ctx = context(result)?;
        self.inner.qp.invalidate(ctx, &window.v2, flags_)
    }

    /// `Read` from the peer's window `remote` at `offset` into `sgl` (their total length).
    /// Bounds, token and rights are the peer's to check, as in v2: a Read outside the window
    /// or with a stale token completes `ND_ACCESS_VIOLATION` (and ends the connection).
    /// Flags: `SILENT_SUCCESS`, `READ_FENCE`, else `ND_INVALID_PARAMETER_6`.
    ///
    /// # Safety
    /// See the type's docs.
    #[inline]
    pub unsafe fn read(
        &self,
        result: *mut NdResult1,
        sgl: &[Sge1],
        remote: &MwDescriptor,
        offset: u64,
        flags_: OpFlags,
    ) -> Result<()> {
        let ctx = context(result)?;
        let flags_ = flags(flags_, OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE, 6)?;
        let at = remote.base().wrapping_add(offset);
        // SAFETY: forwarded contract.
        with_sges(sgl, |s, _| unsafe {
            self.inner.qp.read(ctx, s, at, remote.token(), flags_)
        })
    }

    /// `Write` `sgl` to the peer's window `remote` at `offset` (an SGE without registration
    /// is sent inline). Checks and failures as for [`Endpoint::read`].
    ///
    /// # Safety
    /// As [`Endpoint::send`].
    #[inline]
    pub unsafe fn write(
        &self,
        result: *mut NdResult1,
        sgl: &[Sge1],
        remote: &MwDescriptor,
        offset: u64,
        flags_: OpFlags,
    ) -> Result<()> {
        let ctx = context(result)?;
        let flags_ = flags(flags_, OpFlags::SILENT_SUCCESS | OpFlags::READ_FENCE, 6)?;
        let at = remote.base().wrapping_add(offset);
        with_sges(sgl, |s, inline| {
            let f = if inline {
                flags_ | OpFlags::INLINE
            } else {
                flags_
            };
            // SAFETY: forwarded contract.
            unsafe { self.inner.qp.write(ctx, s, at, remote.token(), f) }
        })
    }
}
