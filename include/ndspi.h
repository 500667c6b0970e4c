/*
 * ndspi.h - the NetworkDirect service provider interface (ND v2, plus the
 * ND v1 interfaces), for Linux.
 *
 * Written for netdirect from Microsoft's NetworkDirect SPI documentation
 * (the "NetworkDirect SPI" overview and the IND2Provider, IND2Adapter,
 * IND2CompletionQueue, IND2SharedReceiveQueue, IND2MemoryRegion,
 * IND2MemoryWindow, IND2QueuePair, IND2Connector, IND2Listener and
 * IND2Overlapped pages).  Code written against Microsoft's ndspi.h compiles
 * against this one unchanged; see docs/PORTING.md.
 *
 * Usage: `-I include` is enough for this header; Windows programs add
 * `-I include/win32` for <windows.h> and friends.  The Windows types it
 * needs come from win32/ndw_types.h and win32/ndw_com.h, which the
 * include/win32 headers share, so each type has one definition.
 *
 * Binary layout (what libnetdirect implements):
 *  - An object is a pointer to a vtable of function pointers, `This` first,
 *    in exactly the order declared below (slot numbers in the comments).
 *    Each interface repeats its base interface's methods first: in C that
 *    builds the lpVtbl struct, in C++ the re-declarations are overrides of
 *    the base's pure virtuals and take no new slot.
 *  - C++ interfaces have no virtual destructor (it would add two Itanium
 *    vtable entries); objects are freed by Release().
 *  - Methods use the platform C calling convention (STDMETHODCALLTYPE is
 *    empty on Linux).
 *  - Socket addresses are Linux sockaddrs (AF_INET6 == 10).
 *
 * Unlike Microsoft's header this one uses no SAL annotations: libstdc++
 * uses __in and __out as parameter names, so a header that needs them
 * defined breaks <functional>, <map> and <string> included after it.
 */
#ifndef _NETDIRECT_SPI_
#define _NETDIRECT_SPI_
#ifndef NDSPI_H
#define NDSPI_H

#include "win32/ndw_types.h"
#include "win32/ndw_com.h" /* also re-evaluates DEFINE_GUID for INITGUID */
#include "nddef.h"
#include "ndstatus.h"

/* ===========================================================================
 * ND v2
 * ======================================================================== */

/* Interface IDs.  libnetdirect exports these symbols. */
/* {ABF72719-B016-4A40-A6F7-622791A7044C} */
DEFINE_GUID(IID_IND2Overlapped, 0xabf72719, 0xb016, 0x4a40,
            0xa6, 0xf7, 0x62, 0x27, 0x91, 0xa7, 0x04, 0x4c);
/* {20CC445E-64A0-4CBB-AA75-F6A7251FDA9E} */
DEFINE_GUID(IID_IND2CompletionQueue, 0x20cc445e, 0x64a0, 0x4cbb,
            0xaa, 0x75, 0xf6, 0xa7, 0x25, 0x1f, 0xda, 0x9e);
/* {AABD67DC-459A-4DB1-826B-56CFCC278883} */
DEFINE_GUID(IID_IND2SharedReceiveQueue, 0xaabd67dc, 0x459a, 0x4db1,
            0x82, 0x6b, 0x56, 0xcf, 0xcc, 0x27, 0x88, 0x83);
/* {070FE1F5-0AB5-4361-88DB-974BA704D4B9} */
DEFINE_GUID(IID_IND2MemoryWindow, 0x070fe1f5, 0x0ab5, 0x4361,
            0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9);
/* {55DFEA2F-BC56-4982-8A45-0301BE46C413} */
DEFINE_GUID(IID_IND2MemoryRegion, 0x55dfea2f, 0xbc56, 0x4982,
            0x8a, 0x45, 0x03, 0x01, 0xbe, 0x46, 0xc4, 0x13);
/* {EEF2F332-B75D-4063-BCE3-3A0BAD2D02CE} */
DEFINE_GUID(IID_IND2QueuePair, 0xeef2f332, 0xb75d, 0x4063,
            0xbc, 0xe3, 0x3a, 0x0b, 0xad, 0x2d, 0x02, 0xce);
/* {7DD615C4-6B4C-4866-950C-F3B1D25A5302} */
DEFINE_GUID(IID_IND2Connector, 0x7dd615c4, 0x6b4c, 0x4866,
            0x95, 0x0c, 0xf3, 0xb1, 0xd2, 0x5a, 0x53, 0x02);
/* {65D23D83-3A57-4E02-86A4-350165C2D130} */
DEFINE_GUID(IID_IND2Listener, 0x65d23d83, 0x3a57, 0x4e02,
            0x86, 0xa4, 0x35, 0x01, 0x65, 0xc2, 0xd1, 0x30);
/* {D89C798C-4823-4D69-846C-DFDCCFF9E5F3} */
DEFINE_GUID(IID_IND2Adapter, 0xd89c798c, 0x4823, 0x4d69,
            0x84, 0x6c, 0xdf, 0xdc, 0xcf, 0xf9, 0xe5, 0xf3);
/* {49EAE6C1-76C4-46D0-8003-5C2EAA2C9A8E} */
DEFINE_GUID(IID_IND2Provider, 0x49eae6c1, 0x76c4, 0x46d0,
            0x80, 0x03, 0x5c, 0x2e, 0xaa, 0x2c, 0x9a, 0x8e);

NDW_INTERFACES_BEGIN

/* Base of every object with asynchronous requests (IND2Overlapped). */
#undef INTERFACE
#define INTERFACE IND2Overlapped
DECLARE_INTERFACE_(IND2Overlapped, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2CompletionQueue: 9 slots.  GetResults returns the number of results written. */
#undef INTERFACE
#define INTERFACE IND2CompletionQueue
DECLARE_INTERFACE_(IND2CompletionQueue, IND2Overlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    /* IND2CompletionQueue */
    /*  5 */ STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    /*  6 */ STDMETHOD(Resize)(THIS_ ULONG queueDepth) PURE;
    /*  7 */ STDMETHOD(Notify)(THIS_ ULONG type, OVERLAPPED *pOverlapped) PURE;
    /*  8 */ STDMETHOD_(ULONG, GetResults)(THIS_ ND2_RESULT results[], ULONG nResults) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2SharedReceiveQueue: 9 slots. */
#undef INTERFACE
#define INTERFACE IND2SharedReceiveQueue
DECLARE_INTERFACE_(IND2SharedReceiveQueue, IND2Overlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    /* IND2SharedReceiveQueue */
    /*  5 */ STDMETHOD(GetNotifyAffinity)(THIS_ USHORT *pGroup, KAFFINITY *pAffinity) PURE;
    /*  6 */ STDMETHOD(Modify)(THIS_ ULONG queueDepth, ULONG notifyThreshold) PURE;
    /*  7 */ STDMETHOD(Notify)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /*  8 */ STDMETHOD(Receive)(THIS_ void *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2MemoryWindow: 4 slots; not overlapped. */
#undef INTERFACE
#define INTERFACE IND2MemoryWindow
DECLARE_INTERFACE_(IND2MemoryWindow, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2MemoryWindow */
    /*  3 */ STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2MemoryRegion: 9 slots. */
#undef INTERFACE
#define INTERFACE IND2MemoryRegion
DECLARE_INTERFACE_(IND2MemoryRegion, IND2Overlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    /* IND2MemoryRegion */
    /*  5 */ STDMETHOD(Register)(THIS_
        const void *pBuffer,
        SIZE_T cbBuffer,
        ULONG flags,
        OVERLAPPED *pOverlapped) PURE;
    /*  6 */ STDMETHOD(Deregister)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /*  7 */ STDMETHOD_(UINT32, GetLocalToken)(THIS) PURE;
    /*  8 */ STDMETHOD_(UINT32, GetRemoteToken)(THIS) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2QueuePair: 10 slots; not overlapped.  sge may be NULL when nSge is 0. */
#undef INTERFACE
#define INTERFACE IND2QueuePair
DECLARE_INTERFACE_(IND2QueuePair, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2QueuePair */
    /*  3 */ STDMETHOD(Flush)(THIS) PURE;
    /*  4 */ STDMETHOD(Send)(THIS_
        void *requestContext,
        const ND2_SGE sge[],
        ULONG nSge,
        ULONG flags) PURE;
    /*  5 */ STDMETHOD(Receive)(THIS_ void *requestContext, const ND2_SGE sge[], ULONG nSge) PURE;
    /*  6 */ STDMETHOD(Bind)(THIS_
        void *requestContext,
        IUnknown *pMemoryRegion,
        IUnknown *pMemoryWindow,
        const void *pBuffer,
        SIZE_T cbBuffer,
        ULONG flags) PURE;
    /*  7 */ STDMETHOD(Invalidate)(THIS_
        void *requestContext,
        IUnknown *pMemoryWindow,
        ULONG flags) PURE;
    /*  8 */ STDMETHOD(Read)(THIS_
        void *requestContext,
        const ND2_SGE sge[],
        ULONG nSge,
        UINT64 remoteAddress,
        UINT32 remoteToken,
        ULONG flags) PURE;
    /*  9 */ STDMETHOD(Write)(THIS_
        void *requestContext,
        const ND2_SGE sge[],
        ULONG nSge,
        UINT64 remoteAddress,
        UINT32 remoteToken,
        ULONG flags) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2Connector: 16 slots. */
#undef INTERFACE
#define INTERFACE IND2Connector
DECLARE_INTERFACE_(IND2Connector, IND2Overlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    /* IND2Connector */
    /*  5 */ STDMETHOD(Bind)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress) PURE;
    /*  6 */ STDMETHOD(Connect)(THIS_
        IUnknown *pQueuePair,
        const struct sockaddr *pDestAddress,
        ULONG cbDestAddress,
        ULONG inboundReadLimit,
        ULONG outboundReadLimit,
        const void *pPrivateData,
        ULONG cbPrivateData,
        OVERLAPPED *pOverlapped) PURE;
    /*  7 */ STDMETHOD(CompleteConnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /*  8 */ STDMETHOD(Accept)(THIS_
        IUnknown *pQueuePair,
        ULONG inboundReadLimit,
        ULONG outboundReadLimit,
        const void *pPrivateData,
        ULONG cbPrivateData,
        OVERLAPPED *pOverlapped) PURE;
    /*  9 */ STDMETHOD(Reject)(THIS_ const void *pPrivateData, ULONG cbPrivateData) PURE;
    /* 10 */ STDMETHOD(GetReadLimits)(THIS_
        ULONG *pInboundReadLimit,
        ULONG *pOutboundReadLimit) PURE;
    /* 11 */ STDMETHOD(GetPrivateData)(THIS_ void *pPrivateData, ULONG *pcbPrivateData) PURE;
    /* 12 */ STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    /* 13 */ STDMETHOD(GetPeerAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    /* 14 */ STDMETHOD(NotifyDisconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /* 15 */ STDMETHOD(Disconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2Listener: 9 slots. */
#undef INTERFACE
#define INTERFACE IND2Listener
DECLARE_INTERFACE_(IND2Listener, IND2Overlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Overlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_ OVERLAPPED *pOverlapped, BOOL wait) PURE;
    /* IND2Listener */
    /*  5 */ STDMETHOD(Bind)(THIS_ const struct sockaddr *pAddress, ULONG cbAddress) PURE;
    /*  6 */ STDMETHOD(Listen)(THIS_ ULONG backlog) PURE;
    /*  7 */ STDMETHOD(GetLocalAddress)(THIS_ struct sockaddr *pAddress, ULONG *pcbAddress) PURE;
    /*  8 */ STDMETHOD(GetConnectionRequest)(THIS_
        IUnknown *pConnector,
        OVERLAPPED *pOverlapped) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2Adapter: 14 slots; not overlapped (CreateOverlappedFile replaces v1's GetFileHandle). */
#undef INTERFACE
#define INTERFACE IND2Adapter
DECLARE_INTERFACE_(IND2Adapter, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Adapter */
    /*  3 */ STDMETHOD(CreateOverlappedFile)(THIS_ HANDLE *phOverlappedFile) PURE;
    /*  4 */ STDMETHOD(Query)(THIS_ ND2_ADAPTER_INFO *pInfo, ULONG *pcbInfo) PURE;
    /*  5 */ STDMETHOD(QueryAddressList)(THIS_
        SOCKET_ADDRESS_LIST *pAddressList,
        ULONG *pcbAddressList) PURE;
    /*  6 */ STDMETHOD(CreateCompletionQueue)(THIS_
        REFIID iid,
        HANDLE hOverlappedFile,
        ULONG queueDepth,
        USHORT group,
        KAFFINITY affinity,
        void **ppCompletionQueue) PURE;
    /*  7 */ STDMETHOD(CreateMemoryRegion)(THIS_
        REFIID iid,
        HANDLE hOverlappedFile,
        void **ppMemoryRegion) PURE;
    /*  8 */ STDMETHOD(CreateMemoryWindow)(THIS_ REFIID iid, void **ppMemoryWindow) PURE;
    /*  9 */ STDMETHOD(CreateSharedReceiveQueue)(THIS_
        REFIID iid,
        HANDLE hOverlappedFile,
        ULONG queueDepth,
        ULONG maxRequestSge,
        ULONG notifyThreshold,
        USHORT group,
        KAFFINITY affinity,
        void **ppSharedReceiveQueue) PURE;
    /* 10 */ STDMETHOD(CreateQueuePair)(THIS_
        REFIID iid,
        IUnknown *pReceiveCompletionQueue,
        IUnknown *pInitiatorCompletionQueue,
        void *context,
        ULONG receiveQueueDepth,
        ULONG initiatorQueueDepth,
        ULONG maxReceiveRequestSge,
        ULONG maxInitiatorRequestSge,
        ULONG inlineDataSize,
        void **ppQueuePair) PURE;
    /* 11 */ STDMETHOD(CreateQueuePairWithSrq)(THIS_
        REFIID iid,
        IUnknown *pReceiveCompletionQueue,
        IUnknown *pInitiatorCompletionQueue,
        IUnknown *pSharedReceiveQueue,
        void *context,
        ULONG initiatorQueueDepth,
        ULONG maxInitiatorRequestSge,
        ULONG inlineDataSize,
        void **ppQueuePair) PURE;
    /* 12 */ STDMETHOD(CreateConnector)(THIS_
        REFIID iid,
        HANDLE hOverlappedFile,
        void **ppConnector) PURE;
    /* 13 */ STDMETHOD(CreateListener)(THIS_
        REFIID iid,
        HANDLE hOverlappedFile,
        void **ppListener) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* IND2Provider: 6 slots; returned by a provider module's DllGetClassObject. */
#undef INTERFACE
#define INTERFACE IND2Provider
DECLARE_INTERFACE_(IND2Provider, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* IND2Provider */
    /*  3 */ STDMETHOD(QueryAddressList)(THIS_
        SOCKET_ADDRESS_LIST *pAddressList,
        ULONG *pcbAddressList) PURE;
    /*  4 */ STDMETHOD(ResolveAddress)(THIS_
        const struct sockaddr *pAddress,
        ULONG cbAddress,
        UINT64 *pAdapterId) PURE;
    /*  5 */ STDMETHOD(OpenAdapter)(THIS_ REFIID iid, UINT64 adapterId, void **ppAdapter) PURE;
    END_INTERFACE
};
#undef INTERFACE

NDW_INTERFACES_END

/* ===========================================================================
 * ND v1 ("HPC Pack 2008 SDK" interfaces).  v1 sizes and counts are SIZE_T;
 * the address of the caller's ND_RESULT is the request context.
 * ======================================================================== */

/* A registered memory region in v1: an opaque pointer-sized handle. */
DECLARE_HANDLE(ND_MR_HANDLE);

/* v1 adapter limits (INDAdapter::Query): 128 bytes. */
typedef struct _ND_ADAPTER_INFO1 {
    UINT32 VendorId;
    UINT32 DeviceId;
    SIZE_T MaxInboundSge;
    SIZE_T MaxInboundRequests;
    SIZE_T MaxInboundLength;
    SIZE_T MaxOutboundSge;
    SIZE_T MaxOutboundRequests;
    SIZE_T MaxOutboundLength;
    SIZE_T MaxInlineData;
    SIZE_T MaxInboundReadLimit;
    SIZE_T MaxOutboundReadLimit;
    SIZE_T MaxCqEntries;
    SIZE_T MaxRegistrationSize;
    SIZE_T MaxWindowSize;
    SIZE_T LargeRequestThreshold;
    SIZE_T MaxCallerData;
    SIZE_T MaxCalleeData;
} ND_ADAPTER_INFO1;
#define ND_ADAPTER_INFO ND_ADAPTER_INFO1

/* A v1 completion: 16 bytes. */
typedef struct _ND_RESULT {
    HRESULT Status;
    SIZE_T BytesTransferred;
} ND_RESULT;

/*
 * Describes a bound memory window to the peer: 20 bytes, packed, every
 * field in network byte order.
 */
#pragma pack(push, 1)
typedef struct _ND_MW_DESCRIPTOR {
    UINT64 Base;
    UINT64 Length;
    UINT32 Token;
} ND_MW_DESCRIPTOR;
#pragma pack(pop)

/* A v1 scatter/gather element: 24 bytes. */
typedef struct _ND_SGE {
    void *pAddr;
    SIZE_T Length;
    ND_MR_HANDLE hMr;
} ND_SGE;

/* v1 interface IDs.  IID_INDMemoryWindow equals IID_IND2MemoryWindow. */
/* {C859E15E-75E2-4FE3-8D6D-0DFF36F02442} */
DEFINE_GUID(IID_INDOverlapped, 0xc859e15e, 0x75e2, 0x4fe3,
            0x8d, 0x6d, 0x0d, 0xff, 0x36, 0xf0, 0x24, 0x42);
/* {1245A633-2A32-473A-830C-E05D1F869D02} */
DEFINE_GUID(IID_INDCompletionQueue, 0x1245a633, 0x2a32, 0x473a,
            0x83, 0x0c, 0xe0, 0x5d, 0x1f, 0x86, 0x9d, 0x02);
/* {070FE1F5-0AB5-4361-88DB-974BA704D4B9} */
DEFINE_GUID(IID_INDMemoryWindow, 0x070fe1f5, 0x0ab5, 0x4361,
            0x88, 0xdb, 0x97, 0x4b, 0xa7, 0x04, 0xd4, 0xb9);
/* {DBD00EAB-B679-44A9-BD65-E82F3DE12D1A} */
DEFINE_GUID(IID_INDEndpoint, 0xdbd00eab, 0xb679, 0x44a9,
            0xbd, 0x65, 0xe8, 0x2f, 0x3d, 0xe1, 0x2d, 0x1a);
/* {1BCAF2D1-E274-4AEB-AC57-CD5D4376E0B7} */
DEFINE_GUID(IID_INDConnector, 0x1bcaf2d1, 0xe274, 0x4aeb,
            0xac, 0x57, 0xcd, 0x5d, 0x43, 0x76, 0xe0, 0xb7);
/* {BB902588-BA3F-4441-9FE1-3B6795E4E668} */
DEFINE_GUID(IID_INDListen, 0xbb902588, 0xba3f, 0x4441,
            0x9f, 0xe1, 0x3b, 0x67, 0x95, 0xe4, 0xe6, 0x68);
/* {A023C5A0-5B73-43BC-8D20-33AA07E9510F} */
DEFINE_GUID(IID_INDAdapter, 0xa023c5a0, 0x5b73, 0x43bc,
            0x8d, 0x20, 0x33, 0xaa, 0x07, 0xe9, 0x51, 0x0f);
/* {0C5DD316-5FDF-47E6-B2D0-2A6EDA8D39DD} */
DEFINE_GUID(IID_INDProvider, 0x0c5dd316, 0x5fdf, 0x47e6,
            0xb2, 0xd0, 0x2a, 0x6e, 0xda, 0x8d, 0x39, 0xdd);

NDW_INTERFACES_BEGIN

/* INDOverlapped: 5 slots. */
#undef INTERFACE
#define INTERFACE INDOverlapped
DECLARE_INTERFACE_(INDOverlapped, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDOverlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_
        OVERLAPPED *pOverlapped,
        SIZE_T *pNumberOfBytesTransferred,
        BOOL bWait) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDCompletionQueue: 8 slots. */
#undef INTERFACE
#define INTERFACE INDCompletionQueue
DECLARE_INTERFACE_(INDCompletionQueue, INDOverlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDOverlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_
        OVERLAPPED *pOverlapped,
        SIZE_T *pNumberOfBytesTransferred,
        BOOL bWait) PURE;
    /* INDCompletionQueue */
    /*  5 */ STDMETHOD(Resize)(THIS_ SIZE_T nEntries) PURE;
    /*  6 */ STDMETHOD(Notify)(THIS_ DWORD Type, OVERLAPPED *pOverlapped) PURE;
    /*  7 */ STDMETHOD_(SIZE_T, GetResults)(THIS_ ND_RESULT *pResults[], SIZE_T nResults) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDMemoryWindow: 3 slots. */
#undef INTERFACE
#define INTERFACE INDMemoryWindow
DECLARE_INTERFACE_(INDMemoryWindow, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDEndpoint: 13 slots. */
#undef INTERFACE
#define INTERFACE INDEndpoint
DECLARE_INTERFACE_(INDEndpoint, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDEndpoint */
    /*  3 */ STDMETHOD(Flush)(THIS) PURE;
    /*  4 */ STDMETHOD_(void, StartRequestBatch)(THIS) PURE;
    /*  5 */ STDMETHOD_(void, SubmitRequestBatch)(THIS) PURE;
    /*  6 */ STDMETHOD(Send)(THIS_
        ND_RESULT *pResult,
        const ND_SGE *pSgl,
        SIZE_T nSge,
        DWORD Flags) PURE;
    /*  7 */ STDMETHOD(SendAndInvalidate)(THIS_
        ND_RESULT *pResult,
        const ND_SGE *pSgl,
        SIZE_T nSge,
        const ND_MW_DESCRIPTOR *pRemoteMwDescriptor,
        DWORD Flags) PURE;
    /*  8 */ STDMETHOD(Receive)(THIS_ ND_RESULT *pResult, const ND_SGE *pSgl, SIZE_T nSge) PURE;
    /*  9 */ STDMETHOD(Bind)(THIS_
        ND_RESULT *pResult,
        ND_MR_HANDLE hMr,
        INDMemoryWindow *pMw,
        const void *pBuffer,
        SIZE_T BufferSize,
        DWORD Flags,
        ND_MW_DESCRIPTOR *pMwDescriptor) PURE;
    /* 10 */ STDMETHOD(Invalidate)(THIS_
        ND_RESULT *pResult,
        INDMemoryWindow *pMw,
        DWORD Flags) PURE;
    /* 11 */ STDMETHOD(Read)(THIS_
        ND_RESULT *pResult,
        const ND_SGE *pSgl,
        SIZE_T nSge,
        const ND_MW_DESCRIPTOR *pRemoteMwDescriptor,
        ULONGLONG Offset,
        DWORD Flags) PURE;
    /* 12 */ STDMETHOD(Write)(THIS_
        ND_RESULT *pResult,
        const ND_SGE *pSgl,
        SIZE_T nSge,
        const ND_MW_DESCRIPTOR *pRemoteMwDescriptor,
        ULONGLONG Offset,
        DWORD Flags) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDConnector: 15 slots. */
#undef INTERFACE
#define INTERFACE INDConnector
DECLARE_INTERFACE_(INDConnector, INDOverlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDOverlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_
        OVERLAPPED *pOverlapped,
        SIZE_T *pNumberOfBytesTransferred,
        BOOL bWait) PURE;
    /* INDConnector */
    /*  5 */ STDMETHOD(CreateEndpoint)(THIS_
        INDCompletionQueue *pInboundCq,
        INDCompletionQueue *pOutboundCq,
        SIZE_T nInboundEntries,
        SIZE_T nOutboundEntries,
        SIZE_T nInboundSge,
        SIZE_T nOutboundSge,
        SIZE_T InboundReadLimit,
        SIZE_T OutboundReadLimit,
        SIZE_T *pMaxInlineData,
        INDEndpoint **ppEndpoint) PURE;
    /*  6 */ STDMETHOD(Connect)(THIS_
        INDEndpoint *pEndpoint,
        const struct sockaddr *pAddress,
        SIZE_T AddressLength,
        INT Protocol,
        USHORT LocalPort,
        const void *pPrivateData,
        SIZE_T PrivateDataLength,
        OVERLAPPED *pOverlapped) PURE;
    /*  7 */ STDMETHOD(CompleteConnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /*  8 */ STDMETHOD(Accept)(THIS_
        INDEndpoint *pEndpoint,
        const void *pPrivateData,
        SIZE_T PrivateDataLength,
        OVERLAPPED *pOverlapped) PURE;
    /*  9 */ STDMETHOD(Reject)(THIS_ const void *pPrivateData, SIZE_T PrivateDataLength) PURE;
    /* 10 */ STDMETHOD(GetConnectionData)(THIS_
        SIZE_T *pInboundReadLimit,
        SIZE_T *pOutboundReadLimit,
        void *pPrivateData,
        SIZE_T *pPrivateDataLength) PURE;
    /* 11 */ STDMETHOD(GetLocalAddress)(THIS_
        struct sockaddr *pAddress,
        SIZE_T *pAddressLength) PURE;
    /* 12 */ STDMETHOD(GetPeerAddress)(THIS_
        struct sockaddr *pAddress,
        SIZE_T *pAddressLength) PURE;
    /* 13 */ STDMETHOD(NotifyDisconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    /* 14 */ STDMETHOD(Disconnect)(THIS_ OVERLAPPED *pOverlapped) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDListen: 6 slots. */
#undef INTERFACE
#define INTERFACE INDListen
DECLARE_INTERFACE_(INDListen, INDOverlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDOverlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_
        OVERLAPPED *pOverlapped,
        SIZE_T *pNumberOfBytesTransferred,
        BOOL bWait) PURE;
    /* INDListen */
    /*  5 */ STDMETHOD(GetConnectionRequest)(THIS_
        INDConnector *pConnector,
        OVERLAPPED *pOverlapped) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDAdapter: 14 slots. */
#undef INTERFACE
#define INTERFACE INDAdapter
DECLARE_INTERFACE_(INDAdapter, INDOverlapped)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDOverlapped */
    /*  3 */ STDMETHOD(CancelOverlappedRequests)(THIS) PURE;
    /*  4 */ STDMETHOD(GetOverlappedResult)(THIS_
        OVERLAPPED *pOverlapped,
        SIZE_T *pNumberOfBytesTransferred,
        BOOL bWait) PURE;
    /* INDAdapter */
    /*  5 */ STDMETHOD_(HANDLE, GetFileHandle)(THIS) PURE;
    /*  6 */ STDMETHOD(Query)(THIS_
        DWORD VersionRequested,
        ND_ADAPTER_INFO1 *pInfo,
        SIZE_T *pBufferSize) PURE;
    /*  7 */ STDMETHOD(Control)(THIS_
        DWORD IoControlCode,
        const void *pInBuffer,
        SIZE_T InBufferSize,
        void *pOutBuffer,
        SIZE_T OutBufferSize,
        SIZE_T *pBytesReturned,
        OVERLAPPED *pOverlapped) PURE;
    /*  8 */ STDMETHOD(CreateCompletionQueue)(THIS_
        SIZE_T nEntries,
        INDCompletionQueue **ppCq) PURE;
    /*  9 */ STDMETHOD(RegisterMemory)(THIS_
        const void *pBuffer,
        SIZE_T BufferSize,
        OVERLAPPED *pOverlapped,
        ND_MR_HANDLE *phMr) PURE;
    /* 10 */ STDMETHOD(DeregisterMemory)(THIS_ ND_MR_HANDLE hMr, OVERLAPPED *pOverlapped) PURE;
    /* 11 */ STDMETHOD(CreateMemoryWindow)(THIS_
        ND_RESULT *pInvalidateResult,
        INDMemoryWindow **ppMw) PURE;
    /* 12 */ STDMETHOD(CreateConnector)(THIS_ INDConnector **ppConnector) PURE;
    /* 13 */ STDMETHOD(Listen)(THIS_
        SIZE_T Backlog,
        INT Protocol,
        USHORT Port,
        USHORT *pAssignedPort,
        INDListen **ppListen) PURE;
    END_INTERFACE
};
#undef INTERFACE

/* INDProvider: 5 slots. */
#undef INTERFACE
#define INTERFACE INDProvider
DECLARE_INTERFACE_(INDProvider, IUnknown)
{
    BEGIN_INTERFACE
    /* IUnknown */
    /*  0 */ STDMETHOD(QueryInterface)(THIS_ REFIID riid, void **ppvObject) PURE;
    /*  1 */ STDMETHOD_(ULONG, AddRef)(THIS) PURE;
    /*  2 */ STDMETHOD_(ULONG, Release)(THIS) PURE;
    /* INDProvider */
    /*  3 */ STDMETHOD(QueryAddressList)(THIS_
        SOCKET_ADDRESS_LIST *pAddressList,
        SIZE_T *pBufferSize) PURE;
    /*  4 */ STDMETHOD(OpenAdapter)(THIS_
        const struct sockaddr *pAddress,
        SIZE_T AddressLength,
        INDAdapter **ppAdapter) PURE;
    END_INTERFACE
};
#undef INTERFACE

NDW_INTERFACES_END

/* v1 names of two status codes. */
#define ND_LOCAL_LENGTH ND_DATA_OVERRUN
#define ND_INVALIDATION_ERROR ND_INVALID_DEVICE_REQUEST

/* ===========================================================================
 * C call helpers, as MIDL generates them: define COBJMACROS before including
 * this header in C to call `IND2Adapter_Query(p, &info, &cb)` instead of
 * `p->lpVtbl->Query(p, &info, &cb)`.
 * ======================================================================== */
#if defined(COBJMACROS) && (!defined(__cplusplus) || defined(CINTERFACE))
#include "ndspi_cobj.h"
#endif

#endif /* NDSPI_H */
#endif /* _NETDIRECT_SPI_ */
