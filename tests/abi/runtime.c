/*
 * runtime.c - run-time checks of the header-only parts of the Win32 layer.
 * The same source is compiled as C (gcc) and as C++ (g++ -x c++), because
 * several functions have different C and C++ forms (Interlocked* are
 * macros in C and templates in C++; wcscpy_s has a C++ array overload).
 *
 * Covers: Interlocked* on volatile long, unsigned, long long and pointers;
 * WSAStringToAddressA/W parse cases and their failure contract (SOCKET_ERROR,
 * WSAEINVAL, address zeroed); InetPton/InetNtop; the MSVC wprintf format
 * rewriting (through swprintf); CONTAINING_RECORD, _countof, min/max, the
 * secure string functions, _wtol, HeapAlloc, _aligned_malloc, the clocks,
 * GetSystemInfo and WSAStartup.  Finally it writes through wprintf and then
 * printf on stdout; check.sh compares that output with runtime.expected.
 *
 * Links with ndw_stub.c for the library's thread-local last error.
 */
#include <ntstatus.h>
#define WIN32_NO_STATUS
#include <windows.h>
#include <winsock2.h>
#include <ws2tcpip.h>
#include <tchar.h>
#include <ndspi.h>
#include <locale.h>
#include <stdio.h>

static int failures;

#define CHECK(cond) \
    do { \
        if (!(cond)) { \
            fprintf(stderr, "runtime (%s): line %d: %s\n", LANG, __LINE__, #cond); \
            failures++; \
        } \
    } while (0)

#ifdef __cplusplus
#define LANG "C++"
#else
#define LANG "C"
#endif

static void test_interlocked(void)
{
    volatile long l = 5;
    volatile LONG L = 0;
    volatile unsigned u = 7;
    volatile long long ll = 1LL << 40;
    volatile LONG64 l64 = 10;
    int target = 0, other = 0;
    void *volatile pv = NULL;
    void *old;

    CHECK(InterlockedIncrement(&l) == 6 && l == 6);        /* new value */
    CHECK(InterlockedDecrement(&l) == 5 && l == 5);
    CHECK(InterlockedExchange(&l, 9) == 5 && l == 9);      /* old value */
    CHECK(InterlockedExchangeAdd(&l, 3) == 9 && l == 12);
    CHECK(InterlockedCompareExchange(&l, 20, 12) == 12 && l == 20);
    CHECK(InterlockedCompareExchange(&l, 30, 12) == 20 && l == 20); /* no swap */
    CHECK(InterlockedDecrement(&L) == -1);
    CHECK(InterlockedIncrement(&u) == 8u);
    CHECK(InterlockedCompareExchange(&u, 100u, 8u) == 8u && u == 100u);
    CHECK(InterlockedExchangeAdd(&u, 1) == 100u && u == 101u);
    CHECK(InterlockedOr(&u, 0x10) == 101u && u == (101u | 0x10));
    CHECK(InterlockedAnd(&u, 0xF) == (101u | 0x10) && u == ((101u | 0x10) & 0xF));
    CHECK(InterlockedExchangeAdd64(&ll, 5) == (1LL << 40) && ll == (1LL << 40) + 5);
    CHECK(InterlockedIncrement64(&ll) == (1LL << 40) + 6);
    CHECK(InterlockedCompareExchange64(&l64, 11, 10) == 10 && l64 == 11);
    CHECK(InterlockedAdd(&l64, 4) == 15);
    old = InterlockedCompareExchangePointer(&pv, (void *)&target, NULL);
    CHECK(old == NULL && pv == (void *)&target);
    old = InterlockedCompareExchangePointer(&pv, (void *)&other, NULL);
    CHECK(old == (void *)&target && pv == (void *)&target);
    old = InterlockedExchangePointer(&pv, (void *)&other);
    CHECK(old == (void *)&target && pv == (void *)&other);
}

static void test_wsa_string_to_address(void)
{
    SOCKADDR_IN sin;
    SOCKADDR_IN6 sin6;
    INT len;
    static const unsigned char v6_loop[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
    WCHAR wide_addr[] = L"10.1.2.3:54324"; /* argv-style: not const */

    len = sizeof(sin);
    CHECK(WSAStringToAddressA("192.168.1.20", AF_INET, NULL, (LPSOCKADDR)&sin, &len) == 0);
    CHECK(sin.sin_family == AF_INET && sin.sin_port == 0 &&
          sin.sin_addr.s_addr == htonl(0xC0A80114) && len == (INT)sizeof(sin));

    len = sizeof(sin);
    CHECK(WSAStringToAddressW(wide_addr, AF_INET, NULL, (LPSOCKADDR)&sin, &len) == 0);
    CHECK(sin.sin_port == htons(54324) && sin.sin_addr.s_addr == htonl(0x0A010203));

    len = sizeof(sin);
    CHECK(WSAStringToAddress(wide_addr, AF_INET, NULL, (LPSOCKADDR)&sin, &len) == 0);

    len = sizeof(sin);
    CHECK(WSAStringToAddressW((LPWSTR)L"0.0.0.0", AF_INET, NULL, (LPSOCKADDR)&sin, &len) == 0);
    CHECK(sin.sin_addr.s_addr == 0 && sin.sin_family == AF_INET);

    /* Failures: SOCKET_ERROR, WSAEINVAL, the address left zeroed. */
    {
        static const char *const bad[] = {"", "abc", "1.2.3.4:", "1.2.3.4:65536", "1.2.3.4:12x",
                                          "1.2.3.4:123456", "256.1.1.1", "[1.2.3.4]", "::1"};
        size_t i;
        for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
            memset(&sin, 0xAB, sizeof(sin));
            len = sizeof(sin);
            WSASetLastError(0);
            CHECK(WSAStringToAddressA(bad[i], AF_INET, NULL, (LPSOCKADDR)&sin, &len) ==
                  SOCKET_ERROR);
            CHECK(WSAGetLastError() == WSAEINVAL);
            CHECK(sin.sin_addr.s_addr == 0 && sin.sin_family == 0 && sin.sin_port == 0);
        }
    }
    len = sizeof(sin);
    CHECK(WSAStringToAddressW((LPWSTR)L"1.2.3.\u00e9", AF_INET, NULL, (LPSOCKADDR)&sin, &len) ==
          SOCKET_ERROR);
    CHECK(WSAGetLastError() == WSAEINVAL && sin.sin_addr.s_addr == 0);

    /* Buffer too small: WSAEFAULT and the size needed. */
    len = 4;
    CHECK(WSAStringToAddressA("1.2.3.4", AF_INET, NULL, (LPSOCKADDR)&sin, &len) == SOCKET_ERROR);
    CHECK(WSAGetLastError() == WSAEFAULT && len == (INT)sizeof(SOCKADDR_IN));

    /* Unsupported family. */
    len = sizeof(sin);
    CHECK(WSAStringToAddressA("1.2.3.4", AF_UNIX, NULL, (LPSOCKADDR)&sin, &len) == SOCKET_ERROR);
    CHECK(WSAGetLastError() == WSAEINVAL);

    /* IPv6: plain, bracketed with port, scope id. */
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("::1", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == 0);
    CHECK(sin6.sin6_family == AF_INET6 && memcmp(&sin6.sin6_addr, v6_loop, 16) == 0 &&
          sin6.sin6_port == 0 && len == (INT)sizeof(sin6));
    len = sizeof(sin6);
    CHECK(WSAStringToAddressW((LPWSTR)L"[::1]:8080", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == 0);
    CHECK(sin6.sin6_port == htons(8080) && memcmp(&sin6.sin6_addr, v6_loop, 16) == 0);
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("[fe80::1%3]:7", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == 0);
    CHECK(sin6.sin6_scope_id == 3 && sin6.sin6_port == htons(7) && sin6.sin6_addr.s6_addr[0] == 0xfe);
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("fe80::2%12", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == 0);
    CHECK(sin6.sin6_scope_id == 12 && sin6.sin6_addr.s6_addr[15] == 2);
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("[::1", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == SOCKET_ERROR);
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("[::1]x", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == SOCKET_ERROR);
    len = sizeof(sin6);
    CHECK(WSAStringToAddressA("1.2.3.4", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == SOCKET_ERROR);
    CHECK(WSAGetLastError() == WSAEINVAL && sin6.sin6_family == 0);
    len = (INT)sizeof(SOCKADDR_IN); /* big enough for v4, too small for v6 */
    CHECK(WSAStringToAddressA("::1", AF_INET6, NULL, (LPSOCKADDR)&sin6, &len) == SOCKET_ERROR);
    CHECK(WSAGetLastError() == WSAEFAULT && len == (INT)sizeof(SOCKADDR_IN6));

    /* InetPton / InetNtop */
    {
        IN_ADDR a;
        char text[INET6_ADDRSTRLEN];
        WCHAR wtext[INET6_ADDRSTRLEN];
        CHECK(InetPtonA(AF_INET, "127.0.0.1", &a) == 1 && a.s_addr == htonl(0x7F000001));
        CHECK(InetPtonA(AF_INET, "127.0.0", &a) == 0);
        CHECK(InetPtonW(AF_INET, L"10.0.0.9", &a) == 1 && a.s_addr == htonl(0x0A000009));
        CHECK(InetNtopA(AF_INET, &a, text, sizeof(text)) != NULL && strcmp(text, "10.0.0.9") == 0);
        CHECK(InetNtopW(AF_INET, &a, wtext, _countof(wtext)) != NULL &&
              wcscmp(wtext, L"10.0.0.9") == 0);
    }
}

/* swprintf with MSVC semantics; returns 1 when the output matches. */
static int fmt_is(const wchar_t *expect, const wchar_t *format, ...)
{
    wchar_t buf[256];
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vswprintf(buf, _countof(buf), format, ap);
    va_end(ap);
    if (n < 0 || wcscmp(buf, expect) != 0) {
        fprintf(stderr, "runtime (%s): format \"%ls\" gave \"%ls\", expected \"%ls\"\n", LANG,
                format, n < 0 ? L"<error>" : buf, expect);
        return 0;
    }
    return 1;
}

static void test_wide_formats(void)
{
    wchar_t small[4];
    wchar_t out[64];
    CHECK(fmt_is(L"ndping.exe", L"%s", L"ndping.exe"));      /* %s is wide */
    CHECK(fmt_is(L"narrow", L"%S", "narrow"));               /* %S is narrow */
    CHECK(fmt_is(L"narrow", L"%hs", "narrow"));
    CHECK(fmt_is(L"wide", L"%ls", L"wide"));
    CHECK(fmt_is(L"wide", L"%ws", L"wide"));
    CHECK(fmt_is(L"W", L"%c", L'W'));
    CHECK(fmt_is(L"n", L"%C", 'n'));
    CHECK(fmt_is(L"[  abc]", L"[%5s]", L"abc"));
    CHECK(fmt_is(L"[ab   ]", L"[%-5.2s]", L"abcd"));
    CHECK(fmt_is(L"[   ab]", L"[%*.*s]", 5, 2, L"abcd"));
    CHECK(fmt_is(L"-5 18446744073709551615", L"%I64d %I64u", (LONGLONG)-5, ~(ULONGLONG)0));
    CHECK(fmt_is(L"7 -3", L"%Iu %Id", (SIZE_T)7, (SSIZE_T)-3));
    CHECK(fmt_is(L"42 ff", L"%I32d %I32x", 42, 255u));
    CHECK(fmt_is(L"100% 0x1f 000012", L"%d%% %#x %06lu", 100, 31u, 12ul));
    CHECK(fmt_is(L"3.50 -7 65535", L"%.2f %hd %hu", 3.5, (short)-7, (unsigned short)65535));
    CHECK(fmt_is(L"1099511627776", L"%lld", 1LL << 40));
    /* Too small: -1 and an empty buffer, as MSVC's swprintf. */
    CHECK(swprintf(small, _countof(small), L"%s", L"toolong") == -1 && small[0] == L'\0');
    CHECK(swprintf(out, _countof(out), L"%s=%d", L"x", 3) == 3 && wcscmp(out, L"x=3") == 0);
#ifdef __cplusplus
    CHECK(swprintf_s(out, L"%S", "arr") == 3 && wcscmp(out, L"arr") == 0); /* array overload */
#endif
}

struct outer {
    int before;
    OVERLAPPED ov;
    int after;
};

static void test_misc(void)
{
    struct outer o;
    wchar_t w[8];
    char c[4];
    LARGE_INTEGER t0, t1, freq;
    SYSTEM_INFO si;
    WSADATA wsa;
    unsigned char *z;
    void *al;
    ULONGLONG tick;

    CHECK(CONTAINING_RECORD(&o.ov, struct outer, ov) == &o);
    CHECK(_countof(w) == 8);
    CHECK(min(3, 4) == 3 && max(3, 4) == 4 && min(-1, 2L) == -1);
    CHECK(wcscpy_s(w, _countof(w), L"1234567") == 0 && wcscmp(w, L"1234567") == 0);
    CHECK(wcscpy_s(w, _countof(w), L"12345678") == ERANGE && w[0] == L'\0');
    CHECK(strcpy_s(c, sizeof(c), "abc") == 0 && strcat_s(c, sizeof(c), "d") == ERANGE);
#ifdef __cplusplus
    CHECK(wcscpy_s(w, L"arr") == 0 && wcscmp(w, L"arr") == 0); /* array overload */
#endif
    CHECK(_wcsicmp(L"-S", L"-s") == 0 && _tcsicmp(_T("Abc"), _T("aBC")) == 0);
    CHECK(_tcscmp(_T("x"), _T("x")) == 0);
    CHECK(_wtol(L"54324") == 54324 && _ttol(_T("-12")) == -12 && _wtol(L"99999999999") == INT_MAX);
    z = (unsigned char *)HeapAlloc(GetProcessHeap(), HEAP_ZERO_MEMORY, 64);
    CHECK(z != NULL && z[0] == 0 && z[63] == 0);
    CHECK(HeapFree(GetProcessHeap(), 0, z));
    al = _aligned_malloc(100, 4096);
    CHECK(al != NULL && ((ULONG_PTR)al & 4095) == 0);
    _aligned_free(al);
    CHECK(QueryPerformanceFrequency(&freq) && freq.QuadPart == 1000000000LL);
    CHECK(QueryPerformanceCounter(&t0));
    tick = GetTickCount64();
    Sleep(2);
    CHECK(QueryPerformanceCounter(&t1) && t1.QuadPart - t0.QuadPart >= 2000000LL);
    CHECK(GetTickCount64() >= tick + 1);
    GetSystemInfo(&si);
    CHECK(si.dwNumberOfProcessors >= 1 && si.dwPageSize >= 4096);
    CHECK(WSAStartup(MAKEWORD(2, 2), &wsa) == 0 && wsa.wVersion == 0x0202 && WSACleanup() == 0);
    ZeroMemory(&o, sizeof(o));
    FillMemory(c, sizeof(c), 'x');
    CHECK(o.after == 0 && c[3] == 'x');
    UNREFERENCED_PARAMETER(tick);
}

int main(void)
{
    if (setlocale(LC_CTYPE, "C.UTF-8") == NULL)
        setlocale(LC_CTYPE, "C.utf8");
    test_interlocked();
    test_wsa_string_to_address();
    test_wide_formats();
    test_misc();
    if (failures) {
        fprintf(stderr, "runtime (%s): %d failure(s)\n", LANG, failures);
        return 1;
    }
    /* Output: stdout must stay byte-oriented after wprintf (check.sh diffs it). */
    wprintf(L"Beginning test: %s (%S) %c%C %I64d %Iu\n", L"ndping.exe", "narrow", L'W', 'n',
            (LONGLONG)-1, (SIZE_T)64);
    printf("printf after wprintf: %d\n", 7);
    wprintf(L"%s\n", L"h\u00e9llo \u6e2c");
    fwprintf(stdout, L"%-6s|%5.1f|\n", L"ab", 2.5);
    printf("End of test\n");
    fflush(stdout);
    return 0;
}
