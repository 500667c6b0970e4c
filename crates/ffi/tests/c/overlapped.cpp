// The overlapped-request rules of the C ABI, checked from C++ as a Windows ND program sees
// them: a request returns ND_PENDING and completes through its OVERLAPPED, its event and the
// completion port of its object's overlapped file; a tagged event suppresses the packet;
// synchronous failures deliver nothing; CancelOverlappedRequests queues its ND_CANCELED
// packets in request order before it returns; COM identity and reference counts.
//
// Usage: overlapped <ip>   (the provider is chosen by ND_PROVIDER)

#include <windows.h>
#include <ws2tcpip.h>
#include <ndspi.h>
#include <ndsupport.h>
#include <ndstatus.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

// The provider module entry point (libnetdirect exports it, as an ND provider DLL does).
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

// One packet from the port, or a timeout.
struct Packet {
    BOOL ok;
    DWORD bytes;
    ULONG_PTR key;
    OVERLAPPED* ov;
    DWORD error;
};

static Packet Dequeue(HANDLE port, DWORD ms)
{
    Packet p = {};
    SetLastError(0);
    p.ok = GetQueuedCompletionStatus(port, &p.bytes, &p.key, &p.ov, ms);
    p.error = GetLastError();
    return p;
}

static bool ParseIp(const char* text, sockaddr_storage* out, ULONG* len)
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
    ULONG addrLen = 0;
    if (argc != 2 || !ParseIp(argv[1], &addr, &addrLen)) {
        printf("usage: overlapped <ip>\n");
        return 2;
    }

    CHECK_HR(NdCleanup(), ND_DEVICE_NOT_READY);
    CHECK_HR(NdStartup(), ND_SUCCESS);

    // IND2Provider, reached as Microsoft's helper library reaches a provider.
    IND2Provider* provider = NULL;
    CHECK_HR(DllGetClassObject(IID_IND2Provider, IID_IND2Provider, (void**)&provider), S_OK);
    if (provider != NULL) {
        ULONG cb = 0;
        CHECK_HR(provider->QueryAddressList(NULL, &cb), ND_BUFFER_OVERFLOW);
        CHECK(cb >= sizeof(SOCKET_ADDRESS_LIST), "the size query says %lu", (unsigned long)cb);
        SOCKET_ADDRESS_LIST* list = (SOCKET_ADDRESS_LIST*)malloc(cb);
        CHECK_HR(provider->QueryAddressList(list, &cb), ND_SUCCESS);
        CHECK(list->iAddressCount >= 1, "no address");
        free(list);
        UINT64 id = 0;
        CHECK_HR(provider->ResolveAddress((const sockaddr*)&addr, addrLen, &id), ND_SUCCESS);
        CHECK_HR(provider->ResolveAddress((const sockaddr*)&addr, 8, &id), ND_INVALID_PARAMETER_2);
        IND2Adapter* a2 = NULL;
        CHECK_HR(provider->OpenAdapter(IID_IND2Adapter, id, (void**)&a2), ND_SUCCESS);
        if (a2 != NULL) {
            CHECK(a2->Release() == 0, "the provider's adapter's last Release");
        }
        CHECK(provider->Release() == 0, "the provider's last Release");
    }

    IND2Adapter* adapter = NULL;
    CHECK_HR(NdOpenAdapter(IID_IND2Adapter, (const sockaddr*)&addr, addrLen, (void**)&adapter),
             ND_SUCCESS);
    if (adapter == NULL) {
        printf("no adapter for %s\n", argv[1]);
        return 1;
    }

    // COM identity: the same pointer for IUnknown; nothing for another interface.
    IUnknown* unk = NULL;
    CHECK_HR(adapter->QueryInterface(IID_IUnknown, (void**)&unk), S_OK);
    CHECK(unk == (IUnknown*)adapter, "QueryInterface(IUnknown) gave another pointer");
    CHECK(unk->Release() == 1, "the count after QueryInterface and Release");
    void* none = (void*)1;
    CHECK_HR(adapter->QueryInterface(IID_IND2CompletionQueue, &none), E_NOINTERFACE);
    CHECK(none == NULL, "a refused QueryInterface leaves NULL");
    CHECK(adapter->AddRef() == 2, "AddRef returns the new count");
    CHECK(adapter->Release() == 1, "Release returns the new count");

    HANDLE file = NULL;
    CHECK_HR(adapter->CreateOverlappedFile(&file), ND_SUCCESS);
    HANDLE port = CreateIoCompletionPort(file, NULL, 77, 0);
    CHECK(port != NULL, "CreateIoCompletionPort failed: %u", (unsigned)GetLastError());

    // A region: Register pends, completes through the OVERLAPPED, the event and the port.
    IND2MemoryRegion* mr = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, (void**)&mr), ND_SUCCESS);
    void* wrong = (void*)1;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2Listener, file, &wrong), E_NOINTERFACE);
    CHECK(wrong == NULL, "a refused Create leaves NULL");
    static char buffer[4096];
    OVERLAPPED ov = {};
    ov.hEvent = CreateEvent(NULL, FALSE, FALSE, NULL);
    CHECK_HR(mr->Register(buffer, sizeof(buffer), ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), ND_PENDING);
    CHECK(WaitForSingleObject(ov.hEvent, 20000) == WAIT_OBJECT_0, "the event was not set");
    CHECK(HasOverlappedIoCompleted(&ov), "Internal still says pending");
    Packet p = Dequeue(port, 20000);
    CHECK(p.ok && p.key == 77 && p.ov == &ov, "packet ok=%d key=%lu ov=%p", p.ok,
          (unsigned long)p.key, (void*)p.ov);
    CHECK_HR(mr->GetOverlappedResult(&ov, FALSE), ND_SUCCESS);
    CHECK_HR(mr->GetOverlappedResult(&ov, TRUE), ND_SUCCESS);
    CHECK(ov.Internal == 0, "Internal is the final status");

    // Synchronous failures deliver nothing.
    OVERLAPPED bad = {};
    IND2MemoryRegion* mr2 = NULL;
    CHECK_HR(adapter->CreateMemoryRegion(IID_IND2MemoryRegion, file, (void**)&mr2), ND_SUCCESS);
    CHECK_HR(mr2->Register(NULL, 64, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &bad), ND_INVALID_PARAMETER);
    CHECK_HR(mr2->Register(buffer, 0, ND_MR_FLAG_ALLOW_LOCAL_WRITE, &bad), ND_INVALID_BUFFER_SIZE);
    CHECK_HR(mr2->Register(buffer, 64, ND_MR_FLAG_ALLOW_LOCAL_WRITE, NULL), ND_INVALID_PARAMETER_4);
    p = Dequeue(port, 0);
    CHECK(!p.ok && p.ov == NULL && p.error == WAIT_TIMEOUT, "a failed call queued a packet");

    // Bit 0 of hEvent: the event is set, no packet is queued.
    OVERLAPPED tagged = {};
    tagged.hEvent = (HANDLE)((ULONG_PTR)ov.hEvent | 1);
    CHECK_HR(mr->Deregister(&tagged), ND_PENDING);
    CHECK_HR(mr->GetOverlappedResult(&tagged, TRUE), ND_SUCCESS);
    CHECK(WaitForSingleObject(ov.hEvent, 20000) == WAIT_OBJECT_0, "the tagged event was not set");
    p = Dequeue(port, 0);
    CHECK(!p.ok && p.ov == NULL && p.error == WAIT_TIMEOUT, "a tagged request queued a packet");

    // A completion queue: two Notifys, cancelled: both packets are queued, in order, before
    // CancelOverlappedRequests returns, and dequeue as failures with ERROR_OPERATION_ABORTED.
    IND2CompletionQueue* cq = NULL;
    CHECK_HR(adapter->CreateCompletionQueue(IID_IND2CompletionQueue, file, 16, 0, 0, (void**)&cq),
             ND_SUCCESS);
    ND2_RESULT results[4];
    CHECK(cq->GetResults(results, 4) == 0, "an empty queue has no results");
    OVERLAPPED a = {}, b = {};
    CHECK_HR(cq->Notify(ND_CQ_NOTIFY_ANY, &a), ND_PENDING);
    CHECK_HR(cq->Notify(ND_CQ_NOTIFY_ANY, &b), ND_PENDING);
    CHECK_HR(cq->GetOverlappedResult(&a, FALSE), ND_PENDING);
    CHECK_HR(cq->CancelOverlappedRequests(), ND_SUCCESS);
    p = Dequeue(port, 0);
    CHECK(!p.ok && p.ov == &a && p.error == ERROR_OPERATION_ABORTED,
          "first packet ok=%d ov=%p error=%u", p.ok, (void*)p.ov, (unsigned)p.error);
    p = Dequeue(port, 0);
    CHECK(!p.ok && p.ov == &b && p.error == ERROR_OPERATION_ABORTED,
          "second packet ok=%d ov=%p error=%u", p.ok, (void*)p.ov, (unsigned)p.error);
    CHECK_HR(cq->GetOverlappedResult(&a, FALSE), ND_CANCELED);
    CHECK_HR(cq->GetOverlappedResult(&b, TRUE), ND_CANCELED);
    CHECK_HR(cq->Notify(7, &a), ND_INVALID_PARAMETER_1);

    // Objects passed as IUnknown* are recognised; anything else is refused with its number.
    IND2QueuePair* qp = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, cq, NULL, 4, 4, 1, 1, 0, (void**)&qp),
             ND_SUCCESS);
    IND2QueuePair* qp2 = NULL;
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, mr, cq, NULL, 4, 4, 1, 1, 0, (void**)&qp2),
             ND_INVALID_PARAMETER_2);
    CHECK_HR(adapter->CreateQueuePair(IID_IND2QueuePair, cq, mr, NULL, 4, 4, 1, 1, 0, (void**)&qp2),
             ND_INVALID_PARAMETER_3);

    // A Receive then a Flush on a queue pair never connected: the completion says ND_CANCELED
    // with the request's context.
    CHECK_HR(mr->Register(buffer, sizeof(buffer), ND_MR_FLAG_ALLOW_LOCAL_WRITE, &ov), ND_PENDING);
    CHECK_HR(mr->GetOverlappedResult(&ov, TRUE), ND_SUCCESS);
    ND2_SGE sge = { buffer, 64, mr->GetLocalToken() };
    CHECK_HR(qp->Receive((void*)0x1234, &sge, 1), ND_SUCCESS);
    CHECK_HR(qp->Flush(), ND_SUCCESS);
    ULONG n = 0;
    for (int i = 0; i < 1000000 && n == 0; i++) {
        n = cq->GetResults(results, 4);
    }
    CHECK(n == 1 && results[0].Status == ND_CANCELED && results[0].RequestContext == (void*)0x1234 &&
              results[0].RequestType == Nd2RequestTypeReceive,
          "n=%lu status=0x%08x", (unsigned long)n, (unsigned)results[0].Status);

    // Releasing: each object's last Release returns 0, in any order (the queue pair keeps its
    // completion queue).
    CHECK(cq->Release() == 0, "the CQ's last Release");
    CHECK(qp->Release() == 0, "the QP's last Release");
    CHECK_HR(mr->Deregister(&ov), ND_PENDING);
    CHECK_HR(mr->GetOverlappedResult(&ov, TRUE), ND_SUCCESS);
    CHECK(mr->Release() == 0, "the MR's last Release");
    CHECK(mr2->Release() == 0, "the second MR's last Release");
    CHECK(CloseHandle(file), "CloseHandle(file)");
    CHECK(!CloseHandle(file) && GetLastError() == ERROR_INVALID_HANDLE, "a double close");
    CHECK(CloseHandle(port), "CloseHandle(port)");
    CHECK(CloseHandle(ov.hEvent), "CloseHandle(event)");
    CHECK(adapter->Release() == 0, "the adapter's last Release");
    CHECK_HR(NdCleanup(), ND_SUCCESS);

    printf("overlapped: %d checks, %d failed\n", checks, failures);
    return failures == 0 ? 0 : 1;
}
