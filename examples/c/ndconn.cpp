//
// ndconn.cpp - NetworkDirect v2 connection management test.
//
// Written the way Windows NetworkDirect programs are written: every
// overlapped request goes through an I/O completion port bound to the
// adapter's overlapped file (CreateIoCompletionPort), is dequeued with
// GetQueuedCompletionStatus and then finished with
// IND2Overlapped::GetOverlappedResult, as the IND2Overlapped and
// IND2Adapter::CreateOverlappedFile pages of Microsoft's NetworkDirect
// documentation describe.  See docs/PORTING.md.
//
// Server (-s):
//   - listens with a backlog; rejects the first connection request with
//     private data; accepts the second;
//   - arms NotifyDisconnect, tells the client (a Send) and waits: the
//     client's Disconnect completes the NotifyDisconnect with ND_SUCCESS and
//     flushes the server's outstanding Receives with ND_CANCELED;
//   - a pending GetConnectionRequest cancelled by CancelOverlappedRequests
//     completes with ND_CANCELED;
//   - a pending CQ Notify cancelled by CancelOverlappedRequests dequeues from
//     the port as a failure: FALSE, the same OVERLAPPED, GetLastError() ==
//     ERROR_OPERATION_ABORTED, and GetOverlappedResult gives ND_CANCELED;
//   - a zero-timeout GetQueuedCompletionStatus on an idle port returns FALSE,
//     a NULL OVERLAPPED and WAIT_TIMEOUT.
// Client (-c):
//   - its first Connect completes with ND_CONNECTION_REFUSED; it reads the
//     server's reject private data (size query ND_BUFFER_OVERFLOW first);
//   - connects again with a new connector, waits for the server's message,
//     then disconnects.
//
// Each check prints a PASS line; the first failed check prints FAIL, the
// call and its HRESULT, and exits 1.  Every wait is bounded (x_TimeoutMs).
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

static const USHORT x_DefaultPort = 54330;
static const DWORD x_TimeoutMs = ND_EXAMPLE_TIMEOUT_MS;
static const ULONG x_Backlog = 4;
static const ULONG x_QueueDepth = 4;
static const ULONG x_MsgSize = 64;
static const char x_ConnectData[] = "ndconn: connect";
static const char x_RejectData[] = "ndconn: rejected by the server";
static const char x_ReadyMsg[] = "ndconn: NotifyDisconnect armed";

static void ShowUsage()
{
    printf("ndconn [options] <ip>[:<port>]\n"
           "Options:\n"
           "\t-s            - start as server (listen on IP/Port)\n"
           "\t-c            - start as client (connect to server IP/Port)\n"
           "\t-h            - show this help\n"
           "\t<ip>[:<port>] - IPv4 a.b.c.d[:port] or IPv6 [addr]:port, default port %u\n",
           x_DefaultPort);
}

static void FailCheck(const char* call, HRESULT hr)
{
    printf("FAIL: %s failed with HRESULT 0x%08X\n", call, (unsigned)hr);
    fflush(stdout);
    exit(1);
}

static void FailCheckMsg(const char* msg)
{
    printf("FAIL: %s\n", msg);
    fflush(stdout);
    exit(1);
}

static void Pass(const char* what)
{
    printf("PASS: %s\n", what);
    fflush(stdout);
}

// Checks an exact status.
static void Expect(const char* what, HRESULT got, HRESULT expected)
{
    if (got != expected) {
        printf("FAIL: %s returned 0x%08X, expected 0x%08X\n", what, (unsigned)got,
               (unsigned)expected);
        fflush(stdout);
        exit(1);
    }
    printf("PASS: %s -> 0x%08X\n", what, (unsigned)got);
    fflush(stdout);
}

// One dequeued completion packet.
struct Packet
{
    OVERLAPPED* pOv;
    BOOL ok;
    DWORD error;
};

// The completion port all overlapped requests complete to.  Packets that
// arrive for a request other than the one being waited for are kept.
class CompletionPort
{
    HANDLE m_hPort;
    Packet m_Kept[16];
    ULONG m_nKept;

public:
    CompletionPort() : m_hPort(NULL), m_nKept(0) {}
    ~CompletionPort()
    {
        if (m_hPort != NULL)
            CloseHandle(m_hPort);
    }

    HANDLE Handle() const { return m_hPort; }

    void Associate(HANDLE hFile, ULONG_PTR key)
    {
        m_hPort = CreateIoCompletionPort(hFile, m_hPort, key, 0);
        if (m_hPort == NULL)
            FailCheck("CreateIoCompletionPort", HRESULT_FROM_WIN32(GetLastError()));
    }

    // Dequeues one packet; FALSE with pOv == NULL if none came in time.
    Packet Dequeue(DWORD timeoutMs)
    {
        Packet p;
        DWORD bytes = 0;
        ULONG_PTR key = 0;
        p.pOv = NULL;
        SetLastError(0);
        p.ok = GetQueuedCompletionStatus(m_hPort, &bytes, &key, &p.pOv, timeoutMs);
        p.error = p.ok ? 0 : GetLastError();
        return p;
    }

    // Waits (bounded) for the packet of pOv.
    Packet WaitFor(OVERLAPPED* pOv, const char* what)
    {
        for (ULONG i = 0; i < m_nKept; i++) {
            if (m_Kept[i].pOv == pOv) {
                Packet p = m_Kept[i];
                m_Kept[i] = m_Kept[--m_nKept];
                return p;
            }
        }
        ULONGLONG deadline = GetTickCount64() + x_TimeoutMs;
        for (;;) {
            ULONGLONG now = GetTickCount64();
            if (now >= deadline) {
                printf("FAIL: %s: no completion within %u ms\n", what, (unsigned)x_TimeoutMs);
                fflush(stdout);
                exit(1);
            }
            Packet p = Dequeue((DWORD)(deadline - now));
            if (p.pOv == NULL)
                continue; // timed out; the deadline check ends the loop
            if (p.pOv == pOv)
                return p;
            if (m_nKept == sizeof(m_Kept) / sizeof(m_Kept[0]))
                FailCheckMsg("too many unexpected completion packets");
            m_Kept[m_nKept++] = p;
        }
    }
};

// Finishes an overlapped request through the port: ND_SUCCESS means done
// (no packet is queued); ND_PENDING means dequeue its packet, then ask the
// object for the final status (which may start another phase).
static HRESULT Complete(CompletionPort& port, IND2Overlapped* pObj, OVERLAPPED* pOv,
                        HRESULT hr, const char* what)
{
    while (hr == ND_PENDING) {
        port.WaitFor(pOv, what);
        hr = pObj->GetOverlappedResult(pOv, FALSE);
    }
    return hr;
}

static void ReleaseLast(IUnknown* pObj, const char* what)
{
    ULONG refs = pObj->Release();
    if (refs != 0) {
        printf("FAIL: %s Release() returned %u, expected 0\n", what, refs);
        fflush(stdout);
        exit(1);
    }
    printf("PASS: %s Release() -> 0\n", what);
}

class NdConnTest
{
protected:
    IND2Adapter* m_pAdapter;
    HANDLE m_hFile;
    CompletionPort m_Port;
    IND2CompletionQueue* m_pCq;
    IND2QueuePair* m_pQp;
    IND2MemoryRegion* m_pMr;
    ND2_ADAPTER_INFO m_Info;
    char m_Buf[4 * x_MsgSize];
    OVERLAPPED m_Ov;

public:
    NdConnTest() : m_pAdapter(NULL), m_hFile(NULL), m_pCq(NULL), m_pQp(NULL), m_pMr(NULL)
    {
        ZeroMemory(&m_Info, sizeof(m_Info));
        ZeroMemory(m_Buf, sizeof(m_Buf));
        ZeroMemory(&m_Ov, sizeof(m_Ov));
    }

    virtual ~NdConnTest()
    {
        if (m_pMr != NULL) {
            HRESULT hr = m_pMr->Deregister(&m_Ov);
            hr = Complete(m_Port, m_pMr, &m_Ov, hr, "IND2MemoryRegion::Deregister");
            if (FAILED(hr))
                FailCheck("IND2MemoryRegion::Deregister", hr);
            m_pMr->Release();
        }
        if (m_pQp != NULL)
            m_pQp->Release();
        if (m_pCq != NULL)
            m_pCq->Release();
        if (m_hFile != NULL)
            CloseHandle(m_hFile);
        if (m_pAdapter != NULL)
            m_pAdapter->Release();
    }

    void Init(const sockaddr* pLocal, ULONG cbLocal)
    {
        HRESULT hr = NdOpenAdapter(IID_IND2Adapter, pLocal, cbLocal,
                                   reinterpret_cast<void**>(&m_pAdapter));
        if (FAILED(hr))
            FailCheck("NdOpenAdapter", hr);
        m_Info.InfoVersion = ND_VERSION_2;
        ULONG cb = sizeof(m_Info);
        hr = m_pAdapter->Query(&m_Info, &cb);
        if (FAILED(hr))
            FailCheck("IND2Adapter::Query", hr);
        hr = m_pAdapter->CreateOverlappedFile(&m_hFile);
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateOverlappedFile", hr);
        m_Port.Associate(m_hFile, 1);

        ULONG depth = min(x_QueueDepth, m_Info.MaxCompletionQueueDepth);
        hr = m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile, depth, 0, 0,
                                              reinterpret_cast<void**>(&m_pCq));
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateCompletionQueue", hr);
        hr = m_pAdapter->CreateQueuePair(IID_IND2QueuePair, m_pCq, m_pCq, this, depth, depth, 1,
                                         1, 0, reinterpret_cast<void**>(&m_pQp));
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateQueuePair", hr);
        hr = m_pAdapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_hFile,
                                           reinterpret_cast<void**>(&m_pMr));
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateMemoryRegion", hr);
        hr = m_pMr->Register(m_Buf, sizeof(m_Buf), ND_MR_FLAG_ALLOW_LOCAL_WRITE, &m_Ov);
        hr = Complete(m_Port, m_pMr, &m_Ov, hr, "IND2MemoryRegion::Register");
        if (FAILED(hr))
            FailCheck("IND2MemoryRegion::Register", hr);
    }

    IND2Connector* NewConnector()
    {
        IND2Connector* pConnector;
        HRESULT hr = m_pAdapter->CreateConnector(IID_IND2Connector, m_hFile,
                                                 reinterpret_cast<void**>(&pConnector));
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateConnector", hr);
        return pConnector;
    }

    void PostReceive(ULONG slot)
    {
        ND2_SGE sge;
        sge.Buffer = m_Buf + slot * x_MsgSize;
        sge.BufferLength = x_MsgSize;
        sge.MemoryRegionToken = m_pMr->GetLocalToken();
        HRESULT hr = m_pQp->Receive(sge.Buffer, &sge, 1);
        if (FAILED(hr))
            FailCheck("IND2QueuePair::Receive", hr);
    }

    // Polls the CQ (bounded) for one completion.
    void GetCompletion(ND2_RESULT* pResult, const char* what)
    {
        ULONGLONG deadline = GetTickCount64() + x_TimeoutMs;
        ULONG spins = 0;
        while (m_pCq->GetResults(pResult, 1) != 1) {
            if ((++spins & 0xFF) == 0 && GetTickCount64() > deadline) {
                printf("FAIL: %s: no completion within %u ms\n", what, (unsigned)x_TimeoutMs);
                fflush(stdout);
                exit(1);
            }
            SwitchToThread();
        }
        if (pResult->QueuePairContext != this)
            FailCheckMsg("completion with a wrong QueuePairContext");
    }
};

class NdConnServer : public NdConnTest
{
public:
    void Run(const sockaddr* pAddr, ULONG cbAddr)
    {
        Init(pAddr, cbAddr);

        // An idle port: a zero-timeout dequeue fails with WAIT_TIMEOUT.
        Packet p = m_Port.Dequeue(0);
        if (p.ok || p.pOv != NULL || p.error != WAIT_TIMEOUT) {
            printf("FAIL: GetQueuedCompletionStatus(0) on an idle port: ok=%d ov=%p error=%u\n",
                   p.ok, (void*)p.pOv, (unsigned)p.error);
            exit(1);
        }
        Pass("GetQueuedCompletionStatus(timeout 0) on an idle port -> FALSE, NULL, WAIT_TIMEOUT");

        IND2Listener* pListener;
        HRESULT hr = m_pAdapter->CreateListener(IID_IND2Listener, m_hFile,
                                                reinterpret_cast<void**>(&pListener));
        if (FAILED(hr))
            FailCheck("IND2Adapter::CreateListener", hr);
        Expect("IND2Listener::Bind", pListener->Bind(pAddr, cbAddr), ND_SUCCESS);
        Expect("IND2Listener::Listen(backlog 4)", pListener->Listen(x_Backlog), ND_SUCCESS);
        printf("Listening.\n");
        fflush(stdout);

        // 1. The first request is rejected with private data.
        IND2Connector* pRejected = NewConnector();
        OVERLAPPED ovReq;
        ZeroMemory(&ovReq, sizeof(ovReq));
        hr = pListener->GetConnectionRequest(pRejected, &ovReq);
        hr = Complete(m_Port, pListener, &ovReq, hr, "IND2Listener::GetConnectionRequest");
        Expect("IND2Listener::GetConnectionRequest (first)", hr, ND_SUCCESS);
        char data[256];
        ULONG cbData = sizeof(data);
        hr = pRejected->GetPrivateData(data, &cbData);
        Expect("IND2Connector::GetPrivateData (connect data)", hr, ND_SUCCESS);
        if (cbData < sizeof(x_ConnectData) || memcmp(data, x_ConnectData, sizeof(x_ConnectData)) != 0)
            FailCheckMsg("the connect private data differs from what the client sent");
        Pass("connect private data matches");
        Expect("IND2Connector::Reject with private data",
               pRejected->Reject(x_RejectData, sizeof(x_RejectData)), ND_SUCCESS);
        ReleaseLast(pRejected, "rejected IND2Connector");

        // 2. The second request is accepted.
        IND2Connector* pConnector = NewConnector();
        hr = pListener->GetConnectionRequest(pConnector, &ovReq);
        hr = Complete(m_Port, pListener, &ovReq, hr, "IND2Listener::GetConnectionRequest");
        Expect("IND2Listener::GetConnectionRequest (second)", hr, ND_SUCCESS);
        PostReceive(0);
        PostReceive(1);
        hr = pConnector->Accept(m_pQp, 0, 0, NULL, 0, &m_Ov);
        hr = Complete(m_Port, pConnector, &m_Ov, hr, "IND2Connector::Accept");
        Expect("IND2Connector::Accept", hr, ND_SUCCESS);

        // 3. NotifyDisconnect is pending when the client disconnects: the
        //    client only disconnects after it receives this Send.
        OVERLAPPED ovDisc;
        ZeroMemory(&ovDisc, sizeof(ovDisc));
        HRESULT hrNotify = pConnector->NotifyDisconnect(&ovDisc);
        Expect("IND2Connector::NotifyDisconnect (connected)", hrNotify, ND_PENDING);

        char* pMsg = m_Buf + 3 * x_MsgSize;
        CopyMemory(pMsg, x_ReadyMsg, sizeof(x_ReadyMsg));
        ND2_SGE sge;
        sge.Buffer = pMsg;
        sge.BufferLength = sizeof(x_ReadyMsg);
        sge.MemoryRegionToken = m_pMr->GetLocalToken();
        hr = m_pQp->Send(pMsg, &sge, 1, 0);
        if (FAILED(hr))
            FailCheck("IND2QueuePair::Send", hr);
        ND2_RESULT result;
        GetCompletion(&result, "the Send completion");
        if (result.RequestType != Nd2RequestTypeSend)
            FailCheckMsg("expected the Send completion first");
        Expect("Send completion status", result.Status, ND_SUCCESS);

        hr = Complete(m_Port, pConnector, &ovDisc, hrNotify, "IND2Connector::NotifyDisconnect");
        Expect("NotifyDisconnect completion after the client's Disconnect", hr, ND_SUCCESS);

        // 4. The peer's disconnect flushed both outstanding Receives.
        for (int i = 0; i < 2; i++) {
            GetCompletion(&result, "a flushed Receive");
            if (result.RequestType != Nd2RequestTypeReceive)
                FailCheckMsg("expected a Receive completion");
            Expect("outstanding Receive after the peer disconnected", result.Status, ND_CANCELED);
        }
        if (m_pCq->GetResults(&result, 1) != 0)
            FailCheckMsg("an unexpected extra completion");

        hr = pConnector->Disconnect(&m_Ov);
        hr = Complete(m_Port, pConnector, &m_Ov, hr, "IND2Connector::Disconnect");
        Expect("IND2Connector::Disconnect after the peer disconnected", hr, ND_SUCCESS);
        ReleaseLast(pConnector, "accepted IND2Connector");

        // 5. A pending GetConnectionRequest, cancelled.
        IND2Connector* pSpare = NewConnector();
        hr = pListener->GetConnectionRequest(pSpare, &ovReq);
        Expect("IND2Listener::GetConnectionRequest (no client)", hr, ND_PENDING);
        Expect("IND2Listener::CancelOverlappedRequests", pListener->CancelOverlappedRequests(),
               ND_SUCCESS);
        p = m_Port.WaitFor(&ovReq, "the cancelled GetConnectionRequest");
        if (p.ok || p.error != ERROR_OPERATION_ABORTED) {
            printf("FAIL: cancelled GetConnectionRequest dequeued ok=%d error=%u\n", p.ok,
                   (unsigned)p.error);
            exit(1);
        }
        Pass("cancelled GetConnectionRequest dequeues FALSE, ERROR_OPERATION_ABORTED");
        Expect("IND2Listener::GetOverlappedResult (cancelled request)",
               pListener->GetOverlappedResult(&ovReq, FALSE), ND_CANCELED);
        ReleaseLast(pSpare, "unused IND2Connector");

        // 6. A pending CQ Notify, cancelled, dequeues as a failure.
        OVERLAPPED ovNotify;
        ZeroMemory(&ovNotify, sizeof(ovNotify));
        hr = m_pCq->Notify(ND_CQ_NOTIFY_ANY, &ovNotify);
        Expect("IND2CompletionQueue::Notify (empty CQ)", hr, ND_PENDING);
        Expect("IND2CompletionQueue::CancelOverlappedRequests", m_pCq->CancelOverlappedRequests(),
               ND_SUCCESS);
        // The cancellation is queued before CancelOverlappedRequests returns.
        p = m_Port.Dequeue(0);
        if (p.ok || p.pOv != &ovNotify || p.error != ERROR_OPERATION_ABORTED) {
            printf("FAIL: cancelled Notify dequeued ok=%d ov=%p (expected %p) error=%u\n", p.ok,
                   (void*)p.pOv, (void*)&ovNotify, (unsigned)p.error);
            exit(1);
        }
        Pass("cancelled CQ Notify dequeues FALSE, its OVERLAPPED, ERROR_OPERATION_ABORTED (995)");
        Expect("IND2CompletionQueue::GetOverlappedResult (cancelled Notify)",
               m_pCq->GetOverlappedResult(&ovNotify, FALSE), ND_CANCELED);

        // 7. Nothing else is queued.
        p = m_Port.Dequeue(0);
        if (p.ok || p.pOv != NULL || p.error != WAIT_TIMEOUT) {
            printf("FAIL: GetQueuedCompletionStatus(0) after the tests: ok=%d ov=%p error=%u\n",
                   p.ok, (void*)p.pOv, (unsigned)p.error);
            exit(1);
        }
        Pass("GetQueuedCompletionStatus(timeout 0) afterwards -> FALSE, NULL, WAIT_TIMEOUT");

        ReleaseLast(pListener, "IND2Listener");
    }
};

class NdConnClient : public NdConnTest
{
public:
    void Run(const sockaddr* pLocal, ULONG cbLocal, const sockaddr* pServer, ULONG cbServer)
    {
        Init(pLocal, cbLocal);

        // 1. The server rejects the first attempt.
        IND2Connector* pRejected = NewConnector();
        Expect("IND2Connector::Bind (port 0)", pRejected->Bind(pLocal, cbLocal), ND_SUCCESS);
        HRESULT hr = pRejected->Connect(m_pQp, pServer, cbServer, 0, 0, x_ConnectData,
                                        sizeof(x_ConnectData), &m_Ov);
        hr = Complete(m_Port, pRejected, &m_Ov, hr, "IND2Connector::Connect");
        Expect("IND2Connector::Connect (rejected)", hr, ND_CONNECTION_REFUSED);

        ULONG cbData = 0;
        hr = pRejected->GetPrivateData(NULL, &cbData);
        Expect("IND2Connector::GetPrivateData(NULL, 0) size query", hr, ND_BUFFER_OVERFLOW);
        if (cbData < sizeof(x_RejectData)) {
            printf("FAIL: reject private data size %u, expected at least %u\n", cbData,
                   (unsigned)sizeof(x_RejectData));
            exit(1);
        }
        Pass("size query reports the reject private data size");
        char* pData = static_cast<char*>(HeapAlloc(GetProcessHeap(), 0, cbData));
        if (pData == NULL)
            FailCheck("HeapAlloc", ND_NO_MEMORY);
        hr = pRejected->GetPrivateData(pData, &cbData);
        Expect("IND2Connector::GetPrivateData (reject data)", hr, ND_SUCCESS);
        if (memcmp(pData, x_RejectData, sizeof(x_RejectData)) != 0)
            FailCheckMsg("the reject private data differs from what the server sent");
        Pass("reject private data matches");
        HeapFree(GetProcessHeap(), 0, pData);
        ReleaseLast(pRejected, "rejected IND2Connector");

        // 2. The second attempt, with a new connector, is accepted.
        PostReceive(0);
        IND2Connector* pConnector = NewConnector();
        Expect("IND2Connector::Bind (port 0)", pConnector->Bind(pLocal, cbLocal), ND_SUCCESS);
        hr = pConnector->Connect(m_pQp, pServer, cbServer, 0, 0, x_ConnectData,
                                 sizeof(x_ConnectData), &m_Ov);
        hr = Complete(m_Port, pConnector, &m_Ov, hr, "IND2Connector::Connect");
        Expect("IND2Connector::Connect (accepted)", hr, ND_SUCCESS);
        hr = pConnector->CompleteConnect(&m_Ov);
        hr = Complete(m_Port, pConnector, &m_Ov, hr, "IND2Connector::CompleteConnect");
        Expect("IND2Connector::CompleteConnect", hr, ND_SUCCESS);

        // 3. Wait until the server has armed NotifyDisconnect, then disconnect.
        ND2_RESULT result;
        GetCompletion(&result, "the server's message");
        if (result.RequestType != Nd2RequestTypeReceive)
            FailCheckMsg("expected a Receive completion");
        Expect("Receive completion status", result.Status, ND_SUCCESS);
        if (result.BytesTransferred != sizeof(x_ReadyMsg) ||
            memcmp(m_Buf, x_ReadyMsg, sizeof(x_ReadyMsg)) != 0)
            FailCheckMsg("the server's message differs");
        Pass("server message received");

        hr = pConnector->Disconnect(&m_Ov);
        hr = Complete(m_Port, pConnector, &m_Ov, hr, "IND2Connector::Disconnect");
        Expect("IND2Connector::Disconnect", hr, ND_SUCCESS);
        ReleaseLast(pConnector, "connected IND2Connector");
    }
};

int __cdecl _tmain(int argc, TCHAR* argv[])
{
    bool bServer = false, bClient = false;
    for (int i = 1; i < argc - 1; i++) {
        if (_tcscmp(argv[i], _T("-s")) == 0) {
            bServer = true;
        } else if (_tcscmp(argv[i], _T("-c")) == 0) {
            bClient = true;
        } else {
            ShowUsage();
            return _tcscmp(argv[i], _T("-h")) == 0 ? 0 : 2;
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
        FailCheck("WSAStartup", HRESULT_FROM_WIN32(ret));
    HRESULT hr = NdStartup();
    if (FAILED(hr))
        FailCheck("NdStartup", hr);

    printf("Beginning test: ndconn\n");
    fflush(stdout);
    if (bServer) {
        NdConnServer server;
        server.Run(reinterpret_cast<const sockaddr*>(&addr), cbAddr);
    } else {
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        hr = NdResolveAddress(reinterpret_cast<const sockaddr*>(&addr), cbAddr,
                              reinterpret_cast<sockaddr*>(&local), &cbLocal);
        if (FAILED(hr))
            FailCheck("NdResolveAddress", hr);
        if (local.si_family == AF_INET)
            local.Ipv4.sin_port = 0;
        else
            local.Ipv6.sin6_port = 0;
        NdConnClient client;
        client.Run(reinterpret_cast<const sockaddr*>(&local), (ULONG)cbLocal,
                   reinterpret_cast<const sockaddr*>(&addr), cbAddr);
    }

    hr = NdCleanup();
    if (FAILED(hr))
        FailCheck("NdCleanup", hr);
    WSACleanup();
    printf("End of test: ndconn\n");
    return 0;
}
