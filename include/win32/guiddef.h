/*
 * guiddef.h - GUID, IID, REFIID, DEFINE_GUID and IsEqualGUID for Linux.
 *
 * Part of netdirect's Win32 compatibility layer (include/win32), following
 * Microsoft's guiddef.h documentation.  As with Microsoft's header, every
 * inclusion re-evaluates DEFINE_GUID: declarations normally, definitions
 * when INITGUID is defined (see <initguid.h>).
 */
#include "ndw_com.h"
