/*
 * ndkpi.h - NDK, the kernel-mode NetworkDirect interface (NDKPI 1.2), in user space.
 *
 * Object headers, the per-type dispatch tables in the documented slot order, the callback
 * types, NDK_SGE, NDK_RESULT(_EX), NDK_ADAPTER_INFO, the NDK_OP_FLAG_* values (which differ
 * from ND's) and the NTSTATUS values, as described by Microsoft's NDKPI reference (the
 * ndkpi.h and ndkinfo.h pages of the Windows Driver Kit documentation).  Written for
 * netdirect; layouts are those of 64-bit Windows.  Where Windows hands a consumer an
 * adapter through NDIS, NdkOpenAdapter below opens one for a local address.  See
 * docs/NDK.md.
 *
 * Kernel memory descriptors have no user-space counterpart: an MDL here is a user buffer
 * (NDK_MDL below), and logical address mappings, fast-register MRs and the privileged token
 * answer STATUS_NOT_SUPPORTED.
 */
#ifndef NDKPI_H
#define NDKPI_H

#include <sys/socket.h>

#include "win32/ndw_types.h"
#include "win32/ndw_com.h"
#include "win32/ntstatus.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- NTSTATUS values ------------------------------------------------------ */

#ifndef STATUS_SUCCESS
#define STATUS_SUCCESS ((NTSTATUS)0x00000000L)
#endif
#ifndef STATUS_PENDING
#define STATUS_PENDING ((NTSTATUS)0x00000103L)
#endif
#define NDK_STATUS(v) ((NTSTATUS)(UINT32)(v))
#ifndef STATUS_BUFFER_OVERFLOW
#define STATUS_BUFFER_OVERFLOW NDK_STATUS(0x80000005)
#endif
#ifndef STATUS_UNSUCCESSFUL
#define STATUS_UNSUCCESSFUL NDK_STATUS(0xC0000001)
#endif
#ifndef STATUS_ACCESS_VIOLATION
#define STATUS_ACCESS_VIOLATION NDK_STATUS(0xC0000005)
#endif
#ifndef STATUS_INVALID_PARAMETER
#define STATUS_INVALID_PARAMETER NDK_STATUS(0xC000000D)
#endif
#ifndef STATUS_BUFFER_TOO_SMALL
#define STATUS_BUFFER_TOO_SMALL NDK_STATUS(0xC0000023)
#endif
#ifndef STATUS_INVALID_PARAMETER_MIX
#define STATUS_INVALID_PARAMETER_MIX NDK_STATUS(0xC0000030)
#endif
#ifndef STATUS_SHARING_VIOLATION
#define STATUS_SHARING_VIOLATION NDK_STATUS(0xC0000043)
#endif
#ifndef STATUS_INSUFFICIENT_RESOURCES
#define STATUS_INSUFFICIENT_RESOURCES NDK_STATUS(0xC000009A)
#endif
#ifndef STATUS_IO_TIMEOUT
#define STATUS_IO_TIMEOUT NDK_STATUS(0xC00000B5)
#endif
#ifndef STATUS_NOT_SUPPORTED
#define STATUS_NOT_SUPPORTED NDK_STATUS(0xC00000BB)
#endif
#ifndef STATUS_INTERNAL_ERROR
#define STATUS_INTERNAL_ERROR NDK_STATUS(0xC00000E5)
#endif
#ifndef STATUS_CANCELLED
#define STATUS_CANCELLED NDK_STATUS(0xC0000120)
#endif
#ifndef STATUS_REMOTE_RESOURCES
#define STATUS_REMOTE_RESOURCES NDK_STATUS(0xC000013D)
#endif
#ifndef STATUS_INVALID_ADDRESS
#define STATUS_INVALID_ADDRESS NDK_STATUS(0xC0000141)
#endif
#ifndef STATUS_INVALID_DEVICE_STATE
#define STATUS_INVALID_DEVICE_STATE NDK_STATUS(0xC0000184)
#endif
#ifndef STATUS_TOO_MANY_ADDRESSES
#define STATUS_TOO_MANY_ADDRESSES NDK_STATUS(0xC0000209)
#endif
#ifndef STATUS_ADDRESS_ALREADY_EXISTS
#define STATUS_ADDRESS_ALREADY_EXISTS NDK_STATUS(0xC000020A)
#endif
#ifndef STATUS_CONNECTION_REFUSED
#define STATUS_CONNECTION_REFUSED NDK_STATUS(0xC0000236)
#endif
#ifndef STATUS_CONNECTION_INVALID
#define STATUS_CONNECTION_INVALID NDK_STATUS(0xC000023A)
#endif
#ifndef STATUS_CONNECTION_ACTIVE
#define STATUS_CONNECTION_ACTIVE NDK_STATUS(0xC000023B)
#endif
#ifndef STATUS_NETWORK_UNREACHABLE
#define STATUS_NETWORK_UNREACHABLE NDK_STATUS(0xC000023C)
#endif
#ifndef STATUS_HOST_UNREACHABLE
#define STATUS_HOST_UNREACHABLE NDK_STATUS(0xC000023D)
#endif
#ifndef STATUS_CONNECTION_ABORTED
#define STATUS_CONNECTION_ABORTED NDK_STATUS(0xC0000241)
#endif
#ifndef STATUS_IMPLEMENTATION_LIMIT
#define STATUS_IMPLEMENTATION_LIMIT NDK_STATUS(0xC000042B)
#endif
#define NDIS_STATUS_BAD_VERSION NDK_STATUS(0xC0010004)
#define NDIS_STATUS_ADAPTER_NOT_READY NDK_STATUS(0xC0010011)
#ifndef NT_SUCCESS
#define NT_SUCCESS(s) (((NTSTATUS)(s)) >= 0)
#endif

/* ---- versions, object types, headers --------------------------------------- */

typedef struct _NDK_VERSION {
    USHORT Major;
    USHORT Minor;
} NDK_VERSION;

#define NDK_VERSION_1_1 1, 1
#define NDK_VERSION_1_2 1, 2

typedef enum _NDK_OBJECT_TYPE {
    NdkObjectTypeUndefined = 0,
    NdkObjectTypeAdapter = 1,
    NdkObjectTypeQp = 2,
    NdkObjectTypeCq = 3,
    NdkObjectTypeMr = 4,
    NdkObjectTypeMw = 5,
    NdkObjectTypePd = 6,
    NdkObjectTypeSharedEndpoint = 7,
    NdkObjectTypeConnector = 8,
    NdkObjectTypeListener = 9,
    NdkObjectTypeSrq = 10,
    NdkObjectTypeMax = 11
} NDK_OBJECT_TYPE;

typedef struct _NDK_OBJECT_HEADER_RESERVED_BLOCK {
    PVOID ReservedForProvider[4];
} NDK_OBJECT_HEADER_RESERVED_BLOCK;

/* Every object starts with this header, then its Dispatch pointer, which the consumer may
 * overwrite: the provider never reads it back. */
typedef struct _NDK_OBJECT_HEADER {
    NDK_VERSION Version;
    NDK_OBJECT_TYPE ObjectType;
    NDK_OBJECT_HEADER_RESERVED_BLOCK NdkReserved;
} NDK_OBJECT_HEADER;

typedef struct _NDK_ADAPTER NDK_ADAPTER;
typedef struct _NDK_CQ NDK_CQ;
typedef struct _NDK_PD NDK_PD;
typedef struct _NDK_MR NDK_MR;
typedef struct _NDK_MW NDK_MW;
typedef struct _NDK_SRQ NDK_SRQ;
typedef struct _NDK_QP NDK_QP;
typedef struct _NDK_SHARED_ENDPOINT NDK_SHARED_ENDPOINT;
typedef struct _NDK_CONNECTOR NDK_CONNECTOR;
typedef struct _NDK_LISTENER NDK_LISTENER;

/* ---- structures ------------------------------------------------------------ */

typedef UINT64 NDK_LOGICAL_ADDRESS;

typedef struct _NDK_SGE {
    union {
        PVOID VirtualAddress;
        NDK_LOGICAL_ADDRESS LogicalAddress;
    };
    ULONG Length;
    UINT32 MemoryRegionToken;
} NDK_SGE;

typedef enum _NDK_OPERATION_TYPE {
    NdkOperationTypeReceive = 1,
    NdkOperationTypeSend = 2,
    NdkOperationTypeFastRegister = 4,
    NdkOperationTypeBind = 8,
    NdkOperationTypeInvalidate = 16,
    NdkOperationTypeRead = 32,
    NdkOperationTypeWrite = 64,
    NdkOperationTypeReceiveAndInvalidate = 0x8001
} NDK_OPERATION_TYPE;

typedef struct _NDK_RESULT {
    NTSTATUS Status;
    ULONG BytesTransferred; /* receives only */
    PVOID QPContext;
    PVOID RequestContext;
} NDK_RESULT;

typedef struct _NDK_RESULT_EX {
    NTSTATUS Status;
    ULONG BytesTransferred;
    PVOID QPContext;
    PVOID RequestContext;
    NDK_OPERATION_TYPE Type;
    ULONG ProviderErrorCode; /* 0 on success, or none supplied */
    ULONG_PTR TypeSpecificCompletionOutput;
} NDK_RESULT_EX;

typedef enum _NDK_RDMA_TECHNOLOGY {
    NdkUndefined = 0,
    NdkiWarp = 1,
    NdkInfiniBand = 2,
    NdkRoCE = 3,
    NdkRoCEv2 = 4,
    NdkMaxTechnology
} NDK_RDMA_TECHNOLOGY;

typedef struct _NDK_ADAPTER_INFO {
    NDK_VERSION Version;
    UINT32 VendorId;
    UINT32 DeviceId;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    ULONG FRMRPageCount;
    ULONG MaxInitiatorRequestSge;
    ULONG MaxReceiveRequestSge;
    ULONG MaxReadRequestSge;
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSrqDepth;
    ULONG MaxCqDepth;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData;
    ULONG MaxCalleeData;
    ULONG AdapterFlags;
    NDK_RDMA_TECHNOLOGY RdmaTechnology;
} NDK_ADAPTER_INFO;

#define NDK_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED 0x00000001
#define NDK_ADAPTER_FLAG_RDMA_READ_SINK_NOT_REQUIRED 0x00000002
#define NDK_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED 0x00000004
#define NDK_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED 0x00000008
#define NDK_ADAPTER_FLAG_RDMA_READ_LOCAL_INVALIDATE_SUPPORTED 0x00000010
#define NDK_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED 0x00000100
#define NDK_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED 0x00010000

typedef struct _NDK_LOGICAL_ADDRESS_MAPPING {
    PVOID AdapterContext;
    ULONG AdapterPageCount;
    NDK_LOGICAL_ADDRESS AdapterPageArray[1];
} NDK_LOGICAL_ADDRESS_MAPPING;

typedef struct _NDK_EXTENSION_INTERFACE {
    NDK_VERSION Version;
} NDK_EXTENSION_INTERFACE;

#ifndef NDK_GROUP_AFFINITY_DEFINED
#define NDK_GROUP_AFFINITY_DEFINED
typedef struct _GROUP_AFFINITY {
    KAFFINITY Mask;
    USHORT Group;
    USHORT Reserved[3];
} GROUP_AFFINITY;
#endif

/* The user-space MDL: a chain of virtually contiguous buffers (one element is usual). */
typedef struct _MDL {
    struct _MDL *Next;
    PVOID VirtualAddress;
    SIZE_T ByteCount;
} MDL;

/* ---- flags ------------------------------------------------------------------ */

#define NDK_OP_FLAG_SILENT_SUCCESS 0x00000001
#define NDK_OP_FLAG_READ_FENCE 0x00000002
#define NDK_OP_FLAG_SEND_AND_SOLICIT_EVENT 0x00000004
#define NDK_OP_FLAG_ALLOW_REMOTE_READ 0x00000008
#define NDK_OP_FLAG_ALLOW_LOCAL_WRITE 0x00000010
#define NDK_OP_FLAG_ALLOW_REMOTE_WRITE 0x00000030
#define NDK_OP_FLAG_INLINE 0x00000040
#define NDK_OP_FLAG_RDMA_READ_SINK 0x00000080
#define NDK_OP_FLAG_RDMA_READ_LOCAL_INVALIDATE 0x00000100
#define NDK_OP_FLAG_DEFER 0x00000200

#define NDK_MR_FLAG_ALLOW_LOCAL_READ 0x00000000
#define NDK_MR_FLAG_ALLOW_LOCAL_WRITE 0x00000001
#define NDK_MR_FLAG_ALLOW_REMOTE_READ 0x00000002
#define NDK_MR_FLAG_ALLOW_REMOTE_WRITE 0x00000005
#define NDK_MR_FLAG_RDMA_READ_SINK 0x00000008

#define NDK_CQ_NOTIFY_ERRORS 0
#define NDK_CQ_NOTIFY_ANY 1
#define NDK_CQ_NOTIFY_SOLICITED 2

/* ---- callbacks ---------------------------------------------------------------- */

typedef void (*NDK_FN_REQUEST_COMPLETION)(PVOID Context, NTSTATUS Status);
typedef void (*NDK_FN_CREATE_COMPLETION)(PVOID Context, NTSTATUS Status,
                                         NDK_OBJECT_HEADER *NdkObject);
typedef void (*NDK_FN_CLOSE_COMPLETION)(PVOID Context);
typedef void (*NDK_FN_CONNECT_EVENT_CALLBACK)(PVOID ConnectEventContext,
                                              NDK_CONNECTOR *NdkConnector);
typedef void (*NDK_FN_DISCONNECT_EVENT_CALLBACK)(PVOID DisconnectEventContext);
typedef void (*NDK_FN_CQ_NOTIFICATION_CALLBACK)(PVOID CqNotificationContext, NTSTATUS CqStatus);
typedef void (*NDK_FN_SRQ_NOTIFICATION_CALLBACK)(PVOID SrqNotificationContext,
                                                 NTSTATUS SrqStatus);

/* ---- functions ------------------------------------------------------------------ */

typedef NTSTATUS (*NDK_FN_CLOSE_OBJECT)(NDK_OBJECT_HEADER *NdkObject,
                                        NDK_FN_CLOSE_COMPLETION CloseCompletion,
                                        PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_QUERY_EXTENSION_INTERFACE)(NDK_OBJECT_HEADER *NdkObject,
                                                     const GUID *ExtensionInterfaceID,
                                                     NDK_VERSION RequestedVersion,
                                                     NDK_EXTENSION_INTERFACE *ExtensionInterface);

/* adapter */
typedef NTSTATUS (*NDK_FN_QUERY_ADAPTER_INFO)(NDK_ADAPTER *Adapter, NDK_ADAPTER_INFO *Info,
                                              ULONG *BufferSize);
typedef NTSTATUS (*NDK_FN_CREATE_CQ)(NDK_ADAPTER *Adapter, ULONG CqDepth,
                                     NDK_FN_CQ_NOTIFICATION_CALLBACK CqNotification,
                                     PVOID CqNotificationContext, GROUP_AFFINITY *Affinity,
                                     NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_CQ **NdkCq);
typedef NTSTATUS (*NDK_FN_CREATE_PD)(NDK_ADAPTER *Adapter, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_PD **NdkPd);
typedef NTSTATUS (*NDK_FN_CREATE_SHARED_ENDPOINT)(NDK_ADAPTER *Adapter, const struct sockaddr *Address,
                                                  ULONG AddressLength,
                                                  NDK_FN_CREATE_COMPLETION CreateCompletion,
                                                  PVOID RequestContext,
                                                  NDK_SHARED_ENDPOINT **NdkSharedEndpoint);
typedef NTSTATUS (*NDK_FN_CREATE_CONNECTOR)(NDK_ADAPTER *Adapter,
                                            NDK_FN_CREATE_COMPLETION CreateCompletion,
                                            PVOID RequestContext, NDK_CONNECTOR **NdkConnector);
typedef NTSTATUS (*NDK_FN_CREATE_LISTENER)(NDK_ADAPTER *Adapter,
                                           NDK_FN_CONNECT_EVENT_CALLBACK ConnectEventHandler,
                                           PVOID ConnectEventContext,
                                           NDK_FN_CREATE_COMPLETION CreateCompletion,
                                           PVOID RequestContext, NDK_LISTENER **NdkListener);
typedef NTSTATUS (*NDK_FN_BUILD_LAM)(NDK_ADAPTER *Adapter, MDL *Mdl, SIZE_T Length,
                                     NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                     PVOID RequestContext, NDK_LOGICAL_ADDRESS_MAPPING *Lam,
                                     ULONG *LamSize, ULONG *Fbo);
typedef NTSTATUS (*NDK_FN_RELEASE_LAM)(NDK_ADAPTER *Adapter, NDK_LOGICAL_ADDRESS_MAPPING *Lam);

/* CQ */
typedef NTSTATUS (*NDK_FN_RESIZE_CQ)(NDK_CQ *NdkCq, ULONG CqDepth,
                                     NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                     PVOID RequestContext);
typedef void (*NDK_FN_ARM_CQ)(NDK_CQ *NdkCq, ULONG NotifyType);
typedef ULONG (*NDK_FN_GET_CQ_RESULTS)(NDK_CQ *NdkCq, NDK_RESULT Results[], ULONG ResultsCount);
typedef NTSTATUS (*NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION)(NDK_CQ *NdkCq, ULONG ModerationInterval,
                                                           ULONG ModerationCount);
typedef ULONG (*NDK_FN_GET_CQ_RESULTS_EX)(NDK_CQ *NdkCq, NDK_RESULT_EX Results[],
                                          ULONG ResultsCount);

/* PD */
typedef NTSTATUS (*NDK_FN_CREATE_MR)(NDK_PD *NdkPd, BOOLEAN FastRegister,
                                     NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_MR **NdkMr);
typedef NTSTATUS (*NDK_FN_CREATE_MW)(NDK_PD *NdkPd, NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_MW **NdkMw);
typedef NTSTATUS (*NDK_FN_CREATE_SRQ)(NDK_PD *NdkPd, ULONG SrqDepth, ULONG MaxReceiveRequestSge,
                                      ULONG NotifyThreshold,
                                      NDK_FN_SRQ_NOTIFICATION_CALLBACK SrqNotification,
                                      PVOID SrqNotificationContext, GROUP_AFFINITY *Affinity,
                                      NDK_FN_CREATE_COMPLETION CreateCompletion,
                                      PVOID RequestContext, NDK_SRQ **NdkSrq);
typedef NTSTATUS (*NDK_FN_CREATE_QP)(NDK_PD *NdkPd, NDK_CQ *ReceiveCq, NDK_CQ *InitiatorCq,
                                     PVOID QPContext, ULONG ReceiveQueueDepth,
                                     ULONG InitiatorQueueDepth, ULONG MaxReceiveRequestSge,
                                     ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                     NDK_FN_CREATE_COMPLETION CreateCompletion,
                                     PVOID RequestContext, NDK_QP **NdkQp);
typedef NTSTATUS (*NDK_FN_CREATE_QP_WITH_SRQ)(NDK_PD *NdkPd, NDK_CQ *ReceiveCq,
                                              NDK_CQ *InitiatorCq, NDK_SRQ *Srq,
                                              PVOID QPContext, ULONG InitiatorQueueDepth,
                                              ULONG MaxInitiatorRequestSge, ULONG InlineDataSize,
                                              NDK_FN_CREATE_COMPLETION CreateCompletion,
                                              PVOID RequestContext, NDK_QP **NdkQp);
typedef NTSTATUS (*NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN)(NDK_PD *NdkPd, UINT32 *Token);

/* MR, MW */
typedef NTSTATUS (*NDK_FN_REGISTER_MR)(NDK_MR *NdkMr, MDL *Mdl, SIZE_T Length, ULONG Flags,
                                       NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                       PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_DEREGISTER_MR)(NDK_MR *NdkMr, NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                         PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_INITIALIZE_FAST_REGISTER_MR)(NDK_MR *NdkMr, ULONG AdapterPageCount,
                                                       BOOLEAN RemoteAccess,
                                                       NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                                       PVOID RequestContext);
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MR)(NDK_MR *NdkMr);
typedef UINT32 (*NDK_FN_GET_LOCAL_TOKEN_FROM_MR)(NDK_MR *NdkMr);
typedef UINT32 (*NDK_FN_GET_REMOTE_TOKEN_FROM_MW)(NDK_MW *NdkMw);

/* SRQ */
typedef NTSTATUS (*NDK_FN_MODIFY_SRQ)(NDK_SRQ *NdkSrq, ULONG SrqDepth, ULONG NotifyThreshold,
                                      NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_SRQ_RECEIVE)(NDK_SRQ *NdkSrq, PVOID RequestContext, const NDK_SGE *Sgl,
                                       ULONG NumSge);

/* QP (work requests: no callback; success means a CQ entry follows) */
typedef void (*NDK_FN_FLUSH)(NDK_QP *NdkQp);
typedef NTSTATUS (*NDK_FN_SEND)(NDK_QP *NdkQp, PVOID RequestContext, const NDK_SGE *Sgl,
                                ULONG NumSge, ULONG Flags);
typedef NTSTATUS (*NDK_FN_RECEIVE)(NDK_QP *NdkQp, PVOID RequestContext, const NDK_SGE *Sgl,
                                   ULONG NumSge);
typedef NTSTATUS (*NDK_FN_BIND)(NDK_QP *NdkQp, PVOID RequestContext, NDK_MR *Mr, NDK_MW *Mw,
                                PVOID VirtualAddress, SIZE_T Length, ULONG Flags);
typedef NTSTATUS (*NDK_FN_FAST_REGISTER)(NDK_QP *NdkQp, PVOID RequestContext, NDK_MR *NdkMr,
                                         ULONG AdapterPageCount,
                                         const NDK_LOGICAL_ADDRESS *AdapterPageArray,
                                         ULONG FBO, SIZE_T Length, PVOID BaseVirtualAddress,
                                         ULONG Flags);
typedef NTSTATUS (*NDK_FN_INVALIDATE)(NDK_QP *NdkQp, PVOID RequestContext,
                                      NDK_OBJECT_HEADER *MrOrMw, ULONG Flags);
typedef NTSTATUS (*NDK_FN_READ)(NDK_QP *NdkQp, PVOID RequestContext, const NDK_SGE *Sgl,
                                ULONG NumSge, UINT64 RemoteAddress, UINT32 RemoteToken,
                                ULONG Flags);
typedef NTSTATUS (*NDK_FN_WRITE)(NDK_QP *NdkQp, PVOID RequestContext, const NDK_SGE *Sgl,
                                 ULONG NumSge, UINT64 RemoteAddress, UINT32 RemoteToken,
                                 ULONG Flags);
typedef NTSTATUS (*NDK_FN_SEND_AND_INVALIDATE)(NDK_QP *NdkQp, PVOID RequestContext,
                                               const NDK_SGE *Sgl, ULONG NumSge, ULONG Flags,
                                               UINT32 RemoteToken);

/* shared endpoint, connector, listener */
typedef NTSTATUS (*NDK_FN_GET_LOCAL_ADDRESS)(NDK_OBJECT_HEADER *Object, struct sockaddr *Address,
                                             ULONG *AddressLength);
typedef NTSTATUS (*NDK_FN_CONNECTOR_GET_ADDRESS)(NDK_CONNECTOR *NdkConnector,
                                                 struct sockaddr *Address, ULONG *AddressLength);
typedef NTSTATUS (*NDK_FN_CONNECT)(NDK_CONNECTOR *NdkConnector, NDK_QP *NdkQp,
                                   const struct sockaddr *SrcAddress, ULONG SrcAddressLength,
                                   const struct sockaddr *DestAddress, ULONG DestAddressLength,
                                   ULONG InboundReadLimit, ULONG OutboundReadLimit,
                                   const void *PrivateData, ULONG PrivateDataLength,
                                   NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                   PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_CONNECT_WITH_SHARED_ENDPOINT)(
    NDK_CONNECTOR *NdkConnector, NDK_QP *NdkQp, NDK_SHARED_ENDPOINT *NdkSharedEndpoint,
    const struct sockaddr *DestAddress, ULONG DestAddressLength, ULONG InboundReadLimit,
    ULONG OutboundReadLimit, const void *PrivateData, ULONG PrivateDataLength,
    NDK_FN_REQUEST_COMPLETION RequestCompletion, PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_COMPLETE_CONNECT)(NDK_CONNECTOR *NdkConnector,
                                            NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                            PVOID DisconnectEventContext,
                                            NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                            PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_ACCEPT)(NDK_CONNECTOR *NdkConnector, NDK_QP *NdkQp,
                                  ULONG InboundReadLimit, ULONG OutboundReadLimit,
                                  const void *PrivateData, ULONG PrivateDataLength,
                                  NDK_FN_DISCONNECT_EVENT_CALLBACK DisconnectEvent,
                                  PVOID DisconnectEventContext,
                                  NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                  PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_REJECT)(NDK_CONNECTOR *NdkConnector, const void *PrivateData,
                                  ULONG PrivateDataLength);
typedef NTSTATUS (*NDK_FN_GET_CONNECTION_DATA)(NDK_CONNECTOR *NdkConnector,
                                               ULONG *InboundReadLimit,
                                               ULONG *OutboundReadLimit, PVOID PrivateData,
                                               ULONG *PrivateDataLength);
typedef NTSTATUS (*NDK_FN_DISCONNECT)(NDK_CONNECTOR *NdkConnector,
                                      NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                      PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_LISTEN)(NDK_LISTENER *NdkListener, const struct sockaddr *Address,
                                  ULONG AddressLength,
                                  NDK_FN_REQUEST_COMPLETION RequestCompletion,
                                  PVOID RequestContext);
typedef NTSTATUS (*NDK_FN_GET_LISTENER_LOCAL_ADDRESS)(NDK_LISTENER *NdkListener,
                                                      struct sockaddr *Address,
                                                      ULONG *AddressLength);
typedef void (*NDK_FN_CONTROL_CONNECT_EVENTS)(NDK_LISTENER *NdkListener, BOOLEAN Pause);
typedef NTSTATUS (*NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS)(NDK_SHARED_ENDPOINT *Endpoint,
                                                             struct sockaddr *Address,
                                                             ULONG *AddressLength);

/* ---- dispatch tables (slot order) ------------------------------------------------ */

typedef struct _NDK_ADAPTER_DISPATCH {
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_QUERY_ADAPTER_INFO NdkQueryAdapterInfo;
    NDK_FN_CREATE_CQ NdkCreateCq;
    NDK_FN_CREATE_PD NdkCreatePd;
    NDK_FN_CREATE_SHARED_ENDPOINT NdkCreateSharedEndpoint;
    NDK_FN_CREATE_CONNECTOR NdkCreateConnector;
    NDK_FN_CREATE_LISTENER NdkCreateListener;
    NDK_FN_BUILD_LAM NdkBuildLAM;
    NDK_FN_RELEASE_LAM NdkReleaseLAM;
} NDK_ADAPTER_DISPATCH;

typedef struct _NDK_CQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseCq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_RESIZE_CQ NdkResizeCq;
    NDK_FN_ARM_CQ NdkArmCq;
    NDK_FN_GET_CQ_RESULTS NdkGetCqResults;
    NDK_FN_CONTROL_CQ_INTERRUPT_MODERATION NdkControlCqInterruptModeration;
    NDK_FN_GET_CQ_RESULTS_EX NdkGetCqResultsEx;
} NDK_CQ_DISPATCH;

typedef struct _NDK_PD_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkClosePd;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_CREATE_MR NdkCreateMr;
    NDK_FN_CREATE_MW NdkCreateMw;
    NDK_FN_CREATE_SRQ NdkCreateSrq;
    NDK_FN_CREATE_QP NdkCreateQp;
    NDK_FN_CREATE_QP_WITH_SRQ NdkCreateQpWithSrq;
    NDK_FN_GET_PRIVILEGED_MEMORY_REGION_TOKEN NdkGetPrivilegedMemoryRegionToken;
} NDK_PD_DISPATCH;

typedef struct _NDK_MR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMr;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_REGISTER_MR NdkRegisterMr;
    NDK_FN_DEREGISTER_MR NdkDeregisterMr;
    NDK_FN_INITIALIZE_FAST_REGISTER_MR NdkInitializeFastRegisterMr;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MR NdkGetRemoteTokenFromMr;
    NDK_FN_GET_LOCAL_TOKEN_FROM_MR NdkGetLocalTokenFromMr;
} NDK_MR_DISPATCH;

typedef struct _NDK_MW_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseMw;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_GET_REMOTE_TOKEN_FROM_MW NdkGetRemoteTokenFromMw;
} NDK_MW_DISPATCH;

typedef struct _NDK_SRQ_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSrq;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_MODIFY_SRQ NdkModifySrq;
    NDK_FN_SRQ_RECEIVE NdkSrqReceive;
} NDK_SRQ_DISPATCH;

typedef struct _NDK_QP_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseQp;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_FLUSH NdkFlush;
    NDK_FN_SEND NdkSend;
    NDK_FN_RECEIVE NdkReceive;
    NDK_FN_BIND NdkBind;
    NDK_FN_FAST_REGISTER NdkFastRegister;
    NDK_FN_INVALIDATE NdkInvalidate;
    NDK_FN_READ NdkRead;
    NDK_FN_WRITE NdkWrite;
    NDK_FN_SEND_AND_INVALIDATE NdkSendAndInvalidate;
} NDK_QP_DISPATCH;

typedef struct _NDK_SHARED_ENDPOINT_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseSharedEndpoint;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_GET_SHARED_ENDPOINT_LOCAL_ADDRESS NdkGetSharedEndpointLocalAddress;
} NDK_SHARED_ENDPOINT_DISPATCH;

typedef struct _NDK_CONNECTOR_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseConnector;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_CONNECT NdkConnect;
    NDK_FN_CONNECT_WITH_SHARED_ENDPOINT NdkConnectWithSharedEndpoint;
    NDK_FN_COMPLETE_CONNECT NdkCompleteConnect;
    NDK_FN_ACCEPT NdkAccept;
    NDK_FN_REJECT NdkReject;
    NDK_FN_GET_CONNECTION_DATA NdkGetConnectionData;
    NDK_FN_CONNECTOR_GET_ADDRESS NdkGetLocalAddress;
    NDK_FN_CONNECTOR_GET_ADDRESS NdkGetPeerAddress;
    NDK_FN_DISCONNECT NdkDisconnect;
} NDK_CONNECTOR_DISPATCH;

typedef struct _NDK_LISTENER_DISPATCH {
    NDK_FN_CLOSE_OBJECT NdkCloseListener;
    NDK_FN_QUERY_EXTENSION_INTERFACE NdkQueryExtensionInterface;
    NDK_FN_LISTEN NdkListen;
    NDK_FN_GET_LISTENER_LOCAL_ADDRESS NdkGetListenerLocalAddress;
    NDK_FN_CONTROL_CONNECT_EVENTS NdkControlConnectEvents;
} NDK_LISTENER_DISPATCH;

/* ---- objects ------------------------------------------------------------------------ */

#define NDK_OBJECT(name, dispatch) \
    struct _##name {               \
        NDK_OBJECT_HEADER Header;  \
        const dispatch *Dispatch;  \
    }
NDK_OBJECT(NDK_ADAPTER, NDK_ADAPTER_DISPATCH);
NDK_OBJECT(NDK_CQ, NDK_CQ_DISPATCH);
NDK_OBJECT(NDK_PD, NDK_PD_DISPATCH);
NDK_OBJECT(NDK_MR, NDK_MR_DISPATCH);
NDK_OBJECT(NDK_MW, NDK_MW_DISPATCH);
NDK_OBJECT(NDK_SRQ, NDK_SRQ_DISPATCH);
NDK_OBJECT(NDK_QP, NDK_QP_DISPATCH);
NDK_OBJECT(NDK_SHARED_ENDPOINT, NDK_SHARED_ENDPOINT_DISPATCH);
NDK_OBJECT(NDK_CONNECTOR, NDK_CONNECTOR_DISPATCH);
NDK_OBJECT(NDK_LISTENER, NDK_LISTENER_DISPATCH);
#undef NDK_OBJECT

/* ---- entry --------------------------------------------------------------------------- */

/* Open an NDK adapter for the local address (the first provider in ND_PROVIDER's catalog
 * that serves it, as NdOpenAdapter picks).  Version: the consumer's major and the lowest
 * minor it accepts (NDIS_STATUS_BAD_VERSION otherwise); the adapter reports 1.2.  Callbacks
 * run on the adapter's callback thread; ND_NDK_COMPLETION=pending makes every request that
 * may pend complete through its callback. */
NTSTATUS NdkOpenAdapter(const struct sockaddr *Address, ULONG AddressLength, NDK_VERSION Version,
                        NDK_ADAPTER **Adapter);

/* Close an adapter: blocks until every callback of its objects has returned. */
void NdkCloseAdapter(NDK_ADAPTER *Adapter);

#ifdef __cplusplus
}
#endif

#endif /* NDKPI_H */
