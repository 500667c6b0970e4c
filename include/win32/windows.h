/*
 * windows.h - the subset of the Windows API that NetworkDirect programs
 * use, for Linux.
 *
 * Part of netdirect's Win32 compatibility layer: put `-I include/win32`
 * (with `-I include`) on the command line and Windows ND programs compile
 * unchanged.  It provides the Windows data types with their 64-bit Windows
 * widths, kernel32-style handles, events, I/O completion ports, threads and
 * Interlocked functions, the C runtime extensions ND examples use, and a
 * wprintf with Microsoft semantics.  See docs/PORTING.md for what differs
 * from Windows, and Microsoft's Win32 API documentation for each function.
 *
 * WIN32_NO_STATUS is honoured: with it, the STATUS_* values that winnt.h
 * would define are left to <ntstatus.h>.  NOMINMAX suppresses min/max.
 * WIN32_LEAN_AND_MEAN is accepted and changes nothing.
 */
#ifndef _WINDOWS_
#define _WINDOWS_

#include "ndw_types.h"
#include "ndw_windef.h"
#include "ndw_tchar.h"
#include "ndw_com.h"
#include "winerror.h"
#include "ndw_api.h"
#include "ndw_crt.h"
#include "ndw_wprintf.h"
#include "ndw_winsock.h"
#include "sal.h"

#endif /* _WINDOWS_ */
