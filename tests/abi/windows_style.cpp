/*
 * windows_style.cpp - C++ written the way Windows NetworkDirect test
 * programs are written (a shared test base class over the ND objects, an
 * IOCP worker thread, TCHAR command-line parsing, wprintf logging), to show
 * that such code compiles unchanged with
 *     g++ -I include -I include/win32 -Wall -Werror -c windows_style.cpp
 * Written for netdirect; it is not Microsoft's code.  check.sh compiles it
 * and links it against ndw_stub.c (every symbol must resolve); it is not
 * run, since the stub implements nothing.
 */
#include "ntstatus.h"
#define WIN32_NO_STATUS
#include <windows.h>
#include <winsock2.h>
#include <ws2tcpip.h>
#include <ndspi.h>
#include <ndsupport.h>
#include <tchar.h>
#include <process.h>
#include <new>
#include <functional>
#include <map>
#include <string>
#include <algorithm>
#include <vector>
#include <memory>

#define LOG(fmt, ...) wprintf(fmt L"\n", __VA_ARGS__)
#define FAIL_AND_EXIT(msg, hr) \
    { \
        wprintf(L"%s failed with %08x (line %d)\n", msg, (ULONG)(hr), __LINE__); \
        exit(__LINE__); \
    }

static const USHORT x_DefaultPort = 54324;
static const SIZE_T x_MaxXfer = 4 * 1024 * 1024;
static const SIZE_T x_HdrLen = 40;
static const DWORD x_MaxIterations = 100000;

/* ---- timing and CPU use, through QueryPerformanceCounter/GetSystemTimes ---- */

class Timer {
public:
    Timer() { QueryPerformanceFrequency(&m_freq); m_start.QuadPart = 0; m_end.QuadPart = 0; }
    void Start() { QueryPerformanceCounter(&m_start); }
    void End() { QueryPerformanceCounter(&m_end); }
    double Report() const
    {
        return (double)(m_end.QuadPart - m_start.QuadPart) * 1000000.0 / (double)m_freq.QuadPart;
    }

private:
    LARGE_INTEGER m_freq, m_start, m_end;
};

class CpuMonitor {
public:
    CpuMonitor()
    {
        SYSTEM_INFO info;
        GetSystemInfo(&info);
        m_nProcs = info.dwNumberOfProcessors;
        ZeroMemory(&m_idle, sizeof(m_idle));
        ZeroMemory(&m_kernel, sizeof(m_kernel));
        ZeroMemory(&m_user, sizeof(m_user));
    }
    void Start() { GetSystemTimes(&m_idle, &m_kernel, &m_user); }
    double Report() const
    {
        FILETIME idle, kernel, user;
        GetSystemTimes(&idle, &kernel, &user);
        ULONGLONG di = ToU64(idle) - ToU64(m_idle);
        ULONGLONG dk = ToU64(kernel) - ToU64(m_kernel);
        ULONGLONG du = ToU64(user) - ToU64(m_user);
        if (dk + du == 0)
            return 0.0;
        return (100.0 - 100.0 * (double)di / (double)(dk + du)) * m_nProcs;
    }
    DWORD Processors() const { return m_nProcs; }

private:
    static ULONGLONG ToU64(const FILETIME &ft)
    {
        ULARGE_INTEGER u;
        u.LowPart = ft.dwLowDateTime;
        u.HighPart = ft.dwHighDateTime;
        return u.QuadPart;
    }
    DWORD m_nProcs;
    FILETIME m_idle, m_kernel, m_user;
};

/* ---- a test base over the ND objects ---- */

class NdTestBase {
protected:
    IND2Adapter *m_pAdapter = nullptr;
    HANDLE m_hAdapterFile = nullptr;
    IND2CompletionQueue *m_pCq = nullptr;
    IND2MemoryRegion *m_pMr = nullptr;
    IND2MemoryWindow *m_pMw = nullptr;
    IND2QueuePair *m_pQp = nullptr;
    IND2Connector *m_pConnector = nullptr;
    IND2Listener *m_pListen = nullptr;
    OVERLAPPED m_Ov;
    ND2_ADAPTER_INFO m_Info;
    char *m_pBuf = nullptr;

    NdTestBase()
    {
        RtlZeroMemory(&m_Ov, sizeof(m_Ov));
        RtlZeroMemory(&m_Info, sizeof(m_Info));
    }

    ~NdTestBase() { Shutdown(); }

    void Init(const struct sockaddr_in &v4Src)
    {
        HRESULT hr = NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<const struct sockaddr *>(&v4Src),
                                   sizeof(v4Src), reinterpret_cast<void **>(&m_pAdapter));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"NdOpenAdapter", hr);
        m_Ov.hEvent = CreateEvent(nullptr, FALSE, FALSE, nullptr);
        if (m_Ov.hEvent == nullptr)
            FAIL_AND_EXIT(L"CreateEvent", GetLastError());
        hr = m_pAdapter->CreateOverlappedFile(&m_hAdapterFile);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"CreateOverlappedFile", hr);

        ND2_ADAPTER_INFO info = {ND_VERSION_2};
        ULONG len = sizeof(info);
        hr = m_pAdapter->Query(&info, &len);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2Adapter::Query", hr);
        m_Info = info;
        if ((m_Info.AdapterFlags & ND_ADAPTER_FLAG_IN_ORDER_DMA_SUPPORTED) == 0)
            LOG(L"adapter %I64x does not place data in order", m_Info.AdapterId);
    }

    HRESULT Wait(IND2Overlapped *pObj, HRESULT hr)
    {
        if (hr == ND_PENDING)
            hr = pObj->GetOverlappedResult(&m_Ov, TRUE);
        return hr;
    }

    void CreateCq(DWORD depth)
    {
        HRESULT hr = m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hAdapterFile,
                                                       depth, 0, 0,
                                                       reinterpret_cast<void **>(&m_pCq));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"CreateCompletionQueue", hr);
    }

    void RegisterDataBuffer(DWORD len, ULONG flags)
    {
        m_pBuf = static_cast<char *>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, len));
        HRESULT hr = m_pAdapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_hAdapterFile,
                                                    reinterpret_cast<void **>(&m_pMr));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"CreateMemoryRegion", hr);
        hr = Wait(m_pMr, m_pMr->Register(m_pBuf, len, flags, &m_Ov));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2MemoryRegion::Register", hr);
    }

    void CreateQp(DWORD depth, DWORD nSge, DWORD inlineThreshold)
    {
        HRESULT hr = m_pAdapter->CreateQueuePair(IID_IND2QueuePair, m_pCq, m_pCq, this, depth,
                                                 depth, nSge, nSge, inlineThreshold,
                                                 reinterpret_cast<void **>(&m_pQp));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"CreateQueuePair", hr);
    }

    void PostReceive(const ND2_SGE *sge, DWORD nSge, void *ctx)
    {
        HRESULT hr = m_pQp->Receive(ctx, sge, nSge);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2QueuePair::Receive", hr);
    }

    void Send(const ND2_SGE *sge, DWORD nSge, ULONG flags, void *ctx)
    {
        if (sge != nullptr && sge[0].BufferLength < m_Info.InlineRequestThreshold)
            flags |= ND_OP_FLAG_INLINE;
        HRESULT hr = m_pQp->Send(ctx, sge, nSge, flags);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2QueuePair::Send", hr);
    }

    void Write(const ND2_SGE *sge, DWORD nSge, UINT64 remoteAddress, UINT32 remoteToken, void *ctx)
    {
        HRESULT hr = m_pQp->Write(ctx, sge, nSge, remoteAddress, remoteToken, 0);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2QueuePair::Write", hr);
    }

    void Bind(void *ctx)
    {
        HRESULT hr = m_pAdapter->CreateMemoryWindow(IID_IND2MemoryWindow,
                                                    reinterpret_cast<void **>(&m_pMw));
        if (SUCCEEDED(hr))
            hr = m_pQp->Bind(ctx, m_pMr, m_pMw, m_pBuf, x_HdrLen,
                             ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2QueuePair::Bind", hr);
    }

    ULONG PollCq(ND2_RESULT *pResult)
    {
        ND2_RESULT results[8];
        ULONG n = m_pCq->GetResults(results, _countof(results));
        for (ULONG i = 0; i < n; i++) {
            if (results[i].Status != ND_SUCCESS && results[i].Status != ND_CANCELED)
                FAIL_AND_EXIT(L"request", results[i].Status);
            if (results[i].RequestType == Nd2RequestTypeReceive)
                *pResult = results[i];
        }
        return n;
    }

    void WaitForCompletion()
    {
        HRESULT hr = Wait(m_pCq, m_pCq->Notify(ND_CQ_NOTIFY_ANY, &m_Ov));
        if (FAILED(hr) && hr != ND_CANCELED)
            FAIL_AND_EXIT(L"IND2CompletionQueue::Notify", hr);
    }

    void Connect(const struct sockaddr_in &src, const struct sockaddr_in &dst, DWORD depth)
    {
        HRESULT hr = m_pAdapter->CreateConnector(IID_IND2Connector, m_hAdapterFile,
                                                 reinterpret_cast<void **>(&m_pConnector));
        if (SUCCEEDED(hr))
            hr = m_pConnector->Bind(reinterpret_cast<const struct sockaddr *>(&src), sizeof(src));
        if (SUCCEEDED(hr))
            hr = Wait(m_pConnector,
                      m_pConnector->Connect(m_pQp, reinterpret_cast<const struct sockaddr *>(&dst),
                                            sizeof(dst), 0, 0, &depth, sizeof(depth), &m_Ov));
        if (SUCCEEDED(hr))
            hr = Wait(m_pConnector, m_pConnector->CompleteConnect(&m_Ov));
        if (hr == ND_TIMEOUT || hr == ND_CONNECTION_REFUSED || hr == STATUS_CONNECTION_REFUSED)
            LOG(L"connect: %s", L"peer not ready");
        else if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2Connector::Connect", hr);
    }

    void Listen(const struct sockaddr_in &addr)
    {
        HRESULT hr = m_pAdapter->CreateListener(IID_IND2Listener, m_hAdapterFile,
                                                reinterpret_cast<void **>(&m_pListen));
        if (SUCCEEDED(hr))
            hr = m_pListen->Bind(reinterpret_cast<const struct sockaddr *>(&addr), sizeof(addr));
        if (SUCCEEDED(hr))
            hr = m_pListen->Listen(0);
        if (SUCCEEDED(hr))
            hr = m_pAdapter->CreateConnector(IID_IND2Connector, m_hAdapterFile,
                                             reinterpret_cast<void **>(&m_pConnector));
        if (SUCCEEDED(hr))
            hr = Wait(m_pListen, m_pListen->GetConnectionRequest(m_pConnector, &m_Ov));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2Listener", hr);

        ULONG depth = 0, cb = sizeof(depth), inbound = 0, outbound = 0;
        hr = m_pConnector->GetPrivateData(&depth, &cb);
        if (FAILED(hr) && hr != ND_BUFFER_OVERFLOW)
            FAIL_AND_EXIT(L"GetPrivateData", hr);
        m_pConnector->GetReadLimits(&inbound, &outbound);
        hr = Wait(m_pConnector, m_pConnector->Accept(m_pQp, inbound, outbound, nullptr, 0, &m_Ov));
        if (FAILED(hr))
            FAIL_AND_EXIT(L"IND2Connector::Accept", hr);
    }

    void Shutdown()
    {
        if (m_pConnector != nullptr) {
            Wait(m_pConnector, m_pConnector->Disconnect(&m_Ov));
            m_pConnector->Release();
            m_pConnector = nullptr;
        }
        if (m_pMr != nullptr) {
            Wait(m_pMr, m_pMr->Deregister(&m_Ov));
            m_pMr->Release();
            m_pMr = nullptr;
        }
        auto release = [](IUnknown *&p) {
            if (p != nullptr) {
                p->Release();
                p = nullptr;
            }
        };
        IUnknown *objs[] = {m_pMw, m_pCq, m_pQp, m_pListen};
        std::for_each(std::begin(objs), std::end(objs), release);
        m_pMw = nullptr;
        m_pCq = nullptr;
        m_pQp = nullptr;
        m_pListen = nullptr;
        if (m_hAdapterFile != nullptr)
            CloseHandle(m_hAdapterFile);
        if (m_Ov.hEvent != nullptr)
            CloseHandle(m_Ov.hEvent);
        if (m_pAdapter != nullptr)
            m_pAdapter->Release();
        if (m_pBuf != nullptr)
            HeapFree(GetProcessHeap(), 0, m_pBuf);
        m_hAdapterFile = m_Ov.hEvent = nullptr;
        m_pAdapter = nullptr;
        m_pBuf = nullptr;
    }
};

/* ---- a connection test driven by an I/O completion port ---- */

struct IoOp {
    OVERLAPPED m_Ov;
    std::function<void(IoOp *, HRESULT)> m_Done;
    IND2Overlapped *m_pObj;
};

struct DerivedOv : public OVERLAPPED {
    int m_Id;
};

class IocpTest : public NdTestBase {
public:
    IocpTest() : m_hIocp(nullptr), m_nQpCreated(0), m_nDone(0) {}

    void Start(const struct sockaddr_in &src, DWORD nThreads)
    {
        Init(src);
        m_hIocp = CreateIoCompletionPort(INVALID_HANDLE_VALUE, nullptr, 0, 0);
        if (CreateIoCompletionPort(m_hAdapterFile, m_hIocp, reinterpret_cast<ULONG_PTR>(this),
                                   0) == nullptr)
            FAIL_AND_EXIT(L"CreateIoCompletionPort", GetLastError());
        SetFileCompletionNotificationModes(m_hAdapterFile, FILE_SKIP_COMPLETION_PORT_ON_SUCCESS |
                                                               FILE_SKIP_SET_EVENT_ON_HANDLE);
        CreateCq(m_Info.MaxCompletionQueueDepth);
        for (DWORD i = 0; i < nThreads; i++) {
            HANDLE h = CreateThread(nullptr, 0, WorkerThread, this, 0, nullptr);
            if (h == nullptr)
                FAIL_AND_EXIT(L"CreateThread", GetLastError());
            m_Threads.push_back(h);
        }
        IoOp *op = new (std::nothrow) IoOp();
        if (op == nullptr)
            FAIL_AND_EXIT(L"new", E_OUTOFMEMORY);
        op->m_pObj = m_pCq;
        op->m_Done = [this](IoOp *done, HRESULT hr) {
            if (hr == ND_SUCCESS)
                InterlockedIncrement(&m_nDone);
            delete done;
        };
        RtlZeroMemory(&op->m_Ov, sizeof(op->m_Ov));
        HRESULT hr = m_pCq->Notify(ND_CQ_NOTIFY_ANY, &op->m_Ov);
        if (hr != ND_PENDING && FAILED(hr))
            FAIL_AND_EXIT(L"Notify", hr);
        InterlockedIncrement(&m_nQpCreated);
    }

    void Stop()
    {
        for (size_t i = 0; i < m_Threads.size(); i++)
            PostQueuedCompletionStatus(m_hIocp, 0, 0, nullptr);
        for (HANDLE h : m_Threads) {
            if (WaitForSingleObject(h, INFINITE) != WAIT_OBJECT_0)
                LOG(L"wait failed: %u", GetLastError());
            DWORD code = 0;
            GetExitCodeThread(h, &code);
            CloseHandle(h);
        }
        CloseHandle(m_hIocp);
    }

private:
    static DWORD WINAPI WorkerThread(LPVOID param)
    {
        IocpTest *self = static_cast<IocpTest *>(param);
        for (;;) {
            DWORD bytes = 0;
            ULONG_PTR key = 0;
            OVERLAPPED *pOv = nullptr;
            BOOL ok = GetQueuedCompletionStatus(self->m_hIocp, &bytes, &key, &pOv, 1000);
            if (pOv == nullptr) {
                if (GetLastError() == WAIT_TIMEOUT)
                    continue;
                break; /* the exit packet */
            }
            IoOp *op = CONTAINING_RECORD(pOv, IoOp, m_Ov);
            HRESULT hr = op->m_pObj->GetOverlappedResult(pOv, FALSE);
            if (!ok && GetLastError() != ERROR_OPERATION_ABORTED)
                LOG(L"completion failed: %u", GetLastError());
            op->m_Done(op, hr);
        }
        return 0;
    }

    HANDLE m_hIocp;
    std::vector<HANDLE> m_Threads;
    volatile long m_nQpCreated;
    volatile LONG m_nDone;
};

/* ---- addresses ---- */

static void PrintAddressList()
{
    SIZE_T size = 0;
    HRESULT hr = NdQueryAddressList(0, nullptr, &size);
    if (hr != ND_BUFFER_OVERFLOW || size == 0)
        return;
    SOCKET_ADDRESS_LIST *pList =
        static_cast<SOCKET_ADDRESS_LIST *>(HeapAlloc(GetProcessHeap(), 0, size));
    hr = NdQueryAddressList(0, pList, &size);
    for (INT i = 0; SUCCEEDED(hr) && i < pList->iAddressCount; i++) {
        char text[INET6_ADDRSTRLEN];
        const SOCKADDR_IN *sin = reinterpret_cast<const SOCKADDR_IN *>(pList->Address[i].lpSockaddr);
        InetNtopA(AF_INET, &sin->sin_addr, text, sizeof(text));
        printf("address %d: %s (%d bytes)\n", i, text, pList->Address[i].iSockaddrLength);
    }
    HeapFree(GetProcessHeap(), 0, pList);
}

static void ShowUsage()
{
    wprintf(L"windows_style [options] <ip>[:<port>]\n");
    wprintf(L"  -s: server, -c: client, -n <nSge>, -l <log>, -p/-b polling/blocking\n");
}

int __cdecl _tmain(int argc, TCHAR *argv[])
{
    bool bServer = false, bClient = false, bBlocking = false;
    DWORD nSge = 1;
    WSADATA wsaData;

    if (::WSAStartup(MAKEWORD(2, 2), &wsaData) != 0)
        exit(__LINE__);
    for (int i = 1; i < argc; i++) {
        TCHAR *arg = argv[i];
        if ((wcscmp(arg, L"-s") == 0) || (wcscmp(arg, L"-S") == 0))
            bServer = true;
        else if (_tcsicmp(arg, _T("-c")) == 0)
            bClient = true;
        else if (wcscmp(arg, L"-b") == 0)
            bBlocking = true;
        else if (wcscmp(arg, L"-n") == 0 && i + 1 < argc)
            nSge = static_cast<DWORD>(_ttol(argv[++i]));
        else if (wcscmp(arg, L"-l") == 0 && i + 1 < argc)
            _tfreopen(argv[++i], _T("w"), stdout);
        else if (wcscmp(arg, L"-h") == 0) {
            ShowUsage();
            exit(0);
        }
    }
    if (bServer == bClient || argc < 2) {
        ShowUsage();
        exit(__LINE__);
    }

    struct sockaddr_in v4Server = {0};
    int len = sizeof(v4Server);
    int ret = WSAStringToAddress(argv[argc - 1], AF_INET, nullptr,
                                 reinterpret_cast<struct sockaddr *>(&v4Server), &len);
    if (ret != 0 || v4Server.sin_addr.s_addr == 0) {
        wprintf(L"Bad address: %s\n", argv[argc - 1]);
        exit(__LINE__);
    }
    if (v4Server.sin_port == 0)
        v4Server.sin_port = htons(x_DefaultPort);

    HRESULT hr = NdStartup();
    if (FAILED(hr))
        FAIL_AND_EXIT(L"NdStartup", hr);
    wprintf(L"Beginning test: %s\n", argv[0]);
    PrintAddressList();

    CpuMonitor cpu;
    Timer timer;
    printf("Using %u processors. Sender Frequency is %lld\n", cpu.Processors(), 0LL);
    std::map<std::wstring, DWORD> sizes;
    sizes[L"max"] = static_cast<DWORD>(min(x_MaxXfer, static_cast<SIZE_T>(x_MaxIterations)));
    std::unique_ptr<IocpTest> test(new (std::nothrow) IocpTest());

    if (bServer) {
        test->Start(v4Server, 2);
        test->Stop();
    } else {
        struct sockaddr_in v4Src;
        SIZE_T cbSrc = sizeof(v4Src);
        hr = NdResolveAddress(reinterpret_cast<const struct sockaddr *>(&v4Server), sizeof(v4Server),
                              reinterpret_cast<struct sockaddr *>(&v4Src), &cbSrc);
        if (FAILED(hr))
            FAIL_AND_EXIT(L"NdResolveAddress", hr);
        timer.Start();
        cpu.Start();
        test->Start(v4Src, bBlocking ? 1 : 2);
        timer.End();
        printf("%9u %9.2f %7.2f\n", nSge, timer.Report(), cpu.Report());
        test->Stop();
    }

    DerivedOv dov;
    RtlZeroMemory(&dov, sizeof(dov));
    dov.hEvent = reinterpret_cast<HANDLE>(reinterpret_cast<ULONG_PTR>(CreateEvent(nullptr, TRUE, FALSE, nullptr)) | 1);
    if (!HasOverlappedIoCompleted(&dov))
        Sleep(0);
    CloseHandle(dov.hEvent);
    YieldProcessor();

    void *aligned = _aligned_malloc(4096, 64);
    _aligned_free(aligned);

    hr = NdCleanup();
    wprintf(L"End of test: %s\n", argv[0]);
    _fcloseall();
    WSACleanup();
    return FAILED(hr) ? 1 : 0;
}
