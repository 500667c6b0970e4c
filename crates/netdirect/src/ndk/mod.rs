//! NDK, the kernel-mode NetworkDirect interface (NDKPI 1.2), in user space over the same
//! providers and wire as ND v2.
//!
//! Every NDK object and function is here under its snake_case name: [`NdkAdapter`] (open
//! with version negotiation, `NdkQueryAdapterInfo`), [`NdkCq`], [`NdkPd`], [`NdkMr`],
//! [`NdkMw`], [`NdkSrq`], [`NdkQp`], [`NdkSharedEndpoint`], [`NdkConnector`] and
//! [`NdkListener`]; every status is an [`NtStatus`] with the Windows value.
//!
//! What NDK changes compared with ND v2:
//! * A request that may pend returns `STATUS_PENDING` and later calls its completion callback
//!   exactly once, or returns any other status inline and calls nothing
//!   ([`CompletionMode`] chooses whether work finished during the call is reported inline).
//!   Work-request posts have no callback: `STATUS_SUCCESS` means a CQ entry follows.
//! * Events are callbacks: incoming connections (the listener's connect event, with a
//!   provider-created connector), disconnects, CQ notifications after `arm_cq`, SRQ
//!   thresholds.
//! * Every callback runs on the adapter's callback thread, fed by completion hooks on the
//!   progress engine: never inside the consumer's call, never under a provider lock, one at a
//!   time per adapter (so CQ notifications are serialized), and free to call back in.
//! * Closing is asynchronous and obeys the lifetime rules: the close completion is an
//!   object's last callback; an antecedent (PD, CQ, SRQ, MR, QP, listener, shared endpoint)
//!   closes only after its successors have.
//!
//! docs/NDK.md has the details: callback threads, lifetime rules, the status mapping.
//!
//! ```
//! use netdirect::ndk::{NdkAdapter, NtStatus, OpenParams};
//! use netdirect::Provider;
//!
//! let provider = Provider::open("tcp").unwrap();
//! let adapter = NdkAdapter::open(&provider, "127.0.0.1:0".parse().unwrap(), OpenParams::default())
//!     .unwrap();
//! let listener = adapter.create_listener(|connector| {
//!     // A provider-created connector: accept it, or close it to reject.
//!     connector.close(|| {});
//! }).unwrap();
//! let s = listener.listen("127.0.0.1:0".parse().unwrap(), |status| {
//!     // Called once, only if `listen` returned STATUS_PENDING.
//!     assert_eq!(status, NtStatus::SUCCESS);
//! });
//! assert!(s == NtStatus::SUCCESS || s == NtStatus::PENDING);
//! ```

mod adapter;
mod callbacks;
mod connector;
mod cq;
mod endpoint;
mod listener;
mod mr;
mod pd;
mod qp;
mod srq;
mod status;

pub use crate::MrFlags as NdkMrFlags;
pub use crate::NotifyType as NdkCqNotifyType;
pub use adapter::{
    negotiate, NdkAdapter, NdkAdapterInfo, NdkRdmaTechnology, NdkVersion, OpenParams,
    NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED,
    NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED, NDK_VERSION,
};
pub use callbacks::{
    on_callback_thread, CloseCompletion, CompletionMode, ObjectType, RequestCompletion,
};
pub use connector::{DisconnectEvent, NdkConnector};
pub use cq::{NdkCq, NdkOperationType, NdkResult, NdkResultEx};
pub use endpoint::NdkSharedEndpoint;
pub use listener::{ConnectEvent, NdkListener};
pub use mr::{NdkMr, NdkMw};
pub use pd::NdkPd;
pub use qp::{NdkOpFlags, NdkQp, NdkSge};
pub use srq::NdkSrq;
pub use status::NtStatus;
