/*
 * wprintf_smoke.c - the logging pattern of every Windows ND example:
 * `_tmain` with wide arguments, wprintf with %s of a wide string, then
 * printf.  Built as C and as C++ WITHOUT any library or stub: _tmain's
 * entry point and wprintf are header-only.  check.sh runs
 * `wprintf_smoke ndping.exe` and compares stdout with the expected text.
 */
#include <windows.h>
#include <tchar.h>
#include <stdio.h>

int __cdecl _tmain(int argc, TCHAR *argv[])
{
    if (argc != 2)
        return 2;
    wprintf(L"Beginning test: %s\n", argv[1]);
    printf("printf still works: %d\n", 42);
    _tprintf(_T("End of test: %s (%I64u bytes)\n"), argv[1], (ULONGLONG)4194304);
    return 0;
}
