//
// ndabi.cpp - NetworkDirect v2 ABI coverage test.
//
// One process, one thread: a listener and a connector of the same adapter
// connect to each other over loopback (the address given on the command
// line, e.g. 127.0.0.1 or ::1).  Every method of every ND v2 interface that
// an application can reach, and every ndsupport.h helper, is called at least
// once, including NULL-pointer, short-buffer and out-of-range cases, and the
// status of each call is checked exactly against Microsoft's NetworkDirect
// documentation (the IND2Adapter, IND2CompletionQueue,
// IND2SharedReceiveQueue, IND2MemoryRegion, IND2MemoryWindow,
// IND2QueuePair, IND2Connector, IND2Listener and IND2Overlapped pages) and
// docs/PORTING.md.  Where the documentation leaves a status open, the
// comment at the check says which status is expected and why.
//
// IND2Provider is not reachable through the ndsupport.h helpers
// (NdOpenAdapter hides the provider object), so it is not covered.
//
// Output: one line per check (PASS/FAIL), then the list of methods covered
// (one `Interface::Method` per line) and `N passed, M failed`.  Exit code 0
// when nothing failed, 1 otherwise, 2 for a usage error.  Every wait is
// bounded (x_TimeoutMs).
//

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <tchar.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <malloc.h> // _aligned_malloc
#include "ndsupport.h"
#include "ndexample.h"

static const DWORD x_TimeoutMs = ND_EXAMPLE_TIMEOUT_MS;
static const ULONG x_BufSize = 4096;
static const ULONG x_Depth = 8;
// STATUS_ADDRESS_ALREADY_ASSOCIATED (ntstatus.h): a second Bind of a listener.
static const HRESULT x_AddressAlreadyAssociated = (HRESULT)0xC0000238;
// An operation flag that is only valid for IND2QueuePair::Bind.
static const ULONG x_BindOnlyFlag = ND_OP_FLAG_ALLOW_WRITE;

// ---------------------------------------------------------------------------
// Bookkeeping
// ---------------------------------------------------------------------------

static ULONG g_Passed = 0;
static ULONG g_Failed = 0;
static const char* g_Covered[160];
static ULONG g_nCovered = 0;

// The provider module entry point: libnetdirect exports it, as an ND provider DLL does.
extern "C" HRESULT DllGetClassObject(REFCLSID clsid, REFIID iid, void** pp);

static void Cover(const char* method)
{
    for (ULONG i = 0; i < g_nCovered; i++) {
        if (strcmp(g_Covered[i], method) == 0)
            return;
    }
    if (g_nCovered < sizeof(g_Covered) / sizeof(g_Covered[0]))
        g_Covered[g_nCovered++] = method;
}

static bool CheckTrue(const char* method, const char* what, bool ok)
{
    Cover(method);
    if (ok) {
        g_Passed++;
        printf("PASS  %s: %s\n", method, what);
    } else {
        g_Failed++;
        printf("FAIL  %s: %s\n", method, what);
    }
    fflush(stdout);
    return ok;
}

static bool Check(const char* method, const char* what, HRESULT got, HRESULT expected)
{
    Cover(method);
    if (got == expected) {
        g_Passed++;
        printf("PASS  %s: %s -> 0x%08X\n", method, what, (unsigned)got);
    } else {
        g_Failed++;
        printf("FAIL  %s: %s -> 0x%08X, expected 0x%08X\n", method, what, (unsigned)got,
               (unsigned)expected);
    }
    fflush(stdout);
    return got == expected;
}

static void Summary()
{
    printf("\nMethods covered:\n");
    for (ULONG i = 0; i < g_nCovered; i++)
        printf("%s\n", g_Covered[i]);
    printf("\n%u passed, %u failed\n", g_Passed, g_Failed);
    fflush(stdout);
}

// A step the rest depends on failed: report and stop.  `counted` says
// whether the failure was already counted by a FAIL line.
static void Abort(const char* why, bool counted = false)
{
    printf("ABORT %s\n", why);
    if (!counted)
        g_Failed++;
    Summary();
    exit(1);
}

static void Require(const char* method, const char* what, HRESULT got, HRESULT expected)
{
    if (!Check(method, what, got, expected))
        Abort(method, true);
}

// An OVERLAPPED with its own manual-reset event.
struct Ov : public OVERLAPPED
{
    Ov()
    {
        ZeroMemory(static_cast<OVERLAPPED*>(this), sizeof(OVERLAPPED));
        hEvent = CreateEvent(NULL, TRUE, FALSE, NULL);
        if (hEvent == NULL)
            Abort("CreateEvent");
    }
    ~Ov() { CloseHandle(hEvent); }
    OVERLAPPED* Start()
    {
        ResetEvent(hEvent);
        return this;
    }
};

// The IND2Overlapped methods are listed under the interface they were
// called on.
static const char* GorName(IND2CompletionQueue*) { return "IND2CompletionQueue::GetOverlappedResult"; }
static const char* GorName(IND2SharedReceiveQueue*) { return "IND2SharedReceiveQueue::GetOverlappedResult"; }
static const char* GorName(IND2MemoryRegion*) { return "IND2MemoryRegion::GetOverlappedResult"; }
static const char* GorName(IND2Connector*) { return "IND2Connector::GetOverlappedResult"; }
static const char* GorName(IND2Listener*) { return "IND2Listener::GetOverlappedResult"; }

// Finishes an overlapped request: ND_SUCCESS is final (no completion is
// delivered); ND_PENDING waits (bounded) for the event and then asks the
// object for the final status, as IND2Overlapped::GetOverlappedResult
// requires.
template <class T>
static HRESULT Wait(T* pObj, Ov& ov, HRESULT hr, const char* method)
{
    while (hr == ND_PENDING) {
        Cover(GorName(pObj));
        if (WaitForSingleObject(ov.hEvent, x_TimeoutMs) != WAIT_OBJECT_0) {
            printf("FAIL  %s: no completion within %u ms\n", method, (unsigned)x_TimeoutMs);
            Abort(method);
        }
        hr = pObj->GetOverlappedResult(&ov, TRUE);
    }
    return hr;
}

// Polls a CQ (bounded) for one completion.
static bool Poll(IND2CompletionQueue* pCq, ND2_RESULT* pResult, const char* what)
{
    Cover("IND2CompletionQueue::GetResults");
    ULONGLONG deadline = GetTickCount64() + x_TimeoutMs;
    ULONG spins = 0;
    while (pCq->GetResults(pResult, 1) != 1) {
        if ((++spins & 0xFF) == 0 && GetTickCount64() > deadline) {
            printf("FAIL  IND2CompletionQueue::GetResults: no completion for %s within %u ms\n",
                   what, (unsigned)x_TimeoutMs);
            g_Failed++;
            return false;
        }
        SwitchToThread();
    }
    return true;
}

// Polls for one completion and checks its type, context and status.
static bool Expect(IND2CompletionQueue* pCq, ND2_REQUEST_TYPE type, void* qpCtx, void* reqCtx,
                   HRESULT status, const char* method, const char* what)
{
    ND2_RESULT r;
    if (!Poll(pCq, &r, what))
        return false;
    if (r.RequestType != type || r.QueuePairContext != qpCtx || r.RequestContext != reqCtx) {
        printf("FAIL  %s: %s: completion type %d qp %p req %p, expected type %d qp %p req %p\n",
               method, what, (int)r.RequestType, r.QueuePairContext, r.RequestContext, (int)type,
               qpCtx, reqCtx);
        g_Failed++;
        return false;
    }
    return Check(method, what, r.Status, status);
}

static USHORT PortOf(const SOCKADDR_INET& a)
{
    return ntohs(a.si_family == AF_INET6 ? a.Ipv6.sin6_port : a.Ipv4.sin_port);
}

static bool SameIp(const sockaddr* a, const sockaddr* b)
{
    if (a->sa_family != b->sa_family)
        return false;
    if (a->sa_family == AF_INET)
        return reinterpret_cast<const SOCKADDR_IN*>(a)->sin_addr.s_addr ==
               reinterpret_cast<const SOCKADDR_IN*>(b)->sin_addr.s_addr;
    return memcmp(&reinterpret_cast<const SOCKADDR_IN6*>(a)->sin6_addr,
                  &reinterpret_cast<const SOCKADDR_IN6*>(b)->sin6_addr, sizeof(IN6_ADDR)) == 0;
}

static bool ListHas(const SOCKET_ADDRESS_LIST* pList, const sockaddr* pAddr)
{
    for (INT i = 0; i < pList->iAddressCount; i++) {
        if (SameIp(pList->Address[i].lpSockaddr, pAddr))
            return true;
    }
    return false;
}

// Checks IUnknown on an object: QueryInterface of IID_IUnknown, of its own
// and base IIDs (S_OK), of an unrelated IID (E_NOINTERFACE with *ppv NULL),
// and that AddRef/Release move the count by one.
static void CheckUnknown(IUnknown* pObj, const char* name, REFIID own, const IID* pBase,
                         REFIID unrelated)
{
    char what[128];
    void* p = NULL;
    HRESULT hr = pObj->QueryInterface(IID_IUnknown, &p);
    snprintf(what, sizeof(what), "%s QueryInterface(IID_IUnknown)", name);
    if (Check("IUnknown::QueryInterface", what, hr, S_OK) && p != NULL)
        static_cast<IUnknown*>(p)->Release();

    p = NULL;
    hr = pObj->QueryInterface(own, &p);
    snprintf(what, sizeof(what), "%s QueryInterface(own IID)", name);
    if (Check("IUnknown::QueryInterface", what, hr, S_OK) && p != NULL)
        static_cast<IUnknown*>(p)->Release();

    if (pBase != NULL) {
        p = NULL;
        hr = pObj->QueryInterface(*pBase, &p);
        snprintf(what, sizeof(what), "%s QueryInterface(IID_IND2Overlapped)", name);
        if (Check("IUnknown::QueryInterface", what, hr, S_OK) && p != NULL)
            static_cast<IUnknown*>(p)->Release();
    }

    p = reinterpret_cast<void*>(1);
    hr = pObj->QueryInterface(unrelated, &p);
    snprintf(what, sizeof(what), "%s QueryInterface(unrelated IID)", name);
    Check("IUnknown::QueryInterface", what, hr, E_NOINTERFACE);
    snprintf(what, sizeof(what), "%s QueryInterface(unrelated IID) sets *ppv to NULL", name);
    CheckTrue("IUnknown::QueryInterface", what, p == NULL);

    ULONG up = pObj->AddRef();
    ULONG down = pObj->Release();
    snprintf(what, sizeof(what), "%s AddRef() = %u, Release() = %u", name, up, down);
    CheckTrue("IUnknown::AddRef", what, up >= 2 && down == up - 1);
    Cover("IUnknown::Release");
}

// Releases an object the application holds the last reference to.  For
// connectors and listeners the count must reach 0 (the NetworkDirect rule that
// internal references are not visible to the application); for the others it
// is printed only.
static void ReleaseLast(IUnknown* pObj, const char* name, bool strict)
{
    ULONG refs = pObj->Release();
    char what[128];
    snprintf(what, sizeof(what), "%s Release() = %u", name, refs);
    if (strict)
        CheckTrue("IUnknown::Release", what, refs == 0);
    else
        printf("INFO  IUnknown::Release: %s\n", what);
}

static void ShowUsage()
{
    printf("ndabi [-h] <ip>\n"
           "\tCalls every ND v2 method and ndsupport.h helper over a loopback\n"
           "\tconnection on <ip> (IPv4 a.b.c.d or IPv6 addr / [addr]; any port\n"
           "\tis ignored: the listener binds port 0) and checks each status.\n"
           "\tExit code: 0 all passed, 1 some failed, 2 usage.\n");
}

// ---------------------------------------------------------------------------
// The test
// ---------------------------------------------------------------------------

class AbiTest
{
    SOCKADDR_INET m_Addr; // the IP under test, port 0
    ULONG m_cbAddr;
    IND2Adapter* m_pAdapter;
    HANDLE m_hFile;
    ND2_ADAPTER_INFO m_Info;

    // Client side (A), server side (B), and an unconnected QP (F).
    IND2CompletionQueue* m_pCqA;
    IND2CompletionQueue* m_pCqB;
    IND2CompletionQueue* m_pCqF;
    IND2QueuePair* m_pQpA;
    IND2QueuePair* m_pQpB;
    IND2QueuePair* m_pQpF;
    IND2MemoryRegion* m_pMrA;
    IND2MemoryRegion* m_pMrB;
    IND2MemoryWindow* m_pMwB;
    IND2Listener* m_pListener;
    IND2Connector* m_pConnA;
    IND2Connector* m_pConnB;
    char* m_pBufA;
    char* m_pBufB;
    SOCKADDR_INET m_ListenAddr;
    int m_CtxA, m_CtxB, m_CtxF; // QueuePairContext targets

public:
    AbiTest(const SOCKADDR_INET& addr, ULONG cbAddr)
        : m_Addr(addr), m_cbAddr(cbAddr), m_pAdapter(NULL), m_hFile(NULL), m_pCqA(NULL),
          m_pCqB(NULL), m_pCqF(NULL), m_pQpA(NULL), m_pQpB(NULL), m_pQpF(NULL), m_pMrA(NULL),
          m_pMrB(NULL), m_pMwB(NULL), m_pListener(NULL), m_pConnA(NULL), m_pConnB(NULL),
          m_pBufA(NULL), m_pBufB(NULL), m_CtxA(0), m_CtxB(0), m_CtxF(0)
    {
        ZeroMemory(&m_Info, sizeof(m_Info));
        ZeroMemory(&m_ListenAddr, sizeof(m_ListenAddr));
        if (m_Addr.si_family == AF_INET6)
            m_Addr.Ipv6.sin6_port = 0;
        else
            m_Addr.Ipv4.sin_port = 0;
    }

    const sockaddr* Addr() const { return reinterpret_cast<const sockaddr*>(&m_Addr); }

    // ---- ndsupport.h before NdStartup ------------------------------------
    void HelpersBeforeStartup()
    {
        Check("NdCleanup", "before NdStartup", NdCleanup(), ND_DEVICE_NOT_READY);
        SIZE_T cb = 0;
        Check("NdQueryAddressList", "before NdStartup", NdQueryAddressList(0, NULL, &cb),
              ND_DEVICE_NOT_READY);
        Check("NdCheckAddress", "before NdStartup", NdCheckAddress(Addr(), m_cbAddr),
              ND_DEVICE_NOT_READY);
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        Check("NdResolveAddress", "before NdStartup",
              NdResolveAddress(Addr(), m_cbAddr, reinterpret_cast<sockaddr*>(&local), &cbLocal),
              ND_DEVICE_NOT_READY);
        void* p = NULL;
        Check("NdOpenAdapter", "before NdStartup", NdOpenAdapter(IID_IND2Adapter, Addr(),
              m_cbAddr, &p), ND_DEVICE_NOT_READY);
        // No-op when not started.
        NdFlushProviders();
        Cover("NdFlushProviders");
    }

    // ---- ndsupport.h ------------------------------------------------------
    void Helpers()
    {
        Require("NdStartup", "first call", NdStartup(), S_OK);
        // Reference-counted: a second start and one cleanup leave it started.
        Check("NdStartup", "second call", NdStartup(), S_OK);
        Check("NdCleanup", "drops the second reference", NdCleanup(), S_OK);

        // Size query, then the list.
        SIZE_T cb = 0;
        Check("NdQueryAddressList", "NULL list, size 0", NdQueryAddressList(0, NULL, &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("NdQueryAddressList", "size query reports a non-zero size", cb > 0);
        SIZE_T cbNeeded = cb;
        SOCKET_ADDRESS_LIST* pList =
            static_cast<SOCKET_ADDRESS_LIST*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, cbNeeded + 64));
        if (pList == NULL)
            Abort("HeapAlloc");
        cb = cbNeeded - 1;
        Check("NdQueryAddressList", "buffer one byte short", NdQueryAddressList(0, pList, &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("NdQueryAddressList", "short buffer: required size written back", cb == cbNeeded);
        cb = cbNeeded;
        if (Check("NdQueryAddressList", "exact buffer", NdQueryAddressList(0, pList, &cb), S_OK))
            CheckTrue("NdQueryAddressList", "the list holds the address under test",
                      pList->iAddressCount >= 1 && ListHas(pList, Addr()));

        // ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES is accepted and ignored (ndutil).
        cb = 0;
        Check("NdQueryAddressList", "EXCLUDE_EMULATOR size query",
              NdQueryAddressList(ND_QUERY_EXCLUDE_EMULATOR_ADDRESSES, NULL, &cb), ND_BUFFER_OVERFLOW);
        CheckTrue("NdQueryAddressList", "EXCLUDE_EMULATOR is ignored: same size", cb == cbNeeded);

        // Excluding the v1 list keeps every v2 address.
        cb = 0;
        Check("NdQueryAddressList", "EXCLUDE_NDv1 size query",
              NdQueryAddressList(ND_QUERY_EXCLUDE_NDv1_ADDRESSES, NULL, &cb), ND_BUFFER_OVERFLOW);
        SIZE_T cbV2 = cb;
        CheckTrue("NdQueryAddressList", "EXCLUDE_NDv1 size is non-zero", cbV2 > 0);

        // Excluding the v2 list leaves the v1 addresses: with none, ND_SUCCESS
        // and size 0 (ndutil's zero-address case).
        cb = 0;
        HRESULT hrV1 = NdQueryAddressList(ND_QUERY_EXCLUDE_NDv2_ADDRESSES, NULL, &cb);
        bool haveV1 = (hrV1 == ND_BUFFER_OVERFLOW && cb > 0);
        if (!haveV1) {
            Check("NdQueryAddressList", "EXCLUDE_NDv2 with no v1 provider", hrV1, ND_SUCCESS);
            CheckTrue("NdQueryAddressList", "EXCLUDE_NDv2 with no v1 provider: size 0", cb == 0);
        } else {
            Check("NdQueryAddressList", "EXCLUDE_NDv2 (v1 providers present)", hrV1,
                  ND_BUFFER_OVERFLOW);
        }
        HeapFree(GetProcessHeap(), 0, pList);

        // NdCheckAddress.
        Check("NdCheckAddress", "address under test", NdCheckAddress(Addr(), m_cbAddr), S_OK);
        Check("NdCheckAddress", "length 8 (shorter than a sockaddr)", NdCheckAddress(Addr(), 8),
              ND_INVALID_PARAMETER_2);
        if (m_Addr.si_family == AF_INET6)
            Check("NdCheckAddress", "AF_INET6 with the AF_INET length",
                  NdCheckAddress(Addr(), sizeof(SOCKADDR_IN)), ND_INVALID_PARAMETER_2);
        SOCKADDR_INET odd;
        ZeroMemory(&odd, sizeof(odd));
        odd.si_family = AF_UNIX;
        Check("NdCheckAddress", "unknown address family",
              NdCheckAddress(reinterpret_cast<sockaddr*>(&odd), sizeof(odd)), ND_INVALID_ADDRESS);
        SOCKADDR_INET foreign;
        ZeroMemory(&foreign, sizeof(foreign));
        foreign.Ipv4.sin_family = AF_INET;
        foreign.Ipv4.sin_addr.s_addr = htonl(0xC0000201); // 192.0.2.1 (TEST-NET-1)
        Check("NdCheckAddress", "an address no provider serves",
              NdCheckAddress(reinterpret_cast<sockaddr*>(&foreign), sizeof(SOCKADDR_IN)),
              ND_INVALID_ADDRESS);

        // NdResolveAddress: the local source address for the target.
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        ZeroMemory(&local, sizeof(local));
        if (Check("NdResolveAddress", "address under test",
                  NdResolveAddress(Addr(), m_cbAddr, reinterpret_cast<sockaddr*>(&local), &cbLocal),
                  S_OK))
            CheckTrue("NdResolveAddress", "same family and an address providers serve",
                      local.si_family == m_Addr.si_family &&
                      NdCheckAddress(reinterpret_cast<sockaddr*>(&local), cbLocal) == S_OK);
        cbLocal = 4;
        Check("NdResolveAddress", "4-byte result buffer",
              NdResolveAddress(Addr(), m_cbAddr, reinterpret_cast<sockaddr*>(&local), &cbLocal),
              ND_BUFFER_OVERFLOW);

        // NdOpenAdapter.
        void* p = NULL;
        // A v2 provider supports IID_IND2Adapter only; other IIDs are
        // refused as by QueryInterface (E_NOINTERFACE), as ndutil reports a
        // provider's refusal.
        Check("NdOpenAdapter", "IID_IND2CompletionQueue",
              NdOpenAdapter(IID_IND2CompletionQueue, Addr(), m_cbAddr, &p), E_NOINTERFACE);
        Check("NdOpenAdapter", "an address no provider serves",
              NdOpenAdapter(IID_IND2Adapter, reinterpret_cast<sockaddr*>(&foreign),
                            sizeof(SOCKADDR_IN), &p), ND_INVALID_ADDRESS);
        Require("NdOpenAdapter", "IID_IND2Adapter",
                NdOpenAdapter(IID_IND2Adapter, Addr(), m_cbAddr, reinterpret_cast<void**>(&m_pAdapter)),
                S_OK);

        // NdOpenV1Adapter searches the v1 address list only.
        INDAdapter* pV1 = NULL;
        HRESULT hr = NdOpenV1Adapter(Addr(), m_cbAddr, &pV1);
        if (!haveV1) {
            Check("NdOpenV1Adapter", "no v1 provider serves the address", hr, ND_INVALID_ADDRESS);
        } else if (SUCCEEDED(hr)) {
            Check("NdOpenV1Adapter", "v1 provider", hr, S_OK);
            pV1->Release();
        } else {
            // v1 providers exist but may not serve this IP.
            Check("NdOpenV1Adapter", "v1 providers do not serve the address", hr, ND_INVALID_ADDRESS);
        }
        NdFlushProviders();
        Provider();
    }

    // ---- IND2Provider -----------------------------------------------------
    // Reached as Microsoft's helper library reaches a provider module: its exported
    // DllGetClassObject, asked for IID_IND2Provider (libnetdirect is such a module).
    void Provider()
    {
        IND2Provider* pProv = NULL;
        if (!Check("DllGetClassObject", "IID_IND2Provider",
                   DllGetClassObject(IID_IND2Provider, IID_IND2Provider,
                                     reinterpret_cast<void**>(&pProv)),
                   S_OK) ||
            pProv == NULL)
            return;
        ULONG cb = 0;
        Check("IND2Provider::QueryAddressList", "size query", pProv->QueryAddressList(NULL, &cb),
              ND_BUFFER_OVERFLOW);
        Check("IND2Provider::QueryAddressList", "NULL size", pProv->QueryAddressList(NULL, NULL),
              ND_INVALID_PARAMETER_2);
        SOCKET_ADDRESS_LIST* pList = static_cast<SOCKET_ADDRESS_LIST*>(malloc(cb));
        if (pList != NULL) {
            Check("IND2Provider::QueryAddressList", "full list", pProv->QueryAddressList(pList, &cb),
                  S_OK);
            CheckTrue("IND2Provider::QueryAddressList", "at least one address",
                      pList->iAddressCount >= 1);
            free(pList);
        }
        UINT64 id = 0;
        Check("IND2Provider::ResolveAddress", "the test address",
              pProv->ResolveAddress(Addr(), m_cbAddr, &id), S_OK);
        Check("IND2Provider::ResolveAddress", "a short address",
              pProv->ResolveAddress(Addr(), 8, &id), ND_INVALID_PARAMETER_2);
        Check("IND2Provider::ResolveAddress", "NULL adapter id",
              pProv->ResolveAddress(Addr(), m_cbAddr, NULL), ND_INVALID_PARAMETER_3);
        IND2Adapter* pA = NULL;
        Check("IND2Provider::OpenAdapter", "IID_IND2QueuePair",
              pProv->OpenAdapter(IID_IND2QueuePair, id, reinterpret_cast<void**>(&pA)),
              E_NOINTERFACE);
        if (Check("IND2Provider::OpenAdapter", "IID_IND2Adapter",
                  pProv->OpenAdapter(IID_IND2Adapter, id, reinterpret_cast<void**>(&pA)), S_OK) &&
            pA != NULL)
            CheckTrue("IUnknown::Release", "the provider's adapter's last Release",
                      pA->Release() == 0);
        CheckTrue("IUnknown::Release", "IND2Provider's last Release", pProv->Release() == 0);
    }

    // ---- IND2Adapter ------------------------------------------------------
    void Adapter()
    {
        CheckUnknown(m_pAdapter, "IND2Adapter", IID_IND2Adapter, NULL, IID_IND2QueuePair);
        void* p = NULL;
        m_pAdapter->QueryInterface(IID_IUnknown, &p);
        CheckTrue("IUnknown::QueryInterface", "IND2Adapter IID_IUnknown gives the same pointer",
                  p == static_cast<void*>(m_pAdapter));
        if (p != NULL)
            static_cast<IUnknown*>(p)->Release();

        Require("IND2Adapter::CreateOverlappedFile", "first file",
                m_pAdapter->CreateOverlappedFile(&m_hFile), S_OK);
        HANDLE h2 = NULL;
        if (Check("IND2Adapter::CreateOverlappedFile", "second file",
                  m_pAdapter->CreateOverlappedFile(&h2), S_OK))
            CheckTrue("IND2Adapter::CreateOverlappedFile", "a new handle per call",
                      h2 != NULL && h2 != m_hFile && CloseHandle(h2));

        // Query: size query, short, exact, larger.
        ULONG cb = 0;
        Check("IND2Adapter::Query", "NULL buffer, size 0", m_pAdapter->Query(NULL, &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Adapter::Query", "size query gives sizeof(ND2_ADAPTER_INFO)",
                  cb == sizeof(ND2_ADAPTER_INFO));
        ND2_ADAPTER_INFO info[2];
        ZeroMemory(info, sizeof(info));
        info[0].InfoVersion = ND_VERSION_2;
        cb = 16;
        Check("IND2Adapter::Query", "16-byte buffer", m_pAdapter->Query(&info[0], &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Adapter::Query", "short buffer: size written back, buffer unchanged",
                  cb == sizeof(ND2_ADAPTER_INFO) && info[0].VendorId == 0 && info[0].AdapterId == 0);
        cb = sizeof(info);
        Check("IND2Adapter::Query", "larger buffer", m_pAdapter->Query(&info[0], &cb), S_OK);
        CheckTrue("IND2Adapter::Query", "larger buffer: size set to the size used",
                  cb == sizeof(ND2_ADAPTER_INFO));
        m_Info.InfoVersion = ND_VERSION_2;
        cb = sizeof(m_Info);
        Require("IND2Adapter::Query", "exact buffer", m_pAdapter->Query(&m_Info, &cb), S_OK);
        CheckTrue("IND2Adapter::Query", "InlineRequestThreshold <= MaxInlineDataSize",
                  m_Info.InlineRequestThreshold <= m_Info.MaxInlineDataSize);
        if (m_Info.InlineRequestThreshold > m_Info.MaxInlineDataSize)
            m_Info.InlineRequestThreshold = m_Info.MaxInlineDataSize;
        CheckTrue("IND2Adapter::Query", "limits are usable",
                  m_Info.MaxCompletionQueueDepth >= x_Depth && m_Info.MaxReceiveQueueDepth >= x_Depth &&
                  m_Info.MaxInitiatorQueueDepth >= x_Depth && m_Info.MaxInitiatorSge >= 1 &&
                  m_Info.MaxReceiveSge >= 1 && m_Info.MaxReadSge <= m_Info.MaxInitiatorSge);

        // QueryAddressList: size query, short, exact.
        cb = 0;
        Check("IND2Adapter::QueryAddressList", "NULL buffer, size 0",
              m_pAdapter->QueryAddressList(NULL, &cb), ND_BUFFER_OVERFLOW);
        ULONG cbNeeded = cb;
        CheckTrue("IND2Adapter::QueryAddressList", "size query reports a non-zero size", cb > 0);
        SOCKET_ADDRESS_LIST* pList =
            static_cast<SOCKET_ADDRESS_LIST*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, cbNeeded + 64));
        if (pList == NULL)
            Abort("HeapAlloc");
        cb = cbNeeded - 1;
        Check("IND2Adapter::QueryAddressList", "buffer one byte short",
              m_pAdapter->QueryAddressList(pList, &cb), ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Adapter::QueryAddressList", "short buffer: required size written back",
                  cb == cbNeeded && pList->iAddressCount == 0);
        cb = cbNeeded + 64;
        if (Check("IND2Adapter::QueryAddressList", "larger buffer",
                  m_pAdapter->QueryAddressList(pList, &cb), S_OK))
            CheckTrue("IND2Adapter::QueryAddressList",
                      "size set to the size used; the list holds the address under test",
                      cb == cbNeeded && ListHas(pList, Addr()));
        HeapFree(GetProcessHeap(), 0, pList);
    }

    // ---- IND2CompletionQueue ----------------------------------------------
    IND2CompletionQueue* NewCq(ULONG depth)
    {
        IND2CompletionQueue* pCq = NULL;
        Require("IND2Adapter::CreateCompletionQueue", "depth 8",
                m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile, depth, 0, 0,
                                                  reinterpret_cast<void**>(&pCq)), S_OK);
        return pCq;
    }

    void CompletionQueues()
    {
        m_pCqA = NewCq(x_Depth);
        m_pCqB = NewCq(x_Depth);
        m_pCqF = NewCq(x_Depth);
        CheckUnknown(m_pCqA, "IND2CompletionQueue", IID_IND2CompletionQueue, &IID_IND2Overlapped,
                     IID_IND2QueuePair);

        void* p = NULL;
        Check("IND2Adapter::CreateCompletionQueue", "IID_IND2QueuePair",
              m_pAdapter->CreateCompletionQueue(IID_IND2QueuePair, m_hFile, x_Depth, 0, 0, &p),
              E_NOINTERFACE);
        Check("IND2Adapter::CreateCompletionQueue", "depth 0",
              m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile, 0, 0, 0, &p),
              ND_INVALID_PARAMETER_3);
        Check("IND2Adapter::CreateCompletionQueue", "depth MaxCompletionQueueDepth + 1",
              m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile,
                                                m_Info.MaxCompletionQueueDepth + 1, 0, 0, &p),
              ND_INVALID_PARAMETER_3);
        IND2CompletionQueue* pMax = NULL;
        if (Check("IND2Adapter::CreateCompletionQueue", "depth MaxCompletionQueueDepth",
                  m_pAdapter->CreateCompletionQueue(IID_IND2CompletionQueue, m_hFile,
                                                    m_Info.MaxCompletionQueueDepth, 0, 0,
                                                    reinterpret_cast<void**>(&pMax)), S_OK))
            pMax->Release();

        USHORT group = 0xFFFF;
        KAFFINITY affinity = 0;
        // The documentation encourages reporting the actual affinity rather
        // than ND_NOT_SUPPORTED: expect S_OK.
        Check("IND2CompletionQueue::GetNotifyAffinity", "group and affinity",
              m_pCqA->GetNotifyAffinity(&group, &affinity), S_OK);
        Check("IND2CompletionQueue::GetNotifyAffinity", "NULL pGroup",
              m_pCqA->GetNotifyAffinity(NULL, &affinity), ND_INVALID_PARAMETER);
        Check("IND2CompletionQueue::GetNotifyAffinity", "NULL pAffinity",
              m_pCqA->GetNotifyAffinity(&group, NULL), ND_INVALID_PARAMETER);

        // Notify on an empty CQ stays pending; cancelling completes it with
        // ND_CANCELED.
        Ov ov;
        HRESULT hr = m_pCqA->Notify(ND_CQ_NOTIFY_ANY, ov.Start());
        Check("IND2CompletionQueue::Notify", "ANY on an empty CQ", hr, ND_PENDING);
        if (hr == ND_PENDING) {
            Check("IND2CompletionQueue::GetOverlappedResult", "CQ Notify still pending, wait FALSE",
                  m_pCqA->GetOverlappedResult(&ov, FALSE), ND_PENDING);
            Check("IND2CompletionQueue::CancelOverlappedRequests", "CQ with a pending Notify",
                  m_pCqA->CancelOverlappedRequests(), S_OK);
            Check("IND2CompletionQueue::GetOverlappedResult", "cancelled CQ Notify",
                  Wait(m_pCqA, ov, ND_PENDING, "Notify"), ND_CANCELED);
        }
        Check("IND2CompletionQueue::CancelOverlappedRequests", "CQ with nothing pending",
              m_pCqA->CancelOverlappedRequests(), S_OK);

        // Resize (growing) on an empty CQ.
        if (m_Info.AdapterFlags & ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED) {
            Check("IND2CompletionQueue::Resize", "grow to 2 x depth", m_pCqB->Resize(2 * x_Depth), S_OK);
            Check("IND2CompletionQueue::Resize", "MaxCompletionQueueDepth + 1",
                  m_pCqB->Resize(m_Info.MaxCompletionQueueDepth + 1), ND_INVALID_PARAMETER);
        } else {
            Check("IND2CompletionQueue::Resize", "adapter without CQ_RESIZE_SUPPORTED",
                  m_pCqB->Resize(2 * x_Depth), ND_NOT_SUPPORTED);
        }
    }

    // ---- IND2MemoryRegion -------------------------------------------------
    IND2MemoryRegion* NewMr()
    {
        IND2MemoryRegion* pMr = NULL;
        Require("IND2Adapter::CreateMemoryRegion", "IID_IND2MemoryRegion",
                m_pAdapter->CreateMemoryRegion(IID_IND2MemoryRegion, m_hFile,
                                               reinterpret_cast<void**>(&pMr)), S_OK);
        return pMr;
    }

    void MemoryRegions()
    {
        m_pBufA = static_cast<char*>(_aligned_malloc(x_BufSize, 64));
        m_pBufB = static_cast<char*>(_aligned_malloc(x_BufSize, 64));
        if (m_pBufA == NULL || m_pBufB == NULL)
            Abort("_aligned_malloc");
        ZeroMemory(m_pBufA, x_BufSize);
        ZeroMemory(m_pBufB, x_BufSize);

        void* p = NULL;
        Check("IND2Adapter::CreateMemoryRegion", "IID_IND2CompletionQueue",
              m_pAdapter->CreateMemoryRegion(IID_IND2CompletionQueue, m_hFile, &p), E_NOINTERFACE);

        m_pMrA = NewMr();
        m_pMrB = NewMr();
        CheckUnknown(m_pMrA, "IND2MemoryRegion", IID_IND2MemoryRegion, &IID_IND2Overlapped,
                     IID_IND2MemoryWindow);
        const ULONG flags = ND_MR_FLAG_ALLOW_LOCAL_WRITE | ND_MR_FLAG_ALLOW_REMOTE_READ |
                            ND_MR_FLAG_ALLOW_REMOTE_WRITE | ND_MR_FLAG_RDMA_READ_SINK;
        Ov ov;
        Require("IND2MemoryRegion::Register", "client buffer",
                Wait(m_pMrA, ov, m_pMrA->Register(m_pBufA, x_BufSize, flags, ov.Start()), "Register"),
                S_OK);
        Require("IND2MemoryRegion::Register", "server buffer",
                Wait(m_pMrB, ov, m_pMrB->Register(m_pBufB, x_BufSize, flags, ov.Start()), "Register"),
                S_OK);

        // A scratch region: bad arguments, then Register/Deregister/Register.
        IND2MemoryRegion* pMr = NewMr();
        // A NULL buffer is ND_INVALID_PARAMETER and a zero length
        // ND_INVALID_BUFFER_SIZE: what Microsoft's ND tests require.
        Check("IND2MemoryRegion::Register", "NULL buffer",
              Wait(pMr, ov, pMr->Register(NULL, x_BufSize, ND_MR_FLAG_ALLOW_LOCAL_WRITE, ov.Start()),
                   "Register"), ND_INVALID_PARAMETER);
        Check("IND2MemoryRegion::Register", "length 0",
              Wait(pMr, ov, pMr->Register(m_pBufA, 0, ND_MR_FLAG_ALLOW_LOCAL_WRITE, ov.Start()),
                   "Register"), ND_INVALID_BUFFER_SIZE);
        for (int i = 0; i < 2; i++) {
            Check("IND2MemoryRegion::Register", i == 0 ? "scratch region" : "again after Deregister",
                  Wait(pMr, ov, pMr->Register(m_pBufA, x_BufSize, ND_MR_FLAG_ALLOW_LOCAL_WRITE,
                                              ov.Start()), "Register"), S_OK);
            UINT32 t1 = pMr->GetLocalToken();
            UINT32 t2 = pMr->GetLocalToken();
            CheckTrue("IND2MemoryRegion::GetLocalToken", "stable while registered", t1 == t2);
            t1 = pMr->GetRemoteToken();
            t2 = pMr->GetRemoteToken();
            CheckTrue("IND2MemoryRegion::GetRemoteToken", "stable while registered", t1 == t2);
            Check("IND2MemoryRegion::Deregister", "scratch region",
                  Wait(pMr, ov, pMr->Deregister(ov.Start()), "Deregister"), S_OK);
        }
        Check("IND2MemoryRegion::CancelOverlappedRequests", "MR with nothing pending",
              pMr->CancelOverlappedRequests(), S_OK);
        ReleaseLast(pMr, "scratch IND2MemoryRegion", false);
    }

    // ---- IND2SharedReceiveQueue -------------------------------------------
    void SharedReceiveQueues()
    {
        void* p = NULL;
        if (m_Info.MaxSharedReceiveQueueDepth == 0) {
            // CreateSharedReceiveQueue lists no ND_NOT_SUPPORTED: any depth is
            // beyond a maximum of 0 (_3).  CreateQueuePairWithSrq does list it.
            Check("IND2Adapter::CreateSharedReceiveQueue", "adapter without SRQ support",
                  m_pAdapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, m_hFile, x_Depth, 1,
                                                       1, 0, 0, &p), ND_INVALID_PARAMETER_3);
            printf("SKIP  IND2SharedReceiveQueue: the adapter has no SRQ support\n");
            return;
        }
        Check("IND2Adapter::CreateSharedReceiveQueue", "IID_IND2CompletionQueue",
              m_pAdapter->CreateSharedReceiveQueue(IID_IND2CompletionQueue, m_hFile, x_Depth, 1, 1,
                                                   0, 0, &p), E_NOINTERFACE);
        Check("IND2Adapter::CreateSharedReceiveQueue", "depth 0",
              m_pAdapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, m_hFile, 0, 1, 1, 0,
                                                   0, &p), ND_INVALID_PARAMETER_3);
        Check("IND2Adapter::CreateSharedReceiveQueue", "depth MaxSharedReceiveQueueDepth + 1",
              m_pAdapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, m_hFile,
                                                   m_Info.MaxSharedReceiveQueueDepth + 1, 1, 1, 0,
                                                   0, &p), ND_INVALID_PARAMETER_3);
        Check("IND2Adapter::CreateSharedReceiveQueue", "maxRequestSge MaxReceiveSge + 1",
              m_pAdapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, m_hFile, x_Depth,
                                                   m_Info.MaxReceiveSge + 1, 1, 0, 0, &p),
              ND_INVALID_PARAMETER_4);
        IND2SharedReceiveQueue* pSrq = NULL;
        // notifyThreshold 1: Notify completes when fewer than 1 Receive is
        // outstanding.
        if (!Check("IND2Adapter::CreateSharedReceiveQueue", "depth 8, 1 SGE, threshold 1",
                   m_pAdapter->CreateSharedReceiveQueue(IID_IND2SharedReceiveQueue, m_hFile, x_Depth,
                                                        1, 1, 0, 0, reinterpret_cast<void**>(&pSrq)),
                   S_OK))
            return;
        CheckUnknown(pSrq, "IND2SharedReceiveQueue", IID_IND2SharedReceiveQueue,
                     &IID_IND2Overlapped, IID_IND2CompletionQueue);

        USHORT group = 0xFFFF;
        KAFFINITY affinity = 0;
        Check("IND2SharedReceiveQueue::GetNotifyAffinity", "group and affinity",
              pSrq->GetNotifyAffinity(&group, &affinity), S_OK);
        Check("IND2SharedReceiveQueue::GetNotifyAffinity", "NULL pGroup",
              pSrq->GetNotifyAffinity(NULL, &affinity), ND_INVALID_PARAMETER);
        Check("IND2SharedReceiveQueue::GetNotifyAffinity", "NULL pAffinity",
              pSrq->GetNotifyAffinity(&group, NULL), ND_INVALID_PARAMETER);

        ND2_SGE sge;
        sge.Buffer = m_pBufA + 2048;
        sge.BufferLength = 64;
        sge.MemoryRegionToken = m_pMrA->GetLocalToken();
        Check("IND2SharedReceiveQueue::Receive", "first", pSrq->Receive(&sge, &sge, 1), S_OK);
        Check("IND2SharedReceiveQueue::Receive", "second", pSrq->Receive(&sge, &sge, 1), S_OK);
        ULONG nBig = m_Info.MaxReceiveSge + 1;
        ND2_SGE* pSges = static_cast<ND2_SGE*>(HeapAlloc(GetProcessHeap(), 0, nBig * sizeof(ND2_SGE)));
        if (pSges != NULL) {
            for (ULONG i = 0; i < nBig; i++) {
                pSges[i] = sge;
                pSges[i].BufferLength = 1;
            }
            Check("IND2SharedReceiveQueue::Receive", "nSge above maxRequestSge",
                  pSrq->Receive(&sge, pSges, nBig), ND_DATA_OVERRUN);
            HeapFree(GetProcessHeap(), 0, pSges);
        }

        Check("IND2SharedReceiveQueue::Modify", "0, 0 (leave unchanged)", pSrq->Modify(0, 0), S_OK);
        Check("IND2SharedReceiveQueue::Modify", "depth 1 with 2 Receives outstanding",
              pSrq->Modify(1, 0), ND_BUFFER_OVERFLOW);
        Check("IND2SharedReceiveQueue::Modify", "depth MaxSharedReceiveQueueDepth + 1",
              pSrq->Modify(m_Info.MaxSharedReceiveQueueDepth + 1, 0), ND_INVALID_PARAMETER);

        Ov ov;
        HRESULT hr = pSrq->Notify(ov.Start());
        Check("IND2SharedReceiveQueue::Notify", "2 Receives outstanding, threshold 1", hr, ND_PENDING);
        if (hr == ND_PENDING) {
            Check("IND2SharedReceiveQueue::CancelOverlappedRequests", "SRQ with a pending Notify",
                  pSrq->CancelOverlappedRequests(), S_OK);
            Check("IND2SharedReceiveQueue::GetOverlappedResult", "cancelled SRQ Notify",
                  Wait(pSrq, ov, ND_PENDING, "Notify"), ND_CANCELED);
        }

        // Queue pairs on the SRQ.
        Check("IND2Adapter::CreateQueuePairWithSrq", "IID_IND2CompletionQueue",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2CompletionQueue, m_pCqF, m_pCqF, pSrq, NULL,
                                                 x_Depth, 1, 0, &p), E_NOINTERFACE);
        Check("IND2Adapter::CreateQueuePairWithSrq", "NULL receive CQ",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, NULL, m_pCqF, pSrq, NULL, x_Depth,
                                                 1, 0, &p), ND_INVALID_PARAMETER_2);
        Check("IND2Adapter::CreateQueuePairWithSrq", "NULL initiator CQ",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, NULL, pSrq, NULL, x_Depth,
                                                 1, 0, &p), ND_INVALID_PARAMETER_3);
        Check("IND2Adapter::CreateQueuePairWithSrq", "NULL SRQ",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, m_pCqF, NULL, NULL,
                                                 x_Depth, 1, 0, &p), ND_INVALID_PARAMETER_4);
        Check("IND2Adapter::CreateQueuePairWithSrq", "initiator depth MaxInitiatorQueueDepth + 1",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, m_pCqF, pSrq, NULL,
                                                 m_Info.MaxInitiatorQueueDepth + 1, 1, 0, &p),
              ND_INVALID_PARAMETER_6);
        Check("IND2Adapter::CreateQueuePairWithSrq", "initiator SGE MaxInitiatorSge + 1",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, m_pCqF, pSrq, NULL,
                                                 x_Depth, m_Info.MaxInitiatorSge + 1, 0, &p),
              ND_INVALID_PARAMETER_7);
        Check("IND2Adapter::CreateQueuePairWithSrq", "inline MaxInlineDataSize + 1",
              m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, m_pCqF, pSrq, NULL,
                                                 x_Depth, 1, m_Info.MaxInlineDataSize + 1, &p),
              ND_INVALID_PARAMETER_8);
        IND2QueuePair* pQp = NULL;
        if (Check("IND2Adapter::CreateQueuePairWithSrq", "valid",
                  m_pAdapter->CreateQueuePairWithSrq(IID_IND2QueuePair, m_pCqF, m_pCqF, pSrq, NULL,
                                                     x_Depth, 1, 0, reinterpret_cast<void**>(&pQp)),
                  S_OK))
            ReleaseLast(pQp, "SRQ IND2QueuePair", false);
        ReleaseLast(pSrq, "IND2SharedReceiveQueue", false);
    }

    // ---- IND2QueuePair (creation, unconnected behaviour) -----------------
    IND2QueuePair* NewQp(IND2CompletionQueue* pCq, void* ctx)
    {
        IND2QueuePair* pQp = NULL;
        Require("IND2Adapter::CreateQueuePair", "valid",
                m_pAdapter->CreateQueuePair(IID_IND2QueuePair, pCq, pCq, ctx, x_Depth, x_Depth,
                                            min(2u, m_Info.MaxReceiveSge),
                                            min(2u, m_Info.MaxInitiatorSge),
                                            m_Info.InlineRequestThreshold,
                                            reinterpret_cast<void**>(&pQp)), S_OK);
        return pQp;
    }

    void QueuePairs()
    {
        void* p = NULL;
        const char* m = "IND2Adapter::CreateQueuePair";
        IND2CompletionQueue* c = m_pCqF;
        Check(m, "IID_IND2CompletionQueue",
              m_pAdapter->CreateQueuePair(IID_IND2CompletionQueue, c, c, NULL, x_Depth, x_Depth, 1, 1, 0,
                                          &p), E_NOINTERFACE);
        Check(m, "NULL receive CQ",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, NULL, c, NULL, x_Depth, x_Depth, 1, 1, 0,
                                          &p), ND_INVALID_PARAMETER_2);
        Check(m, "NULL initiator CQ",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, NULL, NULL, x_Depth, x_Depth, 1, 1, 0,
                                          &p), ND_INVALID_PARAMETER_3);
        Check(m, "a memory region as the receive CQ",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, m_pMrA, c, NULL, x_Depth, x_Depth, 1, 1,
                                          0, &p), ND_INVALID_PARAMETER_2);
        Check(m, "receive depth MaxReceiveQueueDepth + 1",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, c, NULL,
                                          m_Info.MaxReceiveQueueDepth + 1, x_Depth, 1, 1, 0, &p),
              ND_INVALID_PARAMETER_5);
        Check(m, "initiator depth MaxInitiatorQueueDepth + 1",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, c, NULL, x_Depth,
                                          m_Info.MaxInitiatorQueueDepth + 1, 1, 1, 0, &p),
              ND_INVALID_PARAMETER_6);
        Check(m, "receive SGE MaxReceiveSge + 1",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, c, NULL, x_Depth, x_Depth,
                                          m_Info.MaxReceiveSge + 1, 1, 0, &p),
              ND_INVALID_PARAMETER_7);
        Check(m, "initiator SGE MaxInitiatorSge + 1",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, c, NULL, x_Depth, x_Depth, 1,
                                          m_Info.MaxInitiatorSge + 1, 0, &p),
              ND_INVALID_PARAMETER_8);
        Check(m, "inline MaxInlineDataSize + 1",
              m_pAdapter->CreateQueuePair(IID_IND2QueuePair, c, c, NULL, x_Depth, x_Depth, 1, 1,
                                          m_Info.MaxInlineDataSize + 1, &p),
              ND_INVALID_PARAMETER_9);

        m_pQpA = NewQp(m_pCqA, &m_CtxA);
        m_pQpB = NewQp(m_pCqB, &m_CtxB);
        m_pQpF = NewQp(m_pCqF, &m_CtxF);
        CheckUnknown(m_pQpA, "IND2QueuePair", IID_IND2QueuePair, NULL, IID_IND2Overlapped);

        // An unconnected QP takes Receives; initiator requests fail.
        ND2_SGE sge;
        sge.Buffer = m_pBufA + 3072;
        sge.BufferLength = 64;
        sge.MemoryRegionToken = m_pMrA->GetLocalToken();
        Check("IND2QueuePair::Receive", "unconnected QP (1)", m_pQpF->Receive(&m_CtxF, &sge, 1), S_OK);
        Check("IND2QueuePair::Receive", "unconnected QP (2)", m_pQpF->Receive(&m_CtxF, &sge, 1), S_OK);
        Check("IND2QueuePair::Send", "unconnected QP", m_pQpF->Send(NULL, &sge, 1, 0),
              ND_CONNECTION_INVALID);
        Check("IND2QueuePair::Write", "unconnected QP",
              m_pQpF->Write(NULL, &sge, 1, (UINT64)(ULONG_PTR)m_pBufB, 0, 0), ND_CONNECTION_INVALID);
        Check("IND2QueuePair::Read", "unconnected QP",
              m_pQpF->Read(NULL, &sge, 1, (UINT64)(ULONG_PTR)m_pBufB, 0, 0), ND_CONNECTION_INVALID);

        // Flush: both Receives complete ND_CANCELED.  The CQ Notify armed
        // afterwards completes, as the entries were never reported.
        Check("IND2QueuePair::Flush", "2 Receives outstanding", m_pQpF->Flush(), S_OK);
        Ov ov;
        Check("IND2CompletionQueue::Notify", "ANY with unreported flushed entries",
              Wait(m_pCqF, ov, m_pCqF->Notify(ND_CQ_NOTIFY_ANY, ov.Start()), "Notify"), S_OK);
        if (m_Info.AdapterFlags & ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED)
            Check("IND2CompletionQueue::Resize", "depth 1 with 2 entries queued", m_pCqF->Resize(1),
                  ND_BUFFER_OVERFLOW);
        ND2_RESULT results[4];
        ULONG n = m_pCqF->GetResults(results, 4);
        Cover("IND2CompletionQueue::GetResults");
        if (n < 2) {
            ND2_RESULT more;
            while (n < 2 && Poll(m_pCqF, &more, "a flushed Receive"))
                results[n++] = more;
        }
        CheckTrue("IND2CompletionQueue::GetResults", "2 completions after Flush", n == 2);
        for (ULONG i = 0; i < n; i++) {
            CheckTrue("IND2CompletionQueue::GetResults", "flushed Receive: type and contexts",
                      results[i].RequestType == Nd2RequestTypeReceive &&
                      results[i].QueuePairContext == &m_CtxF && results[i].RequestContext == &m_CtxF);
            Check("IND2QueuePair::Flush", "flushed Receive status", results[i].Status, ND_CANCELED);
        }
        CheckTrue("IND2CompletionQueue::GetResults", "nothing more",
                  m_pCqF->GetResults(results, 4) == 0);
        if (m_Info.AdapterFlags & ND_ADAPTER_FLAG_CQ_RESIZE_SUPPORTED)
            Check("IND2CompletionQueue::Resize", "shrink to 4 when empty", m_pCqF->Resize(4), S_OK);
    }

    // ---- IND2Listener and unconnected IND2Connector ----------------------
    IND2Connector* NewConnector()
    {
        IND2Connector* pConn = NULL;
        Require("IND2Adapter::CreateConnector", "IID_IND2Connector",
                m_pAdapter->CreateConnector(IID_IND2Connector, m_hFile, reinterpret_cast<void**>(&pConn)),
                S_OK);
        return pConn;
    }

    void Listener()
    {
        void* p = NULL;
        Check("IND2Adapter::CreateListener", "IID_IND2Connector",
              m_pAdapter->CreateListener(IID_IND2Connector, m_hFile, &p), E_NOINTERFACE);
        Check("IND2Adapter::CreateConnector", "IID_IND2Listener",
              m_pAdapter->CreateConnector(IID_IND2Listener, m_hFile, &p), E_NOINTERFACE);
        Check("IND2Adapter::CreateMemoryWindow", "IID_IND2MemoryRegion",
              m_pAdapter->CreateMemoryWindow(IID_IND2MemoryRegion, &p), E_NOINTERFACE);
        Require("IND2Adapter::CreateListener", "IID_IND2Listener",
                m_pAdapter->CreateListener(IID_IND2Listener, m_hFile, reinterpret_cast<void**>(&m_pListener)),
                S_OK);
        CheckUnknown(m_pListener, "IND2Listener", IID_IND2Listener, &IID_IND2Overlapped,
                     IID_IND2Connector);

        Require("IND2Listener::Bind", "address under test, port 0", m_pListener->Bind(Addr(), m_cbAddr),
                S_OK);
        ULONG cb = sizeof(m_ListenAddr);
        Check("IND2Listener::GetLocalAddress", "bound, not listening",
              m_pListener->GetLocalAddress(reinterpret_cast<sockaddr*>(&m_ListenAddr), &cb),
              ND_INVALID_DEVICE_STATE);
        Require("IND2Listener::Listen", "backlog 8", m_pListener->Listen(8), S_OK);
        cb = sizeof(m_ListenAddr);
        Require("IND2Listener::GetLocalAddress", "listening",
                m_pListener->GetLocalAddress(reinterpret_cast<sockaddr*>(&m_ListenAddr), &cb), S_OK);
        CheckTrue("IND2Listener::GetLocalAddress",
                  "same IP, size of the family's sockaddr, port 0 assigned from 49152-65535",
                  SameIp(reinterpret_cast<sockaddr*>(&m_ListenAddr), Addr()) && cb == m_cbAddr &&
                  PortOf(m_ListenAddr) >= 49152);
        SOCKADDR_INET small;
        ZeroMemory(&small, sizeof(small));
        cb = 4;
        Check("IND2Listener::GetLocalAddress", "4-byte buffer",
              m_pListener->GetLocalAddress(reinterpret_cast<sockaddr*>(&small), &cb), ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Listener::GetLocalAddress", "short buffer: size written back, buffer unchanged",
                  cb == m_cbAddr && small.si_family == 0);
        // A second Listen must not succeed; the documentation gives no status,
        // so only failure is checked.
        HRESULT hr = m_pListener->Listen(8);
        CheckTrue("IND2Listener::Listen", "second Listen does not succeed", FAILED(hr));
        // STATUS_ADDRESS_ALREADY_ASSOCIATED is what Microsoft's tests expect
        // for a second Bind of a listening listener.
        Check("IND2Listener::Bind", "second Bind", m_pListener->Bind(Addr(), m_cbAddr),
              x_AddressAlreadyAssociated);

        // A GetConnectionRequest that nobody answers, cancelled.
        IND2Connector* pSpare = NewConnector();
        Ov ov;
        hr = m_pListener->GetConnectionRequest(pSpare, ov.Start());
        Check("IND2Listener::GetConnectionRequest", "no client", hr, ND_PENDING);
        if (hr == ND_PENDING) {
            Check("IND2Listener::GetOverlappedResult", "listener request pending, wait FALSE",
                  m_pListener->GetOverlappedResult(&ov, FALSE), ND_PENDING);
            Check("IND2Listener::CancelOverlappedRequests", "listener with a pending request",
                  m_pListener->CancelOverlappedRequests(), S_OK);
            Check("IND2Listener::GetOverlappedResult", "cancelled GetConnectionRequest",
                  Wait(m_pListener, ov, ND_PENDING,
                       "GetConnectionRequest"), ND_CANCELED);
        }
        ReleaseLast(pSpare, "unused IND2Connector", true);

        // A connector that never connected.
        IND2Connector* pConn = NewConnector();
        CheckUnknown(pConn, "IND2Connector", IID_IND2Connector, &IID_IND2Overlapped, IID_IND2Listener);
        SOCKADDR_INET a;
        cb = sizeof(a);
        Check("IND2Connector::GetLocalAddress", "never connected",
              pConn->GetLocalAddress(reinterpret_cast<sockaddr*>(&a), &cb), ND_CONNECTION_INVALID);
        cb = sizeof(a);
        Check("IND2Connector::GetPeerAddress", "never connected",
              pConn->GetPeerAddress(reinterpret_cast<sockaddr*>(&a), &cb), ND_CONNECTION_INVALID);
        ULONG in = 0, out = 0;
        Check("IND2Connector::GetReadLimits", "never connected", pConn->GetReadLimits(&in, &out),
              ND_CONNECTION_INVALID);
        char data[16];
        cb = sizeof(data);
        Check("IND2Connector::GetPrivateData", "never connected", pConn->GetPrivateData(data, &cb),
              ND_CONNECTION_INVALID);
        Check("IND2Connector::NotifyDisconnect", "never connected",
              Wait(pConn, ov, pConn->NotifyDisconnect(ov.Start()), "NotifyDisconnect"),
              ND_CONNECTION_INVALID);
        Check("IND2Connector::Disconnect", "never connected",
              Wait(pConn, ov, pConn->Disconnect(ov.Start()), "Disconnect"), ND_CONNECTION_INVALID);
        Check("IND2Connector::CompleteConnect", "not connecting",
              Wait(pConn, ov, pConn->CompleteConnect(ov.Start()), "CompleteConnect"),
              ND_CONNECTION_INVALID);
        Check("IND2Connector::CancelOverlappedRequests", "connector with nothing pending",
              pConn->CancelOverlappedRequests(), S_OK);
        ReleaseLast(pConn, "never-connected IND2Connector", true);
    }

    // ---- Reject ------------------------------------------------------------
    void RejectedConnection()
    {
        IND2Connector* pClient = NewConnector();
        IND2Connector* pServer = NewConnector();
        Ov ovReq, ovConn;
        Check("IND2Connector::Bind", "client, port 0", pClient->Bind(Addr(), m_cbAddr), S_OK);
        HRESULT hrReq = m_pListener->GetConnectionRequest(pServer, ovReq.Start());
        static const char hello[] = "ndabi: please reject";
        HRESULT hrConn = pClient->Connect(m_pQpA, reinterpret_cast<sockaddr*>(&m_ListenAddr),
                                          m_cbAddr, 0, 0, hello, sizeof(hello), ovConn.Start());
        Check("IND2Listener::GetConnectionRequest", "first request",
              Wait(m_pListener, ovReq, hrReq, "GetConnectionRequest"), S_OK);

        ULONG cbBig = m_Info.MaxCalleeData + 1;
        char* pBig = static_cast<char*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, cbBig));
        if (pBig != NULL) {
            Check("IND2Connector::Reject", "MaxCalleeData + 1 bytes of private data",
                  pServer->Reject(pBig, cbBig), ND_INVALID_BUFFER_SIZE);
            HeapFree(GetProcessHeap(), 0, pBig);
        }
        static const char no[] = "no";
        Check("IND2Connector::Reject", "with private data", pServer->Reject(no, sizeof(no)), S_OK);
        Check("IND2Connector::Connect", "rejected by the peer",
              Wait(pClient, ovConn, hrConn, "Connect"), ND_CONNECTION_REFUSED);
        ULONG cb = 0;
        Check("IND2Connector::GetPrivateData", "rejected: NULL buffer, size 0",
              pClient->GetPrivateData(NULL, &cb), ND_BUFFER_OVERFLOW);
        char data[64];
        ZeroMemory(data, sizeof(data));
        ULONG cbData = sizeof(data);
        if (Check("IND2Connector::GetPrivateData", "rejected: reject private data",
                  pClient->GetPrivateData(data, &cbData), S_OK))
            CheckTrue("IND2Connector::GetPrivateData", "reject private data matches",
                      cb >= sizeof(no) && cbData >= sizeof(no) && memcmp(data, no, sizeof(no)) == 0);
        ReleaseLast(pServer, "rejecting IND2Connector", true);
        ReleaseLast(pClient, "rejected IND2Connector", true);
    }

    // ---- Connection --------------------------------------------------------
    void Connection()
    {
        m_pConnA = NewConnector();
        m_pConnB = NewConnector();
        Ov ovReq, ovConn, ovAcc;

        // Pre-post the server's Receives.
        ND2_SGE sge;
        sge.Buffer = m_pBufB + 1024;
        sge.BufferLength = 256;
        sge.MemoryRegionToken = m_pMrB->GetLocalToken();
        for (int i = 0; i < 3; i++)
            Check("IND2QueuePair::Receive", "server, before Accept", m_pQpB->Receive(&m_CtxB, &sge, 1),
                  S_OK);

        Require("IND2Connector::Bind", "client, port 0", m_pConnA->Bind(Addr(), m_cbAddr), S_OK);
        ULONG cbBig = m_Info.MaxCallerData + 1;
        char* pBig = static_cast<char*>(HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY,
                                                  max(cbBig, m_Info.MaxCalleeData + 1)));
        if (pBig == NULL)
            Abort("HeapAlloc");
        // The oversized Connect fails synchronously and leaves the connector
        // usable (Microsoft's NdLargePrivateData test).
        Check("IND2Connector::Connect", "MaxCallerData + 1 bytes of private data",
              Wait(m_pConnA, ovConn,
                   m_pConnA->Connect(m_pQpA, reinterpret_cast<sockaddr*>(&m_ListenAddr), m_cbAddr, 1, 1,
                                     pBig, cbBig, ovConn.Start()), "Connect"),
              ND_INVALID_BUFFER_SIZE);

        HRESULT hrReq = m_pListener->GetConnectionRequest(m_pConnB, ovReq.Start());
        static const char hello[] = "ndabi: hello from the client";
        HRESULT hrConn = m_pConnA->Connect(m_pQpA, reinterpret_cast<sockaddr*>(&m_ListenAddr),
                                           m_cbAddr, 1, 1, hello, sizeof(hello), ovConn.Start());
        Require("IND2Listener::GetConnectionRequest", "client request",
                Wait(m_pListener, ovReq, hrReq, "GetConnectionRequest"), S_OK);

        // Passive side, before Accept.
        SOCKADDR_INET peer;
        ZeroMemory(&peer, sizeof(peer));
        ULONG cb = 4;
        Check("IND2Connector::GetPeerAddress", "4-byte buffer",
              m_pConnB->GetPeerAddress(reinterpret_cast<sockaddr*>(&peer), &cb), ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Connector::GetPeerAddress", "short buffer: size written back, buffer unchanged",
                  cb == m_cbAddr && peer.si_family == 0);
        cb = sizeof(peer);
        Check("IND2Connector::GetPeerAddress", "server, before Accept",
              m_pConnB->GetPeerAddress(reinterpret_cast<sockaddr*>(&peer), &cb), S_OK);
        CheckTrue("IND2Connector::GetPeerAddress", "the client's IP, an assigned port",
                  SameIp(reinterpret_cast<sockaddr*>(&peer), Addr()) && PortOf(peer) != 0);
        ULONG in = 99, out = 99;
        Check("IND2Connector::GetReadLimits", "server, before Accept", m_pConnB->GetReadLimits(&in, &out),
              S_OK);
        // The client offered inbound 1, outbound 1; seen from here and clamped.
        CheckTrue("IND2Connector::GetReadLimits", "server sees the client's offer swapped, clamped",
                  in == min(1u, m_Info.MaxInboundReadLimit) && out == min(1u, m_Info.MaxOutboundReadLimit));
        cb = 0;
        Check("IND2Connector::GetPrivateData", "NULL buffer, size 0", m_pConnB->GetPrivateData(NULL, &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Connector::GetPrivateData", "size query covers the client's data",
                  cb >= sizeof(hello));
        char data[128];
        ZeroMemory(data, sizeof(data));
        cb = 4;
        Check("IND2Connector::GetPrivateData", "4-byte buffer", m_pConnB->GetPrivateData(data, &cb),
              ND_BUFFER_OVERFLOW);
        CheckTrue("IND2Connector::GetPrivateData", "short buffer: partial copy, size written back",
                  cb >= sizeof(hello) && memcmp(data, hello, 4) == 0 && data[4] == 0);
        cb = sizeof(data);
        Check("IND2Connector::GetPrivateData", "server, full buffer", m_pConnB->GetPrivateData(data, &cb),
              S_OK);
        CheckTrue("IND2Connector::GetPrivateData", "the client's private data",
                  cb >= sizeof(hello) && memcmp(data, hello, sizeof(hello)) == 0);

        // Oversized Accept fails synchronously and the connector stays usable.
        Check("IND2Connector::Accept", "MaxCalleeData + 1 bytes of private data",
              Wait(m_pConnB, ovAcc,
                   m_pConnB->Accept(m_pQpB, 1, 1, pBig, m_Info.MaxCalleeData + 1, ovAcc.Start()),
                   "Accept"), ND_INVALID_BUFFER_SIZE);
        HeapFree(GetProcessHeap(), 0, pBig);
        static const char welcome[] = "ndabi: welcome";
        HRESULT hrAcc = m_pConnB->Accept(m_pQpB, 1, 1, welcome, sizeof(welcome), ovAcc.Start());
        Require("IND2Connector::Connect", "accepted", Wait(m_pConnA, ovConn, hrConn, "Connect"), S_OK);

        // Active side, before CompleteConnect.
        in = out = 99;
        Check("IND2Connector::GetReadLimits", "client, before CompleteConnect",
              m_pConnA->GetReadLimits(&in, &out), S_OK);
        CheckTrue("IND2Connector::GetReadLimits", "client sees the server's Accept(1, 1)",
                  in == min(1u, m_Info.MaxInboundReadLimit) && out == min(1u, m_Info.MaxOutboundReadLimit));
        cb = 0;
        Check("IND2Connector::GetPrivateData", "client: NULL buffer, size 0",
              m_pConnA->GetPrivateData(NULL, &cb), ND_BUFFER_OVERFLOW);
        ZeroMemory(data, sizeof(data));
        cb = sizeof(data);
        Check("IND2Connector::GetPrivateData", "client, full buffer", m_pConnA->GetPrivateData(data, &cb),
              S_OK);
        CheckTrue("IND2Connector::GetPrivateData", "the server's Accept private data",
                  cb >= sizeof(welcome) && memcmp(data, welcome, sizeof(welcome)) == 0);
        SOCKADDR_INET local;
        cb = sizeof(local);
        Check("IND2Connector::GetLocalAddress", "client, connecting",
              m_pConnA->GetLocalAddress(reinterpret_cast<sockaddr*>(&local), &cb), S_OK);
        CheckTrue("IND2Connector::GetLocalAddress", "port 0 became an ephemeral port (49152-65535)",
                  SameIp(reinterpret_cast<sockaddr*>(&local), Addr()) && PortOf(local) >= 49152);
        CheckTrue("IND2Connector::GetPeerAddress", "server saw the client's port",
                  PortOf(local) == PortOf(peer));
        cb = 4;
        Check("IND2Connector::GetLocalAddress", "4-byte buffer",
              m_pConnA->GetLocalAddress(reinterpret_cast<sockaddr*>(&local), &cb), ND_BUFFER_OVERFLOW);
        cb = sizeof(peer);
        Check("IND2Connector::GetPeerAddress", "client",
              m_pConnA->GetPeerAddress(reinterpret_cast<sockaddr*>(&peer), &cb), S_OK);
        CheckTrue("IND2Connector::GetPeerAddress", "the listener's address",
                  SameIp(reinterpret_cast<sockaddr*>(&peer), Addr()) &&
                  PortOf(peer) == PortOf(m_ListenAddr));

        Ov ovCc;
        Require("IND2Connector::CompleteConnect", "client",
                Wait(m_pConnA, ovCc, m_pConnA->CompleteConnect(ovCc.Start()), "CompleteConnect"), S_OK);
        Require("IND2Connector::Accept", "server", Wait(m_pConnB, ovAcc, hrAcc, "Accept"), S_OK);
    }

    // ---- Data transfer -------------------------------------------------------
    void DataTransfer()
    {
        UINT32 tokA = m_pMrA->GetLocalToken();
        Cover("IND2MemoryRegion::GetLocalToken");

        // Send with inline data, received into the server's first Receive.
        char* pMsg = m_pBufA;
        static const char ping[] = "ndabi ping";
        CopyMemory(pMsg, ping, sizeof(ping));
        ND2_SGE sge;
        sge.Buffer = pMsg;
        sge.BufferLength = sizeof(ping);
        sge.MemoryRegionToken = tokA;
        ULONG inl = sizeof(ping) < m_Info.InlineRequestThreshold ? ND_OP_FLAG_INLINE : 0;
        Check("IND2QueuePair::Send", "a flag valid only for Bind", m_pQpA->Send(pMsg, &sge, 1, x_BindOnlyFlag),
              ND_INVALID_PARAMETER_4);
        Check("IND2QueuePair::Send", "11 bytes", m_pQpA->Send(pMsg, &sge, 1, inl), S_OK);
        Expect(m_pCqA, Nd2RequestTypeSend, &m_CtxA, pMsg, S_OK, "IND2QueuePair::Send", "Send completion");
        ND2_RESULT r;
        if (Poll(m_pCqB, &r, "the server's Receive")) {
            Check("IND2QueuePair::Receive", "Receive completion", r.Status, S_OK);
            CheckTrue("IND2QueuePair::Receive", "type, contexts, length and data",
                      r.RequestType == Nd2RequestTypeReceive && r.QueuePairContext == &m_CtxB &&
                      r.RequestContext == &m_CtxB && r.BytesTransferred == sizeof(ping) &&
                      memcmp(m_pBufB + 1024, ping, sizeof(ping)) == 0);
        }

        // A 0-byte Send matches a Receive with 0 bytes.
        Check("IND2QueuePair::Send", "0 bytes, no SGE", m_pQpA->Send(NULL, NULL, 0, 0), S_OK);
        Expect(m_pCqA, Nd2RequestTypeSend, &m_CtxA, NULL, S_OK, "IND2QueuePair::Send", "0-byte Send completion");
        if (Poll(m_pCqB, &r, "the 0-byte Receive")) {
            Check("IND2QueuePair::Receive", "0-byte Receive completion", r.Status, S_OK);
            CheckTrue("IND2QueuePair::Receive", "0 bytes transferred", r.BytesTransferred == 0);
        }

        // A window over the server's buffer.
        Require("IND2Adapter::CreateMemoryWindow", "IID_IND2MemoryWindow",
                m_pAdapter->CreateMemoryWindow(IID_IND2MemoryWindow, reinterpret_cast<void**>(&m_pMwB)),
                S_OK);
        CheckUnknown(m_pMwB, "IND2MemoryWindow", IID_IND2MemoryWindow, NULL, IID_IND2MemoryRegion);
        Check("IND2QueuePair::Bind", "window over the server buffer, read and write",
              m_pQpB->Bind(m_pMwB, m_pMrB, m_pMwB, m_pBufB, x_BufSize,
                           ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE), S_OK);
        // The token is valid as soon as Bind returns.
        UINT32 token = m_pMwB->GetRemoteToken();
        CheckTrue("IND2MemoryWindow::GetRemoteToken", "stable",
                  token == m_pMwB->GetRemoteToken());
        Expect(m_pCqB, Nd2RequestTypeBind, &m_CtxB, m_pMwB, S_OK, "IND2QueuePair::Bind", "Bind completion");
        // Deregister with a bound window: ND_DEVICE_BUSY, synchronously.
        Ov ov;
        HRESULT hr = m_pMrB->Deregister(ov.Start());
        Check("IND2MemoryRegion::Deregister", "a window is bound (synchronous)", hr, ND_DEVICE_BUSY);
        if (hr == ND_PENDING)
            Wait(m_pMrB, ov, hr, "Deregister");
        UINT32 mrRemote = m_pMrB->GetRemoteToken();
        CheckTrue("IND2MemoryRegion::GetRemoteToken", "stable", mrRemote == m_pMrB->GetRemoteToken());

        UINT64 remote = (UINT64)(ULONG_PTR)m_pBufB;
        // RDMA Write of a pattern into the server buffer at offset 0.
        for (ULONG i = 0; i < 256; i++)
            m_pBufA[512 + i] = (char)(i * 3 + 1);
        sge.Buffer = m_pBufA + 512;
        sge.BufferLength = 256;
        Check("IND2QueuePair::Write", "a flag valid only for Bind",
              m_pQpA->Write(NULL, &sge, 1, remote, token, x_BindOnlyFlag), ND_INVALID_PARAMETER_6);
        Check("IND2QueuePair::Write", "256 bytes through the window",
              m_pQpA->Write(sge.Buffer, &sge, 1, remote, token, 0), S_OK);
        Expect(m_pCqA, Nd2RequestTypeWrite, &m_CtxA, sge.Buffer, S_OK, "IND2QueuePair::Write",
               "Write completion");
        // A Send after the Write: when its Receive completes, the Write's
        // data is in place.
        sge.Buffer = pMsg;
        sge.BufferLength = sizeof(ping);
        Check("IND2QueuePair::Send", "after the Write", m_pQpA->Send(pMsg, &sge, 1, inl), S_OK);
        Expect(m_pCqA, Nd2RequestTypeSend, &m_CtxA, pMsg, S_OK, "IND2QueuePair::Send", "Send completion");
        if (Expect(m_pCqB, Nd2RequestTypeReceive, &m_CtxB, &m_CtxB, S_OK, "IND2QueuePair::Receive",
                   "Receive after the Write")) {
            bool same = true;
            for (ULONG i = 0; i < 256; i++)
                same = same && m_pBufB[i] == (char)(i * 3 + 1);
            CheckTrue("IND2QueuePair::Write", "the server buffer holds the written data", same);
        }

        // RDMA Read of a server pattern at offset 2048 into the client buffer.
        for (ULONG i = 0; i < 128; i++)
            m_pBufB[2048 + i] = (char)(i * 5 + 7);
        ZeroMemory(m_pBufA + 1024, 128);
        sge.Buffer = m_pBufA + 1024;
        sge.BufferLength = 128;
        Check("IND2QueuePair::Read", "128 bytes through the window",
              m_pQpA->Read(sge.Buffer, &sge, 1, remote + 2048, token, 0), S_OK);
        if (Expect(m_pCqA, Nd2RequestTypeRead, &m_CtxA, sge.Buffer, S_OK, "IND2QueuePair::Read",
                   "Read completion")) {
            bool same = true;
            for (ULONG i = 0; i < 128; i++)
                same = same && m_pBufA[1024 + i] == (char)(i * 5 + 7);
            CheckTrue("IND2QueuePair::Read", "the client buffer holds the server's data", same);
        }
        // A 0-byte Read is a valid probe.
        Check("IND2QueuePair::Read", "0 bytes, no SGE", m_pQpA->Read(NULL, NULL, 0, remote, token, 0), S_OK);
        Expect(m_pCqA, Nd2RequestTypeRead, &m_CtxA, NULL, S_OK, "IND2QueuePair::Read", "0-byte Read completion");

        // Invalidate the window; the region can then be deregistered.
        Check("IND2QueuePair::Invalidate", "the bound window", m_pQpB->Invalidate(&m_CtxB, m_pMwB, 0), S_OK);
        Expect(m_pCqB, Nd2RequestTypeInvalidate, &m_CtxB, &m_CtxB, S_OK, "IND2QueuePair::Invalidate",
               "Invalidate completion");
    }

    // ---- Disconnect ----------------------------------------------------------
    void Disconnection()
    {
        Ov ovNotifyA, ovNotifyB, ovDisc;
        // A NotifyDisconnect cancelled on the client.
        HRESULT hr = m_pConnA->NotifyDisconnect(ovNotifyA.Start());
        Check("IND2Connector::NotifyDisconnect", "client, connected", hr, ND_PENDING);
        if (hr == ND_PENDING) {
            Check("IND2Connector::CancelOverlappedRequests", "connector with a pending NotifyDisconnect",
                  m_pConnA->CancelOverlappedRequests(), S_OK);
            Check("IND2Connector::GetOverlappedResult", "cancelled NotifyDisconnect",
                  Wait(m_pConnA, ovNotifyA, ND_PENDING,
                       "NotifyDisconnect"), ND_CANCELED);
        }
        // The server's NotifyDisconnect completes on the client's Disconnect.
        HRESULT hrNotify = m_pConnB->NotifyDisconnect(ovNotifyB.Start());
        Check("IND2Connector::NotifyDisconnect", "server, connected", hrNotify, ND_PENDING);
        Check("IND2Connector::Disconnect", "client",
              Wait(m_pConnA, ovDisc, m_pConnA->Disconnect(ovDisc.Start()), "Disconnect"), S_OK);
        Check("IND2Connector::NotifyDisconnect", "server, after the client's Disconnect",
              Wait(m_pConnB, ovNotifyB, hrNotify, "NotifyDisconnect"), S_OK);
        // Disconnect after the peer has disconnected succeeds.
        Check("IND2Connector::Disconnect", "server, after the peer",
              Wait(m_pConnB, ovDisc, m_pConnB->Disconnect(ovDisc.Start()), "Disconnect"), S_OK);
    }

    // ---- Cleanup -------------------------------------------------------------
    void Cleanup()
    {
        Ov ov;
        ReleaseLast(m_pConnA, "client IND2Connector", true);
        ReleaseLast(m_pConnB, "server IND2Connector", true);
        ReleaseLast(m_pListener, "IND2Listener", true);
        ReleaseLast(m_pMwB, "IND2MemoryWindow", false);
        Check("IND2MemoryRegion::Deregister", "client buffer",
              Wait(m_pMrA, ov, m_pMrA->Deregister(ov.Start()), "Deregister"), S_OK);
        Check("IND2MemoryRegion::Deregister", "server buffer, window invalidated",
              Wait(m_pMrB, ov, m_pMrB->Deregister(ov.Start()), "Deregister"), S_OK);
        ReleaseLast(m_pQpA, "client IND2QueuePair", false);
        ReleaseLast(m_pQpB, "server IND2QueuePair", false);
        ReleaseLast(m_pQpF, "unconnected IND2QueuePair", false);
        ReleaseLast(m_pMrA, "client IND2MemoryRegion", false);
        ReleaseLast(m_pMrB, "server IND2MemoryRegion", false);
        ReleaseLast(m_pCqA, "client IND2CompletionQueue", false);
        ReleaseLast(m_pCqB, "server IND2CompletionQueue", false);
        ReleaseLast(m_pCqF, "unconnected IND2CompletionQueue", false);
        CheckTrue("IND2Adapter::CreateOverlappedFile", "CloseHandle of the overlapped file",
                  CloseHandle(m_hFile) != FALSE);
        ReleaseLast(m_pAdapter, "IND2Adapter", false);
        _aligned_free(m_pBufA);
        _aligned_free(m_pBufB);

        NdFlushProviders();
        Check("NdCleanup", "last reference", NdCleanup(), S_OK);
        Check("NdCleanup", "after the last reference", NdCleanup(), ND_DEVICE_NOT_READY);
    }
};

int __cdecl _tmain(int argc, TCHAR* argv[])
{
    if (argc != 2 || _tcscmp(argv[1], _T("-h")) == 0) {
        ShowUsage();
        return argc == 2 ? 0 : 2;
    }
    SOCKADDR_INET addr;
    ULONG cbAddr;
    if (!ParseAddress(argv[1], &addr, &cbAddr, 0)) {
        printf("Bad address.\n\n");
        ShowUsage();
        return 2;
    }
    WSADATA wsaData;
    if (WSAStartup(MAKEWORD(2, 2), &wsaData) != 0) {
        printf("WSAStartup failed\n");
        return 1;
    }
    printf("Beginning test: ndabi\n");
    {
        AbiTest test(addr, cbAddr);
        test.HelpersBeforeStartup();
        test.Helpers();
        test.Adapter();
        test.CompletionQueues();
        test.MemoryRegions();
        test.QueuePairs();
        test.SharedReceiveQueues();
        test.Listener();
        test.RejectedConnection();
        test.Connection();
        test.DataTransfer();
        test.Disconnection();
        test.Cleanup();
    }
    WSACleanup();
    Summary();
    printf("End of test: ndabi\n");
    return g_Failed == 0 ? 0 : 1;
}
