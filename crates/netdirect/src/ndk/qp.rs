//! `NDK_QP`: work-request posts (nd-v1-ndk §2.4–§2.6). Posts have no callback:
//! `STATUS_SUCCESS` means a CQ entry follows (unless `SILENT_SUCCESS`), an inline failure
//! means none. `NDK_OP_FLAG_DEFER` is honoured by posting at once, which the deferred
//! processing scheme allows ("the provider may start it at any time"), and which keeps its
//! one provider rule (earlier deferred requests reach the engine before an inline failure
//! returns) by construction.

use std::fmt;
use std::ops::BitOr;
use std::sync::Arc;

use super::adapter::Shared;
use super::callbacks::{CloseCompletion, Core};
use super::{NdkMr, NdkMw, NtStatus};
use crate::{OpFlags, QueuePair, Sge};

/// `NDK_SGE`: the same 16-byte layout as ND's (a virtual address inside a registered MR,
/// a length, the MR's local token).
pub type NdkSge = Sge;

/// `NDK_OP_FLAG_*`: NDK's values, which differ from ND's (`INLINE` is 0x40, not 0x20;
/// `ALLOW_REMOTE_WRITE` is 0x30 and includes `ALLOW_LOCAL_WRITE` 0x10).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
pub struct NdkOpFlags(pub u32);

impl NdkOpFlags {
    /// No flags.
    pub const NONE: Self = Self(0);
    /// No CQ entry on success.
    pub const SILENT_SUCCESS: Self = Self(0x001);
    /// Wait for earlier Reads first.
    pub const READ_FENCE: Self = Self(0x002);
    /// Send: fire the peer's SOLICITED arm.
    pub const SEND_AND_SOLICIT_EVENT: Self = Self(0x004);
    /// Bind: the peer may Read the window.
    pub const ALLOW_REMOTE_READ: Self = Self(0x008);
    /// Fast register: local write.
    pub const ALLOW_LOCAL_WRITE: Self = Self(0x010);
    /// Bind: the peer may Write the window (includes local write).
    pub const ALLOW_REMOTE_WRITE: Self = Self(0x030);
    /// Send and Write: copy the data during the call; tokens are ignored.
    pub const INLINE: Self = Self(0x040);
    /// Fast register: the region may be an RDMA Read sink.
    pub const RDMA_READ_SINK: Self = Self(0x080);
    /// Read: invalidate the local region afterwards (needs the adapter flag, never set here).
    pub const RDMA_READ_LOCAL_INVALIDATE: Self = Self(0x100);
    /// A hint: more requests follow; the chain ends with one without it (NDKPI 1.2).
    pub const DEFER: Self = Self(0x200);

    /// Whether every bit of `other` is set.
    pub fn contains(self, other: Self) -> bool {
        self.0 & other.0 == other.0
    }
}

impl BitOr for NdkOpFlags {
    type Output = Self;
    fn bitor(self, rhs: Self) -> Self {
        Self(self.0 | rhs.0)
    }
}

/// The requests NDK flags are checked for.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Post {
    Send,
    Read,
    Write,
    Bind,
    Invalidate,
}

/// ND's flags for NDK's on a `post`; `STATUS_INVALID_PARAMETER` for a flag the request does
/// not take, `STATUS_NOT_SUPPORTED` for read-local-invalidate.
fn nd_flags(f: NdkOpFlags, post: Post) -> Result<OpFlags, NtStatus> {
    let mut left = f.0 & !(NdkOpFlags::DEFER.0);
    let mut nd = OpFlags::empty();
    let mut take = |bit: NdkOpFlags, to: OpFlags, ok: bool| -> Result<(), NtStatus> {
        if left & bit.0 == bit.0 && bit.0 != 0 {
            if !ok {
                return Err(NtStatus::INVALID_PARAMETER);
            }
            left &= !bit.0;
            nd |= to;
        }
        Ok(())
    };
    take(NdkOpFlags::SILENT_SUCCESS, OpFlags::SILENT_SUCCESS, true)?;
    take(NdkOpFlags::READ_FENCE, OpFlags::READ_FENCE, true)?;
    take(
        NdkOpFlags::SEND_AND_SOLICIT_EVENT,
        OpFlags::SEND_AND_SOLICIT_EVENT,
        post == Post::Send,
    )?;
    take(
        NdkOpFlags::INLINE,
        OpFlags::INLINE,
        matches!(post, Post::Send | Post::Write),
    )?;
    take(
        NdkOpFlags::ALLOW_REMOTE_READ,
        OpFlags::ALLOW_READ,
        post == Post::Bind,
    )?;
    take(
        NdkOpFlags::ALLOW_REMOTE_WRITE,
        OpFlags::ALLOW_WRITE,
        post == Post::Bind,
    )?;
    if post == Post::Read && left & NdkOpFlags::RDMA_READ_LOCAL_INVALIDATE.0 != 0 {
        return Err(NtStatus::NOT_SUPPORTED);
    }
    if left != 0 {
        return Err(NtStatus::INVALID_PARAMETER);
    }
    Ok(nd)
}

fn status(r: crate::Result<()>) -> NtStatus {
    match r {
        Ok(()) => NtStatus::SUCCESS,
        Err(e) => e.into(),
    }
}

/// A queue pair (`NDK_QP`). Cloning shares it.
#[derive(Clone)]
pub struct NdkQp {
    /// Keeps the adapter (and its callback thread) for as long as the QP lives.
    _shared: Arc<Shared>,
    pub(crate) core: Arc<Core>,
    pub(crate) qp: QueuePair,
}

impl fmt::Debug for NdkQp {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkQp").field("core", &self.core).finish()
    }
}

impl NdkQp {
    pub(crate) fn new(shared: Arc<Shared>, core: Arc<Core>, qp: QueuePair) -> Self {
        Self {
            _shared: shared,
            core,
            qp,
        }
    }

    /// The ND v2 queue pair underneath (for measurements side by side).
    pub fn as_v2(&self) -> &QueuePair {
        &self.qp
    }

    /// `NdkFlush`: every outstanding request completes with `STATUS_CANCELLED`.
    pub fn flush(&self) {
        let _ = self.qp.flush();
    }

    /// `NdkSend`. Inline failures: `STATUS_CONNECTION_INVALID`, `STATUS_NO_MORE_ENTRIES`
    /// (queue full), `STATUS_ACCESS_VIOLATION` (an SGE outside its registration),
    /// `STATUS_INVALID_PARAMETER` (a flag Send does not take).
    ///
    /// # Safety
    /// As [`QueuePair::send`].
    pub unsafe fn send(&self, context: u64, sge: &[NdkSge], flags: NdkOpFlags) -> NtStatus {
        match nd_flags(flags, Post::Send) {
            // SAFETY: forwarded contract.
            Ok(f) => status(unsafe { self.qp.send(context, sge, f) }),
            Err(s) => s,
        }
    }

    /// `NdkSendAndInvalidate`: a Send that also invalidates the peer's window (or region)
    /// named by `remote_token` once the message has landed (RDMAP Send with Invalidate, RFC
    /// 5040 §5.3; both providers carry it). NDK lets a consumer use it only with a peer
    /// known to support it; a provider without it answers `STATUS_NOT_SUPPORTED` (inline, so
    /// no CQ entry). The peer's completion is an ordinary receive.
    ///
    /// # Safety
    /// As [`QueuePair::send`].
    pub unsafe fn send_and_invalidate(
        &self,
        context: u64,
        sge: &[NdkSge],
        flags: NdkOpFlags,
        remote_token: u32,
    ) -> NtStatus {
        match nd_flags(flags, Post::Send) {
            // SAFETY: forwarded contract.
            Ok(f) => status(unsafe {
                self.qp
                    .as_spi()
                    .send_and_invalidate(context, sge, remote_token, f)
            }),
            Err(s) => s,
        }
    }

    /// `NdkReceive`.
    ///
    /// # Safety
    /// As [`QueuePair::receive`].
    pub unsafe fn receive(&self, context: u64, sge: &[NdkSge]) -> NtStatus {
        // SAFETY: forwarded contract.
        status(unsafe { self.qp.receive(context, sge) })
    }

    /// `NdkBind` `mw` over `len` bytes at `buffer` inside `mr` (`ALLOW_REMOTE_READ`,
    /// `ALLOW_REMOTE_WRITE`); the token is then [`NdkMw::get_remote_token`]. The MR stays
    /// open until the window has closed. `STATUS_ACCESS_VIOLATION` if the MR lacks the access.
    pub fn bind(
        &self,
        context: u64,
        mr: &NdkMr,
        mw: &NdkMw,
        buffer: *const u8,
        len: usize,
        flags: NdkOpFlags,
    ) -> NtStatus {
        let f = match nd_flags(flags, Post::Bind) {
            Ok(f) => f,
            Err(s) => return s,
        };
        let s = status(self.qp.bind(context, &mr.mr, &mw.mw, buffer, len, f));
        if s == NtStatus::SUCCESS {
            mw.core.depend_on(&mr.core);
        }
        s
    }

    /// `NdkFastRegister`: `STATUS_NOT_SUPPORTED` (no fast-register MRs).
    pub fn fast_register(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkInvalidate` a window (fast-registered MRs do not exist here).
    pub fn invalidate(&self, context: u64, mw: &NdkMw, flags: NdkOpFlags) -> NtStatus {
        match nd_flags(flags, Post::Invalidate) {
            Ok(f) => status(self.qp.invalidate(context, &mw.mw, f)),
            Err(s) => s,
        }
    }

    /// `NdkRead` from the peer's `remote_address` (host order) under `remote_token`. A Read
    /// beyond the peer's region, or with a wrong token, completes with ND's status in NTSTATUS
    /// form (`STATUS_ACCESS_VIOLATION` or `STATUS_REMOTE_RESOURCES`).
    ///
    /// # Safety
    /// As [`QueuePair::read`].
    pub unsafe fn read(
        &self,
        context: u64,
        sge: &[NdkSge],
        remote_address: u64,
        remote_token: u32,
        flags: NdkOpFlags,
    ) -> NtStatus {
        match nd_flags(flags, Post::Read) {
            // SAFETY: forwarded contract.
            Ok(f) => status(unsafe { self.qp.read(context, sge, remote_address, remote_token, f) }),
            Err(s) => s,
        }
    }

    /// `NdkWrite` to the peer's `remote_address` under `remote_token`.
    ///
    /// # Safety
    /// As [`QueuePair::write`].
    pub unsafe fn write(
        &self,
        context: u64,
        sge: &[NdkSge],
        remote_address: u64,
        remote_token: u32,
        flags: NdkOpFlags,
    ) -> NtStatus {
        match nd_flags(flags, Post::Write) {
            // SAFETY: forwarded contract.
            Ok(f) => {
                status(unsafe { self.qp.write(context, sge, remote_address, remote_token, f) })
            }
            Err(s) => s,
        }
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseQp`: flushes; `STATUS_PENDING` until a connector connected through it has
    /// closed.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        self.core.start_close();
        let _ = self.qp.flush();
        let cb: CloseCompletion = Box::new(completion);
        self.core.finish_close(Box::new(|| {}), cb)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ndk_flags_become_nds() {
        let f = nd_flags(NdkOpFlags::INLINE | NdkOpFlags::DEFER, Post::Send).unwrap();
        assert_eq!(f, OpFlags::INLINE);
        let f = nd_flags(
            NdkOpFlags::ALLOW_REMOTE_WRITE | NdkOpFlags::ALLOW_REMOTE_READ,
            Post::Bind,
        )
        .unwrap();
        assert_eq!(f, OpFlags::ALLOW_WRITE | OpFlags::ALLOW_READ);
        assert_eq!(
            nd_flags(NdkOpFlags::ALLOW_LOCAL_WRITE, Post::Bind),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            nd_flags(NdkOpFlags::INLINE, Post::Read),
            Err(NtStatus::INVALID_PARAMETER)
        );
        assert_eq!(
            nd_flags(NdkOpFlags::RDMA_READ_LOCAL_INVALIDATE, Post::Read),
            Err(NtStatus::NOT_SUPPORTED)
        );
    }
}
