/*
 * ndw_posix.h - the POSIX/GNU C library functions that the header-inline
 * parts of the Win32 compatibility layer call.
 *
 * Internal header of netdirect's Win32 compatibility layer.  In strict ISO
 * C modes (gcc -std=c99/-std=c11 without _GNU_SOURCE or _POSIX_C_SOURCE)
 * glibc hides nanosleep, clock_gettime, posix_memalign, wcscasecmp, strnlen and
 * fcloseall, and a program may already have included those headers before
 * ours, so defining a feature macro here would come too late.  Each
 * function is therefore re-declared, with its exact POSIX prototype, only
 * when glibc did not declare it.  g++ always defines _GNU_SOURCE, so C++ is
 * never affected.
 */
#ifndef NDW_POSIX_H
#define NDW_POSIX_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <sched.h> /* struct timespec also in C99 mode */
#include <unistd.h>
#include <wchar.h>

#if defined(__GLIBC__) && !defined(__cplusplus)
#ifndef __USE_POSIX199309
extern int nanosleep(const struct timespec *req, struct timespec *rem);
extern int clock_gettime(__clockid_t clk, struct timespec *tp);
#endif
#ifndef __USE_XOPEN2K
extern int posix_memalign(void **memptr, size_t alignment, size_t size);
#endif
#ifndef __USE_XOPEN2K8
extern int wcscasecmp(const wchar_t *s1, const wchar_t *s2);
extern int wcsncasecmp(const wchar_t *s1, const wchar_t *s2, size_t n);
extern size_t wcsnlen(const wchar_t *s, size_t maxlen);
extern size_t strnlen(const char *s, size_t maxlen);
#endif
#ifndef __USE_GNU
extern int fcloseall(void);
#endif
#endif

/* Linux clock ids (fixed by the kernel ABI), in case <time.h> hid them. */
#ifndef CLOCK_MONOTONIC
#define CLOCK_MONOTONIC 1
#endif

#endif /* NDW_POSIX_H */
