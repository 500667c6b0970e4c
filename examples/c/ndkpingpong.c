/*
 * ndkpingpong.c - Send/Receive ping-pong through NDK (include/ndkpi.h): the kernel
 * NDKPI's dispatch tables, NTSTATUS returns and callbacks, in a user-space C program.
 *
 *   ndkpingpong -s ADDR            serve one client on ADDR (port 0: any), print "LISTENING port"
 *   ndkpingpong -c ADDR:PORT [-i N] ping-pong N times (default 10000) and print the latency
 *
 * The server takes its connection through the listener's connect event callback (a
 * provider-created connector handed to the consumer), accepts it with a disconnect event
 * callback, answers every Receive with a Send, and ends when the client disconnects. Every
 * request that returns STATUS_PENDING finishes through its completion callback; work
 * requests complete on the CQ, polled with NdkGetCqResultsEx.
 */
#define _POSIX_C_SOURCE 200809L
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ndkpi.h"

#include <stddef.h>

/* The x64 layouts the library's Rust types have (crates/netdirect/src/ndk). */
_Static_assert(sizeof(NDK_SGE) == 16, "NDK_SGE");
_Static_assert(sizeof(NDK_RESULT) == 24, "NDK_RESULT");
_Static_assert(sizeof(NDK_RESULT_EX) == 40, "NDK_RESULT_EX");
_Static_assert(offsetof(NDK_RESULT_EX, TypeSpecificCompletionOutput) == 32, "NDK_RESULT_EX");
_Static_assert(sizeof(NDK_ADAPTER_INFO) == 0x68, "NDK_ADAPTER_INFO");
_Static_assert(offsetof(NDK_ADAPTER_INFO, AdapterFlags) == 0x5C, "NDK_ADAPTER_INFO");
_Static_assert(offsetof(NDK_CQ, Dispatch) == 40, "NDK object header");

#define MSG 8
#define SLOT 64

static void fail(const char *what, NTSTATUS s)
{
    fprintf(stderr, "ndkpingpong: %s failed: %#010x\n", what, (unsigned)s);
    exit(1);
}

/* One request's completion, waited for by the thread that issued it. */
typedef struct {
    pthread_mutex_t m;
    pthread_cond_t c;
    int done;
    NTSTATUS status;
} Wait;

static void wait_init(Wait *w)
{
    pthread_mutex_init(&w->m, NULL);
    pthread_cond_init(&w->c, NULL);
    w->done = 0;
    w->status = STATUS_PENDING;
}

static void signal_done(Wait *w, NTSTATUS s)
{
    pthread_mutex_lock(&w->m);
    w->status = s;
    w->done = 1;
    pthread_cond_signal(&w->c);
    pthread_mutex_unlock(&w->m);
}

/* NDK_FN_REQUEST_COMPLETION: called once, on the callback thread, for a pending request. */
static void on_request(PVOID ctx, NTSTATUS s) { signal_done((Wait *)ctx, s); }

/* NDK_FN_CLOSE_COMPLETION. */
static void on_close(PVOID ctx) { signal_done((Wait *)ctx, STATUS_SUCCESS); }

static NTSTATUS finish(NTSTATUS s, Wait *w)
{
    if (s != STATUS_PENDING)
        return s; /* inline: no callback comes */
    pthread_mutex_lock(&w->m);
    while (!w->done)
        pthread_cond_wait(&w->c, &w->m);
    pthread_mutex_unlock(&w->m);
    return w->status;
}

/* Run `call` (a request taking on_request and a Wait) to its end. */
#define REQUEST(what, call)                       \
    do {                                          \
        Wait w_;                                  \
        wait_init(&w_);                           \
        NTSTATUS s_ = finish((call), &w_);        \
        if (s_ != STATUS_SUCCESS)                 \
            fail(what, s_);                       \
    } while (0)
#define CB on_request, &w_

static void close_object(NDK_OBJECT_HEADER *obj, NDK_FN_CLOSE_OBJECT close)
{
    Wait w;
    wait_init(&w);
    NTSTATUS s = close(obj, on_close, &w);
    if (s == STATUS_PENDING)
        finish(s, &w);
    else if (s != STATUS_SUCCESS)
        fail("close", s);
}

/* What one side holds. */
typedef struct {
    NDK_ADAPTER *adapter;
    NDK_CQ *cq;
    NDK_PD *pd;
    NDK_QP *qp;
    NDK_MR *mr;
    NDK_CONNECTOR *conn;
    char *buf;
    UINT32 token;
} Side;

static void setup(Side *s, const struct sockaddr *local, ULONG len)
{
    NDK_VERSION v = {NDK_VERSION_1_2};
    NTSTATUS st = NdkOpenAdapter(local, len, v, &s->adapter);
    if (st != STATUS_SUCCESS)
        fail("NdkOpenAdapter", st);
    NDK_ADAPTER_INFO info;
    ULONG size = sizeof info;
    st = s->adapter->Dispatch->NdkQueryAdapterInfo(s->adapter, &info, &size);
    if (st != STATUS_SUCCESS || info.Version.Major != 1 || info.Version.Minor != 2)
        fail("NdkQueryAdapterInfo", st);
    st = s->adapter->Dispatch->NdkCreateCq(s->adapter, 16, NULL, NULL, NULL, NULL, NULL, &s->cq);
    if (st != STATUS_SUCCESS)
        fail("NdkCreateCq", st);
    st = s->adapter->Dispatch->NdkCreatePd(s->adapter, NULL, NULL, &s->pd);
    if (st != STATUS_SUCCESS)
        fail("NdkCreatePd", st);
    st = s->pd->Dispatch->NdkCreateQp(s->pd, s->cq, s->cq, s, 4, 4, 1, 1, 64, NULL, NULL,
                                     &s->qp);
    if (st != STATUS_SUCCESS)
        fail("NdkCreateQp", st);
    st = s->pd->Dispatch->NdkCreateMr(s->pd, FALSE, NULL, NULL, &s->mr);
    if (st != STATUS_SUCCESS)
        fail("NdkCreateMr", st);
    s->buf = aligned_alloc(4096, 4096);
    memset(s->buf, 0, 4096);
    MDL mdl = {NULL, s->buf, 4096};
    REQUEST("NdkRegisterMr", s->mr->Dispatch->NdkRegisterMr(
                                 s->mr, &mdl, 4096, NDK_MR_FLAG_ALLOW_LOCAL_WRITE, CB));
    s->token = s->mr->Dispatch->NdkGetLocalTokenFromMr(s->mr);
}

static void post_receive(Side *s)
{
    NDK_SGE sge;
    sge.VirtualAddress = s->buf + SLOT;
    sge.Length = SLOT;
    sge.MemoryRegionToken = s->token;
    NTSTATUS st = s->qp->Dispatch->NdkReceive(s->qp, s->buf + SLOT, &sge, 1);
    if (st != STATUS_SUCCESS)
        fail("NdkReceive", st);
}

static void send_message(Side *s)
{
    NDK_SGE sge;
    sge.VirtualAddress = s->buf;
    sge.Length = MSG;
    sge.MemoryRegionToken = 0; /* ignored with INLINE */
    NTSTATUS st = s->qp->Dispatch->NdkSend(s->qp, s->buf, &sge, 1, NDK_OP_FLAG_INLINE);
    if (st != STATUS_SUCCESS)
        fail("NdkSend", st);
}

/* Poll until the awaited Receive and/or Send have completed. */
static void reap(Side *s, int recv, int send)
{
    NDK_RESULT_EX r;
    while (recv || send) {
        if (s->cq->Dispatch->NdkGetCqResultsEx(s->cq, &r, 1) == 0)
            continue;
        if (r.Status != STATUS_SUCCESS)
            fail("completion", r.Status);
        if (r.QPContext != s)
            fail("QP context", STATUS_UNSUCCESSFUL);
        if (r.Type == NdkOperationTypeReceive && recv && r.BytesTransferred == MSG)
            recv = 0;
        else if (r.Type == NdkOperationTypeSend && send)
            send = 0;
        else
            fail("unexpected completion", (NTSTATUS)r.Type);
    }
}

static void teardown(Side *s)
{
    close_object(&s->conn->Header, s->conn->Dispatch->NdkCloseConnector);
    close_object(&s->qp->Header, s->qp->Dispatch->NdkCloseQp);
    close_object(&s->mr->Header, s->mr->Dispatch->NdkCloseMr);
    close_object(&s->cq->Header, s->cq->Dispatch->NdkCloseCq);
    close_object(&s->pd->Header, s->pd->Dispatch->NdkClosePd);
    NdkCloseAdapter(s->adapter);
    free(s->buf);
}

/* The listener's connect event: a provider-created connector, now ours. */
static Wait connected;
static NDK_CONNECTOR *incoming;
static void on_connect(PVOID ctx, NDK_CONNECTOR *c)
{
    (void)ctx;
    incoming = c;
    signal_done(&connected, STATUS_SUCCESS);
}

static Wait gone;
static void on_disconnect(PVOID ctx) { signal_done((Wait *)ctx, STATUS_SUCCESS); }

static int parse(const char *text, struct sockaddr_storage *ss, ULONG *len)
{
    char host[128];
    const char *colon = strrchr(text, ':');
    int port = 0;
    size_t n = strlen(text);
    if (text[0] == '[') { /* [v6]:port */
        const char *end = strchr(text, ']');
        if (!end)
            return 0;
        n = (size_t)(end - text - 1);
        memcpy(host, text + 1, n);
        if (end[1] == ':')
            port = atoi(end + 2);
    } else if (colon && strchr(text, ':') == colon) {
        n = (size_t)(colon - text);
        memcpy(host, text, n);
        port = atoi(colon + 1);
    } else {
        memcpy(host, text, n);
    }
    host[n] = 0;
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *v4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *v6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &v4->sin_addr) == 1) {
        v4->sin_family = AF_INET;
        v4->sin_port = htons((uint16_t)port);
        *len = sizeof *v4;
        return 1;
    }
    if (inet_pton(AF_INET6, host, &v6->sin6_addr) == 1) {
        v6->sin6_family = AF_INET6;
        v6->sin6_port = htons((uint16_t)port);
        *len = sizeof *v6;
        return 1;
    }
    return 0;
}

static void serve(const struct sockaddr *addr, ULONG len)
{
    Side s = {0};
    setup(&s, addr, len);
    wait_init(&connected);
    wait_init(&gone);
    NDK_LISTENER *l;
    NTSTATUS st = s.adapter->Dispatch->NdkCreateListener(s.adapter, on_connect, NULL, NULL, NULL, &l);
    if (st != STATUS_SUCCESS)
        fail("NdkCreateListener", st);
    REQUEST("NdkListen", l->Dispatch->NdkListen(l, addr, len, CB));
    struct sockaddr_storage bound;
    ULONG blen = 0;
    /* The size probe first: STATUS_BUFFER_TOO_SMALL and the size needed. */
    st = l->Dispatch->NdkGetListenerLocalAddress(l, NULL, &blen);
    if (st != STATUS_BUFFER_TOO_SMALL || blen != len)
        fail("NdkGetListenerLocalAddress probe", st);
    st = l->Dispatch->NdkGetListenerLocalAddress(l, (struct sockaddr *)&bound, &blen);
    if (st != STATUS_SUCCESS)
        fail("NdkGetListenerLocalAddress", st);
    printf("LISTENING %u\n", ntohs(((struct sockaddr_in *)&bound)->sin_port));
    fflush(stdout);
    finish(STATUS_PENDING, &connected);
    s.conn = incoming;
    post_receive(&s);
    REQUEST("NdkAccept", s.conn->Dispatch->NdkAccept(s.conn, s.qp, 0, 0, NULL, 0, on_disconnect,
                                                     &gone, CB));
    /* The listener may close now: it waits for the connector it handed over. */
    Wait lw;
    wait_init(&lw);
    st = l->Dispatch->NdkCloseListener(&l->Header, on_close, &lw);
    if (st != STATUS_PENDING)
        fail("NdkCloseListener (a connector still holds it)", st);
    long n = 0;
    for (;;) {
        reap(&s, 1, 0);
        post_receive(&s);
        send_message(&s);
        reap(&s, 0, 1);
        n++;
        if (memcmp(s.buf + SLOT, "goodbye!", MSG) == 0)
            break;
    }
    finish(STATUS_PENDING, &gone); /* the client's disconnect */
    s.qp->Dispatch->NdkFlush(s.qp);
    teardown(&s);
    finish(STATUS_PENDING, &lw);
    printf("server: %ld messages, ok\n", n);
}

static void client(const struct sockaddr *dest, ULONG len, long iterations)
{
    Side s = {0};
    struct sockaddr_storage local;
    memcpy(&local, dest, len);
    ((struct sockaddr_in *)&local)->sin_port = 0; /* same offset in sockaddr_in6 */
    setup(&s, (struct sockaddr *)&local, len);
    NTSTATUS st = s.adapter->Dispatch->NdkCreateConnector(s.adapter, NULL, NULL, &s.conn);
    if (st != STATUS_SUCCESS)
        fail("NdkCreateConnector", st);
    post_receive(&s);
    REQUEST("NdkConnect", s.conn->Dispatch->NdkConnect(s.conn, s.qp, (struct sockaddr *)&local, len,
                                                       dest, len, 0, 0, NULL, 0, CB));
    REQUEST("NdkCompleteConnect",
            s.conn->Dispatch->NdkCompleteConnect(s.conn, NULL, NULL, CB));
    memcpy(s.buf, "ping....", MSG);
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long i = 0; i < iterations; i++) {
        send_message(&s);
        reap(&s, 1, 1);
        post_receive(&s);
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    memcpy(s.buf, "goodbye!", MSG);
    send_message(&s);
    reap(&s, 1, 1);
    double us = ((double)(t1.tv_sec - t0.tv_sec) * 1e6 + (double)(t1.tv_nsec - t0.tv_nsec) / 1e3) /
                (double)iterations / 2;
    printf("%ld round trips, %.3f us per half round trip\n", iterations, us);
    REQUEST("NdkDisconnect", s.conn->Dispatch->NdkDisconnect(s.conn, CB));
    teardown(&s);
    printf("client ok\n");
}

int main(int argc, char **argv)
{
    const char *server = NULL, *target = NULL;
    long iterations = 10000;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (strcmp(argv[i], "-s") == 0)
            server = argv[i + 1];
        else if (strcmp(argv[i], "-c") == 0)
            target = argv[i + 1];
        else if (strcmp(argv[i], "-i") == 0)
            iterations = atol(argv[i + 1]);
    }
    struct sockaddr_storage ss;
    ULONG len;
    if ((!server && !target) || !parse(server ? server : target, &ss, &len) || iterations < 1) {
        fprintf(stderr, "usage: ndkpingpong -s ADDR | -c ADDR:PORT [-i N]\n");
        return 2;
    }
    if (server)
        serve((struct sockaddr *)&ss, len);
    else
        client((struct sockaddr *)&ss, len, iterations);
    return 0;
}
