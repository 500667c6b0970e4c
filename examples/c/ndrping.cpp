//
// ndrping.cpp - NetworkDirect v2 one-way RDMA Write / RDMA Read throughput.
//
// Written the way Windows NetworkDirect examples are written, after the
// description of Microsoft's ndrping example in the NetworkDirect
// documentation and docs/PORTING.md:
//
//  - the server registers a buffer, binds a memory window over it
//    (IND2QueuePair::Bind, ALLOW_WRITE or ALLOW_READ) and sends the client a
//    PeerInfo {window token, inbound read limit, buffer address};
//  - the client keeps up to `depth` RDMA Writes (-w) or Reads (-r) in flight
//    to that buffer and reports the rate per size;
//  - the data is checked: in Write mode a last Write of the largest size
//    carries a second pattern, and the server checks that its buffer holds
//    it and answers with a Send; in Read mode one more Read of each size,
//    into a cleared buffer, is checked against the server-filled pattern.
//
// Connection establishment (GetConnectionRequest, Accept, Connect,
// CompleteConnect, Disconnect) completes through an I/O completion port
// bound to one overlapped file of the adapter (CreateIoCompletionPort,
// GetQueuedCompletionStatus, then IND2Overlapped::GetOverlappedResult); the
// memory region and CQ use a second overlapped file and an event.
//
// The client passes its plan (mode, sizes) as Connect private data, so the
// server needs no matching options; during long runs it sends a 0-byte
// message every few seconds so that the server's wait stays bounded.  Every wait is bounded
// (x_TimeoutMs).  Any failure prints the failing call and its HRESULT and
// exits non-zero.
//

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <tchar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "ndsupport.h"
#include "ndexample.h"

static const USHORT x_DefaultPort = 54326;
static const ULONG x_MaxXfer = 4 * 1024 * 1024;
static const ULONG x_HdrLen = 40;
static const ULONG x_DefaultMaxSize = 65536;
static const ULONG x_DefaultIterations = 1000;
static const ULONG x_WarmupIterations = 100;
static const ULONG x_MaxSge = 16;
static const ULONG x_MaxDepth = 16;
static const ULONG x_MsgArea = 64;
static const DWORD x_TimeoutMs = ND_EXAMPLE_TIMEOUT_MS;

static void* const RECV_CTXT = (void*)0x1000;
static void* const SEND_CTXT = (void*)0x2000;
static void* const READ_CTXT = (void*)0x3000;
static void* const WRITE_CTXT = (void*)0x4000;
static void* const BIND_CTXT = (void*)0x5000;
static void* const INVALIDATE_CTXT = (void*)0x6000;
static void* const PROGRESS_CTXT = (void*)0x7000;

// The client sends a 0-byte "still running" message at most this often, so
// that the server, which sees no completions while the client does RDMA on
// its own, can keep a bounded wait however long the run is.
static const ULONGLONG x_ProgressMs = 5000;

static const ULONG x_ConnectMagic = 0x50524E44; // "DNRP"
static const ULONG x_DoneMagic = 0x454E4F44;    // "DONE"

// What the server advertises (16 bytes, host order).
struct PeerInfo
{
    UINT32 remoteToken;
    UINT32 incomingReadLimit;
    UINT64 remoteAddress;
};

// The client's plan, sent as Connect private data.
struct ConnectData
{
    ULONG magic;
    ULONG read; // 1: RDMA Read, 0: RDMA Write
    ULONG minSize;
    ULONG maxSize;
};

// The client's final message and the server's answer.
struct DoneMsg
{
    ULONG magic;
    ULONG length; // Write mode: bytes of the server buffer to check
    ULONG status; // in the answer: 0 = data good
    ULONG reserved;
};

static void ShowUsage()
{
    printf("ndrping [options] <ip>[:<port>]\n"
           "Options:\n"
           "\t-s            - start as server (listen on IP/Port)\n"
           "\t-c            - start as client (connect to server IP/Port)\n"
           "\t-w            - RDMA Write (default; client)\n"
           "\t-r            - RDMA Read (client)\n"
           "\t-p            - polling mode (default)\n"
           "\t-b            - blocking mode: CQ Notify + GetOverlappedResult\n"
           "\t-n <nSge>     - number of scatter/gather entries per request (default 1)\n"
           "\t-i <count>    - requests per size (client; default %u)\n"
           "\t-z <size>     - a single size (client; default: sweep 1..%u)\n"
           "\t-h            - show this help\n"
           "\t<ip>[:<port>] - IPv4 a.b.c.d[:port] or IPv6 [addr]:port, default port %u\n",
           x_DefaultIterations, x_DefaultMaxSize, x_DefaultPort);
}

// Completion-port path: ND_PENDING dequeues the request's packet (bounded),
// then asks the object for the final status.  Only one request at a time
// uses the port here, so any other packet is an error.
static HRESULT WaitOnPort(HANDLE hPort, IND2Overlapped* pObj, OVERLAPPED* pOv, HRESULT hr,
                          const char* what)
{
    while (hr == ND_PENDING) {
        DWORD bytes;
        ULONG_PTR key;
        OVERLAPPED* pDone = NULL;
        BOOL ok = GetQueuedCompletionStatus(hPort, &bytes, &key, &pDone, x_TimeoutMs);
        if (pDone == NULL) {
            printf("%s: no completion packet within %u ms (error %u)\n", what,
                   (unsigned)x_TimeoutMs, (unsigned)GetLastError());
            fflush(stdout);
            exit(1);
        }
        if (pDone != pOv)
            FailMsg("completion packet for an unexpected OVERLAPPED");
        (void)ok; // the status comes from GetOverlappedResult
        hr = pObj->GetOverlappedResult(pOv, FALSE);
    }
    return hr;
}

static ULONG PrepareSge(ND2_SGE* pSge, ULONG nSge, char* pBuf, ULONG size, UINT32 token)
{
    ULONG n = 0;
    ULONG offset = 0;
    while (n + 1 < nSge && size - offset > x_HdrLen) {
        pSge[n].Buffer = pBuf + offset;
        pSge[n].BufferLength = x_HdrLen;
        pSge[n].MemoryRegionToken = token;
        offset += x_HdrLen;
        n++;
    }
    pSge[n].Buffer = pBuf + offset;
    pSge[n].BufferLength = size - offset;
    pSge[n].MemoryRegionToken = token;
    return n + 1;
}

// Pattern byte at an offset: the client's for Writes, the server's for Reads.
// The Write pattern has two versions: one for the timed Writes, one for the
// single verification Write at the end, so that what the server checks came
// from exactly one Write.
static char WritePattern(ULONG i, ULONG version) { return (char)(i * 13 + 5 + version * 101); }
static char ReadPattern(ULONG i) { return (char)(i * 7 + 3); }

class CpuMonitor
{
    ULONGLONG m_idle, m_kernel, m_user;
    static ULONGLONG Ft(const FILETIME& ft)
    {
        return ((ULONGLONG)ft.dwHighDateTime << 32) | ft.dwLowDateTime;
    }
    void Sample(ULONGLONG* pIdle, ULONGLONG* pKernel, ULONGLONG* pUser)
    {
        FILETIME idle, kernel, user;
        if (!GetSystemTimes(&idle, &kernel, &user)) {
            *pIdle = *pKernel = *pUser = 0;
            return;
        }
        *pIdle = Ft(idle);
        *pKernel = Ft(kernel);
        *pUser = Ft(user);
    }
public:
    CpuMonitor() : m_idle(0), m_kernel(0), m_user(0) {}
    void Start() { Sample(&m_idle, &m_kernel, &m_user); }
    double Report(DWORD nCpu)
    {
        ULONGLONG idle, kernel, user;
        Sample(&idle, &kernel, &user);
        double total = (double)((kernel - m_kernel) + (user - m_user));
        if (total <= 0.0)
            return 0.0;
        return (100.0 - 100.0 * (double)(idle - m_idle) / total) * nCpu;
    }
};

class NdRPing
{
protected:
    IND2Adapter* m_pAdapter;
    HANDLE m_hConnFile;  // connector/listener requests: completion port
    HANDLE m_hPort;
    HANDLE m_hFile;      // CQ and MR requests: event
    IND2CompletionQueue* m_pCq;
    IND2QueuePair* m_pQp;
    IND2MemoryRegion* m_pMr;
    IND2MemoryWindow* m_pMw;
    IND2Connector* m_pConnector;
    ND2_ADAPTER_INFO m_Info;
    OVERLAPPED m_Ov;     // event-based
    OVERLAPPED m_PortOv; // completion-port-based
    bool m_bBlocking;
    ULONG m_nSge;
    ULONG m_Depth;
    char* m_pBuf;        // [data area][message area]
    SIZE_T m_cbBuf;
    ULONG m_cbData;
    char* m_pMsg;
    ULONG m_RecvBytes;   // length of the last Receive completed
    ULONG m_nRecvDone;   // Receives completed
    ULONG m_nRecvTaken;  // of which consumed by WaitForReceive
    ULONG m_nSends;      // progress Sends in flight (client)

public:
    NdRPing(bool blocking, ULONG nSge)
        : m_pAdapter(NULL), m_hConnFile(NULL), m_hPort(NULL), m_hFile(NULL), m_pCq(NULL),
          m_pQp(NULL), m_pMr(NULL), m_pMw(NULL), m_pConnector(NULL), m_bBlocking(blocking),
          m_nSge(nSge), m_Depth(1), m_pBuf(NULL), m_cbBuf(0), m_cbData(0), m_pMsg(NULL),
          m_RecvBytes(0), m_nRecvDone(0), m_nRecvTaken(0), m_nSends(0)
    {
        ZeroMemory(&m_Info, sizeof(m_Info));
        ZeroMemory(&m_Ov, sizeof(m_Ov));
        ZeroMemory(&m_PortOv, sizeof(m_PortOv));
    }

    virtual ~NdRPing()
    {
        if (m_pMw != NULL)
            m_pMw->Release();
        if (m_pMr != NULL) {
            ResetEvent(m_Ov.hEvent);
            HRESULT hr = m_pMr->Deregister(&m_Ov);
            hr = WaitForRequest(m_pMr, &m_Ov, hr, "IND2MemoryRegion::Deregister");
            if (FAILED(hr))
                Fail("IND2MemoryRegion::Deregister", hr);
            m_pMr->Release();
        }
        if (m_pConnector != NULL) {
            ULONG refs = m_pConnector->Release();
            if (refs != 0)
                printf("warning: IND2Connector::Release left %u references\n", refs);
        }
        if (m_pQp != NULL)
            m_pQp->Release();
        if (m_pCq != NULL)
            m_pCq->Release();
        if (m_hFile != NULL)
            CloseHandle(m_hFile);
        if (m_hConnFile != NULL)
            CloseHandle(m_hConnFile);
        if (m_hPort != NULL)
            CloseHandle(m_hPort);
        if (m_pAdapter != NULL)
            m_pAdapter->Release();
        if (m_Ov.hEvent != NULL)
            CloseHandle(m_Ov.hEvent);
        if (m_pBuf != NULL)
            HeapFree(GetProcessHeap(), 0, m_pBuf);
    }

    void Init(const sockaddr* pLocal, ULONG cbLocal, bool read)
    {
        m_Ov.hEvent = CreateEvent(NULL, TRUE, FALSE, NULL);
        if (m_Ov.hEvent == NULL)
            Fail("CreateEvent", HRESULT_FROM_WIN32(GetLastError()));

        HRESULT hr = NdOpenAdapter(IID_IND2Adapter, pLocal, cbLocal,
                                   reinterpret_cast<void**>(&m_pAdapter));
        if (FAILED(hr))
            Fail("NdOpenAdapter", hr);
        m_Info.InfoVersion = ND_VERSION_2;
        ULONG cbInfo = sizeof(m_Info);
        hr = m_pAdapter->Query(&m_Info, &cbInfo);
        if (FAILED(hr))
            Fail("IND2Adapter::Query", hr);
        // Inline requests must also fit the QP's inline size.
        if (m_Info.InlineRequestThreshold > m_Info.MaxInlineDataSize)
            m_Info.InlineRequestThreshold = m_Info.MaxInlineDataSize;
        if ((m_Info.AdapterFlags & ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED) == 0)
            FailMsg("Adapter does not support in-order RDMA.");

        hr = m_pAdapter->CreateOverlappedFile(&m_hFile);
        if (FAILED(hr))
            Fail("IND2Adapter::CreateOverlappedFile", hr);
        hr = m_pAdapter->CreateOverlappedFile(&m_hConnFile);
        if (FAILED(hr))
            Fail("IND2Adapter::CreateOverlappedFile", hr);
        m_hPort = CreateIoCompletionPort(m_hConnFile, NULL, 0, 0);
        if (m_hPort == NULL)
            Fail("CreateIoCompletionPort", HRESULT_FROM_WIN32(GetLastError()));

        ULONG maxSge = read ? m_Info.MaxReadSge : m_Info.MaxInitiatorSge;
        m_nSge = min(min(m_nSge, maxSge), x_MaxSge);
        if (m_nSge == 0)
            m_nSge = 1;

        m_Depth = min(x_MaxDepth, m_Info.MaxInitiatorQueueDepth - 1);
        m_Depth = min(m_Depth, m_Info.MaxCompletionQueueDepth - 3);
        if (read)
            m_Depth = min(m_Depth, m_Info.MaxOutboundReadLimit);
        if (m_Depth == 0)
            m_Depth = 1;

        hr = m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile, m_Depth + 3, 0, 0,
                                              reinterpret_cast<void**>(&m_pCq));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateCompletionQueue", hr);
        hr = m_pAdapter->CreateQueuePair(IID_IND2QueuePair, m_pCq, m_pCq, this,
                                         min(2u, m_Info.MaxReceiveQueueDepth), m_Depth + 1, 1,
                                         m_nSge, m_Info.InlineRequestThreshold,
                                         reinterpret_cast<void**>(&m_pQp));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateQueuePair", hr);
        hr = m_pAdapter->CreateConnector(IID_IND2Connector, m_hConnFile,
                                         reinterpret_cast<void**>(&m_pConnector));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateConnector", hr);
    }

    void CreateBuffer(ULONG cbData, ULONG mrFlags)
    {
        m_cbData = cbData;
        m_cbBuf = (SIZE_T)cbData + x_MsgArea;
        m_pBuf = static_cast<char*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, m_cbBuf));
        if (m_pBuf == NULL)
            Fail("HeapAlloc", ND_NO_MEMORY);
        m_pMsg = m_pBuf + cbData;
        HRESULT hr = m_pAdapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_hFile,
                                                   reinterpret_cast<void**>(&m_pMr));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateMemoryRegion", hr);
        ResetEvent(m_Ov.hEvent);
        hr = m_pMr->Register(m_pBuf, m_cbBuf, mrFlags, &m_Ov);
        hr = WaitForRequest(m_pMr, &m_Ov, hr, "IND2MemoryRegion::Register");
        if (FAILED(hr))
            Fail("IND2MemoryRegion::Register", hr);
    }

    // Receives go into the first half of the message area, Sends come from
    // the second half.
    void PostReceive()
    {
        ND2_SGE sge;
        sge.Buffer = m_pMsg;
        sge.BufferLength = x_MsgArea / 2;
        sge.MemoryRegionToken = m_pMr->GetLocalToken();
        HRESULT hr = m_pQp->Receive(RECV_CTXT, &sge, 1);
        if (FAILED(hr))
            Fail("IND2QueuePair::Receive", hr);
    }

    void SendMsg(const void* pData, ULONG cb)
    {
        char* pSrc = m_pMsg + x_MsgArea / 2;
        CopyMemory(pSrc, pData, cb);
        ND2_SGE sge;
        sge.Buffer = pSrc;
        sge.BufferLength = cb;
        sge.MemoryRegionToken = m_pMr->GetLocalToken();
        HRESULT hr = m_pQp->Send(SEND_CTXT, &sge, 1,
                                 cb < m_Info.InlineRequestThreshold ? ND_OP_FLAG_INLINE : 0);
        if (FAILED(hr))
            Fail("IND2QueuePair::Send", hr);
        WaitForOne(SEND_CTXT, Nd2RequestTypeSend, "the Send completion");
    }

    // Takes up to nMax completions (bounded wait for at least one).  Receive
    // completions are filed; the others are returned (possibly none).
    ULONG GetCompletions(ND2_RESULT* pResults, ULONG nMax, const char* what)
    {
        ULONGLONG deadline = GetTickCount64() + x_TimeoutMs;
        ULONG spins = 0;
        for (;;) {
            ULONG n = m_pCq->GetResults(pResults, nMax);
            if (n > 0) {
                ULONG kept = 0;
                for (ULONG i = 0; i < n; i++) {
                    if (pResults[i].QueuePairContext != this)
                        FailMsg("completion with a wrong QueuePairContext");
                    if (FAILED(pResults[i].Status)) {
                        printf("completion of request type %d, context %p\n",
                               (int)pResults[i].RequestType, pResults[i].RequestContext);
                        Fail("request completion", pResults[i].Status);
                    }
                    if (pResults[i].RequestType == Nd2RequestTypeReceive) {
                        m_nRecvDone++;
                        m_RecvBytes = pResults[i].BytesTransferred;
                    } else {
                        pResults[kept++] = pResults[i];
                    }
                }
                return kept;
            }
            if (m_bBlocking) {
                ResetEvent(m_Ov.hEvent);
                HRESULT hr = m_pCq->Notify(ND_CQ_NOTIFY_ANY, &m_Ov);
                hr = WaitForRequest(m_pCq, &m_Ov, hr, "IND2CompletionQueue::Notify");
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

    void WaitForOne(void* ctx, ND2_REQUEST_TYPE type, const char* what)
    {
        ND2_RESULT r;
        while (GetCompletions(&r, 1, what) == 0) {
        }
        if (r.RequestContext != ctx || r.RequestType != type)
            FailMsg("completion with an unexpected context or type");
    }

    void WaitForReceive(const char* what)
    {
        ND2_RESULT r;
        while (m_nRecvDone == m_nRecvTaken) {
            if (GetCompletions(&r, 1, what) != 0)
                FailMsg("unexpected completion while waiting for a message");
        }
        m_nRecvTaken++;
    }

    void Disconnect()
    {
        HRESULT hr = m_pConnector->Disconnect(&m_PortOv);
        hr = WaitOnPort(m_hPort, m_pConnector, &m_PortOv, hr, "IND2Connector::Disconnect");
        if (FAILED(hr))
            Fail("IND2Connector::Disconnect", hr);
    }
};

class NdRPingServer : public NdRPing
{
public:
    NdRPingServer(bool blocking, ULONG nSge) : NdRPing(blocking, nSge) {}

    void Run(const sockaddr* pAddr, ULONG cbAddr)
    {
        Init(pAddr, cbAddr, false);

        IND2Listener* pListener;
        HRESULT hr = m_pAdapter->CreateListener(IID_IND2Listener, m_hConnFile,
                                                reinterpret_cast<void**>(&pListener));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateListener", hr);
        hr = pListener->Bind(pAddr, cbAddr);
        if (FAILED(hr))
            Fail("IND2Listener::Bind", hr);
        hr = pListener->Listen(0);
        if (FAILED(hr))
            Fail("IND2Listener::Listen", hr);
        printf("Listening.\n");
        fflush(stdout);

        hr = pListener->GetConnectionRequest(m_pConnector, &m_PortOv);
        hr = WaitOnPort(m_hPort, pListener, &m_PortOv, hr, "IND2Listener::GetConnectionRequest");
        if (FAILED(hr))
            Fail("IND2Listener::GetConnectionRequest", hr);

        ConnectData plan;
        ULONG cbPlan = sizeof(plan);
        hr = m_pConnector->GetPrivateData(&plan, &cbPlan);
        // A transport may pad private data: ND_BUFFER_OVERFLOW with our
        // bytes copied is fine.
        if ((FAILED(hr) && hr != ND_BUFFER_OVERFLOW) || cbPlan < sizeof(plan))
            Fail("IND2Connector::GetPrivateData", hr);
        if (plan.magic != x_ConnectMagic || plan.maxSize == 0 || plan.maxSize > x_MaxXfer) {
            m_pConnector->Reject(NULL, 0);
            FailMsg("bad connection request private data");
        }
        bool read = plan.read != 0;
        ULONG cbData = max(plan.maxSize, x_HdrLen);

        CreateBuffer(cbData, read ? (ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ)
                                  : ND_MR_FLAG_ALLOW_REMOTE_WRITE);
        if (read) {
            for (ULONG i = 0; i < cbData; i++)
                m_pBuf[i] = ReadPattern(i);
        }
        // The client's progress messages and its final message.
        PostReceive();
        PostReceive();

        ULONG inboundReadLimit = read ? m_Info.MaxInboundReadLimit : 0;
        hr = m_pConnector->Accept(m_pQp, inboundReadLimit, 0, NULL, 0, &m_PortOv);
        hr = WaitOnPort(m_hPort, m_pConnector, &m_PortOv, hr, "IND2Connector::Accept");
        if (FAILED(hr))
            Fail("IND2Connector::Accept", hr);
        pListener->Release();

        // Window over the data area; its token is valid once Bind returns.
        hr = m_pAdapter->CreateMemoryWindow(IID_IND2MemoryWindow, reinterpret_cast<void**>(&m_pMw));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateMemoryWindow", hr);
        hr = m_pQp->Bind(BIND_CTXT, m_pMr, m_pMw, m_pBuf, cbData,
                         read ? ND_OP_FLAG_ALLOW_READ : ND_OP_FLAG_ALLOW_WRITE);
        if (FAILED(hr))
            Fail("IND2QueuePair::Bind", hr);
        PeerInfo info;
        info.remoteToken = m_pMw->GetRemoteToken();
        info.incomingReadLimit = inboundReadLimit;
        info.remoteAddress = (UINT64)(ULONG_PTR)m_pBuf;
        WaitForOne(BIND_CTXT, Nd2RequestTypeBind, "the Bind completion");
        SendMsg(&info, sizeof(info));

        // The client's final message (0-byte progress messages before it);
        // in Write mode check what it wrote.
        for (;;) {
            WaitForReceive("the client's final message");
            if (m_RecvBytes != 0)
                break;
            PostReceive();
        }
        DoneMsg done;
        if (m_RecvBytes != sizeof(done))
            FailMsg("final message of a wrong size");
        CopyMemory(&done, m_pMsg, sizeof(done));
        if (done.magic != x_DoneMagic || done.length > cbData)
            FailMsg("bad final message");
        ULONG bad = 0;
        if (!read) {
            for (ULONG i = 0; i < done.length; i++) {
                if (m_pBuf[i] != WritePattern(i, 1)) {
                    printf("server buffer byte %u is 0x%02X, expected 0x%02X\n", i,
                           (unsigned char)m_pBuf[i], (unsigned char)WritePattern(i, 1));
                    bad = 1;
                    break;
                }
            }
        }

        // The client will not touch the window any more.
        hr = m_pQp->Invalidate(INVALIDATE_CTXT, m_pMw, 0);
        if (FAILED(hr))
            Fail("IND2QueuePair::Invalidate", hr);
        WaitForOne(INVALIDATE_CTXT, Nd2RequestTypeInvalidate, "the Invalidate completion");

        done.status = bad;
        SendMsg(&done, sizeof(done));
        if (bad)
            FailMsg("data check failed: the server buffer does not hold the client's pattern");
        if (!read)
            printf("Server verified %u bytes written by the client.\n", done.length);
        Disconnect();
    }
};

class NdRPingClient : public NdRPing
{
    bool m_bRead;
    PeerInfo m_Peer;
    ULONGLONG m_LastProgress;

    // Keeps up to m_Depth requests in flight until `iterations` have completed.
    void DoOps(ULONG size, ULONG iterations)
    {
        ND2_SGE sge[x_MaxSge];
        ULONG n = PrepareSge(sge, m_nSge, m_pBuf, size, m_pMr->GetLocalToken());
        ULONG flags = (!m_bRead && size < m_Info.InlineRequestThreshold) ? ND_OP_FLAG_INLINE : 0;
        void* ctx = m_bRead ? READ_CTXT : WRITE_CTXT;
        ND2_REQUEST_TYPE type = m_bRead ? Nd2RequestTypeRead : Nd2RequestTypeWrite;
        ULONG issued = 0, completed = 0, outstanding = 0;
        ND2_RESULT results[x_MaxDepth];

        while (completed < iterations || m_nSends > 0) {
            ULONGLONG now = GetTickCount64();
            if (m_nSends == 0 && now - m_LastProgress > x_ProgressMs) {
                HRESULT hr = m_pQp->Send(PROGRESS_CTXT, NULL, 0, 0);
                if (FAILED(hr))
                    Fail("IND2QueuePair::Send", hr);
                m_nSends++;
                m_LastProgress = now;
            }
            while (outstanding < m_Depth && issued < iterations) {
                HRESULT hr = m_bRead
                    ? m_pQp->Read(ctx, sge, n, m_Peer.remoteAddress, m_Peer.remoteToken, 0)
                    : m_pQp->Write(ctx, sge, n, m_Peer.remoteAddress, m_Peer.remoteToken, flags);
                if (FAILED(hr))
                    Fail(m_bRead ? "IND2QueuePair::Read" : "IND2QueuePair::Write", hr);
                issued++;
                outstanding++;
            }
            ULONG got = GetCompletions(results, x_MaxDepth, "RDMA completions");
            for (ULONG i = 0; i < got; i++) {
                if (results[i].RequestContext == PROGRESS_CTXT &&
                    results[i].RequestType == Nd2RequestTypeSend) {
                    m_nSends--;
                    continue;
                }
                if (results[i].RequestContext != ctx || results[i].RequestType != type)
                    FailMsg("RDMA completion with an unexpected context or type");
                outstanding--;
                completed++;
            }
        }
    }

public:
    NdRPingClient(bool blocking, ULONG nSge, bool read)
        : NdRPing(blocking, nSge), m_bRead(read), m_LastProgress(0)
    {
        ZeroMemory(&m_Peer, sizeof(m_Peer));
    }

    void Run(const sockaddr* pLocal, ULONG cbLocal, const sockaddr* pServer, ULONG cbServer,
             ULONG minSize, ULONG maxSize, ULONG iterations)
    {
        Init(pLocal, cbLocal, m_bRead);
        ULONG cbData = max(maxSize, x_HdrLen);
        CreateBuffer(cbData, m_bRead ? (ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_RDMA_READ_SINK)
                                     : ND_MR_FLAG_ALLOW_LOCAL_WRITE);
        if (!m_bRead) {
            for (ULONG i = 0; i < cbData; i++)
                m_pBuf[i] = WritePattern(i, 0);
        }
        PostReceive();

        HRESULT hr = m_pConnector->Bind(pLocal, cbLocal);
        if (FAILED(hr))
            Fail("IND2Connector::Bind", hr);
        ConnectData plan;
        plan.magic = x_ConnectMagic;
        plan.read = m_bRead ? 1 : 0;
        plan.minSize = minSize;
        plan.maxSize = maxSize;
        hr = m_pConnector->Connect(m_pQp, pServer, cbServer, 0, m_bRead ? m_Depth : 0, &plan,
                                   sizeof(plan), &m_PortOv);
        hr = WaitOnPort(m_hPort, m_pConnector, &m_PortOv, hr, "IND2Connector::Connect");
        if (FAILED(hr))
            Fail("IND2Connector::Connect", hr);
        ULONG inbound = 0, outbound = 0;
        hr = m_pConnector->GetReadLimits(&inbound, &outbound);
        if (FAILED(hr))
            Fail("IND2Connector::GetReadLimits", hr);
        hr = m_pConnector->CompleteConnect(&m_PortOv);
        hr = WaitOnPort(m_hPort, m_pConnector, &m_PortOv, hr, "IND2Connector::CompleteConnect");
        if (FAILED(hr))
            Fail("IND2Connector::CompleteConnect", hr);

        WaitForReceive("the server's PeerInfo");
        if (m_RecvBytes != sizeof(PeerInfo))
            FailMsg("PeerInfo of a wrong size");
        CopyMemory(&m_Peer, m_pMsg, sizeof(m_Peer));
        if (m_bRead) {
            m_Depth = min(m_Depth, min(m_Peer.incomingReadLimit, outbound));
            if (m_Depth == 0)
                FailMsg("the server allows no incoming RDMA Reads");
        }
        PostReceive();
        m_LastProgress = GetTickCount64();

        DoOps(min(x_HdrLen, cbData), x_WarmupIterations);

        SYSTEM_INFO si;
        GetSystemInfo(&si);
        LARGE_INTEGER freq, start, end;
        QueryPerformanceFrequency(&freq);
        CpuMonitor cpu;
        printf("Using %u processors. Sender Frequency is %lld\n", (unsigned)si.dwNumberOfProcessors,
               (long long)freq.QuadPart);
        printf("RDMA %s, %u requests in flight\n\n", m_bRead ? "Read" : "Write", m_Depth);
        printf("%9s %9s %9s %7s %11s\n", "Size", "Iter", "Latency", "CPU", "Bytes/Sec");
        for (ULONG size = minSize;; size = min(size * 2, maxSize)) {
            cpu.Start();
            QueryPerformanceCounter(&start);
            DoOps(size, iterations);
            QueryPerformanceCounter(&end);
            double cpuUse = cpu.Report(si.dwNumberOfProcessors);
            double us = (double)(end.QuadPart - start.QuadPart) * 1000000.0 / (double)freq.QuadPart;
            printf("%9u %9u %9.2f %7.2f %11.0f\n", size, iterations, us / iterations, cpuUse,
                   (double)size * iterations / (us / 1000000.0));
            fflush(stdout);
            if (m_bRead) {
                // One more Read of this size into a cleared buffer, checked:
                // the timed Reads all land on the same bytes.
                ZeroMemory(m_pBuf, size);
                DoOps(size, 1);
                for (ULONG i = 0; i < size; i++) {
                    if (m_pBuf[i] != ReadPattern(i)) {
                        printf("read byte %u of size %u is 0x%02X, expected 0x%02X\n", i, size,
                               (unsigned char)m_pBuf[i], (unsigned char)ReadPattern(i));
                        FailMsg("data check failed");
                    }
                }
            }
            if (size >= maxSize)
                break;
        }

        // Write: one verification Write of the whole size with the second
        // pattern, which the server then checks.
        if (!m_bRead) {
            for (ULONG i = 0; i < maxSize; i++)
                m_pBuf[i] = WritePattern(i, 1);
            DoOps(maxSize, 1);
        }

        // Ask the server to check (Write) or just to finish (Read).
        DoneMsg done;
        done.magic = x_DoneMagic;
        done.length = m_bRead ? 0 : maxSize;
        done.status = 0;
        done.reserved = 0;
        SendMsg(&done, sizeof(done));
        WaitForReceive("the server's answer");
        if (m_RecvBytes != sizeof(done))
            FailMsg("answer of a wrong size");
        CopyMemory(&done, m_pMsg, sizeof(done));
        if (done.magic != x_DoneMagic || done.status != 0)
            FailMsg("data check failed: the server found its buffer differs from the pattern");
        if (m_bRead)
            printf("Client verified every RDMA Read.\n");
        else
            printf("Server verified %u bytes written by RDMA Write.\n", done.length);
        Disconnect();
    }
};

int __cdecl _tmain(int argc, TCHAR* argv[])
{
    bool bServer = false, bClient = false, bPolling = false, bBlocking = false;
    bool bRead = false, bWrite = false;
    ULONG nSge = 1, iterations = x_DefaultIterations, fixedSize = 0;

    for (int i = 1; i < argc - 1; i++) {
        TCHAR* arg = argv[i];
        if (_tcscmp(arg, _T("-s")) == 0) {
            bServer = true;
        } else if (_tcscmp(arg, _T("-c")) == 0) {
            bClient = true;
        } else if (_tcscmp(arg, _T("-p")) == 0) {
            bPolling = true;
        } else if (_tcscmp(arg, _T("-b")) == 0) {
            bBlocking = true;
        } else if (_tcscmp(arg, _T("-r")) == 0) {
            bRead = true;
        } else if (_tcscmp(arg, _T("-w")) == 0) {
            bWrite = true;
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
    if ((bPolling && bBlocking) || (bRead && bWrite)) {
        printf("Options -p/-b and -r/-w are mutually exclusive.\n\n");
        ShowUsage();
        return 2;
    }
    if (nSge == 0 || iterations == 0 || fixedSize > x_MaxXfer) {
        printf("Invalid -n, -i or -z value.\n\n");
        ShowUsage();
        return 2;
    }
    SOCKADDR_INET addr;
    ULONG cbAddr;
    if (!ParseAddress(argv[argc - 1], &addr, &cbAddr, x_DefaultPort)) {
        printf("Bad address.\n\n");
        ShowUsage();
        return 2;
    }

    WSADATA wsaData;
    int ret = WSAStartup(MAKEWORD(2, 2), &wsaData);
    if (ret != 0)
        Fail("WSAStartup", HRESULT_FROM_WIN32(ret));
    HRESULT hr = NdStartup();
    if (FAILED(hr))
        Fail("NdStartup", hr);

    printf("Beginning test: ndrping\n");
    fflush(stdout);
    if (bServer) {
        NdRPingServer server(bBlocking, nSge);
        server.Run(reinterpret_cast<const sockaddr*>(&addr), cbAddr);
    } else {
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        hr = NdResolveAddress(reinterpret_cast<const sockaddr*>(&addr), cbAddr,
                              reinterpret_cast<sockaddr*>(&local), &cbLocal);
        if (FAILED(hr))
            Fail("NdResolveAddress", hr);
        if (local.si_family == AF_INET)
            local.Ipv4.sin_port = 0;
        else
            local.Ipv6.sin6_port = 0;
        NdRPingClient client(bBlocking, nSge, bRead);
        client.Run(reinterpret_cast<const sockaddr*>(&local), (ULONG)cbLocal,
                   reinterpret_cast<const sockaddr*>(&addr), cbAddr, fixedSize ? fixedSize : 1,
                   fixedSize ? fixedSize : x_DefaultMaxSize, iterations);
    }

    hr = NdCleanup();
    if (FAILED(hr))
        Fail("NdCleanup", hr);
    WSACleanup();
    printf("End of test: ndrping\n");
    return 0;
}
