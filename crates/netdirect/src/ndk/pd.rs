//! `NDK_PD`: the protection domain every MR, MW, SRQ and QP is created from (and an
//! antecedent of each: its close pends until they have closed).

use std::fmt;
use std::sync::Arc;

use super::adapter::Shared;
use super::callbacks::{CloseCompletion, Core, ObjectType};
use super::{NdkCq, NdkMr, NdkMw, NdkQp, NdkSrq, NtStatus};

/// A protection domain (`NDK_PD`). Cloning shares it.
#[derive(Clone)]
pub struct NdkPd {
    shared: Arc<Shared>,
    core: Arc<Core>,
}

impl fmt::Debug for NdkPd {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkPd").field("core", &self.core).finish()
    }
}

impl NdkPd {
    pub(crate) fn new(shared: Arc<Shared>, core: Arc<Core>) -> Self {
        Self { shared, core }
    }

    /// `NdkCreateMr`: `fast_register` regions need logical page arrays, which this provider
    /// does not offer (`FRMRPageCount` 0): `STATUS_NOT_SUPPORTED`.
    pub fn create_mr(&self, fast_register: bool) -> Result<NdkMr, NtStatus> {
        if fast_register {
            return Err(NtStatus::NOT_SUPPORTED);
        }
        let mr = self.shared.v2.create_memory_region()?;
        let core = Core::new(ObjectType::Mr, &self.shared.disp, &[&self.core]);
        Ok(NdkMr::new(self.shared.clone(), core, mr))
    }

    /// `NdkCreateMw`: invalid until a [`NdkQp::bind`].
    pub fn create_mw(&self) -> Result<NdkMw, NtStatus> {
        let mw = self.shared.v2.create_memory_window()?;
        let core = Core::new(ObjectType::Mw, &self.shared.disp, &[&self.core]);
        Ok(NdkMw::new(core, mw))
    }

    /// `NdkCreateSrq`: `STATUS_INVALID_PARAMETER` for a depth or SGE count beyond the
    /// adapter's. With a `notification`, it fires (on the callback thread) once fewer than
    /// `notify_threshold` receives are queued, at once if that is so already; then it stays
    /// disarmed until [`NdkSrq::modify_srq`] sets a threshold again.
    pub fn create_srq(
        &self,
        depth: u32,
        max_receive_request_sge: u32,
        notify_threshold: u32,
        notification: Option<Arc<dyn Fn(NtStatus) + Send + Sync>>,
        affinity: Option<(u16, usize)>,
    ) -> Result<NdkSrq, NtStatus> {
        let (group, mask) = affinity.unwrap_or((0, 0));
        let srq = self.shared.v2.create_shared_receive_queue(
            depth,
            max_receive_request_sge,
            notify_threshold,
            group,
            mask,
        )?;
        let core = Core::new(ObjectType::Srq, &self.shared.disp, &[&self.core]);
        Ok(NdkSrq::new(
            self.shared.clone(),
            core,
            srq,
            notification,
            notify_threshold,
        ))
    }

    /// `NdkCreateQp`: `STATUS_INVALID_PARAMETER` for any limit beyond the adapter's.
    /// `qp_context` comes back in every completion. The CQs (and this PD) stay open until
    /// the QP has closed.
    pub fn create_qp(
        &self,
        receive_cq: &NdkCq,
        initiator_cq: &NdkCq,
        qp_context: u64,
        receive_queue_depth: u32,
        initiator_queue_depth: u32,
        max_receive_request_sge: u32,
        max_initiator_request_sge: u32,
        inline_data_size: u32,
    ) -> Result<NdkQp, NtStatus> {
        let qp = self.shared.v2.create_queue_pair(
            &receive_cq.inner.cq,
            &initiator_cq.inner.cq,
            qp_context,
            receive_queue_depth,
            initiator_queue_depth,
            max_receive_request_sge,
            max_initiator_request_sge,
            inline_data_size,
        )?;
        let core = Core::new(
            ObjectType::Qp,
            &self.shared.disp,
            &[&self.core, &receive_cq.inner.core, &initiator_cq.inner.core],
        );
        Ok(NdkQp::new(self.shared.clone(), core, qp))
    }

    /// `NdkCreateQpWithSrq`: receives come from `srq`, which stays open until the QP has
    /// closed.
    pub fn create_qp_with_srq(
        &self,
        receive_cq: &NdkCq,
        initiator_cq: &NdkCq,
        srq: &NdkSrq,
        qp_context: u64,
        initiator_queue_depth: u32,
        max_initiator_request_sge: u32,
        inline_data_size: u32,
    ) -> Result<NdkQp, NtStatus> {
        let qp = self.shared.v2.create_queue_pair_with_srq(
            &receive_cq.inner.cq,
            &initiator_cq.inner.cq,
            &srq.inner.srq,
            qp_context,
            initiator_queue_depth,
            max_initiator_request_sge,
            inline_data_size,
        )?;
        let core = Core::new(
            ObjectType::Qp,
            &self.shared.disp,
            &[
                &self.core,
                &receive_cq.inner.core,
                &initiator_cq.inner.core,
                &srq.inner.core,
            ],
        );
        Ok(NdkQp::new(self.shared.clone(), core, qp))
    }

    /// `NdkGetPrivilegedMemoryRegionToken`: the privileged token addresses logical (bus)
    /// addresses, which user space has none of: `STATUS_NOT_SUPPORTED`.
    pub fn get_privileged_memory_region_token(&self) -> Result<u32, NtStatus> {
        Err(NtStatus::NOT_SUPPORTED)
    }

    /// `NdkQueryExtensionInterface`: `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkClosePd`: `STATUS_PENDING` until every MR, MW, SRQ and QP created from it has
    /// closed.
    pub fn close(&self, completion: impl FnOnce() + Send + 'static) -> NtStatus {
        self.core.start_close();
        let cb: CloseCompletion = Box::new(completion);
        self.core.finish_close(Box::new(|| {}), cb)
    }
}
