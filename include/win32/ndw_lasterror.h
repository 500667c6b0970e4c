/*
 * ndw_lasterror.h - the library's thread-local last error, which
 * GetLastError/SetLastError (ndw_api.h) and WSAGetLastError/WSASetLastError
 * (ndw_winsock.h) both use.  Internal header of netdirect's Win32
 * compatibility layer; declared once here so that no declaration repeats.
 *
 * The last error is a DWORD kept per thread by libnetdirect, not errno:
 * programs compare it with Win32 codes (WAIT_TIMEOUT, ERROR_IO_PENDING...).
 */
#ifndef NDW_LASTERROR_H
#define NDW_LASTERROR_H

#include "ndw_types.h"

EXTERN_C_START
DWORD ndw_GetLastError(void);
void ndw_SetLastError(DWORD dwErrCode);
EXTERN_C_END

#endif /* NDW_LASTERROR_H */
