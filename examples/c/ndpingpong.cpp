//
// ndpingpong.cpp - NetworkDirect v2 Send/Receive ping-pong latency test.
//
// Written the way Windows NetworkDirect examples are written (IND2* COM
// interfaces, OVERLAPPED requests completed through an event and
// IND2Overlapped::GetOverlappedResult, _tmain), after the description of
// Microsoft's ndpingpong example in the NetworkDirect documentation and
// docs/PORTING.md.  It builds unchanged against Microsoft's headers on
// Windows and against netdirect's include/ and include/win32 on Linux.
//
// The client sends a ping of `size` bytes and waits for the server's pong of
// the same size; the server echoes every ping back from the buffer it was
// received into, so the client checks that each pong carries exactly the
// bytes (sequence number and pattern) that it sent.  Only the client prints
// the result table.
//
// Every wait is bounded (x_TimeoutMs): a broken peer makes the program fail
// instead of hanging.  Any failure prints the failing call and its HRESULT
// and exits non-zero.
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

static const USHORT x_DefaultPort = 54325;
static const ULONG x_MaxXfer = 4 * 1024 * 1024;
static const ULONG x_HdrLen = 40;           // SGE chunk size and warm-up size
static const ULONG x_DefaultMaxSize = 4096; // default sweep: 1 .. 4096
static const ULONG x_DefaultIterations = 1000;
static const ULONG x_WarmupIterations = 100;
static const ULONG x_MaxSge = 16;
static const ULONG x_RecvSlots = 2;         // Receives kept posted
static const ULONG x_QueueDepth = 8;
static const DWORD x_TimeoutMs = ND_EXAMPLE_TIMEOUT_MS;     // bound on every wait

// Private data the client passes with Connect: the largest message it sends.
struct ConnectData
{
    ULONG magic;
    ULONG maxSize;
};
static const ULONG x_ConnectMagic = 0x50504E44; // "DNPP"

static void ShowUsage()
{
    printf("ndpingpong [options] <ip>[:<port>]\n"
           "Options:\n"
           "\t-s            - start as server (listen on IP/Port)\n"
           "\t-c            - start as client (connect to server IP/Port)\n"
           "\t-p            - polling mode: spin on GetResults (default)\n"
           "\t-b            - blocking mode: CQ Notify + GetOverlappedResult\n"
           "\t-n <nSge>     - number of scatter/gather entries per request (default 1)\n"
           "\t-i <count>    - iterations per size (default %u)\n"
           "\t-z <size>     - a single message size (default: sweep 1..%u)\n"
           "\t-h            - show this help\n"
           "\t<ip>[:<port>] - IPv4 a.b.c.d[:port] or IPv6 [addr]:port, default port %u\n",
           x_DefaultIterations, x_DefaultMaxSize, x_DefaultPort);
}

// Splits a message into SGEs of x_HdrLen bytes, the remainder on the last.
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

// System-wide CPU use, as Microsoft's examples measure it (100 = one CPU).
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

class Timer
{
    LARGE_INTEGER m_freq, m_start, m_end;
public:
    Timer() { QueryPerformanceFrequency(&m_freq); m_start.QuadPart = m_end.QuadPart = 0; }
    void Start() { QueryPerformanceCounter(&m_start); }
    void End() { QueryPerformanceCounter(&m_end); }
    double Usecs() const
    {
        return (double)(m_end.QuadPart - m_start.QuadPart) * 1000000.0 / (double)m_freq.QuadPart;
    }
    LONGLONG Frequency() const { return m_freq.QuadPart; }
};

// One receive slot: its buffer and what its last completion reported.
struct RecvSlot
{
    char* pBuf;
    ULONG bytes;
};

class NdPingPong
{
protected:
    IND2Adapter* m_pAdapter;
    HANDLE m_hAdapterFile;
    IND2CompletionQueue* m_pCq;
    IND2QueuePair* m_pQp;
    IND2MemoryRegion* m_pMr;
    IND2Connector* m_pConnector;
    ND2_ADAPTER_INFO m_Info;
    OVERLAPPED m_Ov;
    bool m_bBlocking;
    ULONG m_nSge;
    ULONG m_maxSize;
    char* m_pBuf;          // send area (m_maxSize) then x_RecvSlots receive slots
    SIZE_T m_cbBuf;
    RecvSlot m_Slots[x_RecvSlots];
    // Completed receives not yet consumed, in completion order.
    RecvSlot* m_Done[x_RecvSlots];
    ULONG m_nDone;
    ULONG m_nSendsOutstanding;
    bool m_bPeerGone;

public:
    NdPingPong(bool blocking, ULONG nSge)
        : m_pAdapter(NULL), m_hAdapterFile(NULL), m_pCq(NULL), m_pQp(NULL), m_pMr(NULL),
          m_pConnector(NULL), m_bBlocking(blocking), m_nSge(nSge), m_maxSize(0), m_pBuf(NULL),
          m_cbBuf(0), m_nDone(0), m_nSendsOutstanding(0), m_bPeerGone(false)
    {
        ZeroMemory(&m_Info, sizeof(m_Info));
        ZeroMemory(&m_Ov, sizeof(m_Ov));
        ZeroMemory(m_Slots, sizeof(m_Slots));
        ZeroMemory(m_Done, sizeof(m_Done));
    }

    virtual ~NdPingPong()
    {
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
        if (m_hAdapterFile != NULL)
            CloseHandle(m_hAdapterFile);
        if (m_pAdapter != NULL)
            m_pAdapter->Release();
        if (m_Ov.hEvent != NULL)
            CloseHandle(m_Ov.hEvent);
        if (m_pBuf != NULL)
            HeapFree(GetProcessHeap(), 0, m_pBuf);
    }

    void Init(const sockaddr* pLocal, ULONG cbLocal)
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

        hr = m_pAdapter->CreateOverlappedFile(&m_hAdapterFile);
        if (FAILED(hr))
            Fail("IND2Adapter::CreateOverlappedFile", hr);

        ULONG maxSge = min(m_Info.MaxInitiatorSge, m_Info.MaxReceiveSge);
        if (m_nSge > maxSge)
            m_nSge = maxSge;
        if (m_nSge > x_MaxSge)
            m_nSge = x_MaxSge;
    }

    void CreateQueues()
    {
        ULONG depth = min(x_QueueDepth, m_Info.MaxCompletionQueueDepth);
        depth = min(depth, min(m_Info.MaxReceiveQueueDepth, m_Info.MaxInitiatorQueueDepth));

        HRESULT hr = m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hAdapterFile,
                                                      depth, 0, 0,
                                                      reinterpret_cast<void**>(&m_pCq));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateCompletionQueue", hr);

        hr = m_pAdapter->CreateQueuePair(IID_IND2QueuePair, m_pCq, m_pCq, this, depth, depth,
                                         m_nSge, m_nSge, m_Info.InlineRequestThreshold,
                                         reinterpret_cast<void**>(&m_pQp));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateQueuePair", hr);

        hr = m_pAdapter->CreateConnector(IID_IND2Connector, m_hAdapterFile,
                                         reinterpret_cast<void**>(&m_pConnector));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateConnector", hr);
    }

    void CreateBuffer(ULONG maxSize)
    {
        m_maxSize = maxSize;
        m_cbBuf = (SIZE_T)maxSize * (1 + x_RecvSlots);
        m_pBuf = static_cast<char*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, m_cbBuf));
        if (m_pBuf == NULL)
            Fail("HeapAlloc", ND_NO_MEMORY);

        HRESULT hr = m_pAdapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_hAdapterFile,
                                                   reinterpret_cast<void**>(&m_pMr));
        if (FAILED(hr))
            Fail("IND2Adapter::CreateMemoryRegion", hr);

        ResetEvent(m_Ov.hEvent);
        hr = m_pMr->Register(m_pBuf, m_cbBuf, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &m_Ov);
        hr = WaitForRequest(m_pMr, &m_Ov, hr, "IND2MemoryRegion::Register");
        if (FAILED(hr))
            Fail("IND2MemoryRegion::Register", hr);

        for (ULONG i = 0; i < x_RecvSlots; i++)
            m_Slots[i].pBuf = m_pBuf + (SIZE_T)maxSize * (1 + i);
    }

    void PostReceive(RecvSlot* pSlot)
    {
        ND2_SGE sge[x_MaxSge];
        ULONG n = PrepareSge(sge, m_nSge, pSlot->pBuf, m_maxSize, m_pMr->GetLocalToken());
        HRESULT hr = m_pQp->Receive(pSlot, sge, n);
        if (FAILED(hr))
            Fail("IND2QueuePair::Receive", hr);
    }

    void Send(char* pBuf, ULONG size)
    {
        ND2_SGE sge[x_MaxSge];
        ULONG n = 0;
        if (size > 0)
            n = PrepareSge(sge, m_nSge, pBuf, size, m_pMr->GetLocalToken());
        ULONG flags = (size < m_Info.InlineRequestThreshold) ? ND_OP_FLAG_INLINE : 0;
        HRESULT hr = m_pQp->Send(pBuf, n ? sge : NULL, n, flags);
        if (FAILED(hr))
            Fail("IND2QueuePair::Send", hr);
        m_nSendsOutstanding++;
    }

    // Takes one completion off the CQ (polling or blocking), bounded by
    // x_TimeoutMs, and files it.
    void ProcessOneCompletion()
    {
        ND2_RESULT result;
        // The deadline is read from the clock only once the wait is long: a clock read per
        // message would be a fair share of an 8-byte round trip.
        ULONGLONG deadline = 0;
        ULONG spins = 0;
        for (;;) {
            if (m_pCq->GetResults(&result, 1) == 1)
                break;
            if (m_bBlocking) {
                // Arm after an empty GetResults: a completion that arrives
                // later makes the Notify complete.
                ResetEvent(m_Ov.hEvent);
                HRESULT hr = m_pCq->Notify(ND_CQ_NOTIFY_ANY, &m_Ov);
                hr = WaitForRequest(m_pCq, &m_Ov, hr, "IND2CompletionQueue::Notify");
                if (FAILED(hr))
                    Fail("IND2CompletionQueue::Notify", hr);
            } else if ((++spins & 0x3FF) != 0) {
                continue;
            }
            if (deadline == 0)
                deadline = GetTickCount64() + x_TimeoutMs;
            else if (GetTickCount64() > deadline)
                FailMsg("timed out waiting for a completion");
        }

        switch (result.RequestType) {
        case Nd2RequestTypeSend:
            if (FAILED(result.Status))
                Fail("Send completion", result.Status);
            m_nSendsOutstanding--;
            break;
        case Nd2RequestTypeReceive: {
            if (result.Status == ND_CANCELED) {
                m_bPeerGone = true;
                break;
            }
            if (FAILED(result.Status))
                Fail("Receive completion", result.Status);
            RecvSlot* pSlot = static_cast<RecvSlot*>(result.RequestContext);
            pSlot->bytes = result.BytesTransferred;
            m_Done[m_nDone++] = pSlot;
            break;
        }
        default:
            Fail("unexpected completion type", (HRESULT)result.RequestType);
        }
        if (result.QueuePairContext != this)
            FailMsg("completion with a wrong QueuePairContext");
    }

    // Waits for the oldest received message.
    RecvSlot* NextReceive()
    {
        while (m_nDone == 0) {
            if (m_bPeerGone)
                return NULL;
            ProcessOneCompletion();
        }
        RecvSlot* pSlot = m_Done[0];
        for (ULONG i = 1; i < m_nDone; i++)
            m_Done[i - 1] = m_Done[i];
        m_nDone--;
        return pSlot;
    }

    void WaitForSends()
    {
        while (m_nSendsOutstanding > 0)
            ProcessOneCompletion();
    }

    void Disconnect()
    {
        ResetEvent(m_Ov.hEvent);
        HRESULT hr = m_pConnector->Disconnect(&m_Ov);
        hr = WaitForRequest(m_pConnector, &m_Ov, hr, "IND2Connector::Disconnect");
        if (FAILED(hr))
            Fail("IND2Connector::Disconnect", hr);
    }
};

class NdServer : public NdPingPong
{
public:
    NdServer(bool blocking, ULONG nSge) : NdPingPong(blocking, nSge) {}

    void Run(const sockaddr* pAddr, ULONG cbAddr)
    {
        Init(pAddr, cbAddr);
        CreateQueues();

        IND2Listener* pListener;
        HRESULT hr = m_pAdapter->CreateListener(IID_IND2Listener, m_hAdapterFile,
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

        ResetEvent(m_Ov.hEvent);
        hr = pListener->GetConnectionRequest(m_pConnector, &m_Ov);
        hr = WaitForRequest(pListener, &m_Ov, hr, "IND2Listener::GetConnectionRequest");
        if (FAILED(hr))
            Fail("IND2Listener::GetConnectionRequest", hr);

        // The client says how large its messages get.
        ConnectData data;
        ULONG cbData = sizeof(data);
        hr = m_pConnector->GetPrivateData(&data, &cbData);
        // A transport may pad private data: ND_BUFFER_OVERFLOW with our
        // bytes copied is fine.
        if ((FAILED(hr) && hr != ND_BUFFER_OVERFLOW) || cbData < sizeof(data))
            Fail("IND2Connector::GetPrivateData", hr);
        if (data.magic != x_ConnectMagic || data.maxSize == 0 || data.maxSize > x_MaxXfer) {
            m_pConnector->Reject(NULL, 0);
            FailMsg("bad connection request private data");
        }

        CreateBuffer(data.maxSize);
        for (ULONG i = 0; i < x_RecvSlots; i++)
            PostReceive(&m_Slots[i]);

        ResetEvent(m_Ov.hEvent);
        hr = m_pConnector->Accept(m_pQp, 0, 0, NULL, 0, &m_Ov);
        hr = WaitForRequest(m_pConnector, &m_Ov, hr, "IND2Connector::Accept");
        if (FAILED(hr))
            Fail("IND2Connector::Accept", hr);
        pListener->Release();

        // Echo every ping from the slot it arrived in; a 0-byte message ends.
        for (;;) {
            RecvSlot* pSlot = NextReceive();
            if (pSlot == NULL)
                FailMsg("the client disconnected before its final message");
            if (pSlot->bytes == 0)
                break;
            Send(pSlot->pBuf, pSlot->bytes);
            WaitForSends();
            PostReceive(pSlot);
        }
        Disconnect();
    }
};

class NdClient : public NdPingPong
{
    ULONG m_Seq;

    void FillPing(ULONG size)
    {
        // A per-size pattern, with a sequence number in the first bytes.
        for (ULONG i = 0; i < size; i++)
            m_pBuf[i] = (char)(i * 7 + size);
    }

    void SetSequence(ULONG size)
    {
        m_Seq++;
        if (size >= sizeof(ULONG))
            CopyMemory(m_pBuf, &m_Seq, sizeof(ULONG));
        else
            m_pBuf[0] = (char)m_Seq;
    }

    void Ping(ULONG size, ULONG iterations)
    {
        FillPing(size);
        for (ULONG i = 0; i < iterations; i++) {
            SetSequence(size);
            Send(m_pBuf, size);
            RecvSlot* pSlot = NextReceive();
            if (pSlot == NULL)
                FailMsg("the server disconnected");
            if (pSlot->bytes != size) {
                printf("pong of %u bytes, expected %u\n", pSlot->bytes, size);
                FailMsg("data check failed");
            }
            if (memcmp(pSlot->pBuf, m_pBuf, size) != 0) {
                printf("pong %u of size %u differs from the ping\n", m_Seq, size);
                FailMsg("data check failed");
            }
            PostReceive(pSlot);
            WaitForSends();
        }
    }

public:
    NdClient(bool blocking, ULONG nSge) : NdPingPong(blocking, nSge), m_Seq(0) {}

    void Run(const sockaddr* pLocal, ULONG cbLocal, const sockaddr* pServer, ULONG cbServer,
             ULONG minSize, ULONG maxSize, ULONG iterations)
    {
        Init(pLocal, cbLocal);
        CreateQueues();
        CreateBuffer(max(maxSize, x_HdrLen));
        for (ULONG i = 0; i < x_RecvSlots; i++)
            PostReceive(&m_Slots[i]);

        HRESULT hr = m_pConnector->Bind(pLocal, cbLocal);
        if (FAILED(hr))
            Fail("IND2Connector::Bind", hr);

        ConnectData data;
        data.magic = x_ConnectMagic;
        data.maxSize = m_maxSize;
        ResetEvent(m_Ov.hEvent);
        hr = m_pConnector->Connect(m_pQp, pServer, cbServer, 0, 0, &data, sizeof(data), &m_Ov);
        hr = WaitForRequest(m_pConnector, &m_Ov, hr, "IND2Connector::Connect");
        if (FAILED(hr))
            Fail("IND2Connector::Connect", hr);

        ResetEvent(m_Ov.hEvent);
        hr = m_pConnector->CompleteConnect(&m_Ov);
        hr = WaitForRequest(m_pConnector, &m_Ov, hr, "IND2Connector::CompleteConnect");
        if (FAILED(hr))
            Fail("IND2Connector::CompleteConnect", hr);

        // Warm up.
        Ping(min(x_HdrLen, m_maxSize), x_WarmupIterations);

        SYSTEM_INFO si;
        GetSystemInfo(&si);
        Timer timer;
        CpuMonitor cpu;
        printf("Using %u processors. Sender Frequency is %lld\n\n",
               (unsigned)si.dwNumberOfProcessors, (long long)timer.Frequency());
        printf("%9s %9s %9s %7s %11s\n", "Size", "Iter", "Latency", "CPU", "Bytes/Sec");

        for (ULONG size = minSize; size <= maxSize && size != 0; size <<= 1) {
            cpu.Start();
            timer.Start();
            Ping(size, iterations);
            timer.End();
            double cpuUse = cpu.Report(si.dwNumberOfProcessors);
            double us = timer.Usecs();
            // Half a round trip per iteration; bytes move in both directions.
            printf("%9u %9u %9.2f %7.2f %11.0f\n", size, iterations, us / iterations / 2.0,
                   cpuUse, 2.0 * size * iterations / (us / 1000000.0));
            fflush(stdout);
            if (size == maxSize)
                break;
        }

        // A 0-byte message tells the server we are done.
        Send(m_pBuf, 0);
        WaitForSends();
        Disconnect();
    }
};

int __cdecl _tmain(int argc, TCHAR* argv[])
{
    bool bServer = false, bClient = false, bPolling = false, bBlocking = false;
    ULONG nSge = 1;
    ULONG iterations = x_DefaultIterations;
    ULONG fixedSize = 0;

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
        } else if (_tcscmp(arg, _T("-n")) == 0 && i + 1 < argc - 1) {
            nSge = (ULONG)_ttol(argv[++i]);
        } else if (_tcscmp(arg, _T("-i")) == 0 && i + 1 < argc - 1) {
            iterations = (ULONG)_ttol(argv[++i]);
        } else if (_tcscmp(arg, _T("-z")) == 0 && i + 1 < argc - 1) {
            fixedSize = (ULONG)_ttol(argv[++i]);
        } else {
            ShowUsage();
            return (_tcscmp(arg, _T("-h")) == 0) ? 0 : 2;
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

    printf("Beginning test: ndpingpong\n");
    fflush(stdout);
    if (bServer) {
        NdServer server(bBlocking, nSge);
        server.Run(reinterpret_cast<const sockaddr*>(&addr), cbAddr);
    } else {
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        hr = NdResolveAddress(reinterpret_cast<const sockaddr*>(&addr), cbAddr,
                              reinterpret_cast<sockaddr*>(&local), &cbLocal);
        if (FAILED(hr))
            Fail("NdResolveAddress", hr);
        // Port 0: the provider picks an ephemeral port.
        if (local.si_family == AF_INET)
            local.Ipv4.sin_port = 0;
        else
            local.Ipv6.sin6_port = 0;

        ULONG minSize = fixedSize ? fixedSize : 1;
        ULONG maxSize = fixedSize ? fixedSize : x_DefaultMaxSize;
        NdClient client(bBlocking, nSge);
        client.Run(reinterpret_cast<const sockaddr*>(&local), (ULONG)cbLocal,
                   reinterpret_cast<const sockaddr*>(&addr), cbAddr, minSize, maxSize, iterations);
    }

    hr = NdCleanup();
    if (FAILED(hr))
        Fail("NdCleanup", hr);
    WSACleanup();
    printf("End of test: ndpingpong\n");
    return 0;
}
