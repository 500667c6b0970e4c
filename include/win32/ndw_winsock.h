/*
 * ndw_winsock.h - the Winsock surface ND programs use: WSAStartup,
 * WSAStringToAddress, InetPton/InetNtop, closesocket, SOCKET and the
 * SOCKADDR_INET union, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <winsock2.h>, <ws2tcpip.h> and <windows.h>.  Behaviour follows
 * Microsoft's documentation of WSAStartup, WSAStringToAddressW and
 * InetPtonW; everything is header-only except the last error, which is the
 * library's thread-local value (see ndw_api.h).
 *
 * Sockets are Linux descriptors and socket addresses are Linux sockaddrs:
 * AF_INET6 is 10 (23 on Windows), and socket-length arguments of the BSD
 * functions are socklen_t, not int.
 */
#ifndef NDW_WINSOCK_H
#define NDW_WINSOCK_H

#include "ndw_types.h"
#include "ndw_windef.h"
#include "ndw_tchar.h"
#include "ndw_posix.h"
#include "winerror.h"
#include <arpa/inet.h>
#include <netdb.h>
#include <unistd.h>

NDW_QUIET_BEGIN

typedef int SOCKET;
#define INVALID_SOCKET (-1)
#define SOCKET_ERROR (-1)

typedef struct in_addr IN_ADDR, *PIN_ADDR, *LPIN_ADDR;
typedef struct in6_addr IN6_ADDR, *PIN6_ADDR, *LPIN6_ADDR;
typedef struct addrinfo ADDRINFOA, *PADDRINFOA;

/* ws2ipdef.h: an IPv4 or IPv6 address, told apart by si_family (28 bytes). */
typedef union _SOCKADDR_INET {
    SOCKADDR_IN Ipv4;
    SOCKADDR_IN6 Ipv6;
    ADDRESS_FAMILY si_family;
} SOCKADDR_INET, *PSOCKADDR_INET;

/* Only ever passed as NULL by ND programs. */
typedef struct _WSAPROTOCOL_INFOA WSAPROTOCOL_INFOA, *LPWSAPROTOCOL_INFOA;
typedef struct _WSAPROTOCOL_INFOW WSAPROTOCOL_INFOW, *LPWSAPROTOCOL_INFOW;

#define WSADESCRIPTION_LEN 256
#define WSASYS_STATUS_LEN 128
/* The 64-bit Windows layout (iMaxSockets before the strings). */
typedef struct WSAData {
    WORD wVersion;
    WORD wHighVersion;
    unsigned short iMaxSockets;
    unsigned short iMaxUdpDg;
    char *lpVendorInfo;
    char szDescription[WSADESCRIPTION_LEN + 1];
    char szSystemStatus[WSASYS_STATUS_LEN + 1];
} WSADATA, *LPWSADATA;

/* Last error, shared with GetLastError (both are the library's value). */
#include "ndw_lasterror.h"
static inline int WSAGetLastError(void) { return (int)ndw_GetLastError(); }
static inline void WSASetLastError(int iError) { ndw_SetLastError((DWORD)iError); }

/* Nothing to initialise on Linux: report Winsock 2.2 and succeed. */
static inline int WSAStartup(WORD wVersionRequested, LPWSADATA lpWSAData)
{
    if (lpWSAData != NULL) {
        memset(lpWSAData, 0, sizeof(*lpWSAData));
        lpWSAData->wVersion = wVersionRequested;
        lpWSAData->wHighVersion = 0x0202;
        strcpy(lpWSAData->szDescription, "netdirect Winsock compatibility");
        strcpy(lpWSAData->szSystemStatus, "Running");
    }
    return 0;
}
static inline int WSACleanup(void) { return 0; }

static inline int closesocket(SOCKET s) { return close(s) == 0 ? 0 : SOCKET_ERROR; }

/* ---- text to address ------------------------------------------------------ */

/* Parses a decimal port of 1 to 5 digits, 0..65535.  Returns -1 if invalid. */
static inline long ndw_parse_port(const char *s)
{
    long v = 0;
    int n = 0;
    for (; *s; s++, n++) {
        if (*s < '0' || *s > '9' || n == 5)
            return -1;
        v = v * 10 + (*s - '0');
    }
    return (n == 0 || v > 65535) ? -1 : v;
}

/*
 * WSAStringToAddressA: "a.b.c.d", "a.b.c.d:port" (AF_INET); "v6", "v6%scope",
 * "[v6]", "[v6]:port", "[v6%scope]:port" (AF_INET6).  Returns 0, or
 * SOCKET_ERROR with WSAEINVAL (bad text or family) or WSAEFAULT (buffer too
 * small; *lpAddressLength then holds the size needed).  On failure the
 * caller's address buffer is left zeroed: programs test sin_addr == 0.
 */
static inline INT WSAStringToAddressA(LPCSTR AddressString, INT AddressFamily,
                                      LPWSAPROTOCOL_INFOA lpProtocolInfo,
                                      LPSOCKADDR lpAddress, LPINT lpAddressLength)
{
    char buf[128];
    char *host = buf, *port = NULL, *scope = NULL;
    size_t len;
    INT need = AddressFamily == AF_INET6 ? (INT)sizeof(SOCKADDR_IN6)
                                         : (INT)sizeof(SOCKADDR_IN);
    (void)lpProtocolInfo;
    if (lpAddress == NULL || lpAddressLength == NULL) {
        ndw_SetLastError(WSAEFAULT);
        return SOCKET_ERROR;
    }
    if (*lpAddressLength > 0)
        memset(lpAddress, 0, (size_t)*lpAddressLength);
    if (AddressFamily != AF_INET && AddressFamily != AF_INET6) {
        ndw_SetLastError(WSAEINVAL);
        return SOCKET_ERROR;
    }
    if (*lpAddressLength < need) {
        *lpAddressLength = need;
        ndw_SetLastError(WSAEFAULT);
        return SOCKET_ERROR;
    }
    if (AddressString == NULL || (len = strlen(AddressString)) == 0 ||
        len >= sizeof(buf))
        goto invalid;
    memcpy(buf, AddressString, len + 1);
    if (AddressFamily == AF_INET) {
        SOCKADDR_IN *sin = (SOCKADDR_IN *)lpAddress;
        port = strchr(buf, ':');
        if (port != NULL)
            *port++ = '\0';
        if (inet_pton(AF_INET, host, &sin->sin_addr) != 1)
            goto invalid;
        if (port != NULL) {
            long p = ndw_parse_port(port);
            if (p < 0)
                goto invalid;
            sin->sin_port = htons((unsigned short)p);
        }
        sin->sin_family = AF_INET;
    } else {
        SOCKADDR_IN6 *sin6 = (SOCKADDR_IN6 *)lpAddress;
        if (buf[0] == '[') {
            char *close_br = strchr(buf, ']');
            if (close_br == NULL)
                goto invalid;
            *close_br = '\0';
            host = buf + 1;
            if (close_br[1] == ':')
                port = close_br + 2;
            else if (close_br[1] != '\0')
                goto invalid;
        }
        scope = strchr(host, '%');
        if (scope != NULL)
            *scope++ = '\0';
        if (inet_pton(AF_INET6, host, &sin6->sin6_addr) != 1)
            goto invalid;
        if (port != NULL) {
            long p = ndw_parse_port(port);
            if (p < 0)
                goto invalid;
            sin6->sin6_port = htons((unsigned short)p);
        }
        if (scope != NULL) {
            char *end = NULL;
            unsigned long id = strtoul(scope, &end, 10);
            if (*scope == '\0' || *end != '\0' || id > 0xFFFFFFFFUL)
                goto invalid;
            sin6->sin6_scope_id = (uint32_t)id;
        }
        sin6->sin6_family = AF_INET6;
    }
    *lpAddressLength = need;
    return 0;
invalid:
    memset(lpAddress, 0, (size_t)need);
    ndw_SetLastError(WSAEINVAL);
    return SOCKET_ERROR;
}

/* Wide text to ASCII; FALSE if a character is not ASCII or it does not fit. */
static inline BOOL ndw_wide_to_ascii(LPCWSTR src, char *dst, size_t cap)
{
    size_t i = 0;
    if (src == NULL)
        return FALSE;
    for (; src[i] != L'\0'; i++) {
        if (i + 1 >= cap || src[i] < 0 || src[i] > 0x7F)
            return FALSE;
        dst[i] = (char)src[i];
    }
    dst[i] = '\0';
    return TRUE;
}

static inline INT WSAStringToAddressW(LPCWSTR AddressString, INT AddressFamily,
                                      LPWSAPROTOCOL_INFOW lpProtocolInfo,
                                      LPSOCKADDR lpAddress, LPINT lpAddressLength)
{
    char buf[128];
    (void)lpProtocolInfo;
    if (!ndw_wide_to_ascii(AddressString, buf, sizeof(buf)))
        buf[0] = '\0'; /* parsed as invalid, with the same zeroing rules */
    return WSAStringToAddressA(buf, AddressFamily, NULL, lpAddress, lpAddressLength);
}

#ifdef UNICODE
#define WSAStringToAddress WSAStringToAddressW
#else
#define WSAStringToAddress WSAStringToAddressA
#endif

/* ---- InetPton / InetNtop (ws2tcpip.h): inet_pton/inet_ntop semantics ------ */

static inline INT InetPtonA(INT Family, PCSTR pszAddrString, PVOID pAddrBuf)
{
    int r = inet_pton(Family, pszAddrString, pAddrBuf);
    if (r < 0)
        ndw_SetLastError(WSAEAFNOSUPPORT);
    return r;
}
static inline PCSTR InetNtopA(INT Family, const VOID *pAddr, PSTR pStringBuf,
                              size_t StringBufSize)
{
    const char *r = inet_ntop(Family, pAddr, pStringBuf, (socklen_t)StringBufSize);
    if (r == NULL)
        ndw_SetLastError(Family == AF_INET || Family == AF_INET6 ? WSAEINVAL
                                                                 : WSAEAFNOSUPPORT);
    return r;
}
static inline INT InetPtonW(INT Family, PCWSTR pszAddrString, PVOID pAddrBuf)
{
    char buf[128];
    if (!ndw_wide_to_ascii(pszAddrString, buf, sizeof(buf)))
        return 0;
    return InetPtonA(Family, buf, pAddrBuf);
}
static inline PCWSTR InetNtopW(INT Family, const VOID *pAddr, PWSTR pStringBuf,
                               size_t StringBufSize)
{
    char buf[64];
    size_t i;
    if (InetNtopA(Family, pAddr, buf, sizeof(buf)) == NULL)
        return NULL;
    if (strlen(buf) + 1 > StringBufSize) {
        ndw_SetLastError(WSAEINVAL);
        return NULL;
    }
    for (i = 0; buf[i] != '\0'; i++)
        pStringBuf[i] = (WCHAR)buf[i];
    pStringBuf[i] = L'\0';
    return pStringBuf;
}
#ifdef UNICODE
#define InetPton InetPtonW
#define InetNtop InetNtopW
#else
#define InetPton InetPtonA
#define InetNtop InetNtopA
#endif

NDW_QUIET_END

#endif /* NDW_WINSOCK_H */
