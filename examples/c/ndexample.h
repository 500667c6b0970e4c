/*
 * ndexample.h - what the example programs share, as Microsoft's examples share
 * their ndcommon.h: failing with a message, completing an overlapped request
 * through its event, and reading the target address from the command line.
 * Usable from C and C++; every function is static inline, so a program that
 * does not use one gets no warning for it.
 */
#ifndef ND_EXAMPLE_H
#define ND_EXAMPLE_H

#include <winsock2.h>
#include <ws2tcpip.h>
#include <windows.h>
#include <tchar.h>
#include <stdio.h>
#include <stdlib.h>
#include "ndsupport.h"

/* The bound on every wait of the examples: a broken peer fails a program
 * instead of hanging it. */
#define ND_EXAMPLE_TIMEOUT_MS 20000

/* Any failure: name the call and its HRESULT, exit non-zero. */
static inline void Fail(const char *call, HRESULT hr)
{
    printf("%s failed with HRESULT 0x%08X\n", call, (unsigned)hr);
    fflush(stdout);
    exit(1);
}

static inline void FailMsg(const char *msg)
{
    printf("%s\n", msg);
    fflush(stdout);
    exit(1);
}

/*
 * Completes an overlapped request: ND_SUCCESS needs nothing more, ND_PENDING
 * waits (bounded) for the request's event, then asks the object for the final
 * status.
 */
static inline HRESULT WaitForRequest(IND2Overlapped *pObj, OVERLAPPED *pOv, HRESULT hr,
                                     const char *what)
{
    while (hr == ND_PENDING) {
        if (WaitForSingleObject(pOv->hEvent, ND_EXAMPLE_TIMEOUT_MS) != WAIT_OBJECT_0) {
            printf("%s: timed out after %u ms\n", what, (unsigned)ND_EXAMPLE_TIMEOUT_MS);
            fflush(stdout);
            exit(1);
        }
#ifdef __cplusplus
        hr = pObj->GetOverlappedResult(pOv, TRUE);
#else
        hr = pObj->lpVtbl->GetOverlappedResult(pObj, pOv, TRUE);
#endif
    }
    return hr;
}

/*
 * The target address: IPv4 a.b.c.d[:port] (0.0.0.0 refused), or IPv6
 * [addr]:port or addr, parsed with WSAStringToAddress. A missing port becomes
 * defaultPort (0: left as it is).
 */
static inline BOOL ParseAddress(TCHAR *str, SOCKADDR_INET *pAddr, ULONG *pcbAddr,
                                USHORT defaultPort)
{
    INT len = sizeof(*pAddr);
    ZeroMemory(pAddr, sizeof(*pAddr));
    if (WSAStringToAddress(str, AF_INET, NULL, (LPSOCKADDR)pAddr, &len) == 0) {
        if (pAddr->Ipv4.sin_addr.s_addr == 0)
            return FALSE;
        if (pAddr->Ipv4.sin_port == 0)
            pAddr->Ipv4.sin_port = htons(defaultPort);
        *pcbAddr = sizeof(SOCKADDR_IN);
        return TRUE;
    }
    len = sizeof(*pAddr);
    ZeroMemory(pAddr, sizeof(*pAddr));
    if (WSAStringToAddress(str, AF_INET6, NULL, (LPSOCKADDR)pAddr, &len) == 0) {
        if (pAddr->Ipv6.sin6_port == 0)
            pAddr->Ipv6.sin6_port = htons(defaultPort);
        *pcbAddr = sizeof(SOCKADDR_IN6);
        return TRUE;
    }
    return FALSE;
}

#endif /* ND_EXAMPLE_H */
