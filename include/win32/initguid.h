/*
 * initguid.h - makes DEFINE_GUID define GUIDs instead of declaring them.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's "How to use GUIDs" convention: include this header before
 * headers with DEFINE_GUID (such as <ndspi.h>) in ONE source file to give
 * the program its own copies of those GUIDs.  Not needed with libnetdirect,
 * which exports every ND IID; the copies made here are weak, so they do not
 * clash with the library's or with each other.
 */
#ifndef INITGUID
#define INITGUID
#endif
#include "ndw_com.h"
