/*
 * ndw_crt.h - the Microsoft C runtime extensions ND programs use: secure
 * string copies, case-insensitive compares, _wtol, _countof, _wfreopen,
 * _fcloseall, _aligned_malloc, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <windows.h> and <tchar.h>.  Semantics follow Microsoft's C runtime
 * reference for each function; all are header-only.  wprintf and friends
 * are in ndw_wprintf.h.
 */
#ifndef NDW_CRT_H
#define NDW_CRT_H

#include "ndw_types.h"
#include "ndw_windef.h"
#include "ndw_posix.h"
#include <errno.h>
#include <limits.h>
#include <stdarg.h>

NDW_QUIET_BEGIN

/* _countof: a C++ array-only form that rejects pointers, the sizeof form in C. */
#ifndef _countof
#ifdef __cplusplus
template <typename T, size_t N>
char (*ndw_countof_helper(T (&)[N]))[N];
#define _countof(a) (sizeof(*ndw_countof_helper(a)))
#else
#define _countof(a) (sizeof(a) / sizeof((a)[0]))
#endif
#endif

#ifndef _TRUNCATE
#define _TRUNCATE ((size_t)-1)
#endif
#ifndef STRUNCATE
#define STRUNCATE 80
#endif

/* ---- secure copies: on failure the destination is emptied ----------------- */

static inline errno_t wcscpy_s(wchar_t *dest, size_t size, const wchar_t *src)
{
    size_t n;
    if (dest == NULL || size == 0)
        return EINVAL;
    if (src == NULL) {
        dest[0] = L'\0';
        return EINVAL;
    }
    n = wcslen(src);
    if (n >= size) {
        dest[0] = L'\0';
        return ERANGE;
    }
    memcpy(dest, src, (n + 1) * sizeof(wchar_t));
    return 0;
}
static inline errno_t wcscat_s(wchar_t *dest, size_t size, const wchar_t *src)
{
    size_t used;
    if (dest == NULL || size == 0)
        return EINVAL;
    used = wcsnlen(dest, size);
    if (src == NULL || used == size) {
        dest[0] = L'\0';
        return EINVAL;
    }
    return wcscpy_s(dest + used, size - used, src) == 0 ? 0 : (dest[0] = L'\0', ERANGE);
}
static inline errno_t strcpy_s(char *dest, size_t size, const char *src)
{
    size_t n;
    if (dest == NULL || size == 0)
        return EINVAL;
    if (src == NULL) {
        dest[0] = '\0';
        return EINVAL;
    }
    n = strlen(src);
    if (n >= size) {
        dest[0] = '\0';
        return ERANGE;
    }
    memcpy(dest, src, n + 1);
    return 0;
}
static inline errno_t strcat_s(char *dest, size_t size, const char *src)
{
    size_t used;
    if (dest == NULL || size == 0)
        return EINVAL;
    used = strnlen(dest, size);
    if (src == NULL || used == size) {
        dest[0] = '\0';
        return EINVAL;
    }
    return strcpy_s(dest + used, size - used, src) == 0 ? 0 : (dest[0] = '\0', ERANGE);
}
#ifdef __cplusplus
/* The C++ overloads that take the size from an array. */
template <size_t N>
inline errno_t wcscpy_s(wchar_t (&dest)[N], const wchar_t *src) { return wcscpy_s(dest, N, src); }
template <size_t N>
inline errno_t wcscat_s(wchar_t (&dest)[N], const wchar_t *src) { return wcscat_s(dest, N, src); }
template <size_t N>
inline errno_t strcpy_s(char (&dest)[N], const char *src) { return strcpy_s(dest, N, src); }
template <size_t N>
inline errno_t strcat_s(char (&dest)[N], const char *src) { return strcat_s(dest, N, src); }
#endif

/* ---- compares and conversions ---------------------------------------------- */

static inline int _wcsicmp(const wchar_t *a, const wchar_t *b) { return wcscasecmp(a, b); }
static inline int _wcsnicmp(const wchar_t *a, const wchar_t *b, size_t n)
{
    return wcsncasecmp(a, b, n);
}
static inline int _stricmp(const char *a, const char *b) { return strcasecmp(a, b); }
static inline int _strnicmp(const char *a, const char *b, size_t n)
{
    return strncasecmp(a, b, n);
}

/* Windows `long` is 32 bits: results saturate at the LONG range as MSVC's do. */
static inline LONG _wtol(const wchar_t *s)
{
    long v = wcstol(s, NULL, 10);
    if (v > INT_MAX)
        return INT_MAX;
    if (v < INT_MIN)
        return INT_MIN;
    return (LONG)v;
}
static inline int _wtoi(const wchar_t *s) { return (int)_wtol(s); }
static inline LONGLONG _wtoi64(const wchar_t *s) { return wcstoll(s, NULL, 10); }
static inline LONGLONG _atoi64(const char *s) { return strtoll(s, NULL, 10); }

/* ---- files ------------------------------------------------------------------- */

/* Converts a wide path or mode to the locale's multibyte; NULL if impossible. */
static inline char *ndw_wide_to_mb(const wchar_t *s)
{
    size_t n = wcstombs(NULL, s, 0);
    char *r;
    if (n == (size_t)-1)
        return NULL;
    r = (char *)malloc(n + 1);
    if (r != NULL)
        wcstombs(r, s, n + 1);
    return r;
}
static inline FILE *_wfopen(const wchar_t *filename, const wchar_t *mode)
{
    char *f = ndw_wide_to_mb(filename), *m = ndw_wide_to_mb(mode);
    FILE *r = (f != NULL && m != NULL) ? fopen(f, m) : NULL;
    free(f);
    free(m);
    return r;
}
static inline FILE *_wfreopen(const wchar_t *filename, const wchar_t *mode, FILE *stream)
{
    char *f = ndw_wide_to_mb(filename), *m = ndw_wide_to_mb(mode);
    FILE *r = (f != NULL && m != NULL) ? freopen(f, m, stream) : NULL;
    free(f);
    free(m);
    return r;
}
/* Closes every stream except stdin, stdout and stderr (glibc fcloseall). */
static inline int _fcloseall(void) { return fcloseall(); }

/* ---- aligned heap ------------------------------------------------------------- */

/* Note the argument order: (size, alignment), the reverse of aligned_alloc. */
static inline void *_aligned_malloc(size_t size, size_t alignment)
{
    void *p = NULL;
    if (alignment < sizeof(void *))
        alignment = sizeof(void *);
    if (alignment & (alignment - 1)) {
        errno = EINVAL;
        return NULL;
    }
    if (posix_memalign(&p, alignment, size ? size : 1) != 0)
        return NULL;
    return p;
}
static inline void _aligned_free(void *p) { free(p); }

/* ---- narrow formatting -------------------------------------------------------- */

static inline int sprintf_s(char *buffer, size_t size, const char *format, ...)
    __attribute__((__format__(__printf__, 3, 4)));
static inline int sprintf_s(char *buffer, size_t size, const char *format, ...)
{
    va_list ap;
    int n;
    if (buffer == NULL || size == 0)
        return -1;
    va_start(ap, format);
    n = vsnprintf(buffer, size, format, ap);
    va_end(ap);
    if (n < 0 || (size_t)n >= size) {
        buffer[0] = '\0';
        return -1;
    }
    return n;
}
#define _snprintf snprintf
#define _vsnprintf vsnprintf
#define printf_s printf
#define fprintf_s fprintf

NDW_QUIET_END

#endif /* NDW_CRT_H */
