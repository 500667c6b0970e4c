/*
 * ndw_tchar.h - the UNICODE/_UNICODE choice and the TCHAR types.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <windows.h> and <tchar.h>.  As in Microsoft's headers, winnt.h-style names
 * (TCHAR, LPTSTR, TEXT) follow UNICODE and tchar.h names (_TCHAR, _T)
 * follow _UNICODE; this layer keeps the two macros in step.
 *
 * Default: UNICODE.  Visual Studio projects define UNICODE and _UNICODE by
 * default and ND programs are written that way (`wcscmp(argv[i], L"-s")`
 * on `_tmain`'s TCHAR argv), so when a program chooses neither UNICODE,
 * _UNICODE nor _MBCS, both are defined here.  Define ND_COMPAT_ANSI (or
 * _MBCS) before the first Windows header to get char-based TCHARs.
 */
#ifndef NDW_TCHAR_H
#define NDW_TCHAR_H

#include "ndw_types.h"

#if !defined(UNICODE) && !defined(_UNICODE) && !defined(_MBCS) && \
    !defined(ND_COMPAT_ANSI)
#define UNICODE
#define _UNICODE
#endif
#if defined(UNICODE) && !defined(_UNICODE)
#define _UNICODE
#endif
#if defined(_UNICODE) && !defined(UNICODE)
#define UNICODE
#endif

#ifdef UNICODE
typedef WCHAR TCHAR, *PTCHAR, TBYTE, *PTBYTE;
typedef LPWSTR LPTSTR, PTSTR, LPTCH, PTCH;
typedef LPCWSTR LPCTSTR, PCTSTR;
#define __TEXT(quote) L##quote
#else
typedef char TCHAR, *PTCHAR;
typedef unsigned char TBYTE, *PTBYTE;
typedef LPSTR LPTSTR, PTSTR, LPTCH, PTCH;
typedef LPCSTR LPCTSTR, PCTSTR;
#define __TEXT(quote) quote
#endif
#define TEXT(quote) __TEXT(quote)

#endif /* NDW_TCHAR_H */
