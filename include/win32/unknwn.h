/*
 * unknwn.h - IUnknown and IClassFactory, with the COM interface macros
 * (DECLARE_INTERFACE_, STDMETHOD, THIS_, PURE), for C and C++ on Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's IUnknown and IClassFactory documentation.  The definitions
 * live in ndw_com.h, which <ndspi.h> shares.
 */
#ifndef __unknwn_h__
#define __unknwn_h__

#include "ndw_com.h"
#include "ndw_windef.h"

#endif /* __unknwn_h__ */
