//! `NDK_SRQ`: a shared receive queue with NDK's threshold notification (nd-v1-ndk §2.5):
//! it fires once when fewer than the threshold receives are queued, then stays disarmed until
//! `NdkModifySrq` sets a threshold again.

use std::fmt;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::adapter::Shared;
use super::callbacks::{self, CloseCompletion, Core, RequestCompletion};
use super::NtStatus;
use crate::{Sge, SharedReceiveQueue, Status};

pub(crate) struct SrqInner {
    shared: Arc<Shared>,
    pub(crate) core: Arc<Core>,
    pub(crate) srq: SharedReceiveQueue,
    notify: Option<Arc<dyn Fn(NtStatus) + Send + Sync>>,
    armed: AtomicBool,
}

/// A shared receive queue (`NDK_SRQ`). Cloning shares it.
#[derive(Clone)]
pub struct NdkSrq {
    pub(crate) inner: Arc<SrqInner>,
}

impl fmt::Debug for NdkSrq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkSrq")
            .field("core", &self.inner.core)
            .finish()
    }
}

impl NdkSrq {
    pub(crate) fn new(
        shared: Arc<Shared>,
        core: Arc<Core>,
        srq: SharedReceiveQueue,
        notify: Option<Arc<dyn Fn(NtStatus) + Send + Sync>>,
        threshold: u32,
    ) -> Self {
        let me = Self {
            inner: Arc::new(SrqInner {
                shared,
                core,
                srq,
                notify,
                armed: AtomicBool::new(false),
            }),
        };
        if threshold > 0 {
            me.arm();
        }
        me
    }

    /// Arm the threshold notification (if there is a callback and it is not armed yet).
    fn arm(&self) {
        let i = &self.inner;
        if i.notify.is_none() || i.armed.swap(true, Ordering::AcqRel) {
            return;
        }
        let Ok(ov) = i.srq.notify() else {
            i.armed.store(false, Ordering::Release);
            return;
        };
        if !i.core.begin() {
            ov.cancel();
            return;
        }
        let me = self.inner.clone();
        let done = ov.clone();
        callbacks::on_completion(
            &i.core.disp,
            &ov,
            Box::new(move || {
                let _end = me.core.ending();
                me.armed.store(false, Ordering::Release);
                let status = match done.try_result() {
                    Some(Ok(())) => Some(NtStatus::SUCCESS),
                    Some(Err(e)) if e.status() == Status::CANCELED => None,
                    _ => Some(NtStatus::INTERNAL_ERROR),
                };
                if let (Some(s), Some(f)) = (status, &me.notify) {
                    if !me.core.is_closing() {
                        f(s);
                    }
                }
            }),
        );
    }

    /// `NdkSrqReceive`. Inline failures (no CQ entry): `STATUS_NO_MORE_ENTRIES` (full),
    /// `STATUS_ACCESS_VIOLATION` (an SGE outside a registration with local write), ND's
    /// other statuses unchanged.
    ///
    /// # Safety
    /// As [`SharedReceiveQueue::receive`].
    pub unsafe fn srq_receive(&self, context: u64, sge: &[Sge]) -> NtStatus {
        // SAFETY: forwarded contract.
        match unsafe { self.inner.srq.receive(context, sge) } {
            Ok(()) => NtStatus::SUCCESS,
            Err(e) => e.into(),
        }
    }

    /// `NdkModifySrq` (0 keeps a value): a threshold above 0 re-arms the notification, which
    /// fires at once if fewer receives are queued. `STATUS_INVALID_PARAMETER` for a depth
    /// beyond `MaxSrqDepth` or below the receives queued.
    pub fn modify_srq(
        &self,
        depth: u32,
        notify_threshold: u32,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let s = match self.inner.srq.modify(depth, notify_threshold) {
            Ok(()) => {
                if notify_threshold > 0 {
                    self.arm();
                }
                NtStatus::SUCCESS
            }
            Err(e) if e.status() == Status::BUFFER_OVERFLOW => NtStatus::INVALID_PARAMETER,
            Err(e) => e.into(),
        };
        let cb: RequestCompletion = Box::new(completion);
        callbacks::finish(&self.inner.core, self.inner.shared.mode, s, cb)
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseSrq`: the notification stops; `STATUS_PENDING` while a QP using it is open
    /// or a notification callback runs.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        let i = &self.inner;
        i.core.start_close();
        let _ = i.srq.cancel_overlapped_requests();
        let cb: CloseCompletion = Box::new(completion);
        i.core.finish_close(Box::new(|| {}), cb)
    }
}
