// Every ND v1 interface method through the C ABI (the "HPC Pack 2008 SDK interface" of
// ndspi.h), from C++, with the statuses v1 documents: INDProvider through DllGetClassObject,
// NdOpenV1Adapter, NdOpenAdapter(IID_INDAdapter), NdQueryAddressList's v1/v2 exclusion
// flags, the adapter's one overlapped file and a completion port on it, Listen's statuses,
// a connection with private data both ways between two connectors of one adapter, request
// batching, Bind/Read/Write through an ND_MW_DESCRIPTOR, SendAndInvalidate (where the
// provider has it), Invalidate, addresses, Flush, Reject, release with a request pending.
//
// Usage: v1methods <ip>   (the provider is chosen by ND_PROVIDER)

#include <windows.h>
#include <ws2tcpip.h>
#include <ndspi.h>
#include <ndsupport.h>
#include <ndstatus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

extern "C" HRESULT DllGetClassObject(REFCLSID clsid, REFIID iid, void** pp);

static int failures = 0;
static int checks = 0;

#define CHECK(cond, ...)                                                   \
    do {                                                                   \
        ++checks;                                                          \
        if (!(cond)) {                                                     \
            ++failures;                                                    \
            printf("FAIL line %d: %s: ", __LINE__, #cond);                 \
            printf(__VA_ARGS__);                                           \
            printf("\n");                                                  \
        }                                                                  \
    } while (0)

#define CHECK_HR(expr, want)                                               \
    do {                                                                   \
        HRESULT hr_ = (expr);                                              \
        CHECK(hr_ == (HRESULT)(want), "%s returned 0x%08x, want 0x%08x",   \
              #expr, (unsigned)hr_, (unsigned)(want));                     \
    } while (0)

static const DWORD WAIT_MS = 20000;
static const int NRESULTS = 16;

static ND_RESULT results[NRESULTS];
static bool seen[NRESULTS];

// Reap until results[i] has come back (or the bound passes); every pointer must be ours.
static bool WaitResult(INDCompletionQueue* cq, int i)
{
    ULONGLONG deadline = GetTickCount64() + WAIT_MS;
    while (!seen[i]) {
        ND_RESULT* got[4];
        SIZE_T n = cq->GetResults(got, 4);
        for (SIZE_T k = 0; k < n; k++) {
            ptrdiff_t at = got[k] - results;
            CHECK(at >= 0 && at < NRESULTS, "GetResults returned a pointer never posted");
            if (at >= 0 && at < NRESULTS)
                seen[at] = true;
        }
        if (n == 0 && GetTickCount64() > deadline) {
            CHECK(false, "result %d never came", i);
            return false;
        }
    }
    return true;
}

// Complete an overlapped request of `obj` (bounded): its final status.
static HRESULT Finish(INDOverlapped* obj, OVERLAPPED* ov, HRESULT hr)
{
    if (hr != ND_PENDING)
        return hr;
    if (WaitForSingleObject((HANDLE)((ULONG_PTR)ov->hEvent & ~(ULONG_PTR)3), WAIT_MS) !=
        WAIT_OBJECT_0) {
        CHECK(false, "a request never completed");
        return ND_PENDING;
    }
    SIZE_T bytes = 99;
    hr = obj->GetOverlappedResult(ov, &bytes, TRUE);
    CHECK(bytes == 0, "GetOverlappedResult's byte count %zu", (size_t)bytes);
    return hr;
}

struct Ov : OVERLAPPED {
    // Tagged event (bit 0): no packet to the port.
    explicit Ov(bool packet = false)
    {
        memset(static_cast<OVERLAPPED*>(this), 0, sizeof(OVERLAPPED));
        event = CreateEvent(NULL, TRUE, FALSE, NULL);
        hEvent = packet ? event : (HANDLE)((ULONG_PTR)event | 1);
    }
    ~Ov() { CloseHandle(event); }
    HANDLE event;
};

// A network-order (big-endian) 64-bit field, in host order.
static UINT64 Be64(UINT64 v)
{
    const unsigned char* b = (const unsigned char*)&v;
    UINT64 r = 0;
    for (int i = 0; i < 8; i++)
        r = (r << 8) | b[i];
    return r;
}

static bool ParseIp(const char* text, sockaddr_storage* out, SIZE_T* len)
{
    memset(out, 0, sizeof(*out));
    sockaddr_in* v4 = (sockaddr_in*)out;
    sockaddr_in6* v6 = (sockaddr_in6*)out;
    if (inet_pton(AF_INET, text, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        *len = sizeof(*v4);
        return true;
    }
    if (inet_pton(AF_INET6, text, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        *len = sizeof(*v6);
        return true;
    }
    return false;
}

int main(int argc, char** argv)
{
    sockaddr_storage addr;
    SIZE_T addrLen = 0;
    if (argc != 2 || !ParseIp(argv[1], &addr, &addrLen)) {
        printf("usage: v1methods <ip>\n");
        return 2;
    }
    CHECK_HR(NdStartup(), ND_SUCCESS);

    // ---- INDProvider, NdQueryAddressList, the v1 opens ----
    INDProvider* provider = NULL;
    CHECK_HR(DllGetClassObject(IID_INDProvider, IID_INDProvider, (void**)&provider), S_OK);
    if (provider != NULL) {
        SIZE_T cb = 0;
        CHECK_HR(provider->QueryAddressList(NULL, &cb), ND_BUFFER_OVERFLOW);
        SOCKET_ADDRESS_LIST* list = (SOCKET_ADDRESS_LIST*)malloc(cb);
        CHECK_HR(provider->QueryAddressList(list, &cb), ND_SUCCESS);
        CHECK(list->iAddressCount >= 1, "no address");
        free(list);
        INDAdapter* a = NULL;
        CHECK_HR(provider->OpenAdapter((const sockaddr*)&addr, addrLen, &a), ND_SUCCESS);
        if (a != NULL)
            CHECK(a->Release() == 0, "the provider's adapter's last Release");
        CHECK(provider->Release() == 0, "the provider's last Release");
    }
    SIZE_T cbAll = 0, cbV2 = 0, cbV1 = 0, cbNone = 1;
    CHECK_HR(NdQueryAddressList(0, NULL, &cbAll), ND_BUFFER_OVERFLOW);
    CHECK_HR(NdQueryAddressList(ND_QUERY_EXCLUDE_NDv1_ADDRESSES, NULL, &cbV2), ND_BUFFER_OVERFLOW);
    CHECK_HR(NdQueryAddressList(ND_QUERY_EXCLUDE_NDv2_ADDRESSES, NULL, &cbV1), ND_BUFFER_OVERFLOW);
    CHECK_HR(NdQueryAddressList(ND_QUERY_EXCLUDE_NDv1_ADDRESSES | ND_QUERY_EXCLUDE_NDv2_ADDRESSES,
                                NULL, &cbNone),
             ND_SUCCESS);
    CHECK(cbAll > 0 && cbV1 == cbAll && cbV2 == cbAll && cbNone == 0,
          "sizes all %zu v2-only %zu v1-only %zu none %zu", (size_t)cbAll, (size_t)cbV2,
          (size_t)cbV1, (size_t)cbNone);
    {
        INDAdapter* a = NULL;
        CHECK_HR(NdOpenAdapter(IID_INDAdapter, (const sockaddr*)&addr, addrLen, (void**)&a),
                 ND_SUCCESS);
        if (a != NULL)
            a->Release();
    }
    INDAdapter* adapter = NULL;
    CHECK_HR(NdOpenV1Adapter((const sockaddr*)&addr, addrLen, &adapter), ND_SUCCESS);
    if (adapter == NULL) {
        printf("no v1 adapter for %s\n", argv[1]);
        return 1;
    }

    // ---- INDAdapter: identity, Query, Control, the file handle ----
    void* p = NULL;
    CHECK_HR(adapter->QueryInterface(IID_INDOverlapped, &p), S_OK);
    CHECK(p == adapter, "QueryInterface(IID_INDOverlapped) is the same object");
    if (p != NULL)
        adapter->Release();
    CHECK_HR(adapter->QueryInterface(IID_IND2Adapter, &p), E_NOINTERFACE);
    SIZE_T cbInfo = 0;
    CHECK_HR(adapter->Query(2, NULL, &cbInfo), ND_NOT_SUPPORTED);
    CHECK_HR(adapter->Query(1, NULL, &cbInfo), ND_BUFFER_OVERFLOW);
    CHECK(cbInfo == sizeof(ND_ADAPTER_INFO1), "ND_ADAPTER_INFO1 is %zu bytes", (size_t)cbInfo);
    ND_ADAPTER_INFO1 info;
    CHECK_HR(adapter->Query(1, &info, &cbInfo), ND_SUCCESS);
    CHECK(info.MaxCqEntries >= 16 && info.MaxInlineData > 0, "Query(1) limits");
    SIZE_T returned = 7;
    CHECK_HR(adapter->Control(0, NULL, 0, NULL, 0, &returned, NULL), ND_NOT_SUPPORTED);
    HANDLE file = adapter->GetFileHandle();
    CHECK(file != NULL && file != INVALID_HANDLE_VALUE && adapter->GetFileHandle() == file,
          "one file handle per adapter");
    HANDLE port = CreateIoCompletionPort(file, NULL, 7, 0);
    CHECK(port != NULL, "CreateIoCompletionPort on the adapter's file");

    // ---- INDCompletionQueue: Resize, Notify (a packet on the port), Cancel ----
    INDCompletionQueue* cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(16, &cq), ND_SUCCESS);
    CHECK_HR(cq->Resize(0), ND_INVALID_PARAMETER);
    HRESULT hr = cq->Resize(32);
    CHECK(hr == ND_SUCCESS || hr == ND_NOT_SUPPORTED, "Resize(32) 0x%08x", (unsigned)hr);
    {
        Ov ov(true);
        CHECK_HR(cq->Notify(ND_CQ_NOTIFY_ANY, &ov), ND_PENDING);
        CHECK_HR(cq->CancelOverlappedRequests(), ND_SUCCESS);
        DWORD bytes;
        ULONG_PTR key = 0;
        OVERLAPPED* got = NULL;
        CHECK(GetQueuedCompletionStatus(port, &bytes, &key, &got, WAIT_MS) == FALSE &&
                  got == &ov && key == 7,
              "the cancelled Notify's packet, through the adapter's file");
        CHECK(ov.Internal == (ULONG_PTR)(ULONG)ND_CANCELED, "Internal 0x%lx", (unsigned long)ov.Internal);
    }

    // ---- Memory ----
    const SIZE_T len = 64 * 1024;
    char* buf = (char*)calloc(1, len);
    ND_MR_HANDLE mr = NULL;
    {
        Ov ov;
        CHECK_HR(Finish(adapter, &ov, adapter->RegisterMemory(buf, len, &ov, &mr)), ND_SUCCESS);
        CHECK(mr != NULL, "RegisterMemory's handle");
    }

    // ---- INDAdapter::Listen's statuses ----
    INDListen* listen = NULL;
    USHORT portN = 0;
    CHECK_HR(adapter->Listen(0, 6, 0, NULL, &listen), ND_INVALID_PARAMETER_MIX);
    CHECK_HR(adapter->Listen(0, 17, 0, &portN, &listen), ND_INVALID_PARAMETER_2);
    CHECK_HR(adapter->Listen(0, 6, 0, &portN, &listen), ND_SUCCESS);
    CHECK(ntohs(portN) >= 49152, "assigned port %u", (unsigned)ntohs(portN));
    INDListen* again = NULL;
    CHECK_HR(adapter->Listen(0, 6, portN, NULL, &again), ND_ADDRESS_ALREADY_EXISTS);

    // ---- A connection between two connectors of this adapter ----
    sockaddr_storage to = addr;
    ((sockaddr_in*)&to)->sin_port = portN; // same offset for IPv6
    INDConnector* sc = NULL;
    INDConnector* cc = NULL;
    CHECK_HR(adapter->CreateConnector(&sc), ND_SUCCESS);
    CHECK_HR(adapter->CreateConnector(&cc), ND_SUCCESS);
    Ov ovReq, ovConn, ovAcc, ovCc;
    HRESULT req = listen->GetConnectionRequest(sc, &ovReq);
    CHECK_HR(req, ND_PENDING);
    SIZE_T inl = 0;
    INDEndpoint* cep = NULL;
    INDEndpoint* sep = NULL;
    INDEndpoint* extra = NULL;
    CHECK_HR(cc->CreateEndpoint(cq, cq, 8, 8, 2, 2, 1, 1, &inl, &cep), ND_SUCCESS);
    CHECK(inl > 0, "pMaxInlineData");
    CHECK_HR(cc->CreateEndpoint(cq, cq, 8, 8, 2, 2, 1, 1, NULL, &extra), ND_NOT_SUPPORTED);
    ND_SGE sge = {buf, 64, mr};
    CHECK_HR(cep->Receive(&results[0], &sge, 1), ND_SUCCESS);
    HRESULT conn = cc->Connect(cep, (const sockaddr*)&to, addrLen, 6, 0, "hi", 2, &ovConn);
    CHECK_HR(conn, ND_PENDING);
    CHECK_HR(Finish(listen, &ovReq, req), ND_SUCCESS);
    SIZE_T cbPd = 0, irl = 0, orl = 0;
    CHECK_HR(sc->GetConnectionData(&irl, &orl, NULL, &cbPd), ND_BUFFER_OVERFLOW);
    CHECK(cbPd >= 2 && irl == 1 && orl == 1, "Connect data: %zu bytes, limits %zu/%zu",
          (size_t)cbPd, (size_t)irl, (size_t)orl);
    char pd[64];
    cbPd = sizeof(pd);
    CHECK_HR(sc->GetConnectionData(NULL, NULL, pd, &cbPd), ND_SUCCESS);
    CHECK(memcmp(pd, "hi", 2) == 0, "the client's private data");
    CHECK_HR(sc->CreateEndpoint(cq, cq, 8, 8, 2, 2, 1, 1, NULL, &sep), ND_SUCCESS);
    ND_SGE s1 = {buf + 64, 64, mr};
    ND_SGE s2 = {buf + 128, 64, mr};
    CHECK_HR(sep->Receive(&results[1], &s1, 1), ND_SUCCESS);
    CHECK_HR(sep->Receive(&results[2], &s2, 1), ND_SUCCESS);
    HRESULT acc = sc->Accept(sep, "yo", 2, &ovAcc);
    CHECK_HR(Finish(cc, &ovConn, conn), ND_SUCCESS);
    cbPd = sizeof(pd);
    CHECK_HR(cc->GetConnectionData(NULL, NULL, pd, &cbPd), ND_SUCCESS);
    CHECK(memcmp(pd, "yo", 2) == 0, "the server's private data");
    CHECK_HR(Finish(cc, &ovCc, cc->CompleteConnect(&ovCc)), ND_SUCCESS);
    CHECK_HR(Finish(sc, &ovAcc, acc), ND_SUCCESS);

    // Addresses, with SIZE_T lengths.
    sockaddr_storage a;
    SIZE_T cbA = 4;
    CHECK_HR(cc->GetLocalAddress((sockaddr*)&a, &cbA), ND_BUFFER_OVERFLOW);
    CHECK(cbA == addrLen, "the size GetLocalAddress needs");
    CHECK_HR(cc->GetLocalAddress((sockaddr*)&a, &cbA), ND_SUCCESS);
    cbA = sizeof(a);
    CHECK_HR(sc->GetPeerAddress((sockaddr*)&a, &cbA), ND_SUCCESS);
    cbA = sizeof(a);
    CHECK_HR(cc->GetPeerAddress((sockaddr*)&a, &cbA), ND_SUCCESS);
    CHECK(((sockaddr_in*)&a)->sin_port == portN, "the client's peer is the listen port");

    // ---- A batch: an inline Send (no hMr) between Start and Submit ----
    ND_SGE ping = {(void*)"ping", 4, NULL};
    cep->StartRequestBatch();
    CHECK_HR(cep->Send(&results[3], &ping, 1, 0), ND_SUCCESS);
    cep->SubmitRequestBatch();
    WaitResult(cq, 3);
    WaitResult(cq, 1);
    CHECK(results[3].Status == ND_SUCCESS && results[1].Status == ND_SUCCESS &&
              results[1].BytesTransferred == 4 && memcmp(buf + 64, "ping", 4) == 0,
          "the batched Send and its Receive");

    // ---- Windows and descriptors ----
    ND_RESULT invalidated;
    INDMemoryWindow* mw = NULL;
    CHECK_HR(adapter->CreateMemoryWindow(&invalidated, &mw), ND_SUCCESS);
    CHECK_HR(mw->QueryInterface(IID_INDMemoryWindow, &p), S_OK);
    if (p != NULL)
        mw->Release();
    ND_MW_DESCRIPTOR desc;
    CHECK_HR(sep->Bind(&results[4], mr, mw, buf + 4096, 4096, 0, &desc), ND_INVALID_PARAMETER_6);
    CHECK_HR(sep->Bind(&results[4], mr, mw, buf + 4096, 4096,
                       ND_OP_FLAG_ALLOW_READ | ND_OP_FLAG_ALLOW_WRITE, &desc),
             ND_SUCCESS);
    WaitResult(cq, 4);
    CHECK(results[4].Status == ND_SUCCESS, "Bind");
    CHECK(Be64(desc.Length) == 4096 && Be64(desc.Base) == (UINT64)(ULONG_PTR)(buf + 4096),
          "the descriptor is big-endian");
    memcpy(buf + 8192, "written through a descriptor", 28);
    ND_SGE w = {buf + 8192, 28, mr};
    CHECK_HR(cep->Write(&results[5], &w, 1, &desc, 16, 0), ND_SUCCESS);
    WaitResult(cq, 5);
    CHECK(results[5].Status == ND_SUCCESS && results[5].BytesTransferred == 28, "Write");
    CHECK(memcmp(buf + 4096 + 16, "written through a descriptor", 28) == 0, "Write's bytes");
    ND_SGE r = {buf + 12288, 28, mr};
    CHECK_HR(cep->Read(&results[6], &r, 1, &desc, 16, 0), ND_SUCCESS);
    WaitResult(cq, 6);
    CHECK(results[6].Status == ND_SUCCESS && memcmp(buf + 12288, buf + 8192, 28) == 0, "Read");

    // SendAndInvalidate where the provider has it: the server's window is then unbound and
    // binds again.
    hr = cep->SendAndInvalidate(&results[7], &ping, 1, &desc, 0);
    if (hr == ND_SUCCESS) {
        WaitResult(cq, 7);
        WaitResult(cq, 2);
        CHECK(results[7].Status == ND_SUCCESS && results[2].Status == ND_SUCCESS,
              "SendAndInvalidate and its Receive");
        CHECK_HR(sep->Bind(&results[8], mr, mw, buf + 4096, 4096, ND_OP_FLAG_ALLOW_READ, &desc),
                 ND_SUCCESS);
        WaitResult(cq, 8);
        CHECK(results[8].Status == ND_SUCCESS, "the invalidated window binds again");
    } else {
        CHECK_HR(hr, ND_NOT_SUPPORTED);
        printf("SendAndInvalidate: not supported by this provider\n");
    }
    CHECK_HR(sep->Invalidate(&results[9], mw, 0), ND_SUCCESS);
    WaitResult(cq, 9);
    CHECK(results[9].Status == ND_SUCCESS, "Invalidate");

    // ---- Flush: an outstanding Receive completes ND_CANCELED; the peer is told ----
    Ov ovNd;
    HRESULT nd = sc->NotifyDisconnect(&ovNd);
    CHECK_HR(nd, ND_PENDING);
    ND_SGE s3 = {buf + 256, 64, mr};
    CHECK_HR(cep->Receive(&results[10], &s3, 1), ND_SUCCESS);
    CHECK_HR(cep->Flush(), ND_SUCCESS);
    WaitResult(cq, 10);
    CHECK(results[10].Status == ND_CANCELED, "a flushed Receive: 0x%08x", (unsigned)results[10].Status);
    hr = Finish(sc, &ovNd, nd);
    CHECK(hr != ND_PENDING, "NotifyDisconnect after the peer's Flush");

    // ---- Reject ----
    INDConnector* sc2 = NULL;
    INDConnector* cc2 = NULL;
    INDEndpoint* cep2 = NULL;
    CHECK_HR(adapter->CreateConnector(&sc2), ND_SUCCESS);
    CHECK_HR(adapter->CreateConnector(&cc2), ND_SUCCESS);
    CHECK_HR(cc2->CreateEndpoint(cq, cq, 2, 2, 1, 1, 0, 0, NULL, &cep2), ND_SUCCESS);
    Ov ovReq2, ovConn2;
    req = listen->GetConnectionRequest(sc2, &ovReq2);
    conn = cc2->Connect(cep2, (const sockaddr*)&to, addrLen, 6, 0, NULL, 0, &ovConn2);
    CHECK_HR(Finish(listen, &ovReq2, req), ND_SUCCESS);
    CHECK_HR(sc2->Reject("no", 2), ND_SUCCESS);
    CHECK_HR(Finish(cc2, &ovConn2, conn), ND_CONNECTION_REFUSED);

    // ---- Releasing the listener ends its pending request ----
    INDConnector* sc3 = NULL;
    CHECK_HR(adapter->CreateConnector(&sc3), ND_SUCCESS);
    Ov ovReq3;
    CHECK_HR(listen->GetConnectionRequest(sc3, &ovReq3), ND_PENDING);
    CHECK(listen->Release() == 0, "the listener's last Release");
    CHECK(WaitForSingleObject(ovReq3.event, WAIT_MS) == WAIT_OBJECT_0 &&
              ovReq3.Internal == (ULONG_PTR)(ULONG)ND_CANCELED,
          "a pending GetConnectionRequest at release: 0x%lx", (unsigned long)ovReq3.Internal);

    // ---- Teardown, in any order ----
    CHECK(mw->Release() == 0, "the window's last Release");
    CHECK(cep->Release() == 0 && sep->Release() == 0 && cep2->Release() == 0, "endpoints");
    CHECK(cc->Release() == 0 && sc->Release() == 0 && cc2->Release() == 0 &&
              sc2->Release() == 0 && sc3->Release() == 0,
          "connectors");
    {
        Ov ov;
        CHECK_HR(Finish(adapter, &ov, adapter->DeregisterMemory(mr, &ov)), ND_SUCCESS);
        CHECK_HR(adapter->DeregisterMemory(mr, &ov), ND_INVALID_PARAMETER_1);
    }
    CHECK(cq->Release() == 0, "the CQ's last Release");
    // The application may close the adapter's file handle (v1: nothing breaks); a handle made
    // after it may get its number, and the adapter's release must leave that one alone.
    CHECK(CloseHandle(file), "CloseHandle on the adapter's file");
    HANDLE later = CreateEvent(NULL, TRUE, FALSE, NULL);
    CHECK(adapter->Release() == 0, "the adapter's last Release");
    CHECK(SetEvent(later) && WaitForSingleObject(later, 0) == WAIT_OBJECT_0,
          "a handle made after the file was closed survives the adapter's release");
    CloseHandle(later);
    CloseHandle(port);
    free(buf);
    CHECK_HR(NdCleanup(), ND_SUCCESS);
    printf("%d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
