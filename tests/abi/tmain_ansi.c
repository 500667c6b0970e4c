/*
 * tmain_ansi.c - with ND_COMPAT_ANSI (no UNICODE), TCHAR is char and
 * _tmain is plain main.  check.sh runs it as `tmain_ansi -s` (exit 43).
 */
#define ND_COMPAT_ANSI
#include <windows.h>
#include <tchar.h>
#include <string.h>

int _tmain(int argc, TCHAR *argv[])
{
    TCHAR buf[8];
    if (sizeof(TCHAR) != 1 || argc != 2 || _tcscmp(argv[1], _T("-s")) != 0)
        return 1;
    if (_tcscpy_s(buf, sizeof(buf), _T("abc")) != 0 || _tcsicmp(buf, _T("ABC")) != 0)
        return 1;
    return 43;
}
