//! `NDK_ADAPTER`: open with NDKPI version negotiation, `NdkQueryAdapterInfo`, and the
//! adapter's create functions (nd-v1-ndk §2.1–§2.3).

use std::fmt;
use std::net::SocketAddr;
use std::sync::Arc;

use super::callbacks::{CompletionMode, Core, Dispatcher, ObjectType};
use super::{NdkConnector, NdkCq, NdkListener, NdkPd, NdkSharedEndpoint, NtStatus};
use crate::{Adapter, AdapterFlags, NotifyType, ProgressMode, Provider};

/// `NDK_VERSION`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default)]
#[repr(C)]
pub struct NdkVersion {
    /// Major version.
    pub major: u16,
    /// Minor version.
    pub minor: u16,
}

/// The NDKPI version this provider implements: 1.2 (`NDK_OP_FLAG_DEFER` included).
pub const NDK_VERSION: NdkVersion = NdkVersion { major: 1, minor: 2 };

/// `NDK_RDMA_TECHNOLOGY`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default)]
#[repr(u32)]
pub enum NdkRdmaTechnology {
    /// Not one of the named ones (the `shm` provider's same-host rings).
    #[default]
    Undefined = 0,
    /// iWARP (the `tcp` provider: RDMAP, DDP and MPA over TCP).
    IWarp = 1,
    /// InfiniBand.
    InfiniBand = 2,
    /// RoCE.
    RoCE = 3,
    /// RoCE v2.
    RoCEv2 = 4,
}

/// `NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED`, for [`NdkAdapterInfo::adapter_flags`]; the
/// other `NDK_ADAPTER_FLAG_*` bits are ND v2's ([`AdapterFlags`]).
pub const NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED: u32 = 0x2;
/// `NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED` (never set here).
pub const NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED: u32 = 0x10;

/// `NDK_ADAPTER_INFO`, with the x64 layout of `ndkinfo.h` (0x68 bytes).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[repr(C)]
pub struct NdkAdapterInfo {
    /// The provider's highest minor of the negotiated major.
    pub version: NdkVersion,
    /// Vendor id.
    pub vendor_id: u32,
    /// Device id.
    pub device_id: u32,
    /// Largest registration.
    pub max_registration_size: usize,
    /// Largest window.
    pub max_window_size: usize,
    /// Pages a fast-register MR can map: 0, fast registration is not supported
    /// (`NdkCreateMr(FastRegister = TRUE)` gives `STATUS_NOT_SUPPORTED`).
    pub frmr_page_count: u32,
    /// SGEs per initiator request.
    pub max_initiator_request_sge: u32,
    /// SGEs per receive.
    pub max_receive_request_sge: u32,
    /// SGEs per Read.
    pub max_read_request_sge: u32,
    /// Bytes per request.
    pub max_transfer_length: u32,
    /// Inline bytes per request.
    pub max_inline_data_size: u32,
    /// Reads in flight against this side.
    pub max_inbound_read_limit: u32,
    /// Reads in flight from this side.
    pub max_outbound_read_limit: u32,
    /// Deepest receive queue.
    pub max_receive_queue_depth: u32,
    /// Deepest initiator queue.
    pub max_initiator_queue_depth: u32,
    /// Deepest SRQ.
    pub max_srq_depth: u32,
    /// Deepest CQ.
    pub max_cq_depth: u32,
    /// Above this size Read/Write beat Send/Receive.
    pub large_request_threshold: u32,
    /// Private-data bytes in Connect.
    pub max_caller_data: u32,
    /// Private-data bytes in Accept and Reject.
    pub max_callee_data: u32,
    /// `NDK_ADAPTER_FLAG_*`.
    pub adapter_flags: u32,
    /// The wire.
    pub rdma_technology: NdkRdmaTechnology,
}

/// How to open an NDK adapter (`NDIS_OPEN_NDK_ADAPTER_PARAMETERS`, and this library's choice
/// of completion style).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct OpenParams {
    /// The consumer's major version and the lowest minor it accepts.
    pub version: NdkVersion,
    /// Inline or pending completion of requests (default: `ND_NDK_COMPLETION`, else inline).
    pub completion: CompletionMode,
}

impl Default for OpenParams {
    fn default() -> Self {
        Self {
            version: NDK_VERSION,
            completion: std::env::var("ND_NDK_COMPLETION")
                .ok()
                .and_then(|v| CompletionMode::parse(&v))
                .unwrap_or_default(),
        }
    }
}

/// What every object of an adapter shares.
pub(crate) struct Shared {
    pub(crate) v2: Adapter,
    pub(crate) info: NdkAdapterInfo,
    pub(crate) mode: CompletionMode,
    pub(crate) disp: Arc<Dispatcher>,
}

impl fmt::Debug for Shared {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NdkAdapter")
            .field("provider", &self.v2.provider_name())
            .field("mode", &self.mode)
            .finish()
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        self.disp.stop();
    }
}

/// An open NDK adapter (`NDK_ADAPTER`). Cloning shares it; every object it creates keeps it
/// alive.
#[derive(Clone, Debug)]
pub struct NdkAdapter {
    pub(crate) shared: Arc<Shared>,
}

fn info_of(a: &Adapter, version: NdkVersion) -> NdkAdapterInfo {
    let i = a.query();
    // Interrupt moderation is not offered (`NdkControlCqInterruptModeration` answers
    // STATUS_NOT_SUPPORTED, which NDK allows only with this flag clear).
    let flags = i.adapter_flags - AdapterFlags::CQ_INTERRUPT_MODERATION_SUPPORTED;
    NdkAdapterInfo {
        version,
        vendor_id: u32::from(i.vendor_id),
        device_id: u32::from(i.device_id),
        max_registration_size: i.max_registration_size,
        max_window_size: i.max_window_size,
        frmr_page_count: 0,
        max_initiator_request_sge: i.max_initiator_sge,
        max_receive_request_sge: i.max_receive_sge,
        max_read_request_sge: i.max_read_sge,
        max_transfer_length: i.max_transfer_length,
        max_inline_data_size: i.max_inline_data_size,
        max_inbound_read_limit: i.max_inbound_read_limit,
        max_outbound_read_limit: i.max_outbound_read_limit,
        max_receive_queue_depth: i.max_receive_queue_depth,
        max_initiator_queue_depth: i.max_initiator_queue_depth,
        max_srq_depth: i.max_shared_receive_queue_depth,
        max_cq_depth: i.max_completion_queue_depth,
        large_request_threshold: i.large_request_threshold,
        max_caller_data: i.max_caller_data,
        max_callee_data: i.max_callee_data,
        adapter_flags: flags.bits(),
        rdma_technology: if a.provider_name() == "tcp" {
            NdkRdmaTechnology::IWarp
        } else {
            NdkRdmaTechnology::Undefined
        },
    }
}

impl NdkAdapter {
    /// `OPEN_NDK_ADAPTER_HANDLER`: open `provider`'s adapter for the local address `local`.
    ///
    /// Version negotiation: major 1 only, and a lowest acceptable minor of at most 2, else
    /// `NDIS_STATUS_BAD_VERSION`; the adapter then reports 1.2 (its highest minor) in
    /// [`NdkAdapterInfo::version`]. `STATUS_INVALID_ADDRESS` if the provider serves no such
    /// address; `STATUS_INSUFFICIENT_RESOURCES` if the callback thread cannot start.
    ///
    /// The adapter's progress engine is switched on ([`ProgressMode::Thread`]): callbacks
    /// need a thread that is not the consumer's.
    pub fn open(
        provider: &Provider,
        local: SocketAddr,
        params: OpenParams,
    ) -> Result<Self, NtStatus> {
        negotiate(params.version)?;
        let v2 = provider.open_adapter_for(local)?;
        Self::from_adapter(v2, params.completion)
    }

    /// Open over an ND v2 adapter this process opened (it should not be used through v2 as
    /// well: objects of one API are never handed to the other).
    pub fn from_adapter(v2: Adapter, completion: CompletionMode) -> Result<Self, NtStatus> {
        v2.set_progress_mode(ProgressMode::Thread)?;
        let disp = Dispatcher::start().ok_or(NtStatus::INSUFFICIENT_RESOURCES)?;
        let info = info_of(&v2, NDK_VERSION);
        Ok(Self {
            shared: Arc::new(Shared {
                v2,
                info,
                mode: completion,
                disp,
            }),
        })
    }

    /// The negotiated version (every object header carries it).
    pub fn version(&self) -> NdkVersion {
        self.shared.info.version
    }

    /// How this adapter completes requests.
    pub fn completion_mode(&self) -> CompletionMode {
        self.shared.mode
    }

    /// The ND v2 adapter underneath (its provider name, its descriptor).
    pub fn as_v2(&self) -> &Adapter {
        &self.shared.v2
    }

    /// `NdkQueryAdapterInfo`.
    pub fn query_adapter_info(&self) -> NdkAdapterInfo {
        self.shared.info
    }

    /// `NdkQueryAdapterInfo` in its C shape: with `info` absent or `*size` below
    /// `size_of::<NdkAdapterInfo>()`, `STATUS_BUFFER_TOO_SMALL` and the size needed in `*size`.
    pub fn query_adapter_info_sized(
        &self,
        info: Option<&mut NdkAdapterInfo>,
        size: &mut u32,
    ) -> NtStatus {
        let need = size_of::<NdkAdapterInfo>() as u32;
        match info {
            Some(out) if *size >= need => {
                *out = self.shared.info;
                *size = need;
                NtStatus::SUCCESS
            }
            _ => {
                *size = need;
                NtStatus::BUFFER_TOO_SMALL
            }
        }
    }

    /// `NdkQueryExtensionInterface`: no extensions are defined, `STATUS_NOT_SUPPORTED`.
    pub fn query_extension_interface(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkBuildLAM`: logical address mappings are kernel memory descriptors with no
    /// counterpart here, `STATUS_NOT_SUPPORTED`.
    pub fn build_lam(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkReleaseLAM`: `STATUS_NOT_SUPPORTED` (see [`NdkAdapter::build_lam`]).
    pub fn release_lam(&self) -> NtStatus {
        NtStatus::NOT_SUPPORTED
    }

    /// `NdkCreateCq` (completes inline, so the create callback is never needed):
    /// `STATUS_INVALID_PARAMETER` for a depth of 0 or beyond `MaxCqDepth`. `notification`
    /// is the CQ notification callback, which fires once per [`NdkCq::arm_cq`].
    pub fn create_cq(
        &self,
        depth: u32,
        notification: impl Fn(NtStatus) + Send + Sync + 'static,
        affinity: Option<(u16, usize)>,
    ) -> Result<NdkCq, NtStatus> {
        if depth == 0 || depth > self.shared.info.max_cq_depth {
            return Err(NtStatus::INVALID_PARAMETER);
        }
        let (group, mask) = affinity.unwrap_or((0, 0));
        let cq = self.shared.v2.create_completion_queue(depth, group, mask)?;
        let core = Core::new(ObjectType::Cq, &self.shared.disp, &[]);
        Ok(NdkCq::new(
            self.shared.clone(),
            core,
            cq,
            Arc::new(notification),
        ))
    }

    /// `NdkCreatePd`.
    pub fn create_pd(&self) -> Result<NdkPd, NtStatus> {
        let core = Core::new(ObjectType::Pd, &self.shared.disp, &[]);
        Ok(NdkPd::new(self.shared.clone(), core))
    }

    /// `NdkCreateSharedEndpoint` on `addr` (port 0: one from 49152–65535):
    /// `STATUS_INVALID_ADDRESS`, `STATUS_SHARING_VIOLATION`, `STATUS_TOO_MANY_ADDRESSES`.
    pub fn create_shared_endpoint(&self, addr: SocketAddr) -> Result<NdkSharedEndpoint, NtStatus> {
        NdkSharedEndpoint::create(self.shared.clone(), addr)
    }

    /// `NdkCreateConnector` (the active side; passive connectors come from the listener's
    /// connect event).
    pub fn create_connector(&self) -> Result<NdkConnector, NtStatus> {
        let c = self.shared.v2.create_connector()?;
        let core = Core::new(ObjectType::Connector, &self.shared.disp, &[]);
        Ok(NdkConnector::new(self.shared.clone(), core, c, false))
    }

    /// `NdkCreateListener`: `connect_event` receives a provider-created connector per
    /// incoming request once [`NdkListener::listen`] succeeded (`NDK_FN_CONNECT_EVENT_CALLBACK`).
    pub fn create_listener(
        &self,
        connect_event: impl Fn(NdkConnector) + Send + Sync + 'static,
    ) -> Result<NdkListener, NtStatus> {
        let l = self.shared.v2.create_listener()?;
        let core = Core::new(ObjectType::Listener, &self.shared.disp, &[]);
        Ok(NdkListener::new(
            self.shared.clone(),
            core,
            l,
            Arc::new(connect_event),
        ))
    }

    /// `CLOSE_NDK_ADAPTER_HANDLER`: blocks until every callback queued for the adapter's
    /// objects has returned. The consumer closes its objects first, and never calls this
    /// from a callback (where it returns at once).
    pub fn close(self) {
        self.shared.disp.drain();
    }
}

/// NDIS's version negotiation: the version the adapter reports for a consumer's major and
/// lowest acceptable minor, or `NDIS_STATUS_BAD_VERSION`.
pub fn negotiate(requested: NdkVersion) -> Result<NdkVersion, NtStatus> {
    if requested.major != NDK_VERSION.major || requested.minor > NDK_VERSION.minor {
        return Err(NtStatus::NDIS_BAD_VERSION);
    }
    Ok(NDK_VERSION)
}

/// `NDK_CQ_NOTIFY_*` arm types, as v2's: merged by [`merge_arm`].
pub(crate) fn merge_arm(old: Option<NotifyType>, new: NotifyType) -> NotifyType {
    let rank = |t: NotifyType| match t {
        NotifyType::Errors => 0,
        NotifyType::Solicited => 1,
        NotifyType::Any => 2,
    };
    match old {
        Some(o) if rank(o) >= rank(new) => o,
        _ => new,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn info_has_the_x64_layout() {
        assert_eq!(size_of::<NdkAdapterInfo>(), 0x68);
        assert_eq!(
            core::mem::offset_of!(NdkAdapterInfo, max_registration_size),
            0x10
        );
        assert_eq!(core::mem::offset_of!(NdkAdapterInfo, frmr_page_count), 0x20);
        assert_eq!(core::mem::offset_of!(NdkAdapterInfo, adapter_flags), 0x5C);
        assert_eq!(core::mem::offset_of!(NdkAdapterInfo, rdma_technology), 0x60);
    }

    #[test]
    fn arms_merge_as_ndk_says() {
        use NotifyType::*;
        assert_eq!(merge_arm(Some(Errors), Solicited), Solicited);
        assert_eq!(merge_arm(Some(Solicited), Errors), Solicited);
        assert_eq!(merge_arm(Some(Errors), Errors), Errors);
        for t in [Errors, Solicited, Any] {
            assert_eq!(merge_arm(Some(t), Any), Any);
            assert_eq!(merge_arm(Some(Any), t), Any);
            assert_eq!(merge_arm(None, t), t);
        }
    }
}
