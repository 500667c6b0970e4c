/*
 * nddef.h - NetworkDirect constants and data structures.
 *
 * Version numbers, ND_ADAPTER_FLAG_*, ND_CQ_NOTIFY_*, ND_MR_FLAG_*,
 * ND_OP_FLAG_*, ND2_REQUEST_TYPE, ND2_ADAPTER_INFO, ND2_RESULT and ND2_SGE,
 * as described by Microsoft's NetworkDirect SPI documentation (the
 * IND2Adapter, IND2CompletionQueue, IND2MemoryRegion and IND2QueuePair
 * pages).  Written for netdirect; layouts are those of 64-bit Windows and
 * are checked by tests/abi.  See docs/PORTING.md.
 */
#ifndef _NDDEF_H_
#define _NDDEF_H_
#ifndef NDDEF_H
#define NDDEF_H

#include "win32/ndw_types.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---- versions ----------------------------------------------------------- */

#define ND_VERSION_1 0x1
#define ND_VERSION_2 0x20000

/* The version the headers describe; ND_OP_FLAG_INLINE exists from v2 on. */
#ifndef NDVER
#define NDVER ND_VERSION_2
#endif

/* ---- ND2_ADAPTER_INFO.AdapterFlags -------------------------------------- */

#define ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED 0x00000001
#define ND_ADAPTER_FLAG_CQ_INTERRUPT_MODERATION_SUPPORTED 0x00000004
#define ND_ADAPTER_FLAG_MULTI_ENGINE_SUPPORTED 0x00000008
#define ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED 0x00000100
#define ND_ADAPTER_FLAG_LOOPBACK_CONNECTIONS_SUPPORTED 0x00010000

/* ---- IND2CompletionQueue::Notify type ----------------------------------- */

#define ND_CQ_NOTIFY_ERRORS 0
#define ND_CQ_NOTIFY_ANY 1
#define ND_CQ_NOTIFY_SOLICITED 2

/* ---- IND2MemoryRegion::Register flags ----------------------------------- */

#define ND_MR_FLAG_ALLOW_LOCAL_WRITE 0x00000001
#define ND_MR_FLAG_ALLOW_REMOTE_READ 0x00000002
/* Remote write implies local write: the value includes bit 0. */
#define ND_MR_FLAG_ALLOW_REMOTE_WRITE 0x00000005
#define ND_MR_FLAG_RDMA_READ_SINK 0x00000008
#define ND_MR_FLAG_DO_NOT_SECURE_VM 0x80000000

/* ---- request flags (IND2QueuePair Send/Bind/Invalidate/Read/Write) ------ */

#define ND_OP_FLAG_SILENT_SUCCESS 0x00000001
#define ND_OP_FLAG_READ_FENCE 0x00000002
#define ND_OP_FLAG_SEND_AND_SOLICIT_EVENT 0x00000004
#define ND_OP_FLAG_ALLOW_READ 0x00000008
#define ND_OP_FLAG_ALLOW_WRITE 0x00000010
#if NDVER >= ND_VERSION_2
#define ND_OP_FLAG_INLINE 0x00000020
#endif

/* ---- structures ---------------------------------------------------------- */

/* IND2Adapter::Query output: 96 bytes.  Set InfoVersion (ND_VERSION_2) on input. */
typedef struct _ND2_ADAPTER_INFO {
    ULONG InfoVersion;
    UINT16 VendorId;
    UINT16 DeviceId;
    UINT64 AdapterId;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    ULONG MaxInitiatorSge;
    ULONG MaxReceiveSge;
    ULONG MaxReadSge;
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSharedReceiveQueueDepth;
    ULONG MaxCompletionQueueDepth;
    ULONG InlineRequestThreshold;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData;
    ULONG MaxCalleeData;
    ULONG AdapterFlags;
} ND2_ADAPTER_INFO;

/* The 32-bit-process form (88 bytes): the two SIZE_T limits are ULONG. */
typedef struct _ND2_ADAPTER_INFO32 {
    ULONG InfoVersion;
    UINT16 VendorId;
    UINT16 DeviceId;
    UINT64 AdapterId;
    ULONG MaxRegistrationSize;
    ULONG MaxWindowSize;
    ULONG MaxInitiatorSge;
    ULONG MaxReceiveSge;
    ULONG MaxReadSge;
    ULONG MaxTransferLength;
    ULONG MaxInlineDataSize;
    ULONG MaxInboundReadLimit;
    ULONG MaxOutboundReadLimit;
    ULONG MaxReceiveQueueDepth;
    ULONG MaxInitiatorQueueDepth;
    ULONG MaxSharedReceiveQueueDepth;
    ULONG MaxCompletionQueueDepth;
    ULONG InlineRequestThreshold;
    ULONG LargeRequestThreshold;
    ULONG MaxCallerData;
    ULONG MaxCalleeData;
    ULONG AdapterFlags;
} ND2_ADAPTER_INFO32;

/* ND2_RESULT.RequestType.  A C enum: 32 bits. */
typedef enum _ND2_REQUEST_TYPE {
    Nd2RequestTypeReceive,
    Nd2RequestTypeSend,
    Nd2RequestTypeBind,
    Nd2RequestTypeInvalidate,
    Nd2RequestTypeRead,
    Nd2RequestTypeWrite
} ND2_REQUEST_TYPE;

/* One completion from IND2CompletionQueue::GetResults: 32 bytes. */
typedef struct _ND2_RESULT {
    HRESULT Status;
    ULONG BytesTransferred; /* meaningful for Receive only */
    void *QueuePairContext; /* the context given to CreateQueuePair */
    void *RequestContext;   /* the context given with the request */
    ND2_REQUEST_TYPE RequestType;
} ND2_RESULT;

/* One scatter/gather element: 16 bytes. */
typedef struct _ND2_SGE {
    void *Buffer;
    ULONG BufferLength;
    UINT32 MemoryRegionToken; /* the region's local token */
} ND2_SGE;

#ifdef __cplusplus
}
#endif

#endif /* NDDEF_H */
#endif /* _NDDEF_H_ */
