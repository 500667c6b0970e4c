/*
 * ndv1pingpong.c - Send/Receive ping-pong latency over the ND v1 interfaces
 * (INDAdapter, INDConnector, INDEndpoint, ...; the "HPC Pack 2008 SDK"
 * section of ndspi.h, what MS-MPI programs use), in C.
 *
 * The v1 programming model, as nd-v1 programs have it:
 *
 *  - the adapter is opened by IP address (NdOpenV1Adapter), and every
 *    overlapped request of the adapter and of its objects completes through
 *    its one file handle (INDAdapter::GetFileHandle); with -b the program
 *    associates it with a completion port and sleeps on the completion
 *    queue's Notify there;
 *  - memory is registered by handle (ND_MR_HANDLE); an SGE without one is
 *    sent inline;
 *  - the server Listens in one call (INDAdapter::Listen: backlog, protocol,
 *    port in network byte order) and takes the request into a connector it
 *    made; endpoints come from connectors, with their read limits;
 *  - a request's identity is the caller's ND_RESULT: GetResults hands back
 *    those pointers.
 *
 * The client sends `size` bytes, the server answers each Receive with a Send
 * of the same size; the latency is half a round trip. The client passes its
 * plan (size, iterations) as Connect private data. Every wait is bounded.
 * Any failure prints the failing call and its HRESULT and exits non-zero.
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

#define DEFAULT_PORT 54328
#define DEFAULT_SIZE 8
#define DEFAULT_ITERATIONS 1000
#define MAX_SIZE 4096
#define DEPTH 4
#define ND_V1_PROTOCOL 6 /* IPPROTO_TCP: the protocol MS-MPI and ndconn name */
#define PLAN_MAGIC 0x31564E44 /* "DNV1" */
#define TIMEOUT_MS ND_EXAMPLE_TIMEOUT_MS

/* The client's plan, sent as Connect private data. */
typedef struct _Plan {
    ULONG magic;
    ULONG size;
    ULONG iterations;
} Plan;

typedef struct _Test {
    INDAdapter *pAdapter;
    HANDLE hFile;     /* the adapter's one overlapped file */
    HANDLE hPort;     /* -b: the completion port it is associated with */
    HANDLE hEvent;    /* the event of `ov` */
    INDCompletionQueue *pCq;
    INDConnector *pConnector;
    INDEndpoint *pEndpoint;
    ND_MR_HANDLE hMr;
    char *pBuf;       /* [send 0 | send 1 | receive slot 0 | receive slot 1] */
    ND_RESULT recv[2];
    ND_RESULT send[2]; /* the server's answer may still be unreaped at the next ping */
    ULONG sent;
    OVERLAPPED ov;    /* connection requests: event only, no port packet */
    OVERLAPPED cqOv;  /* -b: the CQ's Notify, reaped from the port */
    SIZE_T maxInline;
    BOOL blocking;
} Test;

static void ShowUsage(void)
{
    printf("ndv1pingpong [options] <ip>[:<port>]\n"
           "Options:\n"
           "\t-s            - start as server (listen on IP/Port)\n"
           "\t-c            - start as client (connect to server IP/Port)\n"
           "\t-b            - blocking: sleep on the CQ's Notify through a completion port\n"
           "\t-i <count>    - iterations (default %u)\n"
           "\t-z <bytes>    - message size, 1..%u (default %u)\n"
           "\t<ip>[:<port>] - the server's address (default port %u)\n",
           DEFAULT_ITERATIONS, MAX_SIZE, DEFAULT_SIZE, DEFAULT_PORT);
}

/* Completes an overlapped v1 request: ND_PENDING waits (bounded) on the
 * event, then asks the object (INDOverlapped::GetOverlappedResult). */
static HRESULT WaitV1(Test *t, INDOverlapped *pObj, HRESULT hr, const char *what)
{
    SIZE_T bytes;
    while (hr == ND_PENDING) {
        if (WaitForSingleObject(t->hEvent, TIMEOUT_MS) != WAIT_OBJECT_0) {
            printf("%s: timed out after %u ms\n", what, (unsigned)TIMEOUT_MS);
            FailMsg("timeout");
        }
        hr = pObj->lpVtbl->GetOverlappedResult(pObj, &t->ov, &bytes, TRUE);
    }
    if (FAILED(hr))
        Fail(what, hr);
    return hr;
}

/* Starts a connection request on `ov`: its event reset. */
static OVERLAPPED *Ov(Test *t)
{
    ResetEvent(t->hEvent);
    return &t->ov;
}

/* The next completion: polling GetResults, or (-b) Notify and the port. */
static ND_RESULT *Next(Test *t)
{
    ND_RESULT *pResult = NULL;
    ULONGLONG deadline = GetTickCount64() + TIMEOUT_MS;
    ULONG spins = 0;
    for (;;) {
        if (t->pCq->lpVtbl->GetResults(t->pCq, &pResult, 1) == 1)
            return pResult;
        if (t->blocking) {
            DWORD bytes;
            ULONG_PTR key;
            OVERLAPPED *pOv = NULL;
            HRESULT hr = t->pCq->lpVtbl->Notify(t->pCq, ND_CQ_NOTIFY_ANY, &t->cqOv);
            if (hr != ND_PENDING && FAILED(hr))
                Fail("INDCompletionQueue::Notify", hr);
            /* Notify's race rule: a result that arrived after the empty poll
             * completes it at once. */
            if (!GetQueuedCompletionStatus(t->hPort, &bytes, &key, &pOv, TIMEOUT_MS))
                Fail("GetQueuedCompletionStatus", HRESULT_FROM_WIN32(GetLastError()));
            if (pOv != &t->cqOv)
                FailMsg("a completion packet for another request");
        } else if ((++spins & 0xFFF) == 0 && GetTickCount64() > deadline) {
            FailMsg("timed out waiting for a completion");
        }
    }
}

static ND_SGE Sge(Test *t, SIZE_T offset, SIZE_T len)
{
    ND_SGE s;
    s.pAddr = t->pBuf + offset;
    s.Length = len;
    s.hMr = t->hMr;
    return s;
}

static void PostReceive(Test *t, int slot)
{
    ND_SGE s = Sge(t, MAX_SIZE * (2 + slot), MAX_SIZE);
    HRESULT hr = t->pEndpoint->lpVtbl->Receive(t->pEndpoint, &t->recv[slot], &s, 1);
    if (FAILED(hr))
        Fail("INDEndpoint::Receive", hr);
}

/* Sends `size` bytes of send area `t->sent & 1` (`from`, when given, copied there
 * first): inline (no hMr) when they fit, else registered. Two areas and two
 * ND_RESULTs: the previous answer may not be reaped yet. */
static void Send(Test *t, ULONG size, const char *from)
{
    ULONG k = t->sent++ & 1;
    ND_SGE s = Sge(t, (SIZE_T)MAX_SIZE * k, size);
    HRESULT hr;
    if (from != NULL)
        memcpy(t->pBuf + (SIZE_T)MAX_SIZE * k, from, size);
    if (size <= t->maxInline)
        s.hMr = NULL;
    hr = t->pEndpoint->lpVtbl->Send(t->pEndpoint, &t->send[k], &s, 1, 0);
    if (FAILED(hr))
        Fail("INDEndpoint::Send", hr);
}

/* Waits for the Send and the Receive of one round, in either order; returns
 * the Receive's slot. */
static int Round(Test *t, ULONG size)
{
    BOOL sent = FALSE;
    int slot = -1;
    while (!sent || slot < 0) {
        ND_RESULT *p = Next(t);
        if (p->Status != ND_SUCCESS)
            Fail("a request", p->Status);
        if (p == &t->send[0] || p == &t->send[1]) {
            sent = TRUE;
        } else if (p == &t->recv[0] || p == &t->recv[1]) {
            if (p->BytesTransferred != size) {
                printf("received %u bytes, expected %u\n", (unsigned)p->BytesTransferred, size);
                FailMsg("size check failed");
            }
            slot = (int)(p - t->recv);
        } else {
            FailMsg("GetResults returned an ND_RESULT that was never posted");
        }
    }
    return slot;
}

static void Init(Test *t, const struct sockaddr *pLocal, SIZE_T cbLocal)
{
    ND_ADAPTER_INFO1 info;
    SIZE_T cb = 0;
    HRESULT hr;

    t->hEvent = CreateEvent(NULL, TRUE, FALSE, NULL);
    if (t->hEvent == NULL)
        Fail("CreateEvent", HRESULT_FROM_WIN32(GetLastError()));
    /* Bit 0 set: the connection requests signal the event and queue no
     * packet to the port. */
    t->ov.hEvent = (HANDLE)((ULONG_PTR)t->hEvent | 1);

    hr = NdOpenV1Adapter(pLocal, cbLocal, &t->pAdapter);
    if (FAILED(hr))
        Fail("NdOpenV1Adapter", hr);
    /* The size probe, then the query. */
    hr = t->pAdapter->lpVtbl->Query(t->pAdapter, 1, NULL, &cb);
    if (hr != ND_BUFFER_OVERFLOW || cb < sizeof(info))
        Fail("INDAdapter::Query (size probe)", hr);
    cb = sizeof(info);
    hr = t->pAdapter->lpVtbl->Query(t->pAdapter, 1, &info, &cb);
    if (FAILED(hr))
        Fail("INDAdapter::Query", hr);
    hr = t->pAdapter->lpVtbl->Control(t->pAdapter, 0, NULL, 0, NULL, 0, NULL, NULL);
    if (hr != ND_NOT_SUPPORTED)
        Fail("INDAdapter::Control", hr);

    t->hFile = t->pAdapter->lpVtbl->GetFileHandle(t->pAdapter);
    if (t->hFile == INVALID_HANDLE_VALUE)
        FailMsg("INDAdapter::GetFileHandle failed");
    if (t->blocking) {
        t->hPort = CreateIoCompletionPort(t->hFile, NULL, 1, 0);
        if (t->hPort == NULL)
            Fail("CreateIoCompletionPort", HRESULT_FROM_WIN32(GetLastError()));
    }

    hr = t->pAdapter->lpVtbl->CreateCompletionQueue(t->pAdapter, DEPTH * 2, &t->pCq);
    if (FAILED(hr))
        Fail("INDAdapter::CreateCompletionQueue", hr);

    t->pBuf = (char *)calloc(4, MAX_SIZE);
    if (t->pBuf == NULL)
        FailMsg("out of memory");
    hr = t->pAdapter->lpVtbl->RegisterMemory(t->pAdapter, t->pBuf, 4 * MAX_SIZE, Ov(t), &t->hMr);
    WaitV1(t, (INDOverlapped *)t->pAdapter, hr, "INDAdapter::RegisterMemory");

    hr = t->pAdapter->lpVtbl->CreateConnector(t->pAdapter, &t->pConnector);
    if (FAILED(hr))
        Fail("INDAdapter::CreateConnector", hr);
}

static void CreateEndpoint(Test *t)
{
    HRESULT hr = t->pConnector->lpVtbl->CreateEndpoint(t->pConnector, t->pCq, t->pCq, DEPTH,
                                                       DEPTH, 1, 1, 0, 0, &t->maxInline,
                                                       &t->pEndpoint);
    if (FAILED(hr))
        Fail("INDConnector::CreateEndpoint", hr);
}

static void RunServer(Test *t, const struct sockaddr *pAddr, SIZE_T cbAddr)
{
    INDListen *pListen;
    Plan plan;
    SIZE_T cbPlan = sizeof(plan);
    USHORT port = ((const struct sockaddr_in *)pAddr)->sin_port; /* same offset for v6 */
    ULONG i, outstanding;
    HRESULT hr;

    Init(t, pAddr, cbAddr);
    /* One call: a listener on the adapter's address, started. */
    hr = t->pAdapter->lpVtbl->Listen(t->pAdapter, 0, ND_V1_PROTOCOL, port, NULL, &pListen);
    if (FAILED(hr))
        Fail("INDAdapter::Listen", hr);
    printf("Listening.\n");
    fflush(stdout);

    hr = pListen->lpVtbl->GetConnectionRequest(pListen, t->pConnector, Ov(t));
    WaitV1(t, (INDOverlapped *)pListen, hr, "INDListen::GetConnectionRequest");
    hr = t->pConnector->lpVtbl->GetConnectionData(t->pConnector, NULL, NULL, &plan, &cbPlan);
    if (FAILED(hr) && hr != ND_BUFFER_OVERFLOW)
        Fail("INDConnector::GetConnectionData", hr);
    if (cbPlan < sizeof(plan) || plan.magic != PLAN_MAGIC || plan.size == 0 ||
        plan.size > MAX_SIZE) {
        t->pConnector->lpVtbl->Reject(t->pConnector, NULL, 0);
        FailMsg("the client's plan is not one of ours");
    }

    CreateEndpoint(t);
    PostReceive(t, 0);
    PostReceive(t, 1);
    hr = t->pConnector->lpVtbl->Accept(t->pConnector, t->pEndpoint, NULL, 0, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::Accept");

    /* Answer each ping, repost its Receive; reap the answers as they complete. */
    i = 0;
    outstanding = 0;
    while (i < plan.iterations || outstanding > 0) {
        ND_RESULT *p = Next(t);
        if (p->Status != ND_SUCCESS)
            Fail("a request", p->Status);
        if (p == &t->send[0] || p == &t->send[1]) {
            outstanding--;
        } else if ((p == &t->recv[0] || p == &t->recv[1]) && i < plan.iterations) {
            if (p->BytesTransferred != plan.size)
                FailMsg("a ping of the wrong size");
            /* The pong echoes the ping. */
            Send(t, plan.size, t->pBuf + (SIZE_T)MAX_SIZE * (2 + (p - t->recv)));
            outstanding++;
            PostReceive(t, (int)(p - t->recv));
            i++;
        } else {
            FailMsg("GetResults returned an unexpected ND_RESULT");
        }
    }

    /* The client disconnects first. */
    hr = t->pConnector->lpVtbl->NotifyDisconnect(t->pConnector, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::NotifyDisconnect");
    hr = t->pConnector->lpVtbl->Disconnect(t->pConnector, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::Disconnect");
    pListen->lpVtbl->Release(pListen);
}

static void RunClient(Test *t, const struct sockaddr *pLocal, SIZE_T cbLocal,
                      const struct sockaddr *pAddr, SIZE_T cbAddr, ULONG size, ULONG iterations)
{
    Plan plan = { PLAN_MAGIC, size, iterations };
    LARGE_INTEGER freq, start, end;
    SIZE_T irl = 0, orl = 0, cb = 0;
    ULONG i;
    HRESULT hr;
    int slot;

    Init(t, pLocal, cbLocal);
    CreateEndpoint(t);
    PostReceive(t, 0);
    PostReceive(t, 1);
    /* The destination's port is the server's listen port; LocalPort 0: any. */
    hr = t->pConnector->lpVtbl->Connect(t->pConnector, t->pEndpoint, pAddr, cbAddr,
                                        ND_V1_PROTOCOL, 0, &plan, sizeof(plan), Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::Connect");
    hr = t->pConnector->lpVtbl->GetConnectionData(t->pConnector, &irl, &orl, NULL, &cb);
    if (FAILED(hr) && hr != ND_BUFFER_OVERFLOW)
        Fail("INDConnector::GetConnectionData", hr);
    hr = t->pConnector->lpVtbl->CompleteConnect(t->pConnector, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::CompleteConnect");

    memset(t->pBuf, 'v', 2 * MAX_SIZE);
    QueryPerformanceFrequency(&freq);
    QueryPerformanceCounter(&start);
    for (i = 0; i < iterations; i++) {
        t->pBuf[i & 1 ? MAX_SIZE : 0] = (char)i; /* each ping differs */
        Send(t, size, NULL);
        slot = Round(t, size);
        if (memcmp(t->pBuf + (SIZE_T)MAX_SIZE * (2 + slot), t->pBuf + (SIZE_T)MAX_SIZE * (i & 1),
                   size) != 0)
            FailMsg("the pong differs from the ping");
        PostReceive(t, slot);
    }
    QueryPerformanceCounter(&end);
    printf("%u bytes, %u iterations: %.2f us per half round trip\n", size, iterations,
           (double)(end.QuadPart - start.QuadPart) * 1e6 / (double)freq.QuadPart /
               (2.0 * iterations));

    hr = t->pConnector->lpVtbl->Disconnect(t->pConnector, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pConnector, hr, "INDConnector::Disconnect");
}

static void Shutdown(Test *t)
{
    HRESULT hr;
    if (t->pEndpoint)
        t->pEndpoint->lpVtbl->Release(t->pEndpoint);
    if (t->pConnector)
        t->pConnector->lpVtbl->Release(t->pConnector);
    if (t->pCq)
        t->pCq->lpVtbl->Release(t->pCq);
    hr = t->pAdapter->lpVtbl->DeregisterMemory(t->pAdapter, t->hMr, Ov(t));
    WaitV1(t, (INDOverlapped *)t->pAdapter, hr, "INDAdapter::DeregisterMemory");
    if (t->hPort)
        CloseHandle(t->hPort);
    t->pAdapter->lpVtbl->Release(t->pAdapter);
    CloseHandle(t->hEvent);
    free(t->pBuf);
}

int __cdecl _tmain(int argc, TCHAR *argv[])
{
    BOOL bServer = FALSE, bClient = FALSE;
    ULONG size = DEFAULT_SIZE, iterations = DEFAULT_ITERATIONS;
    SOCKADDR_INET addr;
    ULONG cbAddr;
    WSADATA wsaData;
    HRESULT hr;
    Test t;
    int i, ret;

    ZeroMemory(&t, sizeof(t));
    for (i = 1; i < argc - 1; i++) {
        TCHAR *arg = argv[i];
        if (_tcscmp(arg, _T("-s")) == 0) {
            bServer = TRUE;
        } else if (_tcscmp(arg, _T("-c")) == 0) {
            bClient = TRUE;
        } else if (_tcscmp(arg, _T("-b")) == 0) {
            t.blocking = TRUE;
        } else if (_tcscmp(arg, _T("-i")) == 0 && i + 1 < argc - 1) {
            iterations = (ULONG)_ttol(argv[++i]);
        } else if (_tcscmp(arg, _T("-z")) == 0 && i + 1 < argc - 1) {
            size = (ULONG)_ttol(argv[++i]);
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
    if (iterations == 0 || size == 0 || size > MAX_SIZE) {
        printf("Invalid -i or -z value.\n\n");
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

    printf("Beginning test: ndv1pingpong\n");
    fflush(stdout);
    if (bServer) {
        RunServer(&t, (const struct sockaddr *)&addr, cbAddr);
    } else {
        SOCKADDR_INET local;
        SIZE_T cbLocal = sizeof(local);
        hr = NdResolveAddress((const struct sockaddr *)&addr, cbAddr,
                              (struct sockaddr *)&local, &cbLocal);
        if (FAILED(hr))
            Fail("NdResolveAddress", hr);
        RunClient(&t, (const struct sockaddr *)&local, cbLocal,
                  (const struct sockaddr *)&addr, cbAddr, size, iterations);
    }
    Shutdown(&t);

    hr = NdCleanup();
    if (FAILED(hr))
        Fail("NdCleanup", hr);
    WSACleanup();
    printf("End of test: ndv1pingpong\n");
    return 0;
}
