/*
 * ndw_types.h - Windows base types, the COM calling-convention macros,
 * HRESULT basics, OVERLAPPED and the socket-address containers, for Linux
 * (LP64).
 *
 * Internal header of netdirect's Win32 compatibility layer.  It is included
 * by <ndspi.h> (so the ND headers work with only `-I include`) and by the
 * public Windows-named headers in this directory (<windows.h>, <winsock2.h>,
 * ...).  It holds only what the ND declarations need; the macros that only
 * Windows programs use (WINAPI, VOID, CONTAINING_RECORD, ...) are in
 * ndw_windef.h, so that they do not leak into Linux programs that include
 * just <ndspi.h>.
 *
 * Every type has the width it has on 64-bit Windows, following Microsoft's
 * "Windows Data Types" documentation, because the ND structures and vtables
 * are laid out with those widths.  See docs/PORTING.md.
 *
 * LP64 traps handled here:
 *  - Windows `long` is 32 bits, Linux `long` is 64: LONG/ULONG/DWORD are
 *    `int`/`unsigned int`, never `long`.
 *  - LONGLONG/ULONGLONG are `long long`, as Windows' `__int64`, not the
 *    glibc `int64_t` (which is `long`): C++ code passes `volatile long long*`
 *    to the Interlocked*64 functions and would not convert otherwise.
 *  - SIZE_T/ULONG_PTR/KAFFINITY are `unsigned long` so that they are the
 *    same type as `size_t`/`uintptr_t`, as they are on Windows x64.
 *  - HRESULT/NTSTATUS constants always carry their cast, so that a constant
 *    such as 0xC0000005 is negative as on Windows and not a positive `long`.
 */
#ifndef NDW_TYPES_H
#define NDW_TYPES_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <wchar.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <netinet/in.h>

/* ---- language glue ----------------------------------------------------- */

#ifdef __cplusplus
#define EXTERN_C extern "C"
#define EXTERN_C_START extern "C" {
#define EXTERN_C_END }
#else
#define EXTERN_C extern
#define EXTERN_C_START
#define EXTERN_C_END
#endif

/*
 * The COM calling-convention macros the ND declarations use.  64-bit Windows
 * has a single convention and both sides of this ABI are compiled for
 * Linux, so they are empty and methods use the platform (SysV) convention;
 * ms_abi is deliberately not used.  The other Windows calling-convention
 * names (WINAPI, __stdcall, ...) are in ndw_windef.h.
 */
#ifndef STDMETHODCALLTYPE
#define STDMETHODCALLTYPE
#endif
#ifndef STDMETHODVCALLTYPE
#define STDMETHODVCALLTYPE
#endif
#ifndef STDAPICALLTYPE
#define STDAPICALLTYPE
#endif
#ifndef STDAPIVCALLTYPE
#define STDAPIVCALLTYPE
#endif
#ifndef DECLSPEC_NOVTABLE
#define DECLSPEC_NOVTABLE
#endif
#ifndef DECLSPEC_UUID
#define DECLSPEC_UUID(x)
#endif
#ifndef DECLSPEC_SELECTANY
/* selectany = one copy wins at link time; a weak definition is the ELF analogue. */
#define DECLSPEC_SELECTANY __attribute__((__weak__))
#endif

/*
 * The compatibility headers define inline functions in C style (casts,
 * NULL) so that one body serves C and C++.  NDW_QUIET_BEGIN/END silence the
 * C++-only style warnings a strict C++ build may enable (-Wold-style-cast,
 * -Wuseless-cast, -Wzero-as-null-pointer-constant) for those bodies; they
 * do not apply to the program's own code.
 */
#if defined(__cplusplus) && defined(__GNUC__) && !defined(__clang__)
#define NDW_QUIET_BEGIN \
    _Pragma("GCC diagnostic push") \
    _Pragma("GCC diagnostic ignored \"-Wold-style-cast\"") \
    _Pragma("GCC diagnostic ignored \"-Wuseless-cast\"") \
    _Pragma("GCC diagnostic ignored \"-Wzero-as-null-pointer-constant\"")
#define NDW_QUIET_END _Pragma("GCC diagnostic pop")
#elif defined(__cplusplus) && defined(__clang__)
#define NDW_QUIET_BEGIN \
    _Pragma("clang diagnostic push") \
    _Pragma("clang diagnostic ignored \"-Wunknown-warning-option\"") \
    _Pragma("clang diagnostic ignored \"-Wold-style-cast\"") \
    _Pragma("clang diagnostic ignored \"-Wzero-as-null-pointer-constant\"")
#define NDW_QUIET_END _Pragma("clang diagnostic pop")
#else
#define NDW_QUIET_BEGIN
#define NDW_QUIET_END
#endif

/* ---- integer and pointer types (Windows x64 widths) -------------------- */

typedef void *PVOID, *LPVOID;
typedef const void *LPCVOID, *PCVOID;

typedef char CHAR, CCHAR, *PCHAR, *LPCH, *PCH;
typedef signed char INT8, *PINT8;
typedef unsigned char UCHAR, BYTE, BOOLEAN, UINT8, *PUCHAR, *PBYTE, *LPBYTE,
    *PBOOLEAN, *PUINT8;
typedef short SHORT, INT16, *PSHORT, *PINT16;
typedef unsigned short USHORT, WORD, UINT16, ATOM, *PUSHORT, *PWORD, *LPWORD,
    *PUINT16;
typedef int INT, LONG, BOOL, INT32, LONG32, *PINT, *LPINT, *PLONG, *LPLONG,
    *PBOOL, *LPBOOL, *PINT32, *PLONG32;
typedef unsigned int UINT, ULONG, DWORD, UINT32, ULONG32, DWORD32, *PUINT,
    *PULONG, *PDWORD, *LPDWORD, *PUINT32, *PULONG32, *PDWORD32;
typedef long long LONGLONG, LONG64, INT64, *PLONGLONG, *PLONG64, *PINT64;
typedef unsigned long long ULONGLONG, ULONG64, UINT64, DWORD64, DWORDLONG,
    *PULONGLONG, *PULONG64, *PUINT64, *PDWORD64;
typedef float FLOAT, *PFLOAT;
typedef double DOUBLE;

/* Pointer-sized integers: the same types as intptr_t/uintptr_t/size_t. */
typedef long LONG_PTR, INT_PTR, SSIZE_T, *PLONG_PTR, *PINT_PTR, *PSSIZE_T;
typedef unsigned long ULONG_PTR, UINT_PTR, DWORD_PTR, SIZE_T, KAFFINITY,
    *PULONG_PTR, *PUINT_PTR, *PDWORD_PTR, *PSIZE_T, *PKAFFINITY;
typedef LONG_PTR LPARAM, LRESULT;
typedef UINT_PTR WPARAM;

/* Characters.  wchar_t is 4 bytes (UTF-32) on Linux; fine within a process. */
typedef wchar_t WCHAR, *PWCHAR, *LPWCH, *PWCH;
typedef CHAR *LPSTR, *PSTR, *NPSTR;
typedef const CHAR *LPCSTR, *PCSTR;
typedef WCHAR *LPWSTR, *PWSTR, *NWPSTR;
typedef const WCHAR *LPCWSTR, *PCWSTR;

typedef LONG HRESULT;
typedef LONG NTSTATUS, *PNTSTATUS;
typedef int errno_t;

#ifndef TRUE
#define TRUE 1
#endif
#ifndef FALSE
#define FALSE 0
#endif

/* ---- handles ------------------------------------------------------------ */

typedef void *HANDLE, **PHANDLE, **LPHANDLE;
#define DECLARE_HANDLE(name) \
    struct name##__ { int unused; }; \
    typedef struct name##__ *name
#define INVALID_HANDLE_VALUE ((HANDLE)(LONG_PTR)-1)

/* ---- HRESULT basics (Microsoft "Common HRESULT Values") ---------------- */

#define SUCCEEDED(hr) (((HRESULT)(hr)) >= 0)
#define FAILED(hr) (((HRESULT)(hr)) < 0)
#define IS_ERROR(status) (((ULONG)(status)) >> 31 == 1)
#define HRESULT_CODE(hr) ((hr) & 0xFFFF)
#define HRESULT_FACILITY(hr) (((hr) >> 16) & 0x1fff)
#define HRESULT_SEVERITY(hr) (((hr) >> 31) & 0x1)
#define SEVERITY_SUCCESS 0
#define SEVERITY_ERROR 1
#define FACILITY_NULL 0
#define FACILITY_RPC 1
#define FACILITY_ITF 4
#define FACILITY_WIN32 7
#define FACILITY_NT_BIT 0x10000000
#define MAKE_HRESULT(sev, fac, code) \
    ((HRESULT)(((ULONG)(sev) << 31) | ((ULONG)(fac) << 16) | ((ULONG)(code))))
#define HRESULT_FROM_WIN32(x) \
    ((HRESULT)(x) <= 0 ? ((HRESULT)(x)) \
                       : ((HRESULT)(((x) & 0x0000FFFF) | (FACILITY_WIN32 << 16) | 0x80000000)))
#define HRESULT_FROM_NT(x) ((HRESULT)((x) | FACILITY_NT_BIT))

#define S_OK ((HRESULT)0x00000000)
#define S_FALSE ((HRESULT)0x00000001)
#define E_NOTIMPL ((HRESULT)0x80004001)
#define E_NOINTERFACE ((HRESULT)0x80004002)
#define E_POINTER ((HRESULT)0x80004003)
#define E_ABORT ((HRESULT)0x80004004)
#define E_FAIL ((HRESULT)0x80004005)
#define E_UNEXPECTED ((HRESULT)0x8000FFFF)
#define E_ACCESSDENIED ((HRESULT)0x80070005)
#define E_HANDLE ((HRESULT)0x80070006)
#define E_OUTOFMEMORY ((HRESULT)0x8007000E)
#define E_INVALIDARG ((HRESULT)0x80070057)
#define CLASS_E_NOAGGREGATION ((HRESULT)0x80040110)
#define CLASS_E_CLASSNOTAVAILABLE ((HRESULT)0x80040111)

/* ---- OVERLAPPED (Microsoft "OVERLAPPED structure", minwinbase.h) --------
 * 32 bytes on x64 and on LP64 alike.  The anonymous union and struct are
 * required: clients write Offset, Pointer and hEvent by name.  __extension__
 * keeps -pedantic quiet about them in C99 and C++.
 */
typedef struct _OVERLAPPED {
    ULONG_PTR Internal;     /* NTSTATUS of the request, zero-extended */
    ULONG_PTR InternalHigh; /* bytes transferred */
    __extension__ union {
        __extension__ struct {
            DWORD Offset;
            DWORD OffsetHigh;
        };
        PVOID Pointer;
    };
    HANDLE hEvent;
} OVERLAPPED, *LPOVERLAPPED, *POVERLAPPED;

/* One entry of GetQueuedCompletionStatusEx (minwinbase.h): 32 bytes. */
typedef struct _OVERLAPPED_ENTRY {
    ULONG_PTR lpCompletionKey;
    LPOVERLAPPED lpOverlapped;
    ULONG_PTR Internal;
    DWORD dwNumberOfBytesTransferred;
} OVERLAPPED_ENTRY, *LPOVERLAPPED_ENTRY;

/* ---- socket addresses (ws2def.h) ----------------------------------------
 * The ND ABI on Linux takes Linux sockaddrs: AF_INET6 is 10 here, not 23.
 */
typedef struct sockaddr SOCKADDR, *PSOCKADDR, *LPSOCKADDR;
typedef struct sockaddr_in SOCKADDR_IN, *PSOCKADDR_IN, *LPSOCKADDR_IN;
typedef struct sockaddr_in6 SOCKADDR_IN6, *PSOCKADDR_IN6, *LPSOCKADDR_IN6;
typedef struct sockaddr_storage SOCKADDR_STORAGE, *PSOCKADDR_STORAGE,
    *LPSOCKADDR_STORAGE;
typedef USHORT ADDRESS_FAMILY;

/* {lpSockaddr, iSockaddrLength}: 16 bytes. */
typedef struct _SOCKET_ADDRESS {
    LPSOCKADDR lpSockaddr;
    INT iSockaddrLength;
} SOCKET_ADDRESS, *PSOCKET_ADDRESS, *LPSOCKET_ADDRESS;

/* Count, then the array at offset 8; sizeof with its one declared entry is 24. */
typedef struct _SOCKET_ADDRESS_LIST {
    INT iAddressCount;
    SOCKET_ADDRESS Address[1];
} SOCKET_ADDRESS_LIST, *PSOCKET_ADDRESS_LIST, *LPSOCKET_ADDRESS_LIST;

#endif /* NDW_TYPES_H */
