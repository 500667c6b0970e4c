/*
 * compile_all.c - every header of include/ and include/win32 in one
 * translation unit, compiled as C and as C++ with -Wall -Wextra -Werror,
 * followed (in C++) by the libstdc++ headers that break when a Windows
 * layer defines __in/__out or min/max macros.  Also checks that no ND
 * method name is a macro and that __in/__out stay undefined in C++.
 * NDABI_ORDER selects an include order:
 *   1 (default): <ntstatus.h>, WIN32_NO_STATUS, <windows.h>, then ND headers
 *   2: ND headers first, then <windows.h>, then <ntstatus.h> (no WIN32_NO_STATUS)
 */
#ifndef NDABI_ORDER
#define NDABI_ORDER 1
#endif

#if NDABI_ORDER == 1
#include <ntstatus.h>
#define WIN32_NO_STATUS
#include <windows.h>
#include <winsock2.h>
#include <ws2tcpip.h>
#include <unknwn.h>
#include <objbase.h>
#include <guiddef.h>
#include <basetsd.h>
#include <winerror.h>
#include <process.h>
#include <tchar.h>
#include <sal.h>
#include <ndspi.h>
#include <ndsupport.h>
#else
#include <ndsupport.h>
#include <ndspi.h>
#include <nddef.h>
#include <ndstatus.h>
#include <windows.h>
#include <tchar.h>
#include <ntstatus.h>
#include <ws2tcpip.h>
#endif

#ifdef __cplusplus
#include <algorithm>
#include <atomic>
#include <cwchar>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <new>
#include <sstream>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>
#endif
#include <stdio.h>
#include <stdlib.h>

#include "gen_not_macros.inc"

#if defined(__cplusplus) && (defined(__in) || defined(__out))
#error "__in/__out must stay undefined in C++ (libstdc++ uses them as names)"
#endif
#if !defined(__cplusplus) && (!defined(__in) || !defined(__out))
#error "__in/__out are defined (empty) in C"
#endif
#if !defined(UNICODE) || !defined(_UNICODE)
#error "UNICODE is the default"
#endif

/* min/max are usable after the standard headers, and std::min still works. */
int ndabi_minmax(void);
int ndabi_minmax(void)
{
#ifdef __cplusplus
    return (int)(min(2, 3L) + max(1u, 2u)) + std::min(1, 2) + (std::max)(3, 4) +
           (int)std::numeric_limits<int>::min() * 0;
#else
    return min(2, 3) + max(1, 2);
#endif
}

#ifdef __cplusplus
/* Unqualified min/max beside `using namespace std` (std::min wins for equal
 * types, the global template serves mixed ones), std::wprintf and
 * std::to_wstring after the wprintf macros. */
namespace ndabi_std {
using namespace std;
static int mixed(void)
{
    long a = min(1, 2L);
    int b = max(3, 4);
    std::wstring w = std::to_wstring(42);
    std::wprintf(L"%s", L"");
    return (int)a + b + (int)w.size();
}
} // namespace ndabi_std
#endif

int main(void)
{
#ifdef __cplusplus
    printf("compile_all: ok (%d, %d)\n", ndabi_minmax(), ndabi_std::mixed());
#else
    printf("compile_all: ok (%d)\n", ndabi_minmax());
#endif
    return 0;
}
