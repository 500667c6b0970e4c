/*
 * ndw_wprintf.h - wprintf, fwprintf, vwprintf, vfwprintf and swprintf with
 * Microsoft C runtime semantics, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * <windows.h>, <tchar.h> and the other Windows-named headers.  It follows
 * Microsoft's "Format specification syntax: printf and wprintf functions"
 * documentation.  Two glibc behaviours break every ND example otherwise:
 *
 *  1. Conversions differ.  In MSVC's wide functions %s and %c take WIDE
 *     arguments and %S/%C narrow ones; in ISO C (glibc) %s is always narrow,
 *     so `wprintf(L"%s", argv[0])` prints only the first character.  MSVC
 *     also has the size prefixes %I64, %I32 and %I.
 *  2. Orientation.  The first wprintf makes stdout wide-oriented (C11
 *     7.21.2), after which every printf on stdout fails and prints nothing.
 *
 * So these names are macros for nd_compat_* functions that rewrite the
 * format (%s -> %ls, %S -> %s, %c -> %lc, %C -> %c, %I64 -> %ll, %I32 ->
 * nothing, %I -> %z; flags, width, precision and `*` are kept), format into
 * a wide buffer with vswprintf, convert the result to the locale's multibyte
 * encoding and write the bytes, keeping the stream byte-oriented so printf
 * keeps working.  Characters the locale cannot encode print as '?'.  These
 * are Win32 C runtime names, never ND method names, so macros are safe.
 */
#ifndef NDW_WPRINTF_H
#define NDW_WPRINTF_H

#include "ndw_types.h"
#include "ndw_printf.h" /* the narrow functions' %I64, %I32, %I and %w */
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>
#ifdef __cplusplus
#include <cwchar> /* its `using ::wprintf` must see the real function */
#endif

NDW_QUIET_BEGIN

/* Largest formatted result, in wide characters, before giving up. */
#define NDW_WPRINTF_MAX_CHARS (1u << 22)

/*
 * Rewrites one MSVC wide format into an ISO C one.  `out` must hold
 * 2 * wcslen(in) + 1 characters: the only growth is one 'l' per %s or %c.
 */
static inline void ndw_wformat_translate(const wchar_t *in, wchar_t *out)
{
    while (*in != L'\0') {
        int size; /* 0 none, 1 'h', 2 'l' or 'w', 3 anything else */
        wchar_t c;
        if (*in != L'%') {
            *out++ = *in++;
            continue;
        }
        *out++ = *in++;
        if (*in == L'%') {
            *out++ = *in++;
            continue;
        }
        while (*in == L'-' || *in == L'+' || *in == L' ' || *in == L'#' ||
               *in == L'0' || *in == L'\'')
            *out++ = *in++;
        if (*in == L'*')
            *out++ = *in++;
        else
            while (*in >= L'0' && *in <= L'9')
                *out++ = *in++;
        if (*in == L'.') {
            *out++ = *in++;
            if (*in == L'*')
                *out++ = *in++;
            else
                while (*in >= L'0' && *in <= L'9')
                    *out++ = *in++;
        }
        size = 0;
        if (in[0] == L'I' && in[1] == L'6' && in[2] == L'4') {
            *out++ = L'l';
            *out++ = L'l';
            in += 3;
            size = 3;
        } else if (in[0] == L'I' && in[1] == L'3' && in[2] == L'2') {
            in += 3;
            size = 3;
        } else if (in[0] == L'I') {
            *out++ = L'z';
            in += 1;
            size = 3;
        } else if (in[0] == L'h' && in[1] == L'h') {
            *out++ = L'h';
            *out++ = L'h';
            in += 2;
            size = 3;
        } else if (in[0] == L'l' && in[1] == L'l') {
            *out++ = L'l';
            *out++ = L'l';
            in += 2;
            size = 3;
        } else if (in[0] == L'h') {
            in += 1;
            size = 1;
        } else if (in[0] == L'l' || in[0] == L'w') {
            in += 1;
            size = 2;
        } else if (in[0] == L'L' || in[0] == L'z' || in[0] == L'j' || in[0] == L't') {
            *out++ = *in++;
            size = 3;
        }
        c = *in;
        if (c == L'\0')
            break;
        in++;
        switch (c) {
        case L's':
        case L'c': /* wide unless 'h' */
            if (size != 1)
                *out++ = L'l';
            *out++ = c;
            break;
        case L'S':
        case L'C': /* narrow unless 'l'/'w' */
            if (size == 2)
                *out++ = L'l';
            *out++ = (c == L'S') ? L's' : L'c';
            break;
        default: /* integers, floats, pointers: keep h and l */
            if (size == 1)
                *out++ = L'h';
            else if (size == 2)
                *out++ = L'l';
            *out++ = c;
            break;
        }
    }
    *out = L'\0';
}

/*
 * Formats an MSVC wide format into a newly allocated (or the given local)
 * wide buffer.  Returns the length, or -1; *result is the buffer to use,
 * which the caller frees if it is not `local`.
 */
static inline int ndw_vaswprintf(wchar_t *local, size_t local_cap, wchar_t **result,
                                 const wchar_t *format, va_list args)
{
    wchar_t fmt_local[256];
    size_t flen = wcslen(format);
    wchar_t *fmt = fmt_local;
    wchar_t *out = local;
    size_t cap = local_cap;
    int n = -1;
    *result = local;
    if (2 * flen + 1 > sizeof(fmt_local) / sizeof(fmt_local[0])) {
        fmt = (wchar_t *)malloc((2 * flen + 1) * sizeof(wchar_t));
        if (fmt == NULL)
            return -1;
    }
    ndw_wformat_translate(format, fmt);
    for (;;) {
        va_list ap;
        va_copy(ap, args);
        n = vswprintf(out, cap, fmt, ap);
        va_end(ap);
        /* -1 means "too small" or an encoding error; grow up to a limit. */
        if (n >= 0 || cap >= NDW_WPRINTF_MAX_CHARS)
            break;
        cap *= 4;
        if (out != local)
            free(out);
        out = (wchar_t *)malloc(cap * sizeof(wchar_t));
        if (out == NULL) {
            n = -1;
            break;
        }
    }
    if (fmt != fmt_local)
        free(fmt);
    if (n < 0) {
        if (out != local)
            free(out);
        out = local;
    }
    *result = out;
    return n;
}

/* Writes n wide characters to a byte-oriented stream in the locale's encoding. */
static inline int ndw_write_wide(FILE *stream, const wchar_t *text, int n)
{
    char chunk[512];
    size_t used = 0;
    mbstate_t state;
    int i, ok = 1;
    memset(&state, 0, sizeof(state));
    for (i = 0; i < n; i++) {
        size_t k;
        if (used + MB_LEN_MAX > sizeof(chunk)) {
            if (fwrite(chunk, 1, used, stream) != used)
                ok = 0;
            used = 0;
        }
        k = wcrtomb(chunk + used, text[i], &state);
        if (k == (size_t)-1) {
            chunk[used] = '?';
            k = 1;
            memset(&state, 0, sizeof(state));
        }
        used += k;
    }
    if (used > 0 && fwrite(chunk, 1, used, stream) != used)
        ok = 0;
    return ok ? n : -1;
}

static inline int nd_compat_vfwprintf(FILE *stream, const wchar_t *format, va_list args)
{
    wchar_t local[512];
    wchar_t *text;
    int n = ndw_vaswprintf(local, sizeof(local) / sizeof(local[0]), &text, format, args);
    if (n >= 0)
        n = ndw_write_wide(stream, text, n);
    if (text != local)
        free(text);
    return n;
}

static inline int nd_compat_vwprintf(const wchar_t *format, va_list args)
{
    return nd_compat_vfwprintf(stdout, format, args);
}

static inline int nd_compat_fwprintf(FILE *stream, const wchar_t *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vfwprintf(stream, format, ap);
    va_end(ap);
    return n;
}

static inline int nd_compat_wprintf(const wchar_t *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vfwprintf(stdout, format, ap);
    va_end(ap);
    return n;
}

/* ISO-style swprintf(buffer, count, format, ...) with MSVC conversions. */
static inline int nd_compat_vswprintf(wchar_t *buffer, size_t count,
                                      const wchar_t *format, va_list args)
{
    wchar_t *text;
    int n, fits;
    if (buffer == NULL || count == 0)
        return -1;
    n = ndw_vaswprintf(buffer, count, &text, format, args);
    fits = (text == buffer);
    if (!fits) /* did not fit: MSVC returns -1 and an empty buffer */
        free(text);
    if (!fits || n < 0) {
        buffer[0] = L'\0';
        return -1;
    }
    return n;
}

static inline int nd_compat_swprintf(wchar_t *buffer, size_t count,
                                     const wchar_t *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vswprintf(buffer, count, format, ap);
    va_end(ap);
    return n;
}

#ifdef __cplusplus
/* The C++ overload of swprintf_s that takes the size from an array. */
template <size_t N>
inline int nd_compat_swprintf(wchar_t (&buffer)[N], const wchar_t *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vswprintf(buffer, N, format, ap);
    va_end(ap);
    return n;
}
#endif

/*
 * With _FORTIFY_SOURCE and a compiler without __builtin_va_arg_pack
 * (clang), glibc itself defines some of these names as macros: replace them.
 */
#undef wprintf
#undef fwprintf
#undef vwprintf
#undef vfwprintf
#undef swprintf
#define wprintf nd_compat_wprintf
#define fwprintf nd_compat_fwprintf
#define vwprintf nd_compat_vwprintf
#define vfwprintf nd_compat_vfwprintf
#define swprintf nd_compat_swprintf
#define wprintf_s nd_compat_wprintf
#define fwprintf_s nd_compat_fwprintf
#define swprintf_s nd_compat_swprintf
#define _snwprintf nd_compat_swprintf

#ifdef __cplusplus
/* So that std::wprintf(...) still names a function after the macros. */
namespace std {
using ::nd_compat_fwprintf;
using ::nd_compat_swprintf;
using ::nd_compat_vfwprintf;
using ::nd_compat_vwprintf;
using ::nd_compat_wprintf;
} // namespace std
#endif

NDW_QUIET_END

#endif /* NDW_WPRINTF_H */
