/*
 * objbase.h - COM base definitions for Linux: GUID/IID, DEFINE_GUID,
 * IsEqualGUID, the interface macros, IUnknown and IClassFactory.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's COM documentation.  No COM runtime (CoInitialize,
 * CoCreateInstance) is provided: ND objects come from NdOpenAdapter.
 */
#ifndef _OBJBASE_H_
#define _OBJBASE_H_

#include "ndw_com.h"
#include "ndw_windef.h"
#include "winerror.h"

#endif /* _OBJBASE_H_ */
