/*
 * ndw_printf.h - printf, fprintf, vprintf and vfprintf with the Microsoft C
 * runtime's size prefixes, for Linux.
 *
 * Internal header of netdirect's Win32 compatibility layer, included by
 * ndw_wprintf.h (so by <windows.h>, <tchar.h> and the other Windows-named
 * headers).  The narrow functions agree with glibc on every conversion the
 * ND examples use except MSVC's size prefixes: %I64 (64-bit), %I32 (32-bit),
 * %I (pointer-sized) and %w (wide %s/%c).  glibc reads 'I' as its
 * "locale digits" flag, so Microsoft's own examples' "%I64d" prints a
 * 64-column field and "%Id" reads a SIZE_T as an int.
 *
 * So these names are macros for nd_compat_* functions that rewrite just
 * those prefixes (%I64 -> %ll, %I32 -> nothing, %I -> %z, %w -> %l; flags,
 * width, precision and `*` are kept) and call vfprintf.  The functions
 * carry the printf format attribute, so -Wformat checks calls as before.
 * These are C runtime names, never ND method names, so macros are safe.
 * sprintf/snprintf are left alone.
 */
#ifndef NDW_PRINTF_H
#define NDW_PRINTF_H

#include "ndw_types.h"
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef __cplusplus
#include <cstdio> /* its #undef printf and `using ::printf` must come first */
#endif

NDW_QUIET_BEGIN

/*
 * Rewrites MSVC's size prefixes in a narrow format.  The result is never
 * longer than the input, so `out` must hold strlen(in) + 1 characters.
 */
static inline void ndw_format_translate(const char *in, char *out)
{
    while (*in != '\0') {
        if (*in != '%') {
            *out++ = *in++;
            continue;
        }
        *out++ = *in++;
        if (*in == '%') {
            *out++ = *in++;
            continue;
        }
        while (*in == '-' || *in == '+' || *in == ' ' || *in == '#' || *in == '0')
            *out++ = *in++;
        if (*in == '*')
            *out++ = *in++;
        else
            while (*in >= '0' && *in <= '9')
                *out++ = *in++;
        if (*in == '.') {
            *out++ = *in++;
            if (*in == '*')
                *out++ = *in++;
            else
                while (*in >= '0' && *in <= '9')
                    *out++ = *in++;
        }
        if (in[0] == 'I' && in[1] == '6' && in[2] == '4') {
            *out++ = 'l';
            *out++ = 'l';
            in += 3;
        } else if (in[0] == 'I' && in[1] == '3' && in[2] == '2') {
            in += 3;
        } else if (in[0] == 'I') {
            *out++ = 'z';
            in += 1;
        } else if (in[0] == 'w') {
            *out++ = 'l';
            in += 1;
        }
        /* the conversion character itself is copied by the next round */
    }
    *out = '\0';
}

static inline int nd_compat_vfprintf(FILE *stream, const char *format, va_list args)
    __attribute__((__format__(__printf__, 2, 0)));
static inline int nd_compat_vfprintf(FILE *stream, const char *format, va_list args)
{
    char fmt_local[256];
    size_t flen = strlen(format);
    char *fmt = fmt_local;
    int n;
    if (flen + 1 > sizeof(fmt_local)) {
        fmt = (char *)malloc(flen + 1);
        if (fmt == NULL)
            return -1;
    }
    ndw_format_translate(format, fmt);
#if defined(__GNUC__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wformat-nonliteral"
#endif
    n = vfprintf(stream, fmt, args);
#if defined(__GNUC__)
#pragma GCC diagnostic pop
#endif
    if (fmt != fmt_local)
        free(fmt);
    return n;
}

static inline int nd_compat_vprintf(const char *format, va_list args)
    __attribute__((__format__(__printf__, 1, 0)));
static inline int nd_compat_vprintf(const char *format, va_list args)
{
    return nd_compat_vfprintf(stdout, format, args);
}

static inline int nd_compat_fprintf(FILE *stream, const char *format, ...)
    __attribute__((__format__(__printf__, 2, 3)));
static inline int nd_compat_fprintf(FILE *stream, const char *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vfprintf(stream, format, ap);
    va_end(ap);
    return n;
}

static inline int nd_compat_printf(const char *format, ...)
    __attribute__((__format__(__printf__, 1, 2)));
static inline int nd_compat_printf(const char *format, ...)
{
    va_list ap;
    int n;
    va_start(ap, format);
    n = nd_compat_vfprintf(stdout, format, ap);
    va_end(ap);
    return n;
}

/*
 * With _FORTIFY_SOURCE and a compiler without __builtin_va_arg_pack
 * (clang), glibc itself defines some of these names as macros: replace them.
 */
#undef printf
#undef fprintf
#undef vprintf
#undef vfprintf
#define printf nd_compat_printf
#define fprintf nd_compat_fprintf
#define vprintf nd_compat_vprintf
#define vfprintf nd_compat_vfprintf

#ifdef __cplusplus
/* So that std::printf(...) still names a function after the macros. */
namespace std {
using ::nd_compat_fprintf;
using ::nd_compat_printf;
using ::nd_compat_vfprintf;
using ::nd_compat_vprintf;
} // namespace std
#endif

NDW_QUIET_END

#endif /* NDW_PRINTF_H */
