/*
 * basetsd.h - the sized and pointer-sized integer types (INT32, UINT64,
 * ULONG_PTR, SIZE_T, KAFFINITY, ...) with 64-bit Windows widths, for Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's "Windows Data Types" documentation.
 */
#include "ndw_types.h"
