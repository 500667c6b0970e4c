/*
 * tchar.h - generic-text mappings (_TCHAR, _T, _tmain, _tcs*, _t*) for
 * Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's "Generic-text mappings in tchar.h" documentation.  _UNICODE
 * selects the wide mappings and is the default (see ndw_tchar.h).
 *
 * _tmain under _UNICODE.  Windows programs write
 *     int __cdecl _tmain(int argc, TCHAR *argv[])
 * and the Microsoft C runtime calls it as wmain with wide arguments.  Linux
 * starts programs at `main(int, char **)`, so here:
 *  - _tmain (and wmain) become nd_compat_wmain, declared extern "C" below,
 *    so the program's definition gets C linkage whatever the language;
 *  - the macro also emits, in the one translation unit that defines
 *    _tmain, a WEAK `main` (an assembler alias of nd_compat_main_entry
 *    below) that sets the character-type locale from the environment,
 *    converts argv with mbstowcs and calls nd_compat_wmain.
 * Why it is done this way: a weak `main` defined by the header in every
 * translation unit would collide with a program's own `main` in the same
 * translation unit (one object file cannot define a symbol twice, weak or
 * not).  Emitted from the _tmain macro, it appears only where the program
 * defines _tmain; the `.set` form may repeat, so a prototype of _tmain
 * before its definition is fine; weak, so a real `main` elsewhere still
 * wins.  No extra library or source file is needed.
 *
 * Only LC_CTYPE is taken from the environment (Windows programs start in
 * the "C" locale; LC_NUMERIC from the environment could change printf's
 * decimal point), which is what mbstowcs and wide output need.
 * Define ND_COMPAT_NO_WMAIN to turn all of this off.
 */
#ifndef _INC_TCHAR
#define _INC_TCHAR

#include "ndw_types.h"
#include "ndw_tchar.h"
#include "ndw_crt.h"
#include "ndw_wprintf.h"
#include <ctype.h>
#include <locale.h>
#include <wctype.h>

#ifdef _UNICODE

typedef wchar_t _TCHAR, _TSCHAR, _TUCHAR, _TXCHAR;
typedef wint_t _TINT;
#define __T(x) L##x

#define _tprintf wprintf
#define _ftprintf fwprintf
#define _vtprintf vwprintf
#define _vftprintf vfwprintf
#define _stprintf swprintf
#define _stprintf_s swprintf_s
#define _sntprintf _snwprintf
#define _tcslen wcslen
#define _tcsnlen wcsnlen
#define _tcscpy wcscpy
#define _tcscpy_s wcscpy_s
#define _tcsncpy wcsncpy
#define _tcscat wcscat
#define _tcscat_s wcscat_s
#define _tcscmp wcscmp
#define _tcsncmp wcsncmp
#define _tcsicmp _wcsicmp
#define _tcsnicmp _wcsnicmp
#define _tcschr wcschr
#define _tcsrchr wcsrchr
#define _tcsstr wcsstr
#define _tcstol wcstol
#define _tcstoul wcstoul
#define _tcstoi64 wcstoll
#define _tcstoui64 wcstoull
#define _tcstod wcstod
#define _ttol _wtol
#define _ttoi _wtoi
#define _tstol _wtol
#define _tstoi _wtoi
#define _ttoi64 _wtoi64
#define _tstoi64 _wtoi64
#define _tfopen _wfopen
#define _tfreopen _wfreopen
#define _fgetts fgetws
#define _fputts fputws
#define _istdigit iswdigit
#define _istspace iswspace
#define _istalpha iswalpha
#define _istalnum iswalnum
#define _totlower towlower
#define _totupper towupper

#else /* _MBCS or ND_COMPAT_ANSI: plain char */

typedef char _TCHAR, _TSCHAR;
typedef unsigned char _TUCHAR, _TXCHAR;
typedef int _TINT;
#define __T(x) x

#define _tprintf printf
#define _ftprintf fprintf
#define _vtprintf vprintf
#define _vftprintf vfprintf
#define _stprintf sprintf
#define _stprintf_s sprintf_s
#define _sntprintf snprintf
#define _tcslen strlen
#define _tcsnlen strnlen
#define _tcscpy strcpy
#define _tcscpy_s strcpy_s
#define _tcsncpy strncpy
#define _tcscat strcat
#define _tcscat_s strcat_s
#define _tcscmp strcmp
#define _tcsncmp strncmp
#define _tcsicmp _stricmp
#define _tcsnicmp _strnicmp
#define _tcschr strchr
#define _tcsrchr strrchr
#define _tcsstr strstr
#define _tcstol strtol
#define _tcstoul strtoul
#define _tcstoi64 strtoll
#define _tcstoui64 strtoull
#define _tcstod strtod
#define _ttol atol
#define _ttoi atoi
#define _tstol atol
#define _tstoi atoi
#define _ttoi64 _atoi64
#define _tstoi64 _atoi64
#define _tfopen fopen
#define _tfreopen freopen
#define _fgetts fgets
#define _fputts fputs
#define _istdigit isdigit
#define _istspace isspace
#define _istalpha isalpha
#define _istalnum isalnum
#define _totlower tolower
#define _totupper toupper

#endif /* _UNICODE */

#define _T(x) __T(x)
#define _TEXT(x) __T(x)

/* ---- entry point ---------------------------------------------------------- */

#if defined(_UNICODE) && !defined(ND_COMPAT_NO_WMAIN)

NDW_QUIET_BEGIN
EXTERN_C_START
/*
 * The program's _tmain/wmain.  Declared weak so that translation units that
 * include this header without defining _tmain still link; the definition
 * the program provides is the one called.
 */
int nd_compat_wmain(int argc, wchar_t **argv) __attribute__((__weak__));

/*
 * The body of the weak `main`: converts the arguments and calls the wide
 * entry point.  Arguments that are not valid in the locale's encoding are
 * widened byte by byte.  The converted strings live as long as the process,
 * like argv.  A weak global rather than a static function, so that link-time
 * optimisation cannot rename the symbol the assembler alias refers to.
 */
int nd_compat_main_entry(int argc, char **argv) __attribute__((__weak__, __used__));
int nd_compat_main_entry(int argc, char **argv)
{
    wchar_t **wargv;
    int i;
    setlocale(LC_CTYPE, "");
    wargv = (wchar_t **)calloc((size_t)argc + 1, sizeof(wchar_t *));
    if (wargv == NULL)
        return 1;
    for (i = 0; i < argc; i++) {
        size_t n = mbstowcs(NULL, argv[i], 0);
        size_t len = strlen(argv[i]), j;
        wargv[i] = (wchar_t *)malloc(((n == (size_t)-1 ? len : n) + 1) * sizeof(wchar_t));
        if (wargv[i] == NULL)
            return 1;
        if (n != (size_t)-1) {
            mbstowcs(wargv[i], argv[i], n + 1);
        } else {
            for (j = 0; j <= len; j++)
                wargv[i][j] = (wchar_t)(unsigned char)argv[i][j];
        }
    }
    wargv[argc] = NULL;
    return nd_compat_wmain(argc, wargv);
}
EXTERN_C_END
NDW_QUIET_END

/*
 * `int __cdecl _tmain(int argc, TCHAR *argv[])` expands to
 *   int nd_compat_tmain_anchor(void);          (absorbs the leading `int`)
 *   __asm__(weak main = nd_compat_main_entry);
 *   int nd_compat_wmain(int argc, TCHAR *argv[])
 */
#define NDW_EMIT_WEAK_MAIN \
    __asm__(".weak main\n\t.set main, nd_compat_main_entry\n\t.type main, STT_FUNC")
#define _tmain nd_compat_tmain_anchor(void); NDW_EMIT_WEAK_MAIN; int nd_compat_wmain
#define wmain nd_compat_tmain_anchor(void); NDW_EMIT_WEAK_MAIN; int nd_compat_wmain

#else

#define _tmain main

#endif

#endif /* _INC_TCHAR */
