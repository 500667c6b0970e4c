//! `NDK_CQ`: results, resize, and the one-shot arm with its notification callback
//! (nd-v1-ndk §2.5 "CQ arming").

use std::fmt;
use std::sync::{Arc, Mutex};

use super::adapter::{merge_arm, Shared};
use super::callbacks::{self, CloseCompletion, Core, RequestCompletion};
use super::NtStatus;
use crate::{CompletionQueue, NdResult, NotifyType, Overlapped, RequestType, Status};

/// `NDK_OPERATION_TYPE`: bit values, not ND v2's sequential `ND2_REQUEST_TYPE`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[repr(u32)]
pub enum NdkOperationType {
    /// A receive.
    Receive = 1,
    /// A send.
    Send = 2,
    /// A fast register.
    FastRegister = 4,
    /// A bind.
    Bind = 8,
    /// An invalidate.
    Invalidate = 16,
    /// An RDMA Read.
    Read = 32,
    /// An RDMA Write.
    Write = 64,
    /// A receive of a send-and-invalidate (`Receive | 0x8000`).
    ReceiveAndInvalidate = 0x8001,
}

impl From<RequestType> for NdkOperationType {
    fn from(t: RequestType) -> Self {
        match t {
            RequestType::Receive => Self::Receive,
            RequestType::Send => Self::Send,
            RequestType::Bind => Self::Bind,
            RequestType::Invalidate => Self::Invalidate,
            RequestType::Read => Self::Read,
            RequestType::Write => Self::Write,
        }
    }
}

/// `NDK_RESULT` (24 bytes on x64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NdkResult {
    /// The request's final status.
    pub status: NtStatus,
    /// Bytes received (meaningful for receives only).
    pub bytes_transferred: u32,
    /// The QP's context (`NdkCreateQp`).
    pub qp_context: u64,
    /// The request's context.
    pub request_context: u64,
}

/// `NDK_RESULT_EX` (40 bytes on x64).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(C)]
pub struct NdkResultEx {
    /// The request's final status.
    pub status: NtStatus,
    /// Bytes received (meaningful for receives only).
    pub bytes_transferred: u32,
    /// The QP's context.
    pub qp_context: u64,
    /// The request's context.
    pub request_context: u64,
    /// What completed.
    pub ty: NdkOperationType,
    /// 0: none supplied (always 0 on success).
    pub provider_error_code: u32,
    /// For `ReceiveAndInvalidate`, the invalidated token.
    pub type_specific_completion_output: u64,
}

impl NdkResult {
    /// An all-zero entry, for sizing arrays.
    pub const EMPTY: Self = Self {
        status: NtStatus::SUCCESS,
        bytes_transferred: 0,
        qp_context: 0,
        request_context: 0,
    };
}

impl NdkResultEx {
    /// An all-zero entry, for sizing arrays.
    pub const EMPTY: Self = Self {
        status: NtStatus::SUCCESS,
        bytes_transferred: 0,
        qp_context: 0,
        request_context: 0,
        ty: NdkOperationType::Receive,
        provider_error_code: 0,
        type_specific_completion_output: 0,
    };
}

impl From<NdResult> for NdkResult {
    fn from(r: NdResult) -> Self {
        Self {
            status: NtStatus::from_nd(r.status),
            bytes_transferred: r.bytes_transferred,
            qp_context: r.qp_context,
            request_context: r.request_context,
        }
    }
}

impl From<NdResult> for NdkResultEx {
    fn from(r: NdResult) -> Self {
        Self {
            status: NtStatus::from_nd(r.status),
            bytes_transferred: r.bytes_transferred,
            qp_context: r.qp_context,
            request_context: r.request_context,
            ty: r.request_type.into(),
            provider_error_code: 0,
            type_specific_completion_output: 0,
        }
    }
}

/// The arm state. Each arm issues an ND `Notify` of the merged type when it raises the type
/// in force; an epoch tells a Notify of an arm already satisfied (and its later stragglers)
/// from one of the current arm.
#[derive(Default)]
struct Arm {
    armed: Option<NotifyType>,
    epoch: u64,
    next_id: u64,
    inflight: Vec<(u64, Overlapped)>,
}

pub(crate) struct CqInner {
    pub(crate) core: Arc<Core>,
    shared: Arc<Shared>,
    pub(crate) cq: CompletionQueue,
    notify: Arc<dyn Fn(NtStatus) + Send + Sync>,
    arm: Mutex<Arm>,
}

/// A completion queue (`NDK_CQ`). Cloning shares it.
#[derive(Clone)]
pub struct NdkCq {
    pub(crate) inner: Arc<CqInner>,
}

impl fmt::Debug for NdkCq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkCq")
            .field("core", &self.inner.core)
            .finish()
    }
}

impl NdkCq {
    pub(crate) fn new(
        shared: Arc<Shared>,
        core: Arc<Core>,
        cq: CompletionQueue,
        notify: Arc<dyn Fn(NtStatus) + Send + Sync>,
    ) -> Self {
        Self {
            inner: Arc::new(CqInner {
                core,
                shared,
                cq,
                notify,
                arm: Mutex::default(),
            }),
        }
    }

    /// `NdkGetCqResults`: move up to `out.len()` completions into `out`; how many. A
    /// receive-and-invalidate is reported as an ordinary receive here.
    pub fn get_cq_results(&self, out: &mut [NdkResult]) -> usize {
        let mut buf = [NdResult::EMPTY; 16];
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(buf.len());
            let got = self.inner.cq.get_results(&mut buf[..want]);
            for (o, r) in out[n..].iter_mut().zip(&buf[..got]) {
                *o = (*r).into();
            }
            n += got;
            if got < want {
                break;
            }
        }
        n
    }

    /// `NdkGetCqResultsEx`: as [`NdkCq::get_cq_results`], with the operation type.
    pub fn get_cq_results_ex(&self, out: &mut [NdkResultEx]) -> usize {
        let mut buf = [NdResult::EMPTY; 16];
        let mut n = 0;
        while n < out.len() {
            let want = (out.len() - n).min(buf.len());
            let got = self.inner.cq.get_results(&mut buf[..want]);
            for (o, r) in out[n..].iter_mut().zip(&buf[..got]) {
                *o = (*r).into();
            }
            n += got;
            if got < want {
                break;
            }
        }
        n
    }

    /// `NdkArmCq`: the notification callback fires once, on the callback thread, for the
    /// next completion of `ty` (`NDK_CQ_NOTIFY_ERRORS`/`ANY`/`SOLICITED`), at once if one
    /// arrived since the queue was last polled empty. Arms before it fires merge: ANY with
    /// anything is ANY, ERRORS and SOLICITED either way round is SOLICITED. Status
    /// `STATUS_BUFFER_OVERFLOW` reports an overrun.
    pub fn arm_cq(&self, ty: NotifyType) {
        let i = &self.inner;
        let (notified, id, epoch) = {
            let mut a = i.arm.lock().unwrap_or_else(|e| e.into_inner());
            let merged = merge_arm(a.armed, ty);
            if a.armed == Some(merged) {
                return;
            }
            a.armed = Some(merged);
            a.next_id += 1;
            let id = a.next_id;
            let notified = i.cq.notify(merged);
            if let Ok(ov) = &notified {
                a.inflight.push((id, ov.clone()));
            }
            (notified, id, a.epoch)
        };
        match notified {
            Ok(ov) => {
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
                        let status = match done.try_result() {
                            Some(Ok(())) => Some(NtStatus::SUCCESS),
                            Some(Err(e)) if e.status() == Status::CANCELED => None,
                            Some(Err(e)) if e.status() == Status::BUFFER_OVERFLOW => {
                                Some(NtStatus::BUFFER_OVERFLOW)
                            }
                            Some(Err(_)) | None => Some(NtStatus::INTERNAL_ERROR),
                        };
                        me.fired(id, epoch, status);
                    }),
                );
            }
            // The engine could not arm: the CQ is unusable, which NDK reports as fatal.
            Err(_) => {
                if i.core.begin() {
                    let me = self.inner.clone();
                    i.core.disp.post(Box::new(move || {
                        let _end = me.core.ending();
                        me.fired(id, epoch, Some(NtStatus::INTERNAL_ERROR));
                    }));
                }
            }
        }
    }

    /// `NdkResizeCq`: `STATUS_INVALID_PARAMETER` for 0, beyond `MaxCqDepth`, or fewer than
    /// the completions queued; `STATUS_NOT_SUPPORTED` without `CQ_RESIZE_SUPPORTED`.
    pub fn resize_cq(
        &self,
        depth: u32,
        completion: impl FnOnce(NtStatus) + Send + 'static,
    ) -> NtStatus {
        let s = match self.inner.cq.resize(depth) {
            Ok(()) => NtStatus::SUCCESS,
            Err(e) if e.status() == Status::BUFFER_OVERFLOW => NtStatus::INVALID_PARAMETER,
            Err(e) => e.into(),
        };
        let cb: RequestCompletion = Box::new(completion);
        callbacks::finish(&self.inner.core, self.inner.shared.mode, s, cb)
    }

    /// `NdkControlCqInterruptModeration`: not offered (the adapter flag is clear),
    /// `STATUS_NOT_SUPPORTED`.
    pub fn control_cq_interrupt_moderation(&self, _interval_us: u32, _count: u32) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCloseCq`: notifications stop; `STATUS_PENDING` (and `completion` later, as the CQ's
    /// last callback) while a notification callback runs or a QP created on it is open.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        let i = &self.inner;
        i.core.start_close();
        let inflight =
            std::mem::take(&mut i.arm.lock().unwrap_or_else(|e| e.into_inner()).inflight);
        for (_, ov) in inflight {
            ov.cancel();
        }
        let cb: CloseCompletion = Box::new(completion);
        i.core.finish_close(Box::new(|| {}), cb)
    }
}

impl CqInner {
    /// Notify `id`, issued in `epoch`, completed with `status` (`None`: withdrawn): fire the
    /// callback if it satisfies the arm in force and the CQ is not closing, once per arm.
    fn fired(&self, id: u64, epoch: u64, status: Option<NtStatus>) {
        let stale = {
            let mut a = self.arm.lock().unwrap_or_else(|e| e.into_inner());
            a.inflight.retain(|(i, _)| *i != id);
            if status.is_none() || a.epoch != epoch || a.armed.is_none() {
                return;
            }
            a.armed = None;
            a.epoch += 1;
            std::mem::take(&mut a.inflight)
        };
        // The other Notifies of this arm were satisfied with it: withdraw them.
        for (_, o) in stale {
            o.cancel();
        }
        if let Some(s) = status {
            if !self.core.is_closing() {
                (self.notify)(s);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn results_have_the_x64_layout() {
        assert_eq!(size_of::<NdkResult>(), 24);
        assert_eq!(size_of::<NdkResultEx>(), 40);
        assert_eq!(core::mem::offset_of!(NdkResultEx, ty), 24);
        assert_eq!(core::mem::offset_of!(NdkResultEx, provider_error_code), 28);
        assert_eq!(
            core::mem::offset_of!(NdkResultEx, type_specific_completion_output),
            32
        );
    }
}
