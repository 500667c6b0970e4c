/*
 * ndw_stub.c - a test double for libnetdirect's C exports, so that the ABI
 * tests link and run without the library.
 *
 * It defines every function the headers declare as exported (the ndw_*
 * Win32 functions and the Nd* helpers) with the exact declared signature
 * (compiling it against the headers checks that), a working thread-local
 * last error (WSAStringToAddress and InetPton set it), and failures for
 * everything else.  It also defines IID_IUnknown strongly, as the library
 * does, to show that a program's weak INITGUID copy links beside it.
 * It is NOT an implementation: the real one is crates/ffi.
 */
#include <windows.h>
#include <ndspi.h>
#include <ndsupport.h>

const GUID IID_IUnknown = {0x00000000, 0x0000, 0x0000,
                           {0xC0, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x46}};

static __thread DWORD stub_last_error;

DWORD ndw_GetLastError(void) { return stub_last_error; }
void ndw_SetLastError(DWORD e) { stub_last_error = e; }

static BOOL unsupported(void)
{
    stub_last_error = ERROR_NOT_SUPPORTED;
    return FALSE;
}

BOOL ndw_CloseHandle(HANDLE h) { (void)h; return unsupported(); }
HANDLE ndw_CreateEventW(void *a, BOOL m, BOOL i, const wchar_t *n)
{
    (void)a; (void)m; (void)i; (void)n;
    unsupported();
    return NULL;
}
HANDLE ndw_CreateEventA(void *a, BOOL m, BOOL i, const char *n)
{
    (void)a; (void)m; (void)i; (void)n;
    unsupported();
    return NULL;
}
BOOL ndw_SetEvent(HANDLE h) { (void)h; return unsupported(); }
BOOL ndw_ResetEvent(HANDLE h) { (void)h; return unsupported(); }
DWORD ndw_WaitForSingleObject(HANDLE h, DWORD ms)
{
    (void)h; (void)ms;
    unsupported();
    return WAIT_FAILED;
}
DWORD ndw_WaitForMultipleObjects(DWORD n, const HANDLE *h, BOOL all, DWORD ms)
{
    (void)n; (void)h; (void)all; (void)ms;
    unsupported();
    return WAIT_FAILED;
}
HANDLE ndw_CreateIoCompletionPort(HANDLE f, HANDLE p, ULONG_PTR k, DWORD n)
{
    (void)f; (void)p; (void)k; (void)n;
    unsupported();
    return NULL;
}
BOOL ndw_GetQueuedCompletionStatus(HANDLE p, DWORD *b, ULONG_PTR *k, OVERLAPPED **o, DWORD ms)
{
    (void)p; (void)b; (void)k; (void)ms;
    if (o != NULL)
        *o = NULL;
    return unsupported();
}
BOOL ndw_GetQueuedCompletionStatusEx(HANDLE p, OVERLAPPED_ENTRY *e, ULONG n, ULONG *r,
                                     DWORD ms, BOOL alertable)
{
    (void)p; (void)e; (void)n; (void)ms; (void)alertable;
    if (r != NULL)
        *r = 0;
    return unsupported();
}
BOOL ndw_PostQueuedCompletionStatus(HANDLE p, DWORD b, ULONG_PTR k, OVERLAPPED *o)
{
    (void)p; (void)b; (void)k; (void)o;
    return unsupported();
}
BOOL ndw_SetFileCompletionNotificationModes(HANDLE f, UCHAR flags)
{
    (void)f; (void)flags;
    return unsupported();
}
HANDLE ndw_CreateThread(void *a, SIZE_T s, DWORD (*start)(void *), void *p, DWORD f, DWORD *id)
{
    (void)a; (void)s; (void)start; (void)p; (void)f; (void)id;
    unsupported();
    return NULL;
}
BOOL ndw_GetExitCodeThread(HANDLE h, DWORD *c) { (void)h; (void)c; return unsupported(); }
BOOL ndw_GetSystemTimes(FILETIME *i, FILETIME *k, FILETIME *u)
{
    (void)i; (void)k; (void)u;
    return unsupported();
}

HRESULT NdStartup(void) { return ND_NOT_SUPPORTED; }
HRESULT NdCleanup(void) { return ND_DEVICE_NOT_READY; }
void NdFlushProviders(void) {}
HRESULT NdQueryAddressList(DWORD f, SOCKET_ADDRESS_LIST *l, SIZE_T *cb)
{
    (void)f; (void)l; (void)cb;
    return ND_NOT_SUPPORTED;
}
HRESULT NdResolveAddress(const struct sockaddr *r, SIZE_T cbr, struct sockaddr *l, SIZE_T *cbl)
{
    (void)r; (void)cbr; (void)l; (void)cbl;
    return ND_NOT_SUPPORTED;
}
HRESULT NdCheckAddress(const struct sockaddr *a, SIZE_T cb)
{
    (void)a; (void)cb;
    return ND_NOT_SUPPORTED;
}
HRESULT NdOpenAdapter(REFIID iid, const struct sockaddr *a, SIZE_T cb, void **pp)
{
    (void)iid; (void)a; (void)cb;
    if (pp != NULL)
        *pp = NULL;
    return ND_NOT_SUPPORTED;
}
HRESULT NdOpenV1Adapter(const struct sockaddr *a, SIZE_T cb, INDAdapter **pp)
{
    (void)a; (void)cb;
    if (pp != NULL)
        *pp = NULL;
    return ND_NOT_SUPPORTED;
}
