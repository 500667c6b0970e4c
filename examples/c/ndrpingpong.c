/*
 * ndrpingpong.c - NetworkDirect v2 RDMA Write ping-pong latency test, in C.
 *
 * Plain C, calling every interface through its lpVtbl, to show that the C
 * form of the ND v2 headers works.  The flow follows the description of
 * Microsoft's ndrpingpong example in the NetworkDirect documentation and
 * docs/PORTING.md:
 *
 *  - each side registers one buffer, binds a memory window over it and
 *    sends the peer a PeerInfo {window token, buffer address} (the client
 *    first, as iWARP requires);
 *  - the client RDMA-Writes `size` bytes whose last byte is the flag 'X' into
 *    the server's receive area; the server spins on the last byte of its own
 *    buffer, sets it to 'Y' and RDMA-Writes the same `size` bytes back; the
 *    client spins on the last byte of its own receive area;
 *  - while spinning both sides reap their Write completions with GetResults;
 *  - the client checks that every pong holds exactly the bytes it wrote;
 *  - at the end each side invalidates its window (IND2QueuePair::Invalidate)
 *    before the 0-byte messages that end the test, so that no Invalidate
 *    races the peer's Disconnect.
 *
 * The client passes its plan (sizes, iterations) as Connect private data, so
 * the server needs no matching options.  Every wait is bounded by
 * TIMEOUT_MS.  Any failure prints the failing call and its HRESULT and exits
 * non-zero.
 */

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <tchar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ndsupport.h"
#include "ndexample.h"

#define DEFAULT_PORT 54327
#define MAX_XFER (4 * 1024 * 1024)
#define HDR_LEN 40              /* SGE chunk size and warm-up size */
#define DEFAULT_MAX_SIZE 4096   /* default sweep: 1 .. 4096 */
#define DEFAULT_ITERATIONS 1000
#define WARMUP_ITERATIONS 100
#define MAX_SGE 16
#define QUEUE_DEPTH 8
#define TIMEOUT_MS ND_EXAMPLE_TIMEOUT_MS        /* bound on every wait */

#define RECV_CTXT ((void *)0x1000)
#define SEND_CTXT ((void *)0x2000)
#define BIND_CTXT ((void *)0x3000)
#define WRITE_CTXT ((void *)0x4000)
#define INVALIDATE_CTXT ((void *)0x5000)

#define CONNECT_MAGIC 0x50524E44 /* "DNRP" */

/* What each side tells the other about its buffer (16 bytes, host order). */
typedef struct _PeerInfo {
    UINT32 remoteToken;
    UINT32 reserved;
    UINT64 remoteAddress;
} PeerInfo;

/* The client's plan, sent as Connect private data. */
typedef struct _ConnectData {
    ULONG magic;
    ULONG minSize;
    ULONG maxSize;
    ULONG iterations;
} ConnectData;

typedef struct _Test {
    IND2Adapter *pAdapter;
    HANDLE hAdapterFile;
    IND2CompletionQueue *pCq;
    IND2QueuePair *pQp;
    IND2MemoryRegion *pMr;
    IND2MemoryWindow *pMw;
    IND2Connector *pConnector;
    ND2_ADAPTER_INFO info;
    OVERLAPPED ov;
    BOOL blocking;
    ULONG nSge;
    ULONG maxSize;
    /* Buffer layout: [receive area][send area][PeerInfo in][PeerInfo out]. */
    char *pBuf;
    SIZE_T cbBuf;
    char *pRecv;
    char *pSend;
    PeerInfo *pPeerIn;
    PeerInfo *pPeerOut;
    PeerInfo peer;
    /* Completion bookkeeping. */
    ULONG writesOutstanding;
    ULONG sendsOutstanding;
    ULONG bindsOutstanding;
    ULONG recvsDone;
    ULONG lastRecvBytes;
} Test;

static void ShowUsage(void)
{
    printf("ndrpingpong [options] <ip>[:<port>]\n"
           "Options:\n"
           "\t-s            - start as server (listen on IP/Port)\n"
           "\t-c            - start as client (connect to server IP/Port)\n"
           "\t-p            - polling mode for Write completions (default)\n"
           "\t-b            - blocking mode for Write completions (CQ Notify)\n"
           "\t-n <nSge>     - number of scatter/gather entries per Write (default 1)\n"
           "\t-i <count>    - iterations per size (client; default %u)\n"
           "\t-z <size>     - a single message size (client; default: sweep 1..%u)\n"
           "\t-h            - show this help\n"
           "\t<ip>[:<port>] - IPv4 a.b.c.d[:port] or IPv6 [addr]:port, default port %u\n",
           DEFAULT_ITERATIONS, DEFAULT_MAX_SIZE, DEFAULT_PORT);
}

static ULONG PrepareSge(ND2_SGE *pSge, ULONG nSge, char *pBuf, ULONG size, UINT32 token)
{
    ULONG n = 0;
    ULONG offset = 0;
    while (n + 1 < nSge && size - offset > HDR_LEN) {
        pSge[n].Buffer = pBuf + offset;
        pSge[n].BufferLength = HDR_LEN;
        pSge[n].MemoryRegionToken = token;
        offset += HDR_LEN;
        n++;
    }
    pSge[n].Buffer = pBuf + offset;
    pSge[n].BufferLength = size - offset;
    pSge[n].MemoryRegionToken = token;
    return n + 1;
}

/* Files one completion.  Returns FALSE if the CQ was empty. */
static BOOL ReapOne(Test *t)
{
    ND2_RESULT r;
    if (t->pCq->lpVtbl->GetResults(t->pCq, &r, 1) != 1)
        return FALSE;
    if (FAILED(r.Status)) {
        printf("completion of request type %d (context %p)\n", (int)r.RequestType, r.RequestContext);
        Fail("request completion", r.Status);
    }
    if (r.QueuePairContext != t)
        FailMsg("completion with a wrong QueuePairContext");
    switch (r.RequestType) {
    case Nd2RequestTypeWrite:
        if (r.RequestContext != WRITE_CTXT)
            FailMsg("Write completion with a wrong context");
        t->writesOutstanding--;
        break;
    case Nd2RequestTypeSend:
        if (r.RequestContext != SEND_CTXT)
            FailMsg("Send completion with a wrong context");
        t->sendsOutstanding--;
        break;
    case Nd2RequestTypeBind:
        if (r.RequestContext != BIND_CTXT)
            FailMsg("Bind completion with a wrong context");
        t->bindsOutstanding--;
        break;
    case Nd2RequestTypeInvalidate:
        if (r.RequestContext != INVALIDATE_CTXT)
            FailMsg("Invalidate completion with a wrong context");
        t->bindsOutstanding--;
        break;
    case Nd2RequestTypeReceive:
        if (r.RequestContext != RECV_CTXT)
            FailMsg("Receive completion with a wrong context");
        t->recvsDone++;
        t->lastRecvBytes = r.BytesTransferred;
        break;
    default:
        FailMsg("unexpected completion type");
    }
    return TRUE;
}

/* Waits (polling or blocking, bounded) until *pCount drops to `target`. */
static void WaitCount(Test *t, volatile ULONG *pCount, ULONG target, BOOL down, const char *what)
{
    ULONGLONG deadline = GetTickCount64() + TIMEOUT_MS;
    ULONG spins = 0;
    while (down ? (*pCount > target) : (*pCount < target)) {
        if (ReapOne(t))
            continue;
        if (t->blocking) {
            HRESULT hr;
            ResetEvent(t->ov.hEvent);
            hr = t->pCq->lpVtbl->Notify(t->pCq, ND_CQ_NOTIFY_ANY, &t->ov);
            hr = WaitForRequest((IND2Overlapped *)t->pCq, &t->ov, hr, "IND2CompletionQueue::Notify");
            if (FAILED(hr))
                Fail("IND2CompletionQueue::Notify", hr);
        } else if ((++spins & 0x3FF) != 0) {
            continue;
        }
        if (GetTickCount64() > deadline) {
            printf("timed out waiting for %s\n", what);
            FailMsg("timeout");
        }
    }
}

/* Spins on the last byte of the receive area, reaping completions meanwhile. */
static void WaitFlag(Test *t, ULONG size, char value)
{
    volatile char *pFlag = t->pRecv + size - 1;
    ULONGLONG deadline = GetTickCount64() + TIMEOUT_MS;
    ULONG spins = 0;
    while (*pFlag != value) {
        ReapOne(t);
        if ((++spins & 0x3FF) == 0 && GetTickCount64() > deadline) {
            printf("timed out waiting for the peer's Write of %u bytes\n", size);
            FailMsg("timeout");
        }
    }
}

static void Init(Test *t, const struct sockaddr *pLocal, ULONG cbLocal)
{
    HRESULT hr;
    ULONG cbInfo = sizeof(t->info);
    ULONG depth;

    t->ov.hEvent = CreateEvent(NULL, TRUE, FALSE, NULL);
    if (t->ov.hEvent == NULL)
        Fail("CreateEvent", HRESULT_FROM_WIN32(GetLastError()));

    hr = NdOpenAdapter(&IID_IND2Adapter, pLocal, cbLocal, (void **)&t->pAdapter);
    if (FAILED(hr))
        Fail("NdOpenAdapter", hr);

    t->info.InfoVersion = ND_VERSION_2;
    hr = t->pAdapter->lpVtbl->Query(t->pAdapter, &t->info, &cbInfo);
    if (FAILED(hr))
        Fail("IND2Adapter::Query", hr);
    if ((t->info.AdapterFlags & ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED) == 0)
        FailMsg("Adapter does not support in-order RDMA.");
    /* Inline requests must also fit the QP's inline size. */
    if (t->info.InlineRequestThreshold > t->info.MaxInlineDataSize)
        t->info.InlineRequestThreshold = t->info.MaxInlineDataSize;

    hr = t->pAdapter->lpVtbl->CreateOverlappedFile(t->pAdapter, &t->hAdapterFile);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateOverlappedFile", hr);

    if (t->nSge > t->info.MaxInitiatorSge)
        t->nSge = t->info.MaxInitiatorSge;
    if (t->nSge > MAX_SGE)
        t->nSge = MAX_SGE;

    depth = min(QUEUE_DEPTH, t->info.MaxCompletionQueueDepth);
    depth = min(depth, t->info.MaxInitiatorQueueDepth);
    depth = min(depth, t->info.MaxReceiveQueueDepth);

    hr = t->pAdapter->lpVtbl->CreateCompletionQueue(t->pAdapter, &IID_IND2CompletionQueue,
                                                   t->hAdapterFile, depth, 0, 0,
                                                   (void **)&t->pCq);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateCompletionQueue", hr);

    hr = t->pAdapter->lpVtbl->CreateQueuePair(t->pAdapter, &IID_IND2QueuePair,
                                             (IUnknown *)t->pCq, (IUnknown *)t->pCq, t,
                                             depth, depth, 1, t->nSge,
                                             t->info.InlineRequestThreshold,
                                             (void **)&t->pQp);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateQueuePair", hr);

    hr = t->pAdapter->lpVtbl->CreateConnector(t->pAdapter, &IID_IND2Connector, t->hAdapterFile,
                                             (void **)&t->pConnector);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateConnector", hr);
}

static void CreateBuffer(Test *t, ULONG maxSize)
{
    HRESULT hr;
    t->maxSize = maxSize;
    t->cbBuf = 2 * (SIZE_T)maxSize + 2 * sizeof(PeerInfo);
    t->pBuf = (char *)HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, t->cbBuf);
    if (t->pBuf == NULL)
        Fail("HeapAlloc", ND_NO_MEMORY);
    t->pRecv = t->pBuf;
    t->pSend = t->pBuf + maxSize;
    t->pPeerIn = (PeerInfo *)(t->pBuf + 2 * (SIZE_T)maxSize);
    t->pPeerOut = t->pPeerIn + 1;

    hr = t->pAdapter->lpVtbl->CreateMemoryRegion(t->pAdapter, &IID_IND2MemoryRegion,
                                                t->hAdapterFile, (void **)&t->pMr);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateMemoryRegion", hr);

    ResetEvent(t->ov.hEvent);
    hr = t->pMr->lpVtbl->Register(t->pMr, t->pBuf, t->cbBuf,
                                  ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_WRITE,
                                  &t->ov);
    hr = WaitForRequest((IND2Overlapped *)t->pMr, &t->ov, hr, "IND2MemoryRegion::Register");
    if (FAILED(hr))
        Fail("IND2MemoryRegion::Register", hr);
}

static void PostPeerInfoReceive(Test *t)
{
    ND2_SGE sge;
    HRESULT hr;
    sge.Buffer = t->pPeerIn;
    sge.BufferLength = sizeof(PeerInfo);
    sge.MemoryRegionToken = t->pMr->lpVtbl->GetLocalToken(t->pMr);
    hr = t->pQp->lpVtbl->Receive(t->pQp, RECV_CTXT, &sge, 1);
    if (FAILED(hr))
        Fail("IND2QueuePair::Receive", hr);
}

/* Binds a window over the whole buffer for remote Writes and sends its token. */
static void BindAndSendPeerInfo(Test *t)
{
    HRESULT hr;
    ND2_SGE sge;

    hr = t->pAdapter->lpVtbl->CreateMemoryWindow(t->pAdapter, &IID_IND2MemoryWindow,
                                                (void **)&t->pMw);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateMemoryWindow", hr);

    t->bindsOutstanding++;
    hr = t->pQp->lpVtbl->Bind(t->pQp, BIND_CTXT, (IUnknown *)t->pMr, (IUnknown *)t->pMw,
                              t->pBuf, t->cbBuf, ND_OP_FLAG_ALLOW_WRITE);
    if (FAILED(hr))
        Fail("IND2QueuePair::Bind", hr);
    WaitCount(t, &t->bindsOutstanding, 0, TRUE, "the Bind completion");

    t->pPeerOut->remoteToken = t->pMw->lpVtbl->GetRemoteToken(t->pMw);
    t->pPeerOut->reserved = 0;
    t->pPeerOut->remoteAddress = (UINT64)(ULONG_PTR)t->pRecv;

    sge.Buffer = t->pPeerOut;
    sge.BufferLength = sizeof(PeerInfo);
    sge.MemoryRegionToken = t->pMr->lpVtbl->GetLocalToken(t->pMr);
    t->sendsOutstanding++;
    hr = t->pQp->lpVtbl->Send(t->pQp, SEND_CTXT, &sge, 1,
                              sizeof(PeerInfo) < t->info.InlineRequestThreshold ? ND_OP_FLAG_INLINE : 0);
    if (FAILED(hr))
        Fail("IND2QueuePair::Send", hr);
    WaitCount(t, &t->sendsOutstanding, 0, TRUE, "the PeerInfo Send completion");
}

/* RDMA-Writes the first `size` bytes of pSrc to the peer's receive area. */
static void WriteToPeer(Test *t, char *pSrc, ULONG size)
{
    ND2_SGE sge[MAX_SGE];
    ULONG n = PrepareSge(sge, t->nSge, pSrc, size, t->pMr->lpVtbl->GetLocalToken(t->pMr));
    ULONG flags = size < t->info.InlineRequestThreshold ? ND_OP_FLAG_INLINE : 0;
    HRESULT hr;
    t->writesOutstanding++;
    hr = t->pQp->lpVtbl->Write(t->pQp, WRITE_CTXT, sge, n, t->peer.remoteAddress,
                               t->peer.remoteToken, flags);
    if (FAILED(hr))
        Fail("IND2QueuePair::Write", hr);
}

/*
 * Invalidates our window once the peer can no longer write to it, so that
 * the region can be deregistered (Deregister refuses while a window is bound).
 */
static void InvalidateWindow(Test *t)
{
    HRESULT hr;
    t->bindsOutstanding++;
    hr = t->pQp->lpVtbl->Invalidate(t->pQp, INVALIDATE_CTXT, (IUnknown *)t->pMw, 0);
    if (FAILED(hr))
        Fail("IND2QueuePair::Invalidate", hr);
    WaitCount(t, &t->bindsOutstanding, 0, TRUE, "the Invalidate completion");
}

/* A 0-byte Send: the end of the test. */
static void SendFinal(Test *t)
{
    HRESULT hr;
    t->sendsOutstanding++;
    hr = t->pQp->lpVtbl->Send(t->pQp, SEND_CTXT, NULL, 0, 0);
    if (FAILED(hr))
        Fail("IND2QueuePair::Send", hr);
    WaitCount(t, &t->sendsOutstanding, 0, TRUE, "the final Send completion");
}

static void Disconnect(Test *t)
{
    HRESULT hr;
    ResetEvent(t->ov.hEvent);
    hr = t->pConnector->lpVtbl->Disconnect(t->pConnector, &t->ov);
    hr = WaitForRequest((IND2Overlapped *)t->pConnector, &t->ov, hr, "IND2Connector::Disconnect");
    if (FAILED(hr))
        Fail("IND2Connector::Disconnect", hr);
}

static void Shutdown(Test *t)
{
    HRESULT hr;
    ULONG refs;
    if (t->pMw != NULL)
        t->pMw->lpVtbl->Release(t->pMw);
    if (t->pMr != NULL) {
        ResetEvent(t->ov.hEvent);
        hr = t->pMr->lpVtbl->Deregister(t->pMr, &t->ov);
        hr = WaitForRequest((IND2Overlapped *)t->pMr, &t->ov, hr, "IND2MemoryRegion::Deregister");
        if (FAILED(hr))
            Fail("IND2MemoryRegion::Deregister", hr);
        t->pMr->lpVtbl->Release(t->pMr);
    }
    if (t->pConnector != NULL) {
        refs = t->pConnector->lpVtbl->Release(t->pConnector);
        if (refs != 0)
            printf("warning: IND2Connector::Release left %u references\n", refs);
    }
    if (t->pQp != NULL)
        t->pQp->lpVtbl->Release(t->pQp);
    if (t->pCq != NULL)
        t->pCq->lpVtbl->Release(t->pCq);
    if (t->hAdapterFile != NULL)
        CloseHandle(t->hAdapterFile);
    if (t->pAdapter != NULL)
        t->pAdapter->lpVtbl->Release(t->pAdapter);
    if (t->ov.hEvent != NULL)
        CloseHandle(t->ov.hEvent);
    if (t->pBuf != NULL)
        HeapFree(GetProcessHeap(), 0, t->pBuf);
}

/* System-wide CPU use, as Microsoft's examples measure it (100 = one CPU). */
typedef struct _CpuSample {
    ULONGLONG idle, kernel, user;
} CpuSample;

static ULONGLONG FileTime64(const FILETIME *ft)
{
    return ((ULONGLONG)ft->dwHighDateTime << 32) | ft->dwLowDateTime;
}

static void CpuStart(CpuSample *s)
{
    FILETIME idle, kernel, user;
    if (!GetSystemTimes(&idle, &kernel, &user)) {
        s->idle = s->kernel = s->user = 0;
        return;
    }
    s->idle = FileTime64(&idle);
    s->kernel = FileTime64(&kernel);
    s->user = FileTime64(&user);
}

static double CpuReport(const CpuSample *start, DWORD nCpu)
{
    CpuSample now;
    double total;
    CpuStart(&now);
    total = (double)((now.kernel - start->kernel) + (now.user - start->user));
    if (total <= 0.0)
        return 0.0;
    return (100.0 - 100.0 * (double)(now.idle - start->idle) / total) * nCpu;
}

/* Next size of the sweep, or 0 when done.  Client and server use the same. */
static ULONG NextSize(ULONG size, ULONG maxSize)
{
    if (size >= maxSize)
        return 0;
    size <<= 1;
    return size > maxSize ? maxSize : size;
}

/* Pattern bytes are >= 0x80, so they never look like a flag letter. */
static void FillPattern(char *p, ULONG size)
{
    ULONG i;
    for (i = 0; i < size; i++)
        p[i] = (char)(0x80 | ((i * 7 + size) & 0x7F));
}

static void DoPongs(Test *t, ULONG size, ULONG iterations, char pingValue, char pongValue)
{
    ULONG i;
    for (i = 0; i < iterations; i++) {
        WaitFlag(t, size, pingValue);
        t->pRecv[size - 1] = pongValue;
        /* Echo what arrived, with our flag in the last byte. */
        WriteToPeer(t, t->pRecv, size);
        WaitCount(t, &t->writesOutstanding, 0, TRUE, "the Write completion");
    }
}

static void DoPings(Test *t, ULONG size, ULONG iterations, char pingValue, char pongValue)
{
    ULONG i;
    FillPattern(t->pSend, size - 1);
    t->pSend[size - 1] = pingValue;
    for (i = 0; i < iterations; i++) {
        t->pRecv[size - 1] = 0;
        WriteToPeer(t, t->pSend, size);
        WaitFlag(t, size, pongValue);
        WaitCount(t, &t->writesOutstanding, 0, TRUE, "the Write completion");
        if ((size <= 4096 || i + 1 == iterations) &&
            memcmp(t->pRecv, t->pSend, size - 1) != 0) {
            printf("pong %u of size %u differs from the ping\n", i, size);
            FailMsg("data check failed");
        }
    }
}

static void RunServer(Test *t, const struct sockaddr *pAddr, ULONG cbAddr)
{
    IND2Listener *pListener;
    ConnectData data;
    ULONG cbData = sizeof(data);
    ULONG size;
    HRESULT hr;

    Init(t, pAddr, cbAddr);

    hr = t->pAdapter->lpVtbl->CreateListener(t->pAdapter, &IID_IND2Listener, t->hAdapterFile,
                                            (void **)&pListener);
    if (FAILED(hr))
        Fail("IND2Adapter::CreateListener", hr);
    hr = pListener->lpVtbl->Bind(pListener, pAddr, cbAddr);
    if (FAILED(hr))
        Fail("IND2Listener::Bind", hr);
    hr = pListener->lpVtbl->Listen(pListener, 0);
    if (FAILED(hr))
        Fail("IND2Listener::Listen", hr);
    printf("Listening.\n");
    fflush(stdout);

    ResetEvent(t->ov.hEvent);
    hr = pListener->lpVtbl->GetConnectionRequest(pListener, (IUnknown *)t->pConnector, &t->ov);
    hr = WaitForRequest((IND2Overlapped *)pListener, &t->ov, hr, "IND2Listener::GetConnectionRequest");
    if (FAILED(hr))
        Fail("IND2Listener::GetConnectionRequest", hr);

    hr = t->pConnector->lpVtbl->GetPrivateData(t->pConnector, &data, &cbData);
    /* A transport may pad private data: ND_BUFFER_OVERFLOW with our bytes
     * copied is fine. */
    if ((FAILED(hr) && hr != ND_BUFFER_OVERFLOW) || cbData < sizeof(data))
        Fail("IND2Connector::GetPrivateData", hr);
    if (data.magic != CONNECT_MAGIC || data.minSize == 0 || data.maxSize < data.minSize ||
        data.maxSize > MAX_XFER || data.iterations == 0) {
        t->pConnector->lpVtbl->Reject(t->pConnector, NULL, 0);
        FailMsg("bad connection request private data");
    }

    CreateBuffer(t, max(data.maxSize, HDR_LEN));
    /* One Receive for the client's PeerInfo, one for its final message. */
    PostPeerInfoReceive(t);
    PostPeerInfoReceive(t);

    ResetEvent(t->ov.hEvent);
    hr = t->pConnector->lpVtbl->Accept(t->pConnector, (IUnknown *)t->pQp, 0, 0, NULL, 0, &t->ov);
    hr = WaitForRequest((IND2Overlapped *)t->pConnector, &t->ov, hr, "IND2Connector::Accept");
    if (FAILED(hr))
        Fail("IND2Connector::Accept", hr);
    pListener->lpVtbl->Release(pListener);

    WaitCount(t, &t->recvsDone, 1, FALSE, "the client's PeerInfo");
    if (t->lastRecvBytes != sizeof(PeerInfo))
        FailMsg("PeerInfo of a wrong size");
    t->peer = *t->pPeerIn;
    BindAndSendPeerInfo(t);

    DoPongs(t, HDR_LEN, WARMUP_ITERATIONS, 'A', 'B');
    for (size = data.minSize; size != 0; size = NextSize(size, data.maxSize))
        DoPongs(t, size, data.iterations, 'X', 'Y');

    /* The client's 0-byte message ends the test. */
    WaitCount(t, &t->recvsDone, 2, FALSE, "the client's final message");
    if (t->lastRecvBytes != 0)
        FailMsg("final message of a wrong size");
    /* The client no longer writes to our window; then answer, so that the
     * client disconnects only after this Invalidate. */
    InvalidateWindow(t);
    SendFinal(t);
    Disconnect(t);
}

static void RunClient(Test *t, const struct sockaddr *pLocal, ULONG cbLocal,
                      const struct sockaddr *pServer, ULONG cbServer,
                      ULONG minSize, ULONG maxSize, ULONG iterations)
{
    ConnectData data;
    SYSTEM_INFO si;
    LARGE_INTEGER freq, start, end;
    CpuSample cpu;
    ULONG size;
    HRESULT hr;

    Init(t, pLocal, cbLocal);
    CreateBuffer(t, max(maxSize, HDR_LEN));
    PostPeerInfoReceive(t);

    hr = t->pConnector->lpVtbl->Bind(t->pConnector, pLocal, cbLocal);
    if (FAILED(hr))
        Fail("IND2Connector::Bind", hr);

    data.magic = CONNECT_MAGIC;
    data.minSize = minSize;
    data.maxSize = maxSize;
    data.iterations = iterations;
    ResetEvent(t->ov.hEvent);
    hr = t->pConnector->lpVtbl->Connect(t->pConnector, (IUnknown *)t->pQp, pServer, cbServer,
                                        0, 0, &data, sizeof(data), &t->ov);
    hr = WaitForRequest((IND2Overlapped *)t->pConnector, &t->ov, hr, "IND2Connector::Connect");
    if (FAILED(hr))
        Fail("IND2Connector::Connect", hr);

    ResetEvent(t->ov.hEvent);
    hr = t->pConnector->lpVtbl->CompleteConnect(t->pConnector, &t->ov);
    hr = WaitForRequest((IND2Overlapped *)t->pConnector, &t->ov, hr, "IND2Connector::CompleteConnect");
    if (FAILED(hr))
        Fail("IND2Connector::CompleteConnect", hr);

    /* The active side sends first. */
    BindAndSendPeerInfo(t);
    WaitCount(t, &t->recvsDone, 1, FALSE, "the server's PeerInfo");
    if (t->lastRecvBytes != sizeof(PeerInfo))
        FailMsg("PeerInfo of a wrong size");
    t->peer = *t->pPeerIn;
    /* For the server's final message. */
    PostPeerInfoReceive(t);

    DoPings(t, HDR_LEN, WARMUP_ITERATIONS, 'A', 'B');

    GetSystemInfo(&si);
    QueryPerformanceFrequency(&freq);
    printf("Using %u processors. Sender Frequency is %lld\n\n",
           (unsigned)si.dwNumberOfProcessors, (long long)freq.QuadPart);
    printf("%9s %9s %9s %7s %11s\n", "Size", "Iter", "Latency", "CPU", "Bytes/Sec");
    for (size = minSize; size != 0; size = NextSize(size, maxSize)) {
        double us, cpuUse;
        CpuStart(&cpu);
        QueryPerformanceCounter(&start);
        DoPings(t, size, iterations, 'X', 'Y');
        QueryPerformanceCounter(&end);
        cpuUse = CpuReport(&cpu, si.dwNumberOfProcessors);
        us = (double)(end.QuadPart - start.QuadPart) * 1000000.0 / (double)freq.QuadPart;
        /* A full round trip per iteration; bytes counted one way. */
        printf("%9u %9u %9.2f %7.2f %11.0f\n", size, iterations, us / iterations, cpuUse,
               (double)size * iterations / (us / 1000000.0));
        fflush(stdout);
    }

    /* The server no longer writes to our window.  A 0-byte Send tells it we
     * are done; its 0-byte answer says it has invalidated its own window. */
    InvalidateWindow(t);
    SendFinal(t);
    WaitCount(t, &t->recvsDone, 2, FALSE, "the server's final message");
    if (t->lastRecvBytes != 0)
        FailMsg("final message of a wrong size");
    Disconnect(t);
}

int __cdecl _tmain(int argc, TCHAR *argv[])
{
    BOOL bServer = FALSE, bClient = FALSE, bPolling = FALSE, bBlocking = FALSE;
    ULONG nSge = 1, iterations = DEFAULT_ITERATIONS, fixedSize = 0;
    SOCKADDR_INET addr;
    ULONG cbAddr;
    WSADATA wsaData;
    HRESULT hr;
    Test t;
    int i, ret;

    for (i = 1; i < argc - 1; i++) {
        TCHAR *arg = argv[i];
        if (_tcscmp(arg, _T("-s")) == 0) {
            bServer = TRUE;
        } else if (_tcscmp(arg, _T("-c")) == 0) {
            bClient = TRUE;
        } else if (_tcscmp(arg, _T("-p")) == 0) {
            bPolling = TRUE;
        } else if (_tcscmp(arg, _T("-b")) == 0) {
            bBlocking = TRUE;
        } else if (_tcscmp(arg, _T("-n")) == 0 && i + 1 < argc - 1) {
            nSge = (ULONG)_ttol(argv[++i]);
        } else if (_tcscmp(arg, _T("-i")) == 0 && i + 1 < argc - 1) {
            iterations = (ULONG)_ttol(argv[++i]);
        } else if (_tcscmp(arg, _T("-z")) == 0 && i + 1 < argc - 1) {
            fixedSize = (ULONG)_ttol(argv[++i]);
        } else {
            ShowUsage();
            return _tcscmp(arg, _T("-h")) == 0 ? 0 : 2;
        }
    }
    if (argc < 2 || _tcscmp(argv[argc - 1], _T("-h")) == 0) {
        ShowUsage();
        return argc < 2 ? 2 : 0;
    }
    if (bServer == bClient) {
        printf("Exactly one of client (c) or server (s) must be specified.\n\n");
        ShowUsage();
        return 2;
    }
    if (bPolling && bBlocking) {
        printf("Options -p and -b are mutually exclusive.\n\n");
        ShowUsage();
        return 2;
    }
    if (nSge == 0 || iterations == 0 || fixedSize > MAX_XFER) {
        printf("Invalid -n, -i or -z value.\n\n");
        ShowUsage();
        return 2;
    }
    if (!ParseAddress(argv[argc - 1], &addr, &cbAddr, DEFAULT_PORT)) {
        printf("Bad address.\n\n");
        ShowUsage();
        return 2;
    }

    ret = WSAStartup(MAKEWORD(2, 2), &wsaData);
    if (ret != 0)
        Fail("WSAStartup", HRESULT_FROM_WIN32(ret));
    hr = NdStartup();
    if (FAILED(hr))
        Fail("NdStartup", hr);

    printf("Beginning test: ndrpingpong\n");
    fflush(stdout);
    ZeroMemory(&t, sizeof(t));
    t.blocking = bBlocking;
    t.nSge = nSge;
    if (bServer) {
        RunServer(&t, (const struct sockaddr *)&addr, cbAddr);
    } else {
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        hr = NdResolveAddress((const struct sockaddr *)&addr, cbAddr,
                              (struct sockaddr *)&local, &cbLocal);
        if (FAILED(hr))
            Fail("NdResolveAddress", hr);
        if (local.si_family == AF_INET)
            local.Ipv4.sin_port = 0;
        else
            local.Ipv6.sin6_port = 0;
        RunClient(&t, (const struct sockaddr *)&local, (ULONG)cbLocal,
                  (const struct sockaddr *)&addr, cbAddr,
                  fixedSize ? fixedSize : 1, fixedSize ? fixedSize : DEFAULT_MAX_SIZE, iterations);
    }
    Shutdown(&t);

    hr = NdCleanup();
    if (FAILED(hr))
        Fail("NdCleanup", hr);
    WSACleanup();
    printf("End of test: ndrpingpong\n");
    return 0;
}
