/*
 * ndw_api.h - the kernel32-style functions ND programs call (handles,
 * events, I/O completion ports, threads, last error, Interlocked*, time,
 * heap, memory macros) and the winbase.h/winnt.h types and constants they
 * use, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <windows.h>.  Semantics follow Microsoft's documentation of each function
 * (CreateEventW, WaitForSingleObject, CreateIoCompletionPort,
 * GetQueuedCompletionStatus, InterlockedIncrement, QueryPerformanceCounter,
 * HeapAlloc, ...); the differences are listed in docs/PORTING.md.
 *
 * Two kinds of function:
 *  - Kernel objects (events, ports, threads, the ND overlapped files) and
 *    the thread-local last error live in libnetdirect, which exports them
 *    with an `ndw_` prefix (ndw_CloseHandle, ...).  Each gets a static
 *    inline function of the Windows name here: the library then exports no
 *    global Win32 names that could clash with Wine or another compat layer
 *    in the same process, and no Win32 name is ever a macro that could
 *    rewrite an ND method of the same name (GetOverlappedResult, Connect...).
 *  - Everything else is header-only (static inline or a macro where Windows
 *    itself uses a macro).
 */
#ifndef NDW_API_H
#define NDW_API_H

#include "ndw_types.h"
#include "ndw_windef.h"
#include "ndw_tchar.h"
#include "ndw_posix.h"
#include "winerror.h"
#include <errno.h>
#include <sched.h>

/* ---- winnt.h status values, unless the program includes <ntstatus.h> ---
 * The usual Windows pattern is `#include <ntstatus.h>` plus
 * `#define WIN32_NO_STATUS` before <windows.h> (or the reverse order);
 * both work because every value is #ifndef-guarded and identical.
 */
#ifndef WIN32_NO_STATUS
#ifndef STATUS_WAIT_0
#define STATUS_WAIT_0 ((NTSTATUS)0x00000000)
#endif
#ifndef STATUS_ABANDONED_WAIT_0
#define STATUS_ABANDONED_WAIT_0 ((NTSTATUS)0x00000080)
#endif
#ifndef STATUS_USER_APC
#define STATUS_USER_APC ((NTSTATUS)0x000000C0)
#endif
#ifndef STATUS_TIMEOUT
#define STATUS_TIMEOUT ((NTSTATUS)0x00000102)
#endif
#ifndef STATUS_PENDING
#define STATUS_PENDING ((NTSTATUS)0x00000103)
#endif
#ifndef STATUS_ACCESS_VIOLATION
#define STATUS_ACCESS_VIOLATION ((NTSTATUS)0xC0000005)
#endif
#ifndef STATUS_INVALID_HANDLE
#define STATUS_INVALID_HANDLE ((NTSTATUS)0xC0000008)
#endif
#ifndef STATUS_INVALID_PARAMETER
#define STATUS_INVALID_PARAMETER ((NTSTATUS)0xC000000D)
#endif
#ifndef STATUS_NO_MEMORY
#define STATUS_NO_MEMORY ((NTSTATUS)0xC0000017)
#endif
#endif /* WIN32_NO_STATUS */

/* ---- winbase.h constants -------------------------------------------------- */

#define INFINITE 0xFFFFFFFF
#define WAIT_OBJECT_0 ((DWORD)0x00000000)
#define WAIT_ABANDONED ((DWORD)0x00000080)
#define WAIT_ABANDONED_0 ((DWORD)0x00000080)
#define WAIT_IO_COMPLETION ((DWORD)0x000000C0)
#define WAIT_FAILED ((DWORD)0xFFFFFFFF)
/* WAIT_TIMEOUT (258) is in <winerror.h>, as on Windows. */
#define MAXIMUM_WAIT_OBJECTS 64
#define STILL_ACTIVE 259
#define CREATE_SUSPENDED 0x00000004

/* SetFileCompletionNotificationModes flags; ND files always have both. */
#define FILE_SKIP_COMPLETION_PORT_ON_SUCCESS 0x1
#define FILE_SKIP_SET_EVENT_ON_HANDLE 0x2

#define HEAP_NO_SERIALIZE 0x00000001
#define HEAP_GENERATE_EXCEPTIONS 0x00000004
#define HEAP_ZERO_MEMORY 0x00000008

/* Completed once Internal no longer holds STATUS_PENDING (0x103). */
#define HasOverlappedIoCompleted(lpOverlapped) \
    (((DWORD)(lpOverlapped)->Internal) != 0x00000103)

NDW_QUIET_BEGIN

/*
 * min/max.  Windows' windef.h defines function-like macros, but a `min`
 * macro defined before <functional>, <map> or <algorithm> breaks libstdc++
 * ("macro 'min' passed 3 arguments").  C++ therefore gets function
 * templates in the global namespace (mixed argument types give their common
 * type, as the macro's ?: would); C gets the macros.  NOMINMAX suppresses
 * both, as on Windows.
 */
#ifndef NOMINMAX
#ifdef __cplusplus
#include <type_traits>
template <class A, class B>
inline typename std::common_type<A, B>::type min(A a, B b)
{
    return b < a ? b : a;
}
template <class A, class B>
inline typename std::common_type<A, B>::type max(A a, B b)
{
    return a < b ? b : a;
}
#else
#ifndef min
#define min(a, b) (((a) < (b)) ? (a) : (b))
#endif
#ifndef max
#define max(a, b) (((a) > (b)) ? (a) : (b))
#endif
#endif
#endif /* NOMINMAX */

/* ---- winnt.h/minwinbase.h structures -------------------------------------- */

typedef union _LARGE_INTEGER {
    __extension__ struct {
        DWORD LowPart;
        LONG HighPart;
    };
    struct {
        DWORD LowPart;
        LONG HighPart;
    } u;
    LONGLONG QuadPart;
} LARGE_INTEGER, *PLARGE_INTEGER;

typedef union _ULARGE_INTEGER {
    __extension__ struct {
        DWORD LowPart;
        DWORD HighPart;
    };
    struct {
        DWORD LowPart;
        DWORD HighPart;
    } u;
    ULONGLONG QuadPart;
} ULARGE_INTEGER, *PULARGE_INTEGER;

/* 100-nanosecond intervals, split in two DWORDs. */
typedef struct _FILETIME {
    DWORD dwLowDateTime;
    DWORD dwHighDateTime;
} FILETIME, *PFILETIME, *LPFILETIME;

typedef struct _SYSTEM_INFO {
    __extension__ union {
        DWORD dwOemId;
        __extension__ struct {
            WORD wProcessorArchitecture;
            WORD wReserved;
        };
    };
    DWORD dwPageSize;
    LPVOID lpMinimumApplicationAddress;
    LPVOID lpMaximumApplicationAddress;
    DWORD_PTR dwActiveProcessorMask;
    DWORD dwNumberOfProcessors;
    DWORD dwProcessorType;
    DWORD dwAllocationGranularity;
    WORD wProcessorLevel;
    WORD wProcessorRevision;
} SYSTEM_INFO, *LPSYSTEM_INFO;

#define PROCESSOR_ARCHITECTURE_AMD64 9
#define PROCESSOR_ARCHITECTURE_ARM64 12
#define PROCESSOR_ARCHITECTURE_UNKNOWN 0xffff
#define PROCESSOR_AMD_X8664 8664

typedef struct _SECURITY_ATTRIBUTES {
    DWORD nLength;
    LPVOID lpSecurityDescriptor;
    BOOL bInheritHandle;
} SECURITY_ATTRIBUTES, *PSECURITY_ATTRIBUTES, *LPSECURITY_ATTRIBUTES;

typedef DWORD(WINAPI *PTHREAD_START_ROUTINE)(LPVOID lpThreadParameter);
typedef PTHREAD_START_ROUTINE LPTHREAD_START_ROUTINE;

/* ---- functions exported by libnetdirect (ndw_ prefix) -------------------- */

EXTERN_C_START
BOOL ndw_CloseHandle(HANDLE hObject);
HANDLE ndw_CreateEventW(void *lpEventAttributes, BOOL bManualReset,
                        BOOL bInitialState, const wchar_t *lpName);
HANDLE ndw_CreateEventA(void *lpEventAttributes, BOOL bManualReset,
                        BOOL bInitialState, const char *lpName);
BOOL ndw_SetEvent(HANDLE hEvent);
BOOL ndw_ResetEvent(HANDLE hEvent);
DWORD ndw_WaitForSingleObject(HANDLE hHandle, DWORD dwMilliseconds);
DWORD ndw_WaitForMultipleObjects(DWORD nCount, const HANDLE *lpHandles,
                                 BOOL bWaitAll, DWORD dwMilliseconds);
HANDLE ndw_CreateIoCompletionPort(HANDLE FileHandle, HANDLE ExistingCompletionPort,
                                  ULONG_PTR CompletionKey,
                                  DWORD NumberOfConcurrentThreads);
BOOL ndw_GetQueuedCompletionStatus(HANDLE CompletionPort,
                                   DWORD *lpNumberOfBytesTransferred,
                                   ULONG_PTR *lpCompletionKey,
                                   OVERLAPPED **lpOverlapped,
                                   DWORD dwMilliseconds);
BOOL ndw_GetQueuedCompletionStatusEx(HANDLE CompletionPort,
                                     OVERLAPPED_ENTRY *lpCompletionPortEntries,
                                     ULONG ulCount, ULONG *ulNumEntriesRemoved,
                                     DWORD dwMilliseconds, BOOL fAlertable);
BOOL ndw_PostQueuedCompletionStatus(HANDLE CompletionPort,
                                    DWORD dwNumberOfBytesTransferred,
                                    ULONG_PTR dwCompletionKey,
                                    OVERLAPPED *lpOverlapped);
BOOL ndw_SetFileCompletionNotificationModes(HANDLE FileHandle, UCHAR Flags);
HANDLE ndw_CreateThread(void *lpThreadAttributes, SIZE_T dwStackSize,
                        DWORD (*lpStartAddress)(void *), void *lpParameter,
                        DWORD dwCreationFlags, DWORD *lpThreadId);
BOOL ndw_GetExitCodeThread(HANDLE hThread, DWORD *lpExitCode);
BOOL ndw_GetSystemTimes(FILETIME *lpIdleTime, FILETIME *lpKernelTime,
                        FILETIME *lpUserTime);
EXTERN_C_END
#include "ndw_lasterror.h"

/* Handles.  Any handle may carry Windows' two low "tag" bits. */
static inline BOOL CloseHandle(HANDLE hObject) { return ndw_CloseHandle(hObject); }

/* Events.  Security attributes and names must be NULL. */
static inline HANDLE CreateEventW(LPSECURITY_ATTRIBUTES lpEventAttributes,
                                  BOOL bManualReset, BOOL bInitialState,
                                  LPCWSTR lpName)
{
    return ndw_CreateEventW(lpEventAttributes, bManualReset, bInitialState, lpName);
}
static inline HANDLE CreateEventA(LPSECURITY_ATTRIBUTES lpEventAttributes,
                                  BOOL bManualReset, BOOL bInitialState,
                                  LPCSTR lpName)
{
    return ndw_CreateEventA(lpEventAttributes, bManualReset, bInitialState, lpName);
}
/* CreateEvent is no ND method name, so the usual Windows macro is safe. */
#ifdef UNICODE
#define CreateEvent CreateEventW
#else
#define CreateEvent CreateEventA
#endif
static inline BOOL SetEvent(HANDLE hEvent) { return ndw_SetEvent(hEvent); }
static inline BOOL ResetEvent(HANDLE hEvent) { return ndw_ResetEvent(hEvent); }

/* Waits: WAIT_OBJECT_0, WAIT_TIMEOUT or WAIT_FAILED.  Waiting drives ND progress. */
static inline DWORD WaitForSingleObject(HANDLE hHandle, DWORD dwMilliseconds)
{
    return ndw_WaitForSingleObject(hHandle, dwMilliseconds);
}
static inline DWORD WaitForMultipleObjects(DWORD nCount, const HANDLE *lpHandles,
                                           BOOL bWaitAll, DWORD dwMilliseconds)
{
    return ndw_WaitForMultipleObjects(nCount, lpHandles, bWaitAll, dwMilliseconds);
}

/* I/O completion ports (only ND overlapped files can be associated). */
static inline HANDLE CreateIoCompletionPort(HANDLE FileHandle,
                                            HANDLE ExistingCompletionPort,
                                            ULONG_PTR CompletionKey,
                                            DWORD NumberOfConcurrentThreads)
{
    return ndw_CreateIoCompletionPort(FileHandle, ExistingCompletionPort,
                                      CompletionKey, NumberOfConcurrentThreads);
}
static inline BOOL GetQueuedCompletionStatus(HANDLE CompletionPort,
                                             LPDWORD lpNumberOfBytesTransferred,
                                             PULONG_PTR lpCompletionKey,
                                             LPOVERLAPPED *lpOverlapped,
                                             DWORD dwMilliseconds)
{
    return ndw_GetQueuedCompletionStatus(CompletionPort, lpNumberOfBytesTransferred,
                                         lpCompletionKey, lpOverlapped,
                                         dwMilliseconds);
}
static inline BOOL GetQueuedCompletionStatusEx(HANDLE CompletionPort,
                                               LPOVERLAPPED_ENTRY lpCompletionPortEntries,
                                               ULONG ulCount,
                                               PULONG ulNumEntriesRemoved,
                                               DWORD dwMilliseconds, BOOL fAlertable)
{
    return ndw_GetQueuedCompletionStatusEx(CompletionPort, lpCompletionPortEntries,
                                           ulCount, ulNumEntriesRemoved,
                                           dwMilliseconds, fAlertable);
}
static inline BOOL PostQueuedCompletionStatus(HANDLE CompletionPort,
                                              DWORD dwNumberOfBytesTransferred,
                                              ULONG_PTR dwCompletionKey,
                                              LPOVERLAPPED lpOverlapped)
{
    return ndw_PostQueuedCompletionStatus(CompletionPort, dwNumberOfBytesTransferred,
                                          dwCompletionKey, lpOverlapped);
}
static inline BOOL SetFileCompletionNotificationModes(HANDLE FileHandle, UCHAR Flags)
{
    return ndw_SetFileCompletionNotificationModes(FileHandle, Flags);
}

/* Threads.  The handle joins in WaitForSingleObject, detaches in CloseHandle. */
static inline HANDLE CreateThread(LPSECURITY_ATTRIBUTES lpThreadAttributes,
                                  SIZE_T dwStackSize,
                                  LPTHREAD_START_ROUTINE lpStartAddress,
                                  LPVOID lpParameter, DWORD dwCreationFlags,
                                  LPDWORD lpThreadId)
{
    return ndw_CreateThread(lpThreadAttributes, dwStackSize, lpStartAddress,
                            lpParameter, dwCreationFlags, lpThreadId);
}
static inline BOOL GetExitCodeThread(HANDLE hThread, LPDWORD lpExitCode)
{
    return ndw_GetExitCodeThread(hThread, lpExitCode);
}

/* The last error is a thread-local DWORD in the library, not errno. */
static inline DWORD GetLastError(void) { return ndw_GetLastError(); }
static inline void SetLastError(DWORD dwErrCode) { ndw_SetLastError(dwErrCode); }

/* System-wide CPU times in 100 ns units; kernel time includes idle time. */
static inline BOOL GetSystemTimes(LPFILETIME lpIdleTime, LPFILETIME lpKernelTime,
                                  LPFILETIME lpUserTime)
{
    return ndw_GetSystemTimes(lpIdleTime, lpKernelTime, lpUserTime);
}

/* ---- header-only: sleeping and spinning ------------------------------------ */

/* Sleep(0) yields the processor; INFINITE sleeps forever. */
static inline void Sleep(DWORD dwMilliseconds)
{
    struct timespec ts;
    if (dwMilliseconds == 0) {
        sched_yield();
        return;
    }
    if (dwMilliseconds == INFINITE) {
        for (;;)
            pause();
    }
    ts.tv_sec = (time_t)(dwMilliseconds / 1000);
    ts.tv_nsec = (long)(dwMilliseconds % 1000) * 1000000L;
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}
static inline DWORD SleepEx(DWORD dwMilliseconds, BOOL bAlertable)
{
    (void)bAlertable; /* no APCs on Linux */
    Sleep(dwMilliseconds);
    return 0;
}
static inline BOOL SwitchToThread(void) { return sched_yield() == 0; }

#if defined(__x86_64__) || defined(__i386__)
#define YieldProcessor() __builtin_ia32_pause()
#elif defined(__aarch64__) || defined(__arm__)
#define YieldProcessor() __asm__ __volatile__("yield" ::: "memory")
#else
#define YieldProcessor() ((void)0)
#endif
#define MemoryBarrier() __atomic_thread_fence(__ATOMIC_SEQ_CST)
#define _ReadWriteBarrier() __asm__ __volatile__("" ::: "memory")

/* ---- header-only: time and system information ----------------------------- */

/* CLOCK_MONOTONIC in nanoseconds: the frequency is 1 GHz (Windows: ~10 MHz). */
static inline BOOL QueryPerformanceCounter(LARGE_INTEGER *lpPerformanceCount)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lpPerformanceCount->QuadPart = (LONGLONG)ts.tv_sec * 1000000000LL + ts.tv_nsec;
    return TRUE;
}
static inline BOOL QueryPerformanceFrequency(LARGE_INTEGER *lpFrequency)
{
    lpFrequency->QuadPart = 1000000000LL;
    return TRUE;
}
static inline ULONGLONG GetTickCount64(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (ULONGLONG)ts.tv_sec * 1000ULL + (ULONGLONG)ts.tv_nsec / 1000000ULL;
}
static inline DWORD GetTickCount(void) { return (DWORD)GetTickCount64(); }

static inline void GetSystemInfo(LPSYSTEM_INFO lpSystemInfo)
{
    long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    long page = sysconf(_SC_PAGESIZE);
    memset(lpSystemInfo, 0, sizeof(*lpSystemInfo));
    if (cpus < 1)
        cpus = 1;
    if (page < 1)
        page = 4096;
#if defined(__x86_64__)
    lpSystemInfo->wProcessorArchitecture = PROCESSOR_ARCHITECTURE_AMD64;
    lpSystemInfo->dwProcessorType = PROCESSOR_AMD_X8664;
#elif defined(__aarch64__)
    lpSystemInfo->wProcessorArchitecture = PROCESSOR_ARCHITECTURE_ARM64;
#else
    lpSystemInfo->wProcessorArchitecture = PROCESSOR_ARCHITECTURE_UNKNOWN;
#endif
    lpSystemInfo->dwPageSize = (DWORD)page;
    lpSystemInfo->lpMinimumApplicationAddress = (LPVOID)(ULONG_PTR)0x10000;
    lpSystemInfo->lpMaximumApplicationAddress = (LPVOID)(ULONG_PTR)0x7FFFFFFEFFFFUL;
    lpSystemInfo->dwActiveProcessorMask =
        cpus >= 64 ? ~(DWORD_PTR)0 : (((DWORD_PTR)1 << cpus) - 1);
    lpSystemInfo->dwNumberOfProcessors = (DWORD)cpus;
    lpSystemInfo->dwAllocationGranularity = (DWORD)page;
}

static inline DWORD GetCurrentProcessId(void) { return (DWORD)getpid(); }

/* ---- header-only: memory --------------------------------------------------- */

#define RtlZeroMemory(Destination, Length) memset((Destination), 0, (Length))
#define RtlFillMemory(Destination, Length, Fill) memset((Destination), (Fill), (Length))
#define RtlCopyMemory(Destination, Source, Length) memcpy((Destination), (Source), (Length))
#define RtlMoveMemory(Destination, Source, Length) memmove((Destination), (Source), (Length))
#define RtlEqualMemory(Destination, Source, Length) (!memcmp((Destination), (Source), (Length)))
#define ZeroMemory RtlZeroMemory
#define FillMemory RtlFillMemory
#define CopyMemory RtlCopyMemory
#define MoveMemory RtlMoveMemory
#define EqualMemory RtlEqualMemory
static inline PVOID SecureZeroMemory(PVOID ptr, SIZE_T cnt)
{
    volatile char *p = (volatile char *)ptr;
    while (cnt--)
        *p++ = 0;
    return ptr;
}

/* The process heap is malloc; the handle is a constant tag. */
static inline HANDLE GetProcessHeap(void) { return (HANDLE)(ULONG_PTR)0x48454150; }
static inline LPVOID HeapAlloc(HANDLE hHeap, DWORD dwFlags, SIZE_T dwBytes)
{
    (void)hHeap;
    if (dwBytes == 0)
        dwBytes = 1; /* HeapAlloc(0) returns a unique pointer */
    return (dwFlags & HEAP_ZERO_MEMORY) ? calloc(1, dwBytes) : malloc(dwBytes);
}
static inline BOOL HeapFree(HANDLE hHeap, DWORD dwFlags, LPVOID lpMem)
{
    (void)hHeap;
    (void)dwFlags;
    free(lpMem);
    return TRUE;
}

/* ---- header-only: Interlocked* ----------------------------------------------
 * Type-generic over __atomic builtins, sequentially consistent, as Windows'
 * full-barrier versions.  Windows declares LONG volatile* parameters, but
 * Windows code often passes `volatile long` (64 bits on Linux), `volatile
 * unsigned` or `volatile long long`; each works on its own type here.
 * Increment/Decrement/Add return the new value; Exchange*, CompareExchange*,
 * ExchangeAdd*, And/Or/Xor return the old value, as on Windows.
 */
#ifdef __cplusplus

template <class T>
inline T InterlockedIncrement(T volatile *p)
{
    return __atomic_add_fetch(p, 1, __ATOMIC_SEQ_CST);
}
template <class T>
inline T InterlockedDecrement(T volatile *p)
{
    return __atomic_sub_fetch(p, 1, __ATOMIC_SEQ_CST);
}
template <class T, class V>
inline T InterlockedAdd(T volatile *p, V v)
{
    return __atomic_add_fetch(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T, class V>
inline T InterlockedExchangeAdd(T volatile *p, V v)
{
    return __atomic_fetch_add(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T, class V>
inline T InterlockedExchange(T volatile *p, V v)
{
    return __atomic_exchange_n(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T, class E, class C>
inline T InterlockedCompareExchange(T volatile *p, E exchange, C comparand)
{
    T expected = (T)comparand;
    __atomic_compare_exchange_n(p, &expected, (T)exchange, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;
}
template <class T, class V>
inline T InterlockedAnd(T volatile *p, V v)
{
    return __atomic_fetch_and(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T, class V>
inline T InterlockedOr(T volatile *p, V v)
{
    return __atomic_fetch_or(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T, class V>
inline T InterlockedXor(T volatile *p, V v)
{
    return __atomic_fetch_xor(p, (T)v, __ATOMIC_SEQ_CST);
}
template <class T>
inline T InterlockedIncrement64(T volatile *p) { return InterlockedIncrement(p); }
template <class T>
inline T InterlockedDecrement64(T volatile *p) { return InterlockedDecrement(p); }
template <class T, class V>
inline T InterlockedAdd64(T volatile *p, V v) { return InterlockedAdd(p, v); }
template <class T, class V>
inline T InterlockedExchangeAdd64(T volatile *p, V v) { return InterlockedExchangeAdd(p, v); }
template <class T, class V>
inline T InterlockedExchange64(T volatile *p, V v) { return InterlockedExchange(p, v); }
template <class T, class E, class C>
inline T InterlockedCompareExchange64(T volatile *p, E exchange, C comparand)
{
    return InterlockedCompareExchange(p, exchange, comparand);
}
template <class T, class V>
inline T *InterlockedExchangePointer(T *volatile *p, V v)
{
    return __atomic_exchange_n(p, (T *)v, __ATOMIC_SEQ_CST);
}
template <class T, class E, class C>
inline T *InterlockedCompareExchangePointer(T *volatile *p, E exchange, C comparand)
{
    T *expected = (T *)comparand;
    __atomic_compare_exchange_n(p, &expected, (T *)exchange, false, __ATOMIC_SEQ_CST,
                                __ATOMIC_SEQ_CST);
    return expected;
}

#else /* C: the builtins are already type-generic */

#define InterlockedIncrement(p) __atomic_add_fetch((p), 1, __ATOMIC_SEQ_CST)
#define InterlockedDecrement(p) __atomic_sub_fetch((p), 1, __ATOMIC_SEQ_CST)
#define InterlockedAdd(p, v) __atomic_add_fetch((p), (v), __ATOMIC_SEQ_CST)
#define InterlockedExchangeAdd(p, v) __atomic_fetch_add((p), (v), __ATOMIC_SEQ_CST)
#define InterlockedExchange(p, v) __atomic_exchange_n((p), (v), __ATOMIC_SEQ_CST)
#define InterlockedAnd(p, v) __atomic_fetch_and((p), (v), __ATOMIC_SEQ_CST)
#define InterlockedOr(p, v) __atomic_fetch_or((p), (v), __ATOMIC_SEQ_CST)
#define InterlockedXor(p, v) __atomic_fetch_xor((p), (v), __ATOMIC_SEQ_CST)
/* The comparand needs an lvalue of the target's unqualified type. */
#define InterlockedCompareExchange(p, exchange, comparand) \
    __extension__({ \
        __typeof__(__atomic_load_n((p), __ATOMIC_RELAXED)) ndw_expected_ = (comparand); \
        __atomic_compare_exchange_n((p), &ndw_expected_, (exchange), 0, \
                                    __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST); \
        ndw_expected_; \
    })
#define InterlockedIncrement64 InterlockedIncrement
#define InterlockedDecrement64 InterlockedDecrement
#define InterlockedAdd64 InterlockedAdd
#define InterlockedExchangeAdd64 InterlockedExchangeAdd
#define InterlockedExchange64 InterlockedExchange
#define InterlockedCompareExchange64 InterlockedCompareExchange
#define InterlockedExchangePointer InterlockedExchange
#define InterlockedCompareExchangePointer InterlockedCompareExchange

#endif /* __cplusplus */

NDW_QUIET_END

#endif /* NDW_API_H */
